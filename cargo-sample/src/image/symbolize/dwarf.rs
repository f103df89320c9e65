//! DWARF read once, keeping only the debug information of code that is in the image.
//!
//! A linker that discards a function (`--gc-sections`, or LTO) keeps its debug information and
//! resolves its addresses to a tombstone: 0 in `.debug_info` and `.debug_line` (1 in
//! `.debug_ranges`) with lld, so a dead function "covers" `0..size`, and thousands of inlined
//! subroutines and line sequences start at 0. On parts whose code sits near address 0 (most
//! Cortex-M flash, the mps2 and lm3s6965evb machines) those ranges overlap live code, and a
//! lookup that trusts every range picks dead frames and lines. This reader keeps a
//! subprogram, its inlined subroutines and a line sequence only when the ELF's own symbol
//! table says there is code there: the range must start inside a function symbol and end
//! within it (and, at a tombstone address, start exactly at the symbol and carry its name).
//!
//! The index is built eagerly, once per image, and never panics on malformed input: a unit that
//! cannot be read is skipped and counted.

use std::borrow::Cow;
use std::collections::HashMap;

use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset};
use object::{Object, ObjectSection};

type R<'a> = EndianSlice<'a, LittleEndian>;

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
struct Inlined {
    begin: u64,
    end: u64,
    /// 0 for a subroutine inlined directly into the function.
    depth: u32,
    name: u32,
    call_file: u64,
    call_line: u32,
}

#[derive(Debug)]
struct Function {
    name: u32,
    unit: u32,
    /// Its live address ranges.
    ranges: Vec<(u64, u64)>,
    /// Sorted by depth, then by `begin` (the order the lookup walks them in).
    inlined: Vec<Inlined>,
}

#[derive(Debug)]
struct Row {
    address: u64,
    file: u64,
    line: u32,
}

#[derive(Debug)]
struct Sequence {
    start: u64,
    end: u64,
    rows: Vec<Row>,
}

#[derive(Debug, Default)]
struct Unit {
    files: Vec<String>,
    /// Live sequences, sorted by start.
    sequences: Vec<Sequence>,
}

/// The live debug information of one image.
#[derive(Debug, Default)]
pub struct DebugInfo {
    names: Vec<Option<String>>,
    units: Vec<Unit>,
    functions: Vec<Function>,
    /// `(begin, end, function)`, sorted by begin.
    index: Vec<(u64, u64, u32)>,
    discarded: Discarded,
}

/// The tombstone addresses linkers write for discarded code (lld: 0, 1 in `.debug_ranges`,
/// and -1 / -2 of the address size).
fn is_tombstone(addr: u64, address_size: u8) -> bool {
    let max = if address_size == 4 {
        u32::MAX as u64
    } else {
        u64::MAX
    };
    addr <= 1 || addr >= max - 1
}

/// Function symbols sorted by start, for "is there code here".
struct Code<'a> {
    symbols: &'a [Symbol],
    /// Executable section ranges, for images without a symbol table.
    sections: Vec<(u64, u64)>,
}

impl Code<'_> {
    fn symbol_at(&self, addr: u64) -> Option<&Symbol> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (addr < s.end).then_some(s)
    }

    /// Whether `[begin, end)` is code of the image (of the function `name` when given).
    fn is_live(&self, begin: u64, end: u64, name: Option<&str>, address_size: u8) -> bool {
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

fn load_sections<'d>(file: &object::File<'d>) -> HashMap<&'static str, Cow<'d, [u8]>> {
    let mut m = HashMap::new();
    for id in [
        gimli::SectionId::DebugAbbrev,
        gimli::SectionId::DebugAddr,
        gimli::SectionId::DebugInfo,
        gimli::SectionId::DebugLine,
        gimli::SectionId::DebugLineStr,
        gimli::SectionId::DebugRanges,
        gimli::SectionId::DebugRngLists,
        gimli::SectionId::DebugStr,
        gimli::SectionId::DebugStrOffsets,
    ] {
        if let Some(s) = file.section_by_name(id.name())
            && let Ok(d) = s.uncompressed_data()
        {
            m.insert(id.name(), d);
        }
    }
    m
}

