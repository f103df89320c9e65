//! The dump's PMU record: the CPU's PMU identification and each region's counts.

use sampler_rt::wire;

use super::le::{padded_name, read_u32, read_u64};

/// The PMU record of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// PMCEID0/1_EL0 low and high halves: events 0x00-0x3F and 0x4000-0x403F implemented.
    pub pmceid: [u32; 4],
    pub dfr0: u64,
    /// PMCR_EL0.N.
    pub counters: u32,
    /// The exception level the firmware ran at.
    pub el: u32,
    /// `wire::PMU_*`.
    pub status: u32,
    pub events: Vec<u16>,
    pub regions: Vec<RegionCounts>,
}

/// One region's counters: per event of the group, then the cycle counter last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionCounts {
    pub name: String,
    pub calls: u32,
    /// `(first pre, last post, sum of deltas)`.
    pub counts: Vec<(u64, u64, u64)>,
}

/// Decode a PMU record's payload.
pub fn decode(p: &[u8]) -> Option<Record> {
    let mut r = Record {
        pmceid: [
            read_u32(p, 0)?,
            read_u32(p, 4)?,
            read_u32(p, 8)?,
            read_u32(p, 12)?,
        ],
        dfr0: read_u64(p, 16)?,
        counters: read_u32(p, 24)?,
        el: read_u32(p, 28)?,
        status: read_u32(p, 32)?,
        ..Record::default()
    };
    let n = read_u32(p, 40)? as usize;
    if n > wire::PMU_MAX_EVENTS {
        return None;
    }
    let mut at = 44;
    for _ in 0..n {
        r.events.push(read_u32(p, at)? as u16);
        at += 4;
    }
    let regions = read_u32(p, at)? as usize;
    at += 4;
    for _ in 0..regions.min(1024) {
        let (name, next) = padded_name(p, at, 4096)?;
        at = next;
        let calls = read_u32(p, at)?;
        at += 8;
        let mut counts = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            counts.push((
                read_u64(p, at)?,
                read_u64(p, at + 8)?,
                read_u64(p, at + 16)?,
            ));
            at += 24;
        }
        r.regions.push(RegionCounts {
            name,
            calls,
            counts,
        });
    }
    Some(r)
}

impl Record {
    /// Whether the CPU says it counts `code` (PMCEID); `None` for implementation-defined events,
    /// which PMCEID does not describe.
    pub fn implements(&self, code: u16) -> Option<bool> {
        let bit = |w: u32, b: u16| w >> b & 1 == 1;
        match code {
            0x00..=0x1F => Some(bit(self.pmceid[0], code)),
            0x20..=0x3F => Some(bit(self.pmceid[1], code - 0x20)),
            0x4000..=0x401F => Some(bit(self.pmceid[2], code - 0x4000)),
            0x4020..=0x403F => Some(bit(self.pmceid[3], code - 0x4020)),
            _ => None,
        }
    }
}

/// The PMU_TRACE record: the newest region laps counted while the sampler ran, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Laps traced (the oldest beyond `laps` were overwritten).
    pub total: u32,
    pub laps: Vec<TracedLap>,
}

/// One region lap of the trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracedLap {
    /// The region's index in the PMU record.
    pub region: u8,
    /// Samples taken when the lap started, and during it.
    pub start_seq: u32,
    pub inside: u32,
    /// Each counter's delta (low 32 bits), in the record's order, the cycle counter last.
    pub deltas: Vec<u32>,
}

/// Decode a PMU_TRACE payload; `None` if it is damaged.
pub fn decode_trace(p: &[u8]) -> Option<Trace> {
    let total = read_u32(p, 0)?;
    let count = read_u32(p, 4)? as usize;
    let width = read_u32(p, 8)? as usize;
    if !(3..=3 + wire::PMU_MAX_EVENTS).contains(&width)
        || count > total as usize
        || count > p.len().saturating_sub(12) / (4 * width)
    {
        return None;
    }
    let laps = (0..count)
        .map(|k| {
            let w = |i: usize| read_u32(p, 12 + 4 * (k * width + i));
            let first = w(0)?;
            Some(TracedLap {
                region: first as u8,
                inside: first >> 8,
                start_seq: w(1)?,
                deltas: (2..width).map(w).collect::<Option<Vec<u32>>>()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Trace { total, laps })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pmu_trace_reads_back_and_a_damaged_one_is_refused() {
        let mut b = Vec::new();
        // Two laps of two counters and the cycle counter: width 5.
        for v in [9u32, 2, 5, 1 | 3 << 8, 40, 2001, 7, 32016, 0, 44, 2, 0, 9] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let t = decode_trace(&b).unwrap();
        assert_eq!(t.total, 9);
        assert_eq!(
            t.laps[0],
            TracedLap {
                region: 1,
                inside: 3,
                start_seq: 40,
                deltas: vec![2001, 7, 32016]
            }
        );
        assert_eq!(t.laps[1].deltas, vec![2, 0, 9]);
        assert_eq!(decode_trace(&b[..b.len() - 4]), None);
        let mut narrow = b.clone();
        narrow[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(decode_trace(&narrow), None);
    }

    #[test]
    fn records_decode_and_damage_is_refused() {
        let mut b = Vec::new();
        for v in [1u32 << 8, 0, 0, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&0x1010_0106u64.to_le_bytes());
        for v in [6u32, 1, 0, 0, 1, 8, 1, 4] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(b"loop");
        for v in [3u32, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [1u64, 2, 3, 4, 5, 6] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let r = decode(&b).unwrap();
        assert_eq!((r.counters, r.el, r.events.clone()), (6, 1, vec![8]));
        assert_eq!(r.regions[0].counts, vec![(1, 2, 3), (4, 5, 6)]);
        assert_eq!(r.implements(8), Some(true));
        assert_eq!(r.implements(3), Some(false));
        assert_eq!(r.implements(0xC0), None);
        assert_eq!(decode(&b[..b.len() - 1]), None);
    }
}
