//! A larger firmware for the host pipeline's benchmark: formatting of integers and floats,
//! sorting of several element types, 64-bit arithmetic and a checksum, all through generic code
//! that the compiler inlines heavily. Runs until the sampler has its samples.
#![no_std]
#![no_main]

use core::fmt::Write;

use cortex_m_rt::entry;
use scenarios::{finish, sampling_start};

/// A fixed buffer to format into.
struct Buf {
    bytes: [u8; 256],
    len: usize,
}

impl Write for Buf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.bytes.len() {
                self.len = 0;
            }
            self.bytes[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

fn xorshift(x: &mut u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    *x
}

/// A record printed with its derived `Debug` (which is what reads its fields).
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
struct Reading {
    channel: u8,
    raw: i32,
    scaled: f32,
    flags: [bool; 3],
    wide: u128,
}

#[inline(never)]
fn format_numbers(seed: &mut u32, buf: &mut Buf) -> usize {
    let a = xorshift(seed);
    let f = a as f32 / 7.0;
    let d = a as f64 / 3.0e5;
    let _ = write!(
        buf,
        "{a} {a:x} {a:#o} {f} {d:.3} {d:e} {:?} {}",
        f,
        a as i64 - 1_000_000
    );
    let r = Reading {
        channel: a as u8,
        raw: a as i32,
        scaled: f * 0.5,
        flags: [a & 1 == 0, a & 2 == 0, a & 4 == 0],
        wide: (a as u128) << 70 | d as u128,
    };
    let _ = write!(buf, "{r:?} {:#?} {}", r.flags, r.wide / 1_000_000_007);
    buf.len
}

#[inline(never)]
fn sort_things(seed: &mut u32) -> u64 {
    let mut a = [0u32; 64];
    let mut b = [0u64; 48];
    let mut c = [0i16; 80];
    let mut d = [(0u8, 0u16); 32];
    for x in a.iter_mut() {
        *x = xorshift(seed);
    }
    for x in b.iter_mut() {
        *x = (xorshift(seed) as u64) << 17 | xorshift(seed) as u64;
    }
    for x in c.iter_mut() {
        *x = xorshift(seed) as i16;
    }
    for x in d.iter_mut() {
        *x = (xorshift(seed) as u8, xorshift(seed) as u16);
    }
    a.sort_unstable();
    b.sort_unstable_by(|x, y| y.cmp(x));
    c.sort_unstable_by_key(|x| x.unsigned_abs());
    d.sort_unstable();
    a[3] as u64 + b[5] + c[7] as u64 + d[9].1 as u64
}

#[inline(never)]
fn arithmetic(seed: &mut u32) -> u64 {
    let mut acc = 1u64;
    for _ in 0..16 {
        let x = xorshift(seed) as u64 | 1;
        acc = acc.wrapping_mul(x) / (x % 977 + 1) + acc % x;
    }
    acc
}

#[inline(never)]
fn checksum(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[entry]
fn main() -> ! {
    sampling_start();
    let mut seed = 0x2545_F491u32;
    let mut buf = Buf {
        bytes: [0; 256],
        len: 0,
    };
    let mut total = 0u64;
    for _ in 0..2_000_000u32 {
        let n = format_numbers(&mut seed, &mut buf);
        total = total.wrapping_add(sort_things(&mut seed));
        total = total.wrapping_add(arithmetic(&mut seed));
        total = total.wrapping_add(checksum(&buf.bytes[..n]) as u64);
    }
    cortex_m_semihosting::hprintln!("{}", total);
    finish(0)
}
