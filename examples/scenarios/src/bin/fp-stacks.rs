//! Floating-point code under the sampler, for a core with an FPU (build for
//! `thumbv7em-none-eabihf`; QEMU's mps2-an386, a Cortex-M4F): the interrupted code has used
//! the FPU, so the core stacks extended exception frames (26 words, and a padding word when
//! the stack was not 8-aligned), and the interrupt it takes below them (IRQ30, also using the
//! FPU) nests a second one. Stacks must unwind through both to the reset handler.
//!
//! - `filter` calls `mac` with a float accumulator, three times a round;
//! - `scale` calls `mac` once; `mac`'s time is 3 : 1 theirs;
//! - IRQ30 runs `mac` too, interrupting whichever of them was running.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::entry;
use scenarios::{enable_irq, finish, pend_irq, sampling_start};

const IRQ: u32 = 30;

#[unsafe(no_mangle)]
#[inline(never)]
fn mac(n: u32, x: f32) -> f32 {
    let mut acc = 0.0f32;
    for i in 0..n {
        acc = acc * 0.5 + x * black_box(i as f32);
    }
    acc
}

#[unsafe(no_mangle)]
#[inline(never)]
fn filter(x: f32) -> f32 {
    let mut y = x;
    for _ in 0..3 {
        y += mac(black_box(150), y);
    }
    y
}

#[unsafe(no_mangle)]
#[inline(never)]
fn scale(x: f32) -> f32 {
    x * mac(black_box(150), x) + 1.5
}

#[unsafe(no_mangle)]
extern "C" fn IRQ30() {
    black_box(mac(black_box(100), 0.25));
}

#[entry]
fn main() -> ! {
    // IRQ30 is unused by the machine.
    enable_irq(IRQ, 0x80);
    sampling_start();
    let mut v = 1.0f32;
    for _ in 0..50_000u32 {
        v = black_box(filter(black_box(v)) * 1e-3);
        v = black_box(scale(black_box(v)) * 1e-3);
        pend_irq(IRQ);
        v += 0.125;
    }
    black_box(v);
    finish(0)
}
