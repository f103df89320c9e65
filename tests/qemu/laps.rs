//! Lap timing in real QEMU against exact instruction counts of the same run: the lap's own
//! cost is subtracted correctly (a region's corrected lap is the instructions of the code in
//! it), and the interrupt's cost the host infers from the lap distributions (clusters, and the
//! rate in the region's name) is the handler's exact instruction count per call.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::support::profile_in;
use serde_json::Value;

/// Exact executions per address of the run (`exact.counts`: a magic, then (pc, count) pairs).
fn exact_counts(run: &Path) -> HashMap<u64, u64> {
    let bytes = std::fs::read(run.join("exact.counts")).unwrap();
    assert_eq!(&bytes[..8], b"SMPLEXC1");
    bytes[8..]
        .chunks_exact(16)
        .map(|p| {
            (
                u64::from_le_bytes(p[..8].try_into().unwrap()),
                u64::from_le_bytes(p[8..].try_into().unwrap()),
            )
        })
        .collect()
}

/// Instructions a function executes per call: all its instructions over its entry's count.
fn per_call(run: &Path, name: &str) -> f64 {
    use object::{Object, ObjectSymbol};
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let sym = file.symbols().find(|s| s.name() == Ok(name)).unwrap();
    let (start, end) = (sym.address() & !1, (sym.address() & !1) + sym.size());
    let counts = exact_counts(run);
    let total: u64 = counts
        .iter()
        .filter(|(pc, _)| (start..end).contains(*pc))
        .map(|(_, n)| n)
        .sum();
    total as f64 / counts[&start] as f64
}

fn region<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["laps"]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no region {name}"))
}

#[test]
fn laps_reproduce_the_lap_timer_experiments_against_exact_counts() {
    let (r, run) = profile_in("laps", &["--laps", "--truth"]);
    let laps = &r["laps"];
    assert_eq!(laps["counter"], "SysTick");
    let overhead = laps["overhead"].as_f64().unwrap();
    assert!(overhead > 0.0 && overhead < 40.0, "{overhead}");

    // The lap's own cost is subtracted exactly: an empty lap is left with nothing (a SysTick
    // tick is 0.625 instructions, and each end of a lap reads it to a tick).
    let empty = region(&r, "empty");
    assert!(empty["median"].as_f64().unwrap().abs() <= 1.3, "{empty}");
    // The undisturbed region: one cluster, and the corrected lap is the code in it:
    // sum_array's instructions and the closure's few around the call (the closure is a
    // function of its own, called through the one copy of the lap code every region shares:
    // its frame, the argument, the call, the result; 9 here).
    let quiet = region(&r, "sum_array");
    assert_eq!(quiet["calls"], 200);
    assert_eq!(quiet["clusters"].as_array().unwrap().len(), 1);
    let work = exact_function(&run, "laps::sum_array");
    let lap = quiet["median"].as_f64().unwrap();
    assert!(
        (0.0..=12.0).contains(&(lap - work)),
        "corrected lap {lap} against {work} instructions of sum_array"
    );
    // Two regions of the same shape differ by exactly the instructions their work differs by.
    let half = exact_function(&run, "laps::sum_half");
    let lap_half = region(&r, "sum_array/2")["median"].as_f64().unwrap();
    assert!(
        ((lap - lap_half) - (work - half)).abs() <= 1.3,
        "laps {lap} - {lap_half} against exact {work} - {half}"
    );

    // The handler's exact cost per call, and every inference of it within 1-2 instructions.
    let isr = per_call(&run, "TIMER1");
    eprintln!("TIMER1: {isr} instructions a call; sum_array {work}, lap {lap}");
    for name in [
        "sum_array @ 12.5 kHz",
        "sum_array @ 50 kHz",
        "executive @ 12.5 kHz",
    ] {
        let g = region(&r, name);
        let inferred = g["interference"].as_array().unwrap();
        assert_eq!(inferred.len(), 2, "{name}: clusters and rate");
        for i in inferred {
            let cost = i["per_occurrence"].as_f64().unwrap();
            assert!(
                (cost - isr).abs() <= 1.5,
                "{name} ({}): {cost} against the handler's {isr} instructions",
                i["method"]
            );
        }
    }
    // At 50 kHz (a period of 500 ticks, a lap of about 2 100) every lap is hit 4 or 5 times.
    let fast = region(&r, "sum_array @ 50 kHz");
    let hits: Vec<u64> = fast["interference"][0]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h[0].as_u64().unwrap())
        .collect();
    assert_eq!(hits, vec![4, 5]);
    // The cyclic executive's rate: iterations per second of the emulated 25 MHz clock.
    let exec = region(&r, "executive");
    let hz = exec["rate_hz"].as_f64().unwrap();
    let mean = exec["mean_us"].as_f64().unwrap();
    assert!((hz * mean / 1e6 - 1.0).abs() < 1e-9);
}

