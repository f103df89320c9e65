//! Before anything runs: is the sampler wired into the image that was built?
//!
//! A link can drop the sampler without an error. With LTO, an application that defines its own
//! `SysTick` handler (RTIC's `systick_monotonic!`, a HAL's tick) wins over sampler-rt's, and the
//! vector table points at the application's handler; the run would then wait for samples that
//! never come. This module reads the vector table and the symbols of the built ELF and says
//! what happened, and what to do, before QEMU or a probe is started.

use anyhow::{Result, bail};
use object::{Object, ObjectSymbol, SymbolKind};

use crate::image::disasm;
use crate::image::symbolize::demangle;

/// The interrupt that paces the sampler in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacer {
    /// SysTick (exception 15): its vector must be sampler-rt's entry.
    SysTick,
    /// A device interrupt (`irq` from 0): its handler must continue into sampler-rt's entry.
    /// `timer` names the timer for messages.
    Device { irq: u32, timer: &'static str },
    /// ARMv8-A: sampler-rt installs its own vectors, or the firmware forwards its IRQs.
    A64,
}

/// The entry every Cortex-M sampling handler reaches.
const ENTRY: &str = "sampler_rt_entry";

/// The image's function symbols, `(start, end, demangled name)`, sorted by start.
fn functions(file: &object::File<'_>) -> Vec<(u64, u64, String)> {
    let mut v: Vec<(u64, u64, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text)
        .filter_map(|s| {
            let n = s.name().ok()?;
            if n.is_empty() || n.starts_with('$') {
                return None;
            }
            let a = s.address() & !1;
            Some((a, a + s.size().max(1), demangle(n)))
        })
        .collect();
    // A global alias and a local name at one address: prefer a name that says more than the
    // default handler's aliases.
    v.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.len().cmp(&b.2.len())));
    v
}

/// Names of the functions at exactly `addr` (aliases included).
fn names_at(funcs: &[(u64, u64, String)], addr: u64) -> Vec<&str> {
    funcs
        .iter()
        .filter(|f| f.0 == addr)
        .map(|f| f.2.as_str())
        .collect()
}

fn is_default_handler(names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| *n == "DefaultHandler" || *n == "DefaultHandler_")
}

/// The handler a vector points at, as a user would recognise it.
fn describe(names: &[&str], addr: u64) -> String {
    // Prefer the application's own spelling over an exception's alias (`SysTick`).
    let best = names
        .iter()
        .find(|n| n.contains("::"))
        .or_else(|| names.first())
        .copied();
    match best {
        Some(n) => format!("`{n}` ({addr:#x})"),
        None => format!("{addr:#x} (no symbol)"),
    }
}

