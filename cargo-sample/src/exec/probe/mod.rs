//! Boards through a debug probe (probe-rs): flash the image that carries the run's
//! configuration, reset, run, and take samples one of three ways:
//!
//! - `timer`: sampler-rt's interrupt stores PCs in its ring; the probe reads the ring while the
//!   core runs ([`crate::capture::live`]), so runs of any length fit and losses are counted;
//! - `dwt`: the core's DWT unit emits a PC sample packet every N cycles over SWO, which the probe
//!   captures and [`crate::dump::itm`] decodes (no interrupt, no code in the firmware);
//! - `pcsr`: the host reads DWT_PCSR through the debug port as fast as the probe allows (no
//!   firmware change and no SWO pin needed; the rate is the probe's).
//!
//! Everything past the probe (the ring protocol, DWT register values, SWO bandwidth, PCSR
//! values, the ITM decoder) is plain code tested on recorded and synthetic data; the calls into
//! probe-rs are thin. Not yet verified on a board.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

mod dwt;
pub mod emulated;
mod ring;
mod session;

use crate::term::spinner;
pub use dwt::{DWT_CTRL, DWT_PCSR, ITM_TCR, dwt_ctrl, dwt_period, swo_load};
use dwt::{capture_pcsr, capture_swo};
use ring::capture_ring;
pub use session::{Capture, CaptureSpec, Connection, PcsrSamples, parse_probe};
use session::{flash, open, start};

/// How samples are taken on a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// sampler-rt's timer interrupt stores the interrupted PC in a ring the probe reads.
    Timer,
    /// The core's DWT unit sends PC samples over SWO (no interrupt, no code in the firmware).
    Dwt,
    /// The host reads DWT_PCSR through the debug port while the core runs.
    Pcsr,
}
use crate::interrupt::INTERRUPTED;
use crate::term;

/// Flash, run and capture until the sampler stops, the duration, the sample count or Ctrl-C.
pub fn capture(opts: &CaptureSpec) -> Result<Capture> {
    crate::interrupt::install_handler();
    term::status("Attaching", format!("to {}", opts.conn.chip));
    let attaching = Instant::now();
    let (mut session, vm) = open(&opts.conn)?;
    let started = Instant::now();
    term::status("Flashing", opts.elf.display());
    let flashed = flash(&mut session, &opts.elf);
    let flash_time = started.elapsed();
    let mut out = Capture::default();
    let captured = flashed.and_then(|()| match opts.method {
        Method::Timer => capture_ring(&mut session, opts, &mut out),
        Method::Dwt => capture_swo(&mut session, opts, &mut out),
        Method::Pcsr => capture_pcsr(&mut session, opts, &mut out),
    });
    out.wall = started.elapsed();
    out.timings = Some((started.duration_since(attaching), flash_time));
    // probe-rs lets go of the core (it runs on), then the emulated chip's QEMU ends: by
    // itself if the firmware ends, else asked to quit so that its exit handlers run.
    drop(session);
    if let Some(vm) = vm {
        // With exact counts, a firmware that finished sampling may end by itself: let it (its
        // counts are then whole). Otherwise, or for a run cut short, QEMU quits now.
        let cut = out.interrupted
            || out.duration_reached
            || out.timed_out
            || out.core.is_some()
            || out.link_error.is_some();
        let counting = opts
            .conn
            .emulated
            .as_ref()
            .is_some_and(|e| e.exact_out.is_some());
        let wait = if captured.is_ok() && !cut && counting {
            20
        } else {
            0
        };
        out.emulated_end = Some(vm.end(Duration::from_secs(wait)));
    }
    captured.map(|()| out)
}

