//! hot-loops on a board that logs through defmt over its UART (a `#[defmt::global_logger]`
//! writing frames to CMSDK UART0 of mps2-an385, as `defmt-serial` does) and sends the dump the
//! same way: `cargo sample --serial PORT --features defmt` decodes the frames that come before
//! the dump against the ELF and prints them as they arrive.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, Ordering};

use cortex_m_rt::entry;
use scenarios::uart;
use scenarios::{hot_a, hot_b, hot_c};

#[defmt::global_logger]
struct UartLogger;

static TAKEN: AtomicBool = AtomicBool::new(false);
static mut INTERRUPTS_WERE_ON: bool = false;
static mut ENCODER: defmt::Encoder = defmt::Encoder::new();

// SAFETY: a frame is written with interrupts masked (so the sampler's dump, sent from its
// interrupt, never cuts one), by one context at a time.
unsafe impl defmt::Logger for UartLogger {
    fn acquire() {
        let on = cortex_m::register::primask::read().is_active();
        cortex_m::interrupt::disable();
        assert!(
            !TAKEN.swap(true, Ordering::Relaxed),
            "defmt logger taken twice"
        );
        // SAFETY: interrupts are masked and the logger is ours.
        unsafe {
            INTERRUPTS_WERE_ON = on;
            (*core::ptr::addr_of_mut!(ENCODER)).start_frame(uart::write);
        }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: called after `acquire`, interrupts still masked.
        unsafe {
            (*core::ptr::addr_of_mut!(ENCODER)).end_frame(uart::write);
            TAKEN.store(false, Ordering::Relaxed);
            if INTERRUPTS_WERE_ON {
                cortex_m::interrupt::enable();
            }
        }
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: between `acquire` and `release`.
        unsafe { (*core::ptr::addr_of_mut!(ENCODER)).write(bytes, uart::write) };
    }
}

#[entry]
fn main() -> ! {
    uart::init();
    defmt::info!("uart-defmt: start");
    #[cfg(feature = "sample")]
    {
        sampler_rt::set_writer(uart::write);
        sampler_rt::start();
    }
    let mut round = 0u32;
    loop {
        hot_a(700);
        hot_b(200);
        hot_c(100);
        if round.is_multiple_of(100) && round <= 300 {
            defmt::warn!("uart-defmt: round {=u32}", round);
        }
        round = round.wrapping_add(1);
    }
}
