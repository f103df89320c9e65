//! Embassy tasks on QEMU mps2-an385, each a kind every Embassy application has, on two
//! executors (the thread-mode one, and an interrupt executor on GPIO 1's interrupt):
//!
//! - `crunch` computes: a checksum of a buffer, [`CRUNCH_ROUNDS`] times, yielding after each
//!   (polled `CRUNCH_ROUNDS + 1` times);
//! - `chatter` yields often: a little work, then a yield, [`CHATTER_YIELDS`] times (polled
//!   `CHATTER_YIELDS + 1` times);
//! - `sensor` is woken by CMSDK timer 1's interrupt, every [`TICK_PERIOD`] ticks (1.28 ms:
//!   20 000 instructions in QEMU at cargo-sample's `-icount shift=6`), and takes
//!   [`READINGS`] readings (a tick that comes while it waits for its poll is merged with the
//!   one before, as a wake is);
//! - `logger` is woken by `sensor` after every [`READINGS_PER_FLUSH`] readings and then blocks
//!   inside its poll in `flush_blocking` (a busy wait, as a blocking driver call does), holding
//!   off every other task, `sensor` included, for about fifteen timer periods;
//! - `urgent` runs on the interrupt executor: `sensor` wakes it after every reading, and its
//!   poll preempts the thread-mode executor at once (polled `READINGS + 1` times).
//!
//! The run ends at the first timer interrupt after `logger`'s last flush. With sampler-rt's
//! `embassy` feature and embassy-executor's `trace`, `cargo sample` prints the task table:
//! polls, time in polls, wake-to-poll latency and each executor's idle time.
#![no_std]
#![no_main]

use core::arch::asm;
use core::cell::Cell;
use core::future::poll_fn;
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use core::task::{Poll, Waker};

use cortex_m_semihosting::debug;
use critical_section::Mutex;
use embassy_executor::{InterruptExecutor, Spawner};
use embassy_futures::yield_now;

/// Checksum rounds of `crunch`.
pub const CRUNCH_ROUNDS: u32 = 40;
/// Yields of `chatter`.
pub const CHATTER_YIELDS: u32 = 300;
/// Timer interrupts `sensor` waits for.
pub const READINGS: u32 = 120;
/// Readings between two of `logger`'s flushes.
pub const READINGS_PER_FLUSH: u32 = 40;
/// Timer 1's period in its ticks (25 MHz).
pub const TICK_PERIOD: u32 = 32_000;

