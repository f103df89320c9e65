//! `cargo sample bench`: the firmware's benchmarks (`sampler_rt::bench!`) run once in QEMU,
//! every instruction of every iteration counted. Checked against the exact per-address counts
//! of the same run, read here: each routine's instructions a call (its instructions over the
//! count of its first instruction). The gate compares benchmarks like any other metric.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// Instructions a call of the function whose symbol contains `name`, and its calls, from the
/// run's `exact.counts` and ELF.
pub(crate) fn per_call(run: &Path, name: &str) -> (f64, u64) {
    use object::{Object, ObjectSymbol};
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains(name)) && s.size() > 0)
        .unwrap_or_else(|| panic!("no symbol {name}"));
    let (start, end) = (sym.address() & !1, (sym.address() & !1) + sym.size());
    let b = std::fs::read(run.join("exact.counts")).unwrap();
    assert_eq!(&b[..8], b"SMPLEXC1");
    let counts: Vec<(u64, u64)> = b[8..]
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect();
    let total: u64 = counts
        .iter()
        .filter(|(pc, _)| (start..end).contains(pc))
        .map(|c| c.1)
        .sum();
    let calls = counts.iter().find(|c| c.0 == start).unwrap().1;
    (total as f64 / calls as f64, calls)
}

fn bench(extra: &[&str]) -> std::process::Output {
    let mut args = vec!["bench", "--release", "--bin", "benches"];
    args.extend_from_slice(extra);
    cargo_sample_env(&scenarios(), &args, &[("GITHUB_ACTIONS", "false")])
}

#[test]
fn every_iteration_is_counted_and_the_gate_compares_benchmarks() {
    let store = tempfile::tempdir().unwrap();
    let store = store.path().to_str().unwrap().to_owned();
    let out = bench(&[
        "--cycles",
        "--format",
        "json",
        "--save-baseline",
        "main",
        "--baseline-dir",
        &store,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dir_of(&out.stderr);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["laps"]["bench"], true);
    let of = |name: &str| -> Value {
        r["laps"]["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no benchmark {name}"))
            .clone()
    };
    // Each iteration is the routine's call and the few instructions around it (the call, its
    // arguments, the result through `black_box`): the same work every iteration gives one
    // figure; the sort's input, made outside the timed part each time, varies its work.
    for (name, routine, iterations) in [
        ("crc32 of 256 bytes", "crc32", 20),
        ("fir 16 taps x 128", "fir", 100),
        ("insertion sort of 64 words", "insertion_sort", 50),
    ] {
        let g = of(name);
        let e = &g["exact"];
        assert_eq!(e["laps"], iterations, "{name}");
        let (call, calls) = per_call(&run, routine);
        assert_eq!(calls, iterations, "{name}");
        let mean = e["mean"].as_f64().unwrap();
        assert!(
            (0.0..=8.0).contains(&(mean - call)),
            "{name}: {mean} instructions an iteration against {call} a call of {routine}"
        );
        let (min, max) = (e["min"].as_u64().unwrap(), e["max"].as_u64().unwrap());
        if routine == "insertion_sort" {
            assert!(min < max, "{e}");
        } else {
            assert_eq!(min, max, "{e}");
        }
        let c = &g["cycles"];
        assert!(
            (c["mean"].as_f64().unwrap() - mean * c["cpi"].as_f64().unwrap()).abs() < 0.5,
            "{c}"
        );
    }

    // The gate: within its limits against itself; over them against a baseline where the
    // CRC was 5 instructions an iteration faster.
    let limits = [
        "--cycles",
        "--baseline",
        "main",
        "--baseline-dir",
        &store,
        "--limit",
        "bench=+0%",
        "--format",
        "json",
    ];
    let out = bench(&limits);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = Path::new(&store).join("main.json");
    let mut base: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let median = of("crc32 of 256 bytes")["exact"]["median"]
        .as_u64()
        .unwrap();
    assert_eq!(base["metrics"]["bench"]["crc32 of 256 bytes"], median);
    base["metrics"]["bench"]["crc32 of 256 bytes"] = (median - 5).into();
    std::fs::write(&path, serde_json::to_string(&base).unwrap()).unwrap();
    let out = bench(&limits);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let over: Vec<_> = c["comparison"]["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["exceeded"] == true)
        .map(|x| (x["metric"].clone(), x["name"].clone(), x["delta"].clone()))
        .collect();
    assert_eq!(
        over,
        [("bench".into(), "crc32 of 256 bytes".into(), 5.into())],
        "{c}"
    );
}
