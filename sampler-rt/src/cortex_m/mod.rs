//! The Cortex-M runtime: `start` reads the run's configuration and starts the timer, the
//! handlers sample, the slow path streams or sends the dump.

mod dump;
mod handlers;
mod state;

use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use crate::wire::{self, Config};

use crate::wire::{PHASE_IDLE, PHASE_RUNNING, PHASE_STOPPED};
use dump::*;
pub use handlers::sampler_rt_entry;
use handlers::*;
pub use state::SAMPLER_RT_STATE;
use state::*;

/// A timer of the chip that paces the sampler in place of SysTick, driven by the firmware: the
/// way to sample on any timer, beside the ones cargo-sample drives itself.
///
/// The firmware gives three operations, and the sampler keeps its fast path to two stores:
/// - `start(ticks, priority)`: interrupt every `ticks` ticks from now on, at NVIC priority byte
///   `priority` (0, the most urgent, unless `--priority` says otherwise); enable the interrupt.
/// - acknowledging the interrupt: the handler that [`timer_interrupt!`](crate::timer_interrupt)
///   defines writes its `ack` value to `flag`, the timer's interrupt-flag register;
/// - loading the next period: the sampling interrupt writes the next period's length in ticks
///   (random around the mean) to `reload`, a register that sets the length of the period after
///   the current one (an auto-reload or reload register, or a compare register the counter
///   clears at). `reload: 0` samples at a constant period.
///
/// `stop()` stops the timer and clears its pending interrupt. Periods (`--period N`) are in
/// the timer's ticks.
///
/// ```ignore
/// static TIMER: sampler_rt::Timer = sampler_rt::Timer {
///     start: |ticks, prio| { /* program TIM7: ARR = ticks, enable its IRQ at prio */ },
///     stop: || { /* CR1 = 0, clear pending */ },
///     reload: 0x4000_142C, // TIM7_ARR
///     flag: 0x4000_1410,   // TIM7_SR
///     hz: 84_000_000,
/// };
/// sampler_rt::timer_interrupt!(TIM7, ack = 0);
/// // in main:
/// sampler_rt::start_with_timer(&TIMER);
/// ```
pub struct Timer {
    /// Interrupt every `ticks` ticks from now, at this NVIC priority byte.
    pub start: fn(ticks: u32, priority: u8),
    /// No more interrupts, none pending.
    pub stop: fn(),
    /// Address of the register the next period's length is written to; 0 for a constant
    /// period.
    pub reload: u32,
    /// Address of the register [`timer_interrupt!`](crate::timer_interrupt)'s handler writes to
    /// acknowledge the interrupt.
    pub flag: u32,
    /// The timer's clock, Hz (0 if unknown): the report turns its ticks into time and
    /// instructions with it.
    pub hz: u32,
}

/// The firmware's timer, when it gave one.
static mut FIRMWARE_TIMER: Option<&'static Timer> = None;

/// A word the constant-period handlers never write, for a timer without a reload register.
static mut NO_RELOAD: u32 = 0;

/// [`start`], paced by a timer the firmware drives (see [`Timer`]) instead of SysTick.
pub fn start_with_timer(timer: &'static Timer) {
    crate::without_interrupts(|| {
        // SAFETY: the sampling interrupt is not running yet (or masked).
        unsafe { *addr_of_mut!(FIRMWARE_TIMER) = Some(timer) };
    });
    start();
}

pub(crate) fn firmware_timer() -> Option<&'static Timer> {
    // SAFETY: written once, before sampling starts.
    unsafe { *addr_of!(FIRMWARE_TIMER) }
}

