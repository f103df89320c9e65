//! Cycles from exact instruction counts: a timing model of each Cortex-M core applied to what
//! QEMU executed.
//!
//! QEMU counts instructions; a core spends cycles. The model charges each executed
//! instruction its cycles on the chosen core ([`cores`]), from what the exact counts already
//! tell, without another run:
//!
//! - the base cost of its class (a load 2, `pop` of N registers 1 + N, a multiply-accumulate
//!   2, a floating-point divide 14...);
//! - a single load or store right after a single load costs 1 where the core pipelines them:
//!   the load before it always falls through to it, so the count of such pairs is the load's
//!   count; a store before a load costs one more, and so does a load that writes its base
//!   back, or an access through a base the instruction before computed or wrote back;
//! - a pipeline refill whenever the PC is written: every `b`, `bl`, `bx`, `pop {pc}`, and a
//!   conditional branch (`bne`, `cbz`) when taken. How often a conditional branch was taken is
//!   its count less the times the next instruction was reached from it, which is the next
//!   instruction's count less its arrivals from the branches and calls that target it
//!   (solved over all of them; arrivals through a register, such as a jump table's, are not
//!   known and read as fall-throughs). A 32-bit target that straddles a word costs one more
//!   fetch on the M3, M4 and M33;
//! - each exception's entry and return, which run no instruction (the handler's first
//!   instruction's count less its direct calls), and for an entry tail-chained or arriving
//!   late (which the plugin records) a tail-chain instead of a return and an entry;
//! - with `--wait-states N`, flash (code below 0x2000_0000) costs N more on every refill when
//!   the prefetch buffer hides sequential fetches, else N per 32-bit word fetched.
//!
//! What it cannot know it says: divides take the middle of their 2-12 cycles (the operands
//! decide), sleeping costs one cycle, and the M7's dual issue and caches are not modelled.

pub mod cores;
pub mod dual;
pub mod ops;

use std::collections::HashMap;

pub use cores::Core;
use ops::{Class, Op};

use crate::image::disasm::{Code, Insn, Kind};

/// The timing model asked for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Model {
    pub core: Core,
    /// Flash wait states (0: code runs at the core's speed).
    pub wait_states: u32,
    /// A prefetch buffer or flash accelerator hides sequential fetches (only refills wait).
    pub prefetch: bool,
    /// Code that runs from RAM although it sits below 0x2000_0000 (copied there at startup:
    /// see [`crate::image::elf::copied_code`]): no wait states.
    #[serde(default)]
    pub ram_code: Vec<(u32, u32)>,
}

impl Model {
    /// Whether code at `pc` is fetched from flash (and waits its wait states): the Cortex-M
    /// code region, below 0x2000_0000, except code copied to RAM at startup.
    pub fn in_flash(&self, pc: u32) -> bool {
        pc < 0x2000_0000 && !self.ram_code.iter().any(|&(a, b)| (a..b).contains(&pc))
    }