/// Flash `elf` (an ARMv8-A image whose PMU configuration asks for the counts in memory), run
/// it, and read the counts it leaves at `addr` once it has written them (`run_id` tells them
/// from a previous run's, which RAM keeps across a reset). Gives up after `timeout`, or at
/// Ctrl-C.
pub fn pmu_counts(
    conn: &Connection,
    elf: &Path,
    addr: u32,
    run_id: u32,
    timeout: Duration,
) -> Result<crate::capture::pmu::InMemory> {
    crate::interrupt::install_handler();
    term::status("Attaching", format!("to {}", conn.chip));
    let (mut session, _vm) = open(conn)?;
    term::status("Flashing", elf.display());
    flash(&mut session, elf)?;
    let mut target = start(&mut session)?;
    let started = Instant::now();
    let bar = spinner(&format!("counting on {}", conn.chip));
    loop {
        if let Some(counts) = crate::capture::pmu::read_in_memory(&mut target, addr, run_id)? {
            bar.finish_and_clear();
            return Ok(counts);
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            bail!("interrupted before the firmware finished counting");
        }
        if started.elapsed() >= timeout {
            bail!(
                "the firmware did not leave its counts within {} s: does it end with \
                 `sampler_rt::pmu::finish`? (`--timeout` waits longer)",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dwt_periods_are_the_nearest_the_hardware_can_make() {
        assert_eq!(dwt_period(64), (64, 0));
        assert_eq!(dwt_period(1024), (64, 15));
        assert_eq!(dwt_period(4096), (1024, 3));
        assert_eq!(dwt_period(10_000), (1024, 9)); // 10 240
        assert_eq!(dwt_period(1), (64, 0));
        assert_eq!(dwt_period(1 << 30), (1024, 15));
    }

    #[test]
    fn dwt_ctrl_sets_sampling_and_keeps_the_rest() {
        // SYNCTAP (bits 11:10) and NUMCOMP (31:28) as a probe leaves them; exception trace on.
        let current = 0x4000_0400 | 1 << 16;
        let (v, p) = dwt_ctrl(current, 4096);
        assert_eq!(p, 4096);
        assert_eq!(v & 0xF000_0C00, 0x4000_0400, "untouched bits");
        assert_eq!(v & 1, 1, "CYCCNTENA");
        assert_eq!(v >> 1 & 0xF, 3, "POSTPRESET");
        assert_eq!(v >> 5 & 0xF, 3, "POSTINIT");
        assert_eq!(v >> 9 & 1, 1, "CYCTAP = bit 10");
        assert_eq!(v >> 12 & 1, 1, "PCSAMPLENA");
        assert_eq!(v >> 16 & 1, 0, "EXCTRCENA off");
    }

    #[test]
    fn swo_load_is_five_bytes_a_sample() {
        // 168 MHz, a sample every 4096 cycles: 41 016 samples/s, 205 KB/s, 2.05 Mbit/s.
        let (bytes, load) = swo_load(168_000_000, 4096, 2_000_000);
        assert!((bytes - 205_078.125).abs() < 1e-6);
        assert!((load - 1.025_390_625).abs() < 1e-9);
    }

    #[test]
    fn pcsr_values_sort_into_pcs_halted_and_absent() {
        let mut s = PcsrSamples::default();
        for v in [0x0800_0101, 0xFFFF_FFFF, 0x0800_0200, 0] {
            s.push(v);
        }
        assert_eq!(s.pcs, vec![0x0800_0100, 0x0800_0200]);
        assert_eq!((s.halted, s.zero), (1, 1));
        assert!(!s.unsupported());
        let mut none = PcsrSamples::default();
        (0..16).for_each(|_| none.push(0));
        assert!(none.unsupported());
    }

    #[test]
    fn probe_selectors_parse_like_probe_rs() {
        let s = parse_probe("0483:374b").unwrap();
        assert_eq!((s.vendor_id, s.product_id), (0x0483, 0x374b));
        let s = parse_probe("1366:0101:000123456").unwrap();
        assert_eq!(s.serial_number.as_deref(), Some("000123456"));
        let e = parse_probe("stlink").unwrap_err().to_string();
        assert!(e.contains("VID:PID"), "{e}");
    }
}
