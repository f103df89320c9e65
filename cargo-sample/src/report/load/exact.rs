//! A saved `--exact` run: the plugin's counts (and call graph) against the ELF.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::image::disasm;
use std::collections::HashMap;

use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::image::timing;
use crate::report::{self, ExactFacts};
use crate::runs::{self, RunMeta};
use crate::term;

/// The report of a saved `--exact` run.
pub fn load_exact_report(
    dir: &Path,
    meta: &RunMeta,
    opts: report::Options,
) -> Result<report::Report> {
    let mut report = counts_report(dir, meta, opts)?;
    report.stack = read_stack(dir)?;
    Ok(report)
}

/// How deep the main stack went, if the run measured it.
fn read_stack(dir: &Path) -> Result<Option<report::StackUse>> {
    let path = dir.join(crate::dump::exact::STACK_FILE);
    let Ok(bytes) = std::fs::read(&path) else {
        return Ok(None);
    };
    let (limit, top, lowest) = crate::dump::exact::parse_stack(&bytes)
        .with_context(|| format!("decoding {}", path.display()))?;
    Ok(Some(report::StackUse {
        bytes: lowest.map_or(0, |a| top - a),
        top,
        limit,
    }))
}

/// The views of the run's counts (and call graph).
fn counts_report(dir: &Path, meta: &RunMeta, opts: report::Options) -> Result<report::Report> {
    let (elf_path, elf_bytes) = runs::elf_of(dir)?;
    let counts_path = dir.join(crate::dump::exact::FILE);
    let bytes = std::fs::read(&counts_path).with_context(|| {
        format!(
            "reading {} (the run left no counts: see {})",
            counts_path.display(),
            dir.join(runs::OUTPUT).display()
        )
    })?;
    let counts = crate::dump::exact::parse(&bytes)
        .with_context(|| format!("decoding {}", counts_path.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    if !fw.has_symbols {
        term::warn("the ELF has no function symbols (stripped?): addresses cannot be named");
    } else if !fw.has_dwarf {
        term::note("the ELF has no DWARF: no source lines or inline frames");
    }
    let mut sym = Symbolizer::new(&elf_path, &elf_bytes, meta.workspace_root.as_deref())?;
    let facts = ExactFacts {
        firmware: meta.target_name.clone(),
        machine: format!("{} (QEMU)", meta.machine),
        counted_by: meta
            .counted_by
            .clone()
            .unwrap_or_else(|| "cargo-sample's QEMU plugin".into()),
        stop: match meta.state {
            runs::RunState::BudgetReached => format!(
                "stopped after the instruction budget (`--instructions {}`)",
                term::count(meta.instruction_budget.unwrap_or(0))
            ),
            runs::RunState::Finished => "the firmware ended the run".into(),
            runs::RunState::TimedOut => "cut short by `--timeout`".into(),
            runs::RunState::Interrupted => "cut short by Ctrl-C".into(),
            other => other.to_string(),
        },
        instruction_budget: meta.instruction_budget,
    };
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let (callers, callees) = (opts.callers.clone(), opts.callees.clone());
    let graph_path = dir.join(crate::dump::callgraph::FILE);
    let tree = match std::fs::read(&graph_path) {
        Ok(bytes) => Some(
            crate::dump::callgraph::parse(&bytes)
                .with_context(|| format!("decoding {}", graph_path.display()))?,
        ),
        Err(_) if callers.is_some() || callees.is_some() => bail!(
            "this run has no call graph (it was counted through QEMU's exec log, on ARMv8-A, or \
             by an older cargo-sample): `--callers`/`--callees` need a run of `--exact` with the \
             plugin on Cortex-M"
        ),
        Err(_) => None,
    };
    let vectors = elf::vectors(&elf_bytes);
    let Some(request) = opts.cycles.clone() else {
        let mut report = report::build_exact(&mut sym, code.as_mut(), facts, &counts, opts);
        if let Some(tree) = &tree {
            report::calls::apply(
                &mut report,
                tree,
                &sym,
                callers.as_deref(),
                callees.as_deref(),
            )?;
            report.tags = exception_rows(tree, &counts, None, &vectors, &mut sym, code.as_mut());
            report.diagnostics.extend(stray_returns(tree));
        }
        return Ok(report);
    };
    let chains = read_chains(dir);
    let (model, est) = estimate_run(
        &request,
        meta,
        code.as_ref(),
        &elf_bytes,
        &counts,
        chains.as_deref(),
    )?;
    // The same views in instructions, for the columns beside the cycles.
    let plain = report::build_exact(
        &mut sym,
        None,
        facts.clone(),
        &counts,
        report::Options {
            annotate: 0,
            callers: None,
            callees: None,
            cycles: None,
            ..opts.clone()
        },
    );
    let mut cyc: Vec<(u32, u64)> = est.per_pc.iter().map(|(&a, &c)| (a, c)).collect();
    cyc.sort_unstable();
    let mut report = report::build_exact(&mut sym, code.as_mut(), facts, &cyc, opts);
    join_cycles(&mut report, &plain, &est, &model, request.clock_hz);
    if let Some(tree) = &tree {
        let scaled = scale_tree(tree, &est, &report, &sym);
        report::calls::apply(
            &mut report,
            &scaled,
            &sym,
            callers.as_deref(),
            callees.as_deref(),
        )?;
        report.tags = exception_rows(
            tree,
            &counts,
            Some(InCycles {
                tree: &scaled,
                clock_hz: request.clock_hz,
                per_pc: &cyc,
            }),
            &vectors,
            &mut sym,
            code.as_mut(),
        );
        report.diagnostics.extend(stray_returns(tree));
        let name = |pc: u32| {
            sym.function_of(pc as u64)
                .unwrap_or(report::OUTSIDE)
                .to_owned()
        };
        let inc =
            crate::analysis::callgraph::inclusive(&crate::analysis::callgraph::stacks(tree, name));
        for row in &mut report.functions {
            row.inclusive_cycles = row.inclusive_instructions.take();
            row.inclusive_instructions = Some(inc.get(&row.name).map(|x| x.0).unwrap_or(0));
            if let (Some(hz), Some(c)) = (request.clock_hz, row.inclusive_cycles) {
                row.inclusive_microseconds = Some(microseconds(c, hz));
            }
        }
    }
    Ok(report)
}

/// The exact time of each exception and of thread mode (each instruction counted in the
/// innermost exception open when it ran, so the time an exception preempted is its own), with
/// its entries, from the call graph: the tags table of an exact run, named as `--tag xpsr` names
/// sampled ones (RTIC's tasks by name). With `cycles` (the graph in cycles, and `--clock`), in
/// estimated cycles with the instructions and CPI beside. Empty when only thread mode ran.
/// A note when returns went where no followed call returns: the graph around them may have
/// crossed from one stack of calls to another.
fn stray_returns(tree: &crate::dump::callgraph::Tree) -> Option<report::Diagnostic> {
    let calls: u64 = tree.nodes.iter().map(|n| n.calls).sum();
    (tree.stray_returns > 0).then(|| {
        report::Diagnostic::note(
            report::Finding::StrayReturns,
            format!(
                "{} of the run's returns ({} calls followed) went where no followed call \
                 returns: the call graph may be wrong around them (callers and inclusive time). \
                 An RTOS that starts a task on the stack a deleted one used, or switches tasks \
                 without writing PSP from a handler, is not followed",
                tree.stray_returns, calls
            ),
        )
    })
}

/// A run's counts in estimated cycles: the graph, the clock, and per address.
#[derive(Clone, Copy)]
struct InCycles<'a> {
    tree: &'a crate::dump::callgraph::Tree,
    clock_hz: Option<u32>,
    per_pc: &'a [(u32, u64)],
}

fn exception_rows(
    tree: &crate::dump::callgraph::Tree,
    counts: &[(u32, u64)],
    cycles: Option<InCycles<'_>>,
    vectors: &[(u32, u32)],
    sym: &mut Symbolizer,
    mut code: Option<&mut disasm::Code>,
) -> Vec<report::Row> {
    use crate::analysis::callgraph::per_exception;
    let instructions = per_exception(tree);
    if instructions.keys().all(|&h| h == 0) {
        return Vec::new();
    }
    let in_cycles = cycles.map(|c| per_exception(c.tree));
    let mut entries: HashMap<u32, u64> = HashMap::new();
    for n in tree.nodes.iter().filter(|n| n.exception) {
        *entries.entry(n.entry & !1).or_default() += n.calls;
    }
    // Each handler's exception number (the lowest that enters there), and how many share it.
    let number_of = |h: u32| -> (Option<u32>, usize) {
        let mut v: Vec<u32> = vectors
            .iter()
            .filter(|v| v.0 >= 2 && v.1 & !1 == h)
            .map(|v| v.0)
            .collect();
        v.sort_unstable();
        (v.first().copied(), v.len())
    };
    let numbers: Vec<u32> = instructions
        .keys()
        .filter_map(|&h| if h == 0 { Some(0) } else { number_of(h).0 })
        .collect();
    let names = super::names::tag_names(
        sampler_rt::wire::TAG_XPSR,
        &numbers,
        &[],
        vectors,
        sym,
        code.as_deref_mut(),
    );
    let count_of = |h: u32| match &in_cycles {
        Some(c) => c.get(&h).copied().unwrap_or(0),
        None => instructions[&h],
    };
    let total: u64 = instructions.keys().map(|&h| count_of(h)).sum();
    let mut rows: Vec<report::Row> = instructions
        .keys()
        .map(|&h| {
            let (number, sharing) = if h == 0 { (Some(0), 1) } else { number_of(h) };
            let name = match number {
                Some(n) if sharing == 1 => names
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| format!("exception {n}")),
                _ => format!(
                    "{} ({sharing} exceptions enter there)",
                    sym.function_of(u64::from(h)).unwrap_or("a handler")
                ),
            };
            let count = count_of(h);
            let n = instructions[&h];
            report::Row {
                name,
                count,
                instructions: Some(n),
                percent: 100.0 * count as f64 / total.max(1) as f64,
                cycles: in_cycles.as_ref().map(|_| count),
                cpi: in_cycles
                    .as_ref()
                    .filter(|_| n > 0)
                    .map(|_| count as f64 / n as f64),
                microseconds: cycles
                    .and_then(|c| c.clock_hz)
                    .map(|hz| microseconds(count, hz)),
                calls: (h != 0).then(|| entries.get(&h).copied().unwrap_or(0)),
                ..Default::default()
            }
        })
        .collect();
    if let Some(code) = code
        && crate::image::rtic::is_rtic(sym)
    {
        split_shared_dispatchers(&mut rows, tree, counts, cycles, vectors, sym, code);
    }
    split_thread_mode(&mut rows, tree, cycles, sym);
    rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    rows
}

