//! Lap-timed regions: what the host makes of the dump's LAPS record: the lap's own
//! cost subtracted, min/median/max, the clusters of the distribution, and for a multi-modal
//! one the cost of the interrupting work per occurrence and how often it hit.
//!
//! Two inferences, both from measurements only:
//! - clusters: laps of the same work that an interrupt hit k times lie near `B + k I`; the
//!   spacing of the clusters, fitted over all of them, is `I`;
//! - rates: a region named `work @ 5 kHz` is `work` with an interrupt at 5 kHz. With a region
//!   named `work` measured without it, the mean lap grows by `k I` where `k` is the mean
//!   number of interrupts in a lap (the lap's length over the interrupt's period), so
//!   `I = (N - B) / k`. This is how a cyclic executive's iteration time gives the cost of an
//!   interrupt.

use serde::Serialize;

use sampler_rt::wire;

use crate::dump::laps::Laps;

/// How counter ticks become the report's unit and time.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// Units (instructions in QEMU, cycles on a board) per counter tick.
    pub units_per_tick: f64,
    /// Counter ticks per second, if known.
    pub hz: Option<f64>,
}

/// A cluster of lap values.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cluster {
    /// Weighted mean, in units, the lap's own cost subtracted.
    pub center: f64,
    pub laps: u64,
    pub percent: f64,
}

/// The interrupting work inferred from a region's laps.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Interference {
    /// Units per occurrence.
    pub per_occurrence: f64,
    /// `clusters` (their spacing) or `rate` (mean lap against the undisturbed region and the
    /// interrupt rate in the name).
    pub method: &'static str,
    /// Occurrences per lap and the share of laps with that many (clusters only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<(u32, f64)>,
    /// The undisturbed region used as the base, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_region: Option<String>,
    /// Mean occurrences per lap.
    pub mean_occurrences: f64,
}

/// A region in the report.
#[derive(Debug, Clone, Serialize)]
pub struct RegionReport {
    pub name: String,
    /// `region` or `iteration`.
    pub kind: &'static str,
    pub calls: u32,
    pub unmeasured: u32,
    /// Laps beyond the table of distinct values (not in median or clusters).
    pub overflow: u32,
    /// In units, the lap's own cost subtracted.
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    /// The mean in microseconds, when the counter's clock is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_us: Option<f64>,
    /// Iterations per second (iterations only, clock known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_hz: Option<f64>,
    pub clusters: Vec<Cluster>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interference: Vec<Interference>,
    /// With `--cycles`: the laps in estimated cycles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<RegionCycles>,
    /// Every lap's instructions as QEMU ran them (the plugin's lap windows of a `start()` guard
    /// or an iteration that no other region shares its call site with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<ExactLaps>,
}

/// A region's laps in instructions, each counted exactly: the instructions run between the
/// lap calls, outside sampler-rt's lap code.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExactLaps {
    pub laps: u64,
    pub min: u64,
    pub median: u64,
    pub max: u64,
    pub mean: f64,
}

/// A region's laps in estimated cycles: each lap's instructions (the lap's own cost
/// subtracted) at the cycles per instruction of the code the region's laps ran, which the exact
/// call graph of the same run holds under the region's body (everything it called, and the
/// interrupts it took, included).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RegionCycles {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    /// Estimated cycles per instruction of the body's code over all its laps.
    pub cpi: f64,
    /// The body's instructions per lap in the exact count (an independent reading of what the
    /// lap counter measured: the two differ by the empty body's few instructions).
    pub exact_instructions: f64,
    /// The mean in microseconds at `--clock HZ`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_us: Option<f64>,
}

/// All regions of a run.
#[derive(Debug, Clone, Serialize)]
pub struct LapsReport {
    /// `DWT CYCCNT`, `SysTick`, or `no counter`.
    pub counter: &'static str,
    /// A lap's own cost in units (subtracted from every lap).
    pub overhead: f64,
    pub regions: Vec<RegionReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// With `--cycles`: the timing model the cycles are estimated with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles_model: Option<String>,
    /// With `--cycles`: what could not be given in cycles, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cycles_notes: Vec<String>,
    /// `cargo sample bench`: the regions are benchmarks, their laps iterations.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bench: bool,
}

