//! Cargo's configuration, read as cargo reads it (cargo-config2): the `.cargo/config.toml`
//! files from the crate's directory up, `$CARGO_HOME/config.toml`, the `CARGO_*` environment
//! overrides, `target.'cfg(...)'` tables evaluated against the target, and the `--config`
//! values of the command line for the keys cargo-sample reads.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The resolved configuration of one crate directory.
pub struct Config {
    inner: cargo_config2::Config,
    dir: PathBuf,
    /// Environment overrides made from `--config` values (`CARGO_BUILD_TARGET`, ...).
    cli: Vec<(String, String)>,
    /// `[env]` values given with `--config env.NAME=...`.
    cli_env: Vec<(String, String)>,
}

/// `CARGO_TARGET_<TRIPLE>_...`'s middle part.
fn triple_key(triple: &str) -> String {
    triple.to_ascii_uppercase().replace(['-', '.'], "_")
}

/// A TOML value as a runner or flags string for an environment variable.
fn words(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Array(a) => Some(
            a.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// Variable names and values.
pub type Vars = Vec<(String, String)>;

/// The keys of `--config` values that cargo-sample reads, as environment overrides; `[env]`
/// values apart. A value is `KEY=VALUE` in TOML or the path of a TOML file, as for cargo.
pub fn cli_overrides(values: &[String], cwd: &Path) -> Result<(Vars, Vars)> {
    let mut env = Vec::new();
    let mut envs = Vec::new();
    for v in values {
        let path = cwd.join(v);
        let table: toml::Table = if !v.contains('=') && path.is_file() {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading `--config {v}`"))?;
            text.parse()
                .with_context(|| format!("`--config {v}`: {} is not valid TOML", path.display()))?
        } else {
            v.parse().with_context(|| {
                format!("`--config {v}`: not a `KEY=VALUE` in TOML (e.g. `build.target=\"thumbv7m-none-eabi\"`) nor a file")
            })?
        };
        if let Some(t) = table.get("build").and_then(|b| b.get("target")) {
            let first = match t {
                toml::Value::Array(a) => a.first().and_then(|x| x.as_str()).map(str::to_owned),
                other => other.as_str().map(str::to_owned),
            };
            if let Some(t) = first {
                env.push(("CARGO_BUILD_TARGET".to_owned(), t));
            }
        }
        if let Some(targets) = table.get("target").and_then(|t| t.as_table()) {
            for (key, t) in targets {
                if key.starts_with("cfg(") {
                    // Cargo joins these with the files' tables; they cannot be expressed as
                    // environment variables, so they are read from the files only.
                    continue;
                }
                let k = triple_key(key);
                if let Some(r) = t.get("runner").and_then(words) {
                    env.push((format!("CARGO_TARGET_{k}_RUNNER"), r));
                }
                if let Some(f) = t.get("rustflags").and_then(words) {
                    env.push((format!("CARGO_TARGET_{k}_RUSTFLAGS"), f));
                }
            }
        }
        if let Some(e) = table.get("env").and_then(|t| t.as_table()) {
            for (k, val) in e {
                let s = match val {
                    toml::Value::String(s) => Some(s.clone()),
                    toml::Value::Table(t) => {
                        t.get("value").and_then(|v| v.as_str()).map(str::to_owned)
                    }
                    _ => None,
                };
                if let Some(s) = s {
                    envs.push((k.clone(), s));
                }
            }
        }
    }
    Ok((env, envs))
}

impl Config {
    /// Load the configuration cargo uses for a build run in `dir`, with the command line's
    /// `--config` values.
    pub fn load(dir: &Path, cli_config: &[String]) -> Result<Config> {
        Config::load_with_env(dir, cli_config, std::env::vars_os().collect(), None)
    }

    /// [`Config::load`] with the given environment and `$CARGO_HOME` (tests).
    pub fn load_with_env(
        dir: &Path,
        cli_config: &[String],
        mut env: Vec<(OsString, OsString)>,
        cargo_home: Option<PathBuf>,
    ) -> Result<Config> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| dir.to_path_buf());
        let (cli, cli_env) = cli_overrides(cli_config, &cwd)?;
        env.extend(cli.iter().map(|(k, v)| (k.into(), v.into())));
        let mut options = cargo_config2::ResolveOptions::default().env(env);
        if cargo_home.is_some() {
            options = options.cargo_home(cargo_home);
        }
        let inner = cargo_config2::Config::load_with_options(dir, options).map_err(|e| {
            anyhow::anyhow!(
                "reading cargo's configuration for {} (`.cargo/config.toml` here and above, and \
                 $CARGO_HOME): {e:#}",
                dir.display()
            )
        })?;
        Ok(Config {
            inner,
            dir: dir.to_path_buf(),
            cli,
            cli_env,
        })
    }

    /// The triple to build for: `--target`, else `CARGO_BUILD_TARGET`, else `build.target`.
    pub fn build_target(&self, cli: Option<&str>) -> Result<Option<String>> {
        let targets = self
            .inner
            .build_target_for_cli(cli)
            .map_err(|e| anyhow::anyhow!("`build.target`: {e:#}"))?;
        match targets.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.clone())),
            many => bail!(
                "`build.target` names several targets ({}); choose one with `--target`",
                many.join(", ")
            ),
        }
    }

    /// The runner for `triple`, as words (cargo's priority: `CARGO_TARGET_<TRIPLE>_RUNNER`,
    /// `target.<triple>.runner`, then the first `target.'cfg(...)'.runner` that applies).
    pub fn runner(&self, triple: &str) -> Result<Option<Vec<String>>> {
        let r = self
            .inner
            .runner(triple)
            .map_err(|e| anyhow::anyhow!("the runner of `{triple}`: {e:#}"))?;
        Ok(r.map(|p| {
            std::iter::once(p.path.to_string_lossy().into_owned())
                .chain(p.args.iter().map(|a| a.to_string_lossy().into_owned()))
                .collect()
        }))
    }

    /// The config key to add rustflags to without losing the crate's own. Cargo takes its
    /// flags from one source: every matching `target.*.rustflags` joined (when not empty),
    /// else `build.rustflags`; a `--config` value joins the same key of the files.
    pub fn rustflags_key(&self, triple: &str) -> String {
        let target = self.inner.rustflags(triple).ok().flatten();
        let build = self.inner.build.rustflags.clone();
        let from_build = match (&target, &build) {
            (Some(t), Some(b)) => t.flags == b.flags && !b.flags.is_empty(),
            _ => false,
        };
        if from_build {
            "build.rustflags".into()
        } else {
            format!("target.{triple}.rustflags")
        }
    }

    /// A variable as the build sees it: the process environment, then `[env]` (a forced
    /// `[env]` value wins), then `--config env.NAME=...`.
    pub fn env(&self, name: &str) -> Option<String> {
        if let Some((_, v)) = self.cli_env.iter().find(|(k, _)| k == name) {
            return Some(v.clone());
        }
        let configured = self.inner.env.get(name);
        if let Some(c) = configured
            && c.force
        {
            return Some(c.value.to_string_lossy().into_owned());
        }
        std::env::var(name)
            .ok()
            .or_else(|| configured.map(|c| c.value.to_string_lossy().into_owned()))
    }

    /// Where the runner of `triple` comes from, for messages: the environment variable, the
    /// `--config` value, or the key and the file.
    pub fn runner_origin(&self, triple: &str) -> String {
        let var = format!("CARGO_TARGET_{}_RUNNER", triple_key(triple));
        if self.cli.iter().any(|(k, _)| *k == var) {
            return format!("`--config target.{triple}.runner=...`");
        }
        if std::env::var_os(&var).is_some() {
            return format!("the environment variable {var}");
        }
        let mut cfg_hit = None;
        for file in config_files(&self.dir) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let Ok(t) = text.parse::<toml::Table>() else {
                continue;
            };
            let Some(targets) = t.get("target").and_then(|t| t.as_table()) else {
                continue;
            };
            if targets.get(triple).and_then(|t| t.get("runner")).is_some() {
                return format!("`target.{triple}.runner` in {}", file.display());
            }
            if cfg_hit.is_none()
                && let Some((k, _)) = targets
                    .iter()
                    .find(|(k, v)| k.starts_with("cfg(") && v.get("runner").is_some())
            {
                cfg_hit = Some(format!("`target.'{k}'.runner` in {}", file.display()));
            }
        }
        cfg_hit.unwrap_or_else(|| "cargo's configuration".to_owned())
    }
}

