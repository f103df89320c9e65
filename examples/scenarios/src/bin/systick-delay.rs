//! A main loop that waits with a SysTick delay of its own (`scenarios::systick_delay`: SysTick
//! programmed and COUNTFLAG polled, no SysTick handler). The firmware owns SysTick without
//! owning its vector. Between delays it runs `work_a` (3 parts) and `work_b` (1 part).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, sampling_start, spin, systick_delay};

#[unsafe(no_mangle)]
#[inline(never)]
fn work_a() {
    spin!(3000, "work_a")
}

#[unsafe(no_mangle)]
#[inline(never)]
fn work_b() {
    spin!(1000, "work_b")
}

#[entry]
fn main() -> ! {
    sampling_start();
    for _ in 0..2000 {
        work_a();
        work_b();
        systick_delay(25);
    }
    finish(0)
}
