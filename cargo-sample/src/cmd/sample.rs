//! `cargo sample`: build, run in QEMU (or hand over to a board or a serial port), capture,
//! save, report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sampler_rt::wire::{self};

use super::board::{board_chip, capture_board, capture_serial};
use super::capture::{self, Image, Run, project_meta};
use super::exact::{check_plugin_loaded, choose_counting};
use super::saved::render_run;
use super::settings::{
    DEFAULT_FRAME_RECORDS, DEFAULT_PERIOD_INSTRUCTIONS, DEFAULT_SAMPLES, Timer, event_name,
    hist_layout, names_at, pacer, resolve_timer, tag_for, timer_settings,
};
use super::stages::{choose_machine, note_live};
use crate::capture::snapshot;
use crate::cli::RunArgs;
use crate::dump::{self};
use crate::exec::exact::Counting;
use crate::exec::qemu;
use crate::image::elf;
use crate::project::firmware;
use crate::project::{self};
use crate::runs::{self, RunMeta};
use crate::term;

/// `cargo sample [args]`: capture, then print the report.
pub fn run(args: &RunArgs) -> Result<()> {
    super::saved::check_view(&args.view)?;
    let dir = capture(args)?;
    render_run(&dir, &args.view)
}

/// Build, run and save a run; returns its directory (with a dump in it).
pub fn capture(args: &RunArgs) -> Result<PathBuf> {
    let p = project::discover(&crate::project::Selection::from(&args.cargo))?;
    if let Some(chip) = board_chip(args, &p)? {
        return capture_board(args, &p, &chip);
    }
    if args.board.serial.is_some() {
        return capture_serial(args, &p);
    }
    if args.board.method != crate::cli::Method::Timer {
        return super::board::hardware_method_in_qemu(args, &p);
    }
    capture::preflight(args, &p, true)?;
    let target = choose_machine(args, &p)?;
    let (m, cpu) = (target.machine, target.cpu.clone());
    let qemu_path = qemu::locate(args.qemu.as_deref(), target.program.as_deref())?;
    let explicit = args.timer.is_some();
    let timer = resolve_timer(
        args.timer
            .as_ref()
            .unwrap_or(&crate::spec::TimerChoice::SysTick),
        m,
        &cpu,
    )?;
    if let Timer::Pmu { event } = timer
        && event != crate::analysis::events::CPU_CYCLES
        && event != crate::analysis::events::SW_INCR
    {
        // Measured (QEMU 7.2 and 10.0): a counted event's overflow is never signalled. QEMU
        // arms its overflow timer for one event short of the overflow (the counter then reads
        // 0xFFFFFFFF) and does not arm it again, so the flag appears only when the counter is
        // next read. The cycle counter's timer is armed for the overflow itself and works, and
        // SW_INCR's overflow is checked at the write to PMSWINC_EL0.
        bail!(
            "`--timer pmu:{}` samples on an event counter's overflow, which QEMU (7.2 to 10.0) \
             never signals (it arms the overflow one event early). In QEMU use \
             `--timer pmu:cpu_cycles` (the cycle counter's overflow), `pmu:sw_incr` (software \
             increments) or the generic timer (the default); other events' overflows are for \
             boards, where they are not yet verified",
            event_name(&cpu, event).to_ascii_lowercase()
        );
    }
    if let Timer::Pmu { event } = timer
        && event != crate::analysis::events::CPU_CYCLES
        && args.truth
    {
        bail!(
            "`--truth` compares samples with instruction counts; samples every N {} are a \
             profile of that event, not of instructions. Drop `--truth`, or sample with \
             `--timer pmu:cpu_cycles` or the generic timer",
            event_name(&cpu, event)
        );
    }
    let counting = if args.truth {
        Some(choose_counting(
            args.truth_method,
            &qemu_path,
            &firmware::own_dir(&p),
        )?)
    } else {
        None
    };

    const CALLS: &str = "`sampler_rt::start()`";
    let (img, timer, alignment) = match args.align {
        None => {
            let (img, timer) = super::pacing::build(&p, args, m, timer, explicit, CALLS)?;
            (img, timer, None)
        }
        Some(n) => {
            let (img, a) = capture::build_aligned(&p, &args.cargo, n, CALLS)?;
            (img, timer, Some(a))
        }
    };
    let state = img.fw.state.context("no sampler state")?;
    let Image {
        bytes: elf_bytes,
        fw,
    } = img;
    if !args.laps {
        crate::image::wiring::check(&elf_bytes, pacer(&fw, timer))?;
    }
    if let Some(w) = crate::image::wiring::stack_room(&elf_bytes) {
        term::warn(w);
    }
    // The semihosting sink streams every full ring chunk, so any number of samples fits; a live
    // capture for a duration runs until then (no limit).
    let live = args.live || args.duration.is_some();
    let requested = match (args.samples, live && args.duration.is_some()) {
        (Some(n), _) => n,
        (None, true) => 0,
        (None, false) => DEFAULT_SAMPLES,
    };
    // QEMU's cycle counter runs at 1 GHz of emulated time whatever the icount shift; other
    // events have no rate.
    let timer_hz = match timer {
        Timer::Pmu { event } if event == crate::analysis::events::CPU_CYCLES => 1_000_000_000,
        Timer::Pmu { .. } => 0,
        // A device timer with a clock of its own in QEMU (STM32's 1 GHz).
        Timer::Device { known: Some(t), .. } if t.hz > 0 => t.hz,
        _ => m.systick_hz,
    };
    // PMU overflows: QEMU's cycle counter then ticks once per instruction, as in `stat`.
    let shift = args.icount_shift.unwrap_or_else(|| match timer {
        Timer::Pmu { .. } => 0,
        _ => m.default_icount_shift(),
    });
    // A PMU period counts events: instructions for INST_RETIRED, QEMU's 1 GHz cycles for
    // CPU_CYCLES (2^shift a instruction).
    let units_per_tick = match timer {
        Timer::Pmu { event } if event == crate::analysis::events::CPU_CYCLES => {
            1.0 / f64::from(1u32 << shift)
        }
        Timer::Pmu { .. } => 1.0,
        _ => 1e9 / timer_hz as f64 / f64::from(1u32 << shift),
    };
    let period = match args.period {
        Some(p) => p
            .ticks(timer_hz, units_per_tick)
            .map_err(anyhow::Error::msg)?,
        None => (DEFAULT_PERIOD_INSTRUCTIONS / units_per_tick)
            .round()
            .max(2.0) as u64,
    };
    let span = if args.no_jitter { Some(0) } else { args.jitter };
    let (reload, jitter_mask) = timer_settings(period, span)?;
    let (timer_kind, timer_base, timer_irq) = match timer {
        Timer::SysTick => (wire::TIMER_SYSTICK, 0, 0),
        Timer::Device {
            kind, base, irq, ..
        } => (kind, base, irq),
        Timer::Pmu { event } => (wire::TIMER_PMU, event as u32, 0),
    };
    let (mode, hist_base, hist_shift) = match args.mode {
        _ if args.laps => (wire::MODE_OFF, 0, 0),
        crate::cli::Mode::Ring => (wire::MODE_RING, 0, 0),
        crate::cli::Mode::Hist => {
            let text = fw.text.context(
                "the firmware has no `__stext`/`__etext`: the code range for bins is unknown",
            )?;
            let (base, shift) = hist_layout(text, fw.hist_counters, args.bin_size)?;
            (wire::MODE_HIST, base, shift)
        }
    };
    let (tag_kind, tag_addr) = match &args.tag {
        None => (wire::TAG_NONE, 0),
        Some(what) => tag_for(fw.aarch64, what, &elf_bytes)?,
    };
    let config = wire::Config {
        mode,
        hist_base,
        hist_shift,
        tag_kind,
        tag_addr,
        sink: if live {
            wire::SINK_HOST
        } else {
            wire::SINK_SEMIHOSTING
        },
        priority: args.priority.unwrap_or(0),
        timer: timer_kind,
        reload,
        jitter_mask,
        limit: requested,
        seed: super::settings::generator_state(args.seed),
        timer_base,
        timer_irq,
        stack_words: args.stacks.unwrap_or(0),
        frame_records: if args.stacks.is_some() {
            DEFAULT_FRAME_RECORDS
        } else {
            0
        },
        stack_top: if args.stacks.is_some() && fw.aarch64 {
            super::settings::stack_top(&elf_bytes)?
        } else {
            0
        },
        late_ticks: match timer {
            Timer::Pmu { .. } => 0,
            // QEMU's STM32 timers do not restart their count at the update (it runs on past
            // the reload), so it says nothing of lateness there.
            Timer::Device { kind, .. } if kind == wire::TIMER_STM32 => 0,
            // No handler in the image but the sampler's: nothing can hold it off, and the
            // check (6 instructions a sample) is left out.
            _ if !elf::may_hold_off(
                &elf_bytes,
                (timer_kind != wire::TIMER_SYSTICK).then_some(16 + timer_irq),
            ) =>
            {
                super::settings::late_ticks_set().unwrap_or(0)
            }
            _ => super::settings::late_ticks(
                units_per_tick,
                timer_kind != wire::TIMER_SYSTICK,
                false,
            ),
        },
    };

    // Samples every N events share out the events, not the instructions.
    let unit = match timer {
        Timer::Pmu { event } if event != crate::analysis::events::CPU_CYCLES => {
            format!("{} events", event_name(&cpu, event))
        }
        _ => "instructions".to_owned(),
    };
    let meta = RunMeta {
        machine: m.name.to_owned(),
        cpu: cpu.clone(),
        timer_hz,
        unit: unit.clone(),
        units_per_tick,
        icount_shift: shift,
        requested_samples: requested,
        align: alignment.as_ref().map(|a| a.to),
        code_growth: alignment.as_ref().map(|a| (a.plain_bytes, a.grown_bytes)),
        unaligned_functions: alignment.map(|a| a.unaligned).unwrap_or_default(),
        pacer: match timer {
            Timer::Device { known: Some(t), .. } => Some(t.describe()),
            _ => None,
        },
        ..project_meta(&p, &crate::project::Selection::from(&args.cargo))
    };
    let mut run = Run::start(&p, &elf_bytes, Some(&config), meta)?;
    let dir = run.dir.clone();

    let mean_period = period as f64 * units_per_tick;
    // The handler's own instructions a sample (cargo-sample-bench, exact in QEMU: 12 to 29.5 on
    // Cortex-M, 40 to 51 on ARMv8-A, 218 to 242 with `--stacks`). A period near that starves
    // the firmware: the samples then show the sampler's pace, not the program.
    let handler = if fw.aarch64 {
        40.0
    } else if args.stacks.is_some() {
        230.0
    } else {
        20.0
    };
    if !args.laps
        && matches!(timer, Timer::SysTick | Timer::Device { .. })
        && mean_period < 10.0 * handler
    {
        term::warn(format!(
            "a sample every {mean_period:.0} instructions, and sampler-rt's handler takes about \
             {handler:.0} of its own each time ({:.0} % of the run): the firmware {} and the \
             profile shows the sampler's pace. Leave at least {:.0} instructions between \
             samples (`--period {:.0}` ticks) to keep it to a tenth",
            (100.0 * handler / mean_period).min(100.0),
            if mean_period <= 2.0 * handler {
                "barely runs"
            } else {
                "runs slowly"
            },
            10.0 * handler,
            (10.0 * handler / units_per_tick).ceil()
        ));
    }
    if args.laps {
        term::status(
            "Running",
            format!("{} in QEMU {} (lap timing)", p.target_name, m.name),
        );
    } else {
        term::status(
            "Running",
            format!(
                "{} in QEMU {} ({}, every {:.0} {unit}{})",
                p.target_name,
                m.name,
                match (requested, args.duration) {
                    (0, Some(d)) => format!("samples for {:.1} s", d.as_secs_f64()),
                    (0, None) => "samples until the firmware stops".into(),
                    (n, _) => format!("{n} samples"),
                },
                mean_period,
                if jitter_mask == 0 {
                    ", constant period"
                } else {
                    " on average"
                }
            ),
        );
    }
    let defmt_stdout = crate::runs::defmt_on_stdout(&elf_bytes, &dir);
    if !live && elf::symbol_address(&elf_bytes, "_SEGGER_RTT").is_some() {
        term::note(
            "this firmware writes to RTT (`defmt-rtt`, `rtt-target`), which only a reader empties: \
             add `--live` to have its output (and defmt log, decoded) while sampling",
        );
    }
    let outcome = qemu::run(&qemu::RunSpec {
        qemu: qemu_path,
        machine: target.machine_arg.clone(),
        extra_args: target.extra.clone(),
        cpu,
        kernel: dir.join(runs::LOADED_ELF),
        icount_shift: shift,
        timeout: Duration::from_secs(args.timeout),
        label: format!("sampling {} in QEMU {}", p.target_name, m.name),
        snapshot: (!live).then_some(qemu::MemoryBlock {
            addr: state.0,
            len: wire::STATE_LEN as u64,
        }),
        output_log: Some(dir.join(runs::OUTPUT)),
        defmt_stdout,
        expected_samples: (requested > 0 && !args.laps).then_some(requested as u64),
        budget: None,
        counting: counting.clone(),
        live: live.then(|| qemu::LiveSpec {
            state_addr: state.0 as u32,
            duration: args.duration,
            interval: Duration::from_millis(args.poll_interval.into()),
            app_rtt: elf::symbol_address(&elf_bytes, "_SEGGER_RTT")
                .map(|a| (a as u32, dir.clone())),
            names: names_at(&elf_bytes, &fw),
            functions: crate::capture::top::functions_of(&elf_bytes),
        }),
        pmu_in_memory: None,
        // With stacks, `--truth` follows the calls too: exact inclusive shares and callers.
        call_graph: (args.stacks.is_some() && matches!(counting, Some(Counting::Plugin { .. })))
            .then(|| {
                if fw.aarch64 {
                    // The IRQ entries (current level, SPx) of the sampler's vector tables.
                    ["sampler_rt_vectors", "sampler_rt_vectors_hist"]
                        .iter()
                        .filter_map(|v| elf::symbol_address(&elf_bytes, v))
                        .map(|a| a as u32 + 0x280)
                        .collect()
                } else {
                    elf::handler_entries(&elf_bytes)
                }
            }),
        // `--truth` tells the time the sampler could see from the time of handlers it cannot
        // preempt: each exception's instructions per address.
        contexts: (args.truth && !fw.aarch64 && matches!(counting, Some(Counting::Plugin { .. })))
            .then(|| elf::handler_entries(&elf_bytes)),
    })?;
    run.meta.wall_seconds = outcome.wall.as_secs_f64();
    run.meta.qemu_command = outcome.command.clone();
    run.meta.exit_code = outcome.status.and_then(|s| s.code());
    run.meta.counted_by = counting.as_ref().map(Counting::describe);
    check_plugin_loaded(&outcome, counting.as_ref(), &dir)?;

    // Keep the raw capture before decoding anything.
    if let Some(counts) = &outcome.exact {
        run.keep(crate::dump::exact::FILE, counts)?;
        if let Some(c) = &outcome.exact_contexts {
            run.keep(crate::dump::exact::CONTEXTS_FILE, c)?;
        }
        if let Some(graph) = &outcome.call_graph {
            run.keep(crate::dump::callgraph::FILE, graph)?;
        }
    } else if args.truth {
        term::warn("QEMU left no exact counts (it did not exit normally): no truth column");
    }
    let mut source = runs::Source::Dump;
    if let Some(lo) = &outcome.live {
        source = runs::Source::Live;
        let (a, b) = fw.text.unwrap_or((0, 0));
        let crc = elf::code_crc(&elf_bytes, a, b).unwrap_or(0);
        if let Some(l) = &lo.live {
            let stop = if l.stopped() {
                l.state.stop
            } else {
                wire::STOP_SNAPSHOT
            };
            let d = l.to_dump((a as u32, b as u32, crc), stop);
            run.keep(runs::DUMP, &dump::encode(&d))?;
            note_live(l, lo);
        }
        if let Some(e) = &lo.error {
            term::warn(format!("reading the target stopped: {e}"));
        }
    }
    let streamed = outcome.dump.as_deref().map(dump::decode_partial);
    let finished_dump = streamed
        .as_ref()
        .is_some_and(|(d, e)| e.is_none() && d.complete);
    if outcome.live.is_some() {
        // Read live: the dump is written above.
    } else if let (Some(bytes), true) = (&outcome.dump, finished_dump) {
        run.keep(runs::DUMP, bytes)?;
    } else if let Some((state_bytes, ring)) = &outcome.snapshot {
        // Cut short: the chunks the firmware streamed so far, then the newer samples still in
        // its ring. All raw pieces are kept beside the joined dump.
        if let Some(bytes) = &outcome.dump {
            run.keep(runs::STREAM, bytes)?;
        }
        run.keep(runs::STATE, state_bytes)?;
        run.keep(runs::RING, ring)?;
        let (a, b) = fw.text.unwrap_or((0, 0));
        let crc = elf::code_crc(&elf_bytes, a, b).unwrap_or(0);
        let sent = streamed.as_ref().map(|(d, _)| d);
        if let Some(d) = snapshot::to_dump(state_bytes, ring, (a as u32, b as u32, crc), sent) {
            let bytes = dump::encode(&d);
            run.keep(runs::DUMP, &bytes)?;
            source = runs::Source::Snapshot;
        }
    } else if let Some(bytes) = &outcome.dump {
        // Incomplete and nothing to add: reported as far as it goes.
        run.keep(runs::DUMP, bytes)?;
    }
    run.meta.source = Some(source);
    run.meta.core = outcome.core;
    capture::warn_qemu_end(&outcome, args.timeout, "the samples taken");
    let state = outcome.state();
    run.finish(state, runs::DUMP, |dir| {
        // With exact counts, how long it ran against the period says why.
        let ran = outcome
            .exact
            .as_deref()
            .and_then(|b| crate::dump::exact::parse(b).ok())
            .map(|c| c.iter().map(|x| x.1).sum::<u64>());
        if let Some(n) = ran {
            term::note(format!(
                "the firmware ran {n} instructions (counted exactly), {:.1} mean sampling \
                 periods of {mean_period:.0}",
                n as f64 / mean_period
            ));
        }
        let why = match outcome.status {
            Some(status) => format!(
                "the firmware ended ({}) without sending samples. sampler-rt sends them when the \
                 sample limit is reached, or at `sampler_rt::exit(code)` / `sampler_rt::flush()`; \
                 a firmware that ends by its own means (semihosting's `debug::exit`, \
                 `panic-semihosting`) takes them with it. With the sampling feature on, end it \
                 with `sampler_rt::exit(code)` (or call `sampler_rt::flush()` just before), or \
                 take fewer samples (`--samples`) so that the limit ends the run first, or run \
                 with `--live` (the host reads the samples while the firmware runs, all but the \
                 last poll's). (And samples are only taken after `sampler_rt::start()`.)",
                status
                    .code()
                    .map(|c| format!("exit code {c}"))
                    .unwrap_or_else(|| "killed".into())
            ),
            None => "no samples could be recovered: the sampler had not started".to_owned(),
        };
        format!(
            "{why}; firmware output and the run are kept in {}",
            dir.display()
        )
    })
}
