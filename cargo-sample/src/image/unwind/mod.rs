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

mod code;

use std::collections::HashMap;

use crate::image::CodeRange;

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
    pub fn new(data: &[u8], functions: &[CodeRange], reset: Option<u32>) -> Unwinder {
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
            .filter_map(|r| Some((u32::try_from(r.start).ok()?, u32::try_from(r.end).ok()?)))
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

    fn function(&self, pc: u32) -> Option<(u32, u32)> {
        let i = self.functions.partition_point(|f| f.0 <= pc);
        let f = *self.functions.get(i.checked_sub(1)?)?;
        (pc < f.1).then_some(f)
    }

    /// Unwind one sample.
    pub fn unwind(&mut self, c: &Context) -> Unwound {
        let mem = Memory::of(c, self.a64);
        let mut u = Unwinding {
            frames: vec![Frame {
                pc: c.pc & !1,
                kind: Kind::Sampled,
            }],
            pc: c.pc & !1,
            sp: c.sp,
            lr: Some(c.lr),
            r7: Some(c.r7),
            r11: None,
            exact_pc: true,
            prologue: 0,
            fp_frames: 0,
        };
        let end = loop {
            if u.frames.len() > MAX_DEPTH {
                break End::Failed(format!("deeper than {MAX_DEPTH} frames"));
            }
            if self.entry.is_some_and(|(a, b)| a <= u.pc && u.pc < b) {
                break End::Complete;
            }
            if let Err(end) = self.step(&mem, &mut u) {
                break end;
            }
        };
        Unwound {
            frames: u.frames,
            end,
            prologue: u.prologue,
            fp_frames: u.fp_frames,
        }
    }

    /// The rule that gives the caller's frame at the unwinding's PC: an epilogue under way,
    /// the call-frame information, or a prologue read from the instructions.
    fn row_at(&mut self, u: &mut Unwinding, look: u32) -> Result<Row, End> {
        // An epilogue that has begun to pop is read from its instructions: compilers for Arm
        // describe prologues in the call-frame information, not epilogues.
        let epilogue = if u.exact_pc && !self.a64 {
            self.epilogue_row(u.pc)
        } else {
            None
        };
        let a64 = self.a64;
        // ARMv8-A code without call-frame information (hand-written assembly) that keeps the
        // frame record its ABI describes: x29 points at the saved (x29, x30) pair, the
        // caller's frame pointer and return address, when it stays on the stack and above SP.
        let record =
            (a64 && u.r7.is_some_and(|fp| fp >= u.sp && fp.is_multiple_of(8))).then_some(Row {
                cfa: Some((7, 16)),
                ra: Loc::At(-8),
                r7: Loc::At(-16),
                r11: Loc::Same,
            });
        epilogue
            .or_else(|| self.row(look))
            .or_else(|| {
                let r = if a64 { record } else { self.prologue_row(look) };
                u.prologue += r.is_some() as u32;
                r
            })
            .ok_or_else(|| {
                End::Failed(match &self.missing {
                    Some(why) => format!("the ELF cannot be unwound: {why}"),
                    None => format!("no call-frame information at {look:#010x}"),
                })
            })
    }

    /// One frame up: the caller's registers from the rule at the PC, or how unwinding ends.
    fn step(&mut self, mem: &Memory, u: &mut Unwinding) -> Result<(), End> {
        let look = if u.exact_pc {
            u.pc
        } else {
            u.pc.wrapping_sub(2)
        };
        let row = self.row_at(u, look)?;
        let Some((reg, off)) = row.cfa else {
            return Err(End::Failed(format!(
                "a CFA rule not followed at {look:#010x}"
            )));
        };
        let base_value = match reg {
            13 => Some(u.sp),
            7 => u.r7,
            11 => u.r11,
            _ => None,
        };
        let Some(cfa) = base_value.map(|v| v.wrapping_add(off as u32)) else {
            return Err(End::Failed(format!(
                "the CFA at {look:#010x} is based on r{reg}, whose value is not known there"
            )));
        };
        // A register the window does not hold (or that an epilogue already popped, below the
        // SP) becomes unknown: that ends unwinding only if a CFA is based on it.
        let restore = |l: Loc, now: Option<u32>| -> Option<u32> {
            match l {
                Loc::Same => now,
                Loc::Undefined | Loc::Other => None,
                Loc::At(o) => mem.saved(cfa.wrapping_add(o as u32)),
            }
        };
        let ra = match row.ra {
            Loc::Undefined => return Err(End::Complete),
            Loc::Other => {
                return Err(End::Failed(format!(
                    "a return-address rule not followed at {look:#010x}"
                )));
            }
            Loc::Same => u.lr.ok_or_else(|| {
                End::Failed(format!(
                    "the return address at {look:#010x} was neither saved nor in LR"
                ))
            })?,
            Loc::At(o) => mem.saved(cfa.wrapping_add(o as u32)).ok_or_else(|| {
                // A window of no words is no window cut short: the sampler kept nothing
                // because the stack pointer was at or above the top it was given.
                if mem.window.is_empty() && mem.sparse.is_empty() {
                    End::Failed(
                        "no stack was kept: the stack pointer was at or above the top of the \
                         stack the sampler was given"
                            .into(),
                    )
                } else {
                    End::Truncated
                }
            })?,
        };
        (u.r7, u.r11) = (restore(row.r7, u.r7), restore(row.r11, u.r11));
        if ra >= 0xFFFF_FF00 && !self.a64 {
            return u.exception_return(mem, cfa, ra);
        }
        // The caller's frame is above this one (a leaf's CFA may equal its SP).
        if cfa < u.sp {
            return Err(End::Failed(format!(
                "the stack does not grow towards its base at {look:#010x}"
            )));
        }
        let ret = ra & !1;
        if ret == 0 {
            return Err(End::Complete);
        }
        if !u.exact_pc && cfa == u.sp && ret == u.pc {
            return Err(End::Failed(format!(
                "a frame returns to itself at {look:#010x}"
            )));
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
            u.frames.push(Frame {
                pc: tf.0,
                kind: Kind::TailCall,
            });
        }
        u.sp = cfa;
        u.pc = ret;
        u.lr = None;
        u.exact_pc = false;
        u.frames.push(Frame {
            pc: ret.wrapping_sub(2),
            kind: Kind::Call,
        });
        Ok(())
    }
}

