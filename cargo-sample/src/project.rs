//! The firmware crate: package, binary, target triple and runner, from `cargo metadata` and the
//! `.cargo/config.toml` files cargo itself would read.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use cargo_metadata::{Metadata, MetadataCommand, Package, TargetKind};

use crate::cli::CargoArgs;

/// What was found about the crate to profile.
#[derive(Debug, Clone)]
pub struct Project {
    /// Directory cargo runs in (the package's), so its `.cargo/config.toml` applies.
    pub dir: PathBuf,
    pub manifest_path: PathBuf,
    pub package: String,
    /// Binary or example name.
    pub target_name: String,
    pub is_example: bool,
    pub triple: String,
    /// The runner of `target.<triple>.runner`, split into words.
    pub runner: Option<Vec<String>>,
    /// The workspace's target directory.
    pub target_dir: PathBuf,
    pub workspace_root: PathBuf,
    /// Whether the package declares the sampling feature.
    pub has_feature: bool,
    /// Whether the package depends on sampler-rt.
    pub has_dependency: bool,
    /// The config key extra rustflags go to (see [`CargoConfig::rustflags_key`]).
    pub rustflags_key: String,
}

/// Resolve the package, target and triple for a run.
pub fn discover(args: &CargoArgs) -> Result<Project> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let manifest = match &args.manifest_path {
        Some(p) => absolute(&cwd, p),
        None => find_manifest(&cwd)?,
    };
    let dir = manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());
    let meta = MetadataCommand::new()
        .manifest_path(&manifest)
        .current_dir(&dir)
        .no_deps()
        .exec()
        .with_context(|| format!("reading the cargo metadata of {}", manifest.display()))?;
    let package = select_package(&meta, args, &manifest)?;
    let pkg_dir = package
        .manifest_path
        .parent()
        .map(|p| p.as_std_path().to_path_buf())
        .unwrap_or(dir);
    let (target_name, is_example) = select_target(package, args)?;
    let config = CargoConfig::load(&pkg_dir);
    let triple = match &args.target {
        Some(t) => t.clone(),
        None => config.build_target.clone().with_context(|| {
            format!(
                "no target triple for `{}`: pass `--target thumbv7m-none-eabi` (or your core's), or set \
                 `[build] target = \"...\"` in {}",
                package.name,
                pkg_dir.join(".cargo/config.toml").display()
            )
        })?,
    };
    let runner = config.runner(&triple);
    let rustflags_key = config.rustflags_key(&triple);
    let has_feature = package.features.contains_key(&args.feature_name);
    let has_dependency = package.dependencies.iter().any(|d| d.name == "sampler-rt");
    Ok(Project {
        dir: pkg_dir,
        manifest_path: package.manifest_path.clone().into_std_path_buf(),
        package: package.name.to_string(),
        target_name,
        is_example,
        rustflags_key,
        triple,
        runner,
        target_dir: meta.target_directory.clone().into_std_path_buf(),
        workspace_root: meta.workspace_root.clone().into_std_path_buf(),
        has_feature,
        has_dependency,
    })
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

fn find_manifest(start: &Path) -> Result<PathBuf> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        let m = d.join("Cargo.toml");
        if m.is_file() {
            return Ok(m);
        }
        dir = d.parent();
    }
    bail!(
        "could not find Cargo.toml in {} or any parent directory: run in a firmware crate, or pass --manifest-path",
        start.display()
    )
}

fn select_package<'a>(
    meta: &'a Metadata,
    args: &CargoArgs,
    manifest: &Path,
) -> Result<&'a Package> {
    let members: Vec<&Package> = meta.workspace_packages();
    if let Some(spec) = &args.package {
        return members
            .iter()
            .copied()
            .find(|p| p.name.as_str() == spec)
            .with_context(|| {
                let names: Vec<_> = members.iter().map(|p| p.name.as_str()).collect();
                format!(
                    "package `{spec}` is not in this workspace (members: {})",
                    names.join(", ")
                )
            });
    }
    if let Some(p) = members
        .iter()
        .find(|p| p.manifest_path.as_std_path() == manifest)
    {
        return Ok(p);
    }
    match members.as_slice() {
        [one] => Ok(one),
        _ => {
            let names: Vec<_> = members.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "this workspace has several packages; choose one with `-p`: {}",
                names.join(", ")
            )
        }
    }
}

