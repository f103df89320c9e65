//! The time no sample could see, in `--truth`'s comparison. The exact count starts at reset
//! and follows every handler, but a sample can only fall after the sampler started and
//! outside handlers it cannot preempt. What ran before `start()` (start-up code, `.bss`
//! zeroing, the application's set-up) leaves the comparison. The time of a handler the
//! sampler cannot preempt, when no sample could be told held off by it, is counted where the
//! handler returned: a sample that came due inside it waits and is taken there, in the code
//! it interrupted (which it interrupts at no random point: RTIC's monotonic runs when a task
//! pends it). Both are said on a line of their own.

use std::collections::HashMap;

use serde::Serialize;

/// What the exact count held that the comparison leaves out, in instructions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unseen {
    /// Before the firmware started its sampler (the firmware's, sampler-rt's own left out).
    pub before_start: u64,
    /// Handlers as urgent as the sampler, when no sample could be told held off by them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<HiddenTime>,
}

/// A handler's time the sampler could not see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HiddenTime {
    pub name: String,
    pub instructions: u64,
    /// Counted where it returned (the run kept where each exception returned); else left
    /// out of the comparison.
    pub landed: bool,
}

impl Unseen {
    pub fn is_empty(&self) -> bool {
        self.before_start == 0 && self.hidden.is_empty()
    }

    /// The lines the text report prints, each part with its share of the whole count
    /// (`compared`: the instructions the comparison holds, landed time included).
    pub fn lines(&self, compared: u64) -> Vec<String> {
        let left_out: u64 = self.before_start
            + self
                .hidden
                .iter()
                .filter(|h| !h.landed)
                .map(|h| h.instructions)
                .sum::<u64>();
        let all = (compared + left_out).max(1) as f64;
        let pct = |n: u64| 100.0 * n as f64 / all;
        let mut out = Vec::new();
        if self.before_start > 0 {
            out.push(format!(
                "not compared: {} instructions ({:.2} %) before the sampler started",
                self.before_start,
                pct(self.before_start)
            ));
        }
        for h in &self.hidden {
            out.push(if h.landed {
                format!(
                    "{} ({} instructions, {:.2} %), which the sampler cannot preempt, is counted \
                     where it returned, as the samples that came due inside it are",
                    h.name,
                    h.instructions,
                    pct(h.instructions)
                )
            } else {
                format!(
                    "not compared: {} instructions ({:.2} %) in {}, which the sampler cannot \
                     preempt",
                    h.instructions,
                    pct(h.instructions),
                    h.name
                )
            });
        }
        out
    }
}

/// Take the counts `before` (what ran before the sampler started) out of `exact`; returns the
/// instructions taken that were not sampler-rt's own (`sampler`).
pub fn subtract_before(
    exact: &mut Vec<(u32, u64)>,
    before: &[(u32, u64)],
    sampler: impl Fn(u32) -> bool,
) -> u64 {
    let before: HashMap<u32, u64> = before.iter().copied().collect();
    let mut taken = 0;
    for (pc, n) in exact.iter_mut() {
        if let Some(&b) = before.get(pc) {
            let b = b.min(*n);
            *n -= b;
            if !sampler(*pc & !1) {
                taken += b;
            }
        }
    }
    exact.retain(|&(_, n)| n > 0);
    taken
}

/// Take the instructions run inside the `hidden` exceptions (`contexts`: exception, address,
/// instructions) out of `exact`; returns how many there were, sampler-rt's own left where
/// they are (the comparison leaves them out anyway).
pub fn drop_hidden(
    exact: &mut Vec<(u32, u64)>,
    contexts: &[(u32, u32, u64)],
    hidden: &[u32],
    sampler: impl Fn(u32) -> bool,
) -> u64 {
    let mut inside: HashMap<u32, u64> = HashMap::new();
    for &(exception, pc, n) in contexts {
        if hidden.contains(&exception) && !sampler(pc & !1) {
            *inside.entry(pc & !1).or_default() += n;
        }
    }
    let mut dropped = 0;
    for (pc, n) in exact.iter_mut() {
        if let Some(&m) = inside.get(&(*pc & !1)) {
            let m = m.min(*n);
            *n -= m;
            dropped += m;
        }
    }
    exact.retain(|&(_, n)| n > 0);
    dropped
}

