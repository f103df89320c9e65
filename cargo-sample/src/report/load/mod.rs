//! A saved run read back into a report: its metadata says what kind of run it was, its dump
//! (or exact counts) and the ELF saved beside it say what ran. Each step below adds one thing
//! the run kept: held-off samples, exact counts, the SWO trace, the timeline, stacks, a fault,
//! laps.

mod exact;
mod names;
mod run;

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use sampler_rt::wire;

pub use exact::load_exact_report;
pub use names::{Urgent, tag_names, unpreemptable, urgent};
pub use run::{facts_of, load_dump, verify_fingerprint};

use crate::dump::{self, Dump};
use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::report::{self, Report};
use crate::runs::{self, Mode, RunMeta};
use crate::term;

/// The report of a saved run, whatever kind.
pub fn load_report(dir: &Path, opts: report::Options) -> Result<Report> {
    let meta = runs::load_meta(dir)?;
    if meta.mode == Mode::Exact {
        return load_exact_report(dir, &meta, opts);
    }
    let (elf_path, elf_bytes) = runs::elf_of(dir)?;
    let mut dump = load_dump(dir)?;
    let (callers, callees) = (opts.callers.clone(), opts.callees.clone());
    if (callers.is_some() || callees.is_some()) && dump.stacks.is_empty() {
        bail!(
            "`--callers`/`--callees` need call stacks, which this run did not keep: sample with \
             `--stacks` (each sample's stack, unwound on the host), or run with `--exact` (QEMU \
             follows every call and counts the instructions below it)"
        );
    }
    verify_fingerprint(&elf_bytes, &dump)?;
    let fw = elf::inspect(&elf_bytes)?;
    if !fw.has_symbols {
        term::warn("the ELF has no function symbols (stripped?): samples cannot be named");
    } else if !fw.has_dwarf {
        term::note("the ELF has no DWARF: no source lines or inline frames");
    }
    let mut sym = Symbolizer::new(&elf_path, &elf_bytes, meta.workspace_root.as_deref())?;
    let mut exact = match std::fs::read(dir.join(dump::exact::FILE)) {
        Ok(bytes) => Some(dump::exact::parse(&bytes)?),
        Err(_) => None,
    };
    // Like with like: what ran before the sampler started is no sample's.
    let mut unseen = report::unseen::Unseen::default();
    if let Some(e) = exact.as_mut()
        && let Ok(bytes) = std::fs::read(dir.join(dump::exact::BEFORE_START_FILE))
    {
        let before = dump::exact::parse(&bytes)?;
        unseen.before_start =
            report::unseen::subtract_before(e, &before, |pc| sym.is_sampler(u64::from(pc)));
    }
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let mut at = Loading {
        dir,
        meta: &meta,
        elf_bytes: &elf_bytes,
        vectors: elf::vectors(&elf_bytes),
        sym: &mut sym,
        code: code.as_mut(),
    };
    let (mut samples, hidden) = match &dump.hist {
        Some(h) => at.bins(&dump, h, opts.bin_split),
        None => at.ring(&dump, exact.as_deref())?,
    };
    // Like with like: the instructions of the handlers the sampler could not see go to the
    // held-off row in the exact counts too; where no sample could be told held off, they
    // leave the comparison (the samples due in them landed in the code they interrupted,
    // which is then compared with the time the sampler could see).
    if let (Some(hidden), Some(e)) = (&hidden, exact.as_mut())
        && let Ok(bytes) = std::fs::read(dir.join(dump::exact::CONTEXTS_FILE))
    {
        let contexts = dump::exact::contexts_by_exception(&bytes, &at.vectors, e)?;
        let sym = &*at.sym;
        let sampler = |pc: u32| sym.is_sampler(u64::from(pc));
        if hidden.marked {
            report::held_off::split_exact(e, &contexts, &hidden.exceptions, sampler);
        } else {
            let landings = std::fs::read(dir.join(dump::exact::LANDINGS_FILE))
                .ok()
                .map(|b| dump::exact::landings_by_exception(&b, &at.vectors))
                .transpose()?;
            for (&exception, name) in hidden.exceptions.iter().zip(&hidden.labels) {
                let n = report::unseen::drop_hidden(e, &contexts, &[exception], sampler);
                samples.exact_by_tag.remove(&exception);
                let landed = match &landings {
                    Some(l) => {
                        let (_, by_context) = report::unseen::land_hidden(e, l, &[exception]);
                        if !samples.exact_by_tag.is_empty() {
                            for (context, m) in by_context {
                                *samples.exact_by_tag.entry(context).or_default() += m;
                            }
                        }
                        true
                    }
                    None => false,
                };
                if n > 0 {
                    unseen.hidden.push(report::unseen::HiddenTime {
                        name: name.clone(),
                        instructions: n,
                        landed,
                    });
                }
            }
        }
    }
    let timeline = opts.timeline;
    let max_poll = opts.max_poll;
    let cycles_request = opts.cycles.clone();
    if cycles_request.is_some() && exact.is_none() {
        bail!(
            "`--cycles` on a sampled run turns its shares into cycle shares with each \
             address's cycles per instruction in the exact counts, which this run did not keep: \
             sample with `--truth`, or count every instruction with `--exact --cycles`"
        );
    }
    at.split_dispatchers(&mut samples, &dump, exact.as_deref())?;
    let mut report = report::build_samples(
        &samples,
        at.sym,
        at.code.as_deref_mut(),
        facts_of(&meta, &dump),
        exact.as_deref(),
        opts,
        &at.vectors,
    );
    report.unseen = (!unseen.is_empty() && report.exact_instructions.is_some()).then_some(unseen);
    let mut estimate = None;
    if let (Some(request), Some(e)) = (&cycles_request, exact.as_deref()) {
        let chains = exact::read_chains(dir);
        let (model, est) = exact::estimate_run(
            request,
            &meta,
            at.code.as_deref(),
            &elf_bytes,
            e,
            chains.as_deref(),
        )?;
        report::cycle_shares(&mut report, at.sym, &samples.per_pc, e, &est);
        report.timing = Some(exact::timing_facts(&model, &est, None));
        estimate = Some((model, est));
    }
    at.swo(&mut report);
    if timeline && dump.hist.is_none() && !samples.ordered.is_empty() {
        at.timeline(&mut report, &dump, &samples);
    }
    if !dump.stacks.is_empty() {
        at.stacks(
            &mut report,
            &mut dump,
            &samples,
            callers.as_deref(),
            callees.as_deref(),
        )?;
    }
    at.fault(&mut report);
    if let Some(t) = &dump.tasks {
        at.tasks(&mut report, &dump, &samples, t, max_poll)?;
    }
    if let Some(l) = &dump.laps {
        let windows = at.lap_windows();
        at.laps(&mut report, &dump, l, windows.as_ref());
        if let (Some((model, est)), Some(request)) = (&estimate, &cycles_request) {
            at.laps_in_cycles(
                &mut report,
                l,
                windows.as_ref(),
                model,
                est,
                request.clock_hz,
            )?;
        }
    }
    Ok(report)
}

