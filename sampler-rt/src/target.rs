//! The on-target half: state, handlers, timers, semihosting and the dump writer.

use core::arch::{asm, naked_asm};
use core::mem::MaybeUninit;
use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use crate::wire::{self, Config, Info};

const RING_SLOTS: usize = crate::decimal(env!("SAMPLER_RT_RING_SLOTS"));
/// Histogram counters, a power of two (or 0): the last one counts samples outside the bins.
const HIST_BINS: usize = crate::decimal(env!("SAMPLER_RT_HIST_BINS"));
/// log2 of [`HIST_BINS`]: the handler clamps a bin index to it with one `usat`.
#[cfg(not(armv6m))]
const HIST_BITS: u32 = if HIST_BINS == 0 {
    0
} else {
    HIST_BINS.trailing_zeros()
};

/// The sampler's state. The first eight words are read by the assembly handlers, so their
/// offsets are fixed; the host reads the whole block when it snapshots a running firmware.
/// The ARMv7-M entry loads words 0-3 with one `ldm`, the last into `pc`: that load is the jump
/// to the variant.
///
/// ```text
///  0 wptr        next ring slot to write
///  4 remaining   samples left before the slow path runs (ring end or limit)
///  8 rng         xorshift32 state
/// 12 handler     address of the sampling variant (Thumb bit set)
/// 16 jitter      random span in ticks (mask + 1; ARMv6-M: the mask itself)
/// 20 reload      base reload value
/// 24 reload_reg  address of the timer's reload register
/// 28 ack_reg     address written with 1 to acknowledge a CMSDK timer
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
/// 84 tag_kind    TAG_*: ring entries are (pc, tag) pairs unless TAG_NONE
/// ```
///
/// In `MODE_HIST`, `wptr` holds `hist_base` and, at a constant period, `rng` holds `hist_word`,
/// so that the entry's `ldm` loads what the histogram handler needs.
#[repr(C)]
pub struct State {
    wptr: u32,
    remaining: u32,
    rng: u32,
    handler: u32,
    jitter: u32,
    reload: u32,
    reload_reg: u32,
    ack_reg: u32,
    chunk: u32,
    before: u32,
    limit: u32,
    capacity: u32,
    ring: u32,
    mode: u8,
    stop: u8,
    timer: u8,
    priority: u8,
    sink: u8,
    config_found: u8,
    phase: u8,
    arch: u8,
    magic: u32,
    hist_word: u32,
    hist_base: u32,
    bins: u32,
    last_bin: u32,
    tag_addr: u32,
    tag_kind: u32,
}

const STATE_MAGIC: u32 = wire::STATE_MAGIC;

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
    assert!(size_of::<State>() == wire::STATE_LEN);
};
use wire::{PHASE_DUMPED, PHASE_IDLE, PHASE_RUNNING, PHASE_STOPPED};

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
};

/// The ring of raw program counters. Not zeroed at boot: only the slots written are read.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".uninit.SAMPLER_RT_RING")]
static mut SAMPLER_RT_RING: MaybeUninit<[u32; RING_SLOTS]> = MaybeUninit::uninit();

/// The histogram counters, 256-aligned so that the bins address and the shift share a word.
/// The ARMv7-M handler addresses counter `i` at `shift` bytes into the array (hence the 16
/// spare counters). Zeroed by `start` in histogram mode.
#[repr(C, align(256))]
struct Bins([u16; HIST_BINS + 16]);

#[unsafe(no_mangle)]
#[unsafe(link_section = ".uninit.SAMPLER_RT_BINS")]
static mut SAMPLER_RT_BINS: MaybeUninit<Bins> = MaybeUninit::uninit();

/// The number of histogram counters this build has, for the host (which reads it from the ELF
/// to choose the bin size of a run).
#[unsafe(no_mangle)]
static SAMPLER_RT_HIST_COUNTERS: u32 = HIST_BINS as u32;

/// The host's configuration for this run. It is initialised data, so its initial bytes are in
/// the image: the host writes the run's settings there in the copy of the ELF it loads, and the
/// runtime copies them to RAM at boot. All zeros (an invalid block) selects the defaults.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.SAMPLER_RT_CONFIG")]
static mut SAMPLER_RT_CONFIG: [u8; wire::CONFIG_LEN] = [0; wire::CONFIG_LEN];

#[cfg(armv6m)]
const ARCH: u8 = 6;
#[cfg(not(armv6m))]
const ARCH: u8 = 7;

const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
const SCB_ICSR: *mut u32 = 0xE000_ED04 as *mut u32;
const SCB_SHPR3: *mut u32 = 0xE000_ED20 as *mut u32;
const NVIC_ISER: *mut u32 = 0xE000_E100 as *mut u32;
const NVIC_ICER: *mut u32 = 0xE000_E180 as *mut u32;
const NVIC_ICPR: *mut u32 = 0xE000_E280 as *mut u32;
const NVIC_IPR: *mut u32 = 0xE000_E400 as *mut u32;
const ICSR_PENDSTCLR: u32 = 1 << 25;

const CMSDK_CTRL: u32 = 0x00;
const CMSDK_VALUE: u32 = 0x04;
const CMSDK_RELOAD: u32 = 0x08;
const CMSDK_INTCLEAR: u32 = 0x0C;

