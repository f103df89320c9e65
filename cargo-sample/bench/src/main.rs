//! `cargo run --release -p cargo-sample-bench`: the figures the README quotes. First the
//! sampler's on-target cost, measured exactly in QEMU.
//!
//! The `cost` firmware of the scenarios runs one workload without sampling and the same
//! workload while sampling, timing both with a CMSDK timer (0.625 instructions a tick at the
//! machine's default `-icount shift=6`; exception entry and return cost nothing in QEMU). The difference divided
//! by the samples taken is the handler's instructions per sample, slow path included. Code
//! bytes come from the ELF's symbol sizes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Parser;
use object::{Object, ObjectSymbol};
use serde::Serialize;

use cargo_sample::cli::{Cli, TableFormat, TruthMethod};
use cargo_sample::cmd::sample;
use cargo_sample::dump::exact;
use cargo_sample::exec::exact::{Counting, ExecLog};
use cargo_sample::runs;

mod diagnostics;

/// What to measure, and how to print it.
#[derive(clap::Parser, Debug)]
#[command(
    version,
    about = "Measure cargo-sample: on-target cost, throughput, overheads"
)]
struct BenchArgs {
    /// The scenarios firmware crate (default: `examples/scenarios` of this repository).
    #[arg(long, value_name = "PATH")]
    manifest_path: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    format: TableFormat,
    /// Only the timer drivers' cost per sample (a quick look; the full bench measures it too).
    #[arg(long)]
    timers_only: bool,
    /// Only the timings of board runs through the emulated probe (`--chip mps2-an385 --probe
    /// qemu`): attach, download, capture.
    #[arg(long)]
    board_only: bool,
    /// Only the cost of exact counting (plain QEMU, the plugin, the call graph, the exec log).
    #[arg(long)]
    counting_only: bool,
    /// Only the cost of stack capture (`--stacks`): instructions and bytes per sample on the
    /// target, and the host's unwinding of a million samples.
    #[arg(long)]
    stacks_only: bool,
    /// Only the HTML report of a million samples with stacks: its size, the time to write it,
    /// and (with Chromium installed) the time a headless Chromium takes to draw it.
    #[arg(long)]
    html_only: bool,
    /// Only how often each diagnostic fires: on clean runs of the bundled firmware and of the
    /// crates given with `--outside`, and on runs built to provoke each one, `--seeds` seeds
    /// each.
    #[arg(long)]
    diagnostics: bool,
    /// With `--diagnostics`: a crate from outside, `DIR`, `DIR:ARGS` or `DIR:ARGS:KINDS`
    /// (ARGS: its `cargo sample` arguments, space-separated; KINDS: findings the firmware
    /// really gives cause for, comma-separated). Repeatable.
    #[arg(long, value_name = "DIR[:ARGS[:KINDS]]")]
    outside: Vec<String>,
    /// With `--diagnostics`: only the crates given with `--outside`.
    #[arg(long)]
    outside_only: bool,
    /// With `--diagnostics`: seeds per firmware.
    #[arg(long, default_value_t = 20)]
    seeds: u32,
}

/// The newest saved run of `bin`.
fn latest_run(manifest: &Path, bin: &str) -> Result<PathBuf> {
    let runs_dir = manifest
        .parent()
        .context("no crate directory")?
        .join("target/cargo-sample/runs");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(&format!("-{bin}-")) && !n.contains("synthetic"))
        })
        .collect();
    dirs.sort();
    dirs.pop().context("no saved run")
}

