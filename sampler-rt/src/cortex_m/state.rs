//! The sampler's state block, ring, bins and configuration (found by the host by symbol), the
//! build-time sizes, and the core registers the sampler drives.

use core::mem::MaybeUninit;
use core::ptr::{addr_of, addr_of_mut, write_volatile};

use crate::wire::{self, Config};

pub(crate) const RING_SLOTS: usize = crate::decimal(env!("SAMPLER_RT_RING_SLOTS"));
/// Histogram counters, a power of two (or 0): the last one counts samples outside the bins.
pub(crate) const HIST_BINS: usize = crate::decimal(env!("SAMPLER_RT_HIST_BINS"));
/// log2 of [`HIST_BINS`]: the handler clamps a bin index to it with one `usat`.
#[cfg(not(armv6m))]
pub(crate) const HIST_BITS: u32 = if HIST_BINS == 0 {
    0
} else {
    HIST_BINS.trailing_zeros()
};

/// The sampler's state. The first eight words are read by the assembly handlers, so their
/// offsets are fixed; the host reads the whole block when it snapshots a running firmware.
/// The ARMv7-M entry loads words 0-3 with one `ldm`, the last into `pc`: that load is the jump
/// to the variant (with the exception frame at the stack pointer), or to the frame finder or
/// the lateness check, which go on to `variant` with the frame in r12.
///
/// ```text
///  0 wptr        next ring slot to write
///  4 remaining   samples left before the slow path runs (ring end or limit)
///  8 rng         xorshift32 state
/// 12 handler     where the entry jumps (Thumb bit set): the variant itself when the
///                interrupted code is always on the main stack, else the frame finder or
///                the lateness check
/// 16 jitter      random span in ticks (mask + 1; ARMv6-M: the mask itself)
/// 20 reload      base reload value
/// 24 reload_reg  address of the timer's reload register
/// 28 ack_reg     address written to acknowledge a device timer's interrupt
/// 32 chunk       length of the current chunk
/// 36 before      samples taken before the current chunk
/// 40 limit       samples requested, 0 = until stopped
/// 44 capacity    ring slots
/// 48 ring        address of the ring
/// 52 mode, stop, timer, priority (bytes)
/// 56 sink, config_found, phase, arch (bytes)
/// 60 magic       "SSTA" once `start` ran
/// 64 hist_word   MODE_HIST: bins address + shift (see `wire::StateView`)
/// 68 hist_base   MODE_HIST: address of the first bin
/// 72 bins        MODE_HIST: the bins array
/// 76 last_bin    MODE_HIST: index of the outside counter
/// 80 tag_addr    TAG_WORD: the word recorded with each sample
/// 84 tag_kind    byte 0: TAG_* (ring entries are (pc, tag) pairs unless TAG_NONE); byte 1:
///                words of stack window per sample (entries are then REC_STACKS entries)
/// 88 variant     ARMv7-M: the variant that takes the exception frame in r12, where the
///                frame finder and the lateness check go on
/// 92 probe_reg   the timer register the check reads (see `handlers`)
/// 96 late_ticks  a sample whose timer ran on more ticks than this since it expired is late
/// 100 late_or    what a late sample's PC is or-ed with (1 ring, all ones bins, 0 stacks)
/// 104 held_off   late samples so far
/// 108 late_flag  stacks: the sample being taken is late (read and cleared by the entry)
/// 112 fake_pc, fake_xpsr: a late sample's marked PC and its xPSR, read by the variant in
///                place of the stacked ones
/// 120 after_check where a sample on time goes on after the lateness check: the variant's
///                twin at the stack pointer, or the frame finder
/// ```
///
/// In `MODE_HIST`, `wptr` holds `hist_base` and, at a constant period, `rng` holds `hist_word`,
/// so that the entry's `ldm` loads what the histogram handler needs.
#[repr(C)]
pub struct State {
    pub(crate) wptr: u32,
    pub(crate) remaining: u32,
    pub(crate) rng: u32,
    pub(crate) handler: u32,
    pub(crate) jitter: u32,
    pub(crate) reload: u32,
    pub(crate) reload_reg: u32,
    pub(crate) ack_reg: u32,
    pub(crate) chunk: u32,
    pub(crate) before: u32,
    pub(crate) limit: u32,
    pub(crate) capacity: u32,
    pub(crate) ring: u32,
    pub(crate) mode: u8,
    pub(crate) stop: u8,
    pub(crate) timer: u8,
    pub(crate) priority: u8,
    pub(crate) sink: u8,
    pub(crate) config_found: u8,
    pub(crate) phase: u8,
    pub(crate) arch: u8,
    pub(crate) magic: u32,
    pub(crate) hist_word: u32,
    pub(crate) hist_base: u32,
    pub(crate) bins: u32,
    pub(crate) last_bin: u32,
    pub(crate) tag_addr: u32,
    pub(crate) tag_kind: u32,
    pub(crate) variant: u32,
    pub(crate) probe_reg: u32,
    pub(crate) late_ticks: u32,
    pub(crate) late_or: u32,
    pub(crate) held_off: u32,
    pub(crate) late_flag: u32,
    pub(crate) fake_pc: u32,
    pub(crate) fake_xpsr: u32,
    pub(crate) after_check: u32,
}

