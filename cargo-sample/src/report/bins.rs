//! Histogram bins to functions. A bin counts the samples of an address range; when the range
//! holds code of several functions its count must be shared among them, which is a guess.
//!
//! Two ways to guess, in whole samples (largest remainder):
//! - `bytes`, the C profiler's: by each function's bytes in the bin (two-byte Thumb slots). A function
//!   that never ran gets samples because it sits next to one that did.
//! - `density` (the default): by its bytes times its density, the samples per byte it is
//!   estimated to have, found by expectation-maximisation: start from the bytes split, give
//!   each function the samples it got over all its bytes (cold bins included), split again,
//!   until nothing moves. That is the most likely split if a function's samples are spread
//!   evenly over its bytes: a function whose other bins are empty gets next to nothing from a
//!   shared one.
//!
//! sampler-rt's own code is never an owner: a sampler cannot sample itself. Either way the mass
//! that was shared is reported, per function.

use std::collections::HashMap;

use crate::image::symbolize::Symbolizer;
use crate::report::model::{Diagnostic, Finding, Severity};

/// The address standing for samples outside every bin (outside every function).
pub const OUTSIDE_ADDRESS: u32 = 0xFFFF_FFF0;

/// How a shared bin is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Bytes,
    Density,
}

/// The owners of a bin: `(first address in the bin, name, two-byte slots)`, in address order.
pub fn owners(sym: &Symbolizer, start: u32, bin_size: u32) -> Vec<(u32, String, u32)> {
    let mut owners: Vec<(u32, String, u32)> = Vec::new();
    for slot in (0..bin_size).step_by(2) {
        let a = start.wrapping_add(slot);
        if sym.is_sampler(a as u64) {
            continue;
        }
        let Some(name) = sym.function_of(a as u64) else {
            continue;
        };
        match owners.iter_mut().find(|o| o.1 == name) {
            Some(o) => o.2 += 1,
            None => owners.push((a, name.to_owned(), 1)),
        }
    }
    owners
}

/// Share `count` by `weights` in whole units, largest remainders first.
fn apportion(count: u64, weights: &[f64]) -> Vec<u64> {
    let sum: f64 = weights.iter().sum();
    if sum <= 0.0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<f64> = weights.iter().map(|w| count as f64 * w / sum).collect();
    let mut parts: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
    let mut left = count - parts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    for &k in &order {
        if left == 0 {
            break;
        }
        parts[k] += 1;
        left -= 1;
    }
    parts
}

