//! The variants the entry jumps to, one per mode: ring (constant period or jitter, with or
//! without the stacked xPSR), stacks, and bins; ARMv7-M and ARMv6-M.

use core::arch::naked_asm;

use super::super::dump::sampler_rt_slow;
use super::super::state::*;
use crate::wire;

/// An ARMv7-M variant and its `_sp` twin: the same code but for the first instruction, which
/// reads the exception frame in r12 (`$name`, reached through the frame finder or a lateness
/// check) or at the stack pointer (`$sp`, the entry's direct target; see `handlers`).
macro_rules! twins {
    (
        $(#[$doc:meta])*
        $name:ident, $sp:ident,
        $frame:literal, $at_sp:literal,
        [$($line:literal),* $(,)?]
        $(, $($op:tt)+)?
    ) => {
        $(#[$doc])*
        #[cfg(not(armv6m))]
        #[unsafe(naked)]
        pub(crate) unsafe extern "C" fn $name() {
            naked_asm!($frame, $($line,)* $($($op)+)?)
        }

        #[doc = concat!("[`", stringify!($name), "`] with the exception frame at the stack pointer.")]
        #[cfg(not(armv6m))]
        #[unsafe(naked)]
        pub(crate) unsafe extern "C" fn $sp() {
            naked_asm!($at_sp, $($line,)* $($($op)+)?)
        }
    };
}

twins!(
    /// Ring, constant period (ARMv7-M): 6 instructions after the entry's 2.
    sample_ring,
    sample_ring_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
        "str r12, [r0], #4",
        "subs r2, #1",
        "stm r1, {{r0, r2}}",
        "beq {slow}",
        "bx lr",
    ],
    slow = sym sampler_rt_slow,
);

twins!(
    /// Ring of stack samples (ARMv7-M, either period): the exception frame, EXC_RETURN and the
    /// interrupted r7 (the frame pointer the call-frame information may name) go to
    /// [`sampler_rt_stack`], which writes the entry; the slow path follows when the chunk is full.
    sample_stack,
    sample_stack_sp,
    "mov r0, r12",
    "mov r0, sp",
    [
        "mov r1, lr",
        "mov r2, r7",
        "push {{r3, lr}}",
        "bl {entry}",
        "pop {{r3, lr}}",
        "cmp r0, #0",
        "bne {slow}",
        "bx lr",
    ],
    entry = sym sampler_rt_stack,
    slow = sym sampler_rt_slow,
);

/// Ring of stack samples (ARMv6-M, either period): the entry handed over the stacked PC only,
/// so the frame is found again from EXC_RETURN (bit 2: MSP or PSP) before the same
/// [`sampler_rt_stack`] writes the entry.
#[cfg(armv6m)]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn sample_stack() {
    naked_asm!(
        "mov r1, lr",
        "movs r0, #4",
        "tst r1, r0",
        "bne 1f",
        "mrs r0, msp",
        "b 2f",
        "1:",
        "mrs r0, psp",
        "2:",
        "mov r2, r7",
        "push {{r3, lr}}",
        "bl {entry}",
        "pop {{r1, r2}}",
        "mov lr, r2",
        "cmp r0, #0",
        "bne 3f",
        "bx lr",
        "3:",
        "ldr r0, ={slow}",
        "bx r0",
        ".ltorg",
        entry = sym sampler_rt_stack,
        slow = sym sampler_rt_slow,
    )
}

