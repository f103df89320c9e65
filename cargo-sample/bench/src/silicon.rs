//! `--silicon SUITE=DIR`: estimated cycles (`--cycles`) against cycles others measured on
//! silicon, for the operations recorded in `cargo-sample/data/silicon/` (each file's header
//! gives its source: repository, file, commit, board). DIR is a checkout of the suite's
//! repository at the recorded commit; its code is built for QEMU with Debian's
//! `gcc-arm-none-eabi` and run as a prebuilt ELF, every instruction counted and timed by the
//! model of the core the figure was measured on.
//!
//! Suites: `pqm4` (Cortex-M4, post-quantum schemes), `pqm3` (Cortex-M3, the same kind),
//! `cortexm-aes` (jnk0le's AES routines: Cortex-M0, M3, M4, M7, M33), `aes-armcortexm`
//! (Schwabe and Stoffelen's AES: Cortex-M3 and M4), `coremark` (CoreMark on a Raspberry Pi
//! Pico: Cortex-M0+).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cargo_sample::cli::Cli;
use clap::Parser;

/// The suites, as `--silicon` names them.
pub const SUITES: [&str; 5] = ["pqm4", "pqm3", "cortexm-aes", "aes-armcortexm", "coremark"];

/// One figure measured on silicon and its estimate.
struct Row {
    core: String,
    /// What was measured (`ml-kem-512 m4fspeed keypair`).
    what: String,
    silicon: f64,
    instructions: f64,
    estimate: f64,
}

/// A data file's rows, split into fields.
fn read(file: &str, fields: usize) -> Result<Vec<Vec<String>>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data/silicon")
        .join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<String> = l.split(',').map(str::to_owned).collect();
            if f.len() != fields {
                bail!("{}: a line of {} fields: {l}", path.display(), f.len());
            }
            Ok(f)
        })
        .collect()
}

