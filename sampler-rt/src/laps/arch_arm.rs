//! The lap counter on Cortex-M: DWT CYCCNT where the core has one, else SysTick.

use core::ptr::{addr_of, read_volatile, write_volatile};

use super::{COUNTER, SYSTICK_SPAN};
use crate::wire;

const DEMCR: *mut u32 = 0xE000_EDFC as *mut u32;
const DWT_CTRL: *mut u32 = 0xE000_1000 as *mut u32;
const DWT_CYCCNT: *mut u32 = 0xE000_1004 as *mut u32;
const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;

/// The address the counter is read from (a zero word when there is none).
static mut COUNTER_ADDR: u32 = 0;
static ZERO: u32 = 0;

#[inline(never)]
pub(super) fn choose_counter() -> u8 {
    // SAFETY: architected debug and SysTick registers of every ARMv7-M/ARMv8-M core (ARMv6-M
    // has no DWT cycle counter: the writes are ignored and CYCCNT reads zero there).
    unsafe {
        write_volatile(DEMCR, read_volatile(DEMCR) | 1 << 24);
        write_volatile(DWT_CTRL, read_volatile(DWT_CTRL) | 1);
        let a = read_volatile(DWT_CYCCNT);
        for _ in 0..8 {
            core::arch::asm!("nop", options(nomem, nostack, preserves_flags));
        }
        if read_volatile(DWT_CYCCNT) != a {
            return wire::LAP_COUNTER_CYCCNT;
        }
        let csr = read_volatile(SYST_CSR);
        if csr & 1 == 0 {
            // Free: run it from 0xFFFFFF on the core clock, without its interrupt.
            write_volatile(SYST_RVR, 0x00FF_FFFF);
            write_volatile(SYST_CVR, 0);
            write_volatile(SYST_CSR, 0b101);
            SYSTICK_SPAN = 1 << 24;
            return wire::LAP_COUNTER_SYSTICK;
        }
        if read_volatile(addr_of!(super::SYSTICK_SAMPLING))() {
            // The sampler reloads SysTick with random periods: no lap can be read from it.
            return wire::LAP_COUNTER_NONE;
        }
        // The application's SysTick: laps shorter than its period are fine.
        SYSTICK_SPAN = (read_volatile(SYST_RVR) & 0x00FF_FFFF) + 1;
        wire::LAP_COUNTER_SYSTICK
    }
}

/// Where `read` reads from, once the counter is chosen.
pub(super) fn set_address(counter: u8) {
    // SAFETY: written once, before any lap.
    unsafe {
        COUNTER_ADDR = match counter {
            wire::LAP_COUNTER_CYCCNT => DWT_CYCCNT as u32,
            wire::LAP_COUNTER_SYSTICK => SYST_CVR as u32,
            _ => addr_of!(ZERO) as u32,
        };
    }
}

/// The counter's raw value: one load from the counter's register, in assembly so that the
/// compiler neither merges two reads nor moves code across one; every lap then counts the
/// same instructions of its own (the address load), which the calibration measures.
#[inline(always)]
pub(super) fn read() -> u32 {
    let v: u32;
    // SAFETY: COUNTER_ADDR is a readable word (a counter register, or ZERO).
    unsafe {
        let a = read_volatile(addr_of!(COUNTER_ADDR));
        core::arch::asm!("ldr {v}, [{a}]", a = in(reg) a, v = lateout(reg) v,
            options(nostack, readonly, preserves_flags));
    }
    v
}

/// Ticks from `start` to `end`, if the counter can tell.
pub(super) fn elapsed(start: u32, end: u32) -> Option<u32> {
    // SAFETY: plain reads of values set once.
    unsafe {
        match COUNTER {
            wire::LAP_COUNTER_CYCCNT => Some(end.wrapping_sub(start)),
            wire::LAP_COUNTER_SYSTICK => {
                // SysTick counts down from RVR to 0, then reloads.
                let (s, e) = (start & 0x00FF_FFFF, end & 0x00FF_FFFF);
                Some(if s >= e { s - e } else { s + SYSTICK_SPAN - e })
            }
            _ => None,
        }
    }
}

/// The caller's return address, read first thing in a function that has made no call yet
/// (the link register still holds it).
#[inline(always)]
pub(super) fn return_address() -> u32 {
    let lr: u32;
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mov {}, lr", out(reg) lr, options(nomem, nostack, preserves_flags))
    };
    lr
}
