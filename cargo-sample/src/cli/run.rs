//! The arguments of a run: which crate and how to build it, where to run it (QEMU, a board,
//! a serial port), what to sample, and how to show the report.

use std::path::PathBuf;
use std::time::Duration;

use super::values::{Budget, parse_budget, parse_duration, parse_seed, parse_u8, parse_u32};
use crate::exec::probe::Method;
use crate::spec::{Period, Tag, TimerChoice};
use clap::{Args, ValueEnum};

/// Which package and target to build, as for `cargo build`.
#[derive(Args, Debug, Clone, Default)]
pub struct CargoArgs {
    /// Package to profile.
    #[arg(
        short = 'p',
        long,
        value_name = "SPEC",
        help_heading = "Package Selection"
    )]
    pub package: Option<String>,
    /// Binary to profile.
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with = "example",
        help_heading = "Target Selection"
    )]
    pub bin: Option<String>,
    /// Example to profile.
    #[arg(long, value_name = "NAME", help_heading = "Target Selection")]
    pub example: Option<String>,
    /// Build with the release profile.
    #[arg(
        short = 'r',
        long,
        conflicts_with = "profile",
        help_heading = "Compilation Options"
    )]
    pub release: bool,
    /// Build with the given profile.
    #[arg(long, value_name = "NAME", help_heading = "Compilation Options")]
    pub profile: Option<String>,
    #[command(flatten)]
    pub features: clap_cargo::Features,
    /// Target triple (default: `build.target` of cargo's configuration).
    #[arg(long, value_name = "TRIPLE", help_heading = "Compilation Options")]
    pub target: Option<String>,
    /// Directory for cargo-sample's builds and runs (`DIR/cargo-sample`).
    #[arg(long, value_name = "DIR", help_heading = "Compilation Options")]
    pub target_dir: Option<PathBuf>,
    /// Number of parallel jobs of the build.
    #[arg(
        short = 'j',
        long,
        value_name = "N",
        help_heading = "Compilation Options"
    )]
    pub jobs: Option<String>,
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH", help_heading = "Manifest Options")]
    pub manifest_path: Option<PathBuf>,
    /// Assert that `Cargo.lock` will remain unchanged.
    #[arg(long, help_heading = "Manifest Options")]
    pub locked: bool,
    /// Run without accessing the network.
    #[arg(long, help_heading = "Manifest Options")]
    pub offline: bool,
    /// Equivalent to specifying both `--locked` and `--offline`.
    #[arg(long, help_heading = "Manifest Options")]
    pub frozen: bool,
    /// Override a configuration value (`KEY=VALUE` in TOML, or a file), as for cargo.
    #[arg(long = "config", value_name = "KEY=VALUE|PATH")]
    pub config: Vec<String>,
    /// Unstable (nightly-only) flags to cargo.
    #[arg(short = 'Z', value_name = "FLAG")]
    pub unstable: Vec<String>,
    /// Use verbose output of the build (-vv very verbose).
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Name of the crate's feature that turns sampler-rt on.
    #[arg(long, value_name = "NAME", default_value = "sample")]
    pub feature_name: String,
}

impl From<&CargoArgs> for crate::project::Selection {
    fn from(a: &CargoArgs) -> Self {
        crate::project::Selection {
            package: a.package.clone(),
            bin: a.bin.clone(),
            example: a.example.clone(),
            release: a.release,
            profile: a.profile.clone(),
            features: a.features.features.clone(),
            all_features: a.features.all_features,
            no_default_features: a.features.no_default_features,
            target: a.target.clone(),
            manifest_path: a.manifest_path.clone(),
            feature_name: a.feature_name.clone(),
            env: Vec::new(),
            flags: crate::project::CargoFlags {
                locked: a.locked,
                frozen: a.frozen,
                offline: a.offline,
                config: a.config.clone(),
                unstable: a.unstable.clone(),
                target_dir: a.target_dir.clone(),
                jobs: a.jobs.clone(),
                verbose: a.verbose,
            },
        }
    }
}

/// `--by`: what stacks start with.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The sample's tag (task, handler).
    Tag,
}

