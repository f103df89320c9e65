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

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use probe_rs::flashing::{self, DownloadOptions, ElfOptions, FlashProgress, ProgressEvent};
use probe_rs::probe::DebugProbeSelector;
use probe_rs::probe::list::Lister;
use probe_rs::{MemoryInterface, Permissions, Session};

use crate::capture::live::{Live, Target};

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
use crate::exec::qemu::INTERRUPTED;
use crate::term;

/// DWT control register.
pub const DWT_CTRL: u64 = 0xE000_1000;
/// DWT program counter sample register.
pub const DWT_PCSR: u64 = 0xE000_101C;
/// ITM trace control register.
pub const ITM_TCR: u64 = 0xE000_0E80;

/// How to reach the board.
#[derive(Debug, Clone)]
pub struct Connection {
    pub chip: String,
    pub probe: Option<String>,
    pub speed: Option<u32>,
    /// `swd` or `jtag`; the probe's default when `None`.
    pub protocol: Option<String>,
    pub connect_under_reset: bool,
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
        }
    }
}

/// What to do on the board.
#[derive(Debug, Clone)]
pub struct Options {
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
fn open(opts: &Connection) -> Result<Session> {
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
    session.with_context(|| {
        format!(
            "attaching to `{chip}`{}",
            if opts.connect_under_reset {
                ""
            } else {
                " (if the firmware disables the debug pins or sleeps deeply, try \
                 `--connect-under-reset`)"
            }
        )
    })
}

/// Flash the image with a progress bar.
fn flash(session: &mut Session, elf: &Path) -> Result<()> {
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

/// The core's memory as [`Target`] for the ring reader.
struct ProbeTarget<'a> {
    core: probe_rs::Core<'a>,
}

impl Target for ProbeTarget<'_> {
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
fn start(session: &mut Session) -> Result<ProbeTarget<'_>> {
    let mut core = session.core(0).context("selecting core 0")?;
    core.reset_and_halt(Duration::from_millis(500))
        .context("resetting the core")?;
    core.run().context("starting the core")?;
    Ok(ProbeTarget { core })
}

/// Flash, run and capture until the sampler stops, the duration, the sample count or Ctrl-C.
pub fn capture(opts: &Options) -> Result<Capture> {
    crate::exec::qemu::install_interrupt_handler();
    term::status("Attaching", format!("to {}", opts.conn.chip));
    let mut session = open(&opts.conn)?;
    term::status("Flashing", opts.elf.display());
    flash(&mut session, &opts.elf)?;
    let started = Instant::now();
    let mut out = Capture::default();
    match opts.method {
        Method::Timer => capture_ring(&mut session, opts, &mut out)?,
        Method::Dwt => capture_swo(&mut session, opts, &mut out)?,
        Method::Pcsr => capture_pcsr(&mut session, opts, &mut out)?,
    }
    out.wall = started.elapsed();
    Ok(out)
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
    crate::exec::qemu::install_interrupt_handler();
    term::status("Attaching", format!("to {}", conn.chip));
    let mut session = open(conn)?;
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

/// Whether to stop: Ctrl-C or the duration.
fn should_stop(opts: &Options, started: Instant, out: &mut Capture) -> bool {
    if INTERRUPTED.load(Ordering::SeqCst) {
        out.interrupted = true;
        return true;
    }
    if opts.duration.is_some_and(|d| started.elapsed() >= d) {
        out.duration_reached = true;
        return true;
    }
    false
}

fn spinner(msg: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner:.green} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(msg.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn capture_ring(session: &mut Session, opts: &Options, out: &mut Capture) -> Result<()> {
    let state = opts
        .state_addr
        .context("the firmware has no sampler state to read")?;
    let mut target = start(session)?;
    let started = Instant::now();
    let bar = spinner("waiting for sampler_rt::start()");
    let mut live: Option<Live> = None;
    let mut saved = Instant::now();
    let mut app_rtt = AppRtt::new(opts.rtt_addr, &opts.dir);
    loop {
        let l = match &mut live {
            Some(l) => l,
            None => match Live::attach(&mut target, state) {
                Ok(l) => live.insert(l),
                Err(_) if started.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(opts.interval);
                    if should_stop(opts, started, out) {
                        break;
                    }
                    continue;
                }
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(e.context(
                        "the sampler did not start within 10 s: does `main` call \
                         `sampler_rt::start()`?",
                    ));
                }
            },
        };
        l.poll(&mut target)?;
        app_rtt.forward(&mut target.core);
        bar.set_message(format!(
            "sampling on {}: {} samples, {} lost",
            opts.conn.chip,
            l.taken() - l.lost,
            l.lost
        ));
        if l.stopped() {
            l.finish(&mut target, opts.names)?;
            let _ = l.release(&mut target);
            break;
        }
        if should_stop(opts, started, out) {
            l.finish(&mut target, opts.names)?;
            break;
        }
        if saved.elapsed() >= Duration::from_secs(1) {
            // A crash of the host loses at most a second of samples (bins: as they are now).
            l.read_bins(&mut target)?;
            save_progress(&opts.dir, l);
            saved = Instant::now();
        }
        std::thread::sleep(opts.interval);
    }
    bar.finish_and_clear();
    out.live = live;
    Ok(())
}

/// The application's RTT channels, read beside the sampler's ring so that its `defmt-rtt` or
/// `rtt-target` output is not lost while cargo-sample holds the probe: each up channel's bytes
/// go to `rtt-N.bin` in the run directory (defmt frames stay binary: `defmt-print -e
/// firmware.elf < rtt-0.bin` decodes them). The sampler has no control block of its own, so
/// the two never compete for a channel.
struct AppRtt {
    addr: Option<u64>,
    rtt: Option<probe_rs::rtt::Rtt>,
    dir: PathBuf,
    tries: u32,
}

impl AppRtt {
    fn new(addr: Option<u64>, dir: &Path) -> AppRtt {
        AppRtt {
            addr,
            rtt: None,
            dir: dir.to_path_buf(),
            tries: 0,
        }
    }

    fn forward(&mut self, core: &mut probe_rs::Core<'_>) {
        let Some(addr) = self.addr else { return };
        if self.rtt.is_none() {
            // The application sets its control block up after reset; try for a while.
            if self.tries > 100 {
                return;
            }
            self.tries += 1;
            self.rtt =
                probe_rs::rtt::Rtt::attach_region(core, &probe_rs::rtt::ScanRegion::Exact(addr))
                    .ok();
        }
        let Some(rtt) = &mut self.rtt else { return };
        let mut buf = [0u8; 4096];
        for ch in rtt.up_channels().iter_mut() {
            let n = ch.number();
            if let Ok(k) = ch.read(core, &mut buf)
                && k > 0
            {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join(format!("rtt-{n}.bin")))
                {
                    let _ = f.write_all(&buf[..k]);
                }
            }
        }
    }
}

/// Keep what arrived so far in the run directory.
fn save_progress(dir: &Path, l: &Live) {
    let d = l.to_dump((0, 0, 0), sampler_rt::wire::STOP_SNAPSHOT);
    let bytes = crate::dump::encode_samples(&d);
    let _ = crate::runs::write_atomic(&dir.join(crate::runs::DUMP), &bytes);
}

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

fn capture_swo(session: &mut Session, opts: &Options, out: &mut Capture) -> Result<()> {
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
    let raw = opts.dir.join("swo.bin");
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

fn capture_pcsr(session: &mut Session, opts: &Options, out: &mut Capture) -> Result<()> {
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
