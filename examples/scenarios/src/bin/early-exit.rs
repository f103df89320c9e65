//! Like hot-loops, but ends by itself after 200 rounds (about 10^6 instructions), long before
//! a default run has its samples: the samples taken so far must still reach the host.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, hot_c, sampling_start};

#[entry]
fn main() -> ! {
    sampling_start();
    for _ in 0..200 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    finish(0)
}
