//! A board application that owns SysTick (`scenarios::systick_delay` between its loops) and
//! sends the dump through its UART: the sampler is paced by CMSDK timer 1, which the firmware
//! drives for it (`sampler_rt::start_with_timer`). `cargo sample --serial` sees that the firmware owns
//! SysTick and builds sampler-rt without its SysTick handler.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::uart;
use scenarios::{hot_a, hot_b, systick_delay};

#[cfg(feature = "sample")]
sampler_rt::timer_interrupt!(TIMER1, ack = 1);

#[entry]
fn main() -> ! {
    uart::init();
    uart::write(b"uart-own-systick: hello\r\n");
    #[cfg(feature = "sample")]
    {
        sampler_rt::set_writer(uart::write);
        sampler_rt::start_with_timer(&scenarios::timer1_pacer::TIMER);
    }
    loop {
        hot_a(700);
        hot_b(300);
        systick_delay(50);
    }
}
