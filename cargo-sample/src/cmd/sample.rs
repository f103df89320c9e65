//! `cargo sample`: build, run in QEMU, capture, save, report.

#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use sampler_rt::wire::{self, Info};

use crate::capture::snapshot;
use crate::cli::{Format, RunArgs, TruthMethod, ViewArgs};
use crate::dump::{self, Dump};
use crate::exec::exact;
use crate::exec::exact::{Counting, PluginApi};
use crate::exec::machine::{self, Machine};
use crate::exec::qemu;
use crate::exec::serial;
use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::project::firmware;
use crate::project::{self, Project};
use crate::report::{self, ExactFacts, Facts, text};
use crate::runs::{self, RunMeta};
use crate::term;

/// Default number of samples.
pub const DEFAULT_SAMPLES: u32 = 10_000;
/// Default mean period in QEMU, in instructions.
pub const DEFAULT_PERIOD_INSTRUCTIONS: f64 = 10_000.0;
/// Default random-generator seed (fixed, so that runs repeat exactly).
pub const DEFAULT_SEED: u32 = 0x2545_F491;

/// The sampling timer of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    SysTick,
    Cmsdk {
        base: u32,
        irq: u32,
    },
    /// ARMv8-A: PMU event counter 0 overflowing every period events.
    Pmu {
        event: u16,
    },
}

/// A profile of unoptimised code shows where debug builds spend their time, not where the
/// firmware that ships does.
fn warn_if_unoptimised(p: &Project, cargo: &crate::cli::CargoArgs) {
    let sel = crate::project::Selection::from(cargo);
    if firmware::unoptimised(p, &sel) {
        term::warn(format!(
            "profiling an unoptimised build (the `{}` profile): its time goes to code an \
             optimised build does not have. Add `--release` (or `--profile NAME`)",
            sel.profile_name()
        ));
    }
}

/// Refuse a `--tag` the run cannot honour before anything is built.
fn check_tag_before_build(args: &RunArgs, p: &Project) -> Result<()> {
    if args.tag.is_none() {
        return Ok(());
    }
    if args.laps {
        bail!("`--tag` records who was running with each sample; `--laps` takes no samples");
    }
    if args.mode == crate::cli::Mode::Hist {
        bail!(
            "`--tag` records a tag with each sample of a ring; bins have none (drop `--mode hist`)"
        );
    }
    if p.triple.starts_with("thumbv6m") || p.triple.starts_with("thumbv8m.base") {
        bail!(
            "`--tag` needs ARMv7-M or later (`{}` has no `ldrd`/`strd` for the sampler to \
             record a tag with each sample)",
            p.triple
        );
    }
    Ok(())
}

/// The interrupt that paces the sampler with `timer` in this image.
fn pacer(fw: &elf::Firmware, timer: Timer) -> crate::image::wiring::Pacer {
    use crate::image::wiring::Pacer;
    match timer {
        _ if fw.aarch64 => Pacer::A64,
        Timer::SysTick => Pacer::SysTick,
        Timer::Cmsdk { irq, .. } => Pacer::Device {
            irq,
            timer: "the CMSDK timer",
        },
        Timer::Pmu { .. } => Pacer::A64,
    }
}

/// An ARMv8-A PMU event's name in the machine's CPU table (its number if none).
fn event_name(cpu: &str, event: u16) -> String {
    event_table(cpu)
        .map(|t| t.name(event))
        .unwrap_or_else(|_| format!("{event:#x}"))
}

/// The event table of the CPU that runs (`--cpu` or the runner's `-cpu`), else the Cortex-A53's
/// (the architectural events have the same numbers on every core).
fn event_table(cpu: &str) -> Result<crate::analysis::events::Table> {
    crate::analysis::events::table(cpu).or_else(|_| crate::analysis::events::table("cortex-a53"))
}

/// Parse `systick` or `cmsdk:BASE:IRQ` (or plain `cmsdk` for the machine's timer 0).
pub fn parse_timer(s: &str, m: &Machine, cpu: &str) -> Result<Timer> {
    let armv8 = m.targets.iter().any(|t| t.starts_with("aarch64"));
    // On ARMv8-A the default (`systick`) is the generic timer, which may be named so.
    if s == "systick" || (armv8 && s == "generic") {
        return Ok(Timer::SysTick);
    }
    let num = |t: &str| -> Result<u32> {
        let r = match t.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16),
            None => t.parse(),
        };
        r.map_err(|_| anyhow!("`{t}` is not a number"))
    };
    let parts: Vec<&str> = s.split(':').collect();
    if let ["pmu", event] = parts.as_slice() {
        if !armv8 {
            bail!(
                "`--timer pmu:EVENT` samples on ARMv8-A PMU overflows; {} is a Cortex-M",
                m.name
            );
        }
        let table = event_table(cpu)?;
        return Ok(Timer::Pmu {
            event: table.find(event)?,
        });
    }
    match parts.as_slice() {
        ["cmsdk"] => m
            .cmsdk_timer
            .map(|(base, irq)| Timer::Cmsdk { base, irq })
            .with_context(|| format!("{} has no CMSDK timer; give `cmsdk:BASE:IRQ`", m.name)),
        ["cmsdk", base, irq] => Ok(Timer::Cmsdk {
            base: num(base)?,
            irq: num(irq)?,
        }),
        _ => bail!(
            "unknown timer `{s}`: use `systick`, `cmsdk:BASE:IRQ` (e.g. `cmsdk:0x40000000:8`), or on \
             ARMv8-A `generic` or `pmu:EVENT` (e.g. `pmu:cpu_cycles`)"
        ),
    }
}

/// Parse a period: ticks (`250`), a duration (`10us`, `1ms`, `500ns`) or a rate (`100khz`).
pub fn parse_period(s: &str, timer_hz: u64) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        anyhow!(
            "`{s}` is not a period: use ticks (`250`), a duration (`10us`) or a rate (`100khz`)"
        )
    })?;
    let hz = timer_hz as f64;
    let ticks = match unit.trim() {
        "" | "ticks" => v,
        "ns" => v * hz / 1e9,
        "us" | "µs" => v * hz / 1e6,
        "ms" => v * hz / 1e3,
        "s" => v * hz,
        "hz" => hz / v,
        "khz" => hz / (v * 1e3),
        "mhz" => hz / (v * 1e6),
        other => bail!("unknown unit `{other}` in period `{s}`"),
    };
    let ticks = ticks.round();
    if !(2.0..=16_777_216.0).contains(&ticks) {
        bail!("a period of {ticks} ticks is out of range: the timer takes 2 ..= 16777216 ticks");
    }
    Ok(ticks as u64)
}

/// The timer settings for a mean period of `period` ticks with a random span of `span` ticks
/// (rounded down to a power of two): `(reload, jitter_mask)`, with the mean kept at `period`.
///
/// The default span is the widest power of two the period allows (below twice the period):
/// successive periods then range from about half to one and a half times the mean, so that a
/// program loop longer than the period is still entered at a fresh point by every sample.
pub fn timer_settings(period: u64, span: Option<u32>) -> Result<(u32, u32)> {
    // reload = period - 1 - mask / 2 must stay at least 1.
    let widest = (2 * period).saturating_sub(3).max(1);
    let span = match span {
        Some(0) => 0,
        Some(s) => 1u64 << (63 - (s as u64).leading_zeros()),
        None => 1u64 << (63 - widest.leading_zeros()),
    };
    if span > widest {
        bail!(
            "a jitter span of {span} ticks is too wide for a period of {period} ticks: at most {} \
             (the span must stay below twice the period)",
            1u64 << (63 - widest.leading_zeros())
        );
    }
    let mask = span.saturating_sub(1);
    // reload + 1 + mask / 2 = period on average.
    let reload = period as f64 - 1.0 - mask as f64 / 2.0;
    let reload = reload.round().max(1.0) as u32;
    Ok((reload, mask as u32))
}

/// Where the firmware keeps its tag names, for a host that reads its memory.
fn names_at(elf_bytes: &[u8], fw: &elf::Firmware) -> Option<crate::capture::live::NamesAt> {
    let addr = elf::symbol_address(elf_bytes, wire::NAMES_SYMBOL)?;
    Some(crate::capture::live::NamesAt {
        addr: u32::try_from(addr).ok()?,
        wide: fw.aarch64,
    })
}

/// [`parse_tag`], for the firmware's architecture: ARMv8-A has no stacked xPSR, only words.
fn tag_for(aarch64: bool, what: &str, elf: &[u8]) -> Result<(u8, u32)> {
    let t = parse_tag(what, elf)?;
    if aarch64 && t.0 == wire::TAG_XPSR {
        bail!(
            "`--tag exception` reads the exception number Cortex-M stacks; on ARMv8-A tags are \
             words: `--tag api` (`sampler_rt::set_tag`), `--tag symbol:NAME` or `--tag 0xADDR`"
        );
    }
    Ok(t)
}

/// `--tag`: `exception`, `api`, `symbol:NAME` or an address, as `(TAG_*, address)`.
pub fn parse_tag(what: &str, elf_bytes: &[u8]) -> Result<(u8, u32)> {
    let symbol = |name: &str| -> Result<u32> {
        elf::symbol_address(elf_bytes, name)
            .map(|a| a as u32)
            .with_context(|| format!("the firmware has no symbol `{name}` to record"))
    };
    match what {
        "exception" => Ok((wire::TAG_XPSR, 0)),
        // Address 0: the firmware's own tag word, which sampler-rt finds itself.
        "api" => Ok((wire::TAG_WORD, 0)),
        w => {
            if let Some(name) = w.strip_prefix("symbol:") {
                return Ok((wire::TAG_WORD, symbol(name)?));
            }
            let addr = w
                .strip_prefix("0x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .with_context(|| {
                    format!(
                        "`--tag {w}`: use `exception`, `api`, `symbol:NAME` (e.g. `symbol:pxCurrentTCB`) \
                         or an address such as `0x20000100`"
                    )
                })?;
            if addr % 4 != 0 {
                bail!("`--tag {w}`: the word must be 4-byte aligned");
            }
            Ok((wire::TAG_WORD, addr))
        }
    }
}

