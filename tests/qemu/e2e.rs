//! End-to-end tests: the real `cargo-sample` binary builds the scenario firmware with cargo,
//! runs it in real QEMU (`qemu-system-arm`, installed by `tests/setup.sh`) and reports.
//!
//! Shares are checked against what the programs are built to do, with binomial bounds.

use std::path::Path;
use std::process::Command;

use crate::support::*;
use serde_json::Value;

#[test]
fn hot_loops_shares_match_the_loop_counts() {
    let r = profile("hot-loops", &["--samples", "10000"]);
    assert_eq!(r["samples"], 10000);
    assert_eq!(r["unit"], "instructions");
    let (a, b, c) = (
        share(&r, "functions", "hot_a"),
        share(&r, "functions", "hot_b"),
        share(&r, "functions", "hot_c"),
    );
    // The bar: within 1 point of 70 / 20 / 10 at 10 000 samples.
    assert!((a - 70.0).abs() < 1.0, "hot_a {a}");
    assert!((b - 20.0).abs() < 1.0, "hot_b {b}");
    assert!((c - 10.0).abs() < 1.0, "hot_c {c}");
    // The three loops are the same code: hot_a / (hot_a + hot_b) must be 7/9 within 3 sigma.
    let n_ab = (a + b) / 100.0 * 10_000.0;
    let ratio = a / (a + b);
    let s = ((7.0 / 9.0) * (2.0 / 9.0) / n_ab).sqrt();
    assert!(
        (ratio - 7.0 / 9.0).abs() < 3.0 * s,
        "hot_a:hot_b = {ratio}, sigma {s}"
    );
    // Every row carries a 95 % interval around its share.
    for row in r["functions"].as_array().unwrap() {
        let p = row["percent"].as_f64().unwrap();
        let ci = row["ci95"].as_array().unwrap();
        assert!(ci[0].as_f64().unwrap() <= p && p <= ci[1].as_f64().unwrap());
    }
    // Same ELF, same seed: the run repeats exactly (icount).
    let again = profile("hot-loops", &["--samples", "10000"]);
    assert_eq!(again["functions"], r["functions"]);
}

#[test]
fn period_and_count_change_without_a_rebuild_and_m_samples_scale() {
    let r = profile("hot-loops", &["--samples", "1000", "--period", "1280us"]);
    assert_eq!(r["samples"], 1000);
    // 1.28 ms of emulated time at 64 ns an instruction (the machine's -icount shift=6) is
    // 20 000 instructions; the mean is kept within half a timer tick (0.3 instructions).
    let period = r["period_units"].as_f64().unwrap();
    assert!((period - 20_000.0).abs() <= 0.32, "period {period}");
    assert!((r["period_ticks"].as_f64().unwrap() - 32_000.0).abs() <= 1.0);
    assert_hot_a_share(&r, 1000.0);
    // The same ticks at shift 0 are 40 instructions each.
    let at_shift_0 = |period: &str| {
        profile(
            "hot-loops",
            &[
                "--samples",
                "1000",
                "--period",
                period,
                "--icount-shift",
                "0",
            ],
        )
    };
    let r = at_shift_0("500ticks");
    let period = r["period_units"].as_f64().unwrap();
    assert!((period - 20_000.0).abs() <= 20.0, "period {period}");
    assert_hot_a_share(&r, 1000.0);
    // A bare number is in the report's unit, instructions, whatever the timer's clock.
    let r = at_shift_0("20000");
    let period = r["period_units"].as_f64().unwrap();
    assert!((period - 20_000.0).abs() <= 20.0, "period {period}");
    assert!((r["period_ticks"].as_f64().unwrap() - 500.0).abs() <= 1.0);
}

