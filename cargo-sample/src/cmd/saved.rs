//! A saved run read back: its dump, its ELF, its facts, turned into a report and printed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use sampler_rt::wire::{self};

use crate::cli::{Format, ViewArgs};
use crate::dump::{self, Dump};
use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::report::{self, ExactFacts, Facts, text};
use crate::runs::{self, RunMeta};
use crate::term;

/// A name for each tag of a dump: exceptions by their handlers, words by the names the firmware
/// sent or the symbols they point to.
pub fn tag_names(
    kind: u8,
    tags: &[u32],
    names: &[(u32, String)],
    vectors: &[(u32, u32)],
    sym: &mut Symbolizer,
    mut code: Option<&mut disasm::Code>,
) -> std::collections::HashMap<u32, String> {
    let rtic = kind == wire::TAG_XPSR && crate::image::rtic::is_rtic(sym);
    const SYSTEM: [&str; 16] = [
        "thread mode",
        "Reset",
        "NMI",
        "HardFault",
        "MemManage",
        "BusFault",
        "UsageFault",
        "SecureFault",
        "exception 8",
        "exception 9",
        "exception 10",
        "SVCall",
        "DebugMonitor",
        "exception 13",
        "PendSV",
        "SysTick",
    ];
    let mut out = std::collections::HashMap::new();
    for &t in tags {
        if out.contains_key(&t) {
            continue;
        }
        let name = if kind == wire::TAG_XPSR {
            let n = t & 0x1FF;
            match n {
                0..16 => SYSTEM[n as usize].to_owned(),
                _ => {
                    let address = vectors.iter().find(|v| v.0 == n).map(|v| v.1 as u64);
                    let handler = address
                        .and_then(|a| sym.function_of(a))
                        .filter(|f| !f.contains("DefaultHandler"))
                        .map(str::to_owned);
                    let interrupt = match &handler {
                        Some(f) if *f == format!("IRQ{}", n - 16) => f.to_owned(),
                        Some(f) => format!("{f}, IRQ {}", n - 16),
                        None => format!("IRQ {}", n - 16),
                    };
                    // RTIC: the task the interrupt runs, by its name.
                    let task = match (rtic, address, code.as_deref_mut()) {
                        (true, Some(a), Some(c)) if handler.is_some() => {
                            crate::image::rtic::tasks_of(sym, c, a).describe(&interrupt)
                        }
                        _ => None,
                    };
                    match (task, &handler) {
                        (Some(t), _) => t,
                        (None, Some(f)) if *f == format!("IRQ{}", n - 16) => f.to_owned(),
                        (None, Some(f)) => format!("{f} (IRQ {})", n - 16),
                        (None, None) => format!("IRQ {}", n - 16),
                    }
                }
            }
        } else if let Some((_, n)) = names.iter().rev().find(|(tag, _)| *tag == t) {
            n.clone()
        } else if t == 0 {
            "0 (no tag)".to_owned()
        } else {
            let name = sym.name_address(t);
            // An Embassy task's header is in its task pool: `crate::task_fn::POOL`.
            match name.split_once("::POOL") {
                Some((task, _)) => format!("task {task}"),
                None => name,
            }
        };
        out.insert(t, name);
    }
    out
}

/// Handlers the firmware left as urgent as the sampler (their priority byte at or below the
/// sampler's): a sample due while one runs waits until it returns and lands in the code it
/// interrupted, so its time is counted there. Only handlers the image has (not cortex-m-rt's
/// defaults, not the sampler's own), from the priorities the firmware sent at its end.
pub(crate) fn unpreemptable(urgent: Option<&[String]>, own: u8) -> Option<report::Diagnostic> {
    let names = urgent?;
    if names.is_empty() {
        return None;
    }
    let one = names.len() == 1;
    let fix = if own == 0 {
        format!(
            "Nothing is more urgent than 0: give {} a less urgent priority (a larger number) \
             where the application allows it",
            if one { "it" } else { "them" }
        )
    } else {
        format!(
            "Sample at a more urgent priority (`--priority`, 0 is the most urgent), or give {} \
             a less urgent one",
            if one { "it" } else { "them" }
        )
    };
    Some(report::Diagnostic::warning(
        report::Finding::Unpreemptable,
        format!(
            "the sampler (priority {own:#04x}) cannot preempt {} ({}): a sample due while {} \
             runs waits until it returns and is taken in the code it interrupted, so that time \
             is counted there and {} never {} in the profile. {fix}",
            names.join(", "),
            if one {
                "as urgent as the sampler or more"
            } else {
                "each as urgent as the sampler or more"
            },
            if one { "it" } else { "one" },
            if one { "it" } else { "they" },
            if one { "shows" } else { "show" },
        ),
    ))
}

