//! Hardware PC sampling through the DWT: periodic samples over ITM/SWO, or DWT_PCSR polled by
//! the debugger.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use probe_rs::{MemoryInterface, Session};

use super::session::{Capture, CaptureSpec, PcsrSamples, should_stop};
use crate::term;
use crate::term::spinner;

/// DWT control register.
pub const DWT_CTRL: u64 = 0xE000_1000;

/// DWT program counter sample register.
pub const DWT_PCSR: u64 = 0xE000_101C;

/// ITM trace control register.
pub const ITM_TCR: u64 = 0xE000_0E80;

/// The DWT_CTRL value that samples the PC every `period` cycles (as near as the hardware
/// allows: 64 or 1024 cycles times 1 to 16), keeping the bits it does not concern, with the
/// cycle counter on and exception trace off (it would compete for SWO bandwidth). Returns the
/// value and the period it gives.
pub fn dwt_ctrl(current: u32, period: u32) -> (u32, u32) {
    let (tap, post) = dwt_period(period);
    let mut v = current;
    v &= !(0xF << 1); // POSTPRESET
    v &= !(0xF << 5); // POSTINIT
    v &= !(1 << 9); // CYCTAP
    v &= !(1 << 16); // EXCTRCENA
    v |= 1; // CYCCNTENA
    v |= post << 1 | post << 5;
    if tap == 1024 {
        v |= 1 << 9;
    }
    v |= 1 << 12; // PCSAMPLENA
    (v, tap * (post + 1))
}

/// The nearest period the DWT can make: (tap, POSTPRESET) with tap 64 or 1024.
pub fn dwt_period(period: u32) -> (u32, u32) {
    let mut best = (64, 0, u32::MAX);
    for tap in [64u32, 1024] {
        for post in 0..16u32 {
            let p = tap * (post + 1);
            let d = p.abs_diff(period);
            if d < best.2 {
                best = (tap, post, d);
            }
        }
    }
    (best.0, best.1)
}

/// SWO load of PC sampling: bytes per second (each sample is a 5-byte packet) and the share of
/// the line it takes (UART framing: 10 bits a byte).
pub fn swo_load(clock: u32, period: u32, baud: u32) -> (f64, f64) {
    let bytes = clock as f64 / period as f64 * 5.0;
    (bytes, bytes * 10.0 / baud as f64)
}

pub(crate) fn capture_swo(
    session: &mut Session,
    opts: &CaptureSpec,
    out: &mut Capture,
) -> Result<()> {
    let clock = opts.clock.context(
        "`--method dwt` needs the core clock (`--clock HZ`): SWO's baud rate is derived from it",
    )?;
    let (_, period) = dwt_ctrl(0, opts.dwt_period);
    let (bytes, load) = swo_load(clock, period, opts.swo_baud);
    term::status(
        "Sampling",
        format!(
            "the PC every {period} cycles by DWT ({:.1} kHz), {:.0} KB/s of SWO at {} baud ({:.0} % of the line)",
            clock as f64 / period as f64 / 1e3,
            bytes / 1e3,
            opts.swo_baud,
            load * 100.0
        ),
    );
    if load > 0.8 {
        term::warn(format!(
            "PC samples need {:.0} % of the SWO line: the ITM will overflow and drop samples. \
             Use `--period {}` or more, or a faster `--swo-baud`",
            load * 100.0,
            (period as f64 * load / 0.5).ceil() as u32
        ));
    }
    {
        let mut core = session.core(0)?;
        core.reset_and_halt(Duration::from_millis(500))?;
    }
    session
        .setup_tracing(
            0,
            probe_rs::architecture::arm::component::TraceSink::Swo(
                probe_rs::architecture::arm::swo::SwoConfig::new(clock).set_baud(opts.swo_baud),
            ),
        )
        .context("setting up SWO (does the chip route SWO to the probe?)")?;
    {
        let mut core = session.core(0)?;
        let ctrl = core.read_word_32(DWT_CTRL)?;
        let (v, _) = dwt_ctrl(ctrl, opts.dwt_period);
        core.write_word_32(DWT_CTRL, v)?;
        // Local timestamps off: they would cost bandwidth the samples need.
        let tcr = core.read_word_32(ITM_TCR)?;
        core.write_word_32(ITM_TCR, tcr & !(1 << 1))?;
        core.run()?;
    }
    out.dwt_period = Some(period);
    let started = Instant::now();
    let bar = spinner("capturing SWO");
    let raw = opts.dir.join(crate::runs::SWO);
    let mut file = std::fs::File::create(&raw)?;
    let mut counted = 0u64;
    loop {
        let data = session
            .read_trace_data()
            .context("reading SWO from the probe")?;
        if !data.is_empty() {
            use std::io::Write;
            file.write_all(&data)?;
            out.swo.extend_from_slice(&data);
            // About one sample per 5 bytes: enough for the progress line and the count.
            counted = out.swo.len() as u64 / 5;
            bar.set_message(format!("capturing SWO: {} bytes", out.swo.len()));
        }
        if opts.samples.is_some_and(|n| counted >= n) || should_stop(opts, started, out) {
            break;
        }
        std::thread::sleep(opts.interval);
    }
    bar.finish_and_clear();
    Ok(())
}

pub(crate) fn capture_pcsr(
    session: &mut Session,
    opts: &CaptureSpec,
    out: &mut Capture,
) -> Result<()> {
    let mut core = session.core(0)?;
    core.reset_and_halt(Duration::from_millis(500))?;
    // PCSR samples only with the trace block on (DEMCR.TRCENA).
    const DEMCR: u64 = 0xE000_EDFC;
    let demcr = core.read_word_32(DEMCR)?;
    core.write_word_32(DEMCR, demcr | 1 << 24)?;
    core.run()?;
    let started = Instant::now();
    let bar = spinner("reading DWT_PCSR");
    let mut s = PcsrSamples::default();
    loop {
        for _ in 0..256 {
            s.push(core.read_word_32(DWT_PCSR)?);
        }
        if s.unsupported() {
            bar.finish_and_clear();
            bail!(
                "DWT_PCSR reads zero: this core does not implement it (Cortex-M0/M0+ have none). \
                 Use `--method timer`"
            );
        }
        bar.set_message(format!("reading DWT_PCSR: {} PCs", s.pcs.len()));
        if opts.samples.is_some_and(|n| s.pcs.len() as u64 >= n) || should_stop(opts, started, out)
        {
            break;
        }
    }
    bar.finish_and_clear();
    out.pcsr = Some(s);
    Ok(())
}
