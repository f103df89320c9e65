//! hot-loops in an application that logs through RTT (`rtt-target`, as most embedded Rust
//! applications do with it or `defmt-rtt`): its `_SEGGER_RTT` control block and channels live
//! beside the sampler's state and ring, which the host finds by their own symbols.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use rtt_target::{rprintln, rtt_init_print};
use scenarios::{finish, hot_a, hot_b, hot_c, sampling_start};

#[entry]
fn main() -> ! {
    rtt_init_print!();
    rprintln!("rtt-app: start");
    sampling_start();
    for round in 0..400u32 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
        if round % 100 == 0 {
            rprintln!("rtt-app: round {}", round);
        }
    }
    finish(0)
}
