//! The profile: samples aggregated by function, inline frame and source line, each share with
//! its 95 % interval, plus the facts of the run and warnings where the profile could mislead.

pub mod text;

use std::collections::HashMap;

use sampler_rt::wire;
use serde::Serialize;

use crate::dump::Dump;
use crate::stats::{Z95, wilson};
use crate::symbolize::Symbolizer;

/// Version of the JSON report's layout.
pub const JSON_VERSION: u32 = 1;

/// Name used for samples outside every function symbol.
pub const OUTSIDE: &str = "[outside the image's functions]";

/// The facts of a run that the report's header shows.
#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub firmware: String,
    pub machine: String,
    /// `instructions` in QEMU (it counts instructions, not cycles), `cycles` on hardware.
    pub unit: String,
    pub timer: String,
    pub timer_hz: u64,
    /// Mean timer ticks between samples.
    pub period_ticks: f64,
    /// Mean period in `unit`.
    pub period_units: f64,
    /// Random span per period in ticks (0 = constant period).
    pub jitter_ticks: u32,
    pub priority: u8,
    /// Samples the firmware took.
    pub taken: u32,
    /// Samples lost (could not be stored).
    pub lost: u32,
    /// Samples overwritten in the ring (the newest were kept).
    pub overwritten: u32,
    pub requested: u32,
    /// How sampling ended.
    pub stop: String,
    /// Where the samples came from: the firmware's dump, or a memory snapshot.
    pub source: String,
    /// Estimated duration of the sampled run in `unit`.
    pub duration_units: f64,
}

/// The facts of an exact (`--exact`) run.
#[derive(Debug, Clone, Serialize)]
pub struct ExactFacts {
    pub firmware: String,
    pub machine: String,
    /// How the instructions were counted (the plugin, or QEMU's exec log).
    pub counted_by: String,
    /// How the run ended.
    pub stop: String,
    /// `--instructions`: the budget the run had.
    pub instruction_budget: Option<u64>,
}

/// What a report's header tells, by kind of run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RunFacts {
    Sampled(Facts),
    Exact(ExactFacts),
}

/// One row of a table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub name: String,
    /// Samples (sampled reports) or executed instructions (exact reports) in this row.
    #[serde(skip)]
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    pub percent: f64,
    /// 95 % interval of the share, in percent (sampled reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// The linker-level function a line or inline frame belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// With `--truth`: the exact share of executed instructions, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_percent: Option<f64>,
    /// With `--truth`: sampled minus exact, in percentage points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_points: Option<f64>,
    /// With `--truth`: the error in standard deviations of the binomial law at the exact share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_sigma: Option<f64>,
}

/// A whole report, as printed and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format_version: u32,
    /// `sampled`, or `exact` (every instruction counted, `--exact`).
    pub mode: &'static str,
    /// Samples analysed (sampled reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Instructions counted (exact reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    pub unit: String,
    #[serde(flatten)]
    pub facts: RunFacts,
    /// By linker-level function (the real, outermost symbol containing the PC).
    pub functions: Vec<Row>,
    /// By innermost inlined frame (the source function whose code was running).
    pub inlined: Vec<Row>,
    /// By `file:line` of the innermost frame.
    pub lines: Vec<Row>,
    pub distinct_pcs: usize,
    /// With `--truth`: the largest |sampled - exact| over the function rows, in points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_error_points: Option<f64>,
    /// With `--truth`: exact instructions counted outside sampler-rt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_instructions: Option<u64>,
    pub warnings: Vec<String>,
}

/// Stop reason in words.
pub fn stop_reason(stop: u8) -> &'static str {
    match stop {
        wire::STOP_LIMIT => "sample limit reached",
        wire::STOP_FIRMWARE => "the firmware ended the run",
        wire::STOP_SNAPSHOT => "run cut short; samples read from the target's memory",
        wire::STOP_RUNNING => "still sampling",
        _ => "unknown",
    }
}

type Key = (String, Option<String>);

/// Whether a table's counts are samples (with intervals) or exact instruction counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sampled,
    Exact,
}