/// Under an RTOS, thread mode is the tasks': its row becomes a row per task (`task
/// prvQueueSendTask (thread mode)`, `task` its entry function) and one for the code that ran
/// outside every task (`main` before the scheduler started).
fn split_thread_mode(
    rows: &mut Vec<report::Row>,
    tree: &crate::dump::callgraph::Tree,
    cycles: Option<InCycles<'_>>,
    sym: &Symbolizer,
) {
    use crate::analysis::callgraph::per_thread;
    let threads = per_thread(tree);
    if threads.is_empty() {
        return;
    }
    let Some(i) = rows
        .iter()
        .position(|r| r.calls.is_none() && r.name == "thread mode")
    else {
        return;
    };
    let whole = rows.remove(i);
    let in_cycles = cycles.map(|c| per_thread(c.tree));
    let mut entries: Vec<u32> = threads.keys().copied().collect();
    entries.sort_unstable();
    for entry in entries {
        let n = threads[&entry];
        let count = match &in_cycles {
            Some(c) => c.get(&entry).copied().unwrap_or(0),
            None => n,
        };
        let (name, task) = match entry {
            0 => ("thread mode (outside every task)".to_owned(), None),
            e => {
                let f = sym.function_of(u64::from(e)).unwrap_or(report::OUTSIDE);
                (format!("task {f} (thread mode)"), Some(f.to_owned()))
            }
        };
        rows.push(report::Row {
            task,
            ..part_of(&whole, name, count, n)
        });
    }
}

