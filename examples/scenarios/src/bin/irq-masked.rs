//! A region with interrupts masked: `locked` spins 300 times between `irq_off` and `irq_on`,
//! then `hot_a` spins 700 times. Sampling interrupts that fire inside `locked` are taken right
//! after `cpsie i`, so their samples land in `irq_on`.
#![no_std]
#![no_main]

use core::arch::asm;
use cortex_m_rt::entry;
use scenarios::{finish, hot_a, sampling_start, spin};

#[unsafe(no_mangle)]
#[inline(never)]
fn irq_off() {
    // SAFETY: masking interrupts; `irq_on` unmasks them.
    unsafe { asm!("cpsid i", options(nomem, nostack)) };
}

#[unsafe(no_mangle)]
#[inline(never)]
fn irq_on() {
    // SAFETY: unmasking interrupts masked by `irq_off`.
    unsafe { asm!("cpsie i", options(nomem, nostack)) };
}

#[unsafe(no_mangle)]
#[inline(never)]
fn locked(n: u32) {
    irq_off();
    spin!(n, "locked");
    irq_on();
}

#[entry]
fn main() -> ! {
    sampling_start();
    for _ in 0..2_000_000u32 {
        locked(300);
        hot_a(700);
    }
    finish(0)
}
