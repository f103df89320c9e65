//! AArch64 semihosting (`hlt #0xf000`, operation in w0, parameter block in x1): the file
//! operations the dump is written with, and the program's end.

use core::arch::asm;

pub(crate) const SYS_OPEN: u64 = 0x01;
pub(crate) const SYS_CLOSE: u64 = 0x02;
pub(crate) const SYS_WRITE: u64 = 0x05;
const SYS_EXIT: u64 = 0x18;
const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x20026;

/// An AArch64 semihosting call.
pub(crate) fn semihost(op: u64, block: *const u64) -> i64 {
    let r: i64;
    // SAFETY: the semihosting call reads the block the caller built.
    unsafe {
        asm!("hlt #0xf000", inout("x0") op as i64 => r, in("x1") block, options(nostack));
    }
    r
}

/// End the program through semihosting with `code` (QEMU exits with it).
pub(crate) fn exit(code: i32) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT, code as u64];
    semihost(SYS_EXIT, block.as_ptr());
    loop {
        // SAFETY: waiting has no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}
