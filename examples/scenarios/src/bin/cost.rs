//! Measures the sampler's cost per sample: the same workload runs once without sampling and
//! once with it; timer 1 (40 instructions a tick in QEMU) times both. Prints
//! `cost: base_ticks=B sampled_ticks=S samples=N` for `cargo-sample-bench` to read.
#![no_std]
#![no_main]

use cortex_m_rt::entry;

#[entry]
fn main() -> ! {
    scenarios::measure_cost()
}
