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

mod board;
mod diagnostics;
mod handler;
mod host;
mod laps;
mod silicon;
mod stacks;
mod tasks;

use board::*;
use handler::*;
use host::*;
use laps::*;
use stacks::*;
use tasks::*;

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
    /// Only the sampler's cost per sample, every variant on every core (the first table of
    /// the full bench).
    #[arg(long)]
    sampler_only: bool,
    /// Only the cost of sampler-rt's Embassy hooks, each a call (Cortex-M3).
    #[arg(long)]
    tasks_only: bool,
    /// Only the timings of board runs through the emulated probe (`--chip mps2-an385 --probe
    /// qemu`): attach, download, capture.
    #[arg(long)]
    board_only: bool,
    /// Only `--cycles` against cycles measured on silicon by others (repeatable): SUITE is
    /// pqm4, pqm3, cortexm-aes, aes-armcortexm or coremark, DIR a checkout of its repository (with
    /// submodules) at the commit recorded in `cargo-sample/data/silicon/`; a bare DIR is pqm4.
    #[arg(long, value_name = "SUITE=DIR")]
    silicon: Vec<String>,
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
    pub embassy_hooks: Vec<HookCost>,
}

fn bench(args: &BenchArgs) -> Result<()> {
    let manifest = match &args.manifest_path {
        Some(p) => p.clone(),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/Cargo.toml")
        }
    };
    if !args.silicon.is_empty() {
        return silicon::silicon(&args.silicon);
    }
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
    if args.tasks_only {
        let examples = manifest
            .parent()
            .and_then(Path::parent)
            .context("the example's manifest has no parent directory")?;
        print_hooks(&hook_costs(examples)?);
        return Ok(());
    }
    if args.sampler_only {
        let examples = manifest
            .parent()
            .and_then(Path::parent)
            .context("the example's manifest has no parent directory")?;
        let v = variants(&manifest)?;
        let (m0, timers, armv8a) = (
            m0_costs(examples)?,
            timer_costs(examples)?,
            a64_costs(examples)?,
        );
        print_sampler(&v, &m0, &timers, &armv8a);
        return Ok(());
    }
    let variants = variants(&manifest)?;
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
    let embassy_hooks = hook_costs(&examples)?;
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
        embassy_hooks,
    };
    match args.format {
        TableFormat::Json => println!("{}", serde_json::to_string_pretty(&all)?),
        TableFormat::Text => print_text(&all),
    }
    Ok(())
}

/// The sampler's cost per sample, every variant (the first table).
fn print_sampler(
    sampler: &[Variant],
    m0: &[HandlerCost],
    timers: &[HandlerCost],
    armv8a: &[HandlerCost],
) {
    println!(
        "sampler cost per sample, exact in QEMU mps2-an385 (instructions; exception entry/exit free)"
    );
    println!(
        "{:<30} {:>12} {:>8} {:>10} {:>10}",
        "variant", "instr/sample", "C handler", "code bytes", "samples"
    );
    for v in sampler {
        println!(
            "{:<30} {:>12.2} {:>8} {:>10} {:>10}",
            v.name, v.instructions_per_sample, v.seed_instructions, v.hot_code_bytes, v.samples
        );
    }
    for v in m0 {
        println!(
            "{:<30} {:>12.2} {:>8} {:>10} {:>10}   (microbit, fast path from exact counts)",
            v.name,
            v.instructions_per_sample,
            if v.name.contains("jitter") { 32 } else { 21 },
            v.hot_code_bytes,
            v.samples
        );
    }
    for v in timers {
        println!(
            "{:<30} {:>12.2} {:>8} {:>10} {:>10}   (timer drivers: exact counts, handler and acknowledgement)",
            v.name, v.instructions_per_sample, "-", v.hot_code_bytes, v.samples
        );
    }
    for v in armv8a {
        println!(
            "{:<30} {:>12.2} {:>8} {:>10} {:>10}   (QEMU virt, exact counts; bytes: both 2 KiB vector tables and handlers)",
            v.name, v.instructions_per_sample, "-", v.hot_code_bytes, v.samples
        );
    }
    println!(
        "goals: ring + jitter <= 15; stacks <= 60 a sample to capture, <= 200 recorded; the C handler is 114 bytes in all"
    );
    println!(
        "RAM: 4 bytes per ring slot (8 with tags), 2 bytes per bin (+32), {} bytes of state, {} bytes of configuration",
        sampler_rt::wire::STATE_LEN,
        sampler_rt::wire::CONFIG_LEN
    );
}

/// The bench's figures as text.
fn print_text(all: &Bench) {
    print_sampler(&all.sampler, &all.m0, &all.timers, &all.armv8a);
    print_hooks(&all.embassy_hooks);
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
    println!("goal: 1 000 000 samples of a 50 KB image, load + text report, in at most 0.3 s");
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
