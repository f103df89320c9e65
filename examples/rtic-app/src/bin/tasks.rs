//! Hardware tasks at three priorities that share resources through `lock`, two software tasks
//! of one priority (sharing a dispatcher) started with `spawn`, and `idle` doing work of its
//! own and pending the hardware tasks.
//! SysTick is left free. The application ends after `ROUNDS` rounds, or earlier when the
//! sampler has its samples.
#![no_std]
#![no_main]

use panic_semihosting as _;

const ROUNDS: u32 = 20_000;

#[rtic::app(device = lm3s6965, dispatchers = [SSI0, QEI0])]
mod app {
    #[cfg(not(feature = "sample"))]
    use cortex_m_semihosting::debug;
    use cortex_m_semihosting::hprintln;
    use lm3s6965::Interrupt;
    use rtic_app::{crunch, filter};

    #[shared]
    struct Shared {
        total: u32,
        level: u32,
    }

    #[local]
    struct Local {}

    #[init]
    fn init(_: init::Context) -> (Shared, Local) {
        #[cfg(feature = "sample")]
        sampler_rt::start();
        hprintln!("rtic-app: {} rounds", super::ROUNDS);
        (Shared { total: 0, level: 0 }, Local {})
    }

    #[idle(shared = [total])]
    fn idle(mut cx: idle::Context) -> ! {
        let mut round = 0u32;
        loop {
            let x = crunch(round, 40);
            cx.shared.total.lock(|t| *t = t.wrapping_add(x));
            rtic::pend(Interrupt::GPIOA);
            if round % 4 == 0 {
                rtic::pend(Interrupt::GPIOB);
            }
            if round % 8 == 0 {
                rtic::pend(Interrupt::GPIOC);
                sensor::spawn(round).ok();
            }
            if round % 16 == 0 {
                logger::spawn(round).ok();
            }
            round += 1;
            if round == super::ROUNDS {
                let total = cx.shared.total.lock(|t| *t);
                hprintln!("rtic-app: done, total {:#010x}", total);
                #[cfg(feature = "sample")]
                sampler_rt::exit(0);
                #[cfg(not(feature = "sample"))]
                debug::exit(debug::EXIT_SUCCESS);
            }
        }
    }

    /// Priority 1: the largest share of the work.
    #[task(binds = GPIOA, priority = 1, shared = [total, level])]
    fn control(mut cx: control::Context) {
        let level = cx.shared.level.lock(|l| *l);
        let y = crunch(level, 120);
        cx.shared.total.lock(|t| *t = t.wrapping_add(y));
    }

    /// Priority 2: preempts `control`, shares `level` with it.
    #[task(binds = GPIOB, priority = 2, shared = [level])]
    fn telemetry(mut cx: telemetry::Context) {
        let f = filter(7, 90);
        cx.shared.level.lock(|l| *l = l.wrapping_add(f));
    }

    /// Priority 3: short and urgent.
    #[task(binds = GPIOC, priority = 3)]
    fn watchdog(_: watchdog::Context) {
        let _ = crunch(3, 30);
    }

    /// A software task, run by the dispatcher interrupt of its priority.
    #[task(priority = 2, shared = [total])]
    async fn sensor(mut cx: sensor::Context, round: u32) {
        let v = filter(round, 60);
        cx.shared.total.lock(|t| *t ^= v);
    }

    /// Another software task of the same priority: it shares `sensor`'s dispatcher.
    #[task(priority = 2, shared = [level])]
    async fn logger(mut cx: logger::Context, round: u32) {
        let v = crunch(round, 20);
        cx.shared.level.lock(|l| *l ^= v);
    }
}
