//! Decoding the sampler's dump (format: `sampler_rt::wire`, drawn in `docs/dump-format.md`).

pub mod callgraph;
pub mod defmt;
pub mod exact;
pub mod fault;
pub mod itm;
pub mod laps;
pub mod le;
pub mod pmu;
pub mod stream;
pub mod textdump;
pub mod tpiu;

use std::fmt;

use sampler_rt::wire::{self, DumpWriter, Info};

/// A decoded dump.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    pub version: u16,
    pub info: Info,
    /// Sequence number of the first stored sample (samples before it were overwritten).
    pub first_seq: u32,
    /// Stored program counters, oldest first.
    pub pcs: Vec<u32>,
    /// The histogram, in `MODE_HIST`.
    pub hist: Option<Hist>,
    /// A tag per stored sample, parallel to `pcs`, when the run recorded tags.
    pub tags: Vec<u32>,
    /// Names the firmware gave tags.
    pub names: Vec<(u32, String)>,
    /// Kinds of records this version does not know (skipped).
    pub unknown_records: Vec<u16>,
    /// Whether the END record and its checksum were present and right.
    pub complete: bool,
    /// Lap-timed regions, if the firmware timed any.
    pub laps: Option<crate::dump::laps::Laps>,
    /// The newest laps in order, placed among the samples (laps timed while sampling).
    pub lap_trace: Option<crate::dump::laps::Trace>,
    /// ARMv8-A PMU counts, if the firmware counted events.
    pub pmu: Option<crate::dump::pmu::Record>,
    /// PMU region laps in order, placed among the samples (regions counted while sampling).
    pub pmu_trace: Option<crate::dump::pmu::Trace>,
    /// Exceptions' priorities at the end of the run: `(exception, priority byte, enabled)`.
    pub priorities: Vec<(u16, u8, bool)>,
    /// What each stored sample kept of the interrupted stack, parallel to `pcs`, when the run
    /// kept stack windows (`--stacks`).
    pub stacks: Vec<StackSample>,
    /// Whether the sampler checked each sample's lateness, and how many were held off (a
    /// held-off sample's PC in `pcs` has bit 0 set; in bins it is in the outside counter).
    pub held_off: Option<HeldOff>,
}

/// The sampler's lateness check ([`wire::REC_HELD_OFF`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldOff {
    /// A sample taken more timer ticks than this after its timer expired was held off.
    pub late_ticks: u32,
    /// Samples held off (all the run's, including any the ring no longer holds).
    pub count: u32,
    /// `wire::LATE_*`: whether the check ran, or why not.
    pub how: u32,
}

impl HeldOff {
    /// Whether every sample was checked.
    pub fn checked(&self) -> bool {
        self.how == wire::LATE_CHECKED
    }
}

/// What a sample kept of the interrupted context to unwind it on the host (a
/// [`wire::REC_STACKS`] entry without its PC and xPSR, which are in `pcs` and `tags`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackSample {
    /// The stacked LR.
    pub lr: u32,
    /// The SP of the interrupted code (above the exception frame).
    pub sp: u32,
    /// The interrupted r7.
    pub r7: u32,
    /// The low byte of the sampler's EXC_RETURN.
    pub exc_return: u8,
    /// Words of the interrupted stack from `sp` up.
    pub window: Vec<u32>,
    /// The r7 chain's frame records beyond the window: `(saved r7, saved LR)`, the first at
    /// `r7`, each next one at the saved r7 of the one before.
    pub records: Vec<(u32, u32)>,
    /// After a record whose LR is an EXC_RETURN, the exception frame's stacked LR, PC and
    /// xPSR follow in `records` as `(LR, PC)`, `(xPSR, 0)` ([`wire::STACK_FRAMES_INLINE`]).
    pub frames_inline: bool,
}

/// Address-range bins as the firmware counted them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hist {
    /// Address of the first bin.
    pub base: u32,
    /// log2 of the bin size in bytes.
    pub shift: u32,
    /// Samples outside every bin (saturating at 65535 like the bins).
    pub outside: u32,
    pub bins: Vec<u16>,
}

