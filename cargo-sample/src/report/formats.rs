//! The report in the formats other tools read: folded stacks (inferno, flamegraph.pl,
//! speedscope), an SVG flamegraph (drawn by inferno), and pprof's protobuf (`pprof -http`,
//! Grafana Pyroscope).
//!
//! A PC sample alone has no call stack, so its stacks are inline chains: the linker-level
//! function, then what was inlined into it, down to the innermost frame. Runs that have real
//! call stacks (`--exact`'s call graph, or samples with `--stacks`) use those, the sampled ones
//! with what was inlined at every level. The flamegraph's widths are the same shares as the
//! tables'.

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context, Result};

use super::model::{Report, Stack};

/// `a;b;c 123` lines, heaviest first.
pub fn folded(r: &Report) -> String {
    let mut out = String::new();
    // Real call stacks when the run has them (with the inlined frames when sampled with
    // `--stacks`); the inline chains otherwise.
    for s in flame_stacks(r) {
        let frames: Vec<String> = s
            .chain
            .iter()
            .map(|f| f.replace([';', '\n'], ","))
            .collect();
        out.push_str(&frames.join(";"));
        out.push(' ');
        out.push_str(&s.count.to_string());
        out.push('\n');
    }
    out
}

/// The run's real call stacks, if it has any: sampled ones with their inlined frames, or the
/// exact graph's.
fn real_stacks(r: &Report) -> Option<&Vec<Stack>> {
    [&r.inline_stacks, &r.call_stacks]
        .into_iter()
        .find(|s| !s.is_empty())
}

/// What a flamegraph of this report is made of, in a line.
pub(crate) fn stacks_kind(r: &Report) -> String {
    match r.mode {
        crate::runs::Mode::Exact if !r.call_stacks.is_empty() => {
            "every executed instruction, by call stack (caller; callee; ...)".into()
        }
        crate::runs::Mode::Exact => {
            "every executed instruction, by inline chain (function; inlined; ...)".into()
        }
        _ if real_stacks(r).is_some() => format!(
            "{} samples by call stack (caller; callee; ...; what was inlined at each level)",
            r.samples.unwrap_or(0)
        ),
        _ => format!(
            "{} samples by inline chain (function; inlined; ...); PC sampling has no call stacks",
            r.samples.unwrap_or(0)
        ),
    }
}

/// The stacks a flamegraph draws: the real call stacks when the run has them, the inline
/// chains otherwise.
pub(crate) fn flame_stacks(r: &Report) -> &[Stack] {
    real_stacks(r).unwrap_or(&r.stacks)
}

/// An interactive SVG flamegraph of the inline chains, or of the real call stacks.
pub fn svg(r: &Report) -> Result<Vec<u8>> {
    let folded = folded(r);
    let mut opts = inferno::flamegraph::Options::default();
    // A function's colour comes from its name alone: the same in every run and every diff.
    opts.deterministic = true;
    opts.title = format!("{} · {}", r.facts_firmware(), r.facts_machine());
    opts.subtitle = Some(stacks_kind(r));
    opts.count_name = if r.mode == crate::runs::Mode::Exact {
        "instructions".into()
    } else {
        "samples".into()
    };
    opts.name_type = "Function:".into();
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
        .context("drawing the flamegraph")?;
    Ok(out)
}

/// A differential flamegraph of two reports: `after`'s stacks, each frame coloured by how its
/// share changed from `before` (red grew, blue shrank; the two are normalised to the same
/// total, so runs of different lengths compare by share). Colours by name are not used here.
pub fn differential_svg(before: &Report, after: &Report, names: (&str, &str)) -> Result<Vec<u8>> {
    let mut lines = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options {
            normalize: true,
            strip_hex: false,
        },
        folded(before).as_bytes(),
        folded(after).as_bytes(),
        &mut lines,
    )
    .context("comparing the two runs' stacks")?;
    let lines = String::from_utf8(lines).context("the compared stacks")?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!("{} → {}", names.0, names.1);
    opts.subtitle = Some(format!(
        "{} → {}: widths are the second run's, red where a frame's share grew, blue where it shrank",
        after.facts_firmware(),
        after.facts_machine()
    ));
    opts.count_name = if after.mode == crate::runs::Mode::Exact {
        "instructions".into()
    } else {
        "samples".into()
    };
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.lines(), &mut out)
        .context("drawing the differential flamegraph")?;
    Ok(out)
}

