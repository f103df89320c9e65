//! Tags set by the firmware itself: each round runs `hot_a(600)` tagged "phase one", then
//! `hot_a(300)` and `hot_b(100)` tagged "phase two" (`sampler_rt::set_tag`, names given with
//! `sampler_rt::name_tag`). With `cargo sample --tag api` the report splits hot_a's time
//! between the phases, 2 : 1 of its loop iterations.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, sampling_start};

#[cfg(feature = "sample")]
fn phase(tag: u32) {
    sampler_rt::set_tag(tag);
}

#[cfg(not(feature = "sample"))]
fn phase(_tag: u32) {}

#[entry]
fn main() -> ! {
    #[cfg(feature = "sample")]
    {
        sampler_rt::name_tag(1, "phase one");
        sampler_rt::name_tag(2, "phase two");
    }
    sampling_start();
    for _ in 0..2_000_000u32 {
        phase(1);
        hot_a(600);
        phase(2);
        hot_a(300);
        hot_b(100);
    }
    finish(0)
}
