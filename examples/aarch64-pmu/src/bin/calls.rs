//! A call graph known by construction on ARMv8-A, for `--stacks`: `leaf` is called by `left`
//! three times a round and by `right` once (through `through_inline`, inlined into it), with
//! the same work each time, so 3/4 of its time is `left`'s; `recurse(3)` calls itself.
#![no_std]
#![no_main]

use core::arch::asm;
use core::hint::black_box;

use aarch64_pmu as _;

#[unsafe(no_mangle)]
#[inline(never)]
fn leaf(n: u32) {
    for _ in 0..n {
        // SAFETY: a no-op.
        unsafe { asm!("nop // leaf", options(nomem, nostack, preserves_flags)) };
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn left() {
    for _ in 0..3 {
        leaf(black_box(200));
    }
}

#[inline(always)]
fn through_inline(n: u32) {
    leaf(n);
}

#[unsafe(no_mangle)]
#[inline(never)]
fn right() {
    through_inline(black_box(200));
}

#[unsafe(no_mangle)]
#[inline(never)]
fn recurse(depth: u32) {
    for _ in 0..50 {
        // SAFETY: a no-op.
        unsafe { asm!("nop // recurse", options(nomem, nostack, preserves_flags)) };
    }
    if depth > 0 {
        recurse(black_box(depth - 1));
    }
}

#[unsafe(no_mangle)]
extern "C" fn main() -> ! {
    sampler_rt::start();
    for _ in 0..2_000_000u32 {
        left();
        right();
        recurse(black_box(3));
    }
    sampler_rt::exit(0)
}
