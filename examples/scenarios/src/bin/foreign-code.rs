//! Code the ELF does not describe: a copy of `hot_c`'s machine code in RAM, called a third of
//! the time. Samples there fall outside every function of the image, as they would in code a
//! bootloader left behind or code loaded at run time.
#![no_std]
#![no_main]

use core::ptr::{addr_of_mut, read_volatile, write_volatile};

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_c, sampling_start};

/// Room for the copy (hot_c is a dozen bytes of position-independent code).
static mut RAM_CODE: [u16; 32] = [0; 32];

#[entry]
fn main() -> ! {
    let src = (hot_c as *const () as usize & !1) as *const u16;
    // SAFETY: copying 64 bytes of code from flash into a RAM buffer of that size.
    let run_from_ram: extern "Rust" fn(u32) = unsafe {
        let dst = addr_of_mut!(RAM_CODE) as *mut u16;
        for i in 0..32 {
            write_volatile(dst.add(i), read_volatile(src.add(i)));
        }
        core::arch::asm!("dsb", "isb", options(nostack));
        core::mem::transmute::<usize, extern "Rust" fn(u32)>(dst as usize | 1)
    };
    sampling_start();
    for _ in 0..2_000_000u32 {
        hot_a(700);
        run_from_ram(350);
    }
    finish(0)
}
