//! Start-up for the bare-metal ARMv8-A examples on QEMU virt (EL1, EL2 or EL3): a stack,
//! FP/SIMD untrapped, .bss zeroed, then the binary's `main`. A panic ends the run through
//! semihosting with code 101.
#![no_std]

use core::arch::global_asm;

// Start-up at EL1, EL2 or EL3: a stack, FP/SIMD on (the compiler uses its registers), .bss
// zeroed, then main.
global_asm!(
    ".section .text.boot, \"ax\"",
    ".global _start",
    ".type _start, %function",
    "_start:",
    "ldr x0, =__stack_top",
    "mov sp, x0",
    "mrs x0, CurrentEL",
    "lsr x0, x0, #2",
    "cmp x0, #2",
    "b.lt 1f",
    // EL2/EL3: do not trap FP/SIMD (CPTR_ELx.TFP, bit 10).
    "b.eq 2f",
    "msr cptr_el3, xzr",
    "b 1f",
    "2:",
    "msr cptr_el2, xzr",
    "1:",
    "mov x0, #(3 << 20)",
    "msr cpacr_el1, x0",
    "isb",
    "ldr x0, =__bss_start",
    "ldr x1, =__bss_end",
    "3:",
    "cmp x0, x1",
    "b.ge 4f",
    "str xzr, [x0], #8",
    "b 3b",
    "4:",
    "bl main",
    "5:",
    "wfi",
    "b 5b",
    ".size _start, . - _start",
);

/// `n` turns of a loop of `nop`s: work of a known size, inlined into its caller so that its
/// samples belong to the caller.
#[inline(always)]
pub fn spin(n: u32) {
    for _ in 0..n {
        // SAFETY: a no-op.
        unsafe { core::arch::asm!("nop", options(nomem, nostack, preserves_flags)) };
    }
}

/// Exactly 2 * 1000 + 1 instructions: `mov`, then 1000 times `subs` and `b.ne` (what the
/// tests compare PMU counts and laps with).
#[inline(always)]
pub fn known_loop() {
    // SAFETY: register-only arithmetic.
    unsafe {
        core::arch::asm!(
            "mov {n}, #1000",
            "1:",
            "subs {n}, {n}, #1",
            "b.ne 1b",
            n = out(reg) _,
            options(nomem, nostack)
        )
    };
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    sampler_rt::pmu::finish(101)
}

/// A firmware's own interrupt handling at EL1 (for the `own-vectors` and `foreign-irq`
/// examples): its exception vectors, whose IRQ entry saves every caller-saved register
/// (FP/SIMD too) and calls [`irq::handler`], and the EL1 physical timer (PPI 14, INTID 30)
/// ticking through QEMU virt's GICv2.
pub mod irq {
    use core::arch::{asm, global_asm};
    use core::sync::atomic::{AtomicU32, Ordering};

    const GICD: usize = 0x0800_0000;
    const GICC: usize = 0x0801_0000;
    /// The EL1 physical timer's interrupt.
    pub const CNTP_IRQ: u32 = 30;

    /// The firmware's timer interrupts served.
    pub static TICKS: AtomicU32 = AtomicU32::new(0);
    static PERIOD: AtomicU32 = AtomicU32::new(0);

