//! A main loop that waits with a SysTick delay of its own, the way `cortex_m::delay::Delay` and
//! many HALs do: SysTick is programmed and its COUNTFLAG polled, with no SysTick handler. The
//! firmware owns SysTick without owning its vector. Between delays it runs `work_a` (3 parts)
//! and `work_b` (1 part); the delay loop itself is `delay`.
#![no_std]
#![no_main]

use core::ptr::{read_volatile, write_volatile};

use cortex_m_rt::entry;
use scenarios::{finish, sampling_start, spin};

const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;

/// Wait `ticks` ticks of the core clock with SysTick, polling COUNTFLAG.
#[unsafe(no_mangle)]
#[inline(never)]
fn delay(ticks: u32) {
    // SAFETY: SysTick belongs to this firmware; nothing else programs it.
    unsafe {
        write_volatile(SYST_RVR, ticks - 1);
        write_volatile(SYST_CVR, 0);
        // ENABLE | CLKSOURCE (core clock), no interrupt.
        write_volatile(SYST_CSR, 0b101);
        while read_volatile(SYST_CSR) & (1 << 16) == 0 {}
        write_volatile(SYST_CSR, 0);
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn work_a() {
    spin!(3000, "work_a")
}

#[unsafe(no_mangle)]
#[inline(never)]
fn work_b() {
    spin!(1000, "work_b")
}

#[entry]
fn main() -> ! {
    sampling_start();
    for _ in 0..2000 {
        work_a();
        work_b();
        delay(25);
    }
    finish(0)
}
