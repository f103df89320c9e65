//! Time the sampler could not see. A sample due while a handler as urgent as the sampler runs
//! waits until that handler returns and is taken in the code it interrupted; sampler-rt finds
//! such samples by the pacing timer's count at entry (`wire::REC_HELD_OFF`) and marks them
//! (bit 0 of the PC). Here they become a row of their own, `[held off: HANDLER]`, whose share
//! estimates the hidden handlers' time, and the exact counts are split the same way (the
//! instructions those handlers ran go to that row), so that `--truth` compares like with like.
//!
//! A held-off sample that lands right after code unmasked interrupts (`cpsie i`, a write of
//! PRIMASK or BASEPRI) was held off by a critical section, not by a handler: that time is the
//! section's own, and the sample stays where it landed, in the function that unmasked (the
//! `masked-skid` finding names the region when such samples pile up there). One right after
//! `wfi`/`wfe` found the core waking up (QEMU moves its clock on while the core sleeps): idle
//! time, which the `asleep` finding names.

use crate::image::disasm::{Code, Kind};
use crate::image::symbolize::Symbolizer;

use super::model::{Diagnostic, Finding, Severity};

/// Where the held-off samples are counted: an address no code has (below `[sleeping]`'s).
pub const HELD_OFF_ADDRESS: u32 = 0xFFFF_FFC0;

/// Whether a row is the held-off row.
pub fn is_row(name: &str) -> bool {
    name.starts_with("[held off")
}

/// The row's name: the handlers that held the sampler off, when the priorities tell.
pub fn row_name(handlers: &[String]) -> String {
    if handlers.is_empty() {
        "[held off]".to_owned()
    } else {
        format!("[held off: {}]", handlers.join(", "))
    }
}

/// What placing the held-off samples did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Samples moved to the `[held off]` row.
    pub moved: u64,
    /// Late samples a critical section held off, left where they landed.
    pub masked: u64,
    /// Late samples the sampler's own handler held off (the period shorter than the handler
    /// at times): taken as it returned, in the same code as the sample before, left there.
    pub own: u64,
}

/// Move each marked sample of `ordered` (bit 0 set) to [`HELD_OFF_ADDRESS`], unless `masked`
/// says it landed right after code that unmasked interrupts, or, with `repeats_are_own`, it
/// repeats the sample before (the sampler held itself off); clear the mark either way.
pub fn place(
    ordered: &mut [u32],
    repeats_are_own: bool,
    mut masked: impl FnMut(u32) -> bool,
) -> Placed {
    let mut placed = Placed::default();
    let mut before = None;
    for pc in ordered.iter_mut() {
        let at = *pc & !1;
        let previous = before.replace(at);
        if *pc & 1 == 0 {
            continue;
        }
        // The sampler's interrupt came again while its handler ran (possible only when the
        // shortest period is about as long as the handler, `repeats_are_own`): it tail-chains
        // into the same exception frame, so the sample repeats the one before. That wait is
        // the sampler's own, not a hidden handler's.
        if repeats_are_own && previous == Some(at) {
            *pc = at;
            placed.own += 1;
        } else if masked(at) {
            *pc = at;
            placed.masked += 1;
        } else {
            *pc = HELD_OFF_ADDRESS;
            placed.moved += 1;
        }
    }
    placed
}

/// Whether the instruction before `pc` unmasks interrupts (or writes a mask register that can
/// hold off a sampler at `priority`), or sleeps (`wfi`, `wfe`): a sample held off until then
/// waited for a critical section, or for the core to wake. BASEPRI never masks priority 0.
pub fn follows_unmasking(sym: &Symbolizer, code: &mut Code, pc: u32, priority: u8) -> bool {
    let Some(range) = sym.range_of(pc as u64) else {
        return false;
    };
    let insns = code.of(range);
    let Some(idx) = insns.iter().position(|i| i.addr == pc) else {
        return false;
    };
    let Some(prev) = idx.checked_sub(1).map(|j| &insns[j]) else {
        return false;
    };
    match prev.kind {
        Kind::Unmask | Kind::Sleep => true,
        Kind::MaskWrite => {
            let text = prev.text.to_ascii_lowercase();
            !(text.contains("basepri") && (priority == 0 || text.contains("basepri_max")))
        }
        _ => false,
    }
}

