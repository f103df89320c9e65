//! `--format html`: the report as one self-contained page (no network, no other file): the
//! run's facts and findings, an interactive flame graph (zoom, search), the tables with their
//! intervals (sortable), the callers and callees, and the annotated code of the hottest
//! functions.
//!
//! The page carries the same JSON as `--format json` (without the inline tree, which the flame
//! graph shows), plus the flame graph's tree, in a
//! `<script type="application/json">` element; `html/report.js` draws it, `html/report.css`
//! styles it. The tree is built here from the same stacks as the folded output and the SVG,
//! so its widths are the tables' shares.

use std::collections::HashMap;

use anyhow::{Context, Result};
use serde::Serialize;

use super::formats::{flame_stacks, stacks_kind};
use super::model::Report;

const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// The flame graph's tree, as parallel arrays (node 0 is the root, `all`): compact for runs
/// with many distinct stacks.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct FlameTree {
    /// Distinct frame names.
    pub names: Vec<String>,
    /// Per node: its name's index.
    pub name: Vec<u32>,
    /// Per node: samples (or instructions) in it and below it.
    pub value: Vec<u64>,
    /// Per node: its parent (-1 for the root).
    pub parent: Vec<i64>,
}

impl FlameTree {
    /// The tree of stacks given outermost frame first.
    pub fn of<'a>(stacks: impl IntoIterator<Item = (&'a [String], u64)>) -> FlameTree {
        let mut t = FlameTree {
            names: vec!["all".into()],
            name: vec![0],
            value: vec![0],
            parent: vec![-1],
        };
        let mut name_ids: HashMap<&str, u32> = HashMap::new();
        let mut children: HashMap<(usize, u32), usize> = HashMap::new();
        for (chain, count) in stacks {
            t.value[0] += count;
            let mut node = 0usize;
            for frame in chain {
                let id = *name_ids.entry(frame.as_str()).or_insert_with(|| {
                    t.names.push(frame.clone());
                    (t.names.len() - 1) as u32
                });
                node = *children.entry((node, id)).or_insert_with(|| {
                    t.name.push(id);
                    t.value.push(0);
                    t.parent.push(node as i64);
                    t.name.len() - 1
                });
                t.value[node] += count;
            }
        }
        t
    }
}

#[derive(Serialize)]
struct Page {
    generator: String,
    /// What the flame graph's stacks are.
    stacks_kind: String,
    flame: FlameTree,
    report: Report,
}

/// The page.
pub fn html(r: &Report) -> Result<Vec<u8>> {
    let flame = FlameTree::of(
        flame_stacks(r)
            .iter()
            .map(|s| (s.chain.as_slice(), s.count)),
    );
    // The inline tree is the flame graph's already (and the largest part of the JSON).
    let mut report = r.clone();
    report.tree.clear();
    let page = Page {
        generator: format!("cargo-sample {}", env!("CARGO_PKG_VERSION")),
        stacks_kind: stacks_kind(r),
        flame,
        report,
    };
    let data = serde_json::to_string(&page).context("encoding the report for the page")?;
    let title = format!(
        "{} on {} · cargo-sample",
        r.facts_firmware(),
        r.facts_machine()
    );
    let mut out = String::with_capacity(data.len() + CSS.len() + JS.len() + 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta name=\"generator\" content=\"");
    out.push_str(&escape(&page.generator));
    out.push_str("\">\n<title>");
    out.push_str(&escape(&title));
    out.push_str("</title>\n<style>\n");
    out.push_str(CSS);
    out.push_str(
        "</style>\n</head>\n<body>\n<noscript>This report is drawn by JavaScript; \
                  `cargo sample report --format text` gives the same tables.</noscript>\n",
    );
    out.push_str("<script type=\"application/json\" id=\"data\">");
    out.push_str(&script_safe(&data));
    out.push_str("</script>\n<script>\n");
    out.push_str(JS);
    out.push_str("</script>\n</body>\n</html>\n");
    Ok(out.into_bytes())
}

/// Text for HTML: `&`, `<`, `>` and `"` escaped.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JSON that cannot end the `<script>` element it sits in (`</script>`, `<!--`): every `<`
/// becomes `\u003c`, which JSON reads back as the same character.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(s: &str) -> Vec<String> {
        s.split(';').map(String::from).collect()
    }

    #[test]
    fn the_tree_adds_each_stack_to_every_frame_on_its_path() {
        let stacks = [
            (chain("main;a;leaf"), 3),
            (chain("main;b;leaf"), 1),
            (chain("main;a"), 2),
        ];
        let t = FlameTree::of(stacks.iter().map(|(c, n)| (c.as_slice(), *n)));
        let by_path = |path: &str| {
            let mut node = 0usize;
            for f in path.split(';') {
                node = (0..t.name.len())
                    .find(|&i| t.parent[i] == node as i64 && t.names[t.name[i] as usize] == f)
                    .unwrap_or_else(|| panic!("no {f} under node {node}"));
            }
            t.value[node]
        };
        assert_eq!(t.value[0], 6);
        assert_eq!(by_path("main"), 6);
        assert_eq!(by_path("main;a"), 5);
        assert_eq!(by_path("main;a;leaf"), 3);
        assert_eq!(by_path("main;b;leaf"), 1);
        // One name entry per distinct frame name.
        assert_eq!(t.names.iter().filter(|n| *n == "leaf").count(), 1);
    }

    #[test]
    fn data_in_the_page_cannot_close_its_script_element() {
        let json = serde_json::to_string("</script><!-- & \"x\"").unwrap();
        let safe = script_safe(&json);
        assert!(!safe.contains('<'));
        let back: String = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, "</script><!-- & \"x\"");
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
