//! `cargo sample swo`: a recorded SWO capture reported against its ELF.

use anyhow::{Context, Result, bail};

use super::saved::{build_options, print_report};
use crate::dump::tpiu;
use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::report::load::load_dump;
use crate::report::{self, Facts};
use crate::term;

/// `cargo sample swo`: a recorded SWO capture, reported like a run.
pub fn swo(args: &crate::cli::SwoArgs) -> Result<()> {
    if let Some(id) = args.tpiu
        && !(1..=0x7C).contains(&id)
    {
        bail!("--tpiu {id}: trace IDs go from 1 to 0x7C (the ITM's is usually 1)");
    }
    if let Some(run) = &args.synthesize_from {
        let dump = load_dump(run)?;
        let mut stream = crate::dump::itm::synthetic(&dump.pcs, args.full);
        if let Some(id) = args.tpiu {
            // Another source's bytes between the ITM's, as a trace port with two sources.
            let other: Vec<u8> = (0..stream.len() as u32 / 4)
                .map(|i| (i * 29) as u8)
                .collect();
            let other_id = if id == 0x7C { 1 } else { id + 1 };
            let sources: Vec<(u8, &[u8])> = stream
                .chunks(61)
                .zip(other.chunks(13).chain(std::iter::repeat(&[][..])))
                .flat_map(|(itm, more)| [(id, itm), (other_id, more)])
                .filter(|(_, b)| !b.is_empty())
                .collect();
            stream = tpiu::frame(&sources);
        }
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
    if let Some(addr) = &args.tcp {
        record_tcp(addr, args)?;
    }
    let raw = std::fs::read(&args.capture)
        .with_context(|| format!("reading {}", args.capture.display()))?;
    let data = match args.tpiu {
        Some(id) => {
            let (data, d) = tpiu::deframe(&raw, id);
            term::note(format!(
                "TPIU: {} frames, {} synchronisation packets, {} bytes of trace source {id}{}",
                d.frames,
                d.syncs,
                data.len(),
                if d.leftover() > 0 {
                    format!(
                        ", {} bytes at the end that make no whole frame",
                        d.leftover()
                    )
                } else {
                    String::new()
                }
            ));
            if data.is_empty() && !raw.is_empty() {
                bail!(
                    "the capture holds no bytes of trace source {id}: is it framed by the TPIU \
                     (drop --tpiu if not), and is the ITM's trace ID {id} (ITM_TCR.TraceBusID)?"
                );
            }
            data
        }
        None => raw,
    };
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
        ordered: report::itm::with_sleep(&s),
        ..report::Samples::default()
    };
    for &pc in &samples.ordered {
        *samples.per_pc.entry(pc).or_default() += 1;
    }
    let all = s.pcs.len() as u64 + s.sleep;
    samples
        .findings
        .extend(report::itm::asleep(&mut sym, s.sleep, all));
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
    let taken = all.min(u32::MAX as u64) as u32;
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
        crate::runs::Source::Swo,
    );
    let vectors = elf::vectors(&elf_bytes);
    let mut report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts,
        None,
        build_options(&args.view),
        &vectors,
    );
    report.exceptions = report::itm::exception_rows(&s.exceptions, &vectors, &sym);
    print_report(&report, &args.view, None)
}

/// Record `--tcp` into the capture file, with the bytes and PC samples so far on a spinner.
fn record_tcp(addr: &str, args: &crate::cli::SwoArgs) -> Result<()> {
    let bar = term::spinner(&format!("Recording SWO from {addr}"));
    let mut deframer = args.tpiu.map(tpiu::Deframer::new);
    let mut parser = crate::dump::itm::Parser::new(args.sync);
    let (mut bytes, mut pcs) = (0u64, 0u64);
    let mut itm = Vec::new();
    let (n, end) = crate::capture::tcp::record(addr, &args.capture, args.duration, |chunk| {
        bytes += chunk.len() as u64;
        let data = match deframer.as_mut() {
            Some(d) => {
                itm.clear();
                d.feed(chunk, &mut itm);
                &itm[..]
            }
            None => chunk,
        };
        parser.feed(data, &mut |e| {
            if matches!(e, crate::dump::itm::Event::PcSample(_)) {
                pcs += 1;
            }
        });
        bar.set_message(format!(
            "Recording SWO from {addr}: {} KiB, {pcs} PC samples",
            bytes / 1024
        ));
    })?;
    bar.finish_and_clear();
    let how = match end {
        crate::capture::tcp::End::Closed => "the server closed the stream",
        crate::capture::tcp::End::Duration => "--duration passed",
        crate::capture::tcp::End::Interrupted => "interrupted",
    };
    term::status(
        "Recorded",
        format!(
            "{n} bytes from {addr} into {} ({how})",
            args.capture.display()
        ),
    );
    Ok(())
}