/// A row for part of `whole` (an exception's row split by task): `count` in the row's unit
/// (cycles where it is in cycles), `n` instructions; its share, CPI and time in proportion.
fn part_of(whole: &report::Row, name: String, count: u64, n: u64) -> report::Row {
    report::Row {
        name,
        count,
        instructions: Some(n),
        percent: whole.percent * count as f64 / whole.count.max(1) as f64,
        cycles: whole.cycles.map(|_| count),
        cpi: whole
            .cycles
            .filter(|_| n > 0)
            .map(|_| count as f64 / n as f64),
        microseconds: whole
            .microseconds
            .map(|us| us * count as f64 / whole.count.max(1) as f64),
        ..Default::default()
    }
}

/// RTIC v2: the row of a dispatcher that several software tasks share becomes a row per task
/// (`task`: its name) and one for the dispatcher's code that is no task's (RTIC's executor),
/// by the exact call graph's stacks and each address's inline chain, as sampled stacks split
/// it. A split that does not add up to the dispatcher's count leaves it whole.
fn split_shared_dispatchers(
    rows: &mut Vec<report::Row>,
    tree: &crate::dump::callgraph::Tree,
    counts: &[(u32, u64)],
    cycles: Option<InCycles<'_>>,
    vectors: &[(u32, u32)],
    sym: &mut Symbolizer,
    code: &mut disasm::Code,
) {
    let handlers: Vec<(u32, u32)> = vectors
        .iter()
        .filter(|v| v.0 >= 16 && v.1 > 1)
        .map(|v| (v.0, v.1 & !1))
        .collect();
    let mut done: Vec<u32> = Vec::new();
    for (n, handler) in handlers {
        if done.contains(&handler) {
            continue;
        }
        done.push(handler);
        let tasks = crate::image::rtic::tasks_of(sym, code, u64::from(handler));
        if tasks.software.len() < 2 || !tasks.hardware.is_empty() {
            continue;
        }
        let Some(i) = rows.iter().position(|r| {
            r.calls.is_some()
                && r.name.contains(&format!("IRQ {}", n - 16))
                && r.name.starts_with("software tasks ")
        }) else {
            continue;
        };
        let parts = super::exact_split_by_graph(sym, tree, handler, &tasks.software, Some(counts));
        let total = rows[i].instructions.unwrap_or(0);
        if parts.values().sum::<u64>() != total {
            continue;
        }
        let cycle_parts = cycles.map(|c| {
            super::exact_split_by_graph(sym, c.tree, handler, &tasks.software, Some(c.per_pc))
        });
        let whole = rows.remove(i);
        let interrupt = match sym.function_of(u64::from(handler)) {
            Some(f) => format!("{f}, IRQ {}", n - 16),
            None => format!("IRQ {}", n - 16),
        };
        let mut keys: Vec<Option<usize>> = parts.keys().copied().collect();
        keys.sort();
        for k in keys {
            let n = parts[&k];
            let count = match (&cycle_parts, whole.cycles) {
                (Some(c), Some(_)) => c.get(&k).copied().unwrap_or(0),
                _ => n,
            };
            let (name, task) = match k {
                Some(t) => (
                    format!(
                        "software task {} (dispatcher {interrupt})",
                        tasks.software[t]
                    ),
                    Some(tasks.software[t].clone()),
                ),
                None => (
                    format!("dispatcher {interrupt}: RTIC's executor (no task on the call stack)"),
                    None,
                ),
            };
            rows.push(report::Row {
                // A task's entries are its polls, which the graph does not count apart: the
                // dispatcher's entries stay on the executor's row.
                calls: k.is_none().then_some(whole.calls.unwrap_or(0)),
                task,
                ..part_of(&whole, name, count, n)
            });
        }
    }
}

