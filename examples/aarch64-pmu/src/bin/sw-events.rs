//! Sampling on an event counter's overflow: `cargo sample --timer pmu:sw_incr --period 16`
//! samples every 16 software increments (on average; the period is jittered). `three` adds
//! three per call and `one` one, so three quarters of the samples belong to `three`: the
//! event-counter path (PMEVTYPER0, its overflow interrupt, the preset) checked in QEMU, which
//! signals the overflow of SW_INCR, written by the program, but of no counted event.
#![no_std]
#![no_main]

use aarch64_pmu::spin;

/// Three software increments, each followed by a little work (where the sample lands).
#[unsafe(no_mangle)]
#[inline(never)]
pub fn three() {
    for _ in 0..3 {
        sampler_rt::pmu::sw_incr();
        spin(20);
    }
}

/// One software increment, then the same work.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn one() {
    sampler_rt::pmu::sw_incr();
    spin(20);
}

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    for _ in 0..1_000_000u32 {
        three();
        one();
    }
    sampler_rt::exit(0)
}
