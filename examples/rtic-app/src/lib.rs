//! Work shared by the RTIC applications: small numeric kernels whose cost grows with their
//! argument, so that each task's share of the time is known from the instruction counts.
#![no_std]

/// A multiply-accumulate loop over `n` steps.
#[inline(never)]
pub fn crunch(seed: u32, n: u32) -> u32 {
    let mut acc = seed;
    for i in 0..n {
        acc = acc.wrapping_mul(1_664_525).wrapping_add(i ^ 0x5a5a);
    }
    acc
}

/// A moving-average filter over a window of `n` values derived from `x`.
#[inline(never)]
pub fn filter(x: u32, n: u32) -> u32 {
    let mut sum = 0u32;
    let mut v = x;
    for _ in 0..n {
        v = v.rotate_left(3) ^ 0x9e37_79b9;
        sum = sum.wrapping_add(v >> 4);
    }
    sum / n.max(1)
}
