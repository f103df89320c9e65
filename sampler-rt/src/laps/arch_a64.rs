//! The lap counter on ARMv8-A: the PMU cycle counter, else the generic timer.

use core::arch::asm;
use core::ptr::{addr_of, addr_of_mut, read_volatile};

use crate::wire;

/// 1: read PMCCNTR_EL0, 0: CNTVCT_EL0.
static mut USE_PMCCNTR: u32 = 0;

pub(super) fn choose_counter() -> u8 {
    let dfr0: u64;
    // SAFETY: an identification register.
    unsafe { asm!("mrs {}, ID_AA64DFR0_EL1", out(reg) dfr0, options(nomem, nostack)) };
    let pmuver = (dfr0 >> 8) & 0xF;
    if pmuver == 0 || pmuver == 0xF {
        return wire::LAP_COUNTER_GENERIC;
    }
    // SAFETY: the cycle counter on (PMCR_EL0.E and LC, PMCNTENSET_EL0 bit 31), counting
    // at the level we run at and below (NSH for EL2); other counters are left as they are.
    unsafe {
        let el: u64;
        asm!("mrs {}, CurrentEL", out(reg) el, options(nomem, nostack));
        let filter: u64 = if (el >> 2) & 3 >= 2 { 1 << 27 } else { 0 };
        asm!(
            "msr pmccfiltr_el0, {f}",
            "mrs {t}, pmcr_el0",
            "orr {t}, {t}, #1",
            "orr {t}, {t}, #(1 << 6)",
            "msr pmcr_el0, {t}",
            "msr pmcntenset_el0, {c}",
            "isb",
            f = in(reg) filter,
            t = out(reg) _,
            c = in(reg) 1u64 << 31,
        );
        *addr_of_mut!(USE_PMCCNTR) = 1;
    }
    wire::LAP_COUNTER_PMCCNTR
}

pub(super) fn set_address(_counter: u8) {}

/// The counter's low 32 bits, read in one assembly block whose instructions are the same
/// at every lap.
#[inline(always)]
pub(super) fn read() -> u32 {
    let v: u64;
    // SAFETY: reading counters; USE_PMCCNTR is plain memory set once.
    unsafe {
        asm!(
            "ldr {w:w}, [{flag}]",
            "cbz {w:w}, 1f",
            "mrs {v}, pmccntr_el0",
            "b 2f",
            "1:",
            "mrs {v}, cntvct_el0",
            "2:",
            flag = in(reg) addr_of!(USE_PMCCNTR),
            w = out(reg) _,
            v = out(reg) v,
            options(nostack, readonly),
        );
    }
    v as u32
}

/// Ticks from `start` to `end` (both counters count up).
pub(super) fn elapsed(start: u32, end: u32) -> Option<u32> {
    // SAFETY: a plain read of a value set once.
    let chosen = unsafe { read_volatile(addr_of!(super::COUNTER)) };
    (chosen != wire::LAP_COUNTER_NONE).then(|| end.wrapping_sub(start))
}

/// The caller's return address (its low 32 bits), read first thing in a function that has made
/// no call yet (x30 still holds it).
#[inline(always)]
pub(super) fn return_address() -> u32 {
    let lr: u64;
    // SAFETY: reads a register.
    unsafe { asm!("mov {}, x30", out(reg) lr, options(nomem, nostack, preserves_flags)) };
    lr as u32
}
