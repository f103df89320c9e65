//! `cargo sample init`: set up an existing firmware crate for sampling, showing what changes.
//!
//! Three edits, each made only where it is missing: an optional `sampler-rt` dependency (from
//! wherever it resolves today), a feature that turns it on, and a `sampler_rt::start()` call
//! behind that feature at the top of each binary's entry point ([`entry`]). Files are edited
//! in place at the spot that changes, the change is shown as a unified diff, and the crate is
//! checked with `cargo metadata` afterwards: if it no longer resolves, the files are put back.

pub mod entry;

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use cargo_metadata::{MetadataCommand, Package, TargetKind};
use toml_edit::{DocumentMut, InlineTable, Item, Value};

use crate::cli::InitArgs;
use crate::term;

/// Where the `sampler-rt` dependency comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory (written relative to the manifest's directory when it can be).
    Path(String),
    /// A git repository, at a revision when given.
    Git { url: String, rev: Option<String> },
    /// A version on crates.io.
    Version(String),
}

impl Source {
    fn keys(&self) -> Vec<(&'static str, String)> {
        match self {
            Source::Path(p) => vec![("path", p.clone())],
            Source::Git { url, rev } => {
                let mut v = vec![("git", url.clone())];
                if let Some(r) = rev {
                    v.push(("rev", r.clone()));
                }
                v
            }
            Source::Version(v) => vec![("version", v.clone())],
        }
    }
}

/// The sampler-rt of the checkout this cargo-sample was built from, when it is still there
/// (the README installs cargo-sample from a checkout: its runtime is the one that matches).
pub fn checkout_runtime() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sampler-rt");
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
    let doc: toml::Table = text.parse().ok()?;
    (doc.get("package")?.get("name")?.as_str()? == "sampler-rt").then(|| normalize(&dir))
}

/// `dir` without `.` and `..` components (no file system access).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `target` relative to `base` (both absolute), when they share more than the root.
fn relative(target: &Path, base: &Path) -> Option<PathBuf> {
    let (target, base) = (normalize(target), normalize(base));
    let t: Vec<Component> = target.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common <= 1 {
        return None;
    }
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    Some(out)
}

/// The dependency's source for this run of `init`: the options, else the checkout's runtime,
/// else the published version. `explicit` says whether the user chose it.
fn choose_source(args: &InitArgs, manifest_dir: &Path) -> Result<(Source, bool)> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    if let Some(p) = &args.sampler_rt_path {
        let abs = normalize(&cwd.join(p));
        if !abs.join("Cargo.toml").is_file() {
            bail!(
                "`--sampler-rt-path {}`: there is no Cargo.toml in {}",
                p.display(),
                abs.display()
            );
        }
        let shown = relative(&abs, manifest_dir).unwrap_or(abs);
        return Ok((Source::Path(path_text(&shown)), true));
    }
    if let Some(url) = &args.sampler_rt_git {
        return Ok((
            Source::Git {
                url: url.clone(),
                rev: args.sampler_rt_rev.clone(),
            },
            true,
        ));
    }
    if let Some(dir) = checkout_runtime() {
        let shown = relative(&dir, manifest_dir).unwrap_or(dir);
        return Ok((Source::Path(path_text(&shown)), false));
    }
    Ok((Source::Version(env!("CARGO_PKG_VERSION").to_owned()), false))
}

