//! `cargo sample`: build, run in QEMU (or hand over to a board or a serial port), capture,
//! save, report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use sampler_rt::wire;

use super::board::{board_chip, capture_board};
use super::capture::{self, Image, QemuTarget, Run, choose_machine, note_live, project_meta};
use super::exact::{check_plugin_loaded, choose_counting};
use super::plan::{self, Place, Plan};
use super::saved::render_run;
use super::serial::capture_serial;
use super::settings::{Timer, names_at, pacer, resolve_timer};
use crate::capture::snapshot;
use crate::cli::RunArgs;
use crate::dump::{self};
use crate::exec::exact::Counting;
use crate::exec::qemu;
use crate::image::elf;
use crate::project::firmware;
use crate::project::{self, Project};
use crate::runs::{self, RunMeta};
use crate::term;

/// `cargo sample [args]`: capture, then print the report.
pub fn run(args: &RunArgs) -> Result<()> {
    if super::gate::wanted(args) {
        // Only lap runs counted exactly (`--laps --cycles`, `cargo sample bench`) pass here.
        super::gate::check(args)?;
    } else {
        super::saved::check_view(&args.view)?;
    }
    if args.view.cycles && !counts_every_instruction(args) {
        anyhow::bail!(
            "`--cycles` needs every instruction counted: with `--exact` (the profile in \
             estimated cycles), with `--truth` (the samples' shares turned into shares of \
             the cycles by each address's cycles per instruction), or with `--laps` (each \
             region's laps in estimated cycles)"
        );
    }
    let dir = capture(args)?;
    if super::gate::wanted(args) {
        return super::gate::run(args, &dir);
    }
    render_run(&dir, &args.view)
}

/// Whether the run counts every instruction in QEMU beside what the firmware records:
/// `--truth`, and `--laps --cycles` (the laps' code timed in cycles).
fn counts_every_instruction(args: &RunArgs) -> bool {
    args.truth || (args.laps && (args.view.cycles || args.bench))
}

/// Build, run and save a run; returns its directory (with a dump in it).
pub fn capture(args: &RunArgs) -> Result<PathBuf> {
    let p = project::discover(&crate::project::Selection::from(&args.cargo))?;
    if let Some(chip) = board_chip(args, &p)? {
        return capture_board(args, &p, &chip);
    }
    if args.board.serial.is_some() {
        return capture_serial(args, &p);
    }
    if args.board.method != crate::cli::Method::Timer {
        return super::board::hardware_method_in_qemu(args, &p);
    }
    capture_qemu(args, &p)
}