fn select_target(package: &Package, args: &CargoArgs) -> Result<(String, bool)> {
    let bins: Vec<&str> = package
        .targets
        .iter()
        .filter(|t| t.kind.contains(&TargetKind::Bin))
        .map(|t| t.name.as_str())
        .collect();
    if let Some(ex) = &args.example {
        let found = package
            .targets
            .iter()
            .any(|t| t.kind.contains(&TargetKind::Example) && t.name == *ex);
        if !found {
            bail!("package `{}` has no example `{ex}`", package.name);
        }
        return Ok((ex.clone(), true));
    }
    if let Some(bin) = &args.bin {
        if !bins.contains(&bin.as_str()) {
            bail!(
                "package `{}` has no binary `{bin}`; its binaries: {}",
                package.name,
                bins.join(", ")
            );
        }
        return Ok((bin.clone(), false));
    }
    match bins.as_slice() {
        [one] => Ok((one.to_string(), false)),
        [] => bail!("package `{}` has no binary target", package.name),
        _ => bail!(
            "package `{}` has several binaries; choose one with `--bin`: {}",
            package.name,
            bins.join(", ")
        ),
    }
}

/// The parts of cargo's configuration that matter here, merged the way cargo merges them:
/// the nearest `.cargo/config.toml` wins, then its parents, then `$CARGO_HOME`.
#[derive(Debug, Default)]
pub struct CargoConfig {
    pub build_target: Option<String>,
    /// `(table key, runner words)`: `target.<triple>` or `target.'cfg(...)'` entries.
    pub runners: Vec<(String, Vec<String>)>,
    /// Keys of `target.<triple>` / `target.'cfg(...)'` tables that set `rustflags`.
    pub target_rustflags: Vec<String>,
    /// Whether `build.rustflags` is set.
    pub build_rustflags: bool,
}

impl CargoConfig {
    pub fn load(dir: &Path) -> CargoConfig {
        let mut files = Vec::new();
        let mut d = Some(dir);
        while let Some(p) = d {
            for name in ["config.toml", "config"] {
                let f = p.join(".cargo").join(name);
                if f.is_file() {
                    files.push(f);
                    break;
                }
            }
            d = p.parent();
        }
        if let Some(home) = std::env::var_os("CARGO_HOME").map(PathBuf::from) {
            let f = home.join("config.toml");
            if f.is_file() && !files.contains(&f) {
                files.push(f);
            }
        }
        let mut cfg = CargoConfig::default();
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                cfg.merge(&text);
            }
        }
        cfg
    }

    /// Merge one file's text; values already set (from nearer files) win.
    pub fn merge(&mut self, text: &str) {
        let Ok(value) = text.parse::<toml::Table>() else {
            return;
        };
        if self.build_target.is_none() {
            self.build_target = value
                .get("build")
                .and_then(|b| b.get("target"))
                .and_then(|t| match t {
                    toml::Value::String(s) => Some(s.clone()),
                    toml::Value::Array(a) => a.first().and_then(|v| v.as_str()).map(str::to_owned),
                    _ => None,
                });
        }
        if value
            .get("build")
            .and_then(|b| b.get("rustflags"))
            .is_some()
        {
            self.build_rustflags = true;
        }
        if let Some(targets) = value.get("target").and_then(|t| t.as_table()) {
            for (key, table) in targets {
                if table.get("rustflags").is_some() && !self.target_rustflags.contains(key) {
                    self.target_rustflags.push(key.clone());
                }
                let Some(runner) = table.get("runner") else {
                    continue;
                };
                let words = match runner {
                    toml::Value::String(s) => s.split_whitespace().map(str::to_owned).collect(),
                    toml::Value::Array(a) => a
                        .iter()
                        .filter_map(|v| v.as_str())
                        .map(str::to_owned)
                        .collect(),
                    _ => continue,
                };
                if !self.runners.iter().any(|(k, _)| k == key) {
                    self.runners.push((key.clone(), words));
                }
            }
        }
    }

    /// The runner for a triple: an exact `target.<triple>` entry, else a `cfg(...)` entry that
    /// plainly applies to bare-metal Arm.
    pub fn runner(&self, triple: &str) -> Option<Vec<String>> {
        if let Some((_, w)) = self.runners.iter().find(|(k, _)| k == triple) {
            return Some(w.clone());
        }
        let arm = triple.starts_with("thumb") || triple.starts_with("arm");
        self.runners
            .iter()
            .find(|(k, _)| {
                k.starts_with("cfg(")
                    && arm
                    && (k.contains("target_arch = \"arm\"") || k.contains("target_os = \"none\""))
            })
            .map(|(_, w)| w.clone())
    }
}

