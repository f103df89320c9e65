//! `cargo sample`: a statistical PC-sampling profiler for embedded Rust firmware. The binary
//! is a thin `main` over this library; the library is public so that the decoders of outside
//! data (dumps, SWO streams, text dumps, ELF files, cargo configuration) can be fuzzed.
//!
//! The pipeline: [`project`] finds the crate, target and runner; [`firmware`] builds it with
//! the sampling feature; [`elf`] checks the image and writes the run's configuration into a
//! copy; [`qemu`] runs it; [`dump`] (or [`snapshot`]) decodes what the sampler sent; [`runs`]
//! keeps everything; [`symbolize`] and [`report`] turn addresses into the profile.

pub mod advise;
pub mod bench;
pub mod bins;
pub mod board;
pub mod cli;
pub mod disasm;
pub mod dump;
pub mod elf;
pub mod exact;
pub mod fault;
pub mod firmware;
pub mod fuzzing;
pub mod init;
pub mod itm;
pub mod laps;
pub mod live;
pub mod machine;
pub mod pmu;
pub mod project;
pub mod qemu;
pub mod report;
pub mod run;
pub mod runs;
pub mod serial;
pub mod snapshot;
pub mod stats;
pub mod symbolize;
pub mod term;
pub mod textdump;
pub mod wiring;
