//! A board application that owns SysTick (`scenarios::systick_delay` between its loops) and
//! sends the dump through its UART: the sampler is paced by CMSDK timer 1, which the firmware
//! drives for it (`sampler_rt::start_with_timer`). `cargo sample --serial` sees that the firmware owns
//! SysTick and builds sampler-rt without its SysTick handler.
#![no_std]
#![no_main]

use core::ptr::{read_volatile, write_volatile};

use cortex_m_rt::entry;
use scenarios::{hot_a, hot_b, systick_delay};

const UART0: usize = 0x4000_4000;

fn uart_write(bytes: &[u8]) {
    for &b in bytes {
        // SAFETY: CMSDK UART0 registers; wait while the transmit buffer is full.
        unsafe {
            while read_volatile((UART0 + 0x4) as *const u32) & 1 != 0 {}
            write_volatile(UART0 as *mut u32, b as u32);
        }
    }
}

#[cfg(feature = "sample")]
sampler_rt::timer_interrupt!(TIMER1, ack = 1);

#[entry]
fn main() -> ! {
    // SAFETY: CMSDK UART0 of mps2-an385: 25 MHz / 217, about 115 200 baud.
    unsafe {
        write_volatile((UART0 + 0x10) as *mut u32, 217);
        write_volatile((UART0 + 0x8) as *mut u32, 1);
    }
    uart_write(b"uart-own-systick: hello\r\n");
    #[cfg(feature = "sample")]
    {
        sampler_rt::set_writer(uart_write);
        sampler_rt::start_with_timer(&scenarios::timer1_pacer::TIMER);
    }
    loop {
        hot_a(700);
        hot_b(300);
        systick_delay(50);
    }
}
