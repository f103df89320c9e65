//! PC sampling on ARMv8-A (aarch64, at EL1, EL2 or EL3): the virtual generic timer (or a PMU
//! counter's overflow) interrupts through a GICv2 (QEMU `virt`'s layout), and the handler
//! stores the interrupted PC (ELR of its level) in a ring. The common path is assembly and touches no FP/SIMD register; at the end of a chunk
//! (the ring's end, or the requested count) a Rust slow path, entered with every
//! caller-saved register saved (FP/SIMD too), streams the chunk through semihosting or ends
//! the run. PCs are stored as 32 bits: the image must live below 4 GiB (bare-metal images
//! on virt sit at 0x4000_0000).

use core::arch::{asm, global_asm};
use core::mem::MaybeUninit;
use core::ptr::{addr_of, addr_of_mut, read_volatile};

use crate::wire::{self, Config};

const RING_SLOTS: usize = crate::decimal(env!("SAMPLER_RT_RING_SLOTS"));
const HIST_BINS: usize = crate::decimal(env!("SAMPLER_RT_HIST_BINS"));

/// GICv2 distributor and CPU interface of QEMU `virt`.
const GICD: usize = 0x0800_0000;
const GICC: usize = 0x0801_0000;
/// The EL1 virtual timer's interrupt (PPI 11).
const VTIMER_IRQ: u32 = 27;
/// The PMU's overflow interrupt on `virt` (PPI 7).
const PMU_IRQ: u32 = 23;

/// The run's configuration, written into the image by `cargo sample`.
#[unsafe(no_mangle)]
#[used]
#[unsafe(link_section = ".data.SAMPLER_RT_CONFIG")]
static mut SAMPLER_RT_CONFIG: [u8; wire::CONFIG_LEN] = [0; wire::CONFIG_LEN];

/// The sampler's state (the handler's fields first, at fixed offsets).
#[repr(C)]
pub struct State {
    wptr: u64,
    remaining: u32,
    rng: u32,
    reload: u32,
    mask: u32,
    before: u32,
    chunk: u32,
    limit: u32,
    capacity: u32,
    ring: u64,
    phase: u32,
    sent: u32,
    /// At the Cortex-M state's `sink` offset: a host that read the last samples clears it.
    sink: u32,
    /// The semihosting handle of the dump file plus one (0: not open).
    handle: u32,
    config_found: u8,
    /// `MODE_RING` or `MODE_HIST`. In histogram mode the ring's fields hold the bins': `wptr`
    /// the counters' address, `ring` the code address of bin 0, `capacity` the outside
    /// counter's index, `sent` the shift.
    mode: u8,
    _pad: [u8; 2],
    /// `TAG_WORD`: the word recorded with each sample (ring entries are then (pc, tag)
    /// pairs); 0 = no tag.
    tag_addr: u32,
    crc: u32,
    timer: u32,
    magic: u32,
    /// Interrupts the sampler's vectors took that were not the sampler's (ended unserved).
    foreign: u32,
}

// The host reads this block by these offsets (`wire::StateView`); the handler uses the first.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(State, remaining) == 8);
    assert!(offset_of!(State, reload) == 16);
    assert!(offset_of!(State, before) == 24);
    assert!(offset_of!(State, capacity) == 36);
    assert!(offset_of!(State, ring) == 40);
    assert!(offset_of!(State, phase) == 48);
    assert!(offset_of!(State, sink) == wire::state_offsets::SINK);
    assert!(offset_of!(State, config_found) == 64);
    assert!(offset_of!(State, mode) == 65);
    assert!(offset_of!(State, sent) == 52);
    assert!(offset_of!(State, tag_addr) == 68);
    assert!(offset_of!(State, timer) == 76);
    assert!(offset_of!(State, magic) == 80);
    assert!(offset_of!(State, foreign) == 84);
    assert!(core::mem::size_of::<State>() <= wire::STATE_LEN);
};

/// The state: the host finds it by name.
#[unsafe(no_mangle)]
pub static mut SAMPLER_RT_STATE: State = State {
    wptr: 0,
    remaining: 0,
    rng: 0,
    reload: 0,
    mask: 0,
    before: 0,
    chunk: 0,
    limit: 0,
    capacity: 0,
    ring: 0,
    phase: 0,
    sent: 0,
    sink: 0,
    handle: 0,
    config_found: 0,
    mode: 0,
    _pad: [0; 2],
    tag_addr: 0,
    crc: 0,
    timer: 0,
    magic: 0,
    foreign: 0,
};

static mut RING: MaybeUninit<[u32; RING_SLOTS]> = MaybeUninit::uninit();

