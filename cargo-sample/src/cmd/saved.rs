//! A saved run printed as the views ask (loading it is [`crate::report::load`]), and the runs
//! a command names (`last`, a directory, a name).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cli::{Format, ViewArgs};
use crate::report::load::load_report;
use crate::report::{self, text};
use crate::runs;
use crate::term;

/// Render a saved run.
pub fn render_run(dir: &Path, view: &ViewArgs) -> Result<()> {
    let report = load_report(dir, build_options(view))?;
    print_report(&report, view, Some(dir))
}

/// What the views ask the report to compute.
pub fn build_options(view: &ViewArgs) -> report::Options {
    report::Options {
        annotate: annotate_count(view),
        annotate_function: match &view.annotate {
            Some(crate::cli::Annotate::Function(f)) => Some(f.clone()),
            _ => None,
        },
        bin_split: view.bin_split,
        by_tag: view.by == Some(crate::cli::By::Tag),
        callers: view.callers.clone(),
        callees: view.callees.clone(),
        timeline: view.format == crate::cli::Format::Firefox,
        max_poll: view.max_poll,
        cycles: view.cycles.then_some(report::CyclesRequest {
            core: view.core,
            wait_states: view.wait_states,
            prefetch: !view.no_prefetch,
            clock_hz: view.clock,
        }),
    }
}

/// Views that cannot work, refused before anything is built or run.
pub(crate) fn check_view(view: &ViewArgs) -> Result<()> {
    if matches!(view.format, Format::Markdown | Format::Bmf) {
        bail!(
            "`--format {}` is the performance gate's: an `--exact` run (or `--laps --cycles`, \
             `cargo sample bench`) with `--baseline NAME` (markdown) or `--save-baseline NAME` / \
             `--baseline NAME` (bmf)",
            if view.format == Format::Markdown {
                "markdown"
            } else {
                "bmf"
            }
        );
    }
    if view.open && !matches!(view.format, Format::Html | Format::Svg) {
        bail!(
            "--open opens a page in the browser: add `--format html` (the report) or `--format svg` \
             (the flame graph)"
        );
    }
    Ok(())
}

/// The annotated functions a view asks for: `--annotate N`, or the 5 hottest in the HTML
/// report, which has room for them.
fn annotate_count(view: &ViewArgs) -> usize {
    match (&view.annotate, view.format) {
        (Some(crate::cli::Annotate::Hottest(n)), _) => *n,
        (Some(crate::cli::Annotate::Function(_)), _) => 1,
        (None, Format::Html) => 5,
        (None, _) => 0,
    }
}

/// Print (or write) the report as the view asks. `beside`: where a page goes when it has no
/// `-o` and cannot go to standard output (a terminal, or `--open`): the run's directory.
pub(crate) fn print_report(
    report: &report::Report,
    view: &ViewArgs,
    beside: Option<&Path>,
) -> Result<()> {
    check_view(view)?;
    emit(render(report, view)?, view, beside)
}

/// The report in the view's format (the performance gate's formats are the gate's).
pub(crate) fn render(report: &report::Report, view: &ViewArgs) -> Result<Vec<u8>> {
    Ok(match view.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)?;
            s.push('\n');
            s.into_bytes()
        }
        Format::Text => {
            let mut t = if report.samples == Some(0) && report.laps.is_some() {
                // Laps only (`--laps`): no profile to show.
                String::new()
            } else {
                text::render(
                    report,
                    text::Options {
                        lines: view.lines,
                        tree: view.tree,
                        top: view.top,
                        min_percent: view.min_percent,
                    },
                )
            };
            if let Some(l) = &report.laps {
                if !t.is_empty() {
                    t.push('\n');
                }
                t.push_str(&crate::analysis::laps::render(l, &report.unit));
            }
            t.into_bytes()
        }
        Format::Folded => report::formats::folded(report).into_bytes(),
        Format::Svg => report::formats::svg(report)?,
        Format::Pprof => report::formats::pprof(report)?,
        Format::Callgrind => report::calls::callgrind(report)?.into_bytes(),
        Format::Firefox => report::timeline::firefox(report)?,
        Format::Html => report::html::html(report)?,
        Format::Markdown | Format::Bmf => {
            bail!("`--format markdown` and `--format bmf` are the performance gate's")
        }
    })
}

