//! Stack entries on ARMv8-A (`--stacks`): what the host needs to unwind the interrupted code,
//! in the STACKS entry layout of the Cortex-M runtime with 32-bit values (RAM below 4 GiB).

use core::arch::asm;
use core::ptr::{addr_of, read_volatile, write_volatile};

use super::state::*;
use crate::wire;

/// Write one STACKS entry for the sample whose ELR is `elr`; `frame` is the sampling
/// interrupt's 64-byte register frame (the interrupted x30 at +40), with the interrupted x29
/// saved just below it. Words: ELR, SPSR (the tag slot, not an exception number here), x30,
/// the interrupted SP, x29, then `valid | records << 16` (no EXC_RETURN byte), the window
/// from the SP up (never at or above the configured stack top) and the x29 chain's frame
/// records (saved x29, saved x30) beyond it.
///
/// # Safety
/// Called from the sampling interrupt's wrapper with that frame; the ring has room for one
/// entry at `wptr` (the chunk rule).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn sampler_rt_a64_stack(elr: u64, frame: *const u64) {
    let s = state();
    // SAFETY: see the contract; every read of the stack is between the interrupted SP and
    // the configured top, every write inside the ring slot.
    unsafe {
        let x30 = *frame.add(5);
        let x29 = *frame.sub(2);
        let el: u64;
        asm!("mrs {}, CurrentEL", out(reg) el, options(nomem, nostack));
        let el = (el >> 2) & 3;
        let spsr: u64;
        match el {
            1 => asm!("mrs {}, spsr_el1", out(reg) spsr, options(nomem, nostack)),
            2 => asm!("mrs {}, spsr_el2", out(reg) spsr, options(nomem, nostack)),
            _ => asm!("mrs {}, spsr_el3", out(reg) spsr, options(nomem, nostack)),
        }
        // SPSR.M[3:0] = EL << 2 | SPsel: the same level on its own SP ran on the stack the
        // interrupt's frame was pushed on; SP_EL0 otherwise (EL0, or ELx with SP0).
        let m = spsr & 0xF;
        let sp = if m == (el << 2 | 1) {
            frame as u64 + 64
        } else if m & 1 == 0 {
            let v: u64;
            asm!("mrs {}, sp_el0", out(reg) v, options(nomem, nostack));
            v
        } else {
            0
        };
        let window = (*s).window as u32;
        let records = (*s).records as u32;
        let top = *addr_of!(STACK_TOP);
        let narrow = elr >> 32 == 0 && sp >> 32 == 0 && sp != 0;
        let valid = if narrow && sp < top {
            window.min(((top - sp) / 4).min(u32::MAX as u64) as u32)
        } else {
            0
        };
        let out = (*s).wptr as *mut u32;
        *out = elr as u32;
        *out.add(1) = spsr as u32;
        *out.add(2) = x30 as u32;
        *out.add(3) = sp as u32;
        *out.add(4) = x29 as u32;
        let from = sp as *const u32;
        for i in 0..valid as usize {
            write_volatile(out.add(6 + i), read_volatile(from.add(i)));
        }
        let rec = out.add(6 + valid as usize);
        let (mut fp, mut low, mut n) = (x29, sp, 0u32);
        while narrow && n < records && fp >= low && fp & 7 == 0 && fp + 16 <= top {
            let next = read_volatile(fp as *const u64);
            let lr = read_volatile((fp + 8) as *const u64);
            write_volatile(rec.add(2 * n as usize), next as u32);
            write_volatile(rec.add(2 * n as usize + 1), lr as u32);
            n += 1;
            low = fp + 16;
            fp = next;
        }
        *out.add(5) = valid << 8 | n << 16;
        (*s).wptr = out.add(wire::stack_entry_words(window, records) as usize) as u64;
    }
}
