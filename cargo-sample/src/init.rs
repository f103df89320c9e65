//! `cargo sample init`: set up an existing firmware crate for sampling, showing what changes.
//! The snippets it writes are the ones in `templates/`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toml_edit::{DocumentMut, InlineTable, Item, Value};

use crate::cli::InitArgs;
use crate::term;

/// The line added at the top of `main`, behind the feature.
pub fn start_call(feature: &str) -> String {
    format!("    #[cfg(feature = \"{feature}\")]\n    sampler_rt::start();\n")
}

/// Add the optional dependency and the feature to a manifest's text.
pub fn edit_manifest(text: &str, feature: &str, rt_path: Option<&Path>) -> Result<String> {
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
    if deps.get("sampler-rt").is_none() {
        let mut t = InlineTable::new();
        match rt_path {
            Some(p) => {
                t.insert("path", Value::from(p.to_string_lossy().into_owned()));
            }
            None => {
                t.insert("version", Value::from("0.1"));
            }
        }
        t.insert("optional", Value::from(true));
        deps.insert("sampler-rt", Item::Value(Value::InlineTable(t)));
    }
    let features = doc
        .entry("features")
        .or_insert(Item::Table(Default::default()))
        .as_table_like_mut()
        .context("[features] is not a table")?;
    if features.get(feature).is_none() {
        let mut a = toml_edit::Array::new();
        a.push("dep:sampler-rt");
        features.insert(feature, Item::Value(Value::Array(a)));
    }
    Ok(doc.to_string())
}

/// Insert the start call as the first statement of `fn main`.
pub fn edit_main(src: &str, feature: &str) -> Result<String> {
    if src.contains("sampler_rt::start()") {
        return Ok(src.to_owned());
    }
    let at = src.find("fn main(").context(
        "no `fn main(` in the source; pass `--main FILE` with the file of your entry point",
    )?;
    let brace = src[at..]
        .find('{')
        .map(|i| at + i + 1)
        .context("`fn main` has no body")?;
    let line_end = src[brace..]
        .find('\n')
        .map(|i| brace + i + 1)
        .unwrap_or(src.len());
    let mut out = String::with_capacity(src.len() + 64);
    out.push_str(&src[..line_end]);
    out.push_str(&start_call(feature));
    out.push_str(&src[line_end..]);
    Ok(out)
}

/// A minimal line diff: lines that differ, with `-`/`+`, for showing the change.
pub fn diff(name: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Longest common subsequence; files here are small.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = format!("--- {name}\n+++ {name}\n");
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

fn main_file(dir: &Path, explicit: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.clone());
    }
    let main = dir.join("src/main.rs");
    if main.is_file() {
        return Ok(main);
    }
    bail!(
        "no src/main.rs in {}: pass `--main FILE` with the file that has your `#[entry] fn main`",
        dir.display()
    )
}

/// `cargo sample init`.
pub fn init(args: &InitArgs) -> Result<()> {
    let manifest = match &args.manifest_path {
        Some(p) => p.clone(),
        None => std::env::current_dir()?.join("Cargo.toml"),
    };
    let dir = manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let old_manifest = std::fs::read_to_string(&manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let new_manifest = edit_manifest(
        &old_manifest,
        &args.feature_name,
        args.sampler_rt_path.as_deref(),
    )?;
    let main = main_file(&dir, args.main.as_ref())?;
    let old_main =
        std::fs::read_to_string(&main).with_context(|| format!("reading {}", main.display()))?;
    let new_main = edit_main(&old_main, &args.feature_name)?;
    if old_manifest == new_manifest && old_main == new_main {
        term::status(
            "Unchanged",
            "the crate is already set up for `cargo sample`",
        );
        return Ok(());
    }
    for (path, old, new) in [
        (&manifest, &old_manifest, &new_manifest),
        (&main, &old_main, &new_main),
    ] {
        if old != new {
            print!("{}", diff(&path.display().to_string(), old, new));
            if !args.dry_run {
                std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))?;
            }
        }
    }
    if args.dry_run {
        term::note("dry run: nothing was written");
    } else {
        term::status("Ready", "profile with `cargo sample --release`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[package]\nname = \"app\" # keep me\nversion = \"0.1.0\"\n\n[dependencies]\ncortex-m-rt = \"0.7\"\n";
    const MAIN: &str = "#[entry]\nfn main() -> ! {\n    let x = 1;\n    loop {}\n}\n";

    #[test]
    fn manifest_gains_dependency_and_feature_and_keeps_comments() {
        let out = edit_manifest(MANIFEST, "sample", None).unwrap();
        assert!(out.contains("# keep me"));
        let doc: toml::Table = out.parse().unwrap();
        assert_eq!(
            doc["dependencies"]["sampler-rt"]["optional"].as_bool(),
            Some(true)
        );
        assert_eq!(
            doc["features"]["sample"][0].as_str(),
            Some("dep:sampler-rt")
        );
        assert_eq!(
            edit_manifest(&out, "sample", None).unwrap(),
            out,
            "not idempotent"
        );
        assert!(edit_manifest("[workspace]\n", "sample", None).is_err());
    }

    #[test]
    fn main_gets_the_call_first_and_once() {
        let out = edit_main(MAIN, "sample").unwrap();
        assert!(out.starts_with("#[entry]\nfn main() -> ! {\n    #[cfg(feature = \"sample\")]\n    sampler_rt::start();\n    let x = 1;"));
        assert_eq!(edit_main(&out, "sample").unwrap(), out);
        assert!(edit_main("fn other() {}", "sample").is_err());
    }

    #[test]
    fn diff_shows_added_lines() {
        let d = diff("f", "a\nb\n", "a\nx\nb\n");
        assert!(d.contains("+x\n") && !d.contains("-a") && !d.contains("-b"));
    }
}
