//! Reading the firmware image: is it real firmware, where are the sampler's symbols, the code
//! fingerprint, and writing a run's configuration into a copy of it.

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
use sampler_rt::wire;

/// Facts about a firmware ELF.
#[derive(Debug, Clone)]
pub struct Firmware {
    /// `(address, size)` of the configuration block, if sampler-rt is linked in.
    pub config: Option<(u64, u64)>,
    /// `(address, size)` of the sampler state.
    pub state: Option<(u64, u64)>,
    /// `.text` range (`__stext`, `__etext`).
    pub text: Option<(u64, u64)>,
    /// Histogram counters built into sampler-rt (`SAMPLER_RT_HIST_BINS`), the outside one
    /// included; 0 when the firmware has none.
    pub hist_counters: u32,
    pub has_dwarf: bool,
    pub has_symbols: bool,
    /// ARMv8-A (aarch64) code, not Cortex-M.
    pub aarch64: bool,
}

/// Check that `data` is a 32-bit little-endian Arm ELF with a vector table and code, and
/// collect what the run needs from it.
pub fn inspect(data: &[u8]) -> Result<Firmware> {
    let file = object::File::parse(data).context("the firmware is not a readable ELF file")?;
    let aarch64 = file.architecture() == object::Architecture::Aarch64 && file.is_little_endian();
    if !aarch64
        && (file.architecture() != object::Architecture::Arm
            || file.is_64()
            || !file.is_little_endian())
    {
        bail!(
            "the firmware is not little-endian Arm code (found {:?}); is `--target` a thumb or aarch64 triple?",
            file.architecture()
        );
    }
    let vt = vector_section(&file);
    let vt_ok = vt
        .as_ref()
        .and_then(|s| s.data().ok())
        .is_some_and(|d| d.len() >= 8 && d[4..8] != [0, 0, 0, 0]);
    let has_code = file
        .sections()
        .any(|s| s.kind() == SectionKind::Text && s.size() > 0);
    // ARMv8-A firmware has no Cortex-M vector table (the sampler installs its own vectors).
    if (!vt_ok && !aarch64) || !has_code || file.entry() == 0 {
        bail!(
            "the firmware has no vector table or no code (entry {:#x}): the linker script was not used. \
             Is `-C link-arg=-Tlink.x` in the target's rustflags, and is RUSTFLAGS unset (it replaces them)? \
             (An ELF from another build system needs its table in a section `.vector_table`, \
             `.isr_vector` or `.vectors`, or first in memory.)",
            file.entry()
        );
    }
    let sym = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| (s.address(), s.size()))
    };
    let text = match (sym("__stext"), sym("__etext")) {
        (Some((a, _)), Some((b, _))) if b > a => Some((a, b)),
        _ => None,
    };
    // sampler-rt states its number of counters in a constant.
    let hist_counters = sym("SAMPLER_RT_HIST_COUNTERS")
        .and_then(|(addr, _)| bytes_at(data, addr, addr + 4).ok())
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    Ok(Firmware {
        hist_counters,
        config: sym(wire::CONFIG_SYMBOL),
        state: sym(wire::STATE_SYMBOL),
        text,
        has_dwarf: file.section_by_name(".debug_info").is_some(),
        has_symbols: file.symbols().any(|s| s.kind() == SymbolKind::Text),
        aarch64,
    })
}

/// The bytes the image places at `[start, end)`, from its allocated sections (gaps read as 0).
pub fn bytes_at(data: &[u8], start: u64, end: u64) -> Result<Vec<u8>> {
    let file = object::File::parse(data)?;
    let mut out = vec![0u8; (end - start) as usize];
    let mut covered = 0u64;
    for s in file.sections() {
        let alloc = matches!(s.flags(), object::SectionFlags::Elf { sh_flags, .. }
            if sh_flags.0 & object::elf::SHF_ALLOC.0 != 0);
        if !alloc || s.kind() == SectionKind::UninitializedData || s.size() == 0 {
            continue;
        }
        let (a, b) = (s.address(), s.address() + s.size());
        let (lo, hi) = (a.max(start), b.min(end));
        if lo >= hi {
            continue;
        }
        let d = s.data()?;
        let src = &d[(lo - a) as usize..(hi - a) as usize];
        out[(lo - start) as usize..(hi - start) as usize].copy_from_slice(src);
        covered += hi - lo;
    }
    if covered == 0 {
        bail!("the image has no bytes at {start:#x}..{end:#x}");
    }
    Ok(out)
}

