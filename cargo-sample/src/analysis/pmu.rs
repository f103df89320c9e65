//! ARMv8-A PMU events: the CPUs' event tables (from Arm's machine-readable data, see
//! `data/pmu/NOTICE`), the dump's PMU record, `cargo sample events`, and `cargo sample stat`:
//! events split into groups the CPU's counters hold, one QEMU run per group, the groups merged
//! per region, and the derived metrics.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use sampler_rt::wire;

use crate::cli::{EventsArgs, StatArgs, TableFormat};
use crate::dump::word;
use crate::{dump, exec::qemu, image::elf, project, project::firmware, runs, term};

/// Every CPU of Arm's machine-readable data, converted by `data/pmu/convert.py`: sections
/// `## <cpu>` of TSV, gzipped.
const TABLES_GZ: &[u8] = include_bytes!("../../data/pmu/cpus.tsv.gz");

/// The shipped tables' text by CPU key (`cortex-a53`), unpacked once.
fn shipped() -> &'static [(String, String)] {
    static TABLES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let mut text = String::new();
        let _ =
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(TABLES_GZ), &mut text);
        text.split("## ")
            .filter_map(|sec| {
                let (key, body) = sec.split_once('\n')?;
                Some((key.trim().to_owned(), body.to_owned()))
            })
            .collect()
    })
}

/// The CPUs whose tables are shipped, by their keys.
pub fn shipped_cpus() -> Vec<&'static str> {
    shipped().iter().map(|(k, _)| k.as_str()).collect()
}

/// The dedicated cycle counter's event.
pub const CPU_CYCLES: u16 = wire::PMU_CPU_CYCLES;

/// The software increment event (PMSWINC_EL0 writes).
pub const SW_INCR: u16 = 0x00;

/// One event of a CPU's table.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Event {
    pub code: u16,
    /// Empty for the implementation-defined events Arm's data gives no name.
    pub name: String,
    pub kind: String,
    pub architectural: Option<bool>,
    pub description: String,
}

/// A CPU's events and counters.
#[derive(Debug, Clone)]
pub struct Table {
    pub cpu: String,
    pub counters: u32,
    pub events: Vec<Event>,
}

/// Parse a shipped table: `# key\tvalue` header lines, then `code\tname\ttype\tarch\tdesc`.
fn parse_table(cpu: &str, text: &str) -> Table {
    let mut t = Table {
        cpu: cpu.to_owned(),
        counters: 6,
        events: Vec::new(),
    };
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            if let Some(("counters", v)) = h.split_once('\t') {
                t.counters = v.trim().parse().unwrap_or(6);
            }
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 5 {
            continue;
        }
        let Ok(code) = u16::from_str_radix(f[0].trim_start_matches("0x"), 16) else {
            continue;
        };
        t.events.push(Event {
            code,
            name: f[1].to_owned(),
            kind: f[2].to_owned(),
            architectural: match f[3] {
                "y" => Some(true),
                "n" => Some(false),
                _ => None,
            },
            description: f[4].to_owned(),
        });
    }
    t
}

/// A CPU's table from a file of Arm's machine-readable PMU data (`pmu/<cpu>.json`): the
/// top-level `cpu` and `counters`, and per event `code`, `name`, `type`, `architectural` and
/// `description`. Events without a name keep an empty one (shown by number); events without a
/// code cannot be programmed and are left out, their number returned beside the table.
pub fn parse_arm_json(text: &str) -> Result<(Table, usize)> {
    let v: serde_json::Value =
        serde_json::from_str(text).context("not JSON (expected Arm's pmu/<cpu>.json)")?;
    let events = v
        .get("events")
        .and_then(|e| e.as_array())
        .context("no `events` array: not a file of Arm's PMU data (pmu/<cpu>.json)")?;
    let cpu = v
        .get("cpu")
        .and_then(|c| c.as_str())
        .unwrap_or("unnamed CPU")
        .to_owned();
    let counters = v
        .get("counters")
        .and_then(|c| c.as_u64())
        .and_then(|c| u32::try_from(c).ok())
        .filter(|&c| c <= 31)
        .unwrap_or(6);
    let text_of = |e: &serde_json::Value, k: &str| {
        e.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut t = Table {
        cpu,
        counters,
        events: Vec::new(),
    };
    let mut no_code = 0;
    for e in events {
        let code = match e.get("code") {
            Some(serde_json::Value::Number(n)) => n.as_u64().and_then(|c| u16::try_from(c).ok()),
            Some(serde_json::Value::String(s)) => {
                let s = s.trim();
                match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    Some(h) => u16::from_str_radix(h, 16).ok(),
                    None => s.parse().ok(),
                }
            }
            _ => None,
        };
        let Some(code) = code else {
            no_code += 1;
            continue;
        };
        t.events.push(Event {
            code,
            name: text_of(e, "name"),
            kind: text_of(e, "type"),
            architectural: e.get("architectural").and_then(|a| a.as_bool()),
            description: text_of(e, "description"),
        });
    }
    if t.events.is_empty() {
        bail!("the file lists no event with a code");
    }
    t.events.sort_by_key(|e| e.code);
    t.events.dedup_by_key(|e| e.code);
    Ok((t, no_code))
}