/// A name for each tag of a dump: exceptions by their handlers, words by the names the firmware
/// sent or the symbols they point to.
pub fn tag_names(
    kind: u8,
    tags: &[u32],
    names: &[(u32, String)],
    vectors: &[(u32, u32)],
    sym: &Symbolizer,
) -> std::collections::HashMap<u32, String> {
    const SYSTEM: [&str; 16] = [
        "thread mode",
        "Reset",
        "NMI",
        "HardFault",
        "MemManage",
        "BusFault",
        "UsageFault",
        "SecureFault",
        "exception 8",
        "exception 9",
        "exception 10",
        "SVCall",
        "DebugMonitor",
        "exception 13",
        "PendSV",
        "SysTick",
    ];
    let mut out = std::collections::HashMap::new();
    for &t in tags {
        if out.contains_key(&t) {
            continue;
        }
        let name = if kind == wire::TAG_XPSR {
            let n = t & 0x1FF;
            match n {
                0..16 => SYSTEM[n as usize].to_owned(),
                _ => {
                    let handler = vectors
                        .iter()
                        .find(|v| v.0 == n)
                        .and_then(|v| sym.function_of(v.1 as u64))
                        .filter(|f| !f.contains("DefaultHandler"));
                    match handler {
                        Some(f) if f == format!("IRQ{}", n - 16) => f.to_owned(),
                        Some(f) => format!("{f} (IRQ {})", n - 16),
                        None => format!("IRQ {}", n - 16),
                    }
                }
            }
        } else if let Some((_, n)) = names.iter().rev().find(|(tag, _)| *tag == t) {
            n.clone()
        } else if t == 0 {
            "0 (no tag)".to_owned()
        } else {
            let name = sym.name_address(t);
            // An Embassy task's header is in its task pool: `crate::task_fn::POOL`.
            match name.split_once("::POOL") {
                Some((task, _)) => format!("task {task}"),
                None => name,
            }
        };
        out.insert(t, name);
    }
    out
}

/// Where the bins start and how big they are: `(base, shift)`. The bins cover the code
/// `[start, end)` with `counters - 1` of them (the last counter counts samples outside);
/// without `--bin-size` the smallest size that covers the code is chosen.
pub fn hist_layout(text: (u64, u64), counters: u32, bin_size: Option<u32>) -> Result<(u32, u8)> {
    if counters < 2 {
        bail!(
            "the firmware's sampler-rt has no histogram counters: build it with SAMPLER_RT_HIST_BINS (a power of two, e.g. 2048) in the environment"
        );
    }
    let bins = u64::from(counters - 1);
    let fits = |shift: u32| {
        let size = 1u64 << shift;
        let base = text.0 & !(size - 1);
        (base, text.1 - base <= bins * size)
    };
    let shift = match bin_size {
        Some(b) => {
            if !b.is_power_of_two() || !(2..=65536).contains(&b) {
                bail!("`--bin-size {b}`: a bin is a power of two from 2 to 65536 bytes");
            }
            let shift = b.trailing_zeros();
            if !fits(shift).1 {
                let need = (1..=16).find(|&s| fits(s).1).map(|s| 1u32 << s);
                bail!(
                    "{bins} bins of {b} bytes cover {} bytes, but the code is {} bytes: use `--bin-size {}`, or rebuild with more bins (SAMPLER_RT_HIST_BINS)",
                    bins * u64::from(b),
                    text.1 - text.0,
                    need.map(|n| n.to_string()).unwrap_or_else(|| "65536".into())
                );
            }
            shift
        }
        None => (1..=16).find(|&s| fits(s).1).with_context(|| {
            format!(
                "{bins} bins cannot cover {} bytes of code: rebuild with more (SAMPLER_RT_HIST_BINS)",
                text.1 - text.0
            )
        })?,
    };
    Ok((fits(shift).0 as u32, shift as u8))
}

/// Everything the report needs besides the dump and the ELF.
fn facts_of(meta: &RunMeta, dump: &Dump) -> Facts {
    let i = &dump.info;
    let period_ticks = i.reload as f64 + 1.0 + i.jitter_mask as f64 / 2.0;
    let kept = match &dump.hist {
        Some(h) => h.total() as u32,
        None => dump.pcs.len() as u32,
    };
    let overwritten = if dump.hist.is_some() {
        0
    } else {
        // Samples lost on the way (a live capture that fell behind) are not overwritten ones.
        i.taken.saturating_sub(kept).saturating_sub(i.lost)
    };
    Facts {
        firmware: meta.target_name.clone(),
        machine: match &meta.board {
            Some(how) => format!("{} (board, {how})", meta.machine),
            None => format!("{} (QEMU)", meta.machine),
        },
        unit: meta.unit.clone(),
        on_events: i.timer == wire::TIMER_PMU && meta.timer_hz == 0,
        foreign_interrupts: i.foreign,
        timer: match i.timer {
            wire::TIMER_CMSDK => "CMSDK timer".into(),
            wire::TIMER_DWT => "DWT".into(),
            wire::TIMER_GENERIC => "generic timer".into(),
            // Only the cycle counter has a rate.
            wire::TIMER_PMU if meta.timer_hz > 0 => "PMU cycle counter".into(),
            wire::TIMER_PMU => "PMU event counter".into(),
            wire::TIMER_PCSR => "DWT_PCSR polled by the host".into(),
            _ => "SysTick".into(),
        },
        timer_hz: meta.timer_hz,
        period_ticks,
        period_units: period_ticks * meta.units_per_tick,
        jitter_ticks: if i.jitter_mask == 0 {
            0
        } else {
            i.jitter_mask + 1
        },
        priority: i.priority,
        taken: i.taken,
        lost: i.lost,
        overwritten,
        requested: meta.requested_samples,
        stop: report::stop_reason(i.stop).into(),
        source: meta.source.clone().unwrap_or_else(|| "dump".into()),
        duration_units: i.taken as f64 * period_ticks * meta.units_per_tick,
    }
}

/// Load a dump from a run directory: the firmware's own, else a snapshot saved beside it.
pub fn load_dump(dir: &Path) -> Result<Dump> {
    let path = dir.join(runs::DUMP);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let (d, err) = dump::decode_partial(&bytes);
    match err {
        None => Ok(d),
        Some(dump::DumpError::Truncated { at }) if !d.pcs.is_empty() => {
            term::warn(format!(
                "the dump was cut short after {at} bytes; reporting the {} samples before the cut",
                d.pcs.len()
            ));
            Ok(d)
        }
        Some(e) => Err(anyhow!(e)).with_context(|| format!("decoding {}", path.display())),
    }
}

/// Check that the dump was made by this image.
pub fn verify_fingerprint(elf_bytes: &[u8], dump: &Dump) -> Result<()> {
    let i = &dump.info;
    if i.code_end <= i.code_start {
        bail!("the dump does not say which code made it (empty fingerprint range)");
    }
    let crc = elf::code_crc(elf_bytes, i.code_start as u64, i.code_end as u64)
        .context("the ELF has no code where the dump's fingerprint says")?;
    if crc != i.code_crc {
        bail!(
            "this dump was not made by this ELF: the firmware's code at {:#x}..{:#x} had CRC {:#010x}, this \
             ELF's has {crc:#010x}. Report the run with the ELF saved beside it (`cargo sample report <run>`), \
             or run again",
            i.code_start,
            i.code_end,
            i.code_crc
        );
    }
    Ok(())
}

/// Render a saved run.
pub fn render_run(dir: &Path, view: &ViewArgs) -> Result<()> {
    let report = load_report(dir, build_options(view))?;
    print_report(&report, view)
}

/// The report of a saved run.
pub fn load_report(dir: &Path, opts: report::Options) -> Result<report::Report> {
    let meta = runs::load_meta(dir)?;
    if meta.mode == "exact" {
        return load_exact_report(dir, &meta, opts);
    }
    let elf_path = dir.join(runs::ELF);
    let elf_bytes =
        std::fs::read(&elf_path).with_context(|| format!("reading {}", elf_path.display()))?;
    let dump = load_dump(dir)?;
    verify_fingerprint(&elf_bytes, &dump)?;
    let fw = elf::inspect(&elf_bytes)?;
    if !fw.has_symbols {
        term::warn("the ELF has no function symbols (stripped?): samples cannot be named");
    } else if !fw.has_dwarf {
        term::note("the ELF has no DWARF: no source lines or inline frames");
    }
    let mut sym = Symbolizer::new(&elf_path, &elf_bytes, meta.workspace_root.as_deref())?;
    let exact = match std::fs::read(dir.join(exact::FILE)) {
        Ok(bytes) => Some(exact::parse(&bytes)?),
        Err(_) => None,
    };
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let samples = match &dump.hist {
        Some(h) => hist_samples(h, &sym, opts.bin_split),
        None => {
            let mut s = report::Samples::of_dump(&dump);
            if dump.tags.len() == dump.pcs.len() && !dump.tags.is_empty() {
                // An xPSR carries flags beside the exception number: keep the number.
                s.tags = if dump.info.tag_kind == wire::TAG_XPSR {
                    dump.tags.iter().map(|t| t & 0x1FF).collect()
                } else {
                    dump.tags.clone()
                };
                s.tag_names = tag_names(
                    dump.info.tag_kind,
                    &s.tags,
                    &dump.names,
                    &elf::vectors(&elf_bytes),
                    &sym,
                );
            }
            s
        }
    };
    let mut report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts_of(&meta, &dump),
        exact.as_deref(),
        opts,
        &elf::vectors(&elf_bytes),
    );
    if let Some(c) = meta.core.filter(|c| c.faulted()) {
        let at = sym.name_address(c.pc);
        let message = format!(
            "the firmware faulted: the run ended with the core in {} at {at} (PC {:#010x}). The \
             samples are those taken before the fault",
            c.describe(),
            c.pc
        );
        report.warnings.insert(0, message.clone());
        report.diagnostics.insert(
            0,
            report::Diagnostic {
                kind: "fault",
                severity: report::Severity::Warning,
                message,
                percent: None,
                addresses: vec![c.pc],
                functions: Vec::new(),
            },
        );
    }
    if let Some(l) = &dump.laps {
        // SysTick ticks are the machine's timer ticks; CYCCNT counts cycles.
        let scale = match l.counter {
            // The machine's timer (SysTick; on ARMv8-A the generic timer).
            wire::LAP_COUNTER_SYSTICK | wire::LAP_COUNTER_GENERIC => crate::analysis::laps::Scale {
                units_per_tick: meta.units_per_tick,
                hz: (meta.timer_hz > 0).then_some(meta.timer_hz as f64),
            },
            // QEMU's cycle counter runs at 1 GHz of virtual time: 2^shift cycles an instruction.
            wire::LAP_COUNTER_PMCCNTR if meta.board.is_none() => crate::analysis::laps::Scale {
                units_per_tick: 1.0 / f64::from(1u32 << meta.icount_shift.min(20)),
                hz: Some(1e9),
            },
            _ => crate::analysis::laps::Scale {
                units_per_tick: 1.0,
                hz: (meta.timer_hz > 0).then_some(meta.timer_hz as f64),
            },
        };
        let mut laps = crate::analysis::laps::analyse(l, scale);
        if !dump.pcs.is_empty() || dump.hist.is_some() {
            laps.warnings.push(
                "the sampler's own interrupt also lengthened laps while it sampled: clusters then \
                 mix its cost with the application's interrupts. Time laps without sampling \
                 (`--laps`) to infer an interrupt's cost"
                    .into(),
            );
        }
        report.laps = Some(laps);
    }
    Ok(report)
}

