//! Command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Statistical PC-sampling profiler for embedded Rust firmware.
///
/// `cargo sample --release --bin app` builds the crate with its sampling feature on, runs it in
/// QEMU, captures the samples and prints where the time went, against the very ELF that ran.
#[derive(Parser, Debug)]
#[command(name = "cargo-sample", bin_name = "cargo sample", version)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the report of a saved run again (any view or format).
    Report(ReportArgs),
    /// Add sampler-rt, the `sample` feature and the `start()` call to an existing firmware crate.
    Init(InitArgs),
    /// Compare two saved runs: per function, the change in share and whether it is more than
    /// sampling noise.
    Diff(DiffArgs),
    /// Choose histogram bins: for each bin size, the RAM it costs, how much code shares bins,
    /// and the misattribution those bins would make on this firmware's own samples, with and
    /// without aligned functions; then a recommendation and the command to run it.
    Advise(Box<AdviseArgs>),
    /// Report a recorded SWO capture (DWT periodic PC samples among ITM packets) against its ELF.
    Swo(SwoArgs),
    /// List an ARMv8-A CPU's PMU events (from Arm's machine-readable data), or search them.
    Events(EventsArgs),
    /// Count PMU events around the firmware's regions (ARMv8-A, `sampler_rt::pmu`): events
    /// split into groups the CPU's counters hold, the firmware run once per group, derived
    /// metrics.
    Stat(Box<StatArgs>),
}

/// `cargo sample events`.
#[derive(Args, Debug)]
pub struct EventsArgs {
    /// The CPU: any of Arm's machine-readable data (`cortex-a53`, `cortex-a76`, `neoverse-n1`,
    /// ...; `--list` shows them).
    #[arg(long, value_name = "CPU", default_value = "cortex-a53")]
    pub cpu: String,
    /// List the CPUs whose event tables are shipped.
    #[arg(long)]
    pub list: bool,
    /// Read the events from a file of Arm's machine-readable data instead (`pmu/<cpu>.json`
    /// of github.com/ARM-software/data), for a CPU whose table is not shipped.
    #[arg(long, value_name = "FILE.json")]
    pub pmu_data: Option<PathBuf>,
    /// Only events whose name or description contains this (any case).
    pub search: Option<String>,
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub format: TableFormat,
}

/// `cargo sample stat`.
#[derive(Args, Debug)]
pub struct StatArgs {
    #[command(flatten)]
    pub cargo: CargoArgs,
    /// Events to count, by name or number (`inst_retired,cpu_cycles,0x03`).
    #[arg(long, value_name = "EVENTS", value_delimiter = ',', required = true)]
    pub events: Vec<String>,
    /// The CPU whose event table names the events (default: the runner's `-cpu`, else
    /// cortex-a53); also QEMU's `-cpu`.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<String>,
    /// Name the events from a file of Arm's machine-readable data (`pmu/<cpu>.json` of
    /// github.com/ARM-software/data) instead of a shipped table.
    #[arg(long, value_name = "FILE.json")]
    pub pmu_data: Option<PathBuf>,
    /// QEMU machine (default: the runner's `-machine`, else `virt`); `virt,virtualization=on`
    /// starts the firmware at EL2, `virt,secure=on` at EL3.
    #[arg(long, value_name = "MACHINE")]
    pub machine: Option<String>,
    /// The QEMU executable (default: the runner's, else `qemu-system-aarch64`).
    #[arg(long, value_name = "PATH")]
    pub qemu: Option<PathBuf>,
    /// Events per run (default: the CPU's counters). More than the CPU has is refused by the
    /// firmware, which is what this is for.
    #[arg(long, value_name = "N", hide = true)]
    pub group_size: Option<usize>,
    /// Give up on a run after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub timeout: u64,
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub format: TableFormat,
    /// On a board (`--chip`): each group's image is flashed and run, and the counts are read
    /// out of the firmware's memory by the probe (the firmware keeps them there and idles).
    #[command(flatten)]
    pub conn: ProbeArgs,
    /// In QEMU, read the counts out of memory through QEMU's monitor, as a probe reads them on
    /// a board, instead of through semihosting.
    #[arg(long, hide = true, conflicts_with = "chip")]
    pub read_memory: bool,
}

