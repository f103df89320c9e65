//! `cargo sample report`: a saved run, or a text dump, printed again.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::saved::{build_options, find_run, print_report, render_run};
use crate::cli::ViewArgs;
use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::report::{self, Facts};
use crate::term;

/// `cargo sample report`.
pub fn report(args: &crate::cli::ReportArgs) -> Result<()> {
    if let (Some(td), Some(elf)) = (&args.text_dump, &args.elf) {
        return render_text_dump(td, elf, &args.view);
    }
    let dir = find_run(args.runs_dir.as_deref(), &args.run)?;
    render_run(&dir, &args.view)
}

/// `cargo sample report --text-dump FILE --elf ELF`.
pub(crate) fn render_text_dump(path: &Path, elf_path: &Path, view: &ViewArgs) -> Result<()> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let dump = crate::dump::textdump::parse(&String::from_utf8_lossy(&text))
        .with_context(|| format!("reading the text dump {}", path.display()))?;
    let elf_bytes =
        std::fs::read(elf_path).with_context(|| format!("reading {}", elf_path.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    if !fw.has_symbols {
        term::warn("the ELF has no function symbols (stripped?): samples cannot be named");
    }
    let mut sym = Symbolizer::new(elf_path, &elf_bytes, None)?;
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let firmware = elf_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (samples, what) = if !dump.raw.is_empty() {
        if dump.hist.is_some() {
            term::warn("the dump has raw samples and bins: reporting the raw samples");
        }
        let mut s = report::Samples {
            ordered: dump.raw.iter().map(|pc| pc & !1).collect(),
            tags: dump.tags.clone(),
            ..report::Samples::default()
        };
        for &pc in &s.ordered {
            *s.per_pc.entry(pc).or_default() += 1;
        }
        (s, "raw PCs".to_owned())
    } else if let Some(h) = &dump.hist {
        (
            crate::report::load::hist_samples(h, &sym, view.bin_split),
            format!(
                "{} bins of {} bytes from {:#010x}",
                h.bins.len(),
                1u32 << h.shift,
                h.base
            ),
        )
    } else {
        bail!("the text dump holds no samples");
    };
    let total = samples.total() as u32;
    let taken = dump
        .raw_taken
        .or(dump.hist_taken)
        .map(|n| n as u32)
        .unwrap_or(total);
    let facts = Facts::of_capture(
        firmware,
        format!("a text dump ({what})"),
        "unknown",
        taken,
        total,
        "text dump",
        crate::runs::Source::TextDump,
    );
    let report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts,
        None,
        build_options(view),
        &elf::vectors(&elf_bytes),
    );
    print_report(&report, view, None)
}
