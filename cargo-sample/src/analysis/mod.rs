//! What the numbers mean: statistics, lap-timed regions and their inference, PMU event tables
//! and metrics.

pub mod callgraph;
pub mod events;
pub mod laps;
pub mod pmu;
pub mod stats;
