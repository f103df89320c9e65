//! Measures the sampler's cost per sample: the same workload runs once without sampling and
//! once with it; timer 1 (40 instructions a tick in QEMU) times both. Prints
//! `cost: base_ticks=B sampled_ticks=S samples=N` for `cargo-sample-bench` to read.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use scenarios::{clock_start, finish, hot_a, now, sampling_start};

const ROUNDS: u32 = 20_000;

#[inline(never)]
fn workload() -> u32 {
    let t0 = now();
    for _ in 0..ROUNDS {
        hot_a(1000);
    }
    now().wrapping_sub(t0)
}

#[entry]
fn main() -> ! {
    clock_start();
    let base = workload();
    sampling_start();
    #[cfg(feature = "sample")]
    let before = sampler_rt::samples_taken();
    let sampled = workload();
    #[cfg(feature = "sample")]
    let samples = sampler_rt::samples_taken() - before;
    #[cfg(not(feature = "sample"))]
    let samples = 0u32;
    hprintln!(
        "cost: base_ticks={} sampled_ticks={} samples={}",
        base,
        sampled,
        samples
    );
    finish(0)
}
