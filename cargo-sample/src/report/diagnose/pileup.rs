//! Samples that pile up on one instruction because the sampling interrupt could not be taken
//! before it (interrupts masked, a handler running, the core asleep), told apart by what stands
//! before it, with the masked region's owner and callers.

use std::collections::{HashMap, HashSet};

use crate::image::CodeRange;
use crate::image::disasm::{Code, Insn, Kind};
use crate::image::symbolize::Symbolizer;
use crate::report::model::Input;
use crate::report::model::{Diagnostic, Finding, OUTSIDE};

/// Instructions holding far more samples than the instruction before them, which runs as
/// often. After masking or sleeping instructions the cause is in the code; after anything
/// else a pile is named only when chance cannot explain it (a binomial test against an even
/// split, or at most 4 : 1 where instructions differ in cost, at a false-alarm rate shared
/// among every sampled instruction), and only where something can hold the sampler off.
pub(crate) fn pile_ups(
    input: &Input<'_>,
    sym: &mut Symbolizer,
    code: &mut Code,
    d: &mut Vec<Diagnostic>,
) {
    let total: u64 = input.per_pc.values().sum();
    let mut found = piles(input, sym, code, total);
    found.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    for (kind, pc, s, prev, name) in found {
        let share = 100.0 * s as f64 / total as f64;
        let (msg, explained) = describe(input, sym, code, (kind, pc, s, &prev, &name), share);
        let diag_kind = match kind {
            Kind::Unmask | Kind::MaskWrite => Finding::MaskedSkid,
            Kind::Sleep => Finding::Asleep,
            _ => Finding::HeldOff,
        };
        let diag = if kind == Kind::Sleep {
            Diagnostic::note(diag_kind, msg)
        } else {
            Diagnostic::warning(diag_kind, msg)
        };
        let mut diag = diag.at(share, vec![pc]);
        diag.functions = explained;
        d.push(diag);
    }
}

/// A pile of samples: what stands before it, its address, its samples, the instruction
/// before it and its function.
type Pile = (Kind, u32, u64, Insn, String);

