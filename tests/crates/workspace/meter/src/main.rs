//! Accumulates readings into energy and a running maximum.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::debug;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {}
}

#[inline(never)]
fn energy(readings: &[u16]) -> u64 {
    readings.iter().map(|&r| (r as u64) * (r as u64)).sum()
}

#[inline(never)]
fn peak(readings: &[u16]) -> u16 {
    readings.iter().copied().max().unwrap_or(0)
}

#[entry]
fn main() -> ! {
    let mut r = [0u16; 128];
    let mut sum = 0u64;
    for round in 0..200_000u32 {
        for (i, x) in r.iter_mut().enumerate() {
            *x = ((i as u32 * 31 + round) & 0xfff) as u16;
        }
        sum = sum.wrapping_add(energy(&r)).wrapping_add(peak(&r) as u64);
    }
    core::hint::black_box(sum);
    debug::exit(debug::EXIT_SUCCESS);
    loop {}
}
