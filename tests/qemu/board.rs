//! The board path end to end through probe-rs, against a QEMU core behind cargo-sample's
//! emulated probe (`--probe qemu`): probe-rs attaches, downloads the image (its own loader),
//! resets and runs the core, and every read of the ring, the bins, the tag names, the
//! application's RTT channel, DWT_PCSR and SWO goes through probe-rs's ARM code. Each profile
//! is judged against the exact instruction counts of the same QEMU (`--truth`).

use std::path::{Path, PathBuf};

use crate::support::{assert_within_3_sigma, cargo_sample, rows, run_dir_of, scenarios, split_of};
use serde_json::Value;

fn counts(r: &Value) -> (u64, u64, u64) {
    (
        r["samples"].as_u64().unwrap(),
        r["taken"].as_u64().unwrap(),
        r["lost"].as_u64().unwrap(),
    )
}

/// `cargo sample ARGS --format json` in `dir`; the report, the run directory and stderr.
fn on_chip(dir: &Path, args: &[&str]) -> (Value, PathBuf, String) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--format", "json"]);
    let out = cargo_sample(dir, &all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "cargo sample {all:?} failed:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let r = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)));
    (r, run_dir_of(&out.stderr), stderr)
}

fn meta(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

const AN385: [&str; 4] = ["--chip", "mps2-an385", "--probe", "qemu"];

#[test]
fn timer_sampling_through_probe_rs_agrees_with_exact_counts() {
    let mut args = vec!["--release", "--bin", "hot-loops", "-n", "20000", "--truth"];
    args.extend(AN385);
    let (r, dir, stderr) = on_chip(&scenarios(), &args);
    // probe-rs attached, downloaded and ran it; the host read the ring live and released the
    // firmware at its end.
    assert!(stderr.contains("Attaching to mps2-an385"), "{stderr}");
    assert!(stderr.contains("flashed in"), "{stderr}");
    assert_eq!(meta(&dir)["board"], "timer");
    let (samples, taken, lost) = counts(&r);
    assert_eq!(samples + lost, taken);
    assert_eq!(
        (samples, lost),
        (20_000, 0),
        "a host that keeps up loses nothing"
    );
    assert_eq!(r["stop"], "sample limit reached");
    assert_within_3_sigma(&r, &["hot_a", "hot_b", "hot_c"], "hot-loops on the probe");
}

#[test]
fn other_cores_and_an_rtic_application_through_the_probe() {
    // RTIC v2 on lm3s6965evb (hardware tasks at several priorities, fat LTO).
    let (r, _, _) = on_chip(
        &example("rtic-app"),
        &[
            "--release",
            "--bin",
            "tasks",
            "--chip",
            "lm3s6965evb",
            "--probe",
            "qemu",
            "--truth",
        ],
    );
    assert_within_3_sigma(
        &r,
        &["rtic_app::crunch", "rtic_app::filter", "GPIOA"],
        "RTIC on lm3s6965evb",
    );
    // Cortex-M0 (ARMv6-M): the sampler's v6-M entry, the probe's armv6m core.
    let (r, _, _) = on_chip(
        &example("microbit-m0"),
        &[
            "--release",
            "--chip",
            "microbit",
            "--probe",
            "qemu",
            "--truth",
            "-n",
            "5000",
        ],
    );
    assert_within_3_sigma(&r, &["m0_heavy", "m0_light"], "microbit");
    // ARMv8-A PMU counting cannot go through it, and says why.
    let args = "stat --release --bin aarch64-pmu --chip virt --probe qemu --events cpu_cycles";
    refused(&example("aarch64-pmu"), args, "external debug registers");
    // A chip the emulated probe does not play is named with the ones it does.
    refused(
        &scenarios(),
        "--release --bin hot-loops --chip STM32F407VGTx --probe qemu",
        "`--probe qemu` emulates these chips: lm3s6965evb, mps2-an385, microbit",
    );
}

/// `cargo sample ARGS` (words) in `dir` fails and says `says`.
fn refused(dir: &Path, args: &str, says: &str) {
    let args: Vec<&str> = args.split_whitespace().collect();
    let out = cargo_sample(dir, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(err.contains(says), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_duration_ends_a_board_run_and_keeps_what_was_read() {
    let mut args = vec![
        "--release",
        "--bin",
        "hot-loops",
        "-n",
        "100000000",
        "--duration",
        "1500ms",
    ];
    args.extend(AN385);
    let (r, dir, _) = on_chip(&scenarios(), &args);
    let (samples, taken, lost) = counts(&r);
    assert!(samples > 1000, "{samples}");
    assert_eq!(samples + lost, taken);
    assert_eq!(meta(&dir)["state"], "duration reached");
}

#[test]
fn bins_tag_names_and_the_applications_rtt_come_through_the_probe() {
    // Bins counted on the target and read out of its memory at the end.
    let mut args = vec![
        "--release",
        "--bin",
        "hot-loops",
        "--mode",
        "hist",
        "--bin-size",
        "4",
        "-n",
        "20000",
        "--truth",
    ];
    args.extend(AN385);
    let (r, dir, _) = on_chip(&scenarios(), &args);
    let c = crate::live::config_in(&dir.join("loaded.elf"));
    assert_eq!(
        (c.mode, c.sink),
        (sampler_rt::wire::MODE_HIST, sampler_rt::wire::SINK_HOST)
    );
    assert_eq!(r["taken"], 20_000);
    assert_within_3_sigma(&r, &["hot_a", "hot_b", "hot_c"], "bins on the probe");

    // The firmware's tag names, read out of its memory.
    let mut args = vec![
        "--release",
        "--bin",
        "tagged-phases",
        "-n",
        "3000",
        "--tag",
        "api",
    ];
    args.extend(AN385);
    let (r, _, _) = on_chip(&scenarios(), &args);
    let tags = rows(&r, "tags");
    assert_eq!(
        tags.keys().collect::<Vec<_>>(),
        ["phase one", "phase two"],
        "{tags:?}"
    );
    assert_eq!(
        split_of(&r, "hot_b").keys().collect::<Vec<_>>(),
        ["phase two"]
    );

    // rtt-target's channel, copied while the ring is read, byte for byte.
    let mut args = vec!["--release", "--bin", "rtt-app", "--features", "rtt"];
    args.extend(AN385);
    let (r, dir, _) = on_chip(&scenarios(), &args);
    let (samples, taken, lost) = counts(&r);
    assert_eq!((samples, lost), (taken, 0));
    assert_eq!(
        std::fs::read_to_string(dir.join("rtt-0.bin")).unwrap(),
        "rtt-app: start\nrtt-app: round 0\nrtt-app: round 100\nrtt-app: round 200\nrtt-app: round 300\n"
    );
}

#[test]
fn pcsr_and_dwt_agree_with_exact_counts_and_dwt_in_step_with_a_loop_is_named() {
    // DWT_PCSR polled through probe-rs, read in the core's time.
    let mut args = vec![
        "--release",
        "--bin",
        "hot-loops",
        "--method",
        "pcsr",
        "-n",
        "5000",
        "--truth",
    ];
    args.extend(AN385);
    let (r, dir, _) = on_chip(&scenarios(), &args);
    assert_eq!(meta(&dir)["board"], "pcsr");
    assert!(r["samples"].as_u64().unwrap() >= 5000);
    assert_within_3_sigma(&r, &["hot_a", "hot_b", "hot_c"], "PCSR");

    // DWT PC sampling over SWO (probe-rs sets up the TPIU, ITM and DWT; the emulated DWT
    // emits ITM packets). Out of step with the program's loops, the profile is right and no
    // lockstep is claimed. `--method dwt` in QEMU goes through the emulated probe by itself.
    let (r, dir, stderr) = on_chip(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "workload",
            "--method",
            "dwt",
            "--period",
            "7168",
            "-n",
            "20000",
            "--truth",
        ],
    );
    assert!(stderr.contains("emulated probe"), "{stderr}");
    assert_eq!(meta(&dir)["board"], "dwt");
    assert_eq!(r["period_units"], 7168.0);
    let kinds: Vec<&str> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"lockstep"), "{kinds:?}");
    assert_within_3_sigma(
        &r,
        &["workload::checksum", "workload::format_numbers"],
        "DWT out of step",
    );

    // In step: hot-loops' rounds repeat every 15 360 cycles' worth of samples; the DWT cannot
    // jitter, the samples repeat, the small outer loop is mis-measured, and the report says so.
    let (r, _, _) = on_chip(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--method",
            "dwt",
            "--period",
            "15360",
            "-n",
            "20000",
            "--truth",
        ],
    );
    let lock = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "lockstep")
        .unwrap_or_else(|| panic!("no lockstep diagnostic: {}", r["diagnostics"]));
    assert!(
        lock["message"].as_str().unwrap().contains("cannot jitter"),
        "{lock}"
    );
}

