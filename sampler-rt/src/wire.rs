//! The contract between the target and the host: the dump format and the run configuration block.
//!
//! This module is compiled on every target, so `cargo-sample` uses the very same constants and
//! checksum as the firmware. `docs/dump-format.md` in the repository draws every byte.
//!
//! All integers are little-endian. A dump is a 16-byte file header followed by records; every
//! record is an 8-byte record header (`kind: u16`, `flags: u16`, `len: u32`) and `len` payload
//! bytes, padded with zeros to a multiple of 4. The last record is [`REC_END`], whose payload is
//! the CRC-32 of every byte before it. Unknown record kinds are skipped by the host, so new kinds
//! can be added without a new format version.

/// `"SMPL"` read as a little-endian `u32`: the first word of every dump.
pub const DUMP_MAGIC: u32 = u32::from_le_bytes(*b"SMPL");
/// Version of the dump format. The host refuses dumps of another major version.
pub const DUMP_VERSION: u16 = 1;
/// Size of the file header in bytes.
pub const FILE_HEADER_LEN: usize = 16;
/// Size of a record header in bytes.
pub const RECORD_HEADER_LEN: usize = 8;

/// Run facts: mode, timer, period, jitter, counts, stop reason, image fingerprint. See [`Info`].
pub const REC_INFO: u16 = 1;
/// Raw program counters: `first_seq: u32`, `count: u32`, then `count` words.
pub const REC_PCS: u16 = 2;
/// Address-range histogram: `base: u32`, `shift: u32`, `outside: u32`, `count: u32`, counters.
pub const REC_HIST: u16 = 3;
/// Per-sample tags, parallel to a [`REC_PCS`] record: `first_seq: u32`, `count: u32`, words.
pub const REC_TAGS: u16 = 4;
/// Lap-timer region records.
pub const REC_LAPS: u16 = 5;
/// PMU counter snapshots.
pub const REC_PMU: u16 = 6;
/// A table of names sent by the firmware (task names for tags): `count: u32`, then per name
/// `tag: u32`, `len: u32` and `len` bytes of UTF-8 padded with zeros to a multiple of 4.
pub const REC_NAMES: u16 = 7;
/// Raw program counters with a tag each: `first_seq: u32`, `count: u32`, then `count` pairs
/// `(pc: u32, tag: u32)`, oldest first. What the tag is, `Info::tag_kind` says.
pub const REC_PCS_TAGS: u16 = 8;
/// End of dump: `crc32: u32` over every byte before this record.
pub const REC_END: u16 = 0xFFFF;

/// Sampling mode.
pub const MODE_OFF: u8 = 0;
/// Ring of raw program counters.
pub const MODE_RING: u8 = 1;
/// Address-range histogram bins.
pub const MODE_HIST: u8 = 2;

/// LAPS: a region timed from start to end.
pub const LAP_REGION: u8 = 0;
/// LAPS: the iteration of a loop, timed from one iteration to the next.
pub const LAP_ITERATION: u8 = 1;
/// LAPS: no counter could time the laps.
pub const LAP_COUNTER_NONE: u8 = 0;
/// LAPS: the DWT cycle counter (core cycles).
pub const LAP_COUNTER_CYCCNT: u8 = 1;
/// LAPS: SysTick's current value (its clock: the core clock on the boards cargo-sample drives).
pub const LAP_COUNTER_SYSTICK: u8 = 2;
/// LAPS: the ARMv8-A PMU cycle counter (PMCCNTR_EL0).
pub const LAP_COUNTER_PMCCNTR: u8 = 3;
/// LAPS: the ARMv8-A virtual generic timer's count (CNTVCT_EL0).
pub const LAP_COUNTER_GENERIC: u8 = 4;

/// The PMU group the host asks an ARMv8-A firmware to count, at [`PMU_CONFIG_SYMBOL`].
pub const PMU_CONFIG_SYMBOL: &str = "SAMPLER_RT_PMU_CONFIG";
/// `"SPMU"`.
pub const PMU_CONFIG_MAGIC: u32 = u32::from_le_bytes(*b"SPMU");
/// Events in one group at most (ARMv8-A has up to 31 event counters).
pub const PMU_MAX_EVENTS: usize = 30;
/// Size of the PMU configuration block: magic, count (u16) and a reserved u16, flags
/// (`PMU_FLAG_*`), [`PMU_MAX_EVENTS`] event numbers (u16), then the run's id (u32).
pub const PMU_CONFIG_LEN: usize = 12 + 2 * PMU_MAX_EVENTS + 4;
/// PMU configuration flag: leave the counts in memory ([`PMU_OUT_SYMBOL`]) for a debugger to
/// read, instead of sending them through semihosting (boards without a semihosting host).
pub const PMU_FLAG_MEMORY: u32 = 1;
/// Where a firmware with [`PMU_FLAG_MEMORY`] leaves its counts: `magic` ([`PMU_OUT_MAGIC`],
/// written last), `run_id` (the configuration's), `len` (bytes of dump that follow), `full`
/// (non-zero when the dump did not fit and was cut), then the dump's bytes.
pub const PMU_OUT_SYMBOL: &str = "SAMPLER_RT_PMU_OUT";
/// `"SPMO"`: the counts in [`PMU_OUT_SYMBOL`] are complete.
pub const PMU_OUT_MAGIC: u32 = u32::from_le_bytes(*b"SPMO");
/// Bytes before the dump in [`PMU_OUT_SYMBOL`].
pub const PMU_OUT_HEADER: usize = 16;
/// PMU record status: counted.
pub const PMU_OK: u32 = 0;
/// PMU record status: the group had more events than the CPU has counters; nothing counted.
pub const PMU_TOO_MANY: u32 = 1;
/// PMU record status: no PMUv3 (ID_AA64DFR0_EL1.PMUVer).
pub const PMU_ABSENT: u32 = 2;

