//! What the numbers mean: statistics, lap-timed regions and their inference, PMU event tables
//! and metrics, Embassy's task statistics.

pub mod callgraph;
pub mod events;
pub mod laps;
pub mod pmu;
pub mod stats;
pub mod tasks;
