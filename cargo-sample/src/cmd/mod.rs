//! The subcommands.

pub mod advise;
pub mod init;
pub mod sample;
