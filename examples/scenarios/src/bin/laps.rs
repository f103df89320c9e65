//! The lap-timer method's classic experiments, in QEMU: a summing
//! loop timed with and without a periodic interrupt at two rates, and a cyclic executive's
//! iteration time with and without it. The interrupt is CMSDK timer 1 (interrupt 9), whose
//! handler toggles a "pin" and clears the timer's flag. Run it with `cargo sample --laps`
//! (it needs the `sample` feature, which `cargo sample` turns on).
//!
//! Region names carry the interrupt's rate (`sum_array @ 12.5 kHz`): the host compares each
//! with the undisturbed `sum_array` and infers the handler's cost.
#![no_std]
#![no_main]

use core::hint::black_box;
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m_rt::entry;
use scenarios::{TIMER1_BASE, finish, sampling_start};

use sampler_rt::laps::Region;

const IRQ: u32 = 9;
const NVIC_ISER0: *mut u32 = 0xE000_E100 as *mut u32;
const NVIC_ICER0: *mut u32 = 0xE000_E180 as *mut u32;

/// 25 MHz timer ticks between interrupts: 12.5 kHz and 50 kHz.
const SLOW: u32 = 2000;
const FAST: u32 = 500;

static PIN: AtomicU32 = AtomicU32::new(0);

/// Toggle the pin, clear the timer's interrupt.
#[unsafe(no_mangle)]
extern "C" fn TIMER1() {
    PIN.fetch_xor(1, Ordering::Relaxed);
    // SAFETY: CMSDK timer 1's INTCLEAR register.
    unsafe { write_volatile((TIMER1_BASE + 0xC) as *mut u32, 1) };
}

fn interrupt_every(ticks: Option<u32>) {
    // SAFETY: CMSDK timer 1 and the NVIC.
    unsafe {
        write_volatile(TIMER1_BASE as *mut u32, 0);
        write_volatile(NVIC_ICER0, 1 << IRQ);
        if let Some(t) = ticks {
            write_volatile((TIMER1_BASE + 0x8) as *mut u32, t - 1);
            write_volatile((TIMER1_BASE + 0x4) as *mut u32, t - 1);
            write_volatile((TIMER1_BASE + 0xC) as *mut u32, 1);
            // Enable, interrupt enable.
            write_volatile(TIMER1_BASE as *mut u32, 0b1001);
            write_volatile(NVIC_ISER0, 1 << IRQ);
        }
    }
}

#[inline(never)]
fn sum_array(a: &[u32; 256]) -> u32 {
    a.iter().fold(0u32, |s, &x| s.wrapping_add(x))
}

#[inline(never)]
fn sum_half(a: &[u32; 256]) -> u32 {
    a[..128].iter().fold(0u32, |s, &x| s.wrapping_add(x))
}

fn fill(a: &mut [u32; 256], seed: &mut u32) {
    for x in a.iter_mut() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 17;
        *seed ^= *seed << 5;
        *x = *seed;
    }
}
static SUM: [Region; 3] = [
    Region::new("sum_array"),
    Region::new("sum_array @ 12.5 kHz"),
    Region::new("sum_array @ 50 kHz"),
];
/// An empty lap: the lap's own cost, subtracted, leaves nothing.
static EMPTY: Region = Region::new("empty");
static HALF: Region = Region::new("sum_array/2");
/// The same work timed by a `start()` guard.
static GUARDED: Region = Region::new("sum_array/2 (guard)");
static EXECUTIVE: [Region; 2] = [
    Region::iteration("executive"),
    Region::iteration("executive @ 12.5 kHz"),
];

#[entry]
fn main() -> ! {
    sampling_start();
    let mut a = [0u32; 256];
    let mut seed = 0x1234_5678u32;
    let mut c = 0u32;
    for _ in 0..20 {
        EMPTY.measure(|| ());
        c = c.wrapping_add(HALF.measure(|| sum_half(black_box(&a))));
        let lap = GUARDED.start();
        c = c.wrapping_add(sum_half(black_box(&a)));
        drop(lap);
    }
    for (k, rate) in [None, Some(SLOW), Some(FAST)].into_iter().enumerate() {
        interrupt_every(rate);
        for _ in 0..20 {
            fill(&mut a, &mut seed);
            for _ in 0..10 {
                let s = SUM[k].measure(|| sum_array(black_box(&a)));
                c = c.wrapping_add(s);
            }
        }
    }
    for (k, rate) in [None, Some(SLOW)].into_iter().enumerate() {
        interrupt_every(rate);
        for _ in 0..200 {
            EXECUTIVE[k].iterate();
            fill(&mut a, &mut seed);
            for _ in 0..10 {
                c = c.wrapping_add(sum_array(black_box(&a)));
            }
        }
    }
    interrupt_every(None);
    black_box(c);
    // SAFETY: reading the pin keeps the handler's work observable.
    black_box(unsafe { read_volatile(PIN.as_ptr()) });
    finish(0)
}