/// The handlers the sampler could not preempt: their exceptions and names, and whether the
/// samples they held off were told apart (moved to the held-off row).
struct Hidden {
    exceptions: Vec<u32>,
    labels: Vec<String>,
    marked: bool,
}

impl Hidden {
    fn marked(urgent: Option<&[Urgent]>) -> Hidden {
        let u = urgent.unwrap_or(&[]);
        Hidden {
            exceptions: u.iter().map(|u| u32::from(u.exception)).collect(),
            labels: u.iter().map(|u| u.label.clone()).collect(),
            marked: true,
        }
    }

    /// None when there are none.
    fn unmarked(urgent: Option<Vec<Urgent>>) -> Option<Hidden> {
        let h = Hidden {
            marked: false,
            ..Hidden::marked(urgent.as_deref())
        };
        (!h.exceptions.is_empty()).then_some(h)
    }
}

/// What every step of loading a sampled run reads.
struct Loading<'a> {
    dir: &'a Path,
    meta: &'a RunMeta,
    elf_bytes: &'a [u8],
    vectors: Vec<(u32, u32)>,
    sym: &'a mut Symbolizer,
    code: Option<&'a mut disasm::Code>,
}

/// A sampled run's exact call graph, if it kept one, from the moment the sampler started (what
/// ran before it, which no sample could see, taken out).
fn graph_since_start(dir: &Path) -> Result<Option<dump::callgraph::Tree>> {
    let path = dir.join(dump::callgraph::FILE);
    let Ok(bytes) = std::fs::read(&path) else {
        return Ok(None);
    };
    let whole =
        dump::callgraph::parse(&bytes).with_context(|| format!("decoding {}", path.display()))?;
    let before = std::fs::read(dir.join(dump::callgraph::BEFORE_START_FILE))
        .ok()
        .and_then(|b| dump::callgraph::parse(&b).ok());
    Ok(Some(match before {
        Some(b) => dump::callgraph::since(whole, &b),
        None => whole,
    }))
}