/// Histogram mode: the counters, and the outside one last. Zeroed by `start`.
static mut BINS: MaybeUninit<[u16; HIST_BINS + 1]> = MaybeUninit::uninit();

/// The number of histogram counters this build has, for the host (which reads it from the ELF
/// to choose the bin size of a run).
#[unsafe(no_mangle)]
static SAMPLER_RT_HIST_COUNTERS: u32 = HIST_BINS as u32;

const IDLE: u32 = wire::PHASE_IDLE as u32;
const RUNNING: u32 = wire::PHASE_RUNNING as u32;
const STOPPED: u32 = wire::PHASE_STOPPED as u32;
const DUMPED: u32 = wire::PHASE_DUMPED as u32;

unsafe extern "C" {
    static __stext: u8;
    static __etext: u8;
}

global_asm!(
    // The two handlers' entry: save x0-x4 and x30 in a 64-byte frame, read the IAR (x0 GICC,
    // w1 IAR, w2 INTID), w30 = 0 for the virtual timer and non-zero for the PMU, and leave for
    // `sampler_rt_foreign` with any other interrupt.
    ".macro sampler_rt_entry",
    "stp x0, x1, [sp, #-64]!",
    "stp x2, x3, [sp, #16]",
    "stp x4, x30, [sp, #32]",
    "ldr x0, ={gicc}",
    "ldr w1, [x0, #0x0c]",
    "and w2, w1, #0x3ff",
    "subs w30, w2, #{irq}",
    "b.eq 98f",
    "cmp w2, #{pmu_irq}",
    "b.ne sampler_rt_foreign",
    "98:",
    ".endm",
    // x4 = ELR at EL2 or EL3 (EL1's is read in line), then back to `back`.
    ".macro sampler_rt_elr_high back",
    "cmp x4, #8",
    "b.ne 97f",
    "mrs x4, elr_el2",
    "b \\back",
    "97:",
    "mrs x4, elr_el3",
    "b \\back",
    ".endm",
    ".section .text.sampler_rt_vectors, \"ax\"",
    ".balign 2048",
    ".global sampler_rt_vectors",
    // One sized function over the vectors and the handler, so that profiles know it as the
    // sampler's own code.
    ".type sampler_rt_vectors, %function",
    "sampler_rt_vectors:",
    // Current EL with SP0: sync, IRQ, FIQ, SError.
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    // Current EL with SPx.
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_irq", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    // Lower EL, AArch64 and AArch32.
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "b sampler_rt_unexpected", ".balign 0x80",
    "sampler_rt_unexpected:",
    "wfi",
    "b sampler_rt_unexpected",
    // The sampling interrupt: x0 GICC, w1 IAR, x3 the state.
    "sampler_rt_irq:",
    "sampler_rt_entry",
    "ldr x3, ={state}",
    "ldr x2, [x3]",
    // The interrupted PC: ELR of the level the sampler runs at (EL1 in line; EL2, EL3).
    "mrs x4, CurrentEL",
    "cmp x4, #4",
    "b.ne 3f",
    "mrs x4, elr_el1",
    "2:",
    "str w4, [x2], #4",
    // With a tag, the word beside the PC.
    "ldr w4, [x3, #68]",
    "cbz w4, 12f",
    "ldr w4, [x4]",
    "str w4, [x2], #4",
    "12:",
    "str x2, [x3]",
    // The next period: reload + (xorshift32 & mask); both handlers end here (x0 GICC, w1 IAR,
    // x3 the state, w30 the timer kind).
    "sampler_rt_reload:",
    "ldr w2, [x3, #12]",
    "eor w2, w2, w2, lsl #13",
    "eor w2, w2, w2, lsr #17",
    "eor w2, w2, w2, lsl #5",
    "str w2, [x3, #12]",
    "ldr w4, [x3, #20]",
    "and w2, w2, w4",
    "ldr w4, [x3, #16]",
    "add w2, w2, w4",
    "cbnz w30, 5f",
    "msr cntv_tval_el0, x2",
    "b 4f",
    // A PMU overflow: the counter that overflowed (the cycle counter, PMOVS bit 31, or event
    // counter 0) counts the next period up to its overflow; its flag is cleared.
    "5:",
    "add w2, w2, #1",
    "neg x2, x2",
    "mrs x4, pmovsclr_el0",
    "tbnz x4, #31, 11f",
    "msr pmselr_el0, xzr",
    "isb",
    "msr pmxevcntr_el0, x2",
    "mov x4, #1",
    "msr pmovsclr_el0, x4",
    "isb",
    "b 4f",
    "11:",
    "msr pmccntr_el0, x2",
    "mov x4, #0x80000000",
    "msr pmovsclr_el0, x4",
    "isb",
    "4:",
    "ldr w4, [x3, #8]",
    "subs w4, w4, #1",
    "str w4, [x3, #8]",
    "b.ne 9f",
    // (The slow path keeps x0 and x1.)
    "bl sampler_rt_a64_slow_entry",
    "9:",
    "str w1, [x0, #0x10]",
    "ldp x4, x30, [sp, #32]",
    "ldp x2, x3, [sp, #16]",
    "ldp x0, x1, [sp], #64",
    "eret",
    "3:",
    "sampler_rt_elr_high 2b",
    // Not ours (or spurious): if it is an interrupt, disable it (a level-triggered source
    // nobody serves would fire again at once, for ever), end it, count it, and return. The
    // firmware's own interrupts need its own vectors (`start_keeping_vectors`, `on_irq`).
    "sampler_rt_foreign:",
    "cmp w2, #1020",
    "b.hs 7f",
    "ldr x3, ={gicd}",
    "add x3, x3, #0x180",
    "lsr w4, w2, #5",
    "add x3, x3, x4, lsl #2",
    "and w4, w2, #31",
    "mov w2, #1",
    "lsl w2, w2, w4",
    "str w2, [x3]",
    "str w1, [x0, #0x10]",
    "ldr x3, ={state}",
    "ldr w4, [x3, #84]",
    "add w4, w4, #1",
    "str w4, [x3, #84]",
    "7:",
    "ldp x4, x30, [sp, #32]",
    "ldp x2, x3, [sp, #16]",
    "ldp x0, x1, [sp], #64",
    "eret",
    // Histogram mode (the vectors below): the bin of the interrupted PC counts one more,
    // saturating; the bins' address is the state's first word, the code base, the shift and
    // the outside counter's index are at 40, 52 and 36.
    "sampler_rt_irq_hist:",
    "sampler_rt_entry",
    "stp x5, x6, [sp, #48]",
    "ldr x3, ={state}",
    "mrs x4, CurrentEL",
    "cmp x4, #4",
    "b.ne 3f",
    "mrs x4, elr_el1",
    "2:",
    "ldr w5, [x3, #40]",
    "sub w4, w4, w5",
    "ldr w5, [x3, #52]",
    "lsr w4, w4, w5",
    "ldr w5, [x3, #36]",
    "cmp w4, w5",
    "csel w4, w4, w5, lo",
    "ldr x6, [x3]",
    "add x6, x6, x4, lsl #1",
    "ldrh w4, [x6]",
    "add w4, w4, #1",
    "tbnz w4, #16, 4f",
    "strh w4, [x6]",
    "4:",
    "ldp x5, x6, [sp, #48]",
    "b sampler_rt_reload",
    "3:",
    "sampler_rt_elr_high 2b",
    // The same vectors, for histogram mode.
    ".balign 2048",
    "sampler_rt_vectors_hist:",
    ".rept 5",
    "b sampler_rt_unexpected", ".balign 0x80",
    ".endr",
    "b sampler_rt_irq_hist", ".balign 0x80",
    ".rept 10",
    "b sampler_rt_unexpected", ".balign 0x80",
    ".endr",
    // The slow path: every other caller-saved register, FP/SIMD included, around Rust.
    "sampler_rt_a64_slow_entry:",
    "stp x29, x30, [sp, #-16]!",
    "sub sp, sp, #512",
    "stp x5, x6, [sp, #0]",
    "stp x7, x8, [sp, #16]",
    "stp x9, x10, [sp, #32]",
    "stp x11, x12, [sp, #48]",
    "stp x13, x14, [sp, #64]",
    "stp x15, x16, [sp, #80]",
    "stp x17, x18, [sp, #96]",
    "stp x1, x0, [sp, #112]",
    "stp q0, q1, [sp, #128]",
    "stp q2, q3, [sp, #160]",
    "stp q4, q5, [sp, #192]",
    "stp q6, q7, [sp, #224]",
    "stp q16, q17, [sp, #256]",
    "stp q18, q19, [sp, #288]",
    "stp q20, q21, [sp, #320]",
    "stp q22, q23, [sp, #352]",
    "stp q24, q25, [sp, #384]",
    "stp q26, q27, [sp, #416]",
    "stp q28, q29, [sp, #448]",
    "stp q30, q31, [sp, #480]",
    "mrs x5, fpsr",
    "mrs x6, fpcr",
    "stp x5, x6, [sp, #-16]!",
    "bl {slow}",
    "ldp x5, x6, [sp], #16",
    "msr fpsr, x5",
    "msr fpcr, x6",
    "ldp q30, q31, [sp, #480]",
    "ldp q28, q29, [sp, #448]",
    "ldp q26, q27, [sp, #416]",
    "ldp q24, q25, [sp, #384]",
    "ldp q22, q23, [sp, #352]",
    "ldp q20, q21, [sp, #320]",
    "ldp q18, q19, [sp, #288]",
    "ldp q16, q17, [sp, #256]",
    "ldp q6, q7, [sp, #224]",
    "ldp q4, q5, [sp, #192]",
    "ldp q2, q3, [sp, #160]",
    "ldp q0, q1, [sp, #128]",
    "ldp x1, x0, [sp, #112]",
    "ldp x17, x18, [sp, #96]",
    "ldp x15, x16, [sp, #80]",
    "ldp x13, x14, [sp, #64]",
    "ldp x11, x12, [sp, #48]",
    "ldp x9, x10, [sp, #32]",
    "ldp x7, x8, [sp, #16]",
    "ldp x5, x6, [sp, #0]",
    "add sp, sp, #512",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".ltorg",
    ".size sampler_rt_vectors, . - sampler_rt_vectors",
    gicc = const GICC,
    gicd = const GICD,
    irq = const VTIMER_IRQ,
    pmu_irq = const PMU_IRQ,
    state = sym SAMPLER_RT_STATE,
    slow = sym sampler_rt_a64_slow,
);

