//! `cargo sample --exact` and the exact counts behind `--truth`: every instruction counted by
//! QEMU (the plugin, or its exec log).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::capture::choose_machine;
use super::capture::{self, Run, project_meta};
use super::saved::render_run;
use crate::cli::{RunArgs, TruthMethod};
use crate::exec::exact;
use crate::exec::exact::{Counting, PluginApi};
use crate::exec::qemu;
use crate::project::firmware;
use crate::project::{self};
use crate::runs::{self, RunMeta};
use crate::term;

/// How to count every executed instruction with this QEMU.
pub fn choose_counting(method: TruthMethod, qemu: &Path, own: &Path) -> Result<Counting> {
    let probe = qemu::inspect(qemu)?;
    let exec_log = || Counting::ExecLog {
        one_insn_flag: match probe.version {
            Some(v) if !v.has_one_insn_per_tb() => vec!["-singlestep".into()],
            _ => vec!["-accel".into(), "tcg,one-insn-per-tb=on".into()],
        },
    };
    // `CARGO_SAMPLE_PLUGIN_API=1|2` overrides the choice by version (to try a QEMU whose
    // version string is unusual, or to see how a QEMU refuses the other generation).
    let api = match std::env::var("CARGO_SAMPLE_PLUGIN_API").as_deref() {
        Ok("1") => Some(PluginApi::V1),
        Ok("2") => Some(PluginApi::V2),
        _ => probe.version.and_then(PluginApi::for_qemu),
    };
    match method {
        TruthMethod::ExecLog => Ok(exec_log()),
        TruthMethod::Plugin | TruthMethod::Auto if probe.plugins && api.is_some() => {
            let api = api.unwrap_or(PluginApi::V2);
            Ok(Counting::Plugin {
                path: exact::install_plugin(own, api)?,
                api,
            })
        }
        TruthMethod::Plugin => {
            let what = match probe.version {
                Some(v) if probe.plugins => format!("QEMU {v} is older than any plugin API"),
                Some(v) => format!("QEMU {v} was built without TCG plugin support"),
                None => format!("{} did not tell its version", qemu.display()),
            };
            bail!(
                "{what}; the exact-count plugin runs in {}. Use `--truth-method exec-log` (exact, about \
                 500 times slower) or a QEMU with plugins",
                exact::SUPPORTED
            )
        }
        TruthMethod::Auto => {
            term::warn(format!(
                "{} has no TCG plugin support: counting instructions through its exec log instead \
                 (exact, but about a million instructions per second)",
                qemu.display()
            ));
            Ok(exec_log())
        }
    }
}

/// When QEMU refused the plugin, say which QEMU versions it supports.
pub(crate) fn check_plugin_loaded(
    outcome: &qemu::Outcome,
    counting: Option<&Counting>,
    dir: &Path,
) -> Result<()> {
    let Some(Counting::Plugin { api, .. }) = counting else {
        return Ok(());
    };
    if outcome.status.is_some_and(|s| s.success()) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&outcome.output);
    if let Some(line) = text.lines().find(|l| l.contains("Could not load plugin")) {
        bail!(
            "QEMU refused cargo-sample's exact-count plugin (API {}): {}\nThe plugin runs in {}. \
             Run again with `--truth-method exec-log` (exact, about 500 times slower). The run is kept in {}",
            api.number(),
            line.trim(),
            exact::SUPPORTED,
            dir.display()
        );
    }
    Ok(())
}

/// `cargo sample --exact`: no sampler; every executed instruction counted, then reported.
pub fn run_exact(args: &RunArgs) -> Result<()> {
    if let Some(tag) = &args.tag {
        bail!(
            "`--tag {tag}` marks each sample with what the firmware was doing; an `--exact` run \
             has no samples: its exception table already gives the time of each exception, \
             RTIC task and RTOS task (each task a stack of calls of its own, found where the \
             RTOS switches the process stack). Sample with `--tag` (and `--truth` for the \
             exact shares beside)"
        );
    }
    if super::gate::wanted(args) {
        super::gate::check(args)?;
        let dir = capture_exact(args)?;
        return super::gate::run(args, &dir);
    }
    super::saved::check_view(&args.view)?;
    let dir = capture_exact(args)?;
    render_run(&dir, &args.view)
}

