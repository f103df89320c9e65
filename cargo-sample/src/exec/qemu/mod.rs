//! Running firmware in QEMU: `-icount shift=0` (one instruction per nanosecond, exactly
//! repeatable), semihosting on, in a private temporary directory, with a timeout, a progress
//! line, and the firmware's own output passed through untouched (and kept).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use indicatif::ProgressBar;

use crate::capture::live::{Live, Reader, Step};
use crate::exec::exact::{Counting, ExecLog};
use crate::runs::RunState;

mod binary;
pub(crate) mod monitor;
mod run;

pub use binary::{QemuBuild, inspect, locate, models_cpu};
use monitor::{Monitor, connect_monitor, endpoint};
pub use run::run;

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
    /// With the call graph: time sampler-rt's lap windows too, given the entries of
    /// `Region::start`, `Lap::drop` and `Region::iterate`: [`Outcome::lap_windows`].
    pub lap_fns: Option<[u32; 3]>,
    /// With the plugin: the main stack's `(limit, top)`, to find the lowest address stored
    /// to in it: [`Outcome::stack`].
    pub stack: Option<(u32, u32)>,
    /// With the plugin: time Embassy's polls exactly, given sampler-rt's hooks and the task
    /// pools' ranges: [`Outcome::tasks`].
    pub tasks: Option<TaskWatch>,
    /// With the plugin: where the firmware starts its sampler (`sampler_rt_sampling_starts`),
    /// to count what ran before it apart: [`Outcome::before_start`].
    pub start_marker: Option<u32>,
}

/// What the plugin needs to time Embassy's polls.
#[derive(Debug, Clone)]
pub struct TaskWatch {
    /// sampler-rt's hooks and the clock's read (`elf::task_hooks`).
    pub hooks: [u32; 8],
    /// The task pools' ranges, in address order.
    pub pools: Vec<(u32, u32)>,
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
    /// The image's Embassy task pools, for the live top view's tasks.
    pub tasks: Vec<crate::image::elf::TaskPool>,
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
    /// With [`RunSpec::call_graph`] or [`RunSpec::contexts`] through the plugin: how each
    /// handler was entered (an exception-entries file).
    pub exception_chains: Option<Vec<u8>>,
    /// With [`RunSpec::lap_fns`]: the lap windows' counts (a lap-windows file).
    pub lap_windows: Option<Vec<u8>>,
    /// With [`RunSpec::stack`]: the lowest address stored to (a stack-depth file).
    pub stack: Option<Vec<u8>>,
    /// With [`RunSpec::tasks`]: the polls' exact times (a task-polls file).
    pub tasks: Option<Vec<u8>>,
    /// With [`RunSpec::start_marker`]: the exact counts of what ran before the sampler
    /// started (a counts file), when the firmware got there.
    pub before_start: Option<Vec<u8>>,
    /// With [`RunSpec::start_marker`] and [`RunSpec::call_graph`]: the graph when the sampler
    /// started (a call-graph file).
    pub graph_before_start: Option<Vec<u8>>,
    /// With [`RunSpec::contexts`] and the plugin: where each exception's time returned to (a
    /// landings file).
    pub landings: Option<Vec<u8>>,
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
    start: Option<u32>,
) -> ExecLog {
    let mut exec = ExecLog::starting_at(start);
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
