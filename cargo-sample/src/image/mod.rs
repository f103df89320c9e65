//! The firmware image: what the ELF says (checks, the run's configuration written into a copy,
//! the vector table), its code (disassembly), its symbols and debug information, and whether the
//! sampler is wired into it.

pub mod disasm;
pub mod elf;
pub mod rtic;
pub mod symbolize;
pub mod timing;
pub mod unwind;
pub mod wiring;

/// A function's code: the addresses `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CodeRange {
    pub start: u64,
    pub end: u64,
}

impl CodeRange {
    pub fn contains(&self, pc: u64) -> bool {
        self.start <= pc && pc < self.end
    }
}
