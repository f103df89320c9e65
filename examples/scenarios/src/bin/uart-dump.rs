//! hot-loops for a board without a probe connection: the dump goes out through the board's
//! UART (CMSDK UART0 of mps2-an385) with `sampler_rt::set_writer`, read by
//! `cargo sample --serial PORT`. It prints a line of its own first, as applications do, and
//! runs until the sampler has its samples, then idles like a board would.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::uart;
use scenarios::{hot_a, hot_b, hot_c};

#[entry]
fn main() -> ! {
    uart::init();
    uart::write(b"uart-dump: hello\r\n");
    #[cfg(feature = "sample")]
    {
        sampler_rt::set_writer(uart::write);
        sampler_rt::start();
    }
    loop {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
}
