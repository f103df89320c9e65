//! Building the firmware: `cargo build` with JSON messages, in cargo-sample's own target
//! directory, with the sampling feature and debug info on.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::Stdio;

/// What the link error's hint says when the application and sampler-rt both define `SysTick`.
pub const DUPLICATE_SYSTICK: &str = "the application defines a SysTick handler of its own";

use anyhow::{Context, Result, bail};
use cargo_metadata::{Message, TargetKind};

use crate::project::{Project, Selection, cargo_command};

mod lock;
use lock::BuildLock;

/// What to do about a link error whose cause is known, from the linker's words.
fn link_hint(errors: &str) -> Option<String> {
    let duplicate = |name: &str| {
        errors.contains(&format!("duplicate symbol: {name}"))
            || errors.contains(&format!("multiple definition of `{name}'"))
    };
    if duplicate("SysTick") {
        return Some(format!(
            "hint: {DUPLICATE_SYSTICK} (RTIC's `systick_monotonic!`, a HAL's tick), and so \
                 does sampler-rt. Leave `--timer` out and cargo-sample paces the sampler with a \
                 free timer of the machine, or name one with `--timer`"
        ));
    }
    let undefined = |name: &str| {
        errors.contains(&format!("undefined symbol: {name}"))
            || errors.contains(&format!("undefined reference to `{name}'"))
    };
    if undefined("__stext") || undefined("__etext") {
        return Some(
            "hint: sampler-rt fingerprints the code between the symbols `__stext` and `__etext` \
             (so that a dump proves which code made it), which cortex-m-rt's `link.x` defines \
             and this firmware's linker script does not. Define them around the code's output \
             section, e.g. `.text : { __stext = .; *(.text .text.*) __etext = .; }`, or after \
             it: `PROVIDE(__stext = ADDR(.text)); PROVIDE(__etext = ADDR(.text) + \
             SIZEOF(.text));`"
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

/// Whether `profile` builds without optimisation (cargo's `dev` and `test` unless the
/// workspace's manifest, the environment or `--config` raise their `opt-level`).
pub fn unoptimised(project: &Project, args: &Selection) -> bool {
    let profile = args.profile_name();
    if profile != "dev" && profile != "test" {
        return false;
    }
    let var = format!("CARGO_PROFILE_{}_OPT_LEVEL", profile.to_ascii_uppercase());
    if std::env::var(&var).is_ok_and(|v| v.trim() != "0") {
        return false;
    }
    let key = format!("profile.{profile}.opt-level");
    if args
        .flags
        .config
        .iter()
        .any(|c| c.replace(' ', "").starts_with(&key))
    {
        return false;
    }
    let manifest = project.workspace_root.join("Cargo.toml");
    let level = std::fs::read_to_string(manifest)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| t.get("profile")?.get(&profile)?.get("opt-level").cloned());
    match level {
        None => true,
        Some(toml::Value::Integer(0)) => true,
        Some(toml::Value::String(s)) => s == "0",
        Some(_) => false,
    }
}

/// What a build produced: the executable, and its bytes as they were when the build ended
/// (read under the build directory's lock, so that another cargo-sample building the same
/// binary with other features cannot replace it first).
#[derive(Debug, Clone)]
pub struct Built {
    pub elf: PathBuf,
    pub bytes: Vec<u8>,
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

/// sampler-rt's default ring, in samples, and histogram counters (its build script's).
const DEFAULT_SIZES: Sizes = Sizes {
    ring: 10_240,
    bins: 4096,
};
/// The smallest ring worth sampling with.
const MIN_RING_SLOTS: u64 = 256;
/// Stack left free when cargo-sample sizes the buffers itself.
const STACK_RESERVE: u64 = 8 << 10;

/// sampler-rt's build-time buffer sizes: ring slots (4 bytes each) and histogram counters (2
/// bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub ring: u32,
    pub bins: u32,
}

impl Sizes {
    fn bytes(self) -> u64 {
        u64::from(self.ring) * 4 + u64::from(self.bins) * 2
    }

    /// The largest sizes within `budget` bytes: a quarter for the bins (512 B to 8 KiB), the
    /// rest for the ring; `None` when the ring would be under 256 samples.
    fn within(budget: u64) -> Option<Sizes> {
        let bins_bytes = floor_pow2(budget / 4).clamp(512, 8192);
        let ring = floor_pow2(budget.saturating_sub(bins_bytes) / 4).min(10_240);
        (ring >= MIN_RING_SLOTS).then_some(Sizes {
            ring: ring as u32,
            bins: (bins_bytes / 2) as u32,
        })
    }

    fn env(self) -> [(&'static str, String); 2] {
        [
            ("SAMPLER_RT_RING_SLOTS", self.ring.to_string()),
            ("SAMPLER_RT_HIST_BINS", self.bins.to_string()),
        ]
    }
}

/// The crate's own sizes (`[package.metadata.sample] ring-slots` / `hist-bins`), over the
/// defaults.
fn crate_sizes(project: &Project) -> Result<Option<Sizes>> {
    let get = |key: &str| -> Result<Option<u32>> {
        match project.metadata.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) => Ok(Some(n)),
                None => bail!(
                    "`[package.metadata.sample] {key} = {v}` in {}: a number",
                    project.manifest_path.display()
                ),
            },
        }
    };
    let (ring, bins) = (get("ring-slots")?, get("hist-bins")?);
    if ring.is_none() && bins.is_none() {
        return Ok(None);
    }
    Ok(Some(Sizes {
        ring: ring.unwrap_or(DEFAULT_SIZES.ring),
        bins: bins.unwrap_or(DEFAULT_SIZES.bins),
    }))
}