fn rows(
    mut counts: HashMap<Key, u64>,
    total: u64,
    exact: Option<&(HashMap<Key, u64>, u64)>,
    kind: Kind,
) -> Vec<Row> {
    if let Some((e, _)) = exact {
        // Code that ran but was never sampled belongs in the table too.
        for k in e.keys() {
            counts.entry(k.clone()).or_insert(0);
        }
    }
    let mut v: Vec<Row> = counts
        .into_iter()
        .map(|(key, k)| {
            let (lo, hi) = wilson(k, total, Z95);
            let percent = 100.0 * k as f64 / total.max(1) as f64;
            let exact_percent = exact.map(|(e, et)| {
                100.0 * e.get(&key).copied().unwrap_or(0) as f64 / (*et).max(1) as f64
            });
            let error_points = exact_percent.map(|x| percent - x);
            let error_sigma = exact_percent.zip(error_points).map(|(x, err)| {
                let p = x / 100.0;
                let sigma = 100.0 * (p * (1.0 - p) / total.max(1) as f64).sqrt();
                if sigma > 0.0 {
                    err / sigma
                } else if err == 0.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            });
            Row {
                name: key.0,
                count: k,
                samples: (kind == Kind::Sampled).then_some(k),
                instructions: (kind == Kind::Exact).then_some(k),
                percent,
                ci95: (kind == Kind::Sampled).then_some([100.0 * lo, 100.0 * hi]),
                function: key.1,
                exact_percent,
                error_points,
                error_sigma,
            }
        })
        .collect();
    v.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| {
                b.exact_percent
                    .unwrap_or(0.0)
                    .total_cmp(&a.exact_percent.unwrap_or(0.0))
            })
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// The three keys of one address: function, innermost frame, line.
fn keys(sym: &mut Symbolizer, pc: u32) -> [Key; 3] {
    let r = sym.resolve(pc);
    let f = r.function.clone().unwrap_or_else(|| OUTSIDE.to_owned());
    let inner = r
        .frames
        .first()
        .map(|fr| fr.function.clone())
        .unwrap_or_else(|| f.clone());
    let line = r
        .line()
        .unwrap_or_else(|| format!("{f} ({pc:#010x}, no line info)"));
    [(f.clone(), None), (inner, Some(f.clone())), (line, Some(f))]
}

/// Aggregate exact counts the way samples are aggregated, without sampler-rt's own code.
fn exact_tables(sym: &mut Symbolizer, exact: &[(u32, u64)]) -> [(HashMap<Key, u64>, u64); 3] {
    let mut t: [(HashMap<Key, u64>, u64); 3] = Default::default();
    for &(pc, n) in exact {
        if sym.is_sampler(pc as u64) {
            continue;
        }
        for (i, k) in keys(sym, pc).into_iter().enumerate() {
            *t[i].0.entry(k).or_default() += n;
            t[i].1 += n;
        }
    }
    t
}

/// Per-address counts aggregated into the three tables.
fn tables(sym: &mut Symbolizer, per_pc: &HashMap<u32, u64>) -> [HashMap<Key, u64>; 3] {
    let mut t: [HashMap<Key, u64>; 3] = Default::default();
    for (&pc, &k) in per_pc {
        for (i, key) in keys(sym, pc).into_iter().enumerate() {
            *t[i].entry(key).or_default() += k;
        }
    }
    t
}

