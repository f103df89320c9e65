//! `cargo sample --serial PORT`: the firmware writes its dump to a UART; the host reads the
//! port (a terminal device, a FIFO or a file), keeps every byte and decodes a defmt log that
//! shares it.

#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sampler_rt::wire::{self};

use super::board::{BoardImage, board_image};
use super::capture::{self, Run, project_meta};
use super::settings::DEFAULT_SAMPLES;
use crate::cli::RunArgs;
use crate::exec::serial;
use crate::project::Project;
use crate::runs::{self, RunMeta};
use crate::term;

/// The firmware's writer sends the ring once, at the end: more samples than the ring holds
/// keep only the newest. Said before the run, with what fits.
fn serial_ring_warning(elf_bytes: &[u8], args: &RunArgs, requested: u32) -> Option<String> {
    if args.mode != crate::cli::Mode::Ring {
        return None;
    }
    let (_, ring) = crate::image::wiring::stack_room_bytes(elf_bytes)?;
    let entry = match args.stacks {
        Some(w) => {
            4 * wire::stack_entry_words(u32::from(w), super::settings::DEFAULT_FRAME_RECORDS.into())
                as u64
        }
        None if args.tag.is_some() => 8,
        None => 4,
    };
    let fits = ring / entry;
    if u64::from(requested) <= fits {
        return None;
    }
    let stacks = match args.stacks {
        Some(w) => format!(" (a sample with `--stacks {w}` takes {entry} bytes of it)"),
        None => String::new(),
    };
    Some(format!(
        "the firmware's writer sends the ring once, at the end, and the ring holds {fits} \
         samples{stacks}: of the {requested} asked for only the newest {fits} will be kept. Ask \
         for at most {fits} (`-n {fits}`), or enlarge the ring (`SAMPLER_RT_RING_SLOTS`)"
    ))
}

