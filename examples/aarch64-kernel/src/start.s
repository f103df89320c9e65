// The kernel's start-up, as its own assembly file: a stack, FP/SIMD untrapped at EL1, .bss
// cleared, then the Rust entry. `_start` is a plain label (no `.type`, no `.size`), as in
// most hand-written start-up files.
.section .text.start, "ax"
.global _start
_start:
    ldr x0, =__stack_end
    mov sp, x0
    mov x0, #(3 << 20)
    msr cpacr_el1, x0
    isb
    ldr x0, =bss_begin
    ldr x1, =bss_end
1:  cmp x0, x1
    b.ge 2f
    str xzr, [x0], #8
    b 1b
2:  bl kernel_main
3:  wfe
    b 3b

// A routine of the kernel's own assembly, with no call-frame information: it keeps the frame
// record the ABI describes (x29 at the saved x29 and x30) and calls into Rust.
.section .text.count_primes, "ax"
.global count_primes
count_primes:
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    bl primes_below
    ldp x29, x30, [sp], #16
    ret
