//! What a sampled run will do, worked out once: from the arguments, the place it runs (a QEMU
//! machine or a board's clock), the timer that paces the sampler and the built image, the
//! sampler's configuration block, the report's unit, the timer's clock and ticks, QEMU's
//! `-icount` shift and what `run.json` says of them. Pure: nothing here runs, prints or
//! builds, so every rule is unit-tested; the capture flows print the plan's warnings and
//! carry it out.

use anyhow::{Context, Result, bail};
use sampler_rt::wire;

use super::settings::{
    DEFAULT_FRAME_RECORDS, DEFAULT_PERIOD_INSTRUCTIONS, DEFAULT_SAMPLES, Timer, board_period,
    event_name, generator_state, hist_layout, late_ticks, late_ticks_set, stack_top, tag_for,
    timer_settings,
};
use crate::analysis::events::CPU_CYCLES;
use crate::cli::RunArgs;
use crate::exec::machine::Machine;
use crate::image::elf;
use crate::runs::RunMeta;

/// Where the sampler runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// A QEMU machine and its CPU model.
    Qemu {
        machine: &'static Machine,
        cpu: &'a str,
    },
    /// A board: SysTick at the core clock (`clock` Hz, 0 when not given), samples sent to
    /// `sink` (`wire::SINK_HOST` through a probe, `wire::SINK_WRITER` on a serial port).
    Board { clock: u64, sink: u8 },
}

/// A sampled run, as it will be carried out.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The block patched into the image.
    pub config: wire::Config,
    /// The timer's clock, Hz (0: events, which have no rate).
    pub timer_hz: u64,
    /// The report's units (instructions in QEMU, cycles on a board) a timer tick is.
    pub units_per_tick: f64,
    /// QEMU's `-icount shift` (0 on a board).
    pub icount_shift: u8,
    /// The mean period in timer ticks.
    pub period: u64,
    /// Samples asked for (0: until the run ends).
    pub requested: u32,
    /// The host reads the ring while the firmware runs.
    pub live: bool,
    /// The report's unit.
    pub unit: String,
    /// What the user should know before the run starts.
    pub warnings: Vec<String>,
}

/// The handler's own instructions a sample (cargo-sample-bench, exact in QEMU: 13 to 30.5 on
/// Cortex-M, 43 to 51 on ARMv8-A, 244 to 282 with `--stacks`), rounded down: a period near
/// that starves the firmware, and the samples then show the sampler's pace, not the program.
fn handler_cost(aarch64: bool, stacks: bool) -> f64 {
    match (aarch64, stacks) {
        (true, _) => 40.0,
        (false, true) => 230.0,
        (false, false) => 20.0,
    }
}

/// Refuse a timer the run cannot use, before anything is built.
pub(crate) fn check_timer(args: &RunArgs, cpu: &str, timer: Timer) -> Result<()> {
    let Timer::Pmu { event } = timer else {
        return Ok(());
    };
    if event != CPU_CYCLES && event != crate::analysis::events::SW_INCR {
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
            event_name(cpu, event).to_ascii_lowercase()
        );
    }
    if event != CPU_CYCLES && args.truth {
        bail!(
            "`--truth` compares samples with instruction counts; samples every N {} are a \
             profile of that event, not of instructions. Drop `--truth`, or sample with \
             `--timer pmu:cpu_cycles` or the generic timer",
            event_name(cpu, event)
        );
    }
    Ok(())
}

/// The clock and scale of `timer` in QEMU: `(timer_hz, icount shift, units_per_tick)`.
fn qemu_clock(args: &RunArgs, m: &Machine, timer: Timer) -> (u64, u8, f64) {
    // QEMU's cycle counter runs at 1 GHz of emulated time whatever the icount shift; other
    // events have no rate.
    let timer_hz = match timer {
        Timer::Pmu { event } if event == CPU_CYCLES => 1_000_000_000,
        Timer::Pmu { .. } => 0,
        // A device timer with a clock of its own in QEMU (STM32's 1 GHz).
        Timer::Device { known: Some(t), .. } if t.hz > 0 => t.hz,
        // One given by address (`stm32:BASE:IRQ`): QEMU clocks every timer of a kind alike.
        Timer::Device {
            kind, known: None, ..
        } => m
            .timers
            .iter()
            .find(|t| t.kind == kind && t.hz > 0)
            .map_or(m.systick_hz, |t| t.hz),
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
        Timer::Pmu { event } if event == CPU_CYCLES => 1.0 / f64::from(1u32 << shift),
        Timer::Pmu { .. } => 1.0,
        _ => 1e9 / timer_hz as f64 / f64::from(1u32 << shift),
    };
    (timer_hz, shift, units_per_tick)
}

