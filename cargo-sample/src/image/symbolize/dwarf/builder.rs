//! One compilation unit's DIEs walked into functions and inline frames, with ranges of discarded
//! code left out.

use std::collections::HashMap;

use super::tables::{Code, DebugInfo, Function, Inlined, R, Row, Sequence, Unit};
use gimli::{AttributeValue, UnitOffset};

pub(crate) struct Builder<'a, 'd> {
    pub(crate) dwarf: &'a gimli::Dwarf<R<'d>>,
    pub(crate) code: &'a Code<'a>,
    /// Every readable unit, in `.debug_info` order.
    pub(crate) units: Vec<gimli::Unit<R<'d>>>,
    /// Interned names by `.debug_info` offset of the entry they were read from.
    pub(crate) names: HashMap<usize, u32>,
    pub(crate) out: DebugInfo,
}

/// What encloses the entry being read.
#[derive(Clone, Copy)]
pub(crate) enum Scope {
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
    pub(crate) fn unit(&mut self, index: usize) -> gimli::Result<()> {
        let units = std::mem::take(&mut self.units);
        let r = self.unit_of(&units, index);
        self.units = units;
        r
    }

    pub(crate) fn unit_of(
        &mut self,
        units: &[gimli::Unit<R<'d>>],
        index: usize,
    ) -> gimli::Result<()> {
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
    pub(crate) fn within(&self, f: u32, begin: u64, end: u64) -> bool {
        self.out.functions[f as usize]
            .ranges
            .iter()
            .any(|r| r.0 <= begin && end <= r.1)
    }

    pub(crate) fn intern_none(&mut self) -> u32 {
        self.out.names.push(None);
        (self.out.names.len() - 1) as u32
    }

    pub(crate) fn ranges(
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
    pub(crate) fn name_of(
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

    pub(crate) fn name_via(
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

    pub(crate) fn string(
        &self,
        unit: &gimli::Unit<R<'d>>,
        value: AttributeValue<R<'d>>,
    ) -> Option<String> {
        let s = self.dwarf.attr_string(unit, value).ok()?;
        Some(s.to_string_lossy().into_owned())
    }

    /// The unit's file table and its live line sequences.
    pub(crate) fn lines(&mut self, unit: &gimli::Unit<R<'d>>, address_size: u8) -> Option<Unit> {
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

    pub(crate) fn file_path(
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
pub(crate) fn push_path(path: &mut String, p: &str) {
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
