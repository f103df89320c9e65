//! A firmware that moves its vector table to RAM and installs a SysTick handler of its own at
//! run time, as RTOS ports and bootloaders do: the image's table still points SysTick at the
//! sampler, the table the core uses does not. The sampler must see that and leave SysTick
//! alone (it does not start, and says why) rather than take the application's timer.
#![no_std]
#![no_main]

use core::ptr::{addr_of_mut, read_volatile, write_volatile};
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m_rt::entry;
use scenarios::{finish, hot_a, hot_b, sampling_start};

const VTOR: *mut u32 = 0xE000_ED08 as *mut u32;
/// Words of the table: 16 exceptions and mps2-an385's 32 interrupts.
const WORDS: usize = 48;

#[repr(C, align(256))]
struct Table([u32; WORDS]);

static mut RAM_TABLE: Table = Table([0; WORDS]);
static TICKS: AtomicU32 = AtomicU32::new(0);

extern "C" fn own_systick() {
    TICKS.fetch_add(1, Ordering::Relaxed);
}

#[entry]
fn main() -> ! {
    // SAFETY: the table is copied before interrupts use it; VTOR takes a 256-aligned address.
    unsafe {
        let table = addr_of_mut!(RAM_TABLE) as *mut u32;
        let flash = read_volatile(VTOR) as *const u32;
        for i in 0..WORDS {
            write_volatile(table.add(i), read_volatile(flash.add(i)));
        }
        write_volatile(table.add(15), own_systick as *const () as u32 | 1);
        write_volatile(VTOR, table as u32);
    }
    sampling_start();
    for _ in 0..2000 {
        hot_a(700);
        hot_b(300);
    }
    finish(0)
}