/// The call graph in cycles: each block's instructions at the block's mean cycles, then each
/// function's blocks adjusted so that they add up to its cycles in the flat profile (the
/// blocks' means are over every context; the flat figure is per address), so that the graph's
/// self cycles are the table's and nothing inclusive falls below its self.
fn scale_tree(
    tree: &crate::dump::callgraph::Tree,
    est: &timing::Estimate,
    flat: &report::Report,
    sym: &Symbolizer,
) -> crate::dump::callgraph::Tree {
    let mut counts: Vec<(u32, u32, u64)> = tree
        .counts
        .iter()
        .map(|&(n, b, i)| (n, b, est.block_cycles(b, i)))
        .collect();
    let name = |pc: u32| sym.function_of(u64::from(pc)).unwrap_or(report::OUTSIDE);
    let mut by_fn: HashMap<&str, Vec<usize>> = HashMap::new();
    for (k, c) in counts.iter().enumerate() {
        by_fn.entry(name(c.1)).or_default().push(k);
    }
    for row in &flat.functions {
        let Some(ks) = by_fn.get(row.name.as_str()) else {
            continue;
        };
        let sum: u64 = ks.iter().map(|&k| counts[k].2).sum();
        if sum == 0 {
            continue;
        }
        let f = row.count as f64 / sum as f64;
        let mut got = 0u64;
        for &k in ks {
            counts[k].2 = (counts[k].2 as f64 * f).round() as u64;
            got += counts[k].2;
        }
        // What rounding left over goes to the function's largest block.
        if let Some(&k) = ks.iter().max_by_key(|&&k| counts[k].2) {
            counts[k].2 = (counts[k].2 + row.count).saturating_sub(got);
        }
    }
    crate::dump::callgraph::Tree {
        nodes: tree.nodes.clone(),
        counts,
        stray_returns: tree.stray_returns,
    }
}