/// Per-address counts (each function's share of a bin at its first address in the bin), and a
/// finding when bins shared by several functions hold a noticeable share of the samples.
pub fn split(
    bins: &[u64],
    base: u32,
    bin_size: u32,
    outside: u64,
    sym: &Symbolizer,
    how: Split,
) -> (HashMap<u32, u64>, Option<Diagnostic>) {
    let owners_of: Vec<Vec<(u32, String, u32)>> = bins
        .iter()
        .enumerate()
        .map(|(i, _)| owners(sym, base.wrapping_add(i as u32 * bin_size), bin_size))
        .collect();
    // Every function's slots over all bins, sampled or not.
    let mut slots: HashMap<&str, f64> = HashMap::new();
    for o in &owners_of {
        for (_, name, n) in o {
            *slots.entry(name.as_str()).or_default() += *n as f64;
        }
    }
    let mut density: HashMap<&str, f64> = slots.keys().map(|&k| (k, 1.0)).collect();
    if how == Split::Density {
        for _ in 0..200 {
            let mut mass: HashMap<&str, f64> = HashMap::new();
            for (o, &count) in owners_of.iter().zip(bins) {
                if count == 0 || o.is_empty() {
                    continue;
                }
                let w: Vec<f64> = o
                    .iter()
                    .map(|x| x.2 as f64 * density[x.1.as_str()])
                    .collect();
                let sum: f64 = w.iter().sum();
                if sum <= 0.0 {
                    continue;
                }
                for (x, wi) in o.iter().zip(&w) {
                    *mass.entry(x.1.as_str()).or_default() += count as f64 * wi / sum;
                }
            }
            let mut moved = 0.0f64;
            for (name, d) in density.iter_mut() {
                let new = mass.get(name).copied().unwrap_or(0.0) / slots[name];
                moved = moved.max((new - *d).abs() / new.max(*d).max(1e-12));
                *d = new;
            }
            if moved < 1e-9 {
                break;
            }
        }
    }
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    let mut ambiguous: HashMap<String, u64> = HashMap::new();
    let mut total = outside;
    for (i, (o, &count)) in owners_of.iter().zip(bins).enumerate() {
        if count == 0 {
            continue;
        }
        total += count;
        if o.is_empty() {
            // Padding or data only: keep the samples at the bin's start (outside functions).
            let start = base.wrapping_add(i as u32 * bin_size);
            *per_pc.entry(start).or_default() += count;
            continue;
        }
        let bytes: Vec<f64> = o.iter().map(|x| x.2 as f64).collect();
        let weights: Vec<f64> = match how {
            Split::Bytes => bytes.clone(),
            Split::Density => {
                let w: Vec<f64> = o
                    .iter()
                    .map(|x| x.2 as f64 * density[x.1.as_str()])
                    .collect();
                if w.iter().sum::<f64>() > 0.0 {
                    w
                } else {
                    bytes.clone()
                }
            }
        };
        let parts = apportion(count, &weights);
        for (x, &p) in o.iter().zip(&parts) {
            if p == 0 {
                continue;
            }
            *per_pc.entry(x.0).or_default() += p;
            if o.len() > 1 {
                *ambiguous.entry(x.1.clone()).or_default() += p;
            }
        }
    }
    if outside > 0 {
        *per_pc.entry(OUTSIDE_ADDRESS).or_default() += outside;
    }
    let shared: u64 = ambiguous.values().sum();
    let finding = (total > 0 && shared * 100 >= total).then(|| {
        let mut by: Vec<(String, u64)> = ambiguous.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let list: Vec<String> = by
            .iter()
            .take(6)
            .map(|(n, k)| format!("{n} {:.2} %", 100.0 * *k as f64 / total as f64))
            .collect();
        let method = match how {
            Split::Bytes => "by bytes",
            Split::Density => "by bytes and each function's estimated samples per byte",
        };
        Diagnostic {
            kind: Finding::AmbiguousBins,
            severity: Severity::Warning,
            message: format!(
                "{:.2} % of the samples are in {bin_size}-byte bins shared by several functions and \
                 were split {method}, which is a guess: {}. A function that never ran can get \
                 samples this way. Use smaller bins, or align functions to the bin size (`--align \
                 {bin_size}`; `cargo sample advise` compares the choices)",
                100.0 * shared as f64 / total as f64,
                list.join(", ")
            ),
            percent: Some(100.0 * shared as f64 / total as f64),
            addresses: Vec::new(),
            functions: Vec::new(),
        }
    });
    (per_pc, finding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_samples_follow_the_weights() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]), [4, 3, 3]);
        assert_eq!(apportion(7, &[3.0, 0.0]), [7, 0]);
        assert_eq!(apportion(5, &[0.0, 0.0]), [0, 0]);
        assert_eq!(apportion(100, &[1.0, 3.0]).iter().sum::<u64>(), 100);
    }

    #[test]
    fn density_keeps_a_cold_neighbour_cold() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        let sym = Symbolizer::new(&path, &data, None).unwrap();
        // hot_a is 0xfee..0xffc and hot_b follows: 16-byte bins from 0xfe0 share 0xff0..0x1000.
        // All samples in hot_a's loop; hot_b's own bins (from 0x1000) are empty.
        let mut bins = vec![0u64; 4];
        bins[1] = 1000; // 0xff0..0x1000: hot_a's loop and hot_b's first four bytes
        let (bytes, _) = split(&bins, 0xfe0, 16, 0, &sym, Split::Bytes);
        let (density, d) = split(&bins, 0xfe0, 16, 0, &sym, Split::Density);
        let of = |m: &HashMap<u32, u64>, name: &str| -> u64 {
            m.iter()
                .filter(|(a, _)| sym.function_of(**a as u64) == Some(name))
                .map(|(_, n)| n)
                .sum()
        };
        assert!(
            of(&bytes, "hot_b") > 0,
            "the byte split gives hot_b samples"
        );
        assert_eq!(of(&density, "hot_b"), 0, "{density:?}");
        assert_eq!(of(&density, "hot_a"), 1000);
        assert!(d.is_some(), "still flagged as a guess");
    }
}
