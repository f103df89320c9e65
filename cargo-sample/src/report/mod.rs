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

/// One row of a table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub name: String,
    pub samples: u64,
    pub percent: f64,
    /// 95 % interval of the share, in percent.
    pub ci95: [f64; 2],
    /// The linker-level function a line or inline frame belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

/// A whole report, as printed and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format_version: u32,
    pub samples: u64,
    pub unit: String,
    #[serde(flatten)]
    pub facts: Facts,
    /// By linker-level function (the real, outermost symbol containing the PC).
    pub functions: Vec<Row>,
    /// By innermost inlined frame (the source function whose code was running).
    pub inlined: Vec<Row>,
    /// By `file:line` of the innermost frame.
    pub lines: Vec<Row>,
    pub distinct_pcs: usize,
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

fn rows(counts: HashMap<(String, Option<String>), u64>, total: u64) -> Vec<Row> {
    let mut v: Vec<Row> = counts
        .into_iter()
        .map(|((name, function), k)| {
            let (lo, hi) = wilson(k, total, Z95);
            Row {
                name,
                samples: k,
                percent: 100.0 * k as f64 / total.max(1) as f64,
                ci95: [100.0 * lo, 100.0 * hi],
                function,
            }
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    v
}

/// Aggregate a dump.
pub fn build(dump: &Dump, sym: &mut Symbolizer, facts: Facts) -> Report {
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    for &pc in &dump.pcs {
        *per_pc.entry(pc & !1).or_default() += 1;
    }
    let total = dump.pcs.len() as u64;
    let mut functions = HashMap::new();
    let mut inlined = HashMap::new();
    let mut lines = HashMap::new();
    for (&pc, &k) in &per_pc {
        let r = sym.resolve(pc);
        let f = r.function.clone().unwrap_or_else(|| OUTSIDE.to_owned());
        *functions.entry((f.clone(), None)).or_default() += k;
        let inner = r
            .frames
            .first()
            .map(|fr| fr.function.clone())
            .unwrap_or_else(|| f.clone());
        *inlined.entry((inner, Some(f.clone()))).or_default() += k;
        let line = r
            .line()
            .unwrap_or_else(|| format!("{f} ({pc:#010x}, no line info)"));
        *lines.entry((line, Some(f))).or_default() += k;
    }
    let functions = rows(functions, total);
    let inlined = rows(inlined, total);
    let lines = rows(lines, total);
    let warnings = diagnose(dump, &facts, &functions, per_pc.len());
    Report {
        format_version: JSON_VERSION,
        samples: total,
        unit: facts.unit.clone(),
        facts,
        functions,
        inlined,
        lines,
        distinct_pcs: per_pc.len(),
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
