//! ARMv8-A PMU event tables: every CPU of Arm's machine-readable data (see `data/pmu/NOTICE`),
//! names and codes both ways, and a user's own JSON file of Arm's format.

use anyhow::{Context, Result, bail};
use serde::Serialize;

use sampler_rt::wire;

use crate::term;

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
}
