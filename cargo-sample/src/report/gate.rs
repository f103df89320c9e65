//! The performance gate: an exact run's metrics kept as a baseline, and a later run compared
//! with it under limits. Exact counts repeat to the instruction, so any change is the code's:
//! a limit says how much of it a pull request may add.
//!
//! Metrics: `total` (instructions of the run), `function:NAME` (instructions in the function
//! itself), `inclusive:NAME` (with everything it called, when the run followed calls),
//! `size:NAME` (bytes of a function's code, or of `.text`, `.rodata`, `.data`, `.bss`), and
//! with `--cycles` the estimated cycles of the same: `cycles`, `function-cycles:NAME`,
//! `inclusive-cycles:NAME` (compared only between runs timed by the same model).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::model::Report;
use crate::image::symbolize::Symbolizer;

/// What a metric measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Total,
    Function,
    Inclusive,
    Size,
    /// `--cycles`: the run's estimated cycles.
    Cycles,
    FunctionCycles,
    InclusiveCycles,
    /// An exception, RTIC task or thread mode: its instructions (each in the innermost
    /// exception open when it ran).
    Task,
    /// `--cycles`: the same in estimated cycles.
    TaskCycles,
    /// A lap region's mean lap, its own cost subtracted (`--laps --cycles` runs).
    Region,
    /// The same in estimated cycles.
    RegionCycles,
    /// A benchmark's median iteration, every instruction counted (`cargo sample bench`).
    Bench,
    /// A benchmark's mean iteration in estimated cycles.
    BenchCycles,
    /// The main stack's deepest point, in bytes (exact runs on Cortex-M).
    Stack,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Total => "total",
            Kind::Function => "function",
            Kind::Inclusive => "inclusive",
            Kind::Size => "size",
            Kind::Cycles => "cycles",
            Kind::FunctionCycles => "function-cycles",
            Kind::InclusiveCycles => "inclusive-cycles",
            Kind::Task => "task",
            Kind::TaskCycles => "task-cycles",
            Kind::Region => "region",
            Kind::RegionCycles => "region-cycles",
            Kind::Bench => "bench",
            Kind::BenchCycles => "bench-cycles",
            Kind::Stack => "stack",
        }
    }

    /// In estimated cycles (kept only when the runs' timing models agree).
    fn is_cycles(self) -> bool {
        matches!(
            self,
            Kind::Cycles
                | Kind::FunctionCycles
                | Kind::InclusiveCycles
                | Kind::TaskCycles
                | Kind::RegionCycles
                | Kind::BenchCycles
        )
    }

    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "total" => Kind::Total,
            "function" => Kind::Function,
            "inclusive" => Kind::Inclusive,
            "size" => Kind::Size,
            "cycles" => Kind::Cycles,
            "function-cycles" => Kind::FunctionCycles,
            "inclusive-cycles" => Kind::InclusiveCycles,
            "task" => Kind::Task,
            "task-cycles" => Kind::TaskCycles,
            "region" => Kind::Region,
            "region-cycles" => Kind::RegionCycles,
            "bench" => Kind::Bench,
            "bench-cycles" => Kind::BenchCycles,
            "stack" => Kind::Stack,
            _ => return None,
        })
    }
}

/// Where the runs compared must agree for their counts to mean the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conditions {
    pub machine: String,
    pub cpu: String,
    pub icount_shift: u8,
    pub unit: String,
    /// `--cycles`: the timing model (`cortex-m4 timing, flash at 0 wait states`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
}

/// An exact run's metrics, as a baseline file keeps them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    pub format_version: u32,
    pub firmware: String,
    pub conditions: Conditions,
    /// Kind, then name (`""` for `total`), then the value.
    pub metrics: BTreeMap<Kind, BTreeMap<String, u64>>,
    /// A function's first source line, `file:line`.
    #[serde(default)]
    pub lines: BTreeMap<String, String>,
}

/// The version of the baseline file's layout.
pub const BASELINE_VERSION: u32 = 1;

/// The sections whose sizes are metrics.
const SECTIONS: [&str; 4] = [".text", ".rodata", ".data", ".bss"];