impl Loading<'_> {
    /// Bins. Held-off samples are in the outside counter: their own row instead. Also returns
    /// the handlers the sampler could not see.
    fn bins(
        &mut self,
        dump: &Dump,
        h: &dump::Hist,
        split: report::bins::Split,
    ) -> (report::Samples, Option<Hidden>) {
        let Some(ho) = dump.held_off.filter(|ho| ho.checked() && ho.count > 0) else {
            let found = urgent(dump, &self.vectors, self.sym, None);
            return (hist_samples(h, self.sym, split), Hidden::unmarked(found));
        };
        let held = ho.count.min(h.outside);
        let h = dump::Hist {
            outside: h.outside - held,
            ..h.clone()
        };
        let mut s = hist_samples(&h, self.sym, split);
        let found = urgent(dump, &self.vectors, self.sym, None);
        let labels: Vec<String> = found.iter().flatten().map(|u| u.label.clone()).collect();
        let hidden = Hidden::marked(found.as_deref());
        let row = report::held_off::row_name(&labels);
        let a = report::held_off::HELD_OFF_ADDRESS;
        self.sym.add_pseudo(a as u64, a as u64 + 2, &row);
        *s.per_pc.entry(a).or_default() += u64::from(held);
        s.findings.push(report::Diagnostic {
            kind: report::Finding::Unpreemptable,
            severity: report::Severity::Note,
            message: format!(
                "{held} samples were held off by code the sampler could not preempt (a handler \
                 as urgent as it, or interrupts masked): the `{row}` row. Bins do not keep where \
                 they landed, so time inside critical sections is in that row too"
            ),
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        });
        (s, Some(hidden))
    }

    /// A ring's samples: sleep found by DWT, tags and their names (with exact instructions per
    /// exception when the run followed them), held-off samples placed. Also returns the
    /// handlers the sampler could not see.
    fn ring(
        &mut self,
        dump: &Dump,
        exact: Option<&[(u32, u64)]>,
    ) -> Result<(report::Samples, Option<Hidden>)> {
        let mut s = report::Samples::of_dump(dump);
        // DWT PC sampling that found the core asleep (a board's SWO).
        let sleep = s
            .per_pc
            .get(&report::model::SLEEP_ADDRESS)
            .copied()
            .unwrap_or(0);
        s.findings
            .extend(report::itm::asleep(self.sym, sleep, s.ordered.len() as u64));
        // (ARMv8-A stack entries carry the SPSR in the tag slot: no tag.)
        if dump.tags.len() == dump.pcs.len()
            && !dump.tags.is_empty()
            && dump.info.tag_kind != wire::TAG_NONE
        {
            self.tags(&mut s, dump, exact)?;
        }
        let urgent = urgent(dump, &self.vectors, self.sym, self.code.as_deref_mut());
        s.urgent = urgent
            .as_ref()
            .map(|u| u.iter().map(Urgent::said).collect());
        let Some(h) = dump.held_off.filter(|h| h.checked()) else {
            let mut found = unpreemptable(s.urgent.as_deref(), dump.info.priority);
            if let Some(d) = found.as_mut() {
                // The rows it explains: the handlers' own.
                d.functions = urgent
                    .iter()
                    .flatten()
                    .map(|u| u.function.clone())
                    .collect();
            }
            if let Some(d) = found.as_mut()
                && dump
                    .held_off
                    .is_some_and(|h| h.how == wire::LATE_UNREADABLE)
            {
                d.message.push_str(
                    ". No sample could be told held off: the timer's count does not move when \
                     read (QEMU does not model a Stellaris timer's count; on the chip it does)",
                );
            }
            s.findings.extend(found);
            return Ok((s, Hidden::unmarked(urgent)));
        };
        let labels: Vec<String> = urgent.iter().flatten().map(|u| u.label.clone()).collect();
        let row = report::held_off::row_name(&labels);
        let priority = dump.info.priority;
        // Can the sampler's interrupt come again while its handler runs? Only when the
        // shortest period is near the handler's length (up to about 40 instructions, 250 with
        // stacks).
        let handler = if dump.stacks.is_empty() { 40.0 } else { 250.0 };
        let shortest = f64::from(dump.info.reload) * self.meta.units_per_tick;
        let own = shortest < 2.0 * handler;
        let sym = &*self.sym;
        let placed = match self.code.as_deref_mut() {
            Some(c) => s.place_held_off(own, |pc| {
                report::held_off::follows_unmasking(sym, c, pc, priority)
            }),
            None => s.place_held_off(own, |_| false),
        };
        let a = report::held_off::HELD_OFF_ADDRESS as u64;
        self.sym.add_pseudo(a, a + 2, &row);
        // Exception tags: a held-off sample is the hidden handlers' time, whatever context the
        // core was back in when the sample was finally taken (thread mode, mostly).
        if dump.info.tag_kind == wire::TAG_XPSR && s.tags.len() == s.ordered.len() {
            let hidden: Vec<&Urgent> = urgent.iter().flatten().collect();
            let tag = match hidden.as_slice() {
                [] => None,
                [one] => {
                    let n = u32::from(one.exception);
                    s.tag_names.entry(n).or_insert_with(|| one.label.clone());
                    Some(n)
                }
                many => {
                    // One row for them all, as in the functions: their exact time together.
                    let sum: u64 = many
                        .iter()
                        .filter_map(|u| s.exact_by_tag.remove(&u32::from(u.exception)))
                        .sum();
                    if sum > 0 {
                        s.exact_by_tag.insert(HELD_OFF_TAG, sum);
                    }
                    s.tag_names.insert(HELD_OFF_TAG, row.clone());
                    Some(HELD_OFF_TAG)
                }
            };
            if let Some(tag) = tag {
                for (t, &pc) in s.tags.iter_mut().zip(&s.ordered) {
                    if pc == report::held_off::HELD_OFF_ADDRESS {
                        *t = tag;
                    }
                }
            }
        }
        let late_after = format!(
            "{:.0} {}",
            f64::from(h.late_ticks) * self.meta.units_per_tick,
            self.meta.unit
        );
        s.findings.extend(report::held_off::note(
            &row,
            placed,
            s.ordered.len() as u64,
            &late_after,
        ));
        Ok((s, Some(Hidden::marked(urgent.as_deref()))))
    }

    /// RTIC v2: a dispatcher that several async tasks share is split into a row per task (and
    /// one for the dispatcher's code that is no one task's: RTIC's executor, or a function the
    /// tasks call, which a sample's address alone does not tell apart), in the samples and in
    /// the exact instructions per exception alike, by each address's inline chain; with call
    /// stacks, by the innermost task on the stack (and the exact graph's stacks).
    fn split_dispatchers(
        &mut self,
        s: &mut report::Samples,
        dump: &Dump,
        exact: Option<&[(u32, u64)]>,
    ) -> Result<()> {
        if dump.info.tag_kind != wire::TAG_XPSR
            || s.tags.len() != s.ordered.len()
            || !crate::image::rtic::is_rtic(self.sym)
        {
            return Ok(());
        }
        let Some(code) = self.code.as_deref_mut() else {
            return Ok(());
        };
        let irqs: std::collections::BTreeSet<u32> = s
            .tags
            .iter()
            .copied()
            .chain(s.exact_by_tag.keys().copied())
            .filter(|&t| (16..512).contains(&t))
            .collect();
        let contexts = std::fs::read(self.dir.join(dump::exact::CONTEXTS_FILE)).ok();
        // With call stacks, a sample in a function a task calls is the task's (its caller
        // frames in the dispatcher say which task); the exact count is then split by the
        // exact call graph's stacks the same way, so that the two compare. Without the exact
        // graph beside exact counts, both are split by address alone.
        let graph = graph_since_start(self.dir).ok().flatten();
        let stacked = !dump.stacks.is_empty()
            && dump.stacks.len() == s.ordered.len()
            && (graph.is_some() || s.exact_by_tag.is_empty());
        let mut unwinder = stacked.then(|| {
            let reset = self.vectors.iter().find(|v| v.0 == 1).map(|v| v.1);
            crate::image::unwind::Unwinder::new(self.elf_bytes, &self.sym.ranges(), reset)
        });
        for n in irqs {
            let Some(handler) = self.vectors.iter().find(|v| v.0 == n).map(|v| v.1) else {
                continue;
            };
            let tasks = crate::image::rtic::tasks_of(self.sym, code, u64::from(handler));
            if tasks.software.len() < 2 || !tasks.hardware.is_empty() {
                continue;
            }
            let interrupt = match self.sym.function_of(u64::from(handler)) {
                Some(f) => format!("{f}, IRQ {}", n - 16),
                None => format!("IRQ {}", n - 16),
            };
            // A tag per task (and one for the rest) above every exception number.
            let split = |k: Option<usize>| 0x8000_0000 | n << 8 | k.map_or(0, |k| k as u32 + 1);
            for (i, (tag, &pc)) in s.tags.iter_mut().zip(&s.ordered).enumerate() {
                if *tag == n {
                    let mut k = crate::image::rtic::software_task_at(self.sym, pc, &tasks.software);
                    if let (None, Some(u), Some(st)) = (k, unwinder.as_mut(), dump.stacks.get(i)) {
                        k = task_of_callers(self.sym, u, pc, st, &tasks.software);
                    }
                    *tag = split(k);
                }
            }
            let by_graph = match (&graph, stacked) {
                (Some(t), true) => s.exact_by_tag.get(&n).map(|&total| {
                    (
                        total,
                        exact_split_by_graph(self.sym, t, handler, &tasks.software, exact),
                    )
                }),
                _ => None,
            };
            if let Some((total, parts)) = by_graph {
                // The same instructions, or the exception stays whole.
                if parts.values().sum::<u64>() == total {
                    s.exact_by_tag.remove(&n);
                    for (k, count) in parts {
                        *s.exact_by_tag.entry(split(k)).or_default() += count;
                    }
                }
            } else if let (Some(bytes), Some(total)) = (&contexts, s.exact_by_tag.remove(&n)) {
                let mut counted = 0;
                for (context, pc, count) in
                    dump::exact::contexts_by_exception(bytes, &self.vectors, &[])?
                {
                    if context == n && !self.sym.is_sampler(pc as u64) {
                        let k = crate::image::rtic::software_task_at(self.sym, pc, &tasks.software);
                        *s.exact_by_tag.entry(split(k)).or_default() += count;
                        counted += count;
                    }
                }
                if counted != total {
                    // Not the same instructions: leave the exception whole rather than split
                    // it wrongly.
                    s.exact_by_tag
                        .retain(|&t, _| t & 0xFFFF_FF00 != split(None));
                    s.exact_by_tag.insert(n, total);
                }
            }
            for (k, task) in tasks.software.iter().enumerate() {
                s.tag_names.insert(
                    split(Some(k)),
                    format!("software task {task} (dispatcher {interrupt})"),
                );
            }
            s.tag_names.insert(
                split(None),
                if stacked {
                    format!("dispatcher {interrupt}: RTIC's executor (no task on the call stack)")
                } else {
                    format!(
                        "dispatcher {interrupt}: RTIC's executor and functions its tasks call \
                         (no one task's code; `--stacks` tells them apart)"
                    )
                },
            );
        }
        Ok(())
    }

    /// Each sample's tag, its name, and the exact instructions per exception.
    fn tags(
        &mut self,
        s: &mut report::Samples,
        dump: &Dump,
        exact: Option<&[(u32, u64)]>,
    ) -> Result<()> {
        // An xPSR carries flags beside the exception number: keep the number.
        s.tags = if dump.info.tag_kind == wire::TAG_XPSR {
            dump.tags.iter().map(|t| t & 0x1FF).collect()
        } else {
            dump.tags.clone()
        };
        if dump.info.tag_kind == wire::TAG_XPSR
            && let Ok(bytes) = std::fs::read(self.dir.join(dump::exact::CONTEXTS_FILE))
        {
            // The sampler's own interrupt is all its own time (its slow path may call
            // compiler-builtins).
            let own: Vec<u32> = self
                .vectors
                .iter()
                .filter(|v| v.0 >= 2 && self.sym.is_sampler(v.1 as u64))
                .map(|v| v.0)
                .collect();
            let all = exact.unwrap_or(&[]);
            for (context, pc, n) in dump::exact::contexts_by_exception(&bytes, &self.vectors, all)?
            {
                if !own.contains(&context) && !self.sym.is_sampler(pc as u64) {
                    *s.exact_by_tag.entry(context).or_default() += n;
                }
            }
        }
        let mut named = s.tags.clone();
        named.extend(s.exact_by_tag.keys());
        s.tag_names = tag_names(
            dump.info.tag_kind,
            &named,
            &dump.names,
            &self.vectors,
            self.sym,
            self.code.as_deref_mut(),
        );
        Ok(())
    }

    /// A board's SWO capture as it came: its exception trace, if the DWT sent one.
    fn swo(&self, report: &mut Report) {
        if let Ok(swo) = std::fs::read(self.dir.join(runs::SWO)) {
            let stats = dump::itm::summarize(&swo, false);
            report.exceptions =
                report::itm::exception_rows(&stats.exceptions, &self.vectors, self.sym);
        }
    }

    /// The samples in the order taken, a thread per tag (formats with a time axis), with the
    /// PMU's counts and the defmt log where their timestamps allow.
    fn timeline(&mut self, report: &mut Report, dump: &Dump, samples: &report::Samples) {
        let mut t = report::timeline::Timeline::of_pcs(self.sym, &samples.ordered);
        t.set_threads(&samples.tags, |tag| {
            samples
                .tag_names
                .get(&tag)
                .cloned()
                .unwrap_or_else(|| format!("tag {tag:#x}"))
        });
        t.first_seq = dump.first_seq;
        if let (Some(record), Some(trace)) = (&dump.pmu, &dump.pmu_trace) {
            let units_per_cycle = pmccntr_units_per_cycle(self.meta);
            let names = crate::analysis::events::table_for(&self.meta.cpu, None)
                .or_else(|_| crate::analysis::events::table("Cortex-A53"))
                .ok();
            t.add_pmu(record, trace, units_per_cycle, report.period_units(), |e| {
                names
                    .as_ref()
                    .map(|n| n.name(e))
                    .unwrap_or_else(|| format!("{e:#06x}"))
            });
        }
        match runs::kept_defmt_log(self.elf_bytes, self.dir) {
            Ok(Some((lines, true))) => t.add_logs(&lines),
            Ok(Some((lines, false))) if !lines.is_empty() => term::note(format!(
                "the firmware's defmt log ({}) is not on the timeline: its timestamp is not \
                 sampler-rt's count of samples. Turn on sampler-rt's `defmt-timestamp` feature \
                 (in place of the application's own `defmt::timestamp!`) to see it there",
                term::plural(lines.len() as u64, "line")
            )),
            Ok(_) => {}
            Err(e) => term::warn(format!("the firmware's defmt log: {e:#}")),
        }
        report.timeline = Some(t);
    }

    /// Sampled stacks, unwound (beside the exact call graph when the run followed calls).
    fn stacks(
        &mut self,
        report: &mut Report,
        dump: &mut Dump,
        samples: &report::Samples,
        callers: Option<&str>,
        callees: Option<&str>,
    ) -> Result<()> {
        // Held-off samples are the rows they went to, not the code they landed in.
        if samples.late.len() == dump.pcs.len() {
            for ((pc, &late), &placed) in
                dump.pcs.iter_mut().zip(&samples.late).zip(&samples.ordered)
            {
                if late {
                    *pc = placed;
                }
            }
        }
        let graph = graph_since_start(self.dir)?;
        report::unwound::apply(
            report,
            dump,
            self.elf_bytes,
            self.sym,
            graph.as_ref(),
            callers,
            callees,
        )
    }

    /// A run that ended in a fault says so first.
    fn fault(&self, report: &mut Report) {
        let Some(c) = self.meta.core.filter(|c| c.faulted()) else {
            return;
        };
        let at = self.sym.name_address(c.pc);
        let message = format!(
            "the firmware faulted: the run ended with the core in {} at {at} (PC {:#010x}). The \
             samples are those taken before the fault",
            c.describe(),
            c.pc
        );
        report.warnings.insert(0, message.clone());
        report.diagnostics.insert(
            0,
            report::Diagnostic {
                kind: report::Finding::Fault,
                severity: report::Severity::Warning,
                message,
                percent: None,
                addresses: vec![c.pc],
                functions: Vec::new(),
            },
        );
    }

    /// `--cycles`: each lap region in estimated cycles, at the CPI of the code its laps ran in
    /// the run's exact call graph.
    fn laps_in_cycles(
        &self,
        report: &mut Report,
        l: &dump::laps::Laps,
        windows: Option<&dump::laps::Windows>,
        model: &crate::image::timing::Model,
        est: &crate::image::timing::Estimate,
        clock_hz: Option<u32>,
    ) -> Result<()> {
        let Some(laps) = report.laps.as_mut() else {
            return Ok(());
        };
        let path = self.dir.join(dump::callgraph::FILE);
        let Ok(bytes) = std::fs::read(&path) else {
            laps.cycles_notes.push(
                "no estimated cycles for the regions: the run has no exact call graph to find \
                 the code their laps ran in (QEMU's exec log counted it, or the run is older)"
                    .into(),
            );
            return Ok(());
        };
        let tree = dump::callgraph::parse(&bytes)
            .with_context(|| format!("decoding {}", path.display()))?;
        crate::analysis::laps::apply_cycles(
            laps,
            l,
            &tree,
            windows,
            |block, n| est.block_cycles(block, n),
            model.describe(),
            clock_hz,
        );
        Ok(())
    }

    /// Lap regions, in the report's unit, on the timeline too.
    fn laps(
        &self,
        report: &mut Report,
        dump: &Dump,
        l: &dump::laps::Laps,
        windows: Option<&dump::laps::Windows>,
    ) {
        let meta = self.meta;
        // SysTick ticks are the machine's timer ticks; CYCCNT counts cycles.
        let scale = match l.counter {
            // The machine's timer (SysTick; on ARMv8-A the generic timer).
            wire::LAP_COUNTER_SYSTICK | wire::LAP_COUNTER_GENERIC => crate::analysis::laps::Scale {
                units_per_tick: meta.units_per_tick,
                hz: (meta.timer_hz > 0).then_some(meta.timer_hz as f64),
            },
            wire::LAP_COUNTER_PMCCNTR if meta.board.is_none() => crate::analysis::laps::Scale {
                units_per_tick: pmccntr_units_per_cycle(meta),
                hz: Some(1e9),
            },
            _ => crate::analysis::laps::Scale {
                units_per_tick: 1.0,
                hz: (meta.timer_hz > 0).then_some(meta.timer_hz as f64),
            },
        };
        let (period, unit) = (report.period_units(), report.unit.clone());
        if let (Some(t), Some(trace)) = (report.timeline.as_mut(), &dump.lap_trace) {
            t.add_laps(l, trace, scale, period, &unit);
        }
        let mut laps = crate::analysis::laps::analyse(l, scale);
        if !dump.pcs.is_empty() || dump.hist.is_some() {
            laps.warnings.push(
                "the sampler's own interrupt also lengthened laps while it sampled: clusters then \
                 mix its cost with the application's interrupts. Time laps without sampling \
                 (`--laps`) to infer an interrupt's cost"
                    .into(),
            );
        }
        laps.bench = meta.bench;
        if let Some(w) = windows {
            crate::analysis::laps::apply_windows(&mut laps, l, w);
        }
        report.laps = Some(laps);
    }

    /// Embassy's task table: the firmware's statistics in the report's unit, each task's
    /// tagged samples and hottest line, the exact times when QEMU kept them, and a warning for
    /// each task whose longest poll is over the limit.
    fn tasks(
        &mut self,
        report: &mut Report,
        dump: &Dump,
        samples: &report::Samples,
        t: &dump::tasks::Tasks,
        max_poll: Option<crate::spec::Period>,
    ) -> Result<()> {
        let meta = self.meta;
        let qemu = meta.board.is_none();
        let machine = crate::exec::machine::find(meta.machine.split(',').next().unwrap_or(""));
        // SysTick runs on the core clock (CLKSOURCE 1): a cycle a tick on a board, the
        // machine's SysTick clock in QEMU. CYCCNT counts cycles.
        let scale = match (t.counter, machine) {
            (wire::LAP_COUNTER_SYSTICK, Some(m)) if qemu => crate::analysis::laps::Scale {
                units_per_tick: m.instructions_per_tick(meta.icount_shift),
                hz: Some(m.systick_hz as f64),
            },
            _ => crate::analysis::laps::Scale {
                units_per_tick: 1.0,
                hz: (meta.timer_hz > 0 && !qemu).then_some(meta.timer_hz as f64),
            },
        };
        let units_per_second = if qemu {
            Some(1e9 / f64::from(1u32 << meta.icount_shift.min(20)))
        } else {
            (meta.timer_hz > 0).then_some(meta.timer_hz as f64)
        };
        let limit = match max_poll {
            None => None,
            Some(crate::spec::Period::Units(u)) => Some(u),
            Some(crate::spec::Period::Seconds(sec)) => Some(
                sec * units_per_second.with_context(|| {
                    "`--max-poll` as a duration needs the core's clock: give it in cycles, or the \
                 clock with `--clock`"
                })?,
            ),
            Some(p) => bail!(
                "`--max-poll {p}`: give a poll's length in {} (`200000`) or as a duration \
                 (`500us`)",
                report.unit
            ),
        };
        let mut names = HashMap::new();
        for k in &t.tasks {
            let name = self.sym.name_address(k.id);
            let name = match name.split_once("::POOL") {
                Some((task, _)) => task.to_owned(),
                None => name,
            };
            names.insert(k.id, name);
        }
        // Samples tagged with the task being polled (`--tag api`, which Embassy images get
        // by default).
        let ids: std::collections::HashSet<u32> = t.tasks.iter().map(|k| k.id).collect();
        let tagged = dump.info.tag_kind == wire::TAG_WORD
            && samples.tags.len() == samples.ordered.len()
            && samples.tags.iter().any(|g| ids.contains(g));
        let mut by_tag: HashMap<u32, u64> = HashMap::new();
        let mut lines: HashMap<u32, HashMap<String, u64>> = HashMap::new();
        if tagged {
            for (&pc, &tag) in samples.ordered.iter().zip(&samples.tags) {
                *by_tag.entry(tag).or_default() += 1;
                if ids.contains(&tag)
                    && let Some(line) = self.sym.own_line(pc)
                {
                    *lines.entry(tag).or_default().entry(line).or_default() += 1;
                }
            }
        }
        let hottest: HashMap<u32, String> = lines
            .into_iter()
            .filter_map(|(tag, l)| {
                let (line, _) = l
                    .into_iter()
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
                Some((tag, line))
            })
            .collect();
        let path = self.dir.join(dump::exact::TASKS_FILE);
        let exact = match std::fs::read(&path) {
            Ok(bytes) => Some(
                dump::exact::parse_tasks(&bytes)
                    .with_context(|| format!("decoding {}", path.display()))?,
            ),
            Err(_) => None,
        };
        let pools = elf::task_pools(self.elf_bytes);
        let total = samples.ordered.len() as u64;
        // The exceptions executors idled in, named by their handlers.
        let in_handlers: Vec<u32> = t
            .executors
            .iter()
            .map(|e| e.context)
            .filter(|&c| c != 0)
            .collect();
        let labels = tag_names(
            wire::TAG_XPSR,
            &in_handlers,
            &[],
            &self.vectors,
            self.sym,
            None,
        );
        let contexts: HashMap<u32, (String, u32)> = in_handlers
            .iter()
            .map(|&c| {
                let entry = self.vectors.iter().find(|v| v.0 == c).map_or(0, |v| v.1);
                let label = labels.get(&c).cloned().unwrap_or_default();
                (c, (label, entry))
            })
            .collect();
        let (table, over) = crate::analysis::tasks::analyse(
            t,
            &crate::analysis::tasks::Inputs {
                scale,
                unit: &report.unit,
                names: &names,
                sampled: tagged.then_some((&by_tag, total)),
                lines: &hottest,
                exact: exact.as_ref().map(|e| (e, pools.as_slice())),
                max_poll: limit,
                units_per_second,
                contexts: &contexts,
            },
        );
        for (task, longest, line) in over {
            let time = units_per_second
                .map(|u| format!(" ({})", crate::report::text::duration_of(longest / u)))
                .unwrap_or_default();
            let at = match line {
                Some(l) => format!(" Most of its samples are in {l}."),
                None if tagged => String::new(),
                None => " Sample with `--tag api` to see the line it spends them at.".to_owned(),
            };
            let message = format!(
                "task `{task}` polled for up to {longest:.0} {unit}{time}, over the limit of \
                 {limit:.0} {unit}: no other task of its executor ran meanwhile, and every \
                 wake waited for it to end.{at} A blocking call in async code? Make it yield \
                 (an async driver, `yield_now().await` between pieces) or move it to its own \
                 executor of lower priority (`--max-poll` sets the limit)",
                unit = report.unit,
                limit = table.max_poll_limit,
            );
            report.warnings.push(message.clone());
            report.diagnostics.push(report::Diagnostic {
                kind: report::Finding::LongPoll,
                severity: report::Severity::Warning,
                message,
                percent: None,
                addresses: Vec::new(),
                functions: Vec::new(),
            });
        }
        // Each traced poll on its task's thread of the timeline.
        let (period, unit) = (report.period_units(), report.unit.clone());
        if let (Some(tl), Some(trace), true) =
            (report.timeline.as_mut(), &dump.task_trace, t.timed())
        {
            tl.add_polls(
                trace,
                |id| {
                    samples
                        .tag_names
                        .get(&id)
                        .cloned()
                        .unwrap_or_else(|| match names.get(&id) {
                            Some(n) => format!("task {n}"),
                            None => format!("task at {id:#010x}"),
                        })
                },
                scale.units_per_tick,
                period,
                &unit,
            );
        }
        report.tasks = Some(table);
        Ok(())
    }

    /// The plugin's lap windows, if the run kept them (a damaged file is said and left out).
    fn lap_windows(&self) -> Option<dump::laps::Windows> {
        let path = self.dir.join(dump::laps::WINDOWS_FILE);
        let bytes = std::fs::read(&path).ok()?;
        match dump::laps::parse_windows(&bytes) {
            Ok(w) => Some(w),
            Err(e) => {
                term::warn(format!("{}: {e:#}", path.display()));
                None
            }
        }
    }
}

