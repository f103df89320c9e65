//! The dump's framing: magic, version, record kinds and headers, the CRC-32, and
//! [`DumpWriter`], the one writer of a dump; the run facts that every dump carries ([`Info`])
//! and the values its fields take.

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
/// The priorities of the exceptions that could hold the sampler off, read at the end of the
/// run: `count: u32`, then `count` words `exception (bits 0-15) | priority byte << 16 |
/// flags << 24` (flag 1: enabled; system handlers 4-15 are listed whatever their state, the
/// device interrupts only when enabled). The host names those as urgent as the sampler.
pub const REC_PRIORITIES: u16 = 9;
/// One [`REC_PRIORITIES`] entry.
pub const fn priority_entry(exception: u16, priority: u8, enabled: bool) -> u32 {
    exception as u32 | (priority as u32) << 16 | (enabled as u32) << 24
}
/// Samples with what the host needs to unwind the interrupted stack: `first_seq: u32`,
/// `count: u32`, `stride: u32` (the words of a ring slot, for information), then `count`
/// entries, oldest first, each [`STACK_HEADER_WORDS`] words — the stacked PC, the stacked
/// xPSR, the stacked LR, the SP the exception frame came from (past the FP-extended part and
/// the alignment word), the interrupted r7, and `exc_return & 0xFF | valid << 8 | records <<
/// 16` — then `valid` words of the interrupted stack from that SP up, then `records` frame
/// records: the `(saved r7, saved LR)` pairs of the r7 chain starting at the interrupted r7,
/// each at the address the previous one's saved r7 gives.
pub const REC_STACKS: u16 = 10;
/// Words before the stack window in a [`REC_STACKS`] entry.
pub const STACK_HEADER_WORDS: u32 = 6;
/// Words of a ring slot for [`REC_STACKS`] entries with a window of `window` words and up to
/// `records` frame records.
pub const fn stack_entry_words(window: u32, records: u32) -> u32 {
    STACK_HEADER_WORDS + window + 2 * records
}
/// Bit of a stack entry's sixth word: after a frame record whose saved LR is an EXC_RETURN,
/// the exception frame's stacked LR, PC and xPSR follow as two more pairs, `(LR, PC)` and
/// `(xPSR, 0)` (the words 20, 24 and 28 bytes above the address 8 bytes past the record).
pub const STACK_FRAMES_INLINE: u32 = 1 << 24;
/// Bit of a stack entry's sixth word: the sample was held off (see [`REC_HELD_OFF`]).
pub const STACK_HELD_OFF: u32 = 1 << 25;
/// Words an entry uses in a [`REC_STACKS`] record, from its sixth word.
pub const fn stack_entry_used(tail: u32) -> u32 {
    STACK_HEADER_WORDS + ((tail >> 8) & 0xFF) + 2 * ((tail >> 16) & 0xFF)
}
/// Laps in the order they ended, while the sampler ran: `total: u32` (laps traced since the
/// start; the oldest are overwritten), `count: u32`, then `count` entries of three words, oldest
/// first: `region | samples_inside << 8` (the region's index in the LAPS record; samples taken
/// during the lap, saturated at 0xFFFFFF), the number of samples taken when the lap started,
/// and the lap in raw counter ticks.
pub const REC_LAP_TRACE: u16 = 11;
/// PMU region laps in order, while the sampler ran (ARMv8-A): `total: u32`, `count: u32`,
/// `width: u32` (words an entry), then `count` entries, oldest first: `region | samples_inside
/// << 8`, the samples taken when the lap started, and each counter's delta (low 32 bits) in
/// the PMU record's order, the cycle counter last. Sent with the PMU record.
pub const REC_PMU_TRACE: u16 = 12;
/// A checkpoint: `crc32: u32` over every byte before this record, as END's. Written after each
/// INFO and after each record of samples, so that a reader of a damaged dump can tell which
/// stretch between two checkpoints holds the damage and keep the rest.
pub const REC_CHECK: u16 = 13;
/// Samples held off (Cortex-M, written when the host asked for the check): `late_ticks: u32`
/// (the limit: a sample taken more timer ticks than this after its timer expired is late),
/// `held_off: u32` (late samples: in a ring their PC has bit 0 set, in stack entries the tail
/// word has [`STACK_HELD_OFF`], in bins they are counted in the outside counter), `how: u32`
/// (`LATE_*`: whether the check ran).
pub const REC_HELD_OFF: u16 = 14;
/// The check ran on every sample.
pub const LATE_CHECKED: u32 = 1;
/// The pacing timer's count did not move when read (QEMU's Stellaris timers do not model it):
/// no check.
pub const LATE_UNREADABLE: u32 = 2;
/// The pacing timer has no count the sampler reads (nRF, STM32, a firmware's own timer,
/// ARMv6-M): no check.
pub const LATE_NO_COUNT: u32 = 3;
/// Embassy task statistics (`embassy` feature), from embassy-executor's trace hooks; see
/// `docs/dump-format.md`: a header of [`TASKS_HEADER_WORDS`] words (`counter | bins << 8`,
/// tasks, polls of tasks without a slot, the executor, span and idle time as `u64`s, idle
/// periods, hooks of other executors, the sampler's own time inside the run as a `u64`), then per task [`TASK_FIXED_WORDS`] words and two
/// histograms of `bins` words (poll lengths, then wake-to-poll latencies), then the executors
/// section: a count, and per executor [`EXECUTOR_WORDS`] words (see `docs/dump-format.md`;
/// absent from older dumps).
pub const REC_TASKS: u16 = 15;
/// Words of an executor's entry in the TASKS record's executors section: its address, the
/// exception number it idles in (IPSR at its idle hook: 0 thread mode), its idle time
/// (`u64` ticks) and idle periods.
pub const EXECUTOR_WORDS: u32 = 5;
/// Executors whose idle time is kept besides the first (their hooks beyond are counted).
pub const MORE_EXECUTORS: usize = 3;
/// The newest Embassy polls in the order they ended, while the sampler ran (`embassy`
/// feature): `total: u32` (polls traced; the oldest are overwritten), `count: u32`, then
/// `count` entries of three words, oldest first: the task's header address, the number of
/// samples taken when the poll ended, and the poll in raw ticks of the task clock.
pub const REC_TASK_TRACE: u16 = 16;
/// Words of the TASKS record's header.
pub const TASKS_HEADER_WORDS: u32 = 12;
/// Words of a task's entry before its histograms: `id`, `polls`, `max_poll`, `busy` (`u64`),
/// `wakes`, `max_latency`, `latency` (`u64`), `flags` ([`TASK_ENDED`]).
pub const TASK_FIXED_WORDS: u32 = 10;
/// Where the fields of sampler-rt's task table (`SAMPLER_RT_TASKS`, Cortex-M) are, for a host
/// that reads the table out of memory instead of the dump's TASKS record (a board, a live
/// run); checked against the runtime's struct at compile time.
pub mod tasks_table {
    pub const FLIP: usize = 4;
    pub const MASK: usize = 8;
    pub const COUNTER: usize = 12;
    pub const CHOSEN: usize = 16;
    pub const EXECUTOR: usize = 28;
    pub const OTHERS: usize = 32;
    pub const LAST: usize = 36;
    pub const SPAN: usize = 40;
    pub const IDLE: usize = 48;
    pub const IDLE_AT: usize = 56;
    pub const IDLE_STOLEN: usize = 60;
    pub const IDLING: usize = 64;
    pub const IDLE_PERIODS: usize = 68;
    pub const DROPPED: usize = 72;
    pub const STOLEN: usize = 76;
    pub const STOLEN_TOTAL: usize = 80;
    pub const END: usize = 92;
    pub const ENDED: usize = 96;
    /// The first executor's exception number at its last idle hook.
    pub const CONTEXT: usize = 100;
    /// The other executors (`MORE_EXECUTORS` entries of `EXEC_SIZE` bytes).
    pub const MORE: usize = 104;
    pub const EXEC_SIZE: usize = 32;
    pub const EXEC_ID: usize = 0;
    pub const EXEC_CONTEXT: usize = 4;
    pub const EXEC_IDLING: usize = 8;
    pub const EXEC_IDLE_AT: usize = 12;
    pub const EXEC_IDLE_STOLEN: usize = 16;
    pub const EXEC_PERIODS: usize = 20;
    pub const EXEC_IDLE: usize = 24;
    /// Polls preempted by a poll of another executor: their depth, the running poll's ticks
    /// in polls nested in it, and the outer polls' (task, slot, nested ticks), `NEST_MAX` deep.
    pub const DEPTH: usize = MORE + super::MORE_EXECUTORS * EXEC_SIZE;
    pub const NESTED: usize = DEPTH + 4;
    pub const NEST: usize = DEPTH + 8;
    pub const NEST_MAX: usize = 4;
    pub const SLOTS: usize = NEST + NEST_MAX * 12;
    /// A slot's fields.
    pub const SLOT_SIZE: usize = 328;
    pub const ID: usize = 0;
    pub const POLLS: usize = 4;
    pub const MAX_POLL: usize = 8;
    pub const FLAGS: usize = 12;
    pub const BUSY: usize = 16;
    pub const WAKES: usize = 24;
    pub const MAX_LATENCY: usize = 28;
    pub const LATENCY: usize = 32;
    pub const POLL_HIST: usize = 60;
    pub const LATENCY_HIST: usize = 192;
}

