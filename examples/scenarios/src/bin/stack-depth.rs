//! A known stack: `descend` calls itself 40 times, each level keeping a 64-byte array on the
//! stack, then the run ends. A short run (a few thousand instructions), for the main stack's
//! depth in an exact run against QEMU's own register log.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::entry;
use scenarios::{finish, sampling_start};

#[inline(never)]
fn descend(level: u32) -> u32 {
    let mut local = [0u32; 16];
    for (i, w) in local.iter_mut().enumerate() {
        *w = level ^ i as u32;
    }
    let below = if level == 0 {
        0
    } else {
        descend(black_box(level - 1))
    };
    black_box(&local).iter().sum::<u32>() + below
}

#[entry]
fn main() -> ! {
    sampling_start();
    let sum = descend(black_box(40));
    finish(if black_box(sum) == 0 { 1 } else { 0 })
}
