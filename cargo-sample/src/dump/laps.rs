//! The dump's LAPS record: the lap-timed regions and the distribution of each one's laps.

use super::le::{padded_name, read_u32};

/// The LAPS record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Laps {
    /// `wire::LAP_COUNTER_*`.
    pub counter: u8,
    /// The shortest empty lap, in counter ticks.
    pub overhead: u32,
    /// Regions beyond the runtime's table.
    pub dropped: u32,
    pub regions: Vec<Region>,
}

/// One region as the firmware kept it (raw counter ticks, the lap's own cost included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Region {
    pub name: String,
    /// `wire::LAP_REGION` or `wire::LAP_ITERATION`.
    pub kind: u8,
    /// How its first lap was taken (`wire::LAP_VIA_*`), which says what `body` holds.
    pub via: u8,
    pub calls: u32,
    pub min: u32,
    pub max: u32,
    pub sum: u64,
    /// Laps whose value did not fit the table of distinct values.
    pub overflow: u32,
    /// Laps no counter could time.
    pub unmeasured: u32,
    /// The address of the code `measure`'s laps ran, or where the first `start()`/`iterate()`
    /// call returned to, as `via` says (0: not known, a firmware from before the field).
    pub body: u32,
    /// Distinct lap values and how many laps had each.
    pub values: Vec<(u32, u32)>,
}

/// The LAP_TRACE record: the newest laps in the order they ended, placed among the samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Laps traced while the sampler ran (the oldest beyond `laps` were overwritten).
    pub total: u32,
    pub laps: Vec<TracedLap>,
}

/// One lap of the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TracedLap {
    /// The region's index in the LAPS record.
    pub region: u8,
    /// Samples taken when the lap started.
    pub start_seq: u32,
    /// Samples taken during the lap (saturated at 0xFFFFFF).
    pub inside: u32,
    /// The lap in raw counter ticks (its own cost included).
    pub ticks: u32,
}

