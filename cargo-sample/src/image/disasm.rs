//! Machine code of the firmware, decoded with Capstone: for the annotated view and for the
//! diagnostics that look at the instruction before a sample (interrupts re-enabled, a sleep, a
//! store that pended an interrupt).
//!
//! Literal pools inside functions are data: the ELF's mapping symbols (`$d` data, `$t` Thumb
//! code, `$x` A64 code) say where they are, so they are shown as `.word` and never decoded.

use std::collections::HashMap;

use anyhow::{Context, Result, anyhow};
use capstone::Capstone;
use capstone::arch::BuildsCapstone;
use capstone::arch::BuildsCapstoneExtraMode;
use object::{Object, ObjectSymbol};

/// What an instruction does, as far as the profile cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `cpsid`, or a write of PRIMASK / BASEPRI / FAULTMASK that may mask.
    Mask,
    /// `cpsie`: interrupts enabled again.
    Unmask,
    /// `msr` to PRIMASK, BASEPRI, BASEPRI_MAX or FAULTMASK: masks or unmasks by its value
    /// (the end of a critical section restores PRIMASK this way).
    MaskWrite,
    /// `wfi`, `wfe`.
    Sleep,
    /// `svc`: a supervisor call.
    Svc,
    /// A store to memory (may pend an interrupt when it writes the NVIC).
    Store,
    /// A call with a known target.
    Call,
    /// A branch (conditional or not).
    Branch,
    /// Data in the code (a literal pool), or bytes that do not decode.
    Data,
    Other,
}

/// One decoded instruction (or data word).
#[derive(Debug, Clone)]
pub struct Insn {
    pub addr: u32,
    pub size: u8,
    /// Mnemonic and operands, as Capstone writes them.
    pub text: String,
    pub kind: Kind,
    /// Target of a direct call or branch.
    pub target: Option<u32>,
}

/// The image's code, decoded on demand, one function at a time.
pub struct Code {
    cs: Capstone,
    /// Allocated sections with contents: `(address, bytes)`.
    sections: Vec<(u64, Vec<u8>)>,
    /// Mapping symbols `(address, is_data)`, sorted.
    mapping: Vec<(u64, bool)>,
    cache: HashMap<(u32, u32), Vec<Insn>>,
}

impl Code {
    /// Read the code of an ELF image.
    pub fn new(elf: &[u8]) -> Result<Code> {
        let file = object::File::parse(elf).context("the firmware is not a readable ELF file")?;
        let cs = match file.architecture() {
            object::Architecture::Arm => Capstone::new()
                .arm()
                .mode(capstone::arch::arm::ArchMode::Thumb)
                .extra_mode([capstone::arch::arm::ArchExtraMode::MClass].into_iter())
                .build(),
            object::Architecture::Aarch64 => Capstone::new()
                .arm64()
                .mode(capstone::arch::arm64::ArchMode::Arm)
                .build(),
            other => return Err(anyhow!("no disassembler for {other:?}")),
        }
        .map_err(|e| anyhow!("starting the disassembler: {e}"))?;
        let mut sections = Vec::new();
        for s in object::Object::sections(&file) {
            use object::ObjectSection;
            if s.kind() == object::SectionKind::Text
                && let Ok(d) = s.data()
                && !d.is_empty()
            {
                sections.push((s.address(), d.to_vec()));
            }
        }
        // Mapping symbols of code sections only: `.debug_frame` has `$d`s too, whose values
        // are offsets in that section, not addresses.
        let in_code = |s: &object::Symbol| {
            use object::{ObjectSection, ObjectSymbol};
            s.section_index()
                .and_then(|i| file.section_by_index(i).ok())
                .is_some_and(|sec| sec.kind() == object::SectionKind::Text)
        };
        let mut mapping: Vec<(u64, bool)> = file
            .symbols()
            .filter(|s| in_code(s))
            .filter_map(|s| {
                let name = s.name().ok()?;
                match name.split('.').next()? {
                    "$d" => Some((s.address(), true)),
                    "$t" | "$x" | "$a" => Some((s.address() & !1, false)),
                    _ => None,
                }
            })
            .collect();
        mapping.sort_unstable();
        Ok(Code {
            cs,
            sections,
            mapping,
            cache: HashMap::new(),
        })
    }