/// Refuse an image whose sampling interrupt does not reach sampler-rt, saying which handler
/// owns the vector and what to do instead.
pub fn check(elf: &[u8], pacer: Pacer) -> Result<()> {
    let Ok(file) = object::File::parse(elf) else {
        return Ok(());
    };
    let funcs = functions(&file);
    let symbol = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address() & !1)
    };
    if pacer == Pacer::A64 {
        let own = symbol("sampler_rt_vectors").is_some();
        let forwarded = funcs
            .iter()
            .any(|f| f.2.ends_with("sampler_rt::a64::on_irq"));
        if !own && !forwarded {
            bail!(
                "sampler-rt's interrupt handling is not in the image: neither its vector table \
                 (`sampler_rt_vectors`, installed by `sampler_rt::start()`) nor \
                 `sampler_rt::on_irq` (called from the firmware's own IRQ handler after \
                 `start_keeping_vectors()`) was linked in. Call one of them when the sampling \
                 feature is on"
            );
        }
        return Ok(());
    }
    let vectors = crate::image::elf::vectors(elf);
    let vector = |n: u32| vectors.iter().find(|v| v.0 == n).map(|v| v.1 as u64);
    let (number, what) = match pacer {
        Pacer::SysTick => (15, "SysTick".to_owned()),
        Pacer::Device { irq, timer } => (16 + irq, format!("{timer}'s interrupt (IRQ {irq})")),
        Pacer::A64 => unreachable!(),
    };
    let rtic = funcs.iter().any(|f| f.2.contains("rtic"));
    let Some(entry) = symbol(ENTRY) else {
        let owner = match vector(number) {
            Some(a) if is_default_handler(&names_at(&funcs, a)) => {
                format!("the default handler ({a:#x})")
            }
            Some(a) => format!(
                "the application's handler {}",
                describe(&names_at(&funcs, a), a)
            ),
            None => "nothing".into(),
        };
        bail!(
            "sampler-rt's interrupt entry (`{ENTRY}`) is not in the image: the link dropped it. \
             {what}'s vector points at {owner}: the application has a handler of its own for \
             it, and the link kept that one (with LTO it does so without an error).{}",
            advice(pacer, rtic)
        );
    };
    let Some(handler) = vector(number) else {
        bail!(
            "the vector table has no entry for {what} (exception {number}): the table is \
             shorter than that. Is the device's interrupt table (`device.x`, the PAC's `rt` \
             feature) linked in?"
        );
    };
    let names = names_at(&funcs, handler);
    match pacer {
        Pacer::SysTick if handler == entry => Ok(()),
        Pacer::SysTick => bail!(
            "SysTick's vector points at {}, not at sampler-rt's handler: {}{}",
            describe(&names, handler),
            if is_default_handler(&names) {
                "sampler-rt's SysTick handler is not linked in (is sampler-rt's `systick` \
                 feature off?)."
                    .to_owned()
            } else {
                "the application has a SysTick handler of its own, and the link kept it over \
                 sampler-rt's (with LTO it does so without an error). Sampling there would also \
                 break the application's time base."
                    .to_owned()
            },
            advice(pacer, rtic)
        ),
        Pacer::Device { .. } => {
            let reaches_entry = |handler: u64| {
                // Aliases at one address may have no size (`SysTick` = `DefaultHandler`).
                let end = funcs
                    .iter()
                    .filter(|f| f.0 == handler)
                    .map(|f| f.1)
                    .max()
                    .filter(|&e| e > handler + 2)
                    .unwrap_or(handler + 64);
                disasm::Code::new(elf).is_ok_and(|mut code| {
                    code.function(handler as u32, end as u32)
                        .iter()
                        .any(|i| i.target == Some(entry as u32))
                })
            };
            // sampler-rt's handler standing in for `DefaultHandler` (no device crate).
            if names.contains(&"DefaultHandler") && reaches_entry(handler) {
                return Ok(());
            }
            if is_default_handler(&names) {
                bail!(
                    "{what} goes to the default handler: the sampler's handler for it is not in \
                     the image. Define it with `sampler_rt::cmsdk_timer_interrupt!(NAME)` (NAME \
                     as your device crate spells the vector) when the sampling feature is on"
                );
            }
            let end = funcs
                .iter()
                .find(|f| f.0 == handler)
                .map(|f| f.1)
                .unwrap_or(handler + 64);
            let reaches = disasm::Code::new(elf).is_ok_and(|mut code| {
                code.function(handler as u32, end as u32)
                    .iter()
                    .any(|i| i.target == Some(entry as u32))
            });
            if reaches || handler == entry {
                Ok(())
            } else {
                bail!(
                    "{what}'s vector points at {}, which does not continue into sampler-rt: the \
                     application uses that interrupt itself. Choose a timer the application \
                     leaves alone with `--timer`",
                    describe(&names, handler)
                )
            }
        }
        Pacer::A64 => Ok(()),
    }
}

/// Whom SysTick's vector points at when it is not sampler-rt's entry nor the default handler:
/// the application owns SysTick (`Some(its handler, described)`).
pub fn systick_owner(elf: &[u8]) -> Option<String> {
    let file = object::File::parse(elf).ok()?;
    let funcs = functions(&file);
    let entry = file
        .symbols()
        .find(|s| s.name() == Ok(ENTRY))
        .map(|s| s.address() & !1);
    let vectors = crate::image::elf::vectors(elf);
    let handler = vectors.iter().find(|v| v.0 == 15).map(|v| v.1 as u64)?;
    let names = names_at(&funcs, handler);
    if Some(handler) == entry || is_default_handler(&names) {
        return None;
    }
    Some(describe(&names, handler))
}

