//! The debug session: the probe and chip chosen, the image flashed, the core run, the capture's
//! settings and what it brought back.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use probe_rs::flashing::{self, DownloadOptions, ElfOptions, FlashProgress, ProgressEvent};
use probe_rs::probe::DebugProbeSelector;
use probe_rs::probe::list::Lister;
use probe_rs::{MemoryInterface, Permissions, Session};

use super::Method;
use crate::capture::live::{Live, Memory};
use crate::interrupt::INTERRUPTED;

/// How to reach the board.
#[derive(Debug, Clone)]
pub struct Connection {
    pub chip: String,
    pub probe: Option<String>,
    pub speed: Option<u32>,
    /// `swd` or `jtag`; the probe's default when `None`.
    pub protocol: Option<String>,
    pub connect_under_reset: bool,
    /// `--probe qemu`: the chip is this QEMU machine.
    pub emulated: Option<super::emulated::Emulated>,
}

impl Connection {
    /// The chip and the probe settings, by precedence: the command line, the crate's probe-rs
    /// runner, then `PROBE_RS_*` and cargo-embed's files (`defaults`).
    pub fn new(
        chip: &str,
        given: crate::project::runner::Probe,
        defaults: crate::project::runner::Probe,
    ) -> Self {
        let p = given.or(defaults);
        Connection {
            chip: chip.to_owned(),
            probe: p.probe,
            speed: p.speed,
            protocol: p.protocol,
            connect_under_reset: p.connect_under_reset,
            emulated: None,
        }
    }
}

/// What to do on the board.
#[derive(Debug, Clone)]
pub struct CaptureSpec {
    pub conn: Connection,
    /// The image to flash (with the run's configuration in it).
    pub elf: PathBuf,
    pub method: Method,
    /// `timer`: the sampler's state block.
    pub state_addr: Option<u32>,
    /// Stop after this long (also: the sampler's own limit, or Ctrl-C).
    pub duration: Option<Duration>,
    /// Time between two reads of the ring.
    pub interval: Duration,
    /// Give up after this long (`--timeout`).
    pub timeout: Duration,
    /// `dwt`, `pcsr`: stop after this many samples.
    pub samples: Option<u64>,
    /// Core clock in Hz (SWO prescaler; time units).
    pub clock: Option<u32>,
    pub swo_baud: u32,
    /// `dwt`: requested cycles between PC samples.
    pub dwt_period: u32,
    /// Where the raw capture goes as it arrives (the run directory).
    pub dir: PathBuf,
    /// The application's own RTT control block (`_SEGGER_RTT` of `defmt-rtt`, `rtt-target`),
    /// whose output is kept while cargo-sample holds the probe.
    pub rtt_addr: Option<u64>,
    /// `timer`: the firmware's tag names, read at the end.
    pub names: Option<crate::capture::live::NamesAt>,
    /// The image's functions, for the live top view.
    pub functions: Vec<(u64, u64, String)>,
    /// The image's Embassy task pools, for the live top view's tasks.
    pub tasks: Vec<crate::image::elf::TaskPool>,
}

/// What a board run brought back.
#[derive(Debug, Default)]
pub struct Capture {
    /// `timer`: the ring as read.
    pub live: Option<Live>,
    /// `dwt`: the SWO bytes (also saved as they came).
    pub swo: Vec<u8>,
    /// `pcsr`: the PCs read, and the reads that found the core halted or no PCSR.
    pub pcsr: Option<PcsrSamples>,
    /// `dwt`: the sampling period actually programmed, in cycles.
    pub dwt_period: Option<u32>,
    pub interrupted: bool,
    pub duration_reached: bool,
    pub wall: Duration,
    /// How long attaching and flashing took.
    pub timings: Option<(Duration, Duration)>,
    /// The core, when sampling stalled and the core was found in a fault handler.
    pub core: Option<crate::dump::fault::CoreState>,
    pub timed_out: bool,
    /// The link failed for good mid-capture (the board lost power, the probe was unplugged):
    /// why. What was read before is kept.
    pub link_error: Option<String>,
    /// `--probe qemu`: how the emulated chip's QEMU ended.
    pub emulated_end: Option<String>,
}