/// Count the instructions of the `exceptions` where they returned (`landings`: exception,
/// context exception, address, instructions) in `exact`; returns the instructions counted,
/// and per context (what ran where they returned, 0 thread mode) how many.
pub fn land_hidden(
    exact: &mut Vec<(u32, u64)>,
    landings: &[(u32, u32, u32, u64)],
    exceptions: &[u32],
) -> (u64, HashMap<u32, u64>) {
    let mut add: HashMap<u32, u64> = HashMap::new();
    let mut contexts: HashMap<u32, u64> = HashMap::new();
    for &(exception, context, pc, n) in landings {
        if exceptions.contains(&exception) {
            *add.entry(pc & !1).or_default() += n;
            *contexts.entry(context).or_default() += n;
        }
    }
    let total = add.values().sum();
    for (pc, n) in exact.iter_mut() {
        if let Some(m) = add.remove(&(*pc & !1)) {
            *n += m;
        }
    }
    exact.extend(add);
    exact.sort_unstable();
    (total, contexts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ran_before_start_is_taken_out_address_by_address() {
        let mut exact = vec![(0x100, 10), (0x104, 5), (0x200, 7), (0x300, 3)];
        // 0x300 is the sampler's own: taken out, not counted.
        let before = [(0x100, 10), (0x200, 2), (0x300, 3), (0x400, 9)];
        let taken = subtract_before(&mut exact, &before, |pc| pc == 0x300);
        assert_eq!(exact, vec![(0x104, 5), (0x200, 5)]);
        assert_eq!(taken, 12);
    }

    #[test]
    fn a_hidden_handlers_instructions_leave_the_count() {
        let mut exact = vec![(0x100, 10), (0x200, 8), (0x300, 4)];
        // Exception 15 ran 0x200 six times and 0x300 (the sampler's) four times; 0x200 also
        // ran twice in thread mode.
        let contexts = [(15, 0x200, 6), (15, 0x300, 4), (16, 0x100, 1)];
        let dropped = drop_hidden(&mut exact, &contexts, &[15], |pc| pc == 0x300);
        assert_eq!(dropped, 6);
        assert_eq!(exact, vec![(0x100, 10), (0x200, 2), (0x300, 4)]);
    }

    #[test]
    fn a_hidden_handlers_time_lands_where_it_returned() {
        let mut exact = vec![(0x100, 10), (0x200, 8)];
        // Exception 15 returned to 0x200 in thread mode (5) and to 0x300 inside IRQ 7 (2);
        // exception 16 is not hidden.
        let landings = [(15, 0, 0x200, 5), (15, 23, 0x300, 2), (16, 0, 0x100, 9)];
        let (n, contexts) = land_hidden(&mut exact, &landings, &[15]);
        assert_eq!(n, 7);
        assert_eq!(exact, vec![(0x100, 10), (0x200, 13), (0x300, 2)]);
        assert_eq!(contexts, HashMap::from([(0, 5), (23, 2)]));
    }

    #[test]
    fn the_lines_give_each_part_and_its_share_of_the_whole_count() {
        let mut u = Unseen {
            before_start: 70_356,
            hidden: vec![HiddenTime {
                name: "SysTick".into(),
                instructions: 59_911,
                landed: false,
            }],
        };
        let compared = 20_000_000 - 70_356 - 59_911;
        assert_eq!(
            u.lines(compared),
            [
                "not compared: 70356 instructions (0.35 %) before the sampler started",
                "not compared: 59911 instructions (0.30 %) in SysTick, which the sampler cannot \
                 preempt"
            ]
        );
        u.hidden[0].landed = true;
        assert_eq!(
            u.lines(compared + 59_911)[1],
            "SysTick (59911 instructions, 0.30 %), which the sampler cannot preempt, is counted \
             where it returned, as the samples that came due inside it are"
        );
        assert!(Unseen::default().is_empty());
    }
}
