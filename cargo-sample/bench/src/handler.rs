//! The sampler's own cost on the target, exact in QEMU: instructions a sample for every
//! variant (the `cost` firmware with and without sampling, timed by a CMSDK timer; or exact
//! counts of the handler's code), on Cortex-M3, Cortex-M0, device timers and ARMv8-A.

use crate::*;

/// One measured variant.
#[derive(Debug, Serialize)]
pub struct Variant {
    pub name: String,
    pub instructions_per_sample: f64,
    pub samples: u64,
    /// Bytes executed per sample: entry + variant (+ timer acknowledge).
    pub hot_code_bytes: u64,
    /// The reference C handler's figure for the same job.
    pub seed_instructions: u32,
}

pub(crate) fn sym_size(elf: &[u8], pred: impl Fn(&str) -> bool) -> u64 {
    let Ok(file) = object::File::parse(elf) else {
        return 0;
    };
    file.symbols()
        .find(|s| s.name().is_ok_and(&pred))
        .map(|s| s.size())
        .unwrap_or(0)
}

pub(crate) fn measure(manifest: &Path, extra: &[&str]) -> Result<(f64, u64, Vec<u8>)> {
    // 25 600 ticks = 16 000 instructions at the machine's default shift: about 3 750 samples
    // during the measured workload, fewer than the ring holds (no chunk is streamed meanwhile).
    let period = "25600ticks";
    let mut args = vec!["--bin", "cost", "--samples", "0", "--period", period];
    args.extend_from_slice(extra);
    let cli = release_args(manifest, &args)?;
    let dir = sample::capture(&cli.run)?;
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
    let meta = runs::load_meta(&dir)?;
    let per = (sampled - base) as f64 * meta.units_per_tick / n as f64;
    Ok((per, n, std::fs::read(dir.join(runs::ELF))?))
}

/// Measure everything and print it.
/// A sampler's cost from the exact counts of a `--truth` run: instructions of the handler's
/// code per sample (ARMv6-M: the entry and the variants that ran; ARMv8-A: the vectors and
/// handler, slow path entry included).
#[derive(Debug, Serialize)]
pub struct HandlerCost {
    pub name: String,
    pub instructions_per_sample: f64,
    pub samples: u64,
    pub hot_code_bytes: u64,
}

/// Exact counts per PC.
pub(crate) type Counts = Vec<(u32, u64)>;

/// A function of an ELF: its name without the hash, start, end.
pub(crate) type Function = (String, u64, u64);

/// The exact counts of a `--truth` run, and the functions of its ELF.
pub(crate) fn exact_functions(dir: &Path) -> Result<(Counts, Vec<Function>)> {
    let counts = exact::parse(&std::fs::read(dir.join(exact::FILE))?)?;
    let elf = std::fs::read(dir.join(runs::ELF))?;
    let file = object::File::parse(&*elf)?;
    let functions = file
        .symbols()
        .filter(|s| s.size() > 0)
        .filter_map(|s| {
            let a = s.address() & !1;
            let name = format!("{:#}", rustc_demangle::demangle(s.name().ok()?));
            Some((name, a, a + s.size()))
        })
        .collect();
    Ok((counts, functions))
}

/// Instructions executed in `[start, end)`.
pub(crate) fn executed(counts: &[(u32, u64)], start: u64, end: u64) -> u64 {
    counts
        .iter()
        .filter(|c| (start..end).contains(&(c.0 as u64)))
        .map(|c| c.1)
        .sum()
}

/// The handler cost of each run (`name`, extra arguments) of `manifest`'s default binary,
/// counting the functions `handler` names (short names) that ran.
pub(crate) fn handler_costs(
    manifest: &Path,
    runs: &[(&str, &[&str])],
    handler: impl Fn(&str) -> bool,
) -> Result<Vec<HandlerCost>> {
    let mut out = Vec::new();
    for &(name, extra) in runs {
        let mut args = vec!["--truth", "--samples", "3000"];
        args.extend_from_slice(extra);
        let cli = release_args(manifest, &args)?;
        let dir = sample::capture(&cli.run)?;
        let (counts, functions) = exact_functions(&dir)?;
        let used: Vec<(u64, u64)> = functions
            .iter()
            .filter(|(n, a, b)| {
                handler(n.rsplit("::").next().unwrap_or(n)) && executed(&counts, *a, *b) > 0
            })
            .map(|&(_, a, b)| (a, b))
            .collect();
        let total: u64 = used.iter().map(|&(a, b)| executed(&counts, a, b)).sum();
        let taken = cargo_sample::report::load::load_dump(&dir)?.info.taken as u64;
        if taken == 0 {
            bail!("{} took no samples", manifest.display());
        }
        out.push(HandlerCost {
            name: name.into(),
            instructions_per_sample: total as f64 / taken as f64,
            samples: taken,
            hot_code_bytes: used.iter().map(|(a, b)| b - a).sum(),
        });
    }
    Ok(out)
}