/// The first function outside sampler-rt whose code holds the address of a register in
/// `[lo, hi)` as a literal word: the firmware drives that peripheral itself (a SysTick delay
/// that polls COUNTFLAG, a timer used as a clock), even with no interrupt handler for it.
/// sampler-rt keeps its own register accesses in functions of its own (not inlined), so they
/// do not count. Both ways compilers put an address in a register are read: a literal word,
/// and (Thumb-2) a `movw`/`movt` pair.
pub fn code_refers_to(elf: &[u8], lo: u32, hi: u32) -> Option<String> {
    use object::ObjectSection;
    let file = object::File::parse(elf).ok()?;
    let funcs = functions(&file);
    let owner = |at: u64| -> Option<String> {
        let f = funcs
            .iter()
            .rev()
            .find(|f| f.0 <= at && at < f.1.max(f.0 + 1))
            .or_else(|| funcs.iter().rev().find(|f| f.0 <= at));
        match f {
            Some(f) if f.2.starts_with("sampler_rt") => None,
            Some(f) => Some(format!("`{}`", f.2)),
            None => Some(format!("the code at {at:#x}")),
        }
    };
    for section in file.sections() {
        if section.kind() != object::SectionKind::Text {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        let base = section.address();
        for (i, w) in data.chunks_exact(4).enumerate() {
            let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            if (lo..hi).contains(&word)
                && let Some(o) = owner(base + 4 * i as u64)
            {
                return Some(o);
            }
        }
        let half = |off: usize| -> Option<u16> {
            Some(u16::from_le_bytes([*data.get(off)?, *data.get(off + 1)?]))
        };
        for off in (0..data.len().saturating_sub(3)).step_by(2) {
            let Some((rd, high)) = mov_imm16(half(off), half(off + 2), 0xF2C0) else {
                continue;
            };
            // The `movw` that sets the low half, a few instructions before.
            let low = (2..=24).step_by(2).filter_map(|back| {
                let at = off.checked_sub(back)?;
                mov_imm16(half(at), half(at + 2), 0xF240).filter(|m| m.0 == rd)
            });
            if let Some((_, low)) = low.into_iter().next() {
                let value = (u32::from(high) << 16) | u32::from(low);
                if (lo..hi).contains(&value)
                    && let Some(o) = owner(base + off as u64)
                {
                    return Some(o);
                }
            }
        }
    }
    None
}

/// A Thumb-2 `movw` (`op` 0xF240) or `movt` (0xF2C0) with its register and 16-bit immediate.
fn mov_imm16(hw1: Option<u16>, hw2: Option<u16>, op: u16) -> Option<(u16, u16)> {
    let (hw1, hw2) = (hw1?, hw2?);
    if hw1 & 0xFBF0 != op || hw2 & 0x8000 != 0 {
        return None;
    }
    let imm =
        ((hw1 & 0xF) << 12) | (((hw1 >> 10) & 1) << 11) | (((hw2 >> 12) & 7) << 8) | (hw2 & 0xFF);
    Some(((hw2 >> 8) & 0xF, imm))
}

/// Which of the names at the default handler (`here`) is one of `names` spelled another way:
/// the same but for case and underscores (`Timer0` for `TIMER0`, `Timer0A` for `TIMER_0A`).
fn spelled_as(names: &[&str], here: &[&str]) -> Option<String> {
    let fold = |n: &str| -> String {
        n.chars()
            .filter(|c| *c != '_')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    here.iter()
        .find(|h| names.iter().any(|n| fold(n) == fold(h)))
        .map(|h| (*h).to_owned())
}

/// Whether device interrupt `irq`'s vector goes to the default handler (nothing handles it),
/// and which of `names` the image knows as an alias of the default handler (the spelling of
/// that vector in the device crate's `device.x`: `TIMER0`, or `Timer0` in a crate that spells
/// it so, as the same name but for case and underscores).
pub fn free_vector(elf: &[u8], irq: u32, names: &[&str]) -> Option<Option<String>> {
    let file = object::File::parse(elf).ok()?;
    let funcs = functions(&file);
    let vectors = crate::image::elf::vectors(elf);
    let handler = vectors
        .iter()
        .find(|v| v.0 == 16 + irq)
        .map(|v| v.1 as u64)?;
    let here = names_at(&funcs, handler);
    if !is_default_handler(&here) {
        return None;
    }
    let known = names
        .iter()
        .find(|n| file.symbols().any(|s| s.name() == Ok(**n)))
        .map(|n| (*n).to_owned())
        .or_else(|| spelled_as(names, &here));
    // A firmware without a device crate has no names for its interrupts: cortex-m-rt points
    // all of them at `DefaultHandler` (its `DefaultHandler_` unless the application defines
    // one). The sampler's handler can stand in for that one then. With a device crate, the
    // default handler carries the names of every unused interrupt: none of them is the
    // timer's when the firmware is built for another chip.
    const CORE: &[&str] = &[
        "DefaultHandler",
        "DefaultHandler_",
        "NonMaskableInt",
        "MemoryManagement",
        "BusFault",
        "UsageFault",
        "SecureFault",
        "SVCall",
        "DebugMonitor",
        "PendSV",
        "SysTick",
    ];
    let device_names = here.iter().any(|n| !CORE.contains(n));
    if known.is_none() && !device_names && here.contains(&"DefaultHandler_") {
        return Some(Some("DefaultHandler".to_owned()));
    }
    Some(known)
}

/// RAM left for the stack above the statics (cortex-m-rt's `_stack_start` down to its
/// `_stack_end`), and the bytes sampler-rt's ring takes; `None` without those symbols.
pub fn stack_room_bytes(elf: &[u8]) -> Option<(u64, u64)> {
    let file = object::File::parse(elf).ok()?;
    let sym = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| (s.address(), s.size()))
    };
    let top = sym("_stack_start")?.0;
    let bottom = sym("_stack_end").or_else(|| sym("__sheap"))?.0;
    let (_, ring) = sym("SAMPLER_RT_RING")?;
    Some((top.checked_sub(bottom)?, ring))
}

