//! RTIC v1 as applications written for it are: `sensor` a software task on dispatcher QEI0
//! (priority 1) that respawns itself through the SysTick monotonic every 5 ms, `logger` a
//! software task on SSI0 (priority 2), `button` a hardware task on GPIOA, `idle` running a
//! checksum in between; every task calls the same `crc` helper of the app module.
#![no_std]
#![no_main]

use panic_semihosting as _;

#[rtic::app(device = lm3s6965, dispatchers = [SSI0, QEI0])]
mod app {
    use cortex_m_semihosting::debug;
    use systick_monotonic::{fugit::ExtU64, Systick};

    #[monotonic(binds = SysTick, default = true)]
    type Mono = Systick<1000>;

    #[shared]
    struct Shared {}

    #[local]
    struct Local {}

    #[init]
    fn init(cx: init::Context) -> (Shared, Local, init::Monotonics) {
        #[cfg(feature = "sample")]
        sampler_rt::start();
        let mono = Systick::new(cx.core.SYST, 12_000_000);
        sensor::spawn().unwrap();
        (Shared {}, Local {}, init::Monotonics(mono))
    }

    #[idle]
    fn idle(_: idle::Context) -> ! {
        loop {
            crc(2000);
        }
    }

    #[inline(never)]
    fn crc(n: u32) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for i in 0..n {
            c ^= i;
            for _ in 0..8 {
                c = (c >> 1) ^ (0xEDB8_8320 & (c & 1).wrapping_neg());
            }
        }
        core::hint::black_box(c)
    }

    #[task(priority = 1)]
    fn sensor(_: sensor::Context) {
        crc(400);
        logger::spawn().ok();
        rtic::pend(lm3s6965::Interrupt::GPIOA);
        if monotonics::now().ticks() > 500 {
            #[cfg(feature = "sample")]
            sampler_rt::flush();
            debug::exit(debug::EXIT_SUCCESS);
        }
        sensor::spawn_after(5.millis()).ok();
    }

    #[task(priority = 2)]
    fn logger(_: logger::Context) {
        crc(300);
    }

    #[task(binds = GPIOA, priority = 3)]
    fn button(_: button::Context) {
        crc(100);
    }
}
