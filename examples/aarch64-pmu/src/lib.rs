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

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    sampler_rt::pmu::finish(101)
}
