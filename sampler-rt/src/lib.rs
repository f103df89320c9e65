//! The on-target runtime of `cargo sample`: statistical PC sampling, lap timing of code regions,
//! and (ARMv8-A) PMU event counting, for Cortex-M and ARMv8-A firmware.
//!
//! Add it as an optional dependency behind a feature and call [`start`] at the top of `main`:
//!
//! ```toml
//! [dependencies]
//! sampler-rt = { version = "0.1", optional = true }
//!
//! [features]
//! sample = ["dep:sampler-rt"]
//! ```
//!
//! ```ignore
//! #[entry]
//! fn main() -> ! {
//!     #[cfg(feature = "sample")]
//!     sampler_rt::start();
//!     // ...
//! }
//! ```
//!
//! # What exists where
//!
//! | API | Cortex-M (ARMv7-M, ARMv8-M) | Cortex-M0/M0+ (ARMv6-M) | ARMv8-A (aarch64) |
//! |---|---|---|---|
//! | [`start`], [`flush`], [`exit`] | yes | yes | yes |
//! | `stop`, `samples_taken`, `set_writer` (a byte sink, e.g. a UART) | yes | yes | – |
//! | `start_keeping_vectors`, `on_irq` (firmware with its own vectors) | – | – | yes |
//! | [`set_tag`], [`tag`], [`name_tag`] | yes | tags not stored | yes |
//! | [`laps`] | DWT CYCCNT, else SysTick | SysTick | PMCCNTR_EL0 / CNTVCT_EL0 |
//! | `pmu` (event counting around regions) | – | – | yes |
//! | `timer_interrupt!`, `cmsdk_timer_interrupt!` (a device timer instead of SysTick: CMSDK, Stellaris GPTM, Nordic TIMER, STM32 TIM) | yes | yes | – |
//! | `Timer`, `start_with_timer` (any timer, driven by the firmware) | yes | yes | – |
//!
//! The docs show one target at a time; docs.rs builds them for `thumbv7em-none-eabihf`,
//! `thumbv6m-none-eabi` and `aarch64-unknown-none`.
//!
//! `cargo sample` writes the run's configuration (mode, period, jitter, number of samples) into
//! the firmware's RAM before it starts, so one ELF serves every setting and the report is
//! symbolized against the very image that ran.
//!
//! # How it samples
//! A timer interrupt of the highest priority (SysTick unless the `systick` feature is off) takes
//! the interrupted program counter from the exception frame and stores it in a ring. The
//! handler is written in assembly: 8 instructions per sample at a constant period, 15.5 on
//! average with a random period (ARMv7-M, counted exactly in QEMU by `cargo-sample-bench`).
//! Those figures are for an image that never switches thread mode to the process stack
//! (`cargo sample` finds no `msr psp` or `msr control` in it): every exception frame is then at
//! the stack pointer. Otherwise the frame is on MSP or PSP as bit 2 of EXC_RETURN says, which
//! costs five instructions more. When the image has handlers of its own, `cargo sample` asks
//! for a lateness check (8 instructions more): the timer's count on entry tells a sample that a
//! handler as urgent as the sampler held off, and the report shows those as a row of their own.
//! When the requested number of samples is taken the timer stops and the dump goes to the host
//! (through semihosting in QEMU); `cargo sample` then decodes it.
//!
//! # Features
//! - `systick` (default): the sampler owns the SysTick exception. When the application owns
//!   SysTick, `cargo sample` builds sampler-rt with a free device timer's handler instead
//!   (`SAMPLER_RT_TIMER_VECTOR`); by hand, turn the feature off and use `timer_interrupt!` (Cortex-M).
//! - `embassy` (Cortex-M): implements embassy-executor's trace hooks (enable its `trace`
//!   feature): each sample carries the Embassy task being polled (`cargo sample` records it for
//!   such an image unless `--tag` says otherwise), and each task's polls, time in polls (the
//!   longest, and a histogram; polls of another executor nested in it left out), wake-to-poll
//!   latency (the longest, and a histogram), and each executor's idle time (the first executor
//!   and three more) are kept (timed by DWT CYCCNT, else by SysTick when the sampler leaves it
//!   free) and sent as the dump's TASKS record: the report's task table.
//!   A hook only appends an event (15 to 20 instructions on Thumb-2); the statistics are
//!   folded from the events when an executor idles and when the run ends.
//!   `SAMPLER_RT_TASKS` (a power of two, default 8) sets how many tasks are kept, 328 bytes of
//!   RAM each after a 256-byte header; `SAMPLER_RT_TASK_EVENTS` (a power of two, default 64,
//!   16 bytes each) how many events are held until they are folded; `SAMPLER_RT_TASK_TRACE`
//!   (default 256, 12 bytes each, 0 for none) how many of the newest polls are kept in order
//!   for the timeline.
//! - `defmt-timestamp`: defines defmt's timestamp as [`samples_taken`], so that `cargo sample
//!   --format firefox` puts the firmware's defmt log lines on the samples' timeline (not for an
//!   application that defines its own timestamp).
//!
//! # Tags
//! `cargo sample --tag exception` records with each sample the exception that was running
//! (from the stacked xPSR: thread mode, or which handler), at no cost in instructions;
//! `--tag api` records the firmware's own tag ([`set_tag`], or the Embassy hooks), and
//! `--tag symbol:NAME` any word of the firmware (an RTOS's current-task pointer). [`name_tag`]
//! gives tags names for the report. Tags need ARMv7-M or later.
//!
//! # Lap timing
//! [`laps`] times named regions (`Region::measure`, cyclic executives with `iterate`) on DWT
//! CYCCNT or SysTick (Cortex-M), or PMCCNTR_EL0 / CNTVCT_EL0 (ARMv8-A); `cargo sample --laps`.
//! Laps timed while the sampler runs are also kept in order (`SAMPLER_RT_LAP_TRACE` below) and
//! drawn on `--format firefox`'s timeline.
//!
//! # ARMv8-A (aarch64)
//! [`start`], [`flush`] and [`exit`] sample at EL1, EL2 or EL3 with the virtual generic timer,
//! or on a PMU overflow (the cycle counter, or an event on counter 0), through a GICv2 (QEMU
//! `virt`); the module `pmu` counts PMU events around regions for `cargo sample stat`. Firmware with
//! interrupts of its own calls `start_keeping_vectors` and, from its IRQ handler, `on_irq`.
//!
//! # Build-time settings
//! - `SAMPLER_RT_RING_SLOTS` (environment, default 10240; `cargo sample` fits it to the part's
//!   RAM): ring capacity in samples; the ring costs 4 bytes of RAM per slot (8 with tags), plus
//!   88 bytes of state and 56 of configuration.
//! - `SAMPLER_RT_LAP_TRACE` (environment, default 256): laps kept in order while sampling, the
//!   newest ones, 12 bytes of RAM each in firmware that times laps; 0 keeps none.
//! - `SAMPLER_RT_PMU_TRACE_WORDS` (environment, default 2048): ARMv8-A words for the PMU
//!   region laps kept in order while sampling (`3 + events` words a lap); 0 keeps none.
//!
//! The dump format and the configuration block (module `wire`) are shared with the host and
//! are not part of this crate's API.
#![no_std]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[doc(hidden)]
pub mod wire;

