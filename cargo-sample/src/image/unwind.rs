//! Unwinding a sampled Cortex-M stack on the host by the ELF's own call-frame information
//! (`.debug_frame`, else `.eh_frame`): from the registers the sampler kept (PC, LR, SP, r7)
//! and its window of the interrupted stack, to the call sites of every caller.
//!
//! What it handles and how it ends (every sample's end is counted, never hidden):
//! - a leaf that never saved LR (the first frame's return address is the stacked LR);
//! - CFA on SP or on the frame pointer (r7, r11), restored registers followed frame by frame;
//! - exception frames: a return address that is an EXC_RETURN value continues in the code the
//!   handler interrupted (its frame read from the window, FP-extended and padded frames
//!   sized), marked as such; into the process stack it ends at the handler's root;
//! - tail calls: when the instruction before a return address is a `bl` to another function
//!   than the frame above it, that function (which branched away) is put back between them;
//! - the outermost frame: the reset handler's function, or an explicitly undefined return
//!   address;
//! - code without call-frame information (hand-written assembly): its prologue is read
//!   (pushes, stack adjustments, the frame pointer's set-up) and the frames so unwound are
//!   counted.
//!
//! A window too short ends the stack as truncated; no call-frame information, a frame pointer
//! not known, a stack that does not grow towards its base or a runaway depth as failed, with
//! the reason.

use std::collections::HashMap;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, LittleEndian, Register, RegisterRule,
    UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection, SectionKind};

/// Frames followed at most before a stack is called runaway.
pub const MAX_DEPTH: usize = 256;

/// Where a register of the caller is found, relative to the CFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    /// Not saved: the register keeps its value (also: no rule given).
    Same,
    /// Explicitly undefined (for the return address: the outermost frame).
    Undefined,
    /// Saved at CFA + offset.
    At(i32),
    /// A rule this unwinder does not evaluate (an expression, another register).
    Other,
}

/// One row of the call-frame table, reduced to what a Cortex-M stack needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    /// `None`: a CFA rule this unwinder does not evaluate.
    cfa: Option<(u16, i32)>,
    ra: Loc,
    r7: Loc,
    r11: Loc,
}

/// How an unwound stack ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    /// At the reset handler, or where the call-frame information says the stack begins.
    Complete,
    /// At the root of an interrupt handler that interrupted code on the process stack (PSP),
    /// which the sampler's window does not hold.
    HandlerRoot,
    /// The window of stack the sampler kept ended before the next return address.
    Truncated,
    /// Unwinding could not go on: the reason.
    Failed(String),
}

impl End {
    /// Whether the stack reached its root (the entry point or a handler's root).
    pub fn reached_root(&self) -> bool {
        matches!(self, End::Complete | End::HandlerRoot)
    }
}

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The sampled PC.
    Sampled,
    /// A call site (the return address less 2: inside the call instruction).
    Call,
    /// A function that tail-called the frame above it (its `bl` target).
    TailCall,
    /// The PC an exception interrupted (from an exception frame).
    Interrupted,
}

/// One frame of an unwound stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub pc: u32,
    pub kind: Kind,
}

/// An unwound stack, innermost frame first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    pub frames: Vec<Frame>,
    pub end: End,
    /// Frames without call-frame information, unwound by reading their prologue.
    pub prologue: u32,
    /// Nested exception frames that held the FPU's state (EXC_RETURN bit 4 clear).
    pub fp_frames: u32,
}

/// The registers and stack window one sample kept.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub pc: u32,
    pub lr: u32,
    pub sp: u32,
    pub r7: u32,
    pub window: &'a [u32],
    /// The r7 chain's frame records beyond the window (`(saved r7, saved LR)`, the first at
    /// `r7`): stack words the sampler read at those addresses.
    pub records: &'a [(u32, u32)],
    /// A record whose LR is an EXC_RETURN is followed in `records` by its exception frame's
    /// stacked `(LR, PC)` and `(xPSR, 0)`, the words 28, 32 and 36 bytes above the record.
    pub frames_inline: bool,
}

/// The registers a pop from the stack loads (bit n: register n), if the instruction is one:
/// POP (T1, PC allowed), POP.W (LDMIA SP!, not SP itself), LDR.W Rt, [SP], #4.
fn popped(h: u32, h2: u32) -> Option<u32> {
    if h & 0xFE00 == 0xBC00 {
        Some((h & 0xFF) | ((h >> 8) & 1) << 15)
    } else if h == 0xE8BD && h2 & 0x2000 == 0 {
        Some(h2)
    } else if h == 0xF85D && h2 & 0x0FFF == 0x0B04 {
        Some(1 << (h2 >> 12))
    } else {
        None
    }
}

