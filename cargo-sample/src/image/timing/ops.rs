//! What a Thumb instruction is, for its timing: read from Capstone's text of it.
//!
//! Capstone spells conditional instructions inside an IT block with their condition
//! (`addne`), flag-setting ones with `s` (`adds`), either width with `.w`/`.n`, and
//! floating-point ones with their data type (`vmla.f32`). The base is what is left after
//! those, and the class comes from the base alone; register lists give the transfer count.

/// The classes of instructions whose timing differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Data processing, moves, shifts, compares, extends, bit fields, DSP/SIMD arithmetic.
    Alu,
    /// `mul`: 32 × 32 → 32.
    Mul,
    /// `mla`, `mls`.
    MulAcc,
    /// `umull`, `smull`: 32 × 32 → 64.
    MulLong,
    /// `umlal`, `smlal`, `umaal`.
    MulLongAcc,
    /// `sdiv`, `udiv`.
    Div,
    /// One load (`ldr`, `ldrb`, `ldrh`, `ldrsb`, `ldrsh`, exclusive and unprivileged forms).
    Load,
    /// `ldrd`.
    LoadPair,
    /// `ldm`, `pop`: `regs` registers.
    LoadMulti,
    /// One store.
    Store,
    /// `strd`.
    StorePair,
    /// `stm`, `push`.
    StoreMulti,
    /// `b` (conditional or not, by `conditional`).
    Branch,
    /// `cbz`, `cbnz`.
    CompareBranch,
    /// `bl`.
    Call,
    /// `bx`, `blx` to a register.
    BranchReg,
    /// `tbb`, `tbh`.
    TableBranch,
    /// `it`, `ite`, ... (may fold into the instruction before).
    It,
    /// Floating point arithmetic of one cycle (add, subtract, multiply, compare, convert,
    /// absolute, negate, move between registers).
    FpAlu,
    /// Multiply-accumulate (`vmla`, `vmls`, `vnmla`, `vnmls`, `vfma`, `vfms`, ...).
    FpMulAcc,
    /// `vdiv`, `vsqrt`.
    FpDivSqrt,
    /// `vldr`.
    FpLoad,
    /// `vstr`.
    FpStore,
    /// `vldm`, `vpop`: `regs` single-precision words.
    FpLoadMulti,
    /// `vstm`, `vpush`.
    FpStoreMulti,
    /// `vmov` between core and FP registers, `vmrs`, `vmsr`.
    FpTransfer,
    /// `dmb`, `dsb`, `isb`.
    Barrier,
    /// `wfi`, `wfe`.
    Sleep,
    /// Not an instruction (a literal pool word, bytes that do not decode).
    Data,
}

impl Class {
    /// It reads or writes data memory.
    pub fn accesses_memory(self) -> bool {
        use Class::*;
        matches!(
            self,
            Load | LoadPair
                | LoadMulti
                | Store
                | StorePair
                | StoreMulti
                | FpLoad
                | FpStore
                | FpLoadMulti
                | FpStoreMulti
                | TableBranch
        )
    }
}

/// One instruction as its timing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub class: Class,
    /// Words moved by a multiple load or store (`pop {r4, r5, pc}`: 3; `vpush {d8, d9}`: 4).
    pub regs: u8,
    /// It writes the PC (a branch, `pop {.., pc}`, `ldr pc, ..`, `mov pc, ..`): the pipeline
    /// refills after it whenever it runs (for a conditional branch: when taken).
    pub writes_pc: bool,
    /// A conditional branch (`bne`), which refills the pipeline only when taken.
    pub conditional: bool,
    /// A load or store whose address is a register offset (`ldr r0, [r1, r2]`).
    pub register_offset: bool,
    /// A single load or store that also writes its base register back (`ldr r0, [r1], #4`,
    /// `ldr r0, [r1, #4]!`).
    pub writeback: bool,
    /// The core register it writes first (`add r3, ..`, `ldr r3, ..`: 3), if any.
    pub dest: Option<u8>,
    /// The registers its address is computed from (base and offset; SP for `push`/`pop`).
    pub address: [Option<u8>; 2],
    /// The core registers it reads, one bit each (`add r0, r1, r2`: r1 and r2; a store's data
    /// and address registers).
    pub reads: u16,
    /// Its result comes a stage later than a plain data processing one's: a register operand
    /// shifted inline (`eor r0, r1, r2, ror #8`), an immediate that needs a rotation, an
    /// extend-and-add, DSP/SIMD arithmetic, a multiply.
    pub late: bool,
    /// The data a store writes (not read until the store's data phase).
    pub store_data: Option<u8>,
    /// An inline-shifted register operand or a rotated immediate (the M7 issues two of these
    /// together only in some combinations).
    pub shifted: bool,
    /// A bit-field, extend, reverse or DSP/SIMD operation (one shifter unit on the M7).
    pub bitfield: bool,
}

