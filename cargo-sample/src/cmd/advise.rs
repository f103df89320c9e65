//! `cargo sample advise`: which histogram bins to use on this firmware.
//!
//! A bin costs two bytes of RAM and covers `size` bytes of code; a bin holding bytes of two
//! functions cannot tell them apart. The advisor makes a ring-mode run of the firmware with the
//! exact count of the same run (`--truth`), puts those exact per-address counts into bins of
//! each candidate size, splits shared bins as the report would, and compares the functions'
//! shares with the exact ones: that difference is the misattribution the bins would make on
//! this very program, with no sampling noise in it. Aligned builds (every function at a
//! multiple of the bin size) are run and judged the same way, with their code growth measured.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cli::{AdviseArgs, CargoArgs, Mode, TableFormat};
use crate::image::symbolize::Symbolizer;
use crate::report::bins::{self, Split};
use crate::{cmd::sample, image::elf, runs, term};

/// One choice of bins, judged.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    pub bin_size: u32,
    /// Functions aligned to the bin size.
    pub aligned: bool,
    /// Counters the code needs (the outside counter included).
    pub counters: u64,
    /// Their RAM, bytes.
    pub ram_bytes: u64,
    /// `SAMPLER_RT_HIST_BINS` to build with: the power of two that holds `counters`.
    pub build_bins: u64,
    /// Share of the code's bytes that lie in bins shared by two or more functions.
    pub shared_code_percent: f64,
    /// Code bytes of the build judged (aligned builds are larger).
    pub code_bytes: u64,
    /// Code bytes of the build without alignment, for aligned choices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unaligned_code_bytes: Option<u64>,
    /// The largest |binned share - exact share| of any function, in points.
    pub max_error_points: f64,
    /// The function with the largest error.
    pub worst: Option<String>,
    /// Binned minus exact share of every function that moved by 0.005 points or more.
    pub errors: Vec<(String, f64)>,
}

/// The advice.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub firmware: String,
    pub code_start: u64,
    pub code_end: u64,
    /// Counters the firmware was built with.
    pub built_counters: u32,
    pub tolerance_points: f64,
    pub choices: Vec<Choice>,
    /// Index into `choices`.
    pub recommended: Option<usize>,
    pub command: String,
}

/// Exact counts per function (sampler-rt's own code left out), and their total.
fn by_function(sym: &Symbolizer, per_pc: &HashMap<u32, u64>) -> (HashMap<String, u64>, u64) {
    let mut m: HashMap<String, u64> = HashMap::new();
    let mut total = 0;
    for (&pc, &n) in per_pc {
        let name = sym
            .function_of(pc as u64)
            .unwrap_or(crate::report::OUTSIDE)
            .to_owned();
        *m.entry(name).or_default() += n;
        total += n;
    }
    (m, total)
}

/// Judge `size`-byte bins on the run in `dir` (which has exact counts).
fn judge(dir: &Path, size: u32, aligned: bool) -> Result<(Choice, String, (u64, u64), u32)> {
    let meta = runs::load_meta(dir)?;
    let (elf_path, data) = runs::elf_of(dir)?;
    let fw = elf::inspect(&data)?;
    let text = fw
        .text
        .context("the firmware has no `__stext`/`__etext`: the code range for bins is unknown")?;
    let sym = Symbolizer::new(&elf_path, &data, None)?;
    let counts = crate::dump::exact::parse(&std::fs::read(dir.join(crate::dump::exact::FILE)).with_context(|| {
        format!(
            "the run {} left no exact counts: the advisor needs QEMU plugin support or the exec log",
            dir.display()
        )
    })?)?;
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    for (pc, n) in counts {
        if !sym.is_sampler(pc as u64) {
            *per_pc.entry(pc & !1).or_default() += n;
        }
    }
    let (truth, total) = by_function(&sym, &per_pc);
    let s = size as u64;
    let base = text.0 & !(s - 1);
    let nbins = (text.1 - base).div_ceil(s);
    let mut binned = vec![0u64; nbins as usize];
    let mut outside = 0u64;
    for (&pc, &n) in &per_pc {
        let a = pc as u64;
        if a >= base && a < base + nbins * s {
            binned[((a - base) / s) as usize] += n;
        } else {
            outside += n;
        }
    }
    let (split, _) = bins::split(&binned, base as u32, size, outside, &sym, Split::Density);
    let (guessed, _) = by_function(&sym, &split);
    let mut errors: Vec<(String, f64)> = truth
        .keys()
        .chain(guessed.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|name| {
            let t = truth.get(name).copied().unwrap_or(0) as f64;
            let g = guessed.get(name).copied().unwrap_or(0) as f64;
            (name.clone(), 100.0 * (g - t) / total.max(1) as f64)
        })
        .filter(|(_, e)| e.abs() >= 0.005)
        .collect();
    errors.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
    // Bytes of code in bins with more than one owner.
    let (mut code, mut shared) = (0u64, 0u64);
    for i in 0..nbins {
        let o = bins::owners(&sym, (base + i * s) as u32, size);
        let bytes: u64 = o.iter().map(|x| 2 * x.2 as u64).sum();
        code += bytes;
        if o.len() > 1 {
            shared += bytes;
        }
    }
    let counters = nbins + 1;
    let choice = Choice {
        bin_size: size,
        aligned,
        counters,
        ram_bytes: 2 * counters,
        build_bins: counters.next_power_of_two().max(4),
        shared_code_percent: 100.0 * shared as f64 / code.max(1) as f64,
        code_bytes: elf::code_bytes(&data),
        unaligned_code_bytes: meta.code_growth.map(|g| g.0),
        max_error_points: errors.first().map(|e| e.1.abs()).unwrap_or(0.0),
        worst: errors.first().map(|e| e.0.clone()),
        errors,
    };
    Ok((choice, meta.target_name, text, fw.hist_counters))
}