/// Encode a PMU configuration block for `events` (at most [`PMU_MAX_EVENTS`] are kept).
pub fn pmu_config(events: &[u16]) -> [u8; PMU_CONFIG_LEN] {
    pmu_config_with(events, 0, 0)
}

/// Encode a PMU configuration block with `PMU_FLAG_*` flags and the run's id (which a firmware
/// leaving its counts in memory copies beside them, so that a host never takes a previous
/// run's counts, left in RAM across a reset, for this run's).
pub fn pmu_config_with(events: &[u16], flags: u32, run_id: u32) -> [u8; PMU_CONFIG_LEN] {
    let mut b = [0u8; PMU_CONFIG_LEN];
    put32(&mut b, 0, PMU_CONFIG_MAGIC);
    let n = events.len().min(PMU_MAX_EVENTS);
    b[4..6].copy_from_slice(&(n as u16).to_le_bytes());
    put32(&mut b, 8, flags);
    for (i, e) in events[..n].iter().enumerate() {
        b[12 + 2 * i..14 + 2 * i].copy_from_slice(&e.to_le_bytes());
    }
    put32(&mut b, 12 + 2 * PMU_MAX_EVENTS, run_id);
    b
}

/// A PMU configuration block's flags and run id, if the block is one.
pub fn pmu_config_flags(b: &[u8]) -> Option<(u32, u32)> {
    pmu_config_events(b)?;
    let at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    Some((at(8), at(12 + 2 * PMU_MAX_EVENTS)))
}

/// Decode a PMU configuration block: the events, if the block is one.
pub fn pmu_config_events(b: &[u8]) -> Option<([u16; PMU_MAX_EVENTS], usize)> {
    if b.len() < PMU_CONFIG_LEN || u32::from_le_bytes([b[0], b[1], b[2], b[3]]) != PMU_CONFIG_MAGIC
    {
        return None;
    }
    let n = u16::from_le_bytes([b[4], b[5]]) as usize;
    if n > PMU_MAX_EVENTS {
        return None;
    }
    let mut e = [0u16; PMU_MAX_EVENTS];
    for (i, slot) in e.iter_mut().enumerate().take(n) {
        *slot = u16::from_le_bytes([b[12 + 2 * i], b[13 + 2 * i]]);
    }
    Some((e, n))
}

/// The firmware's tag names in memory (`sampler_rt::name_tag`), for a host reading the ring:
/// `len: u32`, then [`NAMES_MAX`] entries of `tag: u32, len: u32, ptr` (a pointer: 4 bytes on
/// Cortex-M, 8 on ARMv8-A, where the entries start 8-aligned).
pub const NAMES_SYMBOL: &str = "SAMPLER_RT_NAMES";
/// Names kept at most.
pub const NAMES_MAX: usize = 32;

/// Where the entries of [`NAMES_SYMBOL`] start and how long each is, for 32- or 64-bit
/// pointers.
pub const fn names_layout(wide: bool) -> (usize, usize) {
    if wide { (8, 16) } else { (4, 12) }
}

/// The `(tag, length, address)` of each name in a [`NAMES_SYMBOL`] block.
pub fn names_entries(b: &[u8], wide: bool) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
    let (at, size) = names_layout(wide);
    let n = if b.len() >= 4 {
        (get32(b, 0) as usize).min(NAMES_MAX)
    } else {
        0
    };
    (0..n).filter_map(move |i| {
        let e = b.get(at + i * size..at + (i + 1) * size)?;
        let ptr = if wide {
            u64::from_le_bytes(e[8..16].try_into().ok()?)
        } else {
            get32(e, 8) as u64
        };
        Some((get32(e, 0), get32(e, 4), ptr))
    })
}

/// The sampler's next chunk (both architectures): after `before` samples, with a ring of
/// `capacity` entries (`None`: bins) and a `limit` (0 = none), how many samples it holds and
/// from which ring slot. A ring's chunk ends at the ring's end or the limit; bins have no
/// chunks and count down to the limit, or as far as a word goes.
pub fn next_chunk(before: u32, capacity: Option<u32>, limit: u32) -> (u32, u32) {
    let Some(cap) = capacity else {
        return (if limit == 0 { u32::MAX } else { limit - before }, 0);
    };
    let pos = before % cap;
    let mut chunk = cap - pos;
    if limit != 0 {
        chunk = chunk.min(limit - before);
    }
    (chunk, pos)
}

/// Where the dump goes when the run is done.
pub const SINK_NONE: u8 = 0;
/// A host file through semihosting (QEMU, or a debugger that serves semihosting).
pub const SINK_SEMIHOSTING: u8 = 1;
/// A host reads the ring out of memory while the firmware runs (a debug probe, QEMU's monitor).
/// The ring wraps; the host keeps up by the sample count in the state. When the firmware ends
/// (`flush`, `exit`) it waits, for a bounded time, until the host has read the last samples and
/// says so by writing [`SINK_NONE`] over the state's `sink` byte.
pub const SINK_HOST: u8 = 2;
/// The firmware's own byte writer (`sampler_rt::set_writer`: a UART, USB serial, ...). The
/// ring keeps the newest samples; the dump is written once, at the limit or at `flush`/`exit`.
pub const SINK_WRITER: u8 = 3;