fn state() -> *mut State {
    addr_of_mut!(SAMPLER_RT_STATE)
}

fn read_config() -> Option<Config> {
    Config::decode(&crate::host_block(addr_of!(SAMPLER_RT_CONFIG)))
}

/// Start sampling with the configuration `cargo sample` placed in the image (ring mode; the
/// built-in defaults otherwise). Installs the sampler's exception vectors (VBAR of its level),
/// enables the sampling interrupt in the GIC (the virtual timer's, or the PMU's for
/// `TIMER_PMU`) and unmasks IRQs. At EL1, at EL2 (where it routes physical IRQs to EL2) and at
/// EL3 (SCR_EL3.IRQ routes them to EL3; the GIC's group 0 is signalled as IRQ).
pub fn start() {
    start_with(true)
}

/// Like [`start`], for firmware with interrupts of its own: the firmware keeps its exception
/// vectors (and at EL2/EL3 its routing of IRQs) and its IRQ handler calls [`on_irq`] with the
/// interrupt number it read from the GIC's IAR, before it writes the EOI.
pub fn start_keeping_vectors() {
    start_with(false)
}

fn start_with(install_vectors: bool) {
    let s = state();
    // SAFETY: single core; the timer interrupt is not enabled until the end.
    unsafe {
        if (*s).phase != IDLE {
            return;
        }
        let el = {
            let v: u64;
            asm!("mrs {}, CurrentEL", out(reg) v, options(nomem, nostack));
            (v >> 2) & 3
        };
        let found = read_config();
        let cfg = found.unwrap_or(Config {
            mode: wire::MODE_RING,
            reload: 10_000,
            jitter_mask: 0x3FFF,
            limit: RING_SLOTS as u32,
            seed: 0x9E37_79B9,
            ..Config::default()
        });
        (*s).config_found = found.is_some() as u8;
        (*s).sink = cfg.sink as u32;
        // (Read, so that the linker keeps the count for the host.)
        let bins = read_volatile(addr_of!(SAMPLER_RT_HIST_COUNTERS)) as usize;
        let usable = match cfg.mode {
            wire::MODE_RING => RING_SLOTS > 0,
            wire::MODE_HIST => bins > 0 && (1..=16).contains(&cfg.hist_shift),
            _ => false,
        };
        if !(1..=3).contains(&el) || !usable {
            (*s).phase = STOPPED;
            return;
        }
        (*s).mode = cfg.mode;
        (*s).reload = cfg.reload.max(1);
        (*s).mask = cfg.jitter_mask;
        (*s).rng = if cfg.seed == 0 { 0x9E37_79B9 } else { cfg.seed };
        (*s).limit = cfg.limit;
        // A tagged ring holds (pc, tag) pairs: half as many samples.
        (*s).tag_addr = if cfg.tag_kind == wire::TAG_WORD {
            match cfg.tag_addr {
                0 => crate::tags::tag_word_address() as u32,
                a => a,
            }
        } else {
            0
        };
        (*s).before = 0;
        let hist = cfg.mode == wire::MODE_HIST;
        if hist {
            let bins = addr_of_mut!(BINS) as *mut u16;
            for i in 0..=HIST_BINS {
                core::ptr::write_volatile(bins.add(i), 0);
            }
            (*s).tag_addr = 0;
            (*s).wptr = bins as u64;
            (*s).ring = cfg.hist_base as u64;
            (*s).capacity = HIST_BINS as u32;
            (*s).sent = cfg.hist_shift as u32;
        } else {
            (*s).capacity = (RING_SLOTS / entry_words(s)) as u32;
            (*s).ring = addr_of_mut!(RING) as u64;
        }
        next_chunk(s);
        (*s).phase = RUNNING;
        (*s).magic = wire::A64_STATE_MAGIC;
        // The vectors of the mode: their IRQ entries go to the ring's or the bins' handler.
        let vectors: u64;
        if hist {
            asm!("adr {}, sampler_rt_vectors_hist", out(reg) vectors, options(nomem, nostack));
        } else {
            asm!("adr {}, sampler_rt_vectors", out(reg) vectors, options(nomem, nostack));
        }
        if !install_vectors {
            // The firmware's vectors and routing stay.
        } else if el == 3 {
            // Take IRQs at EL3 (SCR_EL3.IRQ), where the sampler's vectors are.
            asm!(
                "msr vbar_el3, {v}",
                "mrs {t}, scr_el3",
                "orr {t}, {t}, #(1 << 1)",
                "msr scr_el3, {t}",
                "isb",
                v = in(reg) vectors,
                t = out(reg) _,
            );
        } else if el == 2 {
            // Take physical IRQs at EL2 (HCR_EL2.IMO), where the sampler's vectors are.
            asm!(
                "msr vbar_el2, {v}",
                "mrs {t}, hcr_el2",
                "orr {t}, {t}, #(1 << 4)",
                "msr hcr_el2, {t}",
                "isb",
                v = in(reg) vectors,
                t = out(reg) _,
            );
        } else {
            asm!("msr vbar_el1, {v}", "isb", v = in(reg) vectors);
        }
        let w = |a: usize, v: u32| core::ptr::write_volatile(a as *mut u32, v);
        let r = |a: usize| core::ptr::read_volatile(a as *const u32);
        (*s).timer = cfg.timer as u32;
        let irq = if cfg.timer == wire::TIMER_PMU {
            PMU_IRQ
        } else {
            VTIMER_IRQ
        };
        // Enable the distributor and CPU interface (keeping what the firmware enabled), the
        // interrupt at the most urgent priority, and a priority mask that lets it through.
        w(GICD, r(GICD) | 1);
        w(GICD + 0x100, r(GICD + 0x100) | 1 << irq);
        let prio = GICD + 0x400 + irq as usize;
        core::ptr::write_volatile(prio as *mut u8, 0);
        if install_vectors || r(GICC + 0x4) == 0 {
            w(GICC + 0x4, 0xFF);
        }
        w(GICC, r(GICC) | 1);
        // The PMU filter that counts at this level: NSH for EL2; at EL3 the event counters also
        // need MDCR_EL3.SPME (the cycle counter counts there unless PMCR.DP).
        let filter: u64 = if el == 2 { 1 << 27 } else { 0 };
        if el == 3 {
            asm!(
                "mrs {t}, mdcr_el3",
                "orr {t}, {t}, #(1 << 17)",
                "msr mdcr_el3, {t}",
                t = out(reg) _,
            );
        }
        let event = cfg.timer_base as u64 & 0xFFFF;
        if cfg.timer == wire::TIMER_PMU && event == wire::PMU_CPU_CYCLES as u64 {
            // The cycle counter (64 bits, PMCR_EL0.LC) counts from -(period) up to its overflow.
            let period = (*s).reload as u64 + 1;
            asm!(
                "msr pmccfiltr_el0, {filter}",
                "msr pmccntr_el0, {cnt}",
                "msr pmovsclr_el0, {bit}",
                "msr pmintenset_el1, {bit}",
                "msr pmcntenset_el0, {bit}",
                "mrs {t}, pmcr_el0",
                "orr {t}, {t}, #(1 << 6)",
                "orr {t}, {t}, #1",
                "msr pmcr_el0, {t}",
                "isb",
                "msr daifclr, #2",
                filter = in(reg) filter,
                cnt = in(reg) period.wrapping_neg(),
                bit = in(reg) 1u64 << 31,
                t = out(reg) _,
            );
        } else if cfg.timer == wire::TIMER_PMU {
            // Counter 0 counts the event from -(period) up to its overflow.
            let period = (*s).reload as u64 + 1;
            if event == 0 {
                crate::pmu::sampler_counts_sw_incr();
            }
            asm!(
                "msr pmselr_el0, xzr",
                "isb",
                "msr pmxevtyper_el0, {ev}",
                "msr pmxevcntr_el0, {cnt}",
                "msr pmovsclr_el0, {one}",
                "msr pmintenset_el1, {one}",
                "msr pmcntenset_el0, {one}",
                "mrs {t}, pmcr_el0",
                "orr {t}, {t}, #1",
                "msr pmcr_el0, {t}",
                "isb",
                "msr daifclr, #2",
                ev = in(reg) event | filter,
                cnt = in(reg) (period as u32).wrapping_neg() as u64,
                one = in(reg) 1u64,
                t = out(reg) _,
            );
        } else {
            asm!(
                "msr cntv_tval_el0, {t}",
                "msr cntv_ctl_el0, {one}",
                "isb",
                "msr daifclr, #2",
                t = in(reg) (*s).reload as u64,
                one = in(reg) 1u64,
            );
        }
    }
}