/// How to present a profile.
#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    /// Output format: a text report, JSON, folded stacks (inferno, flamegraph.pl, speedscope),
    /// an SVG flamegraph, pprof's gzipped protobuf (`pprof -http`, Grafana Pyroscope), callgrind,
    /// the Firefox Profiler's format, or a self-contained HTML page (with `--open`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Open the HTML report or the SVG flame graph in the browser (`$BROWSER` if set), from
    /// FILE or, without `-o`, from a file written beside the run.
    #[arg(long)]
    pub open: bool,
    /// Also show source lines (`file:line` of the innermost frame).
    #[arg(long)]
    pub lines: bool,
    /// Put the tag first: folded stacks, the flamegraph and pprof get the tag (task, handler)
    /// as their root frame.
    #[arg(long, value_name = "WHAT", value_enum)]
    pub by: Option<By>,
    /// Also show the inline tree: each function with what was inlined into it, with total and
    /// self shares.
    #[arg(long)]
    pub tree: bool,
    /// Also show the disassembly of the N hottest functions (3 if no N is given), or of the
    /// function FN (its name as the function table shows it, or a unique part of it), each
    /// instruction with its samples and its source line.
    #[arg(long, value_name = "N|FN", num_args = 0..=1, default_missing_value = "3",
          value_parser = crate::cli::parse_annotate)]
    pub annotate: Option<crate::cli::Annotate>,
    /// Show at most N rows per table (0 = all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Hide rows below this share.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.0)]
    pub min_percent: f64,
    /// How a histogram bin shared by several functions is split: by each one's bytes (as the
    /// C profiler's analysis does), or by bytes times its estimated samples per byte (`density`).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = crate::report::bins::Split::Density)]
    pub bin_split: crate::report::bins::Split,
    /// Who called FN (its exact name, or a unique part of it), with each caller's share of its
    /// time and the calls (`--exact` runs, which follow every call).
    #[arg(long, value_name = "FN")]
    pub callers: Option<String>,
    /// What FN called, with the time spent below each callee and the calls (`--exact` runs).
    #[arg(long, value_name = "FN")]
    pub callees: Option<String>,
    /// With `--exact`: estimate cycles from the exact counts with a timing model of the core,
    /// and show every figure in them, with the instructions and cycles per instruction beside.
    /// With `--truth`: each row's share of the estimated cycles beside its instruction share.
    /// With `--laps`: each `measure` region's laps in estimated cycles too.
    #[arg(long)]
    pub cycles: bool,
    /// The core whose timing `--cycles` uses (default: the machine's): cortex-m0,
    /// cortex-m0plus, cortex-m3, cortex-m4, cortex-m7 (approximate), cortex-m33.
    #[arg(long, value_name = "NAME", value_parser = super::values::parse_core, requires = "cycles")]
    pub core: Option<crate::image::timing::Core>,
    /// With `--cycles`: flash wait states of the code (below 0x2000_0000; code in SRAM, or
    /// copied to RAM at startup, runs at zero).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "cycles")]
    pub wait_states: u32,
    /// With `--wait-states`: the flash has no prefetch buffer or accelerator, so every fetch
    /// waits (by default only the fetch after a branch does).
    #[arg(long, requires = "cycles")]
    pub no_prefetch: bool,
    /// The core clock in Hz: converts cycles to time (a board's cycles, or `--cycles`'
    /// estimates: each function's time beside its cycles), and sets the SWO prescaler with
    /// `--method dwt`.
    #[arg(long, value_name = "HZ", value_parser = parse_u32)]
    pub clock: Option<u32>,
    /// Embassy tasks: warn about a task whose longest poll took longer than this (no other
    /// task of its executor runs meanwhile): instructions in QEMU or cycles on a board
    /// (`200000`), or a duration (`500us`). Default: 1 ms, or a twentieth of the run when
    /// that is shorter.
    #[arg(long, value_name = "TIME")]
    pub max_poll: Option<crate::spec::Period>,
}

/// What the sampler keeps.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ring,
    Hist,
}

/// Formats of commands that print tables of figures.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Text,
    Json,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruthMethod {
    Auto,
    Plugin,
    ExecLog,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Folded,
    Svg,
    Pprof,
    /// KCacheGrind / QCacheGrind (`--exact` runs: the call graph).
    Callgrind,
    /// The Firefox Profiler's processed format (profiler.firefox.com, `samply load`): the
    /// samples in the order taken, a thread per tag.
    Firefox,
    /// One self-contained page: facts, findings, an interactive flame graph, sortable tables,
    /// the annotated hottest functions.
    Html,
    /// With `--baseline`: the comparison as a pull-request comment.
    Markdown,
    /// With `--exact`: the run's metrics in Bencher Metric Format.
    Bmf,
}