    /// Thumb code at `addr` without an ELF around it (tests of what reads instructions).
    #[cfg(test)]
    pub fn thumb(addr: u32, bytes: &[u8]) -> Code {
        Code {
            cs: Capstone::new()
                .arm()
                .mode(capstone::arch::arm::ArchMode::Thumb)
                .extra_mode([capstone::arch::arm::ArchExtraMode::MClass].into_iter())
                .build()
                .expect("Capstone builds"),
            sections: vec![(u64::from(addr), bytes.to_vec())],
            mapping: Vec::new(),
            cache: HashMap::new(),
        }
    }

    fn bytes(&self, start: u64, end: u64) -> Option<&[u8]> {
        self.sections.iter().find_map(|(a, d)| {
            let lo = start.checked_sub(*a)? as usize;
            let hi = end.checked_sub(*a)? as usize;
            (hi <= d.len()).then(|| &d[lo..hi])
        })
    }

    /// Whether `addr` lies in data (after a `$d` mapping symbol).
    fn is_data(&self, addr: u64) -> bool {
        let i = self.mapping.partition_point(|m| m.0 <= addr);
        i > 0 && self.mapping[i - 1].1
    }

    /// The next mapping-symbol boundary after `addr`, capped at `end`.
    fn next_boundary(&self, addr: u64, end: u64) -> u64 {
        let i = self.mapping.partition_point(|m| m.0 <= addr);
        self.mapping.get(i).map(|m| m.0.min(end)).unwrap_or(end)
    }

    /// The instructions of a function's code, decoded once.
    pub fn of(&mut self, r: crate::image::CodeRange) -> &[Insn] {
        self.function(r.start as u32, r.end as u32)
    }

    /// The instructions of `[start, end)` (a function's range), decoded once.
    pub fn function(&mut self, start: u32, end: u32) -> &[Insn] {
        let key = (start, end);
        if !self.cache.contains_key(&key) {
            let v = self.decode(start as u64, end as u64);
            self.cache.insert(key, v);
        }
        &self.cache[&key]
    }

    /// The one instruction at `addr` (or the data word there), without knowing its function.
    pub fn one(&self, addr: u32) -> Option<Insn> {
        let a = u64::from(addr);
        // A 32-bit instruction may end where a section does: try the shorter window too.
        [4, 2].into_iter().find_map(|len| {
            self.bytes(a, a + len)?;
            self.decode(a, a + len).into_iter().find(|i| i.addr == addr)
        })
    }

    fn decode(&self, start: u64, end: u64) -> Vec<Insn> {
        let mut out = Vec::new();
        let Some(all) = self.bytes(start, end) else {
            return out;
        };
        let mut at = start;
        while at < end {
            let stop = self.next_boundary(at, end).max(at + 2);
            let chunk = &all[(at - start) as usize..(stop.min(end) - start) as usize];
            if self.is_data(at) {
                for (i, w) in chunk.chunks(4).enumerate() {
                    out.push(data_word(at + 4 * i as u64, w));
                }
                at = stop;
                continue;
            }
            let mut pos = at;
            if let Ok(insns) = self.cs.disasm_all(chunk, at) {
                for i in insns.iter() {
                    let text = match (i.mnemonic(), i.op_str()) {
                        (Some(m), Some(o)) if !o.is_empty() => format!("{m} {o}"),
                        (Some(m), _) => m.to_owned(),
                        _ => String::from("?"),
                    };
                    let (kind, target) =
                        classify(i.mnemonic().unwrap_or(""), i.op_str().unwrap_or(""));
                    out.push(Insn {
                        addr: i.address() as u32,
                        size: i.len() as u8,
                        text,
                        kind,
                        target,
                    });
                    pos = i.address() + i.len() as u64;
                }
            }
            if pos < stop.min(end) {
                // Capstone stopped at bytes that are no instruction: show a halfword, go on.
                let off = (pos - start) as usize;
                out.push(data_word(pos, &all[off..(off + 2).min(all.len())]));
                pos += 2;
            }
            at = pos;
        }
        out
    }
}

fn data_word(addr: u64, bytes: &[u8]) -> Insn {
    let mut v = 0u32;
    for (k, b) in bytes.iter().enumerate() {
        v |= (*b as u32) << (8 * k);
    }
    Insn {
        addr: addr as u32,
        size: bytes.len() as u8,
        text: if bytes.len() == 4 {
            format!(".word {v:#010x}")
        } else {
            format!(".short {v:#06x}")
        },
        kind: Kind::Data,
        target: None,
    }
}

