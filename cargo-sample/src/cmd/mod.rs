//! The subcommands, one file each, and the steps they share.
//!
//! `sample` (QEMU), `board` (probe-rs, serial) and `exact` capture a run; `report`, `diff` and
//! `swo` print saved ones; `advise`, `init`, `events` and `stat` stand alone. `settings` reads
//! the command line and the firmware into typed values once; `capture` is the one flow every
//! capture goes through (preflight, build, run directory, finish) and `stages` the settings it
//! works out; `saved` turns a saved run into a report.

pub mod advise;
pub mod board;
pub mod capture;
pub mod diff;
pub mod events;
pub mod exact;
pub mod init;
pub mod pacing;
pub mod report;
pub mod sample;
pub mod saved;
pub mod settings;
pub mod stages;
pub mod stat;
pub mod swo;
