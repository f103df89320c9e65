//! The host's encoder of the dump format (through the firmware's own writer).

use sampler_rt::wire::{self, DumpWriter};

use super::{Dump, StackSample};

/// Encode a dump the way the firmware writes one (the host makes dumps of what it read off a
/// target, a snapshot, SWO or PCSR; tests make them too): INFO, the samples (PCS, PCS_TAGS when
/// there is a tag per sample, or HIST), NAMES when there are names, and END with the CRC of all
/// before it. The one encoder of the format on the host.
pub fn encode(d: &Dump) -> Vec<u8> {
    let mut w = VecWriter {
        out: Vec::with_capacity(128 + d.pcs.len() * 8),
        crc: 0,
    };
    w.begin();
    w.info(&d.info);
    match &d.hist {
        Some(h) => {
            let count = h.bins.len() as u32;
            w.record(wire::REC_HIST, wire::hist_len(count));
            w.put(&wire::hist_header(h.base, h.shift, h.outside, count));
            for b in &h.bins {
                w.put(&b.to_le_bytes());
            }
            if count % 2 == 1 {
                w.put(&[0, 0]);
            }
        }
        None if !d.stacks.is_empty() => {
            let n = d.pcs.len().min(d.stacks.len());
            let used = |st: &StackSample| {
                wire::STACK_HEADER_WORDS as usize
                    + st.window.len().min(255)
                    + 2 * st.records.len().min(255)
            };
            let words: usize = d.stacks.iter().take(n).map(used).sum();
            let stride = d.stacks.iter().map(used).max().unwrap_or(0);
            w.record(wire::REC_STACKS, 12 + 4 * words as u32);
            w.put32(d.first_seq);
            w.put32(n as u32);
            w.put32(stride as u32);
            for (i, st) in d.stacks.iter().take(n).enumerate() {
                let (valid, records) = (st.window.len().min(255), st.records.len().min(255));
                for v in [
                    d.pcs[i] & !1,
                    d.tags.get(i).copied().unwrap_or(0),
                    st.lr,
                    st.sp,
                    st.r7,
                    st.exc_return as u32
                        | (valid as u32) << 8
                        | (records as u32) << 16
                        | if st.frames_inline {
                            wire::STACK_FRAMES_INLINE
                        } else {
                            0
                        }
                        | if d.pcs[i] & 1 != 0 {
                            wire::STACK_HELD_OFF
                        } else {
                            0
                        },
                ] {
                    w.put32(v);
                }
                for &v in &st.window[..valid] {
                    w.put32(v);
                }
                for &(a, b) in &st.records[..records] {
                    w.put32(a);
                    w.put32(b);
                }
            }
            encode_names(&mut w, d);
        }
        None => {
            let tagged = !d.tags.is_empty();
            let (kind, entry) = if tagged {
                (wire::REC_PCS_TAGS, 8)
            } else {
                (wire::REC_PCS, 4)
            };
            w.record(kind, 8 + entry * d.pcs.len() as u32);
            w.put32(d.first_seq);
            w.put32(d.pcs.len() as u32);
            for (i, &pc) in d.pcs.iter().enumerate() {
                w.put32(pc);
                if tagged {
                    w.put32(d.tags.get(i).copied().unwrap_or(0));
                }
            }
            encode_names(&mut w, d);
        }
    }
    if let Some(h) = d.held_off {
        w.record(wire::REC_HELD_OFF, 12);
        w.put32(h.late_ticks);
        w.put32(h.count);
        w.put32(h.how);
    }
    if let Some(t) = &d.tasks {
        let payload = super::tasks::encode(t);
        w.record(wire::REC_TASKS, payload.len() as u32);
        w.put(&payload);
    }
    if !d.priorities.is_empty() {
        w.record(wire::REC_PRIORITIES, 4 + 4 * d.priorities.len() as u32);
        w.put32(d.priorities.len() as u32);
        for &(e, p, on) in &d.priorities {
            w.put32(wire::priority_entry(e, p, on));
        }
    }
    w.end();
    w.out
}

fn encode_names(w: &mut VecWriter, d: &Dump) {
    if !d.names.is_empty() {
        let mut payload = (d.names.len() as u32).to_le_bytes().to_vec();
        for (tag, name) in &d.names {
            payload.extend_from_slice(&tag.to_le_bytes());
            payload.extend_from_slice(&(name.len() as u32).to_le_bytes());
            payload.extend_from_slice(name.as_bytes());
            payload.resize(payload.len().next_multiple_of(4), 0);
        }
        w.record(wire::REC_NAMES, payload.len() as u32);
        w.put(&payload);
    }
}

/// The format's writer (the firmware's, [`wire::DumpWriter`]) into memory.
pub(super) struct VecWriter {
    pub out: Vec<u8>,
    pub crc: u32,
}

impl DumpWriter for VecWriter {
    fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    fn crc_word(&mut self) -> &mut u32 {
        &mut self.crc
    }
}