pub(crate) const STATE_MAGIC: u32 = wire::STATE_MAGIC;

// The handlers' assembly and the host's snapshots rely on these offsets.
const _: () = {
    use core::mem::{offset_of, size_of};
    use wire::state_offsets as off;
    assert!(offset_of!(State, wptr) == off::WPTR);
    assert!(offset_of!(State, remaining) == off::REMAINING);
    assert!(offset_of!(State, rng) == off::RNG);
    assert!(offset_of!(State, handler) == off::HANDLER);
    assert!(offset_of!(State, jitter) == off::JITTER);
    assert!(offset_of!(State, reload) == off::RELOAD);
    assert!(offset_of!(State, reload_reg) == off::RELOAD_REG);
    assert!(offset_of!(State, ack_reg) == off::ACK_REG);
    assert!(offset_of!(State, chunk) == off::CHUNK);
    assert!(offset_of!(State, ring) == off::RING);
    assert!(offset_of!(State, mode) == off::MODE);
    assert!(offset_of!(State, sink) == off::SINK);
    assert!(offset_of!(State, magic) == off::MAGIC);
    assert!(offset_of!(State, hist_word) == off::HIST_WORD);
    assert!(offset_of!(State, hist_base) == off::HIST_BASE);
    assert!(offset_of!(State, bins) == off::BINS);
    assert!(offset_of!(State, last_bin) == off::LAST_BIN);
    assert!(offset_of!(State, tag_addr) == off::TAG_ADDR);
    assert!(offset_of!(State, tag_kind) == off::TAG_KIND);
    assert!(offset_of!(State, variant) == off::VARIANT);
    assert!(offset_of!(State, probe_reg) == off::PROBE_REG);
    assert!(offset_of!(State, late_ticks) == off::LATE_TICKS);
    assert!(offset_of!(State, late_or) == off::LATE_OR);
    assert!(offset_of!(State, held_off) == off::HELD_OFF);
    assert!(offset_of!(State, late_flag) == off::LATE_FLAG);
    assert!(offset_of!(State, fake_pc) == off::FAKE_PC);
    assert!(offset_of!(State, after_check) == off::AFTER_CHECK);
    assert!(size_of::<State>() == wire::STATE_LEN);
};
use wire::PHASE_IDLE;

#[doc(hidden)]
#[unsafe(no_mangle)]
pub static mut SAMPLER_RT_STATE: State = State {
    wptr: 0,
    remaining: 0,
    rng: 0,
    handler: 0,
    jitter: 0,
    reload: 0,
    reload_reg: 0,
    ack_reg: 0,
    chunk: 0,
    before: 0,
    limit: 0,
    capacity: 0,
    ring: 0,
    mode: 0,
    stop: 0,
    timer: 0,
    priority: 0,
    sink: 0,
    config_found: 0,
    phase: PHASE_IDLE,
    arch: ARCH,
    magic: 0,
    hist_word: 0,
    hist_base: 0,
    bins: 0,
    last_bin: 0,
    tag_addr: 0,
    tag_kind: 0,
    variant: 0,
    probe_reg: 0,
    late_ticks: 0,
    late_or: 0,
    held_off: 0,
    late_flag: 0,
    fake_pc: 0,
    fake_xpsr: 0,
    after_check: 0,
};

/// The ring of raw program counters. Not zeroed at boot: only the slots written are read.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".uninit.SAMPLER_RT_RING")]
pub(crate) static mut SAMPLER_RT_RING: MaybeUninit<[u32; RING_SLOTS]> = MaybeUninit::uninit();

