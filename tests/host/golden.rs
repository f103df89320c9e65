//! Every report format and view of two committed runs, and every `--help`, compared with the
//! expected files in `tests/golden/`: a change of output is a reviewed diff. Seconds, no QEMU.
//!
//! `CARGO_SAMPLE_BLESS=1 cargo test --test host golden` writes the files anew; `git diff
//! tests/golden` then shows what changed.
//!
//! The runs (`tests/fixtures/runs/`, made by this tool from `examples/scenarios`' `call-graph`):
//! `stacks` sampled with `--stacks 8 -n 300 --truth` (dump, exact counts per address and per
//! exception, exact call graph), `exact-calls` counted with `--exact` (counts and call graph).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use prost::Message;

use crate::support::repo;

const BLESS: &str = "CARGO_SAMPLE_BLESS";

fn golden_dir() -> PathBuf {
    repo().join("tests/golden")
}

/// A committed run copied where the test may write beside it (reports may add files).
fn run_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let from = repo().join("tests/fixtures/runs").join(name);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir(&dir).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    (tmp, dir)
}

/// `cargo-sample ARGS` (the binary as installed), its standard output and whether it
/// succeeded.
fn run(args: &[&str]) -> (Vec<u8>, String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(args)
        .env("NO_COLOR", "1")
        // Help is wrapped to the terminal, else to `COLUMNS`.
        .env("COLUMNS", "100")
        // Source lines from the scenarios' own sources, wherever the checkout is (and none
        // from the toolchain's or the registry's, which a machine may or may not have).
        .env(
            "CARGO_SAMPLE_SOURCE_PATH",
            repo().join("examples/scenarios"),
        )
        .env_remove("CARGO_SAMPLE_LATE_TICKS")
        .output()
        .expect("running cargo-sample");
    (
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// Compare `got` with the expected file `name` (or write it when blessing); collects what
/// differs instead of stopping at the first.
fn check(name: &str, got: &[u8], failures: &mut Vec<String>) {
    let path = golden_dir().join(name);
    if std::env::var_os(BLESS).is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    match std::fs::read(&path) {
        Ok(want) if want == got => {}
        Ok(want) => {
            let (w, g) = (String::from_utf8_lossy(&want), String::from_utf8_lossy(got));
            let line = w
                .lines()
                .zip(g.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(w.lines().count().min(g.lines().count()));
            failures.push(format!(
                "{name} differs from line {}:\n  expected: {:?}\n  got:      {:?}",
                line + 1,
                w.lines().nth(line).unwrap_or("(end)"),
                g.lines().nth(line).unwrap_or("(end)")
            ));
        }
        Err(_) => failures.push(format!("{name}: no expected file ({})", path.display())),
    }
}

fn finish(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{}\n\nIf the change is intended: {BLESS}=1 cargo test --test host golden, then review \
         `git diff tests/golden`",
        failures.join("\n\n")
    );
}

/// A report of the run at `dir` with `args`, as it came.
fn report_bytes(dir: &Path, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["sample", "report", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let (out, err, ok) = run(&all);
    assert!(ok, "report {args:?} failed: {err}");
    out
}

/// A report as text, with the run's temporary path taken out.
fn report(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = report_bytes(dir, args);
    let text = String::from_utf8(out).expect("a text report is UTF-8");
    text.replace(dir.to_str().unwrap(), "$RUN").into_bytes()
}

/// pprof's gzipped protobuf, decoded into its fields.
fn pprof_text(bytes: &[u8]) -> Vec<u8> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .expect("pprof output is gzip");
    let p = crate::formats::Profile::decode(raw.as_slice()).expect("a pprof profile");
    format!("{p:#?}\n").into_bytes()
}

/// The views and formats a sampled run with stacks, exact counts and a call graph offers.
#[test]
fn a_sampled_run_reads_the_same_in_every_format_and_view() {
    let (_tmp, dir) = run_copy("stacks");
    let mut failures = Vec::new();
    let views: &[(&str, &[&str])] = &[
        ("text.txt", &[]),
        ("lines.txt", &["--lines"]),
        ("tree.txt", &["--tree"]),
        ("annotate.txt", &["--annotate", "2"]),
        ("callers.txt", &["--callers", "leaf"]),
        ("callees.txt", &["--callees", "main"]),
        ("top.txt", &["--top", "3", "--min-percent", "1"]),
        ("report.json", &["--format", "json"]),
        ("folded.txt", &["--format", "folded"]),
        ("flamegraph.svg", &["--format", "svg"]),
        ("firefox.json", &["--format", "firefox"]),
        ("report.html", &["--format", "html"]),
    ];
    for (name, args) in views {
        check(
            &format!("stacks/{name}"),
            &report(&dir, args),
            &mut failures,
        );
    }
    let pprof = report_bytes(&dir, &["--format", "pprof"]);
    check("stacks/pprof.txt", &pprof_text(&pprof), &mut failures);
    finish(failures);
}

/// The views and formats of an `--exact` run with its call graph.
#[test]
fn an_exact_run_reads_the_same_in_every_format_and_view() {
    let (_tmp, dir) = run_copy("exact-calls");
    let mut failures = Vec::new();
    let views: &[(&str, &[&str])] = &[
        ("text.txt", &[]),
        ("lines.txt", &["--lines"]),
        ("annotate.txt", &["--annotate", "2"]),
        ("callers.txt", &["--callers", "leaf"]),
        ("callees.txt", &["--callees", "main"]),
        ("report.json", &["--format", "json"]),
        ("folded.txt", &["--format", "folded"]),
        ("flamegraph.svg", &["--format", "svg"]),
        ("callgrind.out", &["--format", "callgrind"]),
        ("report.html", &["--format", "html"]),
    ];
    for (name, args) in views {
        check(
            &format!("exact-calls/{name}"),
            &report(&dir, args),
            &mut failures,
        );
    }
    let pprof = report_bytes(&dir, &["--format", "pprof"]);
    check("exact-calls/pprof.txt", &pprof_text(&pprof), &mut failures);
    finish(failures);
}

/// A recorded SWO capture read by `cargo sample swo`.
#[test]
fn an_swo_capture_reads_the_same() {
    let dir = repo().join("tests/fixtures/swo");
    let (out, err, ok) = run(&[
        "sample",
        "swo",
        dir.join("capture.bin").to_str().unwrap(),
        "--elf",
        dir.join("firmware.elf").to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let mut failures = Vec::new();
    check("swo/report.json", &out, &mut failures);
    finish(failures);
}

/// `cargo sample --help` and every subcommand's.
#[test]
fn every_help_reads_as_expected() {
    let mut failures = Vec::new();
    let (top, err, ok) = run(&["sample", "--help"]);
    assert!(ok, "{err}");
    check("help/cargo-sample.txt", &top, &mut failures);
    let text = String::from_utf8_lossy(&top).into_owned();
    // The subcommands as the help lists them.
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 8, "{commands:?}");
    for c in commands {
        let (out, err, ok) = run(&["sample", c, "--help"]);
        assert!(ok, "{c} --help: {err}");
        check(&format!("help/{c}.txt"), &out, &mut failures);
    }
    finish(failures);
}