/// Decode a LAP_TRACE payload; `None` if it is damaged.
pub fn decode_trace(p: &[u8]) -> Option<Trace> {
    let total = read_u32(p, 0)?;
    let count = read_u32(p, 4)? as usize;
    if count > total as usize || count > (p.len().saturating_sub(8)) / 12 {
        return None;
    }
    let laps = (0..count)
        .map(|k| {
            let w = |i: usize| read_u32(p, 8 + 12 * k + 4 * i);
            let first = w(0)?;
            Some(TracedLap {
                region: first as u8,
                inside: first >> 8,
                start_seq: w(1)?,
                ticks: w(2)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Trace { total, laps })
}

/// Decode a LAPS payload; `None` if it is damaged.
pub fn decode(p: &[u8]) -> Option<Laps> {
    let count = read_u32(p, 0)? as usize;
    let mut laps = Laps {
        counter: read_u32(p, 4)? as u8,
        overhead: read_u32(p, 8)?,
        dropped: read_u32(p, 12)?,
        regions: Vec::new(),
    };
    let mut at = 16;
    for _ in 0..count.min(4096) {
        let (name, next) = padded_name(p, at, 4096)?;
        at = next;
        let f = |k: usize| read_u32(p, at + 4 * k);
        let n = f(8)? as usize;
        if n > 1 << 16 {
            return None;
        }
        let mut r = Region {
            name,
            kind: f(0)? as u8,
            via: (f(0)? >> 8) as u8,
            calls: f(1)?,
            min: f(2)?,
            max: f(3)?,
            sum: f(4)? as u64 | (f(5)? as u64) << 32,
            overflow: f(6)?,
            unmeasured: f(7)?,
            body: f(9)?,
            values: Vec::with_capacity(n),
        };
        at += 40;
        for k in 0..n {
            r.values
                .push((read_u32(p, at + 8 * k)?, read_u32(p, at + 8 * k + 4)?));
        }
        at += 8 * n;
        laps.regions.push(r);
    }
    Some(laps)
}

/// Encode a LAP_TRACE payload (the firmware's layout).
#[cfg(test)]
pub fn encode_trace(t: &Trace) -> Vec<u8> {
    let mut b = Vec::new();
    let mut put = |v: u32| b.extend_from_slice(&v.to_le_bytes());
    put(t.total);
    put(t.laps.len() as u32);
    for l in &t.laps {
        put(l.region as u32 | l.inside << 8);
        put(l.start_seq);
        put(l.ticks);
    }
    b
}

/// The file a run keeps its lap windows in (the QEMU plugin's `laps=FILE`).
pub const WINDOWS_FILE: &str = "lap-windows.bin";

/// The lap windows of `start()` guards and iterations as the plugin counted them, keyed by
/// kind (0 a guard, 1 an iteration) and call site (inside the call of `start`/`iterate`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Windows {
    /// Windows closed per key.
    pub laps: std::collections::HashMap<(u32, u32), u64>,
    /// Per key, (block start, instructions run in the key's windows).
    pub blocks: std::collections::HashMap<(u32, u32), Vec<(u32, u64)>>,
    /// Per key, (instructions in one window, windows that long), shortest first (files of
    /// version 2).
    pub lengths: std::collections::HashMap<(u32, u32), Vec<(u64, u64)>>,
}

/// Read a lap-windows file (`SMPLLAP2`, or `SMPLLAP1` without the lengths); damage is an
/// error, never a panic.
pub fn parse_windows(b: &[u8]) -> anyhow::Result<Windows> {
    let (body, v2) = match (b.strip_prefix(b"SMPLLAP2"), b.strip_prefix(b"SMPLLAP1")) {
        (Some(body), _) => (body, true),
        (None, Some(body)) => (body, false),
        _ => anyhow::bail!("not a lap-windows file (no SMPLLAP2 header)"),
    };
    let short = || anyhow::anyhow!("the lap-windows file is cut short");
    let n = read_u32(body, 0).ok_or_else(short)? as usize;
    let mut at = 4;
    let mut w = Windows::default();
    for _ in 0..n {
        let (kind, site) = (
            read_u32(body, at).ok_or_else(short)?,
            read_u32(body, at + 4).ok_or_else(short)?,
        );
        let lo = read_u32(body, at + 8).ok_or_else(short)?;
        let hi = read_u32(body, at + 12).ok_or_else(short)?;
        w.laps
            .insert((kind, site), u64::from(lo) | u64::from(hi) << 32);
        at += 16;
    }
    let m = read_u32(body, at).ok_or_else(short)? as usize;
    at += 4;
    if m.saturating_mul(20) > body.len() {
        anyhow::bail!("the lap-windows file claims {m} counts, more than it holds");
    }
    for _ in 0..m {
        let f = |k: usize| read_u32(body, at + 4 * k).ok_or_else(short);
        let n = u64::from(f(3)?) | u64::from(f(4)?) << 32;
        w.blocks.entry((f(0)?, f(1)?)).or_default().push((f(2)?, n));
        at += 20;
    }
    if v2 {
        let k = read_u32(body, at).ok_or_else(short)? as usize;
        at += 4;
        if k.saturating_mul(24) > body.len() {
            anyhow::bail!("the lap-windows file claims {k} lengths, more than it holds");
        }
        for _ in 0..k {
            let f = |i: usize| read_u32(body, at + 4 * i).ok_or_else(short);
            let len = u64::from(f(2)?) | u64::from(f(3)?) << 32;
            let n = u64::from(f(4)?) | u64::from(f(5)?) << 32;
            w.lengths.entry((f(0)?, f(1)?)).or_default().push((len, n));
            at += 24;
        }
        for v in w.lengths.values_mut() {
            v.sort_unstable();
        }
    }
    Ok(w)
}

/// Encode a LAPS payload (the firmware's layout).
#[cfg(test)]
pub fn encode(l: &Laps) -> Vec<u8> {
    let mut b = Vec::new();
    let mut put = |v: u32| b.extend_from_slice(&v.to_le_bytes());
    put(l.regions.len() as u32);
    put(l.counter as u32);
    put(l.overhead);
    put(l.dropped);
    for r in &l.regions {
        b.extend_from_slice(&(r.name.len() as u32).to_le_bytes());
        b.extend_from_slice(r.name.as_bytes());
        b.resize(b.len() + (4 - r.name.len() % 4) % 4, 0);
        for v in [
            r.kind as u32 | u32::from(r.via) << 8,
            r.calls,
            r.min,
            r.max,
            r.sum as u32,
            (r.sum >> 32) as u32,
            r.overflow,
            r.unmeasured,
            r.values.len() as u32,
            r.body,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for &(v, c) in &r.values {
            b.extend_from_slice(&v.to_le_bytes());
            b.extend_from_slice(&c.to_le_bytes());
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lap_windows_read_back_and_damage_is_refused() {
        let mut b = b"SMPLLAP2".to_vec();
        let put = |b: &mut Vec<u8>, v: &[u32]| v.iter().for_each(|x| b.extend(x.to_le_bytes()));
        put(&mut b, &[1, 1, 0x400, 399, 0]);
        put(
            &mut b,
            &[2, 1, 0x400, 0x900, 4000, 0, 1, 0x400, 0x920, 7, 1],
        );
        put(
            &mut b,
            &[2, 1, 0x400, 12, 0, 300, 0, 1, 0x400, 10, 0, 99, 0],
        );
        let w = parse_windows(&b).unwrap();
        assert_eq!(w.lengths[&(1, 0x400)], [(10, 99), (12, 300)]);
        assert_eq!(w.laps[&(1, 0x400)], 399);
        assert_eq!(w.blocks[&(1, 0x400)], [(0x900, 4000), (0x920, 7 | 1 << 32)]);
        for cut in [b.len() - 1, b.len() - 30, 20, 9] {
            assert!(parse_windows(&b[..cut]).is_err(), "{cut}");
        }
        let mut more = b.clone();
        more[28..32].copy_from_slice(&1000u32.to_le_bytes());
        assert!(parse_windows(&more).is_err());
    }

    #[test]
    fn a_lap_trace_reads_back_and_a_damaged_one_is_refused() {
        let t = Trace {
            total: 7,
            laps: vec![
                TracedLap {
                    region: 3,
                    start_seq: 10,
                    inside: 2,
                    ticks: 1234,
                },
                TracedLap {
                    region: 0,
                    start_seq: 12,
                    inside: 0xFF_FFFF,
                    ticks: 9,
                },
            ],
        };
        let b = encode_trace(&t);
        // The firmware's layout: the region in the low byte, samples inside above it.
        assert_eq!(&b[8..12], &(3u32 | 2 << 8).to_le_bytes());
        assert_eq!(decode_trace(&b), Some(t.clone()));
        // Cut short, or more laps than traced: damaged.
        assert_eq!(decode_trace(&b[..b.len() - 1]), None);
        let mut more = b.clone();
        more[0..4].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(decode_trace(&more), None);
    }
}