/// Parse `VID:PID[:SERIAL]` the way probe-rs does, with a message that shows the form.
pub fn parse_probe(s: &str) -> Result<DebugProbeSelector> {
    s.parse::<DebugProbeSelector>().map_err(|e| {
        anyhow::anyhow!(
            "`--probe {s}`: {e}. The form is VID:PID or VID:PID:SERIAL in hex, e.g. `0483:374b` \
             (`probe-rs list` shows the attached probes)"
        )
    })
}

/// Open the probe and attach to the chip.
pub(crate) fn open(opts: &Connection) -> Result<(Session, Option<super::emulated::VmHandle>)> {
    if let Some(e) = &opts.emulated {
        let (s, vm) = open_emulated(opts, e)?;
        return Ok((s, Some(vm)));
    }
    let lister = Lister::new();
    let mut probe = match &opts.probe {
        Some(sel) => lister
            .open(parse_probe(sel)?)
            .with_context(|| format!("opening the probe `{sel}`"))?,
        None => {
            let probes = lister.list_all();
            match probes.as_slice() {
                [] => bail!(
                    "no debug probe found. Connect one (and on Linux install probe-rs's udev \
                     rules), or profile in QEMU with `--machine`"
                ),
                [one] => one
                    .open()
                    .with_context(|| format!("opening {}", one.identifier))?,
                many => bail!(
                    "{} probes are attached; choose one with `--probe VID:PID[:SERIAL]`:\n{}",
                    many.len(),
                    many.iter()
                        .map(|p| format!(
                            "  {:04x}:{:04x}{}  {}",
                            p.vendor_id,
                            p.product_id,
                            p.serial_number
                                .as_deref()
                                .map(|s| format!(":{s}"))
                                .unwrap_or_default(),
                            p.identifier
                        ))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            }
        }
    };
    if let Some(proto) = &opts.protocol {
        let wire: probe_rs::probe::WireProtocol = proto
            .parse()
            .map_err(|e: String| anyhow::anyhow!("`--protocol {proto}`: {e}"))?;
        probe
            .select_protocol(wire)
            .with_context(|| format!("selecting {wire} on the probe"))?;
    }
    if let Some(khz) = opts.speed {
        probe
            .set_speed(khz)
            .with_context(|| format!("setting the probe's speed to {khz} kHz"))?;
    }
    let chip = opts.chip.as_str();
    let session = if opts.connect_under_reset {
        probe.attach_under_reset(chip, Permissions::default())
    } else {
        probe.attach(chip, Permissions::default())
    };
    let session = session.with_context(|| {
        format!(
            "attaching to `{chip}`{}",
            if opts.connect_under_reset {
                ""
            } else {
                " (if the firmware disables the debug pins or sleeps deeply, try \
                 `--connect-under-reset`)"
            }
        )
    })?;
    Ok((session, None))
}

/// Start the QEMU machine behind the emulated probe and attach to it as to a board.
fn open_emulated(
    opts: &Connection,
    e: &super::emulated::Emulated,
) -> Result<(Session, super::emulated::VmHandle)> {
    let (probe, vm) = super::emulated::QemuProbe::launch(e)?.into_probe();
    let registry = super::emulated::registry()?;
    let session = probe
        .attach_with_registry(opts.chip.as_str(), Permissions::default(), &registry)
        .with_context(|| format!("attaching to the emulated `{}`", opts.chip))?;
    Ok((session, vm))
}

/// Flash the image with a progress bar.
pub(crate) fn flash(session: &mut Session, elf: &Path) -> Result<()> {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{spinner:.green} {msg:10} [{bar:30.cyan/blue}] {bytes}/{total_bytes} {elapsed}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let progress = FlashProgress::new(|event| match event {
        ProgressEvent::AddProgressBar {
            total: Some(total), ..
        } => bar.set_length(total),
        ProgressEvent::Started(op) => {
            bar.set_position(0);
            bar.set_message(format!("{op:?}").to_lowercase());
        }
        ProgressEvent::Progress { size, .. } => bar.inc(size),
        ProgressEvent::DiagnosticMessage { message } => bar.println(message),
        _ => {}
    });
    let mut options = DownloadOptions::default();
    options.progress = progress;
    options.verify = true;
    flashing::download_file_with_options(
        session,
        elf,
        flashing::ElfLoader(ElfOptions::default()),
        options,
    )
    .with_context(|| format!("flashing {}", elf.display()))?;
    bar.finish_and_clear();
    Ok(())
}

/// The core's memory as [`Memory`] for the ring reader.
pub(crate) struct ProbeMemory<'a> {
    core: probe_rs::Core<'a>,
}

