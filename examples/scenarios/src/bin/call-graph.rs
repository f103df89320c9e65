//! A call graph known by construction, for the exact call graph and its views:
//!
//! - `leaf` is called by `left` three times a round and by `right` once, with the same work
//!   each time: 3/4 of its time is `left`'s;
//! - `recurse(4)` calls itself down to depth 0, each level spinning: recursion counted once
//!   in a function's inclusive time;
//! - `jumper` ends with a tail call to `landing` (a `b`, not a `bl`): `landing` runs in
//!   `jumper`'s frame;
//! - IRQ30's handler calls `leaf` too: a caller that is an interrupt;
//! - `right` calls `leaf` through `through_inline`, which is inlined into it: a sampled stack
//!   names it between the two;
//! - `pending` reads a device register and returns: QEMU stops its block at the access and
//!   replays the access alone, so the exact call graph must count that block part by part.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{enable_irq, finish, pend_irq, sampling_start, spin};

const IRQ: u32 = 30;

#[unsafe(no_mangle)]
#[inline(never)]
fn leaf(n: u32) {
    spin!(n, "leaf")
}

#[unsafe(no_mangle)]
#[inline(never)]
fn left() {
    for _ in 0..3 {
        leaf(core::hint::black_box(200));
    }
}

#[inline(always)]
fn through_inline(n: u32) {
    leaf(n);
}

#[unsafe(no_mangle)]
#[inline(never)]
fn right() {
    through_inline(core::hint::black_box(200));
}

#[unsafe(no_mangle)]
#[inline(never)]
fn recurse(depth: u32) {
    spin!(50, "recurse");
    if depth > 0 {
        recurse(core::hint::black_box(depth - 1));
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn landing(n: u32) -> u32 {
    spin!(n, "landing");
    n
}

#[unsafe(no_mangle)]
#[inline(never)]
fn jumper(n: u32) -> u32 {
    // A call in tail position with the same arguments' shape: the compiler branches.
    landing(n + 1)
}

#[unsafe(no_mangle)]
#[inline(never)]
fn pending() -> u32 {
    // SAFETY: the NVIC's set-pending register, read.
    unsafe { core::ptr::read_volatile(0xE000_E200 as *const u32) }
}

#[unsafe(no_mangle)]
extern "C" fn IRQ30() {
    leaf(core::hint::black_box(100));
}

#[entry]
fn main() -> ! {
    // IRQ30 is unused by the machine.
    enable_irq(IRQ, 0x80);
    sampling_start();
    for _ in 0..50_000u32 {
        left();
        right();
        recurse(core::hint::black_box(4));
        core::hint::black_box(jumper(core::hint::black_box(99)));
        core::hint::black_box(pending());
        pend_irq(IRQ);
    }
    finish(0)
}
