//! The samples a report is built from: in the order taken, per address, with their tags and
//! the marks of samples the sampler found held off.

use std::collections::HashMap;

use super::Diagnostic;
use super::held_off;
use crate::dump::Dump;

/// The samples a report is built from.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Every sample's address in the order taken, when known (a dump, a raw text dump).
    pub ordered: Vec<u32>,
    /// Samples per address.
    pub per_pc: HashMap<u32, u64>,
    /// A tag per sample, parallel to `ordered` (the running task, handler or RTOS object).
    pub tags: Vec<u32>,
    /// Names of the tags (others are named by the symbol they point to, or in hex).
    pub tag_names: HashMap<u32, String>,
    /// Exact instructions per tag, sampler-rt's own excluded, when the run counted them (the
    /// exception that ran each instruction, from QEMU's exec and interrupt logs).
    pub exact_by_tag: HashMap<u32, u64>,
    /// Whether the addresses stand for address ranges (histogram bins): no analysis of single
    /// instructions then.
    pub binned: bool,
    /// Findings made while reading the samples (e.g. bins shared by several functions).
    pub findings: Vec<Diagnostic>,
    /// The image's handlers as urgent as the sampler or more (`NAME at 0xPP`), when the
    /// firmware sent the priorities: what can hold a sample off.
    pub urgent: Option<Vec<String>>,
    /// Per sample in `ordered`, whether the sampler found it held off (empty when it did not
    /// check).
    pub late: Vec<bool>,
}

impl Samples {
    /// The samples of a dump, in order.
    pub fn of_dump(dump: &Dump) -> Samples {
        let ordered: Vec<u32> = dump.pcs.iter().map(|pc| pc & !1).collect();
        let mut per_pc: HashMap<u32, u64> = HashMap::new();
        for &pc in &ordered {
            *per_pc.entry(pc).or_default() += 1;
        }
        // Samples the sampler found held off carry bit 0 (see `held_off`).
        let late = if dump.held_off.is_some_and(|h| h.checked()) && dump.hist.is_none() {
            dump.pcs.iter().map(|pc| pc & 1 != 0).collect()
        } else {
            Vec::new()
        };
        Samples {
            ordered,
            per_pc,
            late,
            ..Samples::default()
        }
    }

    /// Move the samples marked late to the held-off row (see [`held_off::place`]).
    pub fn place_held_off(
        &mut self,
        repeats_are_own: bool,
        masked: impl FnMut(u32) -> bool,
    ) -> held_off::Placed {
        if self.late.len() != self.ordered.len() {
            return held_off::Placed::default();
        }
        let mut marked: Vec<u32> = self
            .ordered
            .iter()
            .zip(&self.late)
            .map(|(&pc, &late)| pc | u32::from(late))
            .collect();
        let placed = held_off::place(&mut marked, repeats_are_own, masked);
        self.ordered = marked;
        self.per_pc.clear();
        for &pc in &self.ordered {
            *self.per_pc.entry(pc).or_default() += 1;
        }
        placed
    }

    pub fn total(&self) -> u64 {
        self.per_pc.values().sum()
    }
}
