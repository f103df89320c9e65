//! Like hot-loops, but ends through semihosting's `exit` without `sampler_rt::flush()`, as
//! most examples of other projects do: QEMU exits at once and the samples in the firmware's
//! RAM go with it, unless the host read them while it ran (`--live`).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::debug;
use scenarios::{hot_a, hot_b, hot_c, sampling_start};

#[entry]
fn main() -> ! {
    sampling_start();
    for _ in 0..18_000 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    debug::exit(debug::EXIT_SUCCESS);
    #[allow(clippy::empty_loop)]
    loop {}
}
