//! Exact instruction counting (`--exact`, `--truth`) through both of its methods, the QEMU
//! plugin and QEMU's exec log, and through both plugin API generations (QEMU 7.2 and 10).
//!
//! The two methods share no code inside QEMU: the plugin adds to a counter per instruction, the
//! exec log prints every block entered. Equal counts from both, to the instruction, are the
//! check that each is exact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::*;
use serde_json::Value;

/// Instructions per function of an exact report.
fn counts(r: &Value) -> BTreeMap<String, u64> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["name"].as_str().unwrap().to_owned(),
                row["instructions"]
                    .as_u64()
                    .expect("exact rows count instructions"),
            )
        })
        .collect()
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

/// QEMU 10 from Debian's bookworm-backports, unpacked by `tests/setup.sh --with-qemu10`.
fn qemu10() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let q = target.join("qemu-10/usr/bin/qemu-system-arm");
    if q.is_file() {
        return Some(q);
    }
    assert!(
        std::env::var_os("CARGO_SAMPLE_SKIP_QEMU10").is_some(),
        "{} is missing: run `tests/setup.sh --with-qemu10` (or set CARGO_SAMPLE_SKIP_QEMU10=1)",
        q.display()
    );
    None
}

#[test]
fn the_plugin_and_the_exec_log_count_a_finished_program_alike() {
    let (plugin, dir) = profile_in("early-exit", &["--exact"]);
    let (log, log_dir) = profile_in("early-exit", &["--exact", "--truth-method", "exec-log"]);
    assert_eq!(plugin["mode"], "exact");
    assert_eq!(run_json(&dir)["state"], "finished");
    assert_eq!(run_json(&log_dir)["state"], "finished");
    assert!(
        run_json(&log_dir)["counted_by"]
            .as_str()
            .unwrap()
            .contains("exec log")
    );
    // 200 rounds of 700 + 200 + 100 iterations of three instructions each, and a little more.
    let total = plugin["instructions"].as_u64().unwrap();
    assert!((600_000..610_000).contains(&total), "{total}");
    assert_eq!(counts(&plugin), counts(&log));
    assert_eq!(plugin["lines"], log["lines"]);
    // No sampler in an exact run: its code is not even linked.
    assert!(!counts(&plugin).keys().any(|k| k.contains("sampler_rt")));
    // The loops' counts follow the program: same loop body, 700 : 200 : 100 iterations.
    let c = counts(&plugin);
    let per_iteration = (c["hot_a"] - c["hot_b"]) as f64 / (200.0 * 500.0);
    let predicted_c = c["hot_b"] as f64 - per_iteration * 200.0 * 100.0;
    assert!(
        (c["hot_c"] as f64 - predicted_c).abs() < 1.0,
        "hot_c {} vs {predicted_c}",
        c["hot_c"]
    );
}

#[test]
fn a_program_that_never_ends_stops_at_the_instruction_budget() {
    let (r, dir) = profile_in("hot-loops", &["--exact", "--instructions", "20M"]);
    assert_eq!(run_json(&dir)["state"], "budget reached");
    let total = r["instructions"].as_u64().unwrap();
    // The plugin checks the budget at each block: it stops within one block of it.
    assert!((19_999_000..=20_000_000).contains(&total), "{total}");
    let rows = r["functions"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|row| row.get("samples").is_none() && row.get("ci95").is_none())
    );
    let sum: u64 = counts(&r).values().sum();
    assert_eq!(sum, total);
    let a = share(&r, "functions", "hot_a");
    assert!((69.0..70.5).contains(&a), "hot_a {a}");
    // A duration is a budget too: 64 ms of emulated time at 64 ns an instruction (the
    // machine's -icount shift=6) is a million instructions; at shift 0, 64 million.
    let (short, _) = profile_in("hot-loops", &["--exact", "--instructions", "64ms"]);
    let n = short["instructions"].as_u64().unwrap();
    assert!((999_000..=1_000_000).contains(&n), "{n}");
    let (fast, _) = profile_in(
        "hot-loops",
        &["--exact", "--instructions", "64ms", "--icount-shift", "0"],
    );
    let n = fast["instructions"].as_u64().unwrap();
    assert!((63_999_000..=64_000_000).contains(&n), "{n}");
    // The text report of the saved run says how it ended.
    let out = cargo_sample(&scenarios(), &["report", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("Exact profile of hot-loops"), "{text}");
    assert!(
        text.contains("instruction budget (`--instructions 20M`)"),
        "{text}"
    );
}

#[test]
fn truth_through_the_exec_log_equals_truth_through_the_plugin() {
    let (plugin, _) = profile_in("hot-loops", &["--samples", "300", "--truth"]);
    let (log, dir) = profile_in(
        "hot-loops",
        &["--samples", "300", "--truth", "--truth-method", "exec-log"],
    );
    assert!(
        run_json(&dir)["counted_by"]
            .as_str()
            .unwrap()
            .contains("exec log")
    );
    // icount makes the sampled run itself identical; the exact columns must be too.
    assert_eq!(plugin["functions"], log["functions"]);
    assert_eq!(plugin["lines"], log["lines"]);
    assert_eq!(plugin["exact_instructions"], log["exact_instructions"]);
}