/// The `cargo sample` selection flags that name this build.
fn selection(c: &CargoArgs) -> String {
    let mut v = Vec::new();
    if let Some(m) = &c.manifest_path {
        v.push(format!("--manifest-path {}", m.display()));
    }
    if let Some(p) = &c.package {
        v.push(format!("-p {p}"));
    }
    match (&c.profile, c.release) {
        (Some(p), _) => v.push(format!("--profile {p}")),
        (None, true) => v.push("--release".into()),
        _ => {}
    }
    if let Some(b) = &c.bin {
        v.push(format!("--bin {b}"));
    }
    if let Some(e) = &c.example {
        v.push(format!("--example {e}"));
    }
    if !c.features.features.is_empty() {
        v.push(format!("--features {}", c.features.features.join(",")));
    }
    if let Some(t) = &c.target {
        v.push(format!("--target {t}"));
    }
    v.join(" ")
}

/// `cargo sample advise`.
pub fn advise(args: &AdviseArgs) -> Result<()> {
    let mut run = args.run.clone();
    run.mode = Mode::Ring;
    run.truth = true;
    run.exact = false;
    run.align = None;
    term::status(
        "Advising",
        "on a ring-mode run with the exact count of the same run",
    );
    let plain = sample::capture(&run)?;
    // A64 instructions are 4 bytes: a smaller bin is never used.
    let smallest = match std::fs::read(plain.join(crate::runs::ELF))
        .ok()
        .and_then(|b| crate::image::elf::inspect(&b).ok())
    {
        Some(fw) if fw.aarch64 => 4,
        _ => 2,
    };
    let mut choices = Vec::new();
    let mut facts = None;
    for &size in &args.sizes {
        if !size.is_power_of_two() || !(2..=65536).contains(&size) {
            anyhow::bail!("bin size {size}: a power of two from 2 to 65536 bytes");
        }
        if size < smallest {
            continue;
        }
        let (c, name, text, built) = judge(&plain, size, false)?;
        facts.get_or_insert((name, text, built));
        choices.push(c);
    }
    for &size in &args.align_sizes {
        run.align = Some(size);
        let dir = sample::capture(&run)?;
        choices.push(judge(&dir, size, true)?.0);
    }
    let (firmware, text, built) = facts.context("no bin size to judge")?;
    // The cheapest choice within the tolerance; without alignment when it costs the same.
    let recommended = choices
        .iter()
        .enumerate()
        .filter(|(_, c)| c.max_error_points <= args.tolerance)
        .min_by(|(_, a), (_, b)| {
            a.ram_bytes
                .cmp(&b.ram_bytes)
                .then(a.aligned.cmp(&b.aligned))
        })
        .map(|(i, _)| i)
        .or_else(|| {
            choices
                .iter()
                .enumerate()
                .min_by(|(_, a), (_, b)| a.max_error_points.total_cmp(&b.max_error_points))
                .map(|(i, _)| i)
        });
    let command = recommended
        .map(|i| {
            let c = &choices[i];
            let mut cmd = String::new();
            if c.counters > u64::from(built) {
                cmd.push_str(&format!("SAMPLER_RT_HIST_BINS={} ", c.build_bins));
            }
            cmd.push_str(&format!(
                "cargo sample {} --mode hist --bin-size {}",
                selection(&args.run.cargo),
                c.bin_size
            ));
            if c.aligned {
                cmd.push_str(&format!(" --align {}", c.bin_size));
            }
            cmd
        })
        .unwrap_or_default();
    let advice = Advice {
        firmware,
        code_start: text.0,
        code_end: text.1,
        built_counters: built,
        tolerance_points: args.tolerance,
        choices,
        recommended,
        command,
    };
    match args.advice_format {
        TableFormat::Json => anstream::println!("{}", serde_json::to_string_pretty(&advice)?),
        TableFormat::Text => anstream::print!("{}", text_of(&advice)),
    }
    Ok(())
}

