//! How often each diagnostic fires: on runs where nothing is wrong (every seed of firmware
//! built to be profiled plainly, bundled and from outside), and on runs built to provoke it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use cargo_sample::cli::Cli;
use cargo_sample::cmd::sample;
use cargo_sample::report::{Options, Severity};
use clap::Parser;

/// One firmware and how to run it, and what its runs should say.
struct Case {
    name: String,
    manifest: PathBuf,
    args: Vec<String>,
    /// The kinds of finding the case exists to provoke (empty: a clean run, nothing should be
    /// said but the ones `allowed` lists).
    provokes: Vec<&'static str>,
    /// Findings that describe something really there in this firmware (an RTIC monotonic's
    /// SysTick at the sampler's priority), not false alarms.
    allowed: Vec<String>,
}

/// What the runs of one case said.
#[derive(Default)]
struct Tally {
    runs: u32,
    /// Runs with a warning that is not provoked or allowed (a false alarm).
    false_warning: u32,
    /// Runs with a note that is not provoked or allowed.
    stray_note: u32,
    /// Runs in which every provoked kind fired.
    caught: u32,
    /// Kind → runs in which it fired.
    kinds: BTreeMap<String, u32>,
}

fn case(name: &str, manifest: &Path, args: &[&str]) -> Case {
    Case {
        name: name.to_owned(),
        manifest: manifest.to_path_buf(),
        args: args.iter().map(|a| a.to_string()).collect(),
        provokes: Vec::new(),
        allowed: Vec::new(),
    }
}

