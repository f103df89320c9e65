//! Cycle counts per instruction class, one table per core, from the per-instruction timing
//! Arm publishes (the Cortex-M0, M0+, M3 and M4 technical reference manuals) and, where Arm
//! publishes none or its table is silent (the M33, the M7, neighbouring loads and stores on
//! the M3 and M4), from jnk0le's pipeline measurements on silicon
//! (github.com/jnk0le/random, `pipeline cycle test/doc/`, commit 3dfc2ab).

use super::ops::Class;

/// The cores with a timing model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Core {
    M0,
    M0Plus,
    M3,
    M4,
    /// Dual issue, branch prediction, caches and tightly-coupled memories, none of which has a
    /// published per-instruction table: the pairing and prediction rules are approximated from
    /// measurements, memory accesses are taken as cache or TCM hits.
    M7,
    M33,
}

impl Core {
    pub const ALL: [Core; 6] = [
        Core::M0,
        Core::M0Plus,
        Core::M3,
        Core::M4,
        Core::M7,
        Core::M33,
    ];

    /// How `--core` and reports spell it: `cortex-m4`.
    pub fn name(self) -> &'static str {
        match self {
            Core::M0 => "cortex-m0",
            Core::M0Plus => "cortex-m0plus",
            Core::M3 => "cortex-m3",
            Core::M4 => "cortex-m4",
            Core::M7 => "cortex-m7",
            Core::M33 => "cortex-m33",
        }
    }

    /// `cortex-m4`, `m4`, `cortex-m0+`, `M0PLUS`; also QEMU's `-cpu` names.
    pub fn parse(s: &str) -> Option<Core> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_prefix("cortex-").unwrap_or(&s);
        Some(match s {
            "m0" => Core::M0,
            "m0+" | "m0plus" | "m0p" => Core::M0Plus,
            "m3" => Core::M3,
            "m4" | "m4f" => Core::M4,
            "m7" => Core::M7,
            "m33" | "m55" => Core::M33,
            _ => return None,
        })
    }

    /// Whether code built for this core's instruction set runs on a QEMU core named `cpu`
    /// (ARMv6-M on every Cortex-M, ARMv7-M on the M3 and up, and so on).
    pub fn runs_on(self, cpu: &str) -> bool {
        let Some(host) = Core::parse(cpu) else {
            return false;
        };
        let level = |c: Core| match c {
            Core::M0 | Core::M0Plus => 0,
            Core::M3 => 1,
            Core::M4 | Core::M7 => 2,
            Core::M33 => 3,
        };
        level(self) <= level(host) || (self == Core::M33 && host == Core::M33)
    }

    /// Whether the figures are an approximation beyond what is listed for every core.
    pub fn approximate(self) -> Option<&'static str> {
        (self == Core::M7).then_some(
            "the Cortex-M7 has no published per-instruction timing: its dual issue and branch \
             prediction are approximated and every access is taken as a cache or TCM hit",
        )
    }

    pub fn table(self) -> &'static Table {
        match self {
            Core::M0 => &M0,
            Core::M0Plus => &M0_PLUS,
            Core::M3 => &M3,
            Core::M4 => &M4,
            Core::M33 => &M33,
            Core::M7 => &M7,
        }
    }
}

