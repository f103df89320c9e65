//! hot-loops in an application that logs through defmt, over RTT (`--features defmt-rtt`, as
//! most embedded Rust applications do) or semihosting (`--features defmt-semihosting`):
//! cargo-sample decodes its frames against the ELF that ran and prints them while sampling,
//! and keeps the raw frames.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
#[cfg(feature = "defmt-rtt")]
use defmt_rtt as _;
#[cfg(feature = "defmt-semihosting")]
use defmt_semihosting as _;
use scenarios::{finish, hot_a, hot_b, hot_c, sampling_start};

#[entry]
fn main() -> ! {
    defmt::info!("defmt-app: start");
    sampling_start();
    for round in 0..400u32 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
        if round % 100 == 0 {
            defmt::warn!("defmt-app: round {=u32}, {} left", round, 400 - round);
        }
    }
    defmt::debug!("defmt-app: done");
    finish(0)
}