/// The fingerprint a dump of this image carries: its code range (`text`, from
/// [`Firmware::text`]) and the CRC of those bytes, as the firmware computes it. Zero when the
/// image has no code range.
pub fn fingerprint(data: &[u8], text: Option<(u64, u64)>) -> crate::dump::Fingerprint {
    let (a, b) = text.unwrap_or((0, 0));
    crate::dump::Fingerprint {
        start: a as u32,
        end: b as u32,
        crc: code_crc(data, a, b).unwrap_or(0),
    }
}

/// CRC-32 of the code range as the firmware computes it (the dump's fingerprint).
pub fn code_crc(data: &[u8], start: u64, end: u64) -> Result<u32> {
    Ok(wire::crc32(&bytes_at(data, start, end)?))
}

/// Write the run's configuration block over the initial value of [`wire::CONFIG_SYMBOL`] in
/// `data` (a copy of the image). The code is not touched.
/// The runtime's configuration version is checked first (as a decoder checks a format's
/// version before reading it): a block of another layout would be ignored or misread.
pub fn patch_config(data: &mut [u8], config: &wire::Config) -> Result<()> {
    check_config_version(data)?;
    patch_symbol(data, wire::CONFIG_SYMBOL, &config.encode())
        .context("writing the run's configuration into the image")
}

/// Refuse an image whose sampler-rt reads another configuration layout than the one this
/// cargo-sample writes, naming both versions.
pub fn check_config_version(data: &[u8]) -> Result<()> {
    let Some(addr) = symbol_address(data, wire::CONFIG_SYMBOL) else {
        return Ok(());
    };
    let initial = bytes_at(data, addr, addr + 8)
        .context("reading the initial bytes of the runtime's configuration block")?;
    let runtime = wire::runtime_config_version(&initial);
    if runtime == Some(wire::CONFIG_VERSION) {
        return Ok(());
    }
    bail!(
        "the firmware's sampler-rt reads configuration version {}, and this cargo-sample ({}) \
         writes version {}: the run would ignore the settings or misread them. Build with the \
         sampler-rt of this cargo-sample (`cargo sample init` points the crate at it), or use \
         the cargo-sample released with the firmware's sampler-rt",
        match runtime {
            Some(v) => v.to_string(),
            None => "0 (it predates versioned configuration blocks)".to_owned(),
        },
        env!("CARGO_PKG_VERSION"),
        wire::CONFIG_VERSION
    )
}