/// The table from `--pmu-data FILE` when given, else the shipped one of `cpu`.
pub fn table_for(cpu: &str, pmu_data: Option<&std::path::Path>) -> Result<Table> {
    let Some(path) = pmu_data else {
        return table(cpu);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the PMU data {}", path.display()))?;
    let (t, no_code) =
        parse_arm_json(&text).with_context(|| format!("reading {}", path.display()))?;
    if no_code > 0 {
        term::warn(format!(
            "{}: {no_code} event{} without a code left out",
            path.display(),
            if no_code == 1 { "" } else { "s" }
        ));
    }
    Ok(t)
}

/// The table of `cpu`, with the names of those shipped in the error.
pub fn table(cpu: &str) -> Result<Table> {
    let want = cpu.to_ascii_lowercase();
    shipped()
        .iter()
        .find(|(n, _)| *n == want)
        .map(|(n, text)| parse_table(n, text))
        .with_context(|| {
            format!(
                "no PMU event table for `{cpu}`; shipped (all of Arm's data): {}. For a CPU \
                 Arm added since, pass its file: --pmu-data <cpu>.json (pmu/<cpu>.json of \
                 github.com/ARM-software/data)",
                shipped_cpus().join(", ")
            )
        })
}

impl Table {
    /// An event by name (any case) or number (`0x08`, `8`).
    pub fn find(&self, spec: &str) -> Result<u16> {
        let s = spec.trim();
        if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))
            && let Ok(n) = u16::from_str_radix(hex, 16)
        {
            return Ok(n);
        }
        if let Ok(n) = s.parse::<u16>() {
            return Ok(n);
        }
        if let Some(e) = self
            .events
            .iter()
            .find(|e| !e.name.is_empty() && e.name.eq_ignore_ascii_case(s))
        {
            return Ok(e.code);
        }
        let near: Vec<&str> = self
            .events
            .iter()
            .filter(|e| {
                !e.name.is_empty()
                    && e.name
                        .to_ascii_lowercase()
                        .contains(&s.to_ascii_lowercase())
            })
            .map(|e| e.name.as_str())
            .take(8)
            .collect();
        bail!(
            "{} has no event `{s}`{}; `cargo sample events --cpu {}` lists them",
            self.cpu,
            if near.is_empty() {
                String::new()
            } else {
                format!(" (did you mean {}?)", near.join(", "))
            },
            self.cpu
        )
    }

    /// The event's name, or its number when Arm's data gives it none.
    pub fn name(&self, code: u16) -> String {
        self.events
            .iter()
            .find(|e| e.code == code && !e.name.is_empty())
            .map(|e| e.name.clone())
            .unwrap_or_else(|| format!("0x{code:04x}"))
    }
}

/// `cargo sample events`.
pub fn events(args: &EventsArgs) -> Result<()> {
    if args.list {
        let cpus: Vec<serde_json::Value> = shipped_cpus()
            .iter()
            .filter_map(|k| table(k).ok().map(|t| (k, t)))
            .map(|(k, t)| {
                serde_json::json!({"cpu": k, "name": t.cpu, "counters": t.counters,
                    "events": t.events.len()})
            })
            .collect();
        match args.format {
            TableFormat::Json => {
                anstream::println!("{}", serde_json::to_string_pretty(&cpus)?)
            }
            TableFormat::Text => {
                anstream::println!(
                    "CPUs with PMU event tables (Arm's machine-readable data; `--cpu NAME`):"
                );
                for c in &cpus {
                    anstream::println!(
                        "  {:<16} {:<20} {:>2} counters  {:>3} events",
                        c["cpu"].as_str().unwrap_or(""),
                        c["name"].as_str().unwrap_or(""),
                        c["counters"],
                        c["events"]
                    );
                }
            }
        }
        return Ok(());
    }
    let t = table_for(&args.cpu, args.pmu_data.as_deref())?;
    let want = args.search.as_deref().map(str::to_ascii_lowercase);
    let list: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| {
            want.as_ref().is_none_or(|w| {
                e.name.to_ascii_lowercase().contains(w)
                    || e.description.to_ascii_lowercase().contains(w)
            })
        })
        .collect();
    match args.format {
        TableFormat::Json => anstream::println!("{}", serde_json::to_string_pretty(&list)?),
        TableFormat::Text => {
            anstream::println!(
                "{} PMU events ({} counters and the cycle counter; Arm's data, see --help)",
                t.cpu,
                t.counters
            );
            for e in &list {
                anstream::println!(
                    "  0x{:04x}  {:<24} {:<6} {}",
                    e.code,
                    if e.name.is_empty() { "-" } else { &e.name },
                    e.kind,
                    e.description
                );
            }
            if list.is_empty() {
                anstream::println!("  (no event matches)");
            }
        }
    }
    Ok(())
}

