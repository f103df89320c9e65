//! The profile: samples aggregated by function, inline frame and source line, each share with
//! its 95 % interval, plus the facts of the run and warnings where the profile could mislead.

pub mod annotate;
pub mod bins;
pub mod diagnose;
pub mod diff;
pub mod formats;
pub mod text;
pub mod tree;

use std::collections::HashMap;

use sampler_rt::wire;
use serde::Serialize;

use crate::analysis::stats::{Z95, wilson};
use crate::dump::Dump;
use crate::image::disasm::Code;
use crate::image::symbolize::Symbolizer;

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
    /// Samples are taken at a PMU event counter's overflow: each lands just after an
    /// instruction that caused the event (on hardware, with some skid), by design.
    #[serde(default)]
    pub on_events: bool,
    /// ARMv8-A: interrupts the sampler's vectors took that were not its own (the firmware's,
    /// ended unserved).
    #[serde(default)]
    pub foreign_interrupts: u32,
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
    /// By tag (the task, handler or object each sample was tagged with), when samples carry tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Row>,
    /// By tag and function (`tag / function`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tag_functions: Vec<Row>,
    /// Functions with what was inlined into them, recursively (from DWARF).
    pub tree: Vec<tree::Node>,
    /// The hottest functions' instructions with their counts (`--annotate`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotate: Vec<annotate::Function>,
    pub distinct_pcs: usize,
    /// With `--truth`: the largest |sampled - exact| over the function rows, in points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_error_points: Option<f64>,
    /// With `--truth`: exact instructions counted outside sampler-rt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_instructions: Option<u64>,
    /// Inline chains with their counts (for folded stacks and flamegraphs).
    #[serde(skip)]
    pub stacks: Vec<Stack>,
    /// Every sampled (or executed) address with its count and frames (for pprof).
    #[serde(skip)]
    pub per_pc: Vec<PcCount>,
    /// Samples per address and tag, when samples carry tags: `(pc, tag name, count)`.
    #[serde(skip)]
    pub tagged: Vec<(u32, String, u64)>,
    /// Where the profile would mislead, and what is worth knowing (kind, severity, message).
    pub diagnostics: Vec<diagnose::Diagnostic>,
    /// The messages of the diagnostics of severity `warning`.
    pub warnings: Vec<String>,
    /// Lap-timed regions, when the firmware timed any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub laps: Option<crate::analysis::laps::LapsReport>,
}

/// One inline chain (outermost first) and its count.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub chain: Vec<String>,
    pub count: u64,
}

/// One address, its count and its frames, innermost first: `(function, file, line)`.
#[derive(Debug, Clone)]
pub struct PcCount {
    pub pc: u32,
    pub count: u64,
    pub frames: Vec<(String, Option<String>, Option<u32>)>,
}

impl Report {
    pub fn facts_firmware(&self) -> String {
        match &self.facts {
            RunFacts::Sampled(f) => f.firmware.clone(),
            RunFacts::Exact(f) => f.firmware.clone(),
        }
    }

    pub fn facts_machine(&self) -> String {
        match &self.facts {
            RunFacts::Sampled(f) => f.machine.clone(),
            RunFacts::Exact(f) => f.machine.clone(),
        }
    }

    /// Mean sampling period in the report's unit (1 for an exact profile: every instruction).
    pub fn period_units(&self) -> f64 {
        match &self.facts {
            RunFacts::Sampled(f) => f.period_units,
            RunFacts::Exact(_) => 1.0,
        }
    }
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
            .then_with(|| a.function.cmp(&b.function))
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

/// Exact counts per address, without sampler-rt's own code (a sampler never sees itself).
fn exact_per_pc(sym: &Symbolizer, exact: &[(u32, u64)]) -> (HashMap<u32, u64>, u64) {
    let mut m: HashMap<u32, u64> = HashMap::new();
    for &(pc, n) in exact {
        if !sym.is_sampler(pc as u64) {
            *m.entry(pc & !1).or_default() += n;
        }
    }
    let total = m.values().sum();
    (m, total)
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

/// What to compute beyond the tables every report has.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Annotate the disassembly of this many of the hottest functions.
    pub annotate: usize,
    /// How histogram bins shared by several functions are split.
    pub bin_split: crate::report::bins::Split,
    /// Stacks (folded, flamegraph) start with the sample's tag.
    pub by_tag: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            annotate: 0,
            bin_split: crate::report::bins::Split::Density,
            by_tag: false,
        }
    }
}