fn kib(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else {
        format!("{:.1} KiB", b as f64 / 1024.0)
    }
}

fn text_of(a: &Advice) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} for {}: code {:#x}..{:#x} ({} bytes); this build has {} counters",
        term::paint("1", "Histogram bins"),
        a.firmware,
        a.code_start,
        a.code_end,
        a.code_end - a.code_start,
        a.built_counters
    );
    let _ = writeln!(
        s,
        "error = binned share - exact share of the same run, of the function it is largest for"
    );
    let _ = writeln!(
        s,
        "\n{}",
        term::paint(
            "1",
            &format!(
                "{:>5}  {:<14} {:>8} {:>9} {:>8} {:>9}   {}",
                "bin", "aligned", "counters", "RAM", "shared", "error", "worst function"
            )
        )
    );
    for (i, c) in a.choices.iter().enumerate() {
        let aligned = match (c.aligned, c.unaligned_code_bytes) {
            (true, Some(before)) => format!("yes ({:+} B)", c.code_bytes as i64 - before as i64),
            (true, None) => "yes".into(),
            (false, _) => "no".into(),
        };
        let row = format!(
            "{:>5}  {:<14} {:>8} {:>9} {:>7.1}% {:>7.2}pt   {}",
            c.bin_size,
            aligned,
            c.counters,
            kib(c.ram_bytes),
            c.shared_code_percent,
            c.max_error_points,
            c.worst.as_deref().unwrap_or("-")
        );
        let _ = writeln!(
            s,
            "{}",
            if Some(i) == a.recommended {
                term::paint("1;32", &row)
            } else {
                row
            }
        );
    }
    match a.recommended.map(|i| &a.choices[i]) {
        Some(c) => {
            let _ = writeln!(
                s,
                "\nrecommended: {}-byte bins{}, {} counters ({} of RAM), largest error {:.2} points{}",
                c.bin_size,
                if c.aligned {
                    format!(" with functions aligned to {} bytes", c.bin_size)
                } else {
                    String::new()
                },
                c.counters,
                kib(c.ram_bytes),
                c.max_error_points,
                if c.max_error_points > a.tolerance_points {
                    format!(
                        " (none is within {:.2} points: this is the least wrong)",
                        a.tolerance_points
                    )
                } else {
                    String::new()
                }
            );
            let _ = writeln!(s, "  {}", a.command);
            // The choice within the tolerance that grows the code least, if it is another.
            let lean = a
                .choices
                .iter()
                .filter(|x| x.max_error_points <= a.tolerance_points)
                .min_by_key(|x| {
                    (
                        x.code_bytes
                            .saturating_sub(x.unaligned_code_bytes.unwrap_or(x.code_bytes)),
                        x.ram_bytes,
                    )
                });
            if let Some(l) = lean
                && (l.bin_size, l.aligned) != (c.bin_size, c.aligned)
            {
                let growth = l
                    .code_bytes
                    .saturating_sub(l.unaligned_code_bytes.unwrap_or(l.code_bytes));
                let _ = writeln!(
                    s,
                    "least code growth within {:.2} points: {}-byte bins{} ({} of RAM, code {:+} B)",
                    a.tolerance_points,
                    l.bin_size,
                    if l.aligned { ", aligned" } else { "" },
                    kib(l.ram_bytes),
                    growth
                );
            }
        }
        None => {
            let _ = writeln!(s, "\nno choice to recommend");
        }
    }
    s
}
