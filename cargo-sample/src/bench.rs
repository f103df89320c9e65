//! `cargo sample bench`: placeholder replaced below.
use anyhow::Result;

pub fn bench(_args: &crate::cli::BenchArgs) -> Result<()> {
    anyhow::bail!("not built yet")
}
