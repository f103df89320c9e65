//! The guide (`docs/guide/*.md`) cannot drift from the tool: every command block in it is run
//! here as written, in the directory it names, and must succeed.
//!
//! A command block is a ```` ```sh ```` fence whose first line says where it runs:
//! `# in DIR` (a directory of the repository) or `# in a copy of DIR` (a firmware crate copied
//! first, as a user's would be). Its `cargo sample ...` lines are the commands; a `# ...` after
//! a command is a comment. Usage lines that cannot run here (a real board's chip, a debug
//! server's port) go in ```` ```text ```` fences, which are not commands.

use std::path::PathBuf;

use crate::support::*;

/// Where a block runs.
#[derive(Debug, Clone)]
enum Place {
    Repo(PathBuf),
    CopyOf(String),
}

#[derive(Debug)]
struct Block {
    page: String,
    line: usize,
    place: Place,
    commands: Vec<(usize, Vec<String>)>,
}

/// Every command block of the guide, in page order.
fn blocks() -> Vec<Block> {
    let dir = repo().join("docs/guide");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    let mut out = Vec::new();
    for page in pages {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&page).unwrap();
        let mut lines = text.lines().enumerate();
        while let Some((n, l)) = lines.next() {
            if l.trim_end() != "```sh" {
                continue;
            }
            let mut body = Vec::new();
            for (m, l) in lines.by_ref() {
                if l.starts_with("```") {
                    break;
                }
                body.push((m + 1, l.to_owned()));
            }
            let first = body.first().map(|b| b.1.as_str()).unwrap_or("");
            let place = match first.strip_prefix("# in ") {
                Some(rest) => match rest.strip_prefix("a copy of ") {
                    Some(krate) => Place::CopyOf(krate.trim().to_owned()),
                    None => Place::Repo(repo().join(rest.trim())),
                },
                None => panic!(
                    "{name}:{}: a command block starts with `# in DIR` (where it runs), not {first:?}",
                    n + 1
                ),
            };
            let commands = body
                .iter()
                .skip(1)
                .filter_map(|(m, l)| {
                    let cmd = l.strip_prefix("cargo sample ")?;
                    let cmd = cmd.split(" #").next().unwrap_or(cmd);
                    Some((*m, cmd.split_whitespace().map(str::to_owned).collect()))
                })
                .collect();
            out.push(Block {
                page: name.clone(),
                line: n + 1,
                place,
                commands,
            });
        }
    }
    out
}

#[test]
fn every_command_block_of_the_guide_says_where_it_runs() {
    let blocks = blocks();
    assert!(blocks.len() >= 8, "{blocks:?}");
    for b in &blocks {
        assert!(
            !b.commands.is_empty(),
            "{}:{}: a command block without a `cargo sample` command",
            b.page,
            b.line
        );
        match &b.place {
            Place::Repo(d) => assert!(d.is_dir(), "{}:{}: no {}", b.page, b.line, d.display()),
            Place::CopyOf(k) => assert!(repo().join(k).join("Cargo.toml").is_file(), "{k}"),
        }
    }
}

#[test]
fn every_command_of_the_guide_runs_as_written() {
    let mut ran = 0;
    for b in blocks() {
        // A copied crate lives as long as its block: its commands build on each other.
        let copy = match &b.place {
            Place::CopyOf(k) => Some(copy_crate(k)),
            Place::Repo(_) => None,
        };
        let dir = match (&b.place, &copy) {
            (Place::Repo(d), _) => d.clone(),
            (_, Some(c)) => c.path().to_path_buf(),
            _ => unreachable!(),
        };
        for (line, args) in &b.commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // `--open` hands the page to `$BROWSER`: here, a program that does nothing. The
            // repository's crates build into a target directory of the guide's own, so that
            // `latest` is the run the page made before, not another test's.
            let own = target_dir_of(&repo()).join("guide");
            let env = [
                ("BROWSER", "true"),
                ("CARGO_TARGET_DIR", own.to_str().unwrap()),
            ];
            let out = match copy {
                Some(_) => cargo_sample_in_copy(&dir, &args, &env[..1]),
                None => cargo_sample_env(&dir, &args, &env),
            };
            assert!(
                out.status.success(),
                "{}:{line}: `cargo sample {}` in {} failed:\n{}",
                b.page,
                args.join(" "),
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 15, "only {ran} commands in the guide");
}