/// `--serial PORT`: build with the writer sink, have the image loaded (`--runner`, or by the
/// user), and read the dump from the port. Everything the port carried is kept.
pub(crate) fn capture_serial(args: &RunArgs, p: &Project) -> Result<PathBuf> {
    let port = args.board.serial.as_deref().context("no serial port")?;
    capture::preflight(args, p, true)?;
    if args.truth || args.exact {
        bail!("`--serial` reads a dump the firmware writes; `--truth` and `--exact` need QEMU");
    }
    let requested = args.samples.unwrap_or(DEFAULT_SAMPLES);
    let sampler = (
        wire::SINK_WRITER,
        "`sampler_rt::set_writer(..)` and `sampler_rt::start()`",
    );
    let BoardImage {
        img, config, clock, ..
    } = board_image(args, p, Some(sampler), 0)?;
    let meta = RunMeta {
        machine: port.display().to_string(),
        timer_hz: clock,
        unit: "cycles".into(),
        units_per_tick: 1.0,
        requested_samples: requested,
        board: Some("serial".into()),
        source: Some(runs::Source::Serial),
        ..project_meta(p, &crate::project::Selection::from(&args.cargo))
    };
    let mut run = Run::start(p, &img.bytes, config.as_ref(), meta)?;
    let image = run.dir.join(runs::LOADED_ELF);
    if let Some(w) = serial_ring_warning(&img.bytes, args, requested) {
        term::warn(w);
    }

    // Listen before the board starts talking.
    let (mut port_file, tty) = serial::open(port, args.board.baud)?;
    if !tty {
        term::note(format!(
            "{} is not a terminal: reading it as it is (no baud rate set)",
            port.display()
        ));
    }
    let mut runner = start_runner(args, port, &image)?;
    let mut defmt = PortLog::new(&img.bytes, &run.dir)?;
    crate::interrupt::install_handler();
    let started = std::time::Instant::now();
    let timeout = Duration::from_secs(args.timeout);
    let raw_path = run.dir.join(runs::SERIAL);
    let mut raw = Vec::new();
    let mut saved_len = 0;
    let mut runner_ended: Option<std::time::Instant> = None;
    let outcome = loop {
        serial::read_some(&mut port_file, &mut raw)?;
        if raw.len() != saved_len {
            // Nothing that arrived is lost if the host dies.
            runs::write_atomic(&raw_path, &raw)?;
            saved_len = raw.len();
        }
        defmt.feed(&raw);
        if let Some((_, true)) = crate::dump::stream::find_dump(&raw) {
            break runs::RunState::Finished;
        }
        if crate::interrupt::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            break runs::RunState::Interrupted;
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            break runs::RunState::DurationReached;
        }
        if started.elapsed() >= timeout {
            break runs::RunState::TimedOut;
        }
        if let Some(r) = &mut runner
            && runner_ended.is_none()
            && r.try_wait().ok().flatten().is_some()
        {
            runner_ended = Some(std::time::Instant::now());
        }
        // A runner that ended leaves a second for the last bytes.
        if runner_ended.is_some_and(|t| t.elapsed() >= Duration::from_secs(1)) {
            break runs::RunState::Failed;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(mut r) = runner {
        let _ = r.kill();
        let _ = r.wait();
    }
    run.meta.wall_seconds = started.elapsed().as_secs_f64();
    if let Some((start, complete)) = crate::dump::stream::find_dump(&raw) {
        run.keep(runs::DUMP, &raw[start..])?;
        if !complete {
            term::warn("the dump on the port was cut short; reporting what arrived");
        }
    }
    run.finish(outcome, runs::DUMP, |_| {
        format!(
            "no dump arrived on {} ({} bytes read, kept in {}). Does the firmware call \
             `sampler_rt::set_writer` with its UART's write function, and is the baud rate \
             right?",
            port.display(),
            raw.len(),
            raw_path.display()
        )
    })
}

/// `--runner CMD`: load the image with it (its own process group: Ctrl-C reaches
/// cargo-sample, which ends the runner); without one the user loads it.
fn start_runner(args: &RunArgs, port: &Path, image: &Path) -> Result<Option<std::process::Child>> {
    Ok(match &args.board.runner {
        Some(cmd) => {
            let mut words = cmd.split_whitespace();
            let prog = words.next().context("`--runner` is empty")?;
            term::status("Loading", format!("{} with `{cmd}`", image.display()));
            let mut c = std::process::Command::new(prog);
            c.args(words).arg(image).stdin(std::process::Stdio::null());
            // Its own process group: Ctrl-C reaches cargo-sample, which ends the runner.
            #[cfg(unix)]
            c.process_group(0);
            Some(
                c.spawn()
                    .with_context(|| format!("starting the runner `{cmd}`"))?,
            )
        }
        None => {
            term::status(
                "Waiting",
                format!(
                    "for the dump on {}: load {} onto the board and reset it (Ctrl-C to stop)",
                    port.display(),
                    image.display()
                ),
            );
            None
        }
    })
}

/// A defmt logger on the same UART (no RTT block): its frames come before the dump, and are
/// decoded, printed and kept as they arrive.
struct PortLog {
    decoder: Option<crate::dump::defmt::DefmtLog>,
    kept: Option<std::fs::File>,
    /// Bytes of the port decoded so far.
    decoded: usize,
}

impl PortLog {
    fn new(elf_bytes: &[u8], dir: &Path) -> Result<PortLog> {
        let decoder = match crate::runs::defmt_on_stdout(elf_bytes, dir) {
            Some(_) => crate::dump::defmt::DefmtLog::of_elf(elf_bytes)?,
            None => None,
        };
        let kept = decoder
            .is_some()
            .then(|| std::fs::File::create(dir.join(runs::DEFMT_LOG)))
            .transpose()
            .context("creating the run's defmt.log")?;
        Ok(PortLog {
            decoder,
            kept,
            decoded: 0,
        })
    }

    /// The frames of `raw` (all the port carried) not decoded yet, up to where a dump may
    /// begin.
    fn feed(&mut self, raw: &[u8]) {
        let Some(d) = self.decoder.as_mut() else {
            return;
        };
        let end = crate::dump::stream::before_dump(raw);
        if end <= self.decoded {
            return;
        }
        for line in d.feed(&raw[self.decoded..end]) {
            eprintln!("{line}");
            if let Some(f) = self.kept.as_mut() {
                use std::io::Write;
                let _ = writeln!(f, "{line}");
            }
        }
        self.decoded = end;
    }
}