/// A sampled run in QEMU: the machine, the timer, the build, the plan, the run, what came back.
fn capture_qemu(args: &RunArgs, p: &Project) -> Result<PathBuf> {
    capture::preflight(args, p, true)?;
    let target = choose_machine(args, p)?;
    let (m, cpu) = (target.machine, target.cpu.clone());
    let qemu_path = qemu::locate(args.qemu.as_deref(), target.program.as_deref())?;
    let timer = resolve_timer(
        args.timer
            .as_ref()
            .unwrap_or(&crate::spec::TimerChoice::SysTick),
        m,
        &cpu,
    )?;
    plan::check_timer(args, &cpu, timer)?;
    let counting = if counts_every_instruction(args) {
        Some(choose_counting(
            args.truth_method,
            &qemu_path,
            &firmware::own_dir(p),
        )?)
    } else {
        None
    };
    const CALLS: &str = "`sampler_rt::start()`";
    let (img, timer, alignment) = match args.align {
        None => {
            let explicit = args.timer.is_some();
            let (img, timer) = super::pacing::build(p, args, m, timer, explicit, CALLS)?;
            (img, timer, None)
        }
        Some(n) => {
            let (img, a) = capture::build_aligned(p, &args.cargo, n, CALLS)?;
            (img, timer, Some(a))
        }
    };
    let state = img.fw.state.context("no sampler state")?;
    if !args.laps {
        crate::image::wiring::check(&img.bytes, pacer(&img.fw, timer))?;
    }
    if let Some(w) = crate::image::wiring::stack_room(&img.bytes) {
        term::warn(w);
    }
    let place = Place::Qemu {
        machine: m,
        cpu: &cpu,
    };
    let plan = plan::plan(args, place, timer, &img.bytes, &img.fw)?;
    for w in &plan.warnings {
        term::warn(w);
    }
    let meta = plan.meta(RunMeta {
        machine: m.name.to_owned(),
        cpu: cpu.clone(),
        align: alignment.as_ref().map(|a| a.to),
        code_growth: alignment.as_ref().map(|a| (a.plain_bytes, a.grown_bytes)),
        unaligned_functions: alignment.map(|a| a.unaligned).unwrap_or_default(),
        pacer: match timer {
            Timer::Device { known: Some(t), .. } => Some(t.describe()),
            _ => None,
        },
        bench: args.bench,
        ..project_meta(p, &crate::project::Selection::from(&args.cargo))
    });
    let mut run = Run::start(p, &img.bytes, Some(&plan.config), meta)?;
    term::status(
        "Running",
        if args.laps {
            format!("{} in QEMU {} (lap timing)", p.target_name, m.name)
        } else {
            format!(
                "{} in QEMU {} ({})",
                p.target_name,
                m.name,
                plan.describe(args.duration)
            )
        },
    );
    if !plan.live && elf::symbol_address(&img.bytes, "_SEGGER_RTT").is_some() {
        term::note(
            "this firmware writes to RTT (`defmt-rtt`, `rtt-target`), which only a reader empties: \
             add `--live` to have its output (and defmt log, decoded) while sampling",
        );
    }
    let spec = Spec {
        args,
        p,
        target: &target,
        img: &img,
        plan: &plan,
        state: state.0,
        counting: counting.as_ref(),
    };
    let outcome = qemu::run(&spec.run_spec(qemu_path, &run.dir))?;
    run.meta.wall_seconds = outcome.wall.as_secs_f64();
    run.meta.qemu_command = outcome.command.clone();
    run.meta.exit_code = outcome.status.and_then(|s| s.code());
    run.meta.counted_by = counting.as_ref().map(Counting::describe);
    check_plugin_loaded(&outcome, counting.as_ref(), &run.dir)?;
    keep(&mut run, &outcome, &img, counts_every_instruction(args))?;
    if plan.live
        && elf::symbol_address(&img.bytes, "_SEGGER_RTT").is_some()
        && !rtt_arrived(&run.dir)
    {
        term::note(
            "nothing arrived over RTT during the run: the firmware wrote nothing to its RTT \
             channels. defmt logs only `error` by default: set `DEFMT_LOG` (`info`, `debug`) \
             where the crate is built, such as `[env] DEFMT_LOG = \"info\"` in \
             `.cargo/config.toml`; `rtt-target` sends only what `rprintln!` writes",
        );
    }
    run.meta.core = outcome.core;
    capture::warn_qemu_end(&outcome, args.timeout, "the samples taken");
    let state = outcome.state();
    let mean_period = plan.mean_period();
    run.finish(state, runs::DUMP, |dir| {
        why_no_samples(&outcome, mean_period, dir)
    })
}

/// Whether the run's RTT reader kept anything of the application's channels (`rtt-K.bin`,
/// written only when bytes arrive).
fn rtt_arrived(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("rtt-") && name.ends_with(".bin")
        })
    })
}

/// What a QEMU run of a sampled image needs to be set up.
struct Spec<'a> {
    args: &'a RunArgs,
    p: &'a Project,
    target: &'a QemuTarget,
    img: &'a Image,
    plan: &'a Plan,
    /// The sampler's state block.
    state: u64,
    counting: Option<&'a Counting>,
}