/// The metrics of an exact run's report, and the sizes of its image.
pub fn metrics(
    report: &Report,
    elf: &[u8],
    sym: &mut Symbolizer,
    conditions: Conditions,
) -> Baseline {
    let mut m: BTreeMap<Kind, BTreeMap<String, u64>> = BTreeMap::new();
    // (A lap run's total is the exact count of the same run.)
    let total = report
        .instructions
        .or(report.exact_instructions)
        .unwrap_or(0);
    m.entry(Kind::Total)
        .or_default()
        .insert(String::new(), total);
    if let Some(c) = report.cycles {
        m.entry(Kind::Cycles).or_default().insert(String::new(), c);
    }
    for row in &report.functions {
        // Instructions, whatever unit the report's shares are in.
        m.entry(Kind::Function)
            .or_default()
            .insert(row.name.clone(), row.instructions.unwrap_or(row.count));
        if let Some(inc) = row.inclusive_instructions {
            m.entry(Kind::Inclusive)
                .or_default()
                .insert(row.name.clone(), inc);
        }
        if let Some(c) = row.cycles {
            m.entry(Kind::FunctionCycles)
                .or_default()
                .insert(row.name.clone(), c);
        }
        if let Some(c) = row.inclusive_cycles {
            m.entry(Kind::InclusiveCycles)
                .or_default()
                .insert(row.name.clone(), c);
        }
    }
    // An RTIC software task split out of its dispatcher by its own name (`task:async_task3`),
    // its line that of its `fn`; every other row by the report's name.
    let mut task_lines = BTreeMap::new();
    for row in &report.tags {
        let name = row.task.clone().unwrap_or_else(|| row.name.clone());
        if let Some(t) = &row.task
            && let Some(at) = crate::image::rtic::task_fn_line(sym, t)
        {
            task_lines.insert(name.clone(), at);
        }
        m.entry(Kind::Task)
            .or_default()
            .insert(name.clone(), row.instructions.unwrap_or(row.count));
        if let Some(c) = row.cycles {
            m.entry(Kind::TaskCycles).or_default().insert(name, c);
        }
    }
    let bench = report.laps.as_ref().is_some_and(|l| l.bench);
    for g in report.laps.iter().flat_map(|l| &l.regions) {
        if g.calls == 0 {
            continue;
        }
        if bench {
            if let Some(e) = &g.exact {
                m.entry(Kind::Bench)
                    .or_default()
                    .insert(g.name.clone(), e.median);
            }
            if let Some(c) = &g.cycles {
                m.entry(Kind::BenchCycles)
                    .or_default()
                    .insert(g.name.clone(), c.mean.round() as u64);
            }
            continue;
        }
        m.entry(Kind::Region)
            .or_default()
            .insert(g.name.clone(), g.mean.round() as u64);
        if let Some(c) = &g.cycles {
            m.entry(Kind::RegionCycles)
                .or_default()
                .insert(g.name.clone(), c.mean.round() as u64);
        }
    }
    if let Some(st) = report.stack {
        m.entry(Kind::Stack)
            .or_default()
            .insert(String::new(), u64::from(st.bytes));
    }
    let sizes = m.entry(Kind::Size).or_default();
    let mut lines = BTreeMap::new();
    for (start, end, name) in sym.all_functions() {
        *sizes.entry(name.clone()).or_default() += end - start;
        if let std::collections::btree_map::Entry::Vacant(e) = lines.entry(name) {
            let r = sym.resolve(start as u32);
            if let Some(f) = r.frames.last()
                && let (Some(file), Some(line)) = (&f.file, f.line)
            {
                e.insert(format!("{file}:{line}"));
            }
        }
    }
    for (section, size) in section_sizes(elf) {
        sizes.insert(section, size);
    }
    lines.extend(task_lines);
    Baseline {
        format_version: BASELINE_VERSION,
        firmware: report.facts_firmware(),
        conditions,
        metrics: m,
        lines,
    }
}