/// Start sampling with the configuration `cargo sample` placed in RAM for this run (or the
/// built-in defaults when the firmware was started by other means: 1023-tick random period
/// span, ring mode, no dump transport). Call it once, early in `main`; later calls do nothing.
pub fn start() {
    crate::sampler_rt_sampling_starts();
    let s = state();
    // SAFETY: single-core; the sampling interrupt is not enabled until the end of this function.
    unsafe {
        if (*s).phase != PHASE_IDLE {
            return;
        }
        crate::laps::SYSTICK_SAMPLING = sampling_on_systick;
        let found = read_config();
        let mut cfg = found.unwrap_or_else(defaults);
        if let Some(t) = firmware_timer() {
            cfg.timer = wire::TIMER_CUSTOM;
            if t.reload == 0 {
                cfg.jitter_mask = 0;
            }
        }
        (*s).config_found = found.is_some() as u8;
        (*s).mode = cfg.mode;
        (*s).sink = cfg.sink;
        (*s).timer = cfg.timer;
        (*s).priority = cfg.priority;
        (*s).limit = cfg.limit;
        // Stack windows (ring mode): entries of `stack_entry_words` words, the tag being the
        // stacked xPSR they hold anyway.
        let window = if cfg.mode == wire::MODE_RING {
            cfg.stack_words as u32
        } else {
            0
        };
        let records = if window != 0 {
            cfg.frame_records as u32
        } else {
            0
        };
        // A tagged ring holds (pc, tag) pairs: half as many samples in the same RAM.
        (*s).capacity = if window != 0 {
            RING_SLOTS as u32 / wire::stack_entry_words(window, records)
        } else if cfg.tag_kind != wire::TAG_NONE && cfg.mode == wire::MODE_RING && !cfg!(armv6m) {
            RING_SLOTS as u32 / 2
        } else {
            RING_SLOTS as u32
        };
        if window != 0 {
            // The initial main stack pointer: no window reaches above it.
            const VTOR: *const u32 = 0xE000_ED08 as *const u32;
            STACK_TOP = read_volatile((read_volatile(VTOR) & !0x7F) as *const u32);
        }
        (*s).ring = addr_of_mut!(SAMPLER_RT_RING) as u32;
        (*s).rng = if cfg.seed == 0 { 0x9E37_79B9 } else { cfg.seed };
        (*s).jitter = jitter_operand(cfg.jitter_mask);
        (*s).reload = cfg.reload;
        (*s).magic = STATE_MAGIC;
        (*s).before = 0;
        (*s).stop = wire::STOP_RUNNING;
        // The fastest histogram handler keeps its counters `shift` bytes into the array, which
        // needs unaligned halfword accesses for odd shifts.
        let fast_hist = cfg.jitter_mask == 0 && unaligned_halfwords(cfg.hist_shift);
        // Tags need ARMv7-M's `ldrd`/`strd`; ARMv6-M samples without them.
        let tag = if window != 0 {
            wire::TAG_XPSR
        } else if cfg.mode == wire::MODE_RING && !cfg!(armv6m) {
            cfg.tag_kind
        } else {
            wire::TAG_NONE
        };
        (*s).tag_kind = tag as u32 | window << 8 | records << 16;
        // A word tag at address 0 is the firmware's own (`set_tag`).
        (*s).tag_addr = if cfg.tag_addr == 0 {
            crate::tags::tag_word_address() as u32
        } else {
            cfg.tag_addr
        };
        let constant = cfg.jitter_mask == 0;
        type Variant = unsafe extern "C" fn();
        // Each variant twice (see `handlers`): the frame in r12, or at the stack pointer.
        let (variant, at_sp): (Variant, Variant) = match (cfg.mode, constant, tag) {
            (wire::MODE_HIST, true, _) if fast_hist => (sample_hist, sample_hist_sp),
            (wire::MODE_HIST, true, _) => (sample_hist_aligned, sample_hist_aligned_sp),
            (wire::MODE_HIST, false, _) => (sample_hist_jitter, sample_hist_jitter_sp),
            _ if window != 0 => (sample_stack, sample_stack_sp),
            (_, true, wire::TAG_XPSR) => (sample_ring_xpsr, sample_ring_xpsr_sp),
            (_, true, wire::TAG_WORD) => (sample_ring_word, sample_ring_word_sp),
            (_, false, wire::TAG_XPSR) => (sample_ring_jitter_xpsr, sample_ring_jitter_xpsr_sp),
            (_, false, wire::TAG_WORD) => (sample_ring_jitter_word, sample_ring_jitter_word_sp),
            (_, true, _) => (sample_ring, sample_ring_sp),
            (_, false, _) => (sample_ring_jitter, sample_ring_jitter_sp),
        };
        (*s).variant = variant as usize as u32;
        // Straight from the entry to the variant when every exception frame it can find is at
        // the stack pointer: the image never switches thread mode to the process stack (the
        // host's reading) and thread mode is on the main stack now.
        #[cfg(not(armv6m))]
        {
            let main_stack =
                cfg.flags & wire::CONFIG_MAIN_STACK_ONLY != 0 && control() & CONTROL_SPSEL == 0;
            (*s).after_check = if main_stack {
                at_sp as usize as u32
            } else {
                sampler_rt_frame as *const () as u32
            };
            (*s).handler = (*s).after_check;
        }
        #[cfg(armv6m)]
        {
            let _ = at_sp;
            (*s).handler = variant as usize as u32;
        }
        let usable = match cfg.mode {
            wire::MODE_RING => RING_SLOTS > 0,
            wire::MODE_HIST => HIST_BINS > 0 && (1..=16).contains(&cfg.hist_shift),
            _ => false,
        };
        if !usable {
            (*s).phase = PHASE_STOPPED;
            return;
        }
        if cfg.mode == wire::MODE_HIST {
            setup_hist(s, &cfg, fast_hist);
        }
        next_chunk(s);
        setup_late(s, &cfg);
        (*s).phase = PHASE_RUNNING;
        match cfg.timer {
            wire::TIMER_CMSDK | wire::TIMER_GPTM | wire::TIMER_NRF | wire::TIMER_STM32 => {
                start_device(s, &cfg);
                if cfg.timer == wire::TIMER_GPTM {
                    late_on_gptm(s, &cfg);
                }
            }
            wire::TIMER_CUSTOM => start_firmware_timer(s, &cfg),
            _ if !systick_is_ours() => {
                (*s).phase = PHASE_STOPPED;
                (*s).stop = wire::STOP_TIMER_TAKEN;
            }
            _ => start_systick(s, &cfg),
        }
    }
}

