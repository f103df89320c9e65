// The application of the `mono` binaries (included by each, after its `TICKS`): RTIC's SysTick
// monotonic at priority 0, a software task, two hardware tasks sharing a resource with `idle`.

#[rtic::app(device = lm3s6965, dispatchers = [SSI0])]
mod app {
    use cortex_m_semihosting::hprintln;
    use lm3s6965::Interrupt;
    use rtic_app::{crunch, filter};
    use rtic_monotonics::systick::prelude::*;

    systick_monotonic!(Mono, 1_000);

    #[shared]
    struct Shared {
        total: u32,
    }

    #[local]
    struct Local {}

    #[init]
    fn init(cx: init::Context) -> (Shared, Local) {
        #[cfg(feature = "sample")]
        sampler_rt::start();
        Mono::start(cx.core.SYST, 12_000_000);
        ticker::spawn().ok();
        (Shared { total: 0 }, Local {})
    }

    #[idle(shared = [total])]
    fn idle(mut cx: idle::Context) -> ! {
        let mut i = 0u32;
        loop {
            let x = crunch(i, 50);
            cx.shared.total.lock(|t| *t = t.wrapping_add(x));
            i = i.wrapping_add(1);
        }
    }

    /// Wakes every millisecond of the monotonic, pends the filter task, and ends the
    /// application after `TICKS` wake-ups, printing how long they took by the monotonic.
    #[task(priority = 1)]
    async fn ticker(_: ticker::Context) {
        let start = Mono::now();
        for _ in 0..super::TICKS {
            Mono::delay(1.millis()).await;
            rtic::pend(Interrupt::GPIOA);
            rtic::pend(Interrupt::GPIOB);
        }
        let elapsed = Mono::now() - start;
        hprintln!("mono: {} ticks in {} ms", super::TICKS, elapsed.to_millis());
        #[cfg(feature = "sample")]
        sampler_rt::exit(0);
        #[cfg(not(feature = "sample"))]
        cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_SUCCESS);
    }

    #[task(binds = GPIOA, priority = 2, shared = [total])]
    fn sense(mut cx: sense::Context) {
        let f = filter(3, 200);
        cx.shared.total.lock(|t| *t ^= f);
    }

    /// A more urgent hardware task, pended with `sense`: it runs first, and shares `total`.
    #[task(binds = GPIOB, priority = 3, shared = [total])]
    fn report(mut cx: report::Context) {
        let c = rtic_app::crunch(7, 60);
        cx.shared.total.lock(|t| *t = t.wrapping_add(c));
    }
}
