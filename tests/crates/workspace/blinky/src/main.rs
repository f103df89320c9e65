//! Toggles a pattern and counts its bits, forever until a round limit.
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
fn pattern(n: u32) -> u32 {
    let mut p = n;
    for _ in 0..64 {
        p = p.rotate_right(3) ^ 0x0f0f_0f0f;
    }
    p
}

#[inline(never)]
fn bits(mut p: u32) -> u32 {
    let mut c = 0;
    while p != 0 {
        c += p & 1;
        p >>= 1;
    }
    c
}

#[entry]
fn main() -> ! {
    let mut total = 0u32;
    for n in 0..2_000_000u32 {
        total = total.wrapping_add(bits(pattern(n)));
    }
    core::hint::black_box(total);
    debug::exit(debug::EXIT_SUCCESS);
    loop {}
}
