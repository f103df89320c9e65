//! `cargo sample swo`: a recorded SWO capture reported against its ELF.

use anyhow::{Context, Result};

use super::saved::{build_options, load_dump, print_report};
use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::report::{self, Facts};
use crate::term;

/// `cargo sample swo`: a recorded SWO capture, reported like a run.
pub fn swo(args: &crate::cli::SwoArgs) -> Result<()> {
    if let Some(run) = &args.synthesize_from {
        let dump = load_dump(run)?;
        let stream = crate::dump::itm::synthetic(&dump.pcs, args.full);
        std::fs::write(&args.capture, &stream)
            .with_context(|| format!("writing {}", args.capture.display()))?;
        term::status(
            "Wrote",
            format!(
                "{} ({} bytes, {} PC samples)",
                args.capture.display(),
                stream.len(),
                dump.pcs.len()
            ),
        );
        return Ok(());
    }
    let data = std::fs::read(&args.capture)
        .with_context(|| format!("reading {}", args.capture.display()))?;
    if args.events {
        anstream::print!("{}", crate::dump::itm::event_lines(&data, args.sync));
        return Ok(());
    }
    let elf_path = args
        .elf
        .as_ref()
        .context("`--elf` names the image that ran")?;
    let elf_bytes =
        std::fs::read(elf_path).with_context(|| format!("reading {}", elf_path.display()))?;
    elf::inspect(&elf_bytes)?;
    let s = crate::dump::itm::summarize(&data, args.sync);
    let mut sym = Symbolizer::new(elf_path, &elf_bytes, None)?;
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let mut samples = report::Samples {
        ordered: s.pcs.iter().map(|pc| pc & !1).collect(),
        ..report::Samples::default()
    };
    for &pc in &samples.ordered {
        *samples.per_pc.entry(pc).or_default() += 1;
    }
    let all = s.pcs.len() as u64 + s.sleep;
    if s.sleep > 0 {
        let share = 100.0 * s.sleep as f64 / all as f64;
        samples.findings.push(report::Diagnostic {
            kind: report::Finding::Asleep,
            severity: report::Severity::Note,
            message: format!(
                "{} of {all} PC samples ({share:.2} %) found the core asleep (sleep packets carry no \
                 address); the shares above are of the samples taken awake",
                s.sleep
            ),
            percent: Some(share),
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    if s.overflow > 0 {
        samples.findings.push(report::Diagnostic {
            kind: report::Finding::Lost,
            severity: report::Severity::Warning,
            message: format!(
                "the ITM overflowed {} times: packets, PC samples among them, were lost there. \
                 Sample less often (a larger period) or raise the SWO speed",
                s.overflow
            ),
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    if s.skipped > 0 || s.invalid > 0 {
        term::note(format!(
            "{} bytes skipped before the first synchronisation packet, {} bytes that start no packet",
            s.skipped, s.invalid
        ));
    }
    let taken = s.pcs.len() as u32;
    let facts = Facts::of_capture(
        elf_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        format!("an SWO capture ({} bytes)", data.len()),
        "DWT",
        taken,
        taken,
        "end of capture",
        "swo",
    );
    let report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts,
        None,
        build_options(&args.view),
        &elf::vectors(&elf_bytes),
    );
    print_report(&report, &args.view, None)
}
