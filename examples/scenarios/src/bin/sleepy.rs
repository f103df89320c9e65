//! A firmware that idles: timer 1 interrupts every 20 000 instructions (32 000 ticks at the
//! machine's default `-icount shift=6`), the main loop does
//! about 6 000 instructions of work in `hot_a` and sleeps in `wfi` until the next interrupt.
//! About 70 % of the time the core is asleep; a sampling interrupt that finds it asleep wakes it
//! and is taken on the instruction after `wfi`.
#![no_std]
#![no_main]

use core::arch::asm;
use core::ptr::write_volatile;

use cortex_m_rt::entry;
use scenarios::{TIMER1_BASE, finish, hot_a, sampling_start};

/// Timer 1's interrupt (IRQ 9 on mps2-an385).
const IRQ: u32 = 9;
const NVIC_ISER0: *mut u32 = 0xE000_E100 as *mut u32;

static mut WAKEUPS: u32 = 0;

#[unsafe(no_mangle)]
extern "C" fn TIMER1() {
    // SAFETY: acknowledging timer 1's interrupt; WAKEUPS is only written here.
    unsafe {
        write_volatile((TIMER1_BASE + 0x0C) as *mut u32, 1);
        WAKEUPS = WAKEUPS.wrapping_add(1);
    }
}

#[entry]
fn main() -> ! {
    // SAFETY: CMSDK timer 1: reload 32 000 ticks (20 000 instructions), interrupt enabled.
    unsafe {
        write_volatile(TIMER1_BASE as *mut u32, 0);
        write_volatile((TIMER1_BASE + 8) as *mut u32, 32_000);
        write_volatile((TIMER1_BASE + 4) as *mut u32, 32_000);
        write_volatile(TIMER1_BASE as *mut u32, 0b1001);
        write_volatile(NVIC_ISER0, 1 << IRQ);
    }
    sampling_start();
    for _ in 0..2_000_000u32 {
        hot_a(2000);
        // SAFETY: sleeping until the next interrupt.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
    finish(0)
}
