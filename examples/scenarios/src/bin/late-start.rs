//! Work before the sampler starts: cortex-m-rt zeroes a 16 KiB `.bss` table and `set_up`
//! fills it (about 2 % of the run together), then the three loops run 1 000 rounds. No sample
//! can fall before `start()`, so `--truth` compares the samples with the time after it.
#![no_std]
#![no_main]

use core::ptr::addr_of_mut;

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, hot_c, sampling_start};

/// Zeroed by the start-up code, before `main`.
static mut TABLE: [u32; 4096] = [0; 4096];

#[entry]
fn main() -> ! {
    // SAFETY: the only reference to the table, taken once.
    let table = unsafe { &mut *addr_of_mut!(TABLE) };
    set_up(table);
    sampling_start();
    for _ in 0..1000 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    finish(core::hint::black_box(table[7] as i32) & 0)
}

/// Fills the table before sampling starts.
#[inline(never)]
fn set_up(table: &mut [u32]) {
    let mut x = 1u32;
    for v in table.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *v = core::hint::black_box(x);
    }
}