/// The jitter word the handler uses: ARMv7-M scales the random number into the span with
/// `umlal`, ARMv6-M (no long multiply) masks it.
fn jitter_operand(mask: u32) -> u32 {
    let mask = mask & 0x00FF_FFFF;
    if cfg!(armv6m) { mask } else { mask + 1 }
}

fn state() -> *mut State {
    addr_of_mut!(SAMPLER_RT_STATE)
}

fn defaults() -> Config {
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
    }
}

fn read_config() -> Option<Config> {
    Config::decode(&crate::host_block(addr_of!(SAMPLER_RT_CONFIG)))
}

/// Start sampling with the configuration `cargo sample` placed in RAM for this run (or the
/// built-in defaults when the firmware was started by other means: 1023-tick random period
/// span, ring mode, no dump transport). Call it once, early in `main`; later calls do nothing.
pub fn start() {
    let s = state();
    // SAFETY: single-core; the sampling interrupt is not enabled until the end of this function.
    unsafe {
        if (*s).phase != PHASE_IDLE {
            return;
        }
        crate::laps::SYSTICK_SAMPLING = sampling_on_systick;
        let found = read_config();
        let cfg = found.unwrap_or_else(defaults);
        (*s).config_found = found.is_some() as u8;
        (*s).mode = cfg.mode;
        (*s).sink = cfg.sink;
        (*s).timer = cfg.timer;
        (*s).priority = cfg.priority;
        (*s).limit = cfg.limit;
        // A tagged ring holds (pc, tag) pairs: half as many samples in the same RAM.
        (*s).capacity =
            if cfg.tag_kind != wire::TAG_NONE && cfg.mode == wire::MODE_RING && !cfg!(armv6m) {
                RING_SLOTS as u32 / 2
            } else {
                RING_SLOTS as u32
            };
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
        let tag = if cfg.mode == wire::MODE_RING && !cfg!(armv6m) {
            cfg.tag_kind
        } else {
            wire::TAG_NONE
        };
        (*s).tag_kind = tag as u32;
        // A word tag at address 0 is the firmware's own (`set_tag`).
        (*s).tag_addr = if cfg.tag_addr == 0 {
            crate::tags::tag_word_address() as u32
        } else {
            cfg.tag_addr
        };
        let constant = cfg.jitter_mask == 0;
        let handler: unsafe extern "C" fn() = match (cfg.mode, constant, tag) {
            (wire::MODE_HIST, true, _) if fast_hist => sample_hist,
            (wire::MODE_HIST, true, _) => sample_hist_aligned,
            (wire::MODE_HIST, false, _) => sample_hist_jitter,
            (_, true, wire::TAG_XPSR) => sample_ring_xpsr,
            (_, true, wire::TAG_WORD) => sample_ring_word,
            (_, false, wire::TAG_XPSR) => sample_ring_jitter_xpsr,
            (_, false, wire::TAG_WORD) => sample_ring_jitter_word,
            (_, true, _) => sample_ring,
            (_, false, _) => sample_ring_jitter,
        };
        (*s).handler = handler as usize as u32;
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
        (*s).phase = PHASE_RUNNING;
        match cfg.timer {
            wire::TIMER_CMSDK => start_cmsdk(s, &cfg),
            _ => start_systick(s, &cfg),
        }
    }
}

/// # Safety
/// `s` is the sampler state, not yet sampling.
unsafe fn next_chunk(s: *mut State) {
    // SAFETY: called with the sampling interrupt unable to run (before it starts, or from it).
    unsafe {
        let hist = (*s).mode == wire::MODE_HIST;
        let ring = (!hist).then_some((*s).capacity);
        let (chunk, pos) = wire::next_chunk((*s).before, ring, (*s).limit);
        (*s).chunk = chunk;
        (*s).remaining = chunk;
        if !hist {
            (*s).wptr = (*s).ring + entry_bytes(s) * pos;
        }
    }
}