/// `cargo sample swo`.
#[derive(Args, Debug)]
pub struct SwoArgs {
    /// The raw SWO bytes (as a probe or a logic analyser captured them).
    pub capture: PathBuf,
    /// The ELF that ran.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["synthesize_from", "events"])]
    pub elf: Option<PathBuf>,
    /// Ignore everything before the first synchronisation packet (a capture started mid-packet).
    #[arg(long)]
    pub sync: bool,
    /// Print the decoded packets, one per line, instead of the report.
    #[arg(long)]
    pub events: bool,
    /// Write CAPTURE as a synthetic stream of the samples of a saved run (for testing a SWO
    /// pipeline), instead of reading it.
    #[arg(long, value_name = "RUN", hide = true)]
    pub synthesize_from: Option<PathBuf>,
    /// With `--synthesize-from`: also data trace, global timestamp and extension packets.
    #[arg(long, hide = true)]
    pub full: bool,
    #[command(flatten)]
    pub view: ViewArgs,
}

/// `cargo sample advise`.
#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// Bin sizes to consider, in bytes.
    #[arg(long, value_name = "BYTES", value_delimiter = ',', default_values_t = [2u32, 4, 8, 16, 32, 64, 128])]
    pub sizes: Vec<u32>,
    /// Bin sizes to also try with every function aligned to the bin size (each is a build).
    #[arg(long, value_name = "BYTES", value_delimiter = ',', default_values_t = [16u32, 64])]
    pub align_sizes: Vec<u32>,
    /// The largest misattribution, in percentage points of any function, to accept.
    #[arg(long, value_name = "POINTS", default_value_t = 0.5)]
    pub tolerance: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub advice_format: TableFormat,
    /// The build and the ring-mode runs the advice is computed from (`--samples`, `--machine`,
    /// cargo's selection flags...).
    #[command(flatten)]
    pub run: RunArgs,
}

/// `cargo sample diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The run before (directory, name, or `latest`).
    pub before: String,
    /// The run after.
    pub after: String,
    /// Where runs are kept (default: `target/cargo-sample/runs` of the current workspace).
    #[arg(long, value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub format: TableFormat,
    /// Show at most N functions (0 = all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Colour: auto, always, never (default: `CARGO_TERM_COLOR`, `NO_COLOR`, terminal).
    #[arg(long, value_name = "WHEN", value_enum)]
    pub color: Option<ColorWhen>,
}

pub use crate::term::ColorWhen;

/// `--color`'s values (the type is the terminal layer's).
impl ValueEnum for ColorWhen {
    fn value_variants<'a>() -> &'a [Self] {
        &[ColorWhen::Auto, ColorWhen::Always, ColorWhen::Never]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            ColorWhen::Auto => PossibleValue::new("auto")
                .help("Colour a stream that is a terminal (and `NO_COLOR` is unset)"),
            ColorWhen::Always => PossibleValue::new("always")
                .help("Always colour standard output and error (never a file written with `-o`)"),
            ColorWhen::Never => PossibleValue::new("never"),
        })
    }
}

/// `--bin-split`'s values (the type is the report's).
impl ValueEnum for crate::report::bins::Split {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::report::bins::Split;
        &[Split::Bytes, Split::Density]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use crate::report::bins::Split;
        Some(clap::builder::PossibleValue::new(match self {
            Split::Bytes => "bytes",
            Split::Density => "density",
        }))
    }
}

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