/// The call-frame table and code of one ELF.
pub struct Unwinder {
    /// `(start, end, row)`, sorted by start.
    rows: Vec<(u32, u32, Row)>,
    /// Functions `(start, end)`, sorted, for tail calls and the entry.
    functions: Vec<(u32, u32)>,
    /// The reset handler's function.
    entry: Option<(u32, u32)>,
    /// Executable sections: `(address, bytes)`.
    code: Vec<(u32, Vec<u8>)>,
    /// Why the table is empty, when it is.
    pub missing: Option<String>,
    cache: HashMap<u32, Option<Row>>,
    /// AArch64 code (saved registers 8 bytes wide, A64 `bl`, no EXC_RETURN).
    a64: bool,
}

fn loc(rule: Option<RegisterRule<usize>>) -> Loc {
    match rule {
        None | Some(RegisterRule::SameValue) => Loc::Same,
        Some(RegisterRule::Undefined) => Loc::Undefined,
        Some(RegisterRule::Offset(o)) => i32::try_from(o).map(Loc::At).unwrap_or(Loc::Other),
        Some(_) => Loc::Other,
    }
}

/// AArch64's registers in the call-frame information (x29, x30, SP), kept in rows under the
/// Thumb numbers of the same roles (r7, LR, SP) so that one unwinder reads both.
fn thumb_number(a64: bool, reg: u16) -> u16 {
    match (a64, reg) {
        (true, 29) => 7,
        (true, 30) => 14,
        (true, 31) => 13,
        (true, _) => 0xFFFF,
        (false, r) => r,
    }
}

fn table<'a, S: UnwindSection<gimli::EndianSlice<'a, LittleEndian>>>(
    section: &S,
    bases: &BaseAddresses,
    out: &mut Vec<(u32, u32, Row)>,
    a64: bool,
) -> Result<(), gimli::Error> {
    let mut ctx = Box::new(UnwindContext::new());
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) = partial.parse(S::cie_from_offset) else {
            continue;
        };
        let Ok(mut rows) = fde.rows(section, bases, &mut ctx) else {
            continue;
        };
        // A damaged FDE ends its own rows, not the table.
        while let Ok(Some(row)) = rows.next_row() {
            let cfa = match row.cfa() {
                CfaRule::RegisterAndOffset { register, offset } => i32::try_from(*offset)
                    .ok()
                    .map(|o| (thumb_number(a64, register.0), o)),
                CfaRule::Expression(_) => None,
            };
            let (Ok(start), Ok(end)) = (
                u32::try_from(row.start_address()),
                u32::try_from(row.end_address()),
            ) else {
                continue;
            };
            if start < end {
                out.push((
                    start,
                    end,
                    if a64 {
                        Row {
                            cfa,
                            ra: loc(row.register(Register(30))),
                            r7: loc(row.register(Register(29))),
                            r11: Loc::Same,
                        }
                    } else {
                        Row {
                            cfa,
                            ra: loc(row.register(Register(14))),
                            r7: loc(row.register(Register(7))),
                            r11: loc(row.register(Register(11))),
                        }
                    },
                ));
            }
        }
    }
    Ok(())
}

