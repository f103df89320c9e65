//! The exact counts' files: per address (`exact.counts`: `"SMPLEXC1"`, then little-endian
//! `(pc: u64, count: u64)` pairs sorted by pc) and per exception and address
//! (`exact-contexts.bin`: `"SMPLEXX1"` from QEMU's exec log, `"SMPLEXH1"` from the plugin, then
//! `(exception or handler u32, address u32, count u64)` records).

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

/// Name of the counts file in a run directory.
pub const FILE: &str = "exact.counts";

/// Parse a counts file.
pub fn parse(bytes: &[u8]) -> Result<Vec<(u32, u64)>> {
    if bytes.len() < 8 || &bytes[..8] != b"SMPLEXC1" || !(bytes.len() - 8).is_multiple_of(16) {
        bail!("not an exact-count file from cargo-sample's QEMU plugin");
    }
    Ok(bytes[8..]
        .chunks_exact(16)
        .map(|c| {
            let pc = u64::from_le_bytes(c[..8].try_into().unwrap_or_default());
            let n = u64::from_le_bytes(c[8..].try_into().unwrap_or_default());
            (pc as u32, n)
        })
        .collect())
}

/// Encode counts as a counts file (sorted by pc).
pub fn encode(counts: &[(u32, u64)]) -> Vec<u8> {
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let mut b = Vec::with_capacity(8 + 16 * sorted.len());
    b.extend_from_slice(b"SMPLEXC1");
    for (pc, n) in sorted {
        b.extend_from_slice(&u64::from(pc).to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
    }
    b
}

/// The file a run keeps the exact times of Embassy's polls in (the plugin's `tasks=`).
pub const TASKS_FILE: &str = "task-polls.bin";

/// One task pool's polls and wakes, exactly, in instructions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolTimes {
    pub polls: u64,
    pub busy: u64,
    pub max_poll: u64,
    pub wakes: u64,
    pub latency: u64,
    pub max_latency: u64,
}

/// A task-polls file: per pool (in address order), then the executor's idle instructions and
/// periods, the instructions from the first clock read to the last, and the polls whose task
/// was not found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskTimes {
    pub pools: Vec<PoolTimes>,
    pub idle: u64,
    pub idle_periods: u64,
    pub span: u64,
    pub unknown: u64,
    /// The sampler's own instructions inside the run (left out of every window).
    pub stolen: u64,
    /// Per context an executor idled in, in the order they first idled: the entry of its
    /// innermost handler (0: thread mode), instructions idle, idle periods. Empty in files
    /// from before they were kept.
    pub idles: Vec<(u32, u64, u64)>,
}

