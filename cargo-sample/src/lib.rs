//! `cargo sample`: a statistical PC-sampling profiler for embedded Rust firmware. The binary
//! is a thin `main` over this library; the library is public so that the decoders of outside
//! data (dumps, SWO streams, text dumps, ELF files, cargo configuration) can be fuzzed.
//!
//! The pipeline: [`project`] finds the crate, target and runner; [`project::firmware`] builds
//! it with the sampling feature; [`image::elf`] checks the image and writes the run's
//! configuration into a copy; [`exec::qemu`] runs it; [`dump`] (or [`capture::snapshot`])
//! decodes what the sampler sent; [`runs`] keeps everything; [`image::symbolize`] and
//! [`report`] turn addresses into the profile.

pub mod analysis;
#[cfg(test)]
mod architecture;
pub mod capture;
pub mod cli;
pub mod cmd;
pub mod dump;
pub mod exec;
pub mod fuzzing;
pub mod image;
pub mod interrupt;
pub mod project;
pub mod report;
pub mod runs;
pub mod spec;
pub mod term;