/// Timer that paces the sampler: the core's SysTick.
pub const TIMER_SYSTICK: u8 = 0;
/// An Arm CMSDK APB timer (mps2/mps3 machines); its base address is in [`Config::timer_base`].
pub const TIMER_CMSDK: u8 = 1;
/// No timer: the core's DWT unit sampled the PC (every `reload + 1` cycles) over SWO; the host
/// made the dump.
pub const TIMER_DWT: u8 = 2;
/// No timer: the host read DWT_PCSR through the debug port as fast as it could.
pub const TIMER_PCSR: u8 = 3;
/// The ARMv8-A EL1 virtual generic timer (aarch64 sampling).
pub const TIMER_GENERIC: u8 = 4;
/// ARMv8-A PMU overflowing every N events (aarch64 sampling); the event number is in
/// [`Config::timer_base`]: [`PMU_CPU_CYCLES`] uses the cycle counter, any other event counter 0.
pub const TIMER_PMU: u8 = 5;
/// The PMU's CPU_CYCLES event, which `TIMER_PMU` counts on the dedicated cycle counter.
pub const PMU_CPU_CYCLES: u16 = 0x11;

/// No tag per sample.
pub const TAG_NONE: u8 = 0;
/// The interrupted context's xPSR, as stacked: its low 9 bits are the exception number that
/// was running (0 = thread mode).
pub const TAG_XPSR: u8 = 1;
/// The word at `Config::tag_addr` when the sample was taken (a current-task pointer), or, with
/// `tag_addr` 0, the firmware's own tag (`sampler_rt::set_tag`).
pub const TAG_WORD: u8 = 2;

/// Why sampling stopped.
pub const STOP_RUNNING: u8 = 0;
/// The configured number of samples was taken.
pub const STOP_LIMIT: u8 = 1;
/// The firmware called `sampler_rt::exit` or `sampler_rt::flush`.
pub const STOP_FIRMWARE: u8 = 2;
/// The host read the sampler's memory while the firmware still ran (timeout, Ctrl-C, fault).
pub const STOP_SNAPSHOT: u8 = 3;

/// Payload length of a version-1 [`REC_INFO`] record.
pub const INFO_LEN: usize = 64;

/// The facts of one run, as carried by a [`REC_INFO`] record.
///
/// ```text
/// off  size  field
///   0     1  mode            MODE_*
///   1     1  timer           TIMER_*
///   2     1  stop            STOP_*
///   3     1  arch            6 = ARMv6-M entry, 7 = ARMv7-M/ARMv8-M entry
///   4     4  reload          base value of the timer's reload register (ticks per sample - 1)
///   8     4  jitter_mask     random ticks added per sample: 0 ..= jitter_mask
///  12     4  limit           samples requested (0 = until stopped)
///  16     4  capacity        ring slots (or bins) built into the firmware
///  20     4  taken           samples taken
///  24     4  lost            samples that could not be stored (not counting ring overwrite)
///  28     4  code_start      start of the fingerprinted code range (`__stext`)
///  32     4  code_end        end of the range (`__etext`)
///  36     4  code_crc        CRC-32 of the bytes in [code_start, code_end)
///  40     4  config_addr     address of the configuration block the firmware read
///  44     1  config_found    1 when the host's configuration block was present and valid
///  45     1  priority        exception priority given to the sampling timer
///  46     2  rt_version      sampler-rt version: major << 8 | minor
///  48     1  tag_kind        TAG_*: what each sample's tag is
///  49    15  reserved        zero
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Info {
    /// `MODE_*`.
    pub mode: u8,
    /// `TIMER_*`.
    pub timer: u8,
    /// `STOP_*`.
    pub stop: u8,
    /// 6 or 7: which handler entry sequence the firmware uses.
    pub arch: u8,
    /// Base value written to the timer's reload register: a sample every `reload + 1 + r`
    /// ticks, `r` uniform in `0..=jitter_mask`.
    pub reload: u32,
    /// Random extra ticks per sample, uniform in `0..=jitter_mask`.
    pub jitter_mask: u32,
    /// Samples requested; 0 = until stopped.
    pub limit: u32,
    /// Ring slots built into the firmware.
    pub capacity: u32,
    /// Samples taken.
    pub taken: u32,
    /// Samples lost.
    pub lost: u32,
    /// Start of the fingerprinted code.
    pub code_start: u32,
    /// End of the fingerprinted code.
    pub code_end: u32,
    /// CRC-32 of the fingerprinted code.
    pub code_crc: u32,
    /// Address of the configuration block.
    pub config_addr: u32,
    /// Whether the host's configuration was found.
    pub config_found: u8,
    /// Exception priority of the sampling timer.
    pub priority: u8,
    /// sampler-rt version, `major << 8 | minor`.
    pub rt_version: u16,
    /// `TAG_*`.
    pub tag_kind: u8,
    /// ARMv8-A: interrupts that were not the sampler's but were taken by its vectors, and
    /// ended unserved (the firmware has interrupts of its own: it should keep its vectors and
    /// call `sampler_rt::on_irq`).
    pub foreign: u32,
}

