//! `cargo sample --chip`/`--serial`: the firmware on a board, through probe-rs or a serial port.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use sampler_rt::wire::{self, Info};

use super::capture::{self, Image, Run, project_meta};
use super::plan::{self, Place};
use super::settings::{DEFAULT_SAMPLES, Timer, board_period, names_at, pacer, timer_settings};
use crate::cli::RunArgs;
use crate::dump::{self, Dump};
use crate::exec::probe::emulated;
use crate::exec::qemu;
use crate::image::elf;
use crate::project::{self, Project};
use crate::runs::{self, RunMeta};
use crate::term;

/// The chip to run on: `--chip`, else (unless `--machine` asks for QEMU) the runner's
/// `probe-rs run --chip`, `PROBE_RS_CHIP` or cargo-embed's files. `None`: QEMU.
pub(crate) fn board_chip(args: &RunArgs, p: &Project) -> Result<Option<String>> {
    if let Some(c) = &args.board.conn.chip {
        return Ok(Some(c.clone()));
    }
    if args.machine.is_none() && args.board.serial.is_none() && p.qemu_runner().is_none() {
        let from_runner = p.probe_runner().and_then(|r| r.chip.clone());
        let chip = from_runner.or_else(|| match &p.runner {
            // No runner, or a probe-rs runner that names no chip: as probe-rs would.
            None | Some(project::Runner::Probe(_)) => p.probe_defaults.chip.clone(),
            _ => None,
        });
        if let Some(chip) = chip {
            return Ok(Some(chip));
        }
        if p.probe_runner().is_some() {
            bail!(
                "the runner is probe-rs ({}) but names no chip, and neither PROBE_RS_CHIP nor \
                 cargo-embed's files do: pass `--chip NAME`, or `--machine NAME` for QEMU",
                p.runner_origin
            );
        }
    }
    Ok(None)
}

/// `--method dwt|pcsr` without a chip: in QEMU, through the emulated probe (the machine is
/// the chip); elsewhere, name the chip.
pub(crate) fn hardware_method_in_qemu(args: &RunArgs, p: &Project) -> Result<PathBuf> {
    let method = format!("{:?}", args.board.method).to_lowercase();
    let chips = emulated::chips();
    let machine = capture::choose_machine(args, p)
        .ok()
        .map(|t| t.machine.name);
    match machine {
        Some(m) if chips.contains(&m) => {
            term::note(format!(
                "`--method {method}` in QEMU: {m} runs as a board behind cargo-sample's emulated \
                 probe (`--chip {m} --probe qemu`)"
            ));
            capture_board_with(args, p, m, true)
        }
        Some(m) => bail!(
            "`--method {method}` in QEMU needs a machine the emulated probe knows ({}); {m} is \
             not one. On a board, name its chip with `--chip` (e.g. `--chip STM32F407VGTx`)",
            chips.join(", ")
        ),
        None => bail!(
            "`--method {method}` samples on a board: name its chip with `--chip` (e.g. `--chip STM32F407VGTx`)"
        ),
    }
}

/// The probe settings below the command line's: the runner's own, then `PROBE_RS_*` and
/// cargo-embed's files.
pub(crate) fn board_defaults(p: &Project) -> project::runner::Probe {
    p.probe_runner()
        .cloned()
        .unwrap_or_default()
        .or(p.probe_defaults.clone())
}

/// What a board or serial run starts from: the image, its configuration, the sampler's state
/// address (when the firmware samples), the core clock and the timer's reload value.
pub(crate) struct BoardImage {
    pub img: Image,
    pub config: Option<wire::Config>,
    pub state_addr: Option<u32>,
    pub clock: u64,
    /// The sampling period in the core's cycles, and the timer's reload value for it.
    pub period: u64,
    pub reload: u32,
}

/// The steps a board run and a serial run share: the period in the core's cycles, the build
/// (with the sampling feature when `sampler` says where the dump goes and what the entry point
/// must call), the image's checks and the plan of the sampler's run.
pub(crate) fn board_image(
    args: &RunArgs,
    p: &Project,
    sampler: Option<(u8, &str)>,
    default_clock: u64,
) -> Result<BoardImage> {
    let clock = args.view.clock.map(u64::from).unwrap_or(default_clock);
    // Checked before the build: a period the timer cannot take is refused at once.
    let period = board_period(args, clock)?;
    let (reload, _) = timer_settings(period, if args.no_jitter { Some(0) } else { args.jitter })?;
    let (img, systick) = match sampler {
        Some((_, calls)) => super::pacing::build_on_board(p, args, calls)?,
        None => (
            capture::build(p, &args.cargo, capture::Runtime::Off)?,
            false,
        ),
    };
    let state_addr = img
        .fw
        .state
        .filter(|_| sampler.is_some())
        .map(|s| s.0 as u32);
    let mut config = None;
    if let Some((sink, _)) = sampler {
        if systick {
            crate::image::wiring::check(&img.bytes, pacer(&img.fw, Timer::SysTick))?;
        }
        let place = Place::Board { clock, sink };
        config = Some(plan::plan(args, place, Timer::SysTick, &img.bytes, &img.fw)?.config);
    }
    Ok(BoardImage {
        img,
        config,
        state_addr,
        clock,
        period,
        reload,
    })
}

