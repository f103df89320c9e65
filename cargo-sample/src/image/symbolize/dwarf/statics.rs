//! Statics as the source names them, from their DWARF variables.
//!
//! The symbol table names a static by what the linker was given, which under LTO can be a
//! compiler-made symbol: LLVM's global merging folds small statics into one
//! `.L_MergedGlobals.N`, whose symbol may start at the very address of a static that keeps a
//! symbol of its own, or stand alone for statics that lost theirs. The variable's DWARF entry
//! keeps its name and says where it went (`DW_OP_addr` of the merged block, then
//! `DW_OP_plus_uconst` of its offset), so a static is named by what the user wrote whatever
//! the symbol table holds.

use gimli::{AttributeValue, EndianSlice, LittleEndian};

use super::tables::R;

/// A static variable: `[start, end)` and its name (the demangled linkage name, else its
/// namespaces and name joined with `::`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Static {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// Every static variable of the image whose location is a fixed address, sorted by start.
/// Never fails: what cannot be read is left out.
pub fn statics(file: &object::File<'_>) -> Vec<Static> {
    let sections = super::load_sections(file);
    let Ok(dwarf) = gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        let d = sections.get(id.name()).map(|c| &**c).unwrap_or(&[]);
        Ok(EndianSlice::new(d, LittleEndian))
    }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        if let Ok(unit) = dwarf.unit(header) {
            read_unit(&dwarf, &unit, &mut out);
        }
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(a.end.cmp(&b.end)));
    out.dedup_by(|b, a| a.start == b.start && a.end == b.end);
    out
}

fn read_unit<'d>(dwarf: &gimli::Dwarf<R<'d>>, unit: &gimli::Unit<R<'d>>, out: &mut Vec<Static>) {
    // The namespaces around the entry being read, by depth.
    let mut path: Vec<(isize, String)> = Vec::new();
    let mut entries = unit.entries();
    while let Ok(Some(entry)) = entries.next_dfs() {
        let depth = entry.depth();
        while path.last().is_some_and(|p| p.0 >= depth) {
            path.pop();
        }
        match entry.tag() {
            gimli::DW_TAG_namespace => {
                let name = entry
                    .attr_value(gimli::DW_AT_name)
                    .and_then(|v| dwarf.attr_string(unit, v).ok())
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                path.push((depth, name));
            }
            gimli::DW_TAG_variable => {
                if let Some(s) = variable(dwarf, unit, entry, &path) {
                    out.push(s);
                }
            }
            _ => {}
        }
    }
}

fn variable<'d>(
    dwarf: &gimli::Dwarf<R<'d>>,
    unit: &gimli::Unit<R<'d>>,
    entry: &gimli::DebuggingInformationEntry<R<'d>>,
    path: &[(isize, String)],
) -> Option<Static> {
    let AttributeValue::Exprloc(expr) = entry.attr_value(gimli::DW_AT_location)? else {
        return None;
    };
    let start = address(dwarf, unit, expr.0.slice())?;
    let string = |a| {
        entry
            .attr_value(a)
            .and_then(|v| dwarf.attr_string(unit, v).ok())
            .map(|s| s.to_string_lossy().into_owned())
    };
    let name = match string(gimli::DW_AT_linkage_name) {
        Some(linkage) => super::super::demangle(&linkage),
        None => {
            let own = string(gimli::DW_AT_name)?;
            let mut parts: Vec<&str> = path.iter().map(|p| p.1.as_str()).collect();
            parts.push(&own);
            parts.join("::")
        }
    };
    let size = entry
        .attr_value(gimli::DW_AT_type)
        .and_then(|t| type_size(unit, t, 8))
        .unwrap_or(1)
        .max(1);
    Some(Static {
        start,
        end: start.saturating_add(size),
        name,
    })
}

/// The address a location expression names, when it is a fixed one: `DW_OP_addr A` or
/// `DW_OP_addrx I`, then at most a `DW_OP_plus_uconst N` (a static merged into a larger block).
fn address<'d>(dwarf: &gimli::Dwarf<R<'d>>, unit: &gimli::Unit<R<'d>>, ops: &[u8]) -> Option<u64> {
    let size = usize::from(unit.encoding().address_size);
    let (base, rest) = match ops.split_first()? {
        (&0x03, rest) if rest.len() >= size => {
            let mut a = 0u64;
            for (i, b) in rest[..size].iter().enumerate() {
                a |= u64::from(*b) << (8 * i);
            }
            (a, &rest[size..])
        }
        (&0xa1, rest) => {
            let (index, rest) = uleb(rest)?;
            let a = dwarf
                .address(unit, gimli::DebugAddrIndex(usize::try_from(index).ok()?))
                .ok()?;
            (a, rest)
        }
        _ => return None,
    };
    match rest.split_first() {
        None => Some(base),
        Some((&0x23, more)) => {
            let (n, more) = uleb(more)?;
            more.is_empty().then(|| base.wrapping_add(n))
        }
        Some(_) => None,
    }
}

fn uleb(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

/// The size of the type an attribute refers to, through typedefs and qualifiers.
fn type_size<'d>(unit: &gimli::Unit<R<'d>>, t: AttributeValue<R<'d>>, limit: u32) -> Option<u64> {
    let AttributeValue::UnitRef(offset) = t else {
        return None;
    };
    let entry = unit.entry(offset).ok()?;
    if let Some(n) = entry
        .attr_value(gimli::DW_AT_byte_size)
        .and_then(|v| v.udata_value())
    {
        return Some(n);
    }
    if limit == 0 {
        return None;
    }
    type_size(unit, entry.attr_value(gimli::DW_AT_type)?, limit - 1)
}