/// How to present a profile.
#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    /// Output format: a text report, JSON, folded stacks (inferno, flamegraph.pl, speedscope),
    /// an SVG flamegraph, or pprof's gzipped protobuf (`pprof -http`, Grafana Pyroscope).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also show source lines (`file:line` of the innermost frame).
    #[arg(long)]
    pub lines: bool,
    /// Put the tag first: folded stacks, the flamegraph and pprof get the tag (task, handler)
    /// as their root frame.
    #[arg(long, value_name = "WHAT", value_parser = ["tag"])]
    pub by: Option<String>,
    /// Also show the inline tree: each function with what was inlined into it, with total and
    /// self shares.
    #[arg(long)]
    pub tree: bool,
    /// Also show the disassembly of the N hottest functions (3 if no N is given), each
    /// instruction with its samples and its source line.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "3")]
    pub annotate: Option<usize>,
    /// Show at most N rows per table (0 = all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Hide rows below this share.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.0)]
    pub min_percent: f64,
    /// Colour: auto, always, never (default: `CARGO_TERM_COLOR`, `NO_COLOR`, terminal).
    #[arg(long, value_name = "WHEN", value_enum)]
    pub color: Option<ColorWhen>,
    /// How a histogram bin shared by several functions is split: by each one's bytes (as the
    /// C profiler's analysis does), or by bytes times its estimated samples per byte (`density`).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = crate::report::bins::Split::Density)]
    pub bin_split: crate::report::bins::Split,
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
    /// Mean sampling period: timer ticks (`250`), or a duration (`10us`, `1ms`), or a rate (`100khz`).
    /// Default: 10 000 instructions in QEMU (the ticks that make them at the run's
    /// `-icount` shift), 10 000 cycles on a board.
    #[arg(long, value_name = "PERIOD")]
    pub period: Option<String>,
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
    pub tag: Option<String>,
    /// Exception priority byte of the sampling timer (0 = most urgent, the default).
    #[arg(long, value_name = "PRIO", value_parser = parse_u8)]
    pub priority: Option<u8>,
    /// Timer that paces the sampler: `systick`, or `cmsdk:BASE:IRQ` (e.g. `cmsdk:0x40000000:8`);
    /// on ARMv8-A the generic timer (`generic`, the default) or a PMU overflow every period
    /// events (`pmu:cpu_cycles` on the cycle counter, `pmu:EVENT` on event counter 0).
    #[arg(long, value_name = "TIMER", default_value = "systick")]
    pub timer: String,
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
    /// With `--exact`: stop after about this many instructions unless the firmware exits first:
    /// a count (`300M`, `2G`, `1e9`) or a duration of emulated time (`500ms`).
    #[arg(long, value_name = "N", default_value = "300M", value_parser = parse_budget)]
    pub instructions: Budget,
    /// How `--truth` and `--exact` count instructions: `auto` (the plugin, or the exec log when
    /// QEMU has no plugin support), `plugin`, or `exec-log` (exact too, about 500 times slower).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = TruthMethod::Auto)]
    pub truth_method: TruthMethod,
    /// Seed of the period's random generator (default: fixed, so runs repeat exactly).
    #[arg(long, value_name = "N", value_parser = parse_u32)]
    pub seed: Option<u32>,
    /// Time the firmware's lap regions (`sampler_rt::laps`) without sampling: SysTick stays
    /// free to serve as the lap counter where the core has no cycle counter (QEMU).
    #[arg(long, conflicts_with_all = ["exact", "live", "tag"])]
    pub laps: bool,
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

pub use crate::exec::probe::Method;

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
    /// The core clock in Hz: converts cycles to time, and sets the SWO prescaler with
    /// `--method dwt`.
    #[arg(long, value_name = "HZ", value_parser = parse_u32)]
    pub clock: Option<u32>,
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