/// # Safety
/// The sampling interrupt cannot run.
unsafe fn next_chunk(s: *mut State) {
    // SAFETY: see the contract.
    unsafe {
        let hist = (*s).mode == wire::MODE_HIST;
        let ring = (!hist).then_some((*s).capacity);
        let (chunk, pos) = wire::next_chunk((*s).before, ring, (*s).limit);
        (*s).chunk = chunk;
        (*s).remaining = chunk;
        if !hist {
            (*s).wptr = (*s).ring + 4 * entry_words(s) as u64 * pos as u64;
        }
    }
}

/// Words per ring entry: the PC, and the tag when there is one.
fn entry_words(s: *mut State) -> usize {
    // SAFETY: a plain read of the state.
    if unsafe { (*s).tag_addr } == 0 { 1 } else { 2 }
}

/// The sampler's part of the firmware's own IRQ handler (after [`start_keeping_vectors`]):
/// `intid` is what the handler read from GICC_IAR. Returns `true` when the interrupt was the
/// sampler's: it has taken its sample (the PC in ELR of this level) and set up the next one,
/// and the firmware only writes the EOI. Call it before IRQs are unmasked again in the handler
/// (ELR must still hold the interrupted PC).
pub fn on_irq(intid: u32) -> bool {
    let s = state();
    // SAFETY: in the firmware's IRQ handler, which the sampling interrupt cannot preempt.
    unsafe {
        let mine = if (*s).timer == wire::TIMER_PMU as u32 {
            PMU_IRQ
        } else {
            VTIMER_IRQ
        };
        if intid & 0x3FF != mine || (*s).phase != RUNNING {
            return false;
        }
        let pc: u64;
        let el = {
            let v: u64;
            asm!("mrs {}, CurrentEL", out(reg) v, options(nomem, nostack));
            (v >> 2) & 3
        };
        match el {
            3 => asm!("mrs {}, elr_el3", out(reg) pc, options(nomem, nostack)),
            2 => asm!("mrs {}, elr_el2", out(reg) pc, options(nomem, nostack)),
            _ => asm!("mrs {}, elr_el1", out(reg) pc, options(nomem, nostack)),
        }
        // The same steps as the vectors' fast path: store (or count), next period, chunk end.
        if (*s).mode == wire::MODE_HIST {
            let i = ((pc as u32).wrapping_sub((*s).ring as u32) >> (*s).sent).min((*s).capacity);
            let bin = ((*s).wptr as *mut u16).add(i as usize);
            let n = read_volatile(bin);
            if n != u16::MAX {
                core::ptr::write_volatile(bin, n + 1);
            }
        } else {
            core::ptr::write_volatile((*s).wptr as *mut u32, pc as u32);
            (*s).wptr += 4;
        }
        if (*s).tag_addr != 0 {
            let tag = read_volatile((*s).tag_addr as usize as *const u32);
            core::ptr::write_volatile((*s).wptr as *mut u32, tag);
            (*s).wptr += 4;
        }
        let mut r = (*s).rng;
        r ^= r << 13;
        r ^= r >> 17;
        r ^= r << 5;
        (*s).rng = r;
        let next = (r & (*s).mask).wrapping_add((*s).reload);
        if (*s).timer != wire::TIMER_PMU as u32 {
            asm!("msr cntv_tval_el0, {}", "isb", in(reg) next as u64, options(nostack));
        } else {
            let preset = (next as u64 + 1).wrapping_neg();
            let ovf: u64;
            asm!("mrs {}, pmovsclr_el0", out(reg) ovf, options(nomem, nostack));
            if ovf & 1 << 31 != 0 {
                asm!(
                    "msr pmccntr_el0, {v}",
                    "msr pmovsclr_el0, {bit}",
                    "isb",
                    v = in(reg) preset,
                    bit = in(reg) 1u64 << 31,
                    options(nostack),
                );
            } else {
                asm!(
                    "msr pmselr_el0, xzr",
                    "isb",
                    "msr pmxevcntr_el0, {v}",
                    "msr pmovsclr_el0, {bit}",
                    "isb",
                    v = in(reg) preset,
                    bit = in(reg) 1u64,
                    options(nostack),
                );
            }
        }
        (*s).remaining -= 1;
        if (*s).remaining == 0 {
            sampler_rt_a64_slow();
        }
        true
    }
}