/// The configuration files cargo reads for `dir`, nearest first.
pub fn config_files(dir: &Path) -> Vec<PathBuf> {
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
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = home {
        for name in ["config.toml", "config"] {
            let f = home.join(name);
            if f.is_file() && !files.contains(&f) {
                files.push(f);
                break;
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_values_become_the_overrides_cargo_would_apply() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("extra.toml"),
            "[target.thumbv6m-none-eabi]\nrunner = [\"qemu-system-arm\", \"-M\", \"microbit\"]\n",
        )
        .unwrap();
        let (env, envs) = cli_overrides(
            &[
                "build.target=\"thumbv7em-none-eabihf\"".into(),
                "target.thumbv7em-none-eabihf.runner=\"qemu-system-arm -M mps2-an386\"".into(),
                "extra.toml".into(),
                "env.SAMPLER_RT_RING_SLOTS=\"2048\"".into(),
                "target.'cfg(target_os = \"none\")'.rustflags=[\"-C\", \"x\"]".into(),
            ],
            dir.path(),
        )
        .unwrap();
        assert_eq!(
            env,
            [
                (
                    "CARGO_BUILD_TARGET".to_owned(),
                    "thumbv7em-none-eabihf".to_owned()
                ),
                (
                    "CARGO_TARGET_THUMBV7EM_NONE_EABIHF_RUNNER".to_owned(),
                    "qemu-system-arm -M mps2-an386".to_owned()
                ),
                (
                    "CARGO_TARGET_THUMBV6M_NONE_EABI_RUNNER".to_owned(),
                    "qemu-system-arm -M microbit".to_owned()
                ),
            ]
        );
        assert_eq!(
            envs,
            [("SAMPLER_RT_RING_SLOTS".to_owned(), "2048".to_owned())]
        );
        let e = cli_overrides(&["not a key".into()], dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains("KEY=VALUE"), "{e:#}");
    }

    /// A crate directory with `.cargo/config.toml` holding `text`, under a parent directory
    /// with its own configuration, and a separate `$CARGO_HOME`.
    fn tree(text: &str, parent: &str, home: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let krate = t.path().join("ws/app");
        std::fs::create_dir_all(krate.join(".cargo")).unwrap();
        std::fs::create_dir_all(t.path().join("ws/.cargo")).unwrap();
        std::fs::create_dir_all(t.path().join("home")).unwrap();
        std::fs::write(krate.join(".cargo/config.toml"), text).unwrap();
        std::fs::write(t.path().join("ws/.cargo/config.toml"), parent).unwrap();
        std::fs::write(t.path().join("home/config.toml"), home).unwrap();
        let home = t.path().join("home");
        (t, krate, home)
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        // PATH for rustc (cfg evaluation) and cargo.
        let mut v: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| {
                let k = k.to_string_lossy();
                matches!(
                    k.as_ref(),
                    "PATH" | "HOME" | "RUSTUP_HOME" | "RUSTUP_TOOLCHAIN"
                )
            })
            .collect();
        v.extend(pairs.iter().map(|(k, v)| (k.into(), v.into())));
        v
    }

    #[test]
    fn cfg_runners_are_evaluated_not_matched_by_text() {
        let (_t, dir, home) = tree(
            r#"[build]
target = "thumbv7m-none-eabi"
[target.'cfg(not(target_os = "none"))']
runner = "wine"
[target.'cfg(all(target_arch = "arm", target_os = "none"))']
runner = "probe-rs run --chip STM32F103C8"
"#,
            "",
            "",
        );
        let c = Config::load_with_env(&dir, &[], env(&[]), Some(home)).unwrap();
        let t = c.build_target(None).unwrap().unwrap();
        assert_eq!(t, "thumbv7m-none-eabi");
        assert_eq!(
            c.runner(&t).unwrap().unwrap(),
            ["probe-rs", "run", "--chip", "STM32F103C8"]
        );
        assert!(
            c.runner_origin(&t).contains("cfg(all(target_arch"),
            "{}",
            c.runner_origin(&t)
        );
    }

    #[test]
    fn the_nearest_file_wins_then_parents_then_cargo_home() {
        let (_t, dir, home) = tree(
            "[target.thumbv7m-none-eabi]\nrunner = \"qemu-system-arm -M lm3s6965evb\"\n",
            "[build]\ntarget = \"thumbv6m-none-eabi\"\n[target.thumbv7m-none-eabi]\nrunner = \"qemu-system-arm -M mps2-an385\"\n",
            "[build]\ntarget = \"thumbv7m-none-eabi\"\n[env]\nSAMPLER_RT_RING_SLOTS = \"1024\"\n[target.thumbv6m-none-eabi]\nrunner = \"qemu-system-arm -M microbit\"\n",
        );
        let c = Config::load_with_env(&dir, &[], env(&[]), Some(home.clone())).unwrap();
        // build.target from the parent beats $CARGO_HOME's; the runner of that triple comes
        // from $CARGO_HOME, the only file that has one.
        assert_eq!(
            c.build_target(None).unwrap().as_deref(),
            Some("thumbv6m-none-eabi")
        );
        assert_eq!(
            c.runner("thumbv6m-none-eabi").unwrap().unwrap()[2],
            "microbit"
        );
        assert_eq!(
            c.runner("thumbv7m-none-eabi").unwrap().unwrap()[2],
            "lm3s6965evb"
        );
        assert_eq!(
            c.inner
                .env
                .get("SAMPLER_RT_RING_SLOTS")
                .map(|e| e.value.clone()),
            Some("1024".into())
        );
        // The environment overrides the files, as for cargo.
        let c = Config::load_with_env(
            &dir,
            &[],
            env(&[
                ("CARGO_BUILD_TARGET", "thumbv7em-none-eabihf"),
                (
                    "CARGO_TARGET_THUMBV7M_NONE_EABI_RUNNER",
                    "qemu-system-arm -M mps2-an500",
                ),
            ]),
            Some(home.clone()),
        )
        .unwrap();
        assert_eq!(
            c.build_target(None).unwrap().as_deref(),
            Some("thumbv7em-none-eabihf")
        );
        assert_eq!(
            c.runner("thumbv7m-none-eabi").unwrap().unwrap()[2],
            "mps2-an500"
        );
        // And `--target` and `--config` the environment.
        let c = Config::load_with_env(
            &dir,
            &["target.thumbv7m-none-eabi.runner=\"qemu-system-arm -M mps2-an386\"".into()],
            env(&[("CARGO_BUILD_TARGET", "thumbv7em-none-eabihf")]),
            Some(home),
        )
        .unwrap();
        assert_eq!(
            c.build_target(Some("thumbv7m-none-eabi"))
                .unwrap()
                .as_deref(),
            Some("thumbv7m-none-eabi")
        );
        assert_eq!(
            c.runner("thumbv7m-none-eabi").unwrap().unwrap()[2],
            "mps2-an386"
        );
    }

    #[test]
    fn extra_rustflags_join_the_crates_own_source() {
        let (_t, dir, home) = tree(
            "[build]\nrustflags = [\"-C\", \"link-arg=-Tlink.x\"]\n[target.'cfg(all(target_arch = \"arm\", target_os = \"none\"))']\nrustflags = []\n",
            "",
            "",
        );
        let c = Config::load_with_env(&dir, &[], env(&[]), Some(home)).unwrap();
        // Empty target flags do not replace build.rustflags.
        assert_eq!(c.rustflags_key("thumbv7m-none-eabi"), "build.rustflags");
        let (_t, dir, home) = tree(
            "[target.thumbv7m-none-eabi]\nrustflags = [\"-C\", \"link-arg=-Tlink.x\"]\n",
            "[build]\nrustflags = [\"-C\", \"x\"]\n",
            "",
        );
        let c = Config::load_with_env(&dir, &[], env(&[]), Some(home)).unwrap();
        assert_eq!(
            c.rustflags_key("thumbv7m-none-eabi"),
            "target.thumbv7m-none-eabi.rustflags"
        );
    }

    #[test]
    fn an_invalid_file_is_named() {
        let (_t, dir, home) = tree("[build\ntarget = 1\n", "", "");
        let e = Config::load_with_env(&dir, &[], env(&[]), Some(home))
            .err()
            .unwrap();
        let text = format!("{e:#}");
        assert!(text.contains("app/.cargo/config.toml"), "{text}");
    }
}