/// A task's flag: it ran to completion (`_embassy_trace_task_end`).
pub const TASK_ENDED: u32 = 1;
/// Histogram bins of poll lengths and latencies, by the leading zeros of the value in ticks:
/// bin `i < 32` counts values in `[2^(31-i), 2^(32-i))`, bin 32 the zeros.
pub const TASK_BINS: usize = 33;
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
/// LAPS, bits 8 and up of a region's kind word: how its first lap was taken, which says what
/// its `body` word holds. Not known (an older firmware; `body` 0).
pub const LAP_VIA_UNKNOWN: u32 = 0;
/// `measure`: `body` is the address of the code its laps run.
pub const LAP_VIA_MEASURE: u32 = 1;
/// A `start()` guard: `body` is the return address of that first `start` call.
pub const LAP_VIA_START: u32 = 2;
/// `iterate`: `body` is the return address of that first `iterate` call.
pub const LAP_VIA_ITERATE: u32 = 3;
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
/// An Arm CMSDK APB timer (mps2/mps3 machines); its base address is in [`Config::timer_base`](super::Config::timer_base).
pub const TIMER_CMSDK: u8 = 1;
/// No timer: the core's DWT unit sampled the PC (every `reload + 1` cycles) over SWO; the host
/// made the dump.
pub const TIMER_DWT: u8 = 2;
/// No timer: the host read DWT_PCSR through the debug port as fast as it could.
pub const TIMER_PCSR: u8 = 3;
/// The ARMv8-A EL1 virtual generic timer (aarch64 sampling).
pub const TIMER_GENERIC: u8 = 4;
/// ARMv8-A PMU overflowing every N events (aarch64 sampling); the event number is in
/// [`Config::timer_base`](super::Config::timer_base): [`PMU_CPU_CYCLES`] uses the cycle counter, any other event counter 0.
pub const TIMER_PMU: u8 = 5;
/// A Stellaris/Tiva general-purpose timer (GPTM, e.g. lm3s6965's TIMER0-3): timer A as one
/// 32-bit periodic down-counter; base address and interrupt in
/// [`Config::timer_base`](super::Config::timer_base) and [`Config::timer_irq`](super::Config::timer_irq).
pub const TIMER_GPTM: u8 = 6;
/// A Nordic nRF51/nRF52 TIMER: 32-bit, 16 MHz, compare 0 clearing the counter; base address
/// and interrupt as for [`TIMER_GPTM`].
pub const TIMER_NRF: u8 = 7;
/// An STM32 general-purpose timer (TIM2..TIM5): up-counting to ARR, update interrupt; base
/// address and interrupt as for [`TIMER_GPTM`].
pub const TIMER_STM32: u8 = 8;
/// A timer the firmware drives itself (`sampler_rt::start_with_timer`): its clock is the
/// firmware's business, so periods are in its ticks.
pub const TIMER_CUSTOM: u8 = 9;
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
/// The sampler did not start: SysTick's vector (in the table VTOR points at) is not the
/// sampler's, so the application owns SysTick, and taking it would break the application.
pub const STOP_TIMER_TAKEN: u8 = 4;

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
///  49     3  reserved        zero
///  52     4  foreign         foreign interrupts the sampler disabled (ARMv8-A)
///  56     4  timer_hz        TIMER_CUSTOM: the firmware timer's clock, Hz (0: not given)
///  60     4  reserved        zero
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
    /// [`TIMER_CUSTOM`]: the clock of the firmware's timer, Hz (0: not given).
    pub timer_hz: u32,
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
        put32(&mut b, 56, self.timer_hz);
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
            timer_hz: get32(b, 56),
        })
    }
}