/// pprof's `profile.proto`, gzipped.
pub fn pprof(r: &Report) -> Result<Vec<u8>> {
    let mut p = Pprof::default();
    let (kind, unit) = if r.mode == crate::runs::Mode::Exact {
        ("instructions", "count")
    } else {
        ("samples", "count")
    };
    let sample_type = [p.string(kind), p.string(unit)];
    // One mapping: the firmware image.
    let (lo, hi) = r.per_pc.iter().fold((u64::MAX, 0u64), |(lo, hi), s| {
        (lo.min(s.pc as u64), hi.max(s.pc as u64 + 2))
    });
    let firmware = p.string(&r.facts_firmware());
    let mut mapping = Msg::default();
    mapping.uint(1, 1);
    mapping.uint(2, if lo == u64::MAX { 0 } else { lo });
    mapping.uint(3, hi);
    mapping.uint(5, firmware as u64);
    for field in [7, 8, 9, 10] {
        mapping.uint(field, 1);
    }
    let mut locations = Vec::new();
    let mut samples = Vec::new();
    for (i, s) in r.per_pc.iter().enumerate() {
        let id = i as u64 + 1;
        let mut loc = Msg::default();
        loc.uint(1, id);
        loc.uint(2, 1);
        loc.uint(3, s.pc as u64);
        // Innermost first; the last line is the function everything was inlined into.
        for (name, file, line) in &s.frames {
            let f = p.function(name, file.as_deref().unwrap_or(""));
            let mut l = Msg::default();
            l.uint(1, f);
            l.uint(2, line.unwrap_or(0) as u64);
            loc.bytes(4, &l.0);
        }
        locations.push(loc);
        if r.tagged.is_empty() && real_stacks(r).is_none() {
            let mut sample = Msg::default();
            sample.packed(1, &[id]);
            sample.packed(2, &[s.count]);
            samples.push(sample);
        }
    }
    // Real call stacks: one location per frame name (functions and inlined ones), each
    // sample its stack, innermost first.
    let mut by_name: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for st in real_stacks(r).into_iter().flatten() {
        let mut ids = Vec::with_capacity(st.chain.len());
        for name in st.chain.iter().rev() {
            let next = (locations.len() + 1) as u64;
            let id = *by_name.entry(name.as_str()).or_insert_with(|| {
                let f = p.function(name, "");
                let mut l = Msg::default();
                l.uint(1, f);
                let mut loc = Msg::default();
                loc.uint(1, next);
                loc.bytes(4, &l.0);
                locations.push(loc);
                next
            });
            ids.push(id);
        }
        let mut sample = Msg::default();
        sample.packed(1, &ids);
        sample.packed(2, &[st.count]);
        samples.push(sample);
    }
    // Tagged samples: one sample per address and tag, the tag as a label (`-tagfocus`). Real
    // stacks already hold the handler a sample was taken in.
    let key = p.string("tag");
    let tagged = if real_stacks(r).is_some() {
        &[][..]
    } else {
        &r.tagged[..]
    };
    for (pc, tag, n) in tagged {
        let Some(i) = r.per_pc.iter().position(|x| x.pc == *pc) else {
            continue;
        };
        let mut label = Msg::default();
        label.uint(1, key as u64);
        label.uint(2, p.string(tag) as u64);
        let mut sample = Msg::default();
        sample.packed(1, &[i as u64 + 1]);
        sample.packed(2, &[*n]);
        sample.bytes(3, &label.0);
        samples.push(sample);
    }
    let period_kind = [
        p.string(if r.mode == crate::runs::Mode::Exact {
            "instructions"
        } else {
            "time"
        }),
        p.string(&r.unit),
    ];
    let mut prof = Msg::default();
    let mut vt = Msg::default();
    vt.uint(1, sample_type[0] as u64);
    vt.uint(2, sample_type[1] as u64);
    prof.bytes(1, &vt.0);
    for s in &samples {
        prof.bytes(2, &s.0);
    }
    prof.bytes(3, &mapping.0);
    for l in &locations {
        prof.bytes(4, &l.0);
    }
    for f in &p.functions {
        prof.bytes(5, &f.0);
    }
    for s in &p.strings {
        prof.bytes(6, s.as_bytes());
    }
    let mut pt = Msg::default();
    pt.uint(1, period_kind[0] as u64);
    pt.uint(2, period_kind[1] as u64);
    prof.bytes(11, &pt.0);
    prof.uint(12, r.period_units().round() as u64);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&prof.0)?;
    Ok(gz.finish()?)
}