/// Build, run and report (the default command).
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub cargo: CargoArgs,

    /// Samples to take; 0 = until the firmware stops (the ring keeps the newest).
    /// Default: 10000, or the ring's capacity if smaller.
    #[arg(short = 'n', long, value_name = "N")]
    pub samples: Option<u32>,
    /// Mean sampling period, in the report's unit (default: 10 000 instructions in QEMU, 10 000
    /// cycles on a board): a number (`5000`: made of the timer ticks that take that long at the
    /// run's `-icount` shift), timer ticks (`16000ticks`), a duration (`10us`, `1ms`) or a rate
    /// (`100khz`).
    #[arg(long, value_name = "PERIOD")]
    pub period: Option<Period>,
    /// Random span of each period, in ticks, rounded down to a power of two, at most twice the
    /// period (default: the widest allowed, so periods range from about half to one and a half
    /// times the mean). 0 = constant period.
    #[arg(long, value_name = "TICKS", conflicts_with = "no_jitter")]
    pub jitter: Option<u32>,
    /// Sample at a constant period (same as `--jitter 0`). Beware of lockstep with periodic code.
    #[arg(long)]
    pub no_jitter: bool,
    /// What the sampler keeps: `ring` (every sample's address: exact to the instruction, 4 bytes
    /// of RAM a sample) or `hist` (a counter per address range: RAM independent of the run's
    /// length, for long runs).
    #[arg(long, value_enum, default_value_t = Mode::Ring)]
    pub mode: Mode,
    /// With `--mode hist`: bytes of code per counter, a power of two (default: the smallest
    /// that covers the code with the counters the firmware was built with).
    #[arg(long, value_name = "BYTES")]
    pub bin_size: Option<u32>,
    /// Build with every function aligned to BYTES (a power of two), so that bins of that size
    /// never hold two functions; the alignment is checked in the ELF and the code growth shown.
    #[arg(long, value_name = "BYTES")]
    pub align: Option<u32>,
    /// Record a tag with each sample (ring mode, ARMv7-M and later): `exception` (which handler
    /// was running, from the stacked xPSR: free), `api` (the firmware's `sampler_rt::set_tag`,
    /// or the Embassy task with sampler-rt's `embassy` feature), `symbol:NAME` (the word at
    /// an ELF symbol, e.g. `symbol:pxCurrentTCB`), or an address (`0x20000100`).
    #[arg(long, value_name = "WHAT")]
    pub tag: Option<Tag>,
    /// Keep WORDS words of the interrupted stack with each sample (default 32, at most 255),
    /// and the frame records of the r7 chain above them, and unwind them on the host by the
    /// ELF's call-frame information: inclusive shares, `--callers`/`--callees`, real stacks in
    /// folded, SVG, pprof and callgrind output. Cortex-M (ARMv7-M and later), ring mode, QEMU
    /// runs.
    #[arg(long, value_name = "WORDS", num_args = 0..=1, default_missing_value = "32")]
    pub stacks: Option<u8>,
    /// Exception priority byte of the sampling timer (0 = most urgent, the default).
    #[arg(long, value_name = "PRIO", value_parser = parse_u8)]
    pub priority: Option<u8>,
    /// Timer that paces the sampler. Default: SysTick, or, when the firmware owns SysTick, a
    /// free timer of the machine (found in the image). `systick`, a machine's timer by name
    /// (`gptm0`..`gptm3` on lm3s6965evb, `timer0`..`timer2` on microbit, `timer0`/`timer1` on
    /// mps2, `tim2`/`tim5` on netduinoplus2), `cmsdk:BASE:IRQ`, `gptm:BASE:IRQ`,
    /// `nrf:BASE:IRQ`, `stm32:BASE:IRQ` (the firmware then defines the timer's handler with
    /// `sampler_rt::timer_interrupt!(NAME, ack = V)`, V being 1 for `cmsdk` and `gptm`, 0 for
    /// `nrf` and `stm32`); on ARMv8-A the generic timer
    /// (`generic`, the default) or a PMU overflow every period events (`pmu:cpu_cycles` on the
    /// cycle counter, `pmu:EVENT` on event counter 0).
    #[arg(long, value_name = "TIMER")]
    pub timer: Option<TimerChoice>,
    /// QEMU machine (default: from the crate's runner in `.cargo/config.toml`).
    #[arg(long, value_name = "NAME")]
    pub machine: Option<String>,
    /// QEMU CPU model (default: from the runner, or the machine's own core).
    #[arg(long, value_name = "NAME")]
    pub cpu: Option<String>,
    /// QEMU executable.
    #[arg(long, value_name = "PATH")]
    pub qemu: Option<PathBuf>,
    /// QEMU's `-icount shift`: every instruction takes 2^N ns of emulated time. Default: the
    /// machine's, which runs the core at about its timers' clock (6 on the 25 MHz mps2 boards);
    /// 0 runs it at 1 GHz, so that one timer tick is 40 instructions and samples fall on that
    /// grid.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=10))]
    pub icount_shift: Option<u8>,
    /// Give up on the run after this many seconds of host time (what arrived is kept).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
    /// Also count every executed instruction exactly (QEMU plugin, same run) and show the exact
    /// share, the error in points and in binomial sigmas beside each sampled row.
    #[arg(long, conflicts_with = "exact")]
    pub truth: bool,
    /// No sampling: count every executed instruction exactly (QEMU plugin) and report those
    /// counts per function, inline frame and line. The sampling feature is not turned on.
    #[arg(long)]
    pub exact: bool,
    /// Run this prebuilt ELF (C, C++, another build system) instead of building the crate:
    /// every instruction counted, as `--exact` does (no sampler is linked). Needs `--machine`.
    #[arg(long, value_name = "FILE", requires = "machine", conflicts_with_all = ["truth", "chip"])]
    pub elf: Option<PathBuf>,
    /// With `--exact`: stop after about this many instructions unless the firmware exits first:
    /// a count (`300M`, `2G`, `1e9`) or a duration of emulated time (`500ms`).
    #[arg(long, value_name = "N", default_value = "300M", value_parser = parse_budget)]
    pub instructions: Budget,
    /// How `--truth` and `--exact` count instructions: `auto` (the plugin, or the exec log when
    /// QEMU has no plugin support), `plugin`, or `exec-log` (exact too, about 500 times slower).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = TruthMethod::Auto)]
    pub truth_method: TruthMethod,
    /// With `--exact` (or `--laps --cycles`): keep this run's metrics (total instructions, per
    /// function self and inclusive, per exception or task, per lap region, code and section
    /// sizes; with `--cycles` the estimated cycles too) as the baseline NAME.
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// With `--exact` (or `--laps --cycles`): compare this run with the baseline NAME, under
    /// `--limit`s; exit status 3 when a limit is exceeded.
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Where baselines are kept (default: `baseline-dir` in the crate's
    /// `[package.metadata.sample]`, else `target/cargo-sample/baselines`; a directory of the
    /// repository keeps them with the code).
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<std::path::PathBuf>,
    /// How much a metric may grow against `--baseline`: `METRIC=+X%` or `METRIC=+N`, METRIC one
    /// of `total`, `function`, `inclusive`, `task` (an exception or RTIC task), `region` (a lap
    /// region's mean lap), `bench` (a benchmark's median iteration), `size`, and with
    /// `--cycles` `cycles`, `function-cycles`, `inclusive-cycles`, `task-cycles`,
    /// `region-cycles`, `bench-cycles`; optionally narrowed by a name pattern
    /// (`function:crc*=+2%`); the most specific applies. Repeatable; `limits = [...]` in the
    /// crate's `[package.metadata.sample]` adds to them. Improvements never fail.
    #[arg(long = "limit", value_name = "LIMIT", requires = "baseline")]
    pub limits: Vec<crate::report::gate::Limit>,
    /// Seed of the period's random generator, 0 ..= 4294967294 (default: fixed, so runs
    /// repeat exactly).
    #[arg(long, value_name = "N", value_parser = parse_seed)]
    pub seed: Option<u32>,
    /// Time the firmware's lap regions (`sampler_rt::laps`) without sampling: SysTick stays
    /// free to serve as the lap counter where the core has no cycle counter (QEMU).
    #[arg(long, conflicts_with_all = ["exact", "live", "tag"])]
    pub laps: bool,
    /// `cargo sample bench`: the lap regions are the firmware's benchmarks.
    #[arg(skip)]
    pub bench: bool,
    /// Read the sampler's ring while the firmware runs (through QEMU's monitor; on a board
    /// this is how samples always arrive) instead of waiting for its dump: runs of any length
    /// with a ring of any size, samples the host could not read in time counted as lost.
    #[arg(long, conflicts_with_all = ["exact", "truth"])]
    pub live: bool,
    /// Stop after this long (`30s`, `2m`, `1500ms`) and report what arrived; reads live.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Live: milliseconds between two reads of the ring. The ring must hold what the sampler
    /// takes in that time, or samples are lost (and counted).
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub poll_interval: u32,

    #[command(flatten)]
    pub board: BoardArgs,

    #[command(flatten)]
    pub view: ViewArgs,
}

