//! Which QEMU binary, and what it is: its release, plugin support, the CPUs it models.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::exec::exact::QemuVersion;

/// The QEMU executable: `--qemu`, else the runner's, else `qemu-system-arm` on PATH.
pub fn locate(explicit: Option<&Path>, from_runner: Option<&str>) -> Result<PathBuf> {
    let candidate = explicit
        .map(Path::to_path_buf)
        .or_else(|| from_runner.map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("qemu-system-arm"));
    if candidate.components().count() > 1 {
        if candidate.is_file() {
            return Ok(candidate);
        }
        bail!("QEMU was not found at {}", candidate.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(&candidate);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "`{}` was not found on PATH. Install QEMU: `sudo apt-get install qemu-system-arm` (Debian, Ubuntu), \
         `sudo dnf install qemu-system-arm` (Fedora), `brew install qemu` (macOS); or pass `--qemu PATH`",
        candidate.display()
    )
}

/// What a QEMU binary is: its release, and whether it was built with TCG plugin support.
#[derive(Debug, Clone, Copy)]
pub struct QemuBuild {
    pub version: Option<QemuVersion>,
    pub plugins: bool,
}

/// Ask a QEMU binary for its version and options.
pub fn inspect(qemu: &Path) -> Result<QemuBuild> {
    let out = Command::new(qemu)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", qemu.display()))?;
    let version = QemuVersion::parse(&String::from_utf8_lossy(&out.stdout));
    let help = Command::new(qemu)
        .arg("-help")
        .output()
        .with_context(|| format!("running {} -help", qemu.display()))?;
    let plugins = String::from_utf8_lossy(&help.stdout)
        .lines()
        .any(|l| l.trim_start().starts_with("-plugin"));
    Ok(QemuBuild { version, plugins })
}

/// Whether the QEMU at `qemu` has the CPU model `cpu` (`-cpu help`); unknown counts as yes.
pub fn models_cpu(qemu: &std::path::Path, cpu: &str) -> bool {
    let Ok(out) = std::process::Command::new(qemu)
        .args(["-cpu", "help"])
        .output()
    else {
        return true;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.len() < 2 || names.iter().any(|n| n.eq_ignore_ascii_case(cpu))
}
