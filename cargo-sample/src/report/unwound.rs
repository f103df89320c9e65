//! The call stacks of a sampled run (`--stacks`): each sample's stack unwound by the ELF's
//! call-frame information, then the views the exact call graph has — inclusive shares with
//! their intervals, `--callers`/`--callees`, real stacks for folded stacks, flamegraphs, pprof
//! and callgrind — and, with `--truth`, the exact graph's shares beside them.

use std::collections::HashMap;

use anyhow::Result;

use crate::analysis::callgraph::{self, Stacks};
use crate::analysis::stats::{Z95, wilson};
use crate::dump::Dump;
use crate::dump::callgraph::Tree;
use crate::image::symbolize::Symbolizer;
use crate::image::unwind::{End, Kind, Unwinder};
use crate::report::model::{Diagnostic, EdgeRow, Finding, OUTSIDE, Report, Row, Unwinding};

/// The outermost frame of a stack that the window cut short.
pub const TRUNCATED: &str = "[stack cut short by the window]";
/// The outermost frame of a stack that could not be unwound further.
pub const FAILED: &str = "[unwinding failed]";
/// What the exact graph names sampler-rt's own code (left out of the comparison).
const SAMPLER: &str = "[sampler-rt]";

/// A sampled run's call stacks: by function (for inclusive shares, callers and callees, and
/// the comparison with the exact graph) and with the inlined frames at every level (for
/// folded stacks, flamegraphs, pprof and the tree).
pub struct Unwound {
    pub functions: Stacks,
    /// Outermost first; each frame is its function and then what was inlined into it at the
    /// call site (or, for the sampled frame, at the sampled address).
    pub inlined: Vec<(Vec<String>, u64)>,
    pub how: Unwinding,
    /// The samples in order: each one's index into `stacks` (inlined frames included).
    pub timeline: super::timeline::Timeline,
}

