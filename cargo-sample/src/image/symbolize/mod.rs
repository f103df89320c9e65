//! From program counters to functions, inline chains and source lines.
//!
//! The function of a sample is the linker-level symbol that contains its address (from the ELF
//! symbol table, which stripped-of-DWARF images still have). Inline chains and lines come from
//! the DWARF of code that is in the image ([`dwarf`]), innermost frame first, and the outermost
//! frame is always the subprogram of that symbol. Each distinct address is resolved once.

pub mod dwarf;

use crate::image::CodeRange;
use std::collections::HashMap;
use std::path::Path;

use object::{Object, ObjectSymbol, SymbolKind};

/// One frame of an inline chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Everything known about one address.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The linker-level function, demangled without hash; `None` outside every symbol.
    pub function: Option<String>,
    /// Inline chain, innermost first; empty without DWARF.
    pub frames: Vec<Frame>,
}

impl Resolved {
    /// `file:line` of the innermost frame.
    pub fn line(&self) -> Option<String> {
        let f = self.frames.first()?;
        Some(format!("{}:{}", f.file.as_deref()?, f.line?))
    }
}

/// A symbolizer for one image.
pub struct Symbolizer {
    /// `(start, end, name)`, sorted by start.
    functions: Vec<(u64, u64, String)>,
    debug: dwarf::DebugInfo,
    /// Data objects `(start, end, name)`, sorted by start: for naming tags (a task's control
    /// block, a handler's state).
    objects: Vec<(u64, u64, String)>,
    /// Code of sampler-rt itself, which a sampler never sees.
    sampler: Vec<CodeRange>,
    /// Addresses inside sampler-rt's functions that run the firmware's own code inlined into
    /// them (a closure given to `measure`, a benchmark's routine): the firmware's, not the
    /// sampler's.
    inlined_user: std::collections::HashSet<u64>,
    root: Option<String>,
    cache: HashMap<u32, Resolved>,
}

/// Whether a (demangled) function is of the firmware's own crates: its path's first segment
/// (inside a `<T as Trait>` the type's) is none of sampler-rt, its dependency defmt, or the
/// standard crates. A name without a path (a C function, a primitive type's impl) is not
/// claimed.
fn firmware_own(function: &str) -> bool {
    let mut f = function.trim_start_matches(['<', '&', '*']);
    for prefix in ["mut ", "const ", "dyn "] {
        f = f.strip_prefix(prefix).unwrap_or(f);
    }
    let Some((krate, _)) = f.split_once("::") else {
        return false;
    };
    // A crate's name is an identifier; `<u32>::checked_rem`, `<[T] as ..>` are the standard
    // library's impls on primitive types.
    if !krate.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return false;
    }
    const PRIMITIVES: [&str; 17] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str",
    ];
    !PRIMITIVES.contains(&krate)
        && !matches!(
            krate,
            "sampler_rt" | "defmt" | "core" | "alloc" | "std" | "compiler_builtins"
        )
}

/// Targets of the Thumb `b` instructions (16-bit T2 and 32-bit T4) in `[start, end)`.
pub(crate) fn branches_to(file: &object::File<'_>, start: u64, end: u64) -> Vec<u64> {
    use object::ObjectSection;
    let Some(bytes) = file.sections().find_map(|sec| {
        let (a, size) = (sec.address(), sec.size());
        if start < a || end > a + size {
            return None;
        }
        let data = sec.data().ok()?;
        data.get((start - a) as usize..(end - a) as usize)
    }) else {
        return Vec::new();
    };
    let half = |i: usize| -> Option<u32> {
        Some(u32::from(u16::from_le_bytes([
            *bytes.get(i)?,
            *bytes.get(i + 1)?,
        ])))
    };
    let mut targets = Vec::new();
    let mut i = 0;
    while let Some(hw) = half(i) {
        let at = start + i as u64;
        if hw & 0xF800 == 0xE000 {
            // B (T2): imm11, halfwords.
            let off = ((((hw & 0x7FF) << 21) as i32) >> 20) as i64;
            targets.push((at as i64 + 4 + off) as u64);
            i += 2;
        } else if hw & 0xF800 == 0xF000 && half(i + 2).is_some_and(|h2| h2 & 0xD000 == 0x9000) {
            // B.W (T4): S:I1:I2:imm10:imm11:0.
            let h2 = half(i + 2).unwrap_or(0);
            let s = (hw >> 10) & 1;
            let (j1, j2) = ((h2 >> 13) & 1, (h2 >> 11) & 1);
            let (i1, i2) = (!(j1 ^ s) & 1, !(j2 ^ s) & 1);
            let imm =
                (s << 24) | (i1 << 23) | (i2 << 22) | ((hw & 0x3FF) << 12) | ((h2 & 0x7FF) << 1);
            let off = (((imm << 7) as i32) >> 7) as i64;
            targets.push((at as i64 + 4 + off) as u64);
            i += 4;
        } else if hw >> 11 >= 0x1D {
            // Another 32-bit instruction.
            i += 4;
        } else {
            i += 2;
        }
    }
    targets
}