/// Bytes of one ring entry: a PC, or a PC and its tag.
///
/// # Safety
/// `s` is the sampler state.
unsafe fn entry_bytes(s: *mut State) -> u32 {
    // SAFETY: see the function's contract.
    if unsafe { (*s).tag_kind } == wire::TAG_NONE as u32 {
        4
    } else {
        8
    }
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
/// Programs SysTick; the `systick` feature must provide its handler.
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
/// Programs the CMSDK timer at `cfg.timer_base`; [`crate::cmsdk_timer_interrupt!`] must
/// provide its handler.
unsafe fn start_cmsdk(s: *mut State, cfg: &Config) {
    let base = cfg.timer_base;
    let irq = cfg.timer_irq;
    // SAFETY: the host named a CMSDK APB timer at this base address and its interrupt number.
    unsafe {
        (*s).reload_reg = base + CMSDK_RELOAD;
        (*s).ack_reg = base + CMSDK_INTCLEAR;
        write_volatile((base + CMSDK_CTRL) as *mut u32, 0);
        write_volatile((base + CMSDK_RELOAD) as *mut u32, cfg.reload);
        write_volatile((base + CMSDK_VALUE) as *mut u32, cfg.reload);
        write_volatile((base + CMSDK_INTCLEAR) as *mut u32, 1);
        let ipr = NVIC_IPR.add((irq / 4) as usize);
        let shift = (irq % 4) * 8;
        let v = read_volatile(ipr) & !(0xFF << shift);
        write_volatile(ipr, v | (cfg.priority as u32) << shift);
        write_volatile(NVIC_ISER.add((irq / 32) as usize), 1 << (irq % 32));
        // ENABLE | INTERRUPT ENABLE.
        write_volatile((base + CMSDK_CTRL) as *mut u32, 0b1001);
    }
}

fn stop_timer(s: *mut State) {
    // SAFETY: stopping the timer this state started; clearing a pending request is harmless.
    unsafe {
        match (*s).timer {
            wire::TIMER_CMSDK => {
                let base = (*s).reload_reg - CMSDK_RELOAD;
                let irq = read_config().map(|c| c.timer_irq).unwrap_or(0);
                write_volatile((base + CMSDK_CTRL) as *mut u32, 0);
                write_volatile((base + CMSDK_INTCLEAR) as *mut u32, 1);
                write_volatile(NVIC_ICER.add((irq / 32) as usize), 1 << (irq % 32));
                write_volatile(NVIC_ICPR.add((irq / 32) as usize), 1 << (irq % 32));
            }
            _ => {
                write_volatile(SYST_CSR, 0);
                write_volatile(SCB_ICSR, ICSR_PENDSTCLR);
            }
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

/// Whether the sampler is pacing itself with SysTick right now.
fn sampling_on_systick() -> bool {
    let s = state();
    // SAFETY: plain reads of the state.
    unsafe {
        read_volatile(addr_of!((*s).phase)) == PHASE_RUNNING
            && read_volatile(addr_of!((*s).timer)) == wire::TIMER_SYSTICK
    }
}

/// The firmware's byte writer for the dump (`SINK_WRITER`).
static mut WRITER: Option<fn(&[u8])> = None;

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

/// Entered from the handlers (a tail branch, in handler mode) when the current chunk is full:
/// at the end of the ring, or when the requested number of samples is taken.
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_slow() {
    let s = state();
    // SAFETY: runs inside the sampling interrupt, which cannot preempt itself.
    unsafe {
        (*s).before += (*s).chunk;
        (*s).chunk = 0;
        if (*s).limit != 0 && (*s).before >= (*s).limit {
            stop_timer(s);
            (*s).phase = PHASE_STOPPED;
            (*s).stop = wire::STOP_LIMIT;
            match (*s).sink {
                wire::SINK_SEMIHOSTING => {
                    send_dump(s);
                    semihosting_exit(0);
                }
                // Once, from the interrupt: the program goes on afterwards.
                wire::SINK_WRITER => send_dump(s),
                _ => {}
            }
        } else {
            if (*s).sink == wire::SINK_SEMIHOSTING && (*s).mode == wire::MODE_RING {
                stream_chunk(s);
            }
            next_chunk(s);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers. The entry finds the exception frame (MSP or PSP by bit 2 of EXC_RETURN) and jumps
// to the variant `start` chose, with r1 = &SAMPLER_RT_STATE and the frame in r12 (ARMv7-M: the
// variant loads the stacked PC at frame + 24, and the stacked xPSR at + 28 if it records it) or
// the interrupted PC in r0 (ARMv6-M). r0-r3 and r12 are stacked by the core.

/// The sampling interrupt's entry (the SysTick vector, or the tail of a CMSDK timer handler).
#[cfg(not(armv6m))]
#[doc(hidden)]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn sampler_rt_entry() {
    naked_asm!(
        "ldr r1, ={state}",
        "tst lr, #4",
        "ite eq",
        "mrseq r12, msp",
        "mrsne r12, psp",
        // r12 = the exception frame; r0 = wptr, r2 = remaining, r3 = rng, and jump to the
        // variant, which loads the stacked PC (and the xPSR when it records it) itself.
        "ldm.w r1, {{r0, r2, r3, pc}}",
        ".ltorg",
        state = sym SAMPLER_RT_STATE,
    )
}

/// The sampling interrupt's entry (ARMv6-M: no IT blocks, `tst` takes registers only).
#[cfg(armv6m)]
#[doc(hidden)]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn sampler_rt_entry() {
    naked_asm!(
        "ldr r1, ={state}",
        "mov r2, lr",
        "movs r0, #4",
        "tst r2, r0",
        "bne 1f",
        "mrs r0, msp",
        "b 2f",
        "1:",
        "mrs r0, psp",
        "2:",
        "ldr r0, [r0, #24]",
        "ldr r2, [r1, #12]",
        "bx r2",
        ".ltorg",
        state = sym SAMPLER_RT_STATE,
    )
}

// With the `systick` feature the SysTick vector is the entry itself: no extra branch. A second
// definition of `SysTick` (the application's own) is a link error, as it should be.
#[cfg(feature = "systick")]
core::arch::global_asm!(".globl SysTick", ".thumb_set SysTick, sampler_rt_entry");

/// Ring, constant period (ARMv7-M): 5 instructions after the entry's 7.
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "str r12, [r0], #4",
        "subs r2, #1",
        "stm r1, {{r0, r2}}",
        "beq {slow}",
        "bx lr",
        slow = sym sampler_rt_slow,
    )
}

/// Ring of (PC, stacked xPSR) pairs, constant period (ARMv7-M): one `ldrd` loads both, one
/// `strd` stores both, so the tag costs no instruction.
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring_xpsr() {
    naked_asm!(
        "ldrd r12, r3, [r12, #24]",
        "strd r12, r3, [r0], #8",
        "subs r2, #1",
        "stm r1, {{r0, r2}}",
        "beq {slow}",
        "bx lr",
        slow = sym sampler_rt_slow,
    )
}

/// Ring of (PC, word at `tag_addr`) pairs, constant period (ARMv7-M): two loads more.
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring_word() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "ldr r3, [r1, #{tag_addr}]",
        "ldr r3, [r3]",
        "strd r12, r3, [r0], #8",
        "subs r2, #1",
        "stm r1, {{r0, r2}}",
        "beq {slow}",
        "bx lr",
        tag_addr = const wire::state_offsets::TAG_ADDR,
        slow = sym sampler_rt_slow,
    )
}

/// Ring, random period (ARMv7-M): xorshift32, then reload = base + ((rng * span) >> 32) by one
/// `umlal` (its low accumulator word is the handler address, whose carry into the high word
/// happens with probability below 1e-6). 12 or 13 instructions after the entry's 7.
///
/// Why the dither: the timer fires on a grid of its own ticks, and one tick may be several
/// instructions (40 at `-icount shift=0` on a 25 MHz QEMU machine; 8 cycles on a SysTick fed
/// from HCLK/8). A random number of ticks moves a sample by whole grid steps only; what moves
/// it inside a step is the time the handler itself takes. With a handler of fixed length H the
/// program's phase against the grid advances by H per sample and visits only
/// `grid / gcd(grid, H)` of its positions: a 20-instruction handler on a 40-instruction grid
/// saw 2 of 40, and the code right after each call was over-sampled by 7 sigma. Taking one
/// extra instruction on a random half of the samples makes the phase a random walk that covers
/// every position whatever the grid.
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring_jitter() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "str r12, [r0], #4",
        "eor r3, r3, r3, lsl #13",
        "eor r3, r3, r3, lsr #17",
        "eors r3, r3, r3, lsl #5",
        // Phase dither: one more instruction on half of the samples, by bit 31 of the new
        // random number (see the note above `sample_ring_jitter`).
        "bpl 1f",
        "mov r12, r12",
        "1:",
        "subs r2, #1",
        "stm r1!, {{r0, r2, r3}}",
        "beq {slow}",
        // r1 = &handler: r0 = handler, r1 = span, r2 = reload, r12 = reload register.
        "ldm.w r1, {{r0, r1, r2, r12}}",
        "umlal r0, r2, r3, r1",
        "str r2, [r12]",
        "bx lr",
        slow = sym sampler_rt_slow,
    )
}

