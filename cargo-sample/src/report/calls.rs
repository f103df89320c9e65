//! Views of the call graph: inclusive shares in the function table, `--callers FN` and
//! `--callees FN`, real stacks for folded stacks and flamegraphs, and the callgrind format.

use std::collections::HashMap;
use std::fmt::Write;

use anyhow::{Result, bail};

use crate::analysis::callgraph;
use crate::dump::callgraph::Tree;
use crate::image::symbolize::Symbolizer;
use crate::report::model::{EdgeRow, Edges, OUTSIDE, Report, Stack};

/// Add what the call graph tells to an exact report: each function's inclusive share, the
/// stacks, the calls per edge, and the edges of `callers` / `callees` when asked.
pub fn apply(
    r: &mut Report,
    tree: &Tree,
    sym: &Symbolizer,
    callers: Option<&str>,
    callees: Option<&str>,
) -> Result<()> {
    let name = |pc: u32| sym.function_of(pc as u64).unwrap_or(OUTSIDE).to_owned();
    let s = callgraph::stacks(tree, name);
    verify(tree, &s, name)?;
    let total = s.total.max(1) as f64;
    let inc = callgraph::inclusive(&s);
    // Calls into each function (an exception's entries for its handler).
    let mut called: HashMap<&str, u64> = HashMap::new();
    for ((_, callee), n) in &s.calls {
        *called.entry(callee.as_str()).or_default() += n;
    }
    for row in &mut r.functions {
        let i = inc.get(&row.name).map(|x| x.0).unwrap_or(0);
        row.inclusive_instructions = Some(i);
        row.inclusive_percent = Some(100.0 * i as f64 / total);
        row.calls = Some(called.get(row.name.as_str()).copied().unwrap_or(0));
    }
    let edge_rows = |f: &str, up: bool| -> Vec<EdgeRow> {
        callgraph::edges(&s, f, up)
            .into_iter()
            .map(|(name, n)| EdgeRow {
                calls: Some(
                    if up {
                        s.calls.get(&(name.clone(), f.to_owned())).copied()
                    } else {
                        s.calls.get(&(f.to_owned(), name.clone())).copied()
                    }
                    .unwrap_or(0),
                ),
                name,
                instructions: Some(n),
                samples: None,
                percent: 100.0 * n as f64 / total,
                ci95: None,
                exact_percent: None,
                lower_bound: false,
            })
            .collect()
    };
    let names: Vec<&String> = inc.keys().collect();
    set_edges(r, &s, &names, callers, callees, edge_rows)?;
    let mut calls: Vec<((String, String), u64)> = s.calls.into_iter().collect();
    calls.sort();
    r.call_counts = calls;
    Ok(())
}

/// Refuse a graph that says what no run can do ([`callgraph::inconsistencies`]): its views
/// would mislead, so they are not shown at all.
pub(crate) fn verify(
    tree: &Tree,
    s: &callgraph::Stacks,
    name: impl FnMut(u32) -> String,
) -> Result<()> {
    let wrong = callgraph::inconsistencies(tree, s, name);
    if !wrong.is_empty() {
        bail!(
            "the exact call graph of this run does not hold together, so none of its views \
             is shown:\n  - {}\nThis is a fault in how cargo-sample follows calls and \
             exceptions, not in the firmware: please report it with the run's directory",
            wrong.join("\n  - ")
        );
    }
    Ok(())
}

/// The edges `--callers FN` / `--callees FN` ask for (rows made by `rows(function, callers)`),
/// and the stacks for folded stacks, flamegraphs and callgrind, from either graph.
pub(crate) fn set_edges(
    r: &mut Report,
    s: &callgraph::Stacks,
    names: &[&String],
    callers: Option<&str>,
    callees: Option<&str>,
    rows: impl Fn(&str, bool) -> Vec<EdgeRow>,
) -> Result<()> {
    for (wanted, up) in [(callers, true), (callees, false)] {
        if let Some(f) = wanted {
            let function = find(names, f)?;
            let rows = rows(&function, up);
            if rows.is_empty() && up {
                bail!(
                    "`{function}` ran, but no stack holds it with a frame above it, so it has no \
                     caller to show: its time was counted where the graph could not follow the \
                     call into it"
                );
            }
            let e = Some(Edges { rows, function });
            if up {
                r.callers = e;
            } else {
                r.callees = e;
            }
        }
    }
    r.call_stacks = s
        .stacks
        .iter()
        .map(|(chain, n)| Stack {
            chain: chain.clone(),
            count: *n,
        })
        .collect();
    Ok(())
}