/// What a sample kept of the stack: its window from the SP up, and the frame records' words
/// (and the exception frames kept with them) by address.
struct Memory<'a> {
    base: u32,
    window: &'a [u32],
    sparse: Vec<(u32, u32)>,
    a64: bool,
}

impl<'a> Memory<'a> {
    fn of(c: &Context<'a>, a64: bool) -> Memory<'a> {
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
        Memory {
            base: c.sp,
            window: c.window,
            sparse,
            a64,
        }
    }

    /// The word at `addr`, if the sample kept it.
    fn read(&self, addr: u32) -> Option<u32> {
        if !addr.is_multiple_of(4) {
            return None;
        }
        let off = addr.wrapping_sub(self.base);
        if addr >= self.base
            && let Some(&v) = self.window.get((off / 4) as usize)
        {
            return Some(v);
        }
        self.sparse
            .binary_search_by_key(&addr, |w| w.0)
            .ok()
            .map(|i| self.sparse[i].1)
    }

    /// A saved register: a word, or on AArch64 a doubleword whose high half must be 0 (the
    /// sampler keeps 32-bit values).
    fn saved(&self, addr: u32) -> Option<u32> {
        let lo = self.read(addr)?;
        if self.a64 {
            (self.read(addr.wrapping_add(4))? == 0).then_some(lo)
        } else {
            Some(lo)
        }
    }
}

/// The registers of the frame being unwound, and the frames found so far.
struct Unwinding {
    frames: Vec<Frame>,
    pc: u32,
    sp: u32,
    lr: Option<u32>,
    r7: Option<u32>,
    r11: Option<u32>,
    /// Whether `pc` is an address that was executing (the sampled PC, or an interrupted one)
    /// rather than a return address.
    exact_pc: bool,
    prologue: u32,
    fp_frames: u32,
}

impl Unwinding {
    /// EXC_RETURN `ra` at `cfa`: the handler returns to the code it interrupted, whose
    /// registers the exception frame holds.
    fn exception_return(&mut self, mem: &Memory, cfa: u32, ra: u32) -> Result<(), End> {
        if ra & 4 != 0 {
            return Err(End::HandlerRoot);
        }
        let word = |i: u32| mem.read(cfa.wrapping_add(4 * i));
        let (Some(slr), Some(spc), Some(xpsr)) = (word(5), word(6), word(7)) else {
            return Err(End::Truncated);
        };
        // The frame's size (FP registers, the alignment word): a frame that would end above
        // 4 GiB is no frame.
        let size =
            if ra & 0x10 == 0 { 0x68 } else { 0x20 } + if xpsr & (1 << 9) != 0 { 4 } else { 0 };
        let Some(next) = cfa.checked_add(size) else {
            return Err(End::Failed(format!(
                "an exception frame at {cfa:#010x} would end above 4 GiB"
            )));
        };
        self.fp_frames += u32::from(ra & 0x10 == 0);
        self.sp = next;
        self.pc = spc & !1;
        self.lr = Some(slr);
        self.exact_pc = true;
        self.frames.push(Frame {
            pc: self.pc,
            kind: Kind::Interrupted,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests;
