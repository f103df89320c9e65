//! `--cycles` against cycles others measured on silicon: pqm4's ML-KEM-512 (m4fspeed) built
//! for QEMU's mps2-an386 from the commit whose published Cortex-M4 figures are recorded in
//! `cargo-sample/data/silicon/pqm4-cortex-m4.csv`, and jnk0le's AES routines for five cores
//! with the figures of `cortexm-aes.csv` (see `tests/fixtures/silicon/README.md`), run as
//! prebuilt ELFs (`--elf`). The full tables, with the other suites, are the benchmark's
//! (`cargo run --release -p cargo-sample-bench -- --silicon SUITE=DIR`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::*;

/// `(operation's function, silicon cycles)` for one implementation, read from the data file.
fn silicon(scheme: &str, implementation: &str) -> BTreeMap<String, u64> {
    let csv = std::fs::read_to_string(repo().join("cargo-sample/data/silicon/pqm4-cortex-m4.csv"))
        .unwrap();
    csv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[1] == scheme && f[2] == implementation)
        .map(|f| (f[4].to_owned(), f[5].parse().unwrap()))
        .collect()
}

/// `cargo sample --elf FIXTURE --machine MACHINE EXTRA --format json` in `dir`: its report.
fn run_elf(dir: &std::path::Path, fixture: &str, machine: &str, extra: &[&str]) -> Value {
    let elf = repo().join("tests/fixtures").join(fixture);
    let mut args = vec![
        "--elf",
        elf.to_str().unwrap(),
        "--machine",
        machine,
        "--format",
        "json",
        "--top",
        "0",
        "-o",
        "r.json",
    ];
    args.extend_from_slice(extra);
    let out = cargo_sample_env(dir, &args, &[("CARGO_TARGET_DIR", "target")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap()
}

/// The ML-KEM build with `extra`.
fn run(dir: &std::path::Path, extra: &[&str]) -> Value {
    run_elf(
        dir,
        "silicon/pqm4-ml-kem-512-m4fspeed.elf",
        "mps2-an386",
        extra,
    )
}

fn function<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

#[test]
fn ml_kem_cycles_within_five_percent_of_silicon() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["--cycles"]);
    let want = silicon("ml-kem-512", "m4fspeed");
    assert_eq!(want.len(), 3, "keypair, encaps, decaps");
    assert_eq!(r["timing"]["core"], "cortex-m4", "the machine's core");
    for (name, &cycles) in &want {
        let f = function(&r, name);
        let est = f["inclusive_cycles"].as_u64().unwrap();
        let instr = f["inclusive_instructions"].as_u64().unwrap();
        let err = est as f64 / cycles as f64 - 1.0;
        let ierr = instr as f64 / cycles as f64 - 1.0;
        eprintln!(
            "{name}: silicon {cycles}, instructions {instr} ({:+.1} %), estimated {est} ({:+.1} %)",
            100.0 * ierr,
            100.0 * err
        );
        assert!(
            err.abs() < 0.05,
            "{name}: {:+.1} % off silicon",
            100.0 * err
        );
        assert!(err.abs() < ierr.abs() / 3.0, "{name}: the model helps");
    }
    // What the table says holds together: cycles add up, CPI is their ratio, nothing
    // inclusive is below its self, nothing above the run.
    let total = r["cycles"].as_u64().unwrap();
    let rows = r["functions"].as_array().unwrap();
    let sum: u64 = rows.iter().map(|f| f["cycles"].as_u64().unwrap()).sum();
    assert_eq!(sum, total);
    for f in rows {
        let (c, i) = (
            f["cycles"].as_u64().unwrap(),
            f["instructions"].as_u64().unwrap(),
        );
        if i > 0 {
            let cpi = f["cpi"].as_f64().unwrap();
            assert!((cpi - c as f64 / i as f64).abs() < 1e-9);
            assert!(
                cpi >= 0.99,
                "{}: no Cortex-M4 instruction takes under a cycle",
                f["name"]
            );
        }
        let inc = f["inclusive_cycles"].as_u64().unwrap();
        assert!(
            inc >= c && inc <= total,
            "{}: {inc} inclusive, {c} self",
            f["name"]
        );
    }
    // The instructions beside the cycles are the plain exact run's.
    let plain = run(dir.path(), &[]);
    assert_eq!(r["instructions"], plain["instructions"]);
    for name in want.keys() {
        assert_eq!(
            function(&r, name)["inclusive_instructions"],
            function(&plain, name)["inclusive_instructions"]
        );
    }
}