/// The end of a chunk, from the interrupt.
extern "C" fn sampler_rt_a64_slow() {
    let s = state();
    // SAFETY: inside the sampling interrupt, which cannot preempt itself.
    unsafe {
        (*s).before += (*s).chunk;
        (*s).chunk = 0;
        if (*s).limit != 0 && (*s).before >= (*s).limit {
            stop_timers();
            (*s).phase = STOPPED;
            if (*s).sink == wire::SINK_SEMIHOSTING as u32 {
                send_dump(s, wire::STOP_LIMIT);
                crate::semihosting::exit(0);
            }
        } else {
            if (*s).sink == wire::SINK_SEMIHOSTING as u32 && (*s).mode != wire::MODE_HIST {
                stream(s, (*s).before);
            }
            next_chunk(s);
        }
    }
}

/// Stop both sampling sources (the virtual timer, PMU counter 0's interrupt).
fn stop_timers() {
    // SAFETY: timer and PMU control registers the sampler set up.
    unsafe {
        asm!(
            "msr cntv_ctl_el0, xzr",
            "msr pmintenclr_el1, {bits}",
            "isb",
            bits = in(reg) 1u64 << 31 | 1,
        )
    };
}

fn taken(s: *mut State) -> u32 {
    // SAFETY: plain reads.
    unsafe { (*s).before + (*s).chunk - (*s).remaining }
}