#[cfg(all(target_arch = "arm", target_os = "none"))]
mod cortex_m;

#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
pub mod laps;

#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
pub mod bench;

#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
mod tags;

#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
mod host_wait;

#[cfg(all(feature = "embassy", target_arch = "arm", target_os = "none"))]
mod tasks;

#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
pub use tags::{name_tag, set_tag, tag};

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub mod pmu;

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod a64;

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod semihosting;

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub use a64::{exit, flush, on_irq, samples_taken, start, start_keeping_vectors};

#[cfg(all(target_arch = "arm", target_os = "none"))]
pub use cortex_m::{Timer, exit, flush, samples_taken, set_writer, start, start_with_timer, stop};

// defmt's timestamp: the samples taken so far, so the host can place log lines among samples.
#[cfg(all(
    feature = "defmt-timestamp",
    any(target_arch = "arm", target_arch = "aarch64"),
    target_os = "none"
))]
defmt::timestamp!("{=u32}", samples_taken());

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub(crate) use a64::running_seq;
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub(crate) use cortex_m::running_seq;

#[cfg(all(target_arch = "arm", target_os = "none"))]
#[doc(hidden)]
pub mod __private {
    pub use crate::cortex_m::{SAMPLER_RT_STATE, sampler_rt_entry};
}

/// Run `f` with interrupts masked (PRIMASK on Cortex-M, DAIF.I on ARMv8-A), restoring the
/// mask afterwards.
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub(crate) fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let primask: u32;
    // SAFETY: reading PRIMASK and masking interrupts has no memory effects.
    unsafe {
        core::arch::asm!("mrs {}, PRIMASK", "cpsid i", out(reg) primask, options(nomem, nostack))
    };
    let r = f();
    if primask & 1 == 0 {
        // SAFETY: interrupts were enabled on entry.
        unsafe { core::arch::asm!("cpsie i", options(nomem, nostack)) };
    }
    r
}

