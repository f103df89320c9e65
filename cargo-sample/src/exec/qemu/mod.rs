//! Running firmware in QEMU: `-icount shift=0` (one instruction per nanosecond, exactly
//! repeatable), semihosting on, in a private temporary directory, with a timeout, a progress
//! line, and the firmware's own output passed through untouched (and kept).

use std::io::{BufRead, BufReader, Read, Write};
#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::capture::live::{AppRtt, Live, Reader, Step};
use crate::exec::exact::{Counting, ExecLog};
use crate::interrupt::{INTERRUPTED, install_handler};
use crate::runs::RunState;

mod binary;
pub(crate) mod monitor;

pub use binary::{QemuBuild, inspect, locate, models_cpu};
use monitor::{Monitor, connect_monitor, endpoint, quit_cleanly, take_snapshot};

/// Where the plugin writes its counts, in QEMU's working directory.
const EXACT_FILE: &str = "exact.counts";

/// A memory range to save from the guest when the run is cut short.
#[derive(Debug, Clone, Copy)]
pub struct MemoryBlock {
    pub addr: u64,
    pub len: u64,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub qemu: PathBuf,
    pub machine: String,
    /// The crate runner's own options, passed as they are (`-m`, `-device`, ...).
    pub extra_args: Vec<String>,
    pub cpu: String,
    pub kernel: PathBuf,
    /// `-icount shift=N`: 2^N ns of emulated time per instruction.
    pub icount_shift: u8,
    pub timeout: Duration,
    /// Shown on the progress line.
    pub label: String,
    /// What to save when the run is cut short: the sampler's state, then its ring (the second
    /// region's address and length are read from the state when `None`).
    pub snapshot: Option<MemoryBlock>,
    /// Where to keep the firmware's output.
    pub output_log: Option<PathBuf>,
    /// The firmware's standard output is defmt frames (through semihosting): decode them
    /// against this image, print the lines and keep them in `defmt.log` beside `output_log`.
    pub defmt_stdout: Option<PathBuf>,
    /// How to count every executed instruction (`--truth`, `--exact`), if at all.
    pub counting: Option<Counting>,
    /// With counting: end the run after about this many instructions.
    pub budget: Option<u64>,
    /// Samples the firmware will send (for the progress bar), if known.
    pub expected_samples: Option<u64>,
    /// Read the sampler's ring through the monitor while the firmware runs (the way a probe
    /// reads it on a board) instead of waiting for a dump.
    pub live: Option<LiveSpec>,
    /// ARMv8-A PMU counts left in memory (address, run id): read them through the monitor
    /// once written (the way a probe reads them on a board), then stop QEMU.
    pub pmu_in_memory: Option<(u32, u32)>,
    /// With the plugin: follow calls and returns too (the exact call graph); the exception
    /// handlers' entry addresses.
    pub call_graph: Option<Vec<u32>>,
    /// With the plugin: count each exception's instructions per address too (the exception
    /// handlers' entry addresses): [`Outcome::exact_contexts`].
    pub contexts: Option<Vec<u32>>,
}

/// A live capture through the monitor.
#[derive(Debug, Clone)]
pub struct LiveSpec {
    /// The sampler's state block.
    pub state_addr: u32,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Time between two reads.
    pub interval: Duration,
    /// The application's RTT control block, whose channels are copied into `rtt_dir`.
    pub app_rtt: Option<(u32, PathBuf)>,
    /// The firmware's tag names, read at the end.
    pub names: Option<crate::capture::live::NamesAt>,
    /// The image's functions, for the live top view.
    pub functions: Vec<(u64, u64, String)>,
}

/// What a live capture read.
#[derive(Debug)]
pub struct LiveOutcome {
    /// The samples, if the sampler ever started.
    pub live: Option<Live>,
    /// The firmware ended before the host read its last samples (QEMU exited between polls).
    pub unread_tail: bool,
    /// Why reading failed, if it did.
    pub error: Option<String>,
    /// The duration ended the run.
    pub duration_reached: bool,
}

