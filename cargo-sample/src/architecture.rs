//! The shape of this crate, checked: which module uses which, read from the sources.
//!
//! Rules (see `docs/design.md`):
//! - no import cycle among the crate's modules (each file is a module);
//! - the stages are layered, and a module only uses modules of its own layer or below;
//! - only the command layer (`cli`, `cmd`, `main.rs`) knows clap;
//! - sampler-rt's modules have no import cycle either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers from the bottom up; a module may use its own layer and those listed before it.
const LAYERS: &[&[&str]] = &[
    &["term", "spec", "interrupt"],
    &["analysis::stats"],
    &["image", "dump", "runs"],
    &["project"],
    &["capture"],
    &["exec"],
    &["analysis"],
    &["report"],
    &["cmd", "cli", "fuzzing"],
];

fn layer_of(module: &str) -> usize {
    let mut best = (0, usize::MAX);
    for (i, layer) in LAYERS.iter().enumerate() {
        for prefix in *layer {
            let matches = module == *prefix || module.starts_with(&format!("{prefix}::"));
            if matches && prefix.len() >= best.0 {
                best = (prefix.len(), i);
            }
        }
    }
    best.1
}

/// Every module of the crate (by path from the crate root) and its source without tests.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            // Test modules kept in files of their own (`tests.rs`) are not part of the shape.
            if path.extension().is_none_or(|e| e != "rs")
                || path.file_name().is_some_and(|n| n == "tests.rs")
            {
                continue;
            }
            let rel: PathBuf = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = parts.join("::");
            if name == "lib" || name == "main" || name == "architecture" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(name, without_tests(&text));
        }
    }
    out
}

fn without_tests(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        kept.push_str(code);
        kept.push('\n');
    }
    kept
}

/// The paths a module names: `crate::a::b`, `super::c`, and those inside `use` groups.
fn named_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    // `use` statements, with their groups expanded.
    let mut statement: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if statement.is_none() {
            let body = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| trimmed.strip_prefix(p));
            statement = body.map(str::to_owned);
        } else if let Some(s) = statement.as_mut() {
            s.push_str(trimmed);
        }
        if let Some(s) = statement.take_if(|s| s.contains(';')) {
            let body = s.split(';').next().unwrap_or("");
            expand(body, &mut Vec::new(), &mut paths);
        }
    }
    // Paths written in place.
    for start in ["crate::", "super::"] {
        let mut rest = text;
        while let Some(at) = rest.find(start) {
            let boundary = rest[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            // A path that ends in `::` opens a group, which the `use` reading above expanded.
            if boundary && !tail[..len].ends_with("::") {
                paths.push(tail[..len].split("::").map(str::to_owned).collect());
            }
            rest = &rest[at + len.max(1)..];
        }
    }
    paths
}

fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let depth = prefix.len();
        prefix.extend(head);
        let mut level = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => level += 1,
                '}' => level -= 1,
                ',' if level == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        prefix.truncate(depth);
    } else if !tree.is_empty() {
        let mut path = prefix.clone();
        let tree = tree.split(" as ").next().unwrap_or(tree);
        path.extend(tree.split("::").map(|s| s.trim().to_owned()));
        out.push(path);
    }
}

/// The module a path names, resolved from `module`, if it is one of `known`.
fn resolve(module: &str, path: &[String], known: &BTreeSet<String>) -> Option<String> {
    let mut base: Vec<String> = module.split("::").map(str::to_owned).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some("self") => rest = &rest[1..],
        _ => return None,
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    (1..=full.len())
        .rev()
        .map(|n| full[..n].join("::"))
        .find(|candidate| known.contains(candidate))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let mut edges = BTreeMap::new();
    for (name, text) in &modules {
        let used: BTreeSet<String> = named_paths(text)
            .iter()
            .filter_map(|p| resolve(name, p, &known))
            .filter(|m| m != name)
            .collect();
        edges.insert(name.clone(), used);
    }
    edges
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.edges[v] {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let lw = s.low[w.as_str()];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w.as_str()) {
                let iw = s.index[w.as_str()];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn the_reader_sees_the_uses_it_should() {
    let text = "use crate::{a::{b, c as d}, e};\nuse super::f::G;\nfn x() { crate::h::i(); }";
    let paths = named_paths(text);
    let joined: BTreeSet<String> = paths.iter().map(|p| p.join("::")).collect();
    for want in [
        "crate::a::b",
        "crate::a::c",
        "crate::e",
        "super::f::G",
        "crate::h::i",
    ] {
        assert!(joined.contains(want), "{want} not in {joined:?}");
    }
    let known: BTreeSet<String> = ["x::y", "x", "a"].map(str::to_owned).into();
    let p = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        resolve("x::z", &p("super::y::f"), &known).as_deref(),
        Some("x::y")
    );
    assert_eq!(
        resolve("x::z", &p("crate::a::b"), &known).as_deref(),
        Some("a")
    );
    assert_eq!(resolve("x::z", &p("std::io"), &known), None);
    let mut g = BTreeMap::new();
    g.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    g.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    g.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(cycles(&g), vec![vec!["a".to_owned(), "b".to_owned()]]);
}

#[test]
fn modules_have_no_import_cycle() {
    let edges = graph();
    assert!(edges.len() > 30, "found only {} modules", edges.len());
    let found = cycles(&edges);
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!("cycle among {}:\n", component.join(", ")));
        for m in component {
            let inside: Vec<&str> = edges[m]
                .iter()
                .filter(|w| component.contains(w))
                .map(String::as_str)
                .collect();
            report.push_str(&format!("  {m} -> {}\n", inside.join(", ")));
        }
    }
    assert!(found.is_empty(), "{report}");
}

/// The firmware runtime too: its modules (one file each) use one another one way.
#[test]
fn the_runtime_has_no_import_cycle() {
    let edges = graph_of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../sampler-rt/src"));
    assert!(edges.len() >= 6, "found only {} modules", edges.len());
    assert!(edges["laps"].contains("wire"), "{edges:?}");
    let found = cycles(&edges);
    assert!(found.is_empty(), "cycles: {found:?}\n{edges:?}");
}

#[test]
fn each_module_uses_only_its_layer_and_those_below() {
    let edges = graph();
    let mut wrong = Vec::new();
    for (m, used) in &edges {
        let own = layer_of(m);
        assert!(own != usize::MAX, "module {m} is in no layer of LAYERS");
        for u in used {
            if layer_of(u) > own {
                wrong.push(format!(
                    "{m} (layer {own}) uses {u} (layer {})",
                    layer_of(u)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn only_the_command_layer_knows_clap() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong: Vec<String> = modules(&src)
        .into_iter()
        .filter(|(m, text)| {
            let command_layer = ["cli", "cmd"]
                .iter()
                .any(|l| m == l || m.starts_with(&format!("{l}::")));
            !command_layer && (text.contains("clap::") || text.contains("crate::cli"))
        })
        .map(|(m, _)| m)
        .collect();
    assert!(
        wrong.is_empty(),
        "modules outside cli/cmd use clap or cli: {wrong:?}"
    );
}