/// Adjacent distinct values at most this far apart (in counter ticks) belong to one cluster:
/// the reading's own resolution (a tick at each end) and a tick of slack. A distribution that
/// spreads continuously (caches, wait states) chains into one cluster; an interrupt's cost
/// stands out as a gap.
fn tolerance(_v: f64) -> f64 {
    3.0
}

/// Group sorted `(value, count)` pairs into clusters of nearby values.
fn clusters(values: &[(f64, u64)]) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64, f64)> = Vec::new(); // (weighted sum, count, last value)
    for &(v, c) in values {
        match out.last_mut() {
            Some(last) if v - last.2 <= tolerance(v) => {
                last.0 += v * c as f64;
                last.1 += c;
                last.2 = v;
            }
            _ => out.push((v * c as f64, c, v)),
        }
    }
    out.into_iter()
        .map(|(s, c, _)| (s / c.max(1) as f64, c))
        .collect()
}

/// The spacing that best explains cluster centers as `base + k I` (weighted least squares over
/// the integer k each cluster gets), with the k of each.
fn spacing(centers: &[(f64, u64)], base: f64) -> Option<(f64, Vec<u32>)> {
    let first = centers.first()?.0;
    let gap = centers
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .fold(f64::INFINITY, f64::min);
    if !gap.is_finite() || gap <= 0.0 {
        return None;
    }
    // A first guess from the smallest gap; the lowest cluster's own count from the base.
    let k0 = ((first - base) / gap).round().max(0.0);
    let ks: Vec<f64> = centers
        .iter()
        .map(|c| k0 + ((c.0 - first) / gap).round())
        .collect();
    let (mut num, mut den) = (0.0, 0.0);
    for (c, k) in centers.iter().zip(&ks) {
        num += k * (c.0 - base) * c.1 as f64;
        den += k * k * c.1 as f64;
    }
    if den == 0.0 {
        return None;
    }
    Some((num / den, ks.iter().map(|&k| k as u32).collect()))
}

/// An interrupt rate in a region's name: `work @ 5 kHz` (Hz, kHz, MHz).
pub fn rate_in(name: &str) -> Option<(String, f64)> {
    let (base, cond) = name.split_once('@')?;
    let t = cond.trim().to_ascii_lowercase().replace(' ', "");
    let (num, scale) = if let Some(v) = t.strip_suffix("mhz") {
        (v, 1e6)
    } else if let Some(v) = t.strip_suffix("khz") {
        (v, 1e3)
    } else if let Some(v) = t.strip_suffix("hz") {
        (v, 1.0)
    } else {
        return None;
    };
    let v: f64 = num.parse().ok()?;
    (v > 0.0).then(|| (base.trim().to_owned(), v * scale))
}

/// A region's statistics with the counter's overhead taken out.
struct Raw {
    corrected: Vec<(f64, u64)>,
    mean: f64,
    clusters: Vec<(f64, u64)>,
}

impl Raw {
    fn of(r: &crate::dump::laps::Region, over: f64) -> Raw {
        let mut corrected: Vec<(f64, u64)> = r
            .values
            .iter()
            .map(|&(v, c)| ((v as f64 - over).max(0.0), c as u64))
            .collect();
        corrected.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mean = if r.calls == 0 {
            0.0
        } else {
            r.sum as f64 / r.calls as f64 - over
        };
        let clusters = clusters(&corrected);
        Raw {
            corrected,
            mean,
            clusters,
        }
    }
}