/// How the run ended.
#[derive(Debug)]
pub struct Outcome {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub interrupted: bool,
    /// The dump the firmware wrote, if any.
    pub dump: Option<Vec<u8>>,
    /// Exact per-PC instruction counts (a counts file), if counting was on and QEMU left them.
    pub exact: Option<Vec<u8>>,
    /// Exact counts per exception and PC (a per-exception counts file): the exec log's only.
    pub exact_contexts: Option<Vec<u8>>,
    /// Whether the instruction budget ended the run.
    pub budget_reached: bool,
    /// Everything QEMU and the firmware printed (exec-log lines excluded).
    pub output: Vec<u8>,
    /// Guest memory saved through the monitor (state, ring) when the run was cut short.
    pub snapshot: Option<(Vec<u8>, Vec<u8>)>,
    /// The core's registers and fault status when the run was cut short.
    pub core: Option<crate::dump::fault::CoreState>,
    /// With [`RunSpec::live`]: what the host read while the firmware ran.
    pub live: Option<LiveOutcome>,
    /// With [`RunSpec::pmu_in_memory`]: the counts read out of memory.
    pub pmu_in_memory: Option<crate::capture::pmu::InMemory>,
    /// With [`RunSpec::call_graph`]: the plugin's calling-context tree.
    pub call_graph: Option<Vec<u8>>,
    pub wall: Duration,
    pub command: Vec<String>,
}

impl Outcome {
    /// How the run ended, in the words `meta.json` keeps: what cut it short first (the budget,
    /// the duration, a core stuck in a fault handler, Ctrl-C, the timeout), else how QEMU exited.
    pub fn state(&self) -> RunState {
        if self.budget_reached {
            RunState::BudgetReached
        } else if self.live.as_ref().is_some_and(|l| l.duration_reached) {
            RunState::DurationReached
        } else if self.core.is_some_and(|c| c.faulted()) {
            RunState::Faulted
        } else if self.interrupted {
            RunState::Interrupted
        } else if self.timed_out {
            RunState::TimedOut
        } else if self.status.is_some_and(|s| s.success()) {
            RunState::Finished
        } else {
            RunState::Failed
        }
    }
}

