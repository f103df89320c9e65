//! What the reader keeps of the DWARF: function symbols, functions with their inline frames,
//! line sequences, per unit; and the test of a tombstone address.

use gimli::{EndianSlice, LittleEndian};

pub(crate) type R<'a> = EndianSlice<'a, LittleEndian>;

/// A function symbol of the ELF: `[start, end)` and its raw (mangled) name.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub start: u64,
    pub end: u64,
    pub raw_name: String,
}

/// One frame found for an address, before demangling and path shortening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// The linkage name (or the plain name), as DWARF spells it; `None` when it has neither.
    pub name: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// How much of the DWARF described code that is not in the image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Discarded {
    /// Subprograms whose ranges lie outside every function symbol.
    pub functions: usize,
    /// Line sequences that start outside every function symbol.
    pub sequences: usize,
    /// Units that could not be read.
    pub bad_units: usize,
}

#[derive(Debug)]
pub(crate) struct Inlined {
    pub(crate) begin: u64,
    pub(crate) end: u64,
    /// 0 for a subroutine inlined directly into the function.
    pub(crate) depth: u32,
    pub(crate) name: u32,
    pub(crate) call_file: u64,
    pub(crate) call_line: u32,
}

#[derive(Debug)]
pub(crate) struct Function {
    pub(crate) name: u32,
    pub(crate) unit: u32,
    /// Its live address ranges.
    pub(crate) ranges: Vec<(u64, u64)>,
    /// Sorted by depth, then by `begin` (the order the lookup walks them in).
    pub(crate) inlined: Vec<Inlined>,
}

#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) address: u64,
    pub(crate) file: u64,
    pub(crate) line: u32,
}

#[derive(Debug)]
pub(crate) struct Sequence {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) rows: Vec<Row>,
}

#[derive(Debug, Default)]
pub(crate) struct Unit {
    pub(crate) files: Vec<String>,
    /// Live sequences, sorted by start.
    pub(crate) sequences: Vec<Sequence>,
}

/// The tombstone addresses linkers write for discarded code (lld: 0, 1 in `.debug_ranges`,
/// and -1 / -2 of the address size).
pub(crate) fn is_tombstone(addr: u64, address_size: u8) -> bool {
    let max = if address_size == 4 {
        u32::MAX as u64
    } else {
        u64::MAX
    };
    addr <= 1 || addr >= max - 1
}

/// Function symbols sorted by start, for "is there code here".
pub(crate) struct Code<'a> {
    pub(crate) symbols: &'a [Symbol],
    /// Executable section ranges, for images without a symbol table.
    pub(crate) sections: Vec<(u64, u64)>,
}

impl Code<'_> {
    pub(crate) fn symbol_at(&self, addr: u64) -> Option<&Symbol> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (addr < s.end).then_some(s)
    }

    /// Whether `[begin, end)` is code of the image (of the function `name` when given).
    pub(crate) fn is_live(
        &self,
        begin: u64,
        end: u64,
        name: Option<&str>,
        address_size: u8,
    ) -> bool {
        if begin >= end {
            return false;
        }
        if self.symbols.is_empty() {
            return !is_tombstone(begin, address_size)
                && self.sections.iter().any(|&(a, b)| a <= begin && end <= b);
        }
        let Some(s) = self.symbol_at(begin) else {
            return false;
        };
        if end > s.end {
            return false;
        }
        if is_tombstone(begin, address_size) {
            // Code really at a tombstone address: only the function that starts there, by name.
            return begin == s.start && name.is_none_or(|n| n == s.raw_name);
        }
        true
    }
}

impl Unit {
    pub(crate) fn location(&self, pc: u64) -> (Option<&str>, Option<u32>) {
        let i = self.sequences.partition_point(|s| s.start <= pc);
        let Some(seq) = i.checked_sub(1).map(|j| &self.sequences[j]) else {
            return (None, None);
        };
        if pc >= seq.end {
            return (None, None);
        }
        let r = seq.rows.partition_point(|r| r.address <= pc);
        let Some(row) = r.checked_sub(1).map(|j| &seq.rows[j]) else {
            return (None, None);
        };
        if row.line == 0 {
            return (self.files.get(row.file as usize).map(String::as_str), None);
        }
        (
            self.files.get(row.file as usize).map(String::as_str),
            Some(row.line),
        )
    }
}

/// The live debug information of one image.
#[derive(Debug, Default)]
pub struct DebugInfo {
    pub(crate) names: Vec<Option<String>>,
    pub(crate) units: Vec<Unit>,
    pub(crate) functions: Vec<Function>,
    /// `(begin, end, function)`, sorted by begin.
    pub(crate) index: Vec<(u64, u64, u32)>,
    pub(crate) discarded: Discarded,
}
