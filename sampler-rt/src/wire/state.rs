//! The sampler's state block as the host reads it while the firmware runs (both
//! architectures), its phases, the tag names in memory, and the chunk rule both runtimes share.

use super::records::*;

/// Name of the symbol of the sampler's state in the firmware ELF (read by host snapshots).
pub const STATE_SYMBOL: &str = "SAMPLER_RT_STATE";
/// Name of the symbol of the sample ring in the firmware ELF.
pub const RING_SYMBOL: &str = "SAMPLER_RT_RING";

/// The sampler's `phase` (a byte of the Cortex-M state, a word of the ARMv8-A one): not started.
pub const PHASE_IDLE: u8 = 0;
/// Sampling.
pub const PHASE_RUNNING: u8 = 1;
/// Stopped (the limit, or the firmware's `stop`/`flush`/`exit`); the dump not yet sent.
pub const PHASE_STOPPED: u8 = 2;
/// Stopped and the dump sent.
pub const PHASE_DUMPED: u8 = 3;

/// Size of the sampler's state block at [`STATE_SYMBOL`].
pub const STATE_LEN: usize = 124;
/// `"SSTA"`: the last word of the state block once `start` ran.
pub const STATE_MAGIC: u32 = u32::from_le_bytes(*b"SSTA");

/// The sampler's state as the host reads it from a running target (a QEMU monitor snapshot,
/// or a debug probe), to recover the samples of a run that did not finish. Offsets:
///
/// ```text
///  0 wptr        next ring slot        32 chunk      length of the current chunk
///  4 remaining   samples left in chunk 36 before     samples before the chunk
///  8 rng         xorshift32 state      40 limit      samples requested
/// 12 handler     the entry's target    44 capacity   ring slots
/// 16 jitter      span (v6: mask)       48 ring       ring address
/// 20 reload      base reload value     52 mode, stop, timer, priority   (bytes)
/// 24 reload_reg  timer register        56 sink, config_found, phase, arch (bytes)
/// 28 ack_reg     CMSDK acknowledge     60 magic      STATE_MAGIC
/// 64 hist_word   bins address + shift  72 bins       address of counter 0
/// 68 hist_base   first bin's address   76 last_bin   index of the outside counter
/// 80 tag_addr    TAG_WORD: the word    84 tag_kind    byte 0: TAG_* (ring entries are 8
///                                                      bytes when not TAG_NONE); byte 1:
///                                                      stack window words (entries of
///                                                      REC_STACKS when not 0); byte 2:
///                                                      frame records per entry
/// 88 variant     variant (frame in r12) 92 probe_reg  the timer register the check reads
/// 96 late_ticks  lateness limit        100 late_or   or-ed into a held-off sample's PC
/// 104 held_off   samples held off      108 late_flag 112 fake_pc  116 fake_xpsr
/// 120 after_check where the lateness check goes on: `variant`'s twin at the stack pointer
///                or the frame finder
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
    /// Byte 0: `TAG_*` (ring entries are `(pc, tag)` pairs unless `TAG_NONE`); byte 1: the
    /// words of stack window per sample (ring entries are [`REC_STACKS`] entries unless 0);
    /// byte 2: the frame records each entry has room for. (Byte 3 is the host's beat,
    /// [`state_offsets::HOST_BEAT`], left out here.)
    pub tag_kind: u32,
    /// ARMv8-A: interrupts the sampler's vectors took that were not its own.
    pub foreign: u32,
    /// Cortex-M: the lateness (timer ticks) above which a sample counts as held off; 0 when
    /// no check runs.
    pub late_ticks: u32,
    /// Cortex-M: the samples found held off so far.
    pub held_off: u32,
}

