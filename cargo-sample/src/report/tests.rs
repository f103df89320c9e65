//! The aggregation on the committed fixture ELF (`tests/fixtures/hot-loops.elf`), against
//! the function symbols read here with `object` and demangled with `rustc-demangle`: what
//! each row must hold follows from the samples placed, not from the code under test.

use std::collections::BTreeMap;

use object::{Object, ObjectSymbol, SymbolKind};

use super::*;

fn fixture() -> Vec<u8> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hot-loops.elf");
    std::fs::read(path).unwrap()
}

/// `(start, end, name)` of the function symbols whose name contains `part`.
fn function(elf: &[u8], part: &str) -> (u32, u32, String) {
    let file = object::File::parse(elf).unwrap();
    let s = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .find(|s| s.name().is_ok_and(|n| n.contains(part)))
        .unwrap_or_else(|| panic!("no function symbol with {part}"));
    let start = (s.address() & !1) as u32;
    let name = format!("{:#}", rustc_demangle::demangle(s.name().unwrap()));
    (start, start + s.size() as u32, name)
}

fn facts(taken: u32) -> Facts {
    Facts {
        firmware: "hot-loops.elf".into(),
        machine: "mps2-an385".into(),
        unit: "instructions".into(),
        on_events: false,
        foreign_interrupts: 0,
        timer: "SysTick".into(),
        timer_hz: 25_000_000,
        period_ticks: 16_000.0,
        period_units: 10_000.0,
        jitter_ticks: 0,
        priority: 0,
        taken,
        lost: 0,
        overwritten: 0,
        requested: taken,
        stop: "sample limit reached".into(),
        source: crate::runs::Source::Dump,
        duration_units: 0.0,
    }
}

/// Samples on every halfword of three functions (1, 2, 3 per address: unequal shares), and
/// 7 beyond every function.
fn placed(elf: &[u8]) -> (Samples, BTreeMap<String, u64>) {
    let mut samples = Samples::default();
    let mut expected = BTreeMap::new();
    for (weight, part) in [(1u64, "hot_a"), (2, "hot_b"), (3, "hot_c")] {
        let (start, end, name) = function(elf, part);
        for pc in (start..end).step_by(2) {
            samples.per_pc.insert(pc, weight);
            *expected.entry(name.clone()).or_default() += weight;
        }
    }
    samples.per_pc.insert(0x7FFF_FFF0, 7);
    expected.insert(OUTSIDE.to_owned(), 7);
    (samples, expected)
}

#[test]
fn rows_hold_the_samples_of_their_symbol_with_intervals_around_the_share() {
    let elf = fixture();
    let mut sym = Symbolizer::new(std::path::Path::new("hot-loops.elf"), &elf, None).unwrap();
    let (samples, expected) = placed(&elf);
    let total: u64 = expected.values().sum();
    let r = build_samples(
        &samples,
        &mut sym,
        None,
        facts(total as u32),
        None,
        Options::default(),
        &[],
    );
    assert_eq!(r.samples, Some(total));
    let got: BTreeMap<String, u64> = r
        .functions
        .iter()
        .map(|row| (row.name.clone(), row.count))
        .collect();
    assert_eq!(got, expected);
    for row in &r.functions {
        let share = 100.0 * row.count as f64 / total as f64;
        assert!((row.percent - share).abs() < 1e-9, "{row:?}");
        let [lo, hi] = row.ci95.unwrap();
        assert!(lo < row.percent && row.percent < hi, "{row:?}");
        assert!(lo >= 0.0 && hi <= 100.0, "{row:?}");
    }
    // Largest first.
    assert!(r.functions.windows(2).all(|w| w[0].count >= w[1].count));
    // The other tables share out the same samples, each row inside one function.
    for table in [&r.inlined, &r.lines] {
        assert_eq!(table.iter().map(|row| row.count).sum::<u64>(), total);
        let mut per_function: BTreeMap<String, u64> = BTreeMap::new();
        for row in table {
            let f = row.function.clone().expect("a row names its function");
            *per_function.entry(f).or_default() += row.count;
        }
        assert_eq!(per_function, expected);
    }
    // Every address the code ran at appears once among the per-address counts.
    assert_eq!(r.per_pc.len(), samples.per_pc.len());
    assert_eq!(r.distinct_pcs, samples.per_pc.len());
}

#[test]
fn exact_shares_and_errors_are_against_the_exact_counts_of_the_same_functions() {
    let elf = fixture();
    let mut sym = Symbolizer::new(std::path::Path::new("hot-loops.elf"), &elf, None).unwrap();
    let (samples, expected) = placed(&elf);
    let total: u64 = expected.values().sum();
    // Exact counts: 10 per halfword of hot_a, 40 of hot_b, nothing in hot_c.
    let mut exact = Vec::new();
    let mut exact_per_function: BTreeMap<String, u64> = BTreeMap::new();
    for (n, part) in [(10u64, "hot_a"), (40, "hot_b")] {
        let (start, end, name) = function(&elf, part);
        for pc in (start..end).step_by(2) {
            exact.push((pc | 1, n));
            *exact_per_function.entry(name.clone()).or_default() += n;
        }
    }
    let exact_total: u64 = exact_per_function.values().sum();
    let r = build_samples(
        &samples,
        &mut sym,
        None,
        facts(total as u32),
        Some(&exact),
        Options::default(),
        &[],
    );
    assert_eq!(r.exact_instructions, Some(exact_total));
    let mut worst: f64 = 0.0;
    for row in &r.functions {
        let want = 100.0 * exact_per_function.get(&row.name).copied().unwrap_or(0) as f64
            / exact_total as f64;
        let got = row.exact_percent.unwrap();
        assert!((got - want).abs() < 1e-9, "{row:?}: exact {want}");
        let err = row.error_points.unwrap();
        assert!((err - (row.percent - want)).abs() < 1e-9, "{row:?}");
        worst = worst.max(err.abs());
    }
    assert!((r.max_error_points.unwrap() - worst).abs() < 1e-9);
}

#[test]
fn an_exact_report_counts_instructions_per_function() {
    let elf = fixture();
    let mut sym = Symbolizer::new(std::path::Path::new("hot-loops.elf"), &elf, None).unwrap();
    let (samples, expected) = placed(&elf);
    let counts: Vec<(u32, u64)> = samples.per_pc.iter().map(|(&pc, &n)| (pc, n)).collect();
    let facts = ExactFacts {
        firmware: "hot-loops.elf".into(),
        machine: "mps2-an385".into(),
        counted_by: "test".into(),
        stop: "finished".into(),
        instruction_budget: None,
    };
    let r = build_exact(&mut sym, None, facts, &counts, Options::default());
    let total: u64 = expected.values().sum();
    assert_eq!(r.instructions, Some(total));
    let got: BTreeMap<String, u64> = r
        .functions
        .iter()
        .map(|row| (row.name.clone(), row.instructions.unwrap()))
        .collect();
    assert_eq!(got, expected);
    assert!(r.functions.iter().all(|row| row.ci95.is_none()));
}
