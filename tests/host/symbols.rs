//! Names and lines checked address by address against an independent reading of the DWARF
//! (`tests/dwarf_oracle.py`, pyelftools), on firmware whose code sits near address 0 where the
//! linker leaves the debug information of discarded code: every instruction of every function of
//! each image, not only the sampled ones.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;
use cargo_sample::image::symbolize::{Symbolizer, demangle};
use object::{Object, ObjectSymbol, SymbolKind};
use serde_json::Value;

fn python() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let py = target.join("py-venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run tests/setup.sh --with-python",
        py.display()
    );
    py
}

/// Every instruction address inside a function symbol of the image.
fn instruction_addresses(elf: &[u8]) -> Vec<u64> {
    let file = object::File::parse(elf).unwrap();
    let step = if file.architecture() == object::Architecture::Aarch64 {
        4
    } else {
        2
    };
    let mut v: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .flat_map(|s| {
            let a = s.address() & !1;
            (a..a + s.size()).step_by(step)
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The oracle's frames for each address: `(name, file, line)`, innermost first.
type OracleFrames = Vec<(Option<String>, Option<String>, Option<u64>)>;

fn oracle(elf: &Path, addrs: &[u64]) -> HashMap<u64, OracleFrames> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/dwarf_oracle.py");
    let mut child = Command::new(python())
        .arg(script)
        .arg(elf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for a in addrs {
        input.push_str(&format!("{a:x}\n"));
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "the oracle failed on {}",
        elf.display()
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let frames = v["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["name"].as_str().map(str::to_owned),
                        f["file"].as_str().map(str::to_owned),
                        f["line"].as_u64(),
                    )
                })
                .collect();
            (v["addr"].as_u64().unwrap(), frames)
        })
        .collect()
}

/// Compare the symbolizer with the oracle at every instruction of `elf`; returns how many
/// addresses had frames. Also checks the properties every view relies on: the outermost frame
/// belongs to the symbol holding the address, and a line is given only where a live sequence
/// gives one.
fn check_image(elf: &Path) -> usize {
    let data = std::fs::read(elf).unwrap();
    let addrs = instruction_addresses(&data);
    let truth = oracle(elf, &addrs);
    let mut sym = Symbolizer::new(elf, &data, None).unwrap();
    let mut with_frames = 0;
    let mut mismatches = Vec::new();
    for &a in &addrs {
        let ours = sym.resolve(a as u32).clone();
        let want = &truth[&a];
        if want.is_empty() {
            // No live subprogram: at most the symbol itself with a line from a live sequence,
            // never a frame of some other function.
            assert!(
                ours.frames.len() <= 1,
                "{}: {a:#x} has no live DWARF, got {:?}",
                elf.display(),
                ours.frames
            );
            if let Some(f) = ours.frames.first() {
                assert_eq!(Some(&f.function), ours.function.as_ref());
            }
            continue;
        }
        with_frames += 1;
        let names: Vec<String> = want
            .iter()
            .map(|f| f.0.as_deref().map(demangle).unwrap_or_else(|| "??".into()))
            .collect();
        let got: Vec<String> = ours.frames.iter().map(|f| f.function.clone()).collect();
        let lines: Vec<Option<u64>> = want.iter().map(|f| f.2).collect();
        let got_lines: Vec<Option<u64>> =
            ours.frames.iter().map(|f| f.line.map(u64::from)).collect();
        let files_ok = want
            .iter()
            .zip(&ours.frames)
            .all(|(w, o)| match (&w.1, &o.file) {
                (Some(w), Some(o)) => w.ends_with(o.as_str()) || o.ends_with(w.as_str()),
                (None, None) => true,
                _ => false,
            });
        if names != got || lines != got_lines || !files_ok {
            mismatches.push(format!(
                "{a:#x}: oracle {:?}\n        ours   {:?}",
                want,
                ours.frames
                    .iter()
                    .map(|f| (&f.function, &f.file, f.line))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{}: {} of {} addresses differ from the oracle, first:\n{}",
        elf.display(),
        mismatches.len(),
        addrs.len(),
        mismatches[..mismatches.len().min(8)].join("\n")
    );
    with_frames
}

#[test]
fn the_committed_fixture_matches_the_oracle_everywhere() {
    let elf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hot-loops.elf");
    assert!(check_image(&elf) > 100);
}

/// Dead functions whose debug information covers live code, by the oracle's rule.
fn discarded_over_live_code(elf: &Path) -> usize {
    let data = std::fs::read(elf).unwrap();
    Symbolizer::new(elf, &data, None)
        .unwrap()
        .discarded()
        .functions
}

#[test]
fn an_rtic_application_on_lm3s6965evb_matches_the_oracle_everywhere() {
    // Cargo's default release profile (no LTO), as RTIC's own examples build.
    let (r, run) = profile_example(
        "rtic-app",
        &["--profile", "nolto", "--bin", "tasks", "-n", "500"],
    );
    let elf = run.join("firmware.elf");
    assert!(
        discarded_over_live_code(&elf) > 100,
        "the image should carry the debug information of many discarded functions"
    );
    assert!(check_image(&elf) > 100);
    // No row of the report names a function of the dead debug information.
    let text = r.to_string();
    assert!(!text.contains("u128_div_rem"), "{text}");
}

#[test]
fn a_core_fmt_user_on_mps2_an385_matches_the_oracle_everywhere() {
    let (_, run) = profile_example(
        "scenarios",
        &[
            "--profile",
            "nolto",
            "--bin",
            "workload",
            "--samples",
            "500",
        ],
    );
    let elf = run.join("firmware.elf");
    assert!(discarded_over_live_code(&elf) > 100);
    assert!(check_image(&elf) > 100);
}

#[test]
fn the_same_firmware_with_lto_matches_the_oracle_everywhere() {
    let (_, run) = profile_example("rtic-app", &["--release", "--bin", "tasks", "-n", "500"]);
    assert!(check_image(&run.join("firmware.elf")) > 100);
}

#[test]
fn cortex_m0_and_armv8_a_images_match_the_oracle_everywhere() {
    let (_, run) = profile_example("microbit-m0", &["--release", "--samples", "300"]);
    assert!(check_image(&run.join("firmware.elf")) > 20);
    let (_, run) = profile_example(
        "aarch64-pmu",
        &["--release", "--bin", "hot-loops", "--samples", "300"],
    );
    assert!(check_image(&run.join("firmware.elf")) > 20);
}