/// Parse a task-polls file (`SMPLTSK1`, `u32` pools, six `u64`s a pool, five `u64`s, then
/// a count and three `u64`s per executor context).
pub fn parse_tasks(bytes: &[u8]) -> Result<TaskTimes> {
    let Some(body) = bytes.strip_prefix(b"SMPLTSK1") else {
        bail!("not a task-polls file (no SMPLTSK1 header)");
    };
    let Some(n) = body
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    else {
        bail!("the task-polls file ends before its pool count");
    };
    let words = &body[4..];
    let fixed = 6 * n as usize + 5;
    let v = |i: usize| {
        words
            .get(8 * i..8 * i + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let contexts = if words.len() > 8 * fixed {
        v(fixed) as usize
    } else {
        0
    };
    let len = 8 * (fixed + usize::from(words.len() > 8 * fixed) + 3 * contexts);
    if words.len() < 8 * fixed || words.len() != len {
        bail!(
            "the task-polls file has {} bytes for {n} pools, not {len}",
            words.len()
        );
    }
    let idles = (0..contexts)
        .map(|k| {
            let at = fixed + 1 + 3 * k;
            (v(at) as u32, v(at + 1), v(at + 2))
        })
        .collect();
    let pools = (0..n as usize)
        .map(|k| PoolTimes {
            polls: v(6 * k),
            busy: v(6 * k + 1),
            max_poll: v(6 * k + 2),
            wakes: v(6 * k + 3),
            latency: v(6 * k + 4),
            max_latency: v(6 * k + 5),
        })
        .collect();
    let at = 6 * n as usize;
    Ok(TaskTimes {
        pools,
        idle: v(at),
        idle_periods: v(at + 1),
        span: v(at + 2),
        unknown: v(at + 3),
        stolen: v(at + 4),
        idles,
    })
}

/// The file a run keeps the main stack's depth in, from the plugin's stores.
pub const STACK_FILE: &str = "stack-depth.bin";

/// Parse a stack-depth file (`SMPLSTK1`, then the stack's range and the lowest address stored
/// to, as little-endian `u64`s; `u64::MAX` when no store reached it): `(low, high, lowest)`.
pub fn parse_stack(bytes: &[u8]) -> Result<(u32, u32, Option<u32>)> {
    let Some(body) = bytes.strip_prefix(b"SMPLSTK1") else {
        bail!("not a stack-depth file (no SMPLSTK1 header)");
    };
    if body.len() != 24 {
        bail!(
            "the stack-depth file has {} bytes of values, not 24",
            body.len()
        );
    }
    let v = |i: usize| u64::from_le_bytes(body[8 * i..8 * i + 8].try_into().unwrap_or_default());
    let (low, high, lowest) = (v(0), v(1), v(2));
    if low >= high || high > u64::from(u32::MAX) {
        bail!("the stack-depth file's range {low:#x}..{high:#x} is no stack");
    }
    let lowest = match lowest {
        u64::MAX => None,
        a if (low..high).contains(&a) => Some(a as u32),
        a => bail!("the stack-depth file's lowest store {a:#x} is outside its range"),
    };
    Ok((low as u32, high as u32, lowest))
}

/// The file a run keeps its exception entries in, per handler, from the plugin.
pub const CHAINS_FILE: &str = "exception-chains.bin";

/// How a handler was entered, over a run (the plugin's `chains=FILE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entries {
    /// The handler's entry address (Thumb bit clear).
    pub handler: u32,
    pub entries: u64,
    /// Entered straight after another exception returned (tail-chained on the core).
    pub tail_chained: u64,
    /// Entered before a less urgent exception just entered had run an instruction (a late
    /// arrival on the core: the other one follows it by tail-chaining).
    pub late: u64,
}

/// Parse an exception-entries file: `SMPLCHN1`, then `(handler u32, entries u64,
/// tail-chained u64, late u64)` little-endian records.
pub fn parse_chains(bytes: &[u8]) -> Result<Vec<Entries>> {
    let Some(body) = bytes.strip_prefix(b"SMPLCHN1") else {
        bail!("not an exception-entries file (no SMPLCHN1 header)");
    };
    if !body.len().is_multiple_of(28) {
        bail!(
            "the exception-entries file is cut short ({} bytes of records, not a multiple of 28)",
            body.len()
        );
    }
    let u64_at =
        |c: &[u8], o: usize| u64::from_le_bytes(c[o..o + 8].try_into().unwrap_or_default());
    body.chunks_exact(28)
        .map(|c| {
            let e = Entries {
                handler: u32::from_le_bytes(c[..4].try_into().unwrap_or_default()),
                entries: u64_at(c, 4),
                tail_chained: u64_at(c, 12),
                late: u64_at(c, 20),
            };
            if e.tail_chained.saturating_add(e.late) > e.entries {
                bail!(
                    "the exception-entries file says handler {:#x} was entered {} times, {} of \
                 them chained or late: more than it was entered",
                    e.handler,
                    e.entries,
                    e.tail_chained + e.late
                );
            }
            Ok(e)
        })
        .collect()
}

/// The file a run keeps the exact counts of what ran before the sampler started in (the
/// counts' format): the time no sample could see, left out of `--truth`'s comparison.
pub const BEFORE_START_FILE: &str = "exact-before-start.counts";

/// The file a run keeps where each exception's time returned to: `(exception, context,
/// address u32, instructions u64)` little-endian records, the context being what ran where it
/// returned (0: thread mode). The plugin's (`landings=`, `SMPLLND1`) names exceptions and
/// contexts by their handlers' entries; QEMU's exec log (`SMPLLNX1`) by exception number.
pub const LANDINGS_FILE: &str = "exact-landings.bin";

/// Landings by exception number (`SMPLLNX1`), as the exec log finds them.
pub fn encode_landings(landings: &[(u32, u32, u32, u64)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 20 * landings.len());
    b.extend_from_slice(b"SMPLLNX1");
    for &(e, c, pc, n) in landings {
        for v in [e, c, pc] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&n.to_le_bytes());
    }
    b
}

/// A landings file of either kind as `(exception, context exception, address, instructions)`,
/// handlers named through the vector table (`vectors`: exception number, handler).
pub fn landings_by_exception(
    bytes: &[u8],
    vectors: &[(u32, u32)],
) -> Result<Vec<(u32, u32, u32, u64)>> {
    let (by_handler, body) = match (
        bytes.strip_prefix(b"SMPLLND1"),
        bytes.strip_prefix(b"SMPLLNX1"),
    ) {
        (Some(b), _) => (true, b),
        (None, Some(b)) => (false, b),
        _ => bail!("not a landings file (no SMPLLND1 or SMPLLNX1 header)"),
    };
    if body.len() % 20 != 0 {
        bail!(
            "a landings file whose records are cut short ({} bytes)",
            body.len()
        );
    }
    let exception_of = |handler: u32| {
        vectors
            .iter()
            .filter(|v| v.0 >= 2 && v.1 & !1 == handler & !1)
            .map(|v| v.0)
            .min()
    };
    let mut out = Vec::with_capacity(body.len() / 20);
    for c in body.chunks_exact(20) {
        let w = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        let n = u64::from_le_bytes([c[12], c[13], c[14], c[15], c[16], c[17], c[18], c[19]]);
        let (e, context) = if by_handler {
            let e = exception_of(w(0)).with_context(|| {
                format!(
                    "landings name a handler at {:#x} the vector table does not have",
                    w(0)
                )
            })?;
            let context = match w(4) {
                0 => 0,
                h => exception_of(h).unwrap_or(0),
            };
            (e, context)
        } else {
            (w(0), w(4))
        };
        out.push((e, context, w(8), n));
    }
    Ok(out)
}