/// How many objects starting at or before an address are looked at for the smallest that
/// holds it (objects nest only where a static sits inside another's symbol).
const OVERLAP_SCAN: usize = 64;

/// Whether a symbol's name is one the compiler made up rather than one the source gave
/// (`.L_MergedGlobals.68`, LLVM's block of merged statics; `.Lanon.*`).
fn compiler_made(name: &str) -> bool {
    name.starts_with(".L") || name.starts_with("_MergedGlobals") || name.starts_with("__unnamed_")
}

/// The image's data objects, `(start, end, name)` sorted by start: its data symbols (those
/// the compiler made up left out) and the statics its DWARF places, so that a static folded
/// into a merged block under LTO keeps its name.
fn data_objects(file: &object::File<'_>) -> Vec<(u64, u64, String)> {
    let mut objects: Vec<(u64, u64, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Data && s.size() > 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            (!compiler_made(name)).then(|| (s.address(), s.address() + s.size(), demangle(name)))
        })
        .collect();
    objects.sort();
    let named = objects.clone();
    for v in dwarf::statics(file) {
        let known = named.binary_search_by(|o| (o.0, o.1).cmp(&(v.start, v.end)));
        if known.is_err() {
            objects.push((v.start, v.end, v.name));
        }
    }
    objects.sort();
    objects
}

/// Remove the hash and keep generic parameters readable: `hot_loops::run`, `<T as Trait>::f`.
pub fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => name.to_owned(),
    }
}

/// Code symbols without a size (assembly without `.size`, common in C projects' hand-written
/// routines): each runs to the next function symbol or the end of its section, unless it
/// is inside a sized function.
fn add_unsized(file: &object::File, functions: &mut Vec<(u64, u64, String, bool, String)>) {
    use object::{ObjectSection, ObjectSymbol, SectionKind, SymbolSection};
    let section_end = |s: &object::Symbol| -> Option<u64> {
        let SymbolSection::Section(i) = s.section() else {
            return None;
        };
        let sec = file.section_by_index(i).ok()?;
        (sec.kind() == SectionKind::Text).then(|| sec.address() + sec.size())
    };
    let bare: Vec<(u64, u64, String, bool, String)> = file
        .symbols()
        // A typed function, or an untyped global (an exported entry); an untyped local is a
        // label inside a routine.
        .filter(|s| {
            s.size() == 0
                && (s.kind() == SymbolKind::Text
                    || (s.kind() == SymbolKind::Unknown && s.is_global()))
        })
        .filter_map(|s| {
            let name = s.name().ok()?;
            if name.starts_with('$') || name.starts_with(".L") || name.is_empty() {
                return None;
            }
            let end = section_end(&s)?;
            let start = s.address() & !1;
            Some((start, end, demangle(name), s.is_global(), name.to_owned()))
        })
        .collect();
    if bare.is_empty() {
        return;
    }
    let mut starts: Vec<u64> = functions
        .iter()
        .map(|f| f.0)
        .chain(bare.iter().map(|f| f.0))
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let inside = |a: u64| functions.iter().any(|f| f.0 <= a && a < f.1);
    let mut extra = Vec::new();
    for mut f in bare {
        if inside(f.0) {
            continue;
        }
        let i = starts.partition_point(|&x| x <= f.0);
        if let Some(&next) = starts.get(i) {
            f.1 = f.1.min(next);
        }
        if f.1 > f.0 {
            extra.push(f);
        }
    }
    functions.extend(extra);
}

