//! The profile: samples aggregated by function, inline frame and source line, each share with
//! its 95 % interval, plus the facts of the run and warnings where the profile could mislead.

pub mod annotate;
pub mod bins;
pub mod calls;
pub mod diagnose;
pub mod diff;
pub mod formats;
pub mod gate;
pub mod held_off;
pub mod html;
pub mod itm;
pub mod load;
pub mod model;
pub mod samples;
pub mod stat;
pub mod text;
pub mod timeline;
pub mod tree;
pub mod unseen;
pub mod unwound;

use std::collections::HashMap;

pub use model::{
    Diagnostic, ExactFacts, Facts, Finding, JSON_VERSION, OUTSIDE, PcCount, Report, Row, RunFacts,
    Severity, Stack, StackUse, TimingFacts, stop_reason,
};
pub use samples::Samples;

use crate::analysis::stats::{Z95, wilson};
use crate::image::disasm::Code;
use crate::image::symbolize::Symbolizer;

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
            // The held-off row has an exact share only where the run counted each exception.
            let exact_percent = exact
                .filter(|(e, _)| !held_off::is_row(&key.0) || e.contains_key(&key))
                .map(|(e, et)| {
                    100.0 * e.get(&key).copied().unwrap_or(0) as f64 / (*et).max(1) as f64
                });
            let error_points = exact_percent.map(|x| percent - x);
            // In standard deviations of the binomial count at the exact share (exact tails, so
            // that a row expected to get a fraction of a sample is not flagged for one).
            let error_sigma = exact_percent.map(|x| {
                if kind == Kind::Exact {
                    0.0
                } else {
                    crate::analysis::stats::binomial_z(k, total, x / 100.0)
                }
            });
            Row {
                name: key.0,
                task: None,
                count: k,
                samples: (kind == Kind::Sampled).then_some(k),
                instructions: (kind == Kind::Exact).then_some(k),
                percent,
                ci95: (kind == Kind::Sampled).then_some([100.0 * lo, 100.0 * hi]),
                function: key.1,
                exact_percent,
                error_points,
                error_sigma,
                inclusive_instructions: None,
                inclusive_percent: None,
                inclusive_samples: None,
                inclusive_ci95: None,
                exact_inclusive_percent: None,
                inclusive_at_most_percent: None,
                calls: None,
                cycles: None,
                inclusive_cycles: None,
                cpi: None,
                microseconds: None,
                inclusive_microseconds: None,
                cycles_percent: None,
                exact_cycles_percent: None,
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

/// Rows of sampler-rt's own code that samples found (the few instructions of `flush` or `exit`
/// before they stop the timer): the exact count leaves that code out, so it has nothing to be
/// judged against, rather than an exact share of 0 that no sample could match.
fn unjudged_sampler_rows(sym: &Symbolizer, v: &mut Views) {
    for (rows, by_owner) in [
        (&mut v.functions, false),
        (&mut v.inlined, true),
        (&mut v.lines, true),
    ] {
        for row in rows.iter_mut() {
            let owner = if by_owner {
                row.function.as_deref().unwrap_or(&row.name)
            } else {
                &row.name
            };
            if row.exact_percent == Some(0.0) && sym.is_sampler_function(owner) {
                row.exact_percent = None;
                row.error_points = None;
                row.error_sigma = None;
            }
        }
    }
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

/// `--truth --cycles` on a sampled run: each row's share of the cycles, from its samples
/// weighted by each address's cycles per instruction in the exact run (the sampler interrupts
/// by instructions in QEMU, so its samples are instruction shares), and the exact share of the
/// cycles the sampler could see. The instruction shares and their statistics stay as they are.
pub fn cycle_shares(
    r: &mut Report,
    sym: &mut Symbolizer,
    sampled: &HashMap<u32, u64>,
    exact: &[(u32, u64)],
    est: &crate::image::timing::Estimate,
) {
    // Samples in thousandths of a cycle, so that the tables' integer counts keep the weights.
    let mut weighted: HashMap<u32, u64> = HashMap::new();
    for (&pc, &k) in sampled {
        let cpi = est.each.get(&(pc & !1)).map(|e| e.1).unwrap_or(1.0);
        *weighted.entry(pc).or_default() += (k as f64 * cpi * 1000.0).round() as u64;
    }
    let (seen, _) = exact_per_pc(sym, exact);
    let cycles: HashMap<u32, u64> = seen
        .keys()
        .map(|pc| (*pc, est.per_pc.get(pc).copied().unwrap_or(0)))
        .collect();
    let (ws, cs) = (tables(sym, &weighted), tables(sym, &cycles));
    let (wt, ct): (u64, u64) = (weighted.values().sum(), cycles.values().sum());
    for (rows, w, c) in [
        (&mut r.functions, &ws[0], &cs[0]),
        (&mut r.inlined, &ws[1], &cs[1]),
        (&mut r.lines, &ws[2], &cs[2]),
    ] {
        for row in rows.iter_mut() {
            let key = (row.name.clone(), row.function.clone());
            let share = |m: &HashMap<Key, u64>, t: u64| {
                m.get(&key).map(|&v| 100.0 * v as f64 / t.max(1) as f64)
            };
            row.cycles_percent = Some(share(w, wt).unwrap_or(0.0));
            row.exact_cycles_percent = share(c, ct).or(Some(0.0));
        }
    }
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
#[derive(Debug, Clone)]
pub struct Options {
    /// Annotate the disassembly of this many of the hottest functions.
    pub annotate: usize,
    /// `--annotate FN`: this function (its name, or a unique part of it) instead of the hottest.
    pub annotate_function: Option<String>,
    /// How histogram bins shared by several functions are split.
    pub bin_split: crate::report::bins::Split,
    /// Stacks (folded, flamegraph) start with the sample's tag.
    pub by_tag: bool,
    /// `--callers FN`, `--callees FN`.
    pub callers: Option<String>,
    pub callees: Option<String>,
    /// Keep the samples in the order taken (`--format firefox`).
    pub timeline: bool,
    /// `--cycles`: the timing model asked for (the core `None`: the run's).
    pub cycles: Option<CyclesRequest>,
    /// `--max-poll`: the longest an Embassy task's poll may take before the report warns.
    pub max_poll: Option<crate::spec::Period>,
}

/// `--cycles` with `--core`, `--wait-states`, `--no-prefetch`.
#[derive(Debug, Clone, PartialEq)]
pub struct CyclesRequest {
    pub core: Option<crate::image::timing::Core>,
    pub wait_states: u32,
    pub prefetch: bool,
    /// `--clock HZ`: the cycles as time too.
    pub clock_hz: Option<u32>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            annotate: 0,
            annotate_function: None,
            bin_split: crate::report::bins::Split::Density,
            by_tag: false,
            callers: None,
            callees: None,
            timeline: false,
            cycles: None,
            max_poll: None,
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

fn views(sym: &mut Symbolizer, input: Input<'_>, opts: &Options) -> Views {
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
            let names: Vec<String> = match &opts.annotate_function {
                Some(wanted) => {
                    let all: Vec<&String> = functions
                        .iter()
                        .filter(|r| r.name != OUTSIDE && r.count > 0)
                        .map(|r| &r.name)
                        .collect();
                    match calls::find(&all, wanted) {
                        Ok(name) => vec![name],
                        Err(e) => {
                            crate::term::warn(format!("`--annotate {wanted}`: {e}"));
                            Vec::new()
                        }
                    }
                }
                None => functions
                    .iter()
                    .filter(|r| r.name != OUTSIDE && r.count > 0)
                    .take(opts.annotate)
                    .map(|r| r.name.clone())
                    .collect(),
            };
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

/// The tables by tag and by tag and function, when the samples carry tags.
fn tag_tables(sym: &mut Symbolizer, samples: &Samples) -> (Vec<Row>, Vec<Row>) {
    if samples.tags.is_empty() || samples.tags.len() != samples.ordered.len() {
        return (Vec::new(), Vec::new());
    }
    let mut by_tag: HashMap<Key, u64> = HashMap::new();
    let mut by_pair: HashMap<Key, u64> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    // A tag's label: the name it was given, else what it points to.
    let mut label_of = |sym: &mut Symbolizer, tag: u32| -> String {
        names
            .entry(tag)
            .or_insert_with(|| {
                samples
                    .tag_names
                    .get(&tag)
                    .cloned()
                    .unwrap_or_else(|| sym.name_address(tag))
            })
            .clone()
    };
    for (&pc, &tag) in samples.ordered.iter().zip(&samples.tags) {
        let label = label_of(sym, tag);
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
    let exact = (!samples.exact_by_tag.is_empty()).then(|| {
        let mut m: HashMap<Key, u64> = HashMap::new();
        for (&tag, &count) in &samples.exact_by_tag {
            *m.entry((label_of(sym, tag), None)).or_default() += count;
        }
        let total = m.values().sum::<u64>();
        (m, total)
    });
    (
        rows(by_tag, n, exact.as_ref(), Kind::Sampled),
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
    let mut v = views(
        sym,
        Input {
            per_pc: per_pc.clone(),
            total,
            kind: Kind::Sampled,
            exact,
            code: code.as_deref_mut(),
        },
        &opts,
    );
    unjudged_sampler_rows(sym, &mut v);
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
            urgent: samples.urgent.as_deref(),
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
        .filter(|d| d.severity == Severity::Warning)
        .map(|d| d.message.clone())
        .collect();
    Report {
        format_version: JSON_VERSION,
        mode: crate::runs::Mode::Sampled,
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
        unseen: None,
        diagnostics,
        warnings,
        laps: None,
        tasks: None,
        callers: None,
        callees: None,
        call_stacks: Vec::new(),
        inline_stacks: Vec::new(),
        timeline: None,
        call_counts: Vec::new(),
        exceptions: Vec::new(),
        cycles: None,
        timing: None,
        unwinding: None,
        stack: None,
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
        &opts,
    );
    let mut diagnostics = Vec::new();
    if total == 0 {
        diagnostics.push(Diagnostic {
            kind: Finding::NoSamples,
            severity: Severity::Warning,
            message: "no instructions were counted: did the firmware start?".into(),
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    if let Some(out) = v.functions.iter().find(|r| r.name == OUTSIDE) {
        diagnostics.push(Diagnostic {
            kind: Finding::OutsideImage,
            severity: Severity::Warning,
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
        mode: crate::runs::Mode::Exact,
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
        unseen: None,
        diagnostics,
        warnings,
        laps: None,
        tasks: None,
        callers: None,
        callees: None,
        call_stacks: Vec::new(),
        inline_stacks: Vec::new(),
        timeline: None,
        call_counts: Vec::new(),
        exceptions: Vec::new(),
        cycles: None,
        timing: None,
        unwinding: None,
        stack: None,
    }
}

#[cfg(test)]
mod tests;