/// Paths in manifests use `/` everywhere.
fn path_text(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// Add (or, with `replace_source`, re-point) the optional dependency and the feature. An
/// Embassy application (a direct `embassy-executor` dependency) also gets sampler-rt's
/// `embassy` feature and the executor's `trace` in the feature: its task statistics.
pub fn edit_manifest(
    text: &str,
    feature: &str,
    source: &Source,
    replace_source: bool,
) -> Result<String> {
    let mut doc: DocumentMut = text.parse().context("Cargo.toml is not valid TOML")?;
    if doc.get("package").is_none() {
        bail!(
            "this Cargo.toml has no [package]: run init in the firmware crate, not the workspace"
        );
    }
    let deps = doc
        .entry("dependencies")
        .or_insert(Item::Table(Default::default()))
        .as_table_like_mut()
        .context("[dependencies] is not a table")?;
    let embassy = deps.contains_key("embassy-executor");
    match deps.get_mut("sampler-rt") {
        None => {
            let mut t = InlineTable::new();
            for (k, v) in source.keys() {
                t.insert(k, Value::from(v));
            }
            t.insert("optional", Value::from(true));
            deps.insert("sampler-rt", Item::Value(Value::InlineTable(t)));
        }
        Some(item) => {
            if let Some(t) = item.as_table_like_mut() {
                let inherited = t.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                if replace_source && !inherited {
                    for k in ["path", "git", "rev", "branch", "tag", "version"] {
                        t.remove(k);
                    }
                    for (k, v) in source.keys() {
                        t.insert(k, Item::Value(Value::from(v)));
                    }
                }
                if t.get("optional").and_then(|o| o.as_bool()) != Some(true) {
                    t.insert("optional", Item::Value(Value::from(true)));
                }
            } else if item.is_str() {
                // `sampler-rt = "0.1"`: a version only.
                let mut t = InlineTable::new();
                if replace_source {
                    for (k, v) in source.keys() {
                        t.insert(k, Value::from(v));
                    }
                } else if let Some(v) = item.as_str() {
                    t.insert("version", Value::from(v));
                }
                t.insert("optional", Value::from(true));
                *item = Item::Value(Value::InlineTable(t));
            }
        }
    }
    if embassy
        && let Some(t) = deps
            .get_mut("sampler-rt")
            .and_then(|d| d.as_table_like_mut())
    {
        match t.get_mut("features").and_then(|f| f.as_array_mut()) {
            Some(list) => {
                if !list.iter().any(|v| v.as_str() == Some("embassy")) {
                    list.push("embassy");
                }
            }
            None => {
                let mut list = toml_edit::Array::new();
                list.push("embassy");
                t.insert("features", Item::Value(Value::Array(list)));
            }
        }
    }
    let features = doc
        .entry("features")
        .or_insert(Item::Table(Default::default()))
        .as_table_like_mut()
        .context("[features] is not a table")?;
    if features.get(feature).is_none() {
        features.insert(feature, Item::Value(Value::Array(toml_edit::Array::new())));
    }
    let list = features
        .get_mut(feature)
        .and_then(|item| item.as_array_mut())
        .with_context(|| format!("[features] {feature} is not a list"))?;
    let on = list
        .iter()
        .any(|v| matches!(v.as_str(), Some("dep:sampler-rt" | "sampler-rt")));
    if !on {
        list.push("dep:sampler-rt");
    }
    if embassy
        && !list
            .iter()
            .any(|v| v.as_str() == Some("embassy-executor/trace"))
    {
        list.push("embassy-executor/trace");
    }
    Ok(doc.to_string())
}

/// `[package.metadata.sample] ring-slots = N`.
pub fn set_ring_slots(text: &str, n: u32) -> Result<String> {
    if n < 64 {
        bail!("`--ring-slots {n}`: at least 64 samples");
    }
    let mut doc: DocumentMut = text.parse().context("Cargo.toml is not valid TOML")?;
    let package = doc["package"]
        .as_table_mut()
        .context("[package] is not a table")?;
    let metadata = package
        .entry("metadata")
        .or_insert(Item::Table(Default::default()))
        .as_table_mut()
        .context("[package.metadata] is not a table")?;
    metadata.set_implicit(true);
    let sample = metadata
        .entry("sample")
        .or_insert(Item::Table(Default::default()))
        .as_table_mut()
        .context("[package.metadata.sample] is not a table")?;
    sample["ring-slots"] = toml_edit::value(i64::from(n));
    Ok(doc.to_string())
}

/// The package `init` edits: `-p`, else the manifest's own, else a workspace's only member.
fn select_package<'a>(
    members: &[&'a Package],
    spec: Option<&str>,
    manifest: &Path,
) -> Result<&'a Package> {
    let names = || {
        members
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(s) = spec {
        return members
            .iter()
            .copied()
            .find(|p| p.name.as_str() == s)
            .with_context(|| format!("no package `{s}` in this workspace (members: {})", names()));
    }
    if let Some(p) = members
        .iter()
        .find(|p| p.manifest_path.as_std_path() == manifest)
    {
        return Ok(p);
    }
    match members {
        [one] => Ok(one),
        _ => bail!(
            "this workspace has several packages; choose the firmware crate with `-p`: {}",
            names()
        ),
    }
}

/// The source files whose entry point gets the call, with what they are.
fn entry_files(pkg: &Package, args: &InitArgs) -> Result<Vec<(String, PathBuf)>> {
    if let Some(f) = &args.main {
        return Ok(vec![("--main".into(), f.clone())]);
    }
    let pick = |kind: TargetKind, name: &str| {
        pkg.targets
            .iter()
            .find(|t| t.kind.contains(&kind) && t.name == name)
            .map(|t| (t.name.clone(), t.src_path.clone().into_std_path_buf()))
    };
    if let Some(b) = &args.bin {
        return pick(TargetKind::Bin, b)
            .map(|t| vec![t])
            .with_context(|| format!("package `{}` has no binary `{b}`", pkg.name));
    }
    if let Some(e) = &args.example {
        return pick(TargetKind::Example, e)
            .map(|t| vec![t])
            .with_context(|| format!("package `{}` has no example `{e}`", pkg.name));
    }
    let bins: Vec<(String, PathBuf)> = pkg
        .targets
        .iter()
        .filter(|t| t.kind.contains(&TargetKind::Bin))
        .map(|t| (t.name.clone(), t.src_path.clone().into_std_path_buf()))
        .collect();
    if bins.is_empty() {
        bail!(
            "package `{}` has no binary: choose an example with `--example`, or the file of your \
             entry point with `--main FILE`",
            pkg.name
        );
    }
    Ok(bins)
}

/// A file to write: path, old text, new text.
struct Change {
    path: PathBuf,
    old: String,
    new: String,
}

/// The edits of the entry points (the start call, a flush before each semihosting exit), the
/// shapes of the entries found, and how many flushes were added; anything undecidable stops
/// everything before a file is written.
/// Each entry file's edit, the shapes found, the semihosting exits flushed, and what init could
/// not do itself (the start call goes in by hand there).
#[allow(clippy::type_complexity)]
fn entry_changes(
    pkg: &Package,
    args: &InitArgs,
    pkg_dir: &Path,
) -> Result<(Vec<Change>, Vec<entry::Shape>, usize, Vec<String>)> {
    let mut changes = Vec::new();
    // What stops init (nothing is written), and the entries it cannot find (the rest is
    // written, the start call goes in by hand).
    let mut by_hand = Vec::new();
    let mut not_found = Vec::new();
    let mut shapes = Vec::new();
    let mut flushes = 0usize;
    for (target, file) in entry_files(pkg, args)? {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let shown = file
            .strip_prefix(pkg_dir)
            .unwrap_or(&file)
            .display()
            .to_string();
        // A semihosting exit takes the samples still in the ring with it: flush before it.
        let flushed = |new: String, flushes: &mut usize| {
            let (out, n) = entry::flush_before_exits(&new, &args.feature_name);
            *flushes += n;
            out
        };
        match entry::find_named(&text, args.entry.as_deref()) {
            Ok(entry::Found::AlreadyStarts(_)) => {
                let new = flushed(text.clone(), &mut flushes);
                changes.push(Change {
                    path: file.clone(),
                    old: text,
                    new,
                });
            }
            Ok(entry::Found::One(e)) => match entry::insert(&text, &e, &args.feature_name) {
                Ok(new) => {
                    shapes.push(e.shape);
                    let new = flushed(new, &mut flushes);
                    changes.push(Change {
                        path: file.clone(),
                        old: text,
                        new,
                    });
                }
                Err(why) => by_hand.push(format!(
                    "{shown}:{}: {why}; add the call at the top of `{}` by hand",
                    e.line, e.function
                )),
            },
            Ok(entry::Found::Ambiguous(v)) => {
                let at: Vec<String> = v
                    .iter()
                    .map(|e| format!("`{}` (line {})", e.function, e.line))
                    .collect();
                by_hand.push(format!(
                    "{shown}: several entry points ({}) for `{target}`; choose with `--bin`, or add \
                     the call by hand at the top of the one that runs",
                    at.join(", ")
                ));
            }
            Ok(entry::Found::None) if args.entry.is_some() => by_hand.push(format!(
                "{shown}: no function `{}` for `{target}`",
                args.entry.as_deref().unwrap_or_default()
            )),
            Ok(entry::Found::None) => {
                let foreign = entry::foreign_entries(&text);
                not_found.push(format!(
                    "{shown}: no entry point found for `{target}` (no `#[entry]`, RTIC `#[init]`, \
                     `#[embassy_executor::main]` or `fn main`){}",
                    match foreign.as_slice() {
                        [] => String::new(),
                        list => format!(
                            "; the functions your assembly can call are {}: if one is where the \
                             firmware starts, run init again with `--entry NAME`",
                            list.iter()
                                .map(|(n, l)| format!("`{n}` (line {l})"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                ))
            }
            Err(e) => by_hand.push(format!(
                "{shown}: {e} (the file does not parse); fix it first, or add the call by hand"
            )),
        }
    }
    if !by_hand.is_empty() {
        bail!(
            "nothing was changed: {}\nThe lines to add:\n{}",
            by_hand.join("\n"),
            entry::call_lines(&args.feature_name, "    ")
        );
    }
    Ok((changes, shapes, flushes, not_found))
}

/// Where the two calls go when init could not put the first one in itself.
fn by_hand_note(by_hand: &[String], feature: &str) -> String {
    format!(
        "the sampler's start was not added: {}\nAt the top of the function where the firmware \
         starts (after the stack and `.data`/`.bss` are set up), add:\n{}and before the program \
         ends (a semihosting exit, or the end of the run you want profiled):\n    \
         #[cfg(feature = \"{feature}\")]\n    sampler_rt::flush();\n\
         (`sampler_rt::exit(code)` does both the flush and the exit.)",
        by_hand.join("\n"),
        entry::call_lines(feature, "    ")
    )
}

/// What init changes in a file, as a unified diff (`--- name`, `+++ name`, hunks with three
/// lines of context); empty when nothing changes.
fn unified(name: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(name, name)
        .to_string()
}

/// `cargo sample init`.
pub fn init(args: &InitArgs) -> Result<()> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let manifest = match &args.manifest_path {
        Some(p) => cwd.join(p),
        None => cwd.join("Cargo.toml"),
    };
    if !manifest.is_file() {
        bail!(
            "no Cargo.toml at {}: run init in the firmware crate, or pass --manifest-path",
            manifest.display()
        );
    }
    let meta = MetadataCommand::new()
        .manifest_path(&manifest)
        .no_deps()
        .exec()
        .with_context(|| format!("reading the cargo metadata of {}", manifest.display()))?;
    let members = meta.workspace_packages();
    let pkg = select_package(&members, args.package.as_deref(), &manifest)?;
    let pkg_manifest = pkg.manifest_path.clone().into_std_path_buf();
    let pkg_dir = pkg_manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cwd.clone());
    let (source, explicit) = choose_source(args, &pkg_dir)?;

    let mut changes = Vec::new();
    let old_manifest = std::fs::read_to_string(&pkg_manifest)
        .with_context(|| format!("reading {}", pkg_manifest.display()))?;
    let has_dep_elsewhere = pkg.dependencies.iter().any(|d| d.name == "sampler-rt")
        && !old_manifest.contains("sampler-rt");
    if !has_dep_elsewhere {
        let mut new_manifest = edit_manifest(&old_manifest, &args.feature_name, &source, explicit)?;
        if let Some(n) = args.ring_slots {
            new_manifest = set_ring_slots(&new_manifest, n)?;
        }
        changes.push(Change {
            path: pkg_manifest.clone(),
            old: old_manifest,
            new: new_manifest,
        });
    }

    let (edits, shapes, flushes, by_hand) = entry_changes(pkg, args, &pkg_dir)?;
    changes.extend(edits);
    changes.retain(|c| c.old != c.new);
    // The dependency and the feature are written all the same: the start call is then the
    // one line left to add.
    if !by_hand.is_empty() {
        term::warn(by_hand_note(&by_hand, &args.feature_name));
    }
    if changes.is_empty() {
        if by_hand.is_empty() {
            term::status(
                "Unchanged",
                format!(
                    "`{}` is already set up for `cargo sample`: profile it with `{}`",
                    pkg.name,
                    profile_command(pkg, args, members.len() > 1, &pkg_dir)
                ),
            );
        }
        return Ok(());
    }
    for c in &changes {
        let name = c
            .path
            .strip_prefix(&cwd)
            .unwrap_or(&c.path)
            .display()
            .to_string();
        anstream::print!("{}", unified(&name, &c.old, &c.new));
    }
    if args.dry_run {
        term::note("dry run: nothing was written");
        return Ok(());
    }
    for c in &changes {
        std::fs::write(&c.path, &c.new).with_context(|| format!("writing {}", c.path.display()))?;
    }
    // The edited crate must still resolve (the dependency is found, the feature is valid).
    if let Err(e) = check_resolves(&pkg_manifest) {
        for c in &changes {
            let _ = std::fs::write(&c.path, &c.old);
        }
        bail!(
            "the edited crate does not resolve, so the files were put back as they were:\n{e}\n\
             Point init at a sampler-rt that exists here: `--sampler-rt-path DIR` or \
             `--sampler-rt-git URL`"
        );
    }
    if flushes > 0 {
        term::note(format!(
            "`sampler_rt::flush()` goes before {} (`debug::exit`): such an exit would take \
             the samples still in the ring with it",
            term::plural(flushes as u64, "semihosting exit")
        ));
    }
    if shapes.contains(&entry::Shape::RticInit) {
        term::note(
            "the sampler starts in RTIC's `#[init]`, where interrupts are masked: its first \
             sample comes when RTIC enables them",
        );
    }
    term::status(
        "Ready",
        format!(
            "`{}`: profile it with `{}`{}",
            pkg.name,
            profile_command(pkg, args, members.len() > 1, &pkg_dir),
            if by_hand.is_empty() {
                ""
            } else {
                " once the start call is in (above)"
            }
        ),
    );
    Ok(())
}

/// The `cargo sample` command that profiles what init just set up: the package in a
/// workspace, the example or binary chosen (the only binary needs no `--bin`), the features
/// an example requires, and the feature that picks RTIC's backend for the crate's target
/// when no default one does (RTIC's examples crate: `--features thumbv7-backend`).
fn profile_command(pkg: &Package, args: &InitArgs, in_workspace: bool, dir: &Path) -> String {
    let mut cmd = String::from("cargo sample --release");
    if in_workspace {
        cmd += &format!(" -p {}", pkg.name);
    }
    let bins: Vec<&str> = pkg
        .targets
        .iter()
        .filter(|t| t.kind.contains(&TargetKind::Bin))
        .map(|t| t.name.as_str())
        .collect();
    let (flag, target) = match (&args.example, &args.bin) {
        (Some(e), _) => ("--example", Some(e.as_str())),
        (None, Some(b)) if bins.len() > 1 => ("--bin", Some(b.as_str())),
        (None, None) if bins.len() > 1 => ("--bin", bins.first().copied()),
        _ => ("", None),
    };
    let mut features = Vec::new();
    if let Some(name) = target {
        cmd += &format!(" {flag} {name}");
        features = pkg
            .targets
            .iter()
            .find(|t| t.name == name && (t.is_example() || t.is_bin()))
            .map(|t| t.required_features.clone())
            .unwrap_or_default();
    }
    let triple = crate::project::config::Config::load(dir, &[])
        .ok()
        .and_then(|c| c.build_target(None).ok().flatten());
    if let Some(f) = triple.and_then(|t| backend_feature(pkg, &t))
        && !features.contains(&f)
    {
        features.push(f);
    }
    if !features.is_empty() {
        cmd += &format!(" --features {}", features.join(","));
    }
    cmd
}

/// The package's feature that turns on RTIC's backend for `triple` (one whose list names
/// `rtic/thumbv7-backend` for a thumbv7 target), when the default features turn on none.
fn backend_feature(pkg: &Package, triple: &str) -> Option<String> {
    let backend = if triple.starts_with("thumbv6m") {
        "thumbv6-backend"
    } else if triple.starts_with("thumbv7") {
        "thumbv7-backend"
    } else if triple.starts_with("thumbv8m.base") {
        "thumbv8base-backend"
    } else if triple.starts_with("thumbv8m.main") {
        "thumbv8main-backend"
    } else {
        return None;
    };
    let enables_backend = |list: &[String]| {
        list.iter().any(|e| {
            e.rsplit_once('/')
                .is_some_and(|(_, f)| f.ends_with("-backend"))
        })
    };
    let defaults = pkg
        .features
        .get("default")
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if enables_backend(defaults) {
        return None;
    }
    let mut names: Vec<&String> = pkg
        .features
        .iter()
        .filter(|(_, list)| {
            list.iter()
                .any(|e| e.rsplit_once('/').is_some_and(|(_, f)| f == backend))
        })
        .map(|(name, _)| name)
        .collect();
    names.sort();
    names.first().map(|n| (*n).clone())
}

/// `cargo metadata` with the dependency graph resolved: the new dependency must be found.
fn check_resolves(manifest: &Path) -> Result<(), String> {
    let out = crate::project::cargo_command()
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .stdout(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("starting cargo: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(err
        .trim()
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n"))
}

#[cfg(test)]
mod tests;
