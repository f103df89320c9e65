//! Exact instruction counts per PC from the QEMU plugin (`qemu-plugin/`): the ground truth
//! beside a sampled profile.
//!
//! File format: `"SMPLEXC1"`, then little-endian `(pc: u64, count: u64)` pairs sorted by pc.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The plugin, compiled by the build script for this host.
static PLUGIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/qemu-plugin.so"));

/// Name of the counts file in a run directory.
pub const FILE: &str = "exact.counts";

/// Write the embedded plugin under `dir` (once per content) and return its path.
pub fn install_plugin(dir: &Path) -> Result<PathBuf> {
    if PLUGIN.is_empty() {
        bail!(
            "this cargo-sample was built without its QEMU plugin (the build script could not compile it)"
        );
    }
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!(
        "qemu-plugin-{:08x}.so",
        sampler_rt::wire::crc32(PLUGIN)
    ));
    if !path.is_file() {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, PLUGIN).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// Parse a counts file.
pub fn parse(bytes: &[u8]) -> Result<Vec<(u32, u64)>> {
    if bytes.len() < 8 || &bytes[..8] != b"SMPLEXC1" || !(bytes.len() - 8).is_multiple_of(16) {
        bail!("not an exact-count file from cargo-sample's QEMU plugin");
    }
    Ok(bytes[8..]
        .chunks_exact(16)
        .map(|c| {
            let pc = u64::from_le_bytes(c[..8].try_into().unwrap_or_default());
            let n = u64::from_le_bytes(c[8..].try_into().unwrap_or_default());
            (pc as u32, n)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let mut b = b"SMPLEXC1".to_vec();
        b.extend_from_slice(&0x100u64.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        assert_eq!(parse(&b).unwrap(), vec![(0x100, 7)]);
        assert!(parse(&b[..20]).is_err());
        assert!(parse(b"nonsense").is_err());
        assert!(!PLUGIN.is_empty(), "the plugin was not embedded");
    }
}