/// The instructions whose samples pile up beyond what the instruction before them explains.
fn piles(input: &Input<'_>, sym: &mut Symbolizer, code: &mut Code, total: u64) -> Vec<Pile> {
    // Group the sampled addresses by function.
    let mut by_function: HashMap<CodeRange, Vec<u32>> = HashMap::new();
    for &pc in input.per_pc.keys() {
        if let Some(r) = sym.range_of(pc as u64) {
            by_function.entry(r).or_default().push(pc);
        }
    }
    // What can hold the sampling interrupt off besides masking and sleep: a handler as urgent
    // as the sampler (unknown without the priorities the firmware sends).
    let holdable = input.urgent.is_none_or(|u| !u.is_empty());
    // Under an even split (QEMU: every instruction takes the same time), or at most 4 : 1
    // (cycles on silicon), with the false-alarm rate shared among the instructions sampled.
    let even = if input.facts.unit == "instructions" {
        0.5
    } else {
        0.8
    };
    let alpha = crate::analysis::stats::FALSE_ALARM / input.per_pc.len().max(1) as f64;
    let chance = |s: u64, before: u64| {
        crate::analysis::stats::binomial_at_least(s, s + before, even) >= alpha
    };
    let mut found: Vec<Pile> = Vec::new();
    for (range, pcs) in by_function {
        let insns = code.of(range).to_vec();
        let targets: HashSet<u32> = insns.iter().filter_map(|i| i.target).collect();
        for pc in pcs {
            let s = input.per_pc[&pc];
            if s < 5 {
                continue;
            }
            let Some(idx) = insns.iter().position(|i| i.addr == pc) else {
                continue;
            };
            let Some(prev) = idx.checked_sub(1).map(|j| insns[j].clone()) else {
                continue;
            };
            let before = input.per_pc.get(&prev.addr).copied().unwrap_or(0);
            let share = 100.0 * s as f64 / total as f64;
            let basepri = prev.text.to_ascii_lowercase().contains("basepri");
            let kind = match prev.kind {
                // BASEPRI never masks priority 0, and `basepri_max` only raises it: no
                // sample waits for either.
                Kind::MaskWrite
                    if basepri
                        && (input.facts.priority == 0
                            || prev.text.to_ascii_lowercase().contains("basepri_max")) =>
                {
                    continue;
                }
                Kind::Unmask | Kind::MaskWrite | Kind::Sleep => prev.kind,
                // Other causes need a real pile: in straight-line code, many times the samples
                // of the instruction before, and a share worth mentioning.
                Kind::Store | Kind::Other | Kind::Svc
                    if holdable
                        && !targets.contains(&pc)
                        && s >= 10
                        && share >= 0.5
                        && s > 4 * (before + 1) =>
                {
                    prev.kind
                }
                _ => continue,
            };
            if matches!(kind, Kind::Unmask | Kind::MaskWrite | Kind::Sleep)
                && (share < 0.5 || s <= 2 * (before + 1))
            {
                continue;
            }
            // Masking and sleeping instructions are there to see: a pile after one has its
            // cause in the code. A pile after anything else must be beyond chance.
            if !matches!(kind, Kind::Unmask | Kind::MaskWrite | Kind::Sleep) && chance(s, before) {
                continue;
            }
            let name = sym.function_of(pc as u64).unwrap_or(OUTSIDE).to_owned();
            // sampler-rt's Embassy runtime masks interrupts around each event it appends or
            // folds: the samples held off land in the same function, whose row is right, and
            // nothing in the application is to blame.
            if matches!(kind, Kind::Unmask | Kind::MaskWrite)
                && (name.starts_with("sampler_rt_task_") || name.starts_with("sampler_rt::tasks::"))
            {
                continue;
            }
            found.push((kind, pc, s, prev, name));
        }
    }
    found
}

/// What a pile says, and the functions it explains.
fn describe(
    input: &Input<'_>,
    sym: &mut Symbolizer,
    code: &mut Code,
    (kind, pc, s, prev, name): (Kind, u32, u64, &Insn, &str),
    share: f64,
) -> (String, Vec<String>) {
    let mut explained = Vec::new();
    let at = format!("{name} at {pc:#x}");
    let msg = match kind {
        Kind::MaskWrite if prev.text.to_ascii_lowercase().contains("basepri") => {
            let (region, names) = masked_region(sym, code, pc, prev);
            explained = names;
            let task = rtic_task_at(sym, code, pc);
            let what = match &task {
                Some(t) => format!(
                    "the end of a `lock` in RTIC's {t}: the lock raised BASEPRI to the \
                         resource's ceiling"
                ),
                None => "the end of a critical section that raised BASEPRI".to_owned(),
            };
            format!(
                "{share:.2} % of the samples ({s}) are on {at}, right after `{}` restores \
                     BASEPRI, {what}. A sampling interrupt that BASEPRI masks waits, and lands \
                     here: these samples are the time of the critical section{region}, not of \
                     the instruction they land on. BASEPRI masks only interrupts of its \
                     priority and less urgent ones, and the sampler runs at {:#04x}: at priority \
                     0 (`--priority 0`, the default) no BASEPRI section holds it back",
                prev.text, input.facts.priority
            )
        }
        Kind::Unmask | Kind::MaskWrite => {
            let (region, names) = masked_region(sym, code, pc, prev);
            explained = names;
            format!(
                "{share:.2} % of the samples ({s}) are on {at}, the instruction right after \
                     `{}` re-enables interrupts: a sampling interrupt that fires while interrupts \
                     are masked waits, and lands here. These samples are the time of the masked \
                     region{region}, not of the instruction they land on; and a region longer than \
                     the period loses samples as well. No sampling setting changes this (a masked \
                     region holds off every interrupt): for the time really spent inside the \
                     region, count it exactly with `--truth` (the exact share beside each row, in \
                     QEMU) or `--exact`, or time it with laps",
                prev.text
            )
        }
        Kind::Sleep => format!(
            "{share:.2} % of the samples ({s}) found the core asleep in `{}` (they are on {at}, \
                 the instruction after it): that is idle time, not work done by {name}",
            prev.text
        ),
        _ => {
            let handlers = match input.urgent {
                Some(names) if !names.is_empty() => format!(
                    " (as urgent as the sampler in this run: {})",
                    names.join(", ")
                ),
                _ => handler_names(input, sym, code),
            };
            let cause = if prev.kind == Kind::Store {
                format!(
                    "after a store (`{}`) that may pend an interrupt whose handler the sampler \
                         cannot preempt",
                    prev.text
                )
            } else if prev.kind == Kind::Svc {
                format!("after `{}`, a supervisor call", prev.text)
            } else {
                format!("after `{}`", prev.text)
            };
            let fix = if input.facts.priority == 0 {
                "Nothing samples more urgently than priority 0: give the handler a less \
                     urgent priority where the application allows it, or count its time \
                     exactly with `--truth`"
            } else {
                "Sample at a more urgent priority (`--priority`, 0 is the most urgent and \
                     the default)"
            };
            format!(
                "{share:.2} % of the samples ({s}) pile up on {at}, {cause}: more than 4 times the \
                     samples of the instruction before it, which runs as often, far beyond chance. The \
                     sampling interrupt was held off and was taken here, so this is the time of code the \
                     sampler could not see — most often an interrupt handler of the sampler's priority \
                     or more urgent{handlers}. {fix}"
            )
        }
    };
    (msg, explained)
}

