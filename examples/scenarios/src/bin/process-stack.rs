//! Thread mode on the process stack, as under an RTOS: `main` starts the sampler on the main
//! stack, then runs the `hot-loops` workload on a process stack of its own, so that every sample
//! interrupts code whose exception frame is on PSP. The shares are those of `hot-loops`
//! (70 / 20 / 10 %).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, hot_c, on_process_stack, sampling_start};

#[entry]
fn main() -> ! {
    // Started on the main stack: only the image's `msr psp` tells the sampler what follows.
    sampling_start();
    on_process_stack(run)
}

extern "C" fn run() -> ! {
    for _ in 0..2_000_000 {
        hot_a(700);
        hot_b(200);
        hot_c(100);
    }
    finish(0)
}
