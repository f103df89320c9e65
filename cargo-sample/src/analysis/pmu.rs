//! PMU counts of several runs made one: events split into groups the CPU's counters hold (one
//! run per group), the groups merged per region, and the derived metrics.

use std::path::PathBuf;

use serde::Serialize;

use crate::analysis::events::{CPU_CYCLES, Table};
use crate::dump::pmu::Record;

/// Split `events` into groups of at most `size` (the cycle counter is not an event counter:
/// `CPU_CYCLES` is read from it and takes no place in a group).
pub fn groups(events: &[u16], size: usize) -> Vec<Vec<u16>> {
    let mut seen = Vec::new();
    for &e in events {
        if e != CPU_CYCLES && !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.is_empty() {
        // Only cycles: one run with no event counter.
        return vec![Vec::new()];
    }
    seen.chunks(size.max(1)).map(<[u16]>::to_vec).collect()
}

/// A counted (or not) event of a region, merged over the groups.
#[derive(Debug, Clone, Serialize)]
pub struct Count {
    pub event: String,
    pub code: u16,
    /// `None`: not counted by this CPU (or QEMU).
    pub pre: Option<u64>,
    pub post: Option<u64>,
    pub delta: Option<u64>,
    pub per_call: Option<f64>,
    /// The run (group) it was counted in, from 1.
    pub group: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A derived metric.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    pub name: &'static str,
    pub formula: &'static str,
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A region with all its events.
#[derive(Debug, Clone, Serialize)]
pub struct RegionStat {
    pub name: String,
    pub calls: u32,
    pub counts: Vec<Count>,
    pub metrics: Vec<Metric>,
}

/// `cargo sample stat`'s result.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    pub cpu: String,
    pub counters: u32,
    pub exception_level: u32,
    pub groups: Vec<Vec<String>>,
    pub regions: Vec<RegionStat>,
    pub run_dir: PathBuf,
}

const METRICS: [(&str, &str, u16, u16, f64); 9] = [
    ("IPC", "INST_RETIRED / CPU_CYCLES", 0x08, 0x11, 1.0),
    (
        "L1D miss ratio",
        "L1D_CACHE_REFILL / L1D_CACHE",
        0x03,
        0x04,
        1.0,
    ),
    (
        "L1I miss ratio",
        "L1I_CACHE_REFILL / L1I_CACHE",
        0x01,
        0x14,
        1.0,
    ),
    (
        "L2D miss ratio",
        "L2D_CACHE_REFILL / L2D_CACHE",
        0x17,
        0x16,
        1.0,
    ),
    (
        "branch mispredict ratio",
        "BR_MIS_PRED / BR_PRED",
        0x10,
        0x12,
        1.0,
    ),
    (
        "L1D MPKI",
        "L1D_CACHE_REFILL * 1000 / INST_RETIRED",
        0x03,
        0x08,
        1000.0,
    ),
    (
        "L1I MPKI",
        "L1I_CACHE_REFILL * 1000 / INST_RETIRED",
        0x01,
        0x08,
        1000.0,
    ),
    (
        "L2D MPKI",
        "L2D_CACHE_REFILL * 1000 / INST_RETIRED",
        0x17,
        0x08,
        1000.0,
    ),
    (
        "branch MPKI",
        "BR_MIS_PRED * 1000 / INST_RETIRED",
        0x10,
        0x08,
        1000.0,
    ),
];

/// Merge the runs of every group into regions, events in the order asked.
pub fn merge(t: &Table, asked: &[u16], runs: &[Record]) -> Vec<RegionStat> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for g in &r.regions {
            if !names.contains(&g.name) {
                names.push(g.name.clone());
            }
        }
    }
    let mut out = Vec::new();
    for name in names {
        let mut counts = Vec::new();
        let mut calls = 0;
        for &code in asked {
            // CPU_CYCLES comes from the cycle counter of the first run; others from the run
            // of their group.
            let found = runs.iter().enumerate().find_map(|(gi, r)| {
                let slot = if code == CPU_CYCLES {
                    Some(r.events.len())
                } else {
                    r.events.iter().position(|&e| e == code)
                }?;
                let g = r.regions.iter().find(|g| g.name == name)?;
                Some((gi, r, g, slot))
            });
            let Some((gi, r, g, slot)) = found else {
                continue;
            };
            calls = g.calls;
            let (pre, post, sum) = g.counts.get(slot).copied().unwrap_or_default();
            let implemented = if code == CPU_CYCLES {
                Some(true)
            } else {
                r.implements(code)
            };
            let counted = match implemented {
                Some(b) => b,
                // Implementation-defined: PMCEID does not say; a zero means nothing counted.
                None => sum != 0 || post != 0,
            };
            counts.push(Count {
                event: t.name(code),
                code,
                pre: counted.then_some(pre),
                post: counted.then_some(post),
                delta: counted.then_some(sum),
                per_call: counted.then(|| sum as f64 / g.calls.max(1) as f64),
                group: gi + 1,
                note: (!counted).then(|| {
                    if implemented.is_some() {
                        "not counted by this CPU (PMCEID)".to_owned()
                    } else {
                        "not counted (implementation defined; read 0)".to_owned()
                    }
                }),
            });
        }
        let delta = |code: u16| {
            counts
                .iter()
                .find(|c| c.code == code)
                .map(|c| (c.delta, c.group))
        };
        let mut metrics = Vec::new();
        for (mname, formula, num, den, scale) in METRICS {
            let (Some((a, ga)), Some((b, gb))) = (delta(num), delta(den)) else {
                continue;
            };
            let value = match (a, b) {
                (Some(a), Some(b)) if b > 0 => Some(a as f64 * scale / b as f64),
                _ => None,
            };
            let note = if value.is_none() {
                Some("an event of it is not counted".to_owned())
            } else if ga != gb {
                Some(format!("from two runs (groups {ga} and {gb})"))
            } else {
                None
            };
            metrics.push(Metric {
                name: mname,
                formula,
                value,
                note,
            });
        }
        out.push(RegionStat {
            name,
            calls,
            counts,
            metrics,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::events::table;
    use crate::dump::pmu::RegionCounts;

    #[test]
    fn groups_hold_at_most_the_counters_and_cycles_need_none() {
        let ev = [0x08, 0x11, 0x03, 0x04, 0x01, 0x14, 0x17, 0x16, 0x08];
        let g = groups(&ev, 6);
        assert_eq!(
            g,
            vec![vec![0x08, 0x03, 0x04, 0x01, 0x14, 0x17], vec![0x16]]
        );
        assert_eq!(groups(&[0x11], 6), vec![Vec::<u16>::new()]);
    }

    fn record(events: &[u16], pmceid0: u32, regions: Vec<RegionCounts>) -> Record {
        Record {
            pmceid: [pmceid0, 0, 0, 0],
            counters: 6,
            el: 1,
            events: events.to_vec(),
            regions,
            ..Record::default()
        }
    }

    #[test]
    fn runs_merge_per_region_and_uncounted_events_are_not_zero() {
        let t = table("cortex-a53").unwrap();
        // Run 1 counts INST_RETIRED and L1D_CACHE_REFILL (not implemented); run 2 L1D_CACHE.
        let supported = 1 << 0x08 | 1 << 0x11;
        let r1 = record(
            &[0x08, 0x03],
            supported,
            vec![RegionCounts {
                name: "work".into(),
                calls: 2,
                counts: vec![(10, 410, 400), (0, 0, 0), (5, 1005, 1000)],
            }],
        );
        let r2 = record(
            &[0x04],
            supported,
            vec![RegionCounts {
                name: "work".into(),
                calls: 2,
                counts: vec![(0, 0, 0), (7, 1007, 1000)],
            }],
        );
        let m = merge(&t, &[0x08, 0x11, 0x03, 0x04], &[r1, r2]);
        let w = &m[0];
        assert_eq!(w.counts.len(), 4);
        assert_eq!(w.counts[0].delta, Some(400));
        assert_eq!(w.counts[0].per_call, Some(200.0));
        assert_eq!(w.counts[1].delta, Some(1000)); // cycles from run 1's cycle counter
        assert_eq!(w.counts[2].delta, None);
        assert!(w.counts[2].note.as_deref().unwrap().contains("not counted"));
        assert_eq!((w.counts[3].delta, w.counts[3].group), (None, 2));
        let ipc = w.metrics.iter().find(|m| m.name == "IPC").unwrap();
        assert_eq!(ipc.value, Some(0.4));
        let l1d = w
            .metrics
            .iter()
            .find(|m| m.name == "L1D miss ratio")
            .unwrap();
        assert_eq!(l1d.value, None);
    }
}
