//! Lap timing on ARMv8-A (`cargo sample --laps`): the cycle counter around an empty region and
//! around the 2001-instruction loop.
#![no_std]
#![no_main]

use aarch64_pmu::known_loop;
use sampler_rt::laps::Region;

static EMPTY: Region = Region::new("empty");
static LOOP: Region = Region::new("loop 1000");

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    for _ in 0..20 {
        EMPTY.measure(|| ());
        LOOP.measure(known_loop);
    }
    sampler_rt::exit(0)
}