/// The timing model for `--cycles`: the core asked for, else the one the run's machine has.
fn cycles_model(req: &report::CyclesRequest, meta: &RunMeta) -> Result<timing::Model> {
    let core = match req.core {
        Some(c) => {
            if !c.runs_on(&meta.cpu) {
                term::warn(format!(
                    "the run's core is a {}, which does not run all of a {c}'s instructions as \
                     that core would: its code is timed as the {c} times the same instructions",
                    meta.cpu
                ));
            }
            c
        }
        None => timing::Core::parse(&meta.cpu).with_context(|| {
            format!(
                "no timing model for the run's core `{}`: `--cycles` models the Cortex-M0, M0+, \
                 M3, M4, M7 and M33; name one with `--core`",
                meta.cpu
            )
        })?,
    };
    Ok(timing::Model {
        core,
        wait_states: req.wait_states,
        prefetch: req.prefetch,
        ram_code: Vec::new(),
    })
}

/// Rows in cycles get their instructions and CPI beside them; the report says the model.
/// `cycles` at `hz`, in microseconds.
fn microseconds(cycles: u64, hz: u32) -> f64 {
    cycles as f64 * 1e6 / f64::from(hz.max(1))
}

fn join_cycles(
    r: &mut report::Report,
    plain: &report::Report,
    est: &timing::Estimate,
    model: &timing::Model,
    clock_hz: Option<u32>,
) {
    let index = |rows: &[report::Row]| -> HashMap<(String, Option<String>), u64> {
        rows.iter()
            .map(|x| ((x.name.clone(), x.function.clone()), x.count))
            .collect()
    };
    for (rows, from) in [
        (&mut r.functions, index(&plain.functions)),
        (&mut r.inlined, index(&plain.inlined)),
        (&mut r.lines, index(&plain.lines)),
    ] {
        for row in rows.iter_mut() {
            let n = from
                .get(&(row.name.clone(), row.function.clone()))
                .copied()
                .unwrap_or(0);
            row.cycles = Some(row.count);
            row.instructions = Some(n);
            row.cpi = (n > 0).then(|| row.count as f64 / n as f64);
            row.microseconds = clock_hz.map(|hz| microseconds(row.count, hz));
        }
    }
    r.unit = "estimated cycles".into();
    r.instructions = Some(est.instructions);
    r.cycles = Some(est.cycles);
    r.timing = Some(timing_facts(model, est, clock_hz));
}

/// How the run's handlers were entered, if it recorded it; a damaged file is said and left
/// out (every entry is then charged in full).
pub(super) fn read_chains(dir: &std::path::Path) -> Option<Vec<crate::dump::exact::Entries>> {
    let path = dir.join(crate::dump::exact::CHAINS_FILE);
    let bytes = std::fs::read(&path).ok()?;
    match crate::dump::exact::parse_chains(&bytes) {
        Ok(c) => Some(c),
        Err(e) => {
            crate::term::warn(format!(
                "{}: {e:#}; every exception entry is charged a full entry and return",
                path.display()
            ));
            None
        }
    }
}

/// `--cycles` over a run's exact counts: the model asked for (with the code the ELF copies to
/// RAM at startup) and its estimate.
pub(super) fn estimate_run(
    req: &report::CyclesRequest,
    meta: &RunMeta,
    code: Option<&crate::image::disasm::Code>,
    elf_bytes: &[u8],
    counts: &[(u32, u64)],
    chains: Option<&[crate::dump::exact::Entries]>,
) -> Result<(timing::Model, timing::Estimate)> {
    let mut model = cycles_model(req, meta)?;
    model.ram_code = elf::copied_code(elf_bytes);
    let Some(code) = code else {
        bail!("`--cycles` reads the firmware's code, and this ELF's could not be decoded");
    };
    let mut per_pc: HashMap<u32, u64> = HashMap::new();
    for &(pc, n) in counts {
        *per_pc.entry(pc & !1).or_default() += n;
    }
    let spared = chains.map(|c| {
        c.iter()
            .map(|e| (e.handler & !1, e.tail_chained + e.late))
            .collect::<HashMap<u32, u64>>()
    });
    let est = timing::estimate(
        code,
        &per_pc,
        &elf::handler_entries(elf_bytes),
        spared.as_ref(),
        &model,
    );
    Ok((model, est))
}

/// What the report says of the estimate (the run's time too with `clock_hz`).
pub(super) fn timing_facts(
    model: &timing::Model,
    est: &timing::Estimate,
    clock_hz: Option<u32>,
) -> report::TimingFacts {
    report::TimingFacts {
        model: model.describe(),
        core: model.core.name().to_owned(),
        wait_states: model.wait_states,
        cpi: est.cpi(),
        conditional_branches: est.conditional.0,
        taken_branches: est.conditional.1,
        exceptions: est.exceptions,
        chained_exceptions: est.chained,
        caveats: est.caveats(model),
        clock_hz,
        seconds: clock_hz.map(|hz| microseconds(est.cycles, hz) / 1e6),
    }
}