    /// `cortex-m4, 0 wait states` for the report's header.
    pub fn describe(&self) -> String {
        let ws = match (self.wait_states, self.prefetch) {
            (0, _) => "flash at 0 wait states".to_owned(),
            (n, true) => format!("flash at {n} wait state{} with prefetch", plural(n)),
            (n, false) => format!("flash at {n} wait state{} without prefetch", plural(n)),
        };
        let ram: u32 = self.ram_code.iter().map(|&(a, b)| b - a).sum();
        let ram = if self.wait_states > 0 && ram > 0 {
            format!(", {ram} bytes of code run from RAM")
        } else {
            String::new()
        };
        format!("{} timing, {ws}{ram}", self.core)
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The model's answer for one run.
#[derive(Debug, Default, Clone)]
pub struct Estimate {
    /// Estimated cycles per executed address.
    pub per_pc: HashMap<u32, u64>,
    pub cycles: u64,
    pub instructions: u64,
    /// Executed divides (their cycles are the middle of the range).
    pub divides: u64,
    /// Exception entries charged.
    pub exceptions: u64,
    /// Of those, the entries tail-chained or arriving late (charged a tail-chain instead of a
    /// return and an entry); `None` when the run did not record how handlers were entered.
    pub chained: Option<u64>,
    /// Executed `wfi`/`wfe` (the time asleep is not counted).
    pub sleeps: u64,
    /// Conditional branches' executions and how many were taken.
    pub conditional: (u64, u64),
    /// Mnemonics the model does not know, with their executions (charged one cycle).
    pub unknown: Vec<(String, u64)>,
    /// Per executed address: its size and its mean cycles an execution.
    pub each: HashMap<u32, (u8, f64)>,
    /// Addresses whose instruction writes the PC (a block ends there).
    pub ends_block: std::collections::HashSet<u32>,
}

impl Estimate {
    /// Cycles per instruction over the run.
    pub fn cpi(&self) -> f64 {
        self.cycles as f64 / self.instructions.max(1) as f64
    }

    /// Estimated cycles of `n` instructions run from the block that starts at `start` (a
    /// call graph's count): the block runs on to its first write of the PC, and `n` of its
    /// instructions cost `n` times its mean cycles an instruction.
    pub fn block_cycles(&self, start: u32, n: u64) -> u64 {
        let (mut pc, mut len, mut sum) = (start & !1, 0u32, 0.0);
        while let Some(&(size, cyc)) = self.each.get(&pc) {
            len += 1;
            sum += cyc;
            if self.ends_block.contains(&pc) || len >= 512 {
                break;
            }
            pc += u32::from(size);
        }
        if len == 0 {
            return n;
        }
        (n as f64 * sum / f64::from(len)).round() as u64
    }

    /// What the figures do not capture, worth saying beside them.
    pub fn caveats(&self, model: &Model) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(a) = model.core.approximate() {
            v.push(a.to_owned());
        }
        if self.divides > 0 {
            v.push(format!(
                "{} divides are charged the middle of their 2-12 cycles (the operands, which \
                 decide, are not read)",
                self.divides
            ));
        }
        if self.sleeps > 0 {
            v.push(format!(
                "{} `wfi`/`wfe` counted as one cycle each: time asleep is not in the figures",
                self.sleeps
            ));
        }
        if self.exceptions > 0 && self.chained.is_none() {
            v.push(format!(
                "{} exception entries are each charged a full entry and return: this run did not \
                 record which were tail-chained (QEMU's exec log, or a run by an older \
                 cargo-sample)",
                self.exceptions
            ));
        }
        let unknown: u64 = self.unknown.iter().map(|u| u.1).sum();
        if unknown > 0 {
            let names: Vec<&str> = self.unknown.iter().take(5).map(|u| u.0.as_str()).collect();
            v.push(format!(
                "{} executions of instructions without a timing ({}) are charged one cycle",
                unknown,
                names.join(", ")
            ));
        }
        v
    }
}

/// One executed instruction, decoded.
struct Seen {
    op: Option<Op>,
    insn: Insn,
    count: u64,
}

/// Estimate the cycles of a run from its exact per-address counts.
///
/// `handlers` are the vector table's handler entries (exceptions enter there); `spared`, per
/// handler, how many of its entries were tail-chained or arrived late (each costs a
/// tail-chain instead of a return and an entry), when the run recorded it.
pub fn estimate(
    code: &Code,
    counts: &HashMap<u32, u64>,
    handlers: &[u32],
    spared: Option<&HashMap<u32, u64>>,
    model: &Model,
) -> Estimate {
    let t = model.core.table();
    let mut seen: HashMap<u32, Seen> = HashMap::with_capacity(counts.len());
    let mut unknown: HashMap<String, u64> = HashMap::new();
    for (&pc, &count) in counts {
        if count == 0 {
            continue;
        }
        let insn = code.one(pc).unwrap_or(Insn {
            addr: pc,
            size: 2,
            text: "?".into(),
            kind: Kind::Data,
            target: None,
        });
        let op = if insn.kind == Kind::Data {
            None
        } else {
            let (m, o) = insn.text.split_once(' ').unwrap_or((&insn.text, ""));
            let op = ops::decode(m, o);
            if op.is_none() {
                *unknown.entry(m.to_owned()).or_default() += count;
            }
            op
        };
        seen.insert(pc, Seen { op, insn, count });
    }
    let count_of = |pc: u32| seen.get(&pc).map(|s| s.count).unwrap_or(0);
    // Arrivals by direct branch or call, per target.
    let mut into: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pc, s) in &seen {
        if let (Some(target), Some(op)) = (s.insn.target, s.op)
            && matches!(op.class, Class::Branch | Class::Call | Class::CompareBranch)
        {
            into.entry(target & !1).or_default().push(pc);
        }
    }
    let taken = solve_taken(&seen, &into, count_of);

