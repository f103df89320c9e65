//! A firmware with interrupts of its own keeps its exception vectors: its IRQ handler passes
//! the sampler's interrupt to `sampler_rt::on_irq` and serves its own timer. The run ends when
//! the firmware has counted 4000 of its own ticks, which it only does if none is lost.
#![no_std]
#![no_main]

use core::sync::atomic::Ordering;

use aarch64_pmu::{irq, spin};

#[unsafe(no_mangle)]
#[inline(never)]
pub fn work_a() {
    spin(700)
}

#[unsafe(no_mangle)]
#[inline(never)]
pub fn work_b() {
    spin(300)
}

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    irq::install_vectors();
    // 50 000 instructions a tick at the icount shift of 4 (16 ns each, 62.5 MHz counter).
    irq::start_timer(50_000);
    sampler_rt::start_keeping_vectors();
    while irq::TICKS.load(Ordering::Relaxed) < 4000 {
        work_a();
        work_b();
    }
    sampler_rt::exit(0)
}