/// What kind of instruction a mnemonic and its operands are.
pub fn classify(mnemonic: &str, ops: &str) -> (Kind, Option<u32>) {
    let m = mnemonic.trim_end_matches(".w").trim_end_matches(".n");
    let target = || {
        let t = ops.rsplit(',').next()?.trim().trim_start_matches('#');
        let t = t.strip_prefix("0x")?;
        u32::from_str_radix(t, 16).ok()
    };
    let kind = match m {
        "cpsid" => Kind::Mask,
        "cpsie" => Kind::Unmask,
        "msr" => {
            let reg = ops
                .split(',')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            match reg.as_str() {
                "primask" | "basepri" | "basepri_max" | "faultmask" | "daif" => Kind::MaskWrite,
                // ARMv8-A: setting and clearing DAIF's bits (IRQ is bit 1 of the immediate).
                "daifset" => Kind::Mask,
                "daifclr" => Kind::Unmask,
                _ => Kind::Other,
            }
        }
        "wfi" | "wfe" => Kind::Sleep,
        "svc" => Kind::Svc,
        "bl" | "blx" => {
            return match target() {
                Some(t) => (Kind::Call, Some(t)),
                None => (Kind::Other, None),
            };
        }
        "b" | "cbz" | "cbnz" | "tbz" | "tbnz" => return (Kind::Branch, target()),
        // ARMv8-A conditional branches: `b.ne`.
        _ if m.starts_with("b.") => return (Kind::Branch, target()),
        _ if m.starts_with('b')
            && m.len() == 3
            && [
                "eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt",
                "gt", "le",
            ]
            .contains(&&m[1..]) =>
        {
            return (Kind::Branch, target());
        }
        // str/strb/strd/stm (Thumb); str/stp/stur/stlr/stxr/st1 (A64).
        _ if m.starts_with("st") || m == "push" => Kind::Store,
        _ => Kind::Other,
    };
    (kind, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_what_the_diagnostics_need() {
        assert_eq!(classify("cpsie", "i").0, Kind::Unmask);
        assert_eq!(classify("cpsid", "i").0, Kind::Mask);
        assert_eq!(classify("msr", "primask, r0").0, Kind::MaskWrite);
        assert_eq!(classify("msr", "basepri_max, r1").0, Kind::MaskWrite);
        assert_eq!(classify("msr", "psp, r0").0, Kind::Other);
        assert_eq!(classify("wfi", "").0, Kind::Sleep);
        assert_eq!(classify("bl", "#0x1234"), (Kind::Call, Some(0x1234)));
        assert_eq!(classify("bne", "#0x40"), (Kind::Branch, Some(0x40)));
        assert_eq!(classify("cbz", "r0, #0x80"), (Kind::Branch, Some(0x80)));
        assert_eq!(classify("str.w", "r0, [r1, #4]").0, Kind::Store);
        assert_eq!(classify("bx", "lr").0, Kind::Other);
        assert_eq!(classify("bic", "r0, r1").0, Kind::Other);
        // ARMv8-A (Capstone's spelling).
        assert_eq!(
            classify("b.ne", "#0x40080090"),
            (Kind::Branch, Some(0x4008_0090))
        );
        assert_eq!(classify("tbnz", "w0, #3, #0x400800a0").1, Some(0x4008_00a0));
        assert_eq!(classify("cbz", "x1, #0x40080010").0, Kind::Branch);
        assert_eq!(classify("msr", "daifclr, #2").0, Kind::Unmask);
        assert_eq!(classify("msr", "daifset, #2").0, Kind::Mask);
        assert_eq!(classify("msr", "daif, x0").0, Kind::MaskWrite);
        assert_eq!(classify("msr", "cntv_tval_el0, x0").0, Kind::Other);
        for st in ["stp", "stur", "stlr", "strb"] {
            assert_eq!(classify(st, "x0, [x1]").0, Kind::Store, "{st}");
        }
        assert_eq!(classify("ret", "").0, Kind::Other);
    }

    #[test]
    fn decodes_the_fixture_and_keeps_literal_pools_as_data() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let elf = std::fs::read(path).unwrap();
        let mut code = Code::new(&elf).unwrap();
        // hot_a spans 0xfee..0xffc in the fixture: a loop of nop, subs, bne after a test.
        let insns = code.function(0xfee, 0xffc).to_vec();
        assert!(insns.iter().any(|i| i.text.starts_with("nop")), "{insns:?}");
        assert!(insns.iter().any(|i| i.kind == Kind::Branch));
        let sum: u32 = insns.iter().map(|i| i.size as u32).sum();
        assert_eq!(sum, 0xffc - 0xfee, "every byte covered exactly once");
        for w in insns.windows(2) {
            assert_eq!(w[0].addr + w[0].size as u32, w[1].addr);
        }
    }
}
