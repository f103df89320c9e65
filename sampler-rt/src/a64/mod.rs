//! PC sampling on ARMv8-A (aarch64, at EL1, EL2 or EL3): the virtual generic timer (or a PMU
//! counter's overflow) interrupts through a GICv2 (QEMU `virt`'s layout), and the handler
//! stores the interrupted PC (ELR of its level) in a ring. The common path is assembly and touches no FP/SIMD register; at the end of a chunk
//! (the ring's end, or the requested count) a Rust slow path, entered with every
//! caller-saved register saved (FP/SIMD too), streams the chunk through semihosting or ends
//! the run. PCs are stored as 32 bits: the image must live below 4 GiB (bare-metal images
//! on virt sit at 0x4000_0000).

mod dump;
mod stack;
mod state;
mod vectors;

use core::arch::asm;
use core::ptr::{addr_of, addr_of_mut, read_volatile};

use crate::wire::{self, Config};
use dump::*;
use state::*;

/// Start sampling with the configuration `cargo sample` placed in the image (ring mode; the
/// built-in defaults otherwise). Installs the sampler's exception vectors (VBAR of its level),
/// enables the sampling interrupt in the GIC (the virtual timer's, or the PMU's for
/// `TIMER_PMU`) and unmasks IRQs. At EL1, at EL2 (where it routes physical IRQs to EL2) and at
/// EL3 (SCR_EL3.IRQ routes them to EL3; the GIC's group 0 is signalled as IRQ).
pub fn start() {
    start_with(true)
}

/// Like [`start`], for firmware with interrupts of its own: the firmware keeps its exception
/// vectors (and at EL2/EL3 its routing of IRQs) and its IRQ handler calls [`on_irq`] with the
/// interrupt number it read from the GIC's IAR, before it writes the EOI. Samples are then PCs
/// only: `--stacks` needs the sampler's vectors (the register frame they push).
pub fn start_keeping_vectors() {
    start_with(false)
}

fn start_with(install_vectors: bool) {
    crate::sampler_rt_sampling_starts();
    let s = state();
    // SAFETY: single core; the timer interrupt is not enabled until the end.
    unsafe {
        if (*s).phase != IDLE {
            return;
        }
        let el = {
            let v: u64;
            asm!("mrs {}, CurrentEL", out(reg) v, options(nomem, nostack));
            (v >> 2) & 3
        };
        let found = read_config();
        let cfg = found.unwrap_or(Config {
            mode: wire::MODE_RING,
            reload: 10_000,
            jitter_mask: 0x3FFF,
            limit: RING_SLOTS as u32,
            seed: 0x9E37_79B9,
            ..Config::default()
        });
        (*s).config_found = found.is_some() as u8;
        (*s).sink = cfg.sink as u32;
        // (Read, so that the linker keeps the count for the host.)
        let bins = read_volatile(addr_of!(SAMPLER_RT_HIST_COUNTERS)) as usize;
        let usable = match cfg.mode {
            wire::MODE_RING => RING_SLOTS > 0,
            wire::MODE_HIST => bins > 0 && (1..=16).contains(&cfg.hist_shift),
            _ => false,
        };
        if !(1..=3).contains(&el) || !usable {
            (*s).phase = STOPPED;
            return;
        }
        let hist = configure(s, &cfg, install_vectors);
        next_chunk(s);
        (*s).phase = RUNNING;
        (*s).magic = wire::A64_STATE_MAGIC;
        install(el, hist, install_vectors);
        let w = |a: usize, v: u32| core::ptr::write_volatile(a as *mut u32, v);
        let r = |a: usize| core::ptr::read_volatile(a as *const u32);
        (*s).timer = cfg.timer;
        let irq = if cfg.timer == wire::TIMER_PMU {
            PMU_IRQ
        } else {
            VTIMER_IRQ
        };
        // Enable the distributor and CPU interface (keeping what the firmware enabled), the
        // interrupt at the most urgent priority, and a priority mask that lets it through.
        w(GICD, r(GICD) | 1);
        w(GICD + 0x100, r(GICD + 0x100) | 1 << irq);
        let prio = GICD + 0x400 + irq as usize;
        core::ptr::write_volatile(prio as *mut u8, 0);
        if install_vectors || r(GICC + 0x4) == 0 {
            w(GICC + 0x4, 0xFF);
        }
        w(GICC, r(GICC) | 1);
        arm(s, &cfg, el);
    }
}

