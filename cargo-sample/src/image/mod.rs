//! The firmware image: what the ELF says (checks, the run's configuration written into a copy,
//! the vector table), its code (disassembly), its symbols and debug information, and whether the
//! sampler is wired into it.

pub mod disasm;
pub mod elf;
pub mod rtic;
pub mod symbolize;
pub mod unwind;
pub mod wiring;
