//! One function, two callers in two contexts: the main loop calls `shared(700)`, then pends
//! IRQ30, whose handler calls `shared(300)`. Sampling with `--tag exception` splits `shared`'s
//! time between thread mode and the handler (7 : 3 of its loop iterations). IRQ30 has priority
//! 0x80, less urgent than the sampler, so the sampler sees inside it.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{enable_irq, finish, pend_irq, sampling_start, spin};

const IRQ: u32 = 30;

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
    // IRQ30 is unused by the machine.
    enable_irq(IRQ, 0x80);
    sampling_start();
    for _ in 0..2_000_000u32 {
        shared(700);
        pend_irq(IRQ);
    }
    finish(0)
}