fn run_make(dir: &Path, args: &[String]) -> Result<()> {
    let out = std::process::Command::new("make")
        .current_dir(dir)
        .args(args)
        .output()
        .context("running make (`tests/setup.sh --with-arm-gcc` installs it and the compiler)")?;
    if !out.status.success() {
        bail!(
            "`make {}` in {} failed:\n{}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn run_script(script: &str, dir: &Path, out: &Path) -> Result<()> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(script);
    let o = std::process::Command::new("sh")
        .arg(&path)
        .arg(dir)
        .arg(out)
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    if !o.status.success() {
        bail!(
            "{} {} failed (`tests/setup.sh --with-arm-gcc` installs the compiler):\n{}",
            path.display(),
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(())
}

/// Run an ELF through `cargo sample --elf .. --cycles --format json`: its functions by name
/// (self and inclusive instructions and cycles).
fn profile(elf: &Path, machine: &str, core: Option<&str>, out: &Path) -> Result<Functions> {
    let mut args = vec![
        "cargo-sample".to_owned(),
        "--elf".into(),
        elf.to_str().context("path is not UTF-8")?.into(),
        "--machine".into(),
        machine.into(),
        "--instructions".into(),
        "2G".into(),
        "--timeout".into(),
        "1200".into(),
        "--cycles".into(),
        "--format".into(),
        "json".into(),
        "--top".into(),
        "0".into(),
        "-o".into(),
        out.to_str().context("path is not UTF-8")?.into(),
    ];
    if let Some(c) = core {
        args.extend(["--core".into(), c.into()]);
    }
    let cli = Cli::try_parse_from(args)?;
    let t = Instant::now();
    cargo_sample::cmd::exact::run_exact(&cli.run)?;
    eprintln!(
        "  {} on {machine}{}: {:.1} s",
        elf.file_name().unwrap_or_default().to_string_lossy(),
        core.map(|c| format!(" as {c}")).unwrap_or_default(),
        t.elapsed().as_secs_f64()
    );
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out)?)?;
    let mut functions = Functions::default();
    for f in report["functions"].as_array().into_iter().flatten() {
        let n = |k: &str| f[k].as_f64().unwrap_or(0.0);
        functions.0.insert(
            f["name"].as_str().unwrap_or("").to_owned(),
            [
                n("instructions"),
                n("cycles"),
                n("inclusive_instructions"),
                n("inclusive_cycles"),
            ],
        );
    }
    Ok(functions)
}

/// Per function: self instructions, self cycles, inclusive instructions, inclusive cycles.
#[derive(Default)]
struct Functions(BTreeMap<String, [f64; 4]>);

impl Functions {
    /// A function by its name, or by a name that ends in `_name` (a namespaced C symbol).
    fn get(&self, name: &str) -> Option<&[f64; 4]> {
        self.0.get(name).or_else(|| {
            self.0
                .iter()
                .find(|(n, _)| n.ends_with(&format!("_{name}")))
                .map(|(_, v)| v)
        })
    }
}

/// pqm4 or pqm3: each implementation built with the suite's make for its QEMU machine; the
/// figure is the operation's function's inclusive cycles over its one call.
fn pq(dir: &Path, file: &str, platform: &str, tmp: &Path) -> Result<Vec<Row>> {
    let mut built: BTreeMap<(String, String), Functions> = BTreeMap::new();
    let mut rows = Vec::new();
    for f in read(file, 6)? {
        let (core, scheme, imp, op, function) = (&f[0], &f[1], &f[2], &f[3], &f[4]);
        let key = (scheme.clone(), imp.clone());
        if !built.contains_key(&key) {
            // The operation's function says the kind (`crypto_kem_enc`, `crypto_sign_open`).
            let kind = if function.starts_with("crypto_kem") {
                "crypto_kem"
            } else {
                "crypto_sign"
            };
            let own = format!("{kind}/{scheme}/{imp}");
            let path = if matches!(imp.as_str(), "clean" | "ref") {
                format!("mupq/pqclean/{own}")
            } else {
                own
            };
            let elf = format!("elf/{}_speed.elf", path.replace('/', "_"));
            run_make(
                dir,
                &[
                    "-j2".into(),
                    format!("PLATFORM={platform}"),
                    format!("IMPLEMENTATION_PATH={path}"),
                    elf.clone(),
                ],
            )?;
            let machine = platform;
            built.insert(
                key.clone(),
                profile(&dir.join(&elf), machine, None, &tmp.join("r.json"))?,
            );
        }
        let what = format!("{scheme} {imp} {op}");
        let Some(v) = built[&key].get(function) else {
            println!("{core:<11} {what:<40} (no function {function} in the ELF)");
            continue;
        };
        rows.push(Row {
            core: core.clone(),
            what,
            silicon: f[5].parse().with_context(|| format!("cycles in {f:?}"))?,
            instructions: v[2],
            estimate: v[3],
        });
    }
    Ok(rows)
}

/// jnk0le's cortexm-AES: one ELF, timed as each core; a routine's cycles are its wrapper's
/// inclusive less the wrapper's own.
fn cortexm_aes(dir: &Path, tmp: &Path) -> Result<Vec<Row>> {
    run_script("silicon/cortexm-aes/build.sh", dir, tmp)?;
    let elf = tmp.join("cortexm-aes.elf");
    let mut by_core: BTreeMap<String, Functions> = BTreeMap::new();
    let mut rows = Vec::new();
    for f in read("cortexm-aes.csv", 5)? {
        let (core, routine, bits, wrapper) = (&f[0], &f[1], &f[2], &f[3]);
        if !by_core.contains_key(core) {
            let fs = profile(&elf, "mps2-an386", Some(core), &tmp.join("r.json"))?;
            by_core.insert(core.clone(), fs);
        }
        let v = by_core[core]
            .get(wrapper)
            .with_context(|| format!("no function {wrapper} in {}", elf.display()))?;
        rows.push(Row {
            core: core.clone(),
            what: format!("{routine} ({bits}-bit key)"),
            silicon: f[4].parse()?,
            instructions: v[2] - v[0],
            estimate: v[3] - v[1],
        });
    }
    Ok(rows)
}

/// Ko-/aes-armcortexm: one ELF per directory, on the machine of the core measured; per block
/// where the figure is per block.
fn aes_armcortexm(dir: &Path, tmp: &Path) -> Result<Vec<Row>> {
    run_script("silicon/aes/build.sh", dir, tmp)?;
    let mut runs: BTreeMap<(String, String), Functions> = BTreeMap::new();
    let mut rows = Vec::new();
    for f in read("aes-armcortexm.csv", 5)? {
        let (core, build, function) = (&f[0], &f[1], &f[2]);
        let per: f64 = f[3].parse()?;
        let key = (core.clone(), build.clone());
        if !runs.contains_key(&key) {
            let machine = if core == "cortex-m3" {
                "mps2-an385"
            } else {
                "mps2-an386"
            };
            let elf = tmp.join(format!("aes-armcortexm-{build}.elf"));
            runs.insert(
                key.clone(),
                profile(&elf, machine, None, &tmp.join("r.json"))?,
            );
        }
        let v = runs[&key]
            .get(function)
            .with_context(|| format!("no function {function} in aes-armcortexm-{build}.elf"))?;
        rows.push(Row {
            core: core.clone(),
            what: format!(
                "{build} {function}{}",
                if per > 1.0 { " per block" } else { "" }
            ),
            silicon: f[4].parse()?,
            instructions: v[2] / per,
            estimate: v[3] / per,
        });
    }
    Ok(rows)
}

/// CoreMark as ported to the Pico: one ELF timed as a Cortex-M0+; a figure per iteration.
fn coremark(dir: &Path, tmp: &Path) -> Result<Vec<Row>> {
    run_script("silicon/coremark/build.sh", dir, tmp)?;
    let elf = tmp.join("coremark-m0plus.elf");
    let fs = profile(
        &elf,
        "mps2-an385",
        Some("cortex-m0plus"),
        &tmp.join("r.json"),
    )?;
    read("coremark-rp2040.csv", 5)?
        .into_iter()
        .map(|f| {
            let per: f64 = f[3].parse()?;
            let v = fs
                .get(&f[2])
                .with_context(|| format!("no function {} in {}", f[2], elf.display()))?;
            Ok(Row {
                core: f[0].clone(),
                what: format!("{} per iteration", f[1]),
                silicon: f[4].parse()?,
                instructions: v[2] / per,
                estimate: v[3] / per,
            })
        })
        .collect()
}

fn median_abs(v: &[f64]) -> f64 {
    let mut a: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    a.sort_by(f64::total_cmp);
    a.get(a.len() / 2).copied().unwrap_or(0.0)
}

/// `specs`: `SUITE=DIR` (a bare DIR is pqm4's, as before suites).
pub fn silicon(specs: &[String]) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let mut all: Vec<(String, Row)> = Vec::new();
    for spec in specs {
        let (suite, dir) = spec.split_once('=').unwrap_or(("pqm4", spec.as_str()));
        let dir = PathBuf::from(dir);
        if !dir.is_dir() {
            bail!("--silicon {spec}: {} is not a directory", dir.display());
        }
        eprintln!("{suite}: building and running in {}", dir.display());
        let rows = match suite {
            "pqm4" => pq(&dir, "pqm4-cortex-m4.csv", "mps2-an386", tmp.path())?,
            "pqm3" => pq(&dir, "pqm3-cortex-m3.csv", "mps2-an385", tmp.path())?,
            "cortexm-aes" => cortexm_aes(&dir, tmp.path())?,
            "aes-armcortexm" => aes_armcortexm(&dir, tmp.path())?,
            "coremark" => coremark(&dir, tmp.path())?,
            other => bail!(
                "--silicon {other}=DIR: no such suite (the suites: {})",
                SUITES.join(", ")
            ),
        };
        all.extend(rows.into_iter().map(|r| (suite.to_owned(), r)));
    }
    println!(
        "{:<15} {:<11} {:<46} {:>10} {:>10} {:>7} {:>10} {:>7}",
        "suite", "core", "operation", "silicon", "instr", "error", "estimated", "error"
    );
    let mut per_core: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for (suite, r) in &all {
        let e = 100.0 * (r.estimate / r.silicon - 1.0);
        let ie = 100.0 * (r.instructions / r.silicon - 1.0);
        let c = per_core.entry(r.core.clone()).or_default();
        c.0.push(e);
        c.1.push(ie);
        println!(
            "{suite:<15} {:<11} {:<46} {:>10.0} {:>10.0} {ie:>+6.1}% {:>10.0} {e:>+6.1}%",
            r.core, r.what, r.silicon, r.instructions, r.estimate
        );
    }
    for (core, (e, ie)) in &per_core {
        let worst = e.iter().map(|x| x.abs()).fold(0.0, f64::max);
        println!(
            "{core}: {} operations, estimated cycles median |error| {:.1} %, largest {:.1} %; \
             instructions median |error| {:.1} %",
            e.len(),
            median_abs(e),
            worst,
            median_abs(ie)
        );
    }
    Ok(())
}