pub(crate) fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
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

    /// An INFO record (a later one supersedes an earlier one), and a checkpoint.
    fn info(&mut self, info: &Info) {
        self.record(REC_INFO, INFO_LEN as u32);
        self.put(&info.encode());
        self.check();
    }

    /// A CHECK record: the CRC of everything before it (the CRC goes on over it).
    fn check(&mut self) {
        let crc = Crc32::resume(*self.crc_word()).finish();
        self.record(REC_CHECK, 4);
        self.put32(crc);
    }

    /// A STACKS record of the ring's samples `from .. from + n` (`n` at most `capacity`):
    /// each entry (`stride` words in its slot) as far as its header says it is used.
    ///
    /// # Safety
    /// `ring` points at `capacity` slots of `stride` words, sample q in slot q % capacity.
    unsafe fn stacks(&mut self, ring: *const u32, capacity: u32, stride: u32, from: u32, n: u32) {
        let first = super::rem(from, capacity);
        let entry = |k: u32| {
            let slot = if first + k >= capacity {
                first + k - capacity
            } else {
                first + k
            };
            // SAFETY: a slot of the ring (see the contract).
            unsafe { ring.add((stride * slot) as usize) }
        };
        // SAFETY: the word 5 of every entry is its header.
        let used = |k: u32| stack_entry_used(unsafe { *entry(k).add(5) });
        let mut words = 0u32;
        for k in 0..n {
            words += used(k);
        }
        self.record(REC_STACKS, 12 + 4 * words);
        self.put32(from);
        self.put32(n);
        self.put32(stride);
        for k in 0..n {
            // SAFETY: the used words of one slot.
            let bytes =
                unsafe { core::slice::from_raw_parts(entry(k) as *const u8, 4 * used(k) as usize) };
            self.put(bytes);
        }
        self.check();
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