impl ProbeMemory<'_> {
    /// Halt the core a moment and read where it is and its fault status, then let it run on.
    pub(crate) fn core_state(&mut self) -> Result<crate::dump::fault::CoreState> {
        let c = &mut self.core;
        c.halt(Duration::from_millis(500))
            .context("halting the core")?;
        let regs = c.registers();
        let pc: u32 = c
            .read_core_reg(regs.pc().context("no PC")?)
            .context("reading the PC")?;
        let xpsr: u32 = match regs.psr() {
            Some(r) => c.read_core_reg(r).context("reading xPSR")?,
            None => 0,
        };
        let mut scb = [0u32; 6];
        let scb_read = c.read_32(0xE000_ED28, &mut scb);
        c.run().context("letting the core run")?;
        scb_read.context("reading the fault status registers")?;
        Ok(crate::dump::fault::CoreState {
            exception: xpsr & 0x1FF,
            pc,
            cfsr: scb[0],
            hfsr: scb[1],
            mmfar: scb[3],
            bfar: scb[4],
        })
    }
}

impl Memory for ProbeMemory<'_> {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<()> {
        self.core
            .read_8(addr as u64, buf)
            .with_context(|| format!("reading {} bytes at {addr:#010x}", buf.len()))
    }

    fn write(&mut self, addr: u32, bytes: &[u8]) -> Result<()> {
        self.core
            .write_8(addr as u64, bytes)
            .with_context(|| format!("writing {} bytes at {addr:#010x}", bytes.len()))
    }
}

/// Reset core 0 and let it run the flashed image; its memory, for the readers.
pub(crate) fn start(session: &mut Session) -> Result<ProbeMemory<'_>> {
    let mut core = session.core(0).context("selecting core 0")?;
    core.reset_and_halt(Duration::from_millis(500))
        .context("resetting the core")?;
    core.run().context("starting the core")?;
    Ok(ProbeMemory { core })
}

/// Whether to stop: Ctrl-C, the duration or the timeout.
pub(crate) fn should_stop(opts: &CaptureSpec, started: Instant, out: &mut Capture) -> bool {
    if INTERRUPTED.load(Ordering::SeqCst) {
        out.interrupted = true;
        return true;
    }
    if opts.duration.is_some_and(|d| started.elapsed() >= d) {
        out.duration_reached = true;
        return true;
    }
    if started.elapsed() >= opts.timeout {
        out.timed_out = true;
        return true;
    }
    false
}

/// PCs read from DWT_PCSR, and the reads that carried none.
#[derive(Debug, Default, Clone)]
pub struct PcsrSamples {
    pub pcs: Vec<u32>,
    /// 0xFFFFFFFF: the core was halted (or in a state PCSR does not sample).
    pub halted: u64,
    /// 0: the register is not implemented (reads as zero).
    pub zero: u64,
}

impl PcsrSamples {
    /// Take one PCSR read.
    pub fn push(&mut self, v: u32) {
        match v {
            0xFFFF_FFFF => self.halted += 1,
            0 => self.zero += 1,
            pc => self.pcs.push(pc & !1),
        }
    }

    /// A core without PCSR reads zero every time.
    pub fn unsupported(&self) -> bool {
        self.pcs.is_empty() && self.zero >= 16
    }
}
