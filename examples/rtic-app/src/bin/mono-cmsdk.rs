//! `mono` for QEMU mps2-an385, whose CMSDK timers the sampler can read the count of: the same
//! application (RTIC's SysTick monotonic, left at priority 0 like every handler the
//! application does not give a priority, as urgent as the sampler), with the sampler paced by
//! CMSDK TIMER0 through the firmware's own handler, as on a chip cargo-sample does not know:
//! `cargo sample --release --bin mono-cmsdk --machine mps2-an385 --timer cmsdk:0x40000000:8`.
//! This device crate (lm3s6965's) calls interrupt 8 `I2C0`.
#![no_std]
#![no_main]

use panic_semihosting as _;

/// Ticks of the monotonic the application waits for in all.
const TICKS: u32 = 4000;

// The sampler's interrupt: TIMER0 is interrupt 8 of mps2-an385.
#[cfg(feature = "sample")]
sampler_rt::cmsdk_timer_interrupt!(I2C0);

include!("../mono_app.rs");
