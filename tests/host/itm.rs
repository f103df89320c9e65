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

/// pyOCD's decoding of a capture, in `--events`' form.
fn pyocd_events(capture: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pyocd_swo.py");
    let py = Command::new(pyocd_python())
        .arg(script)
        .arg(capture)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    String::from_utf8(py.stdout).unwrap()
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
    let theirs = pyocd_events(&capture);
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
    assert_eq!(awake_rows(&s), awake_rows(&r));
    // Sleep samples are a row of their own, and exception trace a table: both counted as
    // pyOCD's decoder counts them.
    let theirs = pyocd_events(&capture);
    let sleeping = s["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "[sleeping]")
        .expect("a [sleeping] row");
    assert_eq!(
        sleeping["samples"].as_u64().unwrap() as usize,
        theirs.lines().filter(|l| *l == "sleep").count()
    );
    let exceptions = s["exceptions"].as_array().expect("an exceptions table");
    assert!(!exceptions.is_empty());
    for e in exceptions {
        let entered = format!("exception {} 1", e["number"]);
        assert_eq!(
            e["entries"].as_u64().unwrap() as usize,
            theirs.lines().filter(|l| *l == entered).count(),
            "{e}"
        );
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

#[test]
fn a_tpiu_framed_stream_read_over_tcp_reports_as_the_run() {
    let (r, run) = profile_in("hot-loops", &["--samples", "10000"]);
    let tmp = tempfile::tempdir().unwrap();
    let plain = stream_of(&run, tmp.path(), false);
    // The same stream through the TPIU's formatter, interleaved with a second source.
    let framed = tmp.path().join("framed.bin");
    let out = cargo_sample(
        &scenarios(),
        &[
            "swo",
            framed.to_str().unwrap(),
            "--synthesize-from",
            run.to_str().unwrap(),
            "--tpiu",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let framed_bytes = std::fs::read(&framed).unwrap();
    // Deframed, it decodes packet for packet as pyOCD decodes the plain stream.
    let ours = our_events(&framed, &["--tpiu"]);
    let theirs = pyocd_events(&plain);
    let ours: Vec<&str> = ours
        .lines()
        .filter(|l| !l.starts_with("timestamp"))
        .collect();
    assert_eq!(ours, theirs.lines().collect::<Vec<_>>());
    // Without --tpiu the frames are not ITM packets: the report would be wrong, and says so.
    assert!(our_events(&framed, &[]).contains("invalid"));

    // A debug server's TCP port sending it in pieces, then closing.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap().to_string();
    let sent = framed_bytes.clone();
    let t = std::thread::spawn(move || {
        use std::io::Write;
        let (mut s, _) = server.accept().unwrap();
        for c in sent.chunks(4093) {
            s.write_all(c).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    });
    let saved = tmp.path().join("recorded.bin");
    let out = cargo_sample(
        &scenarios(),
        &[
            "swo",
            saved.to_str().unwrap(),
            "--tcp",
            &addr,
            "--tpiu",
            "--elf",
            run.join("firmware.elf").to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    t.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the server closed the stream"), "{err}");
    // The raw stream is kept as it came.
    assert_eq!(std::fs::read(&saved).unwrap(), framed_bytes);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(awake_rows(&s), awake_rows(&r));
}

/// A report's function rows as `(name, samples)`, without the `[sleeping]` row.
fn awake_rows(r: &Value) -> Vec<(&Value, &Value)> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] != "[sleeping]")
        .map(|f| (&f["name"], &f["samples"]))
        .collect()
}

#[test]
fn a_tcp_port_with_nothing_behind_it_is_said_plainly() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("x.bin");
    let out = cargo_sample(
        &scenarios(),
        &[
            "swo",
            saved.to_str().unwrap(),
            "--tcp",
            &addr,
            "--elf",
            "none.elf",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is the debug server running"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