/// Run `f` with interrupts masked (PRIMASK on Cortex-M, DAIF.I on ARMv8-A), restoring the
/// mask afterwards.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub(crate) fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let daif: u64;
    // SAFETY: reading DAIF and masking IRQs has no memory effects.
    unsafe {
        core::arch::asm!("mrs {}, daif", "msr daifset, #2", out(reg) daif, options(nomem, nostack))
    };
    let r = f();
    if daif & (1 << 7) == 0 {
        // SAFETY: IRQs were unmasked on entry.
        unsafe { core::arch::asm!("msr daifclr, #2", options(nomem, nostack)) };
    }
    r
}

/// A block `cargo sample` wrote into the image (the run's configuration, a PMU group), read
/// byte by byte as volatile: the compiler cannot know its initial bytes changed.
#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
fn host_block<const N: usize>(block: *const [u8; N]) -> [u8; N] {
    let mut b = [0u8; N];
    for (i, byte) in b.iter_mut().enumerate() {
        // SAFETY: `block` points at N bytes of plain memory (a static of the crate).
        *byte = unsafe { core::ptr::read_volatile((block as *const u8).add(i)) };
    }
    b
}

/// Where sampling begins: `start()` calls it first. An exact count of the run (`--truth` in
/// QEMU) counts from here, the time the sampler could see, and keeps what ran before it
/// (start-up code, `.bss` zeroing, the application's own set-up) apart. A function of its own
/// with a name the host finds, never inlined, and not empty, so that the call stays.
#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn sampler_rt_sampling_starts() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// Version of this crate as carried in dumps: `major << 8 | minor`.
#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
pub(crate) const RT_VERSION: u16 = {
    let major = decimal(env!("CARGO_PKG_VERSION_MAJOR")) as u16;
    let minor = decimal(env!("CARGO_PKG_VERSION_MINOR")) as u16;
    major << 8 | minor
};

/// A decimal number given at build time (the build script checked its digits).
#[cfg(all(any(target_arch = "arm", target_arch = "aarch64"), target_os = "none"))]
const fn decimal(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as usize;
        i += 1;
    }
    v
}

/// Define a device timer's interrupt handler as the sampling interrupt, for applications that
/// keep SysTick for themselves (Cortex-M).
///
/// Give the interrupt's name as your device crate (PAC) or `device.x` spells it, and the value
/// that acknowledges the timer's interrupt when written to its flag register: `1` for Arm's
/// CMSDK timers and TI's Stellaris/Tiva GPTM, `0` for Nordic's TIMER events. Then run
/// `cargo sample --timer KIND:BASE:IRQ`. The handler adds five instructions per sample to the
/// SysTick handler's (measured exactly in QEMU by `cargo-sample-bench --timers-only`: 20.5
/// against 15.5 on a Cortex-M3, 38.5 against 33.5 on a Cortex-M0, with jitter): it loads the
/// flag register's address from the sampler's state, writes the value there, and continues in
/// the same sampling code.
///
/// cargo-sample does this by itself for the timers it knows (`--timer` in
/// `cargo sample --help`): when SysTick belongs to the application it picks a free one and has this handler built in
/// (through `SAMPLER_RT_TIMER_VECTOR` and `SAMPLER_RT_TIMER_ACK` at build time).
///
/// ```ignore
/// sampler_rt::timer_interrupt!(TIMER_0A, ack = 1); // lm3s6965: GPTM 0, timer A
/// ```
#[cfg(all(target_arch = "arm", target_os = "none"))]
#[macro_export]
macro_rules! timer_interrupt {
    ($name:ident, ack = $ack:literal) => {
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        #[doc(hidden)]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name() {
            ::core::arch::naked_asm!(
                "ldr r1, ={state}",
                "ldr r0, [r1, #28]",
                "movs r2, #{ack}",
                "str r2, [r0]",
                "b {entry}",
                ".ltorg",
                state = sym $crate::__private::SAMPLER_RT_STATE,
                entry = sym $crate::__private::sampler_rt_entry,
                ack = const $ack,
            )
        }
    };
}

/// Define the interrupt handler of an Arm CMSDK APB timer (mps2/mps3 machines) as the sampling
/// interrupt: [`timer_interrupt!`] with the CMSDK timer's acknowledgement.
///
/// Then run `cargo sample --timer cmsdk:BASE:IRQ`, e.g. `--timer cmsdk:0x40000000:8` for
/// TIMER0 of mps2-an385.
///
/// ```ignore
/// sampler_rt::cmsdk_timer_interrupt!(TIMER0);
/// ```
#[cfg(all(target_arch = "arm", target_os = "none"))]
#[macro_export]
macro_rules! cmsdk_timer_interrupt {
    ($name:ident) => {
        $crate::timer_interrupt!($name, ack = 1);
    };
}
