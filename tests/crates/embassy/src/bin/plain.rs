//! A second binary of the crate without an executor: a plain loop until the sample limit ends
//! the run. sampler-rt's Embassy statistics, on for the whole crate, keep nothing here.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::debug;

#[inline(never)]
fn mix(seed: u32) -> u32 {
    let mut x = seed;
    for i in 0..500u32 {
        x = x.rotate_left(7) ^ i.wrapping_mul(0x9E37_79B9);
    }
    x
}

#[entry]
fn main() -> ! {
    let mut x = 1;
    loop {
        x = mix(core::hint::black_box(x));
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