impl Info {
    /// Encode into the 64-byte payload of a [`REC_INFO`] record.
    pub fn encode(&self) -> [u8; INFO_LEN] {
        let mut b = [0u8; INFO_LEN];
        b[0] = self.mode;
        b[1] = self.timer;
        b[2] = self.stop;
        b[3] = self.arch;
        put32(&mut b, 4, self.reload);
        put32(&mut b, 8, self.jitter_mask);
        put32(&mut b, 12, self.limit);
        put32(&mut b, 16, self.capacity);
        put32(&mut b, 20, self.taken);
        put32(&mut b, 24, self.lost);
        put32(&mut b, 28, self.code_start);
        put32(&mut b, 32, self.code_end);
        put32(&mut b, 36, self.code_crc);
        put32(&mut b, 40, self.config_addr);
        b[44] = self.config_found;
        b[45] = self.priority;
        b[46..48].copy_from_slice(&self.rt_version.to_le_bytes());
        b[48] = self.tag_kind;
        put32(&mut b, 52, self.foreign);
        b
    }

    /// Decode from a [`REC_INFO`] payload; `None` when it is shorter than version 1's.
    pub fn decode(b: &[u8]) -> Option<Info> {
        if b.len() < INFO_LEN {
            return None;
        }
        Some(Info {
            mode: b[0],
            timer: b[1],
            stop: b[2],
            arch: b[3],
            reload: get32(b, 4),
            jitter_mask: get32(b, 8),
            limit: get32(b, 12),
            capacity: get32(b, 16),
            taken: get32(b, 20),
            lost: get32(b, 24),
            code_start: get32(b, 28),
            code_end: get32(b, 32),
            code_crc: get32(b, 36),
            config_addr: get32(b, 40),
            config_found: b[44],
            priority: b[45],
            rt_version: u16::from_le_bytes([b[46], b[47]]),
            tag_kind: b[48],
            foreign: get32(b, 52),
        })
    }
}

/// `"SCFG"` read as a little-endian `u32`: the first word of a valid configuration block.
pub const CONFIG_MAGIC: u32 = u32::from_le_bytes(*b"SCFG");
/// Version of the configuration block layout.
pub const CONFIG_VERSION: u16 = 3;
/// Size of the configuration block in bytes.
pub const CONFIG_LEN: usize = 56;
/// Name of the symbol of the configuration block in the firmware ELF.
pub const CONFIG_SYMBOL: &str = "SAMPLER_RT_CONFIG";
/// Name of the symbol of the sampler's state in the firmware ELF (read by host snapshots).
pub const STATE_SYMBOL: &str = "SAMPLER_RT_STATE";
/// Name of the symbol of the sample ring in the firmware ELF.
pub const RING_SYMBOL: &str = "SAMPLER_RT_RING";

/// The per-run configuration the host gives the firmware, so that one build serves every period,
/// jitter, sample count and mode. It is initialised data at [`CONFIG_SYMBOL`]: the host writes
/// these bytes over the symbol's initial value in the copy of the image it loads (the code, and
/// so the fingerprint, is untouched). The firmware uses the block only when the magic and the
/// check word are right, and its built-in defaults otherwise.
///
/// ```text
/// off  size  field
///   0     4  magic        CONFIG_MAGIC
///   4     2  version      CONFIG_VERSION
///   6     2  len          CONFIG_LEN
///   8     1  mode         MODE_*
///   9     1  sink         SINK_*
///  10     1  priority     exception priority byte for the sampling timer (0 = most urgent)
///  11     1  timer        TIMER_*
///  12     4  reload       base reload value: a sample every reload + 1 + (rand & jitter_mask) ticks
///  16     4  jitter_mask  random ticks added per sample, 0 ..= jitter_mask (2^k - 1)
///  20     4  limit        samples to take, 0 = until stopped
///  24     4  seed         xorshift32 seed (non-zero)
///  28     4  timer_base   base address of a CMSDK timer
///  32     4  timer_irq    interrupt number of a CMSDK timer
///  36     4  hist_base    MODE_HIST: address of the first bin (a multiple of the bin size)
///  40     1  hist_shift   MODE_HIST: log2 of the bin size in bytes, 1 ..= 16
///  41     1  tag_kind     TAG_*: what to record beside each sample (ring mode)
///  42     2  reserved     zero
///  44     4  tag_addr     TAG_WORD: address of the word to record
///  48     4  reserved     zero
///  52     4  check        CONFIG_MAGIC mixed with the words at 4..52 (see `check_word`)
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `MODE_*`.
    pub mode: u8,
    /// `SINK_*`.
    pub sink: u8,
    /// Exception priority byte of the sampling timer.
    pub priority: u8,
    /// `TIMER_*`.
    pub timer: u8,
    /// Base reload value of the timer (ticks per sample - 1 without jitter).
    pub reload: u32,
    /// Jitter mask, `2^k - 1`.
    pub jitter_mask: u32,
    /// Samples to take, 0 = until stopped.
    pub limit: u32,
    /// Random seed, non-zero.
    pub seed: u32,
    /// CMSDK timer base address.
    pub timer_base: u32,
    /// CMSDK timer interrupt number.
    pub timer_irq: u32,
    /// `MODE_HIST`: address of the first bin.
    pub hist_base: u32,
    /// `MODE_HIST`: log2 of the bin size in bytes.
    pub hist_shift: u8,
    /// `TAG_*`.
    pub tag_kind: u8,
    /// `TAG_WORD`: address of the word recorded with each sample.
    pub tag_addr: u32,
}

