//! One QEMU run: the command line, the progress line, the threads that carry QEMU's output,
//! the loop that watches the run (a live read, PMU counts left in memory, the exec log's
//! budget, the timeout, Ctrl-C) and what the run left behind.

#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use super::monitor::{Monitor, connect_monitor, endpoint, quit_cleanly, take_snapshot};
use super::{
    DUMP_FILE, EXACT_FILE, LiveOutcome, LiveRun, Outcome, RunSpec, TOP_EVERY, pump, pump_defmt,
    pump_exec_log, streamed_samples,
};
use crate::capture::live::{AppRtt, Reader};
use crate::exec::exact::{Counting, ExecLog};
use crate::interrupt::{INTERRUPTED, install_handler};

/// Run the firmware to its end, the timeout, or Ctrl-C.
pub fn run(opts: &RunSpec) -> Result<Outcome> {
    let work = tempfile::Builder::new()
        .prefix("cargo-sample-qemu-")
        .tempdir()
        .context("creating QEMU's working directory")?;
    let monitor = endpoint::Addr::new(work.path()).context("choosing QEMU's monitor address")?;
    let mut cmd = command(opts, work.path(), &monitor);
    let command: Vec<String> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    install_handler();
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", opts.qemu.display()))?;
    let bar = progress_bar(opts);
    let log = Arc::new(Mutex::new(Vec::<u8>::new()));
    let counted = Arc::new(AtomicU64::new(0));
    let pumps = start_pumps(opts, &mut child, &bar, &log, &counted);
    let mut w = Watch {
        opts,
        work: work.path(),
        monitor: &monitor,
        bar: &bar,
        started,
        counted: &counted,
        exec_log: matches!(opts.counting, Some(Counting::ExecLog { .. })),
        ended: Ended::default(),
        live: opts.live.as_ref().map(|spec| LiveRun {
            top: crate::capture::top::Top::new(spec.functions.clone())
                .with_tasks(spec.tasks.clone()),
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
        }),
    };
    let status = w.wait(&mut child)?;
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
    let output = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
    let (ended, live) = (w.ended, w.live);
    Ok(left_behind(
        opts,
        work.path(),
        counts_from_log,
        Outcome {
            exact: None,
            exact_contexts: None,
            budget_reached: ended.budget_reached,
            output,
            status,
            timed_out: ended.timed_out,
            interrupted: ended.interrupted,
            dump: std::fs::read(work.path().join(DUMP_FILE)).ok(),
            snapshot: ended.snapshot,
            core: ended.core,
            wall,
            command,
            live: live.map(|mut l| {
                l.out.live = l.reader.into_live();
                l.out
            }),
            pmu_in_memory: ended.in_memory,
            call_graph: None,
            exception_chains: None,
            before_start: None,
            graph_before_start: None,
            landings: None,
            lap_windows: None,
            stack: None,
            tasks: None,
        },
    ))
}