/// Whether the lateness check ran (`wire::LATE_*`; 0: the host did not ask for it).
static mut LATE_HOW: u32 = 0;

/// The lateness check and what it reads, for the pacing timer (see `handlers::probe_systick`):
/// none unless the host asked for it and the timer has a count the sampler can read.
///
/// Never inlined: the firmware's code must not hold the timers' addresses (the host reads a
/// function that does as one that drives the timer).
///
/// # Safety
/// Not sampling yet.
#[inline(never)]
unsafe fn setup_late(s: *mut State, cfg: &Config) {
    // SAFETY: the sampling interrupt is not enabled yet.
    unsafe {
        (*s).held_off = 0;
        (*s).late_flag = 0;
        (*s).late_or = if cfg.mode == wire::MODE_HIST {
            u32::MAX
        } else if ((*s).tag_kind >> 8) & 0xFF != 0 {
            0
        } else {
            1
        };
        #[cfg(not(armv6m))]
        let (probe, reg): (u32, u32) = match cfg.timer {
            wire::TIMER_SYSTICK => (probe_systick as *const () as u32, SYST_RVR as u32),
            wire::TIMER_CMSDK => (
                probe_cmsdk as *const () as u32,
                cfg.timer_base + CMSDK_VALUE,
            ),
            // Checked once the timer runs (`late_on_gptm`).
            _ => (0, 0),
        };
        #[cfg(armv6m)]
        let (probe, reg) = (0u32, 0u32);
        (*s).late_ticks = 0;
        LATE_HOW = 0;
        if cfg.late_ticks == 0 {
            return;
        }
        LATE_HOW = wire::LATE_NO_COUNT;
        if probe != 0 {
            (*s).probe_reg = reg;
            (*s).late_ticks = cfg.late_ticks;
            (*s).handler = probe;
            LATE_HOW = wire::LATE_CHECKED;
        }
    }
}