/// The file a run keeps per-exception counts in (from the exec log with `-d int`).
pub const CONTEXTS_FILE: &str = "exact-contexts.bin";

/// Per-exception counts as a file: `SMPLEXX1`, then `(exception u32, address u32, count u64)`
/// little-endian records.
pub fn encode_contexts(counts: &[(u32, u32, u64)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 16 * counts.len());
    b.extend_from_slice(b"SMPLEXX1");
    for &(c, pc, n) in counts {
        b.extend_from_slice(&c.to_le_bytes());
        b.extend_from_slice(&pc.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
    }
    b
}

/// A per-exception counts file of either kind as `(exception, address, instructions)`, thread
/// mode 0: QEMU's exec log counts by exception number (`SMPLEXX1`); the plugin counts by the
/// innermost exception's handler address and leaves thread mode out (`SMPLEXH1`), which is
/// then named by the vector table (`vectors`: exception number, handler) and completed from
/// the per-address counts (`exact`).
pub fn contexts_by_exception(
    bytes: &[u8],
    vectors: &[(u32, u32)],
    exact: &[(u32, u64)],
) -> Result<Vec<(u32, u32, u64)>> {
    let Some(body) = bytes.strip_prefix(b"SMPLEXH1") else {
        return parse_contexts(bytes);
    };
    let mut bytes = b"SMPLEXX1".to_vec();
    bytes.extend_from_slice(body);
    let by_handler = parse_contexts(&bytes)?;
    let exception_of = |handler: u32| {
        vectors
            .iter()
            .filter(|v| v.0 >= 2 && v.1 & !1 == handler)
            .map(|v| v.0)
            .min()
    };
    let mut inside: HashMap<u32, u64> = HashMap::new();
    let mut out = Vec::with_capacity(by_handler.len() + exact.len());
    for (handler, pc, n) in by_handler {
        let exception = exception_of(handler).with_context(|| {
            format!(
                "per-exception counts name a handler at {handler:#x} the vector table does not have"
            )
        })?;
        *inside.entry(pc).or_default() += n;
        out.push((exception, pc, n));
    }
    for &(pc, n) in exact {
        let thread = n.saturating_sub(inside.get(&pc).copied().unwrap_or(0));
        if thread > 0 {
            out.push((0, pc, thread));
        }
    }
    Ok(out)
}

/// Read a per-exception counts file.
pub fn parse_contexts(bytes: &[u8]) -> Result<Vec<(u32, u32, u64)>> {
    let body = bytes
        .strip_prefix(b"SMPLEXX1")
        .context("not a per-exception counts file (no SMPLEXX1 header)")?;
    if body.len() % 16 != 0 {
        bail!(
            "a per-exception counts file of {} bytes is cut short",
            bytes.len()
        );
    }
    Ok(body
        .chunks_exact(16)
        .map(|r| {
            let w = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
            let n = u64::from_le_bytes([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
            (w(0), w(4), n)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exception_entries_are_read_and_damage_refused() {
        let mut b = b"SMPLCHN1".to_vec();
        b.extend_from_slice(&0x4c1u32.to_le_bytes());
        for v in [500u64, 120, 3] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let e = parse_chains(&b).unwrap();
        assert_eq!(
            e,
            [Entries {
                handler: 0x4c1,
                entries: 500,
                tail_chained: 120,
                late: 3
            }]
        );
        assert!(parse_chains(&b[..b.len() - 1]).is_err());
        assert!(parse_chains(&b[1..]).is_err());
        // More chained than entered cannot be.
        b[20..28].copy_from_slice(&600u64.to_le_bytes());
        assert!(parse_chains(&b).is_err());
    }

    #[test]
    fn parses_and_refuses() {
        let b = encode(&[(0x100, 7)]);
        assert_eq!(parse(&b).unwrap(), vec![(0x100, 7)]);
        assert!(parse(&b[..20]).is_err());
        assert!(parse(b"nonsense").is_err());
    }
}
