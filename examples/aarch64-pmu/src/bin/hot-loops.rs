//! Three loops with known shares (about 70, 20 and 10 % of the instructions), sampled by the
//! EL1 virtual timer: `cargo sample --bin hot-loops` profiles ARMv8-A firmware as it does
//! Cortex-M firmware.
#![no_std]
#![no_main]

use core::arch::asm;

use aarch64_pmu as _;

macro_rules! spin {
    ($n:expr, $label:literal) => {
        for _ in 0..$n {
            // SAFETY: a no-op (the rest is a comment that keeps the loops apart).
            unsafe {
                asm!(
                    concat!("nop // ", $label),
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
    };
}

#[unsafe(no_mangle)]
#[inline(never)]
pub fn hot_a(n: u32) {
    spin!(n, "hot_a")
}

#[unsafe(no_mangle)]
#[inline(never)]
pub fn hot_b(n: u32) {
    spin!(n, "hot_b")
}

#[unsafe(no_mangle)]
#[inline(never)]
pub fn hot_c(n: u32) {
    spin!(n, "hot_c")
}

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    for _ in 0..2_000_000u32 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    sampler_rt::exit(0)
}