impl std::fmt::Display for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One core's timing, in cycles.
#[derive(Debug)]
pub struct Table {
    /// Pipeline refill after a write of the PC (a taken branch): the `P` of Arm's tables.
    pub refill: u32,
    /// Extra refill when the target is a 32-bit instruction at an address that is not a
    /// multiple of 4 (it spans two fetches).
    pub unaligned_wide_target: u32,
    /// A refill after `bl` (32-bit, resolved later than `b` on the M0 and M0+).
    pub call_refill: u32,
    /// A refill after a branch to a register (`bx`, `blx`, `mov pc`).
    pub return_refill: u32,
    /// A refill after a load of the PC (`pop {.., pc}`, `ldm {.., pc}`, `ldr pc`, and the
    /// table branches' load).
    pub pop_refill: u32,
    pub load: u32,
    /// A single load or store right after a single load: the address phase overlaps.
    pub pipelined: Option<u32>,
    /// A load or store whose address uses the result of the data processing just before it
    /// waits this long (no forwarding path).
    pub address_interlock: u32,
    /// A single store with an immediate offset (the M3 and M4 store while the next
    /// instruction runs, so it is one cycle).
    pub store: u32,
    /// A single store with a register offset.
    pub store_register_offset: u32,
    /// More for a single load that writes its base register back (`ldr r0, [r1], #4`).
    pub load_writeback: u32,
    /// A load or store whose address uses the base register that the load or store just
    /// before wrote back (`ldr r0, [r1], #4; ldr r2, [r1], #4`) waits this long, unpipelined.
    pub writeback_interlock: u32,
    /// A load that writes its base back pipelines after a load (the M4; not the M3, where
    /// only the first load of a chain may write back).
    pub writeback_load_pipelines: bool,
    /// A 32-bit load at an address that is not a multiple of 4 pipelines after a load (on the
    /// M3 and M4 it does not: measured).
    pub unaligned_wide_load_pipelines: bool,
    /// A store followed by a load (single, pair or multiple) takes this much longer: the
    /// load cannot overlap the store's data phase.
    pub store_then_load: u32,
    /// Two neighbouring instructions may issue in the same cycle (see [`super::dual`]).
    pub dual_issue: bool,
    /// A conditional branch predicted by its usual direction: this many cycles each time it
    /// goes the other way (0: no prediction; a taken branch refills instead).
    pub mispredict: u32,
    /// The instruction after a multiply waits this long to read its result (not as an
    /// accumulator).
    pub mul_result: u32,
    /// `ldm`/`stm` move two words a cycle (a 64-bit bus).
    pub multi_by_pairs: bool,
    /// The instruction after a single load waits this long to read the loaded register
    /// (other than as the data of a store).
    pub load_use: u32,
    /// The instruction after one with a late result (see [`super::ops::Op::late`]) waits this
    /// long to read it (other than as a store's data or a multiply-accumulate's addend).
    pub late_result: u32,
    /// `ldrd`, `strd`.
    pub pair: u32,
    /// Multiple load or store: `multi + N` for N words.
    pub multi: u32,
    pub mul: u32,
    pub mul_acc: u32,
    pub mul_long: u32,
    pub mul_long_acc: u32,
    /// Divide: 2 to 12 cycles by how early the divide can stop, which depends on the operands
    /// that QEMU 7.2's plugins cannot read; the middle is taken.
    pub div: u32,
    pub table_branch: u32,
    pub it: u32,
    pub fp_alu: u32,
    pub fp_mul_acc: u32,
    pub fp_div: u32,
    pub fp_load: u32,
    pub fp_store: u32,
    pub fp_multi: u32,
    pub fp_transfer: u32,
    pub barrier: u32,
    /// Exception entry (stacking, vector fetch) and return (unstacking): no instruction runs
    /// then, so the exact counts never see it.
    pub exception_entry: u32,
    pub exception_return: u32,
    /// An exception entered straight after another's return (or one arriving late) replaces
    /// that return and its own entry: no unstacking and stacking, only the vector fetch.
    pub tail_chain: u32,
}

impl Table {
    /// Cycles of one execution of an instruction, before refills and pipelining.
    pub fn base(&self, op: &super::ops::Op) -> u32 {
        let (class, n) = (op.class, u32::from(op.regs));
        if class == Class::Store && op.register_offset {
            return self.store_register_offset;
        }
        match class {
            Class::Alu | Class::Branch | Class::CompareBranch | Class::Call | Class::BranchReg => 1,
            Class::Mul => self.mul,
            Class::MulAcc => self.mul_acc,
            Class::MulLong => self.mul_long,
            Class::MulLongAcc => self.mul_long_acc,
            Class::Div => self.div,
            Class::Load => self.load,
            Class::Store => self.store,
            Class::LoadPair | Class::StorePair => self.pair,
            Class::LoadMulti | Class::StoreMulti if self.multi_by_pairs => {
                self.multi + n.div_ceil(2)
            }
            Class::LoadMulti | Class::StoreMulti => self.multi + n,
            Class::TableBranch => self.table_branch,
            Class::It => self.it,
            Class::FpAlu => self.fp_alu,
            Class::FpMulAcc => self.fp_mul_acc,
            Class::FpDivSqrt => self.fp_div,
            Class::FpLoad => self.fp_load,
            Class::FpStore => self.fp_store,
            Class::FpLoadMulti | Class::FpStoreMulti if self.multi_by_pairs => {
                self.fp_multi + n.div_ceil(2)
            }
            Class::FpLoadMulti | Class::FpStoreMulti => self.fp_multi + n,
            Class::FpTransfer => self.fp_transfer,
            Class::Barrier => self.barrier,
            Class::Sleep | Class::Data => 1,
        }
    }
}