/// Instructions per call of the function whose demangled name ends with `name`.
fn exact_function(run: &Path, name: &str) -> f64 {
    use object::{Object, ObjectSymbol};
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let sym = file
        .symbols()
        .find(|s| {
            s.name()
                .map(|n| rustc_demangle::demangle(n).to_string().contains(name) && s.size() > 0)
                .unwrap_or(false)
        })
        .unwrap_or_else(|| panic!("no symbol for {name}"));
    per_call(run, sym.name().unwrap())
}

#[test]
fn regions_come_beside_the_sampled_profile_and_say_when_they_cannot_be_timed() {
    // Sampling on a CMSDK timer leaves SysTick to the laps: profile and regions in one run.
    let (r, _) = profile_in("laps", &["--timer", "cmsdk", "-n", "2000"]);
    // The firmware ends before 2000 samples; it sends what it took.
    assert!(r["samples"].as_u64().unwrap() > 300);
    assert!(
        crate::support::share(&r, "functions", "laps::sum_array") > 30.0,
        "{}",
        r["functions"]
    );
    assert_eq!(r["laps"]["counter"], "SysTick");
    assert_eq!(region(&r, "sum_array")["calls"], 200);
    let warnings = r["laps"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("`--laps`"))
    );
    // Sampling on SysTick in QEMU (no cycle counter): the laps are counted, not timed.
    let (r, _) = profile_in("laps", &["-n", "2000"]);
    assert_eq!(r["laps"]["counter"], "no counter");
    assert_eq!(region(&r, "sum_array")["unmeasured"], 200);
    assert_eq!(region(&r, "sum_array")["calls"], 0);
}

/// sampler-rt's lap code runs in the firmware's own context while it samples: samples land in
/// it, so the exact count keeps it too (it used to leave out everything named `sampler_rt`,
/// and the lap rows read "sampled, 0.00 % exact", +inf sigma). Its rows then agree within the
/// noise, and no disagreement is reported.
#[test]
fn the_samplers_lap_code_is_counted_where_samples_can_see_it() {
    let (r, _) = profile_in("laps", &["--truth", "-n", "20000"]);
    let mut lap_rows = 0;
    for row in r["functions"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        if !name.starts_with("sampler_rt::laps::") {
            continue;
        }
        lap_rows += 1;
        let exact = row["exact_percent"].as_f64().unwrap();
        if row["samples"].as_u64().unwrap() > 0 {
            assert!(exact > 0.0, "{row}");
        }
    }
    assert!(lap_rows >= 3, "{}", r["functions"]);
    let kinds: Vec<&str> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"disagrees-with-exact"), "{kinds:?}");
}

