//! Two loops, 3:1, on a Cortex-M0: `m0_heavy` spins 750 times a round and `m0_light` 250,
//! half of them called from `m0_round` and half from `main` (for call stacks: `m0_light`'s
//! callers split 1:1, `m0_round` holds 7/8 of the time).
#![no_std]
#![no_main]

use core::arch::asm;
use cortex_m_rt::entry;
use cortex_m_semihosting::debug;

#[unsafe(no_mangle)]
#[inline(never)]
fn m0_heavy(n: u32) {
    for _ in 0..n {
        // SAFETY: a no-op (the comment keeps the two loops distinct).
        unsafe { asm!("nop @ heavy", options(nomem, nostack, preserves_flags)) };
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn m0_light(n: u32) {
    for _ in 0..n {
        // SAFETY: a no-op.
        unsafe { asm!("nop @ light", options(nomem, nostack, preserves_flags)) };
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn m0_round() {
    m0_heavy(core::hint::black_box(750));
    m0_light(core::hint::black_box(125));
}

#[entry]
fn main() -> ! {
    #[cfg(feature = "sample")]
    sampler_rt::start();
    for _ in 0..4_000_000u32 {
        m0_round();
        m0_light(core::hint::black_box(125));
    }
    #[cfg(feature = "sample")]
    sampler_rt::flush();
    debug::exit(debug::EXIT_SUCCESS);
    loop {}
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {}
}
