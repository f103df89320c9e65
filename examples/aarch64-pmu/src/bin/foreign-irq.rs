//! A firmware with a timer interrupt of its own that lets `sampler_rt::start()` install the
//! sampler's vectors: its interrupt is taken by them, disabled unserved, and the report says
//! so (with what to do instead: `own-vectors`).
#![no_std]
#![no_main]

use aarch64_pmu::{irq, spin};

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    irq::start_timer(50_000);
    sampler_rt::start();
    for _ in 0..20_000u32 {
        spin(1000);
    }
    sampler_rt::exit(0)
}
