//! The bundled firmware built and run in QEMU (and through the serial and PMU paths), each
//! profile checked against QEMU's exact instruction counts or an independent reading of the ELF.

#[path = "../support/mod.rs"]
mod support;

mod accuracy;
mod bench;
mod bins;
mod board;
mod budget;
mod calls;
mod cycles;
mod diagnostics;
mod e2e;
mod exact;
mod faults;
mod gate;
mod guide;
mod held_off;
mod laps;
mod live;
mod pmu;
mod serial;
mod tags;
mod tasks;