impl Spec<'_> {
    /// QEMU's run of the image saved in `dir`.
    fn run_spec(&self, qemu: PathBuf, dir: &Path) -> qemu::RunSpec {
        let (args, img, m) = (self.args, self.img, self.target.machine);
        let elf_bytes = &img.bytes;
        let plugin = matches!(self.counting, Some(Counting::Plugin { .. }));
        qemu::RunSpec {
            qemu,
            machine: self.target.machine_arg.clone(),
            extra_args: self.target.extra.clone(),
            cpu: self.target.cpu.clone(),
            kernel: dir.join(runs::LOADED_ELF),
            icount_shift: self.plan.icount_shift,
            timeout: Duration::from_secs(args.timeout),
            label: format!("sampling {} in QEMU {}", self.p.target_name, m.name),
            snapshot: (!self.plan.live).then_some(qemu::MemoryBlock {
                addr: self.state,
                len: wire::STATE_LEN as u64,
            }),
            output_log: Some(dir.join(runs::OUTPUT)),
            defmt_stdout: crate::runs::defmt_on_stdout(elf_bytes, dir),
            expected_samples: (self.plan.requested > 0 && !args.laps)
                .then_some(u64::from(self.plan.requested)),
            budget: None,
            counting: self.counting.cloned(),
            live: self.plan.live.then(|| qemu::LiveSpec {
                state_addr: self.state as u32,
                duration: args.duration,
                interval: Duration::from_millis(args.poll_interval.into()),
                app_rtt: elf::symbol_address(elf_bytes, "_SEGGER_RTT")
                    .map(|a| (a as u32, dir.to_path_buf())),
                names: names_at(elf_bytes, &img.fw),
                functions: crate::capture::top::functions_of(elf_bytes),
                tasks: elf::task_pools(elf_bytes),
            }),
            pmu_in_memory: None,
            // With stacks, `--truth` follows the calls too: exact inclusive shares and callers;
            // with `--cycles`, the code each lap region ran is found in the graph.
            call_graph: ((args.stacks.is_some() || args.view.cycles || args.bench) && plugin).then(
                || {
                    if img.fw.aarch64 {
                        // The IRQ entries (current level, SPx) of the sampler's vector tables.
                        ["sampler_rt_vectors", "sampler_rt_vectors_hist"]
                            .iter()
                            .filter_map(|v| elf::symbol_address(elf_bytes, v))
                            .map(|a| a as u32 + 0x280)
                            .collect()
                    } else {
                        elf::handler_entries(elf_bytes)
                    }
                },
            ),
            // `--truth` tells the time the sampler could see from the time of handlers it cannot
            // preempt: each exception's instructions per address.
            contexts: (args.truth && !img.fw.aarch64 && plugin)
                .then(|| elf::handler_entries(elf_bytes)),
            // `--truth` compares the samples with the time after the sampler started.
            start_marker: args
                .truth
                .then(|| elf::symbol_address(elf_bytes, "sampler_rt_sampling_starts"))
                .flatten()
                .map(|a| a as u32 & !1),
            // With `--cycles`: the windows of `start()` guards and iterations, timed too.
            lap_fns: ((args.view.cycles || args.bench) && plugin && !img.fw.aarch64)
                .then(|| elf::lap_functions(elf_bytes))
                .flatten(),
            // The sampler's own frames would count: exact runs only.
            stack: None,
            // With sampler-rt's Embassy statistics, `--truth` times each task's polls exactly.
            tasks: (args.truth && plugin && !img.fw.aarch64)
                .then(|| elf::task_hooks(elf_bytes))
                .flatten()
                .map(|hooks| qemu::TaskWatch {
                    hooks,
                    pools: elf::task_pools(elf_bytes)
                        .into_iter()
                        .map(|(_, lo, hi)| (lo, hi))
                        .collect(),
                }),
        }
    }
}