/// The ARMv6-M (Cortex-M0) handler's fast path, in the microbit example.
pub(crate) fn m0_costs(examples: &Path) -> Result<Vec<HandlerCost>> {
    handler_costs(
        &examples.join("microbit-m0/Cargo.toml"),
        &[
            ("M0 ring, constant period", &["--no-jitter"]),
            ("M0 ring + jitter", &[]),
        ],
        |short| {
            short == "sampler_rt_entry"
                || short.starts_with("sample_ring")
                || short.starts_with("sample_hist")
        },
    )
}

/// The device timers' drivers against SysTick on the same firmware: the RTIC example on
/// lm3s6965evb (SysTick, then the general-purpose timer 0) and the microbit example (SysTick,
/// then the nRF51 TIMER 0), with jitter; the timer's interrupt handler (its acknowledgement)
/// counted with the sampler's code.
pub(crate) fn timer_costs(examples: &Path) -> Result<Vec<HandlerCost>> {
    let sampler = |short: &str| {
        short.starts_with("sampler_rt_")
            || short.starts_with("probe_")
            || short.starts_with("sample_ring")
            || short.starts_with("sample_hist")
            || short == "TIMER_0A"
            || short == "DefaultHandler"
    };
    let mut out = handler_costs(
        &examples.join("rtic-app/Cargo.toml"),
        &[
            ("M3 ring + jitter, SysTick", &["--bin", "tasks"]),
            (
                "M3 ring + jitter, LM3S GPTM0",
                &["--bin", "tasks", "--timer", "gptm0"],
            ),
        ],
        sampler,
    )?;
    out.extend(handler_costs(
        &examples.join("scenarios/Cargo.toml"),
        &[
            (
                "M3 ring + jitter, SysTick (3 loops)",
                &["--bin", "hot-loops"],
            ),
            (
                "M3 ring + jitter, firmware's timer",
                &["--bin", "firmware-timer"],
            ),
        ],
        |short| sampler(short) || short == "TIMER1",
    )?);
    out.extend(handler_costs(
        &examples.join("microbit-m0/Cargo.toml"),
        &[
            ("M0 ring + jitter, SysTick", &[]),
            ("M0 ring + jitter, nRF51 TIMER0", &["--timer", "timer0"]),
        ],
        sampler,
    )?);
    Ok(out)
}

/// The ARMv8-A handler (vectors, fast path, slow-path entry), in the aarch64 example: the
/// generic timer and the cycle counter's overflow.
pub(crate) fn a64_costs(examples: &Path) -> Result<Vec<HandlerCost>> {
    handler_costs(
        &examples.join("aarch64-pmu/Cargo.toml"),
        &[
            ("A64 ring + jitter, generic timer", &["--bin", "hot-loops"]),
            (
                "A64 ring + jitter, cycle counter",
                &["--bin", "hot-loops", "--timer", "pmu:cpu_cycles"],
            ),
            (
                "A64 bins + jitter, generic timer",
                &["--bin", "hot-loops", "--mode", "hist", "--bin-size", "8"],
            ),
        ],
        |short| short == "sampler_rt_vectors",
    )
}

/// Every ring and bins variant on SysTick (and the CMSDK timer's), and the lateness check.
pub(crate) fn variants(manifest: &Path) -> Result<Vec<Variant>> {
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
        (
            "ring + exception tag",
            vec!["--no-jitter", "--tag", "exception"],
            21,
            "sample_ring_xpsr",
            false,
        ),
        (
            "ring + jitter + exception tag",
            vec!["--tag", "exception"],
            32,
            "sample_ring_jitter_xpsr",
            false,
        ),
        (
            "ring + jitter + firmware tag",
            vec!["--tag", "api"],
            32,
            "sample_ring_jitter_word",
            false,
        ),
        (
            "bins, constant period",
            vec!["--mode", "hist", "--bin-size", "4", "--no-jitter"],
            30,
            "sample_hist17",
            false,
        ),
        (
            "bins + jitter",
            vec!["--mode", "hist", "--bin-size", "4"],
            41,
            "sample_hist_jitter",
            false,
        ),
    ] {
        let (per, n, elf) = measure(manifest, &extra)?;
        let entry = sym_size(&elf, |s| s == "sampler_rt_entry")
            + sym_size(&elf, |s| s == "sampler_rt_frame");
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
    // The lateness check runs when the image has handlers of its own (see
    // `image::elf::may_hold_off`); the cost firmware has none, so it is asked for here.
    // SAFETY: the bench does one thing at a time; nothing else reads the environment now.
    unsafe { std::env::set_var("CARGO_SAMPLE_LATE_TICKS", "17") };
    let checked = measure(manifest, &[]);
    // SAFETY: as above.
    unsafe { std::env::remove_var("CARGO_SAMPLE_LATE_TICKS") };
    let (per, n, elf) = checked?;
    variants.push(Variant {
        name: "ring + jitter, lateness checked".into(),
        instructions_per_sample: per,
        samples: n,
        hot_code_bytes: sym_size(&elf, |s| s == "sampler_rt_entry")
            + sym_size(&elf, |s| s.contains("sample_ring_jitter17"))
            + sym_size(&elf, |s| s.contains("probe_systick")),
        seed_instructions: 32,
    });
    Ok(variants)
}
