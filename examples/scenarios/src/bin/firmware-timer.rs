//! The sampler paced by a timer the firmware drives itself (`sampler_rt::start_with_timer`):
//! CMSDK timer 1 here, through the three operations any timer offers — start with a period,
//! acknowledge its interrupt, load the next period. The program is the three-loop one
//! (`hot_a` 70 %, `hot_b` 20 %, `hot_c` 10 %).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, hot_c};

#[cfg(feature = "sample")]
sampler_rt::timer_interrupt!(TIMER1, ack = 1);

#[entry]
fn main() -> ! {
    #[cfg(feature = "sample")]
    sampler_rt::start_with_timer(&scenarios::timer1_pacer::TIMER);
    for _ in 0..2_000_000 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    finish(0)
}
