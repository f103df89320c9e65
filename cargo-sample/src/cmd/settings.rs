//! Settings read once from the command line and the firmware: the timer and its period, tags,
//! histogram layout, defaults. Everything here is checked before a build or a run starts.

use anyhow::{Context, Result, bail};
use sampler_rt::wire::{self};

use crate::cli::RunArgs;
use crate::exec::machine::{DeviceTimer, Machine};
use crate::image::elf;
use crate::project::Project;
use crate::project::firmware;
use crate::spec::{Tag, TimerChoice};
use crate::term;

/// Default number of samples.
pub const DEFAULT_SAMPLES: u32 = 10_000;

/// Default mean period in QEMU, in instructions.
pub const DEFAULT_PERIOD_INSTRUCTIONS: f64 = 10_000.0;

/// Frame records (the r7 chain) each sample keeps beyond its stack window with `--stacks`.
pub const DEFAULT_FRAME_RECORDS: u8 = 64;

/// The symbols an ARMv8-A linker script may name the top of the stack by.
const STACK_TOPS: [&str; 6] = [
    "__stack_top",
    "_stack_top",
    "__stack_start",
    "_stack_start",
    "__StackTop",
    "__stack_end",
];

/// The top of the stack of an ARMv8-A image (no vector table says it there): every window of
/// `--stacks` ends below it.
pub(crate) fn stack_top(elf_bytes: &[u8]) -> Result<u32> {
    // Scripts that name both ends (`__stack_start` and `__stack_end`) differ on which is the
    // top: the higher one is.
    STACK_TOPS
        .iter()
        .filter_map(|n| crate::image::elf::symbol_address(elf_bytes, n))
        .filter_map(|a| u32::try_from(a).ok())
        .max()
        .with_context(|| {
            format!(
                "`--stacks` on ARMv8-A needs the top of the stack, and the ELF has none of the \
                 symbols {}: define one in the linker script (`__stack_top = .;` after the \
                 stack), below 4 GiB",
                STACK_TOPS.map(|n| format!("`{n}`")).join(", ")
            )
        })
}

/// Default `--seed` (fixed, so that runs repeat exactly).
pub const DEFAULT_SEED: u32 = 0x2545_F490;

/// The generator's first state for `--seed`: xorshift needs a state other than 0, so every
/// seed moves up by one (the parser takes 0 ..= 2^32 - 2) and distinct seeds stay distinct.
pub fn generator_state(seed: Option<u32>) -> u32 {
    seed.unwrap_or(DEFAULT_SEED).wrapping_add(1)
}

/// How long after its timer expired the sampler reads the count when nothing held it off, in
/// instructions: 4 through SysTick's vector (the entry and the check), 9 through a device
/// timer's handler (which acknowledges the timer first). Measured in QEMU, where an
/// interrupt is taken at the instruction its timer expires on (`CARGO_SAMPLE_LATE_TICKS` sweeps
/// on mps2-an385: every sample late below 6 ticks on SysTick and 14 on TIMER1, none from
/// there on, at 1.6 ticks an instruction). The margin is 2 instructions: a handler that ends
/// sooner than that after a sample came due is not told apart, so the held-off row misses
/// that much of each handler it stands for.
const LATE_AFTER_INSTRUCTIONS: [f64; 2] = [6.0, 10.5];
/// The same on a board, in cycles: 12 to enter (6 tail-chained), the instructions with a
/// pipeline refill and a peripheral write, flash wait states, and a multi-cycle instruction
/// (a divide, a long `ldm`) finished first.
const LATE_AFTER_CYCLES: [f64; 2] = [48.0, 64.0];

/// `late_ticks` (see `wire::Config::late_ticks`) for a timer ticking every `units_per_tick`
/// instructions (QEMU) or cycles (a board, `board`): a sample taken later than this after its
/// timer expired was held off by code the sampler could not preempt. `device`: the timer's
/// handler acknowledges it before the entry (not SysTick).
pub fn late_ticks(units_per_tick: f64, device: bool, board: bool) -> u32 {
    if let Some(t) = late_ticks_set() {
        return t;
    }
    let units = if board {
        LATE_AFTER_CYCLES
    } else {
        LATE_AFTER_INSTRUCTIONS
    }[usize::from(device)];
    (units / units_per_tick.max(1e-6)).ceil().clamp(1.0, 1e9) as u32
}