/// Run the firmware to its end, the timeout, or Ctrl-C.
pub fn run(opts: &RunSpec) -> Result<Outcome> {
    let work = tempfile::Builder::new()
        .prefix("cargo-sample-qemu-")
        .tempdir()
        .context("creating QEMU's working directory")?;
    let monitor = endpoint::Addr::new(work.path()).context("choosing QEMU's monitor address")?;
    let mut cmd = Command::new(&opts.qemu);
    cmd.current_dir(work.path())
        .args(["-machine", &opts.machine, "-cpu", &opts.cpu])
        .args(["-display", "none", "-serial", "stdio"])
        .arg("-monitor")
        .arg(monitor.qemu_arg())
        .args(["-semihosting-config", "enable=on,target=native"])
        // virt's default network card needs a boot ROM Debian ships apart.
        .args(if opts.machine.starts_with("virt") {
            &["-nic", "none"][..]
        } else {
            &[][..]
        })
        .arg("-icount")
        .arg(format!("shift={}", opts.icount_shift))
        .args(&opts.extra_args)
        .arg("-kernel")
        .arg(&opts.kernel);
    match &opts.counting {
        Some(Counting::Plugin { path, .. }) => {
            let budget = opts
                .budget
                .map(|n| format!(",budget={n}"))
                .unwrap_or_default();
            let mut graph = String::new();
            if let Some(handlers) = opts.call_graph.as_ref().or(opts.contexts.as_ref()) {
                let list: Vec<String> = handlers.iter().map(|h| format!("{h:x}")).collect();
                graph.push_str(&format!(",handlers={}", list.join(":")));
            }
            if opts.call_graph.is_some() {
                graph.push_str(&format!(
                    ",graph={}",
                    work.path().join(crate::dump::callgraph::FILE).display()
                ));
            }
            if opts.contexts.is_some() {
                graph.push_str(&format!(
                    ",contexts={}",
                    work.path()
                        .join(crate::dump::exact::CONTEXTS_FILE)
                        .display()
                ));
            }
            cmd.arg("-plugin").arg(format!(
                "{},out={}{budget}{graph}",
                path.display(),
                work.path().join(EXACT_FILE).display()
            ));
        }
        Some(Counting::ExecLog { one_insn_flag }) => {
            // `int` too: exception entries and returns, to count per exception.
            cmd.args(one_insn_flag).args(["-d", "exec,nochain,int"]);
        }
        None => {}
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group: a Ctrl-C in the terminal reaches cargo-sample, which stops QEMU
    // after saving what it can.
    #[cfg(unix)]
    cmd.process_group(0);
    let command: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    install_handler();
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", opts.qemu.display()))?;

    let bar = match opts.expected_samples {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "{spinner:.green} {msg} [{bar:30.cyan/blue}] {human_pos}/{human_len} samples {elapsed}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner:.green} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_message(opts.label.clone());
    bar.enable_steady_tick(Duration::from_millis(120));

    let log = Arc::new(Mutex::new(Vec::<u8>::new()));
    let counted = Arc::new(AtomicU64::new(0));
    let exec_log = matches!(opts.counting, Some(Counting::ExecLog { .. }));
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        let (bar, log) = (bar.clone(), log.clone());
        let defmt = opts.defmt_stdout.as_ref().and_then(|elf| {
            let decoder = std::fs::read(elf)
                .ok()
                .and_then(|b| crate::dump::defmt::DefmtLog::of_elf(&b).ok().flatten())?;
            let kept = opts
                .output_log
                .as_ref()
                .and_then(|o| o.parent())
                .map(|d| d.join(crate::runs::DEFMT_LOG));
            Some((decoder, kept))
        });
        pumps.push(std::thread::spawn(move || {
            match defmt {
                Some((decoder, kept)) => pump_defmt(out, &bar, &log, decoder, kept),
                None => pump(Box::new(out), &bar, &log),
            }
            None
        }));
    }
    if let Some(err) = child.stderr.take() {
        let (bar, log, counted) = (bar.clone(), log.clone(), counted.clone());
        pumps.push(std::thread::spawn(move || {
            if exec_log {
                Some(pump_exec_log(err, &bar, &log, &counted))
            } else {
                pump(Box::new(err), &bar, &log);
                None
            }
        }));
    }

    let mut timed_out = false;
    let mut interrupted = false;
    let mut snapshot = None;
    let mut core = None;
    let mut budget_reached = false;
    let mut polls = 0u32;
    let mut top_drawn = Instant::now();
    let mut live = opts.live.as_ref().map(|spec| LiveRun {
        top: crate::capture::top::Top::new(spec.functions.clone()),
        spec: spec.clone(),
        monitor: None,
        reader: Reader::new(
            spec.state_addr,
            spec.names,
            spec.app_rtt
                .as_ref()
                .map(|(addr, dir)| AppRtt::new(*addr, dir)),
        ),
        out: LiveOutcome {
            live: None,
            unread_tail: false,
            error: None,
            duration_reached: false,
        },
        dir: work.path().to_path_buf(),
    });
    let mut in_memory = None;
    let mut counts_monitor: Option<Monitor> = None;
    let status = loop {
        if let Some((addr, run_id)) = opts.pmu_in_memory
            && child.try_wait().ok().flatten().is_none()
        {
            if counts_monitor.is_none() {
                counts_monitor = connect_monitor(&monitor, work.path());
            }
            if let Some(m) = counts_monitor.as_mut() {
                match crate::capture::pmu::read_in_memory(m, addr, run_id) {
                    Ok(Some(c)) => {
                        // The firmware idles once its counts are written: stop it (the monitor
                        // takes one connection at a time).
                        in_memory = Some(c);
                        drop(counts_monitor.take());
                        quit_cleanly(&monitor, &mut child);
                        let _ = child.kill();
                        break child.wait().ok();
                    }
                    Ok(None) => {}
                    // QEMU going away mid-read (the firmware ended some other way): its exit
                    // is seen next turn; otherwise connect again.
                    Err(_) => drop(counts_monitor.take()),
                }
            }
        }
        if let Some(status) = child.try_wait().context("waiting for QEMU")? {
            if let Some(l) = &mut live
                && l.reader.live().is_some_and(|x| !x.stopped())
            {
                l.out.unread_tail = true;
            }
            break Some(status);
        }
        if let Some(l) = &mut live {
            let over = l.spec.duration.is_some_and(|d| started.elapsed() >= d);
            let cut = INTERRUPTED.load(Ordering::SeqCst) || started.elapsed() >= opts.timeout;
            let stepped = l.step(&monitor);
            // The firmware's defmt log, as it arrives.
            for line in l.reader.take_log_lines() {
                crate::term::line_above(&bar, &line);
            }
            match stepped {
                Ok(done) => {
                    if let Some(x) = l.reader.live() {
                        bar.set_position(x.taken());
                        // The top view, twice a second.
                        if top_drawn.elapsed() >= TOP_EVERY {
                            top_drawn = Instant::now();
                            bar.set_message(l.top.table(&opts.label, x));
                        }
                    }
                    if done || over || cut {
                        l.finish();
                        l.out.duration_reached = over && !done;
                        timed_out = !done && !over && started.elapsed() >= opts.timeout;
                        interrupted = !done && INTERRUPTED.load(Ordering::SeqCst);
                        // The monitor takes one connection at a time.
                        l.monitor = None;
                        quit_cleanly(&monitor, &mut child);
                        let _ = child.kill();
                        let status = child.wait().ok();
                        break if done { status } else { None };
                    }
                }
                Err(e) => {
                    // QEMU gone while it was read: the firmware ended between two reads. (The
                    // monitor's connection may close a moment before the process is reaped.)
                    let t0 = Instant::now();
                    while t0.elapsed() < Duration::from_millis(500)
                        && matches!(child.try_wait(), Ok(None))
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if let Ok(Some(status)) = child.try_wait() {
                        if l.reader.live().is_none_or(|x| !x.stopped()) {
                            l.out.unread_tail = true;
                        }
                        break Some(status);
                    }
                    l.out.error = Some(format!("{e:#}"));
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
            std::thread::sleep(l.spec.interval);
            continue;
        }
        if exec_log
            && opts
                .budget
                .is_some_and(|b| counted.load(Ordering::Relaxed) >= b)
        {
            // The exec log has no budget of its own: stop QEMU from here.
            budget_reached = true;
            let _ = child.kill();
            let status = child.wait().ok();
            break status;
        }
        let over = started.elapsed() >= opts.timeout;
        let stop = INTERRUPTED.load(Ordering::SeqCst);
        if over || stop {
            timed_out = over;
            interrupted = stop;
            if let Some(region) = opts.snapshot {
                bar.set_message("saving the samples held by the firmware");
                if let Ok((s, c)) = take_snapshot(&monitor, work.path(), region) {
                    snapshot = s;
                    core = c;
                }
            }
            if matches!(opts.counting, Some(Counting::Plugin { .. })) {
                // A clean quit lets the plugin write the counts gathered so far.
                bar.set_message("saving the exact counts so far");
                quit_cleanly(&monitor, &mut child);
            }
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
        polls += 1;
        if polls.is_multiple_of(20) {
            if opts.expected_samples.is_some() {
                bar.set_position(streamed_samples(&work.path().join(DUMP_FILE)));
            } else if exec_log {
                bar.set_message(format!(
                    "{} ({:.1}e6 instructions counted)",
                    opts.label,
                    counted.load(Ordering::Relaxed) as f64 / 1e6
                ));
            }
        }
    };
    let mut counts_from_log = None;
    for p in pumps {
        if let Ok(Some(c)) = p.join() {
            counts_from_log = Some(c);
        }
    }
    bar.finish_and_clear();
    let wall = started.elapsed();
    if let Some(path) = &opts.output_log {
        let _ = std::fs::write(path, &*log.lock().unwrap_or_else(|e| e.into_inner()));
    }
    let dump_path = work.path().join(DUMP_FILE);
    let dump = std::fs::read(&dump_path).ok();
    let exact_contexts = counts_from_log
        .as_ref()
        .and_then(|log| log.context_counts())
        .map(|c| crate::dump::exact::encode_contexts(&c))
        .or_else(|| {
            opts.contexts.as_ref().and_then(|_| {
                std::fs::read(work.path().join(crate::dump::exact::CONTEXTS_FILE)).ok()
            })
        });
    let exact = match counts_from_log {
        Some(log) => Some(crate::dump::exact::encode(&log.counts())),
        None => std::fs::read(work.path().join(EXACT_FILE)).ok(),
    };
    if matches!(opts.counting, Some(Counting::Plugin { .. })) {
        // The plugin exits by itself at the budget and says so beside its counts.
        budget_reached |= work.path().join(format!("{EXACT_FILE}.budget")).is_file();
    }
    let output = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Outcome {
        exact,
        exact_contexts,
        budget_reached,
        output,
        status,
        timed_out,
        interrupted,
        dump,
        snapshot,
        core,
        wall,
        command,
        live: live.map(|mut l| {
            l.out.live = l.reader.into_live();
            l.out
        }),
        pmu_in_memory: in_memory,
        call_graph: opts
            .call_graph
            .as_ref()
            .and_then(|_| std::fs::read(work.path().join(crate::dump::callgraph::FILE)).ok()),
    })
}

/// How often the live top view is redrawn.
const TOP_EVERY: Duration = Duration::from_millis(500);

/// A live capture in progress: the reader, over the monitor once QEMU has opened it.
struct LiveRun {
    top: crate::capture::top::Top,
    spec: LiveSpec,
    monitor: Option<Monitor>,
    reader: Reader,
    out: LiveOutcome,
    dir: PathBuf,
}

impl LiveRun {
    /// Connect, attach once the sampler runs, read what is new. True once the sampler stopped
    /// and its last samples are in.
    fn step(&mut self, socket: &endpoint::Addr) -> Result<bool> {
        if self.monitor.is_none() {
            // None while QEMU has not opened its monitor yet.
            self.monitor = connect_monitor(socket, &self.dir);
        }
        let Some(m) = self.monitor.as_mut() else {
            return Ok(false);
        };
        match self.reader.step(m) {
            Ok(step) => Ok(matches!(step, Step::Stopped)),
            // Before the sampler is found a failed read is looked at again next turn (QEMU's
            // exit, if that is why, is seen by the caller).
            Err(_) if self.reader.live().is_none() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A run ended from here (its duration, a timeout, Ctrl-C): the bins and names so far.
    fn finish(&mut self) {
        if let Some(m) = self.monitor.as_mut() {
            let _ = self.reader.finish(m);
        }
    }
}

/// The dump file the firmware writes through semihosting, in QEMU's working directory.
const DUMP_FILE: &str = "sampler.dump";

/// About how many samples a streaming firmware has written so far (from the file's size).
fn streamed_samples(path: &Path) -> u64 {
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let overhead = (sampler_rt::wire::FILE_HEADER_LEN + 8 + sampler_rt::wire::INFO_LEN) as u64;
    len.saturating_sub(overhead) / 4
}

/// Read a stream of QEMU's to its end, keeping every chunk in the output log and handing it to
/// `show`.
fn pump_with(mut stream: impl Read, log: &Mutex<Vec<u8>>, mut show: impl FnMut(&[u8])) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let chunk = &buf[..n];
                show(chunk);
                if let Ok(mut l) = log.lock() {
                    l.extend_from_slice(chunk);
                }
            }
        }
    }
}

/// A stream of QEMU's passed on to standard error as it comes.
fn pump(stream: Box<dyn Read + Send>, bar: &ProgressBar, log: &Mutex<Vec<u8>>) {
    pump_with(stream, log, |chunk| {
        bar.suspend(|| {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(chunk);
            let _ = err.flush();
        })
    });
}

/// QEMU's standard output as defmt frames: each decoded line printed (above the progress
/// bar) and appended to `kept`; the raw bytes go to the output log as they are.
fn pump_defmt(
    stream: impl Read,
    bar: &ProgressBar,
    log: &Mutex<Vec<u8>>,
    mut decoder: crate::dump::defmt::DefmtLog,
    kept: Option<PathBuf>,
) {
    let mut file = kept.and_then(|k| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(k)
            .ok()
    });
    pump_with(stream, log, |chunk| {
        for line in decoder.feed(chunk) {
            crate::term::line_above(bar, &line);
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    });
}

/// Read QEMU's stderr line by line: exec-log lines are counted, the rest passes through.
fn pump_exec_log(
    stream: impl Read,
    bar: &ProgressBar,
    log: &Mutex<Vec<u8>>,
    counted: &AtomicU64,
) -> ExecLog {
    let mut exec = ExecLog::default();
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::with_capacity(256);
    let mut n = 0u32;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if exec.line(text) {
            n = n.wrapping_add(1);
            if n.is_multiple_of(4096) {
                counted.store(exec.total(), Ordering::Relaxed);
            }
            continue;
        }
        bar.suspend(|| {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(&line);
            let _ = err.flush();
        });
        if let Ok(mut l) = log.lock() {
            l.extend_from_slice(&line);
        }
    }
    counted.store(exec.total(), Ordering::Relaxed);
    exec
}