/// The samples of a histogram: each bin split among the functions whose bytes it holds.
fn hist_samples(
    h: &crate::dump::Hist,
    sym: &Symbolizer,
    split: crate::report::bins::Split,
) -> report::Samples {
    let bins: Vec<u64> = h.bins.iter().map(|&b| b as u64).collect();
    let (per_pc, finding) =
        crate::report::bins::split(&bins, h.base, 1 << h.shift, h.outside as u64, sym, split);
    let mut findings: Vec<report::Diagnostic> = finding.into_iter().collect();
    let full = h.saturated();
    if full > 0 {
        findings.push(report::Diagnostic {
            kind: "saturated-bins",
            severity: report::Severity::Warning,
            message: format!(
                "{full} bins reached 65535 samples and stopped counting: their functions are \
                 undercounted. Take fewer samples, or use smaller bins"
            ),
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        });
    }
    report::Samples {
        per_pc,
        binned: true,
        findings,
        ..report::Samples::default()
    }
}

/// The report of a saved `--exact` run.
fn load_exact_report(dir: &Path, meta: &RunMeta, opts: report::Options) -> Result<report::Report> {
    let elf_path = dir.join(runs::ELF);
    let elf_bytes =
        std::fs::read(&elf_path).with_context(|| format!("reading {}", elf_path.display()))?;
    let counts_path = dir.join(exact::FILE);
    let bytes = std::fs::read(&counts_path).with_context(|| {
        format!(
            "reading {} (the run left no counts: see {})",
            counts_path.display(),
            dir.join(runs::OUTPUT).display()
        )
    })?;
    let counts =
        exact::parse(&bytes).with_context(|| format!("decoding {}", counts_path.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    if !fw.has_symbols {
        term::warn("the ELF has no function symbols (stripped?): addresses cannot be named");
    } else if !fw.has_dwarf {
        term::note("the ELF has no DWARF: no source lines or inline frames");
    }
    let mut sym = Symbolizer::new(&elf_path, &elf_bytes, meta.workspace_root.as_deref())?;
    let facts = ExactFacts {
        firmware: meta.target_name.clone(),
        machine: format!("{} (QEMU)", meta.machine),
        counted_by: meta
            .counted_by
            .clone()
            .unwrap_or_else(|| "cargo-sample's QEMU plugin".into()),
        stop: match meta.state.as_str() {
            "budget reached" => format!(
                "stopped after the instruction budget (`--instructions {}`)",
                term::count(meta.instruction_budget.unwrap_or(0))
            ),
            "finished" => "the firmware ended the run".into(),
            "timed out" => "cut short by `--timeout`".into(),
            "interrupted" => "cut short by Ctrl-C".into(),
            other => other.to_owned(),
        },
        instruction_budget: meta.instruction_budget,
    };
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let report = report::build_exact(&mut sym, code.as_mut(), facts, &counts, opts);
    Ok(report)
}

/// What the views ask the report to compute.
fn build_options(view: &ViewArgs) -> report::Options {
    report::Options {
        annotate: view.annotate.unwrap_or(0),
        bin_split: view.bin_split,
        by_tag: view.by.as_deref() == Some("tag"),
    }
}

fn print_report(report: &report::Report, view: &ViewArgs) -> Result<()> {
    let bytes: Vec<u8> = match view.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)?;
            s.push('\n');
            s.into_bytes()
        }
        Format::Text => {
            let mut t = if report.samples == Some(0) && report.laps.is_some() {
                // Laps only (`--laps`): no profile to show.
                String::new()
            } else {
                text::render(
                    report,
                    text::Options {
                        lines: view.lines,
                        tree: view.tree,
                        top: view.top,
                        min_percent: view.min_percent,
                    },
                )
            };
            if let Some(l) = &report.laps {
                if !t.is_empty() {
                    t.push('\n');
                }
                t.push_str(&crate::analysis::laps::render(l, &report.unit));
            }
            t.into_bytes()
        }
        Format::Folded => report::formats::folded(report).into_bytes(),
        Format::Svg => report::formats::svg(report)?,
        Format::Pprof => report::formats::pprof(report)?,
    };
    // Only the text report is painted; its codes never reach a file, and reach standard
    // output only when that stream takes colour.
    let painted = view.format == Format::Text;
    match &view.output {
        Some(path) => {
            let bytes = if painted {
                term::plain(&String::from_utf8_lossy(&bytes)).into_bytes()
            } else {
                bytes
            };
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
            term::status("Wrote", path.display());
        }
        None => {
            use std::io::{IsTerminal, Write};
            if view.format == Format::Pprof && std::io::stdout().is_terminal() {
                bail!(
                    "pprof output is binary: write it to a file with `-o profile.pb.gz` (then `pprof -http=: profile.pb.gz`)"
                );
            }
            if painted {
                let mut out = anstream::stdout().lock();
                out.write_all(&bytes)?;
            } else {
                std::io::stdout().lock().write_all(&bytes)?;
            }
        }
    }
    Ok(())
}

fn missing_setup_help(p: &Project, feature: &str) -> String {
    let dep = match crate::cmd::init::checkout_runtime() {
        Some(dir) => format!("path = \"{}\"", dir.display()),
        None => format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
    };
    format!(
        "`{}` is not set up for sampling. `cargo sample init` does it (and shows the change), or \
         add to {}:\n\n\
         [dependencies]\n\
         sampler-rt = {{ {dep}, optional = true }}\n\n\
         [features]\n\
         {feature} = [\"dep:sampler-rt\"]\n\n\
         and at the top of your entry point (`#[entry]`, RTIC's `#[init]`, \
         `#[embassy_executor::main]`):\n\n    \
         #[cfg(feature = \"{feature}\")]\n    sampler_rt::start();",
        p.package,
        p.manifest_path.display()
    )
}

/// Where the firmware runs in QEMU: the machine (with its options), the CPU, the executable the
/// runner names, and the runner's options that go to QEMU as they are.
pub struct QemuTarget {
    pub machine: &'static Machine,
    /// `-machine` as given (`virt,virtualization=on`).
    pub machine_arg: String,
    pub cpu: String,
    pub program: Option<String>,
    pub extra: Vec<String>,
}

/// The machine and CPU: `--machine`, else the runner's `-machine`, else the triple's default;
/// the runner's other QEMU options are kept (a note lists the ones cargo-sample replaces).
fn choose_machine(args: &RunArgs, p: &Project) -> Result<QemuTarget> {
    let q = p.qemu_runner();
    let name = match (&args.machine, q.and_then(|q| q.machine.clone()), &p.runner) {
        (Some(m), _, _) => m.clone(),
        (None, Some(m), _) => m,
        (None, None, Some(project::Runner::Other { program })) => bail!(
            "the runner `{program}` ({}) is neither QEMU nor probe-rs. Pass `--machine NAME` to \
             profile in QEMU (known: {}), or `--chip NAME` to profile on a board",
            p.runner_origin,
            machine::names()
        ),
        (None, None, _) => match machine::default_for(&p.triple) {
            Some(m) => {
                term::note(format!(
                    "no QEMU machine in the crate's runner; using {} for {}",
                    m.name, p.triple
                ));
                m.name.to_owned()
            }
            None => bail!(
                "no QEMU machine for target `{}`: pass `--machine` (known: {})",
                p.triple,
                machine::names()
            ),
        },
    };
    // `virt,virtualization=on`: options after the name go to QEMU as they are.
    let m = machine::find(name.split(',').next().unwrap_or(&name)).with_context(|| {
        let from = if args.machine.is_some() {
            "`--machine`".to_owned()
        } else {
            p.runner_origin.clone()
        };
        format!(
            "QEMU machine `{name}` (from {from}) is not one cargo-sample knows the clocks of \
             (known: {})",
            machine::names()
        )
    })?;
    if !m.targets.contains(&p.triple.as_str()) {
        term::warn(format!(
            "QEMU {} has a {} core, which does not run `{}` code",
            m.name, m.cpu, p.triple
        ));
    }
    let cpu = args
        .cpu
        .clone()
        .or(q.and_then(|q| q.cpu.clone()))
        .unwrap_or_else(|| m.cpu.to_owned());
    if let Some(q) = q {
        if let Some(script) = &q.script {
            term::note(format!(
                "the runner is a script ({}); cargo-sample runs the QEMU command line found in it \
                 itself: {} -machine {}",
                script.display(),
                q.program,
                q.machine.as_deref().unwrap_or(m.name)
            ));
        }
        let replaced = q.noteworthy_replacements();
        if !replaced.is_empty() {
            term::note(format!(
                "the runner's {} replaced by cargo-sample's own (it needs semihosting, its \
                 monitor, the firmware's UART on its output and its `-icount`){}",
                replaced
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
                    + if replaced.len() == 1 { " is" } else { " are" },
                if q.kept.is_empty() {
                    String::new()
                } else {
                    format!("; kept: `{}`", q.kept.join(" "))
                }
            ));
        }
    }
    Ok(QemuTarget {
        machine: m,
        machine_arg: if args.machine.is_some() || q.and_then(|q| q.machine.as_ref()).is_some() {
            name.clone()
        } else {
            m.name.to_owned()
        },
        cpu,
        program: q.map(|q| q.program.clone()),
        extra: q.map(|q| q.kept.clone()).unwrap_or_default(),
    })
}