/// Where interrupts were masked: the function that unmasks, and when that is a small helper
/// (`irq_on`, an `enable()`), the functions that call it.
/// Where interrupts were masked, in words, and the functions that hold the region: the one
/// that unmasks, and when that is a small helper (`irq_on`, an `enable()`), the functions that
/// call it.
pub(crate) fn masked_region(
    sym: &mut Symbolizer,
    code: &mut Code,
    pc: u32,
    unmask: &Insn,
) -> (String, Vec<String>) {
    let Some(CodeRange { start, end }) = sym.range_of(pc as u64) else {
        return (String::new(), Vec::new());
    };
    let owner = sym.function_of(pc as u64).unwrap_or("?").to_owned();
    let insns = code.function(start as u32, end as u32);
    let small = insns.len() <= 8;
    // A function that masks before it unmasks holds the region itself, however small.
    let masks_too = insns
        .iter()
        .any(|i| i.addr < unmask.addr && i.kind == Kind::Mask);
    if !small || masks_too {
        // The region's time is also that of the functions it calls (and those they end in
        // with a branch): their samples wait for the unmask as well.
        let from = insns
            .iter()
            .rev()
            .find(|i| i.addr < unmask.addr && i.kind == Kind::Mask)
            .map_or(start as u32, |i| i.addr);
        let mut names = vec![owner.clone()];
        let targets: Vec<u32> = insns
            .iter()
            .filter(|i| i.addr > from && i.addr < unmask.addr)
            .filter_map(|i| i.target)
            .filter(|&t| !(start..end).contains(&u64::from(t)))
            .collect();
        for t in targets {
            let mut at = t;
            for _ in 0..2 {
                let Some(r) = sym.range_of(u64::from(at)) else {
                    break;
                };
                let Some(name) = sym.function_of(r.start).map(str::to_owned) else {
                    break;
                };
                if !names.contains(&name) {
                    names.push(name);
                }
                // A function that ends in a branch elsewhere (a tail call) runs that too.
                let body = code.function(r.start as u32, r.end as u32);
                match body.last().and_then(|i| i.target) {
                    Some(next) if !(r.start..r.end).contains(&u64::from(next)) => at = next,
                    _ => break,
                }
            }
        }
        let calls = if names.len() > 1 {
            format!(", with what it calls there: {}", names[1..].join(", "))
        } else {
            String::new()
        };
        return (
            format!(" in {owner} (it ends at {:#x}{calls})", unmask.addr),
            names,
        );
    }
    let callers = callers_of(sym, code, start as u32);
    let text = if callers.is_empty() {
        format!(" that {owner} ends")
    } else {
        format!(
            " that {owner} ends, in its caller{} {}",
            if callers.len() > 1 { "s" } else { "" },
            callers.join(", ")
        )
    };
    let mut names = vec![owner];
    names.extend(callers);
    (text, names)
}

