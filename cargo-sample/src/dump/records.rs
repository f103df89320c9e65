//! The dump's records, one decoder each (the loop over them is [`super::decode_partial`]).
//! Every decoder checks what its record claims against what it holds: damage is an error or
//! a record read as far as it goes, never a panic.

use sampler_rt::wire;

use super::{Dump, DumpError, Hist, StackSample, laps, le, le32, pmu};

/// A PCS or PCS_TAGS record into `dump`: each entry's PC (and tag). `total`: the dump's length,
/// where a record cut short says it was cut.
pub(super) fn pcs(
    dump: &mut Dump,
    kind: u16,
    payload: &[u8],
    len: usize,
    cut: bool,
    total: usize,
) -> Result<(), DumpError> {
    let tagged = kind == wire::REC_PCS_TAGS;
    let entry = if tagged { 8 } else { 4 };
    if !dump.stacks.is_empty() {
        return Err(DumpError::Malformed(
            "STACKS and PCS records in one dump".into(),
        ));
    }
    if payload.len() < 8 {
        return Err(DumpError::Truncated { at: total });
    }
    let first = le32(payload, 0);
    let count = le32(payload, 4) as usize;
    if !cut && count * entry + 8 != len {
        return Err(DumpError::Malformed(format!(
            "PCS record of {len} bytes says it holds {count} samples"
        )));
    }
    if tagged != (dump.tags.len() == dump.pcs.len() && !dump.pcs.is_empty()) && !dump.pcs.is_empty()
    {
        return Err(DumpError::Malformed(
            "tagged and untagged PCS records in one dump".into(),
        ));
    }
    continue_at(dump, first, "PCS")?;
    for c in payload[8..].chunks_exact(entry).take(count) {
        dump.pcs.push(le32(c, 0));
        if tagged {
            dump.tags.push(le32(c, 4));
        }
    }
    Ok(())
}

/// A NAMES record: the names the firmware gave its tags, as far as the record holds them.
pub(super) fn names(dump: &mut Dump, payload: &[u8]) {
    let mut at = 4usize;
    let count = if payload.len() >= 4 {
        le32(payload, 0)
    } else {
        0
    };
    for _ in 0..count {
        if at + 8 > payload.len() {
            break;
        }
        let tag = le32(payload, at);
        let Some((name, next)) = le::padded_name(payload, at + 4, payload.len()) else {
            break;
        };
        dump.names.push((tag, name));
        at = next;
    }
}

/// A PRIORITIES record: each enabled exception's number, priority byte and whether it is
/// enabled, as far as the record holds them.
pub(super) fn priorities(dump: &mut Dump, payload: &[u8]) {
    let count = if payload.len() >= 4 {
        le32(payload, 0) as usize
    } else {
        0
    };
    for i in 0..count.min(payload.len().saturating_sub(4) / 4) {
        let e = le32(payload, 4 + 4 * i);
        dump.priorities
            .push((e as u16, (e >> 16) as u8, (e >> 24) & 1 == 1));
    }
}

/// A HIST record: the bins' base, size, outside counter and counts.
pub(super) fn hist(
    dump: &mut Dump,
    payload: &[u8],
    len: usize,
    cut: bool,
    total: usize,
) -> Result<(), DumpError> {
    if payload.len() < wire::HIST_HEADER_LEN {
        return Err(DumpError::Truncated { at: total });
    }
    let count = le32(payload, 12);
    // In 64 bits: a damaged count must not overflow the length it implies.
    if !cut && wire::HIST_HEADER_LEN as u64 + 2 * count as u64 != len as u64 {
        return Err(DumpError::Malformed(format!(
            "HIST record of {len} bytes says it holds {count} bins"
        )));
    }
    let shift = le32(payload, 4);
    if !(1..=16).contains(&shift) {
        return Err(DumpError::Malformed(format!(
            "HIST record with a shift of {shift}"
        )));
    }
    dump.hist = Some(Hist {
        base: le32(payload, 0),
        shift,
        outside: le32(payload, 8),
        bins: payload[wire::HIST_HEADER_LEN..]
            .chunks_exact(2)
            .take(count as usize)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect(),
    });
    Ok(())
}