/// The histogram counters, 256-aligned so that the bins address and the shift share a word.
/// The ARMv7-M handler addresses counter `i` at `shift` bytes into the array (hence the 16
/// spare counters). Zeroed by `start` in histogram mode.
#[repr(C, align(256))]
pub(crate) struct Bins([u16; HIST_BINS + 16]);

#[unsafe(no_mangle)]
#[unsafe(link_section = ".uninit.SAMPLER_RT_BINS")]
pub(crate) static mut SAMPLER_RT_BINS: MaybeUninit<Bins> = MaybeUninit::uninit();

/// The number of histogram counters this build has, for the host (which reads it from the ELF
/// to choose the bin size of a run).
#[unsafe(no_mangle)]
pub(crate) static SAMPLER_RT_HIST_COUNTERS: u32 = HIST_BINS as u32;

/// The host's configuration for this run. It is initialised data, so its initial bytes are in
/// the image: the host writes the run's settings there in the copy of the ELF it loads, and the
/// runtime copies them to RAM at boot. All zeros (an invalid block) selects the defaults.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.SAMPLER_RT_CONFIG")]
pub(crate) static mut SAMPLER_RT_CONFIG: [u8; wire::CONFIG_LEN] = wire::config_placeholder();

/// The initial main stack pointer (the vector table's first word), read by `start` when the
/// run keeps stack windows: a window never reads above it.
pub(crate) static mut STACK_TOP: u32 = 0;

#[cfg(armv6m)]
pub(crate) const ARCH: u8 = 6;
#[cfg(not(armv6m))]
pub(crate) const ARCH: u8 = 7;

pub(crate) const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
pub(crate) const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
pub(crate) const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
pub(crate) const SCB_ICSR: *mut u32 = 0xE000_ED04 as *mut u32;
pub(crate) const SCB_SHPR3: *mut u32 = 0xE000_ED20 as *mut u32;
pub(crate) const NVIC_ISER: *mut u32 = 0xE000_E100 as *mut u32;
pub(crate) const NVIC_ICER: *mut u32 = 0xE000_E180 as *mut u32;
pub(crate) const NVIC_ICPR: *mut u32 = 0xE000_E280 as *mut u32;
pub(crate) const NVIC_IPR: *mut u32 = 0xE000_E400 as *mut u32;
pub(crate) const ICSR_PENDSTCLR: u32 = 1 << 25;

pub(crate) const CMSDK_CTRL: u32 = 0x00;
pub(crate) const CMSDK_VALUE: u32 = 0x04;
pub(crate) const CMSDK_RELOAD: u32 = 0x08;
pub(crate) const CMSDK_INTCLEAR: u32 = 0x0C;

// Stellaris/Tiva GPTM (LM3S6965 datasheet, "General-Purpose Timers").
pub(crate) const GPTM_CFG: u32 = 0x000;
pub(crate) const GPTM_TAMR: u32 = 0x004;
pub(crate) const GPTM_CTL: u32 = 0x00C;
pub(crate) const GPTM_IMR: u32 = 0x018;
pub(crate) const GPTM_ICR: u32 = 0x024;
pub(crate) const GPTM_TAILR: u32 = 0x028;
#[cfg(not(armv6m))]
pub(crate) const GPTM_TAR: u32 = 0x048;

// Nordic TIMER (nRF51 reference manual, "TIMER/COUNTER").
pub(crate) const NRF_TASKS_START: u32 = 0x000;
pub(crate) const NRF_TASKS_STOP: u32 = 0x004;
pub(crate) const NRF_TASKS_CLEAR: u32 = 0x00C;
pub(crate) const NRF_EVENTS_COMPARE0: u32 = 0x140;
pub(crate) const NRF_SHORTS: u32 = 0x200;
pub(crate) const NRF_INTENSET: u32 = 0x304;
pub(crate) const NRF_INTENCLR: u32 = 0x308;
pub(crate) const NRF_MODE: u32 = 0x504;
pub(crate) const NRF_BITMODE: u32 = 0x508;
pub(crate) const NRF_PRESCALER: u32 = 0x510;
pub(crate) const NRF_CC0: u32 = 0x540;

// STM32 general-purpose timers (RM0090, "General-purpose timers (TIM2 to TIM5)").
pub(crate) const STM32_CR1: u32 = 0x00;
pub(crate) const STM32_DIER: u32 = 0x0C;
pub(crate) const STM32_SR: u32 = 0x10;
pub(crate) const STM32_PSC: u32 = 0x28;
pub(crate) const STM32_ARR: u32 = 0x2C;