/// Overwrite the initial bytes of the data object `name` in the image with `bytes`.
pub fn patch_symbol(data: &mut [u8], name: &str, bytes: &[u8]) -> Result<()> {
    let offset = {
        let file = object::File::parse(&*data)?;
        let symbol = file
            .symbols()
            .find(|s| s.name() == Ok(name))
            .with_context(|| format!("the firmware has no `{name}` (is sampler-rt linked in?)"))?;
        let index = symbol
            .section_index()
            .with_context(|| format!("`{name}` is in no section"))?;
        let section = file.section_by_index(index)?;
        let (file_off, file_len) = section.file_range().with_context(|| {
            format!("`{name}` has no initial bytes in the file (is sampler-rt too old?)")
        })?;
        let within = symbol.address() - section.address();
        if within + bytes.len() as u64 > file_len || symbol.size() < bytes.len() as u64 {
            bail!("the firmware's `{name}` is smaller than this cargo-sample's (version mismatch)");
        }
        (file_off + within) as usize
    };
    data[offset..offset + bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// Address ranges of code that runs from a copy made at startup: loadable segments whose
/// run address differs from their load address (`.data`-resident functions, code copied to
/// an ITCM or CCM). Such code does not wait on flash, wherever it sits in the memory map.
pub fn copied_code(data: &[u8]) -> Vec<(u32, u32)> {
    use object::elf::{PF_X, PT_LOAD};
    use object::read::elf::{ElfFile32, ProgramHeader};
    let Ok(file) = ElfFile32::<object::Endianness>::parse(data) else {
        return Vec::new();
    };
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|ph| {
            ph.p_type(e) == PT_LOAD
                && ph.p_flags(e).0 & PF_X.0 != 0
                && ph.p_vaddr(e) != ph.p_paddr(e)
                && ph.p_memsz(e) > 0
        })
        .map(|ph| (ph.p_vaddr(e), ph.p_vaddr(e).saturating_add(ph.p_memsz(e))))
        .collect()
}

/// The exception handlers' entry addresses of a Cortex-M image (its vector table's, from
/// NMI on; unset vectors left out).
pub fn handler_entries(elf: &[u8]) -> Vec<u32> {
    vectors(elf)
        .iter()
        .filter(|v| v.0 >= 2 && v.1 > 1)
        .map(|v| v.1 & !1)
        .collect()
}

/// The main stack of a Cortex-M image as `(limit, top)`: the top is the initial stack pointer
/// (the vector table's first word); the limit is the end of the highest RAM section below it
/// (`.bss` and the like under cortex-m-rt's layout), or 64 KiB below the top when none is
/// (a stack placed under the data, as flip-link places it).
pub fn main_stack(data: &[u8]) -> Option<(u32, u32)> {
    let file = object::File::parse(data).ok()?;
    let table = vector_section(&file)?.data().ok()?;
    let top = u32::from_le_bytes(table.get(..4)?.try_into().ok()?) & !3;
    if top == 0 {
        return None;
    }
    let limit = file
        .sections()
        .filter(|s| {
            matches!(
                s.kind(),
                SectionKind::Data | SectionKind::UninitializedData | SectionKind::Tls
            ) && s.size() > 0
        })
        .map(|s| s.address() + s.size())
        .filter(|&end| end <= u64::from(top))
        .max()
        .map(|end| end as u32)
        .unwrap_or(top.saturating_sub(0x1_0000));
    (limit < top).then_some((limit, top))
}

/// Whether the image may run thread-mode code on the process stack: some code section holds an
/// `msr` to PSP, CONTROL or their non-secure aliases (the only ways to switch to it). Read at
/// every halfword, so that data among the code can only say yes where the answer is no, never
/// the reverse. An unreadable image may.
pub fn writes_process_stack(data: &[u8]) -> bool {
    let Ok(file) = object::File::parse(data) else {
        return true;
    };
    file.sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .any(|s| match s.data() {
            Ok(code) => code.windows(4).step_by(2).any(|w| {
                msr_to_process_stack(
                    u16::from_le_bytes([w[0], w[1]]),
                    u16::from_le_bytes([w[2], w[3]]),
                )
            }),
            Err(_) => true,
        })
}

/// Whether two halfwords are an `msr` (T1: `1111 0011 1000 Rn`, `1000 mask 00 SYSm`) to PSP,
/// CONTROL, or their non-secure aliases.
fn msr_to_process_stack(first: u16, second: u16) -> bool {
    first & 0xFFF0 == 0xF380
        && second & 0xF300 == 0x8000
        && matches!(second & 0xFF, 0x09 | 0x14 | 0x89 | 0x94)
}

/// Whether any handler of the image could hold the sampler off: a vector from NMI on that is
/// neither the default handler nor the sampler's (its entry, a timer handler that branches to
/// it, or the device timer's interrupt `sampler_exception`). HardFault ends a run. An image
/// whose default handler or sampler entry cannot be found may have any.
pub fn may_hold_off(data: &[u8], sampler_exception: Option<u32>) -> bool {
    let default = ["DefaultHandler", "DefaultHandler_"]
        .iter()
        .filter_map(|n| symbol_address(data, n))
        .map(|a| a as u32 & !1)
        .collect::<Vec<u32>>();
    if default.is_empty() {
        return true;
    }
    let Some(entry) = symbol_address(data, "sampler_rt_entry").map(|a| a & !1) else {
        return true;
    };
    let Ok(file) = object::File::parse(data) else {
        return true;
    };
    // A timer's handler `timer_interrupt!` defined: a few instructions and a branch to the
    // sampler's entry.
    let samplers = |handler: u32| {
        file.symbols().any(|s| {
            s.kind() == SymbolKind::Text
                && s.address() & !1 == u64::from(handler)
                && (1..=24).contains(&s.size())
                && crate::image::symbolize::branches_to(
                    &file,
                    u64::from(handler),
                    u64::from(handler) + s.size(),
                )
                .contains(&entry)
        })
    };
    vectors(data).iter().any(|&(exception, handler)| {
        exception != 3
            && exception >= 2
            && Some(exception) != sampler_exception
            && !default.contains(&handler)
            && u64::from(handler) != entry
            && !samplers(handler)
    })
}

/// The vector table's entries from the reset vector on: `(exception number, handler address)`
/// with the Thumb bit cleared. Exception numbers 16 and up are the device's interrupts.
pub fn vectors(data: &[u8]) -> Vec<(u32, u32)> {
    let Ok(file) = object::File::parse(data) else {
        return Vec::new();
    };
    let Some(words) = vector_section(&file).and_then(|s| s.data().ok().map(<[u8]>::to_vec)) else {
        return Vec::new();
    };
    words
        .chunks_exact(4)
        .enumerate()
        .skip(1)
        .map(|(i, w)| (i as u32, u32::from_le_bytes([w[0], w[1], w[2], w[3]]) & !1))
        .filter(|&(_, a)| a != 0)
        .collect()
}

/// The section holding the Cortex-M vector table: cortex-m-rt's `.vector_table`, CMSIS's
/// `.isr_vector`, or `.vectors`; else, for other linker scripts, the loaded section at the
/// lowest address when its second word is a Thumb address in the code (a reset handler).
fn vector_section<'d, 'f>(file: &'f object::File<'d>) -> Option<object::Section<'d, 'f>> {
    for name in [
        ".vector_table",
        ".isr_vector",
        ".vectors",
        ".isr_vectors",
        ".intvecs",
    ] {
        if let Some(s) = file.section_by_name(name) {
            return Some(s);
        }
    }
    let in_code = |a: u64| {
        file.sections().any(|s| {
            s.kind() == SectionKind::Text && s.address() <= a && a < s.address() + s.size()
        })
    };
    file.sections()
        .filter(|s| {
            s.size() >= 8 && s.address() < 0x2000_0000 && s.kind() != SectionKind::UninitializedData
        })
        .filter(|s| {
            matches!(
                s.kind(),
                SectionKind::Data | SectionKind::ReadOnlyData | SectionKind::Text
            )
        })
        .min_by_key(|s| s.address())
        .filter(|s| {
            s.data().ok().and_then(|d| d.get(4..8)).is_some_and(|w| {
                let reset = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                reset & 1 == 1 && in_code(u64::from(reset & !1))
            })
        })
}

/// Bytes of executable code in the image.
pub fn code_bytes(data: &[u8]) -> u64 {
    let Ok(file) = object::File::parse(data) else {
        return 0;
    };
    // Sizes a damaged file claims can add up past 2^64.
    file.sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| s.size())
        .fold(0u64, u64::saturating_add)
}

