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

use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection};

mod builder;
mod statics;
mod tables;

use builder::Builder;
pub use statics::{Static, statics};
use tables::{Code, Function, Inlined, R};
pub use tables::{DebugInfo, Discarded, RawFrame, Symbol};

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

#[cfg(test)]
mod tests {
    use super::builder::push_path;
    use super::tables::is_tombstone;
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