/// What interrupts cost a region, inferred from its clusters (against a base region's time
/// when one is named) and from a rate in its name.
fn interference(
    raw: &Raw,
    base: Option<&(String, &Raw)>,
    named: Option<&(String, f64)>,
    total: u64,
    scale: Scale,
    over: f64,
) -> Vec<Interference> {
    let u = scale.units_per_tick;
    let mut interference = Vec::new();
    if raw.clusters.len() >= 2 {
        // The lowest cluster is the undisturbed time unless a base region says otherwise.
        let b = match &base {
            Some((_, braw)) if braw.clusters.len() == 1 => braw.clusters[0].0,
            _ => raw.clusters[0].0,
        };
        if let Some((i, ks)) = spacing(&raw.clusters, b) {
            let mut hits: Vec<(u32, f64)> = Vec::new();
            for (c, k) in raw.clusters.iter().zip(ks) {
                match hits.iter_mut().find(|h| h.0 == k) {
                    Some(h) => h.1 += c.1 as f64,
                    None => hits.push((k, c.1 as f64)),
                }
            }
            let n = total.max(1) as f64;
            let mean_k = hits.iter().map(|h| h.0 as f64 * h.1).sum::<f64>() / n;
            interference.push(Interference {
                per_occurrence: i * u,
                method: "clusters",
                hits: hits.into_iter().map(|(k, c)| (k, 100.0 * c / n)).collect(),
                base_region: base
                    .as_ref()
                    .filter(|(_, braw)| braw.clusters.len() == 1)
                    .map(|(name, _)| name.clone()),
                mean_occurrences: mean_k,
            });
        }
    }
    if let (Some((_, rate)), Some((bname, braw)), Some(hz)) = (named, base, scale.hz) {
        // Mean occurrences in a lap: its length over the interrupt's period.
        let period = hz / rate;
        let k = (raw.mean + over) / period;
        if k > 0.0 && raw.mean > braw.mean {
            interference.push(Interference {
                per_occurrence: (raw.mean - braw.mean) / k * u,
                method: "rate",
                hits: Vec::new(),
                base_region: Some(bname.clone()),
                mean_occurrences: k,
            });
        }
    }
    interference
}

/// Analyse every region.
pub fn analyse(l: &Laps, scale: Scale) -> LapsReport {
    let over = l.overhead as f64;
    let u = scale.units_per_tick;
    let mut warnings = Vec::new();
    if l.counter == wire::LAP_COUNTER_NONE {
        warnings.push(
            "no counter could time the laps: the sampler was pacing itself with SysTick and the core \
             has no DWT cycle counter. Pace the sampler with another timer (`--timer cmsdk`), or \
             time laps without sampling (`--laps`)"
                .to_owned(),
        );
    }
    if l.dropped > 0 {
        warnings.push(format!(
            "{} regions beyond the runtime's table of {} were not kept",
            l.dropped,
            l.regions.len()
        ));
    }
    // Raw (ticks, overhead subtracted) statistics first; the inferences compare regions.
    let raws: Vec<Raw> = l.regions.iter().map(|r| Raw::of(r, over)).collect();
    let find = |name: &str| {
        l.regions
            .iter()
            .position(|r| r.name == name && r.calls > 0)
            .map(|i| &raws[i])
    };
    let mut regions = Vec::new();
    for (r, raw) in l.regions.iter().zip(&raws) {
        let total: u64 = raw.corrected.iter().map(|v| v.1).sum();
        let median = {
            let mut acc = 0;
            raw.corrected
                .iter()
                .find(|v| {
                    acc += v.1;
                    2 * acc >= total
                })
                .map(|v| v.0)
                .unwrap_or(0.0)
        };
        let named = rate_in(&r.name);
        let base = named
            .as_ref()
            .and_then(|(b, _)| find(b).map(|raw| (b.clone(), raw)));
        let interference = interference(raw, base.as_ref(), named.as_ref(), total, scale, over);
        let mean_us = scale.hz.map(|hz| raw.mean / hz * 1e6);
        regions.push(RegionReport {
            name: r.name.clone(),
            kind: if r.kind == wire::LAP_ITERATION {
                "iteration"
            } else {
                "region"
            },
            calls: r.calls,
            unmeasured: r.unmeasured,
            overflow: r.overflow,
            min: (r.min as f64 - over).max(0.0) * u,
            median: median * u,
            max: (r.max as f64 - over).max(0.0) * u,
            mean: raw.mean * u,
            mean_us,
            rate_hz: match (r.kind, mean_us) {
                (wire::LAP_ITERATION, Some(us)) if us > 0.0 => Some(1e6 / us),
                _ => None,
            },
            clusters: raw
                .clusters
                .iter()
                .map(|&(c, n)| Cluster {
                    center: c * u,
                    laps: n,
                    percent: 100.0 * n as f64 / total.max(1) as f64,
                })
                .collect(),
            interference,
            cycles: None,
            exact: None,
        });
    }
    LapsReport {
        counter: match l.counter {
            wire::LAP_COUNTER_CYCCNT => "DWT CYCCNT",
            wire::LAP_COUNTER_SYSTICK => "SysTick",
            wire::LAP_COUNTER_PMCCNTR => "PMCCNTR_EL0",
            wire::LAP_COUNTER_GENERIC => "CNTVCT_EL0",
            _ => "no counter",
        },
        overhead: over * u,
        regions,
        warnings,
        cycles_model: None,
        cycles_notes: Vec::new(),
        bench: false,
    }
}