/// QEMU's command line: the machine, the monitor, semihosting, `-icount`, the runner's own
/// options, the image, and the exact counting asked for (the plugin and its files, or the
/// exec log).
fn command(opts: &RunSpec, work: &Path, monitor: &endpoint::Addr) -> Command {
    let mut cmd = Command::new(&opts.qemu);
    cmd.current_dir(work)
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
                graph.push_str(&format!(
                    ",handlers={},chains={}",
                    list.join(":"),
                    work.join(crate::dump::exact::CHAINS_FILE).display()
                ));
                if let Some([s, d, i]) = opts.lap_fns {
                    graph.push_str(&format!(
                        ",laps={},lapfns={s:x}:{d:x}:{i:x}",
                        work.join(crate::dump::laps::WINDOWS_FILE).display()
                    ));
                }
            }
            if let Some((limit, top)) = opts.stack {
                graph.push_str(&format!(
                    ",stack={limit:x}:{top:x},stackout={}",
                    work.join(crate::dump::exact::STACK_FILE).display()
                ));
            }
            if let Some(w) = &opts.tasks {
                let fns: Vec<String> = w.hooks.iter().map(|a| format!("{a:x}")).collect();
                let pools: Vec<String> = w
                    .pools
                    .iter()
                    .map(|(lo, hi)| format!("{lo:x}:{hi:x}"))
                    .collect();
                graph.push_str(&format!(
                    ",tasks={},taskfns={},taskpools={}",
                    work.join(crate::dump::exact::TASKS_FILE).display(),
                    fns.join(":"),
                    pools.join(":")
                ));
            }
            if let Some(at) = opts.start_marker {
                graph.push_str(&format!(
                    ",start={at:x},startout={}",
                    work.join(crate::dump::exact::BEFORE_START_FILE).display()
                ));
                if opts.call_graph.is_some() {
                    graph.push_str(&format!(
                        ",startgraph={}",
                        work.join(crate::dump::callgraph::BEFORE_START_FILE)
                            .display()
                    ));
                }
            }
            if opts.call_graph.is_some() {
                graph.push_str(&format!(
                    ",graph={}",
                    work.join(crate::dump::callgraph::FILE).display()
                ));
            }
            if opts.contexts.is_some() {
                graph.push_str(&format!(
                    ",contexts={},landings={}",
                    work.join(crate::dump::exact::CONTEXTS_FILE).display(),
                    work.join(crate::dump::exact::LANDINGS_FILE).display()
                ));
            }
            cmd.arg("-plugin").arg(format!(
                "{},out={}{budget}{graph}",
                path.display(),
                work.join(EXACT_FILE).display()
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
    cmd
}

/// The progress line: samples against those expected, or a spinner.
fn progress_bar(opts: &RunSpec) -> ProgressBar {
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
    bar
}

/// The threads that carry QEMU's standard output (the firmware's, or its defmt frames) and
/// standard error (or the exec log, counted as it comes) to the terminal and the log.
fn start_pumps(
    opts: &RunSpec,
    child: &mut Child,
    bar: &ProgressBar,
    log: &Arc<Mutex<Vec<u8>>>,
    counted: &Arc<AtomicU64>,
) -> Vec<JoinHandle<Option<ExecLog>>> {
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
        let start = opts.start_marker;
        pumps.push(std::thread::spawn(move || {
            if exec_log {
                Some(pump_exec_log(err, &bar, &log, &counted, start))
            } else {
                pump(Box::new(err), &bar, &log);
                None
            }
        }));
    }
    pumps
}

/// How the run was ended from this side, and what was saved on the way.
#[derive(Default)]
struct Ended {
    timed_out: bool,
    interrupted: bool,
    budget_reached: bool,
    /// The sampler's state and ring, saved when the run was cut short.
    snapshot: Option<(Vec<u8>, Vec<u8>)>,
    core: Option<crate::dump::fault::CoreState>,
    in_memory: Option<crate::capture::pmu::InMemory>,
}

/// The run being watched.
struct Watch<'a> {
    opts: &'a RunSpec,
    work: &'a Path,
    monitor: &'a endpoint::Addr,
    bar: &'a ProgressBar,
    started: Instant,
    /// Instructions the exec log counted so far.
    counted: &'a AtomicU64,
    exec_log: bool,
    ended: Ended,
    live: Option<LiveRun>,
}

/// What one look at the run found.
enum Turn {
    Going,
    /// The run is over; QEMU's exit status when it exited by itself.
    Over(Option<ExitStatus>),
}