impl Config {
    /// Encode into the 40 bytes the host places at [`CONFIG_SYMBOL`].
    pub fn encode(&self) -> [u8; CONFIG_LEN] {
        let mut b = [0u8; CONFIG_LEN];
        put32(&mut b, 0, CONFIG_MAGIC);
        b[4..6].copy_from_slice(&CONFIG_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&(CONFIG_LEN as u16).to_le_bytes());
        b[8] = self.mode;
        b[9] = self.sink;
        b[10] = self.priority;
        b[11] = self.timer;
        put32(&mut b, 12, self.reload);
        put32(&mut b, 16, self.jitter_mask);
        put32(&mut b, 20, self.limit);
        put32(&mut b, 24, self.seed);
        put32(&mut b, 28, self.timer_base);
        put32(&mut b, 32, self.timer_irq);
        put32(&mut b, 36, self.hist_base);
        b[40] = self.hist_shift;
        b[41] = self.tag_kind;
        put32(&mut b, 44, self.tag_addr);
        let words = words_of(&b);
        put32(&mut b, 52, check_word(&words));
        b
    }

    /// Decode a configuration block; `None` unless magic, version, length and check word are right.
    pub fn decode(b: &[u8]) -> Option<Config> {
        if b.len() < CONFIG_LEN || get32(b, 0) != CONFIG_MAGIC {
            return None;
        }
        if u16::from_le_bytes([b[4], b[5]]) != CONFIG_VERSION
            || u16::from_le_bytes([b[6], b[7]]) as usize != CONFIG_LEN
        {
            return None;
        }
        if check_word(&words_of(b)) != get32(b, 52) {
            return None;
        }
        Some(Config {
            mode: b[8],
            sink: b[9],
            priority: b[10],
            timer: b[11],
            reload: get32(b, 12),
            jitter_mask: get32(b, 16),
            limit: get32(b, 20),
            seed: get32(b, 24),
            timer_base: get32(b, 28),
            timer_irq: get32(b, 32),
            hist_base: get32(b, 36),
            hist_shift: b[40],
            tag_kind: b[41],
            tag_addr: get32(b, 44),
        })
    }
}

fn words_of(b: &[u8]) -> [u32; CONFIG_LEN / 4] {
    let mut w = [0u32; CONFIG_LEN / 4];
    for (i, word) in w.iter_mut().enumerate() {
        *word = get32(b, i * 4);
    }
    w
}

/// The check word of a configuration block, from its first nine words. Random RAM contents
/// after power-up pass this with a probability of 2^-64 (magic and check word both match).
pub fn check_word(words: &[u32; CONFIG_LEN / 4]) -> u32 {
    let mut c = CONFIG_MAGIC;
    for w in &words[1..CONFIG_LEN / 4 - 1] {
        c = (c ^ w).rotate_left(5).wrapping_mul(0x9E37_79B1);
    }
    c
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// The sampler's `phase` (a byte of the Cortex-M state, a word of the ARMv8-A one): not started.
pub const PHASE_IDLE: u8 = 0;
/// Sampling.
pub const PHASE_RUNNING: u8 = 1;
/// Stopped (the limit, or the firmware's `stop`/`flush`/`exit`); the dump not yet sent.
pub const PHASE_STOPPED: u8 = 2;
/// Stopped and the dump sent.
pub const PHASE_DUMPED: u8 = 3;

/// Size of the sampler's state block at [`STATE_SYMBOL`].
pub const STATE_LEN: usize = 88;
/// `"SSTA"`: the last word of the state block once `start` ran.
pub const STATE_MAGIC: u32 = u32::from_le_bytes(*b"SSTA");

/// The sampler's state as the host reads it from a running target (a QEMU monitor snapshot,
/// or a debug probe), to recover the samples of a run that did not finish. Offsets:
///
/// ```text
///  0 wptr        next ring slot        32 chunk      length of the current chunk
///  4 remaining   samples left in chunk 36 before     samples before the chunk
///  8 rng         xorshift32 state      40 limit      samples requested
/// 12 handler     sampling variant      44 capacity   ring slots
/// 16 jitter      span (v6: mask)       48 ring       ring address
/// 20 reload      base reload value     52 mode, stop, timer, priority   (bytes)
/// 24 reload_reg  timer register        56 sink, config_found, phase, arch (bytes)
/// 28 ack_reg     CMSDK acknowledge     60 magic      STATE_MAGIC
/// 64 hist_word   bins address + shift  72 bins       address of counter 0
/// 68 hist_base   first bin's address   76 last_bin   index of the outside counter
/// 80 tag_addr    TAG_WORD: the word    84 tag_kind    TAG_* (ring entries are 8 bytes
///                                                      when not TAG_NONE)
/// ```
///
/// In `MODE_HIST` the first words mean other things: `wptr` holds `hist_base`, and `rng`
/// holds `hist_word` when the period is constant (the handler loads both with one `ldm`).
/// `hist_word` is the bins array's address plus the shift: a register shift takes its amount
/// from the low byte, and the array is 256-aligned, so one word serves as both; the ARMv7-M
/// handler then finds counter `i` at `hist_word + 2 i`, i.e. `shift` bytes into the array; the
/// other handlers (ARMv6-M, which cannot access unaligned halfwords, and the random period) at
/// the array's start. `bins` says which: it is counter 0's address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateView {
    /// Samples left in the current chunk.
    pub remaining: u32,
    /// Jitter mask.
    pub mask: u32,
    /// Base reload value.
    pub reload: u32,
    /// Length of the current chunk.
    pub chunk: u32,
    /// Samples taken before the current chunk.
    pub before: u32,
    /// Samples requested.
    pub limit: u32,
    /// Ring slots.
    pub capacity: u32,
    /// Ring address.
    pub ring: u32,
    /// `MODE_*`.
    pub mode: u8,
    /// `STOP_*`.
    pub stop: u8,
    /// `TIMER_*`.
    pub timer: u8,
    /// Timer priority.
    pub priority: u8,
    /// Whether the host configuration was found.
    pub config_found: u8,
    /// 0 idle, 1 sampling, 2 stopped, 3 dump sent.
    pub phase: u8,
    /// 6 or 7.
    pub arch: u8,
    /// `MODE_HIST`: bins address + shift.
    pub hist_word: u32,
    /// `MODE_HIST`: address of the first bin.
    pub hist_base: u32,
    /// `MODE_HIST`: the address of counter 0.
    pub bins: u32,
    /// `MODE_HIST`: index of the outside counter (the number of bins).
    pub last_bin: u32,
    /// `TAG_WORD`: the address of the word recorded.
    pub tag_addr: u32,
    /// `TAG_*`: ring entries are `(pc, tag)` pairs unless `TAG_NONE`.
    pub tag_kind: u32,
    /// ARMv8-A: interrupts the sampler's vectors took that were not its own.
    pub foreign: u32,
}

