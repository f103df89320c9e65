//! The run's configuration block, written into the image by the host and read by `start`.

use super::records::*;

/// `"SCFG"` read as a little-endian `u32`: the first word of a valid configuration block.
pub const CONFIG_MAGIC: u32 = u32::from_le_bytes(*b"SCFG");
/// Version of the configuration block layout.
pub const CONFIG_VERSION: u16 = 5;
/// Size of the configuration block in bytes.
pub const CONFIG_LEN: usize = 64;
/// Name of the symbol of the configuration block in the firmware ELF.
pub const CONFIG_SYMBOL: &str = "SAMPLER_RT_CONFIG";

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
///  42     1  stack_words  ring mode: words of the interrupted stack kept with each
///                         sample (0 = none; entries then go out as REC_STACKS)
///  43     1  frame_records  with stack_words: frame records (r7 chain) kept beyond the window
///  44     4  tag_addr     TAG_WORD: address of the word to record
///  48     4  stack_top    with stack_words on ARMv8-A: the address above the stack (no
///                         window reaches it); 0 elsewhere (Cortex-M reads it from VTOR)
///  52     4  late_ticks   Cortex-M: check each sample's lateness against the pacing timer's
///                         count; one taken more ticks than this after its timer expired was
///                         held off (0: no check)
///  56     4  flags        CONFIG_* bits: CONFIG_MAIN_STACK_ONLY
///  60     4  check        CONFIG_MAGIC mixed with the words at 4..60 (see `check_word`)
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
    /// Words of the interrupted stack kept with each sample (0: none).
    pub stack_words: u8,
    /// Frame records (the r7 chain's saved r7 and LR) kept beyond the window.
    pub frame_records: u8,
    /// ARMv8-A with stacks: the address above the stack, the bound of every window.
    pub stack_top: u32,
    /// Cortex-M: the lateness, in timer ticks, above which a sample was held off (0: no check).
    pub late_ticks: u32,
    /// `CONFIG_*` bits.
    pub flags: u32,
}

/// Config flag: the image writes neither the process stack pointer nor CONTROL (no `msr psp`,
/// no `msr control` anywhere in its code), so every exception frame the sampling interrupt
/// finds is at the stack pointer: ARMv7-M then jumps from the entry straight to the variant,
/// without reading EXC_RETURN (four instructions a sample less).
pub const CONFIG_MAIN_STACK_ONLY: u32 = 1;

/// The block as built into the firmware, before the host writes a run's: no magic (the
/// firmware then uses its defaults), but the version and length of the layout this runtime
/// reads, so that the host can refuse to write a layout the runtime would not read.
pub const fn config_placeholder() -> [u8; CONFIG_LEN] {
    let mut b = [0u8; CONFIG_LEN];
    let v = CONFIG_VERSION.to_le_bytes();
    let l = (CONFIG_LEN as u16).to_le_bytes();
    b[4] = v[0];
    b[5] = v[1];
    b[6] = l[0];
    b[7] = l[1];
    b
}

/// The configuration version a runtime reads, from the initial bytes of its block (see
/// [`config_placeholder`]): `None` for a runtime that does not say (one from before the
/// placeholder, whose block is all zeros) or bytes that are no block.
pub fn runtime_config_version(initial: &[u8]) -> Option<u16> {
    if initial.len() < 8 || get32(initial, 0) != 0 {
        return None;
    }
    let version = u16::from_le_bytes([initial[4], initial[5]]);
    (version != 0).then_some(version)
}

impl Config {
    /// Encode into the bytes the host places at [`CONFIG_SYMBOL`].
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
        b[42] = self.stack_words;
        b[43] = self.frame_records;
        put32(&mut b, 44, self.tag_addr);
        put32(&mut b, 48, self.stack_top);
        put32(&mut b, 52, self.late_ticks);
        put32(&mut b, 56, self.flags);
        let words = words_of(&b);
        put32(&mut b, CONFIG_LEN - 4, check_word(&words));
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
        if check_word(&words_of(b)) != get32(b, CONFIG_LEN - 4) {
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
            stack_words: b[42],
            frame_records: b[43],
            stack_top: get32(b, 48),
            late_ticks: get32(b, 52),
            flags: get32(b, 56),
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

/// The check word of a configuration block, from its words between the magic and the check. Random RAM contents
/// after power-up pass this with a probability of 2^-64 (magic and check word both match).
pub fn check_word(words: &[u32; CONFIG_LEN / 4]) -> u32 {
    let mut c = CONFIG_MAGIC;
    for w in &words[1..CONFIG_LEN / 4 - 1] {
        c = (c ^ w).rotate_left(5).wrapping_mul(0x9E37_79B1);
    }
    c
}