/// Ring of (PC, stacked xPSR) pairs, random period (ARMv7-M): the pair is loaded into r12 and
/// r2 and stored with one `strd`, then the count of samples left is loaded again: one
/// instruction more than [`sample_ring_jitter`].
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring_jitter_xpsr() {
    naked_asm!(
        "ldrd r12, r2, [r12, #24]",
        "strd r12, r2, [r0], #8",
        "ldr r2, [r1, #4]",
        "eor r3, r3, r3, lsl #13",
        "eor r3, r3, r3, lsr #17",
        "eors r3, r3, r3, lsl #5",
        "bpl 1f",
        "mov r12, r12",
        "1:",
        "subs r2, #1",
        "stm r1!, {{r0, r2, r3}}",
        "beq {slow}",
        "ldm.w r1, {{r0, r1, r2, r12}}",
        "umlal r0, r2, r3, r1",
        "str r2, [r12]",
        "bx lr",
        slow = sym sampler_rt_slow,
    )
}

/// Ring of (PC, word at `tag_addr`) pairs, random period (ARMv7-M): three instructions more
/// than [`sample_ring_jitter`].
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring_jitter_word() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "ldr r2, [r1, #{tag_addr}]",
        "ldr r2, [r2]",
        "strd r12, r2, [r0], #8",
        "ldr r2, [r1, #4]",
        "eor r3, r3, r3, lsl #13",
        "eor r3, r3, r3, lsr #17",
        "eors r3, r3, r3, lsl #5",
        "bpl 1f",
        "mov r12, r12",
        "1:",
        "subs r2, #1",
        "stm r1!, {{r0, r2, r3}}",
        "beq {slow}",
        "ldm.w r1, {{r0, r1, r2, r12}}",
        "umlal r0, r2, r3, r1",
        "str r2, [r12]",
        "bx lr",
        tag_addr = const wire::state_offsets::TAG_ADDR,
        slow = sym sampler_rt_slow,
    )
}

/// Histogram, constant period (ARMv7-M): 11 instructions after the entry's 7. The entry loaded
/// r0 = the first bin's address, r2 = samples left, r3 = `hist_word` (the counters' address,
/// whose low byte is the shift). The index is clamped with `usat`: an address below the bins
/// wraps to a huge offset, so every address outside them lands in the last counter. Counters
/// saturate at 65535 (`usat` again) instead of wrapping to zero.
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_hist() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "sub r12, r12, r0",
        "lsr r12, r12, r3",
        "usat r12, #{bits}, r12",
        "ldrh r0, [r3, r12, lsl #1]",
        "adds r0, #1",
        "usat r0, #16, r0",
        "strh r0, [r3, r12, lsl #1]",
        "subs r2, #1",
        "str r2, [r1, #4]",
        "beq {slow}",
        "bx lr",
        bits = const HIST_BITS,
        slow = sym sampler_rt_slow,
    )
}