impl CargoConfig {
    /// The config key to add rustflags to without losing the crate's own. Cargo takes its
    /// flags from one source only: every matching `target.*.rustflags` joined, else
    /// `build.rustflags`; a `--config` value is joined to the same key of the files.
    pub fn rustflags_key(&self, triple: &str) -> String {
        let arm = triple.starts_with("thumb") || triple.starts_with("arm");
        let target_has = self.target_rustflags.iter().any(|k| {
            k == triple
                || (k.starts_with("cfg(")
                    && arm
                    && (k.contains("target_arch = \"arm\"") || k.contains("target_os = \"none\"")))
        });
        if !target_has && self.build_rustflags {
            "build.rustflags".into()
        } else {
            format!("target.{triple}.rustflags")
        }
    }
}

/// What a runner command line says about where the firmware runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunnerInfo {
    pub qemu: Option<String>,
    pub machine: Option<String>,
    pub cpu: Option<String>,
    /// `probe-rs run --chip X` runners.
    pub chip: Option<String>,
}

/// The chip in cargo-embed's configuration (`Embed.toml`, `.embed.toml` beside the manifest;
/// `[default.general] chip = "..."`), if any.
pub fn embed_chip(package_dir: &Path) -> Option<String> {
    for name in [".embed.toml", "Embed.toml"] {
        let Ok(text) = std::fs::read_to_string(package_dir.join(name)) else {
            continue;
        };
        let Ok(v) = text.parse::<toml::Table>() else {
            continue;
        };
        if let Some(chip) = v
            .get("default")
            .and_then(|d| d.get("general"))
            .and_then(|g| g.get("chip"))
            .and_then(|c| c.as_str())
        {
            return Some(chip.to_owned());
        }
    }
    None
}

/// Read a runner: `qemu-system-arm ... -machine X -cpu Y ...` or `probe-rs run --chip X`.
pub fn parse_runner(words: &[String]) -> RunnerInfo {
    let mut info = RunnerInfo::default();
    let Some(program) = words.first() else {
        return info;
    };
    let base = Path::new(program)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(program);
    let value_of = |names: &[&str]| -> Option<String> {
        let mut it = words.iter();
        while let Some(w) = it.next() {
            for n in names {
                if w == n {
                    return it.next().cloned();
                }
                if let Some(v) = w.strip_prefix(&format!("{n}=")) {
                    return Some(v.to_owned());
                }
            }
        }
        None
    };
    if base.starts_with("qemu-system-") {
        info.qemu = Some(program.clone());
        info.machine =
            value_of(&["-machine", "-M"]).map(|m| m.split(',').next().unwrap_or("").to_owned());
        info.cpu = value_of(&["-cpu"]);
    } else if base == "probe-rs" || base == "cargo-embed" {
        info.chip = value_of(&["--chip"]);
    }
    info
}