/// Every core register named in an operand list, one bit each.
fn registers_named(ops: &str) -> u16 {
    ops.split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(register)
        .fold(0u16, |m, r| m | (1 << r))
}

/// Register ranges in a list (`{r4-r7}`) name their ends only; fill them in.
fn list_registers(ops: &str) -> u16 {
    let mut m = registers_named(ops);
    if let Some(inner) = ops.split('{').nth(1).and_then(|t| t.split('}').next()) {
        for item in inner.split(',') {
            if let Some((a, b)) = item.split_once('-')
                && let (Some(a), Some(b)) = (register(a), register(b))
            {
                for r in a..=b {
                    m |= 1 << r;
                }
            }
        }
    }
    m
}

/// An immediate a data-processing instruction can take without rotating it: 0-255, the
/// replicated byte patterns `0x00XY00XY`, `0xXY00XY00`, `0xXYXYXYXY`, or 12 bits for
/// `addw`/`subw`-style adds and subtracts.
fn plain_immediate(v: u32, add_or_sub: bool) -> bool {
    let b = v & 0xff;
    v < 256
        || (add_or_sub && v < 4096)
        || v == b | b << 16
        || v == (b << 8) | (b << 24)
        || v == b * 0x0101_0101
}

/// A core register's number from Capstone's name for it (`r7`, `sb`, `ip`, `sp`, `lr`).
pub fn register(name: &str) -> Option<u8> {
    let name = name.trim().trim_end_matches('!');
    Some(match name {
        "sb" => 9,
        "sl" => 10,
        "fp" => 11,
        "ip" => 12,
        "sp" => 13,
        "lr" => 14,
        "pc" => 15,
        _ => {
            let n: u8 = name.strip_prefix('r')?.parse().ok()?;
            if n > 15 {
                return None;
            }
            n
        }
    })
}

const CONDITIONS: [&str; 16] = [
    "eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le",
];

/// The class of a base mnemonic (no condition, no `s`, no width, no data type), if known.
fn base_class(base: &str) -> Option<Class> {
    use Class::*;
    Some(match base {
        "mul" => Mul,
        "mla" | "mls" => MulAcc,
        "umull" | "smull" => MulLong,
        "umlal" | "smlal" | "umaal" => MulLongAcc,
        "sdiv" | "udiv" => Div,
        "ldr" | "ldrb" | "ldrh" | "ldrsb" | "ldrsh" | "ldrex" | "ldrexb" | "ldrexh" | "ldrt"
        | "ldrbt" | "ldrht" | "ldrsbt" | "ldrsht" | "lda" | "ldab" | "ldah" | "ldaex"
        | "ldaexb" | "ldaexh" => Load,
        "ldrd" => LoadPair,
        "ldm" | "ldmia" | "ldmfd" | "ldmdb" | "ldmea" | "pop" => LoadMulti,
        "str" | "strb" | "strh" | "strex" | "strexb" | "strexh" | "strt" | "strbt" | "strht"
        | "stl" | "stlb" | "stlh" | "stlex" | "stlexb" | "stlexh" => Store,
        "strd" => StorePair,
        "stm" | "stmia" | "stmea" | "stmdb" | "stmfd" | "push" => StoreMulti,
        "b" => Branch,
        "cbz" | "cbnz" => CompareBranch,
        "bl" => Call,
        "bx" | "blx" => BranchReg,
        "tbb" | "tbh" => TableBranch,
        "vadd" | "vsub" | "vmul" | "vnmul" | "vabs" | "vneg" | "vcmp" | "vcmpe" | "vcvt"
        | "vcvtr" | "vcvta" | "vcvtn" | "vcvtp" | "vcvtm" | "vcvtb" | "vcvtt" | "vmaxnm"
        | "vminnm" | "vrinta" | "vrintn" | "vrintp" | "vrintm" | "vrintx" | "vrintz" | "vrintr"
        | "vsel" => FpAlu,
        "vmla" | "vmls" | "vnmla" | "vnmls" | "vfma" | "vfms" | "vfnma" | "vfnms" => FpMulAcc,
        "vdiv" | "vsqrt" => FpDivSqrt,
        "vldr" => FpLoad,
        "vstr" => FpStore,
        "vldm" | "vldmia" | "vldmdb" | "vpop" => FpLoadMulti,
        "vstm" | "vstmia" | "vstmdb" | "vpush" => FpStoreMulti,
        "vmov" | "vmrs" | "vmsr" => FpTransfer,
        "dmb" | "dsb" | "isb" => Barrier,
        "wfi" | "wfe" => Sleep,
        _ if base.len() <= 5
            && base.starts_with("it")
            && base[2..].chars().all(|c| c == 't' || c == 'e') =>
        {
            It
        }
        // Everything else a Cortex-M runs in one cycle (data processing, moves, shifts,
        // compares, extends, bit fields, saturation, DSP and SIMD arithmetic, hints).
        _ if is_alu(base) => Alu,
        _ => return None,
    })
}