/// `CARGO_SAMPLE_LATE_TICKS`, when set: the lateness limit in timer ticks (0: no check).
pub fn late_ticks_set() -> Option<u32> {
    std::env::var("CARGO_SAMPLE_LATE_TICKS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
}

/// The sampling timer of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    SysTick,
    /// A device timer: its kind (`wire::TIMER_*`), base address and interrupt; `known` when it
    /// is one of the machine's timers, whose interrupt handler cargo-sample has built in.
    Device {
        kind: u8,
        base: u32,
        irq: u32,
        known: Option<&'static DeviceTimer>,
    },
    /// ARMv8-A: PMU event counter 0 overflowing every period events.
    Pmu {
        event: u16,
    },
}

/// A profile of unoptimised code shows where debug builds spend their time, not where the
/// firmware that ships does.
pub(crate) fn warn_if_unoptimised(p: &Project, cargo: &crate::cli::CargoArgs) {
    let sel = crate::project::Selection::from(cargo);
    if firmware::unoptimised(p, &sel) {
        term::warn(format!(
            "profiling an unoptimised build (the `{}` profile): its time goes to code an \
             optimised build does not have. Add `--release` (or `--profile NAME`)",
            sel.profile_name()
        ));
    }
}

/// Refuse a `--tag` the run cannot honour before anything is built.
pub(crate) fn check_tag_before_build(args: &RunArgs, p: &Project) -> Result<()> {
    if args.tag.is_none() {
        return Ok(());
    }
    if args.laps {
        bail!("`--tag` records who was running with each sample; `--laps` takes no samples");
    }
    if args.mode == crate::cli::Mode::Hist {
        bail!(
            "`--tag` records a tag with each sample of a ring; bins have none (drop `--mode hist`)"
        );
    }
    if p.triple.starts_with("thumbv6m") || p.triple.starts_with("thumbv8m.base") {
        bail!(
            "`--tag` needs ARMv7-M or later (`{}` has no `ldrd`/`strd` for the sampler to \
             record a tag with each sample)",
            p.triple
        );
    }
    Ok(())
}

/// Refuse `--stacks` where the sampler cannot keep stack windows, before anything is built.
pub(crate) fn check_stacks_before_build(args: &RunArgs, p: &Project) -> Result<()> {
    let Some(words) = args.stacks else {
        return Ok(());
    };
    if words == 0 {
        bail!("`--stacks 0` keeps no stack: give a window of 1 to 255 words, or drop `--stacks`");
    }
    if args.laps || args.exact {
        bail!(
            "`--stacks` keeps the stack of each sample; {} takes no samples",
            if args.laps {
                "`--laps`"
            } else {
                "`--exact` (which follows every call by itself)"
            }
        );
    }
    if args.mode == crate::cli::Mode::Hist {
        bail!(
            "`--stacks` keeps the stack of each sample of a ring; bins have none (drop `--mode hist`)"
        );
    }
    if !p.triple.starts_with("thumb") && !p.triple.starts_with("aarch64") {
        bail!(
            "`--stacks` needs a Cortex-M or an ARMv8-A core (`{}`)",
            p.triple
        );
    }
    if matches!(&args.tag, Some(t) if *t != Tag::Exception) {
        bail!(
            "with `--stacks` each sample's tag is the exception that was running (`--tag \
             exception`, free: the stacked xPSR is kept anyway); other tags are not recorded"
        );
    }
    if args.board.method != crate::exec::probe::Method::Timer {
        bail!(
            "`--stacks` keeps what the sampler's interrupt sees of the stack; `--method dwt` \
             and `--method pcsr` sample without it (drop `--stacks`)"
        );
    }
    Ok(())
}

/// The interrupt that paces the sampler with `timer` in this image.
pub(crate) fn pacer(fw: &elf::Firmware, timer: Timer) -> crate::image::wiring::Pacer {
    use crate::image::wiring::Pacer;
    match timer {
        _ if fw.aarch64 => Pacer::A64,
        Timer::SysTick => Pacer::SysTick,
        Timer::Device { irq, kind, .. } => Pacer::Device {
            irq,
            timer: match kind {
                wire::TIMER_GPTM => "the general-purpose timer",
                wire::TIMER_NRF => "the TIMER",
                _ => "the CMSDK timer",
            },
        },
        Timer::Pmu { .. } => Pacer::A64,
    }
}

