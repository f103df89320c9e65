//! `cargo sample stat`'s result as text.

use crate::analysis::pmu::Stat;

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
