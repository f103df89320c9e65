//! The exact call graph's file: the calling-context tree cargo-sample's QEMU plugin records
//! (`graph=FILE`: every call and return followed, instructions counted per context). Turning
//! it into call stacks is [`crate::analysis::callgraph`].
//!
//! File `callgraph.bin`: `"SMPLCCT2"`, then `u32` node count and the nodes (parent `u32`,
//! entry PC `u32`, flags `u32` — bit 0 an exception entry, bit 1 a thread's first run (an
//! RTOS task's, on its own process stack) —, call site `u32`, calls `u64`),
//! then `u32` count count and the counts (node `u32`, block start PC `u32`, instructions
//! `u64`), little-endian, then (since the thread bit) `u64` returns that went where no
//! followed call returns. Node 0 is the root (what runs before any call is followed). The
//! call site is an address inside the call instruction (for an exception, the start of the
//! block it interrupted): the function holding it made the call, which is not the parent's
//! entry when the parent tail-called it. `"SMPLCCT1"` files (no site) are read too.

use anyhow::{Result, bail};

/// The file a run keeps the graph in.
pub const FILE: &str = "callgraph.bin";

/// The file a sampled run keeps the graph as it stood when the sampler started in (the same
/// format): what no sample could see.
pub const BEFORE_START_FILE: &str = "callgraph-before-start.bin";

/// The graph of `whole` after the moment `before` was taken (the same run's graph then: its
/// nodes are the first of `whole`'s, its counts and calls at most theirs).
pub fn since(mut whole: Tree, before: &Tree) -> Tree {
    use std::collections::HashMap;
    for (n, b) in whole.nodes.iter_mut().zip(&before.nodes) {
        n.calls = n.calls.saturating_sub(b.calls);
    }
    let earlier: HashMap<(u32, u32), u64> = before
        .counts
        .iter()
        .map(|&(n, pc, k)| ((n, pc), k))
        .collect();
    for (node, pc, k) in &mut whole.counts {
        *k = k.saturating_sub(earlier.get(&(*node, *pc)).copied().unwrap_or(0));
    }
    whole.counts.retain(|c| c.2 > 0);
    whole
}

pub(crate) const MAGIC: &[u8; 8] = b"SMPLCCT2";
pub(crate) const MAGIC_V1: &[u8; 8] = b"SMPLCCT1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub parent: u32,
    pub entry: u32,
    pub exception: bool,
    /// The first run of a thread (an RTOS task on a process stack of its own): the root of
    /// that task's calls.
    pub thread: bool,
    /// Inside the call instruction (0: not recorded).
    pub site: u32,
    pub calls: u64,
}

/// The calling-context tree as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    pub nodes: Vec<Node>,
    /// (node, block start, instructions).
    pub counts: Vec<(u32, u32, u64)>,
    /// Returns that went where no followed call returns (0 in files from before it was kept).
    pub stray_returns: u64,
}

/// Read a graph file; damaged input is an error, never a panic.
pub fn parse(b: &[u8]) -> Result<Tree> {
    if b.len() < 12 || (&b[..8] != MAGIC && &b[..8] != MAGIC_V1) {
        bail!("not a call-graph file (no SMPLCCT2 header)");
    }
    let size = if &b[..8] == MAGIC { 24 } else { 20 };
    let u32_at = |o: usize| -> Result<u32> {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            .ok_or_else(|| anyhow::anyhow!("the call-graph file is cut short at byte {o}"))
    };
    let u64_at =
        |o: usize| -> Result<u64> { Ok(u64::from(u32_at(o)?) | u64::from(u32_at(o + 4)?) << 32) };
    let n = u32_at(8)? as usize;
    if n.saturating_mul(size) > b.len() {
        bail!("the call-graph file claims {n} nodes, more than it holds");
    }
    let mut o = 12;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        let site = if size == 24 { u32_at(o + 12)? } else { 0 };
        nodes.push(Node {
            parent: u32_at(o)?,
            entry: u32_at(o + 4)?,
            exception: u32_at(o + 8)? & 1 != 0,
            thread: u32_at(o + 8)? & 2 != 0,
            site,
            calls: u64_at(o + size - 8)?,
        });
        o += size;
    }
    let m = u32_at(o)? as usize;
    o += 4;
    if m.saturating_mul(16) > b.len() {
        bail!("the call-graph file claims {m} counts, more than it holds");
    }
    let mut counts = Vec::with_capacity(m);
    for _ in 0..m {
        let node = u32_at(o)?;
        if node as usize >= n {
            bail!("a count names node {node} of {n}");
        }
        counts.push((node, u32_at(o + 4)?, u64_at(o + 8)?));
        o += 16;
    }
    for (i, nd) in nodes.iter().enumerate() {
        if nd.parent as usize >= n || (i > 0 && nd.parent as usize >= i) {
            bail!("node {i} has a parent ({}) recorded after it", nd.parent);
        }
    }
    let stray_returns = u64_at(o).unwrap_or(0);
    Ok(Tree {
        nodes,
        counts,
        stray_returns,
    })
}
