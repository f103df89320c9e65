//! Dual issue (the Cortex-M7): which neighbouring instructions can share a cycle, and how
//! many of a run's executions did.
//!
//! Each instruction may issue with the one before it in memory when the pair is allowed
//! ([`pairs`]) and the one before was not itself the second of a pair. Counts make this an
//! expectation: of an instruction's executions, those that followed the one before (at most
//! the smaller count; a conditional branch's fall-throughs only) and found it free.

use std::collections::HashMap;

use super::ops::{Class, Op};

/// Whether `young` can issue in the same cycle as `old`, the instruction just before it.
pub fn pairs(old: &Op, young: &Op) -> bool {
    use Class::*;
    let alone = |c: Class| {
        matches!(
            c,
            LoadPair
                | StorePair
                | LoadMulti
                | StoreMulti
                | FpLoadMulti
                | FpStoreMulti
                | Div
                | Barrier
                | TableBranch
                | FpDivSqrt
                | Sleep
                | Data
        )
    };
    if alone(old.class) || alone(young.class) || (old.writes_pc && !old.conditional) {
        return false;
    }
    let load = |c: Class| matches!(c, Load | FpLoad);
    let store = |c: Class| matches!(c, Store | FpStore);
    let mul = |c: Class| matches!(c, Mul | MulAcc | MulLong | MulLongAcc);
    let fp = |c: Class| matches!(c, FpAlu | FpMulAcc);
    let both = |f: &dyn Fn(Class) -> bool| f(old.class) && f(young.class);
    if both(&load) || both(&store) || both(&mul) || both(&fp) {
        return false;
    }
    if (mul(old.class) && store(young.class)) || (store(old.class) && mul(young.class)) {
        return false;
    }
    if (old.bitfield && young.bitfield) || (old.shifted && young.shifted) {
        return false;
    }
    // The second may not need the first's result, except as the data it stores.
    if let Some(d) = old.dest
        && young.reads & (1 << d) != 0
        && young.store_data != Some(d)
    {
        return false;
    }
    true
}

/// One executed instruction as the pairing sees it.
pub struct Slot {
    pub addr: u32,
    pub size: u8,
    pub count: u64,
    pub op: Option<Op>,
    /// For a conditional branch: how often it fell through.
    pub fell_through: Option<u64>,
}

/// Executions of each address that issued as the second of a pair (each saves its cycle).
pub fn paired(mut slots: Vec<Slot>) -> HashMap<u32, f64> {
    slots.sort_unstable_by_key(|s| s.addr);
    let mut out = HashMap::new();
    // The instruction just before, with how many of its executions were free to lead a pair.
    let mut before: Option<(u32, Op, f64)> = None;
    for s in &slots {
        let mut second = 0.0;
        if let (Some((end, old, free)), Some(op)) = (before, s.op)
            && end == s.addr
            && pairs(&old, &op)
        {
            second = free.min(s.count as f64);
        }
        if second > 0.0 {
            out.insert(s.addr, second);
        }
        before = s.op.map(|op| {
            let leads = s.count as f64 - second;
            let leads = match s.fell_through {
                Some(n) => leads.min(n as f64),
                None => leads,
            };
            (s.addr + u32::from(s.size), op, leads)
        });
    }
    out
}