/// Everything a report is built from.
struct Input<'a> {
    per_pc: HashMap<u32, u64>,
    total: u64,
    kind: Kind,
    exact: Option<(HashMap<u32, u64>, u64)>,
    code: Option<&'a mut Code>,
}

/// The tables, tree and annotations of one profile.
struct Views {
    stacks: Vec<Stack>,
    per_pc: Vec<PcCount>,
    functions: Vec<Row>,
    inlined: Vec<Row>,
    lines: Vec<Row>,
    tree: Vec<tree::Node>,
    annotate: Vec<annotate::Function>,
}

fn views(sym: &mut Symbolizer, input: Input<'_>, opts: Options) -> Views {
    let [functions, inlined, lines] = tables(sym, &input.per_pc);
    let exact_tables = input.exact.as_ref().map(|(e, t)| {
        let [f, i, l] = tables(sym, e);
        [(f, *t), (i, *t), (l, *t)]
    });
    let kind = input.kind;
    let functions = rows(
        functions,
        input.total,
        exact_tables.as_ref().map(|e| &e[0]),
        kind,
    );
    let inlined = rows(
        inlined,
        input.total,
        exact_tables.as_ref().map(|e| &e[1]),
        kind,
    );
    let lines = rows(
        lines,
        input.total,
        exact_tables.as_ref().map(|e| &e[2]),
        kind,
    );
    let exact = input.exact.as_ref().map(|(e, t)| (e, *t));
    let tree = tree::build(sym, &input.per_pc, input.total, exact, OUTSIDE);
    let annotate = match input.code {
        Some(code) if opts.annotate > 0 => {
            let names: Vec<String> = functions
                .iter()
                .filter(|r| r.name != OUTSIDE && r.count > 0)
                .take(opts.annotate)
                .map(|r| r.name.clone())
                .collect();
            annotate::build(sym, code, &names, &input.per_pc, input.total, exact)
        }
        _ => Vec::new(),
    };
    let mut per_pc: Vec<PcCount> = input
        .per_pc
        .iter()
        .map(|(&pc, &count)| {
            let r = sym.resolve(pc);
            let mut frames: Vec<(String, Option<String>, Option<u32>)> = r
                .frames
                .iter()
                .map(|f| (f.function.clone(), f.file.clone(), f.line))
                .collect();
            if frames.is_empty() {
                frames.push((
                    r.function.clone().unwrap_or_else(|| OUTSIDE.to_owned()),
                    None,
                    None,
                ));
            }
            PcCount { pc, count, frames }
        })
        .collect();
    per_pc.sort_by_key(|p| p.pc);
    let chains: Vec<(Vec<String>, u64)> = input
        .per_pc
        .iter()
        .map(|(&pc, &n)| (tree::chain(sym, pc, OUTSIDE), n))
        .collect();
    Views {
        stacks: formats::stacks(chains),
        per_pc,
        functions,
        inlined,
        lines,
        tree,
        annotate,
    }
}