#[test]
fn laps_timed_while_sampling_are_markers_among_the_samples_of_the_firefox_timeline() {
    let (r, run) = profile_in("laps", &["--timer", "cmsdk", "-n", "2000"]);
    let out = crate::support::cargo_sample(
        &crate::support::scenarios(),
        &["report", run.to_str().unwrap(), "--format", "firefox"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    let thread = &p["threads"][0];
    let (markers, times) = crate::support::firefox_markers(thread);
    // Every lap of every region (the scenario keeps 2048 in its trace), as many as it counted.
    for g in r["laps"]["regions"].as_array().unwrap() {
        let name = g["name"].as_str().unwrap();
        let n = markers.iter().filter(|m| m.name == name).count() as u64;
        assert_eq!(n, g["calls"].as_u64().unwrap(), "{name}");
    }
    let number = |m: &crate::support::FirefoxMarker, k: &str| m.data[k].as_f64().unwrap();
    // A lap with the sampler's interrupt inside is longer by the sampler's cost per sample
    // (about 32 instructions with a CMSDK timer and the lateness check): the samples the firmware counted during a
    // lap are the ones that hit it.
    for region in ["sum_array", "sum_array/2"] {
        let laps: Vec<_> = markers.iter().filter(|m| m.name == region).collect();
        let clean = laps
            .iter()
            .filter(|m| number(m, "samples") == 0.0)
            .map(|m| number(m, "units"))
            .fold(f64::INFINITY, f64::min);
        for m in &laps {
            let extra = number(m, "units") - clean;
            let per_sample = extra / number(m, "samples").max(1.0);
            if number(m, "samples") == 0.0 {
                assert!(extra <= 1.0, "{region}: {m:?} (clean lap {clean})");
            } else {
                assert!(
                    (18.0..40.0).contains(&per_sample),
                    "{region}: {m:?} ({clean})"
                );
            }
        }
        assert!(laps.iter().any(|m| number(m, "samples") > 0.0));
    }
    // Placed where they ran: the samples inside the laps of `sum_array` regions are samples
    // of the summing code (the interrupt's handler in the regions that have one), and the
    // laps hold the samples the firmware counted during them.
    let mut inside = BTreeMap::new();
    let mut held_as_counted = 0;
    for m in &markers {
        let end = m.end.expect("a lap has a length");
        assert!(end >= m.start, "{m:?}");
        let held: Vec<usize> = (0..times.len())
            .filter(|&k| times[k] > m.start && times[k] < end)
            .collect();
        if held.len() as f64 == number(m, "samples") {
            held_as_counted += 1;
        }
        if m.name.starts_with("sum_array") {
            for k in held {
                let stack = thread["samples"]["stack"][k].as_u64().unwrap() as usize;
                let frames = crate::support::firefox_stack(thread, stack);
                *inside.entry(frames[0].clone()).or_insert(0u32) += 1;
            }
        }
    }
    assert!(
        held_as_counted as f64 >= 0.95 * markers.len() as f64,
        "{held_as_counted} of {}",
        markers.len()
    );
    let total: u32 = inside.values().sum();
    let summing: u32 = ["laps::sum_array", "laps::sum_half", "TIMER1"]
        .iter()
        .map(|f| inside.get(*f).copied().unwrap_or(0))
        .sum();
    // (A lap's start is known to a sampling period and the periods vary with the jitter, so
    // a sample at a lap's edge can fall on the wrong side; the firmware's count above is exact.)
    assert!(
        total >= 30 && f64::from(summing) >= 0.95 * f64::from(total),
        "{inside:?}"
    );
}

/// `--laps --cycles`: a `measure` region's laps in estimated cycles, at the CPI of the code its
/// laps ran in the same run's exact call graph. Checked against two things the lap counter
/// does not know: the exact count of the region's body (which differs from the corrected lap
/// only by the empty body's instructions, subtracted with the lap's own cost), and the cycles
/// a separate `--exact --cycles` run of the same ELF gives the work the region wraps
/// (`sum_half`, a leaf: the region adds only its closure's few instructions). A `start()`
/// guard and an iteration are timed from the plugin's lap windows, checked the same way.
#[test]
fn lap_regions_in_estimated_cycles_agree_with_an_exact_run() {
    let (r, run) = profile_in("laps", &["--laps", "--cycles", "--clock", "25000000"]);
    let laps = &r["laps"];
    assert!(
        laps["cycles_model"]
            .as_str()
            .unwrap()
            .starts_with("cortex-m3 timing")
    );
    let cycles = |name: &str| region(&r, name)["cycles"].clone();
    let (half, empty) = (cycles("sum_array/2"), cycles("empty"));
    let lap = region(&r, "sum_array/2")["mean"].as_f64().unwrap();
    let body = half["exact_instructions"].as_f64().unwrap()
        - empty["exact_instructions"].as_f64().unwrap();
    assert!(
        (body - lap).abs() <= 1.3,
        "lap {lap} against {body} exact instructions of its body"
    );
    let mean = half["mean"].as_f64().unwrap();
    assert!(
        (half["cpi"].as_f64().unwrap() - mean / lap).abs() < 1e-9,
        "{half}"
    );
    assert!((half["mean_us"].as_f64().unwrap() - mean / 25.0).abs() < 1e-6);

    let dir = tempfile::tempdir().unwrap();
    let elf = run.join("firmware.elf");
    let out = crate::support::cargo_sample_env(
        dir.path(),
        &[
            "--elf",
            elf.to_str().unwrap(),
            "--machine",
            "mps2-an385",
            "--cycles",
            "--format",
            "json",
        ],
        &[("CARGO_TARGET_DIR", "target")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exact: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = exact["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "laps::sum_half")
        .unwrap();
    // sum_half runs once in each lap of `sum_array/2` and of its guard (a leaf: its own
    // cycles are its calls').
    let calls = region(&r, "sum_array/2")["calls"].as_f64().unwrap()
        + region(&r, "sum_array/2 (guard)")["calls"].as_f64().unwrap();
    assert_eq!(f["instructions"].as_f64().unwrap() / calls, 646.0, "{f}");
    let per_call = f["cycles"].as_f64().unwrap() / calls;
    // The region is sum_half's call and the closure's few instructions around it (a frame, the
    // argument, the call: `lap - 646`), none of which costs more than 3 cycles here.
    assert!(
        mean > per_call && mean - per_call <= 3.0 * (lap - 646.0),
        "region {mean} cycles a lap ({lap} instructions) against sum_half's {per_call} a call"
    );
    // A `start()` guard and an iteration: the plugin's windows at the site of their first
    // call. The guard wraps the same sum_half call: its window holds the call and a few
    // instructions (within a few of the lap the counter gave), and its cycles sum_half's.
    let guard = region(&r, "sum_array/2 (guard)");
    let (glap, gc) = (guard["mean"].as_f64().unwrap(), &guard["cycles"]);
    let window = gc["exact_instructions"].as_f64().unwrap();
    assert!(
        (window - glap).abs() <= 8.0,
        "guard: lap {glap}, window {window}"
    );
    let gmean = gc["mean"].as_f64().unwrap();
    assert!(
        gmean > per_call && gmean - per_call <= 3.0 * (glap - 646.0).max(4.0),
        "guard {gmean} cycles a lap ({glap} instructions) against sum_half's {per_call} a call"
    );
    // The cyclic executive's iteration: fill the array (inlined), then sum_array ten times.
    // Both regions iterate from one call site, so they share one window (and its CPI); the
    // window's instructions a lap lie between the two regions' laps.
    let (e0, e1) = (region(&r, "executive"), region(&r, "executive @ 12.5 kHz"));
    let (m0, m1) = (e0["mean"].as_f64().unwrap(), e1["mean"].as_f64().unwrap());
    let window = e0["cycles"]["exact_instructions"].as_f64().unwrap();
    assert!(
        window > m0 - 20.0 && window < m1 + 20.0,
        "iteration windows of {window} instructions against laps of {m0} and {m1}"
    );
    // sum_array's cycles a call in the exact run of the same ELF (4 600 calls: 600 laps of the
    // summing regions, 10 in each of the 400 iterations): the iteration is ten of them and
    // the fill's few hundred instructions, at most 3 cycles each.
    let s = exact["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "laps::sum_array")
        .unwrap();
    let sum_instructions = s["instructions"].as_f64().unwrap() / 4600.0;
    assert_eq!(sum_instructions.fract(), 0.0, "{s}");
    let sum_cycles = s["cycles"].as_f64().unwrap() / 4600.0;
    let emean = e0["cycles"]["mean"].as_f64().unwrap();
    let rest = m0 - 10.0 * sum_instructions;
    assert!(
        emean > 10.0 * sum_cycles && emean - 10.0 * sum_cycles <= 3.0 * rest,
        "iteration {emean} cycles ({m0} instructions) against 10 x sum_array's {sum_cycles}"
    );
    assert!(laps["cycles_notes"].as_array().is_none_or(|n| n.is_empty()));
}
