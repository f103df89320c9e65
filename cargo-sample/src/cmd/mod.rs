//! The subcommands, one file each, and the steps they share.
//!
//! `sample` (QEMU), `board` (probe-rs, serial) and `exact` capture a run; `report`, `diff` and
//! `swo` print saved ones; `advise`, `init`, `events` and `stat` stand alone. `settings` reads
//! the command line and the firmware into typed values once; `plan` works out what a sampled
//! run will do (the sampler's configuration, unit, clock, shift, metadata) from them, purely;
//! `capture` is the one flow every capture goes through (preflight, machine, build, run
//! directory, live warnings, finish); `saved` prints a saved run as the views ask.

pub mod advise;
pub mod bench;
pub mod board;
pub mod capture;
pub mod diff;
pub mod events;
pub mod exact;
pub mod gate;
pub mod init;
pub mod pacing;
pub mod plan;
pub mod report;
pub mod sample;
pub mod saved;
pub mod serial;
pub mod settings;
pub mod stat;
pub mod swo;