/// A sampled stack as unwound: how it was cut (if it was) and the addresses looked up,
/// outermost first.
type StackKey = (Option<&'static str>, Vec<u32>);

/// Addresses from here up stand for rows without code (see `held_off`, `[sleeping]`).
const PSEUDO_ADDRESSES: u32 = 0xFFFF_FF00;

/// Unwind every sample of `dump` and build its call stacks, outermost first. A sample whose
/// address is a row without code is a stack of that row alone.
pub fn unwind_all(dump: &Dump, u: &mut Unwinder, sym: &mut Symbolizer) -> Unwound {
    let mut how = Unwinding {
        window_words: dump
            .stacks
            .iter()
            .map(|s| s.window.len() as u32)
            .max()
            .unwrap_or(0),
        ..Unwinding::default()
    };
    // Samples with the same frames (the addresses looked up, outermost first, and how the
    // stack ended) are named once.
    let mut distinct: HashMap<StackKey, usize> = HashMap::new();
    let mut keys: Vec<(StackKey, u64)> = Vec::new();
    let mut order: Vec<u32> = Vec::with_capacity(dump.pcs.len());
    let mut failed: HashMap<String, u64> = HashMap::new();
    for (pc, st) in dump.pcs.iter().zip(&dump.stacks) {
        // A row of its own, no code (the held-off rows, `[sleeping]`): its own root.
        if *pc >= PSEUDO_ADDRESSES {
            how.samples += 1;
            how.complete += 1;
            let i = *distinct.entry((None, vec![*pc])).or_insert_with_key(|k| {
                keys.push((k.clone(), 0));
                keys.len() - 1
            });
            keys[i].1 += 1;
            order.push(i as u32);
            continue;
        }
        let w = u.unwind(&st.context(*pc));
        how.samples += 1;
        how.prologue_frames += w.prologue as u64;
        // The low byte of the sampler's EXC_RETURN (bits 7..5 always set).
        let sampled_fp = st.exc_return & 0xE0 == 0xE0 && st.exc_return & 0x10 == 0;
        how.fp_extended_frames += u64::from(w.fp_frames) + u64::from(sampled_fp);
        let cut = match &w.end {
            End::Complete => {
                how.complete += 1;
                None
            }
            End::HandlerRoot => {
                how.handler_root += 1;
                None
            }
            End::Truncated => {
                how.truncated += 1;
                Some(TRUNCATED)
            }
            End::Failed(why) => {
                *failed.entry(why.clone()).or_default() += 1;
                Some(FAILED)
            }
        };
        for f in &w.frames {
            match f.kind {
                Kind::TailCall => how.tail_calls += 1,
                Kind::Interrupted => how.exception_frames += 1,
                _ => {}
            }
        }
        let pcs: Vec<u32> = w.frames.iter().rev().map(|f| f.pc).collect();
        let i = *distinct.entry((cut, pcs)).or_insert_with_key(|k| {
            keys.push((k.clone(), 0));
            keys.len() - 1
        });
        keys[i].1 += 1;
        order.push(i as u32);
    }
    let mut failed: Vec<(String, u64)> = failed.into_iter().collect();
    failed.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    how.failed = failed;

    let mut chains: HashMap<u32, Vec<String>> = HashMap::new();
    let mut by_function: HashMap<Vec<String>, u64> = HashMap::new();
    let mut by_inline: HashMap<Vec<String>, u64> = HashMap::new();
    let mut inline_of: Vec<Vec<String>> = Vec::with_capacity(keys.len());
    for ((cut, pcs), n) in keys {
        let mut names: Vec<String> = Vec::with_capacity(pcs.len() + 1);
        let mut inline: Vec<String> = Vec::with_capacity(2 * pcs.len() + 1);
        if let Some(c) = cut {
            names.push(c.to_owned());
            inline.push(c.to_owned());
        }
        for pc in pcs {
            let chain = chains
                .entry(pc)
                .or_insert_with(|| super::tree::chain(sym, pc, OUTSIDE));
            names.push(chain[0].clone());
            inline.extend(chain.iter().cloned());
        }
        *by_function.entry(names).or_default() += n;
        *by_inline.entry(inline.clone()).or_default() += n;
        inline_of.push(inline);
    }
    let sorted = |m: HashMap<Vec<String>, u64>| {
        let mut v: Vec<(Vec<String>, u64)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    };
    Unwound {
        functions: Stacks {
            stacks: sorted(by_function),
            calls: HashMap::new(),
            total: how.samples,
        },
        inlined: sorted(by_inline),
        how,
        timeline: super::timeline::Timeline {
            stacks: inline_of,
            samples: order,
            ..Default::default()
        },
    }
}

/// The exact graph's stacks as unwinding would see them (see
/// [`callgraph::observable_stacks`]), without sampler-rt's own code (its interrupt is the
/// measurement, not the program); what it called is a stack of its own.
fn exact_stacks(tree: &Tree, sym: &Symbolizer, u: &Unwinder) -> Stacks {
    let mut s = callgraph::observable_stacks(
        tree,
        |pc| {
            if sym.is_sampler(pc as u64) {
                SAMPLER.to_owned()
            } else {
                sym.function_of(pc as u64).unwrap_or(OUTSIDE).to_owned()
            }
        },
        // The site is inside the call instruction: a 4-byte `bl` ends 2 bytes after it.
        |site, entry| u.bl_target(site.wrapping_add(2)) == Some(entry),
    );
    // sampler-rt's own instructions are left out; what it called (`memset` zeroing its ring)
    // stays, as a stack of its own: the exact self shares count those instructions too, and
    // the callers above the sampler's frame do not hold them.
    let stacks = std::mem::take(&mut s.stacks);
    let mut kept: HashMap<Vec<String>, u64> = HashMap::new();
    for (chain, n) in stacks {
        let below = match chain.iter().rposition(|f| f == SAMPLER) {
            Some(i) => chain[i + 1..].to_vec(),
            None => chain,
        };
        if !below.is_empty() {
            *kept.entry(below).or_default() += n;
        }
    }
    s.stacks = kept.into_iter().collect();
    s.stacks
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    s.total = s.stacks.iter().map(|x| x.1).sum();
    s
}

/// Add the sampled stacks' views to `r`, and the exact graph's shares when the run has one.
pub fn apply(
    r: &mut Report,
    dump: &Dump,
    elf: &[u8],
    sym: &mut Symbolizer,
    graph: Option<&Tree>,
    callers: Option<&str>,
    callees: Option<&str>,
) -> Result<()> {
    let functions = sym.ranges();
    let reset = crate::image::elf::vectors(elf)
        .iter()
        .find(|v| v.0 == 1)
        .map(|v| v.1);
    let mut u = Unwinder::new(elf, &functions, reset);
    let Unwound {
        functions: s,
        inlined,
        how,
        timeline,
    } = unwind_all(dump, &mut u, sym);
    // The real stacks in the timeline, its threads kept.
    if let Some(t) = r.timeline.as_mut() {
        t.stacks = timeline.stacks;
        t.samples = timeline.samples;
    }
    let n = s.total;
    if let Some(t) = graph {
        let name = |pc: u32| sym.function_of(pc as u64).unwrap_or(OUTSIDE).to_owned();
        super::calls::verify(t, &callgraph::stacks(t, name), name)?;
    }
    let exact = graph.map(|t| exact_stacks(t, sym, &u));
    let share = |k: u64| 100.0 * k as f64 / n.max(1) as f64;
    let interval = |k: u64| {
        let (lo, hi) = wilson(k, n, Z95);
        [100.0 * lo, 100.0 * hi]
    };
    let inc = callgraph::inclusive(&s);
    let exact_inc = exact.as_ref().map(callgraph::inclusive);
    // Of the same whole as the exact self shares (every instruction counted, sampler-rt's own
    // left out), so that the two columns compare; the graph's own total is only the fallback.
    let exact_total = exact
        .as_ref()
        .map(|e| r.exact_instructions.unwrap_or(e.total).max(1) as f64);
    // Functions that were only ever callers (never the sampled frame: `main`, a dispatcher)
    // get a row too, for their inclusive share.
    let mut only_callers: Vec<&String> = inc
        .keys()
        .filter(|name| !name.starts_with('[') && !r.functions.iter().any(|f| &f.name == *name))
        .collect();
    only_callers.sort();
    // (With the exact count: none of its own either, or it would have a row.)
    let none_exact = r.exact_instructions.map(|_| 0.0);
    for name in only_callers {
        r.functions.push(Row {
            name: name.clone(),
            samples: Some(0),
            ci95: Some(interval(0)),
            exact_percent: none_exact,
            error_points: none_exact,
            error_sigma: none_exact,
            ..Row::default()
        });
    }
    // Stacks that stopped short of their root may hold any function above the cut: every
    // inclusive share is then a lower bound, and at most that plus the stacks cut short.
    let cut = how.samples.saturating_sub(how.complete + how.handler_root);
    for row in &mut r.functions {
        let k = inc.get(&row.name).map(|x| x.0).unwrap_or(0);
        row.inclusive_samples = Some(k);
        row.inclusive_percent = Some(share(k));
        row.inclusive_ci95 = Some(interval(k));
        row.inclusive_at_most_percent = (cut > 0).then(|| share(k + cut).min(100.0));
        // sampler-rt's own code is out of the exact graph: nothing to judge its row against.
        let sampler = sym.is_sampler_function(&row.name);
        if let (Some(e), Some(t), false) = (&exact_inc, exact_total, sampler) {
            let x = e.get(&row.name).map(|x| x.0).unwrap_or(0);
            row.exact_inclusive_percent = Some(100.0 * x as f64 / t);
        }
    }
    let edge_rows = |f: &str, up: bool| -> Vec<EdgeRow> {
        let exact_edges: HashMap<String, u64> = exact
            .as_ref()
            .map(|e| callgraph::edges(e, f, up).into_iter().collect())
            .unwrap_or_default();
        callgraph::edges(&s, f, up)
            .into_iter()
            .map(|(name, k)| EdgeRow {
                exact_percent: exact_total
                    .map(|t| 100.0 * exact_edges.get(&name).copied().unwrap_or(0) as f64 / t),
                name,
                instructions: None,
                samples: Some(k),
                percent: share(k),
                ci95: Some(interval(k)),
                calls: None,
                lower_bound: cut > 0,
            })
            .collect()
    };
    let names: Vec<&String> = inc.keys().collect();
    super::calls::set_edges(r, &s, &names, callers, callees, edge_rows)?;
    let rooted = how.complete + how.handler_root;
    if cut > 0 {
        let mut why: Vec<String> = Vec::new();
        if how.truncated > 0 {
            why.push(format!(
                "{} cut short by the {}-word window (a larger `--stacks WORDS` keeps more)",
                how.truncated, how.window_words
            ));
        }
        for (reason, k) in how.failed.iter().take(3) {
            why.push(format!("{k} failed: {reason}"));
        }
        let message = format!(
            "{cut} of {} stacks ({:.1} %) stopped short of their root: {}. Inclusive shares and \
             callers count what was unwound, so each is a lower bound (marked `≥`; the JSON \
             gives `inclusive_at_most_percent`), and the rest shows as `{TRUNCATED}` or \
             `{FAILED}`",
            how.samples,
            100.0 * cut as f64 / how.samples as f64,
            why.join("; ")
        );
        let share_cut = 100.0 * cut as f64 / how.samples as f64;
        // Below 99 % rooted the inclusive view misleads; above, it is worth knowing.
        let d = if rooted * 100 < how.samples * 99 {
            r.warnings.push(message.clone());
            Diagnostic::warning(Finding::CutStacks, message)
        } else {
            Diagnostic::note(Finding::CutStacks, message)
        };
        r.diagnostics.push(d.at(share_cut, Vec::new()));
    }
    // The tree of real callers, with the inlined frames below each.
    r.tree = super::tree::from_stacks(&inlined, n);
    r.inline_stacks = inlined
        .into_iter()
        .map(|(chain, count)| super::model::Stack { chain, count })
        .collect();
    r.unwinding = Some(how);
    Ok(())
}