/// `--method`'s values (the type is the board runner's).
impl ValueEnum for Method {
    fn value_variants<'a>() -> &'a [Self] {
        &[Method::Timer, Method::Dwt, Method::Pcsr]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Method::Timer => PossibleValue::new("timer").help(
                "sampler-rt's timer interrupt stores the interrupted PC in a ring the probe reads",
            ),
            Method::Dwt => PossibleValue::new("dwt").help(
                "The core's DWT unit sends PC samples over SWO (no interrupt, no code in the firmware)",
            ),
            Method::Pcsr => PossibleValue::new("pcsr")
                .help("The host reads DWT_PCSR through the debug port while the core runs"),
        })
    }
}

impl ProbeArgs {
    /// The probe settings given on the command line, for `chip`.
    pub fn settings(&self, chip: &str) -> crate::project::runner::Probe {
        crate::project::runner::Probe {
            chip: Some(chip.to_owned()),
            protocol: self.protocol.clone(),
            speed: self.speed,
            probe: self.probe.clone(),
            connect_under_reset: self.connect_under_reset,
        }
    }
}

/// A board through a debug probe (probe-rs), or a serial port.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Boards")]
pub struct BoardArgs {
    #[command(flatten)]
    pub conn: ProbeArgs,
    /// How samples are taken on the board.
    #[arg(long, value_enum, default_value_t = Method::Timer)]
    pub method: Method,
    /// `--method dwt`: SWO baud rate.
    #[arg(long, value_name = "BAUD", default_value_t = 2_000_000)]
    pub swo_baud: u32,
    /// Read the dump from this serial port instead (boards without a usable probe connection;
    /// the firmware writes the dump through `sampler_rt::set_writer`).
    #[arg(long, value_name = "PORT", conflicts_with_all = ["chip", "probe", "live"])]
    pub serial: Option<PathBuf>,
    /// `--serial`: baud rate.
    #[arg(
        long,
        value_name = "BAUD",
        default_value_t = 115_200,
        requires = "serial"
    )]
    pub baud: u32,
    /// `--serial`: the command that loads the image onto the board, run as `CMD IMAGE.elf`
    /// (a flashing script, a bootloader client); without it, load the image shown yourself.
    #[arg(long, value_name = "CMD", requires = "serial")]
    pub runner: Option<String>,
}

/// How to reach a board through a debug probe.
#[derive(Args, Debug, Clone, Default)]
pub struct ProbeArgs {
    /// Run on a board with this chip (probe-rs's name, e.g. `STM32F407VGTx`); the default when
    /// the crate's runner is `probe-rs run --chip ...`.
    #[arg(long, value_name = "CHIP")]
    pub chip: Option<String>,
    /// The probe to use: `VID:PID` or `VID:PID:SERIAL` (hex ids), when several are attached.
    #[arg(long, value_name = "VID:PID[:SERIAL]")]
    pub probe: Option<String>,
    /// Debug port speed in kHz.
    #[arg(long, value_name = "KHZ")]
    pub speed: Option<u32>,
    /// Wire protocol: `swd` or `jtag` (default: the probe's).
    #[arg(long, value_name = "swd|jtag")]
    pub protocol: Option<String>,
    /// Hold the chip in reset while attaching (for firmware that disables the debug pins or
    /// sleeps deeply).
    #[arg(long)]
    pub connect_under_reset: bool,
}