/// Write one stack entry (see `wire::REC_STACKS`) for the exception frame at `frame`, start the
/// next period, and say whether the chunk is full. Plain 32-bit arithmetic only: on ARMv6-M a
/// 64-bit product would call compiler-builtins, whose time would then count as the
/// application's.
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_stack(frame: *const u32, exc_return: u32, r7: u32) -> u32 {
    let s = state();
    // SAFETY: inside the sampling interrupt, which cannot preempt itself; `frame` is the
    // exception frame the core stacked; `wptr` has room for one entry (the chunk rule); the
    // window is read between the interrupted SP and the initial main stack pointer.
    unsafe {
        let window = ((*s).tag_kind >> 8) & 0xFF;
        // Set by the lateness check's late path for this sample (see `sampler_rt_late`).
        let flags = if (*s).late_flag != 0 {
            (*s).late_flag = 0;
            wire::STACK_FRAMES_INLINE | wire::STACK_HELD_OFF
        } else {
            wire::STACK_FRAMES_INLINE
        };
        let out = (*s).wptr as *mut u32;
        let xpsr = *frame.add(7);
        // Bit 4 clear: an FP-extended frame (18 more words); xPSR bit 9: an alignment word.
        let mut sp = frame as u32 + if exc_return & 0x10 == 0 { 0x68 } else { 0x20 };
        if xpsr & (1 << 9) != 0 {
            sp += 4;
        }
        let top = *core::ptr::addr_of!(STACK_TOP);
        let valid = if sp < top {
            window.min((top - sp) / 4)
        } else {
            0
        };
        *out = *frame.add(6);
        *out.add(1) = xpsr;
        *out.add(2) = *frame.add(5);
        *out.add(3) = sp;
        *out.add(4) = r7;
        // Word by word and volatile: a `memcpy` call would be compiler-builtins' code, which
        // the host cannot tell from the application's.
        let from = sp as *const u32;
        for i in 0..valid as usize {
            core::ptr::write_volatile(out.add(6 + i), core::ptr::read_volatile(from.add(i)));
        }
        // The frame records beyond the window: the chain of (saved r7, saved LR) pairs that
        // r7 points to, followed while it stays on the stack and goes up. A record whose LR
        // is an EXC_RETURN belongs to a handler that interrupted other code: the exception
        // frame the core stacked lies right above it, and its stacked LR, PC and xPSR follow
        // as two more pairs (LR, PC), (xPSR, 0), so that the host goes on into the code the
        // handler interrupted (nested handlers reach their root).
        let records = ((*s).tag_kind >> 16) & 0xFF;
        let rec = out.add(6 + valid as usize);
        let put = |i: u32, v: u32| core::ptr::write_volatile(rec.add(i as usize), v);
        let word = |a: u32| core::ptr::read_volatile(a as *const u32);
        let (mut fp, mut low, mut n) = (r7, sp, 0u32);
        while n < records && fp >= low && fp & 3 == 0 && fp < top.saturating_sub(4) {
            let (next, lr) = (word(fp), word(fp + 4));
            put(2 * n, next);
            put(2 * n + 1, lr);
            n += 1;
            if lr >= 0xFFFF_FF00 && n + 2 <= records && fp < top.saturating_sub(40) {
                put(2 * n, word(fp + 28));
                put(2 * n + 1, word(fp + 32));
                put(2 * n + 2, word(fp + 36));
                put(2 * n + 3, 0);
                n += 2;
            }
            low = fp + 8;
            fp = next;
        }
        // A host reading the ring while the core runs trusts every entry below the count:
        // the entry is whole before the count moves (volatile accesses keep their order).
        core::ptr::write_volatile(
            out.add(5),
            (exc_return & 0xFF) | valid << 8 | n << 16 | flags,
        );
        (*s).wptr = out.add(wire::stack_entry_words(window, records) as usize) as u32;
        core::ptr::write_volatile(core::ptr::addr_of_mut!((*s).remaining), (*s).remaining - 1);
        // ARMv7-M keeps the span (mask + 1) for a multiply-high, ARMv6-M the mask itself.
        if (*s).jitter > u32::from(!cfg!(armv6m)) {
            let mut x = (*s).rng;
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (*s).rng = x;
            #[cfg(armv6m)]
            let extra = x & (*s).jitter;
            #[cfg(not(armv6m))]
            let extra = ((x as u64 * (*s).jitter as u64) >> 32) as u32;
            core::ptr::write_volatile((*s).reload_reg as *mut u32, (*s).reload + extra);
        }
        ((*s).remaining == 0) as u32
    }
}

twins!(
    /// Ring of (PC, stacked xPSR) pairs, constant period (ARMv7-M): one `ldrd` loads both, one
    /// `strd` stores both, so the tag costs no instruction.
    sample_ring_xpsr,
    sample_ring_xpsr_sp,
    "ldrd r12, r3, [r12, #24]",
    "ldrd r12, r3, [sp, #24]",
    [
        "strd r12, r3, [r0], #8",
        "subs r2, #1",
        "stm r1, {{r0, r2}}",
        "beq {slow}",
        "bx lr",
    ],
    slow = sym sampler_rt_slow,
);

twins!(
    /// Ring of (PC, word at `tag_addr`) pairs, constant period (ARMv7-M): two loads more.
    sample_ring_word,
    sample_ring_word_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
        "ldr r3, [r1, #{tag_addr}]",
        "ldr r3, [r3]",
        "strd r12, r3, [r0], #8",
        "subs r2, #1",
        "stm r1, {{r0, r2}}",
        "beq {slow}",
        "bx lr",
    ],
    tag_addr = const wire::state_offsets::TAG_ADDR,
    slow = sym sampler_rt_slow,
);