#[test]
fn another_core_and_wait_states_move_the_figures_the_right_way() {
    let dir = tempfile::tempdir().unwrap();
    let m4 = run(dir.path(), &["--cycles"]);
    let slow = run(dir.path(), &["--cycles", "--wait-states", "2"]);
    let m3 = run(dir.path(), &["--cycles", "--core", "cortex-m3"]);
    let c = |r: &Value| r["cycles"].as_u64().unwrap();
    assert!(c(&slow) > c(&m4), "wait states add cycles");
    let refills = slow["timing"]["taken_branches"].as_u64().unwrap();
    assert!(
        c(&slow) - c(&m4) >= 2 * refills,
        "2 cycles on every taken branch at least"
    );
    // The M3 has no single-cycle long multiply: never faster than the M4 on the same code.
    assert!(c(&m3) >= c(&m4));
    assert_eq!(m3["timing"]["core"], "cortex-m3");
    // At a clock the cycles are times: the run's and each function's.
    let timed = run(dir.path(), &["--cycles", "--clock", "24000000"]);
    assert_eq!(timed["timing"]["clock_hz"], 24_000_000);
    let secs = timed["timing"]["seconds"].as_f64().unwrap();
    assert!((secs - c(&m4) as f64 / 24e6).abs() < 1e-12, "{secs}");
    for f in timed["functions"].as_array().unwrap() {
        let us = f["microseconds"].as_f64().unwrap();
        assert!(
            (us - f["cycles"].as_f64().unwrap() / 24.0).abs() < 1e-6,
            "{f}"
        );
    }
}

