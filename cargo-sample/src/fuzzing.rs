//! What each fuzz target (`fuzz/`) does with its input, here so that the committed corpus and
//! every crash ever found are also replayed by the ordinary test suite (`tests/host/corpus.rs`,
//! with overflow checks on). Each function must never panic, whatever the bytes; the asserts
//! in them are properties that must hold for any input.

use std::io::Write;

use crate::{
    capture::snapshot, dump, dump::itm, dump::laps, dump::textdump, image::disasm, image::elf,
    image::symbolize, project,
};

/// The sampler's dump (every record kind), as read from a run directory, a serial port or a
/// snapshot of a target's memory.
pub fn dump(data: &[u8]) {
    let (d, _) = dump::decode_partial(data);
    // What decoded re-encodes and decodes to the same samples.
    if d.hist.is_none() && !d.pcs.is_empty() {
        let tags = if d.tags.len() == d.pcs.len() {
            d.tags.clone()
        } else {
            Vec::new()
        };
        let again = dump::encode(&dump::Dump::of_samples(
            d.info,
            d.first_seq,
            d.pcs.clone(),
            tags,
        ));
        let (e, err) = dump::decode_partial(&again);
        assert!(err.is_none(), "a re-encoded dump does not decode: {err:?}");
        assert_eq!(e.pcs, d.pcs);
    }
    let _ = laps::decode(data);
    let _ = crate::dump::stream::find_dump(data);
    // The plugin's call graph (read from the same run directories): what parses names every
    // count in some stack, and inclusive time never exceeds the total.
    if let Ok(t) = crate::dump::callgraph::parse(data) {
        let s = crate::analysis::callgraph::stacks(&t, |pc| format!("{:x}", pc >> 4));
        let sum = t.counts.iter().fold(0u64, |a, c| a.saturating_add(c.2));
        assert_eq!(s.total, sum);
        for (inc, own) in crate::analysis::callgraph::inclusive(&s).values() {
            assert!(own <= inc && *inc <= s.total);
        }
    }
    if data.len() >= sampler_rt::wire::STATE_LEN {
        let (state, ring) = data.split_at(sampler_rt::wire::STATE_LEN);
        let _ = snapshot::ring_region(state);
        let _ = snapshot::to_dump(state, ring, crate::dump::Fingerprint::default(), None);
    }
}

/// An ITM/SWO stream: decoded whole and with and without waiting for sync; fed in two pieces
/// cut anywhere (as reads from a probe arrive) it gives the same events as in one; and the
/// same holds for it taken as TPIU frames.
pub fn itm(data: &[u8]) {
    let _ = itm::event_lines(data, false);
    let _ = itm::event_lines(data, true);
    let _ = itm::summarize(data, false);
    if let Some((&cut, rest)) = data.split_first() {
        let at = cut as usize % (rest.len() + 1);
        let mut p = itm::Parser::new(false);
        let mut pieces = Vec::new();
        for part in [&rest[..at], &rest[at..]] {
            p.feed(part, &mut |e| pieces.push(e));
        }
        let mut q = itm::Parser::new(false);
        let mut once = Vec::new();
        q.feed(rest, &mut |e| once.push(e));
        assert_eq!(pieces, once, "events depend on where the stream was cut");
        // The same stream taken as TPIU frames: the deframer in two pieces as in one.
        let (whole, _) = crate::dump::tpiu::deframe(rest, 1);
        let mut d = crate::dump::tpiu::Deframer::new(1);
        let mut split = Vec::new();
        for part in [&rest[..at], &rest[at..]] {
            d.feed(part, &mut split);
        }
        assert_eq!(
            whole, split,
            "deframed bytes depend on where the stream was cut"
        );
        let _ = itm::summarize(&whole, false);
    }
}

/// The C profiler's text dump.
pub fn textdump(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = textdump::parse(text);
    }
}