impl Dump {
    /// A whole dump of samples (and their tags, if any) made on the host: from memory read off a
    /// target, a live capture, SWO or PCSR.
    pub fn of_samples(info: Info, first_seq: u32, pcs: Vec<u32>, tags: Vec<u32>) -> Dump {
        Dump {
            version: wire::DUMP_VERSION,
            info,
            first_seq,
            pcs,
            tags,
            complete: true,
            ..Dump::default()
        }
    }
}

impl Hist {
    /// Samples in the bins and outside them.
    pub fn total(&self) -> u64 {
        self.bins.iter().map(|&b| b as u64).sum::<u64>() + self.outside as u64
    }

    /// Whether any counter reached its ceiling (the histogram undercounts there).
    pub fn saturated(&self) -> usize {
        self.bins.iter().filter(|&&b| b == u16::MAX).count() + usize::from(self.outside >= 0xFFFF)
    }
}

/// Why a dump could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    Empty,
    NotADump,
    Version(u16),
    /// Cut short: `at` bytes were readable.
    Truncated {
        at: usize,
    },
    Checksum {
        stored: u32,
        computed: u32,
    },
    /// The END checksum is wrong, and the CHECK records place the damage: the records in
    /// these byte ranges were left out, with the samples they held.
    Damaged {
        ranges: Vec<std::ops::Range<usize>>,
        samples: u64,
    },
    Malformed(String),
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DumpError::Empty => write!(f, "the dump is empty: the firmware sent no samples"),
            DumpError::NotADump => write!(f, "this is not a sampler dump (no `SMPL` magic)"),
            DumpError::Version(v) => write!(
                f,
                "the dump has format version {v}, this cargo-sample reads version {}: use matching \
                 versions of cargo-sample and sampler-rt",
                wire::DUMP_VERSION
            ),
            DumpError::Truncated { at } => {
                write!(f, "the dump is cut short after {at} bytes")
            }
            DumpError::Checksum { stored, computed } => write!(
                f,
                "the dump is corrupt: its checksum is {stored:#010x} but its bytes give {computed:#010x}"
            ),
            DumpError::Damaged { ranges, samples } => {
                let at: Vec<String> = ranges
                    .iter()
                    .map(|r| format!("{}..{}", r.start, r.end))
                    .collect();
                write!(
                    f,
                    "the dump is damaged in bytes {} (their checkpoints' checksums do not match): \
                     the {samples} samples recorded there were left out",
                    at.join(", ")
                )
            }
            DumpError::Malformed(m) => write!(f, "the dump is malformed: {m}"),
        }
    }
}

impl std::error::Error for DumpError {}

fn le16(b: &[u8], at: usize) -> u16 {
    le::read_u16(b, at).unwrap_or(0)
}

fn le32(b: &[u8], at: usize) -> u32 {
    le::read_u32(b, at).unwrap_or(0)
}

/// Decode a whole dump, strictly: any damage is an error.
pub fn decode(bytes: &[u8]) -> Result<Dump, DumpError> {
    let (dump, err) = decode_partial(bytes);
    match err {
        Some(e) => Err(e),
        None => Ok(dump),
    }
}