/// Functions whose start is not a multiple of `align` (sorted, demangled).
pub fn unaligned_functions(data: &[u8], align: u64) -> Vec<String> {
    let Ok(file) = object::File::parse(data) else {
        return Vec::new();
    };
    let mut v: Vec<String> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter(|s| s.name().is_ok_and(|n| !n.starts_with('$')))
        .filter(|s| (s.address() & !1) % align != 0)
        .filter_map(|s| s.name().ok().map(crate::image::symbolize::demangle))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The address and size of a symbol of the image, by its (mangled or plain) name.
pub fn symbol_range(data: &[u8], name: &str) -> Option<(u64, u64)> {
    let file = object::File::parse(data).ok()?;
    file.symbols()
        .find(|s| {
            s.name()
                .is_ok_and(|n| n == name || crate::image::symbolize::demangle(n) == name)
        })
        .map(|s| (s.address(), s.size()))
}

/// The address of a symbol of the image, by its (mangled or plain) name.
pub fn symbol_address(data: &[u8], name: &str) -> Option<u64> {
    let file = object::File::parse(data).ok()?;
    file.symbols()
        .find(|s| {
            s.name()
                .is_ok_and(|n| n == name || crate::image::symbolize::demangle(n) == name)
        })
        .map(|s| s.address())
}

/// The entries of sampler-rt's `Region::start`, `Lap::drop` and `Region::iterate` in an
/// image (an absent one as an address nothing calls), if it has `start` or `iterate`.
pub fn lap_functions(elf: &[u8]) -> Option<[u32; 3]> {
    let at = |name: &str| symbol_address(elf, name).map(|a| a as u32 & !1);
    let start = at("sampler_rt::laps::Region::start");
    let iterate = at("sampler_rt::laps::Region::iterate");
    if start.is_none() && iterate.is_none() {
        return None;
    }
    let drop = at("<sampler_rt::laps::Lap as core::ops::drop::Drop>::drop");
    Some([
        start.unwrap_or(u32::MAX),
        drop.unwrap_or(u32::MAX),
        iterate.unwrap_or(u32::MAX),
    ])
}

/// Whether the image is Thumb-1 only (ARMv6-M, ARMv8-M Baseline), from its build attributes
/// (`Tag_THUMB_ISA_use` 1 in `.ARM.attributes`); `false` when they do not say.
pub fn thumb1_only(data: &[u8]) -> bool {
    let Ok(file) = object::File::parse(data) else {
        return false;
    };
    let Some(b) = file
        .section_by_name(".ARM.attributes")
        .and_then(|s| s.data().ok())
    else {
        return false;
    };
    thumb_isa_use(b) == Some(1)
}

/// `Tag_THUMB_ISA_use` of an `.ARM.attributes` section's `aeabi` file attributes.
fn thumb_isa_use(b: &[u8]) -> Option<u64> {
    fn uleb(b: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn string(b: &[u8], at: &mut usize) -> Option<()> {
        let len = b.get(*at..)?.iter().position(|&c| c == 0)?;
        *at += len + 1;
        Some(())
    }
    // 'A', then subsections: length (u32, itself included), vendor name, then for "aeabi"
    // tagged sub-subsections (tag 1 = the file) of length (u32), attributes.
    let mut at = 1;
    if *b.first()? != b'A' {
        return None;
    }
    let len = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
    let end = (at + len).min(b.len());
    at += 4;
    if b.get(at..at + 6)? != b"aeabi\0" {
        return None;
    }
    at += 6;
    if *b.get(at)? != 1 {
        return None;
    }
    let sub = u32::from_le_bytes(b.get(at + 1..at + 5)?.try_into().ok()?) as usize;
    let sub_end = (at + sub).min(end);
    at += 5;
    while at < sub_end {
        let tag = uleb(b, &mut at)?;
        match tag {
            4 | 5 | 65 | 67 => string(b, &mut at)?,
            32 => {
                uleb(b, &mut at)?;
                string(b, &mut at)?;
            }
            9 => return uleb(b, &mut at),
            t if t > 32 && t % 2 == 1 => string(b, &mut at)?,
            _ => {
                uleb(b, &mut at)?;
            }
        }
    }
    None
}

/// Whether sampler-rt keeps Embassy task statistics in the image: its `embassy` feature is on
/// and the image has Embassy tasks (their pools). A crate whose other binaries use Embassy
/// gets the feature in all of them; one without an executor keeps nothing.
pub fn keeps_task_statistics(data: &[u8]) -> bool {
    symbol_address(data, "SAMPLER_RT_TASKS").is_some() && !task_pools(data).is_empty()
}

/// sampler-rt's Embassy hooks in an image, when it keeps task statistics: the entries of
/// `_embassy_trace_task_exec_begin`, `..._exec_end`, `..._task_ready_begin`,
/// `_embassy_trace_executor_idle`, `_embassy_trace_poll_start`, of the sampler's pause and
/// resume around its own work, and the one instruction that reads the counter, in the append
/// they share (`sampler_rt_task_clock_read`).
pub fn task_hooks(elf: &[u8]) -> Option<[u32; 8]> {
    let file = object::File::parse(elf).ok()?;
    symbol_address(elf, "SAMPLER_RT_TASKS")?;
    let names = [
        "_embassy_trace_task_exec_begin",
        "_embassy_trace_task_exec_end",
        "_embassy_trace_task_ready_begin",
        "_embassy_trace_executor_idle",
        "_embassy_trace_poll_start",
        "sampler_rt_task_pause",
        "sampler_rt_task_resume",
        "sampler_rt_task_clock_read",
    ];
    let mut out = [0u32; 8];
    for (slot, name) in out.iter_mut().zip(names) {
        *slot = file
            .symbols()
            .find(|s| s.name() == Ok(name) && s.address() != 0)?
            .address() as u32
            & !1;
    }
    Some(out)
}

/// An Embassy task's pool: `(task, start, end)`.
pub type TaskPool = (String, u32, u32);

/// The Embassy task pools of an image (`crate::task::POOL` statics, which hold each task's
/// header and future), by address.
pub fn task_pools(elf: &[u8]) -> Vec<TaskPool> {
    let Ok(file) = object::File::parse(elf) else {
        return Vec::new();
    };
    // The symbols, and the DWARF's statics: under LTO a pool can be folded into a block of
    // merged statics and keep no symbol of its own.
    let symbols = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Data && s.size() > 0)
        .filter_map(|s| {
            let name = crate::image::symbolize::demangle(s.name().ok()?);
            Some((name, s.address(), s.address() + s.size()))
        });
    let statics = crate::image::symbolize::dwarf::statics(&file)
        .into_iter()
        .map(|s| (s.name, s.start, s.end));
    let mut v: Vec<TaskPool> = symbols
        .chain(statics)
        .filter_map(|(name, start, end)| {
            let task = name.strip_suffix("::POOL")?.to_owned();
            Some((task, start as u32, end as u32))
        })
        .collect();
    v.sort_by_key(|p| p.1);
    v.dedup_by_key(|p| p.1);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thumb_instruction_set_is_read_from_the_build_attributes() {
        // As rustc writes them for thumbv7m-none-eabi: conformance "2.09", CPU_arch v7,
        // profile M, ARM ISA none, Thumb-2.
        let mut v7m = b"A/\0\0\0aeabi\0\x01\x25\0\0\0\x432.09\0".to_vec();
        v7m.extend_from_slice(&[6, 10, 7, b'M', 8, 0, 9, 2, 14, 0]);
        assert_eq!(thumb_isa_use(&v7m), Some(2));
        // thumbv6m: CPU_arch v6-M (11), Thumb-1 only.
        let mut v6m = b"A/\0\0\0aeabi\0\x01\x25\0\0\0\x432.09\0".to_vec();
        v6m.extend_from_slice(&[6, 11, 7, b'M', 8, 0, 9, 1]);
        assert_eq!(thumb_isa_use(&v6m), Some(1));
        assert_eq!(thumb_isa_use(b"B"), None);
    }

    #[test]
    fn only_writes_to_psp_or_control_switch_to_the_process_stack() {
        // Encodings as GNU as assembles them for thumbv7m.
        assert!(msr_to_process_stack(0xF381, 0x8809)); // msr psp, r1
        assert!(msr_to_process_stack(0xF380, 0x8814)); // msr control, r0
        assert!(msr_to_process_stack(0xF38C, 0x8889)); // msr psp_ns, r12
        assert!(!msr_to_process_stack(0xF380, 0x8808)); // msr msp, r0
        assert!(!msr_to_process_stack(0xF380, 0x8810)); // msr primask, r0
        assert!(!msr_to_process_stack(0xF3EF, 0x8C09)); // mrs r12, psp
        assert!(!msr_to_process_stack(0xF3EF, 0x8014)); // mrs r0, control
        // The scenarios' images: `hot-loops` never leaves the main stack.
        let elf = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/hot-loops.elf"),
        )
        .unwrap();
        assert!(!writes_process_stack(&elf));
        assert!(writes_process_stack(b"not an ELF"));
    }

    #[test]
    fn a_runtime_of_another_configuration_version_is_refused_naming_both() {
        let elf = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/hot-loops.elf"),
        )
        .unwrap();
        // The fixture's sampler-rt predates the placeholder: its block is all zeros.
        let e = patch_config(&mut elf.clone(), &wire::Config::default())
            .unwrap_err()
            .to_string();
        let writes = format!("writes version {}", wire::CONFIG_VERSION);
        assert!(
            e.contains("configuration version 0") && e.contains(&writes),
            "{e}"
        );
        // A runtime of the layouts before this one (60 bytes, versions 4 and 3): refused,
        // naming its version.
        let mut elf = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/runs/stacks/firmware.elf"),
        )
        .unwrap();
        for version in [4u16, 3] {
            let mut old = [0u8; 60];
            old[4..6].copy_from_slice(&version.to_le_bytes());
            old[6..8].copy_from_slice(&60u16.to_le_bytes());
            patch_symbol(&mut elf, wire::CONFIG_SYMBOL, &old).unwrap();
            let e = patch_config(&mut elf, &wire::Config::default())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("reads configuration version {version}")),
                "{e}"
            );
        }
    }
}