/// Stop sampling and send the samples (call before the firmware ends by itself). With a host
/// reading the ring (a probe, QEMU's monitor), wait a bounded time for it to read the last ones.
pub fn flush() {
    let s = state();
    // SAFETY: IRQs masked while the state changes.
    unsafe {
        asm!("msr daifset, #2");
        stop_timers();
        if (*s).phase == RUNNING {
            (*s).phase = STOPPED;
        }
        if (*s).sink == wire::SINK_SEMIHOSTING as u32 && (*s).phase == STOPPED {
            send_dump(s, wire::STOP_FIRMWARE);
        }
        if (*s).sink == wire::SINK_HOST as u32 {
            let sink = addr_of!((*s).sink);
            let mut turns = 0u32;
            while read_volatile(sink) == wire::SINK_HOST as u32 && turns < 1 << 24 {
                turns += 1;
            }
        }
    }
}

/// Send the samples and end the program through semihosting with `code`.
pub fn exit(code: i32) -> ! {
    flush();
    crate::semihosting::exit(code)
}

/// Open the dump file (header and a first INFO) if needed.
///
/// # Safety
/// Called with the sampling interrupt unable to run.
unsafe fn open(s: *mut State) -> bool {
    // SAFETY: see the contract.
    unsafe {
        if (*s).handle == 0 {
            let name = b"sampler.dump\0";
            let block = [name.as_ptr() as u64, 5, (name.len() - 1) as u64];
            let h = crate::semihosting::semihost(crate::semihosting::SYS_OPEN, block.as_ptr());
            if h < 0 {
                return false;
            }
            (*s).handle = h as u32 + 1;
            (*s).crc = wire::Crc32::new().state();
            put(s, &wire::file_header());
            let info = info_now(s, 0, wire::STOP_RUNNING);
            put(
                s,
                &wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32),
            );
            put(s, &info.encode());
        }
        true
    }
}

