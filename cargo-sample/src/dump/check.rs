//! A dump whose checksum fails: which stretches its CHECK records still vouch for, and what
//! the records outside them gave, taken out again.

use sampler_rt::wire;

use super::Dump;

/// Where a record lay in the dump and which samples it gave.
pub(super) struct Span {
    pub bytes: std::ops::Range<usize>,
    pub kind: u16,
    pub samples: std::ops::Range<usize>,
}

/// The byte ranges whose checkpoint does not vouch for them: from one CHECK record (or the
/// file's start) to the next one, the next one included. When the stretch after a failed
/// checkpoint checks out from the CRC computed up to it, only the checkpoint's own value was
/// damaged: then just that record is named. `checks` are the CHECK records' offsets and
/// values; `end` the END record's offset and value.
pub(super) fn damaged_ranges(
    bytes: &[u8],
    checks: &[(usize, u32)],
    end: (usize, u32),
) -> Vec<std::ops::Range<usize>> {
    let points: Vec<(usize, u32)> = checks.iter().copied().chain([end]).collect();
    // The CRC register after everything before `at`, from `from`'s register on.
    let register = |from: (usize, u32), at: usize| {
        let mut c = wire::Crc32::resume(from.1);
        c.update(&bytes[from.0..at]);
        c.state()
    };
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut add = |r: std::ops::Range<usize>| match out.last_mut() {
        Some(last) if last.end >= r.start => last.end = last.end.max(r.end),
        _ => out.push(r),
    };
    let record_end = |at: usize| (at + wire::RECORD_HEADER_LEN + 4).min(bytes.len());
    let mut from = (0usize, wire::Crc32::new().state());
    for (i, &(at, stored)) in points.iter().enumerate() {
        let computed = register(from, at);
        if !computed == stored {
            from = (at, computed);
            continue;
        }
        // The next stretch begins with this CHECK record: CRC it with the value it should hold.
        let header = at + wire::RECORD_HEADER_LEN;
        let corrected = {
            let mut c = wire::Crc32::resume(computed);
            c.update(&bytes[at..header]);
            c.update(&(!computed).to_le_bytes());
            (header + 4, c.state())
        };
        let value_only = points.get(i + 1).is_some_and(|&(next, value)| {
            next >= corrected.0 && !register(corrected, next) == value
        });
        if value_only {
            add(at..record_end(at));
            from = corrected;
        } else {
            add(from.0..record_end(at));
            from = (at, !stored);
        }
    }
    out
}

/// Take out of `dump` what the records in `damaged` gave: their samples (returned as a count)
/// and whatever else they held. `None` when the damage is in what the rest depends on: an
/// INFO record (the first stretch holds the file header and the first INFO).
pub(super) fn leave_out(
    dump: &mut Dump,
    spans: &[Span],
    damaged: &[std::ops::Range<usize>],
) -> Option<u64> {
    let hit = |s: &Span| {
        damaged
            .iter()
            .any(|d| d.start < s.bytes.end && s.bytes.start < d.end)
    };
    if spans.iter().any(|s| s.kind == wire::REC_INFO && hit(s)) {
        return None;
    }
    let mut left_out = 0u64;
    for s in spans.iter().rev().filter(|s| hit(s)) {
        match s.kind {
            wire::REC_PCS | wire::REC_PCS_TAGS | wire::REC_STACKS => {
                let r = s.samples.clone();
                left_out += r.len() as u64;
                dump.pcs.drain(r.clone());
                if !dump.tags.is_empty() {
                    dump.tags.drain(r.clone());
                }
                if !dump.stacks.is_empty() {
                    dump.stacks.drain(r);
                }
            }
            wire::REC_HIST => dump.hist = None,
            wire::REC_NAMES => dump.names.clear(),
            wire::REC_PRIORITIES => dump.priorities.clear(),
            wire::REC_HELD_OFF => dump.held_off = None,
            wire::REC_LAPS => dump.laps = None,
            wire::REC_TASKS => dump.tasks = None,
            wire::REC_TASK_TRACE => dump.task_trace = None,
            wire::REC_LAP_TRACE => dump.lap_trace = None,
            wire::REC_PMU => dump.pmu = None,
            wire::REC_PMU_TRACE => dump.pmu_trace = None,
            _ => {}
        }
    }
    Some(left_out)
}
