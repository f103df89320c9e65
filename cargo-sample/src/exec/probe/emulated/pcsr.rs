//! `DWT_PCSR` of the emulated chip, read in the core's time.
//!
//! A probe on silicon reads `DWT_PCSR` at moments of real time, which is the core's time, so
//! its samples are uniform over what the core executes. Here the host's moments are not the
//! core's: QEMU emulates some code faster than other code, and stopping the VM to read the PC
//! lands at the start of a translated block. So the plugin writes the PC of every 61st
//! instruction (`tick=61`, prime, so that loops are not seen at one phase) and each read takes
//! the PC a read's duration of the core's time after the previous one: the SWD transfer at the
//! probe's speed, with a random part as a real probe's USB and firmware add. The samples are
//! then spaced in the core's time exactly as a probe's would be, at most a few reads behind
//! the VM.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Instructions between two of the plugin's ticks for PCSR.
pub const TICK: u64 = 61;

/// Bits on the wire for one PCSR read (TAR write, DRW read, RDBUFF read: three SWD
/// transactions of 46 bits).
const BITS_PER_READ: f64 = 3.0 * 46.0;

#[derive(Debug)]
pub struct Timeline {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Every tick's PC read so far.
    pcs: Vec<u32>,
    /// Whole words of the file taken in (the PCs, and the stand-ins left out).
    consumed: u64,
    partial: Vec<u8>,
    /// The core's clock (instructions a second).
    clock_hz: u64,
    /// Where the next read lands, in ticks; `None` before the first read.
    at: Option<f64>,
    rng: u64,
}

impl Timeline {
    pub fn new(path: PathBuf, clock_hz: u64) -> Timeline {
        Timeline {
            path,
            file: None,
            pcs: Vec::new(),
            consumed: 0,
            partial: Vec::new(),
            clock_hz,
            at: None,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn load(&mut self) {
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let Some(f) = self.file.as_mut() else { return };
        if f.seek(SeekFrom::Start(self.consumed + self.partial.len() as u64))
            .is_err()
        {
            return;
        }
        let mut raw = std::mem::take(&mut self.partial);
        let _ = f.read_to_end(&mut raw);
        let whole = raw.len() / 4 * 4;
        self.consumed += whole as u64;
        self.pcs.extend(
            raw[..whole]
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                // QEMU's stand-ins for exception returns are not instructions.
                .filter(|&pc| pc < super::swo::MAGIC_RETURNS),
        );
        self.partial = raw[whole..].to_vec();
    }

    /// A uniform random number in [0, 1).
    fn random(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The PC a read at `speed_khz` sees; `None` when the core executes nothing (asleep or
    /// stopped) for `patience`.
    pub fn read(&mut self, speed_khz: u32, patience: Duration) -> Option<u32> {
        self.load();
        let per_read =
            BITS_PER_READ / (speed_khz.max(1) as f64 * 1e3) * self.clock_hz as f64 / TICK as f64;
        let step = per_read * (0.5 + self.random());
        let at = match self.at {
            // The first read lands where the core is now.
            None => self.pcs.len().saturating_sub(1) as f64,
            Some(a) => a + step,
        };
        let until = Instant::now() + patience;
        while (at as usize) >= self.pcs.len() {
            if Instant::now() >= until {
                // Asleep or stopped: the read sees the last PC, and time moves on from there.
                self.at = Some(self.pcs.len().saturating_sub(1) as f64);
                return self.pcs.last().copied();
            }
            std::thread::sleep(Duration::from_millis(1));
            self.load();
        }
        self.at = Some(at);
        Some(self.pcs[at as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_spaced_in_the_cores_time_around_the_transfer_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ticks.bin");
        // A tick's PC is its index: the reads' PCs are where they landed.
        let bytes: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(&path, bytes).unwrap();
        // 4 MHz SWD, 138 bits: 34.5 µs a read; at 61 MHz that is 2104 instructions, 34.5 ticks.
        let mut t = Timeline::new(path, 61_000_000);
        let first = t.read(4000, Duration::ZERO).unwrap();
        assert_eq!(first, 99_999, "the first read is where the core is");
        t.at = Some(0.0);
        let pcs: Vec<u32> = (0..1000)
            .map(|_| t.read(4000, Duration::ZERO).unwrap())
            .collect();
        let gaps: Vec<u32> = pcs.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
        assert!((mean - 34.5).abs() < 1.5, "{mean}");
        assert!(
            gaps.iter().any(|&g| g < 25) && gaps.iter().any(|&g| g > 45),
            "jittered"
        );
    }
}