/// RAM left for the stack below 2 KiB, with sampler-rt's ring taking a share: a warning with
/// the numbers and a ring size that leaves room. cortex-m-rt puts the stack above the statics,
/// growing down towards them, with nothing to stop it.
pub fn stack_room(elf: &[u8]) -> Option<String> {
    const WANT: u64 = 8 << 10;
    let (free, ring) = stack_room_bytes(elf)?;
    if free >= 2 << 10 || ring == 0 {
        return None;
    }
    let slots = ring / 4;
    let fits = ring.saturating_sub(WANT - free.min(WANT)) / 4;
    let suggest = if fits >= 64 {
        1u64 << (63 - fits.leading_zeros())
    } else {
        0
    };
    Some(format!(
        "only {free} bytes of RAM are left for the stack above the statics, and sampler-rt's ring \
         takes {ring} ({slots} samples): a stack that grows deeper overwrites the ring, or the \
         ring the stack, without a fault. Build a smaller ring: `SAMPLER_RT_RING_SLOTS = \
         \"{suggest}\"` under `[env]` in the crate's .cargo/config.toml (every build then uses it)"
    ))
}

fn advice(pacer: Pacer, rtic: bool) -> String {
    match pacer {
        Pacer::SysTick => format!(
            " In QEMU, leave `--timer` out: cargo-sample then paces the sampler with a timer of \
             the machine the application leaves free (or name one, e.g. `--timer gptm0` on \
             lm3s6965evb). On a board, pace it with a timer of the chip through \
             `sampler_rt::start_with_timer` (docs/guide/timers.md, \"When SysTick is yours\"){}",
            if rtic {
                "; RTIC's SysTick monotonic (`systick_monotonic!`) keeps SysTick for the \
                 application"
            } else {
                ""
            }
        ),
        _ => " Choose a timer the application leaves free with `--timer`.".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_crate_may_spell_a_timers_vector_its_own_way() {
        let here = ["DefaultHandler", "Uart0Rx", "Timer0", "Timer_1A"];
        assert_eq!(spelled_as(&["TIMER0"], &here).as_deref(), Some("Timer0"));
        assert_eq!(
            spelled_as(&["TIMER_1A", "TIMER1A"], &here).as_deref(),
            Some("Timer_1A")
        );
        assert_eq!(spelled_as(&["TIMER2"], &here), None);
        assert_eq!(spelled_as(&["UART0"], &here), None);
    }

    #[test]
    fn the_fixture_is_wired_to_systick() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(path).unwrap();
        check(&data, Pacer::SysTick).unwrap();
        // The fixture's TIMER0 (IRQ 8) goes to the default handler.
        let e = check(
            &data,
            Pacer::Device {
                irq: 8,
                timer: "CMSDK timer",
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("default handler"), "{e}");
    }
}
