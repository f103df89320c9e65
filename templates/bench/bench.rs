//! Benchmarks for `cargo sample bench`. Copy this file to `src/bin/bench.rs` of a firmware
//! crate that `cargo sample init` set up (it has sampler-rt and a `sample` feature), declare it
//! in Cargo.toml so that plain builds leave it out:
//!
//! ```toml
//! [[bin]]
//! name = "bench"
//! required-features = ["sample"]
//! ```
//!
//! then run `cargo sample bench --release --bin bench` (add `--cycles` for estimated cycles,
//! `--save-baseline main` / `--baseline main --limit bench=+2%` to gate a pull request). Put
//! your own routines where `checksum` is; keep each one a function of its own
//! (`#[inline(never)]`) so that a profile of the same firmware names it.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::entry;
use panic_halt as _;

/// The routine measured: a Fletcher-16 checksum.
#[inline(never)]
fn checksum(data: &[u8]) -> u16 {
    let (mut a, mut b) = (0u16, 0u16);
    for &x in data {
        a = (a + u16::from(x)) % 255;
        b = (b + a) % 255;
    }
    b << 8 | a
}

#[entry]
fn main() -> ! {
    let data: [u8; 512] = core::array::from_fn(|i| i as u8);
    // The same work every iteration: 100 iterations (the default).
    sampler_rt::bench!("checksum of 512 bytes", |b| {
        b.iter(|| checksum(black_box(&data)))
    });
    // Work on an input made afresh, outside the timed part, for each of 20 iterations.
    let mut n = 0u8;
    sampler_rt::bench!("checksum of a fresh buffer", 20, |b| {
        b.iter_batched_ref(
            || {
                n = n.wrapping_add(1);
                [n; 64]
            },
            |buffer| checksum(buffer),
        )
    });
    sampler_rt::bench::finish()
}
