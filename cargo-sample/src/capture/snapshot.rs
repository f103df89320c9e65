//! Samples recovered from a target's memory when a run did not finish (timeout, Ctrl-C, a
//! firmware stuck in a fault handler): the sampler's state block and its ring, read by the
//! host, become an ordinary dump marked `STOP_SNAPSHOT`.

use sampler_rt::wire::{self, Info, StateView};

use crate::dump::le::{read_u16, read_u32};
use crate::dump::{Dump, Fingerprint};

/// Address and length of the ring that a state block describes.
pub fn ring_region(state: &[u8]) -> Option<(u64, u64)> {
    let s = StateView::decode(state)?;
    if s.mode == wire::MODE_HIST {
        // The counters, the outside one included.
        return Some((s.counters() as u64, (s.last_bin as u64 + 1) * 2));
    }
    Some((s.ring as u64, s.capacity as u64 * s.entry_bytes() as u64))
}

/// The INFO of samples read off a target whose sampler's state is `s`.
pub fn info_of(s: &StateView, stop: u8, taken: u32, lost: u32, code: Fingerprint) -> Info {
    Info {
        mode: s.mode,
        timer: s.timer,
        stop,
        arch: s.arch,
        reload: s.reload,
        jitter_mask: s.mask,
        limit: s.limit,
        capacity: s.capacity,
        taken,
        lost,
        code_start: code.start,
        code_end: code.end,
        code_crc: code.crc,
        config_addr: 0,
        config_found: s.config_found,
        priority: s.priority,
        rt_version: 0,
        tag_kind: s.tag_kind as u8,
        foreign: s.foreign,
        timer_hz: 0,
    }
}

/// Build a dump from a state block and the ring's bytes. `code` is the fingerprinted range of
/// the image that ran (the snapshot comes from that very process, so the ELF's own fingerprint
/// is the right one). `streamed` is what the firmware had already written to its dump file (a
/// streaming run sends each full chunk): those samples come first, the ring adds the newer ones.
pub fn to_dump(
    state: &[u8],
    ring: &[u8],
    code: Fingerprint,
    streamed: Option<&Dump>,
) -> Option<Dump> {
    let s = StateView::decode(state)?;
    if s.mode == wire::MODE_HIST {
        return hist_dump(&s, ring, code);
    }
    let e = s.entry_bytes() as usize;
    let cap = s.capacity.min((ring.len() / e) as u32);
    if cap == 0 {
        return None;
    }
    let taken = s.taken();
    let word_at = |o: usize| read_u32(ring, o).unwrap_or(0);
    let word = |q: u32| word_at(e * (q % cap) as usize);
    let tag = |q: u32| word_at(e * (q % cap) as usize + 4);
    // Sequence number q is in slot q % cap until it is overwritten cap samples later.
    let in_ring = taken.saturating_sub(cap);
    let (first_seq, mut pcs, mut tags, from) = match streamed.filter(|d| !d.pcs.is_empty()) {
        Some(d) => {
            let end = d.first_seq + d.pcs.len() as u32;
            if end >= in_ring && end <= taken {
                (d.first_seq, d.pcs.clone(), d.tags.clone(), end)
            } else {
                (in_ring, Vec::new(), Vec::new(), in_ring)
            }
        }
        None => (in_ring, Vec::new(), Vec::new(), in_ring),
    };
    let stacked = (s.tag_kind >> 8) & 0xFF != 0;
    let mut stacks = match streamed {
        Some(d) if !pcs.is_empty() => d.stacks.clone(),
        _ => Vec::new(),
    };
    if stacked {
        for q in from..taken {
            let at = e * (q % cap) as usize;
            if let Some((pc, xpsr, st)) = ring.get(at..at + e).and_then(crate::dump::stack_slot) {
                pcs.push(pc);
                tags.push(xpsr);
                stacks.push(st);
            }
        }
    } else {
        pcs.extend((from..taken).map(word));
        if e == 8 {
            tags.extend((from..taken).map(tag));
        }
    }
    let info = info_of(&s, wire::STOP_SNAPSHOT, taken, 0, code);
    let mut d = Dump::of_samples(info, first_seq, pcs, tags);
    if stacked && stacks.len() == d.pcs.len() {
        d.stacks = stacks;
    }
    d.held_off = held_off_of(&s);
    Some(d)
}