/// Aggregate a dump, with the exact counts of the same run when there are some.
pub fn build(
    dump: &Dump,
    sym: &mut Symbolizer,
    facts: Facts,
    exact: Option<&[(u32, u64)]>,
) -> Report {
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    for &pc in &dump.pcs {
        *per_pc.entry(pc & !1).or_default() += 1;
    }
    let total = dump.pcs.len() as u64;
    let [functions, inlined, lines] = tables(sym, &per_pc);
    let exact = exact.map(|e| exact_tables(sym, e));
    let functions = rows(
        functions,
        total,
        exact.as_ref().map(|e| &e[0]),
        Kind::Sampled,
    );
    let inlined = rows(inlined, total, exact.as_ref().map(|e| &e[1]), Kind::Sampled);
    let lines = rows(lines, total, exact.as_ref().map(|e| &e[2]), Kind::Sampled);
    let max_error_points = exact.as_ref().map(|_| {
        functions
            .iter()
            .filter_map(|r| r.error_points)
            .fold(0.0f64, |m, e| m.max(e.abs()))
    });
    let warnings = diagnose(dump, &facts, &functions, per_pc.len());
    Report {
        format_version: JSON_VERSION,
        mode: "sampled",
        samples: Some(total),
        instructions: None,
        unit: facts.unit.clone(),
        facts: RunFacts::Sampled(facts),
        functions,
        inlined,
        lines,
        distinct_pcs: per_pc.len(),
        max_error_points,
        exact_instructions: exact.as_ref().map(|e| e[0].1),
        warnings,
    }
}

/// The profile of an exact run: every executed instruction, by function, frame and line.
pub fn build_exact(sym: &mut Symbolizer, facts: ExactFacts, counts: &[(u32, u64)]) -> Report {
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    for &(pc, n) in counts {
        *per_pc.entry(pc & !1).or_default() += n;
    }
    let total: u64 = per_pc.values().sum();
    let [functions, inlined, lines] = tables(sym, &per_pc);
    let functions = rows(functions, total, None, Kind::Exact);
    let inlined = rows(inlined, total, None, Kind::Exact);
    let lines = rows(lines, total, None, Kind::Exact);
    let mut warnings = Vec::new();
    if total == 0 {
        warnings.push("no instructions were counted: did the firmware start?".into());
    }
    if let Some(out) = functions.iter().find(|r| r.name == OUTSIDE) {
        warnings.push(format!(
            "{:.2} % of the instructions ran outside every function of this ELF (code in RAM, a \
             bootloader, or another image)",
            out.percent
        ));
    }
    Report {
        format_version: JSON_VERSION,
        mode: "exact",
        samples: None,
        instructions: Some(total),
        unit: "instructions".into(),
        facts: RunFacts::Exact(facts),
        functions,
        inlined,
        lines,
        distinct_pcs: per_pc.len(),
        max_error_points: None,
        exact_instructions: None,
        warnings,
    }
}

fn diagnose(dump: &Dump, facts: &Facts, functions: &[Row], distinct: usize) -> Vec<String> {
    let mut w = Vec::new();
    let n = dump.pcs.len();
    if n == 0 {
        w.push("no samples: nothing to report. Did sampling start before the run ended?".into());
        return w;
    }
    if facts.jitter_ticks == 0 {
        w.push(
            "constant sampling period: a program that repeats in step with it is seen at the same few \
             points every time. Keep jitter on (the default) unless you know the program is aperiodic."
                .into(),
        );
    }
    if n >= 1000 && distinct * 100 < n && distinct <= 8 {
        w.push(format!(
            "only {distinct} distinct addresses in {n} samples: the sampling is probably in lockstep with \
             the program. Enable or widen the jitter (`--jitter`)."
        ));
    }
    if let Some(out) = functions.iter().find(|r| r.name == OUTSIDE) {
        w.push(format!(
            "{:.2} % of the samples are outside every function of this ELF (code in RAM, a bootloader, \
             or another image)",
            out.percent
        ));
    }
    if facts.overwritten > 0 {
        w.push(format!(
            "the ring holds {} samples: the newest {n} of {} were kept; rebuild with a larger \
             SAMPLER_RT_RING_SLOTS to keep all",
            n, facts.taken
        ));
    }
    if facts.lost > 0 {
        w.push(format!(
            "{} samples were lost and are not in the profile",
            facts.lost
        ));
    }
    if n < 100 {
        w.push(format!(
            "only {n} samples: a share of 50 % is uncertain by ±{:.0} points (95 %)",
            100.0 * Z95 * (0.25 / n as f64).sqrt()
        ));
    }
    w
}
