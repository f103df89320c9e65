//! The PMU group the host writes into an ARMv8-A image, and where a firmware leaves its
//! counts for a debugger.

use super::records::*;

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
