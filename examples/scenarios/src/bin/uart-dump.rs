//! hot-loops for a board without a probe connection: the dump goes out through the board's
//! UART (CMSDK UART0 of mps2-an385) with `sampler_rt::set_writer`, read by
//! `cargo sample --serial PORT`. It prints a line of its own first, as applications do, and
//! runs until the sampler has its samples, then idles like a board would.
#![no_std]
#![no_main]

use core::ptr::{read_volatile, write_volatile};

use cortex_m_rt::entry;
use scenarios::{hot_a, hot_b, hot_c};

const UART0: usize = 0x4000_4000;
const DATA: usize = 0x0;
const STATE: usize = 0x4;
const CTRL: usize = 0x8;
const BAUDDIV: usize = 0x10;

fn uart_init() {
    // SAFETY: CMSDK UART0 registers of mps2-an385; 25 MHz / 217 is about 115 200 baud.
    unsafe {
        write_volatile((UART0 + BAUDDIV) as *mut u32, 217);
        write_volatile((UART0 + CTRL) as *mut u32, 1);
    }
}

fn uart_write(bytes: &[u8]) {
    for &b in bytes {
        // SAFETY: CMSDK UART0 registers; wait while the transmit buffer is full.
        unsafe {
            while read_volatile((UART0 + STATE) as *const u32) & 1 != 0 {}
            write_volatile((UART0 + DATA) as *mut u32, b as u32);
        }
    }
}

#[entry]
fn main() -> ! {
    uart_init();
    uart_write(b"uart-dump: hello\r\n");
    #[cfg(feature = "sample")]
    {
        sampler_rt::set_writer(uart_write);
        sampler_rt::start();
    }
    loop {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
}