/// Histogram, constant period, counters at the array's start (ARMv7-M with unaligned accesses
/// trapped and an odd shift): one load more than [`sample_hist`].
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_hist_aligned() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "sub r12, r12, r0",
        "lsr r12, r12, r3",
        "usat r12, #{bits}, r12",
        "ldr r3, [r1, #{bins}]",
        "ldrh r0, [r3, r12, lsl #1]",
        "adds r0, #1",
        "usat r0, #16, r0",
        "strh r0, [r3, r12, lsl #1]",
        "subs r2, #1",
        "str r2, [r1, #4]",
        "beq {slow}",
        "bx lr",
        bits = const HIST_BITS,
        bins = const wire::state_offsets::BINS,
        slow = sym sampler_rt_slow,
    )
}

/// Histogram, random period (ARMv7-M): the bin as in [`sample_hist_aligned`], then the random
/// period and phase dither of [`sample_ring_jitter`]. The entry loaded r0 = the first bin's
/// address, r2 = samples left, r3 = the random state.
#[cfg(not(armv6m))]
#[unsafe(naked)]
unsafe extern "C" fn sample_hist_jitter() {
    naked_asm!(
        "ldr r12, [r12, #24]",
        "sub r12, r12, r0",
        "ldr r0, [r1, #{word}]",
        "lsr r12, r12, r0",
        "usat r12, #{bits}, r12",
        "ldr r0, [r1, #{bins}]",
        "add r12, r0, r12, lsl #1",
        "ldrh r0, [r12]",
        "adds r0, #1",
        "usat r0, #16, r0",
        "strh r0, [r12]",
        "eor r3, r3, r3, lsl #13",
        "eor r3, r3, r3, lsr #17",
        "eors r3, r3, r3, lsl #5",
        "bpl 1f",
        "mov r12, r12",
        "1:",
        "subs r2, #1",
        "strd r2, r3, [r1, #4]",
        "beq {slow}",
        "add r1, #12",
        // r0 = handler, r1 = span, r2 = reload, r12 = reload register.
        "ldm.w r1, {{r0, r1, r2, r12}}",
        "umlal r0, r2, r3, r1",
        "str r2, [r12]",
        "bx lr",
        bits = const HIST_BITS,
        word = const wire::state_offsets::HIST_WORD,
        bins = const wire::state_offsets::BINS,
        slow = sym sampler_rt_slow,
    )
}

/// Ring, constant period (ARMv6-M).
#[cfg(armv6m)]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring() {
    naked_asm!(
        "ldr r2, [r1, #0]",
        "stm r2!, {{r0}}",
        "str r2, [r1, #0]",
        "ldr r3, [r1, #4]",
        "subs r3, #1",
        "str r3, [r1, #4]",
        "beq 3f",
        "bx lr",
        "3:",
        "ldr r0, ={slow}",
        "bx r0",
        ".ltorg",
        slow = sym sampler_rt_slow,
    )
}

/// Ring, random period (ARMv6-M).
#[cfg(armv6m)]
#[unsafe(naked)]
unsafe extern "C" fn sample_ring_jitter() {
    naked_asm!(
        "ldr r2, [r1, #0]",
        "stm r2!, {{r0}}",
        "str r2, [r1, #0]",
        "ldr r3, [r1, #4]",
        "subs r3, #1",
        "str r3, [r1, #4]",
        "beq 3f",
        "ldr r3, [r1, #8]",
        "lsls r0, r3, #13",
        "eors r3, r0",
        "lsrs r0, r3, #17",
        "eors r3, r0",
        "lsls r0, r3, #5",
        "eors r3, r0",
        "bpl 4f",
        "mov r8, r8",
        "4:",
        "str r3, [r1, #8]",
        "ldr r0, [r1, #16]",
        "ands r0, r3",
        "ldr r2, [r1, #20]",
        "adds r0, r2",
        "ldr r2, [r1, #24]",
        "str r0, [r2]",
        "bx lr",
        "3:",
        "ldr r0, ={slow}",
        "bx r0",
        ".ltorg",
        slow = sym sampler_rt_slow,
    )
}

/// Histogram, constant period (ARMv6-M: no `usat`, no unaligned halfwords). r0 = the PC.
#[cfg(armv6m)]
#[unsafe(naked)]
unsafe extern "C" fn sample_hist() {
    naked_asm!(
        "ldr r2, [r1, #0]",
        "subs r0, r0, r2",
        "ldr r2, [r1, #{word}]",
        "lsrs r0, r2",
        "ldr r3, [r1, #{last}]",
        "cmp r0, r3",
        "bls 1f",
        "mov r0, r3",
        "1:",
        "lsls r0, r0, #1",
        "ldr r2, [r1, #{bins}]",
        "ldrh r3, [r2, r0]",
        "adds r3, #1",
        "lsrs r1, r3, #16",
        "bne 2f",
        "strh r3, [r2, r0]",
        "2:",
        "ldr r1, ={state}",
        "ldr r3, [r1, #4]",
        "subs r3, #1",
        "str r3, [r1, #4]",
        "beq 3f",
        "bx lr",
        "3:",
        "ldr r0, ={slow}",
        "bx r0",
        ".ltorg",
        word = const wire::state_offsets::HIST_WORD,
        last = const wire::state_offsets::LAST_BIN,
        bins = const wire::state_offsets::BINS,
        state = sym SAMPLER_RT_STATE,
        slow = sym sampler_rt_slow,
    )
}