/// A Stellaris timer's count (TAR) is checked only if it moves: QEMU's model reads it as 0.
///
/// # Safety
/// The timer at `cfg.timer_base` was just started by `start_device`.
#[cfg(not(armv6m))]
#[inline(never)]
unsafe fn late_on_gptm(s: *mut State, cfg: &Config) {
    if cfg.late_ticks == 0 {
        return;
    }
    let tar = (cfg.timer_base + GPTM_TAR) as *const u32;
    // SAFETY: a register of the timer this state started.
    unsafe {
        let first = read_volatile(tar);
        let mut moved = false;
        for _ in 0..64 {
            if read_volatile(tar) != first {
                moved = true;
                break;
            }
        }
        if !moved {
            LATE_HOW = wire::LATE_UNREADABLE;
            return;
        }
        crate::without_interrupts(|| {
            (*s).probe_reg = cfg.timer_base + GPTM_TAILR;
            (*s).late_ticks = cfg.late_ticks;
            (*s).handler = probe_gptm as *const () as u32;
        });
        LATE_HOW = wire::LATE_CHECKED;
    }
}

#[cfg(armv6m)]
unsafe fn late_on_gptm(_: *mut State, _: &Config) {}

/// The HELD_OFF record's words, when the host asked for the check.
pub(crate) fn held_off_record() -> Option<[u32; 3]> {
    let s = state();
    // SAFETY: plain reads; written before sampling started (and the count by the handler).
    unsafe {
        let how = *addr_of!(LATE_HOW);
        (how != 0).then(|| {
            [
                read_volatile(addr_of!((*s).late_ticks)),
                read_volatile(addr_of!((*s).held_off)),
                how,
            ]
        })
    }
}

/// CONTROL.SPSEL: thread mode runs on the process stack (reads 0 in handler mode).
#[cfg(not(armv6m))]
const CONTROL_SPSEL: u32 = 1 << 1;