/// Mnemonics of single-cycle data processing (without condition or `s`).
fn is_alu(base: &str) -> bool {
    const ALU: &[&str] = &[
        "adc", "add", "addw", "adr", "and", "asr", "bfc", "bfi", "bic", "clz", "cmn", "cmp", "eor",
        "lsl", "lsr", "mov", "movw", "movt", "mvn", "neg", "nop", "orn", "orr", "rbit", "rev",
        "rev16", "revsh", "ror", "rrx", "rsb", "sbc", "sbfx", "ssat", "sub", "subw", "sxtb",
        "sxth", "teq", "tst", "ubfx", "usat", "uxtb", "uxth", "yield", "sev", "cpsid", "cpsie",
        "mrs", "msr", "svc", "bkpt", "udf", "sxtab", "sxtah", "uxtab", "uxtah", "pkhbt", "pkhtb",
        "sel", "usad8", "usada8", "qadd", "qsub", "qdadd", "qdsub", "clrex",
    ];
    ALU.contains(&base)
        // The DSP extension's arithmetic, multiplies included: one cycle on the M4, M7, M33.
        || ["sadd", "ssub", "uadd", "usub", "qadd", "qsub", "shadd", "shsub", "uhadd", "uhsub",
            "uqadd", "uqsub", "sasx", "ssax", "uasx", "usax", "qasx", "qsax", "shasx", "shsax",
            "uhasx", "uhsax", "uqasx", "uqsax", "smla", "smlsd", "smlad", "smul", "smua", "smus",
            "smmul", "smmla", "smmls", "sxtb16", "uxtb16", "ssat16", "usat16", "smlald",
            "smlsld", "smlal"]
        .iter()
        .any(|p| base.starts_with(p))
}

/// Split Capstone's text into the base mnemonic and whether a condition was taken off.
fn base_of(mnemonic: &str) -> Option<(&str, Class, bool)> {
    let m = mnemonic
        .trim_end_matches(".w")
        .trim_end_matches(".n")
        .split('.')
        .next()
        .unwrap_or("");
    if let Some(c) = base_class(m) {
        return Some((m, c, false));
    }
    let strip_cond =
        |s: &'static str, x: &str| -> Option<usize> { x.strip_suffix(s).map(|b| b.len()) };
    for cond in CONDITIONS {
        if let Some(n) = strip_cond(cond, m) {
            let b = &m[..n];
            if let Some(c) = base_class(b) {
                return Some((b, c, true));
            }
            // `addseq`: the flags' `s` comes before the condition.
            if let Some(b2) = b.strip_suffix('s')
                && let Some(c) = base_class(b2)
            {
                return Some((b2, c, true));
            }
        }
    }
    let b = m.strip_suffix('s')?;
    base_class(b).map(|c| (b, c, false))
}

