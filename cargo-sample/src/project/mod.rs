//! The firmware crate: package, binary, target triple and runner, from `cargo metadata` and the
//! `.cargo/config.toml` files cargo itself would read.

pub mod config;
pub mod firmware;
pub mod runner;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use cargo_metadata::{Metadata, MetadataCommand, Package, TargetKind};

pub use runner::Runner;

/// Cargo's own options, given to every cargo command cargo-sample runs for the crate.
#[derive(Debug, Clone, Default)]
pub struct CargoFlags {
    pub locked: bool,
    pub frozen: bool,
    pub offline: bool,
    /// `--config KEY=VALUE` or `--config FILE`.
    pub config: Vec<String>,
    /// `-Z FLAG`.
    pub unstable: Vec<String>,
    /// `--target-dir DIR`: where cargo-sample keeps its builds and runs (`DIR/cargo-sample`).
    pub target_dir: Option<PathBuf>,
    pub jobs: Option<String>,
    pub verbose: u8,
}

impl CargoFlags {
    /// The options every cargo command takes (`metadata` and `build`).
    pub fn common_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (on, flag) in [
            (self.locked, "--locked"),
            (self.frozen, "--frozen"),
            (self.offline, "--offline"),
        ] {
            if on {
                v.push(flag.to_owned());
            }
        }
        for c in &self.config {
            v.push("--config".into());
            v.push(c.clone());
        }
        for z in &self.unstable {
            v.push("-Z".into());
            v.push(z.clone());
        }
        v
    }

    /// The options only a build takes.
    pub fn build_args(&self) -> Vec<String> {
        let mut v = self.common_args();
        if let Some(j) = &self.jobs {
            v.push("--jobs".into());
            v.push(j.clone());
        }
        if self.verbose > 0 {
            v.push(format!("-{}", "v".repeat(self.verbose.min(2) as usize)));
        }
        v
    }
}

/// Which crate, target and build, as cargo's selection options say: plain data, made from the
/// command line by the command layer.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub package: Option<String>,
    pub bin: Option<String>,
    pub example: Option<String>,
    pub release: bool,
    pub profile: Option<String>,
    pub features: Vec<String>,
    pub all_features: bool,
    pub no_default_features: bool,
    pub target: Option<String>,
    pub manifest_path: Option<PathBuf>,
    /// The crate's feature that turns sampler-rt on.
    pub feature_name: String,
    pub flags: CargoFlags,
    /// Environment for the build: sampler-rt's build-time settings a run chose (the device
    /// timer whose interrupt handler it builds in).
    pub env: Vec<(String, String)>,
}

impl Selection {
    /// The profile a build uses, by cargo's name for it.
    pub fn profile_name(&self) -> String {
        match (&self.profile, self.release) {
            (Some(p), _) => p.clone(),
            (None, true) => "release".into(),
            (None, false) => "dev".into(),
        }
    }
}

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
    /// The runner of the triple, read.
    pub runner: Option<Runner>,
    /// Where that runner is configured, for messages.
    pub runner_origin: String,
    /// Where cargo-sample keeps its builds and runs: `<target dir>/cargo-sample`.
    pub target_dir: PathBuf,
    pub workspace_root: PathBuf,
    /// Whether the package declares the sampling feature.
    pub has_feature: bool,
    /// Whether the package depends on sampler-rt.
    pub has_dependency: bool,
    /// The config key extra rustflags go to (see [`config::Config::rustflags_key`]).
    pub rustflags_key: String,
    /// The probe settings of cargo-embed's files and `PROBE_RS_*` (a runner's own come first).
    pub probe_defaults: runner::Probe,
    /// `SAMPLER_RT_RING_SLOTS` as the build will see it (environment, `[env]`), if set.
    pub ring_slots: Option<String>,
    /// `SAMPLER_RT_HIST_BINS` likewise.
    pub hist_bins: Option<String>,
    /// `[package.metadata.sample]` of the manifest.
    pub metadata: serde_json::Value,
    /// The options given to cargo.
    pub flags: CargoFlags,
}