/// The bundled firmware: clean runs, then the provoked ones.
fn bundled(scenarios: &Path) -> Vec<Case> {
    let examples = scenarios
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    let rtic = examples.join("rtic-app/Cargo.toml");
    let mut cases = vec![
        case("hot-loops", scenarios, &["--bin", "hot-loops"]),
        case("workload", scenarios, &["--bin", "workload"]),
        case("tagged-phases", scenarios, &["--bin", "tagged-phases"]),
        case("call-graph", scenarios, &["--bin", "call-graph"]),
        case("nested-irqs", scenarios, &["--bin", "nested-irqs"]),
        case("ticked-loop", scenarios, &["--bin", "ticked-loop"]),
        case("foreign-isr", scenarios, &["--bin", "foreign-isr"]),
        case("rtic-app tasks", &rtic, &["--bin", "tasks"]),
        case(
            "microbit-m0",
            &examples.join("microbit-m0/Cargo.toml"),
            &["-n", "3000"],
        ),
        case(
            "embassy-tasks",
            &examples.join("embassy-tasks/Cargo.toml"),
            &["-n", "3000"],
        ),
    ];
    let mut mono = case("rtic-app mono", &rtic, &["--bin", "mono"]);
    mono.allowed = vec!["unpreemptable".into(), "disagrees-with-exact".into()];
    cases.push(mono);
    // The same application where the sampler can read its timer's count: SysTick's time is
    // the held-off row, said in a note.
    let mut mono = case(
        "rtic-app mono-cmsdk",
        &rtic,
        &[
            "--bin",
            "mono-cmsdk",
            "--machine",
            "mps2-an385",
            "--timer",
            "cmsdk:0x40000000:8",
        ],
    );
    mono.allowed = vec!["unpreemptable".into()];
    cases.push(mono);
    let provoked: [(&str, &[&str], &[&'static str]); 5] = [
        (
            "ticked-loop, constant period",
            &[
                "--bin",
                "ticked-loop",
                "--period",
                "16000ticks",
                "--no-jitter",
            ],
            &["lockstep"],
        ),
        (
            "ticked-loop, span of 256 ticks",
            &[
                "--bin",
                "ticked-loop",
                "--period",
                "16000ticks",
                "--jitter",
                "256",
            ],
            &["lockstep"],
        ),
        ("irq-masked", &["--bin", "irq-masked"], &["masked-skid"]),
        (
            "foreign-isr, sampler at 0x40",
            &["--bin", "foreign-isr", "--priority", "0x40"],
            // The handler's time is the held-off row, which a note states (the pile after the
            // store that pends it, `held-off`, is left where the timer's count cannot be read).
            &["unpreemptable"],
        ),
        ("sleepy", &["--bin", "sleepy"], &["asleep"]),
    ];
    for (name, args, kinds) in provoked {
        let mut c = case(name, scenarios, args);
        c.provokes = kinds.to_vec();
        cases.push(c);
    }
    cases
}

/// `DIR[:ARGS[:KINDS]]` given on the command line: a crate from outside, run with `ARGS`
/// (split on spaces), expected to raise nothing but the findings `KINDS` (comma-separated:
/// what the firmware really has, such as `masked-skid` after its critical sections).
fn outside(spec: &str) -> Case {
    let (dir, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let (args, allowed) = rest.split_once(':').unwrap_or((rest, ""));
    let manifest = Path::new(dir).join("Cargo.toml");
    let name = Path::new(dir)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<&str> = args.split_whitespace().collect();
    let mut c = case(&format!("{name} {}", args.join(" ")), &manifest, &args);
    c.name = c.name.trim().to_owned();
    c.allowed = allowed
        .split(',')
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
    c
}

fn run(c: &Case, seed: u32) -> Result<(Vec<(String, Severity)>, usize)> {
    let seed = seed.to_string();
    let mut argv = vec![
        "cargo-sample",
        "--manifest-path",
        c.manifest.to_str().context("path is not UTF-8")?,
        "--release",
        "--seed",
        &seed,
    ];
    argv.extend(c.args.iter().map(String::as_str));
    let cli = Cli::try_parse_from(argv)?;
    let dir = sample::capture(&cli.run)?;
    let r = cargo_sample::report::load::load_report(&dir, Options::default())?;
    let found = r
        .diagnostics
        .iter()
        .map(|d| {
            let kind = serde_json::to_value(d.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            (kind, d.severity)
        })
        .collect();
    Ok((found, r.warnings.len()))
}

/// Run every case `seeds` times and print the table.
pub fn diagnostics(
    scenarios: &Path,
    outside_crates: &[String],
    seeds: u32,
    outside_only: bool,
) -> Result<()> {
    let mut cases = if outside_only {
        Vec::new()
    } else {
        bundled(scenarios)
    };
    cases.extend(outside_crates.iter().map(|s| outside(s)));
    println!(
        "{:<34} {:>5} {:>13} {:>11} {:>8}   findings (runs)",
        "firmware", "runs", "false alarms", "stray notes", "caught"
    );
    for c in &cases {
        let mut t = Tally::default();
        for seed in 1..=seeds {
            let (found, warnings) =
                run(c, seed).with_context(|| format!("{} seed {seed}", c.name))?;
            t.runs += 1;
            let expected = |k: &str| c.provokes.contains(&k) || c.allowed.iter().any(|a| a == k);
            // (The report's `warnings` are its warning findings' messages, counted below, and
            // any other warning the run gave.)
            if warnings > found.iter().filter(|f| f.1 == Severity::Warning).count()
                || found
                    .iter()
                    .any(|(k, s)| *s == Severity::Warning && !expected(k))
            {
                t.false_warning += 1;
            }
            if found
                .iter()
                .any(|(k, s)| *s == Severity::Note && !expected(k) && k != "indistinct")
            {
                t.stray_note += 1;
            }
            if !c.provokes.is_empty() && c.provokes.iter().all(|p| found.iter().any(|f| f.0 == *p))
            {
                t.caught += 1;
            }
            let mut kinds: Vec<&String> = found.iter().map(|f| &f.0).collect();
            kinds.sort();
            kinds.dedup();
            for k in kinds {
                *t.kinds.entry(k.clone()).or_default() += 1;
            }
        }
        let kinds: Vec<String> = t.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!(
            "{:<34} {:>5} {:>13} {:>11} {:>8}   {}",
            c.name,
            t.runs,
            if c.provokes.is_empty() {
                t.false_warning.to_string()
            } else {
                "–".into()
            },
            if c.provokes.is_empty() {
                t.stray_note.to_string()
            } else {
                "–".into()
            },
            if c.provokes.is_empty() {
                "–".into()
            } else {
                format!("{}/{}", t.caught, t.runs)
            },
            kinds.join(", ")
        );
    }
    Ok(())
}