/// Write what a view rendered: to `-o FILE`, to a page beside the run, or to standard output.
pub(crate) fn emit(bytes: Vec<u8>, view: &ViewArgs, beside: Option<&Path>) -> Result<()> {
    // Only the text report is painted; its codes never reach a file, and reach standard
    // output only when that stream takes colour.
    let painted = view.format == Format::Text;
    let page = match view.format {
        Format::Html => Some("report.html"),
        Format::Svg => Some("flamegraph.svg"),
        _ => None,
    };
    use std::io::IsTerminal;
    let output = match (&view.output, page) {
        (Some(path), _) => Some(path.clone()),
        // A page is for a browser: to a file beside the run when it would otherwise be
        // shown as text, or has to be opened.
        (None, Some(name)) if view.open || std::io::stdout().is_terminal() => Some(
            beside
                .map(Path::to_path_buf)
                .unwrap_or_else(std::env::temp_dir)
                .join(name),
        ),
        _ => None,
    };
    match &output {
        Some(path) => {
            let bytes = if painted {
                term::plain(&String::from_utf8_lossy(&bytes)).into_bytes()
            } else {
                bytes
            };
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
            term::status("Wrote", path.display());
            if view.open {
                open_in_browser(path)?;
            } else if view.output.is_none() {
                term::note("open it with `--open`, or in any browser");
            }
        }
        None => {
            use std::io::Write;
            if view.format == Format::Pprof && std::io::stdout().is_terminal() {
                bail!(
                    "pprof output is binary: write it to a file with `-o profile.pb.gz` (then `pprof -http=: profile.pb.gz`)"
                );
            }
            if painted {
                let mut out = anstream::stdout().lock();
                out.write_all(&bytes)?;
            } else {
                std::io::stdout().lock().write_all(&bytes)?;
            }
        }
    }
    Ok(())
}

/// Open a page: with `$BROWSER` when set (as `cargo doc --open` does), else the desktop's
/// default browser.
fn open_in_browser(path: &Path) -> Result<()> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        let status = std::process::Command::new(&browser)
            .arg(&path)
            .status()
            .with_context(|| {
                format!(
                    "starting the browser `{}` (from $BROWSER) on {}",
                    browser.to_string_lossy(),
                    path.display()
                )
            })?;
        if !status.success() {
            bail!(
                "the browser `{}` (from $BROWSER) failed ({status}) on {}",
                browser.to_string_lossy(),
                path.display()
            );
        }
    } else {
        opener::open(&path).with_context(|| {
            format!(
                "opening {} in the browser (set $BROWSER to choose one)",
                path.display()
            )
        })?;
    }
    term::status("Opened", path.display());
    Ok(())
}

/// A run by directory (anywhere, no workspace needed), or by name or `latest` among the runs of
/// `runs_dir` (default: the current workspace's).
pub(crate) fn find_run(runs_dir: Option<&Path>, which: &str) -> Result<PathBuf> {
    let direct = Path::new(which);
    if direct.join(runs::META).is_file() {
        return Ok(direct.to_path_buf());
    }
    let runs_dir = match runs_dir {
        Some(d) => d.to_path_buf(),
        None => default_runs_dir()?,
    };
    runs::find(&runs_dir, which)
}

pub(crate) fn default_runs_dir() -> Result<PathBuf> {
    let meta = cargo_metadata::MetadataCommand::new().no_deps().exec();
    // Outside a cargo workspace: where runs of `--elf` go.
    let plain = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("cargo-sample");
    if meta.is_err() && runs::runs_dir(&plain).is_dir() {
        return Ok(runs::runs_dir(&plain));
    }
    let meta = meta.context(
        "finding the saved runs of the current workspace: run this inside the firmware's \
             crate, give a run directory, or pass --runs-dir",
    )?;
    Ok(runs::runs_dir(
        &meta
            .target_directory
            .into_std_path_buf()
            .join("cargo-sample"),
    ))
}
