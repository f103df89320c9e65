//! Interrupts masked around part of the work (`msr daifset, #2` ... `msr daifclr, #2`): a
//! sampling interrupt that fires meanwhile waits, and lands on the instruction after the
//! unmask. The report says so, naming the masked region.
#![no_std]
#![no_main]

use core::arch::asm;

use aarch64_pmu::spin;

#[unsafe(no_mangle)]
#[inline(never)]
pub fn open_work() {
    spin(1000)
}

/// Work with IRQs masked: the sampler cannot see it.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn masked_work() {
    // SAFETY: masking and unmasking IRQs around plain work.
    unsafe { asm!("msr daifset, #2", options(nomem, nostack)) };
    spin(1000);
    unsafe { asm!("msr daifclr, #2", options(nomem, nostack)) };
}

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    for _ in 0..1_000_000u32 {
        open_work();
        masked_work();
    }
    sampler_rt::exit(0)
}