/// The sizes of the image's `.text`, `.rodata`, `.data` and `.bss` (each summed over the
/// sections of that name and its `.NAME.*` parts).
fn section_sizes(elf: &[u8]) -> Vec<(String, u64)> {
    use object::{Object, ObjectSection};
    let Ok(file) = object::File::parse(elf) else {
        return Vec::new();
    };
    SECTIONS
        .iter()
        .map(|want| {
            let size = file
                .sections()
                .filter(|s| {
                    s.name()
                        .is_ok_and(|n| n == *want || n.starts_with(&format!("{want}.")))
                })
                .map(|s| s.size())
                .fold(0u64, u64::saturating_add);
            ((*want).to_owned(), size)
        })
        .collect()
}

/// How much a metric may grow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// At most this many percent of the baseline.
    Percent(f64),
    /// At most this much.
    Absolute(u64),
}

/// `--limit METRIC[:PATTERN]=+X%` or `=+N`.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub kind: Kind,
    /// `*` matches any run of characters; `None`: every name.
    pub pattern: Option<String>,
    pub bound: Bound,
    /// As given, for messages.
    pub text: String,
}

impl std::str::FromStr for Limit {
    type Err = String;

    fn from_str(s: &str) -> Result<Limit, String> {
        let usage = || {
            format!(
                "`{s}`: a limit is METRIC=+X% or METRIC=+N, METRIC one of total, function, \
                 inclusive, task, region, bench, size, stack, cycles, function-cycles, inclusive-cycles, task-cycles, region-cycles, bench-cycles, optionally narrowed by a name pattern (`function:crc*=+2%`)"
            )
        };
        let (metric, bound) = s.split_once('=').ok_or_else(usage)?;
        let (kind, pattern) = match metric.split_once(':') {
            Some((k, p)) if !p.is_empty() => (k, Some(p.to_owned())),
            Some(_) => return Err(usage()),
            None => (metric, None),
        };
        let kind = Kind::parse(kind.trim()).ok_or_else(usage)?;
        let bound = bound.trim().strip_prefix('+').unwrap_or(bound.trim());
        let bound = match bound.strip_suffix('%') {
            Some(p) => Bound::Percent(
                p.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(usage)?,
            ),
            None => Bound::Absolute(bound.parse().map_err(|_| usage())?),
        };
        Ok(Limit {
            kind,
            pattern,
            bound,
            text: s.to_owned(),
        })
    }
}

/// `*` as any run of characters; the rest literally.
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

impl Limit {
    fn applies(&self, kind: Kind, name: &str) -> bool {
        self.kind == kind && self.pattern.as_deref().is_none_or(|p| matches(p, name))
    }

    fn exceeded(&self, baseline: u64, current: u64) -> bool {
        let grew = current.saturating_sub(baseline);
        match self.bound {
            Bound::Absolute(n) => grew > n,
            Bound::Percent(_) if grew == 0 => false,
            Bound::Percent(_) if baseline == 0 => true,
            Bound::Percent(p) => grew as f64 * 100.0 > p * baseline as f64,
        }
    }
}

/// One metric that changed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change {
    pub metric: Kind,
    pub name: String,
    pub baseline: u64,
    pub current: u64,
    pub delta: i64,
    /// Of the baseline; `None` when the baseline is 0.
    pub percent: Option<f64>,
    /// The limit that judged it (the most specific that applies), as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exceeded: bool,
    /// The function's source, for annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// A run against its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub baseline: String,
    pub total: Change,
    pub regressions: Vec<Change>,
    pub improvements: Vec<Change>,
    /// Metrics that did not change.
    pub unchanged: usize,
}

impl Comparison {
    /// The regressions beyond their limits.
    pub fn exceeded(&self) -> Vec<&Change> {
        std::iter::once(&self.total)
            .chain(&self.regressions)
            .filter(|c| c.exceeded)
            .collect()
    }
}

