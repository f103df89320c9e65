//! A main loop that waits with a SysTick delay of its own (COUNTFLAG polled, no handler), the
//! way HAL delays do, on an STM32F405 (QEMU netduinoplus2): SysTick belongs to the firmware.
//! Between delays it runs `work_a` (3 parts) and `work_b` (1 part).
#![no_std]
#![no_main]

mod vectors;

use core::arch::asm;
use core::ptr::{read_volatile, write_volatile};

use cortex_m_rt::entry;
use cortex_m_semihosting::debug;

const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;

/// Wait `ticks` ticks of the core clock with SysTick, polling COUNTFLAG.
#[unsafe(no_mangle)]
#[inline(never)]
fn delay(ticks: u32) {
    // SAFETY: SysTick belongs to this firmware; nothing else programs it.
    unsafe {
        write_volatile(SYST_RVR, ticks - 1);
        write_volatile(SYST_CVR, 0);
        // ENABLE | CLKSOURCE (core clock), no interrupt.
        write_volatile(SYST_CSR, 0b101);
        while read_volatile(SYST_CSR) & (1 << 16) == 0 {}
        write_volatile(SYST_CSR, 0);
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn work_a() {
    for _ in 0..3000 {
        // SAFETY: a no-op (the comment keeps the two loops distinct).
        unsafe { asm!("nop @ work_a", options(nomem, nostack, preserves_flags)) };
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn work_b() {
    for _ in 0..1000 {
        // SAFETY: a no-op.
        unsafe { asm!("nop @ work_b", options(nomem, nostack, preserves_flags)) };
    }
}

#[entry]
fn main() -> ! {
    #[cfg(feature = "sample")]
    sampler_rt::start();
    for _ in 0..3000 {
        work_a();
        work_b();
        delay(100);
    }
    #[cfg(feature = "sample")]
    sampler_rt::flush();
    debug::exit(debug::EXIT_SUCCESS);
    loop {}
}

// TIM3 paces the sampler when asked by address (its status register is cleared by writing 0).
#[cfg(feature = "tim3")]
sampler_rt::timer_interrupt!(TIM3, ack = 0);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {}
}
