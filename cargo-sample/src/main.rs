//! `cargo sample`: the command line over the `cargo_sample` library.

use std::process::ExitCode;

use cargo_sample::cli::Command;
use cargo_sample::{cmd, cmd::advise, cmd::init, cmd::sample, term};

fn main() -> ExitCode {
    // As a cargo subcommand we are invoked as `cargo-sample sample ...`.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "sample") {
        argv.remove(1);
    }
    let cli = cargo_sample::cli::parse(argv);
    term::init_color(cli.color);
    let result = match &cli.command {
        None if cli.run.exact || cli.run.elf.is_some() => cmd::exact::run_exact(&cli.run),
        None => sample::run(&cli.run),
        Some(Command::Report(r)) => cmd::report::report(r),
        Some(Command::Init(i)) => init::init(i),
        Some(Command::Diff(d)) => cmd::diff::diff(d),
        Some(Command::Advise(a)) => advise::advise(a),
        Some(Command::Swo(s)) => cmd::swo::swo(s),
        Some(Command::Events(e)) => cmd::events::events(e),
        Some(Command::Stat(s)) => cmd::stat::stat(s),
        Some(Command::Bench(b)) => cmd::bench::bench(b),
        Some(Command::Completions(c)) => {
            use std::io::Write;
            std::io::stdout()
                .write_all(&cargo_sample::cli::completions(c.shell))
                .map_err(anyhow::Error::from)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<cmd::gate::LimitExceeded>().is_some() => {
            anstream::eprintln!("{}: {e:#}", term::paint("1;31", "error"));
            ExitCode::from(cmd::gate::EXIT_LIMIT_EXCEEDED)
        }
        Err(e) => {
            cargo_sample::project::firmware::print_build_messages(&e);
            anstream::eprintln!("{}: {e:#}", term::paint("1;31", "error"));
            ExitCode::FAILURE
        }
    }
}
