//! Ctrl-C: one flag every long wait checks (a QEMU run, a probe's capture, a serial port, a
//! TCP stream). The handler only sets it; each loop saves what it holds and stops.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the Ctrl-C handler; the run loop takes a snapshot and stops QEMU.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Install the Ctrl-C handler once. QEMU runs in its own process group, so the signal reaches
/// only cargo-sample, which saves what the firmware holds before it stops QEMU.
pub fn install_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::SeqCst) {
                // A second Ctrl-C: the user insists.
                std::process::exit(130);
            }
        });
    });
}