twins!(
    /// Ring, random period (ARMv7-M): xorshift32, then reload = base + ((rng * span) >> 32) by one
    /// `umlal` (its low accumulator word is the `handler` address, whose carry into the high
    /// word adds a tick with probability address / 2^32: 1e-6 for code at 0x1000, 1/32 at
    /// 0x0800_0000, a bias of a thirtieth of a tick at most in the mean period). 13 or 14
    /// instructions after the entry's 2.
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
    sample_ring_jitter,
    sample_ring_jitter_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
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
    ],
    slow = sym sampler_rt_slow,
);

twins!(
    /// Ring of (PC, stacked xPSR) pairs, random period (ARMv7-M): the pair is loaded into r12 and
    /// r2 and stored with one `strd`, then the count of samples left is loaded again: one
    /// instruction more than [`sample_ring_jitter`].
    sample_ring_jitter_xpsr,
    sample_ring_jitter_xpsr_sp,
    "ldrd r12, r2, [r12, #24]",
    "ldrd r12, r2, [sp, #24]",
    [
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
    ],
    slow = sym sampler_rt_slow,
);

twins!(
    /// Ring of (PC, word at `tag_addr`) pairs, random period (ARMv7-M): three instructions more
    /// than [`sample_ring_jitter`].
    sample_ring_jitter_word,
    sample_ring_jitter_word_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
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
    ],
    tag_addr = const wire::state_offsets::TAG_ADDR,
    slow = sym sampler_rt_slow,
);

twins!(
    /// Histogram, constant period (ARMv7-M): 12 instructions after the entry's 2. The entry loaded
    /// r0 = the first bin's address, r2 = samples left, r3 = `hist_word` (the counters' address,
    /// whose low byte is the shift). The index is clamped with `usat`: an address below the bins
    /// wraps to a huge offset, so every address outside them lands in the last counter. Counters
    /// saturate at 65535 (`usat` again) instead of wrapping to zero.
    sample_hist,
    sample_hist_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
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
    ],
    bits = const HIST_BITS,
    slow = sym sampler_rt_slow,
);

twins!(
    /// Histogram, constant period, counters at the array's start (ARMv7-M with unaligned accesses
    /// trapped and an odd shift): one load more than [`sample_hist`].
    sample_hist_aligned,
    sample_hist_aligned_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
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
    ],
    bits = const HIST_BITS,
    bins = const wire::state_offsets::BINS,
    slow = sym sampler_rt_slow,
);

twins!(
    /// Histogram, random period (ARMv7-M): the bin as in [`sample_hist_aligned`], then the random
    /// period and phase dither of [`sample_ring_jitter`]. The entry loaded r0 = the first bin's
    /// address, r2 = samples left, r3 = the random state.
    sample_hist_jitter,
    sample_hist_jitter_sp,
    "ldr r12, [r12, #24]",
    "ldr r12, [sp, #24]",
    [
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
    ],
    bits = const HIST_BITS,
    word = const wire::state_offsets::HIST_WORD,
    bins = const wire::state_offsets::BINS,
    slow = sym sampler_rt_slow,
);

/// Ring, constant period (ARMv6-M).
#[cfg(armv6m)]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn sample_ring() {
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
pub(crate) unsafe extern "C" fn sample_ring_jitter() {
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
pub(crate) unsafe extern "C" fn sample_hist() {
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
pub(crate) use sample_ring as sample_ring_xpsr;
#[cfg(armv6m)]
pub(crate) use sample_ring as sample_ring_word;
#[cfg(armv6m)]
pub(crate) use sample_ring_jitter as sample_ring_jitter_xpsr;
#[cfg(armv6m)]
pub(crate) use sample_ring_jitter as sample_ring_jitter_word;

/// The ARMv6-M histogram handler also serves both ARMv7-M fallbacks' roles there.
#[cfg(armv6m)]
pub(crate) use sample_hist as sample_hist_aligned;

// ARMv6-M's entry finds the frame itself: no `_sp` twins there.
#[cfg(armv6m)]
pub(crate) use {
    sample_hist as sample_hist_sp, sample_hist as sample_hist_aligned_sp,
    sample_hist_jitter as sample_hist_jitter_sp, sample_ring as sample_ring_sp,
    sample_ring as sample_ring_xpsr_sp, sample_ring as sample_ring_word_sp,
    sample_ring_jitter as sample_ring_jitter_sp, sample_ring_jitter as sample_ring_jitter_xpsr_sp,
    sample_ring_jitter as sample_ring_jitter_word_sp, sample_stack as sample_stack_sp,
};

/// Histogram, random period (ARMv6-M).
#[cfg(armv6m)]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn sample_hist_jitter() {
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
