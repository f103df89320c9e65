//! A checksum and a sort over buffers, then the result on the host console.
//!
//! A doc test would start like this, which is not this crate's entry point:
//!
//! ```ignore
//! fn main() {}
//! ```
#![no_std]
#![no_main]

use panic_halt as _;

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};

/// An Adler-style checksum.
#[inline(never)]
fn checksum(data: &[u8]) -> u32 {
    let mut a = 1u32;
    let mut b = 0u32;
    for &x in data {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// Insertion sort.
#[inline(never)]
fn sort(v: &mut [u32]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

// The entry point need not be called `main`.
#[entry]
fn start() -> ! {
    let mut buf = [0u8; 512];
    let mut v = [0u32; 64];
    let mut acc = 0u32;
    for round in 0..100_000u32 {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u32 ^ round) as u8;
        }
        acc ^= checksum(&buf);
        for (i, x) in v.iter_mut().enumerate() {
            *x = (i as u32).wrapping_mul(2_654_435_761) ^ round;
        }
        sort(&mut v);
        acc ^= v[0];
    }
    hprintln!("{}", acc);
    debug::exit(debug::EXIT_SUCCESS);
    loop {}
}
