//! `cargo sample bench`: the firmware's benchmarks (`sampler_rt::bench!`), each iteration a
//! lap of a region, run once in QEMU with every instruction counted; the plugin's lap windows
//! give each iteration's instructions exactly (see [`crate::analysis::laps`]).

use anyhow::{Result, bail};

use crate::cli::RunArgs;

/// Run the benchmarks and report them (or gate them against a baseline).
pub fn bench(args: &RunArgs) -> Result<()> {
    if args.exact || args.truth || args.live || args.elf.is_some() {
        bail!(
            "`cargo sample bench` counts every instruction of its own run: leave out `--exact`, \
             `--truth`, `--live` and `--elf`"
        );
    }
    if args.board.conn.chip.is_some() || args.board.serial.is_some() {
        bail!(
            "`cargo sample bench` runs in QEMU, where every instruction is counted; on a board, \
             time the same regions with `cargo sample --laps`"
        );
    }
    let mut args = args.clone();
    args.laps = true;
    args.bench = true;
    super::sample::run(&args)
}