impl Watch<'_> {
    /// Until QEMU exits or the run is ended from here; QEMU's exit status when it exited by
    /// itself.
    fn wait(&mut self, child: &mut Child) -> Result<Option<ExitStatus>> {
        let mut counts_monitor: Option<Monitor> = None;
        let mut polls = 0u32;
        let mut top_drawn = Instant::now();
        loop {
            if let Some((addr, run_id)) = self.opts.pmu_in_memory
                && let Turn::Over(s) = self.pmu_counts(child, &mut counts_monitor, addr, run_id)
            {
                return Ok(s);
            }
            if let Some(status) = child.try_wait().context("waiting for QEMU")? {
                if let Some(l) = &mut self.live
                    && l.reader.live().is_some_and(|x| !x.stopped())
                {
                    l.out.unread_tail = true;
                }
                return Ok(Some(status));
            }
            if self.live.is_some() {
                if let Turn::Over(s) = self.live_step(child, &mut top_drawn) {
                    return Ok(s);
                }
                continue;
            }
            if let Turn::Over(s) = self.cut(child) {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(10));
            polls += 1;
            if polls.is_multiple_of(20) {
                self.show_progress();
            }
        }
    }

    /// PMU counts the firmware leaves in memory: once written, QEMU is stopped.
    fn pmu_counts(
        &mut self,
        child: &mut Child,
        counts_monitor: &mut Option<Monitor>,
        addr: u32,
        run_id: u32,
    ) -> Turn {
        if child.try_wait().ok().flatten().is_some() {
            return Turn::Going;
        }
        if counts_monitor.is_none() {
            *counts_monitor = connect_monitor(self.monitor, self.work);
        }
        let Some(m) = counts_monitor.as_mut() else {
            return Turn::Going;
        };
        match crate::capture::pmu::read_in_memory(m, addr, run_id) {
            Ok(Some(c)) => {
                // The firmware idles once its counts are written: stop it (the monitor takes
                // one connection at a time).
                self.ended.in_memory = Some(c);
                drop(counts_monitor.take());
                quit_cleanly(self.monitor, child);
                let _ = child.kill();
                Turn::Over(child.wait().ok())
            }
            Ok(None) => Turn::Going,
            // QEMU going away mid-read (the firmware ended some other way): its exit is seen
            // next turn; otherwise connect again.
            Err(_) => {
                drop(counts_monitor.take());
                Turn::Going
            }
        }
    }

    /// One read of a live run, and the end of it when the sampler stopped, the duration
    /// passed, the timeout came or Ctrl-C was pressed.
    fn live_step(&mut self, child: &mut Child, top_drawn: &mut Instant) -> Turn {
        let (opts, bar, started) = (self.opts, self.bar, self.started);
        let Some(l) = self.live.as_mut() else {
            return Turn::Going;
        };
        let over = l.spec.duration.is_some_and(|d| started.elapsed() >= d);
        let cut = INTERRUPTED.load(Ordering::SeqCst) || started.elapsed() >= opts.timeout;
        let stepped = l.step(self.monitor);
        // The firmware's defmt log, as it arrives.
        for line in l.reader.take_log_lines() {
            crate::term::line_above(bar, &line);
        }
        match stepped {
            Ok(done) => {
                if let Some(x) = l.reader.live() {
                    bar.set_position(x.taken());
                    // The top view, twice a second.
                    if top_drawn.elapsed() >= TOP_EVERY {
                        *top_drawn = Instant::now();
                        bar.set_message(l.top.table(&opts.label, x));
                    }
                }
                if done || over || cut {
                    l.finish();
                    l.out.duration_reached = over && !done;
                    self.ended.timed_out = !done && !over && started.elapsed() >= opts.timeout;
                    self.ended.interrupted = !done && INTERRUPTED.load(Ordering::SeqCst);
                    // The monitor takes one connection at a time.
                    l.monitor = None;
                    quit_cleanly(self.monitor, child);
                    let _ = child.kill();
                    let status = child.wait().ok();
                    return Turn::Over(if done { status } else { None });
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
                    return Turn::Over(Some(status));
                }
                l.out.error = Some(format!("{e:#}"));
                let _ = child.kill();
                let _ = child.wait();
                return Turn::Over(None);
            }
        }
        std::thread::sleep(l.spec.interval);
        Turn::Going
    }

    /// The exec log's budget, the timeout or Ctrl-C: stop QEMU, saving what the firmware holds
    /// (and, with the plugin, the counts so far) first.
    fn cut(&mut self, child: &mut Child) -> Turn {
        let opts = self.opts;
        if self.exec_log
            && opts
                .budget
                .is_some_and(|b| self.counted.load(Ordering::Relaxed) >= b)
        {
            // The exec log has no budget of its own: stop QEMU from here.
            self.ended.budget_reached = true;
            let _ = child.kill();
            return Turn::Over(child.wait().ok());
        }
        let over = self.started.elapsed() >= opts.timeout;
        let stop = INTERRUPTED.load(Ordering::SeqCst);
        if !(over || stop) {
            return Turn::Going;
        }
        self.ended.timed_out = over;
        self.ended.interrupted = stop;
        if let Some(region) = opts.snapshot {
            self.bar
                .set_message("saving the samples held by the firmware");
            if let Ok((s, c)) = take_snapshot(self.monitor, self.work, region) {
                self.ended.snapshot = s;
                self.ended.core = c;
            }
        }
        if matches!(opts.counting, Some(Counting::Plugin { .. })) {
            // A clean quit lets the plugin write the counts gathered so far.
            self.bar.set_message("saving the exact counts so far");
            quit_cleanly(self.monitor, child);
        }
        let _ = child.kill();
        let _ = child.wait();
        Turn::Over(None)
    }

    /// Samples streamed so far, or instructions the exec log counted.
    fn show_progress(&self) {
        if self.opts.expected_samples.is_some() {
            self.bar
                .set_position(streamed_samples(&self.work.join(DUMP_FILE)));
        } else if self.exec_log {
            self.bar.set_message(format!(
                "{} ({:.1}e6 instructions counted)",
                self.opts.label,
                self.counted.load(Ordering::Relaxed) as f64 / 1e6
            ));
        }
    }
}