#[test]
fn dwt_over_a_slow_swo_line_counts_the_samples_it_drops() {
    // A sample every 64 cycles is 78 bytes per 1000 cycles: far beyond a 115 200 baud line at
    // 15.6 MHz. The ITM drops packets and says so with overflow packets.
    let mut args = vec![
        "--release",
        "--bin",
        "hot-loops",
        "--method",
        "dwt",
        "--period",
        "64",
        "--swo-baud",
        "115200",
        "-n",
        "2000",
    ];
    args.extend(AN385);
    let out = cargo_sample(&scenarios(), &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the ITM will overflow"), "{err}");
    let dir = run_dir_of(&out.stderr);
    let swo = std::fs::read(dir.join("swo.bin")).unwrap();
    assert!(swo.contains(&0x70), "no overflow packet in the SWO capture");

    // Silicon's DWT also sends exception trace (the emulated one does not): a capture that
    // carries it, standing in for this run's, gives the run's report the exceptions table
    // `cargo sample swo` gives for the same capture.
    let run = dir.to_str().unwrap();
    let capture = dir.join("swo.bin");
    let capture = capture.to_str().unwrap();
    let out = cargo_sample(&scenarios(), &["swo", capture, "--synthesize-from", run]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = |args: &[&str]| -> Value {
        let out = cargo_sample(&scenarios(), args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let elf = dir.join("firmware.elf");
    let from_swo = report(&[
        "swo",
        capture,
        "--elf",
        elf.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let from_run = report(&["report", run, "--format", "json"]);
    assert!(
        !from_swo["exceptions"].as_array().unwrap().is_empty(),
        "{from_swo}"
    );
    assert_eq!(from_run["exceptions"], from_swo["exceptions"]);
}

#[test]
fn stacks_read_through_probe_rs_match_the_exact_call_graph() {
    // Each sample's stack window and frame records read live out of the ring by probe-rs,
    // unwound on the host, against the exact call graph of the same QEMU.
    let mut args = vec![
        "--release",
        "--bin",
        "call-graph",
        "--stacks",
        "-n",
        "3000",
        "--period",
        "100000",
        "--truth",
        "--callers",
        "leaf",
    ];
    args.extend(AN385);
    let (r, _, _) = on_chip(&scenarios(), &args);
    let (samples, taken, lost) = counts(&r);
    assert_eq!(samples + lost, taken);
    assert_eq!(r["unwinding"]["samples"].as_u64().unwrap(), samples);
    crate::calls::inclusive_within_3_sigma(&r);
    let n = samples as f64;
    for e in r["callers"]["rows"].as_array().unwrap() {
        let (s, x) = (
            e["percent"].as_f64().unwrap(),
            e["exact_percent"].as_f64().unwrap(),
        );
        let z = crate::calls::sigmas(s, x, n);
        assert!(
            z.abs() <= 3.0,
            "caller {}: {s:.2} % vs {x:.2} % ({z:+.1} sigma)",
            e["name"]
        );
    }
}