/// The state for `cfg`: mode, period, limit, tags, and the ring or the bins (cleared).
/// Returns whether the sampler keeps bins.
///
/// # Safety
/// `s` is the sampler's state, not yet running (single core, the timer not enabled).
#[inline(always)]
unsafe fn configure(s: *mut State, cfg: &Config, install_vectors: bool) -> bool {
    // SAFETY: as the caller promises.
    unsafe {
        (*s).mode = cfg.mode;
        (*s).reload = cfg.reload.max(1);
        (*s).mask = cfg.jitter_mask;
        (*s).rng = if cfg.seed == 0 { 0x9E37_79B9 } else { cfg.seed };
        (*s).limit = cfg.limit;
        // A tagged ring holds (pc, tag) pairs: half as many samples.
        (*s).tag_addr = if cfg.tag_kind == wire::TAG_WORD {
            match cfg.tag_addr {
                0 => crate::tags::tag_word_address() as u32,
                a => a,
            }
        } else {
            0
        };
        (*s).before = 0;
        let hist = cfg.mode == wire::MODE_HIST;
        if hist {
            let bins = addr_of_mut!(BINS) as *mut u16;
            for i in 0..=HIST_BINS {
                core::ptr::write_volatile(bins.add(i), 0);
            }
            (*s).tag_addr = 0;
            (*s).wptr = bins as u64;
            (*s).ring = cfg.hist_base as u64;
            (*s).capacity = HIST_BINS as u32;
            (*s).sent = cfg.hist_shift as u32;
        } else {
            // Stacks (a bounded window needs the stack's top, and the sampler's own vectors,
            // whose frame the entry writer reads): STACKS entries, no word tag.
            if cfg.stack_words != 0 && cfg.stack_top != 0 && install_vectors {
                (*s).window = cfg.stack_words;
                (*s).records = cfg.frame_records;
                (*s).tag_addr = 0;
                STACK_TOP = cfg.stack_top as u64;
            }
            (*s).capacity = (RING_SLOTS / entry_words(s)) as u32;
            (*s).ring = addr_of_mut!(RING) as u64;
        }
        hist
    }
}

/// Point this exception level's vectors (or, at EL2/EL3, the IRQs' routing too) at the
/// sampler's, unless the firmware keeps its own.
///
/// # Safety
/// Called once, at start, before the sampler's interrupt is enabled.
#[inline(always)]
unsafe fn install(el: u64, hist: bool, install_vectors: bool) {
    // SAFETY: as the caller promises; the vector tables are the sampler's own.
    unsafe {
        // The vectors of the mode: their IRQ entries go to the ring's or the bins' handler.
        let vectors: u64;
        // (`adrp` and `add`: the tables may lie more than `adr`'s 1 MiB away.)
        if hist {
            asm!(
                "adrp {v}, sampler_rt_vectors_hist",
                "add {v}, {v}, :lo12:sampler_rt_vectors_hist",
                v = out(reg) vectors,
                options(nomem, nostack)
            );
        } else {
            asm!(
                "adrp {v}, sampler_rt_vectors",
                "add {v}, {v}, :lo12:sampler_rt_vectors",
                v = out(reg) vectors,
                options(nomem, nostack)
            );
        }
        if !install_vectors {
            // The firmware's vectors and routing stay.
        } else if el == 3 {
            // Take IRQs at EL3 (SCR_EL3.IRQ), where the sampler's vectors are.
            asm!(
                "msr vbar_el3, {v}",
                "mrs {t}, scr_el3",
                "orr {t}, {t}, #(1 << 1)",
                "msr scr_el3, {t}",
                "isb",
                v = in(reg) vectors,
                t = out(reg) _,
            );
        } else if el == 2 {
            // Take physical IRQs at EL2 (HCR_EL2.IMO), where the sampler's vectors are.
            asm!(
                "msr vbar_el2, {v}",
                "mrs {t}, hcr_el2",
                "orr {t}, {t}, #(1 << 4)",
                "msr hcr_el2, {t}",
                "isb",
                v = in(reg) vectors,
                t = out(reg) _,
            );
        } else {
            asm!("msr vbar_el1, {v}", "isb", v = in(reg) vectors);
        }
    }
}