/// Aggregate a dump, with the exact counts of the same run when there are some.
/// The samples a report is built from.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Every sample's address in the order taken, when known (a dump, a raw text dump).
    pub ordered: Vec<u32>,
    /// Samples per address.
    pub per_pc: HashMap<u32, u64>,
    /// A tag per sample, parallel to `ordered` (the running task, handler or RTOS object).
    pub tags: Vec<u32>,
    /// Names of the tags (others are named by the symbol they point to, or in hex).
    pub tag_names: HashMap<u32, String>,
    /// Whether the addresses stand for address ranges (histogram bins): no analysis of single
    /// instructions then.
    pub binned: bool,
    /// Findings made while reading the samples (e.g. bins shared by several functions).
    pub findings: Vec<diagnose::Diagnostic>,
}

impl Samples {
    /// The samples of a dump, in order.
    pub fn of_dump(dump: &Dump) -> Samples {
        let ordered: Vec<u32> = dump.pcs.iter().map(|pc| pc & !1).collect();
        let mut per_pc: HashMap<u32, u64> = HashMap::new();
        for &pc in &ordered {
            *per_pc.entry(pc).or_default() += 1;
        }
        Samples {
            ordered,
            per_pc,
            ..Samples::default()
        }
    }

    pub fn total(&self) -> u64 {
        self.per_pc.values().sum()
    }
}

/// The tables by tag and by tag and function, when the samples carry tags.
fn tag_tables(sym: &mut Symbolizer, samples: &Samples) -> (Vec<Row>, Vec<Row>) {
    if samples.tags.is_empty() || samples.tags.len() != samples.ordered.len() {
        return (Vec::new(), Vec::new());
    }
    let mut by_tag: HashMap<Key, u64> = HashMap::new();
    let mut by_pair: HashMap<Key, u64> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    for (&pc, &tag) in samples.ordered.iter().zip(&samples.tags) {
        let label = names
            .entry(tag)
            .or_insert_with(|| {
                samples
                    .tag_names
                    .get(&tag)
                    .cloned()
                    .unwrap_or_else(|| sym.name_address(tag))
            })
            .clone();
        let f = sym
            .resolve(pc)
            .function
            .clone()
            .unwrap_or_else(|| OUTSIDE.to_owned());
        *by_tag.entry((label.clone(), None)).or_default() += 1;
        *by_pair
            .entry((format!("{label} / {f}"), Some(f)))
            .or_default() += 1;
    }
    let n = samples.ordered.len() as u64;
    (
        rows(by_tag, n, None, Kind::Sampled),
        rows(by_pair, n, None, Kind::Sampled),
    )
}

/// Samples per address and tag name, when the samples carry tags.
fn tagged_counts(samples: &Samples) -> Vec<(u32, String, u64)> {
    if samples.tags.is_empty() || samples.tags.len() != samples.ordered.len() {
        return Vec::new();
    }
    let mut m: HashMap<(u32, u32), u64> = HashMap::new();
    for (&pc, &tag) in samples.ordered.iter().zip(&samples.tags) {
        *m.entry((pc, tag)).or_default() += 1;
    }
    let mut v: Vec<(u32, String, u64)> = m
        .into_iter()
        .map(|((pc, tag), n)| {
            let name = samples
                .tag_names
                .get(&tag)
                .cloned()
                .unwrap_or_else(|| format!("{tag:#010x}"));
            (pc, name, n)
        })
        .collect();
    v.sort();
    v
}