impl StateView {
    /// `MODE_HIST`: log2 of the bin size.
    pub fn hist_shift(&self) -> u32 {
        self.hist_word & 0xFF
    }

    /// `MODE_HIST`: where counter 0 is, as the firmware's handler addresses it.
    pub fn counters(&self) -> u32 {
        self.bins
    }
}

/// Byte offsets of the state block, checked against the target's struct at compile time.
pub mod state_offsets {
    /// `wptr`.
    pub const WPTR: usize = 0;
    /// `remaining`.
    pub const REMAINING: usize = 4;
    /// `rng`.
    pub const RNG: usize = 8;
    /// `handler`.
    pub const HANDLER: usize = 12;
    /// `jitter`: span in ticks (mask + 1), or the mask itself on ARMv6-M.
    pub const JITTER: usize = 16;
    /// `reload`.
    pub const RELOAD: usize = 20;
    /// `reload_reg`.
    pub const RELOAD_REG: usize = 24;
    /// `ack_reg`.
    pub const ACK_REG: usize = 28;
    /// `chunk`.
    pub const CHUNK: usize = 32;
    /// `ring`.
    pub const RING: usize = 48;
    /// `mode`.
    pub const MODE: usize = 52;
    /// `sink`.
    pub const SINK: usize = 56;
    /// `magic`.
    pub const MAGIC: usize = 60;
    /// `hist_word`.
    pub const HIST_WORD: usize = 64;
    /// `hist_base`.
    pub const HIST_BASE: usize = 68;
    /// `bins`.
    pub const BINS: usize = 72;
    /// `last_bin`.
    pub const LAST_BIN: usize = 76;
    /// `tag_addr`.
    pub const TAG_ADDR: usize = 80;
    /// `tag_kind`.
    pub const TAG_KIND: usize = 84;
}

/// The jitter mask a state's `jitter` word stands for: ARMv7-M and later keep the span
/// (mask + 1) for the handler's `umlal`, ARMv6-M the mask (`arch` as in [`Info::arch`]).
pub fn jitter_mask(arch: u8, jitter: u32) -> u32 {
    if arch == 6 {
        jitter
    } else {
        jitter.saturating_sub(1)
    }
}

/// `"SA64"`: the last word of the ARMv8-A sampler's state block (offset 80) once it started.
/// That block is laid out for its assembly handler:
///
/// ```text
///  0 wptr (u64)   8 remaining  12 rng      16 reload    20 mask      24 before   28 chunk
/// 32 limit       36 capacity  40 ring (u64)             48 phase     52 sent     56 sink
/// 60 handle+1    64 config_found (u8), mode (u8)    68 tag_addr  72 crc       76 timer
/// 80 magic       84 foreign
/// ```
///
/// In `MODE_HIST` the ring's fields hold the bins': `wptr` the counters, `ring` the code
/// address of bin 0, `capacity` the outside counter's index, `sent` the shift. `tag_addr` is
/// the word recorded with each sample (`TAG_WORD`), 0 for none.
///
/// (`sink` sits where the Cortex-M block has it, so that a host releases either the same way.)
pub const A64_STATE_MAGIC: u32 = u32::from_le_bytes(*b"SA64");