/// Start the pacing counter: the PMU's cycle counter, event counter 0, or the virtual timer;
/// then unmask IRQs.
///
/// # Safety
/// Called once, at start, after the GIC lets the interrupt through.
#[inline(always)]
unsafe fn arm(s: *mut State, cfg: &Config, el: u64) {
    // SAFETY: as the caller promises.
    unsafe {
        // The PMU filter that counts at this level: NSH for EL2; at EL3 the event counters also
        // need MDCR_EL3.SPME (the cycle counter counts there unless PMCR.DP).
        let filter: u64 = if el == 2 { 1 << 27 } else { 0 };
        if el == 3 {
            asm!(
                "mrs {t}, mdcr_el3",
                "orr {t}, {t}, #(1 << 17)",
                "msr mdcr_el3, {t}",
                t = out(reg) _,
            );
        }
        let event = cfg.timer_base as u64 & 0xFFFF;
        if cfg.timer == wire::TIMER_PMU && event == wire::PMU_CPU_CYCLES as u64 {
            // The cycle counter (64 bits, PMCR_EL0.LC) counts from -(period) up to its overflow.
            let period = (*s).reload as u64 + 1;
            asm!(
                "msr pmccfiltr_el0, {filter}",
                "msr pmccntr_el0, {cnt}",
                "msr pmovsclr_el0, {bit}",
                "msr pmintenset_el1, {bit}",
                "msr pmcntenset_el0, {bit}",
                "mrs {t}, pmcr_el0",
                "orr {t}, {t}, #(1 << 6)",
                "orr {t}, {t}, #1",
                "msr pmcr_el0, {t}",
                "isb",
                "msr daifclr, #2",
                filter = in(reg) filter,
                cnt = in(reg) period.wrapping_neg(),
                bit = in(reg) 1u64 << 31,
                t = out(reg) _,
            );
        } else if cfg.timer == wire::TIMER_PMU {
            // Counter 0 counts the event from -(period) up to its overflow.
            let period = (*s).reload as u64 + 1;
            if event == 0 {
                crate::pmu::sampler_counts_sw_incr();
            }
            asm!(
                "msr pmselr_el0, xzr",
                "isb",
                "msr pmxevtyper_el0, {ev}",
                "msr pmxevcntr_el0, {cnt}",
                "msr pmovsclr_el0, {one}",
                "msr pmintenset_el1, {one}",
                "msr pmcntenset_el0, {one}",
                "mrs {t}, pmcr_el0",
                "orr {t}, {t}, #1",
                "msr pmcr_el0, {t}",
                "isb",
                "msr daifclr, #2",
                ev = in(reg) event | filter,
                cnt = in(reg) (period as u32).wrapping_neg() as u64,
                one = in(reg) 1u64,
                t = out(reg) _,
            );
        } else {
            asm!(
                "msr cntv_tval_el0, {t}",
                "msr cntv_ctl_el0, {one}",
                "isb",
                "msr daifclr, #2",
                t = in(reg) (*s).reload as u64,
                one = in(reg) 1u64,
            );
        }
    }
}

