//! The exact call graph turned into call stacks of function names: inclusive time, callers
//! and callees, the time per exception, and the checks that keep the graph honest. The file
//! itself is read by [`crate::dump::callgraph`].

use std::collections::HashMap;

use crate::dump::callgraph::Tree;

/// Frames kept in a stack; deeper ones (runaway recursion) are left out in the middle.
const MAX_FRAMES: usize = 256;

/// Call stacks of function names (outermost first) with their instructions, and calls per
/// edge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stacks {
    pub stacks: Vec<(Vec<String>, u64)>,
    /// (caller, callee) → calls (an exception entry counts as a call from what it interrupted).
    pub calls: HashMap<(String, String), u64>,
    pub total: u64,
}

/// Name each context by its functions: the entries of the nodes from the root, then the
/// function of the block when it is not the node's own (reached by a tail call, or without a
/// call the plugin saw). `name` gives a PC's linker-level function.
pub fn stacks(t: &Tree, mut name: impl FnMut(u32) -> String) -> Stacks {
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut name_of = |pc: u32| -> String { names.entry(pc).or_insert_with(|| name(pc)).clone() };
    // Each node's path, outermost first (parents are recorded before their children).
    let mut paths: Vec<Vec<String>> = Vec::with_capacity(t.nodes.len());
    for (i, nd) in t.nodes.iter().enumerate() {
        let mut p = if i == 0 {
            Vec::new()
        } else {
            paths[nd.parent as usize].clone()
        };
        if i > 0 {
            // The function that made the call, when a tail call left it running in the
            // parent's frame (or the root's code: the reset handler).
            if nd.site != 0 {
                let site = name_of(nd.site);
                if p.last() != Some(&site) {
                    p.push(site);
                }
            }
            p.push(name_of(nd.entry));
            if p.len() > MAX_FRAMES {
                // Runaway recursion: the outermost frames, a marker, the innermost.
                let keep = MAX_FRAMES / 4;
                if p[keep].starts_with("[deeper") {
                    p.remove(keep + 1);
                } else {
                    p.drain(keep..keep + 2);
                    p.insert(keep, "[deeper frames left out]".to_owned());
                }
            }
        }
        paths.push(p);
    }
    let mut merged: HashMap<Vec<String>, u64> = HashMap::new();
    let mut total = 0;
    for &(node, pc, n) in &t.counts {
        let mut s = paths[node as usize].clone();
        let f = name_of(pc);
        if s.last() != Some(&f) {
            s.push(f);
        }
        let e = merged.entry(s).or_default();
        *e = e.saturating_add(n);
        total = u64::saturating_add(total, n);
    }
    let mut calls = HashMap::new();
    for (i, nd) in t.nodes.iter().enumerate().skip(1) {
        // The caller is the frame below the callee in its own path: the function at the call
        // site (the reset handler for calls from the root, the function a tail call left
        // running in the parent's frame), else the parent's.
        let p = &paths[i];
        let callee = p.last().cloned().unwrap_or_default();
        let caller = p
            .len()
            .checked_sub(2)
            .map(|j| p[j].clone())
            .unwrap_or_else(|| "[start]".to_owned());
        let e = calls.entry((caller, callee)).or_default();
        *e = u64::saturating_add(*e, nd.calls);
    }
    let mut stacks: Vec<(Vec<String>, u64)> = merged.into_iter().collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Stacks {
        stacks,
        calls,
        total,
    }
}

/// The stacks as unwinding a sampled stack sees them, to compare with sampled stacks: each
/// frame named by the function that was running in it (at its call, or at the counted
/// block), and by the function its call entered only when `direct(site, entry)` says the
/// call was a direct `bl` (an unwinder reads that target back from the code; a call through
/// a register or an exception entry that then tail-called leaves no trace on the stack).
pub fn observable_stacks(
    t: &Tree,
    mut name: impl FnMut(u32) -> String,
    direct: impl Fn(u32, u32) -> bool,
) -> Stacks {
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut name_of = |pc: u32| -> String { names.entry(pc).or_insert_with(|| name(pc)).clone() };
    let push = |p: &mut Vec<String>, f: String| {
        if p.last() != Some(&f) {
            p.push(f);
            if p.len() > MAX_FRAMES {
                p.drain(MAX_FRAMES / 4..MAX_FRAMES / 4 + 1);
            }
        }
    };
    // Per node: its callers' frames and its own entry's name when observable.
    let mut heads: Vec<Vec<String>> = Vec::with_capacity(t.nodes.len());
    for (i, nd) in t.nodes.iter().enumerate() {
        let mut p = if i == 0 {
            Vec::new()
        } else {
            heads[nd.parent as usize].clone()
        };
        if i > 0 {
            if nd.site != 0 {
                let f = name_of(nd.site);
                push(&mut p, f);
            }
            if !nd.exception && nd.site != 0 && direct(nd.site, nd.entry) {
                let f = name_of(nd.entry);
                push(&mut p, f);
            }
        }
        heads.push(p);
    }
    let mut merged: HashMap<Vec<String>, u64> = HashMap::new();
    let mut total = 0;
    for &(node, pc, n) in &t.counts {
        let mut s = heads[node as usize].clone();
        let f = name_of(pc);
        push(&mut s, f);
        let e = merged.entry(s).or_default();
        *e = e.saturating_add(n);
        total = u64::saturating_add(total, n);
    }
    let mut stacks: Vec<(Vec<String>, u64)> = merged.into_iter().collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Stacks {
        stacks,
        calls: HashMap::new(),
        total,
    }
}

