//! `cargo sample bench`: the sampler's on-target cost, measured exactly in QEMU.
//!
//! The `cost` firmware of the seed scenarios runs one workload without sampling and the same
//! workload while sampling, timing both with a CMSDK timer (40 instructions a tick under
//! `-icount shift=0`; exception entry and return cost nothing in QEMU). The difference divided
//! by the samples taken is the handler's instructions per sample, slow path included. Code
//! bytes come from the ELF's symbol sizes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Parser;
use object::{Object, ObjectSymbol};
use serde::Serialize;

use crate::cli::{BenchArgs, Cli, Format};
use crate::run;
use crate::runs;

/// One measured variant.
#[derive(Debug, Serialize)]
pub struct Variant {
    pub name: String,
    pub instructions_per_sample: f64,
    pub samples: u64,
    /// Bytes executed per sample: entry + variant (+ timer acknowledge).
    pub hot_code_bytes: u64,
    /// The seed's C figure for the same job.
    pub seed_instructions: u32,
}

fn sym_size(elf: &[u8], pred: impl Fn(&str) -> bool) -> u64 {
    let Ok(file) = object::File::parse(elf) else {
        return 0;
    };
    file.symbols()
        .find(|s| s.name().is_ok_and(&pred))
        .map(|s| s.size())
        .unwrap_or(0)
}

fn measure(manifest: &Path, extra: &[&str]) -> Result<(f64, u64, Vec<u8>)> {
    // 400 ticks = 16 000 instructions: about 3 750 samples during the measured workload.
    let period = "400";
    let mut argv = vec![
        "cargo-sample",
        "--manifest-path",
        manifest.to_str().context("path is not UTF-8")?,
        "--release",
        "--bin",
        "cost",
        "--samples",
        "0",
        "--period",
        period,
    ];
    argv.extend_from_slice(extra);
    let cli = Cli::try_parse_from(argv)?;
    let dir = run::capture(&cli.run)?;
    let out = std::fs::read_to_string(dir.join(runs::OUTPUT))?;
    let line = out
        .lines()
        .find(|l| l.starts_with("cost:"))
        .context("the cost firmware printed no `cost:` line")?;
    let field = |k: &str| -> Result<u64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .context("malformed cost line")?
            .parse()
            .context("malformed cost line")
    };
    let (base, sampled, n) = (
        field("base_ticks")?,
        field("sampled_ticks")?,
        field("samples")?,
    );
    if n == 0 {
        bail!("no samples were taken during the measured workload");
    }
    let per = (sampled - base) as f64 * 40.0 / n as f64;
    Ok((per, n, std::fs::read(dir.join(runs::ELF))?))
}

/// `cargo sample bench`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    let manifest = match &args.manifest_path {
        Some(p) => p.clone(),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/seed-scenarios/Cargo.toml")
        }
    };
    let mut variants = Vec::new();
    for (name, extra, seed, variant_sym, ack) in [
        (
            "ring, constant period",
            vec!["--no-jitter"],
            21,
            "sample_ring17",
            false,
        ),
        ("ring + jitter", vec![], 32, "sample_ring_jitter", false),
        (
            "ring + jitter, CMSDK timer",
            vec!["--timer", "cmsdk"],
            32,
            "sample_ring_jitter",
            true,
        ),
    ] {
        let (per, n, elf) = measure(&manifest, &extra)?;
        let entry = sym_size(&elf, |s| s == "sampler_rt_entry");
        let body = sym_size(&elf, |s| s.contains(variant_sym));
        let ack_bytes = if ack {
            sym_size(&elf, |s| s == "TIMER0")
        } else {
            0
        };
        variants.push(Variant {
            name: name.into(),
            instructions_per_sample: per,
            samples: n,
            hot_code_bytes: entry + body + ack_bytes,
            seed_instructions: seed,
        });
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&variants)?),
        Format::Text => {
            println!(
                "sampler cost per sample, exact in QEMU mps2-an385 (instructions; exception entry/exit free)"
            );
            println!(
                "{:<30} {:>12} {:>8} {:>10} {:>10}",
                "variant", "instr/sample", "seed C", "code bytes", "samples"
            );
            for v in &variants {
                println!(
                    "{:<30} {:>12.2} {:>8} {:>10} {:>10}",
                    v.name,
                    v.instructions_per_sample,
                    v.seed_instructions,
                    v.hot_code_bytes,
                    v.samples
                );
            }
            println!(
                "goals: ring <= 13, jitter <= 20 instructions; seed C handler 114 bytes in all"
            );
            println!("RAM: 4 bytes per ring slot + 64 bytes of state + 40 bytes of configuration");
        }
    }
    Ok(())
}