/// Spin `n` times (the label keeps the compiler from merging identical loops).
macro_rules! spin {
    ($n:expr, $label:literal) => {
        for _ in 0..$n {
            // SAFETY: a no-op instruction (the rest is an assembler comment).
            unsafe {
                asm!(
                    concat!("nop @ ", $label),
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
    };
}

/// Something that happened, and the task waiting for it.
struct Event {
    set: AtomicBool,
    waker: Mutex<Cell<Option<Waker>>>,
}

impl Event {
    const fn new() -> Event {
        Event {
            set: AtomicBool::new(false),
            waker: Mutex::new(Cell::new(None)),
        }
    }

    /// Set it, and wake the task that waits for it.
    fn signal(&self) {
        self.set.store(true, Ordering::Release);
        if let Some(w) = critical_section::with(|cs| self.waker.borrow(cs).take()) {
            w.wake();
        }
    }

    /// Until it is set (then it is cleared).
    async fn wait(&self) {
        poll_fn(|cx| {
            if self.set.swap(false, Ordering::Acquire) {
                return Poll::Ready(());
            }
            critical_section::with(|cs| self.waker.borrow(cs).set(Some(cx.waker().clone())));
            if self.set.swap(false, Ordering::Acquire) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

static TICK: Event = Event::new();
static URGENT: Event = Event::new();
/// The executor of `urgent`, run by GPIO 1's interrupt (nothing else uses it in QEMU).
static HIGH: InterruptExecutor = InterruptExecutor::new();
static FLUSH: Event = Event::new();
static DONE: AtomicBool = AtomicBool::new(false);
static SUM: AtomicU32 = AtomicU32::new(0);

#[unsafe(no_mangle)]
#[inline(never)]
fn checksum(data: &[u32]) -> u32 {
    let mut h = 0x811C_9DC5u32;
    for &w in data {
        h = (h ^ w).wrapping_mul(0x0100_0193).rotate_left(5);
    }
    h
}

#[unsafe(no_mangle)]
#[inline(never)]
fn tally(n: u32) {
    spin!(n, "tally")
}

#[unsafe(no_mangle)]
#[inline(never)]
fn filter(x: u32) -> u32 {
    spin!(200, "filter");
    x.wrapping_mul(3) >> 1
}

/// A driver call that waits for its hardware by polling a busy flag: it never yields.
#[unsafe(no_mangle)]
#[inline(never)]
fn flush_blocking() {
    let mut busy = 100_000u32;
    while core::hint::black_box(busy) != 0 {
        busy -= 1;
    }
}

#[embassy_executor::task]
async fn crunch() {
    let mut data = [0u32; 1024];
    for (i, w) in data.iter_mut().enumerate() {
        *w = i as u32 * 2_654_435_761;
    }
    for _ in 0..CRUNCH_ROUNDS {
        let h = checksum(&data);
        data[0] = h;
        SUM.fetch_add(h, Ordering::Relaxed);
        yield_now().await;
    }
}

#[embassy_executor::task]
async fn chatter() {
    for _ in 0..CHATTER_YIELDS {
        tally(40);
        yield_now().await;
    }
}

#[embassy_executor::task]
async fn sensor() {
    let mut x = 1;
    for i in 0..READINGS {
        TICK.wait().await;
        x = filter(x);
        URGENT.signal();
        if (i + 1) % READINGS_PER_FLUSH == 0 {
            FLUSH.signal();
        }
    }
    SUM.fetch_add(x, Ordering::Relaxed);
}

#[embassy_executor::task]
async fn urgent() {
    for _ in 0..READINGS {
        URGENT.wait().await;
        spin!(300, "urgent");
    }
}

#[embassy_executor::task]
async fn logger() {
    for _ in 0..READINGS / READINGS_PER_FLUSH {
        FLUSH.wait().await;
        flush_blocking();
    }
    DONE.store(true, Ordering::Release);
}

const TIMER1_BASE: usize = 0x4000_1000;
const TIMER1_IRQ: u32 = 9;
/// GPIO 1's interrupt: pended by software only, for the interrupt executor.
const GPIO1_IRQ: u16 = 7;

#[derive(Clone, Copy)]
struct Gpio1;

// SAFETY: 7 is a device interrupt of the mps2-an385.
unsafe impl cortex_m::interrupt::InterruptNumber for Gpio1 {
    fn number(self) -> u16 {
        GPIO1_IRQ
    }
}

#[unsafe(no_mangle)]
extern "C" fn GPIO1() {
    // SAFETY: the executor's interrupt, after `start`.
    unsafe { HIGH.on_interrupt() };
}

/// CMSDK timer 1: an interrupt every `TICK_PERIOD` ticks.
fn start_timer() {
    // SAFETY: CMSDK timer registers of the mps2 machines, and the NVIC's set-enable register.
    unsafe {
        write_volatile(TIMER1_BASE as *mut u32, 0);
        write_volatile((TIMER1_BASE + 8) as *mut u32, TICK_PERIOD - 1);
        write_volatile((TIMER1_BASE + 4) as *mut u32, TICK_PERIOD - 1);
        write_volatile(TIMER1_BASE as *mut u32, 0b1001);
        write_volatile(0xE000_E100 as *mut u32, 1 << TIMER1_IRQ);
    }
}

#[unsafe(no_mangle)]
extern "C" fn TIMER1() {
    // SAFETY: acknowledging timer 1's interrupt.
    unsafe { write_volatile((TIMER1_BASE + 12) as *mut u32, 1) };
    if DONE.load(Ordering::Acquire) {
        finish();
    }
    TICK.signal();
}

/// End the run (the sampler sends its dump first).
fn finish() -> ! {
    // SAFETY: reading a word keeps the computation alive.
    let _ = unsafe { read_volatile(SUM.as_ptr()) };
    #[cfg(feature = "sample")]
    sampler_rt::exit(0);
    #[cfg(not(feature = "sample"))]
    {
        debug::exit(debug::EXIT_SUCCESS);
        loop {
            // SAFETY: waiting for an interrupt has no memory effects.
            unsafe { asm!("wfi", options(nomem, nostack)) };
        }
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    #[cfg(feature = "sample")]
    sampler_rt::start();
    spawner.spawn(crunch().unwrap());
    spawner.spawn(chatter().unwrap());
    spawner.spawn(sensor().unwrap());
    spawner.spawn(logger().unwrap());
    // Less urgent than the sampler's timer, so that its polls are sampled; set before start.
    // SAFETY: the NVIC's priority byte of GPIO 1's interrupt.
    unsafe { write_volatile((0xE000_E400 + u32::from(GPIO1_IRQ)) as *mut u8, 0x40) };
    HIGH.start(Gpio1).spawn(urgent().unwrap());
    start_timer();
}

/// One entry of the device part of the vector table.
#[repr(C)]
pub union Vector {
    handler: unsafe extern "C" fn(),
}

unsafe extern "C" {
    fn UARTRX0();
    fn UARTTX0();
    fn UARTRX1();
    fn UARTTX1();
    fn UARTRX2();
    fn UARTTX2();
    fn GPIO0();
    fn TIMER0();
}

/// The mps2-an385's first ten device interrupts; the others are never enabled.
#[unsafe(link_section = ".vector_table.interrupts")]
#[unsafe(no_mangle)]
pub static __INTERRUPTS: [Vector; 10] = [
    Vector { handler: UARTRX0 },
    Vector { handler: UARTTX0 },
    Vector { handler: UARTRX1 },
    Vector { handler: UARTTX1 },
    Vector { handler: UARTRX2 },
    Vector { handler: UARTTX2 },
    Vector { handler: GPIO0 },
    Vector { handler: GPIO1 },
    Vector { handler: TIMER0 },
    Vector { handler: TIMER1 },
];

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        // SAFETY: waiting for an interrupt has no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}