/// The lap-window key of a region timed by `start()` guards or iterations: (kind, site inside
/// its first call), from what the firmware sent.
fn window_key(g: &crate::dump::laps::Region) -> Option<(u32, u32)> {
    let via = u32::from(g.via);
    (via == wire::LAP_VIA_START || via == wire::LAP_VIA_ITERATE).then(|| {
        (
            u32::from(via == wire::LAP_VIA_ITERATE),
            (g.body & !1).wrapping_sub(2),
        )
    })
}

/// Give each region whose lap windows are its own (no other region's first call is at the same
/// site) every lap's exact instructions.
pub fn apply_windows(r: &mut LapsReport, l: &Laps, windows: &crate::dump::laps::Windows) {
    let keys: Vec<Option<(u32, u32)>> = l.regions.iter().map(window_key).collect();
    for (k, out) in keys.iter().zip(&mut r.regions) {
        let Some(key) = k else { continue };
        if keys.iter().filter(|o| *o == k).count() != 1 {
            continue;
        }
        let Some(lengths) = windows.lengths.get(key).filter(|v| !v.is_empty()) else {
            continue;
        };
        let laps: u64 = lengths.iter().map(|x| x.1).sum();
        let sum: u64 = lengths.iter().map(|x| x.0 * x.1).sum();
        let mut acc = 0;
        let median = lengths
            .iter()
            .find(|x| {
                acc += x.1;
                2 * acc >= laps
            })
            .map(|x| x.0)
            .unwrap_or(0);
        out.exact = Some(ExactLaps {
            laps,
            min: lengths[0].0,
            median,
            max: lengths[lengths.len() - 1].0,
            mean: sum as f64 / laps.max(1) as f64,
        });
    }
}

/// Instructions and estimated cycles run under each of `bodies` in the exact call graph (a
/// node entered at a body, and everything below it, counted once even where a body calls
/// itself), and how many times each was entered.
pub fn under_bodies(
    tree: &crate::dump::callgraph::Tree,
    bodies: &[u32],
    cycles_of: impl Fn(u32, u64) -> u64,
) -> std::collections::HashMap<u32, (u64, u64, u64)> {
    use std::collections::HashMap;
    let nodes = &tree.nodes;
    let is_body = |i: usize| !nodes[i].exception && bodies.contains(&(nodes[i].entry & !1));
    // Per node, the body whose call it runs under (the outermost), if any. Parents come
    // before their children in the file, so one pass in order settles each from its parent;
    // a node out of order is walked up instead.
    let mut owner: Vec<Option<u32>> = vec![None; nodes.len()];
    for i in 1..nodes.len() {
        let parent = nodes[i].parent as usize;
        let inherited = if parent < i {
            owner[parent]
        } else {
            let (mut at, mut found, mut steps) = (parent, None, 0);
            while at != 0 && at < nodes.len() && steps <= nodes.len() {
                if is_body(at) {
                    found = Some(nodes[at].entry & !1);
                }
                at = nodes[at].parent as usize;
                steps += 1;
            }
            found
        };
        owner[i] = inherited.or_else(|| is_body(i).then(|| nodes[i].entry & !1));
    }
    let mut out: HashMap<u32, (u64, u64, u64)> = HashMap::new();
    for (i, n) in nodes.iter().enumerate().skip(1) {
        let parent = (n.parent as usize).min(nodes.len() - 1);
        if is_body(i) && owner[parent].is_none() {
            out.entry(n.entry & !1).or_default().2 += n.calls;
        }
    }
    for &(node, block, n) in &tree.counts {
        if let Some(b) = owner.get(node as usize).copied().flatten() {
            let e = out.entry(b).or_default();
            e.0 += n;
            e.1 += cycles_of(block, n);
        }
    }
    out
}

