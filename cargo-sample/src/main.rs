//! `cargo sample`: a statistical PC-sampling profiler for embedded Rust firmware.
//!
//! The pipeline: [`project`] finds the crate, target and runner; [`firmware`] builds it with
//! the sampling feature; [`elf`] checks the image and writes the run's configuration into a
//! copy; [`qemu`] runs it; [`dump`] (or [`snapshot`]) decodes what the sampler sent; [`runs`]
//! keeps everything; [`symbolize`] and [`report`] turn addresses into the profile.

mod advise;
mod bench;
mod bins;
mod board;
mod cli;
mod disasm;
mod dump;
mod elf;
mod exact;
mod firmware;
mod init;
mod itm;
mod laps;
mod live;
mod machine;
mod project;
mod qemu;
mod report;
mod run;
mod runs;
mod serial;
mod snapshot;
mod stats;
mod symbolize;
mod term;
mod textdump;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    // As a cargo subcommand we are invoked as `cargo-sample sample ...`.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "sample") {
        argv.remove(1);
    }
    let cli = Cli::parse_from(argv);
    let color = match &cli.command {
        Some(Command::Report(r)) => r.view.color.clone(),
        Some(Command::Diff(d)) => d.color.clone(),
        Some(Command::Advise(a)) => a.run.view.color.clone(),
        Some(Command::Swo(s)) => s.view.color.clone(),
        _ => cli.run.view.color.clone(),
    };
    term::init_color(color.as_deref());
    let result = match &cli.command {
        None if cli.run.exact => run::run_exact(&cli.run),
        None => run::run(&cli.run),
        Some(Command::Report(r)) => run::report(r),
        Some(Command::Init(i)) => init::init(i),
        Some(Command::Bench(b)) => bench::bench(b),
        Some(Command::Diff(d)) => run::diff(d),
        Some(Command::Advise(a)) => advise::advise(a),
        Some(Command::Swo(s)) => run::swo(s),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {e:#}", term::paint("1;31", "error"));
            ExitCode::FAILURE
        }
    }
}
