//! What an ITM stream adds to samples: sleep packets as the `[sleeping]` row, and exception
//! trace as the exceptions table (for `cargo sample swo` and a board's `--method dwt` run).

use crate::image::symbolize::Symbolizer;

/// The PC samples in the order they came, each sleep packet (the core asleep: no address) at
/// [`super::model::SLEEP_ADDRESS`], where no code can be.
pub fn with_sleep(s: &crate::dump::itm::Summary) -> Vec<u32> {
    let sleep_pc = super::model::SLEEP_ADDRESS;
    let mut ordered = Vec::with_capacity(s.pcs.len() + s.sleep_at.len());
    let mut sleeps = s.sleep_at.iter().peekable();
    for (i, pc) in s.pcs.iter().enumerate() {
        while sleeps.next_if(|&&at| at == i).is_some() {
            ordered.push(sleep_pc);
        }
        ordered.push(pc & !1);
    }
    ordered.extend(sleeps.map(|_| sleep_pc));
    ordered
}

/// `sleep` of `all` samples found the core asleep: their row is named `[sleeping]`, and a
/// finding says what it is.
pub fn asleep(sym: &mut Symbolizer, sleep: u64, all: u64) -> Option<super::Diagnostic> {
    if sleep == 0 {
        return None;
    }
    let sleep_pc = super::model::SLEEP_ADDRESS as u64;
    sym.add_pseudo(sleep_pc, sleep_pc + 2, super::model::SLEEPING);
    let share = 100.0 * sleep as f64 / all.max(1) as f64;
    Some(super::Diagnostic {
        kind: super::Finding::Asleep,
        severity: super::Severity::Note,
        message: format!(
            "{sleep} of {all} PC samples ({share:.2} %) found the core asleep: they are the `{}` \
             row (sleep packets carry no address)",
            super::model::SLEEPING
        ),
        percent: Some(share),
        addresses: Vec::new(),
        functions: Vec::new(),
    })
}

/// The exception trace's rows, named by the vector table's handlers.
pub fn exception_rows(
    stats: &[crate::dump::itm::ExceptionStats],
    vectors: &[(u32, u32)],
    sym: &Symbolizer,
) -> Vec<super::model::ExceptionRow> {
    stats
        .iter()
        .filter(|e| e.entries > 0)
        .map(|e| super::model::ExceptionRow {
            number: e.number,
            name: vectors
                .iter()
                .find(|v| v.0 == e.number as u32)
                .and_then(|v| sym.function_of(v.1 as u64))
                .map(str::to_owned)
                .unwrap_or_else(|| format!("exception {}", e.number)),
            entries: e.entries,
            timed: e.timed,
            min_ticks: e.min,
            mean_ticks: e.mean,
            max_ticks: e.max,
        })
        .collect()
}
