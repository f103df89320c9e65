//! Exceptions entered every way the exact call graph must follow them:
//!
//! - nesting three deep: `IRQ26` (priority 0xC0) pends `IRQ27` (0x80), whose handler pends
//!   `IRQ28` (0x40): each preempts the one before at once;
//! - tail-chaining: `IRQ28` pends `IRQ29` at `IRQ26`'s priority, which waits for `IRQ26` to
//!   return and is then entered without going back to the thread;
//! - a handler whose first instruction reads a device register: `IRQ26` starts with a load
//!   through the NVIC address the thread left in r0 when it pended it. QEMU stops a block at
//!   such an access and runs the access again alone, so the handler's first block starts
//!   twice, the first time running nothing.
//!
//! Each handler and the thread spin a known number of times, so every exception's time is
//! known by construction too.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{enable_irq, finish, pend_irq, sampling_start, spin};

const ISPR: u32 = 0xE000_E200;

#[unsafe(no_mangle)]
#[inline(never)]
fn first_work() {
    spin!(core::hint::black_box(300u32), "first_work");
    pend_irq(27);
    spin!(core::hint::black_box(100u32), "first_work");
}

/// The first instruction reads the NVIC (r0 holds its set-pending register's address); then
/// a frame record as compilers make one.
#[unsafe(naked)]
#[unsafe(no_mangle)]
unsafe extern "C" fn IRQ26() {
    core::arch::naked_asm!(
        "ldr r2, [r0]",
        "push {{r7, lr}}",
        "mov r7, sp",
        "bl first_work",
        "pop {{r7, pc}}",
    )
}

#[unsafe(no_mangle)]
extern "C" fn IRQ27() {
    spin!(core::hint::black_box(200u32), "second");
    pend_irq(28);
    spin!(core::hint::black_box(50u32), "second");
}

#[unsafe(no_mangle)]
extern "C" fn IRQ28() {
    spin!(core::hint::black_box(150u32), "third");
    pend_irq(29);
}

#[unsafe(no_mangle)]
extern "C" fn IRQ29() {
    spin!(core::hint::black_box(120u32), "chained");
}

#[unsafe(no_mangle)]
#[inline(never)]
fn thread_work() {
    spin!(core::hint::black_box(500u32), "thread_work");
}

/// Pend `IRQ26` with the set-pending register's address in r0, where the handler reads it.
#[inline(always)]
fn pend_first() {
    // SAFETY: a store to the NVIC's set-pending register.
    unsafe {
        core::arch::asm!(
            "str {bit}, [r0]",
            in("r0") ISPR,
            bit = in(reg) 1u32 << 26,
            options(nostack, preserves_flags)
        )
    };
}

#[entry]
fn main() -> ! {
    // IRQ26..29 are unused by the machine.
    enable_irq(26, 0xC0);
    enable_irq(27, 0x80);
    enable_irq(28, 0x40);
    enable_irq(29, 0xC0);
    sampling_start();
    for _ in 0..500u32 {
        thread_work();
        pend_first();
    }
    finish(0)
}