#[test]
fn every_seed_is_a_run_of_its_own() {
    // Seeds 0 and 1 once gave the same run (a zero state was moved up to one).
    let counts = |seed: &str| {
        let r = profile("hot-loops", &["--samples", "2000", "--seed", seed]);
        rows(&r, "functions")
    };
    let (zero, one) = (counts("0"), counts("1"));
    assert_ne!(zero, one, "--seed 0 and --seed 1 sampled the same");
    assert_eq!(one, counts("1"), "a seed repeats exactly");
}

#[test]
fn constant_period_in_step_with_a_ticked_loop_lies_and_jitter_fixes_it() {
    // The loop's tick is 16 000 timer ticks; sampling every 16 000 ticks sees one phase only.
    let locked = profile(
        "ticked-loop",
        &["--samples", "2000", "--period", "16000ticks", "--no-jitter"],
    );
    let top = locked["functions"][0]["percent"].as_f64().unwrap();
    assert!(
        top > 99.0,
        "constant period should pile up on one function, got {top}"
    );
    let warnings = locked["warnings"].to_string();
    assert!(warnings.contains("in step with a loop"), "{warnings}");

    let free = profile(
        "ticked-loop",
        &["--samples", "4000", "--period", "16000ticks"],
    );
    let wait = share(&free, "functions", "wait_tick");
    let control = share(&free, "functions", "control");
    // control spins 1000 of the 10 000 instructions' worth of a tick at ~3 instructions a spin.
    assert!(control > 20.0 && control < 40.0, "control {control}");
    assert!(wait > 45.0, "wait_tick {wait}");
    assert!(top - wait.max(control) > 30.0);
}

#[test]
fn masked_interrupts_pile_samples_after_cpsie() {
    let r = profile("irq-masked", &["--samples", "5000"]);
    let on = share(&r, "functions", "irq_on");
    let locked = share(&r, "functions", "locked");
    // locked(300) is about 30 % of the time, but the sampler cannot enter it.
    assert!(on > 25.0 && on < 35.0, "irq_on {on}");
    assert!(locked < 1.0, "locked {locked}");
}

#[test]
fn a_handler_of_equal_priority_is_invisible_and_a_more_urgent_sampler_sees_it() {
    let equal = profile("foreign-isr", &["--samples", "3000", "--priority", "0x40"]);
    assert!(share(&equal, "functions", "isr_work") < 0.5);
    let urgent = profile("foreign-isr", &["--samples", "3000"]);
    let isr = share(&urgent, "functions", "isr_work");
    assert!(isr > 24.0 && isr < 36.0, "isr_work {isr}");
}

#[test]
fn firmware_that_exits_early_still_delivers_its_samples() {
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "early-exit",
            "--format",
            "json",
            "--samples",
            "10000",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = r["samples"].as_u64().unwrap();
    assert!(n > 50 && n < 10_000, "{n} samples");
    assert_eq!(r["stop"], "the firmware ended the run");
}

#[test]
fn a_run_cut_short_by_the_timeout_is_recovered_from_memory() {
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--format",
            "json",
            "--samples",
            "0",
            "--timeout",
            "3",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("did not finish within 3 s"), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["source"], "snapshot");
    let n = r["samples"].as_u64().unwrap();
    // More samples than the ring holds: the chunks streamed before the cut and the ring's newer
    // samples join without a gap or a loss.
    assert!(n > 3 * 10_240, "{n}");
    assert_eq!(r["taken"].as_u64().unwrap(), n);
    assert_eq!(r["overwritten"].as_u64().unwrap(), 0);
    let dir = run_dir_of(&out.stderr);
    for raw in ["streamed.dump", "state.bin", "ring.bin"] {
        assert!(dir.join(raw).is_file(), "{raw} not kept");
    }
    let a = share(&r, "functions", "hot_a");
    assert!((a - 69.5).abs() < 2.0, "hot_a {a}");
}

