//! Two Embassy tasks share one function: `motor` calls `shared(600)`, `link` calls
//! `shared(300)` and `other(100)`, and each yields after every round, so the executor polls
//! them in turn. With `cargo sample --tag api` every sample carries the task being polled
//! (sampler-rt's `embassy` feature implements the executor's trace hooks), and the report splits
//! `shared` between the tasks: 2 : 1 of its loop iterations.
#![no_std]
#![no_main]

use core::arch::asm;

use cortex_m_semihosting::debug;
use embassy_executor::Spawner;
use embassy_futures::yield_now;

/// Spin `n` times (the label keeps the compiler from merging identical loops).
macro_rules! spin {
    ($n:expr, $label:literal) => {
        for _ in 0..$n {
            // SAFETY: a no-op instruction (the rest is an assembler comment).
            unsafe {
                asm!(
                    concat!("nop @ ", $label),
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
    };
}

#[unsafe(no_mangle)]
#[inline(never)]
fn shared(n: u32) {
    spin!(n, "shared")
}

#[unsafe(no_mangle)]
#[inline(never)]
fn other(n: u32) {
    spin!(n, "other")
}

#[embassy_executor::task]
async fn motor() {
    loop {
        shared(600);
        yield_now().await;
    }
}

#[embassy_executor::task]
async fn link() {
    loop {
        shared(300);
        other(100);
        yield_now().await;
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    #[cfg(feature = "sample")]
    sampler_rt::start();
    spawner.spawn(motor().unwrap());
    spawner.spawn(link().unwrap());
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        // SAFETY: waiting for an interrupt has no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}