/// Give each region its laps in estimated cycles, from the same run's exact counts: a
/// `measure` region from the code under its body in the call graph, a `start()` guard or an
/// iteration from the plugin's lap windows at the site of its first `start`/`iterate` call;
/// say which regions cannot have them.
pub fn apply_cycles(
    r: &mut LapsReport,
    l: &Laps,
    tree: &crate::dump::callgraph::Tree,
    windows: Option<&crate::dump::laps::Windows>,
    cycles_of: impl Fn(u32, u64) -> u64,
    model: String,
    clock_hz: Option<u32>,
) {
    let via_measure = |g: &crate::dump::laps::Region| {
        u32::from(g.via) == wire::LAP_VIA_MEASURE || (g.via == 0 && g.body != 0)
    };
    let bodies: Vec<u32> = l
        .regions
        .iter()
        .filter(|g| via_measure(g))
        .map(|g| g.body & !1)
        .filter(|&b| b != 0)
        .collect();
    let under = under_bodies(tree, &bodies, &cycles_of);
    let mut without = Vec::new();
    let mut unfound = Vec::new();
    for (g, out) in l.regions.iter().zip(&mut r.regions) {
        if g.calls == 0 {
            continue;
        }
        // (instructions, cycles, laps) of the code the region's laps ran.
        let ran = if via_measure(g) {
            under.get(&(g.body & !1)).copied()
        } else if let Some(key) = window_key(g) {
            let found = windows.and_then(|w| {
                let laps = *w.laps.get(&key)?;
                let blocks = w.blocks.get(&key)?;
                let n: u64 = blocks.iter().map(|b| b.1).sum();
                let c: u64 = blocks.iter().map(|&(b, n)| cycles_of(b, n)).sum();
                Some((n, c, laps))
            });
            if found.is_none() {
                unfound.push(format!("`{}`", g.name));
                continue;
            }
            found
        } else {
            None
        };
        let Some((instructions, cycles, calls)) = ran.filter(|r| r.0 > 0 && r.2 > 0) else {
            without.push(format!("`{}`", g.name));
            continue;
        };
        let cpi = cycles as f64 / instructions as f64;
        // Each lap's exact instructions where the windows are the region's own, else the
        // counter's laps, at the code's CPI.
        let (min, median, max, mean) = match &out.exact {
            Some(e) => (
                e.min as f64 * cpi,
                e.median as f64 * cpi,
                e.max as f64 * cpi,
                cycles as f64 / calls as f64,
            ),
            None => (
                out.min * cpi,
                out.median * cpi,
                out.max * cpi,
                out.mean * cpi,
            ),
        };
        out.cycles = Some(RegionCycles {
            min,
            median,
            max,
            mean,
            cpi,
            exact_instructions: instructions as f64 / calls as f64,
            mean_us: clock_hz.map(|hz| mean / f64::from(hz) * 1e6),
        });
    }
    if !without.is_empty() {
        r.cycles_notes.push(format!(
            "no estimated cycles for {}: the firmware does not say which code their laps ran \
             (a sampler-rt older than this cargo-sample)",
            without.join(", ")
        ));
    }
    if !unfound.is_empty() {
        r.cycles_notes.push(format!(
            "no estimated cycles for {}: the exact count found no lap windows at the call \
             sites the firmware gave (counted through QEMU's exec log, or the call was not \
             followed)",
            unfound.join(", ")
        ));
    }
    r.cycles_model = Some(model);
}