/// The sizes cargo-sample chose for this crate last time, kept beside its builds.
fn remembered(project: &Project, key: &str) -> Option<Sizes> {
    let e = crate::runs::recall(&own_dir(project).join("sizes.json"), key)?;
    let get = |k: &str| e.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
    Some(Sizes {
        ring: get("ring")?,
        bins: get("bins")?,
    })
}

fn remember(project: &Project, key: &str, sizes: Sizes) {
    crate::runs::remember(
        &own_dir(project).join("sizes.json"),
        key,
        serde_json::json!({ "ring": sizes.ring, "bins": sizes.bins }),
    );
}

/// The largest power of two at most `n`.
fn floor_pow2(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        1 << (63 - n.leading_zeros())
    }
}

/// Bytes the linker said a region overflowed by (`... overflowed by N bytes`).
fn overflow_bytes(errors: &str) -> Option<u64> {
    let i = errors.find("overflowed by ")?;
    errors[i + "overflowed by ".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn build_in(
    project: &Project,
    args: &Selection,
    with_feature: bool,
    extra_config: &[String],
    subdir: &str,
) -> Result<Built> {
    let _lock = BuildLock::take(&own_dir(project), subdir);
    // No sampler, or sizes the user set (environment, [env]): one build, as it is.
    if !with_feature || project.ring_slots.is_some() || project.hist_bins.is_some() {
        return cargo_build(project, args, with_feature, extra_config, subdir, None)?
            .into_result(project);
    }
    if let Some(sizes) = crate_sizes(project)? {
        return cargo_build(
            project,
            args,
            with_feature,
            extra_config,
            subdir,
            Some(sizes),
        )?
        .into_result(project);
    }
    // Sized by cargo-sample: the sizes that fitted last time, else sampler-rt's defaults;
    // smaller when the link says RAM overflows or the stack would be left too little.
    let key = format!(
        "{} {}/{}/{}",
        project.manifest_path.display(),
        project.target_name,
        project.triple,
        args.profile_name()
    );
    let first = remembered(project, &key);
    let mut sizes = first.unwrap_or(DEFAULT_SIZES);
    for _ in 0..6 {
        let outcome = cargo_build(
            project,
            args,
            with_feature,
            extra_config,
            subdir,
            Some(sizes),
        )?;
        let budget = match &outcome {
            Build::Failed { errors, .. }
                if errors.contains("will not fit in region")
                    && (errors.contains(".uninit") || errors.contains(".bss")) =>
            {
                let over = overflow_bytes(errors).unwrap_or(sizes.bytes());
                sizes.bytes().saturating_sub(over + STACK_RESERVE)
            }
            Build::Failed { .. } => return outcome.into_result(project),
            Build::Built(b) => {
                match crate::image::wiring::stack_room_bytes(&b.bytes) {
                    // Less than the reserve left for the stack: smaller buffers, when ones of a
                    // useful size give the stack its room.
                    Some((free, _))
                        if free < STACK_RESERVE
                            && Sizes::within(
                                (sizes.bytes() + free).saturating_sub(STACK_RESERVE),
                            )
                            .is_some_and(|s| s.bytes() < sizes.bytes()) =>
                    {
                        (sizes.bytes() + free).saturating_sub(STACK_RESERVE)
                    }
                    _ => {
                        if Some(sizes) != first {
                            remember(project, &key, sizes);
                        }
                        if sizes != first.unwrap_or(DEFAULT_SIZES) {
                            crate::term::note(format!(
                                "sampler-rt's buffers were made smaller to fit the part's RAM: a \
                                 ring of {} samples ({} KiB) and {} histogram counters. To \
                                 choose them yourself, set `[package.metadata.sample] \
                                 ring-slots = N` (and `hist-bins = N`) in {}",
                                sizes.ring,
                                sizes.ring * 4 / 1024,
                                sizes.bins,
                                project.manifest_path.display()
                            ));
                        }
                        return outcome.into_result(project);
                    }
                }
            }
        };
        match Sizes::within(budget) {
            Some(smaller) if smaller.bytes() < sizes.bytes() => {
                crate::term::status(
                    "Resizing",
                    format!(
                        "sampler-rt's ring to {} samples to fit the part's RAM ({} bytes over \
                         with {})",
                        smaller.ring,
                        sizes.bytes().saturating_sub(budget),
                        sizes.ring
                    ),
                );
                sizes = smaller;
            }
            _ => {
                outcome.print_errors();
                bail!(
                    "sampler-rt's buffers do not fit in the part's RAM even at {MIN_RING_SLOTS} \
                     samples with {} KiB left for the stack (they would have {budget} bytes). \
                     Free RAM for them (a smaller heap or buffers), or give their sizes yourself: \
                     `[package.metadata.sample] ring-slots = N` in {}",
                    STACK_RESERVE / 1024,
                    project.manifest_path.display()
                );
            }
        }
    }
    bail!("sizing sampler-rt's buffers did not settle; set `[package.metadata.sample] ring-slots`")
}

/// What one `cargo build` gave.
enum Build {
    Built(Built),
    Failed {
        status: String,
        /// The rendered error diagnostics, kept back until it is known whether they matter.
        errors: String,
    },
}

impl Build {
    fn print_errors(&self) {
        if let Build::Failed { errors, .. } = self {
            eprint!("{errors}");
        }
    }

    /// The build, or a [`BuildFailed`] that holds the compiler's messages: they are printed
    /// where the error is reported, so that a failure cargo-sample recovers from (two SysTick
    /// handlers, a ring too big for RAM) prints nothing.
    fn into_result(self, project: &Project) -> Result<Built> {
        match self {
            Build::Built(b) => Ok(b),
            Build::Failed { status, errors } => Err(BuildFailed {
                target: project.target_name.clone(),
                status,
                hint: link_hint(&errors),
                messages: errors,
            }
            .into()),
        }
    }
}

/// A failed `cargo build`, with the messages that say why.
#[derive(Debug)]
pub struct BuildFailed {
    target: String,
    status: String,
    hint: Option<String>,
    /// The compiler's and cargo's error messages, rendered.
    pub messages: String,
}

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "building `{}` failed (cargo {}); the compiler's messages are above",
            self.target, self.status
        )?;
        match &self.hint {
            Some(h) => write!(f, "\n{h}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for BuildFailed {}

/// Print the build's messages held in `e`, if it is a failed build: call it where an error is
/// reported to the user, before the error's own line.
pub fn print_build_messages(e: &anyhow::Error) {
    if let Some(b) = e.downcast_ref::<BuildFailed>() {
        eprint!("{}", b.messages);
    }
}

fn cargo_build(
    project: &Project,
    args: &Selection,
    with_feature: bool,
    extra_config: &[String],
    subdir: &str,
    sizes: Option<Sizes>,
) -> Result<Build> {
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
    if let Some(sizes) = sizes {
        cmd.envs(sizes.env());
    }
    cmd.envs(args.env.iter().map(|(k, v)| (k, v)));
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
    // cargo's own lines pass through as they come, except its errors ("could not compile"),
    // which are held back with the compiler's: a build that is retried says nothing.
    cmd.arg("--color").arg(if crate::term::color() {
        "always"
    } else {
        "never"
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().context("starting cargo")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let stderr = child.stderr.take().context("cargo's stderr")?;
    let held = std::thread::spawn(move || pass_through_but_errors(stderr));
    let mut found: Option<PathBuf> = None;
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
                    found = Some(exe.into_std_path_buf());
                }
            }
            Message::CompilerMessage(m) => {
                if let Some(r) = &m.message.rendered {
                    if m.message.level == cargo_metadata::diagnostic::DiagnosticLevel::Error {
                        errors.push_str(r);
                    } else {
                        eprint!("{r}");
                    }
                }
            }
            _ => {}
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    errors.push_str(&held.join().unwrap_or_default());
    if !status.success() {
        return Ok(Build::Failed {
            status: status.to_string(),
            errors,
        });
    }
    let elf = found.with_context(|| {
        format!(
            "cargo built `{}` but reported no executable for it",
            project.target_name
        )
    })?;
    let bytes = std::fs::read(&elf)
        .with_context(|| format!("reading the built firmware {}", elf.display()))?;
    Ok(Build::Built(Built { elf, bytes }))
}

/// Copy cargo's standard error to ours line by line until its first error line (or "build
/// failed, waiting for other jobs"); keep that line and everything after it (an error's
/// `Caused by:` lines, a build script's output) back, and return them.
fn pass_through_but_errors(stderr: std::process::ChildStderr) -> String {
    use std::io::{BufRead, Write};
    let mut held = String::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        let plain = anstream::adapter::strip_str(&line).to_string();
        let plain = plain.trim_start();
        if held.is_empty()
            && !plain.starts_with("error")
            && !plain.starts_with("warning: build failed")
        {
            let _ = writeln!(std::io::stderr(), "{line}");
        } else {
            held.push_str(&line);
            held.push('\n');
        }
    }
    held
}

#[cfg(test)]
mod tests;