/// The files the plugin (or the exec log) left: exact counts, per exception, the call graph.
fn left_behind(
    opts: &RunSpec,
    work: &Path,
    counts_from_log: Option<ExecLog>,
    mut out: Outcome,
) -> Outcome {
    out.exact_contexts = counts_from_log
        .as_ref()
        .and_then(|log| log.context_counts())
        .map(|c| crate::dump::exact::encode_contexts(&c))
        .or_else(|| {
            opts.contexts
                .as_ref()
                .and_then(|_| std::fs::read(work.join(crate::dump::exact::CONTEXTS_FILE)).ok())
        });
    out.exact = match &counts_from_log {
        Some(log) => Some(crate::dump::exact::encode(&log.counts())),
        None => std::fs::read(work.join(EXACT_FILE)).ok(),
    };
    if matches!(opts.counting, Some(Counting::Plugin { .. })) {
        // The plugin exits by itself at the budget and says so beside its counts.
        out.budget_reached |= work.join(format!("{EXACT_FILE}.budget")).is_file();
    }
    out.call_graph = opts
        .call_graph
        .as_ref()
        .and_then(|_| std::fs::read(work.join(crate::dump::callgraph::FILE)).ok());
    out.lap_windows = opts
        .lap_fns
        .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
        .and_then(|_| std::fs::read(work.join(crate::dump::laps::WINDOWS_FILE)).ok());
    out.stack = opts
        .stack
        .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
        .and_then(|_| std::fs::read(work.join(crate::dump::exact::STACK_FILE)).ok());
    out.tasks = opts
        .tasks
        .as_ref()
        .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
        .and_then(|_| std::fs::read(work.join(crate::dump::exact::TASKS_FILE)).ok());
    out.landings = match &counts_from_log {
        Some(log) => log
            .landings()
            .map(|l| crate::dump::exact::encode_landings(&l)),
        None => opts
            .contexts
            .as_ref()
            .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
            .and_then(|_| std::fs::read(work.join(crate::dump::exact::LANDINGS_FILE)).ok()),
    };
    out.graph_before_start = opts
        .start_marker
        .and(opts.call_graph.as_ref())
        .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
        .and_then(|_| std::fs::read(work.join(crate::dump::callgraph::BEFORE_START_FILE)).ok());
    out.before_start = match &counts_from_log {
        Some(log) => log.before_start().map(|c| crate::dump::exact::encode(&c)),
        None => opts
            .start_marker
            .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
            .and_then(|_| std::fs::read(work.join(crate::dump::exact::BEFORE_START_FILE)).ok()),
    };
    out.exception_chains = opts
        .call_graph
        .as_ref()
        .or(opts.contexts.as_ref())
        .filter(|_| matches!(opts.counting, Some(Counting::Plugin { .. })))
        .and_then(|_| std::fs::read(work.join(crate::dump::exact::CHAINS_FILE)).ok());
    out
}
