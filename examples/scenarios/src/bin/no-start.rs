//! A firmware that forgets `sampler_rt::start()`: it runs and ends, and no sample is taken.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a};

#[entry]
fn main() -> ! {
    for _ in 0..100 {
        hot_a(700);
    }
    finish(0)
}