/// `cargo` as cargo itself was invoked (respects `$CARGO`).
pub fn cargo_command() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_embed_names_the_chip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(embed_chip(dir.path()), None);
        std::fs::write(
            dir.path().join("Embed.toml"),
            "[default.general]\nchip = \"nRF52840_xxAA\"\n[default.rtt]\nenabled = true\n",
        )
        .unwrap();
        assert_eq!(embed_chip(dir.path()).as_deref(), Some("nRF52840_xxAA"));
        std::fs::write(dir.path().join(".embed.toml"), "not = [toml").unwrap();
        assert_eq!(embed_chip(dir.path()).as_deref(), Some("nRF52840_xxAA"));
    }

    #[test]
    fn extra_rustflags_join_the_crates_own_source() {
        let mut c = CargoConfig::default();
        c.merge("[target.thumbv7m-none-eabi]\nrustflags = [\"-C\", \"link-arg=-Tlink.x\"]\n");
        assert_eq!(
            c.rustflags_key("thumbv7m-none-eabi"),
            "target.thumbv7m-none-eabi.rustflags"
        );
        let mut c = CargoConfig::default();
        c.merge("[build]\nrustflags = [\"-C\", \"link-arg=-Tlink.x\"]\n");
        assert_eq!(c.rustflags_key("thumbv7m-none-eabi"), "build.rustflags");
        let mut c = CargoConfig::default();
        c.merge("[build]\nrustflags = []\n[target.'cfg(all(target_arch = \"arm\", target_os = \"none\"))']\nrustflags = []\n");
        assert_eq!(
            c.rustflags_key("thumbv6m-none-eabi"),
            "target.thumbv6m-none-eabi.rustflags"
        );
        assert_eq!(
            CargoConfig::default().rustflags_key("x"),
            "target.x.rustflags"
        );
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn runner_tells_machine_and_cpu() {
        let r = parse_runner(&words(
            "qemu-system-arm -cpu cortex-m3 -machine mps2-an385,accel=tcg -nographic -kernel",
        ));
        assert_eq!(r.machine.as_deref(), Some("mps2-an385"));
        assert_eq!(r.cpu.as_deref(), Some("cortex-m3"));
        assert_eq!(r.qemu.as_deref(), Some("qemu-system-arm"));
        let r = parse_runner(&words("/usr/bin/qemu-system-arm -M=microbit -kernel"));
        assert_eq!(r.machine.as_deref(), Some("microbit"));
        let r = parse_runner(&words("probe-rs run --chip STM32F407VGTx"));
        assert_eq!(r.chip.as_deref(), Some("STM32F407VGTx"));
        assert_eq!(r.machine, None);
    }

    #[test]
    fn nearer_config_wins_and_cfg_runners_apply() {
        let mut c = CargoConfig::default();
        c.merge(
            r#"[build]
target = "thumbv7m-none-eabi"
[target.'cfg(all(target_arch = "arm", target_os = "none"))']
runner = "probe-rs run --chip X"
"#,
        );
        c.merge(
            r#"[build]
target = "thumbv6m-none-eabi"
[target.thumbv7em-none-eabihf]
runner = ["qemu-system-arm", "-M", "mps2-an386"]
"#,
        );
        assert_eq!(c.build_target.as_deref(), Some("thumbv7m-none-eabi"));
        assert_eq!(c.runner("thumbv7em-none-eabihf").unwrap()[2], "mps2-an386");
        assert_eq!(c.runner("thumbv7m-none-eabi").unwrap()[0], "probe-rs");
        assert_eq!(c.runner("x86_64-unknown-linux-gnu"), None);
        // Broken TOML is ignored rather than fatal: cargo itself will report it.
        c.merge("this is [not toml");
    }
}