/// Benchmarks as text: instructions an iteration, every one counted (and estimated cycles).
fn render_bench(r: &LapsReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let cycles = r.regions.iter().any(|g| g.cycles.is_some());
    let timed = r
        .regions
        .iter()
        .any(|g| g.cycles.as_ref().is_some_and(|c| c.mean_us.is_some()));
    let _ = writeln!(
        s,
        "Benchmarks (every instruction of every iteration counted in QEMU)"
    );
    let _ = writeln!(
        s,
        "  {:<32} {:>10} {:>12} {:>12} {:>12} {:>14}{}",
        "benchmark",
        "iterations",
        "min",
        "median",
        "max",
        "instructions",
        match (cycles, timed) {
            (true, true) => format!(" {:>14} {:>6} {:>10}", "est. cycles", "CPI", "time"),
            (true, false) => format!(" {:>14} {:>6}", "est. cycles", "CPI"),
            _ => String::new(),
        }
    );
    for g in &r.regions {
        let Some(e) = &g.exact else {
            let _ = writeln!(
                s,
                "  {:<32} {:>10}   (not counted: its iterations share a call site with another \
                 region's)",
                g.name, g.calls
            );
            continue;
        };
        let c = g
            .cycles
            .as_ref()
            .map(|c| {
                format!(
                    " {:>14.1} {:>6.3}{}",
                    c.mean,
                    c.cpi,
                    c.mean_us
                        .map(|us| format!(" {:>10}", format!("{us:.2} µs")))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {:<32} {:>10} {:>12} {:>12} {:>12} {:>14.1}{c}",
            g.name, e.laps, e.min, e.median, e.max, e.mean
        );
    }
    let _ = writeln!(
        s,
        "  (min, median, max: instructions of one iteration; mean over the iterations{})",
        if cycles { "; cycles: the mean" } else { "" }
    );
    if let Some(m) = &r.cycles_model {
        let _ = writeln!(s, "  cycles estimated by the {m} (not measured)");
    }
    for n in &r.cycles_notes {
        let _ = writeln!(s, "note: {n}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// The regions as text.
pub fn render(r: &LapsReport, unit: &str) -> String {
    use std::fmt::Write;
    if r.bench {
        return render_bench(r);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Regions (lap timing with {}; a lap's own cost, {:.1} {unit}, subtracted)",
        r.counter, r.overhead
    );
    let _ = writeln!(
        s,
        "  {:<28} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "region", "laps", "min", "median", "max", "mean", "time"
    );
    for g in &r.regions {
        let time = match (g.mean_us, g.rate_hz) {
            (_, Some(hz)) => format!("{hz:.1} Hz"),
            (Some(us), None) => format!("{us:.2} µs"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  {:<28} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10}",
            g.name, g.calls, g.min, g.median, g.max, g.mean, time
        );
        if g.clusters.len() > 1 {
            let list: Vec<String> = g
                .clusters
                .iter()
                .map(|c| format!("{:.1} ({:.0} %)", c.center, c.percent))
                .collect();
            let _ = writeln!(s, "      clusters: {}", list.join(", "));
        }
        for i in &g.interference {
            let how = match i.method {
                "clusters" => "from the clusters' spacing".to_owned(),
                _ => format!(
                    "from the mean against `{}` and the rate in the name",
                    i.base_region.as_deref().unwrap_or("?")
                ),
            };
            let _ = write!(
                s,
                "      interrupting work: {:.1} {unit} per occurrence ({how}), {:.2} per lap",
                i.per_occurrence, i.mean_occurrences
            );
            if !i.hits.is_empty() {
                let hits: Vec<String> = i
                    .hits
                    .iter()
                    .map(|(k, p)| format!("{k}×: {p:.0} %"))
                    .collect();
                let _ = write!(s, "; laps hit {}", hits.join(", "));
            }
            let _ = writeln!(s);
        }
        if let Some(c) = &g.cycles {
            let _ = writeln!(
                s,
                "      estimated cycles: min {:.1}, median {:.1}, max {:.1}, mean {:.1} (CPI {:.3}{})",
                c.min,
                c.median,
                c.max,
                c.mean,
                c.cpi,
                c.mean_us
                    .map(|us| format!(", mean {us:.2} µs"))
                    .unwrap_or_default()
            );
        }
        if g.unmeasured > 0 {
            let _ = writeln!(s, "      {} laps could not be timed", g.unmeasured);
        }
        if g.overflow > 0 {
            let _ = writeln!(
                s,
                "      {} laps had values beyond the {} distinct ones kept (not in the median or clusters)",
                g.overflow,
                g.clusters.iter().map(|c| c.laps).sum::<u64>()
            );
        }
    }
    if let Some(m) = &r.cycles_model {
        let _ = writeln!(
            s,
            "  cycles estimated by the {m} (not measured), at the CPI of the code each region's \
             laps ran in this run's exact count"
        );
    }
    for n in &r.cycles_notes {
        let _ = writeln!(s, "note: {n}");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything below a body's call is its (callees and the interrupts it took), counted
    /// once where the body calls itself; its calls are those from outside it.
    #[test]
    fn the_code_under_a_body_is_its_subtree_counted_once() {
        use crate::dump::callgraph::{Node, Tree};
        let node = |parent, entry, exception, calls| Node {
            parent,
            entry,
            exception,
            thread: false,
            site: 0,
            calls,
        };
        let (body, f, handler, other) = (0x101, 0x201, 0x301, 0x401);
        let tree = Tree {
            nodes: vec![
                node(0, 0, false, 0),
                node(0, body, false, 2),
                node(1, f, false, 2),
                node(2, handler, true, 1),
                node(1, body, false, 1),
                node(0, other, false, 1),
                // The handler's code is not a body however it is entered.
                node(0, body, true, 4),
            ],
            counts: vec![
                (1, 0x100, 10),
                (2, 0x200, 20),
                (3, 0x300, 5),
                (4, 0x100, 3),
                (5, 0x400, 100),
                (6, 0x100, 7),
            ],
            stray_returns: 0,
        };
        let under = under_bodies(&tree, &[0x100], |_, n| 2 * n);
        assert_eq!(under.get(&0x100), Some(&(38, 76, 2)));
        assert_eq!(under.len(), 1);
    }
    use crate::dump::laps::{Region, decode, encode};

    fn region(name: &str, kind: u8, laps: &[(u32, u32)]) -> Region {
        let calls = laps.iter().map(|l| l.1).sum();
        Region {
            name: name.into(),
            kind,
            calls,
            min: laps.iter().map(|l| l.0).min().unwrap_or(0),
            max: laps.iter().map(|l| l.0).max().unwrap_or(0),
            sum: laps.iter().map(|&(v, c)| v as u64 * c as u64).sum(),
            overflow: 0,
            unmeasured: 0,
            via: 1,
            body: 0x1235,
            values: laps.to_vec(),
        }
    }

    const CYCLES: Scale = Scale {
        units_per_tick: 1.0,
        hz: Some(3e6),
    };

    #[test]
    fn the_record_round_trips_and_damage_is_refused() {
        let l = Laps {
            counter: wire::LAP_COUNTER_SYSTICK,
            overhead: 46,
            dropped: 0,
            regions: vec![
                region(
                    "sum_array",
                    wire::LAP_REGION,
                    &[(355, 5), (425, 4), (424, 1)],
                ),
                region("loop", wire::LAP_ITERATION, &[(4105, 1000)]),
            ],
        };
        let b = encode(&l);
        assert_eq!(decode(&b), Some(l));
        assert_eq!(decode(&b[..b.len() - 3]), None);
    }

    #[test]
    fn the_seeds_first_experiment_one_interrupt_of_about_seventy_cycles() {
        // 355 355 425 424 423 ...: one cluster without the interrupt, one with it once.
        let l = Laps {
            counter: wire::LAP_COUNTER_SYSTICK,
            overhead: 46,
            dropped: 0,
            regions: vec![region(
                "sum_array",
                wire::LAP_REGION,
                &[(355, 4), (425, 1), (424, 3), (423, 2)],
            )],
        };
        let r = analyse(&l, CYCLES);
        let g = &r.regions[0];
        assert_eq!(g.min, 309.0);
        assert_eq!(g.clusters.len(), 2);
        let i = &g.interference[0];
        assert_eq!(i.method, "clusters");
        assert!(
            (i.per_occurrence - 68.83).abs() < 0.01,
            "{}",
            i.per_occurrence
        );
        assert_eq!(i.hits, vec![(0, 40.0), (1, 60.0)]);
    }

    #[test]
    fn a_base_region_counts_the_interrupts_in_the_lowest_cluster() {
        // The method's 20 kHz run: 628-632 and 698-699, never the undisturbed 355.
        let l = Laps {
            counter: wire::LAP_COUNTER_SYSTICK,
            overhead: 46,
            dropped: 0,
            regions: vec![
                region("sum_array", wire::LAP_REGION, &[(355, 10)]),
                region(
                    "sum_array @ 20 kHz",
                    wire::LAP_REGION,
                    &[(628, 1), (629, 2), (631, 1), (632, 2), (698, 2), (699, 2)],
                ),
            ],
        };
        let r = analyse(&l, CYCLES);
        let g = &r.regions[1];
        let c = g
            .interference
            .iter()
            .find(|i| i.method == "clusters")
            .unwrap();
        assert_eq!(c.base_region.as_deref(), Some("sum_array"));
        // 630 - 355 = 4 x 69, 698.5 - 355 = 5 x 69.
        assert_eq!(c.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![4, 5]);
        assert!(
            (c.per_occurrence - 68.9).abs() < 0.5,
            "{}",
            c.per_occurrence
        );
        // The rate gives a second estimate from the means: 150 cycles between interrupts.
        let rate = g.interference.iter().find(|i| i.method == "rate").unwrap();
        assert!((rate.mean_occurrences - 4.4).abs() < 0.1);
    }

    #[test]
    fn the_seeds_cyclic_executive_an_interrupt_of_about_sixty_five_cycles() {
        // 4119 cycles an iteration without the 5 kHz interrupt, 4636 with it, at 3 MHz.
        let l = Laps {
            counter: wire::LAP_COUNTER_CYCCNT,
            overhead: 0,
            dropped: 0,
            regions: vec![
                region("executive", wire::LAP_ITERATION, &[(4119, 1000)]),
                region("executive @ 5 kHz", wire::LAP_ITERATION, &[(4636, 1000)]),
            ],
        };
        let r = analyse(&l, CYCLES);
        let g = &r.regions[1];
        let i = &g.interference[0];
        assert_eq!(i.method, "rate");
        // 4636 / 600 = 7.73 interrupts an iteration: 517 / 7.73 = 66.9 cycles each.
        assert!(
            (i.per_occurrence - 66.9).abs() < 0.05,
            "{}",
            i.per_occurrence
        );
        assert!((r.regions[0].rate_hz.unwrap() - 728.3).abs() < 0.1);
    }

    #[test]
    fn rates_in_names() {
        assert_eq!(rate_in("sum @ 5 kHz"), Some(("sum".into(), 5000.0)));
        assert_eq!(rate_in("loop@20khz"), Some(("loop".into(), 20000.0)));
        assert_eq!(rate_in("loop @ busy"), None);
        assert_eq!(rate_in("plain"), None);
    }

    #[test]
    fn a_single_cluster_infers_nothing() {
        let l = Laps {
            counter: wire::LAP_COUNTER_SYSTICK,
            overhead: 10,
            dropped: 0,
            regions: vec![region("quiet", wire::LAP_REGION, &[(110, 3), (111, 1)])],
        };
        let r = analyse(&l, CYCLES);
        assert_eq!(r.regions[0].clusters.len(), 1);
        assert!(r.regions[0].interference.is_empty());
        assert_eq!(r.regions[0].median, 100.0);
    }
}