/// Whether the QEMU at `qemu` has the CPU model `cpu` (`-cpu help`); unknown counts as yes.
fn qemu_models_cpu(qemu: &std::path::Path, cpu: &str) -> bool {
    let Ok(out) = std::process::Command::new(qemu)
        .args(["-cpu", "help"])
        .output()
    else {
        return true;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.len() < 2 || names.iter().any(|n| n.eq_ignore_ascii_case(cpu))
}

/// The PMU record of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// PMCEID0/1_EL0 low and high halves: events 0x00-0x3F and 0x4000-0x403F implemented.
    pub pmceid: [u32; 4],
    pub dfr0: u64,
    /// PMCR_EL0.N.
    pub counters: u32,
    /// The exception level the firmware ran at.
    pub el: u32,
    /// `wire::PMU_*`.
    pub status: u32,
    pub events: Vec<u16>,
    pub regions: Vec<RegionCounts>,
}

/// One region's counters: per event of the group, then the cycle counter last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionCounts {
    pub name: String,
    pub calls: u32,
    /// `(first pre, last post, sum of deltas)`.
    pub counts: Vec<(u64, u64, u64)>,
}

fn dword(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Decode a PMU record's payload.
pub fn decode(p: &[u8]) -> Option<Record> {
    let mut r = Record {
        pmceid: [word(p, 0)?, word(p, 4)?, word(p, 8)?, word(p, 12)?],
        dfr0: dword(p, 16)?,
        counters: word(p, 24)?,
        el: word(p, 28)?,
        status: word(p, 32)?,
        ..Record::default()
    };
    let n = word(p, 40)? as usize;
    if n > wire::PMU_MAX_EVENTS {
        return None;
    }
    let mut at = 44;
    for _ in 0..n {
        r.events.push(word(p, at)? as u16);
        at += 4;
    }
    let regions = word(p, at)? as usize;
    at += 4;
    for _ in 0..regions.min(1024) {
        let (name, next) = dump::padded_name(p, at, 4096)?;
        at = next;
        let calls = word(p, at)?;
        at += 8;
        let mut counts = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            counts.push((dword(p, at)?, dword(p, at + 8)?, dword(p, at + 16)?));
            at += 24;
        }
        r.regions.push(RegionCounts {
            name,
            calls,
            counts,
        });
    }
    Some(r)
}

impl Record {
    /// Whether the CPU says it counts `code` (PMCEID); `None` for implementation-defined events,
    /// which PMCEID does not describe.
    pub fn implements(&self, code: u16) -> Option<bool> {
        let bit = |w: u32, b: u16| w >> b & 1 == 1;
        match code {
            0x00..=0x1F => Some(bit(self.pmceid[0], code)),
            0x20..=0x3F => Some(bit(self.pmceid[1], code - 0x20)),
            0x4000..=0x401F => Some(bit(self.pmceid[2], code - 0x4000)),
            0x4020..=0x403F => Some(bit(self.pmceid[3], code - 0x4020)),
            _ => None,
        }
    }
}

