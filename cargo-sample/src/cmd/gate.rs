//! The performance gate on an `--exact` run (or a `--laps --cycles` one): `--save-baseline NAME` keeps its metrics,
//! `--baseline NAME` compares with them under `--limit`s and ends with exit status 3 when one
//! is exceeded (see [`crate::report::gate`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::saved::{build_options, emit, render};
use crate::cli::{Format, RunArgs};
use crate::image::symbolize::Symbolizer;
use crate::project::{self, Project, Selection};
use crate::report::gate::{self, Baseline, Comparison, Conditions, Limit};
use crate::report::load::load_report;
use crate::runs;
use crate::term;

/// Metrics over their limits: `main` ends with exit status 3 (as gungraun does), not 1.
#[derive(Debug)]
pub struct LimitExceeded(pub String);

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitExceeded {}

/// The exit status of a run whose metrics exceed a limit.
pub const EXIT_LIMIT_EXCEEDED: u8 = 3;

/// Whether the run is the gate's.
pub(crate) fn wanted(args: &RunArgs) -> bool {
    args.save_baseline.is_some()
        || args.baseline.is_some()
        || matches!(args.view.format, Format::Markdown | Format::Bmf)
}

/// Refuse what the gate cannot do, before anything is built.
pub(crate) fn check(args: &RunArgs) -> Result<()> {
    if !args.exact && args.elf.is_none() && !(args.laps && (args.view.cycles || args.bench)) {
        bail!(
            "the performance gate compares exact counts: add `--exact`, or time lap regions with \
             `--laps --cycles` (`--format markdown` and `bmf` are the gate's)"
        );
    }
    if args.view.format == Format::Markdown && args.baseline.is_none() {
        bail!("`--format markdown` is the comparison with a baseline: add `--baseline NAME`");
    }
    for name in args.save_baseline.iter().chain(&args.baseline) {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            || name.starts_with('.')
        {
            bail!(
                "`{name}`: a baseline's name is letters, digits, `.`, `_` and `-` (it names a file)"
            );
        }
    }
    Ok(())
}

/// The gate's settings in the crate's manifest, `[package.metadata.sample]`: `baseline-dir`
/// (relative to the package) and `limits` (as `--limit` takes them).
#[derive(Debug, Default, PartialEq)]
struct Manifest {
    baseline_dir: Option<PathBuf>,
    limits: Vec<Limit>,
}

fn manifest_settings(p: &Project) -> Result<Manifest> {
    let m = &p.metadata;
    let from = || {
        format!(
            "`[package.metadata.sample]` of {}",
            p.manifest_path.display()
        )
    };
    let baseline_dir = match m.get("baseline-dir") {
        None => None,
        Some(v) => Some(
            p.dir.join(
                v.as_str()
                    .with_context(|| format!("`baseline-dir` in {} is not a path", from()))?,
            ),
        ),
    };
    let limits = match m.get("limits") {
        None => Vec::new(),
        Some(v) => v
            .as_array()
            .with_context(|| format!("`limits` in {} is not a list of strings", from()))?
            .iter()
            .map(|l| {
                l.as_str()
                    .with_context(|| format!("`limits` in {} holds a non-string", from()))?
                    .parse::<Limit>()
                    .map_err(|e| anyhow::anyhow!("`limits` in {}: {e}", from()))
            })
            .collect::<Result<_>>()?,
    };
    Ok(Manifest {
        baseline_dir,
        limits,
    })
}

/// Where baselines are kept: `--baseline-dir`, else the manifest's `baseline-dir`, else
/// `baselines/` beside the runs directory of the run at `dir` (`target/cargo-sample/baselines`).
fn baseline_dir(args: &RunArgs, manifest: &Manifest, dir: &Path) -> PathBuf {
    args.baseline_dir
        .clone()
        .or(manifest.baseline_dir.clone())
        .unwrap_or_else(|| {
            dir.parent()
                .and_then(Path::parent)
                .map(|own| own.join("baselines"))
                .unwrap_or_else(|| PathBuf::from("baselines"))
        })
}

/// The metrics of the run at `dir`, reported as `report`.
fn metrics_of(dir: &Path, report: &crate::report::Report) -> Result<Baseline> {
    let meta = runs::load_meta(dir)?;
    let (elf_path, elf) = runs::elf_of(dir)?;
    let mut sym = Symbolizer::new(&elf_path, &elf, meta.workspace_root.as_deref())?;
    Ok(gate::metrics(
        report,
        &elf,
        &mut sym,
        Conditions {
            machine: meta.machine.clone(),
            cpu: meta.cpu.clone(),
            icount_shift: meta.icount_shift,
            unit: meta.unit.clone(),
            timing: report.timing.as_ref().map(|t| t.model.clone()),
        },
    ))
}