/// Write bytes, folding them into the running CRC-32.
///
/// # Safety
/// The file is open.
unsafe fn put(s: *mut State, b: &[u8]) {
    // SAFETY: see the contract.
    unsafe {
        let mut c = wire::Crc32::resume((*s).crc);
        c.update(b);
        (*s).crc = c.state();
        raw(s, b);
    }
}

/// # Safety
/// The file is open.
unsafe fn raw(s: *mut State, b: &[u8]) {
    // SAFETY: see the contract.
    unsafe {
        let block = [(*s).handle as u64 - 1, b.as_ptr() as u64, b.len() as u64];
        crate::semihosting::semihost(crate::semihosting::SYS_WRITE, block.as_ptr());
    }
}

/// Append the samples from `sent` to `upto` (those still in the ring) as a PCS record.
///
/// # Safety
/// The sampling interrupt cannot run.
unsafe fn stream(s: *mut State, upto: u32) {
    // SAFETY: see the contract; the ring holds sample q in slot q % capacity.
    unsafe {
        if !open(s) {
            return;
        }
        let cap = (*s).capacity;
        let from = (*s).sent.max(upto.saturating_sub(cap));
        let n = upto - from;
        if n == 0 {
            return;
        }
        let words = entry_words(s);
        let kind = if words == 2 {
            wire::REC_PCS_TAGS
        } else {
            wire::REC_PCS
        };
        put(s, &wire::record_header(kind, 8 + 4 * words as u32 * n));
        put(s, &from.to_le_bytes());
        put(s, &n.to_le_bytes());
        let ring = (*s).ring as *const u32;
        let mut q = from;
        while q < upto {
            let slot = q % cap;
            let run = (cap - slot).min(upto - q);
            let bytes = core::slice::from_raw_parts(
                ring.add(words * slot as usize) as *const u8,
                4 * words * run as usize,
            );
            put(s, bytes);
            q += run;
        }
        (*s).sent = upto;
    }
}

