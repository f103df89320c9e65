//! The subcommands.

pub mod advise;
pub mod events;
pub mod init;
pub mod sample;
pub mod stat;