/// The lateness check as the state block shows it (the count so far), when it runs.
pub fn held_off_of(s: &StateView) -> Option<crate::dump::HeldOff> {
    (s.late_ticks != 0).then_some(crate::dump::HeldOff {
        late_ticks: s.late_ticks,
        count: s.held_off,
        how: wire::LATE_CHECKED,
    })
}

/// A histogram dump from a state block and the counters' bytes.
fn hist_dump(s: &StateView, counters: &[u8], code: Fingerprint) -> Option<Dump> {
    let n = s.last_bin as usize;
    if counters.len() < 2 * (n + 1) || n == 0 {
        return None;
    }
    let word = |i: usize| read_u16(counters, 2 * i).unwrap_or(0);
    let info = Info {
        capacity: s.last_bin,
        tag_kind: 0,
        ..info_of(s, wire::STOP_SNAPSHOT, s.taken(), 0, code)
    };
    Some(Dump {
        hist: Some(crate::dump::Hist {
            base: s.hist_base,
            shift: s.hist_shift(),
            outside: word(n) as u32,
            bins: (0..n).map(word).collect(),
        }),
        held_off: held_off_of(s),
        ..Dump::of_samples(info, 0, Vec::new(), Vec::new())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(before: u32, chunk: u32, remaining: u32, cap: u32) -> Vec<u8> {
        let mut b = vec![0u8; wire::STATE_LEN];
        b[4..8].copy_from_slice(&remaining.to_le_bytes());
        b[32..36].copy_from_slice(&chunk.to_le_bytes());
        b[36..40].copy_from_slice(&before.to_le_bytes());
        b[44..48].copy_from_slice(&cap.to_le_bytes());
        b[48..52].copy_from_slice(&0x2000_0070u32.to_le_bytes());
        b[52] = wire::MODE_RING;
        b[60..64].copy_from_slice(&wire::STATE_MAGIC.to_le_bytes());
        b
    }

    fn ring(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn partial_ring_in_order() {
        // 3 of 4 slots written in the first chunk.
        let d = to_dump(
            &state(0, 4, 1, 4),
            &ring(&[10, 11, 12, 0]),
            Fingerprint::default(),
            None,
        )
        .unwrap();
        assert_eq!(d.pcs, vec![10, 11, 12]);
        assert_eq!(d.info.taken, 3);
        assert_eq!(d.first_seq, 0);
    }

    #[test]
    fn wrapped_ring_oldest_first() {
        // Samples 0..6 into 4 slots: slots hold 4,5,2,3; 6 taken, chunk 2 of which 0 left.
        let d = to_dump(
            &state(4, 4, 2, 4),
            &ring(&[4, 5, 2, 3]),
            Fingerprint::default(),
            None,
        )
        .unwrap();
        assert_eq!(d.pcs, vec![2, 3, 4, 5]);
        assert_eq!(d.first_seq, 2);
        assert_eq!(ring_region(&state(0, 1, 1, 4)), Some((0x2000_0070, 16)));
    }

    #[test]
    fn streamed_chunks_come_first_then_the_ring() {
        // A streaming run sent samples 0..8 (two chunks of 4); the third chunk has 3 of 4.
        let sent = Dump {
            first_seq: 0,
            pcs: (100..108).collect(),
            ..Dump::default()
        };
        let st = state(8, 4, 1, 4);
        let d = to_dump(
            &st,
            &ring(&[108, 109, 110, 0]),
            Fingerprint::default(),
            Some(&sent),
        )
        .unwrap();
        assert_eq!(d.pcs, (100..111).collect::<Vec<_>>());
        assert_eq!((d.first_seq, d.info.taken), (0, 11));
        // A stream that stops short of the ring's oldest sample cannot be joined: ring only.
        let old = Dump {
            first_seq: 0,
            pcs: vec![1, 2],
            ..Dump::default()
        };
        let d = to_dump(
            &st,
            &ring(&[108, 109, 110, 0]),
            Fingerprint::default(),
            Some(&old),
        )
        .unwrap();
        assert_eq!((d.first_seq, d.pcs.len()), (7, 4));
    }

    #[test]
    fn not_started_is_none() {
        let mut b = state(0, 4, 4, 4);
        b[60] = 0;
        assert!(to_dump(&b, &ring(&[0; 4]), Fingerprint::default(), None).is_none());
        assert!(ring_region(&b).is_none());
    }
}