/// # Safety
/// The state does not change meanwhile.
unsafe fn info_now(s: *mut State, taken: u32, stop: u8) -> wire::Info {
    // SAFETY: the code range is the image's own.
    unsafe {
        let a = addr_of!(__stext) as usize;
        let b = addr_of!(__etext) as usize;
        let code = core::slice::from_raw_parts(a as *const u8, b - a);
        wire::Info {
            mode: if (*s).capacity == 0 {
                wire::MODE_OFF
            } else if (*s).mode == wire::MODE_HIST {
                wire::MODE_HIST
            } else {
                wire::MODE_RING
            },
            timer: if (*s).timer == wire::TIMER_PMU as u32 {
                wire::TIMER_PMU
            } else {
                wire::TIMER_GENERIC
            },
            stop,
            arch: 8,
            reload: (*s).reload,
            jitter_mask: (*s).mask,
            limit: (*s).limit,
            capacity: (*s).capacity,
            taken,
            lost: 0,
            code_start: a as u32,
            code_end: b as u32,
            code_crc: wire::crc32(code),
            config_addr: addr_of!(SAMPLER_RT_CONFIG) as u32,
            config_found: (*s).config_found,
            priority: 0,
            rt_version: crate::RT_VERSION,
            tag_kind: if (*s).tag_addr == 0 {
                wire::TAG_NONE
            } else {
                wire::TAG_WORD
            },
            foreign: (*s).foreign,
        }
    }
}

/// Append the bins as a HIST record (the counters' bytes are the record's little-endian
/// `u16`s; the last counter is `outside`).
///
/// # Safety
/// Sampling is stopped; histogram mode; the file is open.
unsafe fn send_hist(s: *mut State) {
    // SAFETY: `wptr` is counter 0 of BINS, `capacity + 1` counters long.
    unsafe {
        let count = (*s).capacity;
        let counters = (*s).wptr as *const u8;
        let outside = read_volatile((counters as *const u16).add(count as usize));
        put(
            s,
            &wire::record_header(wire::REC_HIST, wire::hist_len(count)),
        );
        put(
            s,
            &wire::hist_header((*s).ring as u32, (*s).sent, outside as u32, count),
        );
        put(s, core::slice::from_raw_parts(counters, 2 * count as usize));
        if count % 2 == 1 {
            put(s, &[0, 0]);
        }
    }
}

/// # Safety
/// Sampling is stopped.
unsafe fn send_dump(s: *mut State, stop: u8) {
    // SAFETY: see the contract.
    unsafe {
        if (*s).phase == DUMPED || !open(s) {
            return;
        }
        (*s).phase = DUMPED;
        let n = taken(s);
        if (*s).mode == wire::MODE_HIST {
            send_hist(s);
        } else {
            stream(s, n);
        }
        if let Some(len) = crate::laps::record_len() {
            put(s, &wire::record_header(wire::REC_LAPS, len));
            crate::laps::write_record(|b| put(s, b));
        }
        crate::tags::write_names(&mut |b| put(s, b));
        let info = info_now(s, n, stop);
        put(
            s,
            &wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32),
        );
        put(s, &info.encode());
        let crc = wire::Crc32::resume((*s).crc).finish();
        raw(s, &wire::record_header(wire::REC_END, 4));
        raw(s, &crc.to_le_bytes());
        crate::semihosting::semihost(
            crate::semihosting::SYS_CLOSE,
            [(*s).handle as u64 - 1].as_ptr(),
        );
        (*s).handle = 0;
    }
}
