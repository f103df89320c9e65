//! Where the call-frame information is silent or behind: a prologue (code built without CFI)
//! or an epilogue under way (compilers for Arm describe prologues, not epilogues), read from
//! the Thumb instructions themselves.

use super::{Loc, Row, Unwinder};

impl Unwinder {
    pub(super) fn halfword(&self, addr: u32) -> Option<u16> {
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

    /// A row for code without call-frame information (hand-written assembly such as
    /// compiler-builtins' `__aeabi_uldivmod`), from its prologue: the pushes, stack
    /// adjustments and frame-pointer set-up between the function's start and `pc`. `None`
    /// when anything else moves the stack pointer there.
    pub(super) fn prologue_row(&self, pc: u32) -> Option<Row> {
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
    pub(super) fn epilogue_row(&self, pc: u32) -> Option<Row> {
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