/// Refuse to compare counts made under other conditions, saying which differ.
pub fn check_conditions(base: &Conditions, cur: &Conditions, name: &str) -> Result<()> {
    let mut differ = Vec::new();
    if base.machine != cur.machine {
        differ.push(format!("machine {} against {}", cur.machine, base.machine));
    }
    if base.cpu != cur.cpu {
        differ.push(format!("CPU {} against {}", cur.cpu, base.cpu));
    }
    if base.icount_shift != cur.icount_shift {
        differ.push(format!(
            "icount shift {} against {}",
            cur.icount_shift, base.icount_shift
        ));
    }
    if base.unit != cur.unit {
        differ.push(format!("unit {} against {}", cur.unit, base.unit));
    }
    if let (Some(b), Some(c)) = (&base.timing, &cur.timing)
        && b != c
    {
        differ.push(format!("{c} against {b}"));
    }
    if !differ.is_empty() {
        bail!(
            "the baseline `{name}` was counted under other conditions ({}): its counts do not \
             compare with this run's. Save the baseline again under this run's conditions",
            differ.join(", ")
        );
    }
    Ok(())
}

/// Compare `cur` with `base` under `limits`.
pub fn compare(
    name: &str,
    base: &Baseline,
    cur: &Baseline,
    limits: &[Limit],
) -> Result<Comparison> {
    check_conditions(&base.conditions, &cur.conditions, name)?;
    let mut changes = Vec::new();
    let mut unchanged: usize = 0;
    let kinds: std::collections::BTreeSet<Kind> = base
        .metrics
        .keys()
        .chain(cur.metrics.keys())
        .copied()
        .collect();
    let empty = BTreeMap::new();
    for kind in kinds {
        // Cycles compare only where both runs estimated them, the stack where both measured it.
        if (kind.is_cycles() || kind == Kind::Stack)
            && !(base.metrics.contains_key(&kind) && cur.metrics.contains_key(&kind))
        {
            continue;
        }
        let (b, c) = (
            base.metrics.get(&kind).unwrap_or(&empty),
            cur.metrics.get(&kind).unwrap_or(&empty),
        );
        let names: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
        for n in names {
            let (bv, cv) = (
                b.get(n).copied().unwrap_or(0),
                c.get(n).copied().unwrap_or(0),
            );
            if bv == cv {
                unchanged += 1;
                continue;
            }
            // The most specific limit: one with a pattern over one without (of two alike, the
            // later).
            let limit = limits
                .iter()
                .filter(|l| l.applies(kind, n))
                .max_by_key(|l| l.pattern.as_ref().map(|p| p.len() + 1).unwrap_or(0));
            let (file, line) = cur
                .lines
                .get(n)
                .or(base.lines.get(n))
                .filter(|_| kind != Kind::Total)
                .and_then(|l| l.rsplit_once(':'))
                .map(|(f, l)| (Some(f.to_owned()), l.parse().ok()))
                .unwrap_or((None, None));
            changes.push(Change {
                metric: kind,
                name: n.clone(),
                baseline: bv,
                current: cv,
                delta: cv as i64 - bv as i64,
                percent: (bv > 0).then(|| 100.0 * (cv as f64 - bv as f64) / bv as f64),
                limit: limit.map(|l| l.text.clone()),
                exceeded: limit.is_some_and(|l| l.exceeded(bv, cv)),
                file,
                line,
            });
        }
    }
    let total_of = |b: &Baseline| {
        b.metrics
            .get(&Kind::Total)
            .and_then(|t| t.get(""))
            .copied()
            .unwrap_or(0)
    };
    let total = match changes.iter().position(|c| c.metric == Kind::Total) {
        Some(i) => changes.remove(i),
        None => {
            unchanged = unchanged.saturating_sub(1);
            Change {
                metric: Kind::Total,
                name: String::new(),
                baseline: total_of(base),
                current: total_of(cur),
                delta: 0,
                percent: Some(0.0),
                limit: None,
                exceeded: false,
                file: None,
                line: None,
            }
        }
    };
    let (mut regressions, mut improvements): (Vec<Change>, Vec<Change>) =
        changes.into_iter().partition(|c| c.delta > 0);
    regressions.sort_by(|a, b| b.exceeded.cmp(&a.exceeded).then(b.delta.cmp(&a.delta)));
    improvements.sort_by_key(|c| c.delta);
    Ok(Comparison {
        baseline: name.to_owned(),
        total,
        regressions,
        improvements,
        unchanged,
    })
}