/// Split `events` into groups of at most `size` (the cycle counter is not an event counter:
/// `CPU_CYCLES` is read from it and takes no place in a group).
pub fn groups(events: &[u16], size: usize) -> Vec<Vec<u16>> {
    let mut seen = Vec::new();
    for &e in events {
        if e != CPU_CYCLES && !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.is_empty() {
        // Only cycles: one run with no event counter.
        return vec![Vec::new()];
    }
    seen.chunks(size.max(1)).map(<[u16]>::to_vec).collect()
}

/// A counted (or not) event of a region, merged over the groups.
#[derive(Debug, Clone, Serialize)]
pub struct Count {
    pub event: String,
    pub code: u16,
    /// `None`: not counted by this CPU (or QEMU).
    pub pre: Option<u64>,
    pub post: Option<u64>,
    pub delta: Option<u64>,
    pub per_call: Option<f64>,
    /// The run (group) it was counted in, from 1.
    pub group: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A derived metric.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    pub name: &'static str,
    pub formula: &'static str,
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A region with all its events.
#[derive(Debug, Clone, Serialize)]
pub struct RegionStat {
    pub name: String,
    pub calls: u32,
    pub counts: Vec<Count>,
    pub metrics: Vec<Metric>,
}

/// `cargo sample stat`'s result.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    pub cpu: String,
    pub counters: u32,
    pub exception_level: u32,
    pub groups: Vec<Vec<String>>,
    pub regions: Vec<RegionStat>,
    pub run_dir: PathBuf,
}

const METRICS: [(&str, &str, u16, u16, f64); 9] = [
    ("IPC", "INST_RETIRED / CPU_CYCLES", 0x08, 0x11, 1.0),
    (
        "L1D miss ratio",
        "L1D_CACHE_REFILL / L1D_CACHE",
        0x03,
        0x04,
        1.0,
    ),
    (
        "L1I miss ratio",
        "L1I_CACHE_REFILL / L1I_CACHE",
        0x01,
        0x14,
        1.0,
    ),
    (
        "L2D miss ratio",
        "L2D_CACHE_REFILL / L2D_CACHE",
        0x17,
        0x16,
        1.0,
    ),
    (
        "branch mispredict ratio",
        "BR_MIS_PRED / BR_PRED",
        0x10,
        0x12,
        1.0,
    ),
    (
        "L1D MPKI",
        "L1D_CACHE_REFILL * 1000 / INST_RETIRED",
        0x03,
        0x08,
        1000.0,
    ),
    (
        "L1I MPKI",
        "L1I_CACHE_REFILL * 1000 / INST_RETIRED",
        0x01,
        0x08,
        1000.0,
    ),
    (
        "L2D MPKI",
        "L2D_CACHE_REFILL * 1000 / INST_RETIRED",
        0x17,
        0x08,
        1000.0,
    ),
    (
        "branch MPKI",
        "BR_MIS_PRED * 1000 / INST_RETIRED",
        0x10,
        0x08,
        1000.0,
    ),
];

/// Merge the runs of every group into regions, events in the order asked.
pub fn merge(t: &Table, asked: &[u16], runs: &[Record]) -> Vec<RegionStat> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for g in &r.regions {
            if !names.contains(&g.name) {
                names.push(g.name.clone());
            }
        }
    }
    let mut out = Vec::new();
    for name in names {
        let mut counts = Vec::new();
        let mut calls = 0;
        for &code in asked {
            // CPU_CYCLES comes from the cycle counter of the first run; others from the run
            // of their group.
            let found = runs.iter().enumerate().find_map(|(gi, r)| {
                let slot = if code == CPU_CYCLES {
                    Some(r.events.len())
                } else {
                    r.events.iter().position(|&e| e == code)
                }?;
                let g = r.regions.iter().find(|g| g.name == name)?;
                Some((gi, r, g, slot))
            });
            let Some((gi, r, g, slot)) = found else {
                continue;
            };
            calls = g.calls;
            let (pre, post, sum) = g.counts.get(slot).copied().unwrap_or_default();
            let implemented = if code == CPU_CYCLES {
                Some(true)
            } else {
                r.implements(code)
            };
            let counted = match implemented {
                Some(b) => b,
                // Implementation-defined: PMCEID does not say; a zero means nothing counted.
                None => sum != 0 || post != 0,
            };
            counts.push(Count {
                event: t.name(code),
                code,
                pre: counted.then_some(pre),
                post: counted.then_some(post),
                delta: counted.then_some(sum),
                per_call: counted.then(|| sum as f64 / g.calls.max(1) as f64),
                group: gi + 1,
                note: (!counted).then(|| {
                    if implemented.is_some() {
                        "not counted by this CPU (PMCEID)".to_owned()
                    } else {
                        "not counted (implementation defined; read 0)".to_owned()
                    }
                }),
            });
        }
        let delta = |code: u16| {
            counts
                .iter()
                .find(|c| c.code == code)
                .map(|c| (c.delta, c.group))
        };
        let mut metrics = Vec::new();
        for (mname, formula, num, den, scale) in METRICS {
            let (Some((a, ga)), Some((b, gb))) = (delta(num), delta(den)) else {
                continue;
            };
            let value = match (a, b) {
                (Some(a), Some(b)) if b > 0 => Some(a as f64 * scale / b as f64),
                _ => None,
            };
            let note = if value.is_none() {
                Some("an event of it is not counted".to_owned())
            } else if ga != gb {
                Some(format!("from two runs (groups {ga} and {gb})"))
            } else {
                None
            };
            metrics.push(Metric {
                name: mname,
                formula,
                value,
                note,
            });
        }
        out.push(RegionStat {
            name,
            calls,
            counts,
            metrics,
        });
    }
    out
}

/// Counts a firmware left in memory (`wire::PMU_OUT_SYMBOL`) for a debugger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InMemory {
    pub dump: Vec<u8>,
    /// The firmware's buffer was too small: the dump was cut.
    pub full: bool,
}

/// Read the counts at `addr` if this run (`run_id`) finished writing them; `None` while it
/// has not (a block left from an earlier run has another id).
pub fn read_in_memory(
    t: &mut dyn crate::capture::live::Target,
    addr: u32,
    run_id: u32,
) -> Result<Option<InMemory>> {
    let mut h = [0u8; wire::PMU_OUT_HEADER];
    t.read(addr, &mut h)?;
    let word = |i: usize| u32::from_le_bytes([h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]]);
    if word(0) != wire::PMU_OUT_MAGIC || word(1) != run_id {
        return Ok(None);
    }
    let len = word(2);
    if len > 1 << 24 {
        bail!("the firmware's counts claim {len} bytes: the block at {addr:#x} is damaged");
    }
    let mut dump = vec![0u8; len as usize];
    t.read(addr + wire::PMU_OUT_HEADER as u32, &mut dump)?;
    Ok(Some(InMemory {
        dump,
        full: word(3) != 0,
    }))
}