/// A handler the sampler cannot preempt.
pub(crate) struct Urgent {
    pub exception: u16,
    /// Its function's name (RTIC: the task's).
    pub label: String,
    pub priority: u8,
}

impl Urgent {
    /// `NAME at 0xPP`.
    pub fn said(&self) -> String {
        format!("{} at {:#04x}", self.label, self.priority)
    }
}

/// The image's handlers (not cortex-m-rt's defaults, not the sampler's own) that the
/// priorities the firmware sent at its end make as urgent as the sampler or more (RTIC: named
/// by the task); `None` when the firmware sent no priorities.
pub(crate) fn urgent(
    dump: &Dump,
    vectors: &[(u32, u32)],
    sym: &mut Symbolizer,
    code: Option<&mut disasm::Code>,
) -> Option<Vec<Urgent>> {
    if dump.priorities.is_empty() {
        return None;
    }
    let own = dump.info.priority;
    let mut code = code;
    let mut found = Vec::new();
    let rtic = crate::image::rtic::is_rtic(sym);
    for &(exc, prio, enabled) in &dump.priorities {
        if !enabled || prio > own {
            continue;
        }
        let Some(addr) = vectors
            .iter()
            .find(|v| v.0 == u32::from(exc))
            .map(|v| v.1 as u64)
        else {
            continue;
        };
        let Some(name) = sym.function_of(addr).map(str::to_owned) else {
            continue;
        };
        if name.starts_with("DefaultHandler") || sym.is_sampler(addr) {
            continue;
        }
        let label = match (exc >= 16, code.as_deref_mut()) {
            (true, Some(c)) if rtic => crate::image::rtic::tasks_of(sym, c, addr)
                .describe(&name)
                .unwrap_or(name),
            _ => name,
        };
        found.push(Urgent {
            exception: exc,
            label,
            priority: prio,
        });
    }
    Some(found)
}

/// Everything the report needs besides the dump and the ELF.
pub(crate) fn facts_of(meta: &RunMeta, dump: &Dump) -> Facts {
    let i = &dump.info;
    let period_ticks = i.reload as f64 + 1.0 + i.jitter_mask as f64 / 2.0;
    // A timer the firmware drives ticks at its own clock (0: not given): instructions (QEMU) or
    // core cycles (a board with `--clock`) per tick follow from it.
    let (timer_hz, units_per_tick) = if i.timer == wire::TIMER_CUSTOM {
        let hz = u64::from(i.timer_hz);
        // Not given: taken as the core clock's, and the header says so.
        let per_tick = match (hz, &meta.board) {
            (0, _) => meta.units_per_tick,
            (hz, None) => 1e9 / hz as f64 / f64::from(1u32 << meta.icount_shift.min(20)),
            (hz, Some(_)) if meta.timer_hz > 0 => meta.timer_hz as f64 / hz as f64,
            (_, Some(_)) => 1.0,
        };
        (hz, per_tick)
    } else {
        (meta.timer_hz, meta.units_per_tick)
    };
    let kept = match &dump.hist {
        Some(h) => h.total() as u32,
        None => dump.pcs.len() as u32,
    };
    let overwritten = if dump.hist.is_some() {
        0
    } else {
        // Samples lost on the way (a live capture that fell behind) are not overwritten ones.
        i.taken.saturating_sub(kept).saturating_sub(i.lost)
    };
    Facts {
        firmware: meta.target_name.clone(),
        machine: match &meta.board {
            Some(how) => format!("{} (board, {how})", meta.machine),
            None => format!("{} (QEMU)", meta.machine),
        },
        unit: meta.unit.clone(),
        on_events: i.timer == wire::TIMER_PMU && meta.timer_hz == 0,
        foreign_interrupts: i.foreign,
        timer: match i.timer {
            wire::TIMER_CUSTOM => "the firmware's timer".into(),
            _ if meta.pacer.is_some() => meta.pacer.clone().unwrap_or_default(),
            wire::TIMER_STM32 => "STM32 timer".into(),
            wire::TIMER_CMSDK => "CMSDK timer".into(),
            wire::TIMER_GPTM => "general-purpose timer".into(),
            wire::TIMER_NRF => "TIMER".into(),
            wire::TIMER_DWT => "DWT".into(),
            wire::TIMER_GENERIC => "generic timer".into(),
            // Only the cycle counter has a rate.
            wire::TIMER_PMU if meta.timer_hz > 0 => "PMU cycle counter".into(),
            wire::TIMER_PMU => "PMU event counter".into(),
            wire::TIMER_PCSR => "DWT_PCSR polled by the host".into(),
            _ => "SysTick".into(),
        },
        timer_hz,
        period_ticks,
        period_units: period_ticks * units_per_tick,
        jitter_ticks: if i.jitter_mask == 0 {
            0
        } else {
            i.jitter_mask + 1
        },
        priority: i.priority,
        taken: i.taken,
        lost: i.lost,
        overwritten,
        requested: meta.requested_samples,
        stop: report::stop_reason(i.stop).into(),
        source: meta.source.clone().unwrap_or_else(|| "dump".into()),
        duration_units: i.taken as f64 * period_ticks * units_per_tick,
    }
}