fn pmccntr_units_per_cycle(meta: &RunMeta) -> f64 {
    if meta.board.is_none() {
        1.0 / f64::from(1u32 << meta.icount_shift.min(20))
    } else {
        1.0
    }
}

/// The samples of a histogram: each bin split among the functions whose bytes it holds.
pub fn hist_samples(
    h: &crate::dump::Hist,
    sym: &Symbolizer,
    split: crate::report::bins::Split,
) -> report::Samples {
    let bins: Vec<u64> = h.bins.iter().map(|&b| b as u64).collect();
    let (per_pc, finding) =
        crate::report::bins::split(&bins, h.base, 1 << h.shift, h.outside as u64, sym, split);
    let mut findings: Vec<report::Diagnostic> = finding.into_iter().collect();
    let full = h.saturated();
    if full > 0 {
        findings.push(report::Diagnostic {
            kind: report::Finding::SaturatedBins,
            severity: report::Severity::Warning,
            message: format!(
                "{full} bins reached 65535 samples and stopped counting: their functions are \
                 undercounted. Take fewer samples, or use smaller bins"
            ),
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    report::Samples {
        per_pc,
        binned: true,
        findings,
        ..report::Samples::default()
    }
}

/// The tag of held-off samples when several handlers hide them (exception tags are below 512;
/// RTIC's split dispatchers set bit 31).
const HELD_OFF_TAG: u32 = 0x4000_0000;

/// The software task a dispatcher sample ran for, from its caller frames inside the handler
/// (the first whose inline chain is a task's), for a sample in code no task inlines.
fn task_of_callers(
    sym: &mut Symbolizer,
    u: &mut crate::image::unwind::Unwinder,
    pc: u32,
    st: &dump::StackSample,
    software: &[String],
) -> Option<usize> {
    use crate::image::unwind::Kind;
    let w = u.unwind(&st.context(pc));
    w.frames
        .iter()
        .skip(1)
        .take_while(|f| f.kind != Kind::Interrupted)
        .filter(|f| f.kind == Kind::Call)
        .find_map(|f| crate::image::rtic::software_task_at(sym, f.pc, software))
}

/// The exact instructions run inside the handler at `handler` split by software task (`None`:
/// no task's), each counted block given to the task its own code or its innermost calling
/// site inside the handler is in: the exact call graph's stacks read as [`task_of_callers`]
/// reads a sampled one. The sampler's own code is left out, as it is from the exact counts.
fn exact_split_by_graph(
    sym: &mut Symbolizer,
    t: &dump::callgraph::Tree,
    handler: u32,
    software: &[String],
    per_pc: Option<&[(u32, u64)]>,
) -> HashMap<Option<usize>, u64> {
    let mut out: HashMap<Option<usize>, u64> = HashMap::new();
    // The dispatcher's own code, where the tasks are inlined, by each address's inline chain
    // from the per-address counts (the graph counts whole blocks, which can span the end of
    // one task's code and the executor's); what it calls by the graph.
    let own = sym
        .range_of(u64::from(handler))
        .filter(|_| per_pc.is_some());
    let in_own = |node: u32, block: u32| {
        own.is_some_and(|r| {
            let n = &t.nodes[node as usize];
            n.exception
                && n.entry & !1 == handler & !1
                && r.start <= u64::from(block)
                && u64::from(block) < r.end
        })
    };
    if let (Some(r), Some(counts)) = (own, per_pc) {
        for &(pc, n) in counts {
            if r.start <= u64::from(pc) && u64::from(pc) < r.end {
                let k = crate::image::rtic::software_task_at(sym, pc, software);
                *out.entry(k).or_default() += n;
            }
        }
    }
    // Per node: whether it runs inside this handler (the innermost exception above it is this
    // handler's entry), and the task of its innermost calling site there.
    let mut memo: HashMap<u32, Option<Option<usize>>> = HashMap::new();
    for &(node, block, n) in &t.counts {
        if sym.is_sampler(u64::from(block)) || in_own(node, block) {
            continue;
        }
        let ctx = match memo.get(&node) {
            Some(&c) => c,
            None => {
                let c = node_task(sym, t, node, handler, software);
                memo.insert(node, c);
                c
            }
        };
        let Some(from_sites) = ctx else { continue };
        let own = crate::image::rtic::software_task_at(sym, block, software);
        *out.entry(own.or(from_sites)).or_default() += n;
    }
    out
}

/// For the exact graph's `node`: `None` when it does not run inside the handler at
/// `handler`, else the software task of its innermost calling site inside it.
fn node_task(
    sym: &mut Symbolizer,
    t: &dump::callgraph::Tree,
    node: u32,
    handler: u32,
    software: &[String],
) -> Option<Option<usize>> {
    let mut found = None;
    let mut at = node;
    for _ in 0..t.nodes.len() {
        let n = t.nodes.get(at as usize)?;
        if n.exception {
            return (n.entry & !1 == handler & !1).then_some(found);
        }
        if found.is_none() && n.site != 0 {
            found = crate::image::rtic::software_task_at(sym, n.site, software);
        }
        if n.parent == at {
            return None;
        }
        at = n.parent;
    }
    None
}