/// A run id for a group's image: not 0, and different for every run.
fn run_id(group: usize) -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let x = t ^ (std::process::id() as u64) << 20 ^ (group as u64) << 48;
    ((x ^ x >> 32) as u32).max(1)
}

/// `cargo sample stat`.
pub fn stat(args: &StatArgs) -> Result<()> {
    let s = run_stat(args)?;
    match args.format {
        TableFormat::Json => anstream::println!("{}", serde_json::to_string_pretty(&s)?),
        TableFormat::Text => anstream::print!("{}", render(&s)),
    }
    Ok(())
}

/// Build once, run once per group, merge.
pub fn run_stat(args: &StatArgs) -> Result<Stat> {
    let p = project::discover(&crate::project::Selection::from(&args.cargo))?;
    if !p.triple.starts_with("aarch64") {
        bail!(
            "`cargo sample stat` counts ARMv8-A PMU events: the crate builds for `{}`, not \
             aarch64 (profile Cortex-M firmware with `cargo sample`)",
            p.triple
        );
    }
    let q = p.qemu_runner();
    let cpu = args
        .cpu
        .clone()
        .or(q.and_then(|q| q.cpu.clone()))
        .unwrap_or_else(|| "cortex-a53".to_owned());
    let t = table_for(&cpu, args.pmu_data.as_deref())?;
    let machine = args
        .machine
        .clone()
        .or(q.and_then(|q| q.machine.clone()))
        .unwrap_or_else(|| "virt".to_owned());
    let extra_args = q.map(|q| q.kept.clone()).unwrap_or_default();
    // A board: `--chip`, or the runner's `probe-rs run --chip` unless a QEMU machine is named.
    let chip = args.conn.chip.clone().or_else(|| {
        p.probe_runner()
            .and_then(|r| r.chip.clone())
            .filter(|_| args.machine.is_none())
    });
    let qemu_path = match chip {
        Some(_) => PathBuf::new(),
        None => qemu::locate(
            args.qemu.as_deref(),
            Some(
                q.map(|q| q.program.as_str())
                    .unwrap_or("qemu-system-aarch64"),
            ),
        )?,
    };
    // The table names the events; QEMU models only some CPUs. Architectural events count the
    // same on its `max` CPU, so a CPU it lacks runs there (the names stay the table's).
    let cpu = if chip.is_none() && !qemu_models_cpu(&qemu_path, &cpu) {
        term::note(format!(
            "QEMU does not model `{cpu}`: counting on QEMU's `max` CPU, with {}'s event names \
             and counters",
            t.cpu
        ));
        "max".to_owned()
    } else {
        cpu
    };
    let asked: Vec<u16> = args
        .events
        .iter()
        .map(|e| t.find(e))
        .collect::<Result<_>>()?;
    let size = args.group_size.unwrap_or(t.counters as usize);
    let gs = groups(&asked, size);
    let built = firmware::build(&p, &crate::project::Selection::from(&args.cargo), true, &[])?;
    let elf_bytes = std::fs::read(&built.elf)
        .with_context(|| format!("reading the built firmware {}", built.elf.display()))?;
    if elf::symbol_address(&elf_bytes, wire::PMU_CONFIG_SYMBOL).is_none() {
        bail!(
            "the firmware has no `{}`: does it call `sampler_rt::pmu::init` (sampler-rt built \
             for aarch64)?",
            wire::PMU_CONFIG_SYMBOL
        );
    }
    // On a board (and in QEMU with `--read-memory`) the counts are read out of memory.
    let in_memory = chip.is_some() || args.read_memory;
    let out_addr = match elf::symbol_address(&elf_bytes, wire::PMU_OUT_SYMBOL) {
        Some(a) => Some(u32::try_from(a).context("the counts' block lies above 4 GiB")?),
        None if in_memory => bail!(
            "the firmware has no `{}` to leave its counts in: update sampler-rt",
            wire::PMU_OUT_SYMBOL
        ),
        None => None,
    };
    let place = match &chip {
        Some(c) => format!("on {c}"),
        None => format!("of QEMU {machine}"),
    };
    let own = firmware::own_dir(&p);
    let dir = runs::create(&runs::runs_dir(&own), &format!("{}-stat", p.target_name))?;
    std::fs::write(dir.join(runs::ELF), &elf_bytes)?;
    term::status(
        "Counting",
        format!(
            "{} event{} of {} in {} run{} {place} ({cpu}: {} counters and the cycle counter)",
            asked.len(),
            if asked.len() == 1 { "" } else { "s" },
            p.target_name,
            gs.len(),
            if gs.len() == 1 { "" } else { "s" },
            t.counters
        ),
    );
    let mut records = Vec::new();
    for (i, g) in gs.iter().enumerate() {
        let mut image = elf_bytes.clone();
        let id = run_id(i);
        let (flags, memory) = match out_addr.filter(|_| in_memory) {
            Some(a) => (wire::PMU_FLAG_MEMORY, Some((a, id))),
            None => (0, None),
        };
        elf::patch_symbol(
            &mut image,
            wire::PMU_CONFIG_SYMBOL,
            &wire::pmu_config_with(g, flags, id),
        )?;
        let kernel = dir.join(format!("loaded-{}.elf", i + 1));
        std::fs::write(&kernel, &image)?;
        let timeout = Duration::from_secs(args.timeout);
        let (bytes, full) = if let Some(chip) = &chip {
            let (addr, id) = memory.context("no address for the counts")?;
            let conn = crate::exec::probe::Connection::new(
                chip,
                &args.conn,
                p.probe_runner()
                    .cloned()
                    .unwrap_or_default()
                    .or(p.probe_defaults.clone()),
            );
            let c = crate::exec::probe::pmu_counts(&conn, &kernel, addr, id, timeout)
                .with_context(|| {
                    format!(
                        "run {} of {} on {chip} (its image is kept in {})",
                        i + 1,
                        gs.len(),
                        kernel.display()
                    )
                })?;
            (c.dump, c.full)
        } else {
            let outcome = qemu::run(&qemu::Options {
                qemu: qemu_path.clone(),
                machine: machine.clone(),
                extra_args: extra_args.clone(),
                cpu: cpu.clone(),
                kernel,
                icount_shift: 0,
                timeout,
                label: format!("group {} of {}", i + 1, gs.len()),
                snapshot: None,
                output_log: Some(dir.join(format!("output-{}.txt", i + 1))),
                counting: None,
                budget: None,
                expected_samples: None,
                live: None,
                pmu_in_memory: memory,
            })?;
            match (outcome.pmu_in_memory, outcome.dump) {
                (Some(c), _) => (c.dump, c.full),
                (None, Some(bytes)) => (bytes, false),
                (None, None) => bail!(
                    "run {} of {} sent no counts ({}); its output is in {}. Does the firmware \
                     end with `sampler_rt::pmu::finish`?",
                    i + 1,
                    gs.len(),
                    match (outcome.timed_out, outcome.status) {
                        (true, _) => "timed out".to_owned(),
                        (_, Some(s)) => format!("QEMU exited with {s}"),
                        _ => "stopped".to_owned(),
                    },
                    dir.display()
                ),
            }
        };
        runs::write_atomic(&dir.join(format!("pmu-{}.dump", i + 1)), &bytes)?;
        if full {
            bail!(
                "run {} left more counts than its buffer holds ({} bytes kept in {}): build \
                 the firmware with a larger SAMPLER_RT_PMU_OUT_BYTES (default 4096), or count \
                 fewer regions",
                i + 1,
                bytes.len(),
                dir.display()
            );
        }
        let (d, err) = dump::decode_partial(&bytes);
        if let Some(e) = err {
            bail!("run {} sent a damaged dump: {e}", i + 1);
        }
        let rec = d.pmu.context("the dump has no PMU record")?;
        match rec.status {
            wire::PMU_OK => {}
            wire::PMU_TOO_MANY => bail!(
                "the firmware refused a group of {} events: this CPU has {} event counters \
                 (PMCR_EL0.N). Leave out `--group-size`, or ask for fewer events per run",
                g.len(),
                rec.counters
            ),
            _ => bail!("this CPU has no PMUv3 (ID_AA64DFR0_EL1 = {:#x})", rec.dfr0),
        }
        records.push(rec);
    }
    let el = records.first().map(|r| r.el).unwrap_or(0);
    let counters = records.first().map(|r| r.counters).unwrap_or(t.counters);
    Ok(Stat {
        cpu: t.cpu.clone(),
        counters,
        exception_level: el,
        groups: gs
            .iter()
            .map(|g| g.iter().map(|&c| t.name(c)).collect())
            .collect(),
        regions: merge(&t, &asked, &records),
        run_dir: dir,
    })
}