/// Decode as much as can be trusted. Returns what was read before the first problem, and the
/// problem. Samples of a record that is cut short are kept (they were written in order). A dump
/// with a wrong checksum keeps the records its CHECK records vouch for ([`DumpError::Damaged`]),
/// or yields no samples at all when it has none (or the damage is in its INFO).
pub fn decode_partial(bytes: &[u8]) -> (Dump, Option<DumpError>) {
    let mut dump = Dump::default();
    if bytes.is_empty() {
        return (dump, Some(DumpError::Empty));
    }
    if bytes.len() < 4 || le32(bytes, 0) != wire::DUMP_MAGIC {
        return (dump, Some(DumpError::NotADump));
    }
    if bytes.len() < wire::FILE_HEADER_LEN {
        return (dump, Some(DumpError::Truncated { at: bytes.len() }));
    }
    dump.version = le16(bytes, 4);
    if dump.version != wire::DUMP_VERSION {
        let v = dump.version;
        return (dump, Some(DumpError::Version(v)));
    }
    let header_len = le16(bytes, 6) as usize;
    if !(wire::FILE_HEADER_LEN..=4096).contains(&header_len) {
        return (
            dump,
            Some(DumpError::Malformed(format!(
                "file header length {header_len}"
            ))),
        );
    }
    let mut off = header_len;
    let mut have_info = false;
    let mut spans: Vec<Span> = Vec::new();
    let mut checks: Vec<(usize, u32)> = Vec::new();
    loop {
        if off + wire::RECORD_HEADER_LEN > bytes.len() {
            return (dump, Some(DumpError::Truncated { at: bytes.len() }));
        }
        let kind = le16(bytes, off);
        let len = le32(bytes, off + 4) as usize;
        let body = off + wire::RECORD_HEADER_LEN;
        if kind == wire::REC_END {
            if body + 4 > bytes.len() {
                return (dump, Some(DumpError::Truncated { at: bytes.len() }));
            }
            // The END header is outside the checksum: it must be exactly what writers write.
            if len != 4 || le16(bytes, off + 2) != 0 {
                dump.pcs.clear();
                dump.tags.clear();
                dump.stacks.clear();
                return (
                    dump,
                    Some(DumpError::Malformed("damaged END record".into())),
                );
            }
            let stored = le32(bytes, body);
            let computed = wire::crc32(&bytes[..off]);
            if stored != computed && have_info && !checks.is_empty() {
                let damaged = damaged_ranges(bytes, &checks, (off, stored));
                return match leave_out(&mut dump, &spans, &damaged) {
                    Some(samples) => (
                        dump,
                        Some(DumpError::Damaged {
                            ranges: damaged,
                            samples,
                        }),
                    ),
                    None => {
                        dump.pcs.clear();
                        dump.tags.clear();
                        dump.stacks.clear();
                        (dump, Some(DumpError::Checksum { stored, computed }))
                    }
                };
            }
            if stored != computed {
                dump.pcs.clear();
                dump.tags.clear();
                dump.stacks.clear();
                return (dump, Some(DumpError::Checksum { stored, computed }));
            }
            dump.complete = true;
            if !have_info {
                return (dump, Some(DumpError::Malformed("no INFO record".into())));
            }
            return (dump, None);
        }
        let available = bytes.len().saturating_sub(body);
        let cut = len > available;
        let payload = &bytes[body..body + len.min(available)];
        let samples_before = dump.pcs.len();
        match kind {
            wire::REC_CHECK if payload.len() == 4 => checks.push((off, le32(payload, 0))),
            wire::REC_INFO => match Info::decode(payload) {
                Some(i) => {
                    dump.info = i;
                    have_info = true;
                }
                None => return (dump, Some(DumpError::Truncated { at: bytes.len() })),
            },
            wire::REC_PCS | wire::REC_PCS_TAGS => {
                let tagged = kind == wire::REC_PCS_TAGS;
                let entry = if tagged { 8 } else { 4 };
                if !dump.stacks.is_empty() {
                    return (
                        dump,
                        Some(DumpError::Malformed(
                            "STACKS and PCS records in one dump".into(),
                        )),
                    );
                }
                if payload.len() < 8 {
                    return (dump, Some(DumpError::Truncated { at: bytes.len() }));
                }
                let first = le32(payload, 0);
                let count = le32(payload, 4) as usize;
                if !cut && count * entry + 8 != len {
                    return (
                        dump,
                        Some(DumpError::Malformed(format!(
                            "PCS record of {len} bytes says it holds {count} samples"
                        ))),
                    );
                }
                if tagged != (dump.tags.len() == dump.pcs.len() && !dump.pcs.is_empty())
                    && !dump.pcs.is_empty()
                {
                    return (
                        dump,
                        Some(DumpError::Malformed(
                            "tagged and untagged PCS records in one dump".into(),
                        )),
                    );
                }
                if let Err(e) = continue_at(&mut dump, first, "PCS") {
                    return (dump, Some(e));
                }
                for c in payload[8..].chunks_exact(entry).take(count) {
                    dump.pcs.push(le32(c, 0));
                    if tagged {
                        dump.tags.push(le32(c, 4));
                    }
                }
            }
            wire::REC_STACKS => {
                if let Err(e) = decode_stacks(&mut dump, payload, len, cut) {
                    return (dump, Some(e));
                }
            }
            wire::REC_PMU | wire::REC_LAPS | wire::REC_PMU_TRACE | wire::REC_LAP_TRACE if !cut => {
                if let Err(e) = store_record(&mut dump, kind, payload) {
                    return (dump, Some(e));
                }
            }
            wire::REC_NAMES => {
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
            wire::REC_HELD_OFF if payload.len() >= 12 => {
                dump.held_off = Some(HeldOff {
                    late_ticks: le32(payload, 0),
                    count: le32(payload, 4),
                    how: le32(payload, 8),
                });
            }
            wire::REC_PRIORITIES => {
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
            wire::REC_HIST => {
                if payload.len() < wire::HIST_HEADER_LEN {
                    return (dump, Some(DumpError::Truncated { at: bytes.len() }));
                }
                let count = le32(payload, 12);
                // In 64 bits: a damaged count must not overflow the length it implies.
                if !cut && wire::HIST_HEADER_LEN as u64 + 2 * count as u64 != len as u64 {
                    return (
                        dump,
                        Some(DumpError::Malformed(format!(
                            "HIST record of {len} bytes says it holds {count} bins"
                        ))),
                    );
                }
                let shift = le32(payload, 4);
                if !(1..=16).contains(&shift) {
                    return (
                        dump,
                        Some(DumpError::Malformed(format!(
                            "HIST record with a shift of {shift}"
                        ))),
                    );
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
            }
            other => dump.unknown_records.push(other),
        }
        if cut {
            return (dump, Some(DumpError::Truncated { at: bytes.len() }));
        }
        let end = body + len.div_ceil(4) * 4;
        spans.push(Span {
            bytes: off..end,
            kind,
            samples: samples_before..dump.pcs.len(),
        });
        off = end;
    }
}

/// Where a record lay in the dump and which samples it gave.
struct Span {
    bytes: std::ops::Range<usize>,
    kind: u16,
    samples: std::ops::Range<usize>,
}

/// The byte ranges whose checkpoint does not vouch for them: from one CHECK record (or the
/// file's start) to the next one, the next one included. When the stretch after a failed
/// checkpoint checks out from the CRC computed up to it, only the checkpoint's own value was
/// damaged: then just that record is named. `checks` are the CHECK records' offsets and
/// values; `end` the END record's offset and value.
fn damaged_ranges(
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
fn leave_out(dump: &mut Dump, spans: &[Span], damaged: &[std::ops::Range<usize>]) -> Option<u64> {
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
            wire::REC_LAP_TRACE => dump.lap_trace = None,
            wire::REC_PMU => dump.pmu = None,
            wire::REC_PMU_TRACE => dump.pmu_trace = None,
            _ => {}
        }
    }
    Some(left_out)
}

/// Encode a dump the way the firmware writes one (the host makes dumps of what it read off a
/// target, a snapshot, SWO or PCSR; tests make them too): INFO, the samples (PCS, PCS_TAGS when
/// there is a tag per sample, or HIST), NAMES when there are names, and END with the CRC of all
/// before it. The one encoder of the format on the host.
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
fn store_record(dump: &mut Dump, kind: u16, payload: &[u8]) -> Result<(), DumpError> {
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
fn decode_stacks(dump: &mut Dump, payload: &[u8], len: usize, cut: bool) -> Result<(), DumpError> {
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
struct VecWriter {
    out: Vec<u8>,
    crc: u32,
}

impl DumpWriter for VecWriter {
    fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    fn crc_word(&mut self) -> &mut u32 {
        &mut self.crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump streamed as the runtimes stream it: INFO (and its CHECK), records of `per`
    /// samples each followed by a CHECK, a NAMES record, END. Returns it and each record of
    /// samples' byte range.
    fn streamed(chunks: u32, per: u32) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
        let mut w = VecWriter {
            out: Vec::new(),
            crc: 0,
        };
        w.begin();
        w.info(&Info {
            taken: chunks * per,
            ..Info::default()
        });
        let mut ranges = Vec::new();
        for c in 0..chunks {
            let start = w.out.len();
            w.record(wire::REC_PCS, 8 + 4 * per);
            w.put32(c * per);
            w.put32(per);
            for k in 0..per {
                w.put32(0x1000 + 2 * (c * per + k));
            }
            ranges.push(start..w.out.len());
            w.check();
        }
        w.record(wire::REC_NAMES, 20);
        for v in [1, 7, 5] {
            w.put32(v);
        }
        w.put(b"motor\0\0\0");
        w.end();
        (w.out, ranges)
    }

    #[test]
    fn a_damaged_dump_keeps_the_records_its_checkpoints_vouch_for() {
        let (clean, ranges) = streamed(3, 100);
        let d = decode(&clean).unwrap();
        assert_eq!(d.pcs.len(), 300);
        assert_eq!(d.names, [(7, "motor".to_owned())]);
        // A flip inside the second record: its 100 samples go, the rest stay, in order.
        let mut bytes = clean.clone();
        bytes[ranges[1].start + 200] ^= 0x40;
        let (d, err) = decode_partial(&bytes);
        let Some(DumpError::Damaged {
            ranges: bad,
            samples,
        }) = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(samples, 100);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].start <= ranges[1].start && ranges[1].end <= bad[0].end);
        assert!(ranges[0].end <= bad[0].start && bad[0].end <= ranges[2].start);
        let want: Vec<u32> = (0..100).chain(200..300).map(|k| 0x1000 + 2 * k).collect();
        assert_eq!(d.pcs, want);
        assert_eq!(d.names, [(7, "motor".to_owned())]);
        assert!(decode(&bytes).is_err(), "strict decoding refuses it");
        // A damaged checkpoint value: the stretch after it checks out from the CRC computed
        // up to it, so only the checkpoint is named and every sample stays.
        let mut bytes = clean.clone();
        bytes[ranges[1].end + 9] ^= 1;
        let (d, err) = decode_partial(&bytes);
        let Some(DumpError::Damaged {
            ranges: bad,
            samples: 0,
        }) = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0], ranges[1].end..ranges[1].end + 12);
        assert_eq!(d.pcs.len(), 300);
        // After the last checkpoint: the names go, every sample stays.
        let mut bytes = clean.clone();
        let at = bytes.len() - 14;
        bytes[at] ^= 2;
        let (d, err) = decode_partial(&bytes);
        assert!(
            matches!(err, Some(DumpError::Damaged { samples: 0, .. })),
            "{err:?}"
        );
        assert_eq!((d.pcs.len(), d.names.len()), (300, 0));
        // In the INFO record: nothing can be trusted.
        let mut bytes = clean;
        bytes[wire::FILE_HEADER_LEN + 8 + 20] ^= 1;
        let (d, err) = decode_partial(&bytes);
        assert!(matches!(err, Some(DumpError::Checksum { .. })), "{err:?}");
        assert!(d.pcs.is_empty());
    }

    #[test]
    fn tagged_samples_and_names_round_trip() {
        let info = Info {
            tag_kind: wire::TAG_XPSR,
            taken: 3,
            ..Info::default()
        };
        let mut bytes = encode(&Dump::of_samples(
            info,
            5,
            vec![0x100, 0x102, 0x104],
            vec![0, 47, 0],
        ));
        let d = decode(&bytes).unwrap();
        assert_eq!(d.pcs, [0x100, 0x102, 0x104]);
        assert_eq!(d.tags, [0, 47, 0]);
        assert_eq!(d.first_seq, 5);
        assert_eq!(d.info.tag_kind, wire::TAG_XPSR);
        // A NAMES record before END.
        let end = bytes.len() - 12;
        bytes.truncate(end);
        let mut names = Vec::new();
        names.extend_from_slice(&1u32.to_le_bytes());
        names.extend_from_slice(&47u32.to_le_bytes());
        names.extend_from_slice(&5u32.to_le_bytes());
        names.extend_from_slice(b"motor\0\0\0");
        bytes.extend_from_slice(&wire::record_header(wire::REC_NAMES, names.len() as u32));
        bytes.extend_from_slice(&names);
        let crc = wire::crc32(&bytes);
        bytes.extend_from_slice(&wire::record_header(wire::REC_END, 4));
        bytes.extend_from_slice(&crc.to_le_bytes());
        let d = decode(&bytes).unwrap();
        assert_eq!(d.names, [(47, "motor".to_owned())]);
        // A dump the host makes from a ring it read keeps the names, under the CRC.
        let mut d = decode(&encode(&Dump::of_samples(
            info,
            5,
            vec![0x100, 0x102],
            vec![1, 2],
        )))
        .unwrap();
        d.names = vec![(1, "filter".into()), (2, "a name of 10".into())];
        let again = decode(&encode(&d)).unwrap();
        assert_eq!(again.names, d.names);
        assert_eq!((again.pcs, again.tags), (d.pcs, d.tags));
    }

    #[test]
    fn stack_samples_round_trip_and_damage_is_named() {
        let info = Info {
            mode: wire::MODE_RING,
            tag_kind: wire::TAG_XPSR,
            taken: 2,
            ..Info::default()
        };
        let mut d = Dump::of_samples(info, 7, vec![0x100, 0x202], vec![0x0100_0000, 0x0100_002E]);
        d.stacks = vec![
            StackSample {
                lr: 0x105,
                sp: 0x2000_FF00,
                r7: 0x2000_FF10,
                exc_return: 0xF9,
                window: vec![1, 2, 3],
                records: vec![(0x2000_FF40, 0x1235), (0x2000_FF80, 0x1301)],
                frames_inline: true,
            },
            StackSample {
                lr: 0xFFFF_FFF9,
                sp: 0x2000_FE00,
                r7: 0,
                exc_return: 0xE9,
                window: Vec::new(),
                records: Vec::new(),
                frames_inline: false,
            },
        ];
        let bytes = encode(&d);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.pcs, d.pcs);
        assert_eq!(back.tags, d.tags);
        assert_eq!(back.stacks, d.stacks);
        assert_eq!(back.first_seq, 7);
        // Cut anywhere: whole entries kept, never a panic, never more than were sent.
        for cut in 0..bytes.len() {
            let (part, _) = decode_partial(&bytes[..cut]);
            assert!(part.stacks.len() <= 2 && part.stacks.len() == part.pcs.len());
        }
        // An entry that claims more words than the record holds is named.
        let mut bad = bytes.clone();
        // INFO, its CHECK, then STACKS.
        let at = wire::FILE_HEADER_LEN + 2 * wire::RECORD_HEADER_LEN + wire::INFO_LEN + 4;
        assert_eq!(u16::from_le_bytes([bad[at], bad[at + 1]]), wire::REC_STACKS);
        bad[at + wire::RECORD_HEADER_LEN + 12 + 22] = 40;
        assert!(matches!(
            decode_partial(&bad).1,
            Some(DumpError::Malformed(m)) if m.contains("does not hold")
        ));
    }

    #[test]
    fn held_off_marks_and_the_check_round_trip_in_rings_and_stacks() {
        let info = Info {
            mode: wire::MODE_RING,
            taken: 3,
            ..Info::default()
        };
        let check = HeldOff {
            late_ticks: 17,
            count: 1,
            how: wire::LATE_CHECKED,
        };
        // A ring of PCs: the mark is bit 0 of the stored PC.
        let mut d = Dump::of_samples(info, 0, vec![0x100, 0x203, 0x300], Vec::new());
        d.held_off = Some(check);
        let back = decode(&encode(&d)).unwrap();
        assert_eq!(back.pcs, vec![0x100, 0x203, 0x300]);
        assert_eq!(back.held_off, Some(check));
        assert!(back.held_off.unwrap().checked());
        // Stack entries: the mark is a bit of the entry's tail, the PC stored even; read back
        // as bit 0 again.
        let info = Info {
            tag_kind: wire::TAG_XPSR,
            ..info
        };
        let mut d = Dump::of_samples(info, 0, vec![0x101, 0x200], vec![0x0100_0000; 2]);
        d.stacks = vec![StackSample::default(); 2];
        d.held_off = Some(check);
        let bytes = encode(&d);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.pcs, vec![0x101, 0x200]);
        assert_eq!(back.held_off, Some(check));
        let at = wire::FILE_HEADER_LEN + 2 * wire::RECORD_HEADER_LEN + wire::INFO_LEN + 4;
        assert_eq!(
            u16::from_le_bytes([bytes[at], bytes[at + 1]]),
            wire::REC_STACKS
        );
        let first = at + wire::RECORD_HEADER_LEN + 12;
        assert_eq!(le32(&bytes, first), 0x100, "the stored PC is even");
        assert_ne!(le32(&bytes, first + 20) & wire::STACK_HELD_OFF, 0);
        // A run without the check has none.
        let plain = Dump::of_samples(Info::default(), 0, vec![0x100], Vec::new());
        assert_eq!(decode(&encode(&plain)).unwrap().held_off, None);
    }

    #[test]
    fn priorities_round_trip_and_a_short_record_keeps_what_it_has() {
        let mut d = Dump::of_samples(Info::default(), 0, vec![0x100], Vec::new());
        d.priorities = vec![(15, 0x00, true), (14, 0xE0, true), (35, 0x40, true)];
        let again = decode(&encode(&d)).unwrap();
        assert_eq!(again.priorities, d.priorities);
        // A count larger than the payload: the entries that are there.
        let mut bytes = encode(&Dump::of_samples(
            Info::default(),
            0,
            vec![0x100],
            Vec::new(),
        ));
        let end = bytes.len() - 12;
        bytes.truncate(end);
        let mut payload = 9u32.to_le_bytes().to_vec();
        payload.extend_from_slice(&wire::priority_entry(16, 0x20, true).to_le_bytes());
        bytes.extend_from_slice(&wire::record_header(wire::REC_PRIORITIES, 8));
        bytes.extend_from_slice(&payload);
        let crc = wire::crc32(&bytes);
        bytes.extend_from_slice(&wire::record_header(wire::REC_END, 4));
        bytes.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&bytes).unwrap().priorities, [(16, 0x20, true)]);
    }

    #[test]
    fn histograms_round_trip_and_damage_is_named() {
        let info = Info {
            mode: wire::MODE_HIST,
            taken: 7,
            ..Info::default()
        };
        let h = Hist {
            base: 0x400,
            shift: 4,
            outside: 2,
            bins: vec![1, 0, 3, 0xFFFF, 1],
        };
        let bytes = encode(&Dump {
            info,
            hist: Some(h.clone()),
            ..Dump::default()
        });
        let d = decode(&bytes).unwrap();
        assert_eq!(d.hist.as_ref(), Some(&h));
        assert_eq!(h.total(), 2 + 1 + 3 + 0xFFFF + 1);
        assert_eq!(h.saturated(), 1);
        // Every truncation is reported, none panics.
        for cut in 0..bytes.len() {
            assert!(decode_partial(&bytes[..cut]).1.is_some(), "cut at {cut}");
        }
    }

    /// A dump the way a streaming firmware writes it: a first INFO, one PCS record per chunk
    /// of `chunk` samples, the final INFO, END.
    fn encode_streamed(info: &Info, pcs: &[u32], chunk: usize, gap_after_first: u32) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&wire::file_header());
        let first = Info {
            taken: 0,
            stop: wire::STOP_RUNNING,
            ..*info
        };
        out.extend_from_slice(&wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32));
        out.extend_from_slice(&first.encode());
        let mut seq = 0u32;
        for (n, c) in pcs.chunks(chunk).enumerate() {
            out.extend_from_slice(&wire::record_header(wire::REC_PCS, 8 + 4 * c.len() as u32));
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
            c.iter()
                .for_each(|pc| out.extend_from_slice(&pc.to_le_bytes()));
            seq += c.len() as u32 + if n == 0 { gap_after_first } else { 0 };
        }
        out.extend_from_slice(&wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32));
        out.extend_from_slice(&info.encode());
        let crc = wire::crc32(&out);
        out.extend_from_slice(&wire::record_header(wire::REC_END, 4));
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn streamed_chunks_join_and_the_last_info_wins() {
        let (info, pcs) = sample();
        let bytes = encode_streamed(&info, &pcs, 32, 0);
        let d = decode(&bytes).unwrap();
        assert_eq!(d.pcs, pcs);
        assert_eq!(d.first_seq, 0);
        assert_eq!(d.info.taken, 100);
        assert_eq!(d.info.stop, wire::STOP_LIMIT);
        // Cut inside the third chunk: the first two chunks and the whole samples after them
        // survive, with the provisional INFO.
        let cut = wire::FILE_HEADER_LEN + 8 + wire::INFO_LEN + 2 * (8 + 8 + 128) + 8 + 8 + 40;
        let (d, err) = decode_partial(&bytes[..cut]);
        assert!(matches!(err, Some(DumpError::Truncated { .. })));
        assert_eq!(d.pcs, pcs[..74]);
        assert_eq!(d.info.stop, wire::STOP_RUNNING);
    }

    #[test]
    fn a_gap_between_streamed_chunks_is_malformed() {
        let (info, pcs) = sample();
        let (d, err) = decode_partial(&encode_streamed(&info, &pcs, 32, 5));
        assert!(matches!(err, Some(DumpError::Malformed(ref m)) if m.contains("sample 37")));
        assert_eq!(d.pcs.len(), 32);
    }

    fn sample() -> (Info, Vec<u32>) {
        let info = Info {
            mode: wire::MODE_RING,
            stop: wire::STOP_LIMIT,
            arch: 7,
            reload: 249,
            jitter_mask: 127,
            limit: 100,
            capacity: 128,
            taken: 100,
            code_start: 0xc0,
            code_end: 0x1000,
            code_crc: 0xdead_beef,
            ..Info::default()
        };
        let pcs = (0..100).map(|i| 0x100 + 2 * i).collect();
        (info, pcs)
    }

    #[test]
    fn round_trip() {
        let (info, pcs) = sample();
        let d = decode(&encode(&Dump::of_samples(info, 7, pcs.clone(), Vec::new()))).unwrap();
        assert_eq!(d.info, info);
        assert_eq!(d.pcs, pcs);
        assert_eq!(d.first_seq, 7);
        assert!(d.complete);
    }

    #[test]
    fn every_truncation_is_reported_and_keeps_whole_samples() {
        let (info, pcs) = sample();
        let bytes = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
        for cut in 0..bytes.len() {
            let (d, err) = decode_partial(&bytes[..cut]);
            let err = err.unwrap_or_else(|| panic!("cut at {cut} decoded as complete"));
            assert!(
                matches!(
                    err,
                    DumpError::Truncated { .. } | DumpError::Empty | DumpError::NotADump
                ),
                "cut at {cut}: {err}"
            );
            assert!(d.pcs.len() <= pcs.len());
            assert_eq!(
                d.pcs[..],
                pcs[..d.pcs.len()],
                "cut at {cut} changed samples"
            );
        }
    }

    #[test]
    fn every_bit_flip_is_caught() {
        let (info, pcs) = sample();
        let bytes = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
        for i in 0..bytes.len() {
            for bit in [0, 3, 7] {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let r = decode(&b);
                assert!(r.is_err(), "flip of bit {bit} in byte {i} went unnoticed");
            }
        }
    }

    #[test]
    fn unknown_records_are_skipped() {
        let (info, pcs) = sample();
        let mut out = Vec::new();
        out.extend_from_slice(&wire::file_header());
        out.extend_from_slice(&wire::record_header(0x7777, 3));
        out.extend_from_slice(&[1, 2, 3, 0]);
        let full = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
        out.extend_from_slice(&full[wire::FILE_HEADER_LEN..full.len() - 12]);
        let crc = wire::crc32(&out);
        out.extend_from_slice(&wire::record_header(wire::REC_END, 4));
        out.extend_from_slice(&crc.to_le_bytes());
        let d = decode(&out).unwrap();
        assert_eq!(d.unknown_records, vec![0x7777]);
        assert_eq!(d.pcs.len(), 100);
    }

    #[test]
    fn other_version_and_garbage_are_named() {
        let (info, pcs) = sample();
        let mut b = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
        b[4] = 9;
        assert_eq!(decode(&b).unwrap_err(), DumpError::Version(9));
        assert_eq!(
            decode(b"hello world, no dump").unwrap_err(),
            DumpError::NotADump
        );
        assert_eq!(decode(&[]).unwrap_err(), DumpError::Empty);
    }
}
