//! Tags on ARMv8-A: the firmware tags its two phases (`sampler_rt::set_tag`, named with
//! `name_tag`); `cargo sample --tag api` splits the time by phase. Both phases call the same
//! `shared` function, so only the tag tells whose time it is.
#![no_std]
#![no_main]

use core::arch::asm;

use aarch64_pmu as _;

const FILTER: u32 = 1;
const CONTROL: u32 = 2;

#[unsafe(no_mangle)]
#[inline(never)]
pub fn shared(n: u32) {
    for _ in 0..n {
        // SAFETY: a no-op.
        unsafe { asm!("nop", options(nomem, nostack, preserves_flags)) };
    }
}

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::name_tag(FILTER, "filter");
    sampler_rt::name_tag(CONTROL, "control");
    sampler_rt::start();
    for _ in 0..2_000_000u32 {
        sampler_rt::set_tag(FILTER);
        shared(750);
        sampler_rt::set_tag(CONTROL);
        shared(250);
    }
    sampler_rt::exit(0)
}