    let mut est = Estimate::default();
    let mut per_pc_f: HashMap<u32, f64> = HashMap::with_capacity(seen.len());
    for (&pc, s) in &seen {
        est.instructions += s.count;
        let c = s.count as f64;
        let Some(op) = s.op else {
            per_pc_f.insert(pc, c);
            continue;
        };
        let mut cycles = c * f64::from(t.base(&op));
        let prev = previous(&seen, pc);
        // The instruction before it wrote a register this one's address is made of.
        let depends = |o: &Op| o.dest.is_some() && op.address.contains(&o.dest);
        // ... or the base register it wrote back.
        let after_writeback = |o: &Op| o.writeback && op.address.contains(&o.address[0]);
        let prev_op = prev.and_then(|p| p.op);
        // Pipelined after a single load (whose result is not this address).
        if let (Some(p), Some(prev), Some(o)) = (t.pipelined, prev, prev_op)
            && matches!(op.class, Class::Load | Class::Store)
            && !op.writes_pc
            && o.class == Class::Load
            && !o.writes_pc
            && !depends(&o)
            && !(after_writeback(&o) && t.writeback_interlock > 0)
            && (!op.writeback || t.writeback_load_pipelines)
            // A 32-bit load that straddles a word of code may not pipeline (measured).
            && (t.unaligned_wide_load_pipelines || !(op.class == Class::Load && s.insn.size == 4 && pc % 4 == 2))
        {
            let pairs = prev.count.min(s.count) as f64;
            cycles -= pairs * f64::from(t.base(&op).saturating_sub(p));
        }
        // An address made from the result of the data processing just before waits a cycle for
        // the register bank (no forwarding path on the M3 and M4).
        if t.address_interlock > 0
            && let (Some(prev), Some(o)) = (prev, prev_op)
            && op.class.accesses_memory()
            && matches!(o.class, Class::Alu | Class::Mul | Class::MulAcc)
            && depends(&o)
        {
            cycles += prev.count.min(s.count) as f64 * f64::from(t.address_interlock);
        }
        // An address from a base written back just before waits the same way (a load that
        // writes back again pays its own cost below instead).
        if t.writeback_interlock > 0
            && let (Some(prev), Some(o)) = (prev, prev_op)
            && op.class.accesses_memory()
            && matches!(o.class, Class::Load | Class::Store)
            && after_writeback(&o)
            && !(op.class == Class::Load && op.writeback)
        {
            cycles += prev.count.min(s.count) as f64 * f64::from(t.writeback_interlock);
        }
        // A result the instruction before has not finished: a load's (load-to-use), or a late
        // one (a shifted operand's, a multiply's).
        if let (Some(prev), Some(o)) = (prev, prev_op)
            && let Some(d) = o.dest
            && op.reads & (1 << d) != 0
            && op.store_data != Some(d)
        {
            let accumulates = matches!(op.class, Class::MulAcc | Class::MulLongAcc);
            let multiply = matches!(
                o.class,
                Class::Mul | Class::MulAcc | Class::MulLong | Class::MulLongAcc
            );
            let wait = if o.class == Class::Load {
                t.load_use
            } else if multiply && !accumulates && t.mul_result > 0 {
                t.mul_result
            } else if o.late && !accumulates {
                t.late_result
            } else {
                0
            };
            cycles += prev.count.min(s.count) as f64 * f64::from(wait);
        }
        // A load that writes its base back takes a cycle more (its own interlock, above, is
        // this one).
        if op.class == Class::Load && op.writeback {
            cycles += c * f64::from(t.load_writeback);
        }
        // A store holds a load that follows it.
        if t.store_then_load > 0
            && matches!(op.class, Class::Store | Class::StorePair)
            && let Some(next) = seen.get(&(pc + u32::from(s.insn.size)))
            && next.op.is_some_and(|o| {
                matches!(o.class, Class::Load | Class::LoadPair | Class::LoadMulti)
            })
        {
            cycles += next.count.min(s.count) as f64 * f64::from(t.store_then_load);
        }
        // Refills.
        let target_extra = |target: Option<u32>| -> u32 {
            let wide_unaligned = target
                .and_then(|a| seen.get(&(a & !1)))
                .is_some_and(|x| x.insn.size == 4 && x.insn.addr % 4 != 0);
            if wide_unaligned {
                t.unaligned_wide_target
            } else {
                0
            }
        };
        let refills: (f64, u32) = if !op.writes_pc {
            (0.0, 0)
        } else {
            match op.class {
                Class::Branch | Class::CompareBranch if op.conditional => {
                    let n = taken.get(&pc).copied().unwrap_or(s.count);
                    est.conditional.0 += s.count;
                    est.conditional.1 += n;
                    if t.mispredict > 0 {
                        // Predicted its usual way: the other way costs.
                        (n.min(s.count - n) as f64, t.mispredict)
                    } else {
                        (n as f64, t.refill + target_extra(s.insn.target))
                    }
                }
                Class::Branch | Class::CompareBranch => (c, t.refill + target_extra(s.insn.target)),
                Class::Call => (c, t.call_refill + target_extra(s.insn.target)),
                Class::TableBranch | Class::LoadMulti | Class::Load => (c, t.pop_refill),
                _ => (c, t.return_refill),
            }
        };
        cycles += refills.0 * f64::from(refills.1);
        // Flash wait states.
        if model.wait_states > 0 && model.in_flash(pc) {
            let ws = f64::from(model.wait_states);
            cycles += if model.prefetch {
                refills.0 * ws
            } else {
                c * ws * f64::from(s.insn.size) / 4.0
            };
        }
        if op.writes_pc {
            est.ends_block.insert(pc);
        }
        match op.class {
            Class::Div => est.divides += s.count,
            Class::Sleep => est.sleeps += s.count,
            _ => {}
        }
        per_pc_f.insert(pc, cycles);
    }
    // Dual issue: the second of a pair costs no cycle of its own.
    if t.dual_issue {
        let slots = seen
            .iter()
            .map(|(&pc, s)| dual::Slot {
                addr: pc,
                size: s.insn.size,
                count: s.count,
                op: s.op,
                fell_through: s
                    .op
                    .filter(|o| o.conditional)
                    .map(|_| s.count - taken.get(&pc).copied().unwrap_or(s.count).min(s.count)),
            })
            .collect();
        for (pc, n) in dual::paired(slots) {
            if let Some(c) = per_pc_f.get_mut(&pc) {
                *c = (*c - n).max(0.0);
            }
        }
    }
    // Exceptions: entries at each handler less its direct calls.
    let mut handlers: Vec<u32> = handlers.iter().map(|h| h & !1).collect();
    handlers.sort_unstable();
    handlers.dedup();
    for h in handlers {
        let direct: u64 = into
            .get(&h)
            .map(|v| {
                v.iter()
                    .filter(|&&j| seen[&j].op.is_some_and(|o| o.class == Class::Call))
                    .map(|&j| count_of(j))
                    .sum()
            })
            .unwrap_or(0);
        let entries = count_of(h).saturating_sub(direct);
        if entries > 0 {
            let full = t.exception_entry + t.exception_return;
            let chained = spared.map_or(0, |m| m.get(&h).copied().unwrap_or(0).min(entries));
            est.exceptions += entries;
            est.chained = spared.map(|_| est.chained.unwrap_or(0) + chained);
            *per_pc_f.entry(h).or_default() += entries as f64 * f64::from(full)
                - chained as f64 * f64::from(full.saturating_sub(t.tail_chain));
        }
    }
    if spared.is_some() && est.chained.is_none() {
        est.chained = Some(0);
    }
    for (pc, f) in per_pc_f {
        let v = f.round().max(0.0) as u64;
        let s = &seen[&pc];
        est.each
            .insert(pc, (s.insn.size, f / s.count.max(1) as f64));
        est.cycles += v;
        est.per_pc.insert(pc, v);
    }
    let mut unknown: Vec<(String, u64)> = unknown.into_iter().collect();
    unknown.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    est.unknown = unknown;
    est
}

