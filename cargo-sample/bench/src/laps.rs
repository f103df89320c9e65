//! Lap timing's cost: the instructions a lap adds, and what overhead correction leaves.

use crate::*;

/// What timing a region costs the program, exact in QEMU.
#[derive(Debug, Serialize)]
pub struct LapCost {
    /// Instructions the program runs per lap in sampler-rt's lap code (`measure` around an
    /// empty closure, and recording the lap).
    pub instructions_per_lap: f64,
    /// The lap's own time as calibrated and subtracted (the instructions between the counter
    /// reads, read to a SysTick tick).
    pub subtracted: f64,
    /// The empty region's corrected lap (0 when the subtraction is right).
    pub empty_region: f64,
}

pub(crate) fn lap_cost(manifest: &Path) -> Result<LapCost> {
    let cli = release_args(manifest, &["--bin", "laps", "--laps", "--truth"])?;
    let dir = sample::capture(&cli.run)?;
    let (counts, functions) = exact_functions(&dir)?;
    // Per call: every instruction of a function over the count of its first.
    let per_call = |start: u64, end: u64| -> Option<f64> {
        let entry = counts.iter().find(|c| c.0 as u64 == start)?.1;
        (entry > 0).then(|| executed(&counts, start, end) as f64 / entry as f64)
    };
    let mut measure = f64::INFINITY;
    let mut record = 0.0;
    for (name, a, b) in &functions {
        if name.starts_with("sampler_rt::laps::Region::measure") {
            if let Some(c) = per_call(*a, *b) {
                measure = measure.min(c);
            }
        } else if name.starts_with("sampler_rt::laps::record_into") {
            record = per_call(*a, *b).unwrap_or(0.0);
        }
    }
    if !measure.is_finite() {
        bail!("no lap was timed in the laps firmware");
    }
    let report =
        cargo_sample::report::load::load_report(&dir, cargo_sample::report::Options::default())?;
    let laps = report.laps.context("the laps firmware sent no regions")?;
    let empty = laps
        .regions
        .iter()
        .find(|r| r.name == "empty")
        .map(|r| r.median)
        .unwrap_or(f64::NAN);
    Ok(LapCost {
        instructions_per_lap: measure + record,
        subtracted: laps.overhead,
        empty_region: empty,
    })
}
