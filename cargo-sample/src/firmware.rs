//! Building the firmware: `cargo build` with JSON messages, in cargo-sample's own target
//! directory, with the sampling feature and debug info on.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use cargo_metadata::{Message, TargetKind};

use crate::project::{Project, Selection, cargo_command};

/// What to do about a link error whose cause is known, from the linker's words.
fn link_hint(errors: &str) -> Option<String> {
    let duplicate = |name: &str| {
        errors.contains(&format!("duplicate symbol: {name}"))
            || errors.contains(&format!("multiple definition of `{name}'"))
    };
    if duplicate("SysTick") {
        return Some(
            "hint: the application defines a SysTick handler of its own (RTIC's \
             `systick_monotonic!`, a HAL's tick), and so does sampler-rt. Keep SysTick for the \
             application: turn sampler-rt's `systick` feature off for this crate \
             (`default-features = false`) and pace the sampler with another timer (`--timer`)"
                .to_owned(),
        );
    }
    if errors.contains("will not fit in region") && errors.contains(".uninit") {
        return Some(
            "hint: sampler-rt's ring does not fit in the part's RAM (4 bytes a sample). Build it \
             smaller with `SAMPLER_RT_RING_SLOTS` (for example 2048: 8 KiB) in the crate's \
             `.cargo/config.toml` under `[env]`, so that every build uses it"
                .to_owned(),
        );
    }
    None
}

/// Where cargo-sample keeps its builds and runs: `<target>/cargo-sample`.
pub fn own_dir(project: &Project) -> PathBuf {
    project.target_dir.join("cargo-sample")
}

/// The profile a build uses, by cargo's name for it.
pub fn profile_name(args: &Selection) -> String {
    args.profile_name()
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct Built {
    pub elf: PathBuf,
}

/// Build the firmware. `extra_config` are more `--config` values (e.g. function alignment).
/// Compiler diagnostics reach the user as cargo renders them.
pub fn build(
    project: &Project,
    args: &Selection,
    with_feature: bool,
    extra_config: &[String],
) -> Result<Built> {
    build_in(project, args, with_feature, extra_config, "build")
}

/// Build with every function aligned to `align` bytes (LLVM's `-align-all-functions`), added to
/// the rustflags source the crate itself uses, in a target directory of its own.
pub fn build_aligned(
    project: &Project,
    args: &Selection,
    with_feature: bool,
    align: u32,
) -> Result<Built> {
    if !align.is_power_of_two() || !(2..=4096).contains(&align) {
        bail!("`--align {align}`: a power of two from 2 to 4096 bytes");
    }
    if std::env::var_os("RUSTFLAGS").is_some()
        || std::env::var_os("CARGO_ENCODED_RUSTFLAGS").is_some()
    {
        bail!(
            "RUSTFLAGS is set in the environment: it replaces every other source of flags, so \
             `--align` cannot add its own. Unset it (put the flags in .cargo/config.toml)"
        );
    }
    let flags = format!(
        "{}=[\"-C\", \"llvm-args=-align-all-functions={}\"]",
        project.rustflags_key,
        align.trailing_zeros()
    );
    build_in(
        project,
        args,
        with_feature,
        &[flags],
        &format!("build-align{align}"),
    )
}

fn build_in(
    project: &Project,
    args: &Selection,
    with_feature: bool,
    extra_config: &[String],
    subdir: &str,
) -> Result<Built> {
    let profile = profile_name(args);
    let mut cmd = cargo_command();
    cmd.current_dir(&project.dir)
        .arg("build")
        // Diagnostics come back as JSON with their rendering: printed as they arrive, and
        // read for the linker errors that have a known cause.
        .arg(if crate::term::color() {
            "--message-format=json-diagnostic-rendered-ansi"
        } else {
            "--message-format=json"
        })
        .arg("--manifest-path")
        .arg(&project.manifest_path)
        .arg("--target")
        .arg(&project.triple)
        .arg("--target-dir")
        .arg(own_dir(project).join(subdir))
        .arg("--profile")
        .arg(&profile)
        // Lines and inline frames need DWARF; it does not change the generated code.
        .arg("--config")
        .arg(format!("profile.{profile}.debug=2"))
        .arg("--config")
        .arg(format!("profile.{profile}.strip=false"));
    for c in extra_config {
        cmd.arg("--config").arg(c);
    }
    cmd.args(args.flags.build_args());
    let mut features: Vec<String> = args
        .features
        .iter()
        .flat_map(|f| f.split([' ', ',']))
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect();
    if with_feature {
        features.push(args.feature_name.clone());
    }
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    if args.no_default_features {
        cmd.arg("--no-default-features");
    }
    if args.all_features {
        cmd.arg("--all-features");
    }
    if project.is_example {
        cmd.arg("--example").arg(&project.target_name);
    } else {
        cmd.arg("--bin").arg(&project.target_name);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().context("starting cargo")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let mut found: Option<Built> = None;
    let want = if project.is_example {
        TargetKind::Example
    } else {
        TargetKind::Bin
    };
    let mut errors = String::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        let message = message.context("reading cargo's messages")?;
        match message {
            Message::CompilerArtifact(a)
                if a.target.name == project.target_name && a.target.kind.contains(&want) =>
            {
                if let Some(exe) = a.executable {
                    found = Some(Built {
                        elf: exe.into_std_path_buf(),
                    });
                }
            }
            Message::CompilerMessage(m) => {
                if let Some(r) = &m.message.rendered {
                    eprint!("{r}");
                    if m.message.level == cargo_metadata::diagnostic::DiagnosticLevel::Error {
                        errors.push_str(r);
                    }
                }
            }
            _ => {}
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!(
            "building `{}` failed (cargo {}); the compiler's messages are above{}",
            project.target_name,
            status,
            link_hint(&errors)
                .map(|h| format!("\n{h}"))
                .unwrap_or_default()
        );
    }
    found.with_context(|| {
        format!(
            "cargo built `{}` but reported no executable for it",
            project.target_name
        )
    })
}