// ARMv6-M records no tags (`start` never selects these there).
#[cfg(armv6m)]
use sample_ring as sample_ring_xpsr;
#[cfg(armv6m)]
use sample_ring as sample_ring_word;
#[cfg(armv6m)]
use sample_ring_jitter as sample_ring_jitter_xpsr;
#[cfg(armv6m)]
use sample_ring_jitter as sample_ring_jitter_word;

/// The ARMv6-M histogram handler also serves both ARMv7-M fallbacks' roles there.
#[cfg(armv6m)]
use sample_hist as sample_hist_aligned;

/// Histogram, random period (ARMv6-M).
#[cfg(armv6m)]
#[unsafe(naked)]
unsafe extern "C" fn sample_hist_jitter() {
    naked_asm!(
        "ldr r2, [r1, #0]",
        "subs r0, r0, r2",
        "ldr r2, [r1, #{word}]",
        "lsrs r0, r2",
        "ldr r3, [r1, #{last}]",
        "cmp r0, r3",
        "bls 1f",
        "mov r0, r3",
        "1:",
        "lsls r0, r0, #1",
        "ldr r2, [r1, #{bins}]",
        "ldrh r3, [r2, r0]",
        "adds r3, #1",
        "lsrs r1, r3, #16",
        "bne 2f",
        "strh r3, [r2, r0]",
        "2:",
        "ldr r1, ={state}",
        "ldr r3, [r1, #8]",
        "lsls r0, r3, #13",
        "eors r3, r0",
        "lsrs r0, r3, #17",
        "eors r3, r0",
        "lsls r0, r3, #5",
        "eors r3, r0",
        "bpl 4f",
        "mov r8, r8",
        "4:",
        "str r3, [r1, #8]",
        "ldr r0, [r1, #16]",
        "ands r0, r3",
        "ldr r2, [r1, #20]",
        "adds r0, r2",
        "ldr r2, [r1, #24]",
        "str r0, [r2]",
        "ldr r3, [r1, #4]",
        "subs r3, #1",
        "str r3, [r1, #4]",
        "beq 3f",
        "bx lr",
        "3:",
        "ldr r0, ={slow}",
        "bx r0",
        ".ltorg",
        word = const wire::state_offsets::HIST_WORD,
        last = const wire::state_offsets::LAST_BIN,
        bins = const wire::state_offsets::BINS,
        state = sym SAMPLER_RT_STATE,
        slow = sym sampler_rt_slow,
    )
}

// ---------------------------------------------------------------------------------------------
// Semihosting and the dump.

const SYS_OPEN: u32 = 0x01;
const SYS_CLOSE: u32 = 0x02;
const SYS_WRITE: u32 = 0x05;
const SYS_EXIT: u32 = 0x18;
const SYS_EXIT_EXTENDED: u32 = 0x20;
const ADP_STOPPED_APPLICATION_EXIT: u32 = 0x2_0026;
/// Name of the dump file the firmware creates in the host's working directory.
const DUMP_FILE: &[u8] = b"sampler.dump\0";

/// # Safety
/// Only where a semihosting host is attached (otherwise `bkpt` faults).
unsafe fn semihost(op: u32, arg: *const u32) -> i32 {
    let ret: i32;
    // SAFETY: the semihosting calling convention; the host reads `arg`'s block.
    unsafe {
        asm!("bkpt #0xab", inout("r0") op as i32 => ret, in("r1") arg, options(nostack));
    }
    ret
}