/// Split exact per-address counts the way the samples are split: the instructions run inside
/// the `hidden` exceptions (`contexts`: exception, address, instructions) leave their address
/// for [`HELD_OFF_ADDRESS`]. The sampler's own code (`sampler`: its dump sent from inside an
/// application's handler, which `exit` may be called from) stays where it is: the comparison
/// leaves it out, as no sample is of it. Returns the instructions moved.
pub fn split_exact(
    exact: &mut Vec<(u32, u64)>,
    contexts: &[(u32, u32, u64)],
    hidden: &[u32],
    sampler: impl Fn(u32) -> bool,
) -> u64 {
    let moved = super::unseen::drop_hidden(exact, contexts, hidden, sampler);
    if moved > 0 {
        exact.push((HELD_OFF_ADDRESS, moved));
    }
    moved
}

/// The note that says what the row is, how it was found and what it leaves out.
pub fn note(row: &str, placed: Placed, total: u64, late_after: &str) -> Option<Diagnostic> {
    // Samples a critical section held off are where they belong (`masked-skid` speaks of them).
    if placed.moved == 0 {
        return None;
    }
    let share = 100.0 * placed.moved as f64 / total.max(1) as f64;
    let n = placed.moved + placed.masked + placed.own;
    let mut message = format!(
        "{n} {} taken more than {late_after} after the sampling timer expired: held off by \
         code the sampler could not preempt. {} ({share:.2} %) are the `{row}` row: the time of \
         handlers as urgent as the sampler, which no sample can see inside (a handler that ends \
         sooner than that after a sample came due is not told apart)",
        if n == 1 { "sample was" } else { "samples were" },
        placed.moved,
    );
    if placed.own > 0 {
        message.push_str(&format!(
            "; {} came due while the sampler's own handler still ran (a period shorter than \
             the handler at times) and stay where they landed",
            placed.own
        ));
    }
    if placed.masked > 0 {
        message.push_str("; ");
        message.push_str(&format!(
            "{} landed right after interrupts were unmasked and stay there: a critical \
             section's time is its own",
            placed.masked
        ));
    }
    Some(Diagnostic {
        kind: Finding::Unpreemptable,
        severity: Severity::Note,
        message,
        percent: Some(share),
        addresses: Vec::new(),
        functions: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_samples_move_unless_they_follow_unmasking_or_repeat_the_sample_before() {
        let mut own = vec![0x100, 0x101, 0x104];
        let placed = place(&mut own, true, |_| false);
        assert_eq!(own, vec![0x100, 0x100, 0x104]);
        assert_eq!(placed.own, 1);
        // With periods far longer than the handler a repeat is a tight loop sampled twice.
        let mut own = vec![0x100, 0x101];
        assert_eq!(place(&mut own, false, |_| false).moved, 1);
        let mut pcs = vec![0x100, 0x105, 0x200, 0x301, 0x100];
        let placed = place(&mut pcs, true, |pc| pc == 0x300);
        assert_eq!(pcs, vec![0x100, HELD_OFF_ADDRESS, 0x200, 0x300, 0x100]);
        assert_eq!(
            placed,
            Placed {
                moved: 1,
                masked: 1,
                own: 0
            }
        );
    }

    #[test]
    fn exact_counts_of_hidden_exceptions_move_to_the_row() {
        let mut exact = vec![(0x100, 50), (0x200, 30), (0x300, 20)];
        // Exception 15 ran 0x300 (all of it) and part of the shared 0x200; 16 is visible.
        let contexts = [
            (0, 0x100, 50),
            (15, 0x300, 20),
            (15, 0x200, 10),
            (16, 0x200, 5),
        ];
        let moved = split_exact(&mut exact.clone(), &contexts, &[15], |_| false);
        assert_eq!(moved, 30);
        // The sampler's own code (0x300 here: its dump sent from the handler) stays put.
        let moved = split_exact(&mut exact, &contexts, &[15], |pc| pc == 0x300);
        assert_eq!(moved, 10);
        exact.sort();
        assert_eq!(
            exact,
            vec![
                (0x100, 50),
                (0x200, 20),
                (0x300, 20),
                (HELD_OFF_ADDRESS, 10)
            ]
        );
        assert_eq!(exact.iter().map(|e| e.1).sum::<u64>(), 100);
    }

    #[test]
    fn the_row_names_the_handlers() {
        assert_eq!(row_name(&[]), "[held off]");
        assert_eq!(row_name(&["SysTick".into()]), "[held off: SysTick]");
    }
}
