//! One function, two callers in two contexts: the main loop calls `shared(700)`, then pends
//! IRQ30, whose handler calls `shared(300)`. Sampling with `--tag exception` splits `shared`'s
//! time between thread mode and the handler (7 : 3 of its loop iterations). IRQ30 has priority
//! 0x80, less urgent than the sampler, so the sampler sees inside it.
#![no_std]
#![no_main]

use core::ptr::write_volatile;

use cortex_m_rt::entry;
use scenarios::{finish, sampling_start, spin};

const IRQ: u32 = 30;
const NVIC_ISER0: *mut u32 = 0xE000_E100 as *mut u32;
const NVIC_ISPR0: *mut u32 = 0xE000_E200 as *mut u32;
const NVIC_IPR: *mut u8 = 0xE000_E400 as *mut u8;

#[unsafe(no_mangle)]
#[inline(never)]
fn shared(n: u32) {
    spin!(n, "shared")
}

#[unsafe(no_mangle)]
extern "C" fn IRQ30() {
    shared(300);
}

#[entry]
fn main() -> ! {
    // SAFETY: NVIC registers; IRQ30 is unused by the machine.
    unsafe {
        write_volatile(NVIC_IPR.add(IRQ as usize), 0x80);
        write_volatile(NVIC_ISER0, 1 << IRQ);
    }
    sampling_start();
    for _ in 0..2_000_000u32 {
        shared(700);
        // SAFETY: pending the interrupt enabled above.
        unsafe { write_volatile(NVIC_ISPR0, 1 << IRQ) };
    }
    finish(0)
}
