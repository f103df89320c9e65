//! The emulated chip's trace port: DWT PC sampling over ITM and SWO.
//!
//! QEMU has no DWT. cargo-sample's QEMU plugin (`ticks=FILE`) writes the PC of every 64th
//! executed instruction (a 32-bit word each) — the DWT's finest cycle-counter tap, one cycle
//! an instruction as QEMU runs the core. [`Swo`] plays the DWT, the ITM and the SWO line on
//! that stream, as the probe has configured them:
//!
//! - the DWT's `POSTCNT` counts taps of the cycle counter (bit 6, or bit 10 with `CYCTAP`) and
//!   on its underflow emits the PC and reloads `POSTPRESET`: a sample every
//!   `tap * (POSTPRESET + 1)` cycles, in lockstep with the program, as on silicon;
//! - each sample is a 5-byte ITM hardware-source packet (`0x17`, then the PC);
//! - the line carries `baud / 10` bytes a second of the core's time; a packet that finds the
//!   ITM's FIFO still full is dropped, and the next packet that gets through is preceded by
//!   an overflow packet (`0x70`), as the ITM does.
//!
//! Nothing is emitted unless the probe turned on what silicon needs: `DEMCR.TRCENA`,
//! `DWT_CTRL.CYCCNTENA` and `PCSAMPLENA`, `ITM_TCR.ITMENA` and `DWTENA`.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use probe_rs::architecture::arm::SwoConfig;

/// Instructions between two of the plugin's ticks (the DWT's tap at CYCCNT bit 6).
pub const TICK: u64 = 64;

/// Where the ticks come from and at what clock the core runs.
#[derive(Debug, Clone)]
pub struct SwoSource {
    /// The plugin's tick file.
    pub ticks: PathBuf,
    /// The core's clock in QEMU (instructions a second of virtual time).
    pub clock_hz: u64,
}

const DWT_CTRL: u32 = 0xE000_1000;
const ITM_TCR: u32 = 0xE000_0E80;
const DEMCR: u32 = 0xE000_EDFC;

/// Where QEMU places its exception-return stand-ins (EXC_RETURN values).
pub const MAGIC_RETURNS: u32 = 0xF000_0000;

/// ITM packets the FIFO holds before the line drains them (the Cortex-M3's ITM holds about
/// one, plus the one being sent).
const FIFO_PACKETS: f64 = 2.0;

#[derive(Debug)]
pub struct Swo {
    src: SwoSource,
    file: Option<std::fs::File>,
    /// Bytes of the tick file consumed.
    offset: u64,
    /// A partial tick word left from the last read.
    partial: Vec<u8>,
    baud: u32,
    dwt_ctrl: u32,
    itm_tcr: u32,
    trcena: bool,
    postcnt: u32,
    /// Ticks seen since the core's reset.
    ticks: u64,
    /// The cycle at which the line has sent everything queued.
    line_free_at: f64,
    overflowed: bool,
    /// Samples dropped for want of bandwidth.
    pub dropped: u64,
    pub emitted: u64,
}

impl Swo {
    pub fn new(src: SwoSource) -> Swo {
        Swo {
            src,
            file: None,
            offset: 0,
            partial: Vec::new(),
            baud: 0,
            dwt_ctrl: 0,
            itm_tcr: 0,
            trcena: false,
            postcnt: 0,
            ticks: 0,
            line_free_at: 0.0,
            overflowed: false,
            dropped: 0,
            emitted: 0,
        }
    }

    /// The probe wrote a trace register.
    pub fn register_written(&mut self, addr: u32, v: u32) {
        match addr {
            DWT_CTRL => {
                let was_on = self.sampling();
                self.dwt_ctrl = v;
                if !was_on && self.sampling() {
                    self.postcnt = v >> 5 & 0xF; // POSTINIT
                }
            }
            ITM_TCR => self.itm_tcr = v,
            DEMCR => self.trcena = v & 1 << 24 != 0,
            _ => {}
        }
    }

    /// The core was reset: the DWT and the ITM with it.
    pub fn core_reset(&mut self) {
        self.dwt_ctrl = 0;
        self.itm_tcr = 0;
        self.postcnt = 0;
    }

    fn sampling(&self) -> bool {
        self.dwt_ctrl & 1 != 0 && self.dwt_ctrl & 1 << 12 != 0
    }

    fn itm_on(&self) -> bool {
        self.itm_tcr & 1 != 0 && self.itm_tcr & 1 << 3 != 0
    }

    pub fn enable(&mut self, config: &SwoConfig) -> Result<()> {
        self.baud = config.baud();
        if self.file.is_none() {
            let f = std::fs::File::open(&self.src.ticks).with_context(|| {
                format!(
                    "opening the DWT emulation's ticks {}",
                    self.src.ticks.display()
                )
            })?;
            self.file = Some(f);
        }
        Ok(())
    }

    pub fn disable(&mut self) {
        self.baud = 0;
    }

    /// The ITM bytes the line carried since the last read; waits up to `timeout` for some
    /// when the core runs.
    pub fn read(&mut self, timeout: Duration, halted: bool) -> Result<Vec<u8>> {
        let until = Instant::now() + timeout;
        loop {
            let out = self.pump()?;
            if !out.is_empty() || halted || Instant::now() >= until {
                return Ok(out);
            }
            std::thread::sleep(Duration::from_millis(2).min(timeout));
        }
    }

