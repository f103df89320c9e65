//! Where firmware runs: QEMU (with its machines and the exact instruction counter), a board
//! through a debug probe (probe-rs), or a board that sends its dump over a serial port.

pub mod exact;
pub mod machine;
pub mod probe;
pub mod qemu;
pub mod serial;