/// Keep what the run left, raw first (exact counts, the call graph, the stream, the state and
/// ring of a run cut short), then the dump the report reads: the firmware's own, the one read
/// live, or one joined from the pieces. Records where the samples came from.
fn keep(run: &mut Run, outcome: &qemu::Outcome, img: &Image, truth: bool) -> Result<()> {
    if let Some(counts) = &outcome.exact {
        run.keep(crate::dump::exact::FILE, counts)?;
        if let Some(c) = &outcome.exact_contexts {
            run.keep(crate::dump::exact::CONTEXTS_FILE, c)?;
        }
        if let Some(graph) = &outcome.call_graph {
            run.keep(crate::dump::callgraph::FILE, graph)?;
        }
        if let Some(c) = &outcome.exception_chains {
            run.keep(crate::dump::exact::CHAINS_FILE, c)?;
        }
        if let Some(w) = &outcome.lap_windows {
            run.keep(crate::dump::laps::WINDOWS_FILE, w)?;
        }
        if let Some(t) = &outcome.tasks {
            run.keep(crate::dump::exact::TASKS_FILE, t)?;
        }
        if let Some(l) = &outcome.landings {
            run.keep(crate::dump::exact::LANDINGS_FILE, l)?;
        }
        if let Some(g) = &outcome.graph_before_start {
            run.keep(crate::dump::callgraph::BEFORE_START_FILE, g)?;
        }
        if let Some(b) = &outcome.before_start {
            run.keep(crate::dump::exact::BEFORE_START_FILE, b)?;
        }
    } else if truth {
        term::warn("QEMU left no exact counts (it did not exit normally): no truth column");
    }
    let code = || elf::fingerprint(&img.bytes, img.fw.text);
    let mut source = runs::Source::Dump;
    if let Some(lo) = &outcome.live {
        source = runs::Source::Live;
        if let Some(l) = &lo.live {
            let stop = if l.stopped() {
                l.state.stop
            } else {
                wire::STOP_SNAPSHOT
            };
            let d = l.to_dump(code(), stop);
            run.keep(runs::DUMP, &dump::encode(&d))?;
            note_live(l, lo);
        }
        if let Some(e) = &lo.error {
            term::warn(format!("reading the target stopped: {e}"));
        }
    }
    let streamed = outcome.dump.as_deref().map(dump::decode_partial);
    let finished_dump = streamed
        .as_ref()
        .is_some_and(|(d, e)| e.is_none() && d.complete);
    if outcome.live.is_some() {
        // Read live: the dump is written above.
    } else if let (Some(bytes), true) = (&outcome.dump, finished_dump) {
        run.keep(runs::DUMP, bytes)?;
    } else if let Some((state_bytes, ring)) = &outcome.snapshot {
        // Cut short: the chunks the firmware streamed so far, then the newer samples still in
        // its ring. All raw pieces are kept beside the joined dump.
        if let Some(bytes) = &outcome.dump {
            run.keep(runs::STREAM, bytes)?;
        }
        run.keep(runs::STATE, state_bytes)?;
        run.keep(runs::RING, ring)?;
        let sent = streamed.as_ref().map(|(d, _)| d);
        if let Some(d) = snapshot::to_dump(state_bytes, ring, code(), sent) {
            run.keep(runs::DUMP, &dump::encode(&d))?;
            source = runs::Source::Snapshot;
        }
    } else if let Some(bytes) = &outcome.dump {
        // Incomplete and nothing to add: reported as far as it goes.
        run.keep(runs::DUMP, bytes)?;
    }
    run.meta.source = Some(source);
    Ok(())
}

/// Why a run left no samples, and where its pieces are.
fn why_no_samples(outcome: &qemu::Outcome, mean_period: f64, dir: &Path) -> String {
    // With exact counts, how long it ran against the period says why.
    let ran = outcome
        .exact
        .as_deref()
        .and_then(|b| crate::dump::exact::parse(b).ok())
        .map(|c| c.iter().map(|x| x.1).sum::<u64>());
    if let Some(n) = ran {
        term::note(format!(
            "the firmware ran {n} instructions (counted exactly), {:.1} mean sampling periods \
             of {mean_period:.0}",
            n as f64 / mean_period
        ));
    }
    let why = match outcome.status {
        Some(status) => format!(
            "the firmware ended ({}) without sending samples. sampler-rt sends them when the \
             sample limit is reached, or at `sampler_rt::exit(code)` / `sampler_rt::flush()`; a \
             firmware that ends by its own means (semihosting's `debug::exit`, \
             `panic-semihosting`) takes them with it. With the sampling feature on, end it with \
             `sampler_rt::exit(code)` (or call `sampler_rt::flush()` just before), or take fewer \
             samples (`--samples`) so that the limit ends the run first, or run with `--live` \
             (the host reads the samples while the firmware runs, all but the last poll's). \
             (And samples are only taken after `sampler_rt::start()`.)",
            status
                .code()
                .map(|c| format!("exit code {c}"))
                .unwrap_or_else(|| "killed".into())
        ),
        None => "no samples could be recovered: the sampler had not started".to_owned(),
    };
    format!(
        "{why}; firmware output and the run are kept in {}",
        dir.display()
    )
}