fn percent(c: &Change) -> String {
    match c.percent {
        Some(p) => format!("{p:+.2}%"),
        None => "new".to_owned(),
    }
}

fn label(c: &Change) -> String {
    match c.metric {
        Kind::Total => "total".to_owned(),
        Kind::Cycles => "cycles".to_owned(),
        Kind::Stack => "stack".to_owned(),
        k => format!("{}:{}", k.as_str(), c.name),
    }
}

/// One line that sums the comparison up.
pub fn summary(c: &Comparison) -> String {
    let over = c.exceeded().len();
    format!(
        "against `{}`: total {} → {} instructions ({}, {:+}); {} regression{}{}, {} improvement{}, {} unchanged",
        c.baseline,
        c.total.baseline,
        c.total.current,
        percent(&c.total),
        c.total.delta,
        c.regressions.len(),
        if c.regressions.len() == 1 { "" } else { "s" },
        match over {
            0 => String::new(),
            1 => " (1 over its limit)".to_owned(),
            n => format!(" ({n} over their limits)"),
        },
        c.improvements.len(),
        if c.improvements.len() == 1 { "" } else { "s" },
        c.unchanged
    )
}

/// The comparison as a text table: what changed, unchanged metrics counted.
pub fn text(c: &Comparison) -> String {
    let mut s = format!("{}\n", summary(c));
    let rows: Vec<&Change> = std::iter::once(&c.total)
        .filter(|t| t.delta != 0)
        .chain(&c.regressions)
        .chain(&c.improvements)
        .collect();
    if rows.is_empty() {
        return s;
    }
    s.push_str(&format!(
        "\n  {:>14} {:>14} {:>12} {:>9}  {:<16} metric\n",
        "baseline", "current", "delta", "percent", "limit"
    ));
    for r in rows {
        let limit = match (&r.limit, r.exceeded) {
            (Some(l), true) => format!("EXCEEDED {}", l.split_once('=').map(|x| x.1).unwrap_or(l)),
            (Some(l), false) => l.split_once('=').map(|x| x.1).unwrap_or(l).to_owned(),
            (None, _) => String::new(),
        };
        s.push_str(&format!(
            "  {:>14} {:>14} {:>+12} {:>9}  {:<16} {}\n",
            r.baseline,
            r.current,
            r.delta,
            percent(r),
            limit,
            label(r)
        ));
    }
    s
}

/// The comparison for a pull-request comment: a summary line, the metrics over their limits
/// and the other regressions and improvements in tables, the rest folded.
pub fn markdown(c: &Comparison) -> String {
    let over = c.exceeded();
    let head = if over.is_empty() {
        "**cargo-sample**: within every limit".to_owned()
    } else {
        match over.len() {
            1 => "**cargo-sample**: 1 over its limit".to_owned(),
            n => format!("**cargo-sample**: {n} over their limits"),
        }
    };
    let mut s = format!("{head} · {}\n", summary(c));
    let table = |rows: &[&Change]| {
        let mut t = String::from(
            "\n| metric | baseline | current | delta | percent | limit |\n|---|---:|---:|---:|---:|---|\n",
        );
        for r in rows {
            t.push_str(&format!(
                "| `{}` | {} | {} | {:+} | {} | {}{} |\n",
                label(r),
                r.baseline,
                r.current,
                r.delta,
                percent(r),
                if r.exceeded { "**exceeded** " } else { "" },
                r.limit.as_deref().unwrap_or("")
            ));
        }
        t
    };
    if !over.is_empty() {
        s.push_str(&table(&over));
    }
    let rest: Vec<&Change> = std::iter::once(&c.total)
        .filter(|t| t.delta != 0 && !t.exceeded)
        .chain(c.regressions.iter().filter(|r| !r.exceeded))
        .chain(&c.improvements)
        .collect();
    if !rest.is_empty() {
        s.push_str(&format!(
            "\n<details><summary>{} more change{} ({} unchanged)</summary>\n{}\n</details>\n",
            rest.len(),
            if rest.len() == 1 { "" } else { "s" },
            c.unchanged,
            table(&rest)
        ));
    }
    s
}