/// The result as text.
pub fn render(s: &Stat) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "PMU counts on {} at EL{} ({} event counters and the cycle counter), {} run{}: {}",
        s.cpu,
        s.exception_level,
        s.counters,
        s.groups.len(),
        if s.groups.len() == 1 { "" } else { "s" },
        s.groups
            .iter()
            .map(|g| format!("[{}]", g.join(", ")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for r in &s.regions {
        let _ = writeln!(o, "\n{} ({} calls)", r.name, r.calls);
        let _ = writeln!(
            o,
            "  {:<22} {:>16} {:>16} {:>14} {:>12}",
            "event", "pre", "post", "delta", "per call"
        );
        for c in &r.counts {
            match (c.pre, c.post, c.delta, c.per_call) {
                (Some(a), Some(b), Some(d), Some(pc)) => {
                    let _ = writeln!(
                        o,
                        "  {:<22} {:>16} {:>16} {:>14} {:>12.1}",
                        c.event, a, b, d, pc
                    );
                }
                _ => {
                    let _ = writeln!(
                        o,
                        "  {:<22} {:>61}",
                        c.event,
                        c.note.as_deref().unwrap_or("not counted")
                    );
                }
            }
        }
        for m in &r.metrics {
            let v = m
                .value
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "-".to_owned());
            let _ = writeln!(
                o,
                "  {:<24} {:>10}   = {}{}",
                m.name,
                v,
                m.formula,
                m.note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            );
        }
    }
    let _ = writeln!(o, "\nSaved {}", s.run_dir.display());
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_has_names_codes_and_nameless_events() {
        let t = table("Cortex-A53").unwrap();
        assert_eq!(t.counters, 6);
        assert_eq!(t.find("inst_retired").unwrap(), 0x08);
        assert_eq!(t.find("0x11").unwrap(), 0x11);
        assert_eq!(t.find("3").unwrap(), 0x03);
        assert_eq!(t.name(0xC0), "0x00c0");
        let e = t.find("l1d_cache_refil").unwrap_err().to_string();
        assert!(e.contains("did you mean"), "{e}");
        assert!(table("cortex-z9").is_err());
    }

    #[test]
    fn every_shipped_table_is_whole() {
        for name in ["cortex-a53", "cortex-a57", "cortex-a72"] {
            let t = table(name).unwrap();
            assert_eq!(t.counters, 6, "{name}");
            for (ev, code) in [
                ("sw_incr", 0x00),
                ("inst_retired", 0x08),
                ("cpu_cycles", 0x11),
            ] {
                assert_eq!(t.find(ev).unwrap(), code, "{name} {ev}");
            }
            assert_eq!(t.find("l1d_cache_refill").unwrap(), 0x03, "{name}");
            let mut codes: Vec<u16> = t.events.iter().map(|e| e.code).collect();
            let n = codes.len();
            codes.dedup();
            assert_eq!(codes.len(), n, "{name}: codes sorted and distinct");
            let mut names: Vec<&str> = t
                .events
                .iter()
                .map(|e| e.name.as_str())
                .filter(|n| !n.is_empty())
                .collect();
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "{name}: names distinct");
            assert!(t.events.iter().all(|e| !e.description.is_empty()));
        }
        // The bigger cores have the ARMv8 recommended events the A53 lacks.
        assert_eq!(
            table("cortex-a72")
                .unwrap()
                .find("l1d_cache_refill_rd")
                .unwrap(),
            0x42
        );
        assert!(
            table("cortex-a53")
                .unwrap()
                .find("l1d_cache_refill_rd")
                .is_err()
        );
    }

    #[test]
    fn every_cpu_of_arms_data_is_shipped_and_reads() {
        let cpus = shipped_cpus();
        assert!(cpus.len() >= 50, "{cpus:?}");
        for must in [
            "cortex-a55",
            "cortex-a76",
            "cortex-x4",
            "neoverse-n1",
            "neoverse-v2",
        ] {
            assert!(cpus.contains(&must), "{must} in {cpus:?}");
        }
        for k in cpus {
            let t = table(k).unwrap();
            assert!(!t.events.is_empty(), "{k}");
            assert!(t.counters >= 1 && t.counters <= 31, "{k}");
            assert!(t.events.windows(2).all(|w| w[0].code < w[1].code), "{k}");
        }
        // ARMv8 and later cores count instructions and cycles by their architectural names.
        for k in ["cortex-a55", "cortex-a76", "neoverse-n1", "cortex-x4"] {
            let t = table(k).unwrap();
            assert_eq!(t.find("inst_retired").unwrap(), 0x08, "{k}");
            assert_eq!(t.find("cpu_cycles").unwrap(), 0x11, "{k}");
        }
    }

    #[test]
    fn arm_json_reads_with_nameless_and_codeless_events() {
        let text = r#"{
            "_type": "Events", "cpu": "Cortex-Test", "counters": 4,
            "events": [
                {"code": 17, "name": "CPU_CYCLES", "type": "CYCLE", "architectural": false,
                 "description": "Cycle"},
                {"code": 8, "name": "INST_RETIRED", "type": "INS", "architectural": true,
                 "description": "Instruction  architecturally\n executed"},
                {"code": "0xC0", "type": "UEVT", "description": "External memory request"},
                {"name": "NO_CODE", "description": "an event Arm gives no number"},
                {"code": 8, "name": "INST_RETIRED", "description": "duplicate"}
            ]
        }"#;
        let (t, no_code) = parse_arm_json(text).unwrap();
        assert_eq!((t.cpu.as_str(), t.counters, no_code), ("Cortex-Test", 4, 1));
        assert_eq!(
            t.events.iter().map(|e| e.code).collect::<Vec<_>>(),
            vec![0x08, 0x11, 0xC0]
        );
        assert_eq!(
            t.events[0].description,
            "Instruction architecturally executed"
        );
        assert_eq!(t.events[0].architectural, Some(true));
        assert_eq!(t.events[2].architectural, None);
        assert_eq!(t.name(0xC0), "0x00c0");
        assert_eq!(t.find("inst_retired").unwrap(), 8);
        assert!(t.find("no_code").is_err());
        assert!(parse_arm_json("{}").is_err());
        assert!(parse_arm_json("not json").is_err());
        assert!(parse_arm_json(r#"{"events": [{"name": "X"}]}"#).is_err());
    }

    use crate::capture::live::testing::Ram;

    fn out_block(magic: u32, run_id: u32, dump: &[u8], full: u32) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [magic, run_id, dump.len() as u32, full] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(dump);
        b.resize(b.len() + 64, 0xEE);
        b
    }

    #[test]
    fn counts_in_memory_are_taken_only_when_complete_and_of_this_run() {
        let base = 0x4010_0000;
        let mut ram = Ram {
            base,
            bytes: out_block(wire::PMU_OUT_MAGIC, 7, b"dump bytes", 0),
        };
        // Complete, this run.
        let c = read_in_memory(&mut ram, base, 7).unwrap().unwrap();
        assert_eq!((c.dump.as_slice(), c.full), (&b"dump bytes"[..], false));
        // A previous run's counts, kept in RAM across the reset: not these.
        assert_eq!(read_in_memory(&mut ram, base, 8).unwrap(), None);
        // Not written yet (the magic goes last).
        ram.bytes = out_block(0, 7, b"dump bytes", 0);
        assert_eq!(read_in_memory(&mut ram, base, 7).unwrap(), None);
        // Cut by a small buffer: said so.
        ram.bytes = out_block(wire::PMU_OUT_MAGIC, 7, b"cut", 1);
        assert!(read_in_memory(&mut ram, base, 7).unwrap().unwrap().full);
        // A damaged length is an error, not a 4 GiB read.
        ram.bytes = out_block(wire::PMU_OUT_MAGIC, 7, b"", 0);
        ram.bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_in_memory(&mut ram, base, 7).is_err());
        assert_ne!(run_id(0), 0);
        assert_ne!(run_id(0), run_id(1));
    }

    #[test]
    fn groups_hold_at_most_the_counters_and_cycles_need_none() {
        let ev = [0x08, 0x11, 0x03, 0x04, 0x01, 0x14, 0x17, 0x16, 0x08];
        let g = groups(&ev, 6);
        assert_eq!(
            g,
            vec![vec![0x08, 0x03, 0x04, 0x01, 0x14, 0x17], vec![0x16]]
        );
        assert_eq!(groups(&[0x11], 6), vec![Vec::<u16>::new()]);
    }

    fn record(events: &[u16], pmceid0: u32, regions: Vec<RegionCounts>) -> Record {
        Record {
            pmceid: [pmceid0, 0, 0, 0],
            counters: 6,
            el: 1,
            events: events.to_vec(),
            regions,
            ..Record::default()
        }
    }

    #[test]
    fn runs_merge_per_region_and_uncounted_events_are_not_zero() {
        let t = table("cortex-a53").unwrap();
        // Run 1 counts INST_RETIRED and L1D_CACHE_REFILL (not implemented); run 2 L1D_CACHE.
        let supported = 1 << 0x08 | 1 << 0x11;
        let r1 = record(
            &[0x08, 0x03],
            supported,
            vec![RegionCounts {
                name: "work".into(),
                calls: 2,
                counts: vec![(10, 410, 400), (0, 0, 0), (5, 1005, 1000)],
            }],
        );
        let r2 = record(
            &[0x04],
            supported,
            vec![RegionCounts {
                name: "work".into(),
                calls: 2,
                counts: vec![(0, 0, 0), (7, 1007, 1000)],
            }],
        );
        let m = merge(&t, &[0x08, 0x11, 0x03, 0x04], &[r1, r2]);
        let w = &m[0];
        assert_eq!(w.counts.len(), 4);
        assert_eq!(w.counts[0].delta, Some(400));
        assert_eq!(w.counts[0].per_call, Some(200.0));
        assert_eq!(w.counts[1].delta, Some(1000)); // cycles from run 1's cycle counter
        assert_eq!(w.counts[2].delta, None);
        assert!(w.counts[2].note.as_deref().unwrap().contains("not counted"));
        assert_eq!((w.counts[3].delta, w.counts[3].group), (None, 2));
        let ipc = w.metrics.iter().find(|m| m.name == "IPC").unwrap();
        assert_eq!(ipc.value, Some(0.4));
        let l1d = w
            .metrics
            .iter()
            .find(|m| m.name == "L1D miss ratio")
            .unwrap();
        assert_eq!(l1d.value, None);
    }

    #[test]
    fn records_decode_and_damage_is_refused() {
        let mut b = Vec::new();
        for v in [1u32 << 8, 0, 0, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&0x1010_0106u64.to_le_bytes());
        for v in [6u32, 1, 0, 0, 1, 8, 1, 4] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(b"loop");
        for v in [3u32, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [1u64, 2, 3, 4, 5, 6] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let r = decode(&b).unwrap();
        assert_eq!((r.counters, r.el, r.events.clone()), (6, 1, vec![8]));
        assert_eq!(r.regions[0].counts, vec![(1, 2, 3), (4, 5, 6)]);
        assert_eq!(r.implements(8), Some(true));
        assert_eq!(r.implements(3), Some(false));
        assert_eq!(r.implements(0xC0), None);
        assert_eq!(decode(&b[..b.len() - 1]), None);
    }
}