/// Per function: instructions in it and below it (each stack counted once, however often the
/// function recurs in it), and in it alone.
pub fn inclusive(s: &Stacks) -> HashMap<String, (u64, u64)> {
    let mut out: HashMap<String, (u64, u64)> = HashMap::new();
    for (stack, n) in &s.stacks {
        let mut seen: Vec<&String> = Vec::with_capacity(stack.len());
        for f in stack {
            if !seen.contains(&f) {
                seen.push(f);
                let e = out.entry(f.clone()).or_default();
                e.0 = e.0.saturating_add(*n);
            }
        }
        if let Some(leaf) = stack.last() {
            let e = out.entry(leaf.clone()).or_default();
            e.1 = e.1.saturating_add(*n);
        }
    }
    out
}

/// The edges into `f` (callers) or out of it (callees): the other function and the
/// instructions of `f`'s time (callers) or the callee's time under `f` (callees) on that
/// edge, each stack counted once per edge.
pub fn edges(s: &Stacks, f: &str, callers: bool) -> Vec<(String, u64)> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for (stack, n) in &s.stacks {
        let mut seen: Vec<&String> = Vec::new();
        for w in stack.windows(2) {
            let (other, hit) = if callers {
                (&w[0], w[1] == f)
            } else {
                (&w[1], w[0] == f)
            };
            if hit && !seen.contains(&other) {
                seen.push(other);
                let e = out.entry(other.clone()).or_default();
                *e = e.saturating_add(*n);
            }
        }
        // Called from nowhere the plugin followed (the reset handler, the root).
        if callers && stack.first().is_some_and(|g| g == f) {
            let e = out.entry("[start]".to_owned()).or_default();
            *e = e.saturating_add(*n);
        }
    }
    let mut v: Vec<(String, u64)> = out.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// What a recorded graph says that no run can do, in words: an exception entered while the
/// same exception is still running (the core never preempts an exception with itself, so one
/// was left open: its return was missed), a function whose time below it exceeds the run or
/// falls short of its own. Empty when the graph holds. `name` gives a PC's function.
pub fn inconsistencies(t: &Tree, s: &Stacks, mut name: impl FnMut(u32) -> String) -> Vec<String> {
    let mut out = Vec::new();
    // Per exception node: the entries of the exceptions open around it.
    let mut reentered: HashMap<u32, u64> = HashMap::new();
    for nd in t.nodes.iter().skip(1) {
        if !nd.exception {
            continue;
        }
        let mut up = nd.parent as usize;
        while up != 0 {
            let a = &t.nodes[up];
            if a.exception && a.entry == nd.entry {
                *reentered.entry(nd.entry).or_default() += nd.calls.max(1);
                break;
            }
            up = a.parent as usize;
        }
    }
    let mut reentered: Vec<(u32, u64)> = reentered.into_iter().collect();
    reentered.sort_unstable();
    for (entry, n) in reentered {
        out.push(format!(
            "`{}` was entered {n} times while it was still running, which the core never does: \
             an earlier entry's return was not followed",
            name(entry)
        ));
    }
    for (f, (inc, own)) in inclusive(s) {
        if inc > s.total || own > inc {
            out.push(format!(
                "`{f}` has {inc} instructions in it and below it, {own} in it alone, in a run \
                 of {}",
                s.total
            ));
        }
    }
    out.sort();
    out
}

/// Thread mode's instructions per RTOS task: keyed by the entry of the task's first run (the
/// innermost thread node above each count; 0 for code outside every task, such as `main`
/// before the scheduler starts). Empty when the run had no task switch.
pub fn per_thread(t: &Tree) -> HashMap<u32, u64> {
    if !t.nodes.iter().any(|n| n.thread) {
        return HashMap::new();
    }
    // Per node: whether an exception is open around it, and its thread.
    let mut ctx: Vec<(bool, u32)> = Vec::with_capacity(t.nodes.len());
    for (i, nd) in t.nodes.iter().enumerate() {
        let up = if i == 0 {
            (false, 0)
        } else {
            ctx[nd.parent as usize]
        };
        ctx.push(match () {
            _ if i == 0 => (false, 0),
            _ if nd.exception => (true, up.1),
            _ if nd.thread => (up.0, nd.entry),
            _ => up,
        });
    }
    let mut out: HashMap<u32, u64> = HashMap::new();
    for &(node, _, n) in &t.counts {
        let (in_exception, thread) = ctx[node as usize];
        if !in_exception {
            *out.entry(thread).or_default() += n;
        }
    }
    out
}