impl StateView {
    /// Decode a state block (Cortex-M's, or the ARMv8-A one); `None` unless it is whole and the
    /// sampler had started.
    pub fn decode(b: &[u8]) -> Option<StateView> {
        if b.len() < STATE_LEN {
            return None;
        }
        if get32(b, 60) != STATE_MAGIC {
            return Self::decode_a64(b);
        }
        Some(StateView {
            remaining: get32(b, 4),
            mask: jitter_mask(b[59], get32(b, 16)),
            reload: get32(b, 20),
            chunk: get32(b, 32),
            before: get32(b, 36),
            limit: get32(b, 40),
            capacity: get32(b, 44),
            ring: get32(b, 48),
            mode: b[52],
            stop: b[53],
            timer: b[54],
            priority: b[55],
            config_found: b[57],
            phase: b[58],
            arch: b[59],
            hist_word: get32(b, 64),
            hist_base: get32(b, 68),
            bins: get32(b, 72),
            last_bin: get32(b, 76),
            tag_addr: get32(b, 80),
            tag_kind: get32(b, 84),
            foreign: 0,
        })
    }

    fn decode_a64(b: &[u8]) -> Option<StateView> {
        if get32(b, 80) != A64_STATE_MAGIC {
            return None;
        }
        let phase = get32(b, 48) as u8;
        let (before, chunk, remaining, limit) =
            (get32(b, 24), get32(b, 28), get32(b, 8), get32(b, 32));
        let taken = before.wrapping_add(chunk).wrapping_sub(remaining);
        // Stopped at the limit, or by the firmware (`flush`, `exit`).
        let stop = match phase {
            PHASE_IDLE | PHASE_RUNNING => STOP_RUNNING,
            _ if limit != 0 && taken >= limit => STOP_LIMIT,
            _ => STOP_FIRMWARE,
        };
        Some(StateView {
            remaining: get32(b, 8),
            mask: get32(b, 20),
            reload: get32(b, 16),
            chunk: get32(b, 28),
            before: get32(b, 24),
            limit: get32(b, 32),
            capacity: get32(b, 36),
            ring: get32(b, 40),
            mode: if b[65] == MODE_HIST {
                MODE_HIST
            } else {
                MODE_RING
            },
            stop,
            // The firmware keeps the configuration's timer: anything but the PMU is the
            // generic timer there.
            timer: match get32(b, 76) as u8 {
                TIMER_PMU => TIMER_PMU,
                _ => TIMER_GENERIC,
            },
            phase,
            config_found: b[64],
            arch: 8,
            // Histogram mode keeps the bins in the ring's fields.
            hist_base: get32(b, 40),
            hist_word: get32(b, 52),
            bins: get32(b, 0),
            last_bin: get32(b, 36),
            tag_addr: get32(b, 68),
            tag_kind: if get32(b, 68) == 0 {
                TAG_NONE as u32
            } else {
                TAG_WORD as u32
            },
            foreign: get32(b, 84),
            ..StateView::default()
        })
    }

    /// Samples taken so far.
    pub fn taken(&self) -> u32 {
        self.before
            .wrapping_add(self.chunk)
            .wrapping_sub(self.remaining)
    }
}

/// Length of the fixed part of a [`REC_HIST`] payload: `base`, `shift`, `outside`, `count`;
/// `count` little-endian `u16` counters follow, padded with zeros to a multiple of 4 bytes.
pub const HIST_HEADER_LEN: usize = 16;

/// The fixed part of a [`REC_HIST`] payload.
pub fn hist_header(base: u32, shift: u32, outside: u32, count: u32) -> [u8; HIST_HEADER_LEN] {
    let mut b = [0u8; HIST_HEADER_LEN];
    put32(&mut b, 0, base);
    put32(&mut b, 4, shift);
    put32(&mut b, 8, outside);
    put32(&mut b, 12, count);
    b
}

/// Payload length of a [`REC_HIST`] record of `count` counters (padding excluded).
pub const fn hist_len(count: u32) -> u32 {
    HIST_HEADER_LEN as u32 + 2 * count
}

/// Encode a record header.
pub fn record_header(kind: u16, len: u32) -> [u8; RECORD_HEADER_LEN] {
    let mut b = [0u8; RECORD_HEADER_LEN];
    b[0..2].copy_from_slice(&kind.to_le_bytes());
    put32(&mut b, 4, len);
    b
}

/// Encode the file header.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut b = [0u8; FILE_HEADER_LEN];
    put32(&mut b, 0, DUMP_MAGIC);
    b[4..6].copy_from_slice(&DUMP_VERSION.to_le_bytes());
    b[6..8].copy_from_slice(&(FILE_HEADER_LEN as u16).to_le_bytes());
    b
}

/// Incremental CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`), table of 16 entries so that
/// it costs 64 bytes of flash on the target.
#[derive(Clone, Copy, Debug)]
pub struct Crc32(u32);

const CRC_NIBBLE: [u32; 16] = [
    0x0000_0000,
    0x1DB7_1064,
    0x3B6E_20C8,
    0x26D9_30AC,
    0x76DC_4190,
    0x6B6B_51F4,
    0x4DB2_6158,
    0x5005_713C,
    0xEDB8_8320,
    0xF00F_9344,
    0xD6D6_A3E8,
    0xCB61_B38C,
    0x9B64_C2B0,
    0x86D3_D2D4,
    0xA00A_E278,
    0xBDBD_F21C,
];

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A fresh checksum.
    pub const fn new() -> Self {
        Crc32(0xFFFF_FFFF)
    }

    /// Feed one byte.
    #[inline]
    pub fn byte(&mut self, b: u8) {
        let mut c = self.0 ^ b as u32;
        c = (c >> 4) ^ CRC_NIBBLE[(c & 15) as usize];
        c = (c >> 4) ^ CRC_NIBBLE[(c & 15) as usize];
        self.0 = c;
    }

    /// Feed bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    /// The checksum of everything fed so far.
    pub fn finish(&self) -> u32 {
        !self.0
    }

    /// The running register, to keep in a plain word between calls.
    pub const fn state(&self) -> u32 {
        self.0
    }

    /// Continue from a running register kept by [`Crc32::state`].
    pub const fn resume(state: u32) -> Self {
        Crc32(state)
    }
}

