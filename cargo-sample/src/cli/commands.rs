//! The subcommands' arguments (`report`, `diff`, `swo`, `advise`, `init`, `events`, `stat`).

use std::path::PathBuf;

use super::run::{CargoArgs, ProbeArgs, RunArgs, TableFormat, ViewArgs};
use clap::Args;

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
    /// The raw SWO bytes (as a probe or a logic analyser captured them); with `--tcp`, the
    /// file the stream is saved to as it arrives.
    pub capture: PathBuf,
    /// Record the stream from a TCP port first (J-Link GDB Server's SWO port 2332, OpenOCD's
    /// trace output, orbuculum's 3443) until the server closes it, `--duration` passes or
    /// Ctrl-C.
    #[arg(long, value_name = "HOST:PORT")]
    pub tcp: Option<String>,
    /// With `--tcp`: stop recording after this long (`10s`, `2min`).
    #[arg(long, value_name = "TIME", value_parser = super::values::parse_duration, requires = "tcp")]
    pub duration: Option<std::time::Duration>,
    /// The stream is framed by the TPIU's formatter (several trace sources interleaved): keep
    /// the source with this trace ID (1, the ITM's usual ID, when no ID is given).
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "1")]
    pub tpiu: Option<u8>,
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
    /// Output format: the table, JSON, or a differential flamegraph (SVG: the after run's
    /// stacks, red where a frame's share grew, blue where it shrank, shares normalised).
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Show at most N functions (0 = all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
}

/// `cargo sample diff --format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormat {
    Text,
    Json,
    Svg,
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
    /// The function where the firmware starts, by name: the `start()` call goes at its top
    /// (for an entry init does not recognise, such as an `extern "C"` function that the
    /// image's own assembly calls).
    #[arg(long, value_name = "FN")]
    pub entry: Option<String>,
    /// Fix the size of sampler-rt's ring for this crate (`[package.metadata.sample]
    /// ring-slots`), instead of letting cargo-sample fit it to the part's RAM.
    #[arg(long, value_name = "SAMPLES")]
    pub ring_slots: Option<u32>,
    /// Show the changes without writing them.
    #[arg(long)]
    pub dry_run: bool,
}
