//! PMU regions counted while the sampler runs: `cargo sample --bin pmu-timeline --format
//! firefox` draws each lap as a marker with its counts, and INST_RETIRED, CPU_CYCLES and the
//! cycle counter as counters over time. `empty` is the reading's own cost, `loop 1000` the
//! 2001-instruction loop, `loop 1000 x 10` ten of them; between rounds, uncounted work of
//! about the same length (`spin`), so a lap drawn in the wrong place shows.
#![no_std]
#![no_main]

use aarch64_pmu::{known_loop, spin};
use sampler_rt::pmu::{self, Region};

static EMPTY: Region = Region::new("empty");
static LOOP: Region = Region::new("loop 1000");
static TEN: Region = Region::new("loop 1000 x 10");

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    pmu::init(&[pmu::INST_RETIRED, pmu::CPU_CYCLES]);
    sampler_rt::start();
    for _ in 0..100 {
        EMPTY.measure(|| ());
        LOOP.measure(known_loop);
        TEN.measure(|| {
            for _ in 0..10 {
                known_loop();
            }
        });
        spin(10_000);
    }
    sampler_rt::exit(0)
}
