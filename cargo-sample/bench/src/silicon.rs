//! `--silicon DIR`: estimated cycles (`--cycles`) against cycles others measured on silicon,
//! for the operations recorded in `cargo-sample/data/silicon/` (their sources are in each
//! file's header). DIR is a checkout of pqm4 at the recorded commit, with its submodules; each
//! implementation is built there for QEMU's mps2-an386 with Debian's `gcc-arm-none-eabi` and
//! run once as a prebuilt ELF, every instruction counted and timed by the model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cargo_sample::cli::Cli;
use clap::Parser;

/// One operation measured on silicon.
struct Row {
    core: String,
    scheme: String,
    implementation: String,
    operation: String,
    function: String,
    silicon: u64,
}

fn read_rows() -> Result<Vec<Row>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/silicon/pqm4-cortex-m4.csv");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() != 6 {
                bail!("{}: a line of {} fields: {l}", path.display(), f.len());
            }
            Ok(Row {
                core: f[0].into(),
                scheme: f[1].into(),
                implementation: f[2].into(),
                operation: f[3].into(),
                function: f[4].into(),
                silicon: f[5].parse().with_context(|| format!("cycles in {l}"))?,
            })
        })
        .collect()
}

/// pqm4's name for an implementation's speed benchmark, and its `IMPLEMENTATION_PATH`.
fn target(scheme: &str, implementation: &str) -> (String, String) {
    let kind = if scheme.contains("kem") {
        "crypto_kem"
    } else {
        "crypto_sign"
    };
    let own = format!("{kind}/{scheme}/{implementation}");
    if matches!(implementation, "clean" | "ref") {
        let path = format!("mupq/pqclean/{own}");
        (format!("{}_speed.elf", path.replace('/', "_")), path)
    } else {
        (format!("{}_speed.elf", own.replace('/', "_")), own)
    }
}

/// Build one implementation in the pqm4 checkout.
fn build(pqm4: &Path, scheme: &str, implementation: &str) -> Result<PathBuf> {
    let (elf, path) = target(scheme, implementation);
    let out = std::process::Command::new("make")
        .current_dir(pqm4)
        .args(["-j2", "PLATFORM=mps2-an386"])
        .arg(format!("IMPLEMENTATION_PATH={path}"))
        .arg(format!("elf/{elf}"))
        .output()
        .context("running make (`tests/setup.sh --with-arm-gcc` installs it and the compiler)")?;
    if !out.status.success() {
        bail!(
            "building {path} in {} failed:\n{}",
            pqm4.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(pqm4.join("elf").join(elf))
}

/// Run an ELF through `cargo sample --elf .. --cycles --format json`; the report and the
/// host seconds it took.
fn profile(elf: &Path, out: &Path) -> Result<(serde_json::Value, f64)> {
    let cli = Cli::try_parse_from([
        "cargo-sample",
        "--elf",
        elf.to_str().context("path is not UTF-8")?,
        "--machine",
        "mps2-an386",
        "--instructions",
        "2G",
        "--timeout",
        "1200",
        "--cycles",
        "--format",
        "json",
        "--top",
        "0",
        "-o",
        out.to_str().context("path is not UTF-8")?,
    ])?;
    let t = Instant::now();
    cargo_sample::cmd::exact::run_exact(&cli.run)?;
    let secs = t.elapsed().as_secs_f64();
    Ok((serde_json::from_str(&std::fs::read_to_string(out)?)?, secs))
}

pub fn silicon(pqm4: &Path) -> Result<()> {
    let rows = read_rows()?;
    let tmp = tempfile::tempdir()?;
    let mut reports: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    println!(
        "{:<11} {:<12} {:<9} {:<8} {:>11} {:>11} {:>7} {:>11} {:>7}",
        "core", "scheme", "impl", "op", "silicon", "instr", "error", "estimated", "error"
    );
    let (mut errors, mut instr_errors) = (Vec::new(), Vec::new());
    for r in &rows {
        let key = (r.scheme.clone(), r.implementation.clone());
        if !reports.contains_key(&key) {
            let elf = build(pqm4, &r.scheme, &r.implementation)?;
            let (report, secs) = profile(&elf, &tmp.path().join("r.json"))?;
            eprintln!("{} {}: {secs:.1} s", r.scheme, r.implementation);
            reports.insert(key.clone(), report);
        }
        let report = &reports[&key];
        let f = report["functions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| {
                let n = f["name"].as_str().unwrap_or("");
                n == r.function || n.ends_with(&format!("_{}", r.function))
            });
        let Some(f) = f else {
            println!(
                "{:<11} {:<12} {:<9} {:<8} {:>11}   (no function {} in the ELF)",
                r.core, r.scheme, r.implementation, r.operation, r.silicon, r.function
            );
            continue;
        };
        let calls = 1.0;
        let est = f["inclusive_cycles"].as_f64().unwrap_or(0.0) / calls;
        let instr = f["inclusive_instructions"].as_f64().unwrap_or(0.0) / calls;
        let s = r.silicon as f64;
        let (e, ie) = (100.0 * (est / s - 1.0), 100.0 * (instr / s - 1.0));
        errors.push(e);
        instr_errors.push(ie);
        println!(
            "{:<11} {:<12} {:<9} {:<8} {:>11} {:>11} {:>+6.1}% {:>11} {:>+6.1}%",
            r.core,
            r.scheme,
            r.implementation,
            r.operation,
            r.silicon,
            instr as u64,
            ie,
            est as u64,
            e
        );
    }
    let median = |v: &[f64]| {
        let mut a: Vec<f64> = v.iter().map(|x| x.abs()).collect();
        a.sort_by(f64::total_cmp);
        a.get(a.len() / 2).copied().unwrap_or(0.0)
    };
    let worst = errors.iter().map(|x| x.abs()).fold(0.0, f64::max);
    println!(
        "{} operations: estimated cycles median |error| {:.1} %, largest {:.1} % (goal: 2 % and 5 %); \
         instructions median |error| {:.1} %",
        errors.len(),
        median(&errors),
        worst,
        median(&instr_errors)
    );
    Ok(())
}
