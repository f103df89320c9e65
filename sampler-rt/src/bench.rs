//! Firmware benchmarks: code the firmware times in iterations, each counted to the instruction
//! by `cargo sample bench` in QEMU (and estimated in cycles with `--cycles`).
//!
//! ```ignore
//! #[entry]
//! fn main() -> ! {
//!     let data = [0x5Au8; 1024];
//!     sampler_rt::bench!("crc32 of 1 KiB", |b| b.iter(|| crc32(&data)));
//!     sampler_rt::bench!("sort 256", 50, |b| b.iter_batched_ref(|| shuffled(), |v| v.sort()));
//!     sampler_rt::bench::finish()
//! }
//! ```
//!
//! Each benchmark is a lap region (see [`crate::laps`]) whose laps are its iterations, one
//! `start()` guard around each call of the routine: the setup of `iter_batched` and
//! `iter_batched_ref` and the loop itself are outside them, and the routine's result goes through [`black_box`] so that the
//! compiler cannot drop the work. The host reads every iteration's instructions from the
//! instructions QEMU ran between the guard's two calls, so the figures do not depend on the
//! lap counter. At most [`crate::laps::MAX_REGIONS`] regions (benchmarks and other lap
//! regions together) are kept.

use core::hint::black_box;

use crate::laps::Region;

/// Iterations a benchmark runs when it does not say.
pub const DEFAULT_ITERATIONS: u32 = 100;

/// Runs a benchmark's iterations.
pub struct Bencher {
    region: &'static Region,
    iterations: u32,
}

impl Bencher {
    /// Time `routine`, called once an iteration.
    #[inline(always)]
    pub fn iter<R>(&mut self, mut routine: impl FnMut() -> R) {
        for _ in 0..self.iterations {
            let lap = self.region.start();
            black_box(routine());
            drop(lap);
        }
    }

    /// Time `routine` on an input `setup` makes afresh for each iteration, outside the timed
    /// part, and passes by reference: nothing is copied inside the timed part.
    #[inline(always)]
    pub fn iter_batched_ref<I, R>(
        &mut self,
        mut setup: impl FnMut() -> I,
        mut routine: impl FnMut(&mut I) -> R,
    ) {
        for _ in 0..self.iterations {
            let mut input = black_box(setup());
            let lap = self.region.start();
            black_box(routine(&mut input));
            drop(lap);
            black_box(&input);
        }
    }

    /// Time `routine` on an input `setup` makes afresh for each iteration, outside the timed
    /// part. The input moves into `routine` and its result out through [`black_box`]: a large
    /// input or result is copied inside the timed part ([`iter_batched_ref`](Self::iter_batched_ref)
    /// copies nothing).
    #[inline(always)]
    pub fn iter_batched<I, R>(
        &mut self,
        mut setup: impl FnMut() -> I,
        mut routine: impl FnMut(I) -> R,
    ) {
        for _ in 0..self.iterations {
            let input = black_box(setup());
            let lap = self.region.start();
            black_box(routine(input));
            drop(lap);
        }
    }
}

/// Run the benchmark `region` (its name is the benchmark's) for `iterations` iterations;
/// [`bench!`](crate::bench!) makes the region. Starts the runtime if the firmware has not (the
/// host's configuration of a `cargo sample bench` run takes no samples).
pub fn run(region: &'static Region, iterations: u32, f: impl FnOnce(&mut Bencher)) {
    crate::start();
    f(&mut Bencher {
        region,
        iterations: iterations.max(1),
    });
}

/// Send the results to the host and end the run (through semihosting in QEMU).
pub fn finish() -> ! {
    crate::exit(0)
}

/// `bench!(NAME, |b| b.iter(|| ...))`, or `bench!(NAME, ITERATIONS, |b| ...)`: run a benchmark
/// named NAME (a string literal) for ITERATIONS iterations
/// ([`DEFAULT_ITERATIONS`](crate::bench::DEFAULT_ITERATIONS) when not given).
#[macro_export]
macro_rules! bench {
    ($name:expr, $iterations:expr, $f:expr) => {{
        static REGION: $crate::laps::Region = $crate::laps::Region::new($name);
        $crate::bench::run(&REGION, $iterations, $f)
    }};
    ($name:expr, $f:expr) => {
        $crate::bench!($name, $crate::bench::DEFAULT_ITERATIONS, $f)
    };
}
