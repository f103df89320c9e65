//! `cargo sample report --text-dump`: a C PC-sampling profiler's text dumps (raw PCs, tags, bins)
//! reported against the ELF they came from, checked against a run of our own turned into that
//! format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use crate::support::*;
use object::{Object, ObjectSymbol};
use serde_json::Value;

/// Every sampled address of a run with its count, from the annotated view of all functions.
fn per_pc(r: &Value) -> BTreeMap<u32, u64> {
    r["annotate"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["instructions"].as_array().unwrap())
        .filter(|i| i["count"].as_u64().unwrap() > 0)
        .map(|i| {
            (
                i["addr"].as_u64().unwrap() as u32,
                i["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn by_function(r: &Value) -> BTreeMap<String, u64> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["samples"].as_u64().unwrap() > 0)
        .map(|row| {
            (
                row["name"].as_str().unwrap().to_owned(),
                row["samples"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn report(dump: &Path, elf: &Path, extra: &[&str]) -> (bool, Value, String) {
    let mut args = vec![
        "report",
        "--text-dump",
        dump.to_str().unwrap(),
        "--elf",
        elf.to_str().unwrap(),
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = cargo_sample(&scenarios(), &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), v, err)
}

/// The samples in a shuffled order (xorshift), as a firmware would have taken them.
fn shuffled(counts: &BTreeMap<u32, u64>) -> Vec<u32> {
    let mut v: Vec<u32> = counts
        .iter()
        .flat_map(|(&pc, &n)| std::iter::repeat_n(pc, n as usize))
        .collect();
    let mut x = 0x2545_F491u32;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.swap(i, x as usize % (i + 1));
    }
    v
}

fn lines(prefix: &str, words: &[u32], per_line: usize, width: usize) -> String {
    let mut s = String::new();
    for chunk in words.chunks(per_line) {
        s.push_str(prefix);
        for w in chunk {
            let _ = write!(s, " {w:0width$x}");
        }
        s.push('\n');
    }
    s
}

#[test]
fn raw_pcs_and_tags_report_as_the_run_did() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "5000", "--annotate", "50"]);
    let elf = dir.join("firmware.elf");
    let pcs = shuffled(&per_pc(&r));
    assert_eq!(pcs.len(), 5000);
    // Tags: the sampler's state object for even samples, an unknown address for odd ones.
    let data = std::fs::read(&elf).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let state = file
        .symbols()
        .find(|s| s.name() == Ok("SAMPLER_RT_STATE"))
        .unwrap()
        .address() as u32;
    let tags: Vec<u32> = (0..pcs.len())
        .map(|i| if i % 2 == 0 { state } else { 0x1234_5678 })
        .collect();
    let text = format!(
        "span=50000000\nprof raw n=5000{}{}end\n",
        "\n".to_owned() + &lines("p", &pcs, 8, 8),
        lines("g", &tags, 8, 8)
    );
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("dump.txt");
    std::fs::write(&path, text).unwrap();
    let (ok, t, err) = report(&path, &elf, &[]);
    assert!(ok, "{err}");
    assert_eq!(by_function(&t), by_function(&r));
    assert_eq!(t["samples"], 5000);
    let tag_rows = rows(&t, "tags");
    assert_eq!(
        tag_rows,
        BTreeMap::from([
            ("SAMPLER_RT_STATE".to_owned(), 2500),
            ("0x12345678".to_owned(), 2500)
        ])
    );
    assert!(
        t["tag_functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["name"] == "SAMPLER_RT_STATE / hot_a")
    );
    // Nothing to warn about in a fair sample; the missing period is not guessed at.
    assert_eq!(t["diagnostics"], serde_json::json!([]));
}

/// The C profiler's split of a bin among the functions whose bytes it holds, in fractions.
fn seed_split(counts: &[u32], base: u32, size: u32, elf: &Path) -> BTreeMap<String, f64> {
    let data = std::fs::read(elf).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut funcs: Vec<(u32, u32, String)> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .filter(|s| !s.name().unwrap_or("$").starts_with('$'))
        .map(|s| {
            let a = s.address() as u32 & !1;
            // `{:#}` drops the hash, as the report does.
            let name = format!("{:#}", rustc_demangle::demangle(s.name().unwrap()));
            (a, a + s.size() as u32, name)
        })
        .collect();
    funcs.sort();
    let owner = |a: u32| -> Option<String> {
        funcs
            .iter()
            .rev()
            .find(|f| f.0 <= a && a < f.1)
            .map(|f| f.2.clone())
    };
    let mut out = BTreeMap::new();
    for (i, &n) in counts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let start = base + i as u32 * size;
        let owners: Vec<String> = (start..start + size).step_by(2).filter_map(owner).collect();
        for o in &owners {
            *out.entry(o.clone()).or_default() += n as f64 / owners.len() as f64;
        }
    }
    out
}

#[test]
fn bins_are_split_by_bytes_and_the_guess_is_flagged() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "5000", "--annotate", "50"]);
    let elf = dir.join("firmware.elf");
    let counts = per_pc(&r);
    let tmp = tempfile::tempdir().unwrap();
    for shift in [1u32, 4] {
        let size = 1u32 << shift;
        let top = counts.keys().max().unwrap() / size + 1;
        let mut bins = vec![0u32; top as usize];
        for (&pc, &n) in &counts {
            bins[(pc / size) as usize] += n as u32;
        }
        let text = format!(
            "prof hist base=0x00000000 shift={shift} n=5000 out=0\n{}end\n",
            lines("h", &bins, 16, 4)
        );
        let path = tmp.path().join(format!("hist{shift}.txt"));
        std::fs::write(&path, text).unwrap();
        let (ok, t, err) = report(&path, &elf, &["--bin-split", "bytes"]);
        assert!(ok, "{err}");
        let got = by_function(&t);
        assert_eq!(got.values().sum::<u64>(), 5000);
        let ambiguous: Vec<&Value> = t["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"] == "ambiguous-bins")
            .collect();
        if shift == 1 {
            // Two-byte bins hold one Thumb instruction: exactly the raw profile, no guess.
            assert_eq!(got, by_function(&r));
            assert!(ambiguous.is_empty());
        } else {
            // The C profiler's split, to the sample, and flagged as a guess.
            let expected = seed_split(&bins, 0, size, &elf);
            for (name, want) in &expected {
                let have = got.get(name).copied().unwrap_or(0) as f64;
                assert!((have - want).abs() <= 1.0, "{name}: {have} vs {want}");
            }
            assert_eq!(ambiguous.len(), 1, "{:?}", t["diagnostics"]);
        }
    }
}

#[test]
fn a_damaged_text_dump_is_refused_with_its_line() {
    let (_, dir) = profile_in("hot-loops", &["--samples", "100"]);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bad.txt");
    std::fs::write(&path, "prof raw n=2\np 000011c4 0000zz\nend\n").unwrap();
    let (ok, _, err) = report(&path, &dir.join("firmware.elf"), &[]);
    assert!(!ok);
    assert!(err.contains("line 2") && err.contains("0000zz"), "{err}");
}