fn read_baseline(path: &Path, name: &str) -> Result<Baseline> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "no baseline `{name}` ({}): save one with `--exact --save-baseline {name}`",
            path.display()
        )
    })?;
    let b: Baseline = serde_json::from_str(&text)
        .with_context(|| format!("reading the baseline {}", path.display()))?;
    if b.format_version != gate::BASELINE_VERSION {
        bail!(
            "the baseline {} is of version {}, and this cargo-sample reads version {}: save it \
             again",
            path.display(),
            b.format_version,
            gate::BASELINE_VERSION
        );
    }
    Ok(b)
}

/// Save, compare and report the exact run at `dir`; an error [`LimitExceeded`] when a limit
/// is exceeded (after everything is printed).
pub(crate) fn run(args: &RunArgs, dir: &Path) -> Result<()> {
    let view = &args.view;
    let report = load_report(dir, build_options(view))?;
    let current = metrics_of(dir, &report)?;
    let manifest = manifest_settings(&project::discover(&Selection::from(&args.cargo))?)?;
    let store = baseline_dir(args, &manifest, dir);
    // The manifest's limits, then the command line's: of two equally specific, the latter.
    let limits: Vec<Limit> = manifest
        .limits
        .iter()
        .chain(&args.limits)
        .cloned()
        .collect();
    // Compared before a baseline of the same name is written over.
    let comparison: Option<Comparison> = match &args.baseline {
        Some(name) => {
            let base = read_baseline(&store.join(format!("{name}.json")), name)?;
            Some(gate::compare(name, &base, &current, &limits)?)
        }
        None => None,
    };
    if let Some(name) = &args.save_baseline {
        std::fs::create_dir_all(&store).with_context(|| format!("creating {}", store.display()))?;
        let path = store.join(format!("{name}.json"));
        let mut text = serde_json::to_string_pretty(&current)?;
        text.push('\n');
        runs::write_atomic(&path, text.as_bytes())?;
        let n: usize = current.metrics.values().map(|m| m.len()).sum();
        term::status(
            "Saved",
            format!("baseline `{name}` ({n} metrics) in {}", path.display()),
        );
    }
    let bytes = match (view.format, &comparison) {
        (Format::Markdown, Some(c)) => gate::markdown(c).into_bytes(),
        (Format::Markdown, None) => bail!("`--format markdown` needs `--baseline NAME`"),
        (Format::Bmf, _) => {
            let mut s = serde_json::to_string_pretty(&gate::bmf(&current))?;
            s.push('\n');
            s.into_bytes()
        }
        (Format::Json, Some(c)) => {
            let mut v = serde_json::to_value(&report)?;
            if let serde_json::Value::Object(m) = &mut v {
                m.insert("comparison".into(), serde_json::to_value(c)?);
            }
            let mut s = serde_json::to_string_pretty(&v)?;
            s.push('\n');
            s.into_bytes()
        }
        (Format::Text, Some(c)) => {
            let mut b = render(&report, view)?;
            b.push(b'\n');
            b.extend_from_slice(gate::text(c).as_bytes());
            b
        }
        _ => render(&report, view)?,
    };
    emit(bytes, view, Some(dir))?;
    let Some(c) = comparison else {
        return Ok(());
    };
    if std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true") {
        // Workflow commands: on standard output unless the report itself went there.
        let to_stdout = view.output.is_some() || view.format == Format::Text;
        for a in gate::annotations(&c) {
            if to_stdout {
                println!("{a}");
            } else {
                eprintln!("{a}");
            }
        }
    }
    let over = c.exceeded();
    if over.is_empty() {
        term::status("Within", format!("every limit against `{}`", c.baseline));
        return Ok(());
    }
    // Each limit once, in the order the metrics over them come.
    let mut limits: Vec<String> = Vec::new();
    for l in over.iter().filter_map(|r| r.limit.clone()) {
        if !limits.contains(&l) {
            limits.push(l);
        }
    }
    Err(LimitExceeded(format!(
        "{} over {} against the baseline `{}` ({}): {}",
        over.len(),
        if over.len() == 1 {
            "its limit"
        } else {
            "their limits"
        },
        c.baseline,
        limits.join(", "),
        over.iter()
            .map(|r| match r.metric {
                gate::Kind::Total => format!("total {:+}", r.delta),
                k => format!("{}:{} {:+}", k.as_str(), r.name, r.delta),
            })
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .into())
}