#[test]
fn saved_runs_re_render_and_damage_is_refused() {
    let (first, dir) = profile_in("hot-loops", &["--samples", "500"]);

    let report = |run: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
            .args([
                "sample",
                "report",
                run.to_str().unwrap(),
                "--format",
                "json",
            ])
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let again = report(&dir);
    assert!(again.status.success());
    let second: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(first["functions"], second["functions"]);

    // A bit flipped in a copy of the run, in its only record of samples: refused, and the
    // message says why (a dump of several records keeps the others: `faults.rs`).
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("run");
    std::fs::create_dir(&copy).unwrap();
    for f in ["run.json", "firmware.elf", "sampler.dump"] {
        std::fs::copy(dir.join(f), copy.join(f)).unwrap();
    }
    // A run directory needs no cargo workspace around it.
    let outside = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(["sample", "report", "run", "--format", "json"])
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        outside.status.success(),
        "{}",
        String::from_utf8_lossy(&outside.stderr)
    );
    let third: Value = serde_json::from_slice(&outside.stdout).unwrap();
    assert_eq!(first["functions"], third["functions"]);
    let mut dump = std::fs::read(copy.join("sampler.dump")).unwrap();
    dump[200] ^= 0x04;
    std::fs::write(copy.join("sampler.dump"), &dump).unwrap();
    let bad = report(&copy);
    assert!(!bad.status.success());
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        said.contains("damaged in bytes") && said.contains("no other sample was recorded"),
        "{said}"
    );

    // The same dump against another ELF: refused by the fingerprint.
    dump[200] ^= 0x04;
    std::fs::write(copy.join("sampler.dump"), &dump).unwrap();
    let other = target_dir_of(&scenarios())
        .join("cargo-sample/build/thumbv7m-none-eabi/release/irq-masked");
    if !other.is_file() {
        let o = cargo_sample(
            &scenarios(),
            &["--release", "--bin", "irq-masked", "--samples", "10"],
        );
        assert!(o.status.success());
    }
    std::fs::copy(&other, copy.join("firmware.elf")).unwrap();
    let wrong = report(&copy);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not made by this ELF"));

    // Truncated: the samples before the cut are reported, with a warning.
    std::fs::copy(dir.join("firmware.elf"), copy.join("firmware.elf")).unwrap();
    std::fs::write(copy.join("sampler.dump"), &dump[..1000]).unwrap();
    let cut = report(&copy);
    assert!(
        cut.status.success(),
        "{}",
        String::from_utf8_lossy(&cut.stderr)
    );
    assert!(String::from_utf8_lossy(&cut.stderr).contains("cut short"));
    let partial: Value = serde_json::from_slice(&cut.stdout).unwrap();
    let n = partial["samples"].as_u64().unwrap();
    assert!(n > 100 && n < 500, "{n}");
}

