//! Command line.

use clap::{Parser, Subcommand};

mod commands;
mod run;
mod values;

pub use crate::exec::probe::Method;
pub use crate::term::ColorWhen;
pub use commands::*;
pub use run::*;
pub use values::*;

/// Statistical PC-sampling profiler for embedded Rust firmware.
///
/// `cargo sample --release --bin app` builds the crate with its sampling feature on, runs it in
/// QEMU, captures the samples and prints where the time went, against the very ELF that ran.
#[derive(Parser, Debug)]
#[command(name = "cargo-sample", version)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,

    /// Colour: auto, always, never (default: `CARGO_TERM_COLOR`, `NO_COLOR`, terminal). Every
    /// subcommand takes it.
    #[arg(long, global = true, value_name = "WHEN", value_enum, help_heading = None)]
    pub color: Option<ColorWhen>,
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
    /// Run the firmware's benchmarks (`sampler_rt::bench!`) in QEMU, every instruction counted:
    /// instructions an iteration (min, median, max; estimated cycles with `--cycles`), with the
    /// gate's baselines and limits (`--save-baseline`, `--baseline`, `--limit bench=+2%`).
    Bench(Box<RunArgs>),
    /// Print a completion script for a shell (`cargo sample completions bash >
    /// ~/.local/share/bash-completion/completions/cargo-sample`): it completes the
    /// `cargo-sample` command, which takes the same arguments as `cargo sample`.
    Completions(CompletionsArgs),
}

/// `cargo sample completions`.
#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The completion script for `shell`, for the `cargo-sample` command.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "cargo-sample", &mut out);
    if shell == clap_complete::Shell::Bash {
        // clap_complete names a subcommand's case after the binary's hyphen once as `__` and
        // once as `__subcmd__`; the two must agree for options of subcommands to complete.
        let text = String::from_utf8_lossy(&out).replace("cargo__subcmd__sample", "cargo__sample");
        return text.into_bytes();
    }
    out
}

/// Parse the command line, with help and errors naming the command as it is typed: `cargo
/// sample` (the completion scripts name the binary).
pub fn parse(argv: Vec<std::ffi::OsString>) -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command()
        .bin_name("cargo sample")
        .get_matches_from(argv);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
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
        // Seeds 0 and 1 are different runs; the one seed that would wrap to 0 is refused.
        assert_eq!(parse_seed("0"), Ok(0));
        assert!(parse_seed("0xFFFFFFFF").is_err());
        let state = crate::cmd::settings::generator_state;
        assert_ne!(state(Some(0)), state(Some(1)));
        assert!((0..1000).all(|s| state(Some(s)) != 0));
        assert_eq!(state(None), 0x2545_F491, "the default run is unchanged");
    }
}