/// On a board through probe-rs: flash, run, capture, save.
pub(crate) fn capture_board(args: &RunArgs, p: &Project, chip: &str) -> Result<PathBuf> {
    capture_board_with(args, p, chip, false)
}

/// A board run; `qemu`: through the emulated probe whatever `--probe` says.
fn capture_board_with(args: &RunArgs, p: &Project, chip: &str, qemu: bool) -> Result<PathBuf> {
    use crate::cli::Method;
    let method = args.board.method;
    let mut conn = crate::exec::probe::Connection::new(
        chip,
        args.board.conn.settings(chip),
        board_defaults(p),
    );
    let emulated = qemu || conn.probe.as_deref() == Some(emulated::PROBE_NAME);
    if args.exact {
        bail!("`--exact` counts instructions without sampling: run it in QEMU with `--machine`");
    }
    if args.truth && !emulated {
        bail!(
            "`--truth` counts instructions in QEMU; a board has no such counter (with \
             `--probe qemu` the emulated chip has)"
        );
    }
    let machine = if emulated {
        Some(emulated_machine(chip)?)
    } else {
        None
    };
    capture::preflight(args, p, method == Method::Timer)?;
    let requested = args.samples.unwrap_or(if args.duration.is_some() {
        0
    } else {
        DEFAULT_SAMPLES
    });
    // The timer method needs the sampler; DWT and PCSR need nothing in the firmware.
    let sampler = (method == Method::Timer).then_some((wire::SINK_HOST, "`sampler_rt::start()`"));
    let BoardImage {
        img,
        config,
        state_addr,
        clock,
        period,
        reload,
    } = board_image(
        args,
        p,
        sampler,
        machine
            .map(|m| emulated_clock(m, args, method))
            .unwrap_or(0),
    )?;
    let (elf_bytes, fw) = (&img.bytes, &img.fw);
    let how = format!("{method:?}").to_lowercase();
    // A board counts cycles; the emulated chip's core counts instructions (one a cycle of
    // DWT's clock there, `2^shift` ns each against SysTick's ticks).
    let (unit, units_per_tick, icount_shift) = match machine {
        Some(m) => {
            let shift = args
                .icount_shift
                .unwrap_or_else(|| m.default_icount_shift());
            let per_tick = if method == Method::Dwt {
                1.0
            } else {
                m.instructions_per_tick(shift)
            };
            ("instructions", per_tick, shift)
        }
        None => ("cycles", 1.0, 0),
    };
    let meta = RunMeta {
        machine: chip.to_owned(),
        cpu: String::new(),
        timer_hz: clock,
        unit: unit.into(),
        units_per_tick,
        icount_shift,
        requested_samples: requested,
        board: Some(how.clone()),
        ..project_meta(p, &crate::project::Selection::from(&args.cargo))
    };
    let mut run = Run::start(p, elf_bytes, config.as_ref(), meta)?;
    let dir = run.dir.clone();
    if let Some(m) = machine {
        conn.emulated = Some(emulated_chip(args, p, m, method, &dir)?);
    }
    let cap = crate::exec::probe::capture(&crate::exec::probe::CaptureSpec {
        conn,
        elf: dir.join(runs::LOADED_ELF),
        method,
        state_addr,
        duration: args.duration,
        interval: Duration::from_millis(args.poll_interval.into()),
        timeout: Duration::from_secs(args.timeout),
        samples: (requested > 0).then_some(requested as u64),
        clock: u32::try_from(clock).ok().filter(|c| *c > 0),
        swo_baud: args.board.swo_baud,
        dwt_period: period as u32,
        dir: dir.clone(),
        rtt_addr: elf::symbol_address(elf_bytes, "_SEGGER_RTT"),
        names: names_at(elf_bytes, fw),
        functions: crate::capture::top::functions_of(elf_bytes),
        tasks: elf::task_pools(elf_bytes),
    });
    let code = elf::fingerprint(elf_bytes, fw.text);
    let cap = match cap {
        Ok(c) => c,
        Err(e) => return Err(run.failed(e)),
    };
    run.meta.wall_seconds = cap.wall.as_secs_f64();
    run.meta.board_seconds = cap
        .timings
        .map(|(attach, flash)| board_seconds(attach, flash, cap.wall));
    if let Some(end) = &cap.emulated_end {
        term::note(end);
    }
    if let Some(l) = &cap.live {
        capture::warn_overwritten(l);
    }
    if args.truth && !dir.join(crate::dump::exact::FILE).is_file() {
        term::warn("QEMU left no exact counts (it did not exit normally): no truth column");
    }
    if let Some(d) = board_dump(&cap, code, reload, requested) {
        run.keep(runs::DUMP, &dump::encode(&d))?;
    }
    run.meta.source = Some(match method {
        Method::Timer => runs::Source::Timer,
        Method::Dwt => runs::Source::Dwt,
        Method::Pcsr => runs::Source::Pcsr,
    });
    run.meta.core = cap.core;
    let state = end_state(&cap, args.timeout);
    run.finish(state, runs::DUMP, |dir| {
        format!("no samples arrived; the run is kept in {}", dir.display())
    })
}