impl Symbolizer {
    /// Load the symbol table and the DWARF of the image `data`. `root` is the workspace
    /// directory, for shorter paths.
    pub fn new(_path: &Path, data: &[u8], root: Option<&Path>) -> anyhow::Result<Symbolizer> {
        let file = object::File::parse(data)?;
        let mut functions: Vec<(u64, u64, String, bool, String)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                // `$t`/`$d` mapping symbols and section symbols are not functions.
                if name.starts_with('$') || name.is_empty() {
                    return None;
                }
                let start = s.address() & !1;
                let end = start.saturating_add(s.size());
                Some((start, end, demangle(name), s.is_global(), name.to_owned()))
            })
            .collect();
        add_unsized(&file, &mut functions);
        // sampler-rt's code, and the device timers' handlers that `timer_interrupt!` defines
        // (a few instructions ending in a branch to the sampler's entry).
        let entry = functions
            .iter()
            .find(|f| f.4 == "sampler_rt_entry")
            .map(|f| f.0);
        let sampler = functions
            .iter()
            .filter(|f| {
                (f.2.contains("sampler_rt") && !sampler_api_sampled(&f.2))
                    || entry.is_some_and(|e| {
                        f.1 - f.0 <= 24 && branches_to(&file, f.0, f.1).contains(&e)
                    })
            })
            .map(|f| CodeRange {
                start: f.0,
                end: f.1,
            })
            .collect();
        // Global names first at one address (aliases such as SysTick = sampler_rt_entry).
        functions.sort_by(|a, b| a.0.cmp(&b.0).then(b.3.cmp(&a.3)));
        functions.dedup_by(|b, a| a.0 == b.0);
        let symbols: Vec<dwarf::Symbol> = functions
            .iter()
            .map(|f| dwarf::Symbol {
                start: f.0,
                end: f.1,
                raw_name: f.4.clone(),
            })
            .collect();
        let debug = dwarf::DebugInfo::new(&file, &symbols);
        let objects = data_objects(&file);
        let mut sym = Symbolizer {
            functions: functions
                .into_iter()
                .map(|(a, b, n, _, _)| (a, b, n))
                .collect(),
            debug,
            objects,
            sampler,
            inlined_user: std::collections::HashSet::new(),
            root: root.map(|r| r.to_string_lossy().into_owned()),
            cache: HashMap::new(),
        };
        // Tell the sampler's code from the firmware's by what runs there: an address of a
        // sampler-rt function whose inline chain holds a frame of the firmware's own crates.
        let mut user = std::collections::HashSet::new();
        for r in &sym.sampler {
            if r.end - r.start > 1 << 16 {
                continue;
            }
            for pc in (r.start..r.end).step_by(2) {
                if sym
                    .resolve_uncached(pc)
                    .frames
                    .iter()
                    .any(|f| firmware_own(&f.function))
                {
                    user.insert(pc);
                }
            }
        }
        sym.inlined_user = user;
        Ok(sym)
    }

    /// Name `start..end` as a function of its own: an address range that stands for something
    /// other than code (samples taken while the core slept). The range must hold no code.
    pub fn add_pseudo(&mut self, start: u64, end: u64, name: &str) {
        let i = self.functions.partition_point(|f| f.0 < start);
        self.functions.insert(i, (start, end, name.to_owned()));
        self.cache.clear();
    }

    /// The function symbol containing `pc`.
    pub fn function_of(&self, pc: u64) -> Option<&str> {
        let i = self.functions.partition_point(|f| f.0 <= pc);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (pc < f.1).then_some(f.2.as_str())
    }

    /// A name for an address: the data object or function it points into (`TASK_A`,
    /// `TASK_A+0x10`; the smallest object that holds it), else the address in hex.
    pub fn name_address(&self, addr: u32) -> String {
        let a = addr as u64;
        let i = self.objects.partition_point(|o| o.0 <= a);
        if let Some(o) = self.objects[..i]
            .iter()
            .rev()
            .take(OVERLAP_SCAN)
            .filter(|o| a < o.1)
            .min_by_key(|o| o.1 - o.0)
        {
            return if a == o.0 {
                o.2.clone()
            } else {
                format!("{}+{:#x}", o.2, a - o.0)
            };
        }
        if let Some(f) = self.function_of(a) {
            return f.to_owned();
        }
        format!("{addr:#010x}")
    }

    /// The code of the function containing `pc`.
    pub fn range_of(&self, pc: u64) -> Option<CodeRange> {
        let i = self.functions.partition_point(|f| f.0 <= pc);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (pc < f.1).then_some(CodeRange {
            start: f.0,
            end: f.1,
        })
    }

    /// Every function's code, in address order.
    pub fn ranges(&self) -> Vec<CodeRange> {
        self.functions
            .iter()
            .map(|f| CodeRange {
                start: f.0,
                end: f.1,
            })
            .collect()
    }

    /// Every function: `(start, end, name)`.
    pub fn all_functions(&self) -> Vec<(u64, u64, String)> {
        self.functions.clone()
    }

    /// Whether any function's name passes `test` (without copying the table).
    pub fn any_function(&self, test: impl Fn(&str) -> bool) -> bool {
        self.functions.iter().any(|f| test(&f.2))
    }

    /// The names of the image's data objects.
    pub fn object_names(&self) -> impl Iterator<Item = &str> {
        self.objects.iter().map(|o| o.2.as_str())
    }

    /// The code of the functions called `name`.
    pub fn ranges_of(&self, name: &str) -> Vec<CodeRange> {
        self.functions
            .iter()
            .filter(|f| f.2 == name)
            .map(|f| CodeRange {
                start: f.0,
                end: f.1,
            })
            .collect()
    }

    /// Whether every piece of code named `name` is sampler-rt's own (which the exact count
    /// leaves out).
    pub fn is_sampler_function(&self, name: &str) -> bool {
        let ranges = self.ranges_of(name);
        !ranges.is_empty() && ranges.iter().all(|r| self.is_sampler(r.start))
    }

    /// Whether `pc` is in sampler-rt's own code (not the firmware's code inlined into it).
    pub fn is_sampler(&self, pc: u64) -> bool {
        self.sampler.iter().any(|r| r.contains(pc)) && !self.inlined_user.contains(&pc)
    }

    /// `` `function` at file:line `` of the innermost frame at `pc` that is not the standard
    /// library's (or
    /// sampler-rt's): where the firmware's own code was when the standard library's inlined
    /// code ran (a loop's `Range::next` is charged to the loop's line).
    pub fn own_line(&mut self, pc: u32) -> Option<String> {
        let r = self.resolve(pc);
        let library = |f: &str| f.contains("::") && !firmware_own(f);
        let f = r
            .frames
            .iter()
            .find(|f| !library(&f.function))
            .or(r.frames.first())?;
        Some(format!(
            "`{}` at {}:{}",
            f.function,
            f.file.as_deref()?,
            f.line?
        ))
    }

    /// Resolve one address (cached).
    pub fn resolve(&mut self, pc: u32) -> &Resolved {
        if !self.cache.contains_key(&pc) {
            let r = self.resolve_uncached(pc as u64);
            self.cache.insert(pc, r);
        }
        &self.cache[&pc]
    }

    fn resolve_uncached(&self, pc: u64) -> Resolved {
        let Some((start, end, name)) = self.symbol_of(pc) else {
            return Resolved {
                function: None,
                frames: Vec::new(),
            };
        };
        let function = Some(name.to_owned());
        let mut frames: Vec<Frame> = self
            .debug
            .frames(pc, start, end)
            .into_iter()
            .map(|f| Frame {
                function: f.name.map(|n| demangle(&n)).unwrap_or_else(|| "??".into()),
                file: f.file.map(|p| self.shorten(&p)),
                line: f.line,
            })
            .collect();
        // Code without a subprogram entry (assembly) may still have lines: the symbol is
        // then its only frame.
        if frames.is_empty()
            && let Some((file, line)) = self.debug.location(pc)
        {
            frames.push(Frame {
                function: name.to_owned(),
                file: file.map(|p| self.shorten(&p)),
                line,
            });
        }
        // sampler-rt's fold of its Embassy hooks' events masks interrupts over nearly all of
        // its work: the samples that wait land after each unmask, so its own inline frames and
        // lines would be wrong where its time (the function as a whole) is right. It stands as
        // the one frame of its own.
        if name == FOLD && frames.len() > 1 {
            frames.drain(..frames.len() - 1);
        }
        Resolved { function, frames }
    }

    /// The function symbol containing `pc`: `(start, end, name)`.
    fn symbol_of(&self, pc: u64) -> Option<(u64, u64, &str)> {
        let i = self.functions.partition_point(|f| f.0 <= pc);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (pc < f.1).then_some((f.0, f.1, f.2.as_str()))
    }

    /// How much debug information described code that is not in the image (ignored).
    pub fn discarded(&self) -> dwarf::Discarded {
        self.debug.discarded()
    }

    /// Paths relative to the workspace, the cargo registry or the standard library.
    /// The file on disk a (shortened) source path of the image names, where it can be found:
    /// itself when absolute, else under the workspace, cargo's registry, or a toolchain's
    /// standard library sources (`rustup component add rust-src`). `CARGO_SAMPLE_SOURCE_PATH`
    /// (directories, separated as in `PATH`) replaces those places: for sources that moved
    /// since the run.
    pub fn source_file(&self, short: &str) -> Option<std::path::PathBuf> {
        use std::path::{Path, PathBuf};
        if let Some(dirs) = std::env::var_os("CARGO_SAMPLE_SOURCE_PATH") {
            let rest = Path::new(short);
            let rest = rest.strip_prefix("/").unwrap_or(rest);
            return std::env::split_paths(&dirs)
                .map(|d| d.join(rest))
                .find(|f| f.is_file());
        }
        let p = Path::new(short);
        if p.is_absolute() {
            return p.is_file().then(|| p.to_path_buf());
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".cargo")));
        let rustup_home = std::env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".rustup")));
        let mut roots: Vec<PathBuf> = self.root.iter().map(PathBuf::from).collect();
        let subdirs = |dir: Option<PathBuf>, below: &str| -> Vec<PathBuf> {
            dir.and_then(|d| std::fs::read_dir(d).ok())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path().join(below))
                .collect()
        };
        roots.extend(subdirs(cargo_home.map(|c| c.join("registry/src")), ""));
        roots.extend(subdirs(
            rustup_home.map(|r| r.join("toolchains")),
            "lib/rustlib/src/rust/library",
        ));
        roots
            .into_iter()
            .map(|r| r.join(short))
            .find(|f| f.is_file())
    }

    pub fn shorten(&self, path: &str) -> String {
        if let Some(root) = &self.root
            && let Some(rest) = path.strip_prefix(root.as_str())
        {
            return rest.trim_start_matches('/').to_owned();
        }
        if let Some(i) = path.find("/registry/src/") {
            let rest = &path[i + "/registry/src/".len()..];
            if let Some(j) = rest.find('/') {
                return rest[j + 1..].to_owned();
            }
        }
        if let Some(rest) = path.strip_prefix("/rustc/")
            && let Some(j) = rest.find("/library/")
        {
            return rest[j + "/library/".len()..].to_owned();
        }
        path.to_owned()
    }
}

