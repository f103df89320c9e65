//! Two Embassy tasks: one integrates readings, one scales them; each yields after a round.
//! The application ends after a fixed number of rounds.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m_semihosting::debug;
use embassy_executor::Spawner;
use embassy_futures::yield_now;

static ROUNDS: AtomicU32 = AtomicU32::new(0);

#[inline(never)]
fn integrate(seed: u32) -> u32 {
    let mut x = seed;
    for i in 0..300u32 {
        x = x.wrapping_mul(747_796_405).wrapping_add(i);
    }
    x
}

#[inline(never)]
fn scale(seed: u32) -> u32 {
    let mut x = seed;
    for _ in 0..100 {
        x = (x >> 1) ^ (x.wrapping_neg() & 0xedb8_8320);
    }
    x
}

#[embassy_executor::task]
async fn integrator() {
    let mut v = 1;
    loop {
        v = integrate(v);
        // A load and a store: ARMv6-M has no atomic read-modify-write.
        let r = ROUNDS.load(Ordering::Relaxed);
        ROUNDS.store(r + 1, Ordering::Relaxed);
        if r == 400_000 {
            debug::exit(debug::EXIT_SUCCESS);
        }
        yield_now().await;
    }
}

#[embassy_executor::task]
async fn scaler() {
    let mut v = 7;
    loop {
        v = scale(v);
        yield_now().await;
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    spawner.spawn(integrator().unwrap());
    spawner.spawn(scaler().unwrap());
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {}
}
