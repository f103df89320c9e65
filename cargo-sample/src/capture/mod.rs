//! Reading what the sampler left in the target's memory while it runs or after it stopped:
//! the live ring reader, memory snapshots, and a core stuck in a fault handler.

pub mod live;
pub mod pmu;
pub mod snapshot;
pub mod tcp;
pub mod top;