/// Aggregate samples, with the exact counts of the same run when there are some.
pub fn build_samples(
    samples: &Samples,
    sym: &mut Symbolizer,
    code: Option<&mut Code>,
    facts: Facts,
    exact: Option<&[(u32, u64)]>,
    opts: Options,
    vectors: &[(u32, u32)],
) -> Report {
    let per_pc = samples.per_pc.clone();
    let total = samples.total();
    let distinct = per_pc.len();
    let exact = exact.map(|e| exact_per_pc(sym, e));
    let exact_instructions = exact.as_ref().map(|e| e.1);
    let mut code = code;
    let v = views(
        sym,
        Input {
            per_pc: per_pc.clone(),
            total,
            kind: Kind::Sampled,
            exact,
            code: code.as_deref_mut(),
        },
        opts,
    );
    let max_error_points = exact_instructions.map(|_| {
        v.functions
            .iter()
            .filter_map(|r| r.error_points)
            .fold(0.0f64, |m, e| m.max(e.abs()))
    });
    let tags = tag_tables(sym, samples);
    let tagged = tagged_counts(samples);
    let stacks = if opts.by_tag && !tagged.is_empty() {
        formats::stacks(tagged.iter().map(|(pc, tag, n)| {
            let mut chain = vec![tag.clone()];
            chain.extend(tree::chain(sym, *pc, OUTSIDE));
            (chain, *n)
        }))
    } else {
        v.stacks
    };
    let mut diagnostics = diagnose::sampled(
        &diagnose::Input {
            pcs: &samples.ordered,
            total,
            binned: samples.binned,
            per_pc: &per_pc,
            facts: &facts,
            functions: &v.functions,
            vectors,
            exact_total: exact_instructions,
        },
        sym,
        code,
    );
    diagnostics.extend(samples.findings.iter().cloned());
    if exact_instructions.is_some() {
        let found = diagnostics.clone();
        diagnostics.extend(diagnose::against_exact(&v.functions, &found));
    }
    let warnings = diagnostics
        .iter()
        .filter(|d| d.severity == "warning")
        .map(|d| d.message.clone())
        .collect();
    Report {
        format_version: JSON_VERSION,
        mode: "sampled",
        samples: Some(total),
        instructions: None,
        unit: facts.unit.clone(),
        facts: RunFacts::Sampled(facts),
        functions: v.functions,
        inlined: v.inlined,
        lines: v.lines,
        tags: tags.0,
        tag_functions: tags.1,
        tree: v.tree,
        annotate: v.annotate,
        stacks,
        tagged,
        per_pc: v.per_pc,
        distinct_pcs: distinct,
        max_error_points,
        exact_instructions,
        diagnostics,
        warnings,
        laps: None,
    }
}

/// The profile of an exact run: every executed instruction, by function, frame and line.
pub fn build_exact(
    sym: &mut Symbolizer,
    code: Option<&mut Code>,
    facts: ExactFacts,
    counts: &[(u32, u64)],
    opts: Options,
) -> Report {
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    for &(pc, n) in counts {
        *per_pc.entry(pc & !1).or_default() += n;
    }
    let total: u64 = per_pc.values().sum();
    let distinct = per_pc.len();
    let v = views(
        sym,
        Input {
            per_pc,
            total,
            kind: Kind::Exact,
            exact: None,
            code,
        },
        opts,
    );
    let mut diagnostics = Vec::new();
    if total == 0 {
        diagnostics.push(diagnose::Diagnostic {
            kind: "no-samples",
            severity: "warning",
            message: "no instructions were counted: did the firmware start?".into(),
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    if let Some(out) = v.functions.iter().find(|r| r.name == OUTSIDE) {
        diagnostics.push(diagnose::Diagnostic {
            kind: "outside-image",
            severity: "warning",
            message: format!(
                "{:.2} % of the instructions ran outside every function of this ELF (code copied to \
                 RAM, a bootloader, or another image)",
                out.percent
            ),
            percent: Some(out.percent),
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    let warnings = diagnostics.iter().map(|d| d.message.clone()).collect();
    Report {
        format_version: JSON_VERSION,
        mode: "exact",
        samples: None,
        instructions: Some(total),
        unit: "instructions".into(),
        facts: RunFacts::Exact(facts),
        functions: v.functions,
        inlined: v.inlined,
        lines: v.lines,
        tags: Vec::new(),
        tag_functions: Vec::new(),
        tree: v.tree,
        annotate: v.annotate,
        stacks: v.stacks,
        tagged: Vec::new(),
        per_pc: v.per_pc,
        distinct_pcs: distinct,
        max_error_points: None,
        exact_instructions: None,
        diagnostics,
        warnings,
        laps: None,
    }
}
