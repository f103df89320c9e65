//! The end of a run read by a host (`SINK_HOST`): the firmware waits for the host to take the
//! last samples, as long as the host shows signs of life.

use core::ptr::read_volatile;

/// How long the firmware waits after the host's last sign of life: about 2^24 turns of a
/// short loop (a fraction of a second at tens of MHz, and in QEMU), far longer than a host's
/// poll, short enough not to hang a board whose host went away.
pub(crate) const HOST_WAIT_TURNS: u32 = 1 << 24;

/// Spin while `held()` (the host has not released the sink yet) and the host's beat byte keeps
/// changing: every change starts the wait again, so a slow host is waited for and a gone one
/// is not.
///
/// # Safety
/// `beat` is a byte the host writes through the debug port.
pub(crate) unsafe fn wait_while_host_reads(held: impl Fn() -> bool, beat: *const u8) {
    // SAFETY: see the contract; the byte is read as volatile, nothing is written.
    unsafe {
        let mut seen = read_volatile(beat);
        let mut turns = 0u32;
        while held() && turns < HOST_WAIT_TURNS {
            let now = read_volatile(beat);
            if now != seen {
                seen = now;
                turns = 0;
            } else {
                turns += 1;
            }
        }
    }
}