impl Unwinder {
    /// Read the call-frame information and code of `data` (an ELF); `functions` are the
    /// function symbols' `(start, end)`, `reset` the reset vector (Thumb bit ignored).
    pub fn new(data: &[u8], functions: &[(u64, u64)], reset: Option<u32>) -> Unwinder {
        let mut rows = Vec::new();
        let mut code = Vec::new();
        let mut missing = None;
        let mut a64 = false;
        let mut entry_point = None;
        match object::File::parse(data) {
            Ok(file) => {
                a64 = file.architecture() == object::Architecture::Aarch64;
                entry_point = u32::try_from(file.entry()).ok();
                let size = if a64 { 8 } else { 4 };
                let section = |name: &str| -> Option<Vec<u8>> {
                    let d = file.section_by_name(name)?.data().ok()?;
                    (!d.is_empty()).then(|| d.to_vec())
                };
                if let Some(d) = section(".debug_frame") {
                    let mut s = DebugFrame::new(&d, LittleEndian);
                    s.set_address_size(size);
                    if let Err(e) = table(&s, &BaseAddresses::default(), &mut rows, a64) {
                        missing = Some(format!("its .debug_frame is damaged ({e})"));
                    }
                } else if let Some(d) = section(".eh_frame") {
                    let mut s = EhFrame::new(&d, LittleEndian);
                    s.set_address_size(size);
                    // Its pointers are relative to where it and the code are.
                    let at = |name: &str| file.section_by_name(name).map_or(0, |x| x.address());
                    let bases = BaseAddresses::default()
                        .set_eh_frame(at(".eh_frame"))
                        .set_eh_frame_hdr(at(".eh_frame_hdr"))
                        .set_text(at(".text"));
                    if let Err(e) = table(&s, &bases, &mut rows, a64) {
                        missing = Some(format!("its .eh_frame is damaged ({e})"));
                    }
                }
                for sec in file.sections() {
                    if sec.kind() == SectionKind::Text
                        && let (Ok(a), Ok(d)) = (u32::try_from(sec.address()), sec.data())
                    {
                        code.push((a, d.to_vec()));
                    }
                }
            }
            Err(e) => missing = Some(format!("it is not an ELF ({e})")),
        }
        if rows.is_empty() && missing.is_none() {
            missing = Some(
                "it has no call-frame information (.debug_frame or .eh_frame): build with \
                 debug information (`debug = 2` or `debug = \"line-tables-only\"` in the profile)"
                    .into(),
            );
        }
        rows.sort_by_key(|r| r.0);
        let functions: Vec<(u32, u32)> = functions
            .iter()
            .filter_map(|&(a, b)| Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?)))
            .collect();
        // ARMv8-A has no reset vector in the image: its ELF entry point stands for it.
        let entry = reset.or(entry_point.filter(|_| a64)).and_then(|r| {
            let r = r & !1;
            functions.iter().copied().find(|f| f.0 <= r && r < f.1)
        });
        Unwinder {
            rows,
            functions,
            entry,
            code,
            missing,
            cache: HashMap::new(),
            a64,
        }
    }

    fn row(&mut self, pc: u32) -> Option<Row> {
        if let Some(r) = self.cache.get(&pc) {
            return *r;
        }
        let i = self.rows.partition_point(|r| r.0 <= pc);
        let found = i
            .checked_sub(1)
            .map(|j| self.rows[j])
            .filter(|r| pc < r.1)
            .map(|r| r.2);
        self.cache.insert(pc, found);
        found
    }

    /// A row for code without call-frame information (hand-written assembly such as
    /// compiler-builtins' `__aeabi_uldivmod`), from its prologue: the pushes, stack
    /// adjustments and frame-pointer set-up between the function's start and `pc`. `None`
    /// when anything else moves the stack pointer there.
    fn prologue_row(&self, pc: u32) -> Option<Row> {
        let (start, _) = self.function(pc)?;
        let mut at = start;
        // Bytes below the CFA (the SP at entry), and where registers were saved.
        let (mut below, mut ra, mut r7, mut fp) = (0i32, Loc::Same, Loc::Same, None::<i32>);
        let push = |list: u32, below: &mut i32, ra: &mut Loc, r7: &mut Loc| {
            let n = list.count_ones() as i32;
            *below += 4 * n;
            let mut slot = -*below;
            for r in 0..16 {
                if list & (1 << r) != 0 {
                    match r {
                        14 => *ra = Loc::At(slot),
                        7 => *r7 = Loc::At(slot),
                        _ => {}
                    }
                    slot += 4;
                }
            }
        };
        for _ in 0..32 {
            if at >= pc {
                break;
            }
            let h = self.halfword(at)? as u32;
            let wide = matches!(h >> 11, 0x1D..=0x1F);
            let h2 = if wide {
                self.halfword(at + 2)? as u32
            } else {
                0
            };
            if h & 0xFE00 == 0xB400 {
                // PUSH {rlist, lr?}
                push(
                    (h & 0xFF) | ((h >> 8) & 1) << 14,
                    &mut below,
                    &mut ra,
                    &mut r7,
                );
            } else if h == 0xE92D {
                // PUSH.W {rlist}
                push(h2 & 0x5FFF, &mut below, &mut ra, &mut r7);
            } else if h == 0xF84D && h2 & 0x0FFF == 0x0D04 {
                // STR.W Rt, [SP, #-4]!
                push(1 << (h2 >> 12), &mut below, &mut ra, &mut r7);
            } else if h & 0xFF80 == 0xB080 {
                // SUB SP, SP, #imm7 * 4
                below += 4 * (h & 0x7F) as i32;
            } else if h & 0xFBFF == 0xF2AD && h2 & 0x8F00 == 0x0D00 {
                // SUBW SP, SP, #imm12
                below += (((h >> 10) & 1) << 11 | ((h2 >> 12) & 7) << 8 | (h2 & 0xFF)) as i32;
            } else if h & 0xFFBF == 0xED2D {
                // VPUSH
                below += 4 * (h2 & 0xFF) as i32;
            } else if h & 0xFF00 == 0xAF00 {
                // ADD R7, SP, #imm8 * 4: the frame pointer.
                fp = Some(below - 4 * (h & 0xFF) as i32);
            } else if h == 0x466F {
                // MOV R7, SP
                fp = Some(below);
            } else if wide {
                // Another 32-bit data-processing instruction that writes SP: not followed.
                let data = (h & 0xF800 == 0xF000 && h2 & 0x8000 == 0) || h & 0xFE00 == 0xEA00;
                if data && (h2 >> 8) & 0xF == 13 {
                    return None;
                }
            } else if h & 0xFF80 == 0xB000 {
                // ADD SP, SP, #imm7 * 4 (straight-line code: an epilogue's release).
                below -= 4 * (h & 0x7F) as i32;
                if below < 0 {
                    return None;
                }
            } else if h & 0xFF78 == 0x4468 || h & 0xFF87 == 0x4685 {
                // ADD SP, Rm / MOV SP, Rm: not followed.
                return None;
            }
            at += if wide { 4 } else { 2 };
        }
        let cfa = match fp {
            Some(off) => (7, off),
            None => (13, below),
        };
        Some(Row {
            cfa: Some(cfa),
            ra,
            r7,
            r11: Loc::Same,
        })
    }

    /// The row at `pc` when the code from there runs straight to the function's return
    /// (through pops, stack releases, register moves that leave SP, LR, r7 and r11 alone,
    /// and unconditional branches): where the return address and the saved registers are is
    /// then known from the instructions, whatever the call-frame information says. `None`
    /// when anything else comes first.
    fn epilogue_row(&self, pc: u32) -> Option<Row> {
        let (start, end) = self.function(pc)?;
        let mut at = pc;
        // Bytes popped so far above the SP at `pc`, and where the registers were found.
        let mut up = 0i32;
        let (mut lr, mut r7, mut r11) = (None::<i32>, None::<i32>, None::<i32>);
        let mut ra = None::<i32>;
        let mut returns = false;
        let pop = |list: u32,
                   up: &mut i32,
                   lr: &mut Option<i32>,
                   r7: &mut Option<i32>,
                   r11: &mut Option<i32>,
                   ra: &mut Option<i32>| {
            for r in 0..16 {
                if list & (1 << r) != 0 {
                    match r {
                        7 => *r7 = Some(*up),
                        11 => *r11 = Some(*up),
                        14 => *lr = Some(*up),
                        15 => *ra = Some(*up),
                        _ => {}
                    }
                    *up += 4;
                }
            }
        };
        for _ in 0..16 {
            if at < start || at >= end {
                return None;
            }
            let h = self.halfword(at)? as u32;
            let wide = matches!(h >> 11, 0x1D..=0x1F);
            let h2 = if wide {
                self.halfword(at + 2)? as u32
            } else {
                0
            };
            let mut next = at + if wide { 4 } else { 2 };
            if h == 0x4770 {
                // BX LR: the return address is in LR (or where LR was popped from).
                break;
            } else if let Some(list) = popped(h, h2) {
                pop(list, &mut up, &mut lr, &mut r7, &mut r11, &mut ra);
                if ra.is_some() {
                    break;
                }
            } else if h & 0xFF80 == 0xB000 {
                // ADD SP, SP, #imm7 * 4
                up += 4 * (h & 0x7F) as i32;
            } else if h & 0xFFBF == 0xECBD && h2 & 0x0E00 == 0x0A00 {
                // VPOP
                up += 4 * (h2 & 0xFF) as i32;
            } else if h & 0xFF30 == 0xED10 && h2 & 0x0E00 == 0x0A00 {
                // VLDR Sd/Dd, [Rn, #imm] (no write-back)
            } else if h & 0xFFBF == 0xEEB0 && h2 & 0x0ED0 == 0x0A40 {
                // VMOV Sd/Dd, Sm/Dm
            } else if h == 0xBF00 || h & 0xF800 == 0x2000 && (h >> 8) & 7 != 7 {
                // NOP; MOVS Rd, #imm8 (not r7).
            } else if h & 0xFF00 == 0x4600 {
                // MOV Rd, Rm: not into SP, LR, PC or a frame pointer.
                let rd = (h & 7) | ((h >> 4) & 8);
                if matches!(rd, 7 | 11 | 13 | 14 | 15) {
                    return None;
                }
            } else if h & 0xF800 == 0xE000 {
                // B (T2)
                let off = ((((h & 0x7FF) << 21) as i32) >> 20) as u32;
                next = at.wrapping_add(4).wrapping_add(off);
            } else if h & 0xF800 == 0xF000 && h2 & 0xD000 == 0x9000 {
                // B.W (T4)
                let s = (h >> 10) & 1;
                let (j1, j2) = ((h2 >> 13) & 1, (h2 >> 11) & 1);
                let (i1, i2) = (1 ^ j1 ^ s, 1 ^ j2 ^ s);
                let imm =
                    (s << 24) | (i1 << 23) | (i2 << 22) | ((h & 0x3FF) << 12) | ((h2 & 0x7FF) << 1);
                next = at
                    .wrapping_add(4)
                    .wrapping_add((((imm << 7) as i32) >> 7) as u32);
            } else {
                return None;
            }
            if next != at + if wide { 4 } else { 2 } && !(start..end).contains(&next) {
                // A branch out of the function: a tail call, which returns where LR says.
                returns = true;
                break;
            }
            at = next;
        }
        // Offsets from the SP at `pc` become offsets from the CFA (the SP after the return).
        let loc = |o: Option<i32>| o.map_or(Loc::Same, |o| Loc::At(o - up));
        let ra = match ra {
            Some(o) => Loc::At(o - up),
            None if returns || self.halfword(at) == Some(0x4770) => loc(lr),
            None => return None,
        };
        Some(Row {
            cfa: Some((13, up)),
            ra,
            r7: loc(r7),
            r11: loc(r11),
        })
    }

    fn function(&self, pc: u32) -> Option<(u32, u32)> {
        let i = self.functions.partition_point(|f| f.0 <= pc);
        let f = *self.functions.get(i.checked_sub(1)?)?;
        (pc < f.1).then_some(f)
    }

    fn halfword(&self, addr: u32) -> Option<u16> {
        self.code.iter().find_map(|(a, d)| {
            let off = addr.checked_sub(*a)? as usize;
            let b = d.get(off..off + 2)?;
            Some(u16::from_le_bytes([b[0], b[1]]))
        })
    }

    /// The target of the Thumb-2 `bl` whose 4 bytes end at `ret` (a return address), if it is
    /// one.
    pub fn bl_target(&self, ret: u32) -> Option<u32> {
        let at = ret.checked_sub(4)?;
        if self.a64 {
            // BL: 100101 imm26 (words).
            let w = self.halfword(at)? as u32 | (self.halfword(at + 2)? as u32) << 16;
            if w & 0xFC00_0000 != 0x9400_0000 {
                return None;
            }
            let off = (((w & 0x03FF_FFFF) << 6) as i32 >> 4) as u32;
            return Some(at.wrapping_add(off));
        }
        let (h1, h2) = (self.halfword(at)? as u32, self.halfword(at + 2)? as u32);
        // BL (T1): 11110 S imm10 | 11 J1 1 J2 imm11.
        if h1 & 0xF800 != 0xF000 || h2 & 0xD000 != 0xD000 {
            return None;
        }
        let s = (h1 >> 10) & 1;
        let (j1, j2) = ((h2 >> 13) & 1, (h2 >> 11) & 1);
        let (i1, i2) = (1 ^ j1 ^ s, 1 ^ j2 ^ s);
        let imm = (s << 24) | (i1 << 23) | (i2 << 22) | ((h1 & 0x3FF) << 12) | ((h2 & 0x7FF) << 1);
        // Sign-extend the 25-bit offset.
        let off = ((imm << 7) as i32) >> 7;
        Some(ret.wrapping_add(off as u32))
    }

    /// Unwind one sample.
    pub fn unwind(&mut self, c: &Context) -> Unwound {
        let base = c.sp;
        // The frame records' words, by address (the chain goes up the stack).
        let mut sparse: Vec<(u32, u32)> = Vec::with_capacity(2 * c.records.len());
        let mut at = c.r7;
        let mut pairs = c.records.iter();
        while let Some(&(next, lr)) = pairs.next() {
            sparse.push((at, next));
            sparse.push((at.wrapping_add(4), lr));
            if c.frames_inline && lr >= 0xFFFF_FF00 {
                // The exception frame starts 8 bytes above the handler's record.
                if let (Some(&(slr, spc)), Some(&(xpsr, _))) = (pairs.next(), pairs.next()) {
                    sparse.push((at.wrapping_add(28), slr));
                    sparse.push((at.wrapping_add(32), spc));
                    sparse.push((at.wrapping_add(36), xpsr));
                }
            }
            at = next;
        }
        sparse.sort_unstable_by_key(|w| w.0);
        let read = |addr: u32| -> Option<u32> {
            if !addr.is_multiple_of(4) {
                return None;
            }
            let off = addr.wrapping_sub(base);
            if addr >= base
                && let Some(&v) = c.window.get((off / 4) as usize)
            {
                return Some(v);
            }
            sparse
                .binary_search_by_key(&addr, |w| w.0)
                .ok()
                .map(|i| sparse[i].1)
        };
        // A saved register: a word, or on AArch64 a doubleword whose high half must be 0 (the
        // sampler keeps 32-bit values).
        let a64 = self.a64;
        let saved = |addr: u32| -> Option<u32> {
            let lo = read(addr)?;
            if a64 {
                (read(addr.wrapping_add(4))? == 0).then_some(lo)
            } else {
                Some(lo)
            }
        };
        let mut frames = vec![Frame {
            pc: c.pc & !1,
            kind: Kind::Sampled,
        }];
        let (mut pc, mut sp) = (c.pc & !1, c.sp);
        let mut lr = Some(c.lr);
        let (mut r7, mut r11) = (Some(c.r7), None::<u32>);
        // Whether `pc` is an address that was executing (the sampled PC, or an interrupted
        // one) rather than a return address.
        let mut exact_pc = true;
        let mut prologue = 0u32;
        let mut fp_frames = 0u32;
        let end = loop {
            if frames.len() > MAX_DEPTH {
                break End::Failed(format!("deeper than {MAX_DEPTH} frames"));
            }
            if self.entry.is_some_and(|(a, b)| a <= pc && pc < b) {
                break End::Complete;
            }
            let look = if exact_pc { pc } else { pc.wrapping_sub(2) };
            // An epilogue that has begun to pop is read from its instructions: compilers for
            // Arm describe prologues in the call-frame information, not epilogues.
            let epilogue = if exact_pc && !a64 {
                self.epilogue_row(pc)
            } else {
                None
            };
            let Some(row) = epilogue.or_else(|| self.row(look)).or_else(|| {
                let r = if a64 { None } else { self.prologue_row(look) };
                prologue += r.is_some() as u32;
                r
            }) else {
                break End::Failed(match &self.missing {
                    Some(why) => format!("the ELF cannot be unwound: {why}"),
                    None => format!("no call-frame information at {look:#010x}"),
                });
            };
            let Some((reg, off)) = row.cfa else {
                break End::Failed(format!("a CFA rule not followed at {look:#010x}"));
            };
            let base_value = match reg {
                13 => Some(sp),
                7 => r7,
                11 => r11,
                _ => None,
            };
            let Some(cfa) = base_value.map(|v| v.wrapping_add(off as u32)) else {
                break End::Failed(format!(
                    "the CFA at {look:#010x} is based on r{reg}, whose value is not known there"
                ));
            };
            // A register the window does not hold (or that an epilogue already popped, below
            // the SP) becomes unknown: that ends unwinding only if a CFA is based on it.
            let restore = |l: Loc, now: Option<u32>| -> Option<u32> {
                match l {
                    Loc::Same => now,
                    Loc::Undefined | Loc::Other => None,
                    Loc::At(o) => saved(cfa.wrapping_add(o as u32)),
                }
            };
            let ra = match row.ra {
                Loc::Undefined => break End::Complete,
                Loc::Other => {
                    break End::Failed(format!(
                        "a return-address rule not followed at {look:#010x}"
                    ));
                }
                Loc::Same => match lr {
                    Some(v) => v,
                    None => {
                        break End::Failed(format!(
                            "the return address at {look:#010x} was neither saved nor in LR"
                        ));
                    }
                },
                Loc::At(o) => match saved(cfa.wrapping_add(o as u32)) {
                    Some(v) => v,
                    None => break End::Truncated,
                },
            };
            (r7, r11) = (restore(row.r7, r7), restore(row.r11, r11));
            if ra >= 0xFFFF_FF00 && !a64 {
                // EXC_RETURN: the handler returns to the code it interrupted.
                if ra & 4 != 0 {
                    break End::HandlerRoot;
                }
                let word = |i: u32| read(cfa.wrapping_add(4 * i));
                let (Some(slr), Some(spc), Some(xpsr)) = (word(5), word(6), word(7)) else {
                    break End::Truncated;
                };
                fp_frames += u32::from(ra & 0x10 == 0);
                let mut next = cfa + if ra & 0x10 == 0 { 0x68 } else { 0x20 };
                if xpsr & (1 << 9) != 0 {
                    next += 4;
                }
                sp = next;
                pc = spc & !1;
                lr = Some(slr);
                exact_pc = true;
                frames.push(Frame {
                    pc,
                    kind: Kind::Interrupted,
                });
                continue;
            }
            // The caller's frame is above this one (a leaf's CFA may equal its SP).
            if cfa < sp {
                break End::Failed(format!(
                    "the stack does not grow towards its base at {look:#010x}"
                ));
            }
            let ret = ra & !1;
            if ret == 0 {
                break End::Complete;
            }
            if !exact_pc && cfa == sp && ret == pc {
                break End::Failed(format!("a frame returns to itself at {look:#010x}"));
            }
            // A `bl` before the return address to a function other than this frame's: that
            // function branched to this one (a tail call) and is put back.
            // (A return address may be the next function's start after a call that does not
            // return: the call is 2 bytes before it.)
            let here = self.function(look);
            if let Some(t) = self.bl_target(ret)
                && let Some(tf) = self.function(t & !1)
                && Some(tf) != here
                && t & !1 == tf.0
            {
                frames.push(Frame {
                    pc: tf.0,
                    kind: Kind::TailCall,
                });
            }
            sp = cfa;
            pc = ret;
            lr = None;
            exact_pc = false;
            frames.push(Frame {
                pc: ret.wrapping_sub(2),
                kind: Kind::Call,
            });
        };
        Unwound {
            frames,
            end,
            prologue,
            fp_frames,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bl_targets_decode_both_directions() {
        // `bl` +0x100 at 0x1000 (return address 0x1004): F000 F880.
        let mut u = Unwinder::new(&[], &[], None);
        u.code = vec![(0x1000, vec![0x00, 0xF0, 0x80, 0xF8])];
        assert_eq!(u.bl_target(0x1004), Some(0x1104));
        // `bl` -0x8 at 0x1000: F7FF FFFC (to 0x0FFC).
        u.code = vec![(0x1000, vec![0xFF, 0xF7, 0xFC, 0xFF])];
        assert_eq!(u.bl_target(0x1004), Some(0x0FFC));
        // Not a bl.
        u.code = vec![(0x1000, vec![0x00, 0xBF, 0x00, 0xBF])];
        assert_eq!(u.bl_target(0x1004), None);
        assert_eq!(u.bl_target(0x2), None);
    }

    /// Windows of garbage, cycles and runaway stacks over a real image: every stack ends,
    /// within the depth bound, with a reason.
    #[test]
    fn hostile_windows_end_within_bounds() {
        let elf = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/hot-loops.elf"
        ))
        .unwrap();
        let functions: Vec<(u64, u64)> = {
            use object::{Object, ObjectSymbol};
            let f = object::File::parse(&*elf).unwrap();
            f.symbols()
                .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
                .map(|s| (s.address() & !1, (s.address() & !1) + s.size()))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        let mut u = Unwinder::new(&elf, &functions, Some(0xC1));
        assert!(u.missing.is_none());
        let mut x = 0x1234_5678u32;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let sp = 0x2000_0000;
        for round in 0..2000 {
            let code = (0x154 + (next() % 0x540)) & !1;
            let window: Vec<u32> = (0..64)
                .map(|i| match round % 3 {
                    // Return addresses into code, frame words pointing back into the window.
                    0 => 0x155 + (next() % 0x540),
                    1 => sp + 4 * (i & !3),
                    _ => next(),
                })
                .collect();
            let r = u.unwind(&Context {
                pc: code,
                lr: next() | 1,
                sp,
                r7: sp + 4 * (next() % 64),
                window: &window,
                records: &[(sp + 0x200, 0x155), (sp + 0x100, 0x201)],
                frames_inline: round % 2 == 0,
            });
            assert!(r.frames.len() <= MAX_DEPTH + 2, "{}", r.frames.len());
            if let End::Failed(why) = &r.end {
                assert!(!why.is_empty());
            }
        }
    }

    #[test]
    fn a_prologue_stands_in_for_missing_call_frame_information() {
        // push {r4, lr}; sub sp, #16; bl ... (compiler-builtins' __aeabi_uldivmod's shape).
        let mut u = Unwinder::new(&[], &[(0x1000, 0x1014)], None);
        u.functions = vec![(0x1000, 0x1014)];
        u.code = vec![(
            0x1000,
            vec![
                0x10, 0xB5, 0x84, 0xB0, 0x00, 0xF0, 0x00, 0xF8, 0x04, 0xB0, 0x10, 0xBD,
            ],
        )];
        let row = u.prologue_row(0x1006).unwrap();
        assert_eq!(row.cfa, Some((13, 24)));
        assert_eq!(row.ra, Loc::At(-4));
        // push {r4-r7, lr}; add r7, sp, #12: the CFA on the frame pointer.
        u.code = vec![(0x1000, vec![0xF0, 0xB5, 0x03, 0xAF, 0x00, 0xBF])];
        let row = u.prologue_row(0x1004).unwrap();
        assert_eq!(row.cfa, Some((7, 8)));
        assert_eq!((row.ra, row.r7), (Loc::At(-4), Loc::At(-8)));
        // At the epilogue's `pop {r4, pc}`, after `add sp, #16`.
        u.code = vec![(
            0x1000,
            vec![
                0x10, 0xB5, 0x84, 0xB0, 0x00, 0xF0, 0x00, 0xF8, 0x04, 0xB0, 0x10, 0xBD,
            ],
        )];
        let row = u.prologue_row(0x100A).unwrap();
        assert_eq!((row.cfa, row.ra), (Some((13, 8)), Loc::At(-4)));
        // Before the push: nothing saved yet, the return address is still in LR.
        let row = u.prologue_row(0x1000).unwrap();
        assert_eq!((row.cfa, row.ra), (Some((13, 0)), Loc::Same));
    }

    #[test]
    fn a64_calls_are_decoded_for_tail_calls() {
        let mut u = Unwinder::new(&[], &[], None);
        u.a64 = true;
        // `bl +0x100` at 0x40001000 (94000040), and `bl -8` (97FFFFFE); a `nop` is no call.
        u.code = vec![(0x4000_1000, vec![0x40, 0x00, 0x00, 0x94])];
        assert_eq!(u.bl_target(0x4000_1004), Some(0x4000_1100));
        u.code = vec![(0x4000_1000, vec![0xFE, 0xFF, 0xFF, 0x97])];
        assert_eq!(u.bl_target(0x4000_1004), Some(0x4000_0FF8));
        u.code = vec![(0x4000_1000, vec![0x1F, 0x20, 0x03, 0xD5])];
        assert_eq!(u.bl_target(0x4000_1004), None);
        // The CFI's x29, x30 and SP play r7's, LR's and SP's parts.
        assert_eq!(
            (
                thumb_number(true, 29),
                thumb_number(true, 30),
                thumb_number(true, 31)
            ),
            (7, 14, 13)
        );
        assert_eq!(thumb_number(true, 7), 0xFFFF);
        assert_eq!(thumb_number(false, 7), 7);
    }

    #[test]
    fn an_epilogue_under_way_is_read_from_its_instructions() {
        // rustc's `mac` on a Cortex-M4F: the loop's `bne`, then `add sp, #4; pop.w {r7, lr};
        // b 1f; vldr s2, [pc, #8]; 1: vmov.f32 s0, s2; bx lr` (the call-frame information
        // still says "LR at CFA - 4" after the pop).
        let mut u = Unwinder::new(&[], &[], None);
        u.functions = vec![(0x6a0, 0x6bc)];
        u.code = vec![(
            0x6a8,
            vec![
                0xEE, 0xD1, 0x01, 0xB0, 0xBD, 0xE8, 0x80, 0x40, 0x01, 0xE0, 0x9F, 0xED, 0x02, 0x1A,
                0xB0, 0xEE, 0x41, 0x0A, 0x70, 0x47,
            ],
        )];
        let row = |pc| u.epilogue_row(pc).map(|r| (r.cfa, r.ra, r.r7));
        assert_eq!(row(0x6a8), None, "a conditional branch is not an epilogue");
        assert_eq!(row(0x6aa), Some((Some((13, 12)), Loc::At(-4), Loc::At(-8))));
        assert_eq!(row(0x6ac), Some((Some((13, 8)), Loc::At(-4), Loc::At(-8))));
        // After the pop: the return address is in LR, nothing is left on the stack.
        assert_eq!(row(0x6b6), Some((Some((13, 0)), Loc::Same, Loc::Same)));
        assert_eq!(row(0x6b2), Some((Some((13, 0)), Loc::Same, Loc::Same)));
        assert_eq!(row(0x6ba), Some((Some((13, 0)), Loc::Same, Loc::Same)));
        // `pop {r7}; b <another function>`: a tail call returns where LR says.
        u.functions = vec![(0x2000, 0x2008)];
        u.code = vec![(0x2000, vec![0x80, 0xBC, 0x05, 0xE0, 0x00, 0xBF, 0x00, 0xBF])];
        assert_eq!(
            u.epilogue_row(0x2000).map(|r| (r.cfa, r.ra, r.r7)),
            Some((Some((13, 4)), Loc::Same, Loc::At(-4)))
        );
        // Straight-line code that reaches the function's end without returning is not read.
        u.code = vec![(0x2000, vec![0x80, 0xBC, 0x00, 0xBF, 0x00, 0xBF, 0x00, 0xBF])];
        assert_eq!(u.epilogue_row(0x2000), None);
    }

    #[test]
    fn garbage_is_a_failure_with_a_reason_not_a_panic() {
        let mut u = Unwinder::new(b"not an elf", &[], None);
        let w = [0xFFFF_FFFFu32; 8];
        let r = u.unwind(&Context {
            pc: 0x100,
            lr: 0xFFFF_FFF9,
            sp: 0x2000_0000,
            r7: 0,
            window: &w,
            records: &[],
            frames_inline: true,
        });
        assert!(matches!(r.end, End::Failed(ref why) if why.contains("not an ELF")));
        assert_eq!(r.frames.len(), 1);
    }
}
