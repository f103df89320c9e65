//! Histogram bins to functions. A bin counts the samples of an address range; when the range
//! holds code of several functions the count is split among them by their bytes in the bin
//! (two-byte Thumb slots), as the seed's script does, in whole samples (largest remainder). The
//! mass that was split this way is ambiguous: the report says how much, per function.

use std::collections::HashMap;

use crate::report::diagnose::Diagnostic;
use crate::symbolize::Symbolizer;

/// The address standing for samples outside every bin (outside every function).
pub const OUTSIDE_ADDRESS: u32 = 0xFFFF_FFF0;

/// Per-address counts (each function's share of a bin at its first address in the bin), and a
/// finding when bins shared by several functions hold a noticeable share of the samples.
pub fn split(
    bins: &[u32],
    base: u32,
    bin_size: u32,
    outside: u64,
    sym: &Symbolizer,
) -> (HashMap<u32, u64>, Option<Diagnostic>) {
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    let mut ambiguous: HashMap<String, u64> = HashMap::new();
    let mut total = outside;
    for (i, &count) in bins.iter().enumerate() {
        if count == 0 {
            continue;
        }
        total += count as u64;
        let start = base.wrapping_add(i as u32 * bin_size);
        // Owners in address order: (first address in the bin, name, slots).
        let mut owners: Vec<(u32, String, u32)> = Vec::new();
        for slot in (0..bin_size).step_by(2) {
            let a = start.wrapping_add(slot);
            let Some(name) = sym.function_of(a as u64) else {
                continue;
            };
            match owners.iter_mut().find(|o| o.1 == name) {
                Some(o) => o.2 += 1,
                None => owners.push((a, name.to_owned(), 1)),
            }
        }
        if owners.is_empty() {
            // Padding or data only: keep the samples at the bin's start (outside functions).
            *per_pc.entry(start).or_default() += count as u64;
            continue;
        }
        let slots: u32 = owners.iter().map(|o| o.2).sum();
        let mut parts: Vec<(u64, f64)> = owners
            .iter()
            .map(|o| {
                let exact = count as f64 * o.2 as f64 / slots as f64;
                (exact.floor() as u64, exact - exact.floor())
            })
            .collect();
        let mut left = count as u64 - parts.iter().map(|p| p.0).sum::<u64>();
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by(|&a, &b| parts[b].1.total_cmp(&parts[a].1).then(a.cmp(&b)));
        for &k in &order {
            if left == 0 {
                break;
            }
            parts[k].0 += 1;
            left -= 1;
        }
        for (o, p) in owners.iter().zip(&parts) {
            if p.0 == 0 {
                continue;
            }
            *per_pc.entry(o.0).or_default() += p.0;
            if owners.len() > 1 {
                *ambiguous.entry(o.1.clone()).or_default() += p.0;
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
        Diagnostic {
            kind: "ambiguous-bins",
            severity: "warning",
            message: format!(
                "{:.2} % of the samples are in {bin_size}-byte bins shared by several functions and \
                 were split by bytes, which is a guess: {}. A function that never ran can get \
                 samples this way. Use smaller bins or align functions to the bin size",
                100.0 * shared as f64 / total as f64,
                list.join(", ")
            ),
            percent: Some(100.0 * shared as f64 / total as f64),
            addresses: Vec::new(),
        }
    });
    (per_pc, finding)
}