    global_asm!(
        ".section .text.example_vectors, \"ax\"",
        ".balign 2048",
        ".global example_vectors",
        ".type example_vectors, %function",
        "example_vectors:",
        // Current EL with SP0, then with SPx: only the IRQ of the second group is expected.
        ".rept 5",
        "b example_unexpected",
        ".balign 0x80",
        ".endr",
        "b example_irq",
        ".balign 0x80",
        ".rept 10",
        "b example_unexpected",
        ".balign 0x80",
        ".endr",
        "example_unexpected:",
        "wfi",
        "b example_unexpected",
        "example_irq:",
        // x0-x18, x29 at 0-159, x30 at 160, FPSR 168, FPCR 176, q0-q31 from 192.
        "sub sp, sp, #(192 + 32 * 16)",
        "stp x0, x1, [sp, #0]",
        "stp x2, x3, [sp, #16]",
        "stp x4, x5, [sp, #32]",
        "stp x6, x7, [sp, #48]",
        "stp x8, x9, [sp, #64]",
        "stp x10, x11, [sp, #80]",
        "stp x12, x13, [sp, #96]",
        "stp x14, x15, [sp, #112]",
        "stp x16, x17, [sp, #128]",
        "stp x18, x29, [sp, #144]",
        "mrs x0, fpsr",
        "mrs x1, fpcr",
        "stp x30, x0, [sp, #160]",
        "str x1, [sp, #176]",
        "add x0, sp, #192",
        "stp q0, q1, [x0, #0]",
        "stp q2, q3, [x0, #32]",
        "stp q4, q5, [x0, #64]",
        "stp q6, q7, [x0, #96]",
        "stp q8, q9, [x0, #128]",
        "stp q10, q11, [x0, #160]",
        "stp q12, q13, [x0, #192]",
        "stp q14, q15, [x0, #224]",
        "stp q16, q17, [x0, #256]",
        "stp q18, q19, [x0, #288]",
        "stp q20, q21, [x0, #320]",
        "stp q22, q23, [x0, #352]",
        "stp q24, q25, [x0, #384]",
        "stp q26, q27, [x0, #416]",
        "stp q28, q29, [x0, #448]",
        "stp q30, q31, [x0, #480]",
        "bl example_irq_handler",
        "add x0, sp, #192",
        "ldp q0, q1, [x0, #0]",
        "ldp q2, q3, [x0, #32]",
        "ldp q4, q5, [x0, #64]",
        "ldp q6, q7, [x0, #96]",
        "ldp q8, q9, [x0, #128]",
        "ldp q10, q11, [x0, #160]",
        "ldp q12, q13, [x0, #192]",
        "ldp q14, q15, [x0, #224]",
        "ldp q16, q17, [x0, #256]",
        "ldp q18, q19, [x0, #288]",
        "ldp q20, q21, [x0, #320]",
        "ldp q22, q23, [x0, #352]",
        "ldp q24, q25, [x0, #384]",
        "ldp q26, q27, [x0, #416]",
        "ldp q28, q29, [x0, #448]",
        "ldp q30, q31, [x0, #480]",
        "ldp x30, x0, [sp, #160]",
        "ldr x1, [sp, #176]",
        "msr fpsr, x0",
        "msr fpcr, x1",
        "ldp x0, x1, [sp, #0]",
        "ldp x2, x3, [sp, #16]",
        "ldp x4, x5, [sp, #32]",
        "ldp x6, x7, [sp, #48]",
        "ldp x8, x9, [sp, #64]",
        "ldp x10, x11, [sp, #80]",
        "ldp x12, x13, [sp, #96]",
        "ldp x14, x15, [sp, #112]",
        "ldp x16, x17, [sp, #128]",
        "ldp x18, x29, [sp, #144]",
        "add sp, sp, #(192 + 32 * 16)",
        "eret",
        ".size example_vectors, . - example_vectors",
    );

    /// The firmware's IRQ handler: the sampler's interrupt goes to `sampler_rt::on_irq`, the
    /// firmware's timer is counted and reloaded; then the EOI.
    #[unsafe(no_mangle)]
    extern "C" fn example_irq_handler() {
        // SAFETY: the GIC CPU interface of QEMU virt.
        let iar = unsafe { core::ptr::read_volatile((GICC + 0x0C) as *const u32) };
        let intid = iar & 0x3FF;
        if intid >= 1020 {
            return;
        }
        if !sampler_rt::on_irq(intid) && intid == CNTP_IRQ {
            TICKS.fetch_add(1, Ordering::Relaxed);
            let period = PERIOD.load(Ordering::Relaxed) as u64;
            // SAFETY: the firmware's own timer.
            unsafe { asm!("msr cntp_tval_el0, {}", "isb", in(reg) period) };
        }
        // SAFETY: end of the interrupt.
        unsafe { core::ptr::write_volatile((GICC + 0x10) as *mut u32, iar) };
    }

    /// Use the example's vectors at EL1.
    pub fn install_vectors() {
        // SAFETY: the table is 2 KiB aligned and its entries are the handlers above.
        unsafe { asm!("adr {t}, example_vectors", "msr vbar_el1, {t}", "isb", t = out(reg) _) };
    }

    /// Tick every `period` counts of the 62.5 MHz system counter, through the GIC, with IRQs
    /// unmasked.
    pub fn start_timer(period: u32) {
        PERIOD.store(period, Ordering::Relaxed);
        let w = |a: usize, v: u32| unsafe { core::ptr::write_volatile(a as *mut u32, v) };
        let r = |a: usize| unsafe { core::ptr::read_volatile(a as *const u32) };
        // SAFETY: QEMU virt's GIC and the EL1 physical timer.
        unsafe {
            w(GICD, r(GICD) | 1);
            w(GICD + 0x100, r(GICD + 0x100) | 1 << CNTP_IRQ);
            core::ptr::write_volatile((GICD + 0x400 + CNTP_IRQ as usize) as *mut u8, 0x80);
            w(GICC + 0x4, 0xFF);
            w(GICC, r(GICC) | 1);
            asm!(
                "msr cntp_tval_el0, {p}",
                "msr cntp_ctl_el0, {one}",
                "isb",
                "msr daifclr, #2",
                p = in(reg) period as u64,
                one = in(reg) 1u64,
            );
        }
    }
}
