//! A main loop paced by a timer: every TICK timer ticks it runs `control` and `filter`, and
//! waits in `wait_tick` for the rest (about 60 / 30 / 10 %). A sampling period equal to the
//! tick (or a multiple) sees the loop at the same phase every time.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{clock_start, finish, now, sampling_start, spin};

/// Ticks of the 25 MHz clock per loop iteration: 10 000 instructions in QEMU at the machine's
/// default `-icount shift=6` (64 ns an instruction).
const TICK: u32 = 16_000;

static mut NEXT_AT: u32 = 0;

#[unsafe(no_mangle)]
#[inline(never)]
fn wait_tick() {
    // SAFETY: only the main loop touches NEXT_AT.
    unsafe {
        while (now().wrapping_sub(NEXT_AT) as i32) < 0 {}
        NEXT_AT = NEXT_AT.wrapping_add(TICK);
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn control() {
    spin!(1000, "control")
}

#[unsafe(no_mangle)]
#[inline(never)]
fn filter() {
    spin!(333, "filter")
}

#[entry]
fn main() -> ! {
    clock_start();
    // SAFETY: before the loop starts.
    unsafe { NEXT_AT = now().wrapping_add(TICK) };
    sampling_start();
    for _ in 0..2_000_000u32 {
        wait_tick();
        control();
        filter();
    }
    finish(0)
}