/// Tail-chaining: 6 cycles at zero wait states, as Arm gives for the Cortex-M3 and M4 (and
/// the same for late arrival's second exception). Arm publishes no figure for the other
/// cores; the same is taken for them.
const TAIL_CHAIN: u32 = 6;

/// Cortex-M0 (ARMv6-M, three stages, von Neumann bus): loads and stores 2, taken branch 3,
/// `bl` 4, `bx`/`blx` 3, `pop {pc}` 4 + N; multiply 1 (the fast multiplier); no pipelining of
/// loads. Exception entry 16 cycles.
static M0: Table = Table {
    refill: 2,
    unaligned_wide_target: 0,
    call_refill: 3,
    return_refill: 2,
    pop_refill: 3,
    load: 2,
    pipelined: None,
    address_interlock: 0,
    store: 2,
    store_register_offset: 2,
    load_writeback: 0,
    writeback_interlock: 0,
    writeback_load_pipelines: true,
    unaligned_wide_load_pipelines: true,
    store_then_load: 0,
    dual_issue: false,
    mispredict: 0,
    mul_result: 0,
    multi_by_pairs: false,
    load_use: 0,
    late_result: 0,
    pair: 3,
    multi: 1,
    mul: 1,
    mul_acc: 1,
    mul_long: 1,
    mul_long_acc: 1,
    div: 1,
    table_branch: 1,
    it: 1,
    fp_alu: 1,
    fp_mul_acc: 1,
    fp_div: 1,
    fp_load: 2,
    fp_store: 2,
    fp_multi: 1,
    fp_transfer: 1,
    barrier: 4,
    exception_entry: 16,
    exception_return: 16,
    tail_chain: TAIL_CHAIN,
};

/// Cortex-M0+ (two stages): loads and stores 2, taken branch 2, `bl` 3, `bx`/`blx` 2,
/// `pop {pc}` 3 + N. Exception entry 15 cycles. The rest as the M0.
static M0_PLUS: Table = Table {
    refill: 1,
    call_refill: 2,
    return_refill: 1,
    pop_refill: 2,
    barrier: 3,
    exception_entry: 15,
    exception_return: 15,
    tail_chain: TAIL_CHAIN,
    ..M0
};

/// Cortex-M3 (three stages, Harvard): branch 1 + P (a load of the PC 2 + 3, `tbb` 3 + 3),
/// an address computed from the result of the instruction before stalls one cycle (so does one
/// from a base the load or store before wrote back), loads 2 with neighbouring single loads
/// and stores pipelined, a store 1 (it completes while the next instruction runs) but 2 before
/// a load, with a register offset 2, a load that writes its base back one more and never
/// pipelined, a 32-bit load at an address not a multiple of 4 not pipelined, long multiplies 3 to 5 (accumulating 4 to 7; the middle is taken), divide 2 to
/// 12. Exception entry 12 cycles, return 10. The store and write-back rules are measured ones
/// (jnk0le's pipeline tests on an STM32F103 and an STM32F407), beyond the manual's table.
static M3: Table = Table {
    refill: 1,
    unaligned_wide_target: 1,
    call_refill: 1,
    return_refill: 2,
    pop_refill: 3,
    load: 2,
    pipelined: Some(1),
    address_interlock: 1,
    store: 1,
    store_register_offset: 2,
    load_writeback: 1,
    writeback_interlock: 1,
    writeback_load_pipelines: false,
    unaligned_wide_load_pipelines: false,
    store_then_load: 1,
    dual_issue: false,
    mispredict: 0,
    mul_result: 0,
    multi_by_pairs: false,
    load_use: 0,
    late_result: 0,
    pair: 3,
    multi: 1,
    mul: 1,
    mul_acc: 2,
    mul_long: 4,
    mul_long_acc: 5,
    div: 7,
    table_branch: 3,
    it: 1,
    fp_alu: 1,
    fp_mul_acc: 1,
    fp_div: 1,
    fp_load: 2,
    fp_store: 2,
    fp_multi: 1,
    fp_transfer: 1,
    barrier: 4,
    exception_entry: 12,
    exception_return: 10,
    tail_chain: TAIL_CHAIN,
};