/// A real run of `call-graph` with stacks, its samples repeated to a million, saved as a run
/// beside it; its directory and sample count.
fn million_stack_samples(manifest: &Path, bin: &str) -> Result<(PathBuf, usize)> {
    let cli = release_args(manifest, &["--bin", bin, "--samples", "10000", "--stacks"])?;
    let real = sample::capture(&cli.run)?;
    let dump = cargo_sample::dump::decode(&std::fs::read(real.join(runs::DUMP))?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let n = 1_000_000usize;
    let mut big = cargo_sample::dump::Dump::of_samples(dump.info, 0, Vec::new(), Vec::new());
    for i in 0..n {
        let j = i % dump.pcs.len();
        big.pcs.push(dump.pcs[j]);
        big.tags.push(dump.tags[j]);
        big.stacks.push(dump.stacks[j].clone());
    }
    big.info.taken = n as u32;
    big.info.limit = n as u32;
    let dir = real.with_file_name(format!(
        "{}-stacks-{n}",
        real.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir)?;
    for f in [runs::ELF, runs::META] {
        std::fs::copy(real.join(f), dir.join(f))?;
    }
    runs::write_atomic(&dir.join(runs::DUMP), &cargo_sample::dump::encode(&big))?;
    Ok((dir, n))
}

/// The HTML report of a million samples with stacks: size, time to write, time to draw.
fn html_cost(manifest: &Path) -> Result<()> {
    // The real workload (core::fmt, sorting, CRC, soft-float): the most distinct stacks.
    let (dir, n) = million_stack_samples(manifest, "workload")?;
    let view = release_args(manifest, &["--format", "html", "--lines"])?
        .run
        .view;
    let page = dir.join("report.html");
    let t0 = std::time::Instant::now();
    let report = cargo_sample::report::load::load_report(
        &dir,
        cargo_sample::cmd::saved::build_options(&view),
    )?;
    let bytes = cargo_sample::report::html::html(&report)?;
    let made = t0.elapsed().as_secs_f64();
    std::fs::write(&page, &bytes)?;
    println!(
        "  {n} samples with stacks of `workload` ({} distinct stacks, {} distinct addresses): \
         report built and written as HTML in {made:.2} s, {:.0} KiB",
        report.inline_stacks.len(),
        report.distinct_pcs,
        bytes.len() as f64 / 1024.0
    );
    let chromium = Path::new("/usr/bin/chromium");
    if chromium.is_file() {
        let profile = tempfile::tempdir()?;
        let mut drawn = Vec::new();
        for _ in 0..3 {
            let out = std::process::Command::new(chromium)
                .args([
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--dump-dom",
                ])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .arg(format!("file://{}", page.canonicalize()?.display()))
                .output()?;
            let dom = String::from_utf8_lossy(&out.stdout);
            let ms = dom
                .split("data-drawn-ms=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .and_then(|v| v.parse::<f64>().ok())
                .context("Chromium did not draw the page (no data-drawn-ms in its DOM)")?;
            drawn.push(ms);
        }
        drawn.sort_by(f64::total_cmp);
        println!(
            "  headless Chromium: navigation to a drawn page in {:.0} ms (median of 3; min {:.0} ms)",
            drawn[1], drawn[0]
        );
    } else {
        println!("  (no /usr/bin/chromium: `tests/setup.sh --with-chromium` installs it)");
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Stack capture's cost on the target, by window size, and the host's unwinding throughput.
fn stack_costs(manifest: &Path) -> Result<()> {
    println!("stack capture (--stacks), exact in QEMU mps2-an385 with a random period:");
    let (plain, _, _) = measure(manifest, &[])?;
    println!(
        "  {:<26} {:>8.2} instructions/sample {:>5} bytes of ring a sample",
        "no stacks", plain, 4
    );
    for words in ["16", "32", "64"] {
        let (per, n, elf) = measure(manifest, &["--stacks", words, "--truth"])?;
        // The ring slot: header, window and 64 frame records.
        let bytes = 4 * (6 + words.parse::<u32>()? + 2 * 64);
        // The handler alone, from the exact counts of its two functions over the whole run
        // (the rest is the dump's CRC and the write of each full chunk).
        let dir = latest_run(manifest, "cost")?;
        let dump = cargo_sample::dump::decode(&std::fs::read(dir.join(runs::DUMP))?)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let sym =
            cargo_sample::image::symbolize::Symbolizer::new(&dir.join(runs::ELF), &elf, None)?;
        let handler: u64 = exact::parse(&std::fs::read(dir.join(exact::FILE))?)?
            .into_iter()
            .filter(|&(pc, _)| {
                matches!(
                    sym.function_of(pc as u64),
                    Some(f) if f.ends_with("sample_stack") || f.ends_with("sampler_rt_stack") || f == "sampler_rt_entry"
                )
            })
            .map(|x| x.1)
            .sum();
        let chunk = 10240 / (6 + words.parse::<u32>()? + 2 * 64);
        println!(
            "  {:<26} {:>8.2} instructions/sample {:>5} bytes of ring a sample ({n} samples); the \
             handler alone {:.2}, the rest the dump's CRC and write of each full chunk ({chunk} samples)",
            format!("stacks, {words}-word window"),
            per,
            bytes,
            handler as f64 / dump.info.taken.max(1) as f64
        );
    }
    // ARMv6-M: the handler alone (the entry, the variant that finds the frame again and the
    // entry writer), in the microbit example.
    let examples = manifest
        .parent()
        .and_then(Path::parent)
        .context("the scenarios crate is not in an examples folder")?;
    for c in handler_costs(
        &examples.join("microbit-m0/Cargo.toml"),
        &[("stacks, 32-word window", &["--stacks", "32"])],
        |short| {
            short == "sampler_rt_entry"
                || short.ends_with("sample_stack")
                || short == "sampler_rt_stack"
        },
    )? {
        println!(
            "  {:<26} {:>8.2} instructions/sample (Cortex-M0, microbit: the handler alone, {} samples)",
            c.name, c.instructions_per_sample, c.samples
        );
    }
    // ARMv8-A: the vectors' path and the entry writer, in the aarch64 example.
    for c in handler_costs(
        &examples.join("aarch64-pmu/Cargo.toml"),
        &[(
            "stacks, 32-word window",
            &["--bin", "calls", "--stacks", "32"],
        )],
        |short| short == "sampler_rt_vectors" || short == "sampler_rt_a64_stack",
    )? {
        println!(
            "  {:<26} {:>8.2} instructions/sample (ARMv8-A, virt: the handler alone, {} samples)",
            c.name, c.instructions_per_sample, c.samples
        );
    }
    // Host: a real run's stacks, repeated to a million samples, reported.
    let (dir, n) = million_stack_samples(manifest, "call-graph")?;
    let mut times = Vec::new();
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let r = cargo_sample::report::load::load_report(
            &dir,
            cargo_sample::report::Options {
                callers: Some("leaf".into()),
                ..cargo_sample::report::Options::default()
            },
        )?;
        times.push(t0.elapsed().as_secs_f64());
        let u = r.unwinding.context("no unwinding in the report")?;
        if u.samples != n as u64 {
            bail!("{} of {n} stacks unwound", u.samples);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "  host: {n} samples with stacks loaded, unwound and reported (with --callers) in {:.2} s (median of 3; min {:.2} s)",
        times[1], times[0]
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A board run through probe-rs and the emulated probe, by method: where its time goes.
#[derive(Debug, Serialize)]
pub struct BoardTiming {
    pub method: String,
    pub samples: u64,
    pub attach: Timing,
    pub download: Timing,
    pub capture: Timing,
    /// Samples delivered per second of capture (median run).
    pub samples_per_s: f64,
}

/// `cargo sample --chip mps2-an385 --probe qemu` on hot-loops, three runs per method.
fn board_timings(manifest: &Path) -> Result<Vec<BoardTiming>> {
    let mut out = Vec::new();
    for (method, n) in [("timer", "20000"), ("pcsr", "5000"), ("dwt", "20000")] {
        let (mut a, mut d, mut c, mut samples) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..3 {
            let cli = release_args(
                manifest,
                &[
                    "--bin",
                    "hot-loops",
                    "--chip",
                    "mps2-an385",
                    "--probe",
                    "qemu",
                    "--method",
                    method,
                    "-n",
                    n,
                ],
            )?;
            let dir = sample::capture(&cli.run)?;
            let meta = runs::load_meta(&dir)?;
            let t = meta
                .board_seconds
                .context("a board run without its timings")?;
            a.push(t.attach);
            d.push(t.download);
            c.push(t.capture);
            let dump = cargo_sample::dump::decode(&std::fs::read(dir.join(runs::DUMP))?)?;
            samples = dump.pcs.len() as u64;
        }
        let capture = Timing::of(c);
        out.push(BoardTiming {
            method: method.into(),
            samples,
            samples_per_s: samples as f64 / capture.median_s,
            attach: Timing::of(a),
            download: Timing::of(d),
            capture,
        });
    }
    Ok(out)
}

fn print_board(b: &[BoardTiming]) {
    println!(
        "board runs through probe-rs and the emulated probe (`--chip mps2-an385 --probe qemu`, hot-loops), medians of 3:"
    );
    println!(
        "{:<7} {:>8} {:>9} {:>10} {:>9} {:>12}",
        "method", "samples", "attach s", "download s", "capture s", "samples/s"
    );
    for t in b {
        println!(
            "{:<7} {:>8} {:>9.3} {:>10.3} {:>9.3} {:>12.0}",
            t.method,
            t.samples,
            t.attach.median_s,
            t.download.median_s,
            t.capture.median_s,
            t.samples_per_s
        );
    }
}

fn main() -> std::process::ExitCode {
    let args = BenchArgs::parse();
    cargo_sample::term::init_color(None);
    match bench(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

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

fn sym_size(elf: &[u8], pred: impl Fn(&str) -> bool) -> u64 {
    let Ok(file) = object::File::parse(elf) else {
        return 0;
    };
    file.symbols()
        .find(|s| s.name().is_ok_and(&pred))
        .map(|s| s.size())
        .unwrap_or(0)
}

/// `cargo sample --manifest-path MANIFEST --release ARGS...`, parsed as the command line is.
fn release_args(manifest: &Path, args: &[&str]) -> Result<Cli> {
    let mut argv = vec![
        "cargo-sample",
        "--manifest-path",
        manifest.to_str().context("path is not UTF-8")?,
        "--release",
    ];
    argv.extend_from_slice(args);
    Ok(Cli::try_parse_from(argv)?)
}

fn measure(manifest: &Path, extra: &[&str]) -> Result<(f64, u64, Vec<u8>)> {
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

/// Wall-clock times of repeated runs.
#[derive(Debug, Serialize)]
pub struct Timing {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub runs: usize,
}

impl Timing {
    fn of(mut v: Vec<f64>) -> Timing {
        v.sort_by(f64::total_cmp);
        Timing {
            median_s: v[v.len() / 2],
            min_s: v[0],
            max_s: v[v.len() - 1],
            runs: v.len(),
        }
    }
}

/// What exact counting costs over a plain `-icount` QEMU run of the same image.
#[derive(Debug, Serialize)]
pub struct CountingCost {
    pub qemu: String,
    pub instructions: u64,
    pub plain: Timing,
    pub plugin: Timing,
    pub plugin_api: u32,
    /// Median plugin time over median plain time, minus one, in percent.
    pub plugin_overhead_percent: f64,
    /// The plugin following calls too (`--exact`'s call graph): time, and over plain QEMU.
    pub call_graph: Timing,
    pub call_graph_overhead_percent: f64,
    pub exec_log_instructions: u64,
    pub exec_log: Timing,
    /// Millions of guest instructions per second through the exec log.
    pub exec_log_mips: f64,
    pub plain_mips: f64,
}

/// Host time of one report, by stage, for a number of samples of one image.
#[derive(Debug, Serialize)]
pub struct PipelineTiming {
    pub firmware: String,
    /// Code and read-only data of the image, bytes.
    pub image_bytes: u64,
    pub samples: u64,
    /// Load the ELF and DWARF, decode the dump, check it, symbolize, aggregate, diagnose.
    pub load: Timing,
    /// Rendering each format, from the loaded report.
    pub formats: Vec<(String, Timing)>,
    /// Samples per second of load plus the text report.
    pub samples_per_second: f64,
}

/// ITM/SWO decoding speed, ours and pyOCD's on the same kind of stream.
#[derive(Debug, Serialize)]
pub struct ItmSpeed {
    pub bytes: u64,
    pub ours: Timing,
    pub ours_mb_per_s: f64,
    /// pyOCD's `SWOParser` (from `target/pyocd-venv`, when `tests/setup.sh --with-pyocd` made it).
    pub pyocd_bytes: u64,
    pub pyocd_mb_per_s: Option<f64>,
    pub ratio: Option<f64>,
}

/// Everything the bench measures.
#[derive(Debug, Serialize)]
pub struct Bench {
    pub sampler: Vec<Variant>,
    pub exact_counting: CountingCost,
    pub host_pipeline: Vec<PipelineTiming>,
    pub itm: ItmSpeed,
    pub live: Vec<LiveRate>,
    pub laps: LapCost,
    pub m0: Vec<HandlerCost>,
    /// Device timers' drivers beside SysTick on the same firmware.
    pub timers: Vec<HandlerCost>,
    /// The ARMv8-A handler per sample.
    pub armv8a: Vec<HandlerCost>,
    pub e2e: EndToEnd,
    pub transfer: DumpTransfer,
    pub board: Vec<BoardTiming>,
}

/// Decode a synthetic SWO stream of 64 MiB (our decoder) and of 2 MiB (pyOCD's), made from
/// pseudo-random PCs.
fn itm_speed() -> Result<ItmSpeed> {
    let mut x = 0x2545_F491u32;
    let pcs: Vec<u32> = (0..12_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            0x0800_0000 + 2 * (x % 20_000)
        })
        .collect();
    let stream = cargo_sample::dump::itm::synthetic(&pcs, true);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        let mut n = 0u64;
        cargo_sample::dump::itm::Parser::new(false).feed(&stream, &mut |e| {
            if matches!(e, cargo_sample::dump::itm::Event::PcSample(_)) {
                n += 1;
            }
        });
        std::hint::black_box(n);
        times.push(t0.elapsed().as_secs_f64());
    }
    let ours = Timing::of(times);
    let ours_mb = stream.len() as f64 / ours.median_s / 1e6;
    let small = cargo_sample::dump::itm::synthetic(&pcs[..380_000], true);
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyocd-venv/bin/python");
    let pyocd_mb = if venv.is_file() {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("swo.bin");
        std::fs::write(&file, &small)?;
        let script = "import sys, time\nfrom pyocd.trace.swo import SWOParser\n\
                      class Core:\n    def exception_number_to_name(self, n): return str(n)\n\
                      class Sink:\n    def receive(self, e): pass\n\
                      data = open(sys.argv[1], 'rb').read()\np = SWOParser(Core(), Sink())\n\
                      t = time.perf_counter(); p.parse(data); print(time.perf_counter() - t)\n";
        let out = std::process::Command::new(&venv)
            .arg("-c")
            .arg(script)
            .arg(&file)
            .output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<f64>()
            .ok()
            .map(|secs| small.len() as f64 / secs / 1e6)
    } else {
        None
    };
    Ok(ItmSpeed {
        bytes: stream.len() as u64,
        ours,
        ours_mb_per_s: ours_mb,
        pyocd_bytes: small.len() as u64,
        pyocd_mb_per_s: pyocd_mb,
        ratio: pyocd_mb.map(|p| ours_mb / p),
    })
}

/// Make `n` samples drawn from the exact per-address counts of a run (xorshift, fixed seed),
/// as a run directory beside it whose dump the report reads as any other.
fn synthetic_run(real: &Path, n: u64) -> Result<PathBuf> {
    let counts = exact::parse(&std::fs::read(real.join(exact::FILE))?)?;
    let elf = std::fs::read(real.join(runs::ELF))?;
    let sym = cargo_sample::image::symbolize::Symbolizer::new(&real.join(runs::ELF), &elf, None)?;
    let counts: Vec<(u32, u64)> = counts
        .into_iter()
        .filter(|&(pc, _)| !sym.is_sampler(pc as u64))
        .collect();
    let mut cumulative = Vec::with_capacity(counts.len());
    let mut total = 0u64;
    for &(_, c) in &counts {
        total += c;
        cumulative.push(total);
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let pcs: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = x % total;
            counts[cumulative.partition_point(|&c| c <= r)].0
        })
        .collect();
    let dump = cargo_sample::dump::decode(&std::fs::read(real.join(runs::DUMP))?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut info = dump.info;
    info.taken = n as u32;
    info.limit = n as u32;
    let dir = real.with_file_name(format!(
        "{}-synthetic-{n}",
        real.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir)?;
    for f in [runs::ELF, runs::META] {
        std::fs::copy(real.join(f), dir.join(f))?;
    }
    let mut meta = runs::load_meta(&dir)?;
    meta.requested_samples = n as u32;
    runs::save_meta(&dir, &meta)?;
    runs::write_atomic(
        &dir.join(runs::DUMP),
        &cargo_sample::dump::encode(&cargo_sample::dump::Dump::of_samples(
            info,
            0,
            pcs,
            Vec::new(),
        )),
    )?;
    Ok(dir)
}

/// Bytes the image puts in flash for code and constants: allocated, read-only sections.
fn image_bytes(elf: &[u8]) -> u64 {
    use object::ObjectSection;
    let Ok(f) = object::File::parse(elf) else {
        return 0;
    };
    f.sections()
        .filter(|s| {
            matches!(s.flags(), object::SectionFlags::Elf { sh_flags, .. }
                if sh_flags.0 & object::elf::SHF_ALLOC.0 != 0
                    && sh_flags.0 & object::elf::SHF_WRITE.0 == 0)
                && s.kind() != object::SectionKind::UninitializedData
        })
        .map(|s| s.size())
        .sum()
}

/// Time the report of `n` synthetic samples of `bin`, stage by stage.
fn pipeline(manifest: &Path, bin: &str, sizes: &[u64]) -> Result<Vec<PipelineTiming>> {
    let cli = release_args(manifest, &["--bin", bin, "--samples", "2000", "--truth"])?;
    let real = sample::capture(&cli.run)?;
    let elf = std::fs::read(real.join(runs::ELF))?;
    let mut out = Vec::new();
    for &n in sizes {
        let dir = synthetic_run(&real, n)?;
        let reps = if n >= 10_000_000 { 1 } else { 3 };
        let mut load = Vec::new();
        let mut report = None;
        for _ in 0..reps {
            let t0 = std::time::Instant::now();
            let r = cargo_sample::report::load::load_report(
                &dir,
                cargo_sample::report::Options::default(),
            )?;
            load.push(t0.elapsed().as_secs_f64());
            report = Some(r);
        }
        let report = report.context("no report")?;
        let mut formats = Vec::new();
        let text_opts = cargo_sample::report::text::Options {
            lines: true,
            tree: true,
            top: 20,
            min_percent: 0.0,
        };
        for name in ["text", "json", "folded", "svg", "pprof"] {
            let mut times = Vec::new();
            for _ in 0..reps {
                let t0 = std::time::Instant::now();
                let bytes = match name {
                    "text" => cargo_sample::report::text::render(&report, text_opts).len(),
                    "json" => serde_json::to_vec(&report)?.len(),
                    "folded" => cargo_sample::report::formats::folded(&report).len(),
                    "svg" => cargo_sample::report::formats::svg(&report)?.len(),
                    _ => cargo_sample::report::formats::pprof(&report)?.len(),
                };
                std::hint::black_box(bytes);
                times.push(t0.elapsed().as_secs_f64());
            }
            formats.push((name.to_owned(), Timing::of(times)));
        }
        let load = Timing::of(load);
        let text = formats[0].1.median_s;
        out.push(PipelineTiming {
            firmware: bin.to_owned(),
            image_bytes: image_bytes(&elf),
            samples: n,
            samples_per_second: n as f64 / (load.median_s + text),
            load,
            formats,
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(out)
}

/// Exact counts per PC.
type Counts = Vec<(u32, u64)>;

/// Run QEMU on a run directory's image as `cargo sample` does; returns the wall time and the
/// counts when counting.
fn time_qemu(
    qemu: &Path,
    meta: &runs::RunMeta,
    kernel: &Path,
    counting: Option<&Counting>,
    graph: bool,
) -> Result<(f64, Option<Counts>)> {
    let work = tempfile::tempdir()?;
    let mut cmd = std::process::Command::new(qemu);
    cmd.current_dir(work.path())
        .args(["-machine", &meta.machine, "-cpu", &meta.cpu])
        .args(["-display", "none", "-serial", "null", "-monitor", "none"])
        .args(["-semihosting-config", "enable=on,target=native"])
        .arg("-icount")
        .arg(format!("shift={}", meta.icount_shift))
        .arg("-kernel")
        .arg(kernel)
        .stdout(std::process::Stdio::null());
    let counts = work.path().join("counts.bin");
    let mut log = None;
    match counting {
        Some(Counting::Plugin { path, .. }) => {
            let graph = if graph {
                format!(",graph={}", work.path().join("graph.bin").display())
            } else {
                String::new()
            };
            cmd.arg("-plugin").arg(format!(
                "{},out={}{graph}",
                path.display(),
                counts.display()
            ));
            cmd.stderr(std::process::Stdio::null());
        }
        Some(Counting::ExecLog { one_insn_flag }) => {
            cmd.args(one_insn_flag).args(["-d", "exec,nochain"]);
            cmd.stderr(std::process::Stdio::piped());
            log = Some(ExecLog::default());
        }
        None => {
            cmd.stderr(std::process::Stdio::null());
        }
    }
    let t0 = std::time::Instant::now();
    let mut child = cmd.spawn().context("starting QEMU")?;
    if let (Some(log), Some(err)) = (log.as_mut(), child.stderr.take()) {
        use std::io::BufRead;
        let mut r = std::io::BufReader::with_capacity(1 << 20, err);
        let mut line = Vec::new();
        while r.read_until(b'\n', &mut line)? > 0 {
            log.line(line.strip_suffix(b"\n").unwrap_or(&line));
            line.clear();
        }
    }
    let status = child.wait()?;
    let wall = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!("QEMU failed ({status}) on {}", kernel.display());
    }
    let counts = match (log, counting) {
        (Some(l), _) => Some(l.counts()),
        (None, Some(_)) => Some(exact::parse(&std::fs::read(&counts)?)?),
        (None, None) => None,
    };
    Ok((wall, counts))
}

/// Plugin overhead over plain QEMU on hot-loops (10 000 samples, about 10^8 instructions),
/// runs interleaved so both see the same machine; the exec log on a shorter run.
fn counting_cost(manifest: &Path) -> Result<CountingCost> {
    let sampled = |n: &str| -> Result<PathBuf> {
        let cli = release_args(manifest, &["--bin", "hot-loops", "--samples", n])?;
        sample::capture(&cli.run)
    };
    let dir = sampled("10000")?;
    let meta = runs::load_meta(&dir)?;
    let qemu = meta
        .qemu_command
        .first()
        .map(PathBuf::from)
        .context("the run recorded no QEMU command")?;
    let own = dir
        .parent()
        .and_then(Path::parent)
        .context("run directory outside cargo-sample's")?;
    let plugin = cargo_sample::cmd::exact::choose_counting(TruthMethod::Plugin, &qemu, own)?;
    let api = match &plugin {
        Counting::Plugin { api, .. } => api.number(),
        Counting::ExecLog { .. } => 0,
    };
    let kernel = dir.join(runs::LOADED_ELF);
    let (mut plain, mut with, mut graph) = (Vec::new(), Vec::new(), Vec::new());
    let mut instructions = 0;
    for _ in 0..5 {
        plain.push(time_qemu(&qemu, &meta, &kernel, None, false)?.0);
        let (t, counts) = time_qemu(&qemu, &meta, &kernel, Some(&plugin), false)?;
        with.push(t);
        instructions = counts.unwrap_or_default().iter().map(|c| c.1).sum();
        graph.push(time_qemu(&qemu, &meta, &kernel, Some(&plugin), true)?.0);
    }
    let short = sampled("300")?;
    let log = cargo_sample::cmd::exact::choose_counting(TruthMethod::ExecLog, &qemu, own)?;
    let mut log_times = Vec::new();
    let mut log_instructions = 0;
    for _ in 0..3 {
        let (t, counts) = time_qemu(
            &qemu,
            &meta,
            &short.join(runs::LOADED_ELF),
            Some(&log),
            false,
        )?;
        log_times.push(t);
        log_instructions = counts.unwrap_or_default().iter().map(|c| c.1).sum();
    }
    let plain = Timing::of(plain);
    let plugin_t = Timing::of(with);
    let graph_t = Timing::of(graph);
    let exec_log = Timing::of(log_times);
    Ok(CountingCost {
        qemu: String::from_utf8_lossy(
            &std::process::Command::new(&qemu)
                .arg("--version")
                .output()?
                .stdout,
        )
        .lines()
        .next()
        .unwrap_or("")
        .to_owned(),
        instructions,
        plugin_overhead_percent: 100.0 * (plugin_t.median_s / plain.median_s - 1.0),
        call_graph_overhead_percent: 100.0 * (graph_t.median_s / plain.median_s - 1.0),
        call_graph: graph_t,
        plain_mips: instructions as f64 / plain.median_s / 1e6,
        plain,
        plugin: plugin_t,
        plugin_api: api,
        exec_log_mips: log_instructions as f64 / exec_log.median_s / 1e6,
        exec_log_instructions: log_instructions,
        exec_log,
    })
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

/// A function of an ELF: its name without the hash, start, end.
type Function = (String, u64, u64);

/// The exact counts of a `--truth` run, and the functions of its ELF.
fn exact_functions(dir: &Path) -> Result<(Counts, Vec<Function>)> {
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
fn executed(counts: &[(u32, u64)], start: u64, end: u64) -> u64 {
    counts
        .iter()
        .filter(|c| (start..end).contains(&(c.0 as u64)))
        .map(|c| c.1)
        .sum()
}

/// The handler cost of each run (`name`, extra arguments) of `manifest`'s default binary,
/// counting the functions `handler` names (short names) that ran.
fn handler_costs(
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
fn m0_costs(examples: &Path) -> Result<Vec<HandlerCost>> {
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
fn timer_costs(examples: &Path) -> Result<Vec<HandlerCost>> {
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
fn a64_costs(examples: &Path) -> Result<Vec<HandlerCost>> {
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

/// The semihosting sink streaming a large dump: bytes over QEMU's wall time (emulation of the
/// program included, so a lower bound on the transfer itself).
#[derive(Debug, Serialize)]
pub struct DumpTransfer {
    pub samples: u64,
    pub bytes: u64,
    pub wall: Timing,
    pub mb_per_s: f64,
}

fn dump_transfer(manifest: &Path) -> Result<DumpTransfer> {
    let mut walls = Vec::new();
    let mut bytes = 0;
    for _ in 0..3 {
        let cli = release_args(
            manifest,
            &[
                "--bin",
                "hot-loops",
                "--samples",
                "1000000",
                "--period",
                "64ticks",
            ],
        )?;
        let dir = sample::capture(&cli.run)?;
        walls.push(runs::load_meta(&dir)?.wall_seconds);
        bytes = std::fs::metadata(dir.join(runs::DUMP))?.len();
        let d = cargo_sample::report::load::load_dump(&dir)?;
        if d.pcs.len() != 1_000_000 || d.info.taken != 1_000_000 {
            bail!(
                "the streamed dump holds {} of {} samples",
                d.pcs.len(),
                d.info.taken
            );
        }
    }
    let wall = Timing::of(walls);
    Ok(DumpTransfer {
        samples: 1_000_000,
        bytes,
        mb_per_s: bytes as f64 / 1e6 / wall.median_s,
        wall,
    })
}

/// A whole `cargo sample` of the bundled example, split into its parts.
#[derive(Debug, Serialize)]
pub struct EndToEnd {
    pub build: Timing,
    pub run: Timing,
    pub report: Timing,
    pub total: Timing,
}

fn end_to_end(manifest: &Path) -> Result<EndToEnd> {
    let (mut build, mut qemu, mut report, mut total) = (vec![], vec![], vec![], vec![]);
    for _ in 0..5 {
        let cli = release_args(manifest, &["--bin", "hot-loops"])?;
        let t0 = std::time::Instant::now();
        // The build step alone (cached, as in everyday use), then the whole capture.
        let p = cargo_sample::project::discover(&cargo_sample::project::Selection::from(
            &cli.run.cargo,
        ))?;
        cargo_sample::project::firmware::build(
            &p,
            &cargo_sample::project::Selection::from(&cli.run.cargo),
            true,
            &[],
        )?;
        let b = t0.elapsed().as_secs_f64();
        let t1 = std::time::Instant::now();
        let dir = sample::capture(&cli.run)?;
        let captured = t1.elapsed().as_secs_f64();
        let t2 = std::time::Instant::now();
        let r = cargo_sample::report::load::load_report(
            &dir,
            cargo_sample::report::Options::default(),
        )?;
        let _ = cargo_sample::report::text::render(
            &r,
            cargo_sample::report::text::Options {
                lines: false,
                tree: false,
                top: 20,
                min_percent: 0.0,
            },
        );
        let rep = t2.elapsed().as_secs_f64();
        let meta = runs::load_meta(&dir)?;
        build.push(b);
        qemu.push(meta.wall_seconds);
        report.push(rep);
        total.push(captured + rep);
    }
    Ok(EndToEnd {
        build: Timing::of(build),
        run: Timing::of(qemu),
        report: Timing::of(report),
        total: Timing::of(total),
    })
}

/// What timing a region costs the program, exact in QEMU.
#[derive(Debug, Serialize)]
pub struct LapCost {
    /// Instructions the program runs per lap in sampler-rt's lap code (`measure` around an
    /// empty closure, and recording the lap).
    pub instructions_per_lap: f64,
    /// The lap's own time as calibrated and subtracted (the instructions between the counter
    /// reads, read to a SysTick tick).
    pub subtracted: f64,
    /// The empty region's corrected lap (0 when the subtraction is right).
    pub empty_region: f64,
}

fn lap_cost(manifest: &Path) -> Result<LapCost> {
    let cli = release_args(manifest, &["--bin", "laps", "--laps", "--truth"])?;
    let dir = sample::capture(&cli.run)?;
    let (counts, functions) = exact_functions(&dir)?;
    // Per call: every instruction of a function over the count of its first.
    let per_call = |start: u64, end: u64| -> Option<f64> {
        let entry = counts.iter().find(|c| c.0 as u64 == start)?.1;
        (entry > 0).then(|| executed(&counts, start, end) as f64 / entry as f64)
    };
    let mut measure = f64::INFINITY;
    let mut record = 0.0;
    for (name, a, b) in &functions {
        if name.starts_with("sampler_rt::laps::Region::measure") {
            if let Some(c) = per_call(*a, *b) {
                measure = measure.min(c);
            }
        } else if name.starts_with("sampler_rt::laps::record_into") {
            record = per_call(*a, *b).unwrap_or(0.0);
        }
    }
    if !measure.is_finite() {
        bail!("no lap was timed in the laps firmware");
    }
    let report =
        cargo_sample::report::load::load_report(&dir, cargo_sample::report::Options::default())?;
    let laps = report.laps.context("the laps firmware sent no regions")?;
    let empty = laps
        .regions
        .iter()
        .find(|r| r.name == "empty")
        .map(|r| r.median)
        .unwrap_or(f64::NAN);
    Ok(LapCost {
        instructions_per_lap: measure + record,
        subtracted: laps.overhead,
        empty_region: empty,
    })
}

/// One live capture at a sampling period: what the host read, and how fast.
#[derive(Debug, Serialize)]
pub struct LiveRate {
    pub period_instructions: f64,
    pub taken: u64,
    pub lost: u64,
    pub wall_s: f64,
    /// Samples delivered per second of host time.
    pub delivered_per_s: f64,
    /// Bytes of ring read per second of host time (4 a sample).
    pub bytes_per_s: f64,
}

/// Live capture through QEMU's monitor at shorter and shorter periods: where samples start to
/// be lost (the host reads every 10 ms; the ring holds 10 240 samples).
fn live_rates(manifest: &Path) -> Result<Vec<LiveRate>> {
    let mut out = Vec::new();
    for period in ["16000ticks", "1600ticks", "400ticks", "160ticks", "64ticks"] {
        let cli = release_args(
            manifest,
            &[
                "--bin",
                "hot-loops",
                "--live",
                "--samples",
                "200000",
                "--period",
                period,
            ],
        )?;
        let started = std::time::Instant::now();
        let dir = sample::capture(&cli.run)?;
        let wall = started.elapsed().as_secs_f64();
        let d = cargo_sample::report::load::load_dump(&dir)?;
        let meta = runs::load_meta(&dir)?;
        let delivered = d.pcs.len() as f64;
        out.push(LiveRate {
            period_instructions: (d.info.reload as f64 + 1.0 + d.info.jitter_mask as f64 / 2.0)
                * meta.units_per_tick,
            taken: d.info.taken as u64,
            lost: d.info.lost as u64,
            wall_s: wall,
            delivered_per_s: delivered / wall,
            bytes_per_s: delivered * 4.0 / wall,
        });
    }
    Ok(out)
}

fn bench(args: &BenchArgs) -> Result<()> {
    let manifest = match &args.manifest_path {
        Some(p) => p.clone(),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/Cargo.toml")
        }
    };
    if args.board_only {
        print_board(&board_timings(&manifest)?);
        return Ok(());
    }
    if args.stacks_only {
        return stack_costs(&manifest);
    }
    if args.html_only {
        return html_cost(&manifest);
    }
    if args.diagnostics {
        return diagnostics::diagnostics(&manifest, &args.outside, args.seeds, args.outside_only);
    }
    if args.counting_only {
        let c = counting_cost(&manifest)?;
        println!(
            "plain {:.3} s, plugin {:+.1} %, plugin + call graph {:+.1} %, exec log {:.2} MIPS ({} instructions, {})",
            c.plain.median_s,
            c.plugin_overhead_percent,
            c.call_graph_overhead_percent,
            c.exec_log_mips,
            c.instructions,
            c.qemu
        );
        return Ok(());
    }
    if args.timers_only {
        let examples = manifest
            .parent()
            .and_then(Path::parent)
            .context("the example's manifest has no parent directory")?;
        for v in timer_costs(examples)? {
            println!(
                "{:<34} {:>8.2} instructions/sample {:>6} bytes {:>8} samples",
                v.name, v.instructions_per_sample, v.hot_code_bytes, v.samples
            );
        }
        return Ok(());
    }
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
        let (per, n, elf) = measure(&manifest, &extra)?;
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
    let checked = measure(&manifest, &[]);
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
    let live = live_rates(&manifest)?;
    let laps = lap_cost(&manifest)?;
    let examples = manifest
        .parent()
        .and_then(Path::parent)
        .context("the example's manifest has no parent directory")?
        .to_path_buf();
    let m0 = m0_costs(&examples)?;
    let timers = timer_costs(&examples)?;
    let armv8a = a64_costs(&examples)?;
    let e2e = end_to_end(&manifest)?;
    let transfer = dump_transfer(&manifest)?;
    let board = board_timings(&manifest)?;
    let counting = counting_cost(&manifest)?;
    let mut host = pipeline(
        &manifest,
        "workload",
        &[10_000, 100_000, 1_000_000, 10_000_000],
    )?;
    host.extend(pipeline(&manifest, "hot-loops", &[1_000_000])?);
    let all = Bench {
        sampler: variants,
        exact_counting: counting,
        host_pipeline: host,
        itm: itm_speed()?,
        live,
        laps,
        m0,
        timers,
        armv8a,
        e2e,
        transfer,
        board,
    };
    match args.format {
        TableFormat::Json => println!("{}", serde_json::to_string_pretty(&all)?),
        TableFormat::Text => {
            println!(
                "sampler cost per sample, exact in QEMU mps2-an385 (instructions; exception entry/exit free)"
            );
            println!(
                "{:<30} {:>12} {:>8} {:>10} {:>10}",
                "variant", "instr/sample", "C handler", "code bytes", "samples"
            );
            for v in &all.sampler {
                println!(
                    "{:<30} {:>12.2} {:>8} {:>10} {:>10}",
                    v.name,
                    v.instructions_per_sample,
                    v.seed_instructions,
                    v.hot_code_bytes,
                    v.samples
                );
            }
            for v in &all.m0 {
                println!(
                    "{:<30} {:>12.2} {:>8} {:>10} {:>10}   (microbit, fast path from exact counts)",
                    v.name,
                    v.instructions_per_sample,
                    if v.name.contains("jitter") { 32 } else { 21 },
                    v.hot_code_bytes,
                    v.samples
                );
            }
            for v in &all.timers {
                println!(
                    "{:<30} {:>12.2} {:>8} {:>10} {:>10}   (timer drivers: exact counts, handler and acknowledgement)",
                    v.name, v.instructions_per_sample, "-", v.hot_code_bytes, v.samples
                );
            }
            for v in &all.armv8a {
                println!(
                    "{:<30} {:>12.2} {:>8} {:>10} {:>10}   (QEMU virt, exact counts; bytes: both 2 KiB vector tables and handlers)",
                    v.name, v.instructions_per_sample, "-", v.hot_code_bytes, v.samples
                );
            }
            println!(
                "goals: ring <= 13, jitter <= 20, bins <= 18, a tag <= 3 more; the C handler is 114 bytes in all"
            );
            println!(
                "RAM: 4 bytes per ring slot (8 with tags), 2 bytes per bin (+32), {} bytes of state, {} bytes of configuration",
                sampler_rt::wire::STATE_LEN,
                sampler_rt::wire::CONFIG_LEN
            );
            let c = &all.exact_counting;
            let t = |t: &Timing| {
                format!(
                    "{:.3} s median ({:.3}-{:.3}, {} runs)",
                    t.median_s, t.min_s, t.max_s, t.runs
                )
            };
            println!();
            println!("exact counting, wall time on this host ({})", c.qemu);
            println!(
                "  plain -icount        {}  {:.0} MIPS  ({} instructions, hot-loops)",
                t(&c.plain),
                c.plain_mips,
                c.instructions
            );
            println!(
                "  plugin (API {})       {}  overhead {:+.1} % (goal <= 10 %)",
                c.plugin_api,
                t(&c.plugin),
                c.plugin_overhead_percent
            );
            println!(
                "  + call graph         {}  overhead {:+.1} % (`--exact` follows every call)",
                t(&c.call_graph),
                c.call_graph_overhead_percent
            );
            println!(
                "  exec log             {}  {:.2} MIPS  ({} instructions)",
                t(&c.exec_log),
                c.exec_log_mips,
                c.exec_log_instructions
            );
            println!();
            println!(
                "host pipeline: report of N samples (load = ELF + DWARF + dump + symbolize + aggregate + diagnose)"
            );
            println!(
                "{:<10} {:>9} {:>10} {:>10} {:>12} {:>8} {:>8} {:>8} {:>8} {:>8}",
                "firmware",
                "image",
                "samples",
                "load s",
                "samples/s",
                "text",
                "json",
                "folded",
                "svg",
                "pprof"
            );
            for p in &all.host_pipeline {
                let ms = |name: &str| {
                    p.formats
                        .iter()
                        .find(|f| f.0 == name)
                        .map(|f| format!("{:.1}ms", f.1.median_s * 1e3))
                        .unwrap_or_default()
                };
                println!(
                    "{:<10} {:>8}B {:>10} {:>10.3} {:>12.0} {:>8} {:>8} {:>8} {:>8} {:>8}",
                    p.firmware,
                    p.image_bytes,
                    p.samples,
                    p.load.median_s,
                    p.samples_per_second,
                    ms("text"),
                    ms("json"),
                    ms("folded"),
                    ms("svg"),
                    ms("pprof")
                );
            }
            println!(
                "goal: 1 000 000 samples of a 50 KB image, load + text report, in at most 0.3 s"
            );
            println!();
            println!(
                "live capture through QEMU's monitor (hot-loops, 200 000 samples, a read every 10 ms, 10 240-slot ring)"
            );
            println!(
                "{:>14} {:>9} {:>9} {:>8} {:>14} {:>10}",
                "period instr", "taken", "lost", "wall s", "delivered/s", "KB/s"
            );
            for l in &all.live {
                println!(
                    "{:>14.1} {:>9} {:>9} {:>8.2} {:>14.0} {:>10.0}",
                    l.period_instructions,
                    l.taken,
                    l.lost,
                    l.wall_s,
                    l.delivered_per_s,
                    l.bytes_per_s / 1e3
                );
            }
            println!();
            println!(
                "lap timing (laps firmware, exact in QEMU): {:.1} instructions of sampler-rt per lap; \
                 {:.2} instructions of lap time subtracted; the empty region reads {:.2}",
                all.laps.instructions_per_lap, all.laps.subtracted, all.laps.empty_region
            );
            let e = &all.e2e;
            let t = |t: &Timing| format!("{:.3} s ({:.3}-{:.3})", t.median_s, t.min_s, t.max_s);
            println!();
            println!(
                "end to end, `cargo sample --release --bin hot-loops` (10 000 samples, firmware built already), medians of {}:",
                e.total.runs
            );
            println!(
                "  build {}  run (QEMU) {}  report {}  total {}",
                t(&e.build),
                t(&e.run),
                t(&e.report),
                t(&e.total)
            );
            let d = &all.transfer;
            println!(
                "semihosting stream: {} samples ({:.1} MB) at a 64-instruction period in {} of QEMU, {:.1} MB/s end to end (the sampling interrupts dominate), none lost",
                d.samples,
                d.bytes as f64 / 1e6,
                t(&d.wall),
                d.mb_per_s
            );
            println!();
            print_board(&all.board);
            let i = &all.itm;
            println!();
            println!(
                "ITM/SWO decoding: {:.0} MB/s on {} bytes ({:.3} s median of {}; goal >= 500 MB/s)",
                i.ours_mb_per_s, i.bytes, i.ours.median_s, i.ours.runs
            );
            match (i.pyocd_mb_per_s, i.ratio) {
                (Some(p), Some(r)) => println!(
                    "  pyOCD's SWOParser: {p:.2} MB/s on {} bytes: ours is {r:.0} times faster",
                    i.pyocd_bytes
                ),
                _ => println!("  pyOCD not found (tests/setup.sh --with-pyocd installs it)"),
            }
        }
    }
    Ok(())
}