/// One ring slot of a sampler that keeps stacks (read off a target's memory): its PC, xPSR
/// and stack, as far as the slot holds them.
pub fn stack_slot(slot: &[u8]) -> Option<(u32, u32, StackSample)> {
    let word = |i: usize| le::read_u32(slot, 4 * i);
    let tail = word(5)?;
    let late = u32::from(tail & wire::STACK_HELD_OFF != 0);
    let header = wire::STACK_HEADER_WORDS as usize;
    let room = (slot.len() / 4).saturating_sub(header);
    let valid = (((tail >> 8) & 0xFF) as usize).min(room);
    let records = (((tail >> 16) & 0xFF) as usize).min((room - valid) / 2);
    Some((
        word(0)? | late,
        word(1)?,
        StackSample {
            lr: word(2)?,
            sp: word(3)?,
            r7: word(4)?,
            exc_return: tail as u8,
            frames_inline: tail & wire::STACK_FRAMES_INLINE != 0,
            window: (0..valid).filter_map(|i| word(header + i)).collect(),
            records: (0..records)
                .filter_map(|i| {
                    Some((
                        word(header + valid + 2 * i)?,
                        word(header + valid + 2 * i + 1)?,
                    ))
                })
                .collect(),
        },
    ))
}

/// A PMU, LAPS, PMU_TRACE or LAP_TRACE record into `dump`.
pub(super) fn store_record(dump: &mut Dump, kind: u16, payload: &[u8]) -> Result<(), DumpError> {
    let stored = match kind {
        wire::REC_PMU => pmu::decode(payload).map(|p| dump.pmu = Some(p)),
        wire::REC_LAPS => laps::decode(payload).map(|l| dump.laps = Some(l)),
        wire::REC_PMU_TRACE => pmu::decode_trace(payload).map(|t| dump.pmu_trace = Some(t)),
        _ => laps::decode_trace(payload).map(|t| dump.lap_trace = Some(t)),
    };
    stored.ok_or_else(|| {
        let name = match kind {
            wire::REC_PMU => "PMU",
            wire::REC_LAPS => "LAPS",
            wire::REC_PMU_TRACE => "PMU_TRACE",
            _ => "LAP_TRACE",
        };
        DumpError::Malformed(format!("damaged {name} record"))
    })
}

/// A record of samples from sample `first` on: the first one sets the dump's first sample;
/// the records of a streamed dump follow each other without gaps or overlaps.
fn continue_at(dump: &mut Dump, first: u32, kind: &str) -> Result<(), DumpError> {
    if dump.pcs.is_empty() {
        dump.first_seq = first;
        return Ok(());
    }
    let next = dump.first_seq.wrapping_add(dump.pcs.len() as u32);
    if first != next {
        return Err(DumpError::Malformed(format!(
            "{kind} record starts at sample {first}, the previous one ended at {next}"
        )));
    }
    Ok(())
}

/// A STACKS record into `dump`: each entry's PC, xPSR (as the tag) and stack.
pub(super) fn stacks(
    dump: &mut Dump,
    payload: &[u8],
    len: usize,
    cut: bool,
) -> Result<(), DumpError> {
    if payload.len() < 12 {
        return Err(DumpError::Truncated { at: len });
    }
    let first = le32(payload, 0);
    let count = le32(payload, 4) as usize;
    if dump.stacks.len() != dump.pcs.len() {
        return Err(DumpError::Malformed(
            "STACKS and PCS records in one dump".into(),
        ));
    }
    continue_at(dump, first, "STACKS")?;
    let header = 4 * wire::STACK_HEADER_WORDS as usize;
    let mut at = 12;
    for _ in 0..count {
        if at + header > payload.len() {
            break;
        }
        let tail = le32(payload, at + 20);
        let used = 4 * wire::stack_entry_used(tail) as usize;
        if at + used > payload.len() {
            break;
        }
        let valid = ((tail >> 8) & 0xFF) as usize;
        let records = ((tail >> 16) & 0xFF) as usize;
        let word = |i: usize| le32(payload, at + 4 * i);
        // A held-off sample's PC carries bit 0, as in a ring of PCs.
        dump.pcs
            .push(word(0) | u32::from(tail & wire::STACK_HELD_OFF != 0));
        dump.tags.push(word(1));
        dump.stacks.push(StackSample {
            lr: word(2),
            sp: word(3),
            r7: word(4),
            exc_return: tail as u8,
            frames_inline: tail & wire::STACK_FRAMES_INLINE != 0,
            window: (0..valid).map(|i| word(6 + i)).collect(),
            records: (0..records)
                .map(|i| (word(6 + valid + 2 * i), word(7 + valid + 2 * i)))
                .collect(),
        });
        at += used;
    }
    if !cut && at != payload.len() {
        return Err(DumpError::Malformed(format!(
            "STACKS record of {len} bytes does not hold the {count} samples it says"
        )));
    }
    Ok(())
}