/// Every core's model against the cycles jnk0le measured for his own assembly on an STM32F0
/// (Cortex-M0), STM32F1 (M3), STM32F407 (M4), STM32H7 (M7) and RP2350 (M33): one ELF, timed
/// as each core. Within 5 % on the cores Arm documents or the pipeline tests pin down, 15 %
/// on the M7 (its approximation); and far closer than the instruction counts.
#[test]
fn aes_routines_within_silicon_on_five_cores() {
    let csv =
        std::fs::read_to_string(repo().join("cargo-sample/data/silicon/cortexm-aes.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut cores: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    cores.dedup();
    assert_eq!(cores.len(), 5, "{cores:?}");
    for core in cores {
        let r = run_elf(
            dir.path(),
            "silicon/cortexm-aes.elf",
            "mps2-an386",
            &["--core", core, "--cycles"],
        );
        assert_eq!(r["timing"]["core"], core);
        let bound = if core == "cortex-m7" { 0.15 } else { 0.05 };
        let (mut est_errors, mut instr_errors) = (Vec::new(), Vec::new());
        for row in rows.iter().filter(|row| row[0] == core) {
            // The routine's cycles for its one call: its wrapper's inclusive less its own.
            let w = function(&r, row[3]);
            let n = |k: &str| w[k].as_f64().unwrap();
            let est = n("inclusive_cycles") - n("cycles");
            let instr = n("inclusive_instructions") - n("instructions");
            let silicon: f64 = row[4].parse().unwrap();
            let (e, ie) = (est / silicon - 1.0, instr / silicon - 1.0);
            eprintln!(
                "{core} {} {}: silicon {silicon}, instructions {instr} ({:+.1} %), estimated {est} ({:+.1} %)",
                row[1],
                row[2],
                100.0 * ie,
                100.0 * e
            );
            assert!(
                e.abs() < bound,
                "{core} {} {}: {:+.1} % off silicon",
                row[1],
                row[2],
                100.0 * e
            );
            est_errors.push(e.abs());
            instr_errors.push(ie.abs());
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(
            mean(&est_errors) < mean(&instr_errors) / 3.0,
            "{core}: the model is much closer than the instruction count"
        );
    }
}

/// `--truth --cycles` on a sampled run: each function's samples weighted by its addresses'
/// cycles per instruction give its share of the cycles. Checked against a separate `--exact
/// --cycles` run of the same firmware (another run and another code path: its function
/// shares of the estimated cycles, over the functions the sampler could see), and the sampled
/// cycle shares against those within their statistical error.
#[test]
fn sampled_shares_in_cycles_agree_with_an_exact_run() {
    let n = 20_000u32;
    let (sampled, _) = profile_in(
        "hot-loops",
        &["--samples", &n.to_string(), "--truth", "--cycles"],
    );
    let (exact, _) = profile_in("hot-loops", &["--exact", "--cycles"]);
    assert!(
        sampled["timing"]["model"]
            .as_str()
            .unwrap()
            .contains("timing")
    );
    let rows = sampled["functions"].as_array().unwrap();
    let sum = |k: &str| rows.iter().map(|r| r[k].as_f64().unwrap()).sum::<f64>();
    assert!(
        (sum("cycles_percent") - 100.0).abs() < 0.01,
        "{}",
        sum("cycles_percent")
    );
    assert!((sum("exact_cycles_percent") - 100.0).abs() < 0.01);
    // The exact run's cycles per function, over the same functions.
    let exact_cycles: std::collections::HashMap<String, f64> = exact["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["cycles"].as_f64().unwrap(),
            )
        })
        .collect();
    let seen: f64 = rows
        .iter()
        .filter_map(|r| exact_cycles.get(r["name"].as_str().unwrap()))
        .sum();
    for r in rows {
        let name = r["name"].as_str().unwrap();
        let (c, x) = (
            r["cycles_percent"].as_f64().unwrap(),
            r["exact_cycles_percent"].as_f64().unwrap(),
        );
        if let Some(e) = exact_cycles.get(name) {
            let other = 100.0 * e / seen;
            assert!(
                (x - other).abs() < 0.05,
                "{name}: {x:.3} % here, {other:.3} % by --exact"
            );
        }
        if x > 2.0 {
            // Weights of about 1 to 3 cycles an instruction at most double the binomial error.
            let sigma = 2.0 * sigma_points(x, f64::from(n));
            assert!(
                (c - x).abs() < 4.0 * sigma,
                "{name}: {c:.2} % sampled, {x:.2} % exact"
            );
        }
    }
    // Inline frames differ most in cycles per instruction: there the weighting moves shares
    // by points, and the sampled cycle shares still follow the exact ones.
    let mut moved = 0;
    for r in sampled["inlined"].as_array().unwrap() {
        let (c, x) = (
            r["cycles_percent"].as_f64().unwrap(),
            r["exact_cycles_percent"].as_f64().unwrap(),
        );
        if x > 2.0 {
            let sigma = 2.0 * sigma_points(x, f64::from(n));
            assert!(
                (c - x).abs() < 4.0 * sigma,
                "{}: {c:.2} % sampled, {x:.2} % exact",
                r["name"]
            );
            if (x - r["exact_percent"].as_f64().unwrap()).abs() > 1.0 {
                moved += 1;
            }
        }
    }
    assert!(
        moved > 0,
        "some inline frame's share of the cycles differs from its share of the instructions"
    );
}

/// The Cortex-M0+ against a board: CoreMark as ported to the Raspberry Pi Pico, whose
/// iterations a second at 125 MHz are published (`coremark-rp2040.csv`), timed as an M0+ on
/// an M3 machine (ARMv6-M code runs unchanged there). Within 6 % (the board's build used
/// another compiler and the Pico SDK's library), where the instruction count is 30 % short.
#[test]
fn coremark_on_the_pico_core() {
    let csv = std::fs::read_to_string(repo().join("cargo-sample/data/silicon/coremark-rp2040.csv"))
        .unwrap();
    let row: Vec<&str> = csv
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap()
        .split(',')
        .collect();
    let (iterations, silicon): (f64, f64) = (row[3].parse().unwrap(), row[4].parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let r = run_elf(
        dir.path(),
        "silicon/coremark-m0plus.elf",
        "mps2-an385",
        &[
            "--core",
            "cortex-m0plus",
            "--cycles",
            "--instructions",
            "3G",
        ],
    );
    // A CRC off what the benchmark expects ends the run from its report, before the end of
    // main: the build computed what CoreMark computes.
    assert_eq!(r["stop"], "the firmware ended the run");
    assert!(
        function(&r, "portable_fini")["instructions"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(r["timing"]["core"], "cortex-m0plus");
    let it = function(&r, row[2]);
    let est = it["inclusive_cycles"].as_f64().unwrap() / iterations;
    let instr = it["inclusive_instructions"].as_f64().unwrap() / iterations;
    let (e, ie) = (est / silicon - 1.0, instr / silicon - 1.0);
    eprintln!(
        "CoreMark per iteration: silicon {silicon}, instructions {instr} ({:+.1} %), estimated {est} ({:+.1} %)",
        100.0 * ie,
        100.0 * e
    );
    assert!(e.abs() < 0.06, "{:+.1} % off the Pico", 100.0 * e);
    assert!(ie < -0.2, "instructions alone are far short");
}

/// Flash wait states reach code where it was loaded, not code the startup copied to RAM: the
/// same loop, counted the same, costs more from flash only.
#[test]
fn wait_states_spare_code_copied_to_ram() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--cycles"];
        args.extend_from_slice(extra);
        run_elf(dir.path(), "ramfunc/ramfunc.elf", "mps2-an385", &args)
    };
    let zero = run(&[]);
    let slow = run(&["--wait-states", "2", "--no-prefetch"]);
    let f = |r: &Value, name: &str| {
        let f = function(r, name);
        (
            f["instructions"].as_u64().unwrap(),
            f["cycles"].as_u64().unwrap(),
        )
    };
    let (flash0, ram0) = (f(&zero, "in_flash"), f(&zero, "in_ram"));
    assert_eq!(
        flash0, ram0,
        "the same loop, counted and timed alike at no wait states"
    );
    let (flash2, ram2) = (f(&slow, "in_flash"), f(&slow, "in_ram"));
    assert_eq!(ram2, ram0, "code run from RAM waits no flash");
    assert!(
        flash2.1 > flash0.1 + flash0.0,
        "flash waits on its fetches: {flash2:?} {flash0:?}"
    );
    assert!(
        slow["timing"]["model"]
            .as_str()
            .unwrap()
            .contains("run from RAM")
    );
}

/// Tail-chaining, known by construction: in `nested-irqs` each of the 500 rounds enters four
/// handlers, and `IRQ29` (pended by `IRQ28` at `IRQ26`'s priority) follows `IRQ26`'s return
/// straight away. Each such entry costs a tail-chain (6 cycles on a Cortex-M3) instead of
/// `IRQ26`'s return and its own entry (10 + 12): a run that did not record it charges
/// exactly 500 x 16 cycles more, all of them to `IRQ29`, and says why.
#[test]
fn tail_chained_exceptions_cost_a_tail_chain() {
    let (r, dir) = profile_in("nested-irqs", &["--exact", "--cycles"]);
    assert_eq!(r["timing"]["exceptions"], 2000, "{}", r["timing"]);
    assert_eq!(r["timing"]["chained_exceptions"], 500, "{}", r["timing"]);
    assert!(dir.join("exception-chains.bin").is_file());
    // The same run read back without the record of how handlers were entered.
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && e.file_name() != "exception-chains.bin" {
            std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
        }
    }
    let out = cargo_sample(
        &scenarios(),
        &[
            "report",
            copy.path().to_str().unwrap(),
            "--cycles",
            "--format",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let full: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(full["timing"]["chained_exceptions"].is_null());
    assert!(
        full["timing"]["caveats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().contains("tail-chained")),
        "{}",
        full["timing"]
    );
    let total = |r: &Value| r["cycles"].as_u64().unwrap();
    assert_eq!(total(&full) - total(&r), 500 * (12 + 10 - 6));
    let cycles = |r: &Value, f: &str| function(r, f)["cycles"].as_u64().unwrap();
    assert_eq!(cycles(&full, "IRQ29") - cycles(&r, "IRQ29"), 500 * 16);
    for f in ["IRQ26", "IRQ27", "IRQ28", "thread_work"] {
        assert_eq!(cycles(&full, f), cycles(&r, f), "{f}");
    }
}

/// An exact run's time per exception (and thread mode), each instruction in the innermost
/// exception open when it ran: named by the vector table, with its entries, adding up to the
/// run in instructions and in cycles, and equal, exception by exception, to QEMU's own log of
/// exception entries and returns (`--truth-method exec-log`, which follows no call).
#[test]
fn time_per_exception_in_cycles_adds_up_and_matches_qemus_log() {
    let (r, _) = profile_in("nested-irqs", &["--exact", "--cycles"]);
    let tags = r["tags"].as_array().unwrap();
    let by_name: BTreeMap<&str, &Value> = tags
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t))
        .collect();
    assert_eq!(
        by_name.keys().copied().collect::<Vec<_>>(),
        ["IRQ26", "IRQ27", "IRQ28", "IRQ29", "thread mode"]
    );
    for irq in ["IRQ26", "IRQ27", "IRQ28", "IRQ29"] {
        assert_eq!(by_name[irq]["calls"], 500, "{irq}");
    }
    assert!(by_name["thread mode"]["calls"].is_null());
    // Functions carry their calls beside their cycles (a handler its entries): 500 rounds.
    for f in ["thread_work", "first_work", "IRQ26", "IRQ29"] {
        assert_eq!(function(&r, f)["calls"], 500, "{f}");
        assert!(function(&r, f)["inclusive_cycles"].as_u64().unwrap() > 0);
    }
    let sum = |k: &str| tags.iter().map(|t| t[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("instructions"), r["instructions"].as_u64().unwrap());
    let total = r["cycles"].as_u64().unwrap();
    assert!(
        sum("cycles").abs_diff(total) <= tags.len() as u64,
        "{} against {total}",
        sum("cycles")
    );
    let percent: f64 = tags.iter().map(|t| t["percent"].as_f64().unwrap()).sum();
    assert!((percent - 100.0).abs() < 1e-6);
    // Each is a metric of the gate (`task`, `task-cycles`).
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "nested-irqs",
            "--exact",
            "--cycles",
            "--format",
            "bmf",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bmf: Value = serde_json::from_slice(&out.stdout).unwrap();
    for irq in ["IRQ26", "IRQ29"] {
        let m = &bmf[format!("nested-irqs::task::{irq}")];
        assert_eq!(
            m["task-instructions"]["value"],
            by_name[irq]["instructions"]
        );
        assert_eq!(m["task-estimated-cycles"]["value"], by_name[irq]["cycles"]);
    }

    let (_, log_dir) = profile_in("nested-irqs", &["--exact", "--truth-method", "exec-log"]);
    let logged = cargo_sample::dump::exact::parse_contexts(
        &std::fs::read(log_dir.join(cargo_sample::dump::exact::CONTEXTS_FILE)).unwrap(),
    )
    .unwrap();
    let mut per_exception: BTreeMap<u32, u64> = BTreeMap::new();
    for (exception, _, n) in logged {
        *per_exception.entry(exception).or_default() += n;
    }
    let mut from_log: Vec<u64> = per_exception.into_values().collect();
    let mut from_table: Vec<u64> = tags
        .iter()
        .map(|t| t["instructions"].as_u64().unwrap())
        .collect();
    from_log.sort_unstable();
    from_table.sort_unstable();
    assert_eq!(from_table, from_log);
}
