//! Another interrupt handler does a third of the work: the main loop pends IRQ31 after each
//! `hot_a(700)`, and the handler runs `isr_work(300)`. IRQ31 has priority 0x40: a sampler of
//! priority 0x40 (`--priority 0x40`) cannot preempt it and never sees `isr_work`; the default
//! sampler priority 0 can.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{enable_irq, finish, hot_a, pend_irq, sampling_start, spin};

const IRQ: u32 = 31;

#[unsafe(no_mangle)]
#[inline(never)]
fn isr_work(n: u32) {
    spin!(n, "isr_work")
}

#[unsafe(no_mangle)]
extern "C" fn IRQ31() {
    isr_work(300);
}

#[entry]
fn main() -> ! {
    // IRQ31 is unused by the machine.
    enable_irq(IRQ, 0x40);
    sampling_start();
    for _ in 0..2_000_000u32 {
        hot_a(700);
        pend_irq(IRQ);
    }
    finish(0)
}