/// Cortex-M4: as the M3, with single-cycle
/// long multiplies and DSP, a load that writes its base back pipelining after a load on
/// another base, and the FPU: arithmetic 1, multiply-accumulate 3, divide and
/// square root 14, `vldr`/`vstr` 2, `vldm`/`vstm`/`vpush`/`vpop` 1 + N.
static M4: Table = Table {
    writeback_load_pipelines: true,
    mul_long: 1,
    mul_long_acc: 1,
    fp_mul_acc: 3,
    fp_div: 14,
    ..M3
};

/// Cortex-M33 (a two-stage pipeline with a limited dual issue; none of it in a public table):
/// as measured on an RP2350 by jnk0le's pipeline tests. Single loads and stores 1 with a
/// load-to-use latency of 2, `ldrd`/`strd` 2, `ldm`/`stm` of N registers N, a taken branch 2,
/// results of inline-shifted operands, rotated immediates, extends-and-add, DSP arithmetic and
/// multiplies a cycle late, `it` folded into the instruction before.
static M33: Table = Table {
    refill: 1,
    unaligned_wide_target: 0,
    call_refill: 1,
    return_refill: 1,
    pop_refill: 2,
    load: 1,
    pipelined: None,
    address_interlock: 0,
    store: 1,
    store_register_offset: 1,
    load_writeback: 0,
    writeback_interlock: 0,
    writeback_load_pipelines: true,
    unaligned_wide_load_pipelines: true,
    store_then_load: 0,
    load_use: 1,
    late_result: 1,
    pair: 2,
    multi: 0,
    mul: 1,
    mul_acc: 1,
    mul_long: 1,
    mul_long_acc: 1,
    div: 7,
    table_branch: 3,
    it: 0,
    ..M4
};

/// Cortex-M7, approximated (no public table; the figures here follow jnk0le's pipeline tests
/// on an STM32H743): two instructions issue together unless both load, both store, both
/// multiply, a multiply meets a store, both are bit-field/DSP operations or both shift an
/// operand, either moves several words or divides, or the second reads the first's result
/// (a store's data excepted). Loads and stores 1, `ldrd`/`strd` 1, `ldm`/`stm` two words a
/// cycle, a multiply's result a cycle late, branches predicted: a conditional branch costs 8
/// each time it goes its less usual way, a return 1, `pop {.., pc}` 2. Caches and TCMs are
/// taken as hits.
static M7: Table = Table {
    refill: 0,
    unaligned_wide_target: 0,
    call_refill: 0,
    return_refill: 1,
    pop_refill: 2,
    load: 1,
    pipelined: Some(1),
    address_interlock: 0,
    store: 1,
    store_register_offset: 1,
    load_writeback: 0,
    writeback_interlock: 0,
    writeback_load_pipelines: true,
    unaligned_wide_load_pipelines: true,
    store_then_load: 0,
    dual_issue: true,
    mispredict: 8,
    mul_result: 1,
    multi_by_pairs: true,
    load_use: 0,
    late_result: 0,
    pair: 1,
    multi: 0,
    mul: 1,
    mul_acc: 1,
    mul_long: 1,
    mul_long_acc: 1,
    div: 7,
    table_branch: 2,
    it: 0,
    fp_alu: 1,
    fp_mul_acc: 1,
    fp_div: 14,
    fp_load: 1,
    fp_store: 1,
    fp_multi: 0,
    fp_transfer: 1,
    barrier: 4,
    exception_entry: 12,
    exception_return: 10,
    tail_chain: TAIL_CHAIN,
};