/// The instruction just before `pc` in memory, if it executed.
fn previous(seen: &HashMap<u32, Seen>, pc: u32) -> Option<&Seen> {
    let two = pc.checked_sub(2).and_then(|a| seen.get(&a));
    if let Some(s) = two
        && s.insn.size == 2
    {
        return Some(s);
    }
    pc.checked_sub(4)
        .and_then(|a| seen.get(&a))
        .filter(|s| s.insn.size == 4)
}

/// Times each conditional branch was taken: its count less its fall-throughs, which are the
/// next instruction's count less the arrivals there from other branches and calls. Those
/// arrivals depend on other conditional branches, so the solution is iterated to a fixed point
/// (a few rounds; chains of branches into each other's fall-through are short).
fn solve_taken(
    seen: &HashMap<u32, Seen>,
    into: &HashMap<u32, Vec<u32>>,
    count_of: impl Fn(u32) -> u64,
) -> HashMap<u32, u64> {
    let conditional: Vec<u32> = seen
        .iter()
        .filter(|(_, s)| s.op.is_some_and(|o| o.conditional))
        .map(|(&pc, _)| pc)
        .collect();
    let mut taken: HashMap<u32, u64> = HashMap::with_capacity(conditional.len());
    for _round in 0..8 {
        let mut changed = false;
        for &b in &conditional {
            let s = &seen[&b];
            let next = b + u32::from(s.insn.size);
            let others: u64 = into
                .get(&next)
                .map(|v| {
                    v.iter()
                        .filter(|&&j| j != b)
                        .map(|&j| {
                            let o = seen[&j].op;
                            if o.is_some_and(|o| o.conditional) {
                                taken.get(&j).copied().unwrap_or(0)
                            } else {
                                count_of(j)
                            }
                        })
                        .sum()
                })
                .unwrap_or(0);
            let through = count_of(next).saturating_sub(others).min(s.count);
            let t = s.count - through;
            if taken.insert(b, t) != Some(t) {
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    taken
}

#[cfg(test)]
mod tests;
