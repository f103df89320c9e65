//! `cargo sample events`: an ARMv8-A CPU's PMU events, listed or searched.

use anyhow::Result;

use crate::analysis::events::{Event, shipped_cpus, table, table_for};
use crate::cli::{EventsArgs, TableFormat};

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
