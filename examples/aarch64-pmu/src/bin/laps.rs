//! Lap timing on ARMv8-A (`cargo sample --laps`): the cycle counter around an empty region and
//! around the 2001-instruction loop.
#![no_std]
#![no_main]

use core::arch::asm;

use aarch64_pmu as _;
use sampler_rt::laps::Region;

static EMPTY: Region = Region::new("empty");
static LOOP: Region = Region::new("loop 1000");

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    for _ in 0..20 {
        EMPTY.measure(|| ());
        LOOP.measure(|| {
            // SAFETY: register-only arithmetic: `mov`, then 1000 × (`subs`, `b.ne`).
            unsafe {
                asm!(
                    "mov {n}, #1000",
                    "1:",
                    "subs {n}, {n}, #1",
                    "b.ne 1b",
                    n = out(reg) _,
                    options(nomem, nostack)
                )
            };
        });
    }
    sampler_rt::exit(0)
}
