//! The ITM/SWO decoder on streams made from real runs' samples, checked against pyOCD's
//! `SWOParser` (installed from PyPI by `tests/setup.sh --with-pyocd`) packet by packet.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::Value;

fn pyocd_python() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let py = target.join("pyocd-venv/bin/python");
    assert!(
        py.is_file(),
        "{} is missing: run `tests/setup.sh --with-pyocd`",
        py.display()
    );
    py
}

/// A synthetic SWO stream of a run's samples, written by `cargo sample swo --synthesize-from`.
fn stream_of(run: &Path, dir: &Path, full: bool) -> PathBuf {
    let path = dir.join(if full { "full.swo" } else { "swo.bin" });
    let mut args = vec![
        "swo",
        path.to_str().unwrap(),
        "--synthesize-from",
        run.to_str().unwrap(),
    ];
    if full {
        args.push("--full");
    }
    let out = cargo_sample(&scenarios(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn our_events(capture: &Path, extra: &[&str]) -> String {
    let mut args = vec!["swo", capture.to_str().unwrap(), "--events"];
    args.extend_from_slice(extra);
    let out = cargo_sample(&scenarios(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn our_decoder_and_pyocds_agree_on_every_packet() {
    let (_, run) = profile_in("hot-loops", &["--samples", "10000"]);
    let tmp = tempfile::tempdir().unwrap();
    let capture = stream_of(&run, tmp.path(), false);
    let ours = our_events(&capture, &[]);
    // pyOCD folds its timestamps into the other events' and never passes them on.
    let ours: String = ours
        .lines()
        .filter(|l| !l.starts_with("timestamp"))
        .map(|l| format!("{l}\n"))
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pyocd_swo.py");
    let py = Command::new(pyocd_python())
        .arg(script)
        .arg(&capture)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let theirs = String::from_utf8(py.stdout).unwrap();
    assert_eq!(
        ours.lines().filter(|l| l.starts_with("pc ")).count(),
        10_000
    );
    for kind in ["itm", "sleep", "exception", "counter", "overflow"] {
        assert!(
            ours.lines().any(|l| l.starts_with(kind)),
            "no {kind} in the stream"
        );
    }
    if ours != theirs {
        let first = ours
            .lines()
            .zip(theirs.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "the decoders differ from event {first}: ours {:?}, pyOCD {:?}",
            ours.lines().nth(first),
            theirs.lines().nth(first)
        );
    }
}

#[test]
fn a_capture_reports_as_the_run_it_came_from() {
    let (r, run) = profile_in("hot-loops", &["--samples", "10000"]);
    let tmp = tempfile::tempdir().unwrap();
    let capture = stream_of(&run, tmp.path(), true);
    let out = cargo_sample(
        &scenarios(),
        &[
            "swo",
            capture.to_str().unwrap(),
            "--elf",
            run.join("firmware.elf").to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        s["functions"].as_array().unwrap().len(),
        r["functions"].as_array().unwrap().len()
    );
    for (a, b) in s["functions"]
        .as_array()
        .unwrap()
        .iter()
        .zip(r["functions"].as_array().unwrap())
    {
        assert_eq!((&a["name"], &a["samples"]), (&b["name"], &b["samples"]));
    }
    // Sleep packets and overflows are said, not hidden.
    let kinds: Vec<&str> = s["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"asleep") && kinds.contains(&"lost"),
        "{kinds:?}"
    );
    // Every packet of the full stream decodes: data trace, global timestamps, extensions.
    let events = our_events(&capture, &[]);
    assert!(!events.contains("invalid"));
    assert!(events.contains("data 1 Pc") && events.contains("itm 33 0x7a 1"));
}

#[test]
fn a_capture_that_starts_mid_packet_waits_for_synchronisation() {
    let (_, run) = profile_in("hot-loops", &["--samples", "10000"]);
    let tmp = tempfile::tempdir().unwrap();
    let capture = stream_of(&run, tmp.path(), false);
    let whole = std::fs::read(&capture).unwrap();
    let cut = tmp.path().join("cut.swo");
    std::fs::write(&cut, &whole[5005..]).unwrap();
    let pcs = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("pc "))
            .map(str::to_owned)
            .collect()
    };
    let all = pcs(&our_events(&capture, &[]));
    let synced = pcs(&our_events(&cut, &["--sync"]));
    assert!(synced.len() > 8000 && synced.len() < all.len());
    assert_eq!(synced[..], all[all.len() - synced.len()..]);
    // Without waiting, the cut packet's bytes are read as packets of their own.
    let blind = our_events(&cut, &[]);
    assert_ne!(pcs(&blind).first(), synced.first());
}