/// Load a dump from a run directory: the firmware's own, else a snapshot saved beside it.
pub fn load_dump(dir: &Path) -> Result<Dump> {
    let path = dir.join(runs::DUMP);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let (mut d, err) = dump::decode_partial(&bytes);
    match err {
        None => Ok(d),
        Some(dump::DumpError::Truncated { at }) if !d.pcs.is_empty() => {
            term::warn(format!(
                "the dump was cut short after {at} bytes; reporting the {} samples before the \
                 cut. A firmware that ends by its own means (semihosting's `debug::exit`, \
                 `panic-semihosting`) without `sampler_rt::flush()` (or `sampler_rt::exit`) \
                 leaves its last samples unsent",
                d.pcs.len()
            ));
            // The INFO that came first was written before sampling began: the samples that
            // arrived were taken at least.
            let arrived = d.first_seq.saturating_add(d.pcs.len() as u32);
            d.info.taken = d.info.taken.max(arrived);
            Ok(d)
        }
        Some(e @ dump::DumpError::Damaged { .. }) if d.pcs.is_empty() && d.hist.is_none() => {
            Err(anyhow!("{e}, and no other sample was recorded"))
                .with_context(|| format!("decoding {}", path.display()))
        }
        Some(e @ dump::DumpError::Damaged { samples, .. }) => {
            term::warn(format!(
                "{e} (counted as lost); every other record checked out and is reported. {} is \
                 kept as it is",
                path.display()
            ));
            d.info.lost = d.info.lost.saturating_add(samples as u32);
            Ok(d)
        }
        Some(e) => Err(anyhow!(e)).with_context(|| format!("decoding {}", path.display())),
    }
}

/// Check that the dump was made by this image.
pub fn verify_fingerprint(elf_bytes: &[u8], dump: &Dump) -> Result<()> {
    let i = &dump.info;
    if i.code_end <= i.code_start {
        bail!("the dump does not say which code made it (empty fingerprint range)");
    }
    let crc = elf::code_crc(elf_bytes, i.code_start as u64, i.code_end as u64)
        .context("the ELF has no code where the dump's fingerprint says")?;
    if crc != i.code_crc {
        bail!(
            "this dump was not made by this ELF: the firmware's code at {:#x}..{:#x} had CRC {:#010x}, this \
             ELF's has {crc:#010x}. Report the run with the ELF saved beside it (`cargo sample report <run>`), \
             or run again",
            i.code_start,
            i.code_end,
            i.code_crc
        );
    }
    Ok(())
}

/// Render a saved run.
pub fn render_run(dir: &Path, view: &ViewArgs) -> Result<()> {
    let report = load_report(dir, build_options(view))?;
    print_report(&report, view, Some(dir))
}

