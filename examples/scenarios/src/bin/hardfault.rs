//! Faults while sampling: hot-loops for 300 rounds, then a load from an address nothing
//! answers, which ends in the HardFault handler (cortex-m-rt's default spins there forever).
//! The samples taken before the fault must still reach the user, with the fault named.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{hot_a, hot_b, hot_c, sampling_start};

#[entry]
fn main() -> ! {
    sampling_start();
    for _ in 0..300 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    // SAFETY: deliberately not safe: a bus error.
    let v = unsafe { core::ptr::read_volatile(0xF000_0000 as *const u32) };
    scenarios::finish(v as i32)
}
