//! The annotated disassembly of the hottest functions: every instruction with the samples (or
//! executed instructions) at its address, and the source line whenever it changes, like
//! `perf annotate`.

use std::collections::HashMap;

use serde::Serialize;

use crate::image::disasm::{Code, Kind};
use crate::image::symbolize::Symbolizer;

/// One function, annotated.
#[derive(Debug, Clone, Serialize)]
pub struct Function {
    pub name: String,
    pub start: u32,
    pub end: u32,
    /// Samples (or instructions) in the function.
    pub count: u64,
    pub percent: f64,
    pub instructions: Vec<Instruction>,
}

/// One instruction of an annotated function.
#[derive(Debug, Clone, Serialize)]
pub struct Instruction {
    pub addr: u32,
    /// Bytes of the instruction.
    pub size: u8,
    pub text: String,
    pub count: u64,
    /// Share of the whole profile.
    pub percent: f64,
    /// The exact share of the same run (`--truth`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_percent: Option<f64>,
    /// `file:line` of the innermost frame, where it differs from the previous instruction's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// That line's text, where the source file is on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whether this is data in the code (a literal pool), not an instruction.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub data: bool,
}

/// Annotate the functions named in `names` (hottest first).
pub fn build(
    sym: &mut Symbolizer,
    code: &mut Code,
    names: &[String],
    per_pc: &HashMap<u32, u64>,
    total: u64,
    exact: Option<(&HashMap<u32, u64>, u64)>,
) -> Vec<Function> {
    let pct = |k: u64, of: u64| 100.0 * k as f64 / of.max(1) as f64;
    let mut out = Vec::new();
    // Each source file read once (or found missing once).
    let mut files: HashMap<String, Option<Vec<String>>> = HashMap::new();
    let mut text_of = |sym: &Symbolizer, at: &str| -> Option<String> {
        let (file, line) = at.rsplit_once(':')?;
        let line: usize = line.parse().ok()?;
        let lines = files.entry(file.to_owned()).or_insert_with(|| {
            let path = sym.source_file(file)?;
            let text = std::fs::read_to_string(path).ok()?;
            Some(text.lines().map(str::to_owned).collect())
        });
        let t = lines.as_ref()?.get(line.checked_sub(1)?)?.trim();
        (!t.is_empty()).then(|| t.to_owned())
    };
    for name in names {
        for r in sym.ranges_of(name) {
            let (start, end) = (r.start as u32, r.end as u32);
            let insns = code.function(start, end).to_vec();
            let mut last_line = None;
            let mut rows = Vec::with_capacity(insns.len());
            for i in &insns {
                let count = per_pc.get(&i.addr).copied().unwrap_or(0);
                let line = sym.resolve(i.addr).line();
                let shown = if line != last_line {
                    line.clone()
                } else {
                    None
                };
                last_line = line;
                let source = shown.as_deref().and_then(|at| text_of(sym, at));
                rows.push(Instruction {
                    addr: i.addr,
                    size: i.size,
                    text: i.text.clone(),
                    count,
                    percent: pct(count, total),
                    exact_percent: exact.map(|(e, t)| pct(e.get(&i.addr).copied().unwrap_or(0), t)),
                    line: shown,
                    source,
                    data: i.kind == Kind::Data,
                });
            }
            let count: u64 = rows.iter().map(|r| r.count).sum();
            out.push(Function {
                name: name.clone(),
                start,
                end,
                count,
                percent: pct(count, total),
                instructions: rows,
            });
        }
    }
    out
}