/// The function `--callers`/`--callees` names: exactly, or the one name that contains it.
pub(crate) fn find(names: &[&String], wanted: &str) -> Result<String> {
    if let Some(n) = names.iter().find(|n| n.as_str() == wanted) {
        return Ok((*n).clone());
    }
    let mut hits: Vec<&&String> = names.iter().filter(|n| n.contains(wanted)).collect();
    hits.sort();
    match hits.as_slice() {
        [one] => Ok((**one).clone()),
        [] => {
            bail!("no function named `{wanted}` ran (names are as the function table shows them)")
        }
        many => bail!(
            "`{wanted}` names {} functions: {}; give more of the name",
            many.len(),
            many.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `--callers` / `--callees` as text.
pub fn render(s: &mut String, e: &Edges, callers: bool, unit: &str) {
    let what = if callers { "callers of" } else { "callees of" };
    // The column holds the report's unit: instructions, or cycles with `--cycles`.
    let counted = if unit.contains("cycles") {
        "cycles"
    } else {
        "instructions"
    };
    let sampled = e.rows.iter().any(|r| r.samples.is_some());
    let truth = e.rows.iter().any(|r| r.exact_percent.is_some());
    let head = if sampled {
        format!(
            "{:>8} {:>17} {:>9}{}   {what} {}",
            "share",
            "95% interval",
            "samples",
            if truth { "    exact" } else { "" },
            e.function
        )
    } else {
        format!(
            "{:>8} {:>14} {:>10}   {what} {}",
            "share", counted, "calls", e.function
        )
    };
    let _ = writeln!(s, "\n{}", crate::term::paint("1", &head));
    for row in &e.rows {
        if sampled {
            let [lo, hi] = row.ci95.unwrap_or([0.0, 0.0]);
            let exact = row
                .exact_percent
                .map(|x| format!(" {x:>7.2}%"))
                .unwrap_or_default();
            let at_least = if row.lower_bound { "≥" } else { " " };
            let _ = writeln!(
                s,
                "{at_least}{:>6.2}% [{lo:>6.2}, {hi:>6.2}]% {:>9}{exact}   {}",
                row.percent,
                row.samples.unwrap_or(0),
                row.name
            );
        } else {
            let _ = writeln!(
                s,
                "{:>7.2}% {:>14} {:>10}   {}",
                row.percent,
                row.instructions.unwrap_or(0),
                row.calls.unwrap_or(0),
                row.name
            );
        }
    }
    if e.rows.is_empty() {
        let _ = writeln!(s, "  (none)");
    }
}

/// The callgrind format (KCacheGrind, QCacheGrind): each function's own instructions, and for
/// each function it called, the calls and the instructions below them.
pub fn callgrind(r: &Report) -> Result<String> {
    if r.call_stacks.is_empty() {
        bail!(
            "`--format callgrind` needs call stacks: run with `--exact` (the QEMU plugin follows \
             every call), or sample with `--stacks`"
        );
    }
    let mut own: HashMap<&str, u64> = HashMap::new();
    // (caller, callee) → instructions below the call, each stack once per edge.
    let mut below: HashMap<(&str, &str), u64> = HashMap::new();
    for st in &r.call_stacks {
        if let Some(leaf) = st.chain.last() {
            *own.entry(leaf).or_default() += st.count;
        }
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for w in st.chain.windows(2) {
            let e = (w[0].as_str(), w[1].as_str());
            if !seen.contains(&e) {
                seen.push(e);
                *below.entry(e).or_default() += st.count;
            }
        }
    }
    let calls: HashMap<(&str, &str), u64> = r
        .call_counts
        .iter()
        .map(|((a, b), n)| ((a.as_str(), b.as_str()), *n))
        .collect();
    let mut fns: Vec<&str> = own
        .keys()
        .copied()
        .chain(below.keys().map(|e| e.0))
        .collect();
    fns.sort();
    fns.dedup();
    let mut s = String::new();
    let _ = writeln!(s, "# callgrind format");
    let _ = writeln!(s, "version: 1");
    let _ = writeln!(s, "creator: cargo-sample");
    let _ = writeln!(s, "cmd: {} on {}", r.facts_firmware(), r.facts_machine());
    let _ = writeln!(s, "positions: line");
    let _ = writeln!(
        s,
        "events: {}",
        if r.mode == crate::runs::Mode::Exact {
            "Instructions"
        } else {
            "Samples"
        }
    );
    let _ = writeln!(s, "summary: {}", own.values().sum::<u64>());
    let mut edges: Vec<(&(&str, &str), &u64)> = below.iter().collect();
    edges.sort();
    for f in fns {
        let _ = writeln!(s, "\nfn={}", f.replace('\n', " "));
        let _ = writeln!(s, "0 {}", own.get(f).copied().unwrap_or(0));
        for ((_, callee), n) in edges.iter().filter(|e| e.0.0 == f) {
            let _ = writeln!(s, "cfn={}", callee.replace('\n', " "));
            let _ = writeln!(
                s,
                "calls={} 0",
                calls.get(&(f, *callee)).copied().unwrap_or(0).max(1)
            );
            let _ = writeln!(s, "0 {n}");
        }
    }
    Ok(s)
}