#[test]
fn a_crate_without_the_feature_gets_the_lines_to_add() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("app");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
    let out = cargo_sample(&dir, &["--target", "thumbv7m-none-eabi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sample = [\"dep:sampler-rt\"]"), "{err}");
    assert!(err.contains("sampler_rt::start();"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn init_sets_up_a_crate_that_then_profiles() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fresh");
    let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates/mps2-an385");
    copy_tree(&templates, &dir);
    let rt = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sampler-rt")
        .canonicalize()
        .unwrap();
    let init = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(["sample", "init", "--sampler-rt-path", rt.to_str().unwrap()])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let diff = String::from_utf8_lossy(&init.stdout);
    assert!(diff.contains("+    sampler_rt::start();"), "{diff}");
    let r = {
        let out = cargo_sample(
            &dir,
            &["--release", "--format", "json", "--samples", "2000"],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let busy = share(&r, "functions", "busy");
    assert!(busy > 90.0, "busy {busy}");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn cortex_m0_entry_profiles_the_microbit_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/microbit-m0");
    let out = cargo_sample(
        &dir,
        &["--release", "--format", "json", "--samples", "2000"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["machine"], "microbit (QEMU)");
    let heavy = share(&r, "functions", "m0_heavy");
    let light = share(&r, "functions", "m0_light");
    // 750 : 250 iterations of the same loop.
    let ratio = heavy / (heavy + light);
    let s = (0.75f64 * 0.25 / ((heavy + light) / 100.0 * 2000.0)).sqrt();
    assert!(
        (ratio - 0.75).abs() < 3.0 * s + 0.005,
        "ratio {ratio} sigma {s}"
    );
}

/// A period near the sampler's own cost starves the firmware: the run says so before it starts,
/// and a usual period says nothing.
#[test]
fn a_period_the_handler_would_fill_is_warned_about() {
    let run = |period: &str| {
        let out = cargo_sample(
            &scenarios(),
            &[
                "--release",
                "--bin",
                "hot-loops",
                "--period",
                period,
                "--samples",
                "300",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let starved = run("20ticks");
    assert!(starved.contains("barely runs"), "{starved}");
    assert!(starved.contains("takes about 20 of its own"), "{starved}");
    let usual = run("16000ticks");
    assert!(!usual.contains("sampler-rt's handler takes"), "{usual}");
}

#[test]
fn a_cmsdk_timer_can_pace_the_sampler_instead_of_systick() {
    let r = profile("hot-loops", &["--samples", "3000", "--timer", "cmsdk"]);
    assert_eq!(r["timer"], "CMSDK timer");
    assert_hot_a_share(&r, 3000.0);
}

#[test]
fn a_missing_qemu_is_named_with_how_to_install_it() {
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--qemu",
            "/nonexistent/qemu-system-arm",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("QEMU was not found at /nonexistent/qemu-system-arm"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(["sample", "--release", "--bin", "hot-loops"])
        .current_dir(scenarios())
        .env("PATH", "/nonexistent")
        .env("CARGO", env!("CARGO"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("apt-get install qemu-system-arm"), "{err}");
}

#[test]
fn sampled_shares_agree_with_exact_instruction_counts_within_3_sigma() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "10000"]);
    let exact = exact_shares(&dir);
    for f in ["hot_a", "hot_b", "hot_c"] {
        let truth = exact[f];
        let sampled = share(&r, "functions", f);
        let s = sigma_points(truth, 10_000.0);
        assert!(
            (sampled - truth).abs() < 3.0 * s,
            "{f}: sampled {sampled:.3} %, exact {truth:.3} %, sigma {s:.3}"
        );
    }
}

#[test]
fn truth_puts_exact_shares_beside_sampled_ones_in_the_same_run() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "10000", "--truth"]);
    assert!(dir.join("exact.counts").is_file());
    // The tool's exact column equals the independent aggregation of the plugin's counts.
    let independent = exact_shares(&dir);
    for f in ["hot_a", "hot_b", "hot_c"] {
        let row = r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["name"] == f)
            .unwrap();
        let exact = row["exact_percent"].as_f64().unwrap();
        assert!(
            (exact - independent[f]).abs() < 1e-6,
            "{f}: {exact} vs {}",
            independent[f]
        );
        let err = row["error_points"].as_f64().unwrap();
        let sigma = row["error_sigma"].as_f64().unwrap();
        assert!((err - (row["percent"].as_f64().unwrap() - exact)).abs() < 1e-9);
        assert!(sigma.abs() < 3.0, "{f} is {sigma} sigma off");
    }
    let max = r["max_error_points"].as_f64().unwrap();
    let worst = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row["error_points"].as_f64())
        .fold(0.0f64, |m, e| m.max(e.abs()));
    assert_eq!(max, worst);
    assert!(r["exact_instructions"].as_u64().unwrap() > 90_000_000);
}

/// An RTIC application whose SysTick monotonic owns SysTick, sampled with no timer option: the
/// tool sees that the firmware owns SysTick, paces the sampler with a general-purpose timer
/// the firmware leaves free (built into sampler-rt), says so in the header, every function
/// lands within 3 sigma of the exact counts, and the application's own timing (its monotonic
/// delays, printed by the firmware) is what it is without the sampler.
#[test]
fn an_rtic_app_that_owns_systick_is_sampled_by_a_free_general_purpose_timer() {
    let (r, run) = profile_example("rtic-app", &["--release", "--bin", "mono", "--truth"]);
    assert_eq!(r["timer"], "GPTM0 (IRQ 19)");
    assert!(r["samples"].as_u64().unwrap() > 500, "{}", r["samples"]);
    assert_within_3_sigma(
        &r,
        &["rtic_app::crunch", "rtic_app::filter", "mono::app::idle"],
        "mono on GPTM0",
    );
    // The application's time base, unchanged: the same line as a run without the sampler.
    let sampled = std::fs::read_to_string(run.join("firmware-output.txt")).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/rtic-app");
    let out = cargo_sample(&dir, &["--release", "--bin", "mono", "--exact"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain =
        std::fs::read_to_string(run_dir_of(&out.stderr).join("firmware-output.txt")).unwrap();
    let line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("mono: "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no timing line in {s}"))
    };
    assert_eq!(line(&sampled), line(&plain));
}

/// A firmware that programs SysTick itself for a polled delay (no SysTick handler, like
/// `cortex_m::delay::Delay`): taking SysTick would have given 2 samples (its delay reloads
/// SysTick under the sampler). The tool sees the SysTick registers' address built in the
/// firmware's code, paces the sampler with a CMSDK timer the firmware leaves alone (TIMER0 is
/// the scenarios' own sampler handler, TIMER1 is free), and the shares hold.
#[test]
fn a_firmware_that_programs_systick_without_a_handler_gets_another_timer() {
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "systick-delay",
            "--truth",
            "--format",
            "json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["timer"], "TIMER1 (IRQ 9)");
    assert!(r["samples"].as_u64().unwrap() > 2000, "{}", r["samples"]);
    assert_within_3_sigma(
        &r,
        &["work_a", "work_b", "systick_delay"],
        "systick-delay on TIMER1",
    );
    // SysTick asked for all the same: said to break both sides.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "systick-delay",
            "--timer",
            "systick",
            "--samples",
            "100",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the firmware owns SysTick (`systick_delay` programs it), and `--timer systick`"
        ),
        "{err}"
    );
}

/// An STM32F405 (netduinoplus2) whose SysTick delay owns SysTick: TIM2 paces the sampler (its
/// 1 GHz clock in QEMU, the counter never written), within 3 sigma of the exact counts, and
/// the run takes as many samples as its length over the period says.
#[test]
fn an_stm32_general_purpose_timer_paces_the_sampler_on_netduinoplus2() {
    let (r, _) = profile_example("stm32f4-delay", &["--release", "--truth"]);
    assert_eq!(r["timer"], "TIM2 (IRQ 28)");
    let samples = r["samples"].as_f64().unwrap();
    let expected = r["exact_instructions"].as_f64().unwrap() / 10_000.0;
    assert!(
        (samples - expected).abs() < 0.05 * expected,
        "{samples} samples, {expected} periods"
    );
    assert_within_3_sigma(&r, &["work_a", "work_b", "delay"], "stm32f4-delay on TIM2");
}

/// A general-purpose timer cargo-sample does not name, given by address (TIM3,
/// `stm32:0x40000400:29`, its handler defined by the firmware with `timer_interrupt!`): it runs
/// on the clock QEMU gives the STM32's timers (1 GHz), not on the 168 MHz core clock, so the run
/// takes as many samples as its length over the period says, and nothing reports a clock
/// mismatch. (On the core clock the period was 6 times too long and so was the run's length.)
#[test]
fn an_stm32_timer_given_by_address_runs_on_qemus_timer_clock() {
    let (r, _) = profile_example(
        "stm32f4-delay",
        &[
            "--release",
            "--truth",
            "--features",
            "tim3",
            "--timer",
            "stm32:0x40000400:29",
        ],
    );
    assert_eq!(r["timer_hz"], 1_000_000_000, "{}", r["timer"]);
    let samples = r["samples"].as_f64().unwrap();
    let expected = r["exact_instructions"].as_f64().unwrap() / 10_000.0;
    assert!(
        (samples - expected).abs() < 0.05 * expected,
        "{samples} samples, {expected} periods"
    );
    assert!(
        !kinds(&r).contains(&"clock-mismatch".to_owned()),
        "{:#?}",
        r["diagnostics"]
    );
    assert_within_3_sigma(&r, &["work_a", "work_b", "delay"], "stm32f4-delay on TIM3");
}

/// Any timer, driven by the firmware: `sampler_rt::start_with_timer` with start, stop, the
/// reload and flag registers of CMSDK timer 1 and `timer_interrupt!`. The header names the
/// firmware's timer with its clock, the run's length follows from the period, the shares hold.
#[test]
fn a_timer_the_firmware_drives_paces_the_sampler() {
    let (r, _) = profile_in("firmware-timer", &["--samples", "5000", "--truth"]);
    assert_eq!(r["timer"], "the firmware's timer");
    assert_eq!(r["timer_hz"], 25_000_000);
    assert_eq!(r["samples"], 5000);
    let exact = r["exact_instructions"].as_f64().unwrap();
    let estimated = r["duration_units"].as_f64().unwrap();
    assert!(
        (estimated - exact).abs() < 0.02 * exact,
        "{estimated} estimated, {exact} counted"
    );
    assert_within_3_sigma(&r, &["hot_a", "hot_b", "hot_c"], "firmware timer");
}

/// A firmware that installs its own SysTick handler at run time, in a vector table moved to
/// RAM (the image's table still names the sampler): the sampler sees the table the core uses,
/// does not start, and the report says why and what to do; another timer then works.
#[test]
fn a_systick_taken_at_run_time_stops_the_sampler_with_the_reason() {
    let out = cargo_sample(
        &scenarios(),
        &["--release", "--bin", "vtor-systick", "--format", "json"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["samples"], 0);
    assert!(
        r["stop"]
            .as_str()
            .unwrap()
            .contains("SysTick belongs to the application"),
        "{}",
        r["stop"]
    );
    assert!(
        r["diagnostics"].to_string().contains("`--timer NAME`"),
        "{}",
        r["diagnostics"]
    );
    let (r, _) = profile_in("vtor-systick", &["--timer", "timer1", "--samples", "500"]);
    assert_eq!(r["samples"], 500);
}

/// The same application built without LTO: the link refuses two SysTick handlers; the tool
/// reads that, finds the free timer and builds again.
#[test]
fn without_lto_the_duplicate_systick_is_resolved_by_a_free_timer() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/rtic-app");
    let out = cargo_sample(
        &dir,
        &["--profile", "nolto", "--bin", "mono", "--format", "json"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["timer"], "GPTM0 (IRQ 19)");
    assert!(r["samples"].as_u64().unwrap() > 300);
    // The failed link is recovered from: none of its messages are printed.
    for said in ["duplicate symbol", "could not compile", "error"] {
        assert!(!err.contains(said), "`{said}` printed:\n{err}");
    }
}

/// SysTick owned and no free timer known on the machine: a clear message, nothing run. And
/// `--timer systick` asked for explicitly on such a firmware: refused with the owner named.
#[test]
fn a_firmware_that_owns_systick_with_no_free_timer_is_refused_before_running() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/rtic-app");
    let out = cargo_sample(
        &dir,
        &["--release", "--bin", "mono", "--machine", "netduinoplus2"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("the firmware owns SysTick"), "{err}");
    assert!(
        err.contains("netduinoplus2 has no other timer that cargo-sample knows"),
        "{err}"
    );
    assert!(err.contains("sampler_rt::timer_interrupt!"), "{err}");
    assert!(err.contains("stm32:BASE:IRQ"), "{err}");
    // The one machine whose runs do not repeat says so.
    assert!(
        err.contains("netduinoplus2 does not repeat a run exactly"),
        "{err}"
    );
    assert!(!err.contains("Running") && !err.contains("Saved"), "{err}");

    let out = cargo_sample(&dir, &["--release", "--bin", "mono", "--timer", "systick"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    // The sampler's entry is in the image or not, depending on what else references it; either
    // way SysTick's vector is the application's, and the refusal says so.
    assert!(
        err.contains("not in the image: the link dropped it")
            || err.contains("not at sampler-rt's handler"),
        "{err}"
    );
    assert!(
        err.contains("the application's handler")
            || err.contains("the application has a SysTick handler"),
        "{err}"
    );
    assert!(err.contains("leave `--timer` out"), "{err}");
    assert!(!err.contains("Running") && !err.contains("Saved"), "{err}");
}

/// The nRF51's TIMER paces the sampler on microbit (Cortex-M0), its handler standing in for
/// cortex-m-rt's default handler (the example has no device crate): within 3 sigma.
#[test]
fn the_nrf51_timer_paces_the_sampler_on_a_cortex_m0() {
    let (r, _) = profile_example(
        "microbit-m0",
        &[
            "--release",
            "--timer",
            "timer0",
            "--truth",
            "--samples",
            "4000",
        ],
    );
    assert_eq!(r["timer"], "TIMER0 (IRQ 8)");
    assert_within_3_sigma(&r, &["m0_heavy", "m0_light"], "microbit on TIMER0");
}

/// A free timer chosen for a crate because its firmware owned SysTick is remembered; once the
/// firmware no longer owns SysTick (the memory is stale, as after the firmware dropped its
/// monotonic) the tool samples on SysTick again, says so and forgets the choice.
#[test]
fn a_remembered_timer_is_forgotten_once_the_firmware_no_longer_owns_systick() {
    let copy = copy_crate("examples/scenarios");
    let manifest = copy.path().canonicalize().unwrap().join("Cargo.toml");
    let memory = copies_target_dir().join("cargo-sample/timers.json");
    let key = format!(
        "{} hot-loops/thumbv7m-none-eabi/release on mps2-an385",
        manifest.display()
    );
    let mut map: serde_json::Map<String, Value> = std::fs::read_to_string(&memory)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    map.insert(
        key.clone(),
        serde_json::json!({ "auto": true, "timer": "timer1", "vector": "TIMER1" }),
    );
    std::fs::create_dir_all(memory.parent().unwrap()).unwrap();
    std::fs::write(&memory, Value::Object(map).to_string()).unwrap();
    let args = [
        "--release",
        "--bin",
        "hot-loops",
        "-n",
        "300",
        "--format",
        "json",
    ];
    let out = cargo_sample_in_copy(copy.path(), &args, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no longer owns SysTick"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["timer"], "SysTick");
    let left: Value = serde_json::from_str(&std::fs::read_to_string(&memory).unwrap()).unwrap();
    assert!(left[&key].is_null(), "{left}");
}

/// A ring that leaves the stack almost no room on a 16 KiB part: said before the run, with the
/// numbers and a size that fits.
#[test]
fn a_ring_that_crowds_the_stack_is_named_with_a_size_that_fits() {
    let copy = copy_crate("examples/microbit-m0");
    let out = cargo_sample_in_copy(
        copy.path(),
        &["--release", "--samples", "200"],
        &[("SAMPLER_RT_RING_SLOTS", "3100")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bytes of RAM are left for the stack"), "{err}");
    assert!(err.contains("takes 12400 (3100 samples)"), "{err}");
    assert!(err.contains("SAMPLER_RT_RING_SLOTS = \"1024\""), "{err}");
    // A ring that does not fit at all: the linker's error, and what to do about it.
    let out = cargo_sample_in_copy(
        copy.path(),
        &["--release", "--samples", "200"],
        &[("SAMPLER_RT_RING_SLOTS", "3600")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("will not fit in region 'RAM'"), "{err}");
    assert!(
        err.contains("hint: sampler-rt's ring does not fit"),
        "{err}"
    );
    // The default build of the same crate leaves room and says nothing.
    let out = cargo_sample_in_copy(copy.path(), &["--release", "--samples", "200"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("left for the stack"), "{err}");
}

/// Help, the README and the guide name things by what they are, and state the defaults the
/// tool uses.
#[test]
fn help_and_readme_speak_of_the_tool_itself() {
    let mut texts = Vec::new();
    for sub in [
        &[][..],
        &["report"],
        &["init"],
        &["diff"],
        &["advise"],
        &["swo"],
        &["events"],
        &["stat"],
    ] {
        let mut args: Vec<&str> = sub.to_vec();
        args.push("--help");
        let out = cargo_sample(Path::new("."), &args);
        assert!(out.status.success(), "{args:?}");
        texts.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert!(
        texts[0].contains("10 000 instructions in QEMU"),
        "{}",
        texts[0]
    );
    texts.push(std::fs::read_to_string(repo().join("README.md")).unwrap());
    for page in std::fs::read_dir(repo().join("docs/guide")).unwrap() {
        texts.push(std::fs::read_to_string(page.unwrap().path()).unwrap());
    }
    for t in &texts {
        for word in ["the seed", "seed's", "lecture", "10 µs"] {
            assert!(!t.contains(word), "`{word}` in:\n{t}");
        }
    }
}

/// A 16 KiB part whose crate says nothing about the ring: cargo-sample sizes it to fit, says
/// so once, and remembers the size; the crate's own setting is taken as it is.
#[test]
fn the_ring_is_sized_to_the_part_without_a_variable_on_every_command() {
    let copy = copy_crate("examples/microbit-m0");
    let config = copy.path().join(".cargo/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let without_env = text[..text.find("[env]").unwrap()].to_owned();
    std::fs::write(&config, without_env).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--release", "--samples", "300", "--format", "json"];
        args.extend_from_slice(extra);
        let out = cargo_sample_in_copy(copy.path(), &args, &[]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        (err, run_dir_of(&out.stderr))
    };
    let (err, dir) = run(&[]);
    assert!(err.contains("Resizing sampler-rt's ring"), "{err}");
    // The links that overflowed RAM are recovered from: none of their messages are printed.
    for said in ["will not fit in region", "could not compile", "error"] {
        assert!(!err.contains(said), "`{said}` printed:\n{err}");
    }
    assert!(
        err.contains("sampler-rt's buffers were made smaller to fit the part's RAM"),
        "{err}"
    );
    let elf = std::fs::read(dir.join("firmware.elf")).unwrap();
    let (free, ring) = cargo_sample::image::wiring::stack_room_bytes(&elf).unwrap();
    assert!(
        free >= 4096 && ring >= 1024,
        "stack {free} bytes, ring {ring} bytes"
    );
    // The next run takes the remembered size at once.
    let (err, _) = run(&[]);
    assert!(
        !err.contains("made smaller") && !err.contains("Resizing"),
        "{err}"
    );
    // The crate's own choice wins.
    let manifest = copy.path().join("Cargo.toml");
    let m = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        m + "\n[package.metadata.sample]\nring-slots = 512\n",
    )
    .unwrap();
    let (_, dir) = run(&[]);
    let elf = std::fs::read(dir.join("firmware.elf")).unwrap();
    assert_eq!(
        cargo_sample::image::wiring::stack_room_bytes(&elf)
            .unwrap()
            .1,
        2048
    );
}
