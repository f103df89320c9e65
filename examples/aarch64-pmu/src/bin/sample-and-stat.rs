//! One image for both `cargo sample` and `cargo sample stat`: it samples (when the host asked
//! for samples) and counts PMU events around a region, and ends the way a user writes it,
//! `flush()` then `pmu::finish`, which serves both runs.
#![no_std]
#![no_main]

use aarch64_pmu::known_loop;
use sampler_rt::pmu::{self, Region};

static LOOP: Region = Region::new("loop 1000");

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    pmu::init(&[pmu::INST_RETIRED]);
    for _ in 0..2000 {
        LOOP.measure(known_loop);
    }
    sampler_rt::flush();
    pmu::finish(0)
}