/// Where a dump's bytes go, with the running CRC-32 that its END record carries: the one writer
/// of the format. Both runtimes, the PMU counts and the host's encoder implement `raw` and
/// `crc_word` for their sink and write every dump through these methods.
pub trait DumpWriter {
    /// Send bytes as they are (the END record itself, which the CRC does not cover).
    fn raw(&mut self, bytes: &[u8]);

    /// The CRC register ([`Crc32::state`]) of everything `put` since the file header.
    fn crc_word(&mut self) -> &mut u32;

    /// Send bytes that the END record's CRC covers.
    fn put(&mut self, bytes: &[u8]) {
        let word = self.crc_word();
        let mut c = Crc32::resume(*word);
        c.update(bytes);
        *word = c.state();
        self.raw(bytes);
    }

    /// A little-endian word.
    fn put32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    /// The file header; the CRC starts here.
    fn begin(&mut self) {
        *self.crc_word() = Crc32::new().state();
        self.put(&file_header());
    }

    /// A record's header: `len` payload bytes follow (padded to 4 by the writer).
    fn record(&mut self, kind: u16, len: u32) {
        self.put(&record_header(kind, len));
    }

    /// An INFO record (a later one supersedes an earlier one).
    fn info(&mut self, info: &Info) {
        self.record(REC_INFO, INFO_LEN as u32);
        self.put(&info.encode());
    }

    /// The END record with the CRC of everything before it.
    fn end(&mut self) {
        let crc = Crc32::resume(*self.crc_word()).finish();
        self.raw(&record_header(REC_END, 4));
        self.raw(&crc.to_le_bytes());
    }
}

/// CRC-32 of a byte slice.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_reference_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn chunks_end_at_the_ring_end_or_the_limit() {
        assert_eq!(next_chunk(0, Some(100), 0), (100, 0));
        assert_eq!(next_chunk(250, Some(100), 0), (50, 50));
        assert_eq!(next_chunk(250, Some(100), 270), (20, 50));
        assert_eq!(next_chunk(10, None, 0), (u32::MAX, 0));
        assert_eq!(next_chunk(10, None, 30), (20, 0));
    }

    #[test]
    fn pmu_config_carries_events_flags_and_run_id() {
        let b = pmu_config_with(&[0x08, 0x03], PMU_FLAG_MEMORY, 0xDEAD_BEEF);
        let (e, n) = pmu_config_events(&b).unwrap();
        assert_eq!(&e[..n], &[0x08, 0x03]);
        assert_eq!(pmu_config_flags(&b), Some((PMU_FLAG_MEMORY, 0xDEAD_BEEF)));
        assert_eq!(pmu_config_flags(&pmu_config(&[1])), Some((0, 0)));
        // The firmware's own default (0xFF bytes) is no block.
        assert_eq!(pmu_config_flags(&[0xFF; PMU_CONFIG_LEN]), None);
        assert_eq!(pmu_config_flags(&b[..PMU_CONFIG_LEN - 1]), None);
    }

    #[test]
    fn config_round_trip_and_rejects_damage() {
        let c = Config {
            mode: MODE_RING,
            sink: SINK_SEMIHOSTING,
            priority: 0,
            timer: TIMER_SYSTICK,
            reload: 249,
            jitter_mask: 127,
            limit: 10_000,
            seed: 0x1234_5678,
            timer_base: 0,
            timer_irq: 0,
            hist_base: 0x0000_1000,
            hist_shift: 4,
            tag_kind: TAG_WORD,
            tag_addr: 0x2000_0100,
        };
        let b = c.encode();
        assert_eq!(Config::decode(&b), Some(c));
        for i in 0..CONFIG_LEN {
            let mut d = b;
            d[i] ^= 0x10;
            assert_eq!(Config::decode(&d), None, "flip in byte {i} went unnoticed");
        }
        assert_eq!(Config::decode(&[0u8; CONFIG_LEN]), None);
    }

    #[test]
    fn info_round_trip() {
        let i = Info {
            mode: MODE_RING,
            timer: TIMER_CMSDK,
            stop: STOP_LIMIT,
            arch: 7,
            reload: 1,
            jitter_mask: 2,
            limit: 3,
            capacity: 4,
            taken: 5,
            lost: 6,
            code_start: 7,
            code_end: 8,
            code_crc: 9,
            config_addr: 10,
            config_found: 1,
            priority: 0x40,
            rt_version: 0x0102,
            tag_kind: TAG_XPSR,
            foreign: 0x0A0B_0C0D,
        };
        assert_eq!(Info::decode(&i.encode()), Some(i));
        assert_eq!(Info::decode(&[0u8; 10]), None);
    }
}