/// sampler-rt's fold of its Embassy hooks' events into its statistics.
const FOLD: &str = "sampler_rt_task_fold";

/// Whether a sampler-rt function runs in the firmware's own context while the sampler samples
/// (lap timing, benchmarks, tags, PMU regions): samples land in it as in any of the firmware's
/// code, so its time is the firmware's, and the exact count keeps it. The code that writes
/// those records into the dump runs once sampling has stopped, and stays the sampler's.
fn sampler_api_sampled(name: &str) -> bool {
    // The Embassy hooks' shared append, their rare paths and the fold of their events run
    // inside the executor's hooks, in the firmware's time (the hooks themselves,
    // `_embassy_trace_*`, are named without the crate); the sampler's pause and resume run
    // inside its own interrupt.
    const SAMPLED: [&str; 10] = [
        "sampler_rt::laps::",
        "sampler_rt::bench::",
        "sampler_rt::tags::",
        "sampler_rt::pmu::",
        "sampler_rt::tasks::",
        "sampler_rt_task_event",
        "sampler_rt_task_fold",
        "sampler_rt_task_idle_folds",
        "sampler_rt_task_tag_",
        "sampler_rt::without_interrupts",
    ];
    const AT_THE_END: [&str; 8] = [
        "write_record",
        "write_trace",
        "write_names",
        "record_len",
        "trace_len",
        "::hooks::",
        "::finish",
        "::freeze",
    ];
    SAMPLED.iter().any(|p| name.contains(p)) && !AT_THE_END.iter().any(|p| name.contains(p))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_firmwares_own_frames_are_told_from_the_libraries() {
        for own in [
            "laps::main::{{closure}}",
            "aarch64_pmu::known_loop",
            "<laps::Foo as core::ops::drop::Drop>::drop",
            "&mut app::Task",
        ] {
            assert!(firmware_own(own), "{own}");
        }
        for library in [
            "sampler_rt::laps::Region::time",
            "core::ptr::read_volatile",
            "<u32 as core::cmp::PartialOrd>::lt",
            "<[T] as core::slice::SlicePattern>::as_slice",
            "compiler_builtins::mem::memcpy",
            "<sampler_rt::laps::Lap as core::ops::drop::Drop>::drop",
            "defmt::export::istr",
            "<u32>::checked_rem",
            "<usize as core::cmp::PartialOrd>::lt",
            "u32::wrapping_add",
            "memcpy",
        ] {
            assert!(!firmware_own(library), "{library}");
        }
    }

    use super::*;

    #[test]
    fn the_samplers_api_that_runs_while_it_samples_is_the_firmwares_time() {
        for sampled in [
            "sampler_rt::laps::Region::time",
            "sampler_rt::laps::Region::iterate",
            "<sampler_rt::laps::Lap as core::ops::drop::Drop>::drop",
            "sampler_rt::bench::run",
            "sampler_rt::tags::set_tag",
            "sampler_rt::pmu::trace",
            "sampler_rt::pmu::Region::measure",
            "sampler_rt::without_interrupts",
            "sampler_rt_task_event",
            "sampler_rt_task_fold",
            "sampler_rt_task_tag_push",
            "sampler_rt::tasks::claim",
            "sampler_rt::tasks::other_executor",
        ] {
            assert!(sampler_api_sampled(sampled), "{sampled}");
        }
        for own in [
            "sampler_rt_slow",
            "sampler_rt::cortex_m::dump::send_dump",
            "sampler_rt::wire::records::DumpWriter::put",
            "sampler_rt::laps::write_record",
            "sampler_rt::tags::write_names",
            "sampler_rt::pmu::hooks::write_trace",
            "sampler_rt::pmu::finish",
            "sampler_rt::start",
            "sampler_rt::a64::vectors::sample",
            "sampler_rt_task_pause",
            "sampler_rt::tasks::freeze",
            "sampler_rt::tasks::write_record",
        ] {
            assert!(!sampler_api_sampled(own), "{own}");
        }
    }

    fn fixture() -> Symbolizer {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        Symbolizer::new(
            &path,
            &data,
            Some(Path::new("/work/main/examples/seed-scenarios")),
        )
        .unwrap()
    }

    #[test]
    fn fixture_functions_inline_chains_and_lines() {
        let mut s = fixture();
        // hot_a spans 0xfee..0xffc in the fixture.
        assert_eq!(s.function_of(0xfee), Some("hot_a"));
        assert_eq!(s.function_of(0xffa), Some("hot_a"));
        assert_eq!(s.function_of(0xffc), Some("hot_b"));
        assert_eq!(s.function_of(0x10), None, "the vector table is no function");
        // The loop's decrement is `Range::next` inlined into hot_a: the chain ends in hot_a.
        let chains: Vec<Vec<Frame>> = (0xff4..0xffa)
            .step_by(2)
            .map(|pc| s.resolve(pc).frames.clone())
            .collect();
        for c in &chains {
            assert!(!c.is_empty(), "no DWARF frames");
            assert_eq!(c.last().unwrap().function, "hot_a", "{c:?}");
        }
        let inlined: Vec<&Frame> = chains
            .iter()
            .filter(|c| c.len() > 1)
            .map(|c| &c[0])
            .collect();
        assert!(
            !inlined.is_empty(),
            "no inlined frames in hot_a's loop: {chains:?}"
        );
        assert!(
            inlined.iter().any(|f| f
                .file
                .as_deref()
                .is_some_and(|p| p.starts_with("core/src/"))),
            "core's frames should show as core/src/...: {inlined:?}"
        );
        // The workspace's own file is shown relative to the root.
        let outer = chains[0].last().unwrap();
        assert_eq!(outer.file.as_deref(), Some("src/lib.rs"));
        assert!(s.resolve(0xff6).line().unwrap().contains(':'));
        // Outside every function: no name, no frames.
        assert!(s.resolve(0x1000_0000).function.is_none());
    }

    #[test]
    fn paths_are_shortened() {
        let s = fixture();
        assert_eq!(
            s.shorten("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-0.7.7/src/lib.rs"),
            "cortex-m-rt-0.7.7/src/lib.rs"
        );
        assert_eq!(
            s.shorten("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/cmp.rs"),
            "core/src/cmp.rs"
        );
        assert_eq!(s.shorten("/elsewhere/x.rs"), "/elsewhere/x.rs");
    }

    #[test]
    fn demangling_drops_hashes_only() {
        assert_eq!(
            demangle("_ZN10sampler_rt6target11sample_ring17h1672cf6fddc43219E"),
            "sampler_rt::target::sample_ring"
        );
        assert_eq!(demangle("hot_a"), "hot_a");
        assert_eq!(
            demangle(
                "_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h0b5a1f5a0d0f0e0fE"
            ),
            "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"
        );
    }
}
