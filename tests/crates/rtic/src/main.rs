//! A motor controller: an ADC interrupt at the highest priority, a control loop and telemetry
//! below it, sharing the measured state through `lock`; a software task that logs; `idle`
//! filters samples in between and pends the hardware tasks.
#![no_std]
#![no_main]

use panic_semihosting as _;

/// Rounds of `idle` before the application ends.
const ROUNDS: u32 = 200_000;

#[inline(never)]
fn pid(error: i32, integral: &mut i32) -> i32 {
    let mut out = 0i32;
    for k in 0..24 {
        *integral = integral.wrapping_add(error >> (k & 7));
        out = out.wrapping_add(error.wrapping_mul(3) + (*integral >> 4));
    }
    out
}

#[inline(never)]
fn smooth(x: u32, taps: u32) -> u32 {
    let mut acc = 0u32;
    let mut v = x;
    for _ in 0..taps {
        v = v.rotate_left(5) ^ 0x6b43_a9b5;
        acc = acc.wrapping_add(v >> 3);
    }
    acc / taps.max(1)
}

#[rtic::app(device = lm3s6965, dispatchers = [SSI0])]
mod app {
    use super::{pid, smooth, ROUNDS};
    use cortex_m_semihosting::{debug, hprintln};
    use lm3s6965::Interrupt;

    #[shared]
    struct Shared {
        speed: i32,
        command: i32,
    }

    #[local]
    struct Local {
        integral: i32,
    }

    #[init]
    fn init(_: init::Context) -> (Shared, Local) {
        hprintln!("motor: start");
        (
            Shared {
                speed: 0,
                command: 0,
            },
            Local { integral: 0 },
        )
    }

    #[idle(shared = [speed])]
    fn idle(mut cx: idle::Context) -> ! {
        let mut n = 0u32;
        loop {
            let s = smooth(n, 20);
            cx.shared.speed.lock(|v| *v = (*v + s as i32) >> 1);
            rtic::pend(Interrupt::GPIOA);
            if n % 3 == 0 {
                rtic::pend(Interrupt::GPIOB);
            }
            if n % 16 == 0 {
                rtic::pend(Interrupt::GPIOC);
            }
            n += 1;
            if n == ROUNDS {
                hprintln!("motor: done");
                debug::exit(debug::EXIT_SUCCESS);
            }
        }
    }

    /// The ADC conversion is in: highest priority, short.
    #[task(binds = GPIOC, priority = 3, shared = [speed])]
    fn adc(mut cx: adc::Context) {
        let raw = smooth(7, 12) as i32;
        cx.shared.speed.lock(|v| *v ^= raw & 0xff);
    }

    /// The control loop.
    #[task(binds = GPIOA, priority = 2, shared = [speed, command], local = [integral])]
    fn control(mut cx: control::Context) {
        let speed = cx.shared.speed.lock(|v| *v);
        let out = pid(1000 - speed, cx.local.integral);
        cx.shared.command.lock(|c| *c = out);
    }

    /// Telemetry, below the control loop.
    #[task(binds = GPIOB, priority = 1, shared = [command])]
    fn telemetry(mut cx: telemetry::Context) {
        let c = cx.shared.command.lock(|c| *c);
        let _ = smooth(c as u32, 40);
        log::spawn(c).ok();
    }

    /// A software task on the dispatcher.
    #[task(priority = 1)]
    async fn log(_: log::Context, value: i32) {
        let _ = smooth(value as u32, 8);
    }
}
