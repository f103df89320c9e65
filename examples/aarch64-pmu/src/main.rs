//! PMU regions on an ARMv8-A core in QEMU virt, the way seed 003's library counts them in TF-A:
//! an empty region (the reading's own cost), a loop of a known instruction count, software
//! increments, and a summing loop over memory (cache events, which QEMU does not count).
//! `cargo sample stat --events inst_retired,cpu_cycles,...` chooses the events per run; run by
//! itself it counts INST_RETIRED and CPU_CYCLES.
#![no_std]
#![no_main]

use core::hint::black_box;

use aarch64_pmu::known_loop;
use sampler_rt::pmu::{self, Region};

static EMPTY: Region = Region::new("empty");
static LOOP: Region = Region::new("loop 1000");
static INCR: Region = Region::new("sw_incr 10");
static SUM: Region = Region::new("sum 4096 words");

static mut DATA: [u64; 4096] = [0; 4096];

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    pmu::init(&[pmu::INST_RETIRED, pmu::CPU_CYCLES]);
    for _ in 0..4 {
        EMPTY.measure(|| ());
        LOOP.measure(known_loop);
        INCR.measure(|| {
            for _ in 0..10 {
                pmu::sw_incr();
            }
        });
        let s = SUM.measure(|| {
            // SAFETY: single-threaded; plain reads of a static array.
            let data = unsafe { &*core::ptr::addr_of!(DATA) };
            data.iter().fold(0u64, |a, &x| a.wrapping_add(x))
        });
        black_box(s);
    }
    pmu::finish(0)
}