/// Registers named in `{...}`, counted in 32-bit words (a `d` register is two).
fn list_words(ops: &str) -> u8 {
    let Some(open) = ops.find('{') else {
        return 0;
    };
    let inner = ops[open + 1..].split('}').next().unwrap_or("");
    let mut words = 0u32;
    for item in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let per = if item.starts_with('d') { 2 } else { 1 };
        let n = match item.split_once('-') {
            Some((a, b)) => {
                let num = |s: &str| s.trim().get(1..).and_then(|d| d.parse::<u32>().ok());
                match (num(a), num(b)) {
                    (Some(x), Some(y)) if y >= x => y - x + 1,
                    _ => 1,
                }
            }
            None => 1,
        };
        words += n * per;
    }
    words.min(255) as u8
}

/// The base register of a multiple load (`ldm r0!, {..}`: r0; `pop`: SP).
fn address_bits(ops: &str, base: &str) -> u16 {
    if matches!(base, "pop" | "vpop") {
        return 1 << 13;
    }
    ops.split(',')
        .next()
        .and_then(register)
        .map(|r| 1u16 << r)
        .unwrap_or(0)
}

/// What one instruction is, from Capstone's mnemonic and operands; `None` for what the model
/// does not know (counted as one cycle, and listed).
pub fn decode(mnemonic: &str, ops: &str) -> Option<Op> {
    let mnemonic = mnemonic.to_ascii_lowercase();
    let ops = ops.to_ascii_lowercase();
    let (base, class, cond_suffix) = base_of(&mnemonic)?;
    let first = ops.split(',').next().unwrap_or("").trim();
    let list_has_pc = ops.contains("pc}") || ops.contains(" pc,") || ops.contains("{pc");
    let writes_pc = match class {
        Class::Branch | Class::Call | Class::BranchReg | Class::TableBranch => true,
        Class::CompareBranch => true,
        Class::LoadMulti => list_has_pc,
        Class::Load | Class::Alu => first == "pc",
        _ => false,
    };
    let conditional = match class {
        Class::CompareBranch => true,
        // `b` inside an IT block is spelled with its condition too (`beq`): either way it
        // refills only when taken.
        Class::Branch => cond_suffix,
        _ => false,
    };
    let register_offset = matches!(class, Class::Load | Class::Store) && {
        let addr = ops.split('[').nth(1).unwrap_or("");
        addr.split(',')
            .nth(1)
            .is_some_and(|o| o.trim().starts_with('r') || o.trim().starts_with("ip"))
    };
    let writeback = matches!(class, Class::Load | Class::Store)
        && (ops.contains("]!")
            || ops
                .split(']')
                .nth(1)
                .is_some_and(|t| t.trim_start().starts_with(',')));
    let regs = match class {
        Class::LoadMulti | Class::StoreMulti | Class::FpLoadMulti | Class::FpStoreMulti => {
            list_words(&ops)
        }
        _ => 0,
    };
    let no_dest = matches!(
        base,
        "cmp" | "cmn" | "tst" | "teq" | "nop" | "yield" | "sev"
    );
    let dest = match class {
        Class::Alu
        | Class::Mul
        | Class::MulAcc
        | Class::MulLong
        | Class::MulLongAcc
        | Class::Load
        | Class::Div
            if !no_dest =>
        {
            register(first)
        }
        _ => None,
    };
    let named = registers_named(&ops);
    let operands: Vec<&str> = ops.split(',').map(str::trim).collect();
    let (reads, store_data) = match class {
        Class::Load | Class::LoadPair | Class::FpLoad => {
            let inner = ops.split('[').nth(1).unwrap_or("");
            (registers_named(inner), None)
        }
        Class::Store | Class::StorePair => (named, register(first)),
        Class::LoadMulti | Class::FpLoadMulti => (address_bits(&ops, base), None),
        Class::StoreMulti => (list_registers(&ops), None),
        Class::MulLongAcc => (named, None),
        Class::MulLong => {
            let skip = operands.iter().take(2).filter_map(|o| register(o));
            (skip.fold(named, |m, r| m & !(1 << r)), None)
        }
        // A bit-field insert and `movt` keep part of their destination.
        _ if matches!(base, "bfi" | "bfc" | "movt") => (named, None),
        _ => match dest {
            // Two operands read the first too (`add r7, r4`, `adds r0, #1`), except moves and
            // single-operand operations; `add r0, r0, r1` names it again.
            Some(d)
                if (operands.len() != 2
                    || matches!(
                        base,
                        "mov"
                            | "mvn"
                            | "neg"
                            | "rev"
                            | "rev16"
                            | "revsh"
                            | "rbit"
                            | "clz"
                            | "uxtb"
                            | "uxth"
                            | "sxtb"
                            | "sxth"
                            | "uxtb16"
                            | "sxtb16"
                            | "movw"
                            | "adr"
                    ))
                    && operands.iter().skip(1).all(|o| register(o) != Some(d)) =>
            {
                (named & !(1 << d), None)
            }
            _ => (named, None),
        },
    };
    let shifted_operand = class == Class::Alu
        && !matches!(base, "lsl" | "lsr" | "asr" | "ror" | "rrx")
        // An extend's rotation is not an inline-shifted operand.
        && !matches!(base, "uxtb" | "uxth" | "sxtb" | "sxth" | "uxtb16" | "sxtb16")
        && operands.len() >= 3
        && ["lsl #", "lsr #", "asr #", "ror #", "rrx"]
            .iter()
            .any(|k| operands.last().is_some_and(|o| o.starts_with(k)));
    let rotated_immediate = class == Class::Alu
        && !matches!(base, "movw" | "movt")
        && operands.last().is_some_and(|o| {
            o.strip_prefix("#0x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| o.strip_prefix('#').and_then(|d| d.parse().ok()))
                .is_some_and(|v| {
                    !plain_immediate(
                        v,
                        matches!(base, "add" | "sub" | "addw" | "subw" | "cmp" | "cmn"),
                    )
                })
        });
    let dsp = class == Class::Alu
        && (base.starts_with("uxta")
            || base.starts_with("sxta")
            || base.starts_with("pkh")
            || base.starts_with("smla")
            || base.starts_with("smul")
            || base.starts_with("smua")
            || base.starts_with("smus")
            || base.starts_with("smml")
            || base.starts_with("smmu")
            || [
                "qadd", "qsub", "sadd", "ssub", "uadd", "usub", "shadd", "shsub", "uhadd", "uhsub",
                "uqadd", "uqsub", "qasx", "qsax", "sasx", "ssax", "uasx", "usax", "sel", "usad8",
                "usada8", "ssat", "usat",
            ]
            .iter()
            .any(|p| base.starts_with(p)));
    let bitfield = dsp
        || (class == Class::Alu
            && matches!(
                base,
                "uxtb"
                    | "uxth"
                    | "sxtb"
                    | "sxth"
                    | "uxtb16"
                    | "sxtb16"
                    | "ubfx"
                    | "sbfx"
                    | "bfi"
                    | "bfc"
                    | "rev"
                    | "rev16"
                    | "revsh"
                    | "rbit"
                    | "clz"
            ));
    let late = shifted_operand
        || rotated_immediate
        || dsp
        || matches!(
            class,
            Class::Mul | Class::MulAcc | Class::MulLong | Class::MulLongAcc
        );
    let mut address = [None, None];
    if class.accesses_memory() {
        if let Some(inner) = ops.split('[').nth(1) {
            let inner = inner.split(']').next().unwrap_or("");
            for (slot, r) in address
                .iter_mut()
                .zip(inner.split(',').filter_map(register))
            {
                *slot = Some(r);
            }
        } else if matches!(base, "push" | "pop" | "vpush" | "vpop") {
            address[0] = Some(13);
        } else if matches!(
            class,
            Class::LoadMulti | Class::StoreMulti | Class::FpLoadMulti | Class::FpStoreMulti
        ) {
            address[0] = register(first);
        }
    }
    Some(Op {
        class,
        regs,
        writes_pc,
        conditional,
        register_offset,
        writeback,
        dest,
        address,
        reads,
        late,
        store_data,
        shifted: shifted_operand || rotated_immediate,
        bitfield,
    })
}
