//! The inline tree: each linker-level function, with the functions inlined into it below it,
//! and what was inlined into those below them. `total` counts everything under a node, `self`
//! only the code attributed to the node's own source. With real call stacks (`--stacks`) the
//! tree starts at the stacks' roots instead, and a function's callees and inlined frames are
//! both below it.

use std::collections::HashMap;

use serde::Serialize;

use crate::image::symbolize::Symbolizer;

/// One node of the inline tree.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Node {
    pub name: String,
    /// Samples (or instructions) whose innermost frame is this node.
    pub self_count: u64,
    /// Samples (or instructions) in this node and everything inlined into it.
    pub total_count: u64,
    pub self_percent: f64,
    pub total_percent: f64,
    /// Exact shares of the same run (`--truth`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_total_percent: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
}

/// The chain of an address, outermost first: the linker-level function, then each function
/// inlined into the previous one, down to the innermost.
pub fn chain(sym: &mut Symbolizer, pc: u32, outside: &str) -> Vec<String> {
    let r = sym.resolve(pc);
    let root = r.function.clone().unwrap_or_else(|| outside.to_owned());
    let mut v = vec![root];
    // The outermost DWARF frame is the subprogram the code belongs to: the root itself.
    if r.frames.len() > 1 {
        v.extend(
            r.frames[..r.frames.len() - 1]
                .iter()
                .rev()
                .map(|f| f.function.clone()),
        );
    }
    v
}

#[derive(Default)]
struct Build {
    self_count: u64,
    total: u64,
    exact_total: u64,
    children: HashMap<String, Build>,
}

impl Build {
    fn add(&mut self, chain: &[String], n: u64, exact: bool) {
        if exact {
            self.exact_total += n;
        } else {
            self.total += n;
        }
        match chain.split_first() {
            None => {
                if !exact {
                    self.self_count += n;
                }
            }
            Some((head, rest)) => self
                .children
                .entry(head.clone())
                .or_default()
                .add(rest, n, exact),
        }
    }

    fn finish(self, name: String, total: u64, exact_total: Option<u64>) -> Node {
        let pct = |k: u64, of: u64| 100.0 * k as f64 / of.max(1) as f64;
        Node {
            self_percent: pct(self.self_count, total),
            total_percent: pct(self.total, total),
            exact_total_percent: exact_total.map(|t| pct(self.exact_total, t)),
            name,
            self_count: self.self_count,
            total_count: self.total,
            children: finish_all(self.children, total, exact_total),
        }
    }
}

fn finish_all(children: HashMap<String, Build>, total: u64, exact_total: Option<u64>) -> Vec<Node> {
    let mut v: Vec<Node> = children
        .into_iter()
        .filter(|(_, b)| b.total > 0 || b.exact_total > 0)
        .map(|(name, b)| b.finish(name, total, exact_total))
        .collect();
    v.sort_by(|a, b| {
        b.total_count
            .cmp(&a.total_count)
            .then_with(|| {
                b.exact_total_percent
                    .unwrap_or(0.0)
                    .total_cmp(&a.exact_total_percent.unwrap_or(0.0))
            })
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// Build the tree of `per_pc` counts (and of the exact counts of the same run, when given).
pub fn build(
    sym: &mut Symbolizer,
    per_pc: &HashMap<u32, u64>,
    total: u64,
    exact: Option<(&HashMap<u32, u64>, u64)>,
    outside: &str,
) -> Vec<Node> {
    let mut root = Build::default();
    for (&pc, &n) in per_pc {
        root.add(&chain(sym, pc, outside), n, false);
    }
    if let Some((e, _)) = exact {
        for (&pc, &n) in e {
            root.add(&chain(sym, pc, outside), n, true);
        }
    }
    finish_all(root.children, total, exact.map(|e| e.1))
}

/// The calling-context tree of real call stacks (outermost first, inlined frames included):
/// each node's total is the samples whose stack passes through it, its self those that end
/// there.
pub fn from_stacks(stacks: &[(Vec<String>, u64)], total: u64) -> Vec<Node> {
    let mut root = Build::default();
    for (chain, n) in stacks {
        root.add(chain, *n, false);
    }
    finish_all(root.children, total, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_of(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn totals_add_up_and_self_is_the_innermost() {
        let mut b = Build::default();
        b.add(&chain_of(&["main", "run", "hot_a"]), 60, false);
        b.add(&chain_of(&["main", "run"]), 10, false);
        b.add(&chain_of(&["main"]), 5, false);
        b.add(&chain_of(&["idle"]), 25, false);
        let tree = finish_all(b.children, 100, None);
        assert_eq!(tree[0].name, "main");
        assert_eq!(tree[0].total_count, 75);
        assert_eq!(tree[0].self_count, 5);
        let run = &tree[0].children[0];
        assert_eq!((run.total_count, run.self_count), (70, 10));
        let hot = &run.children[0];
        assert_eq!(
            (hot.name.as_str(), hot.total_count, hot.self_count),
            ("hot_a", 60, 60)
        );
        assert!((hot.total_percent - 60.0).abs() < 1e-9);
        assert_eq!(tree[1].name, "idle");
    }

    #[test]
    fn the_fixture_puts_core_frames_under_hot_a() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        let mut sym = Symbolizer::new(&path, &data, None).unwrap();
        let per_pc: HashMap<u32, u64> = (0xff0..0xffa).step_by(2).map(|pc| (pc, 10)).collect();
        let tree = build(&mut sym, &per_pc, 50, None, "?");
        assert_eq!(tree.len(), 1);
        assert_eq!(tree[0].name, "hot_a");
        assert_eq!(tree[0].total_count, 50);
        assert!(
            tree[0].children.iter().any(|c| c.name.contains("core::")),
            "{tree:?}"
        );
        let below: u64 = tree[0].children.iter().map(|c| c.total_count).sum();
        assert_eq!(below + tree[0].self_count, 50);
    }
}