/// Build without the sampling feature, run with exact counting, save; returns the run directory.
pub fn capture_exact(args: &RunArgs) -> Result<PathBuf> {
    let sel = crate::project::Selection::from(&args.cargo);
    let p = match &args.elf {
        Some(elf) => {
            // `requires = "machine"`: the machine says what code the ELF holds.
            let name = args.machine.as_deref().unwrap_or_default();
            let m = crate::exec::machine::find(name.split(',').next().unwrap_or(name))
                .with_context(|| {
                    format!(
                        "QEMU machine `{name}` is not one cargo-sample knows the clocks of (known: {})",
                        crate::exec::machine::names()
                    )
                })?;
            project::prebuilt(elf, m.targets.first().copied().unwrap_or(""), &sel)?
        }
        None => project::discover(&sel)?,
    };
    let target = choose_machine(args, &p)?;
    if args.elf.is_none() {
        capture::preflight(args, &p, false)?;
    }
    let (m, cpu) = (target.machine, target.cpu.clone());
    let qemu_path = qemu::locate(args.qemu.as_deref(), target.program.as_deref())?;
    let own = firmware::own_dir(&p);
    let counting = choose_counting(args.truth_method, &qemu_path, &own)?;
    let shift = args
        .icount_shift
        .unwrap_or_else(|| m.default_icount_shift());
    // The program as it is: the sampler would only add its own instructions.
    let img = match &args.elf {
        Some(elf) => capture::read_prebuilt(elf)?,
        None => capture::build(&p, &args.cargo, capture::Runtime::Off)?,
    };
    let budget = args.instructions.instructions(shift);
    let meta = RunMeta {
        machine: m.name.to_owned(),
        cpu: cpu.clone(),
        timer_hz: m.systick_hz,
        unit: "instructions".into(),
        units_per_tick: m.instructions_per_tick(shift),
        icount_shift: shift,
        mode: runs::Mode::Exact,
        instruction_budget: Some(budget),
        counted_by: Some(counting.describe()),
        ..project_meta(&p, &sel)
    };
    let mut run = Run::start(&p, &img.bytes, None, meta)?;
    term::status(
        "Counting",
        format!(
            "every instruction of {} in QEMU {} (up to {} instructions, with {})",
            p.target_name,
            m.name,
            crate::term::count(budget),
            counting.describe()
        ),
    );
    let outcome = qemu::run(&qemu::RunSpec {
        qemu: qemu_path,
        machine: target.machine_arg.clone(),
        extra_args: target.extra.clone(),
        cpu,
        kernel: run.dir.join(runs::ELF),
        icount_shift: shift,
        timeout: Duration::from_secs(args.timeout),
        label: format!("counting {} in QEMU {}", p.target_name, m.name),
        snapshot: None,
        output_log: Some(run.dir.join(runs::OUTPUT)),
        defmt_stdout: crate::runs::defmt_on_stdout(&img.bytes, &run.dir),
        expected_samples: None,
        budget: Some(budget),
        counting: Some(counting.clone()),
        live: None,
        pmu_in_memory: None,
        // The plugin follows calls too: the exact call graph (the exec log cannot; on
        // ARMv8-A exceptions do not enter through a table of handler addresses, which the
        // plugin's rules need, so not there yet).
        call_graph: (matches!(counting, Counting::Plugin { .. }) && !img.fw.aarch64)
            .then(|| crate::image::elf::handler_entries(&img.bytes)),
        contexts: None,
        start_marker: None,
        lap_fns: None,
        // An exact run builds without the sampler: no Embassy hooks to time.
        tasks: None,
        // The deepest the main stack went (the sampler does not run in an exact run).
        stack: (matches!(counting, Counting::Plugin { .. }) && !img.fw.aarch64)
            .then(|| crate::image::elf::main_stack(&img.bytes))
            .flatten(),
    })?;
    run.meta.wall_seconds = outcome.wall.as_secs_f64();
    run.meta.qemu_command = outcome.command.clone();
    run.meta.exit_code = outcome.status.and_then(|s| s.code());
    check_plugin_loaded(&outcome, Some(&counting), &run.dir)?;
    if let Some(counts) = &outcome.exact {
        run.keep(crate::dump::exact::FILE, counts)?;
    }
    if let Some(graph) = &outcome.call_graph {
        run.keep(crate::dump::callgraph::FILE, graph)?;
    }
    if let Some(c) = &outcome.exact_contexts {
        run.keep(crate::dump::exact::CONTEXTS_FILE, c)?;
    }
    if let Some(c) = &outcome.exception_chains {
        run.keep(crate::dump::exact::CHAINS_FILE, c)?;
    }
    if let Some(s) = &outcome.stack {
        run.keep(crate::dump::exact::STACK_FILE, s)?;
    }
    capture::warn_qemu_end(&outcome, args.timeout, "the instructions counted");
    run.finish(outcome.state(), crate::dump::exact::FILE, |dir| {
        format!(
            "QEMU left no instruction counts; its output and the run are kept in {}",
            dir.display()
        )
    })
}