/// Resolve the package, target and triple for a run.
pub fn discover(sel: &Selection) -> Result<Project> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let manifest = match &sel.manifest_path {
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
        .other_options(sel.flags.common_args())
        .exec()
        .with_context(|| format!("reading the cargo metadata of {}", manifest.display()))?;
    let package = select_package(&meta, sel, &manifest)?;
    let pkg_dir = package
        .manifest_path
        .parent()
        .map(|p| p.as_std_path().to_path_buf())
        .unwrap_or(dir);
    let (target_name, is_example) = select_target(package, sel)?;
    let config = config::Config::load(&pkg_dir, &sel.flags.config)?;
    let triple = config
        .build_target(sel.target.as_deref())?
        .with_context(|| {
            format!(
                "no target triple for `{}`: pass `--target thumbv7m-none-eabi` (or your core's), or \
                 set `[build] target = \"...\"` in {}",
                package.name,
                pkg_dir.join(".cargo/config.toml").display()
            )
        })?;
    let runner = config.runner(&triple)?.map(|w| runner::read(&w));
    let runner_origin = config.runner_origin(&triple);
    let rustflags_key = config.rustflags_key(&triple);
    let probe_defaults =
        runner::env_settings(|k| std::env::var(k).ok()).or(runner::embed_settings(&pkg_dir));
    let has_feature = package.features.contains_key(&sel.feature_name);
    let has_dependency = package.dependencies.iter().any(|d| d.name == "sampler-rt");
    let target_dir = match &sel.flags.target_dir {
        Some(d) => absolute(&cwd, d),
        None => meta.target_directory.clone().into_std_path_buf(),
    };
    Ok(Project {
        dir: pkg_dir,
        manifest_path: package.manifest_path.clone().into_std_path_buf(),
        package: package.name.to_string(),
        target_name,
        is_example,
        rustflags_key,
        triple,
        runner,
        runner_origin,
        target_dir,
        workspace_root: meta.workspace_root.clone().into_std_path_buf(),
        has_feature,
        has_dependency,
        probe_defaults,
        ring_slots: config.env("SAMPLER_RT_RING_SLOTS"),
        hist_bins: config.env("SAMPLER_RT_HIST_BINS"),
        metadata: package.metadata.get("sample").cloned().unwrap_or_default(),
        flags: sel.flags.clone(),
    })
}

/// A prebuilt ELF (`--elf`, from any build system) as the project of a run: named after
/// its file, its code for `triple`, its runs kept under the cargo workspace's target directory
/// when there is one, else `./target` (or `--target-dir`, `CARGO_TARGET_DIR`).
pub fn prebuilt(elf: &Path, triple: &str, sel: &Selection) -> Result<Project> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let elf = absolute(&cwd, elf);
    if !elf.is_file() {
        bail!("`--elf {}`: no such file", elf.display());
    }
    let name = elf
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "firmware".into());
    let target_dir = match (&sel.flags.target_dir, std::env::var_os("CARGO_TARGET_DIR")) {
        (Some(d), _) => absolute(&cwd, d),
        (None, Some(d)) => absolute(&cwd, Path::new(&d)),
        (None, None) => MetadataCommand::new()
            .no_deps()
            .exec()
            .map(|m| m.target_directory.into_std_path_buf())
            .unwrap_or_else(|_| cwd.join("target")),
    };
    Ok(Project {
        dir: cwd.clone(),
        manifest_path: elf.clone(),
        package: name.clone(),
        target_name: name,
        is_example: false,
        triple: triple.to_owned(),
        runner: None,
        runner_origin: "`--elf`".into(),
        target_dir,
        workspace_root: elf.parent().map(Path::to_path_buf).unwrap_or(cwd),
        has_feature: false,
        has_dependency: false,
        rustflags_key: String::new(),
        probe_defaults: runner::Probe::default(),
        ring_slots: None,
        hist_bins: None,
        metadata: serde_json::Value::Null,
        flags: sel.flags.clone(),
    })
}

impl Project {
    /// The runner when it is QEMU.
    pub fn qemu_runner(&self) -> Option<&runner::Qemu> {
        match &self.runner {
            Some(Runner::Qemu(q)) => Some(q),
            _ => None,
        }
    }

    /// The runner when it is probe-rs.
    pub fn probe_runner(&self) -> Option<&runner::Probe> {
        match &self.runner {
            Some(Runner::Probe(p)) => Some(p),
            _ => None,
        }
    }
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
    args: &Selection,
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

fn select_target(package: &Package, args: &Selection) -> Result<(String, bool)> {
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
    // `default-run` of the manifest, as `cargo run` takes it.
    if let Some(default) = package.default_run.as_deref().filter(|d| bins.contains(d)) {
        return Ok((default.to_owned(), false));
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

/// `cargo` as cargo itself was invoked (respects `$CARGO`).
pub fn cargo_command() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}
