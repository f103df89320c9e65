//! The sampler paced by a timer the firmware drives itself (`sampler_rt::start_with_timer`):
//! CMSDK timer 1 here, through the three operations any timer offers — start with a period,
//! acknowledge its interrupt, load the next period. The program is the three-loop one
//! (`hot_a` 70 %, `hot_b` 20 %, `hot_c` 10 %).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, hot_c};

#[cfg(feature = "sample")]
mod timer {
    use core::ptr::write_volatile;

    use scenarios::TIMER1_BASE;

    const CTRL: usize = TIMER1_BASE;
    const VALUE: usize = TIMER1_BASE + 0x04;
    const RELOAD: usize = TIMER1_BASE + 0x08;
    const INTCLEAR: usize = TIMER1_BASE + 0x0C;
    /// Timer 1's interrupt.
    const IRQ: usize = 9;

    fn start(ticks: u32, priority: u8) {
        // SAFETY: CMSDK timer 1 and its NVIC entries belong to the sampler in this firmware.
        unsafe {
            write_volatile(CTRL as *mut u32, 0);
            write_volatile(RELOAD as *mut u32, ticks);
            write_volatile(VALUE as *mut u32, ticks);
            write_volatile(INTCLEAR as *mut u32, 1);
            write_volatile((0xE000_E400 + IRQ) as *mut u8, priority);
            write_volatile(0xE000_E100 as *mut u32, 1 << IRQ);
            // ENABLE | INTERRUPT ENABLE.
            write_volatile(CTRL as *mut u32, 0b1001);
        }
    }

    fn stop() {
        // SAFETY: as in `start`.
        unsafe {
            write_volatile(CTRL as *mut u32, 0);
            write_volatile(INTCLEAR as *mut u32, 1);
            write_volatile(0xE000_E180 as *mut u32, 1 << IRQ);
            write_volatile(0xE000_E280 as *mut u32, 1 << IRQ);
        }
    }

    pub static TIMER: sampler_rt::Timer = sampler_rt::Timer {
        start,
        stop,
        reload: RELOAD as u32,
        flag: INTCLEAR as u32,
        hz: 25_000_000,
    };

    sampler_rt::timer_interrupt!(TIMER1, ack = 1);
}

#[entry]
fn main() -> ! {
    #[cfg(feature = "sample")]
    sampler_rt::start_with_timer(&timer::TIMER);
    for _ in 0..2_000_000 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    finish(0)
}
