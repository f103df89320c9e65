//! The sampling interrupt in assembly: the entry and one variant per mode (ring, jitter, tags,
//! bins; ARMv7-M and ARMv6-M).

use core::arch::naked_asm;

use super::state::*;
#[cfg(not(armv6m))]
use crate::wire;

// ---------------------------------------------------------------------------------------------
// Handlers. The ARMv7-M entry loads the state's first words (r0 = wptr, r2 = remaining, r3 =
// rng) and jumps to `handler` with r1 = &SAMPLER_RT_STATE, all in two instructions. When the
// interrupted code is always on the main stack (the host found no `msr psp`/`msr control` in
// the image and thread mode was on MSP at `start`), `handler` is the variant's `_sp` twin,
// which reads the exception frame at the stack pointer. Otherwise it is the frame finder (or
// the lateness check), which puts the frame in r12 (MSP or PSP by bit 2 of EXC_RETURN) and goes
// on to `variant`, the twin that reads the frame there. ARMv6-M: the entry finds the frame
// itself and hands the variant the interrupted PC in r0. r0-r3 and r12 are stacked by the core.

/// The sampling interrupt's entry (the SysTick vector, or the tail of a device timer's
/// handler): on to `handler` (see above).
#[cfg(not(armv6m))]
#[doc(hidden)]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn sampler_rt_entry() {
    naked_asm!(
        "ldr r1, ={state}",
        "ldm.w r1, {{r0, r2, r3, pc}}",
        ".ltorg",
        state = sym SAMPLER_RT_STATE,
    )
}

/// After a lateness check, r1 = the state: reload the state's first words and go on to
/// `after_check` (the variant's twin at the stack pointer, or the frame finder).
#[cfg(not(armv6m))]
macro_rules! to_variant {
    () => {
        concat!("ldm.w r1, {{r0, r2, r3}}\n", "ldr pc, [r1, #{after}]\n",)
    };
}

/// The frame finder, `handler` when no lateness check runs and the interrupted code may be on
/// the process stack: the entry loaded r0, r2 and r3 already.
#[cfg(not(armv6m))]
#[doc(hidden)]
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn sampler_rt_frame() {
    naked_asm!(
        "tst lr, #4",
        "ite eq",
        "mrseq r12, msp",
        "mrsne r12, psp",
        "ldr pc, [r1, #{variant}]",
        variant = const wire::state_offsets::VARIANT,
    )
}

// ---------------------------------------------------------------------------------------------
// Lateness checks. A sample due while a handler at least as urgent as the sampler runs (or
// while interrupts are masked) is taken when that ends, in the code it interrupted: the time
// is counted there. The pacing timer's count says how long ago it expired; a sample taken
// more than `late_ticks` after (the normal entry latency and a margin, set by the host) goes
// to [`sampler_rt_late`]. Each check reads `probe_reg` (the register named below) and
// `late_ticks` with one `ldrd`, the timer with one more load, and costs 6 or 7 instructions
// and two to go on (the frame finder's five more where the frame may be on PSP). A down-counter reads 0 for the tick after it expires (it reloads
// on the next one): a count of 0 is a sample right on time, not one a whole period late (a
// tick is 40 instructions at `-icount shift=0`).

/// SysTick (down-counting; `probe_reg` = RVR, CVR the next word): ticks = RVR - CVR.
#[cfg(not(armv6m))]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn probe_systick() {
    naked_asm!(
        "ldrd r2, r3, [r1, #{reg}]",
        "ldrd r0, r2, [r2]",
        "cbz r2, 1f",
        "subs r0, r0, r2",
        "cmp r0, r3",
        "bhi {late}",
        "1:",
        to_variant!(),
        reg = const wire::state_offsets::PROBE_REG,
        after = const wire::state_offsets::AFTER_CHECK,
        late = sym sampler_rt_late,
    )
}

/// A CMSDK APB timer (down-counting; `probe_reg` = VALUE, RELOAD the next word): ticks =
/// RELOAD - VALUE.
#[cfg(not(armv6m))]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn probe_cmsdk() {
    naked_asm!(
        "ldrd r2, r3, [r1, #{reg}]",
        "ldrd r2, r0, [r2]",
        "cbz r2, 1f",
        "subs r0, r0, r2",
        "cmp r0, r3",
        "bhi {late}",
        "1:",
        to_variant!(),
        reg = const wire::state_offsets::PROBE_REG,
        after = const wire::state_offsets::AFTER_CHECK,
        late = sym sampler_rt_late,
    )
}

/// A Stellaris general-purpose timer (down-counting; `probe_reg` = TAILR, TAR 0x20 above it):
/// ticks = TAILR - TAR.
#[cfg(not(armv6m))]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn probe_gptm() {
    naked_asm!(
        "ldrd r2, r3, [r1, #{reg}]",
        "ldr r0, [r2]",
        "ldr r2, [r2, #0x20]",
        "cbz r2, 1f",
        "subs r0, r0, r2",
        "cmp r0, r3",
        "bhi {late}",
        "1:",
        to_variant!(),
        reg = const wire::state_offsets::PROBE_REG,
        after = const wire::state_offsets::AFTER_CHECK,
        late = sym sampler_rt_late,
    )
}

/// A late sample, r1 = the state: count it, then mark it for the variant. Ring and bins
/// variants read the stacked PC and xPSR from a copy in the state (`fake_pc`), the PC or-ed
/// with `late_or` (bit 0 in a ring, where a Thumb PC has it clear; all ones for bins, which
/// puts it in the outside counter); the stack variant, which reads the real frame, finds
/// `late_flag` set instead (`late_or` 0).
#[cfg(not(armv6m))]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn sampler_rt_late() {
    naked_asm!(
        "tst lr, #4",
        "ite eq",
        "mrseq r12, msp",
        "mrsne r12, psp",
        "ldr r0, [r1, #{held}]",
        "adds r0, #1",
        "str r0, [r1, #{held}]",
        "ldr r0, [r1, #{or}]",
        "cbz r0, 1f",
        "ldrd r2, r3, [r12, #24]",
        "orrs r2, r0",
        "strd r2, r3, [r1, #{fake}]",
        "add r12, r1, #{fake} - 24",
        "ldm.w r1, {{r0, r2, r3}}",
        "ldr pc, [r1, #{variant}]",
        "1:",
        "movs r0, #1",
        "str r0, [r1, #{flag}]",
        "ldm.w r1, {{r0, r2, r3}}",
        "ldr pc, [r1, #{variant}]",
        held = const wire::state_offsets::HELD_OFF,
        or = const wire::state_offsets::LATE_OR,
        fake = const wire::state_offsets::FAKE_PC,
        flag = const wire::state_offsets::LATE_FLAG,
        variant = const wire::state_offsets::VARIANT,
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

// With the `systick` feature the SysTick vector is the entry itself: no extra branch. When the
// application owns SysTick (an RTIC monotonic, a HAL's tick), cargo-sample sees it in the image
// (or in the link's duplicate-symbol error) and builds again with `SAMPLER_RT_TIMER_VECTOR`
// naming a free device timer: SysTick is then left alone and that timer's handler built in.
#[cfg(all(feature = "systick", not(sampler_rt_device_timer)))]
core::arch::global_asm!(".globl SysTick", ".thumb_set SysTick, sampler_rt_entry");

// The device timer cargo-sample chose for this build, if any (`SAMPLER_RT_TIMER_VECTOR`).
include!(concat!(env!("OUT_DIR"), "/timer_vector.rs"));

mod variants;
pub(crate) use variants::*;
