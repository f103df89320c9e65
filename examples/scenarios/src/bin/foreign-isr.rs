//! Another interrupt handler does a third of the work: the main loop pends IRQ31 after each
//! `hot_a(700)`, and the handler runs `isr_work(300)`. IRQ31 has priority 0x40: a sampler of
//! priority 0x40 (`--priority 0x40`) cannot preempt it and never sees `isr_work`; the default
//! sampler priority 0 can.
#![no_std]
#![no_main]

use core::ptr::write_volatile;
use cortex_m_rt::entry;
use scenarios::{finish, hot_a, sampling_start, spin};

const IRQ: u32 = 31;
const NVIC_ISER0: *mut u32 = 0xE000_E100 as *mut u32;
const NVIC_ISPR0: *mut u32 = 0xE000_E200 as *mut u32;
const NVIC_IPR: *mut u8 = 0xE000_E400 as *mut u8;

#[unsafe(no_mangle)]
#[inline(never)]
fn isr_work(n: u32) {
    spin!(n, "isr_work")
}

#[unsafe(no_mangle)]
extern "C" fn IRQ31() {
    isr_work(300);
}

#[entry]
fn main() -> ! {
    // SAFETY: NVIC registers; IRQ31 is unused by the machine.
    unsafe {
        write_volatile(NVIC_IPR.add(IRQ as usize), 0x40);
        write_volatile(NVIC_ISER0, 1 << IRQ);
    }
    sampling_start();
    for _ in 0..2_000_000u32 {
        hot_a(700);
        // SAFETY: pending the interrupt enabled above.
        unsafe { write_volatile(NVIC_ISPR0, 1 << IRQ) };
    }
    finish(0)
}