/// GitHub Actions workflow commands: an error on the source line of each metric over its
/// limit (a warning for the run's total, which has no line).
pub fn annotations(c: &Comparison) -> Vec<String> {
    c.exceeded()
        .iter()
        .map(|r| {
            let what = format!(
                "{} grew by {:+} ({}) against `{}`, over the limit {}",
                label(r),
                r.delta,
                percent(r),
                c.baseline,
                r.limit.as_deref().unwrap_or("")
            );
            match (&r.file, r.line) {
                (Some(f), Some(l)) => format!("::error file={f},line={l}::{what}"),
                _ => format!("::error::{what}"),
            }
        })
        .collect()
}

/// The run's metrics in Bencher Metric Format: a benchmark per metric name, its measure the
/// metric's kind.
pub fn bmf(b: &Baseline) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (kind, values) in &b.metrics {
        for (name, v) in values {
            let key = match kind {
                Kind::Total | Kind::Cycles | Kind::Stack => b.firmware.clone(),
                Kind::Task | Kind::TaskCycles => format!("{}::task::{name}", b.firmware),
                Kind::Region | Kind::RegionCycles => format!("{}::region::{name}", b.firmware),
                Kind::Bench | Kind::BenchCycles => format!("{}::bench::{name}", b.firmware),
                _ => format!("{}::{name}", b.firmware),
            };
            let entry = out
                .entry(key)
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(m) = entry {
                let measure = match kind {
                    Kind::Total | Kind::Function => "instructions",
                    Kind::Inclusive => "inclusive-instructions",
                    Kind::Size => "bytes",
                    Kind::Cycles | Kind::FunctionCycles => "estimated-cycles",
                    Kind::InclusiveCycles => "inclusive-estimated-cycles",
                    Kind::Task => "task-instructions",
                    Kind::TaskCycles => "task-estimated-cycles",
                    Kind::Region => "instructions-per-lap",
                    Kind::RegionCycles => "estimated-cycles-per-lap",
                    Kind::Bench => "instructions-per-iteration",
                    Kind::BenchCycles => "estimated-cycles-per-iteration",
                    Kind::Stack => "stack-bytes",
                };
                m.insert(measure.to_owned(), serde_json::json!({ "value": v }));
            }
        }
    }
    serde_json::Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions() -> Conditions {
        Conditions {
            machine: "mps2-an385".into(),
            cpu: "cortex-m3".into(),
            icount_shift: 6,
            unit: "instructions".into(),
            timing: None,
        }
    }

    fn baseline(total: u64, functions: &[(&str, u64)]) -> Baseline {
        let mut metrics = BTreeMap::new();
        metrics.insert(Kind::Total, BTreeMap::from([(String::new(), total)]));
        metrics.insert(
            Kind::Function,
            functions
                .iter()
                .map(|(n, v)| ((*n).to_owned(), *v))
                .collect(),
        );
        Baseline {
            format_version: BASELINE_VERSION,
            firmware: "app".into(),
            conditions: conditions(),
            metrics,
            lines: BTreeMap::from([("crc32".to_owned(), "src/crc.rs:12".to_owned())]),
        }
    }

    fn limits(s: &[&str]) -> Vec<Limit> {
        s.iter().map(|l| l.parse().unwrap()).collect()
    }

    #[test]
    fn limits_parse_and_refuse_with_the_form_they_take() {
        let l: Limit = "function:crc*=+2%".parse().unwrap();
        assert_eq!(
            (l.kind, l.pattern.as_deref(), l.bound),
            (Kind::Function, Some("crc*"), Bound::Percent(2.0))
        );
        let l: Limit = "size=+64".parse().unwrap();
        assert_eq!((l.kind, l.bound), (Kind::Size, Bound::Absolute(64)));
        for bad in [
            "speed=+1%",
            "total",
            "total=+x%",
            "function:=+1%",
            "total=+-1%",
        ] {
            let e = bad.parse::<Limit>().unwrap_err();
            assert!(e.contains("METRIC=+X%"), "{bad}: {e}");
        }
        assert!(matches("crc*", "crc32"));
        assert!(matches("*::fmt*", "core::fmt::write"));
        assert!(!matches("crc*", "my_crc"));
        assert!(matches("a*b*c", "aXbYc") && !matches("a*b*c", "aXcYb"));
    }

    #[test]
    fn the_stack_is_gated_where_both_runs_measured_it() {
        let with = |bytes: u64| {
            let mut b = baseline(1000, &[("crc32", 400)]);
            b.metrics
                .insert(Kind::Stack, BTreeMap::from([(String::new(), bytes)]));
            b
        };
        let c = compare("main", &with(512), &with(600), &limits(&["stack=+64"])).unwrap();
        assert_eq!(c.regressions.len(), 1);
        let r = &c.regressions[0];
        assert_eq!((r.metric, r.delta, r.exceeded), (Kind::Stack, 88, true));
        assert_eq!(label(r), "stack");
        assert!(
            !compare("main", &with(512), &with(570), &limits(&["stack=+64"]))
                .unwrap()
                .regressions[0]
                .exceeded
        );
        // A baseline from a run that did not measure it: nothing to compare, no regression.
        let c = compare("main", &baseline(1000, &[("crc32", 400)]), &with(600), &[]).unwrap();
        assert!(c.regressions.is_empty() && c.improvements.is_empty());
        let bmf = bmf(&with(600));
        assert_eq!(bmf["app"]["stack-bytes"]["value"], 600);
    }

    #[test]
    fn a_regression_over_its_limit_is_named_and_improvements_never_fail() {
        let base = baseline(1000, &[("crc32", 400), ("sort", 500), ("idle", 100)]);
        let cur = baseline(1030, &[("crc32", 440), ("sort", 490), ("idle", 100)]);
        let c = compare(
            "main",
            &base,
            &cur,
            &limits(&["function=+20%", "function:crc*=+5%", "total=+5%"]),
        )
        .unwrap();
        assert_eq!((c.total.delta, c.total.exceeded), (30, false));
        assert_eq!(c.regressions.len(), 1);
        let r = &c.regressions[0];
        assert_eq!((r.name.as_str(), r.delta, r.exceeded), ("crc32", 40, true));
        // The most specific limit judged it.
        assert_eq!(r.limit.as_deref(), Some("function:crc*=+5%"));
        assert_eq!((r.file.as_deref(), r.line), (Some("src/crc.rs"), Some(12)));
        assert_eq!(c.improvements.len(), 1);
        assert!(!c.improvements[0].exceeded);
        assert_eq!(c.unchanged, 1);
        assert_eq!(c.exceeded().len(), 1);
        // The same run against itself: nothing changed, nothing over.
        let same = compare("main", &cur, &cur, &limits(&["total=+0%"])).unwrap();
        assert!(same.exceeded().is_empty() && same.regressions.is_empty());
        assert_eq!(same.unchanged, 3);
    }

    /// Exceptions and RTIC tasks are metrics of their own, in instructions and (with
    /// `--cycles`) estimated cycles, judged by `task` limits narrowed by name.
    #[test]
    fn a_task_that_grew_is_judged_by_its_own_limit() {
        let with_tasks = |irq: u64, thread: u64| {
            let mut b = baseline(irq + thread, &[]);
            b.metrics.insert(
                Kind::Task,
                BTreeMap::from([
                    ("control (GPIOA, IRQ 0)".to_owned(), irq),
                    ("thread mode".to_owned(), thread),
                ]),
            );
            b.metrics.insert(
                Kind::TaskCycles,
                BTreeMap::from([("control (GPIOA, IRQ 0)".to_owned(), irq * 3 / 2)]),
            );
            b
        };
        let (base, cur) = (with_tasks(1000, 5000), with_tasks(1100, 4900));
        let c = compare(
            "main",
            &base,
            &cur,
            &limits(&["task:control*=+5%", "task-cycles=+20%"]),
        )
        .unwrap();
        let over: Vec<(Kind, &str)> = c
            .exceeded()
            .iter()
            .map(|r| (r.metric, r.name.as_str()))
            .collect();
        assert_eq!(over, [(Kind::Task, "control (GPIOA, IRQ 0)")]);
        assert!(
            c.regressions
                .iter()
                .any(|r| r.metric == Kind::TaskCycles && r.delta == 150 && !r.exceeded)
        );
        assert!(c.improvements.iter().any(|r| r.name == "thread mode"));
        assert_eq!(label(c.exceeded()[0]), "task:control (GPIOA, IRQ 0)");
        let bmf = bmf(&cur);
        assert_eq!(
            bmf["app::task::thread mode"]["task-instructions"]["value"],
            4900
        );
    }

    #[test]
    fn other_conditions_are_refused_naming_what_differs() {
        let base = baseline(1000, &[]);
        let mut cur = baseline(1000, &[]);
        cur.conditions.icount_shift = 0;
        cur.conditions.machine = "lm3s6965evb".into();
        let e = compare("main", &base, &cur, &[]).unwrap_err().to_string();
        assert!(
            e.contains("machine lm3s6965evb against mps2-an385")
                && e.contains("icount shift 0 against 6"),
            "{e}"
        );
    }

    #[test]
    fn markdown_and_annotations_say_what_went_over() {
        let base = baseline(1000, &[("crc32", 400), ("sort", 500)]);
        let cur = baseline(1100, &[("crc32", 500), ("sort", 490)]);
        let c = compare("main", &base, &cur, &limits(&["function=+10%"])).unwrap();
        let md = markdown(&c);
        assert!(md.starts_with("**cargo-sample**: 1 over its limit"), "{md}");
        assert!(
            md.contains(
                "| `function:crc32` | 400 | 500 | +100 | +25.00% | **exceeded** function=+10% |"
            ),
            "{md}"
        );
        assert!(md.contains("<details><summary>2 more changes"), "{md}");
        assert_eq!(
            annotations(&c),
            vec![
                "::error file=src/crc.rs,line=12::function:crc32 grew by +100 (+25.00%) against \
                 `main`, over the limit function=+10%"
                    .to_owned()
            ]
        );
        let t = text(&c);
        assert!(
            t.contains("EXCEEDED +10%") && t.contains("function:crc32"),
            "{t}"
        );
    }

    #[test]
    fn cycles_compare_only_under_one_timing_model() {
        let timed = |total: u64, crc: u64, model: &str| {
            let mut b = baseline(1000, &[("crc32", 400)]);
            b.conditions.timing = Some(model.into());
            b.metrics
                .insert(Kind::Cycles, BTreeMap::from([(String::new(), total)]));
            b.metrics.insert(
                Kind::FunctionCycles,
                BTreeMap::from([("crc32".to_owned(), crc)]),
            );
            b
        };
        let m4 = "cortex-m4 timing, flash at 0 wait states";
        let lim = limits(&["function-cycles:crc*=+1%"]);
        let c = compare("main", &timed(1200, 500, m4), &timed(1260, 560, m4), &lim).unwrap();
        let r: Vec<String> = c.regressions.iter().map(label).collect();
        assert_eq!(r, ["function-cycles:crc32", "cycles"]);
        assert!(c.regressions[0].exceeded && !c.regressions[1].exceeded);
        // Another model: refused, naming both.
        let m0 = "cortex-m0 timing, flash at 0 wait states";
        let e = compare("main", &timed(1200, 500, m4), &timed(1200, 500, m0), &lim)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("{m0} against {m4}")), "{e}");
        // A baseline without cycles: the instructions compare, the cycles are left out.
        let c = compare(
            "main",
            &baseline(1000, &[("crc32", 400)]),
            &timed(1000, 900, m4),
            &lim,
        )
        .unwrap();
        assert!(c.regressions.is_empty() && c.improvements.is_empty());
        assert_eq!(
            bmf(&timed(1200, 500, m4))["app::crc32"]["estimated-cycles"]["value"],
            500
        );
    }

    #[test]
    fn bmf_names_a_benchmark_per_metric() {
        let b = baseline(1000, &[("crc32", 400)]);
        let v = bmf(&b);
        assert_eq!(v["app"]["instructions"]["value"], 1000);
        assert_eq!(v["app::crc32"]["instructions"]["value"], 400);
    }
}