impl DebugInfo {
    /// Read the DWARF of `file`. `symbols` are the image's function symbols, sorted by start.
    pub fn new(file: &object::File<'_>, symbols: &[Symbol]) -> DebugInfo {
        let sections = load_sections(file);
        let dwarf = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
            let d = sections.get(id.name()).map(|c| &**c).unwrap_or(&[]);
            Ok(EndianSlice::new(d, LittleEndian))
        });
        let Ok(dwarf) = dwarf else {
            return DebugInfo::default();
        };
        let code = Code {
            symbols,
            sections: file
                .sections()
                .filter(|s| s.kind() == object::SectionKind::Text)
                .map(|s| (s.address(), s.address().saturating_add(s.size())))
                .collect(),
        };
        let mut b = Builder {
            dwarf: &dwarf,
            code: &code,
            units: Vec::new(),
            names: HashMap::new(),
            out: DebugInfo::default(),
        };
        let mut iter = dwarf.units();
        loop {
            match iter.next() {
                Ok(Some(h)) => match dwarf.unit(h) {
                    Ok(u) => b.units.push(u),
                    Err(_) => b.out.discarded.bad_units += 1,
                },
                Ok(None) => break,
                Err(_) => {
                    b.out.discarded.bad_units += 1;
                    break;
                }
            }
        }
        for i in 0..b.units.len() {
            if b.unit(i).is_err() {
                b.out.discarded.bad_units += 1;
            }
        }
        let mut out = b.out;
        out.index.sort_unstable();
        for f in &mut out.functions {
            f.inlined.sort_by_key(|x| (x.depth, x.begin));
        }
        out
    }

    /// Whether any live debug information was found.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty() && self.units.iter().all(|u| u.sequences.is_empty())
    }

    /// What was left out as discarded code.
    pub fn discarded(&self) -> Discarded {
        self.discarded
    }

    /// The start of the live subprogram range containing `pc`, if any.
    fn function_at(&self, pc: u64) -> Option<(u64, &Function)> {
        let i = self.index.partition_point(|r| r.0 <= pc);
        let &(begin, end, f) = self.index.get(i.checked_sub(1)?)?;
        (pc < end).then(|| (begin, &self.functions[f as usize]))
    }

    /// The frames of `pc`, innermost first, for code of the function symbol `[start, end)`.
    /// Empty when no live debug information describes that address.
    pub fn frames(&self, pc: u64, start: u64, end: u64) -> Vec<RawFrame> {
        let Some((begin, f)) = self.function_at(pc) else {
            return Vec::new();
        };
        // The subprogram must be the one the symbol holds, not a neighbour's stray range.
        if !(start <= begin && begin < end) {
            return Vec::new();
        }
        let unit = &self.units[f.unit as usize];
        let location = unit.location(pc);
        // Inlined subroutines containing pc, outermost first.
        let mut chain: Vec<&Inlined> = Vec::new();
        let mut rest = &f.inlined[..];
        loop {
            let depth = chain.len() as u32;
            let found = rest.binary_search_by(|x| {
                x.depth.cmp(&depth).then(if x.begin > pc {
                    std::cmp::Ordering::Greater
                } else if x.end <= pc {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Equal
                })
            });
            match found {
                Ok(i) => {
                    chain.push(&rest[i]);
                    rest = &rest[i + 1..];
                }
                Err(_) => break,
            }
        }
        let mut frames = Vec::with_capacity(chain.len() + 1);
        let (mut file, mut line) = location;
        for x in chain.iter().rev() {
            frames.push(RawFrame {
                name: self.names[x.name as usize].clone(),
                file: file.map(str::to_owned),
                line,
            });
            file = unit.files.get(x.call_file as usize).map(String::as_str);
            line = (x.call_line != 0).then_some(x.call_line);
        }
        frames.push(RawFrame {
            name: self.names[f.name as usize].clone(),
            file: file.map(str::to_owned),
            line,
        });
        frames
    }

    /// The source location of `pc` from the live line sequences alone (code without a
    /// subprogram entry, such as assembly).
    pub fn location(&self, pc: u64) -> Option<(Option<String>, Option<u32>)> {
        self.units.iter().find_map(|u| {
            let (file, line) = u.location(pc);
            (file.is_some() || line.is_some()).then(|| (file.map(str::to_owned), line))
        })
    }
}