/// Work out the run: `timer` paces the sampler at `place`, in the built image `elf_bytes`.
pub(crate) fn plan(
    args: &RunArgs,
    place: Place,
    timer: Timer,
    elf_bytes: &[u8],
    fw: &elf::Firmware,
) -> Result<Plan> {
    let (sink, live) = match place {
        Place::Board { sink, .. } => (sink, sink == wire::SINK_HOST),
        // The semihosting sink streams every full ring chunk, so any number of samples fits.
        Place::Qemu { .. } => {
            let live = args.live || args.duration.is_some();
            let sink = if live {
                wire::SINK_HOST
            } else {
                wire::SINK_SEMIHOSTING
            };
            (sink, live)
        }
    };
    // A live capture for a duration runs until then (no limit).
    let requested = match (args.samples, live && args.duration.is_some()) {
        (Some(n), _) => n,
        (None, true) => 0,
        (None, false) => DEFAULT_SAMPLES,
    };
    let (timer_hz, icount_shift, units_per_tick, period) = match place {
        Place::Qemu { machine, .. } => {
            let (hz, shift, per_tick) = qemu_clock(args, machine, timer);
            let period = match args.period {
                Some(p) => p.ticks(hz, per_tick).map_err(anyhow::Error::msg)?,
                None => (DEFAULT_PERIOD_INSTRUCTIONS / per_tick).round().max(2.0) as u64,
            };
            (hz, shift, per_tick, period)
        }
        // The core's cycles are the timer's ticks on a board.
        Place::Board { clock, .. } => (clock, 0, 1.0, board_period(args, clock)?),
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
    let laps = args.laps && matches!(place, Place::Qemu { .. });
    let (mode, hist_base, hist_shift) = match args.mode {
        _ if laps => (wire::MODE_OFF, 0, 0),
        crate::cli::Mode::Ring => (wire::MODE_RING, 0, 0),
        crate::cli::Mode::Hist => {
            let text = fw.text.context(
                "the firmware has no `__stext`/`__etext`: the code range for bins is unknown",
            )?;
            let (base, shift) = hist_layout(text, fw.hist_counters, args.bin_size)?;
            (wire::MODE_HIST, base, shift)
        }
    };
    // Embassy tasks kept by the runtime: each sample carries the task being polled unless
    // asked otherwise (the task table's sampled shares need it), where a tag can be recorded.
    let embassy_default = args.tag.is_none()
        && mode == wire::MODE_RING
        && args.stacks.is_none()
        && !fw.aarch64
        && !elf::thumb1_only(elf_bytes)
        && elf::keeps_task_statistics(elf_bytes);
    let (tag_kind, tag_addr) = match &args.tag {
        None if embassy_default => tag_for(fw.aarch64, &crate::spec::Tag::Api, elf_bytes)?,
        None => (wire::TAG_NONE, 0),
        Some(what) => tag_for(fw.aarch64, what, elf_bytes)?,
    };
    let stacks = args.stacks.is_some();
    let config = wire::Config {
        mode,
        hist_base,
        hist_shift,
        tag_kind,
        tag_addr,
        sink,
        priority: args.priority.unwrap_or(0),
        timer: timer_kind,
        reload,
        jitter_mask,
        limit: requested,
        seed: generator_state(args.seed),
        timer_base,
        timer_irq,
        stack_words: args.stacks.unwrap_or(0),
        frame_records: if stacks { DEFAULT_FRAME_RECORDS } else { 0 },
        stack_top: if stacks && fw.aarch64 && matches!(place, Place::Qemu { .. }) {
            stack_top(elf_bytes)?
        } else {
            0
        },
        late_ticks: lateness(place, timer, units_per_tick, elf_bytes),
        flags: if !fw.aarch64 && !elf::writes_process_stack(elf_bytes) {
            wire::CONFIG_MAIN_STACK_ONLY
        } else {
            0
        },
    };
    // Samples every N events share out the events, not the instructions.
    let unit = match (place, timer) {
        (Place::Board { .. }, _) => "cycles".to_owned(),
        (Place::Qemu { cpu, .. }, Timer::Pmu { event }) if event != CPU_CYCLES => {
            format!("{} events", event_name(cpu, event))
        }
        _ => "instructions".to_owned(),
    };
    let mut plan = Plan {
        config,
        timer_hz,
        units_per_tick,
        icount_shift,
        period,
        requested,
        live,
        unit,
        warnings: Vec::new(),
    };
    if let Place::Qemu { .. } = place
        && !laps
        && matches!(timer, Timer::SysTick | Timer::Device { .. })
    {
        plan.warnings
            .extend(plan.starving(handler_cost(fw.aarch64, stacks)));
    }
    Ok(plan)
}

/// `late_ticks`: how late a sample may be taken before it counts as held off.
fn lateness(place: Place, timer: Timer, units_per_tick: f64, elf_bytes: &[u8]) -> u32 {
    let device = !matches!(timer, Timer::SysTick);
    match (place, timer) {
        // SysTick at the core clock: ticks are cycles.
        (Place::Board { .. }, _) => late_ticks(1.0, false, true),
        (_, Timer::Pmu { .. }) => 0,
        // QEMU's STM32 timers do not restart their count at the update (it runs on past the
        // reload), so it says nothing of lateness there.
        (_, Timer::Device { kind, .. }) if kind == wire::TIMER_STM32 => 0,
        // No handler in the image but the sampler's: nothing can hold it off, and the check
        // (6 instructions a sample) is left out.
        (_, Timer::Device { irq, .. }) if !elf::may_hold_off(elf_bytes, Some(16 + irq)) => {
            late_ticks_set().unwrap_or(0)
        }
        (_, Timer::SysTick) if !elf::may_hold_off(elf_bytes, None) => late_ticks_set().unwrap_or(0),
        _ => late_ticks(units_per_tick, device, false),
    }
}

impl Plan {
    /// The mean period in the report's unit.
    pub fn mean_period(&self) -> f64 {
        self.period as f64 * self.units_per_tick
    }

    /// A period so short that the sampler's own handler takes a tenth of the run or more.
    fn starving(&self, handler: f64) -> Option<String> {
        let mean = self.mean_period();
        if mean >= 10.0 * handler {
            return None;
        }
        Some(format!(
            "a sample every {mean:.0} instructions, and sampler-rt's handler takes about \
             {handler:.0} of its own each time ({:.0} % of the run): the firmware {} and the \
             profile shows the sampler's pace. Leave at least {:.0} instructions between \
             samples (`--period {:.0}` ticks) to keep it to a tenth",
            (100.0 * handler / mean).min(100.0),
            if mean <= 2.0 * handler {
                "barely runs"
            } else {
                "runs slowly"
            },
            10.0 * handler,
            (10.0 * handler / self.units_per_tick).ceil()
        ))
    }

    /// What the run will do, in the words of its status line (`10000 samples, every 10000
    /// instructions on average`).
    pub fn describe(&self, duration: Option<std::time::Duration>) -> String {
        format!(
            "{}, every {:.0} {}{}",
            match (self.requested, duration) {
                (0, Some(d)) => format!("samples for {:.1} s", d.as_secs_f64()),
                (0, None) => "samples until the firmware stops".into(),
                (n, _) => format!("{n} samples"),
            },
            self.mean_period(),
            self.unit,
            if self.config.jitter_mask == 0 {
                ", constant period"
            } else {
                " on average"
            }
        )
    }

    /// What `run.json` says of the plan, over what the project says (`base`).
    pub fn meta(&self, base: RunMeta) -> RunMeta {
        RunMeta {
            timer_hz: self.timer_hz,
            unit: self.unit.clone(),
            units_per_tick: self.units_per_tick,
            icount_shift: self.icount_shift,
            requested_samples: self.requested,
            ..base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::machine;
    use clap::Parser;

    fn args(line: &str) -> RunArgs {
        let argv = std::iter::once("cargo-sample").chain(line.split_whitespace());
        crate::cli::Cli::try_parse_from(argv).unwrap().run
    }

    fn image() -> (Vec<u8>, elf::Firmware) {
        let bytes = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/hot-loops.elf"),
        )
        .unwrap();
        let fw = elf::inspect(&bytes).unwrap();
        (bytes, fw)
    }

    #[test]
    fn an_stm32_timer_given_by_address_runs_on_qemus_timer_clock() {
        let m = machine::find("netduinoplus2").unwrap();
        let timer = |s: &str| {
            crate::cmd::settings::resolve_timer(&s.parse().unwrap(), m, "cortex-m4").unwrap()
        };
        // TIM3, which cargo-sample does not name: the clock of QEMU's STM32 timers, 1 GHz, not
        // the 168 MHz core clock (a period then takes 1/6 of the instructions assumed).
        let (hz, _, _) = qemu_clock(&args(""), m, timer("stm32:0x40000400:29"));
        assert_eq!(hz, 1_000_000_000);
        // TIM2 given by address is TIM2.
        assert!(matches!(
            timer("stm32:0x40000000:28"),
            Timer::Device { known: Some(t), .. } if t.name == "tim2"
        ));
        assert_eq!(qemu_clock(&args(""), m, Timer::SysTick).0, 168_000_000);
    }

    fn mps2() -> Place<'static> {
        Place::Qemu {
            machine: machine::find("mps2-an385").unwrap(),
            cpu: "cortex-m3",
        }
    }

    #[test]
    fn the_default_run_samples_every_10000_instructions_on_systick() {
        let (bytes, fw) = image();
        let p = plan(&args(""), mps2(), Timer::SysTick, &bytes, &fw).unwrap();
        let m = machine::find("mps2-an385").unwrap();
        // 25 MHz SysTick at the machine's shift: a tick is 1e9 / 25e6 / 2^shift instructions.
        assert_eq!(p.icount_shift, m.default_icount_shift());
        let per_tick = 40.0 / f64::from(1u32 << p.icount_shift);
        assert_eq!(p.units_per_tick, per_tick);
        assert_eq!(p.period, (10_000.0 / per_tick).round() as u64);
        assert!((p.mean_period() - 10_000.0).abs() <= per_tick);
        // Jitter keeps the mean: reload + 1 + mask / 2 = period.
        let c = &p.config;
        let mean = f64::from(c.reload) + 1.0 + f64::from(c.jitter_mask) / 2.0;
        assert!((mean - p.period as f64).abs() <= 0.5, "{c:?}");
        assert!(c.jitter_mask > 0);
        assert_eq!(
            (c.mode, c.sink, c.timer, c.limit),
            (
                wire::MODE_RING,
                wire::SINK_SEMIHOSTING,
                wire::TIMER_SYSTICK,
                10_000
            )
        );
        assert_eq!(
            (p.unit.as_str(), p.requested, p.live),
            ("instructions", 10_000, false)
        );
        // hot-loops has no handler of its own: nothing can hold the sampler off, no check.
        assert!(!elf::may_hold_off(&bytes, None));
        assert_eq!(c.late_ticks, late_ticks_set().unwrap_or(0));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(
            p.describe(None),
            "10000 samples, every 10000 instructions on average"
        );
    }

    #[test]
    fn options_reach_the_configuration_block() {
        let (bytes, fw) = image();
        let p = plan(
            &args("--no-jitter --period 2000 -n 500 --priority 32 --seed 7 --stacks 16"),
            mps2(),
            Timer::SysTick,
            &bytes,
            &fw,
        )
        .unwrap();
        let c = &p.config;
        assert_eq!(c.jitter_mask, 0);
        assert_eq!(u64::from(c.reload) + 1, p.period);
        assert!((p.mean_period() - 2000.0).abs() <= p.units_per_tick);
        assert_eq!((c.limit, c.priority, c.seed), (500, 32, 8));
        assert_eq!(
            (c.stack_words, c.frame_records),
            (16, DEFAULT_FRAME_RECORDS)
        );
        assert!(p.describe(None).ends_with(", constant period"));
        // 2000 instructions against a stack handler of about 230: the run is warned of.
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("runs slowly"), "{}", p.warnings[0]);
    }

    #[test]
    fn live_runs_for_a_duration_take_samples_until_then() {
        let (bytes, fw) = image();
        let p = plan(&args("--duration 2s"), mps2(), Timer::SysTick, &bytes, &fw).unwrap();
        assert!(p.live);
        assert_eq!((p.requested, p.config.sink), (0, wire::SINK_HOST));
        assert_eq!(
            p.describe(Some(std::time::Duration::from_secs(2))),
            "samples for 2.0 s, every 10000 instructions on average"
        );
    }

    #[test]
    fn bins_laps_and_tags_set_the_mode() {
        let (bytes, fw) = image();
        // The fixture's sampler-rt was built without bins: the error says how to get them.
        let e = plan(&args("--mode hist"), mps2(), Timer::SysTick, &bytes, &fw).unwrap_err();
        assert!(e.to_string().contains("SAMPLER_RT_HIST_BINS"), "{e}");
        let binned = elf::Firmware {
            hist_counters: 2048,
            ..fw.clone()
        };
        let hist = plan(
            &args("--mode hist"),
            mps2(),
            Timer::SysTick,
            &bytes,
            &binned,
        )
        .unwrap();
        assert_eq!(hist.config.mode, wire::MODE_HIST);
        let (a, b) = fw.text.unwrap();
        let size = 1u64 << hist.config.hist_shift;
        assert!(u64::from(hist.config.hist_base) <= a);
        assert!(2047 * size >= b - u64::from(hist.config.hist_base));
        // The smallest bins that cover the code.
        assert!(2047 * (size / 2) < b - (a & !(size / 2 - 1)));
        let laps = plan(&args("--laps"), mps2(), Timer::SysTick, &bytes, &fw).unwrap();
        assert_eq!(laps.config.mode, wire::MODE_OFF);
        assert!(laps.warnings.is_empty());
        let tags = plan(
            &args("--tag exception"),
            mps2(),
            Timer::SysTick,
            &bytes,
            &fw,
        )
        .unwrap();
        assert_eq!(tags.config.tag_kind, wire::TAG_XPSR);
        let e = plan(
            &args("--tag symbol:NO_SUCH"),
            mps2(),
            Timer::SysTick,
            &bytes,
            &fw,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no symbol `NO_SUCH`"), "{e}");
    }

    #[test]
    fn a_device_timer_is_named_in_the_block_and_ticks_at_its_clock() {
        let (bytes, fw) = image();
        let m = machine::find("mps2-an385").unwrap();
        let place = Place::Qemu {
            machine: m,
            cpu: "cortex-m3",
        };
        let t = super::super::settings::resolve_timer(
            &"cmsdk:0x40000000:8".parse().unwrap(),
            m,
            "cortex-m3",
        )
        .unwrap();
        let p = plan(&args(""), place, t, &bytes, &fw).unwrap();
        assert_eq!(
            (p.config.timer, p.config.timer_base, p.config.timer_irq),
            (wire::TIMER_CMSDK, 0x4000_0000, 8)
        );
        assert_eq!(p.timer_hz, m.systick_hz);
    }

    #[test]
    fn a_board_counts_cycles_at_its_clock() {
        let (bytes, fw) = image();
        let board = Place::Board {
            clock: 64_000_000,
            sink: wire::SINK_HOST,
        };
        let p = plan(&args("--period 1ms"), board, Timer::SysTick, &bytes, &fw).unwrap();
        assert_eq!((p.unit.as_str(), p.units_per_tick), ("cycles", 1.0));
        assert_eq!(
            (p.timer_hz, p.icount_shift, p.period),
            (64_000_000, 0, 64_000)
        );
        assert_eq!(p.config.late_ticks, late_ticks(1.0, false, true));
        assert!(p.live);
        // A time needs the clock.
        let unknown = Place::Board {
            clock: 0,
            sink: wire::SINK_WRITER,
        };
        let e = plan(&args("--period 1ms"), unknown, Timer::SysTick, &bytes, &fw).unwrap_err();
        assert!(e.to_string().contains("--clock HZ"), "{e}");
        let serial = plan(&args(""), unknown, Timer::SysTick, &bytes, &fw).unwrap();
        assert_eq!(
            (serial.live, serial.requested, serial.config.sink),
            (false, DEFAULT_SAMPLES, wire::SINK_WRITER)
        );
    }

    #[test]
    fn pmu_periods_count_events_and_refuse_what_qemu_cannot_signal() {
        let (bytes, fw) = image();
        let virt = machine::find("virt").unwrap();
        let place = Place::Qemu {
            machine: virt,
            cpu: "cortex-a53",
        };
        let inst = Timer::Pmu { event: 0x08 };
        let e = check_timer(&args(""), "cortex-a53", inst).unwrap_err();
        assert!(e.to_string().contains("never signals"), "{e}");
        let cycles = Timer::Pmu { event: CPU_CYCLES };
        check_timer(&args("--truth"), "cortex-a53", cycles).unwrap();
        let p = plan(&args(""), place, cycles, &bytes, &fw).unwrap();
        assert_eq!((p.icount_shift, p.timer_hz), (0, 1_000_000_000));
        assert_eq!(p.unit, "instructions");
        assert_eq!(p.config.late_ticks, 0);
        let sw = Timer::Pmu {
            event: crate::analysis::events::SW_INCR,
        };
        let e = check_timer(&args("--truth"), "cortex-a53", sw).unwrap_err();
        assert!(e.to_string().contains("Drop `--truth`"), "{e}");
        let p = plan(&args(""), place, sw, &bytes, &fw).unwrap();
        assert!(p.unit.ends_with(" events"), "{}", p.unit);
    }
}