/// The CONTROL register.
#[cfg(not(armv6m))]
fn control() -> u32 {
    let v: u32;
    // SAFETY: reading a special register has no side effect.
    unsafe {
        core::arch::asm!("mrs {}, control", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    v
}

/// Whether the core may make unaligned halfword accesses: ARMv7-M and later can, unless
/// `CCR.UNALIGN_TRP` is set; an even shift needs none.
fn unaligned_halfwords(shift: u8) -> bool {
    if cfg!(armv6m) {
        return false;
    }
    const SCB_CCR: *const u32 = 0xE000_ED14 as *const u32;
    // SAFETY: reading the configuration and control register of the system control block.
    let trap = unsafe { read_volatile(SCB_CCR) } & (1 << 3) != 0;
    shift.is_multiple_of(2) || !trap
}

/// Zero the bins and point the state at them. `bins` becomes the address of counter 0 as the
/// chosen handler addresses it: `shift` bytes into the array for the fast ARMv7-M handler, the
/// array's start for the others.
///
/// # Safety
/// Not sampling yet.
unsafe fn setup_hist(s: *mut State, cfg: &Config, fast: bool) {
    // SAFETY: the bins array is this module's; the sampling interrupt is not enabled.
    unsafe {
        let bins = addr_of_mut!(SAMPLER_RT_BINS) as *mut u16;
        for i in 0..HIST_BINS + 16 {
            write_volatile(bins.add(i), 0);
        }
        // Read through the symbol, which keeps it in the image for the host.
        let counters = read_volatile(addr_of!(SAMPLER_RT_HIST_COUNTERS));
        let word = bins as u32 + cfg.hist_shift as u32;
        (*s).bins = if fast { word } else { bins as u32 };
        (*s).hist_word = word;
        (*s).hist_base = cfg.hist_base;
        (*s).last_bin = counters - 1;
        (*s).capacity = counters - 1;
        (*s).wptr = cfg.hist_base;
        if cfg.jitter_mask == 0 {
            (*s).rng = word;
        }
    }
}

/// # Safety
/// The firmware gave its timer; its handler must be sampler-rt's.
#[inline(never)]
unsafe fn start_firmware_timer(s: *mut State, cfg: &Config) {
    let Some(t) = firmware_timer() else { return };
    // SAFETY: the state is not in use by the sampling interrupt yet.
    unsafe {
        (*s).reload_reg = if t.reload == 0 {
            addr_of_mut!(NO_RELOAD) as u32
        } else {
            t.reload
        };
        (*s).ack_reg = t.flag;
    }
    (t.start)(cfg.reload, cfg.priority);
}

/// Stop the firmware's timer (see [`Timer`]).
pub(crate) fn stop_firmware_timer() {
    if let Some(t) = firmware_timer() {
        (t.stop)();
    }
}

/// Start a fresh period of the firmware's timer.
pub(crate) fn restart_firmware_timer(ticks: u32, priority: u8) {
    if let Some(t) = firmware_timer() {
        (t.stop)();
        (t.start)(ticks, priority);
    }
}

/// Whether SysTick's vector, in the table the core uses (VTOR; 0 where there is none), is the
/// sampler's entry: otherwise the application owns SysTick (its handler won the link, or it
/// installed one in a table of its own) and the sampler must leave it alone.
#[inline(never)]
fn systick_is_ours() -> bool {
    const VTOR: *const u32 = 0xE000_ED08 as *const u32;
    // SAFETY: VTOR is architected (RAZ where not implemented); the vector table is readable.
    unsafe {
        let table = read_volatile(VTOR) & !0x7F;
        let vector = read_volatile((table as usize + 15 * 4) as *const u32);
        vector & !1 == sampler_rt_entry as *const () as u32 & !1
    }
}

/// # Safety
/// Programs SysTick; the `systick` feature must provide its handler.
#[inline(never)]
unsafe fn start_systick(s: *mut State, cfg: &Config) {
    // SAFETY: memory-mapped system registers of every ARMv6-M/ARMv7-M/ARMv8-M core.
    unsafe {
        (*s).reload_reg = SYST_RVR as u32;
        let shpr3 = read_volatile(SCB_SHPR3);
        write_volatile(
            SCB_SHPR3,
            (shpr3 & 0x00FF_FFFF) | (cfg.priority as u32) << 24,
        );
        write_volatile(SYST_CSR, 0);
        write_volatile(SYST_RVR, cfg.reload & 0x00FF_FFFF);
        write_volatile(SYST_CVR, 0);
        // ENABLE | TICKINT | CLKSOURCE (core clock).
        write_volatile(SYST_CSR, 7);
    }
}

/// # Safety
/// Programs the device timer at `cfg.timer_base` (a CMSDK, GPTM, nRF or STM32 timer, as
/// `cfg.timer` says) to interrupt every `cfg.reload` ticks at `cfg.priority`; its interrupt
/// handler must be sampler-rt's ([`crate::timer_interrupt!`], or the one the host had built in).
#[inline(never)]
unsafe fn start_device(s: *mut State, cfg: &Config) {
    let (base, irq) = (cfg.timer_base, cfg.timer_irq);
    let Some(d) = driver(cfg.timer) else { return };
    let reg = |offset: u32| (base + offset) as *mut u32;
    // SAFETY: the host named a timer of this kind at this base address and its interrupt.
    unsafe {
        (*s).reload_reg = base + d.reload;
        (*s).ack_reg = base + d.ack;
        stop_device(cfg.timer, base, irq);
        match cfg.timer {
            wire::TIMER_CMSDK => {
                write_volatile(reg(CMSDK_RELOAD), cfg.reload);
                write_volatile(reg(CMSDK_VALUE), cfg.reload);
            }
            wire::TIMER_GPTM => {
                // One 32-bit timer, periodic, interrupt on time-out.
                write_volatile(reg(GPTM_CFG), 0);
                write_volatile(reg(GPTM_TAMR), 0x2);
                write_volatile(reg(GPTM_TAILR), cfg.reload);
                write_volatile(reg(GPTM_IMR), 1);
            }
            wire::TIMER_NRF => {
                // Timer mode, 32 bits, 16 MHz; compare 0 clears the counter and interrupts.
                write_volatile(reg(NRF_MODE), 0);
                write_volatile(reg(NRF_BITMODE), 3);
                write_volatile(reg(NRF_PRESCALER), 0);
                write_volatile(reg(NRF_CC0), cfg.reload);
                write_volatile(reg(NRF_SHORTS), 1);
                write_volatile(reg(NRF_TASKS_CLEAR), 1);
                write_volatile(reg(NRF_INTENSET), 1 << 16);
            }
            wire::TIMER_STM32 => {
                // Up-counting to ARR, no prescaler, update interrupt only. The counter is not
                // written: QEMU 7.2 then loses the period (measured: 1.2 ms instead of 80 us).
                write_volatile(reg(STM32_PSC), 0);
                write_volatile(reg(STM32_ARR), cfg.reload);
                write_volatile(reg(STM32_SR), 0);
                write_volatile(reg(STM32_DIER), 1);
            }
            _ => {}
        }
        let ipr = NVIC_IPR.add((irq / 4) as usize);
        let shift = (irq % 4) * 8;
        let v = read_volatile(ipr) & !(0xFF << shift);
        write_volatile(ipr, v | (cfg.priority as u32) << shift);
        write_volatile(NVIC_ISER.add((irq / 32) as usize), 1 << (irq % 32));
        match cfg.timer {
            // ENABLE | INTERRUPT ENABLE.
            wire::TIMER_CMSDK => write_volatile(reg(CMSDK_CTRL), 0b1001),
            wire::TIMER_GPTM => write_volatile(reg(GPTM_CTL), 1),
            wire::TIMER_NRF => write_volatile(reg(NRF_TASKS_START), 1),
            // CEN | URS (only an overflow interrupts).
            wire::TIMER_STM32 => write_volatile(reg(STM32_CR1), 0b101),
            _ => {}
        }
    }
}

/// Samples taken so far.
pub fn samples_taken() -> u32 {
    let s = state();
    // SAFETY: plain reads of words the handler updates atomically.
    unsafe {
        let before = read_volatile(addr_of!((*s).before));
        let chunk = read_volatile(addr_of!((*s).chunk));
        let remaining = read_volatile(addr_of!((*s).remaining));
        before + chunk - remaining
    }
}

/// The samples taken so far while the sampler runs (`None` before it starts and after it stops):
/// where a lap falls on the samples' time axis.
pub(crate) fn running_seq() -> Option<u32> {
    let s = state();
    // SAFETY: a plain read of a byte the sampler updates atomically.
    let phase = unsafe { read_volatile(addr_of!((*s).phase)) };
    (phase == PHASE_RUNNING).then(samples_taken)
}

/// Whether the sampler is pacing itself with SysTick right now.
fn sampling_on_systick() -> bool {
    let s = state();
    // SAFETY: plain reads of the state.
    unsafe {
        read_volatile(addr_of!((*s).phase)) == PHASE_RUNNING
            && read_volatile(addr_of!((*s).timer)) == wire::TIMER_SYSTICK
    }
}

/// Give sampler-rt a function that writes bytes out (a UART, USB serial): with
/// `cargo sample --serial PORT` the dump goes through it, once, when the sample limit is reached
/// (from the sampling interrupt) or at [`flush`]. It should block until the bytes are out.
/// Call it before [`start`].
pub fn set_writer(write: fn(&[u8])) {
    crate::without_interrupts(|| {
        // SAFETY: the sampling interrupt, the only other user, is masked.
        unsafe { *addr_of_mut!(WRITER) = Some(write) };
    });
}

/// Stop sampling and keep what was taken (a later [`flush`] or [`exit`] still sends it).
pub fn stop() {
    let s = state();
    crate::without_interrupts(|| {
        // SAFETY: the sampling interrupt is masked.
        unsafe {
            if (*s).phase == PHASE_RUNNING {
                stop_timer(s);
                (*s).phase = PHASE_STOPPED;
                (*s).stop = wire::STOP_FIRMWARE;
            }
        }
    });
}

/// Stop sampling and send the dump now (in QEMU: write it through semihosting). Call this before
/// a firmware ends by its own means, so that the samples taken so far reach the host.
pub fn flush() {
    stop();
    // SAFETY: sampling is stopped; nothing else touches the state.
    unsafe { send_dump(state()) };
}

/// Send the dump and end the program through semihosting with `code` (QEMU exits with it).
pub fn exit(code: i32) -> ! {
    flush();
    semihosting_exit(code)
}

/// The run's configuration, as `start` reads it (`None`: the built-in defaults apply).
#[cfg(feature = "embassy")]
pub(crate) fn run_config() -> Option<Config> {
    read_config()
}
