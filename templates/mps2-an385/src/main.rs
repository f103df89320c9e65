#![no_std]
#![no_main]

use cortex_m_rt::entry;
use panic_halt as _;

#[unsafe(no_mangle)]
#[inline(never)]
fn busy(n: u32) -> u32 {
    let mut x = 0u32;
    for i in 0..n {
        x = core::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

#[entry]
fn main() -> ! {
    loop {
        core::hint::black_box(busy(1000));
    }
}