fn semihosting_exit(code: i32) -> ! {
    // SAFETY: `exit` is documented to need semihosting; the sampler calls it only with the
    // semihosting sink that the host enabled.
    unsafe {
        if code == 0 {
            semihost(SYS_EXIT, ADP_STOPPED_APPLICATION_EXIT as *const u32);
        } else {
            let block = [ADP_STOPPED_APPLICATION_EXIT, code as u32];
            semihost(SYS_EXIT_EXTENDED, block.as_ptr());
        }
    }
    loop {
        // SAFETY: waiting for an interrupt has no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}

/// The dump file of a run with the semihosting sink. It is opened at the first full chunk (or
/// at the end), and every full chunk is appended to it as a PCS record while the program runs,
/// so a run may take any number of samples and a run that dies keeps all chunks sent before.
struct Stream {
    open: bool,
    /// Through the firmware's writer rather than semihosting.
    writer: Option<fn(&[u8])>,
    handle: u32,
    crc: wire::Crc32,
    /// Samples already in the file (sequence numbers below this).
    sent: u32,
}

static mut STREAM: Stream = Stream {
    open: false,
    writer: None,
    handle: 0,
    crc: wire::Crc32::new(),
    sent: 0,
};

impl Stream {
    fn raw(&mut self, bytes: &[u8]) {
        if let Some(w) = self.writer {
            w(bytes);
            return;
        }
        let block = [self.handle, bytes.as_ptr() as u32, bytes.len() as u32];
        // SAFETY: only reached with the semihosting sink, which the host enabled.
        unsafe { semihost(SYS_WRITE, block.as_ptr()) };
    }

    fn put(&mut self, bytes: &[u8]) {
        self.crc.update(bytes);
        self.raw(bytes);
    }

    fn put32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
}

unsafe extern "C" {
    static __stext: u8;
    static __etext: u8;
}

fn code_range() -> (u32, u32) {
    (addr_of!(__stext) as u32, addr_of!(__etext) as u32)
}

/// The INFO record's contents for the state as it is now.
///
/// # Safety
/// The state is not changed meanwhile.
unsafe fn info_now(s: *mut State, taken: u32) -> Info {
    // SAFETY: see the function's contract; the code range is the image's own.
    unsafe {
        let (code_start, code_end) = code_range();
        let code =
            core::slice::from_raw_parts(code_start as *const u8, (code_end - code_start) as usize);
        Info {
            mode: (*s).mode,
            timer: (*s).timer,
            stop: (*s).stop,
            arch: ARCH,
            reload: (*s).reload,
            jitter_mask: wire::jitter_mask(ARCH, (*s).jitter),
            limit: (*s).limit,
            capacity: (*s).capacity,
            taken,
            lost: 0,
            code_start,
            code_end,
            code_crc: wire::crc32(code),
            config_addr: addr_of!(SAMPLER_RT_CONFIG) as u32,
            config_found: (*s).config_found,
            priority: (*s).priority,
            rt_version: crate::RT_VERSION,
            tag_kind: (*s).tag_kind as u8,
            foreign: 0,
        }
    }
}

/// The stream, opened (file header and a first INFO record written) if it was not yet.
///
/// # Safety
/// Semihosting sink; called with the sampling interrupt unable to run (from it, or stopped).
unsafe fn stream(s: *mut State) -> Option<&'static mut Stream> {
    // SAFETY: see the function's contract: nothing else touches STREAM meanwhile.
    unsafe {
        let st = &mut *addr_of_mut!(STREAM);
        if !st.open {
            if (*s).sink == wire::SINK_WRITER {
                st.writer = Some((*addr_of!(WRITER))?);
            } else {
                let block = [DUMP_FILE.as_ptr() as u32, 5, (DUMP_FILE.len() - 1) as u32];
                let handle = semihost(SYS_OPEN, block.as_ptr());
                if handle < 0 {
                    return None;
                }
                st.handle = handle as u32;
            }
            st.open = true;
            st.put(&wire::file_header());
            let info = info_now(s, st.sent);
            st.put(&wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32));
            st.put(&info.encode());
        }
        Some(st)
    }
}

/// Append samples `from..to` (sequence numbers; at most one ring's worth) as a PCS record.
///
/// # Safety
/// As [`stream`].
unsafe fn send_samples(s: *mut State, st: &mut Stream, from: u32, to: u32) {
    if to <= from {
        return;
    }
    // SAFETY: the ring has `capacity` slots and sequence number q lives in slot q % capacity.
    unsafe {
        let cap = (*s).capacity;
        let ring = (*s).ring as *const u8;
        let e = entry_bytes(s) as usize;
        let bytes = |a: u32, b: u32| {
            core::slice::from_raw_parts(ring.add(e * a as usize), e * (b - a) as usize)
        };
        let kind = if e == 8 {
            wire::REC_PCS_TAGS
        } else {
            wire::REC_PCS
        };
        st.put(&wire::record_header(kind, 8 + e as u32 * (to - from)));
        st.put32(from);
        st.put32(to - from);
        let (a, b) = (from % cap, to % cap);
        if b > a {
            st.put(bytes(a, b));
        } else {
            st.put(bytes(a, cap));
            st.put(bytes(0, b));
        }
        st.sent = to;
    }
}

/// Append the histogram as a HIST record: the counters as the handler left them (their bytes are
/// the little-endian `u16`s of the record), the last one as `outside`.
///
/// # Safety
/// As [`stream`]; histogram mode.
unsafe fn send_hist(s: *mut State, st: &mut Stream) {
    // SAFETY: `bins` is counter 0 of the array this module owns, `last_bin + 1` counters long.
    unsafe {
        let count = (*s).last_bin;
        let counters = (*s).bins as *const u8;
        let bytes = core::slice::from_raw_parts(counters, 2 * count as usize);
        let outside = u16::from_le_bytes([
            read_volatile(counters.add(2 * count as usize)),
            read_volatile(counters.add(2 * count as usize + 1)),
        ]);
        st.put(&wire::record_header(wire::REC_HIST, wire::hist_len(count)));
        st.put(&wire::hist_header(
            (*s).hist_base,
            (*s).hist_word & 0xFF,
            outside as u32,
            count,
        ));
        st.put(bytes);
        if count % 2 == 1 {
            st.put(&[0, 0]);
        }
    }
}