impl StateView {
    /// Bytes of one ring entry.
    pub fn entry_bytes(&self) -> u32 {
        let window = (self.tag_kind >> 8) & 0xFF;
        if window != 0 {
            4 * stack_entry_words(window, (self.tag_kind >> 16) & 0xFF)
        } else if self.tag_kind & 0xFF != TAG_NONE as u32 {
            8
        } else {
            4
        }
    }

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
    /// The host's beat: the top byte of `tag_kind`, which a host reading the ring changes at
    /// every read. A firmware waiting at its end for the host (`SINK_HOST`) keeps waiting as
    /// long as it changes, so a slow host loses nothing while a vanished one holds the
    /// firmware for a bounded time only.
    pub const HOST_BEAT: usize = 87;
    /// `variant`: ARMv7-M: the sampling variant that takes the exception frame in r12, where
    /// the frame finder and the lateness checks go on (`handler` is the entry's first target).
    pub const VARIANT: usize = 88;
    /// `probe_reg`: the timer register the lateness check reads.
    pub const PROBE_REG: usize = 92;
    /// `late_ticks`: the lateness above which a sample is held off.
    pub const LATE_TICKS: usize = 96;
    /// `late_or`: what a held-off sample's PC is or-ed with.
    pub const LATE_OR: usize = 100;
    /// `held_off`: the samples found late so far.
    pub const HELD_OFF: usize = 104;
    /// `late_flag`: stack samples: the one being taken is late.
    pub const LATE_FLAG: usize = 108;
    /// `fake_pc` (and `fake_xpsr` after it): a late sample's marked PC and its xPSR.
    pub const FAKE_PC: usize = 112;
    /// `after_check`: where a sample on time goes on after the lateness check: the variant's
    /// twin that reads the frame at the stack pointer, or the frame finder.
    pub const AFTER_CHECK: usize = 120;
    /// The ARMv8-A block's beat (a byte of its padding after `mode`).
    pub const A64_HOST_BEAT: usize = 66;
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
/// 60 handle+1    64 config_found (u8), mode (u8)    68 tag_addr  72 crc       76 timer (u8), window (u8), records (u8)
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
            tag_kind: get32(b, 84) & 0x00FF_FFFF,
            foreign: 0,
            late_ticks: get32(b, 96),
            held_off: get32(b, 104),
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
            timer: match b[76] {
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
            // With stacks (bytes 77 and 78: window and records) the entries are STACKS ones.
            tag_kind: if b[77] != 0 {
                (b[77] as u32) << 8 | (b[78] as u32) << 16
            } else if get32(b, 68) == 0 {
                TAG_NONE as u32
            } else {
                TAG_WORD as u32
            },
            foreign: get32(b, 84),
            late_ticks: 0,
            held_off: 0,
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

/// `a % b` (for `b` below 2^31). Cores without a divide instruction (ARMv6-M) get it by shifts
/// and subtractions in sampler-rt's own code: a call into compiler-builtins from the sampler
/// would be counted as the application's time by the exact count.
#[inline]
pub fn rem(a: u32, b: u32) -> u32 {
    #[cfg(armv6m)]
    return rem_by_shifts(a, b);
    #[cfg(not(armv6m))]
    a.checked_rem(b).unwrap_or(a)
}

/// `a % b` by restoring division, one bit at a time (`a` when `b` is 0).
#[inline]
pub fn rem_by_shifts(a: u32, b: u32) -> u32 {
    if b == 0 {
        return a;
    }
    let mut r = 0u32;
    let mut i = 32;
    while i > 0 {
        i -= 1;
        r = (r << 1) | ((a >> i) & 1);
        if r >= b {
            r -= b;
        }
    }
    r
}

/// The sampler's next chunk (both architectures): after `before` samples, with a ring of
/// `capacity` entries (`None`: bins) and a `limit` (0 = none), how many samples it holds and
/// from which ring slot. A ring's chunk ends at the ring's end or the limit; bins have no
/// chunks and count down to the limit, or as far as a word goes.
pub fn next_chunk(before: u32, capacity: Option<u32>, limit: u32) -> (u32, u32) {
    let Some(cap) = capacity else {
        return (if limit == 0 { u32::MAX } else { limit - before }, 0);
    };
    let pos = rem(before, cap);
    let mut chunk = cap - pos;
    if limit != 0 {
        chunk = chunk.min(limit - before);
    }
    (chunk, pos)
}
