//! A kernel's compute: a matrix product with a 160-byte frame of its own, a prime sieve by trial
//! division (reached through a routine of the start-up file's own assembly, which has no
//! call-frame information), and a buffer cleared with `memset`, called from an `extern "C"`
//! entry that the start-up assembly branches to. Ends through semihosting.
#![no_std]
#![no_main]

use core::hint::black_box;

core::arch::global_asm!(include_str!("start.s"));

unsafe extern "C" {
    /// `primes_below` through assembly with no call-frame information (`start.s`).
    fn count_primes(n: u32) -> u32;
}

/// 4 x 4 products of 5 x 5 matrices kept on the stack (160 bytes of locals).
#[unsafe(no_mangle)]
#[inline(never)]
fn matmul(seed: u32) -> u32 {
    let mut a = [[0u32; 5]; 5];
    let mut b = [[0u32; 5]; 5];
    for i in 0..5 {
        for j in 0..5 {
            a[i][j] = seed.wrapping_mul(i as u32 + 1) ^ j as u32;
            b[i][j] = seed.wrapping_add(j as u32 * 7) ^ i as u32;
        }
    }
    let (a, b) = (black_box(a), black_box(b));
    let mut sum = 0u32;
    for _ in 0..4 {
        for i in 0..5 {
            for j in 0..5 {
                let mut x = 0u32;
                for k in 0..5 {
                    x = x.wrapping_add(a[i][k].wrapping_mul(b[k][j]));
                }
                sum = sum.wrapping_add(x);
            }
        }
    }
    sum
}

#[unsafe(no_mangle)]
#[inline(never)]
fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n % d == 0 {
            return false;
        }
        d += 1;
    }
    true
}

#[unsafe(no_mangle)]
#[inline(never)]
extern "C" fn primes_below(n: u32) -> u32 {
    (0..n).filter(|&k| is_prime(black_box(k))).count() as u32
}

#[unsafe(no_mangle)]
#[inline(never)]
fn clear(buf: &mut [u8]) {
    // A call to `memset` (compiler-builtins), through the slice's fill.
    buf.fill(black_box(0));
}

/// The buffer `clear` clears (in .bss: the whole stack stays under 140 words).
static mut BUF: [u8; 4096] = [0; 4096];

/// The Rust entry, called by `_start`.
#[unsafe(no_mangle)]
pub extern "C" fn kernel_main() -> ! {
    #[cfg(feature = "sample")]
    sampler_rt::start();
    let mut acc = 0u32;
    for round in 0..400u32 {
        acc = acc.wrapping_add(matmul(black_box(round)));
        // Through `count_primes`, the start-up file's own routine.
        // SAFETY: an assembly routine that takes and returns a `u32` as the C ABI does.
        acc = acc.wrapping_add(unsafe { count_primes(black_box(600)) });
        // SAFETY: the only reference to BUF, for the length of the call.
        clear(black_box(unsafe { &mut *core::ptr::addr_of_mut!(BUF) }));
    }
    black_box(acc);
    #[cfg(feature = "sample")]
    sampler_rt::exit(0);
    #[cfg(not(feature = "sample"))]
    semihosting_exit()
}

/// `SYS_EXIT` with `ADP_Stopped_ApplicationExit` (AArch64 semihosting: a parameter block).
#[cfg(not(feature = "sample"))]
fn semihosting_exit() -> ! {
    let block = [0x20026u64, 0];
    // SAFETY: the semihosting call the host enabled; the block lives until the call returns.
    unsafe {
        core::arch::asm!("hlt #0xf000", in("w0") 0x18u32, in("x1") block.as_ptr(), options(nostack));
    }
    loop {}
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