/// The report of a saved run.
pub fn load_report(dir: &Path, opts: report::Options) -> Result<report::Report> {
    let meta = runs::load_meta(dir)?;
    if meta.mode == "exact" {
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
    let mut exact = match std::fs::read(dir.join(crate::dump::exact::FILE)) {
        Ok(bytes) => Some(crate::dump::exact::parse(&bytes)?),
        Err(_) => None,
    };
    // The exceptions whose time the held-off row stands for, when the sampler checked.
    let mut held_off: Option<Vec<u32>> = None;
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let samples = match &dump.hist {
        // Held-off samples are in the outside counter: their own row instead.
        Some(h) => match dump.held_off.filter(|ho| ho.checked() && ho.count > 0) {
            Some(ho) => {
                let held = ho.count.min(h.outside);
                let h = crate::dump::Hist {
                    outside: h.outside - held,
                    ..h.clone()
                };
                let mut s = hist_samples(&h, &sym, opts.bin_split);
                let found = urgent(&dump, &elf::vectors(&elf_bytes), &mut sym, None);
                let labels: Vec<String> = found.iter().flatten().map(|u| u.label.clone()).collect();
                held_off = Some(
                    found
                        .iter()
                        .flatten()
                        .map(|u| u32::from(u.exception))
                        .collect(),
                );
                let row = report::held_off::row_name(&labels);
                let a = report::held_off::HELD_OFF_ADDRESS;
                sym.add_pseudo(a as u64, a as u64 + 2, &row);
                *s.per_pc.entry(a).or_default() += u64::from(held);
                s.findings.push(report::Diagnostic {
                    kind: report::Finding::Unpreemptable,
                    severity: report::Severity::Note,
                    message: format!(
                        "{held} samples were held off by code the sampler could not preempt \
                         (a handler as urgent as it, or interrupts masked): the `{row}` row. \
                         Bins do not keep where they landed, so time inside critical sections is \
                         in that row too"
                    ),
                    percent: None,
                    addresses: Vec::new(),
                    functions: Vec::new(),
                });
                s
            }
            None => hist_samples(h, &sym, opts.bin_split),
        },
        None => {
            let mut s = report::Samples::of_dump(&dump);
            // DWT PC sampling that found the core asleep (a board's SWO).
            let sleep = s
                .per_pc
                .get(&crate::report::model::SLEEP_ADDRESS)
                .copied()
                .unwrap_or(0);
            s.findings
                .extend(report::itm::asleep(&mut sym, sleep, s.ordered.len() as u64));
            // (ARMv8-A stack entries carry the SPSR in the tag slot: no tag.)
            if dump.tags.len() == dump.pcs.len()
                && !dump.tags.is_empty()
                && dump.info.tag_kind != wire::TAG_NONE
            {
                // An xPSR carries flags beside the exception number: keep the number.
                s.tags = if dump.info.tag_kind == wire::TAG_XPSR {
                    dump.tags.iter().map(|t| t & 0x1FF).collect()
                } else {
                    dump.tags.clone()
                };
                // Exact instructions per exception, when the run followed them.
                if dump.info.tag_kind == wire::TAG_XPSR
                    && let Ok(bytes) = std::fs::read(dir.join(crate::dump::exact::CONTEXTS_FILE))
                {
                    let vectors_of = elf::vectors(&elf_bytes);
                    // The sampler's own interrupt is all its own time (its slow path may call
                    // compiler-builtins).
                    let own: Vec<u32> = elf::vectors(&elf_bytes)
                        .iter()
                        .filter(|v| v.0 >= 2 && sym.is_sampler(v.1 as u64))
                        .map(|v| v.0)
                        .collect();
                    let all = exact.as_deref().unwrap_or(&[]);
                    for (context, pc, n) in
                        crate::dump::exact::contexts_by_exception(&bytes, &vectors_of, all)?
                    {
                        if !own.contains(&context) && !sym.is_sampler(pc as u64) {
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
                    &elf::vectors(&elf_bytes),
                    &mut sym,
                    code.as_mut(),
                );
            }
            let vectors = elf::vectors(&elf_bytes);
            let urgent = urgent(&dump, &vectors, &mut sym, code.as_mut());
            s.urgent = urgent
                .as_ref()
                .map(|u| u.iter().map(Urgent::said).collect());
            match dump.held_off.filter(|h| h.checked()) {
                Some(h) => {
                    let labels: Vec<String> =
                        urgent.iter().flatten().map(|u| u.label.clone()).collect();
                    let row = report::held_off::row_name(&labels);
                    let priority = dump.info.priority;
                    // Can the sampler's interrupt come again while its handler runs? Only when
                    // the shortest period is near the handler's length (up to about 40
                    // instructions, 250 with stacks).
                    let handler = if dump.stacks.is_empty() { 40.0 } else { 250.0 };
                    let shortest = f64::from(dump.info.reload) * meta.units_per_tick;
                    let own = shortest < 2.0 * handler;
                    let placed = match code.as_mut() {
                        Some(c) => s.place_held_off(own, |pc| {
                            report::held_off::follows_unmasking(&sym, c, pc, priority)
                        }),
                        None => s.place_held_off(own, |_| false),
                    };
                    let a = report::held_off::HELD_OFF_ADDRESS as u64;
                    sym.add_pseudo(a, a + 2, &row);
                    let late_after = format!(
                        "{:.0} {}",
                        f64::from(h.late_ticks) * meta.units_per_tick,
                        meta.unit
                    );
                    s.findings.extend(report::held_off::note(
                        &row,
                        placed,
                        s.ordered.len() as u64,
                        &late_after,
                    ));
                    held_off = Some(
                        urgent
                            .iter()
                            .flatten()
                            .map(|u| u32::from(u.exception))
                            .collect::<Vec<u32>>(),
                    );
                }
                None => {
                    let mut found = unpreemptable(s.urgent.as_deref(), dump.info.priority);
                    if let Some(d) = found.as_mut()
                        && dump
                            .held_off
                            .is_some_and(|h| h.how == wire::LATE_UNREADABLE)
                    {
                        d.message.push_str(
                            ". No sample could be told held off: the timer's count does not \
                             move when read (QEMU does not model a Stellaris timer's count; on \
                             the chip it does)",
                        );
                    }
                    s.findings.extend(found);
                }
            }
            s
        }
    };
    // Like with like: the instructions of the handlers the sampler could not see go to the
    // held-off row in the exact counts too.
    if let (Some(hidden), Some(e)) = (&held_off, exact.as_mut())
        && let Ok(bytes) = std::fs::read(dir.join(crate::dump::exact::CONTEXTS_FILE))
    {
        let contexts =
            crate::dump::exact::contexts_by_exception(&bytes, &elf::vectors(&elf_bytes), e)?;
        report::held_off::split_exact(e, &contexts, hidden);
    }
    let timeline = opts.timeline;
    let mut report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts_of(&meta, &dump),
        exact.as_deref(),
        opts,
        &elf::vectors(&elf_bytes),
    );
    // A board's SWO capture as it came: its exception trace, if the DWT sent one.
    if let Ok(swo) = std::fs::read(dir.join(runs::SWO)) {
        let stats = crate::dump::itm::summarize(&swo, false);
        report.exceptions =
            report::itm::exception_rows(&stats.exceptions, &elf::vectors(&elf_bytes), &sym);
    }
    // The samples in the order taken, a thread per tag (formats with a time axis).
    if timeline && dump.hist.is_none() && !samples.ordered.is_empty() {
        let mut t = report::timeline::Timeline::of_pcs(&mut sym, &samples.ordered);
        t.set_threads(&samples.tags, |tag| {
            samples
                .tag_names
                .get(&tag)
                .cloned()
                .unwrap_or_else(|| format!("tag {tag:#x}"))
        });
        t.first_seq = dump.first_seq;
        if let (Some(record), Some(trace)) = (&dump.pmu, &dump.pmu_trace) {
            let units_per_cycle = pmccntr_units_per_cycle(&meta);
            let names = crate::analysis::events::table_for(&meta.cpu, None)
                .or_else(|_| crate::analysis::events::table("Cortex-A53"))
                .ok();
            t.add_pmu(record, trace, units_per_cycle, report.period_units(), |e| {
                names
                    .as_ref()
                    .map(|n| n.name(e))
                    .unwrap_or_else(|| format!("{e:#06x}"))
            });
        }
        match crate::cmd::capture::kept_defmt_log(&elf_bytes, dir) {
            Ok(Some((lines, true))) => t.add_logs(&lines),
            Ok(Some((lines, false))) if !lines.is_empty() => crate::term::note(format!(
                "the firmware's defmt log ({}) is not on the timeline: its timestamp is not \
                 sampler-rt's count of samples. Turn on sampler-rt's `defmt-timestamp` feature \
                 (in place of the application's own `defmt::timestamp!`) to see it there",
                crate::term::plural(lines.len() as u64, "line")
            )),
            Ok(_) => {}
            Err(e) => crate::term::warn(format!("the firmware's defmt log: {e:#}")),
        }
        report.timeline = Some(t);
    }
    if !dump.stacks.is_empty() {
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
        let graph = match std::fs::read(dir.join(crate::dump::callgraph::FILE)) {
            Ok(bytes) => Some(crate::dump::callgraph::parse(&bytes).with_context(|| {
                format!(
                    "decoding {}",
                    dir.join(crate::dump::callgraph::FILE).display()
                )
            })?),
            Err(_) => None,
        };
        report::unwound::apply(
            &mut report,
            &dump,
            &elf_bytes,
            &mut sym,
            graph.as_ref(),
            callers.as_deref(),
            callees.as_deref(),
        )?;
    }
    if let Some(c) = meta.core.filter(|c| c.faulted()) {
        let at = sym.name_address(c.pc);
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
    if let Some(l) = &dump.laps {
        // SysTick ticks are the machine's timer ticks; CYCCNT counts cycles.
        let scale = match l.counter {
            // The machine's timer (SysTick; on ARMv8-A the generic timer).
            wire::LAP_COUNTER_SYSTICK | wire::LAP_COUNTER_GENERIC => crate::analysis::laps::Scale {
                units_per_tick: meta.units_per_tick,
                hz: (meta.timer_hz > 0).then_some(meta.timer_hz as f64),
            },
            wire::LAP_COUNTER_PMCCNTR if meta.board.is_none() => crate::analysis::laps::Scale {
                units_per_tick: pmccntr_units_per_cycle(&meta),
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
        report.laps = Some(laps);
    }
    Ok(report)
}

/// The report's units a tick of the PMU's cycle counter is: QEMU's runs at 1 GHz of virtual
/// time, 2^shift cycles an instruction; a board's counts cycles, the report's unit.
fn pmccntr_units_per_cycle(meta: &RunMeta) -> f64 {
    if meta.board.is_none() {
        1.0 / f64::from(1u32 << meta.icount_shift.min(20))
    } else {
        1.0
    }
}

/// The samples of a histogram: each bin split among the functions whose bytes it holds.
pub(crate) fn hist_samples(
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

/// The report of a saved `--exact` run.
pub(crate) fn load_exact_report(
    dir: &Path,
    meta: &RunMeta,
    opts: report::Options,
) -> Result<report::Report> {
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
    let mut report = report::build_exact(&mut sym, code.as_mut(), facts, &counts, opts);
    let graph_path = dir.join(crate::dump::callgraph::FILE);
    match std::fs::read(&graph_path) {
        Ok(bytes) => {
            let tree = crate::dump::callgraph::parse(&bytes)
                .with_context(|| format!("decoding {}", graph_path.display()))?;
            report::calls::apply(
                &mut report,
                &tree,
                &sym,
                callers.as_deref(),
                callees.as_deref(),
            )?;
        }
        Err(_) if callers.is_some() || callees.is_some() => bail!(
            "this run has no call graph (it was counted through QEMU's exec log, on ARMv8-A, or \
             by an older cargo-sample): `--callers`/`--callees` need a run of `--exact` with the \
             plugin on Cortex-M"
        ),
        Err(_) => {}
    }
    Ok(report)
}

/// What the views ask the report to compute.
pub fn build_options(view: &ViewArgs) -> report::Options {
    report::Options {
        annotate: annotate_count(view),
        bin_split: view.bin_split,
        by_tag: view.by == Some(crate::cli::By::Tag),
        callers: view.callers.clone(),
        callees: view.callees.clone(),
        timeline: view.format == crate::cli::Format::Firefox,
    }
}

/// Views that cannot work, refused before anything is built or run.
pub(crate) fn check_view(view: &ViewArgs) -> Result<()> {
    if view.open && !matches!(view.format, Format::Html | Format::Svg) {
        bail!(
            "--open opens a page in the browser: add `--format html` (the report) or `--format svg` \
             (the flame graph)"
        );
    }
    Ok(())
}

/// The annotated functions a view asks for: `--annotate N`, or the 5 hottest in the HTML
/// report, which has room for them.
fn annotate_count(view: &ViewArgs) -> usize {
    match (view.annotate, view.format) {
        (Some(n), _) => n,
        (None, Format::Html) => 5,
        (None, _) => 0,
    }
}

/// Print (or write) the report as the view asks. `beside`: where a page goes when it has no
/// `-o` and cannot go to standard output (a terminal, or `--open`): the run's directory.
pub(crate) fn print_report(
    report: &report::Report,
    view: &ViewArgs,
    beside: Option<&Path>,
) -> Result<()> {
    check_view(view)?;
    let bytes: Vec<u8> = match view.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)?;
            s.push('\n');
            s.into_bytes()
        }
        Format::Text => {
            let mut t = if report.samples == Some(0) && report.laps.is_some() {
                // Laps only (`--laps`): no profile to show.
                String::new()
            } else {
                text::render(
                    report,
                    text::Options {
                        lines: view.lines,
                        tree: view.tree,
                        top: view.top,
                        min_percent: view.min_percent,
                    },
                )
            };
            if let Some(l) = &report.laps {
                if !t.is_empty() {
                    t.push('\n');
                }
                t.push_str(&crate::analysis::laps::render(l, &report.unit));
            }
            t.into_bytes()
        }
        Format::Folded => report::formats::folded(report).into_bytes(),
        Format::Svg => report::formats::svg(report)?,
        Format::Pprof => report::formats::pprof(report)?,
        Format::Callgrind => report::calls::callgrind(report)?.into_bytes(),
        Format::Firefox => report::timeline::firefox(report)?,
        Format::Html => report::html::html(report)?,
    };
    // Only the text report is painted; its codes never reach a file, and reach standard
    // output only when that stream takes colour.
    let painted = view.format == Format::Text;
    let page = match view.format {
        Format::Html => Some("report.html"),
        Format::Svg => Some("flamegraph.svg"),
        _ => None,
    };
    use std::io::IsTerminal;
    let output = match (&view.output, page) {
        (Some(path), _) => Some(path.clone()),
        // A page is for a browser: to a file beside the run when it would otherwise be
        // shown as text, or has to be opened.
        (None, Some(name)) if view.open || std::io::stdout().is_terminal() => Some(
            beside
                .map(Path::to_path_buf)
                .unwrap_or_else(std::env::temp_dir)
                .join(name),
        ),
        _ => None,
    };
    match &output {
        Some(path) => {
            let bytes = if painted {
                term::plain(&String::from_utf8_lossy(&bytes)).into_bytes()
            } else {
                bytes
            };
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
            term::status("Wrote", path.display());
            if view.open {
                open_in_browser(path)?;
            } else if view.output.is_none() {
                term::note("open it with `--open`, or in any browser");
            }
        }
        None => {
            use std::io::Write;
            if view.format == Format::Pprof && std::io::stdout().is_terminal() {
                bail!(
                    "pprof output is binary: write it to a file with `-o profile.pb.gz` (then `pprof -http=: profile.pb.gz`)"
                );
            }
            if painted {
                let mut out = anstream::stdout().lock();
                out.write_all(&bytes)?;
            } else {
                std::io::stdout().lock().write_all(&bytes)?;
            }
        }
    }
    Ok(())
}

/// Open a page: with `$BROWSER` when set (as `cargo doc --open` does), else the desktop's
/// default browser.
fn open_in_browser(path: &Path) -> Result<()> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        let status = std::process::Command::new(&browser)
            .arg(&path)
            .status()
            .with_context(|| {
                format!(
                    "starting the browser `{}` (from $BROWSER) on {}",
                    browser.to_string_lossy(),
                    path.display()
                )
            })?;
        if !status.success() {
            bail!(
                "the browser `{}` (from $BROWSER) failed ({status}) on {}",
                browser.to_string_lossy(),
                path.display()
            );
        }
    } else {
        opener::open(&path).with_context(|| {
            format!(
                "opening {} in the browser (set $BROWSER to choose one)",
                path.display()
            )
        })?;
    }
    term::status("Opened", path.display());
    Ok(())
}

/// A run by directory (anywhere, no workspace needed), or by name or `latest` among the runs of
/// `runs_dir` (default: the current workspace's).
pub(crate) fn find_run(runs_dir: Option<&Path>, which: &str) -> Result<PathBuf> {
    let direct = Path::new(which);
    if direct.join(runs::META).is_file() {
        return Ok(direct.to_path_buf());
    }
    let runs_dir = match runs_dir {
        Some(d) => d.to_path_buf(),
        None => default_runs_dir()?,
    };
    runs::find(&runs_dir, which)
}

pub(crate) fn default_runs_dir() -> Result<PathBuf> {
    let meta = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context(
            "finding the saved runs of the current workspace: run this inside the firmware's \
             crate, give a run directory, or pass --runs-dir",
        )?;
    Ok(runs::runs_dir(
        &meta
            .target_directory
            .into_std_path_buf()
            .join("cargo-sample"),
    ))
}
