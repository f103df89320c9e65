//! PMU counts a firmware left in its memory for a debugger (`wire::PMU_OUT_SYMBOL`).

use anyhow::{Result, bail};

use crate::dump::le::read_u32;
use sampler_rt::wire;

/// Counts a firmware left in memory (`wire::PMU_OUT_SYMBOL`) for a debugger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InMemory {
    pub dump: Vec<u8>,
    /// The firmware's buffer was too small: the dump was cut.
    pub full: bool,
}

/// Read the counts at `addr` if this run (`run_id`) finished writing them; `None` while it
/// has not (a block left from an earlier run has another id).
pub fn read_in_memory(
    t: &mut dyn crate::capture::live::Memory,
    addr: u32,
    run_id: u32,
) -> Result<Option<InMemory>> {
    let mut h = [0u8; wire::PMU_OUT_HEADER];
    t.read(addr, &mut h)?;
    let word = |i: usize| read_u32(&h, 4 * i).unwrap_or(0);
    if word(0) != wire::PMU_OUT_MAGIC || word(1) != run_id {
        return Ok(None);
    }
    let len = word(2);
    if len > 1 << 24 {
        bail!("the firmware's counts claim {len} bytes: the block at {addr:#x} is damaged");
    }
    let mut dump = vec![0u8; len as usize];
    t.read(addr + wire::PMU_OUT_HEADER as u32, &mut dump)?;
    Ok(Some(InMemory {
        dump,
        full: word(3) != 0,
    }))
}

/// A run id for a group's image: not 0, and different for every run.
pub fn run_id(group: usize) -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let x = t ^ (std::process::id() as u64) << 20 ^ (group as u64) << 48;
    ((x ^ x >> 32) as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::capture::live::testing::Ram;

    fn out_block(magic: u32, run_id: u32, dump: &[u8], full: u32) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [magic, run_id, dump.len() as u32, full] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(dump);
        b.resize(b.len() + 64, 0xEE);
        b
    }

    #[test]
    fn counts_in_memory_are_taken_only_when_complete_and_of_this_run() {
        let base = 0x4010_0000;
        let mut ram = Ram {
            base,
            bytes: out_block(wire::PMU_OUT_MAGIC, 7, b"dump bytes", 0),
        };
        // Complete, this run.
        let c = read_in_memory(&mut ram, base, 7).unwrap().unwrap();
        assert_eq!((c.dump.as_slice(), c.full), (&b"dump bytes"[..], false));
        // A previous run's counts, kept in RAM across the reset: not these.
        assert_eq!(read_in_memory(&mut ram, base, 8).unwrap(), None);
        // Not written yet (the magic goes last).
        ram.bytes = out_block(0, 7, b"dump bytes", 0);
        assert_eq!(read_in_memory(&mut ram, base, 7).unwrap(), None);
        // Cut by a small buffer: said so.
        ram.bytes = out_block(wire::PMU_OUT_MAGIC, 7, b"cut", 1);
        assert!(read_in_memory(&mut ram, base, 7).unwrap().unwrap().full);
        // A damaged length is an error, not a 4 GiB read.
        ram.bytes = out_block(wire::PMU_OUT_MAGIC, 7, b"", 0);
        ram.bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_in_memory(&mut ram, base, 7).is_err());
        assert_ne!(run_id(0), 0);
        assert_ne!(run_id(0), run_id(1));
    }
}