/// Send the chunk that just filled up, and restart the timer's period, so that the time spent
/// writing (it is inside the interrupt) does not leave a sample pending for the instruction
/// that happens to follow.
///
/// # Safety
/// From the slow path, semihosting sink.
unsafe fn stream_chunk(s: *mut State) {
    // SAFETY: see the function's contract.
    unsafe {
        let Some(st) = stream(s) else { return };
        let taken = (*s).before;
        let from = st.sent.max(taken.saturating_sub((*s).capacity));
        send_samples(s, st, from, taken);
        restart_period(s);
    }
}

/// Clear a pending sampling interrupt and start a fresh period.
///
/// # Safety
/// The timer this state started is running.
unsafe fn restart_period(s: *mut State) {
    // SAFETY: registers of the timer this state programmed.
    unsafe {
        match (*s).timer {
            wire::TIMER_CMSDK => {
                let base = (*s).reload_reg - CMSDK_RELOAD;
                write_volatile((base + CMSDK_INTCLEAR) as *mut u32, 1);
                write_volatile(
                    (base + CMSDK_VALUE) as *mut u32,
                    read_volatile((base + CMSDK_RELOAD) as *const u32),
                );
                let irq = read_config().map(|c| c.timer_irq).unwrap_or(0);
                write_volatile(NVIC_ICPR.add((irq / 32) as usize), 1 << (irq % 32));
            }
            _ => {
                write_volatile(SYST_CVR, 0);
                write_volatile(SCB_ICSR, ICSR_PENDSTCLR);
            }
        }
    }
}

/// # Safety
/// Sampling stopped; the state is not changed by anyone else meanwhile.
unsafe fn send_dump(s: *mut State) {
    // SAFETY: see the function's contract; every pointer is into the state, ring or code.
    unsafe {
        if (*s).sink == wire::SINK_HOST {
            wait_for_host(s);
            return;
        }
        if (*s).phase == PHASE_DUMPED
            || !matches!((*s).sink, wire::SINK_SEMIHOSTING | wire::SINK_WRITER)
        {
            return;
        }
        (*s).phase = PHASE_DUMPED;
        let taken = (*s).before + (*s).chunk - (*s).remaining;
        let Some(st) = stream(s) else { return };
        if (*s).mode == wire::MODE_HIST {
            send_hist(s, st);
        } else {
            let from = st.sent.max(taken.saturating_sub((*s).capacity));
            send_samples(s, st, from, taken);
        }
        crate::tags::write_names(&mut |b| st.put(b));
        if let Some(len) = crate::laps::record_len() {
            st.put(&wire::record_header(wire::REC_LAPS, len));
            crate::laps::write_record(|b| st.put(b));
        }
        // The final INFO supersedes the first one: readers keep the last.
        let info = info_now(s, taken);
        st.put(&wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32));
        st.put(&info.encode());
        let crc = st.crc.finish();
        st.raw(&wire::record_header(wire::REC_END, 4));
        st.raw(&crc.to_le_bytes());
        if st.writer.is_none() {
            semihost(SYS_CLOSE, [st.handle].as_ptr());
        }
        st.open = false;
    }
}

/// How long the firmware waits at its end for a host that reads the ring: about 2^24 turns of
/// a three-instruction loop (a fraction of a second at tens of MHz, and in QEMU), long enough
/// for a host polling every few milliseconds, short enough not to hang a board nobody watches.
const HOST_WAIT_TURNS: u32 = 1 << 24;

/// Sampling is stopped; give the host reading the ring the time to take the last samples. It
/// acknowledges by clearing the `sink` byte.
///
/// # Safety
/// `s` is the sampler state.
unsafe fn wait_for_host(s: *mut State) {
    // SAFETY: the host writes the byte through the debug port; read it as volatile.
    unsafe {
        let sink = addr_of!((*s).sink);
        let mut turns = 0u32;
        while read_volatile(sink) == wire::SINK_HOST && turns < HOST_WAIT_TURNS {
            turns += 1;
        }
    }
}

/// embassy-executor's trace hooks (its `trace` feature): each sample's tag is the task being
/// polled (its header's address), 0 between tasks.
#[cfg(feature = "embassy")]
mod embassy_trace {
    use core::sync::atomic::Ordering;

    use crate::tags::SAMPLER_RT_TAG;

    #[unsafe(no_mangle)]
    fn _embassy_trace_poll_start(_executor_id: u32) {}

    #[unsafe(no_mangle)]
    fn _embassy_trace_task_new(_executor_id: u32, _task_id: u32) {}

    #[unsafe(no_mangle)]
    fn _embassy_trace_task_end(_executor_id: u32, _task_id: u32) {}

    #[unsafe(no_mangle)]
    fn _embassy_trace_task_exec_begin(_executor_id: u32, task_id: u32) {
        SAMPLER_RT_TAG.store(task_id, Ordering::Relaxed);
    }

    #[unsafe(no_mangle)]
    fn _embassy_trace_task_exec_end(_executor_id: u32, _task_id: u32) {
        SAMPLER_RT_TAG.store(0, Ordering::Relaxed);
    }

    #[unsafe(no_mangle)]
    fn _embassy_trace_task_ready_begin(_executor_id: u32, _task_id: u32) {}

    #[unsafe(no_mangle)]
    fn _embassy_trace_executor_idle(_executor_id: u32) {}
}