/// Instructions per exception, each counted in the innermost exception open when it ran (the
/// time an exception preempted is its own), keyed by the handler's entry; 0 for thread mode.
/// What QEMU's exec log counts per exception, from the graph instead.
pub fn per_exception(t: &Tree) -> HashMap<u32, u64> {
    // The innermost exception around each node (nodes come after their parents).
    let mut inner: Vec<u32> = Vec::with_capacity(t.nodes.len());
    for (i, nd) in t.nodes.iter().enumerate() {
        inner.push(match i {
            0 => 0,
            _ if nd.exception => nd.entry,
            _ => inner[nd.parent as usize],
        });
    }
    let mut out: HashMap<u32, u64> = HashMap::new();
    for &(node, _, n) in &t.counts {
        *out.entry(inner[node as usize]).or_default() += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::callgraph::{MAGIC, MAGIC_V1, parse};

    /// A version-1 file (no call sites).
    fn file(nodes: &[(u32, u32, u32, u64)], counts: &[(u32, u32, u64)]) -> Vec<u8> {
        let mut b = MAGIC_V1.to_vec();
        b.extend((nodes.len() as u32).to_le_bytes());
        for &(p, e, f, c) in nodes {
            b.extend(p.to_le_bytes());
            b.extend(e.to_le_bytes());
            b.extend(f.to_le_bytes());
            b.extend(c.to_le_bytes());
        }
        b.extend((counts.len() as u32).to_le_bytes());
        for &(n, pc, k) in counts {
            b.extend(n.to_le_bytes());
            b.extend(pc.to_le_bytes());
            b.extend(k.to_le_bytes());
        }
        b
    }

    /// main → left → leaf (3 calls), main → right → leaf (1), main → rec → rec, main → jump
    /// (tail-calls land), IRQ → leaf.
    fn sample() -> Tree {
        let nodes = [
            (0, 0, 0, 0),
            (0, 0x100, 0, 1), // 1 main
            (1, 0x200, 0, 1), // 2 left
            (2, 0x300, 0, 3), // 3 leaf
            (1, 0x400, 0, 1), // 4 right
            (4, 0x300, 0, 1), // 5 leaf
            (1, 0x500, 0, 1), // 6 rec
            (6, 0x500, 0, 1), // 7 rec
            (1, 0x600, 0, 1), // 8 jump
            (1, 0x700, 1, 2), // 9 IRQ
            (9, 0x300, 0, 2), // 10 leaf
        ];
        let counts = [
            (1, 0x100, 10),
            (2, 0x200, 5),
            (3, 0x300, 300),
            (4, 0x400, 5),
            (5, 0x300, 100),
            (6, 0x500, 20),
            (7, 0x500, 20),
            (8, 0x600, 2),
            (8, 0x680, 30),
            (9, 0x700, 4),
            (10, 0x300, 50),
        ];
        parse(&file(&nodes, &counts)).unwrap()
    }

    fn names(pc: u32) -> String {
        match pc & !0xFF {
            0x100 => "main",
            0x200 => "left",
            0x300 => "leaf",
            0x400 => "right",
            0x500 => "rec",
            0x600 if pc < 0x680 => "jump",
            0x600 => "landing",
            0x700 => "IRQ",
            _ => "?",
        }
        .to_owned()
    }

    #[test]
    fn inclusive_and_self_follow_the_tree() {
        let s = stacks(&sample(), names);
        assert_eq!(s.total, 546);
        let inc = inclusive(&s);
        assert_eq!(inc["main"], (546, 10));
        assert_eq!(inc["leaf"], (450, 450));
        assert_eq!(inc["left"], (305, 5));
        // Recursion: rec's 40 instructions once, not once per level.
        assert_eq!(inc["rec"], (40, 40));
        // The tail-called function sits under the function that jumped to it.
        assert_eq!(inc["jump"], (32, 2));
        assert_eq!(inc["landing"], (30, 30));
        assert_eq!(inc["IRQ"], (54, 4));
    }

    #[test]
    fn callers_and_callees_split_the_time() {
        let s = stacks(&sample(), names);
        let callers = edges(&s, "leaf", true);
        assert_eq!(
            callers,
            [
                ("left".to_owned(), 300),
                ("right".to_owned(), 100),
                ("IRQ".to_owned(), 50)
            ]
        );
        let callees = edges(&s, "main", false);
        assert_eq!(callees[0], ("left".to_owned(), 305));
        // Recursion: rec calls itself (its inner level's time), and main calls it (all of it).
        assert_eq!(
            edges(&s, "rec", true),
            [("main".to_owned(), 40), ("rec".to_owned(), 20)]
        );
        assert_eq!(s.calls[&("left".to_owned(), "leaf".to_owned())], 3);
        assert_eq!(s.calls[&("main".to_owned(), "IRQ".to_owned())], 2);
    }

    #[test]
    fn a_call_from_a_tail_called_function_names_it() {
        // main (entered from the reset handler's code at 0x050) calls jump, which tail-calls
        // landing; landing calls leaf from 0x6A0.
        let mut b = MAGIC.to_vec();
        let nodes: [(u32, u32, u32, u32, u64); 4] = [
            (0, 0, 0, 0, 0),
            (0, 0x100, 0, 0x050, 1),
            (1, 0x600, 0, 0x120, 1),
            (2, 0x300, 0, 0x6A0, 1),
        ];
        b.extend((nodes.len() as u32).to_le_bytes());
        for (p, e, f, site, c) in nodes {
            for w in [p, e, f, site] {
                b.extend(w.to_le_bytes());
            }
            b.extend(c.to_le_bytes());
        }
        b.extend(1u32.to_le_bytes());
        for w in [3u32, 0x300] {
            b.extend(w.to_le_bytes());
        }
        b.extend(9u64.to_le_bytes());
        let t = parse(&b).unwrap();
        assert_eq!(t.nodes[3].site, 0x6A0);
        let s = stacks(&t, |pc| {
            if pc < 0x100 {
                "Reset".into()
            } else {
                names(pc)
            }
        });
        assert_eq!(
            s.stacks,
            [(
                ["Reset", "main", "jump", "landing", "leaf"]
                    .map(String::from)
                    .to_vec(),
                9
            )]
        );
        // Each call is the calling function's: the reset handler's call of main, the
        // tail-called landing's call of leaf.
        let call = |a: &str, b: &str| s.calls.get(&(a.to_owned(), b.to_owned())).copied();
        assert_eq!(call("Reset", "main"), Some(1));
        assert_eq!(call("main", "jump"), Some(1));
        assert_eq!(call("landing", "leaf"), Some(1));
        assert_eq!(call("[start]", "main"), None);
    }

    #[test]
    fn runaway_recursion_keeps_stacks_bounded() {
        let mut nodes = vec![(0, 0, 0, 0)];
        for i in 0..3000u32 {
            nodes.push((i, 0x500, 0, 1));
        }
        let t = parse(&file(&nodes, &[(3000, 0x500, 7)])).unwrap();
        let s = stacks(&t, names);
        let (deep, n) = &s.stacks[0];
        assert_eq!(*n, 7);
        assert!(deep.len() <= MAX_FRAMES, "{}", deep.len());
        assert!(deep.iter().any(|f| f == "[deeper frames left out]"));
        assert_eq!(inclusive(&s)["rec"], (7, 7));
    }

    #[test]
    fn a_graph_with_an_exception_inside_itself_is_named() {
        assert!(inconsistencies(&sample(), &stacks(&sample(), names), names).is_empty());
        // IRQ (node 9) entered again under itself, through leaf.
        let nodes = [
            (0, 0, 0, 0),
            (0, 0x100, 0, 1),
            (1, 0x700, 1, 1),
            (2, 0x300, 0, 1),
            (3, 0x700, 1, 41),
        ];
        let t = parse(&file(&nodes, &[(4, 0x700, 5), (3, 0x300, 5)])).unwrap();
        let found = inconsistencies(&t, &stacks(&t, names), names);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("`IRQ` was entered 41 times"), "{found:?}");
        // Every instruction under an exception is that exception's, nested entries included.
        let per = per_exception(&t);
        assert_eq!(per[&0x700], 10);
        assert_eq!(per_exception(&sample())[&0x700], 54);
        assert_eq!(per_exception(&sample())[&0], 546 - 54);
    }

    #[test]
    fn damaged_files_are_errors() {
        let good = file(&[(0, 0, 0, 0), (0, 4, 0, 1)], &[(1, 4, 9)]);
        assert!(parse(&good).is_ok());
        for cut in 0..good.len() {
            assert!(parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        // A count naming a node that does not exist; a parent recorded after its child.
        assert!(parse(&file(&[(0, 0, 0, 0)], &[(3, 4, 9)])).is_err());
        assert!(parse(&file(&[(0, 0, 0, 0), (2, 4, 0, 1), (0, 8, 0, 1)], &[])).is_err());
        // Huge claimed sizes do not allocate.
        let mut huge = MAGIC.to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert!(parse(&huge).is_err());
    }
}