/// An ELF file of any shape: inspected, disassembled, symbolized (DWARF is read from a file).
pub fn elf(data: &[u8]) {
    let _ = elf::inspect(data);
    let _ = elf::vectors(data);
    let _ = elf::code_bytes(data);
    let _ = elf::unaligned_functions(data, 4);
    let _ = elf::symbol_address(data, sampler_rt::wire::STATE_SYMBOL);
    if let Ok(mut code) = disasm::Code::new(data) {
        let _ = code.function(0, 0x200).len();
        let _ = code.function(0xFFFF_FF00, 0xFFFF_FFFF).len();
    }
    let Ok(mut f) = tempfile::NamedTempFile::new() else {
        return;
    };
    if f.write_all(data).is_err() {
        return;
    }
    if let Ok(mut s) = symbolize::Symbolizer::new(f.path(), data, None) {
        for pc in [0u32, 0x100, 0x400, 0x0800_0000, 0xFFFF_FFFE] {
            let _ = s.resolve(pc);
            let _ = s.name_address(pc);
        }
    }
}

/// Runner command lines, scripts around QEMU and `--config` values.
pub fn cargo_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
    if let project::Runner::Qemu(q) = project::runner::parse(&words) {
        let _ = q.noteworthy_replacements();
        let _ = q.machine_name();
    }
    let _ = project::runner::qemu_in_script(text);
    let _ =
        project::config::cli_overrides(&[text.to_owned()], std::path::Path::new("/nonexistent"));
}

/// A file of Arm's PMU data (`--pmu-data`): any table it gives is sorted by code with distinct
/// codes, its counter count fits PMCR_EL0.N, and every named event is found by its name.
pub fn pmu_data(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok((t, _)) = crate::analysis::events::parse_arm_json(&text) else {
        return;
    };
    assert!(t.counters <= 31);
    assert!(t.events.windows(2).all(|w| w[0].code < w[1].code));
    for e in &t.events {
        let _ = t.name(e.code);
        if !e.name.is_empty() {
            assert!(t.find(&e.name).is_ok(), "{} not found by name", e.name);
        }
    }
}

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz/fuzz_targets` and the corpus directories call them.
pub const TARGETS: [(&str, Target); 7] = [
    ("dump", dump),
    ("itm", itm),
    ("textdump", textdump),
    ("elf", elf),
    ("cargo_config", cargo_config),
    ("pmu_data", pmu_data),
    ("unwind", unwind),
];

/// The image the unwinder is fuzzed against: a real firmware's call-frame information and code
/// (the checkout's test fixture, read once; without it there is nothing to fuzz).
fn unwind_elf() -> &'static [u8] {
    use std::sync::OnceLock;
    static ELF: OnceLock<Vec<u8>> = OnceLock::new();
    ELF.get_or_init(|| {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/hot-loops.elf"
        ))
        .unwrap_or_default()
    })
}

/// The stack unwinder, on registers, a window and frame records made of the input's words
/// (garbage, cycles, runaway chains), against a real image's call-frame information: every
/// stack ends within the depth bound, with a reason when it fails.
pub fn unwind(data: &[u8]) {
    use crate::image::unwind::{Context, End, MAX_DEPTH, Unwinder};
    use std::sync::OnceLock;
    static FUNCTIONS: OnceLock<Vec<crate::image::CodeRange>> = OnceLock::new();
    let elf = unwind_elf();
    if elf.is_empty() {
        return;
    }
    let functions = FUNCTIONS.get_or_init(|| {
        symbolize::Symbolizer::new(std::path::Path::new("fixture.elf"), elf, None)
            .map(|s| s.ranges())
            .unwrap_or_default()
    });
    let words: Vec<u32> = data
        .chunks(4)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(b)
        })
        .collect();
    if words.len() < 5 {
        return;
    }
    let (regs, rest) = words.split_at(5);
    let split = (regs[4] as usize % (rest.len() + 1)) & !1;
    let (window, rec) = rest.split_at(split);
    let records: Vec<(u32, u32)> = rec.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let mut u = Unwinder::new(elf, functions, Some(0xC1));
    // Addresses near the image's code and stack, so that many inputs unwind a few frames.
    let sp = 0x2000_0000 | (regs[2] & 0xFFFC);
    let r = u.unwind(&Context {
        pc: regs[0] & 0xFFF,
        lr: regs[1],
        sp,
        r7: regs[3],
        window,
        records: &records,
        frames_inline: regs[4] & 1 != 0,
    });
    assert!(r.frames.len() <= MAX_DEPTH + 2, "{} frames", r.frames.len());
    if let End::Failed(why) = &r.end {
        assert!(!why.is_empty());
    }
}