    fn pump(&mut self) -> Result<Vec<u8>> {
        let Some(f) = self.file.as_mut() else {
            return Ok(Vec::new());
        };
        f.seek(SeekFrom::Start(self.offset))?;
        let mut raw = std::mem::take(&mut self.partial);
        let before = raw.len();
        f.read_to_end(&mut raw)?;
        self.offset += (raw.len() - before) as u64;
        let whole = raw.len() / 4 * 4;
        self.partial = raw[whole..].to_vec();
        let mut out = Vec::new();
        for w in raw[..whole].chunks_exact(4) {
            let pc = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            self.tick(pc, &mut out);
        }
        Ok(out)
    }

    /// One tap of the cycle counter's bit 6, at the instruction whose PC is `pc`.
    fn tick(&mut self, pc: u32, out: &mut Vec<u8>) {
        if pc >= MAGIC_RETURNS {
            // QEMU's stand-in for an exception return (EXC_RETURN), not an instruction.
            return;
        }
        self.ticks += 1;
        if !(self.trcena && self.sampling() && self.itm_on() && self.baud > 0) {
            return;
        }
        // CYCTAP: bit 10 of the counter, one tap in 16 of bit 6's.
        if self.dwt_ctrl & 1 << 9 != 0 && !self.ticks.is_multiple_of(16) {
            return;
        }
        if self.postcnt > 0 {
            self.postcnt -= 1;
            return;
        }
        self.postcnt = self.dwt_ctrl >> 1 & 0xF; // POSTPRESET
        let cycle = (self.ticks * TICK) as f64;
        let cycles_per_byte = 10.0 * self.src.clock_hz as f64 / self.baud as f64;
        let packet = 5.0 * cycles_per_byte;
        let backlog = self.line_free_at - cycle;
        if backlog > FIFO_PACKETS * packet {
            self.overflowed = true;
            self.dropped += 1;
            return;
        }
        let mut cost = packet;
        if self.overflowed {
            out.push(0x70);
            cost += cycles_per_byte;
            self.overflowed = false;
        }
        out.push(0x17);
        out.extend_from_slice(&pc.to_le_bytes());
        self.line_free_at = self.line_free_at.max(cycle) + cost;
        self.emitted += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swo(clock: u64) -> Swo {
        let mut s = Swo::new(SwoSource {
            ticks: PathBuf::new(),
            clock_hz: clock,
        });
        s.baud = 2_000_000;
        s.register_written(DEMCR, 1 << 24);
        s.register_written(ITM_TCR, 1 | 1 << 3);
        s
    }

    /// The DWT_CTRL value for a tap and POSTPRESET (POSTINIT the same).
    fn ctrl(cyctap: bool, post: u32) -> u32 {
        1 | post << 1 | post << 5 | (cyctap as u32) << 9 | 1 << 12
    }

    #[test]
    fn samples_every_tap_times_postpreset_plus_one() {
        // 64 * 4 = 256 cycles: one sample every fourth tick, the fourth tick's PC.
        let mut s = swo(1_000_000); // a slow clock: the line keeps up
        s.register_written(DWT_CTRL, ctrl(false, 3));
        let mut out = Vec::new();
        for pc in 0..16u32 {
            s.tick(0x100 + pc * 2, &mut out);
        }
        let pcs: Vec<u32> = out
            .chunks(5)
            .map(|p| {
                assert_eq!(p[0], 0x17);
                u32::from_le_bytes([p[1], p[2], p[3], p[4]])
            })
            .collect();
        assert_eq!(pcs, [0x106, 0x10e, 0x116, 0x11e]);
        // CYCTAP: 1024 * 1 cycles: one sample per 16 ticks.
        let mut s = swo(1_000_000);
        s.register_written(DWT_CTRL, ctrl(true, 0));
        let mut out = Vec::new();
        (0..64u32).for_each(|pc| s.tick(pc, &mut out));
        assert_eq!(out.len(), 4 * 5);
    }

    #[test]
    fn nothing_without_the_enables() {
        let mut s = Swo::new(SwoSource {
            ticks: PathBuf::new(),
            clock_hz: 1_000_000,
        });
        s.baud = 2_000_000;
        s.register_written(DWT_CTRL, ctrl(false, 0));
        let mut out = Vec::new();
        (0..8).for_each(|pc| s.tick(pc, &mut out));
        assert!(out.is_empty(), "TRCENA and the ITM are off");
    }

    #[test]
    fn a_line_too_slow_drops_samples_and_says_so() {
        // 1 GHz, a sample every 64 cycles: 78 MB/s of packets on a 2 Mbaud line.
        let mut s = swo(1_000_000_000);
        s.register_written(DWT_CTRL, ctrl(false, 0));
        let mut out = Vec::new();
        (0..10_000u32).for_each(|pc| s.tick(pc, &mut out));
        assert!(s.dropped > 9_000, "{}", s.dropped);
        assert!(out.contains(&0x70), "an overflow packet marks the gap");
        // Line time: every byte that went out fits in the cycles elapsed (plus the FIFO).
        let cycles = 10_000.0 * 64.0;
        let line = out.len() as f64 * 10.0 * 1e9 / 2e6;
        assert!(
            line <= cycles + 3.0 * 5.0 * 10.0 * 500.0,
            "{line} > {cycles}"
        );
    }
}