/// The sampler's part of the firmware's own IRQ handler (after [`start_keeping_vectors`]):
/// `intid` is what the handler read from GICC_IAR. Returns `true` when the interrupt was the
/// sampler's: it has taken its sample (the PC in ELR of this level) and set up the next one,
/// and the firmware only writes the EOI. Call it before IRQs are unmasked again in the handler
/// (ELR must still hold the interrupted PC).
pub fn on_irq(intid: u32) -> bool {
    let s = state();
    // SAFETY: in the firmware's IRQ handler, which the sampling interrupt cannot preempt.
    unsafe {
        let mine = if (*s).timer == wire::TIMER_PMU {
            PMU_IRQ
        } else {
            VTIMER_IRQ
        };
        if intid & 0x3FF != mine || (*s).phase != RUNNING {
            return false;
        }
        let pc: u64;
        let el = {
            let v: u64;
            asm!("mrs {}, CurrentEL", out(reg) v, options(nomem, nostack));
            (v >> 2) & 3
        };
        match el {
            3 => asm!("mrs {}, elr_el3", out(reg) pc, options(nomem, nostack)),
            2 => asm!("mrs {}, elr_el2", out(reg) pc, options(nomem, nostack)),
            _ => asm!("mrs {}, elr_el1", out(reg) pc, options(nomem, nostack)),
        }
        // The same steps as the vectors' fast path: store (or count), next period, chunk end.
        if (*s).mode == wire::MODE_HIST {
            let i = ((pc as u32).wrapping_sub((*s).ring as u32) >> (*s).sent).min((*s).capacity);
            let bin = ((*s).wptr as *mut u16).add(i as usize);
            let n = read_volatile(bin);
            if n != u16::MAX {
                core::ptr::write_volatile(bin, n + 1);
            }
        } else {
            core::ptr::write_volatile((*s).wptr as *mut u32, pc as u32);
            (*s).wptr += 4;
        }
        if (*s).tag_addr != 0 {
            let tag = read_volatile((*s).tag_addr as usize as *const u32);
            core::ptr::write_volatile((*s).wptr as *mut u32, tag);
            (*s).wptr += 4;
        }
        let mut r = (*s).rng;
        r ^= r << 13;
        r ^= r >> 17;
        r ^= r << 5;
        (*s).rng = r;
        let next = (r & (*s).mask).wrapping_add((*s).reload);
        if (*s).timer != wire::TIMER_PMU {
            asm!("msr cntv_tval_el0, {}", "isb", in(reg) next as u64, options(nostack));
        } else {
            let preset = (next as u64 + 1).wrapping_neg();
            let ovf: u64;
            asm!("mrs {}, pmovsclr_el0", out(reg) ovf, options(nomem, nostack));
            if ovf & 1 << 31 != 0 {
                asm!(
                    "msr pmccntr_el0, {v}",
                    "msr pmovsclr_el0, {bit}",
                    "isb",
                    v = in(reg) preset,
                    bit = in(reg) 1u64 << 31,
                    options(nostack),
                );
            } else {
                asm!(
                    "msr pmselr_el0, xzr",
                    "isb",
                    "msr pmxevcntr_el0, {v}",
                    "msr pmovsclr_el0, {bit}",
                    "isb",
                    v = in(reg) preset,
                    bit = in(reg) 1u64,
                    options(nostack),
                );
            }
        }
        (*s).remaining -= 1;
        if (*s).remaining == 0 {
            sampler_rt_a64_slow();
        }
        true
    }
}

/// Samples taken so far.
pub fn samples_taken() -> u32 {
    taken(state())
}

/// The samples taken so far while the sampler runs (`None` before it starts and after it stops).
pub(crate) fn running_seq() -> Option<u32> {
    let s = state();
    // SAFETY: a plain read of a word the sampler updates atomically.
    let phase = unsafe { read_volatile(addr_of!((*s).phase)) };
    (phase == RUNNING).then(samples_taken)
}

/// Stop sampling and send the samples (call before the firmware ends by itself). With a host
/// reading the ring (a probe, QEMU's monitor), wait a bounded time for it to read the last ones.
pub fn flush() {
    let s = state();
    // SAFETY: IRQs masked while the state changes.
    unsafe {
        asm!("msr daifset, #2");
        stop_timers();
        if (*s).phase == RUNNING {
            (*s).phase = STOPPED;
        }
        if (*s).sink == wire::SINK_SEMIHOSTING as u32 && (*s).phase == STOPPED {
            send_dump(s, wire::STOP_FIRMWARE);
        }
        if (*s).sink == wire::SINK_HOST as u32 {
            let sink = addr_of!((*s).sink);
            crate::host_wait::wait_while_host_reads(
                || read_volatile(sink) == wire::SINK_HOST as u32,
                addr_of!((*s)._pad).cast::<u8>(),
            );
        }
    }
}

/// Send the samples and end the program through semihosting with `code`. In a
/// `cargo sample stat` run of a firmware that counts regions (the sampler is off then) this is
/// [`crate::pmu::finish`]: one ending serves an image that is both sampled and counted.
pub fn exit(code: i32) -> ! {
    if crate::pmu::stat_run() && crate::pmu::counting() {
        crate::pmu::finish(code)
    }
    flush();
    crate::semihosting::exit(code)
}