/// In an RTIC application, the task whose code holds `pc`: `task \`control\`` (a hardware
/// task's handler, or its own function), `idle`, or the software tasks of a dispatcher.
pub(crate) fn rtic_task_at(sym: &mut Symbolizer, code: &mut Code, pc: u32) -> Option<String> {
    if !crate::image::rtic::is_rtic(sym) {
        return None;
    }
    let start = sym.range_of(pc as u64)?.start;
    let name = sym.function_of(start)?.to_owned();
    if let Some((_, rest)) = name.split_once("::app::") {
        let task = rest.split("::").next().unwrap_or(rest);
        return Some(if task == "idle" {
            "`idle`".to_owned()
        } else {
            format!("task `{task}`")
        });
    }
    let tasks = crate::image::rtic::tasks_of(sym, code, start);
    match (tasks.hardware.as_slice(), tasks.software.as_slice()) {
        ([one], _) => Some(format!("task `{one}` ({name})")),
        ([], [one]) => Some(format!("software task `{one}` ({name})")),
        ([], many) if !many.is_empty() => Some(format!(
            "software tasks {} ({name})",
            many.iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => None,
    }
}

/// Functions with a direct call to `target`.
pub(crate) fn callers_of(sym: &mut Symbolizer, code: &mut Code, target: u32) -> Vec<String> {
    let mut names = Vec::new();
    for (start, end, name) in sym.all_functions() {
        if code.function(start as u32, end as u32).iter().any(|i| {
            // A call, or a tail call: a branch to the start from another function.
            i.target == Some(target)
                && (i.kind == Kind::Call || (i.kind == Kind::Branch && start as u32 != target))
        }) && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

/// ` (handlers in this image: IRQ31, ...)`, the interrupt handlers other than the defaults and
/// the sampler's own.
pub(crate) fn handler_names(input: &Input<'_>, sym: &mut Symbolizer, code: &mut Code) -> String {
    let mut names = Vec::new();
    let rtic = crate::image::rtic::is_rtic(sym);
    for &(n, addr) in input.vectors {
        if n < 2 {
            continue;
        }
        let Some(name) = sym.function_of(addr as u64).map(str::to_owned) else {
            continue;
        };
        // cortex-m-rt's defaults, and the sampler's own entry (or a timer handler that only
        // acknowledges and branches to it).
        let default = matches!(
            name.as_str(),
            "DefaultHandler" | "DefaultHandler_" | "HardFault_"
        );
        let sampler = sym.is_sampler(addr as u64)
            || sym.range_of(addr as u64).is_some_and(|r| {
                code.of(r)
                    .iter()
                    .any(|i| i.target.is_some_and(|t| sym.is_sampler(t as u64)))
                    || code.of(r).iter().any(|i| i.text.contains("sampler"))
            });
        if default || sampler || names.contains(&name) {
            continue;
        }
        // RTIC: the task the handler runs, by its name.
        let named = if rtic {
            crate::image::rtic::tasks_of(sym, code, addr as u64).describe(&name)
        } else {
            None
        };
        names.push(named.unwrap_or(name));
    }
    if names.is_empty() {
        String::new()
    } else {
        format!(" (handlers in this image: {})", names.join(", "))
    }
}