/// An ARMv8-A PMU event's name in the machine's CPU table (its number if none).
pub(crate) fn event_name(cpu: &str, event: u16) -> String {
    event_table(cpu)
        .map(|t| t.name(event))
        .unwrap_or_else(|_| format!("{event:#x}"))
}

/// The event table of the CPU that runs (`--cpu` or the runner's `-cpu`), else the Cortex-A53's
/// (the architectural events have the same numbers on every core).
pub(crate) fn event_table(cpu: &str) -> Result<crate::analysis::events::Table> {
    crate::analysis::events::table(cpu).or_else(|_| crate::analysis::events::table("cortex-a53"))
}

/// The timer `--timer` chose, on this machine and CPU.
pub fn resolve_timer(choice: &TimerChoice, m: &Machine, cpu: &str) -> Result<Timer> {
    let armv8 = m.targets.iter().any(|t| t.starts_with("aarch64"));
    match choice {
        TimerChoice::SysTick => Ok(Timer::SysTick),
        // On ARMv8-A the default (`systick`) is the generic timer, which may be named so.
        TimerChoice::Generic if armv8 => Ok(Timer::SysTick),
        TimerChoice::Generic => bail!(
            "`--timer generic` is ARMv8-A's generic timer; {} is a Cortex-M (use `systick` or \
             `cmsdk:BASE:IRQ`)",
            m.name
        ),
        TimerChoice::Pmu(_) if !armv8 => bail!(
            "`--timer pmu:EVENT` samples on ARMv8-A PMU overflows; {} is a Cortex-M",
            m.name
        ),
        TimerChoice::Pmu(event) => Ok(Timer::Pmu {
            event: event_table(cpu)?.find(event)?,
        }),
        TimerChoice::Cmsdk(None) => m
            .cmsdk_timer
            .map(|(base, irq)| Timer::Device {
                kind: wire::TIMER_CMSDK,
                base,
                irq,
                known: None,
            })
            .with_context(|| format!("{} has no CMSDK timer; give `cmsdk:BASE:IRQ`", m.name)),
        TimerChoice::Named(name) => match m.timers.iter().find(|t| t.name == name) {
            Some(t) => Ok(Timer::Device {
                kind: t.kind,
                base: t.base,
                irq: t.irq,
                known: Some(t),
            }),
            None if m.timers.is_empty() => bail!(
                "{} has no timer cargo-sample knows besides SysTick (`--timer {name}`)",
                m.name
            ),
            None => bail!(
                "{} has no timer `{name}`: its timers are {}",
                m.name,
                m.timers
                    .iter()
                    .map(|t| format!("`{}`", t.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        TimerChoice::Device(kind, base, irq) => {
            if !m.timers.iter().any(|t| t.kind == *kind) {
                bail!(
                    "{} has no {} timer (`--timer {choice}`); {}",
                    m.name,
                    crate::exec::machine::kind_name(*kind),
                    if m.timers.is_empty() {
                        "use `--timer systick`".to_owned()
                    } else {
                        format!(
                            "its timers are {}",
                            m.timers
                                .iter()
                                .map(|t| format!("`{}`", t.name))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                );
            }
            Ok(Timer::Device {
                kind: *kind,
                base: *base,
                irq: *irq,
                // The machine's own timer given by address is that timer.
                known: m
                    .timers
                    .iter()
                    .find(|t| t.kind == *kind && t.base == *base && t.irq == *irq),
            })
        }
        // A machine without CMSDK timers would hang before the firmware's first line, and the
        // run would end in a timeout that blames `start()`.
        TimerChoice::Cmsdk(Some(_)) if m.cmsdk_timer.is_none() => bail!(
            "{} has no CMSDK timer (they are on Arm's mps2/mps3 machines): use `--timer systick`",
            m.name
        ),
        TimerChoice::Cmsdk(Some((base, irq))) => Ok(Timer::Device {
            kind: wire::TIMER_CMSDK,
            base: *base,
            irq: *irq,
            known: None,
        }),
    }
}

/// The timer settings for a mean period of `period` ticks with a random span of `span` ticks
/// (rounded down to a power of two): `(reload, jitter_mask)`, with the mean kept at `period`.
///
/// The default span is the widest power of two the period allows (below twice the period):
/// successive periods then range from about half to one and a half times the mean, so that a
/// program loop longer than the period is still entered at a fresh point by every sample.
pub fn timer_settings(period: u64, span: Option<u32>) -> Result<(u32, u32)> {
    // reload = period - 1 - mask / 2 must stay at least 1.
    let widest = (2 * period).saturating_sub(3).max(1);
    let span = match span {
        Some(0) => 0,
        Some(s) => 1u64 << (63 - (s as u64).leading_zeros()),
        None => 1u64 << (63 - widest.leading_zeros()),
    };
    if span > widest {
        bail!(
            "a jitter span of {span} ticks is too wide for a period of {period} ticks: at most {} \
             (the span must stay below twice the period)",
            1u64 << (63 - widest.leading_zeros())
        );
    }
    let mask = span.saturating_sub(1);
    // reload + 1 + mask / 2 = period on average.
    let reload = period as f64 - 1.0 - mask as f64 / 2.0;
    let reload = reload.round().max(1.0) as u32;
    Ok((reload, mask as u32))
}

/// The period in cycles on a board: `--period` (a time or rate needs `--clock`), else the
/// default.
pub(crate) fn board_period(args: &RunArgs, clock: u64) -> Result<u64> {
    Ok(match args.period {
        Some(p) if clock == 0 && p.needs_clock() => bail!(
            "`--period {p}` is a time or a rate: give the core clock with `--clock HZ`, or the \
             period in cycles"
        ),
        // The core's cycles are the timer's ticks on a board.
        Some(p) => p.ticks(clock, 1.0).map_err(anyhow::Error::msg)?,
        None => DEFAULT_PERIOD_INSTRUCTIONS as u64,
    })
}

/// Where the firmware keeps its tag names (and its Embassy task table), for a host that reads
/// its memory.
pub(crate) fn names_at(
    elf_bytes: &[u8],
    fw: &elf::Firmware,
) -> Option<crate::capture::live::NamesAt> {
    let addr = elf::symbol_address(elf_bytes, wire::NAMES_SYMBOL)?;
    Some(crate::capture::live::NamesAt {
        addr: u32::try_from(addr).ok()?,
        wide: fw.aarch64,
        tasks: elf::symbol_range(elf_bytes, "SAMPLER_RT_TASKS")
            .filter(|_| !fw.aarch64)
            .and_then(|(a, len)| Some((u32::try_from(a).ok()?, u32::try_from(len).ok()?))),
        task_events: elf::symbol_range(elf_bytes, "SAMPLER_RT_TASK_EVENTS")
            .filter(|_| !fw.aarch64)
            .and_then(|(a, len)| Some((u32::try_from(a).ok()?, u32::try_from(len).ok()?))),
    })
}

/// [`resolve_tag`], for the firmware's architecture: ARMv8-A has no stacked xPSR, only words.
pub(crate) fn tag_for(aarch64: bool, tag: &Tag, elf: &[u8]) -> Result<(u8, u32)> {
    if aarch64 && *tag == Tag::Exception {
        bail!(
            "`--tag exception` reads the exception number Cortex-M stacks; on ARMv8-A tags are \
             words: `--tag api` (`sampler_rt::set_tag`), `--tag symbol:NAME` or `--tag 0xADDR`"
        );
    }
    resolve_tag(tag, elf)
}

/// `--tag` in this image, as `(TAG_*, address)`.
pub fn resolve_tag(tag: &Tag, elf_bytes: &[u8]) -> Result<(u8, u32)> {
    Ok(match tag {
        Tag::Exception => (wire::TAG_XPSR, 0),
        // Address 0: the firmware's own tag word, which sampler-rt finds itself.
        Tag::Api => (wire::TAG_WORD, 0),
        Tag::Symbol(name) => (
            wire::TAG_WORD,
            elf::symbol_address(elf_bytes, name)
                .map(|a| a as u32)
                .with_context(|| format!("the firmware has no symbol `{name}` to record"))?,
        ),
        Tag::Address(addr) => (wire::TAG_WORD, *addr),
    })
}

/// Where the bins start and how big they are: `(base, shift)`. The bins cover the code
/// `[start, end)` with `counters - 1` of them (the last counter counts samples outside);
/// without `--bin-size` the smallest size that covers the code is chosen.
pub fn hist_layout(text: (u64, u64), counters: u32, bin_size: Option<u32>) -> Result<(u32, u8)> {
    if counters < 2 {
        bail!(
            "the firmware's sampler-rt has no histogram counters: build it with SAMPLER_RT_HIST_BINS (a power of two, e.g. 2048) in the environment"
        );
    }
    let bins = u64::from(counters - 1);
    let fits = |shift: u32| {
        let size = 1u64 << shift;
        let base = text.0 & !(size - 1);
        (base, text.1 - base <= bins * size)
    };
    let shift = match bin_size {
        Some(b) => {
            if !b.is_power_of_two() || !(2..=65536).contains(&b) {
                bail!("`--bin-size {b}`: a bin is a power of two from 2 to 65536 bytes");
            }
            let shift = b.trailing_zeros();
            if !fits(shift).1 {
                let need = (1..=16).find(|&s| fits(s).1).map(|s| 1u32 << s);
                bail!(
                    "{bins} bins of {b} bytes cover {} bytes, but the code is {} bytes: use `--bin-size {}`, or rebuild with more bins (SAMPLER_RT_HIST_BINS)",
                    bins * u64::from(b),
                    text.1 - text.0,
                    need.map(|n| n.to_string()).unwrap_or_else(|| "65536".into())
                );
            }
            shift
        }
        None => (1..=16).find(|&s| fits(s).1).with_context(|| {
            format!(
                "{bins} bins cannot cover {} bytes of code: rebuild with more (SAMPLER_RT_HIST_BINS)",
                text.1 - text.0
            )
        })?,
    };
    Ok((fits(shift).0 as u32, shift as u8))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_stack_top_comes_from_a_symbol_or_the_error_says_which() {
        let elf = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/hot-loops.elf"),
        )
        .unwrap();
        // cortex-m-rt's `_stack_start`: the top of RAM of the fixture's machine.
        let top = stack_top(&elf).unwrap();
        assert_eq!(
            Some(top as u64),
            crate::image::elf::symbol_address(&elf, "_stack_start")
        );
        let e = stack_top(b"not an elf").unwrap_err().to_string();
        assert!(
            e.contains("`__stack_top`") && e.contains("linker script"),
            "{e}"
        );
    }

    use super::*;
    use crate::exec::machine;

    /// `--timer` as the command line reads it, resolved on the machine.
    fn parse_timer(s: &str, m: &Machine, cpu: &str) -> Result<Timer> {
        resolve_timer(&s.parse().map_err(anyhow::Error::msg)?, m, cpu)
    }

    #[test]
    fn jitter_keeps_the_mean_period() {
        let (reload, mask) = timer_settings(250, None).unwrap();
        assert_eq!(mask, 255);
        assert!((reload as f64 + 1.0 + mask as f64 / 2.0 - 250.0).abs() <= 0.5);
        assert_eq!(timer_settings(250, Some(0)).unwrap(), (249, 0));
        assert_eq!(timer_settings(250, Some(100)).unwrap().1, 63);
        assert_eq!(timer_settings(100, Some(128)).unwrap().1, 127);
        assert!(timer_settings(100, Some(256)).is_err());
        // Every default keeps reload >= 1.
        for p in 2..2000 {
            let (r, m) = timer_settings(p, None).unwrap();
            assert!(r >= 1, "period {p}");
            assert!(
                (r as f64 + 1.0 + m as f64 / 2.0 - p as f64).abs() <= 0.5,
                "period {p}"
            );
        }
    }

    #[test]
    fn bins_cover_the_code() {
        // 2047 bins: 2-byte bins cover 4094 bytes, not 5000; 4-byte bins do.
        assert_eq!(
            hist_layout((0x400, 0x400 + 5000), 2048, None).unwrap(),
            (0x400, 2)
        );
        // The base is aligned down to the bin size.
        assert_eq!(
            hist_layout((0x408, 0x1000), 2048, Some(16)).unwrap(),
            (0x400, 4)
        );
        let e = hist_layout((0x400, 0x400 + 5000), 2048, Some(2)).unwrap_err();
        assert!(e.to_string().contains("--bin-size 4"), "{e}");
        assert!(hist_layout((0, 100), 2048, Some(3)).is_err());
        assert!(hist_layout((0, 100), 0, None).is_err());
    }

    #[test]
    fn pmu_overflow_timers_name_their_event_on_armv8_a_only() {
        let virt = machine::find("virt").unwrap();
        assert_eq!(
            parse_timer("pmu:inst_retired", virt, "cortex-a53").unwrap(),
            Timer::Pmu { event: 0x08 }
        );
        assert_eq!(
            parse_timer("pmu:0x11", virt, "cortex-a53").unwrap(),
            Timer::Pmu { event: 0x11 }
        );
        assert!(parse_timer("pmu:no_such", virt, "cortex-a53").is_err());
        // Names come from the table of the CPU that runs: L1D_CACHE_REFILL_RD is the A72's.
        assert_eq!(
            parse_timer("pmu:l1d_cache_refill_rd", virt, "cortex-a72").unwrap(),
            Timer::Pmu { event: 0x42 }
        );
        assert!(parse_timer("pmu:l1d_cache_refill_rd", virt, "cortex-a53").is_err());
        assert_eq!(
            parse_timer("pmu:inst_retired", virt, "max").unwrap(),
            Timer::Pmu { event: 0x08 }
        );
        assert_eq!(
            parse_timer("generic", virt, "cortex-a53").unwrap(),
            Timer::SysTick
        );
        assert!(
            parse_timer(
                "generic",
                machine::find("mps2-an385").unwrap(),
                "cortex-a53"
            )
            .is_err()
        );
        let mps2 = machine::find("mps2-an385").unwrap();
        assert!(parse_timer("pmu:inst_retired", mps2, "cortex-a53").is_err());
    }

    #[test]
    fn timers() {
        let m = machine::find("mps2-an385").unwrap();
        assert_eq!(
            parse_timer("systick", m, "cortex-a53").unwrap(),
            Timer::SysTick
        );
        assert_eq!(
            parse_timer("cmsdk", m, "cortex-a53").unwrap(),
            Timer::Device {
                kind: wire::TIMER_CMSDK,
                base: 0x4000_0000,
                irq: 8,
                known: None,
            }
        );
        assert_eq!(
            parse_timer("cmsdk:0x40001000:9", m, "cortex-a53").unwrap(),
            Timer::Device {
                kind: wire::TIMER_CMSDK,
                base: 0x4000_1000,
                irq: 9,
                known: None,
            }
        );
        assert!(parse_timer("tim3", m, "cortex-a53").is_err());
        // lm3s6965evb has general-purpose timers, not CMSDK ones: refused, not left to hang.
        let lm3s = machine::find("lm3s6965evb").unwrap();
        let e = parse_timer("cmsdk:0x40030000:19", lm3s, "cortex-a53").unwrap_err();
        assert!(e.to_string().contains("has no CMSDK timer"), "{e}");
        assert!(parse_timer("cmsdk", machine::find("microbit").unwrap(), "cortex-a53").is_err());
        // Timers by name: the machine's own, or a list of them.
        match parse_timer("gptm1", lm3s, "cortex-a53").unwrap() {
            Timer::Device {
                kind, base, irq, ..
            } => assert_eq!((kind, base, irq), (wire::TIMER_GPTM, 0x4003_1000, 21)),
            t => panic!("{t:?}"),
        }
        let e = parse_timer("timer0", lm3s, "cortex-a53").unwrap_err();
        assert!(e.to_string().contains("`gptm0`, `gptm1`"), "{e}");
        let e = parse_timer("gptm:0x40030000:19", m, "cortex-a53").unwrap_err();
        assert!(e.to_string().contains("has no gptm timer"), "{e}");
        let nd = machine::find("netduinoplus2").unwrap();
        let e = parse_timer("timer0", nd, "cortex-a53").unwrap_err();
        assert!(
            e.to_string().contains("its timers are `tim2`, `tim5`"),
            "{e}"
        );
        let virt = machine::find("virt").unwrap();
        let e = parse_timer("timer0", virt, "cortex-a53").unwrap_err();
        assert!(e.to_string().contains("no timer cargo-sample knows"), "{e}");
    }
}