/// Where a board run's time went, said to the user.
fn board_seconds(attach: Duration, flash: Duration, wall: Duration) -> runs::BoardSeconds {
    term::note(format!(
        "attached in {:.2} s, flashed in {:.2} s, captured in {:.2} s",
        attach.as_secs_f64(),
        flash.as_secs_f64(),
        (wall - flash).as_secs_f64()
    ));
    runs::BoardSeconds {
        attach: attach.as_secs_f64(),
        download: flash.as_secs_f64(),
        capture: (wall - flash).as_secs_f64(),
    }
}

/// How a board capture ended, said to the user.
fn end_state(cap: &crate::exec::probe::Capture, timeout_s: u64) -> runs::RunState {
    if let Some(e) = &cap.link_error {
        term::warn(if e.starts_with("the target was reset") {
            format!("{e}; reporting the samples read before the reset")
        } else {
            format!("the probe lost the target mid-run ({e}); reporting the samples read before")
        });
        if let Some(l) = cap.live.as_ref().filter(|l| !l.stopped())
            && !e.starts_with("the target was reset")
        {
            capture::warn_unread_tail(l);
        }
        runs::RunState::Failed
    } else if let Some(c) = cap.core {
        term::warn(format!(
            "the firmware is stuck in {} (PC {:#010x}); reporting the samples taken before",
            c.describe(),
            c.pc
        ));
        runs::RunState::Faulted
    } else if cap.interrupted {
        term::warn("interrupted: reporting the samples taken so far");
        runs::RunState::Interrupted
    } else if cap.duration_reached {
        runs::RunState::DurationReached
    } else if cap.timed_out {
        term::warn(format!(
            "the run did not finish within {} s (`--timeout`); reporting the samples taken so far",
            timeout_s
        ));
        runs::RunState::TimedOut
    } else {
        runs::RunState::Finished
    }
}

/// `--probe qemu`: the QEMU machine that plays the chip.
fn emulated_machine(chip: &str) -> Result<&'static crate::exec::machine::Machine> {
    let chips = emulated::chips();
    match crate::exec::machine::find(chip) {
        Some(m) if chips.contains(&chip) => Ok(m),
        _ => bail!(
            "`--probe qemu` emulates these chips: {} (QEMU machines); `--chip {chip}` is not one",
            chips.join(", ")
        ),
    }
}

/// The emulated chip's clock: SysTick's for the timer and PCSR (periods are SysTick ticks),
/// the instruction rate for DWT (its periods are cycles, one instruction each in QEMU).
fn emulated_clock(
    m: &crate::exec::machine::Machine,
    args: &RunArgs,
    method: crate::cli::Method,
) -> u64 {
    let shift = args
        .icount_shift
        .unwrap_or_else(|| m.default_icount_shift());
    match method {
        crate::cli::Method::Dwt => 1_000_000_000 >> shift,
        _ => m.systick_hz,
    }
}

/// The exception handlers' entries of the image in the run directory, for the plugin's
/// call graph.
fn plugin_graph_handlers(dir: &std::path::Path) -> Option<Vec<u32>> {
    let elf = std::fs::read(dir.join(runs::ELF)).ok()?;
    Some(
        crate::image::elf::vectors(&elf)
            .iter()
            .filter(|v| v.0 >= 2 && v.1 > 1)
            .map(|v| v.1 & !1)
            .collect(),
    )
}