/// A protobuf message being written.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.varint(u64::from(field) << 3);
            self.varint(v);
        }
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn packed(&mut self, field: u32, vs: &[u64]) {
        let mut inner = Msg::default();
        for &v in vs {
            inner.varint(v);
        }
        self.bytes(field, &inner.0);
    }
}

/// String table and functions of a pprof profile.
struct Pprof {
    strings: Vec<String>,
    index: HashMap<String, usize>,
    functions: Vec<Msg>,
    function_ids: HashMap<(String, String), u64>,
}

impl Default for Pprof {
    fn default() -> Pprof {
        Pprof {
            strings: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
        }
    }
}

impl Pprof {
    fn string(&mut self, s: &str) -> usize {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.strings.push(s.to_owned());
        self.index.insert(s.to_owned(), self.strings.len() - 1);
        self.strings.len() - 1
    }

    fn function(&mut self, name: &str, file: &str) -> u64 {
        let key = (name.to_owned(), file.to_owned());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let (n, f) = (self.string(name), self.string(file));
        let mut m = Msg::default();
        m.uint(1, id);
        m.uint(2, n as u64);
        m.uint(3, n as u64);
        m.uint(4, f as u64);
        self.functions.push(m);
        self.function_ids.insert(key, id);
        id
    }
}

/// Stacks of `chains` with their counts, heaviest first, equal chains merged.
pub fn stacks(chains: impl IntoIterator<Item = (Vec<String>, u64)>) -> Vec<Stack> {
    let mut m: HashMap<Vec<String>, u64> = HashMap::new();
    for (c, n) in chains {
        *m.entry(c).or_default() += n;
    }
    let mut v: Vec<Stack> = m
        .into_iter()
        .map(|(chain, count)| Stack { chain, count })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.chain.cmp(&b.chain)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut m = Msg::default();
        m.uint(1, 150);
        assert_eq!(m.0, [0x08, 0x96, 0x01]);
        let mut m = Msg::default();
        m.bytes(2, b"testing");
        assert_eq!(m.0[..2], [0x12, 0x07]);
        let mut m = Msg::default();
        m.packed(4, &[3, 270, 86942]);
        assert_eq!(m.0, [0x22, 0x06, 0x03, 0x8E, 0x02, 0x9E, 0xA7, 0x05]);
    }

    #[test]
    fn equal_chains_merge_and_sort() {
        let s = stacks([
            (vec!["a".into(), "b".into()], 2),
            (vec!["c".into()], 5),
            (vec!["a".into(), "b".into()], 4),
        ]);
        assert_eq!(s[0].chain, vec!["a", "b"]);
        assert_eq!(s[0].count, 6);
        assert_eq!(s[1].count, 5);
    }
}
