//! Three loops with known shares: `hot_a` 700, `hot_b` 200, `hot_c` 100 iterations a round
//! (about 70 / 20 / 10 % of the time). Runs until the sampler has its samples, or 2 000 000
//! rounds (about 10^10 instructions).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, hot_c, sampling_start};

#[entry]
fn main() -> ! {
    sampling_start();
    run(2_000_000);
    finish(0)
}

#[inline(never)]
fn run(rounds: u32) {
    for _ in 0..rounds {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
}