impl Unit {
    fn location(&self, pc: u64) -> (Option<&str>, Option<u32>) {
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

struct Builder<'a, 'd> {
    dwarf: &'a gimli::Dwarf<R<'d>>,
    code: &'a Code<'a>,
    /// Every readable unit, in `.debug_info` order.
    units: Vec<gimli::Unit<R<'d>>>,
    /// Interned names by `.debug_info` offset of the entry they were read from.
    names: HashMap<usize, u32>,
    out: DebugInfo,
}

/// What encloses the entry being read.
#[derive(Clone, Copy)]
enum Scope {
    /// A live function (its index).
    Function(u32),
    /// A function that is not in the image: its inlined subroutines are skipped.
    Dead,
    /// An inlined subroutine of the enclosing live function.
    Inlined,
    Other,
}

impl<'d> Builder<'_, 'd> {
    /// Read unit `index`: its line table becomes `out.units[index]`, its live functions join
    /// the index.
    fn unit(&mut self, index: usize) -> gimli::Result<()> {
        let units = std::mem::take(&mut self.units);
        let r = self.unit_of(&units, index);
        self.units = units;
        r
    }

    fn unit_of(&mut self, units: &[gimli::Unit<R<'d>>], index: usize) -> gimli::Result<()> {
        let unit = &units[index];
        let address_size = unit.encoding().address_size;
        let lines = self.lines(unit, address_size);
        self.out.units.push(lines.unwrap_or_default());
        let unit_no = (self.out.units.len() - 1) as u32;
        let unit_ref = unit.unit_ref(self.dwarf);
        let mut stack: Vec<(isize, Scope)> = Vec::new();
        let mut entries = unit.entries();
        while let Some(entry) = entries.next_dfs()? {
            let depth = entry.depth();
            while stack.last().is_some_and(|s| s.0 >= depth) {
                stack.pop();
            }
            let tag = entry.tag();
            let scope = match tag {
                gimli::DW_TAG_subprogram => {
                    let ranges = self.ranges(&unit_ref, entry);
                    if ranges.is_empty() {
                        Scope::Other
                    } else {
                        let raw = self.name_of(units, index, entry.offset(), 16);
                        let name_str = raw.and_then(|i| self.out.names[i as usize].clone());
                        let live: Vec<_> = ranges
                            .iter()
                            .copied()
                            .filter(|&(b, e)| {
                                self.code.is_live(b, e, name_str.as_deref(), address_size)
                            })
                            .collect();
                        if live.is_empty() {
                            self.out.discarded.functions += 1;
                            Scope::Dead
                        } else {
                            let name = raw.unwrap_or_else(|| self.intern_none());
                            let f = self.out.functions.len() as u32;
                            for &(b, e) in &live {
                                self.out.index.push((b, e, f));
                            }
                            self.out.functions.push(Function {
                                name,
                                unit: unit_no,
                                ranges: live,
                                inlined: Vec::new(),
                            });
                            Scope::Function(f)
                        }
                    }
                }
                gimli::DW_TAG_inlined_subroutine => {
                    let owner = stack.iter().rev().find_map(|s| match s.1 {
                        Scope::Function(f) => Some(Some(f)),
                        Scope::Dead => Some(None),
                        _ => None,
                    });
                    match owner {
                        Some(Some(f)) => {
                            let inline_depth = stack
                                .iter()
                                .rev()
                                .take_while(|s| !matches!(s.1, Scope::Function(_)))
                                .filter(|s| matches!(s.1, Scope::Inlined))
                                .count() as u32;
                            let mut call_file = 0;
                            let mut call_line = 0;
                            for attr in entry.attrs() {
                                match attr.name() {
                                    gimli::DW_AT_call_file => {
                                        if let Some(v) = attr.udata_value() {
                                            call_file = v;
                                        }
                                    }
                                    gimli::DW_AT_call_line => {
                                        if let Some(v) = attr.udata_value() {
                                            call_line = u32::try_from(v).unwrap_or(0);
                                        }
                                    }
                                    _ => {}
                                }
                            }
                            let name = self
                                .name_of(units, index, entry.offset(), 16)
                                .unwrap_or_else(|| self.intern_none());
                            for (begin, end) in self.ranges(&unit_ref, entry) {
                                if begin < end && self.within(f, begin, end) {
                                    self.out.functions[f as usize].inlined.push(Inlined {
                                        begin,
                                        end,
                                        depth: inline_depth,
                                        name,
                                        call_file,
                                        call_line,
                                    });
                                }
                            }
                            Scope::Inlined
                        }
                        _ => Scope::Dead,
                    }
                }
                _ => Scope::Other,
            };
            stack.push((depth, scope));
        }
        Ok(())
    }

    /// Whether `[begin, end)` lies in one of the live ranges of function `f`.
    fn within(&self, f: u32, begin: u64, end: u64) -> bool {
        self.out.functions[f as usize]
            .ranges
            .iter()
            .any(|r| r.0 <= begin && end <= r.1)
    }

    fn intern_none(&mut self) -> u32 {
        self.out.names.push(None);
        (self.out.names.len() - 1) as u32
    }

    fn ranges(
        &self,
        unit: &gimli::UnitRef<'_, R<'d>>,
        entry: &gimli::DebuggingInformationEntry<R<'d>>,
    ) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        if let Ok(mut it) = unit.die_ranges(entry) {
            // A runaway range list in a corrupt file ends at a bound, not at memory's end.
            while let Ok(Some(r)) = it.next() {
                if r.begin < r.end {
                    v.push((r.begin, r.end));
                }
                if v.len() > 1 << 16 {
                    break;
                }
            }
        }
        v
    }

    /// The name of the entry at `offset` of `unit`: its linkage name, else its name, else that of
    /// its abstract origin or specification (followed at most `limit` times).
    fn name_of(
        &mut self,
        units: &[gimli::Unit<R<'d>>],
        index: usize,
        offset: UnitOffset,
        limit: u32,
    ) -> Option<u32> {
        let unit = &units[index];
        let global = offset.to_debug_info_offset(&unit.header)?.0;
        if let Some(&n) = self.names.get(&global) {
            return Some(n);
        }
        if limit == 0 {
            return None;
        }
        let entry = unit.entry(offset).ok()?;
        let mut name = None;
        let mut next = None;
        for attr in entry.attrs() {
            match attr.name() {
                gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                    if let Some(s) = self.string(unit, attr.value()) {
                        name = Some(s);
                        next = None;
                        break;
                    }
                }
                gimli::DW_AT_name if name.is_none() => {
                    name = self.string(unit, attr.value());
                }
                gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => {
                    next = Some(attr.value());
                }
                _ => {}
            }
        }
        let index = match (name, next) {
            (Some(s), _) => {
                self.out.names.push(Some(s));
                (self.out.names.len() - 1) as u32
            }
            (None, Some(v)) => self.name_via(units, index, v, limit - 1)?,
            (None, None) => return None,
        };
        self.names.insert(global, index);
        Some(index)
    }

    fn name_via(
        &mut self,
        units: &[gimli::Unit<R<'d>>],
        index: usize,
        value: AttributeValue<R<'d>>,
        limit: u32,
    ) -> Option<u32> {
        match value {
            AttributeValue::UnitRef(o) => self.name_of(units, index, o, limit),
            AttributeValue::DebugInfoRef(o) => {
                // The unit that holds `o` (units are in offset order).
                let i = units.partition_point(|u| u.header.offset().0 <= o.0);
                let other = i.checked_sub(1)?;
                let uo = o.to_unit_offset(&units[other].header)?;
                self.name_of(units, other, uo, limit)
            }
            _ => None,
        }
    }

    fn string(&self, unit: &gimli::Unit<R<'d>>, value: AttributeValue<R<'d>>) -> Option<String> {
        let s = self.dwarf.attr_string(unit, value).ok()?;
        Some(s.to_string_lossy().into_owned())
    }

    /// The unit's file table and its live line sequences.
    fn lines(&mut self, unit: &gimli::Unit<R<'d>>, address_size: u8) -> Option<Unit> {
        let program = unit.line_program.clone()?;
        let mut rows = program.rows();
        let mut sequences = Vec::new();
        let mut current: Vec<Row> = Vec::new();
        while let Ok(Some((_, row))) = rows.next_row() {
            if row.end_sequence() {
                if let Some(start) = current.first().map(|r| r.address) {
                    let end = row.address();
                    let rows = std::mem::take(&mut current);
                    if self.code.is_live(start, end, None, address_size) {
                        sequences.push(Sequence { start, end, rows });
                    } else if start < end {
                        self.out.discarded.sequences += 1;
                    }
                }
                continue;
            }
            let address = row.address();
            let line = row
                .line()
                .map_or(0, |l| u32::try_from(l.get()).unwrap_or(0));
            let file = row.file_index();
            match current.last_mut() {
                // Several rows at one address: the last one describes it.
                Some(last) if last.address == address => {
                    last.file = file;
                    last.line = line;
                }
                _ => current.push(Row {
                    address,
                    file,
                    line,
                }),
            }
        }
        sequences.sort_by_key(|s| s.start);
        let header = rows.header();
        // File 0 is the unit's own file (DWARF 5), or the compilation file gimli makes up for
        // DWARF 4 (where the table numbers from 1).
        let mut files = vec![
            header
                .file(0)
                .and_then(|f| self.file_path(unit, header, f))
                .unwrap_or_default(),
        ];
        let mut i = 1;
        while let Some(f) = header.file(i) {
            files.push(self.file_path(unit, header, f).unwrap_or_default());
            i += 1;
            if i > 1 << 20 {
                break;
            }
        }
        Some(Unit { files, sequences })
    }

    fn file_path(
        &self,
        unit: &gimli::Unit<R<'d>>,
        header: &gimli::LineProgramHeader<R<'d>>,
        file: &gimli::FileEntry<R<'d>>,
    ) -> Option<String> {
        let mut path = match &unit.comp_dir {
            Some(d) => d.to_string_lossy().into_owned(),
            None => String::new(),
        };
        if file.directory_index() != 0
            && let Some(dir) = file.directory(header)
        {
            push_path(&mut path, &self.string(unit, dir)?);
        }
        push_path(&mut path, &self.string(unit, file.path_name())?);
        Some(path)
    }
}

/// Append `p` to `path`, or replace it when `p` is absolute (Unix or Windows).
fn push_path(path: &mut String, p: &str) {
    let absolute = |s: &str| {
        s.starts_with('/') || s.starts_with('\\') || matches!(s.get(1..3), Some(":/" | ":\\"))
    };
    if absolute(p) {
        *path = p.to_owned();
        return;
    }
    let sep = if path.starts_with('\\') || path.get(1..3) == Some(":\\") {
        '\\'
    } else {
        '/'
    };
    if !path.is_empty() && !path.ends_with(sep) {
        path.push(sep);
    }
    path.push_str(p);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_of_both_address_sizes() {
        for a in [0, 1, 0xFFFF_FFFE, 0xFFFF_FFFF] {
            assert!(is_tombstone(a, 4), "{a:#x}");
        }
        assert!(!is_tombstone(0x100, 4));
        assert!(!is_tombstone(0xFFFF_FFFF, 8));
        assert!(is_tombstone(u64::MAX, 8));
    }

    #[test]
    fn liveness_follows_the_symbols() {
        let symbols = vec![
            Symbol {
                start: 0x100,
                end: 0x140,
                raw_name: "a".into(),
            },
            Symbol {
                start: 0x140,
                end: 0x200,
                raw_name: "b".into(),
            },
        ];
        let code = Code {
            symbols: &symbols,
            sections: vec![],
        };
        assert!(code.is_live(0x100, 0x140, Some("a"), 4));
        assert!(code.is_live(0x104, 0x120, None, 4), "a part of a");
        assert!(
            !code.is_live(0x0, 0x4fe, Some("u128_div_rem"), 4),
            "dead at 0"
        );
        assert!(
            !code.is_live(0x120, 0x180, None, 4),
            "crosses two functions"
        );
        assert!(!code.is_live(0x300, 0x310, None, 4), "after every function");
        // Code that really starts at 0: only its own function, by name.
        let at0 = vec![Symbol {
            start: 0,
            end: 0x40,
            raw_name: "reset".into(),
        }];
        let code = Code {
            symbols: &at0,
            sections: vec![],
        };
        assert!(code.is_live(0, 0x40, Some("reset"), 4));
        assert!(!code.is_live(0, 0x40, Some("__mulsf3"), 4));
        assert!(
            !code.is_live(0, 0x4fe, Some("reset"), 4),
            "larger than the symbol"
        );
        // Without symbols, the executable sections decide, and tombstones are dead.
        let code = Code {
            symbols: &[],
            sections: vec![(0x0, 0x1000)],
        };
        assert!(code.is_live(0x10, 0x20, None, 4));
        assert!(!code.is_live(0x0, 0x20, None, 4));
    }

    #[test]
    fn paths_join_like_the_compiler_wrote_them() {
        let mut p = "/work/app".to_owned();
        push_path(&mut p, "src");
        push_path(&mut p, "main.rs");
        assert_eq!(p, "/work/app/src/main.rs");
        let mut p = "/work/app".to_owned();
        push_path(&mut p, "/rustc/abc/library/core/src/cmp.rs");
        assert_eq!(p, "/rustc/abc/library/core/src/cmp.rs");
        let mut p = "C:\\app".to_owned();
        push_path(&mut p, "src");
        assert_eq!(p, "C:\\app\\src");
    }
}
