//! Decoding the sampler's dump (format: `sampler_rt::wire`, drawn in `docs/dump-format.md`).

mod check;
mod encode;
mod records;

pub mod callgraph;
pub mod defmt;
pub mod exact;
pub mod fault;
pub mod itm;
pub mod laps;
pub mod le;
pub mod pmu;
pub mod stream;
pub mod tasks;
pub mod textdump;
pub mod tpiu;

use std::fmt;

use sampler_rt::wire::{self, Info};

pub use encode::encode;
pub use records::stack_slot;

/// Which code made a dump: the fingerprinted range of the image and the CRC-32 of its bytes
/// (a dump's INFO carries it; a capture read off a target is given the image's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub start: u32,
    pub end: u32,
    pub crc: u32,
}

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
    /// Embassy task statistics, when the firmware kept them (sampler-rt's `embassy` feature).
    pub tasks: Option<tasks::Tasks>,
    /// The newest Embassy polls in order, placed among the samples.
    pub task_trace: Option<tasks::Trace>,
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

impl StackSample {
    /// The registers and stack the unwinder starts from, for the sample taken at `pc`.
    pub fn context(&self, pc: u32) -> crate::image::unwind::Context<'_> {
        crate::image::unwind::Context {
            pc,
            lr: self.lr,
            sp: self.sp,
            r7: self.r7,
            window: &self.window,
            records: &self.records,
            frames_inline: self.frames_inline,
        }
    }
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
    let mut d = Decoding {
        bytes,
        dump: Dump::default(),
        have_info: false,
        spans: Vec::new(),
        checks: Vec::new(),
    };
    let err = d.run().err();
    (d.dump, err)
}

/// A dump being decoded.
struct Decoding<'a> {
    bytes: &'a [u8],
    dump: Dump,
    have_info: bool,
    /// Where each record lay and which samples it gave.
    spans: Vec<check::Span>,
    /// The CHECK records: their offsets and values.
    checks: Vec<(usize, u32)>,
}

impl Decoding<'_> {
    fn truncated(&self) -> DumpError {
        DumpError::Truncated {
            at: self.bytes.len(),
        }
    }

    /// The file header: its length, after the magic and version are checked.
    fn header(&mut self) -> Result<usize, DumpError> {
        let bytes = self.bytes;
        if bytes.is_empty() {
            return Err(DumpError::Empty);
        }
        if bytes.len() < 4 || le32(bytes, 0) != wire::DUMP_MAGIC {
            return Err(DumpError::NotADump);
        }
        if bytes.len() < wire::FILE_HEADER_LEN {
            return Err(self.truncated());
        }
        self.dump.version = le16(bytes, 4);
        if self.dump.version != wire::DUMP_VERSION {
            return Err(DumpError::Version(self.dump.version));
        }
        let header_len = le16(bytes, 6) as usize;
        if !(wire::FILE_HEADER_LEN..=4096).contains(&header_len) {
            return Err(DumpError::Malformed(format!(
                "file header length {header_len}"
            )));
        }
        Ok(header_len)
    }

    /// Every record up to END.
    fn run(&mut self) -> Result<(), DumpError> {
        let bytes = self.bytes;
        let mut off = self.header()?;
        loop {
            if off + wire::RECORD_HEADER_LEN > bytes.len() {
                return Err(self.truncated());
            }
            let kind = le16(bytes, off);
            let len = le32(bytes, off + 4) as usize;
            let body = off + wire::RECORD_HEADER_LEN;
            if kind == wire::REC_END {
                return self.end(off, len);
            }
            let available = bytes.len().saturating_sub(body);
            let cut = len > available;
            let payload = &bytes[body..body + len.min(available)];
            let samples_before = self.dump.pcs.len();
            self.record(off, kind, payload, len, cut)?;
            if cut {
                return Err(self.truncated());
            }
            let end = body + len.div_ceil(4) * 4;
            self.spans.push(check::Span {
                bytes: off..end,
                kind,
                samples: samples_before..self.dump.pcs.len(),
            });
            off = end;
        }
    }

    /// One record (not END) into the dump.
    fn record(
        &mut self,
        off: usize,
        kind: u16,
        payload: &[u8],
        len: usize,
        cut: bool,
    ) -> Result<(), DumpError> {
        let total = self.bytes.len();
        let dump = &mut self.dump;
        match kind {
            wire::REC_CHECK if payload.len() == 4 => self.checks.push((off, le32(payload, 0))),
            wire::REC_INFO => {
                dump.info = Info::decode(payload).ok_or(DumpError::Truncated { at: total })?;
                self.have_info = true;
            }
            wire::REC_PCS | wire::REC_PCS_TAGS => {
                records::pcs(dump, kind, payload, len, cut, total)?;
            }
            wire::REC_STACKS => records::stacks(dump, payload, len, cut)?,
            wire::REC_TASK_TRACE if !cut => {
                dump.task_trace = Some(
                    tasks::decode_trace(payload)
                        .ok_or_else(|| DumpError::Malformed("damaged TASK_TRACE record".into()))?,
                );
            }
            wire::REC_TASKS if !cut => {
                dump.tasks = Some(
                    tasks::decode(payload)
                        .ok_or_else(|| DumpError::Malformed("damaged TASKS record".into()))?,
                );
            }
            wire::REC_PMU | wire::REC_LAPS | wire::REC_PMU_TRACE | wire::REC_LAP_TRACE if !cut => {
                records::store_record(dump, kind, payload)?;
            }
            wire::REC_NAMES => records::names(dump, payload),
            wire::REC_HELD_OFF if payload.len() >= 12 => {
                dump.held_off = Some(HeldOff {
                    late_ticks: le32(payload, 0),
                    count: le32(payload, 4),
                    how: le32(payload, 8),
                });
            }
            wire::REC_PRIORITIES => records::priorities(dump, payload),
            wire::REC_HIST => records::hist(dump, payload, len, cut, total)?,
            other => dump.unknown_records.push(other),
        }
        Ok(())
    }

    /// The END record at `off`: the checksum of everything before it, and what a failed one
    /// still leaves.
    fn end(&mut self, off: usize, len: usize) -> Result<(), DumpError> {
        let bytes = self.bytes;
        let body = off + wire::RECORD_HEADER_LEN;
        if body + 4 > bytes.len() {
            return Err(self.truncated());
        }
        // The END header is outside the checksum: it must be exactly what writers write.
        if len != 4 || le16(bytes, off + 2) != 0 {
            self.drop_samples();
            return Err(DumpError::Malformed("damaged END record".into()));
        }
        let stored = le32(bytes, body);
        let computed = wire::crc32(&bytes[..off]);
        if stored != computed && self.have_info && !self.checks.is_empty() {
            let damaged = check::damaged_ranges(bytes, &self.checks, (off, stored));
            return match check::leave_out(&mut self.dump, &self.spans, &damaged) {
                Some(samples) => Err(DumpError::Damaged {
                    ranges: damaged,
                    samples,
                }),
                None => {
                    self.drop_samples();
                    Err(DumpError::Checksum { stored, computed })
                }
            };
        }
        if stored != computed {
            self.drop_samples();
            return Err(DumpError::Checksum { stored, computed });
        }
        self.dump.complete = true;
        if !self.have_info {
            return Err(DumpError::Malformed("no INFO record".into()));
        }
        Ok(())
    }

    /// A dump that cannot be trusted gives no samples.
    fn drop_samples(&mut self) {
        self.dump.pcs.clear();
        self.dump.tags.clear();
        self.dump.stacks.clear();
    }
}

#[cfg(test)]
mod tests;
