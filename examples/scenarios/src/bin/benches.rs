//! Benchmarks for `cargo sample bench`: a bitwise CRC-32 over 256 bytes (the same work every
//! iteration), an insertion sort of 64 words shuffled afresh for each iteration outside the
//! timed part (a different amount of work every iteration), and a 16-tap fixed-point FIR over
//! 128 samples. The routines are functions of their own so that an exact count of the same run
//! can tell their instructions apart.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::entry;
use scenarios as _;

#[inline(never)]
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[inline(never)]
fn insertion_sort(v: &mut [u32; 64]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

#[inline(never)]
fn fir(x: &[i16; 128], h: &[i16; 16]) -> i32 {
    let mut acc = 0i32;
    for n in 15..x.len() {
        let mut y = 0i32;
        for k in 0..16 {
            y += i32::from(x[n - k]) * i32::from(h[k]);
        }
        acc = acc.wrapping_add(y >> 15);
    }
    acc
}

/// xorshift32.
fn next(seed: &mut u32) -> u32 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    *seed
}

#[entry]
fn main() -> ! {
    let data: [u8; 256] = core::array::from_fn(|i| (i as u8).wrapping_mul(37));
    sampler_rt::bench!("crc32 of 256 bytes", 20, |b| {
        b.iter(|| crc32(black_box(&data)))
    });

    let mut seed = 0x2545_F491u32;
    sampler_rt::bench!("insertion sort of 64 words", 50, |b| {
        b.iter_batched_ref(
            || core::array::from_fn::<u32, 64, _>(|_| next(&mut seed) % 1000),
            insertion_sort,
        )
    });

    let x: [i16; 128] = core::array::from_fn(|i| ((i as i32 * 977) % 4096 - 2048) as i16);
    let h: [i16; 16] = core::array::from_fn(|k| (1000 - 60 * k as i32) as i16);
    sampler_rt::bench!("fir 16 taps x 128", |b| {
        b.iter(|| fir(black_box(&x), black_box(&h)))
    });

    sampler_rt::bench::finish()
}