/// How to start the QEMU machine behind `--probe qemu`: its output and the exact counts go
/// to the run directory.
fn emulated_chip(
    args: &RunArgs,
    p: &Project,
    m: &'static crate::exec::machine::Machine,
    method: crate::cli::Method,
    dir: &std::path::Path,
) -> Result<emulated::Emulated> {
    let qemu_path = qemu::locate(args.qemu.as_deref(), None)?;
    let shift = args
        .icount_shift
        .unwrap_or_else(|| m.default_icount_shift());
    let dwt = method == crate::cli::Method::Dwt;
    let pcsr = method == crate::cli::Method::Pcsr;
    let plugin = if args.truth || dwt || pcsr {
        match super::exact::choose_counting(
            crate::cli::TruthMethod::Plugin,
            &qemu_path,
            &crate::project::firmware::own_dir(p),
        )? {
            crate::exec::exact::Counting::Plugin { path, .. } => Some(path),
            _ => None,
        }
    } else {
        None
    };
    Ok(emulated::Emulated {
        qemu: qemu_path,
        machine: m.name.to_owned(),
        cpu: m.cpu.to_owned(),
        icount_shift: shift,
        real_time: false,
        log: dir.join(runs::OUTPUT),
        plugin,
        exact_out: args.truth.then(|| dir.join(crate::dump::exact::FILE)),
        graph: match (
            args.truth && args.stacks.is_some(),
            plugin_graph_handlers(dir),
        ) {
            (true, Some(h)) => Some((dir.join(crate::dump::callgraph::FILE), h)),
            _ => None,
        },
        faults: match std::env::var(emulated::FAULTS_ENV) {
            Ok(v) => emulated::dap::Faults::parse(&v)
                .map_err(|e| anyhow::anyhow!("{}: {e}", emulated::FAULTS_ENV))?,
            Err(_) => Default::default(),
        },
        swo: dwt.then(|| emulated::swo::SwoSource {
            ticks: dir.join("dwt-ticks.bin"),
            clock_hz: 1_000_000_000 >> shift,
        }),
        pcsr: pcsr.then(|| dir.join("pcsr-ticks.bin")),
    })
}

/// The dump of a board capture, whichever way it was taken.
pub fn board_dump(
    cap: &crate::exec::probe::Capture,
    code: crate::dump::Fingerprint,
    reload: u32,
    requested: u32,
) -> Option<Dump> {
    if let Some(l) = &cap.live {
        let stop = if l.stopped() {
            l.state.stop
        } else {
            wire::STOP_SNAPSHOT
        };
        return Some(l.to_dump(code, stop));
    }
    let (pcs, timer, reload, lost) = if let Some(s) = &cap.pcsr {
        (s.pcs.clone(), wire::TIMER_PCSR, 0, 0)
    } else if !cap.swo.is_empty() {
        let s = crate::dump::itm::summarize(&cap.swo, false);
        (
            crate::report::itm::with_sleep(&s),
            wire::TIMER_DWT,
            cap.dwt_period.unwrap_or(reload + 1).saturating_sub(1),
            s.overflow.min(u32::MAX as u64) as u32,
        )
    } else {
        return None;
    };
    if pcs.is_empty() {
        return None;
    }
    let info = Info {
        mode: wire::MODE_RING,
        timer,
        stop: wire::STOP_SNAPSHOT,
        arch: 7,
        reload,
        limit: requested,
        capacity: pcs.len() as u32,
        // An ITM overflow packet stands for at least one sample dropped: counted as one.
        taken: (pcs.len() as u32).saturating_add(lost),
        lost,
        code_start: code.start,
        code_end: code.end,
        code_crc: code.crc,
        ..Info::default()
    };
    Some(Dump::of_samples(info, 0, pcs, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dwt_capture_keeps_its_sleep_samples_in_order() {
        // The stream a DWT sends: a PC packet per sample, a sleep packet after every 64th
        // from the 20th on (among timestamps and exception trace, skipped).
        let pcs: Vec<u32> = (0..300u32).map(|k| 0x1000 + 2 * (k % 50)).collect();
        let cap = crate::exec::probe::Capture {
            swo: crate::dump::itm::synthetic(&pcs, true),
            ..Default::default()
        };
        let d = board_dump(&cap, crate::dump::Fingerprint::default(), 999, 300).unwrap();
        let sleep = crate::report::model::SLEEP_ADDRESS;
        let mut expected = Vec::new();
        for (k, &pc) in pcs.iter().enumerate() {
            expected.push(pc);
            if k % 64 == 20 {
                expected.push(sleep);
            }
        }
        assert_eq!(d.pcs, expected);
        assert_eq!(d.info.taken as usize, expected.len());
    }
}