#[test]
fn a_qemu_without_plugin_support_falls_back_to_the_exec_log_with_a_warning() {
    // The real QEMU behind a wrapper that hides `-plugin` from its help and refuses it, as a
    // QEMU configured with --disable-plugins does.
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = tmp.path().join("qemu-system-arm");
    let real = which("qemu-system-arm");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n\
             for a in \"$@\"; do [ \"$a\" = -plugin ] && {{ echo \"qemu-system-arm: -plugin: invalid option\" >&2; exit 1; }}; done\n\
             if [ \"$1\" = -help ]; then {real} -help | grep -v '^-plugin'; exit 0; fi\n\
             exec {real} \"$@\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "early-exit",
            "--exact",
            "--format",
            "json",
            "--qemu",
            wrapper.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("has no TCG plugin support"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (plugin, _) = profile_in("early-exit", &["--exact"]);
    assert_eq!(counts(&r), counts(&plugin));
    // Asking for the plugin explicitly names the versions it supports.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "early-exit",
            "--exact",
            "--truth-method",
            "plugin",
            "--qemu",
            wrapper.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("built without TCG plugin support"), "{err}");
    assert!(err.contains("QEMU 9.0 and later"), "{err}");
}

#[test]
fn the_plugin_for_qemu_9_and_later_counts_the_same_in_qemu_10() {
    let Some(q10) = qemu10() else { return };
    let q10 = q10.to_str().unwrap();
    let (old, _) = profile_in("early-exit", &["--exact"]);
    let (new, dir) = profile_in("early-exit", &["--exact", "--qemu", q10]);
    assert!(
        run_json(&dir)["counted_by"]
            .as_str()
            .unwrap()
            .contains("API 2")
    );
    assert_eq!(counts(&old), counts(&new));
    // So does the exact call graph (its counters read through QEMU 10's scoreboards): every
    // function's self and inclusive count, and every caller of `leaf`.
    let graph = ["--exact", "--callers", "leaf"];
    let (old, _) = profile_in("call-graph", &graph);
    let (new, _) = profile_in("call-graph", &[&graph[..], &["--qemu", q10]].concat());
    assert_eq!(old["functions"], new["functions"]);
    assert_eq!(old["callers"], new["callers"]);
    assert_eq!(old["callers"]["rows"].as_array().map(Vec::len), Some(3));
    // The sampled run and its truth repeat across QEMU releases too.
    let (a, _) = profile_in("hot-loops", &["--samples", "1000", "--truth"]);
    let (b, _) = profile_in(
        "hot-loops",
        &["--samples", "1000", "--truth", "--qemu", q10],
    );
    assert_eq!(a["functions"], b["functions"]);
    // QEMU 10 refuses the API 1 plugin; the message names what is supported.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args([
            "sample",
            "--release",
            "--bin",
            "early-exit",
            "--exact",
            "--qemu",
            q10,
        ])
        .current_dir(scenarios())
        .env("NO_COLOR", "1")
        .env("CARGO_SAMPLE_PLUGIN_API", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("QEMU refused cargo-sample's exact-count plugin (API 1)"),
        "{err}"
    );
    assert!(err.contains("--truth-method exec-log"), "{err}");
}

fn which(name: &str) -> String {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not on PATH"))
        .display()
        .to_string()
}

/// The main stack's depth in an exact run (the lowest address the plugin saw stored to) equals
/// the lowest stack pointer in QEMU's own register log of the same image, run one instruction
/// a block: `stack-depth` descends 40 levels with 64 bytes of locals each.
#[test]
fn the_main_stacks_depth_equals_the_lowest_stack_pointer_in_qemus_log() {
    let (r, run) = profile_in("stack-depth", &["--exact"]);
    let (bytes, top) = (
        r["stack"]["bytes"].as_u64().unwrap(),
        r["stack"]["top"].as_u64().unwrap(),
    );
    assert!(bytes > 40 * 64, "{}", r["stack"]);
    let log = run.join("cpu.log");
    let status = std::process::Command::new("qemu-system-arm")
        .args([
            "-machine",
            "mps2-an385",
            "-cpu",
            "cortex-m3",
            "-display",
            "none",
        ])
        .args(["-semihosting-config", "enable=on,target=native"])
        .args([
            "-icount",
            "shift=0",
            "-singlestep",
            "-d",
            "cpu,nochain",
            "-D",
        ])
        .arg(&log)
        .arg("-kernel")
        .arg(run.join("loaded.elf"))
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lowest = text
        .split("R13=")
        .skip(1)
        .map(|s| u64::from_str_radix(&s[..8], 16).unwrap())
        .min()
        .unwrap();
    // Every push stores at the new stack pointer; the deepest one is the deepest point.
    assert_eq!(bytes, top - lowest, "the log's lowest SP is {lowest:#x}");
    let text =
        String::from_utf8(cargo_sample(&scenarios(), &["report", run.to_str().unwrap()]).stdout)
            .unwrap();
    assert!(
        text.contains(&format!("main stack: {bytes} bytes at its deepest")),
        "{text}"
    );
}
