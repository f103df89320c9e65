//! Fault injection in real QEMU: each fault gets a clear message and a saved run that can be
//! reported again; nothing the target sent is lost. Each test adds a line to
//! `target/fault-summary.txt` (fault, survived, raw data lost), which `tests/run` prints.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::{cargo_sample, run_dir_of, scenarios};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// Record the outcome for the suite's summary.
fn summary(fault: &str, survived: bool, lost: u64) {
    let path = crate::support::artifacts_dir().join("fault-summary.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(
            f,
            "{fault}\t{}\t{lost}",
            if survived { "yes" } else { "NO" }
        );
    }
}

/// Files of the raw capture missing from a run directory (the run's facts, the image that ran,
/// and what the target sent: the dump, or the firmware's output when it sent none).
fn missing_raw(dir: &Path, dump: bool) -> u64 {
    let mut want = vec!["run.json", "firmware.elf", "loaded.elf"];
    want.push(if dump {
        "sampler.dump"
    } else {
        "firmware-output.txt"
    });
    want.iter().filter(|f| !dir.join(f).is_file()).count() as u64
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The saved run reports again (JSON), and its samples.
fn rereport(dir: &Path) -> Value {
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn meta(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

#[test]
fn qemu_killed_mid_run_keeps_the_chunks_already_streamed() {
    let qemu = fixture("qemu-killed.sh");
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "-n",
            "1000000",
            "--qemu",
            qemu.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert!(err.contains("QEMU ended abnormally"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let dir = run_dir_of(&out.stderr);
    assert_eq!(meta(&dir)["state"], "failed");
    let r = rereport(&dir);
    let samples = r["samples"].as_u64().unwrap();
    // Whole chunks of the 10 240-sample ring arrived before the kill.
    assert!(
        samples >= 10_240 && samples.is_multiple_of(10_240),
        "{samples}"
    );
    // The dump's first INFO was written before sampling began; the samples that arrived
    // were taken at least (a cut dump does not say "taken 0").
    assert!(r["taken"].as_u64().unwrap() >= samples, "{}", r["taken"]);
    summary("QEMU killed mid-run", true, missing_raw(&dir, true));
}

#[test]
fn a_hardfault_is_named_and_the_samples_before_it_reported() {
    let out = cargo_sample(
        &scenarios(),
        &["--release", "--bin", "hardfault", "--timeout", "3"],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("stuck in HardFault (escalated): precise data bus error at 0xf0000000"),
        "{err}"
    );
    let dir = run_dir_of(&out.stderr);
    assert_eq!(meta(&dir)["state"], "faulted");
    let r = rereport(&dir);
    assert!(r["samples"].as_u64().unwrap() > 50);
    let fault = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "fault")
        .expect("a fault diagnostic");
    assert!(fault["message"].as_str().unwrap().contains("HardFault"));
    summary(
        "firmware HardFault while sampling",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn a_firmware_that_never_finishes_is_recovered_at_the_timeout() {
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "-n",
            "10000000",
            "--timeout",
            "2",
        ],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("did not finish within 2 s"), "{err}");
    let dir = run_dir_of(&out.stderr);
    assert_eq!(meta(&dir)["state"], "timed out");
    assert!(rereport(&dir)["samples"].as_u64().unwrap() > 10_000);
    summary(
        "firmware never finishes (timeout)",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn a_firmware_that_never_starts_the_sampler_is_told_so() {
    let out = cargo_sample(&scenarios(), &["--release", "--bin", "no-start"]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("sampler_rt::start()"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The run is kept, with what the firmware printed.
    let dir = err
        .split("are kept in ")
        .nth(1)
        .map(|s| PathBuf::from(s.trim()))
        .unwrap();
    let lost = missing_raw(&dir, false);
    assert_eq!(lost, 0, "{}", dir.display());
    summary("firmware never calls start()", true, lost);
}

/// Run `cargo sample ARGS` and send SIGINT to its process group after 4 s, as a terminal's
/// Ctrl-C; the run must end cleanly as "interrupted" with what it read. Its directory.
fn interrupted_run(args: &[&str]) -> PathBuf {
    let child = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .arg("sample")
        .args(args)
        .current_dir(scenarios())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id() as i32;
    // Long enough for the build (cached) and QEMU to start sampling.
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: signalling the process group this test created.
    unsafe { libc::kill(-pgid, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let dir = run_dir_of(&out.stderr);
    assert_eq!(meta(&dir)["state"], "interrupted");
    assert!(rereport(&dir)["samples"].as_u64().unwrap() > 1000);
    dir
}

#[test]
fn ctrl_c_during_capture_reports_what_was_taken() {
    let dir = interrupted_run(&["--release", "--bin", "hot-loops", "-n", "10000000"]);
    summary("Ctrl-C during capture", true, missing_raw(&dir, true));
}

/// The sysroot's `rust-objcopy`, shipped with every rustup toolchain.
fn objcopy() -> PathBuf {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    let sysroot = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output().unwrap().stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .unwrap();
    sysroot
        .join("lib/rustlib")
        .join(host)
        .join("bin/rust-objcopy")
}

/// The JSON report (and what it said on standard error) of a copy of a run whose ELF
/// `objcopy FLAG` stripped.
fn report_stripped(dir: &Path, flag: &str) -> (Value, String) {
    let tmp = stripped_copy(dir, flag);
    let out = cargo_sample(
        &scenarios(),
        &["report", tmp.path().to_str().unwrap(), "--format", "json"],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{flag}: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

/// A copy of a run whose ELF `objcopy FLAG` stripped.
fn stripped_copy(dir: &Path, flag: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["firmware.elf", "loaded.elf", "run.json", "sampler.dump"] {
        std::fs::copy(dir.join(f), tmp.path().join(f)).unwrap();
    }
    let status = Command::new(objcopy())
        .arg(flag)
        .arg(tmp.path().join("firmware.elf"))
        .status()
        .unwrap();
    assert!(status.success());
    tmp
}

#[test]
fn stripped_elves_and_elves_without_dwarf_still_report() {
    let out = cargo_sample(
        &scenarios(),
        &["--release", "--bin", "early-exit", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = run_dir_of(&out.stderr);
    let whole: Value = serde_json::from_slice(&out.stdout).unwrap();
    let samples = whole["samples"].as_u64().unwrap();
    assert!(samples > 50, "{samples}");
    for (flag, expect) in [
        ("--strip-debug", "no DWARF"),
        ("--strip-all", "no function symbols"),
    ] {
        let (r, err) = report_stripped(&dir, flag);
        assert!(err.contains(expect), "{flag}: {err}");
        assert_eq!(r["samples"].as_u64().unwrap(), samples);
    }
    summary(
        "stripped ELF, ELF without DWARF",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn stacks_against_a_stripped_elf_unwind_by_prologues_or_say_why() {
    let out = cargo_sample(
        &scenarios(),
        &["--release", "--bin", "call-graph", "--stacks", "-n", "2000"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = run_dir_of(&out.stderr);
    for flag in ["--strip-debug", "--strip-all"] {
        let (r, _) = report_stripped(&dir, flag);
        let u = &r["unwinding"];
        assert_eq!(u["samples"], 2000, "{flag}: {u}");
        if flag == "--strip-debug" {
            // No call-frame information left: every frame is read from its prologue.
            assert_eq!(u["complete"], 2000, "{u}");
            assert!(u["prologue_frames"].as_u64().unwrap() > 2000, "{u}");
        } else {
            // No symbols either: every stack fails, with the reason and its fix.
            let failed = u["failed"].as_array().unwrap();
            assert_eq!(failed.len(), 1, "{u}");
            assert!(
                failed[0][0]
                    .as_str()
                    .unwrap()
                    .contains("no call-frame information"),
                "{u}"
            );
            assert_eq!(failed[0][1], 2000);
        }
    }
    summary(
        "stacks against a stripped ELF",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn concurrent_runs_in_one_workspace_keep_their_own_runs() {
    let a = std::thread::spawn(|| {
        cargo_sample(
            &scenarios(),
            &[
                "--release",
                "--bin",
                "hot-loops",
                "-n",
                "3000",
                "--format",
                "json",
            ],
        )
    });
    let b = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "-n",
            "4000",
            "--format",
            "json",
        ],
    );
    let a = a.join().unwrap();
    assert!(a.status.success() && b.status.success());
    let (da, db) = (run_dir_of(&a.stderr), run_dir_of(&b.stderr));
    assert_ne!(da, db);
    assert_eq!(rereport(&da)["samples"], 3000);
    assert_eq!(rereport(&db)["samples"], 4000);
    summary(
        "two runs at once in one workspace",
        true,
        missing_raw(&da, true) + missing_raw(&db, true),
    );
}

#[test]
fn a_qemu_too_old_for_plugins_is_named_with_what_is_supported() {
    let qemu = fixture("qemu-old.sh");
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--truth",
            "--truth-method",
            "plugin",
            "--qemu",
            qemu.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("4.0.0") || err.contains("4.0"), "{err}");
    assert!(err.contains("4.2"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Refused before anything ran: nothing to lose.
    summary("QEMU too old for --truth", true, 0);
}

/// A board run through the emulated probe with `faults` injected into the probe
/// (`CARGO_SAMPLE_QEMU_PROBE_FAULTS`); its stderr and run directory.
fn through_probe(bin: &str, extra: &[&str], faults: &str) -> (Output, String, PathBuf) {
    let mut args = vec![
        "sample",
        "--release",
        "--bin",
        bin,
        "--chip",
        "mps2-an385",
        "--probe",
        "qemu",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(&args)
        .current_dir(scenarios())
        .env("NO_COLOR", "1")
        .env("CARGO_SAMPLE_QEMU_PROBE_FAULTS", faults)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    let dir = run_dir_of(&out.stderr);
    (out, err, dir)
}

#[test]
fn a_board_that_loses_power_mid_run_keeps_the_samples_read_before() {
    // QEMU killed at the probe's 3000th read: the link is gone for good.
    let (out, err, dir) = through_probe("hot-loops", &["-n", "100000000"], "kill-after:3000");
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the probe lost the target mid-run"), "{err}");
    assert!(err.contains("the emulated chip is gone"), "{err}");
    assert_eq!(meta(&dir)["state"], "failed");
    let r = rereport(&dir);
    let (samples, taken, lost) = (
        r["samples"].as_u64().unwrap(),
        r["taken"].as_u64().unwrap(),
        r["lost"].as_u64().unwrap(),
    );
    assert!(samples > 10_000, "{samples}");
    assert_eq!(samples + lost, taken);
    summary(
        "board: QEMU killed under the probe",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn a_board_reset_mid_run_is_named_and_the_samples_before_it_kept() {
    let (out, err, dir) = through_probe("hot-loops", &["-n", "100000000"], "reset-after:3000");
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the target was reset mid-run"), "{err}");
    assert!(rereport(&dir)["samples"].as_u64().unwrap() > 10_000);
    summary("board: target reset mid-run", true, missing_raw(&dir, true));
}

#[test]
fn probe_reads_that_fail_now_and_then_lose_nothing() {
    // Every 25th read of the probe fails, and with a poll every 60 ms each read of the ring's
    // backlog takes more than 25 reads: each failure is tried again, progress is kept, the
    // link is never given up, and every sample arrives (or, on a host slower than the ring
    // is long, is counted as overwritten).
    let (out, err, dir) = through_probe(
        "hot-loops",
        &["-n", "30000", "--poll-interval", "60", "--format", "json"],
        "fail-every:25",
    );
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("lost the target"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (samples, lost) = (r["samples"].as_u64().unwrap(), r["lost"].as_u64().unwrap());
    assert_eq!(samples + lost, 30_000, "{err}");
    assert!(samples > 10_000, "{samples}");
    summary(
        "board: every 25th probe read fails",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn a_host_slower_than_the_firmwares_end_still_gets_or_counts_every_sample() {
    // The first read comes 10 s in: long after the firmware stopped sampling and began its
    // bounded wait for the host. The host's beats keep it waiting; without them it ends QEMU
    // and the last samples are neither read nor counted.
    let _turn = crate::support::host_timing();
    let (out, err, dir) = through_probe(
        "hot-loops",
        &[
            "-n",
            "30000",
            "--poll-interval",
            "10000",
            "--format",
            "json",
        ],
        "",
    );
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("went away"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (samples, lost) = (r["samples"].as_u64().unwrap(), r["lost"].as_u64().unwrap());
    assert_eq!(samples + lost, 30_000, "{err}");
    // Most were overwritten in those 10 s: a ring's worth is read.
    assert!(samples > 1000 && lost > 1000, "{samples} {lost}");
    summary(
        "board: host reads only after the firmware ended",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn a_hardfault_on_the_board_is_found_by_looking_at_the_stalled_core() {
    let (out, err, dir) = through_probe("hardfault", &[], "");
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("stuck in HardFault (escalated): precise data bus error at 0xf0000000"),
        "{err}"
    );
    assert_eq!(meta(&dir)["state"], "faulted");
    assert!(rereport(&dir)["samples"].as_u64().unwrap() > 50);
    summary("board: firmware HardFault", true, missing_raw(&dir, true));
}

#[test]
fn a_host_too_slow_for_the_ring_counts_what_was_overwritten() {
    // A sample every ~60 instructions and a read every 300 ms: the ring laps between reads.
    let (out, err, dir) = through_probe(
        "hot-loops",
        &[
            "-n",
            "300000",
            "--period",
            "100ticks",
            "--poll-interval",
            "300",
            "--format",
            "json",
        ],
        "",
    );
    assert!(out.status.success(), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (samples, taken, lost) = (
        r["samples"].as_u64().unwrap(),
        r["taken"].as_u64().unwrap(),
        r["lost"].as_u64().unwrap(),
    );
    assert_eq!(taken, 300_000);
    assert!(lost > 0, "nothing lost with a 300 ms read interval");
    assert_eq!(samples + lost, taken, "every sample delivered or counted");
    assert!(
        err.contains("overwritten before the host read them"),
        "{err}"
    );
    summary(
        "board: ring overrun by a slow host",
        true,
        missing_raw(&dir, true),
    );
}

#[test]
fn ctrl_c_during_a_board_run_reports_what_was_read() {
    let dir = interrupted_run(&[
        "--release",
        "--bin",
        "hot-loops",
        "-n",
        "100000000",
        "--chip",
        "mps2-an385",
        "--probe",
        "qemu",
    ]);
    summary(
        "board: Ctrl-C during capture",
        true,
        missing_raw(&dir, true),
    );
}

/// Records of a dump as the format document draws them: `(kind, start, payload start, payload
/// length)`, read here from the bytes without the decoder.
fn dump_records(dump: &[u8]) -> Vec<(u16, usize, usize, usize)> {
    let word = |at: usize| u32::from_le_bytes(dump[at..at + 4].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    let mut off = u16::from_le_bytes([dump[6], dump[7]]) as usize;
    while off + 8 <= dump.len() {
        let kind = u16::from_le_bytes([dump[off], dump[off + 1]]);
        let len = word(off + 4);
        out.push((kind, off, off + 8, len));
        if kind == 0xFFFF {
            break;
        }
        off += 8 + len.div_ceil(4) * 4;
    }
    out
}

#[test]
fn a_flipped_byte_loses_only_the_record_it_hit_and_a_run_without_its_elf_still_reports() {
    // 25 000 samples stream as three records of samples (a ring of 10 240).
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "-n",
            "25000",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let whole: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = run_dir_of(&out.stderr);
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("run");
    std::fs::create_dir(&copy).unwrap();
    // `firmware.elf` is missing: `loaded.elf` holds the same code.
    for f in ["run.json", "loaded.elf", "sampler.dump"] {
        std::fs::copy(dir.join(f), copy.join(f)).unwrap();
    }
    let mut dump = std::fs::read(copy.join("sampler.dump")).unwrap();
    let pcs: Vec<_> = dump_records(&dump)
        .into_iter()
        .filter(|r| r.0 == 2)
        .collect();
    assert_eq!(pcs.len(), 3, "records of samples: {pcs:?}");
    let (_, start, payload, len) = pcs[1];
    let count = u32::from_le_bytes(dump[payload + 4..payload + 8].try_into().unwrap()) as u64;
    dump[payload + len / 2] ^= 0x10;
    std::fs::write(copy.join("sampler.dump"), &dump).unwrap();

    let out = cargo_sample(
        &scenarios(),
        &["report", copy.to_str().unwrap(), "--format", "json"],
    );
    let err = stderr(&out);
    summary(
        "one byte of a 3-record dump flipped",
        out.status.success(),
        0,
    );
    assert!(out.status.success(), "{err}");
    assert!(err.contains("`firmware.elf` is missing"), "{err}");
    assert!(err.contains("damaged in bytes"), "{err}");
    assert!(
        err.contains(&format!("the {count} samples recorded there")),
        "{err}"
    );
    // The range named holds the damaged record and no other record of samples.
    let named = err[err.find("damaged in bytes ").unwrap() + 17..]
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap()
        .to_owned();
    let (a, b) = named.split_once("..").unwrap();
    let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
    assert!(
        a <= start && payload + len <= b,
        "{a}..{b} vs the record {start}..{}",
        payload + len
    );
    assert!(
        pcs[0].2 + pcs[0].3 <= a && b <= pcs[2].1,
        "{a}..{b} reaches another record"
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["samples"].as_u64().unwrap(), 25_000 - count);
    assert_eq!(r["lost"].as_u64().unwrap(), count);
    // What is left is still a fair draw: hot_a within 3 sigma of the whole run's share.
    let n = (25_000 - count) as f64;
    let p = crate::support::share(&whole, "functions", "hot_a");
    let q = crate::support::share(&r, "functions", "hot_a");
    assert!(
        (p - q).abs() < 3.0 * crate::support::sigma_points(p, n),
        "{p} vs {q}"
    );
}