/// `30s`, `2m`, `1500ms`, `1.5s`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = t.strip_suffix('m') {
        (v, 60.0)
    } else if let Some(v) = t.strip_suffix('h') {
        (v, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. `30s`, `2m`, `1500ms`)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{s}`: a duration is positive"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Run directory, run name, or `latest` (default).
    #[arg(default_value = "latest")]
    pub run: String,
    /// Where runs are kept (default: `target/cargo-sample/runs` of the current workspace).
    #[arg(long, value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
    /// Read the text dump of a C PC-sampling profiler (`prof raw`/`p`, `prof hist`/`h`, `g` lines)
    /// instead of a saved run; needs `--elf`.
    #[arg(long, value_name = "FILE", requires = "elf")]
    pub text_dump: Option<PathBuf>,
    /// The ELF the text dump came from.
    #[arg(long, value_name = "FILE")]
    pub elf: Option<PathBuf>,
    #[command(flatten)]
    pub view: ViewArgs,
}

#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// Path to the firmware crate's Cargo.toml (default: the one in the current directory).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// The package to set up, in a workspace of several.
    #[arg(short = 'p', long, value_name = "SPEC")]
    pub package: Option<String>,
    /// Only this binary (default: every binary of the package).
    #[arg(long, value_name = "NAME", conflicts_with = "example")]
    pub bin: Option<String>,
    /// This example instead of the binaries.
    #[arg(long, value_name = "NAME")]
    pub example: Option<String>,
    /// Use sampler-rt from this directory (default: the checkout this cargo-sample was built
    /// from, else the published version).
    #[arg(long, value_name = "DIR", conflicts_with = "sampler_rt_git")]
    pub sampler_rt_path: Option<PathBuf>,
    /// Use sampler-rt from this git repository.
    #[arg(long, value_name = "URL")]
    pub sampler_rt_git: Option<String>,
    /// With `--sampler-rt-git`: the revision (commit, tag or branch name).
    #[arg(long, value_name = "REV", requires = "sampler_rt_git")]
    pub sampler_rt_rev: Option<String>,
    /// Name of the feature to add.
    #[arg(long, value_name = "NAME", default_value = "sample")]
    pub feature_name: String,
    /// Source file whose entry point gets the `start()` call (default: each binary's).
    #[arg(long, value_name = "FILE")]
    pub main: Option<PathBuf>,
    /// Fix the size of sampler-rt's ring for this crate (`[package.metadata.sample]
    /// ring-slots`), instead of letting cargo-sample fit it to the part's RAM.
    #[arg(long, value_name = "SAMPLES")]
    pub ring_slots: Option<u32>,
    /// Show the changes without writing them.
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("`{s}` is not a 32-bit number (decimal or 0x hex)"))
}

/// An instruction budget: a count, or a duration of emulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Instructions(u64),
    Nanoseconds(u64),
}

impl Budget {
    /// The budget in instructions when each takes 2^`shift` ns.
    pub fn instructions(self, shift: u8) -> u64 {
        match self {
            Budget::Instructions(n) => n,
            Budget::Nanoseconds(ns) => (ns >> shift).max(1),
        }
    }
}

/// `300M`, `2G`, `1e9`, `500000000`, or a duration: `500ms`, `2s`, `10us`.
pub fn parse_budget(s: &str) -> Result<Budget, String> {
    let t = s.trim();
    for (unit, ns) in [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ] {
        if let Some(num) = t.strip_suffix(unit) {
            let err = || format!("`{s}` is not a duration: use e.g. `500ms`, `2s`, `10us`");
            let v: f64 = num.trim().parse().map_err(|_| err())?;
            let v = v * ns;
            if !(1.0..=1.8e19).contains(&v) {
                return Err(err());
            }
            return Ok(Budget::Nanoseconds(v.round() as u64));
        }
    }
    parse_count(t).map(Budget::Instructions)
}

/// A count with an optional `k`/`M`/`G` suffix or in `1e9` notation.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let err = || {
        format!(
            "`{s}` is not a count: use e.g. `300M`, `2G`, `1e9`, `500000000` or a duration (`500ms`)"
        )
    };
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        Some((i, 'g' | 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let v = v * mul;
    if !(1.0..=1.8e19).contains(&v) {
        return Err(err());
    }
    Ok(v.round() as u64)
}

fn parse_u8(s: &str) -> Result<u8, String> {
    let v = if let Some(hex) = s.strip_prefix("0x") {
        u8::from_str_radix(hex, 16)
    } else {
        s.parse()
    };
    v.map_err(|_| format!("`{s}` is not a priority byte (0-255 or 0x00-0xff)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_seeds() {
        assert_eq!(parse_count("300M"), Ok(300_000_000));
        assert_eq!(parse_count("2G"), Ok(2_000_000_000));
        assert_eq!(parse_count("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_count("1.5k"), Ok(1500));
        assert_eq!(parse_count("42"), Ok(42));
        assert_eq!(parse_budget("500ms"), Ok(Budget::Nanoseconds(500_000_000)));
        assert_eq!(parse_budget("2s"), Ok(Budget::Nanoseconds(2_000_000_000)));
        assert_eq!(parse_budget("20M"), Ok(Budget::Instructions(20_000_000)));
        assert_eq!(Budget::Nanoseconds(5_000_000).instructions(6), 78_125);
        assert!(parse_budget("soon").is_err());
        assert!(parse_count("0").is_err() && parse_count("lots").is_err());
        assert_eq!(parse_u32("0x2545F491"), Ok(0x2545_F491));
        assert!(parse_u32("-1").is_err());
    }
}