/// A device timer's registers as the sampler uses them: where the next period is written,
/// where the interrupt is acknowledged and with what, relative to the timer's base.
#[derive(Clone, Copy)]
pub(crate) struct Driver {
    pub reload: u32,
    pub ack: u32,
    pub ack_value: u32,
}

/// The driver of a device timer kind (`None`: SysTick, or not a Cortex-M timer).
pub(crate) fn driver(kind: u8) -> Option<Driver> {
    match kind {
        wire::TIMER_CMSDK => Some(Driver {
            reload: CMSDK_RELOAD,
            ack: CMSDK_INTCLEAR,
            ack_value: 1,
        }),
        wire::TIMER_GPTM => Some(Driver {
            reload: GPTM_TAILR,
            ack: GPTM_ICR,
            ack_value: 1,
        }),
        wire::TIMER_NRF => Some(Driver {
            reload: NRF_CC0,
            ack: NRF_EVENTS_COMPARE0,
            ack_value: 0,
        }),
        wire::TIMER_STM32 => Some(Driver {
            reload: STM32_ARR,
            ack: STM32_SR,
            ack_value: 0,
        }),
        _ => None,
    }
}

/// Stop a device timer and forget its pending interrupt.
///
/// # Safety
/// `base` is a timer of this kind that the sampler started.
#[inline(never)]
pub(crate) unsafe fn stop_device(kind: u8, base: u32, irq: u32) {
    // SAFETY: the caller's.
    unsafe {
        match kind {
            wire::TIMER_CMSDK => write_volatile((base + CMSDK_CTRL) as *mut u32, 0),
            wire::TIMER_GPTM => write_volatile((base + GPTM_CTL) as *mut u32, 0),
            wire::TIMER_NRF => {
                write_volatile((base + NRF_TASKS_STOP) as *mut u32, 1);
                write_volatile((base + NRF_INTENCLR) as *mut u32, 1 << 16);
            }
            wire::TIMER_STM32 => {
                write_volatile((base + STM32_CR1) as *mut u32, 0);
                write_volatile((base + STM32_DIER) as *mut u32, 0);
            }
            _ => {}
        }
        if let Some(d) = driver(kind) {
            write_volatile((base + d.ack) as *mut u32, d.ack_value);
        }
        write_volatile(NVIC_ICER.add((irq / 32) as usize), 1 << (irq % 32));
        write_volatile(NVIC_ICPR.add((irq / 32) as usize), 1 << (irq % 32));
    }
}

/// The jitter word the handler uses: ARMv7-M scales the random number into the span with
/// `umlal`, ARMv6-M (no long multiply) masks it.
pub(crate) fn jitter_operand(mask: u32) -> u32 {
    let mask = mask & 0x00FF_FFFF;
    if cfg!(armv6m) { mask } else { mask + 1 }
}

pub(crate) fn state() -> *mut State {
    addr_of_mut!(SAMPLER_RT_STATE)
}

pub(crate) fn defaults() -> Config {
    Config {
        mode: wire::MODE_RING,
        sink: wire::SINK_NONE,
        priority: 0,
        timer: wire::TIMER_SYSTICK,
        reload: 1999,
        jitter_mask: 1023,
        limit: RING_SLOTS as u32,
        seed: 0x9E37_79B9,
        timer_base: 0,
        timer_irq: 0,
        hist_base: 0,
        hist_shift: 0,
        tag_kind: wire::TAG_NONE,
        tag_addr: 0,
        stack_words: 0,
        frame_records: 0,
        stack_top: 0,
        late_ticks: 0,
        flags: 0,
    }
}

pub(crate) fn read_config() -> Option<Config> {
    Config::decode(&crate::host_block(addr_of!(SAMPLER_RT_CONFIG)))
}

#[inline(never)]
pub(crate) fn stop_timer(s: *mut State) {
    // SAFETY: stopping the timer this state started; clearing a pending request is harmless.
    unsafe {
        match driver((*s).timer) {
            Some(d) => {
                let base = (*s).reload_reg - d.reload;
                let irq = read_config().map(|c| c.timer_irq).unwrap_or(0);
                stop_device((*s).timer, base, irq);
            }
            None if (*s).timer == wire::TIMER_CUSTOM => super::stop_firmware_timer(),
            None => {
                write_volatile(SYST_CSR, 0);
                write_volatile(SCB_ICSR, ICSR_PENDSTCLR);
            }
        }
    }
}