/// `cargo sample [args]`: capture, then print the report.
pub fn run(args: &RunArgs) -> Result<()> {
    let dir = capture(args)?;
    render_run(&dir, &args.view)
}

/// Build, run and save a run; returns its directory (with a dump in it).
pub fn capture(args: &RunArgs) -> Result<PathBuf> {
    let p = project::discover(&crate::project::Selection::from(&args.cargo))?;
    if let Some(chip) = board_chip(args, &p)? {
        return capture_board(args, &p, &chip);
    }
    if args.board.serial.is_some() {
        return capture_serial(args, &p);
    }
    if !p.has_feature || !p.has_dependency {
        bail!(missing_setup_help(&p, &args.cargo.feature_name));
    }
    let target = choose_machine(args, &p)?;
    let (m, cpu) = (target.machine, target.cpu.clone());
    let qemu_path = qemu::locate(args.qemu.as_deref(), target.program.as_deref())?;
    let timer = parse_timer(&args.timer, m, &cpu)?;
    if let Timer::Pmu { event } = timer
        && event != crate::analysis::events::CPU_CYCLES
        && event != crate::analysis::events::SW_INCR
    {
        // Measured (QEMU 7.2 and 10.0): a counted event's overflow is never signalled. QEMU
        // arms its overflow timer for one event short of the overflow (the counter then reads
        // 0xFFFFFFFF) and does not arm it again, so the flag appears only when the counter is
        // next read. The cycle counter's timer is armed for the overflow itself and works, and
        // SW_INCR's overflow is checked at the write to PMSWINC_EL0.
        bail!(
            "`--timer pmu:{}` samples on an event counter's overflow, which QEMU (7.2 to 10.0) \
             never signals (it arms the overflow one event early). In QEMU use \
             `--timer pmu:cpu_cycles` (the cycle counter's overflow), `pmu:sw_incr` (software \
             increments) or the generic timer (the default); other events' overflows are for \
             boards, where they are not yet verified",
            event_name(&cpu, event).to_ascii_lowercase()
        );
    }
    if let Timer::Pmu { event } = timer
        && event != crate::analysis::events::CPU_CYCLES
        && args.truth
    {
        bail!(
            "`--truth` compares samples with instruction counts; samples every N {} are a \
             profile of that event, not of instructions. Drop `--truth`, or sample with \
             `--timer pmu:cpu_cycles` or the generic timer",
            event_name(&cpu, event)
        );
    }
    check_tag_before_build(args, &p)?;
    warn_if_unoptimised(&p, &args.cargo);
    let counting = if args.truth {
        Some(choose_counting(
            args.truth_method,
            &qemu_path,
            &firmware::own_dir(&p),
        )?)
    } else {
        None
    };

    let (built, alignment) = match args.align {
        None => (
            firmware::build(&p, &crate::project::Selection::from(&args.cargo), true, &[])?,
            None,
        ),
        Some(n) => {
            let plain =
                firmware::build(&p, &crate::project::Selection::from(&args.cargo), true, &[])?;
            let plain_bytes = elf::code_bytes(&std::fs::read(&plain.elf)?);
            let aligned = firmware::build_aligned(
                &p,
                &crate::project::Selection::from(&args.cargo),
                true,
                n,
            )?;
            let bytes = std::fs::read(&aligned.elf)?;
            let odd = elf::unaligned_functions(&bytes, n as u64);
            let grown = elf::code_bytes(&bytes);
            term::status(
                "Aligned",
                format!(
                    "every function to {n} bytes: code {plain_bytes} -> {grown} bytes ({:+}, {:+.1} %){}",
                    grown as i64 - plain_bytes as i64,
                    100.0 * (grown as f64 / plain_bytes.max(1) as f64 - 1.0),
                    if odd.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; {} precompiled function{} kept {}: {}",
                            odd.len(),
                            if odd.len() == 1 { "" } else { "s" },
                            if odd.len() == 1 { "its own" } else { "theirs" },
                            odd.join(", ")
                        )
                    }
                ),
            );
            (aligned, Some((n, plain_bytes, grown, odd)))
        }
    };
    let elf_bytes = std::fs::read(&built.elf)
        .with_context(|| format!("reading the built firmware {}", built.elf.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    let (Some(_), Some(state)) = (fw.config, fw.state) else {
        bail!(
            "the firmware does not contain sampler-rt's runtime (no `{}` symbol): it is linked out when \
             nothing calls it. Does `main` call `sampler_rt::start()` when the `{}` feature is on?",
            wire::CONFIG_SYMBOL,
            args.cargo.feature_name
        );
    };
    if !args.laps {
        crate::image::wiring::check(&elf_bytes, pacer(&fw, timer))?;
    }
    if let Some(w) = crate::image::wiring::stack_room(&elf_bytes) {
        term::warn(w);
    }
    // The semihosting sink streams every full ring chunk, so any number of samples fits; a live
    // capture for a duration runs until then (no limit).
    let live = args.live || args.duration.is_some();
    let requested = match (args.samples, live && args.duration.is_some()) {
        (Some(n), _) => n,
        (None, true) => 0,
        (None, false) => DEFAULT_SAMPLES,
    };
    // QEMU's cycle counter runs at 1 GHz of emulated time whatever the icount shift; other
    // events have no rate.
    let timer_hz = match timer {
        Timer::Pmu { event } if event == crate::analysis::events::CPU_CYCLES => 1_000_000_000,
        Timer::Pmu { .. } => 0,
        _ => m.systick_hz,
    };
    // PMU overflows: QEMU's cycle counter then ticks once per instruction, as in `stat`.
    let shift = args.icount_shift.unwrap_or_else(|| match timer {
        Timer::Pmu { .. } => 0,
        _ => m.default_icount_shift(),
    });
    // A PMU period counts events: instructions for INST_RETIRED, QEMU's 1 GHz cycles for
    // CPU_CYCLES (2^shift a instruction).
    let units_per_tick = match timer {
        Timer::Pmu { event } if event == crate::analysis::events::CPU_CYCLES => {
            1.0 / f64::from(1u32 << shift)
        }
        Timer::Pmu { .. } => 1.0,
        _ => m.instructions_per_tick(shift),
    };
    let period = match &args.period {
        Some(s) => parse_period(s, timer_hz)?,
        None => (DEFAULT_PERIOD_INSTRUCTIONS / units_per_tick)
            .round()
            .max(2.0) as u64,
    };
    let span = if args.no_jitter { Some(0) } else { args.jitter };
    let (reload, jitter_mask) = timer_settings(period, span)?;
    let (timer_kind, timer_base, timer_irq) = match timer {
        Timer::SysTick => (wire::TIMER_SYSTICK, 0, 0),
        Timer::Cmsdk { base, irq } => (wire::TIMER_CMSDK, base, irq),
        Timer::Pmu { event } => (wire::TIMER_PMU, event as u32, 0),
    };
    let (mode, hist_base, hist_shift) = match args.mode {
        _ if args.laps => (wire::MODE_OFF, 0, 0),
        crate::cli::Mode::Ring => (wire::MODE_RING, 0, 0),
        crate::cli::Mode::Hist => {
            let text = fw.text.context(
                "the firmware has no `__stext`/`__etext`: the code range for bins is unknown",
            )?;
            let (base, shift) = hist_layout(text, fw.hist_counters, args.bin_size)?;
            (wire::MODE_HIST, base, shift)
        }
    };
    let (tag_kind, tag_addr) = match &args.tag {
        None => (wire::TAG_NONE, 0),
        Some(what) => tag_for(fw.aarch64, what, &elf_bytes)?,
    };
    let config = wire::Config {
        mode,
        hist_base,
        hist_shift,
        tag_kind,
        tag_addr,
        sink: if live {
            wire::SINK_HOST
        } else {
            wire::SINK_SEMIHOSTING
        },
        priority: args.priority.unwrap_or(0),
        timer: timer_kind,
        reload,
        jitter_mask,
        limit: requested,
        seed: args.seed.unwrap_or(DEFAULT_SEED).max(1),
        timer_base,
        timer_irq,
    };

    let dir = save_images(&p, &elf_bytes, Some(&config))?;

    // Samples every N events share out the events, not the instructions.
    let unit = match timer {
        Timer::Pmu { event } if event != crate::analysis::events::CPU_CYCLES => {
            format!("{} events", event_name(&cpu, event))
        }
        _ => "instructions".to_owned(),
    };
    let mut meta = RunMeta {
        machine: m.name.to_owned(),
        cpu: cpu.clone(),
        timer_hz,
        unit: unit.clone(),
        units_per_tick,
        icount_shift: shift,
        requested_samples: requested,
        mode: "sampled".into(),
        align: alignment.as_ref().map(|a| a.0),
        code_growth: alignment.as_ref().map(|a| (a.1, a.2)),
        unaligned_functions: alignment.map(|a| a.3).unwrap_or_default(),
        ..project_meta(&p, &crate::project::Selection::from(&args.cargo))
    };
    runs::save_meta(&dir, &meta)?;

    let mean_period = period as f64 * units_per_tick;
    if args.laps {
        term::status(
            "Running",
            format!("{} in QEMU {} (lap timing)", p.target_name, m.name),
        );
    } else {
        term::status(
            "Running",
            format!(
                "{} in QEMU {} ({} samples, every {:.0} {unit}{})",
                p.target_name,
                m.name,
                requested,
                mean_period,
                if jitter_mask == 0 {
                    ", constant period"
                } else {
                    " on average"
                }
            ),
        );
    }
    let outcome = qemu::run(&qemu::Options {
        qemu: qemu_path,
        machine: target.machine_arg.clone(),
        extra_args: target.extra.clone(),
        cpu,
        kernel: dir.join(runs::LOADED_ELF),
        icount_shift: shift,
        timeout: Duration::from_secs(args.timeout),
        label: format!("sampling {} in QEMU {}", p.target_name, m.name),
        snapshot: (!live).then_some(qemu::Region {
            addr: state.0,
            len: wire::STATE_LEN as u64,
        }),
        output_log: Some(dir.join(runs::OUTPUT)),
        expected_samples: (requested > 0 && !args.laps).then_some(requested as u64),
        budget: None,
        counting: counting.clone(),
        live: live.then(|| qemu::LiveSpec {
            state_addr: state.0 as u32,
            duration: args.duration,
            interval: Duration::from_millis(args.poll_interval.into()),
            app_rtt: elf::symbol_address(&elf_bytes, "_SEGGER_RTT")
                .map(|a| (a as u32, dir.clone())),
            names: names_at(&elf_bytes, &fw),
        }),
        pmu_in_memory: None,
    })?;
    meta.wall_seconds = outcome.wall.as_secs_f64();
    meta.qemu_command = outcome.command.clone();
    meta.exit_code = outcome.status.and_then(|s| s.code());
    meta.counted_by = counting.as_ref().map(Counting::describe);
    check_plugin_loaded(&outcome, counting.as_ref(), &dir)?;

    // Keep the raw capture before decoding anything.
    if let Some(counts) = &outcome.exact {
        runs::write_atomic(&dir.join(exact::FILE), counts)?;
    } else if args.truth {
        term::warn("QEMU left no exact counts (it did not exit normally): no truth column");
    }
    let mut source = "dump";
    if let Some(lo) = &outcome.live {
        source = "live";
        let (a, b) = fw.text.unwrap_or((0, 0));
        let crc = elf::code_crc(&elf_bytes, a, b).unwrap_or(0);
        if let Some(l) = &lo.live {
            let stop = if l.stopped() {
                l.state.stop
            } else {
                wire::STOP_SNAPSHOT
            };
            let d = l.to_dump((a as u32, b as u32, crc), stop);
            runs::write_atomic(&dir.join(runs::DUMP), &dump::encode_samples(&d))?;
            note_live(l, lo);
        }
        if let Some(e) = &lo.error {
            term::warn(format!("reading the target stopped: {e}"));
        }
    }
    let streamed = outcome.dump.as_deref().map(dump::decode_partial);
    let finished_dump = streamed
        .as_ref()
        .is_some_and(|(d, e)| e.is_none() && d.complete);
    if outcome.live.is_some() {
        // Read live: the dump is written above.
    } else if let (Some(bytes), true) = (&outcome.dump, finished_dump) {
        runs::write_atomic(&dir.join(runs::DUMP), bytes)?;
    } else if let Some((state_bytes, ring)) = &outcome.snapshot {
        // Cut short: the chunks the firmware streamed so far, then the newer samples still in
        // its ring. All raw pieces are kept beside the joined dump.
        if let Some(bytes) = &outcome.dump {
            std::fs::write(dir.join(runs::STREAM), bytes)?;
        }
        std::fs::write(dir.join(runs::STATE), state_bytes)?;
        std::fs::write(dir.join(runs::RING), ring)?;
        let (a, b) = fw.text.unwrap_or((0, 0));
        let crc = elf::code_crc(&elf_bytes, a, b).unwrap_or(0);
        let sent = streamed.as_ref().map(|(d, _)| d);
        if let Some(d) = snapshot::to_dump(state_bytes, ring, (a as u32, b as u32, crc), sent) {
            let bytes = match &d.hist {
                Some(h) => dump::encode_hist(&d.info, h),
                None => dump::encode_samples(&d),
            };
            runs::write_atomic(&dir.join(runs::DUMP), &bytes)?;
            source = "snapshot";
        }
    } else if let Some(bytes) = &outcome.dump {
        // Incomplete and nothing to add: reported as far as it goes.
        runs::write_atomic(&dir.join(runs::DUMP), bytes)?;
    }
    meta.source = Some(source.into());
    meta.core = outcome.core;
    let faulted = outcome.core.filter(|c| c.faulted());
    meta.state = if outcome.live.as_ref().is_some_and(|l| l.duration_reached) {
        "duration reached"
    } else if faulted.is_some() {
        "faulted"
    } else if outcome.interrupted {
        "interrupted"
    } else if outcome.timed_out {
        "timed out"
    } else if outcome.status.is_some_and(|s| s.success()) {
        "finished"
    } else {
        "failed"
    }
    .into();
    runs::save_meta(&dir, &meta)?;

    let have_dump = dir.join(runs::DUMP).is_file();
    if let Some(c) = faulted {
        term::warn(format!(
            "the firmware is stuck in {} (PC {:#010x}); reporting the samples taken before",
            c.describe(),
            c.pc
        ));
    } else if outcome.interrupted {
        term::warn("interrupted: reporting the samples taken so far");
    } else if outcome.timed_out {
        term::warn(format!(
            "the run did not finish within {} s (`--timeout`); reporting the samples taken so far",
            args.timeout
        ));
    } else if let Some(status) = outcome.status
        && !status.success()
    {
        match status.code() {
            Some(code) => term::warn(format!("the firmware exited with code {code}")),
            None => term::warn(format!("QEMU ended abnormally ({status})")),
        }
    }
    term::status("Saved", dir.display());
    if !have_dump {
        // With exact counts, how long it ran against the period says why.
        let ran = outcome
            .exact
            .as_deref()
            .and_then(|b| exact::parse(b).ok())
            .map(|c| c.iter().map(|x| x.1).sum::<u64>());
        if let Some(n) = ran {
            term::note(format!(
                "the firmware ran {n} instructions (counted exactly), {:.1} mean sampling \
                 periods of {mean_period:.0}",
                n as f64 / mean_period
            ));
        }
        let why = match outcome.status {
            Some(status) => format!(
                "the firmware ended ({}) without sending samples. sampler-rt sends them when the \
                 sample limit is reached, or at `sampler_rt::exit(code)` / `sampler_rt::flush()`; \
                 a firmware that ends by its own means (semihosting's `debug::exit`, \
                 `panic-semihosting`) takes them with it. With the sampling feature on, end it \
                 with `sampler_rt::exit(code)` (or call `sampler_rt::flush()` just before), or \
                 take fewer samples (`--samples`) so that the limit ends the run first. (And \
                 samples are only taken after `sampler_rt::start()`.)",
                status
                    .code()
                    .map(|c| format!("exit code {c}"))
                    .unwrap_or_else(|| "killed".into())
            ),
            None => "no samples could be recovered: the sampler had not started".to_owned(),
        };
        bail!(
            "{why}; firmware output and the run are kept in {}",
            dir.display()
        );
    }
    Ok(dir)
}

/// The chip to run on: `--chip`, else (unless `--machine` asks for QEMU) the runner's
/// `probe-rs run --chip`, `PROBE_RS_CHIP` or cargo-embed's files. `None`: QEMU.
fn board_chip(args: &RunArgs, p: &Project) -> Result<Option<String>> {
    if let Some(c) = &args.board.conn.chip {
        return Ok(Some(c.clone()));
    }
    if args.machine.is_none() && args.board.serial.is_none() && p.qemu_runner().is_none() {
        let from_runner = p.probe_runner().and_then(|r| r.chip.clone());
        let chip = from_runner.or_else(|| match &p.runner {
            // No runner, or a probe-rs runner that names no chip: as probe-rs would.
            None | Some(project::Runner::Probe(_)) => p.probe_defaults.chip.clone(),
            _ => None,
        });
        if let Some(chip) = chip {
            return Ok(Some(chip));
        }
        if p.probe_runner().is_some() {
            bail!(
                "the runner is probe-rs ({}) but names no chip, and neither PROBE_RS_CHIP nor \
                 cargo-embed's files do: pass `--chip NAME`, or `--machine NAME` for QEMU",
                p.runner_origin
            );
        }
    }
    if args.board.method != crate::cli::Method::Timer {
        bail!(
            "`--method {}` samples on a board: name its chip with `--chip` (e.g. `--chip STM32F407VGTx`)",
            format!("{:?}", args.board.method).to_lowercase()
        );
    }
    Ok(None)
}

/// The probe settings below the command line's: the runner's own, then `PROBE_RS_*` and
/// cargo-embed's files.
fn board_defaults(p: &Project) -> project::runner::Probe {
    p.probe_runner()
        .cloned()
        .unwrap_or_default()
        .or(p.probe_defaults.clone())
}

/// On a board through probe-rs: flash, run, capture, save.
fn capture_board(args: &RunArgs, p: &Project, chip: &str) -> Result<PathBuf> {
    use crate::cli::Method;
    let method = args.board.method;
    if method == Method::Timer {
        check_tag_before_build(args, p)?;
    }
    warn_if_unoptimised(p, &args.cargo);
    if args.truth || args.exact {
        bail!("`--truth` and `--exact` count instructions in QEMU; a board has no such counter");
    }
    if method == Method::Timer && (!p.has_feature || !p.has_dependency) {
        bail!(missing_setup_help(p, &args.cargo.feature_name));
    }
    let clock = args.board.clock.map(u64::from).unwrap_or(0);
    let period = board_period(args, clock)?;
    // The timer method needs the sampler; DWT and PCSR need nothing in the firmware.
    let built = firmware::build(
        p,
        &crate::project::Selection::from(&args.cargo),
        method == Method::Timer,
        &[],
    )?;
    let elf_bytes = std::fs::read(&built.elf)
        .with_context(|| format!("reading the built firmware {}", built.elf.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    let (reload, jitter_mask) =
        timer_settings(period, if args.no_jitter { Some(0) } else { args.jitter })?;
    let requested = args.samples.unwrap_or(if args.duration.is_some() {
        0
    } else {
        DEFAULT_SAMPLES
    });
    let mut state_addr = None;
    let mut config = None;
    if method == Method::Timer {
        let Some(state) = fw.state.filter(|_| fw.config.is_some()) else {
            bail!(
                "the firmware does not contain sampler-rt's runtime: does `main` call \
                 `sampler_rt::start()` when the `{}` feature is on?",
                args.cargo.feature_name
            );
        };
        state_addr = Some(state.0 as u32);
        crate::image::wiring::check(&elf_bytes, pacer(&fw, Timer::SysTick))?;
        config = Some(board_config(
            args,
            &elf_bytes,
            &fw,
            wire::SINK_HOST,
            (reload, jitter_mask),
            requested,
        )?);
    }
    let dir = save_images(p, &elf_bytes, config.as_ref())?;
    let how = format!("{method:?}").to_lowercase();
    let mut meta = RunMeta {
        machine: chip.to_owned(),
        cpu: String::new(),
        timer_hz: clock,
        unit: "cycles".into(),
        units_per_tick: 1.0,
        requested_samples: requested,
        mode: "sampled".into(),
        board: Some(how.clone()),
        ..project_meta(p, &crate::project::Selection::from(&args.cargo))
    };
    runs::save_meta(&dir, &meta)?;
    let cap = crate::exec::probe::capture(&crate::exec::probe::Options {
        conn: crate::exec::probe::Connection::new(
            chip,
            args.board.conn.settings(chip),
            board_defaults(p),
        ),
        elf: dir.join(runs::LOADED_ELF),
        method,
        state_addr,
        duration: args.duration,
        interval: Duration::from_millis(args.poll_interval.into()),
        samples: (requested > 0).then_some(requested as u64),
        clock: args.board.clock,
        swo_baud: args.board.swo_baud,
        dwt_period: period as u32,
        dir: dir.clone(),
        rtt_addr: elf::symbol_address(&elf_bytes, "_SEGGER_RTT"),
        names: names_at(&elf_bytes, &fw),
    });
    let (a, b) = fw.text.unwrap_or((0, 0));
    let code = (
        a as u32,
        b as u32,
        elf::code_crc(&elf_bytes, a, b).unwrap_or(0),
    );
    let cap = match cap {
        Ok(c) => c,
        Err(e) => {
            meta.state = "failed".into();
            runs::save_meta(&dir, &meta)?;
            bail!(
                "{e:#}\n(the image and the run are kept in {})",
                dir.display()
            );
        }
    };
    meta.wall_seconds = cap.wall.as_secs_f64();
    let d = board_dump(&cap, code, reload, requested);
    if let Some(d) = &d {
        runs::write_atomic(&dir.join(runs::DUMP), &dump::encode_samples(d))?;
    }
    meta.source = Some(how);
    meta.state = if cap.interrupted {
        "interrupted"
    } else if cap.duration_reached {
        "duration reached"
    } else {
        "finished"
    }
    .into();
    runs::save_meta(&dir, &meta)?;
    term::status("Saved", dir.display());
    if d.is_none() {
        bail!("no samples arrived; the run is kept in {}", dir.display());
    }
    Ok(dir)
}

/// `--serial PORT`: build with the writer sink, have the image loaded (`--runner`, or by the
/// user), and read the dump from the port. Everything the port carried is kept.
fn capture_serial(args: &RunArgs, p: &Project) -> Result<PathBuf> {
    check_tag_before_build(args, p)?;
    warn_if_unoptimised(p, &args.cargo);
    let port = args.board.serial.as_deref().context("no serial port")?;
    if !p.has_feature || !p.has_dependency {
        bail!(missing_setup_help(p, &args.cargo.feature_name));
    }
    if args.truth || args.exact {
        bail!("`--serial` reads a dump the firmware writes; `--truth` and `--exact` need QEMU");
    }
    let clock = args.board.clock.map(u64::from).unwrap_or(0);
    let period = board_period(args, clock)?;
    let (reload, jitter_mask) =
        timer_settings(period, if args.no_jitter { Some(0) } else { args.jitter })?;
    let built = firmware::build(p, &crate::project::Selection::from(&args.cargo), true, &[])?;
    let elf_bytes = std::fs::read(&built.elf)
        .with_context(|| format!("reading the built firmware {}", built.elf.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    if fw.config.is_none() {
        bail!(
            "the firmware does not contain sampler-rt's runtime: does `main` call \
             `sampler_rt::set_writer(..)` and `sampler_rt::start()` when the `{}` feature is on?",
            args.cargo.feature_name
        );
    }
    crate::image::wiring::check(&elf_bytes, pacer(&fw, Timer::SysTick))?;
    let requested = args.samples.unwrap_or(DEFAULT_SAMPLES);
    let config = board_config(
        args,
        &elf_bytes,
        &fw,
        wire::SINK_WRITER,
        (reload, jitter_mask),
        requested,
    )?;
    let dir = save_images(p, &elf_bytes, Some(&config))?;
    let image = dir.join(runs::LOADED_ELF);
    let mut meta = RunMeta {
        machine: port.display().to_string(),
        timer_hz: clock,
        unit: "cycles".into(),
        units_per_tick: 1.0,
        requested_samples: requested,
        mode: "sampled".into(),
        board: Some("serial".into()),
        source: Some("serial".into()),
        ..project_meta(p, &crate::project::Selection::from(&args.cargo))
    };
    runs::save_meta(&dir, &meta)?;

    // Listen before the board starts talking.
    let (mut port_file, tty) = serial::open(port, args.board.baud)?;
    if !tty {
        term::note(format!(
            "{} is not a terminal: reading it as it is (no baud rate set)",
            port.display()
        ));
    }
    let mut runner = match &args.board.runner {
        Some(cmd) => {
            let mut words = cmd.split_whitespace();
            let prog = words.next().context("`--runner` is empty")?;
            term::status("Loading", format!("{} with `{cmd}`", image.display()));
            let mut c = std::process::Command::new(prog);
            c.args(words).arg(&image).stdin(std::process::Stdio::null());
            // Its own process group: Ctrl-C reaches cargo-sample, which ends the runner.
            #[cfg(unix)]
            c.process_group(0);
            Some(
                c.spawn()
                    .with_context(|| format!("starting the runner `{cmd}`"))?,
            )
        }
        None => {
            term::status(
                "Waiting",
                format!(
                    "for the dump on {}: load {} onto the board and reset it (Ctrl-C to stop)",
                    port.display(),
                    image.display()
                ),
            );
            None
        }
    };
    qemu::install_interrupt_handler();
    let started = std::time::Instant::now();
    let timeout = Duration::from_secs(args.timeout);
    let raw_path = dir.join("serial.bin");
    let mut raw = Vec::new();
    let mut saved_len = 0;
    let mut runner_ended: Option<std::time::Instant> = None;
    let outcome = loop {
        serial::read_some(&mut port_file, &mut raw)?;
        if raw.len() != saved_len {
            // Nothing that arrived is lost if the host dies.
            runs::write_atomic(&raw_path, &raw)?;
            saved_len = raw.len();
        }
        if let Some((_, true)) = serial::find_dump(&raw) {
            break "finished";
        }
        if qemu::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            break "interrupted";
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            break "duration reached";
        }
        if started.elapsed() >= timeout {
            break "timed out";
        }
        if let Some(r) = &mut runner
            && runner_ended.is_none()
            && r.try_wait().ok().flatten().is_some()
        {
            runner_ended = Some(std::time::Instant::now());
        }
        // A runner that ended leaves a second for the last bytes.
        if runner_ended.is_some_and(|t| t.elapsed() >= Duration::from_secs(1)) {
            break "failed";
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(mut r) = runner {
        let _ = r.kill();
        let _ = r.wait();
    }
    meta.wall_seconds = started.elapsed().as_secs_f64();
    meta.state = outcome.into();
    let found = serial::find_dump(&raw);
    if let Some((start, complete)) = found {
        runs::write_atomic(&dir.join(runs::DUMP), &raw[start..])?;
        if !complete {
            term::warn("the dump on the port was cut short; reporting what arrived");
        }
    }
    runs::save_meta(&dir, &meta)?;
    term::status("Saved", dir.display());
    if found.is_none() {
        bail!(
            "no dump arrived on {} ({} bytes read, kept in {}). Does the firmware call \
             `sampler_rt::set_writer` with its UART's write function, and is the baud rate \
             right?",
            port.display(),
            raw.len(),
            raw_path.display()
        );
    }
    Ok(dir)
}

/// The period in cycles on a board: `--period` (a time or rate needs `--clock`), else the
/// default.
fn board_period(args: &RunArgs, clock: u64) -> Result<u64> {
    Ok(match &args.period {
        Some(s) if clock == 0 && s.chars().any(|c| c.is_ascii_alphabetic()) => bail!(
            "`--period {s}` is a time or a rate: give the core clock with `--clock HZ`, or the \
             period in cycles"
        ),
        Some(s) => parse_period(s, clock)?,
        None => DEFAULT_PERIOD_INSTRUCTIONS as u64,
    })
}

/// The dump of a board capture, whichever way it was taken.
pub fn board_dump(
    cap: &crate::exec::probe::Capture,
    code: (u32, u32, u32),
    reload: u32,
    requested: u32,
) -> Option<Dump> {
    if let Some(l) = &cap.live {
        let stop = if l.stopped() {
            l.state.stop
        } else {
            wire::STOP_SNAPSHOT
        };
        return Some(l.to_dump(code, stop));
    }
    let (pcs, timer, reload, lost) = if let Some(s) = &cap.pcsr {
        (s.pcs.clone(), wire::TIMER_PCSR, 0, 0)
    } else if !cap.swo.is_empty() {
        let s = crate::dump::itm::summarize(&cap.swo, false);
        (
            s.pcs.iter().map(|pc| pc & !1).collect(),
            wire::TIMER_DWT,
            cap.dwt_period.unwrap_or(reload + 1).saturating_sub(1),
            s.overflow.min(u32::MAX as u64) as u32,
        )
    } else {
        return None;
    };
    if pcs.is_empty() {
        return None;
    }
    let info = Info {
        mode: wire::MODE_RING,
        timer,
        stop: wire::STOP_SNAPSHOT,
        arch: 7,
        reload,
        limit: requested,
        capacity: pcs.len() as u32,
        taken: pcs.len() as u32,
        lost,
        code_start: code.0,
        code_end: code.1,
        code_crc: code.2,
        ..Info::default()
    };
    Some(Dump::of_samples(info, 0, pcs, Vec::new()))
}

/// Say how a live capture went: losses, and a firmware that ended between two reads.
fn note_live(l: &crate::capture::live::Live, lo: &qemu::LiveOutcome) {
    let read = l.pcs.len() as u64;
    if l.lost > 0 {
        term::warn(format!(
            "{} of {} samples were overwritten before the host read them (counted as lost): \
             lower the rate (`--period`) or enlarge the ring (`SAMPLER_RT_RING_SLOTS`)",
            l.lost,
            read + l.lost
        ));
    }
    if lo.unread_tail {
        term::warn(
            "the firmware ended between two reads: its last samples (at most one poll's worth) \
             are not in the capture. Call `sampler_rt::flush()` before it ends: the firmware then \
             waits for the host",
        );
    }
}

/// What every run's `run.json` starts with: the project, the build and the start.
fn project_meta(p: &Project, cargo: &crate::project::Selection) -> RunMeta {
    RunMeta {
        format_version: 1,
        package: p.package.clone(),
        target_name: p.target_name.clone(),
        triple: p.triple.clone(),
        profile: firmware::profile_name(cargo),
        workspace_root: Some(p.workspace_root.clone()),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        state: "running".into(),
        ..RunMeta::default()
    }
}

/// The sampler's configuration on a board (through a probe or a serial port): SysTick at the
/// core clock, the period and random span in cycles, ring or bins, tags.
fn board_config(
    args: &RunArgs,
    elf_bytes: &[u8],
    fw: &elf::Firmware,
    sink: u8,
    (reload, jitter_mask): (u32, u32),
    requested: u32,
) -> Result<wire::Config> {
    let (tag_kind, tag_addr) = match &args.tag {
        Some(what) => tag_for(fw.aarch64, what, elf_bytes)?,
        None => (wire::TAG_NONE, 0),
    };
    let (mode, hist_base, hist_shift) = match args.mode {
        crate::cli::Mode::Ring => (wire::MODE_RING, 0, 0),
        crate::cli::Mode::Hist => {
            let text = fw.text.context("the firmware has no `__stext`/`__etext`")?;
            let (base, shift) = hist_layout(text, fw.hist_counters, args.bin_size)?;
            (wire::MODE_HIST, base, shift)
        }
    };
    Ok(wire::Config {
        mode,
        hist_base,
        hist_shift,
        sink,
        priority: args.priority.unwrap_or(0),
        timer: wire::TIMER_SYSTICK,
        reload,
        jitter_mask,
        limit: requested,
        seed: args.seed.unwrap_or(DEFAULT_SEED).max(1),
        tag_kind,
        tag_addr,
        ..wire::Config::default()
    })
}

/// A new run directory holding the image as built and, with the sampler's configuration
/// written into it, the image that runs (the same bytes when there is none).
fn save_images(p: &Project, elf_bytes: &[u8], config: Option<&wire::Config>) -> Result<PathBuf> {
    let dir = runs::create(&runs::runs_dir(&firmware::own_dir(p)), &p.target_name)?;
    std::fs::write(dir.join(runs::ELF), elf_bytes)
        .with_context(|| format!("saving the ELF in {}", dir.display()))?;
    let mut loaded = elf_bytes.to_vec();
    if let Some(c) = config {
        elf::patch_config(&mut loaded, c)?;
    }
    std::fs::write(dir.join(runs::LOADED_ELF), &loaded)?;
    Ok(dir)
}

/// How to count every executed instruction with this QEMU.
pub fn choose_counting(method: TruthMethod, qemu: &Path, own: &Path) -> Result<Counting> {
    let probe = qemu::probe(qemu)?;
    let exec_log = || Counting::ExecLog {
        one_insn_flag: match probe.version {
            Some(v) if !v.has_one_insn_per_tb() => vec!["-singlestep".into()],
            _ => vec!["-accel".into(), "tcg,one-insn-per-tb=on".into()],
        },
    };
    // `CARGO_SAMPLE_PLUGIN_API=1|2` overrides the choice by version (to try a QEMU whose
    // version string is unusual, or to see how a QEMU refuses the other generation).
    let api = match std::env::var("CARGO_SAMPLE_PLUGIN_API").as_deref() {
        Ok("1") => Some(PluginApi::V1),
        Ok("2") => Some(PluginApi::V2),
        _ => probe.version.and_then(PluginApi::for_qemu),
    };
    match method {
        TruthMethod::ExecLog => Ok(exec_log()),
        TruthMethod::Plugin | TruthMethod::Auto if probe.plugins && api.is_some() => {
            let api = api.unwrap_or(PluginApi::V2);
            Ok(Counting::Plugin {
                path: exact::install_plugin(own, api)?,
                api,
            })
        }
        TruthMethod::Plugin => {
            let what = match probe.version {
                Some(v) if probe.plugins => format!("QEMU {v} is older than any plugin API"),
                Some(v) => format!("QEMU {v} was built without TCG plugin support"),
                None => format!("{} did not tell its version", qemu.display()),
            };
            bail!(
                "{what}; the exact-count plugin runs in {}. Use `--truth-method exec-log` (exact, about \
                 500 times slower) or a QEMU with plugins",
                exact::SUPPORTED
            )
        }
        TruthMethod::Auto => {
            term::warn(format!(
                "{} has no TCG plugin support: counting instructions through its exec log instead \
                 (exact, but about a million instructions per second)",
                qemu.display()
            ));
            Ok(exec_log())
        }
    }
}

/// When QEMU refused the plugin, say which QEMU versions it supports.
fn check_plugin_loaded(
    outcome: &qemu::Outcome,
    counting: Option<&Counting>,
    dir: &Path,
) -> Result<()> {
    let Some(Counting::Plugin { api, .. }) = counting else {
        return Ok(());
    };
    if outcome.status.is_some_and(|s| s.success()) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&outcome.output);
    if let Some(line) = text.lines().find(|l| l.contains("Could not load plugin")) {
        bail!(
            "QEMU refused cargo-sample's exact-count plugin (API {}): {}\nThe plugin runs in {}. \
             Run again with `--truth-method exec-log` (exact, about 500 times slower). The run is kept in {}",
            api.number(),
            line.trim(),
            exact::SUPPORTED,
            dir.display()
        );
    }
    Ok(())
}

/// `cargo sample --exact`: no sampler; every executed instruction counted, then reported.
pub fn run_exact(args: &RunArgs) -> Result<()> {
    let dir = capture_exact(args)?;
    render_run(&dir, &args.view)
}

/// Build without the sampling feature, run with exact counting, save; returns the run directory.
pub fn capture_exact(args: &RunArgs) -> Result<PathBuf> {
    let p = project::discover(&crate::project::Selection::from(&args.cargo))?;
    let target = choose_machine(args, &p)?;
    warn_if_unoptimised(&p, &args.cargo);
    let (m, cpu) = (target.machine, target.cpu.clone());
    let qemu_path = qemu::locate(args.qemu.as_deref(), target.program.as_deref())?;
    let own = firmware::own_dir(&p);
    let counting = choose_counting(args.truth_method, &qemu_path, &own)?;
    let shift = args
        .icount_shift
        .unwrap_or_else(|| m.default_icount_shift());
    // The program as it is: the sampler would only add its own instructions.
    let built = firmware::build(
        &p,
        &crate::project::Selection::from(&args.cargo),
        false,
        &[],
    )?;
    let elf_bytes = std::fs::read(&built.elf)
        .with_context(|| format!("reading the built firmware {}", built.elf.display()))?;
    elf::inspect(&elf_bytes)?;
    let dir = runs::create(&runs::runs_dir(&own), &p.target_name)?;
    std::fs::write(dir.join(runs::ELF), &elf_bytes)
        .with_context(|| format!("saving the ELF in {}", dir.display()))?;
    let budget = args.instructions.instructions(shift);
    let mut meta = RunMeta {
        machine: m.name.to_owned(),
        cpu: cpu.clone(),
        timer_hz: m.systick_hz,
        unit: "instructions".into(),
        units_per_tick: m.instructions_per_tick(shift),
        icount_shift: shift,
        mode: "exact".into(),
        instruction_budget: Some(budget),
        counted_by: Some(counting.describe()),
        ..project_meta(&p, &crate::project::Selection::from(&args.cargo))
    };
    runs::save_meta(&dir, &meta)?;
    term::status(
        "Counting",
        format!(
            "every instruction of {} in QEMU {} (up to {} instructions, with {})",
            p.target_name,
            m.name,
            crate::term::count(budget),
            counting.describe()
        ),
    );
    let outcome = qemu::run(&qemu::Options {
        qemu: qemu_path,
        machine: target.machine_arg.clone(),
        extra_args: target.extra.clone(),
        cpu,
        kernel: dir.join(runs::ELF),
        icount_shift: shift,
        timeout: Duration::from_secs(args.timeout),
        label: format!("counting {} in QEMU {}", p.target_name, m.name),
        snapshot: None,
        output_log: Some(dir.join(runs::OUTPUT)),
        expected_samples: None,
        budget: Some(budget),
        counting: Some(counting.clone()),
        live: None,
        pmu_in_memory: None,
    })?;
    meta.wall_seconds = outcome.wall.as_secs_f64();
    meta.qemu_command = outcome.command.clone();
    meta.exit_code = outcome.status.and_then(|s| s.code());
    check_plugin_loaded(&outcome, Some(&counting), &dir)?;
    if let Some(counts) = &outcome.exact {
        runs::write_atomic(&dir.join(exact::FILE), counts)?;
    }
    meta.state = if outcome.budget_reached {
        "budget reached"
    } else if outcome.interrupted {
        "interrupted"
    } else if outcome.timed_out {
        "timed out"
    } else if outcome.status.is_some_and(|s| s.success()) {
        "finished"
    } else {
        "failed"
    }
    .into();
    runs::save_meta(&dir, &meta)?;
    if outcome.interrupted {
        term::warn("interrupted: reporting the instructions counted so far");
    } else if outcome.timed_out {
        term::warn(format!(
            "the run did not finish within {} s (`--timeout`); reporting the instructions counted so far",
            args.timeout
        ));
    } else if !outcome.budget_reached
        && let Some(status) = outcome.status
        && !status.success()
    {
        match status.code() {
            Some(code) => term::warn(format!("the firmware exited with code {code}")),
            None => term::warn(format!("QEMU ended abnormally ({status})")),
        }
    }
    term::status("Saved", dir.display());
    if outcome.exact.is_none() {
        bail!(
            "QEMU left no instruction counts; its output and the run are kept in {}",
            dir.display()
        );
    }
    Ok(dir)
}

/// `cargo sample report --text-dump FILE --elf ELF`.
fn render_text_dump(path: &Path, elf_path: &Path, view: &ViewArgs) -> Result<()> {
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
        let size = 1u32 << h.shift;
        let counts: Vec<u64> = h.bins.iter().map(|&b| b as u64).collect();
        let (per_pc, finding) =
            crate::report::bins::split(&counts, h.base, size, h.outside, &sym, view.bin_split);
        let s = report::Samples {
            per_pc,
            binned: true,
            findings: finding.into_iter().collect(),
            ..report::Samples::default()
        };
        (
            s,
            format!(
                "{} bins of {size} bytes from {:#010x}",
                h.bins.len(),
                h.base
            ),
        )
    } else {
        bail!("the text dump holds no samples");
    };
    let total = samples.total() as u32;
    let taken = dump
        .raw_taken
        .or(dump.hist.as_ref().and_then(|h| h.taken))
        .map(|n| n as u32)
        .unwrap_or(total);
    let facts = Facts {
        firmware,
        machine: format!("a text dump ({what})"),
        unit: "samples".into(),
        on_events: false,
        foreign_interrupts: 0,
        timer: "unknown".into(),
        timer_hz: 0,
        period_ticks: 0.0,
        period_units: 0.0,
        jitter_ticks: 0,
        priority: 0,
        taken,
        lost: 0,
        overwritten: taken.saturating_sub(total),
        requested: taken,
        stop: "text dump".into(),
        source: "text dump".into(),
        duration_units: 0.0,
    };
    let report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts,
        None,
        build_options(view),
        &elf::vectors(&elf_bytes),
    );
    print_report(&report, view)
}

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
            kind: "asleep",
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
            kind: "lost",
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
    let facts = Facts {
        firmware: elf_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        machine: format!("an SWO capture ({} bytes)", data.len()),
        unit: "samples".into(),
        on_events: false,
        foreign_interrupts: 0,
        timer: "DWT".into(),
        timer_hz: 0,
        period_ticks: 0.0,
        period_units: 0.0,
        jitter_ticks: 0,
        priority: 0,
        taken,
        lost: 0,
        overwritten: 0,
        requested: taken,
        stop: "end of capture".into(),
        source: "swo".into(),
        duration_units: 0.0,
    };
    let report = report::build_samples(
        &samples,
        &mut sym,
        code.as_mut(),
        facts,
        None,
        build_options(&args.view),
        &elf::vectors(&elf_bytes),
    );
    print_report(&report, &args.view)
}

/// `cargo sample report`.
pub fn report(args: &crate::cli::ReportArgs) -> Result<()> {
    if let (Some(td), Some(elf)) = (&args.text_dump, &args.elf) {
        return render_text_dump(td, elf, &args.view);
    }
    let dir = find_run(args.runs_dir.as_deref(), &args.run)?;
    render_run(&dir, &args.view)
}

/// A run by directory (anywhere, no workspace needed), or by name or `latest` among the runs of
/// `runs_dir` (default: the current workspace's).
fn find_run(runs_dir: Option<&Path>, which: &str) -> Result<PathBuf> {
    let direct = Path::new(which);
    if direct.join(runs::META).is_file() {
        return Ok(direct.to_path_buf());
    }
    let runs_dir = match runs_dir {
        Some(d) => d.to_path_buf(),
        None => default_runs_dir()?,
    };
    runs::find(&runs_dir, which)
}

/// `cargo sample diff`.
pub fn diff(args: &crate::cli::DiffArgs) -> Result<()> {
    let a = find_run(args.runs_dir.as_deref(), &args.before)?;
    let b = find_run(args.runs_dir.as_deref(), &args.after)?;
    let ra = load_report(&a, report::Options::default())?;
    let rb = load_report(&b, report::Options::default())?;
    let code_a = std::fs::read(a.join(runs::ELF))?;
    let code_b = std::fs::read(b.join(runs::ELF))?;
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let d = report::diff::compare(&ra, &rb, (&name(&a), &name(&b)), code_a != code_b);
    match args.format {
        crate::cli::TableFormat::Json => {
            anstream::println!("{}", serde_json::to_string_pretty(&d)?)
        }
        crate::cli::TableFormat::Text => anstream::print!("{}", report::diff::text(&d, args.top)),
    }
    Ok(())
}

fn default_runs_dir() -> Result<PathBuf> {
    let meta = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context(
            "finding the saved runs of the current workspace: run this inside the firmware's \
             crate, give a run directory, or pass --runs-dir",
        )?;
    Ok(runs::runs_dir(
        &meta
            .target_directory
            .into_std_path_buf()
            .join("cargo-sample"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_in_every_unit() {
        assert_eq!(parse_period("250", 25_000_000).unwrap(), 250);
        assert_eq!(parse_period("10us", 25_000_000).unwrap(), 250);
        assert_eq!(parse_period("100kHz", 25_000_000).unwrap(), 250);
        assert_eq!(parse_period("1ms", 12_500_000).unwrap(), 12_500);
        assert!(parse_period("1", 25_000_000).is_err());
        assert!(parse_period("10 parsecs", 25_000_000).is_err());
        assert!(parse_period("1s", 168_000_000).is_err());
    }

    #[test]
    fn jitter_keeps_the_mean_period() {
        let (reload, mask) = timer_settings(250, None).unwrap();
        assert_eq!(mask, 255);
        assert!((reload as f64 + 1.0 + mask as f64 / 2.0 - 250.0).abs() <= 0.5);
        assert_eq!(timer_settings(250, Some(0)).unwrap(), (249, 0));
        assert_eq!(timer_settings(250, Some(100)).unwrap().1, 63);
        assert_eq!(timer_settings(100, Some(128)).unwrap().1, 127);
        assert!(timer_settings(100, Some(256)).is_err());
        // Every default keeps reload >= 1.
        for p in 2..2000 {
            let (r, m) = timer_settings(p, None).unwrap();
            assert!(r >= 1, "period {p}");
            assert!(
                (r as f64 + 1.0 + m as f64 / 2.0 - p as f64).abs() <= 0.5,
                "period {p}"
            );
        }
    }

    #[test]
    fn bins_cover_the_code() {
        // 2047 bins: 2-byte bins cover 4094 bytes, not 5000; 4-byte bins do.
        assert_eq!(
            hist_layout((0x400, 0x400 + 5000), 2048, None).unwrap(),
            (0x400, 2)
        );
        // The base is aligned down to the bin size.
        assert_eq!(
            hist_layout((0x408, 0x1000), 2048, Some(16)).unwrap(),
            (0x400, 4)
        );
        let e = hist_layout((0x400, 0x400 + 5000), 2048, Some(2)).unwrap_err();
        assert!(e.to_string().contains("--bin-size 4"), "{e}");
        assert!(hist_layout((0, 100), 2048, Some(3)).is_err());
        assert!(hist_layout((0, 100), 0, None).is_err());
    }

    #[test]
    fn pmu_overflow_timers_name_their_event_on_armv8_a_only() {
        let virt = machine::find("virt").unwrap();
        assert_eq!(
            parse_timer("pmu:inst_retired", virt, "cortex-a53").unwrap(),
            Timer::Pmu { event: 0x08 }
        );
        assert_eq!(
            parse_timer("pmu:0x11", virt, "cortex-a53").unwrap(),
            Timer::Pmu { event: 0x11 }
        );
        assert!(parse_timer("pmu:no_such", virt, "cortex-a53").is_err());
        // Names come from the table of the CPU that runs: L1D_CACHE_REFILL_RD is the A72's.
        assert_eq!(
            parse_timer("pmu:l1d_cache_refill_rd", virt, "cortex-a72").unwrap(),
            Timer::Pmu { event: 0x42 }
        );
        assert!(parse_timer("pmu:l1d_cache_refill_rd", virt, "cortex-a53").is_err());
        assert_eq!(
            parse_timer("pmu:inst_retired", virt, "max").unwrap(),
            Timer::Pmu { event: 0x08 }
        );
        assert_eq!(
            parse_timer("generic", virt, "cortex-a53").unwrap(),
            Timer::SysTick
        );
        assert!(
            parse_timer(
                "generic",
                machine::find("mps2-an385").unwrap(),
                "cortex-a53"
            )
            .is_err()
        );
        let mps2 = machine::find("mps2-an385").unwrap();
        assert!(parse_timer("pmu:inst_retired", mps2, "cortex-a53").is_err());
    }

    #[test]
    fn timers() {
        let m = machine::find("mps2-an385").unwrap();
        assert_eq!(
            parse_timer("systick", m, "cortex-a53").unwrap(),
            Timer::SysTick
        );
        assert_eq!(
            parse_timer("cmsdk", m, "cortex-a53").unwrap(),
            Timer::Cmsdk {
                base: 0x4000_0000,
                irq: 8
            }
        );
        assert_eq!(
            parse_timer("cmsdk:0x40001000:9", m, "cortex-a53").unwrap(),
            Timer::Cmsdk {
                base: 0x4000_1000,
                irq: 9
            }
        );
        assert!(parse_timer("tim3", m, "cortex-a53").is_err());
        assert!(parse_timer("cmsdk", machine::find("microbit").unwrap(), "cortex-a53").is_err());
    }
}
