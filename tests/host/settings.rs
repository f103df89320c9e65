//! Settings the command line gives are read once, at the edge: a malformed `--period`, `--tag`
//! or `--timer` is refused by the argument parser, with what to write instead, before any build
//! or run (nothing is compiled, no run directory is made).

use crate::support::*;

#[test]
fn malformed_settings_are_refused_before_anything_is_built() {
    let dir = scenarios();
    // A target directory of its own: other tests make runs in the shared one meanwhile.
    let own = tempfile::tempdir().unwrap();
    let target_dir = own.path().to_str().unwrap();
    for (args, says) in [
        (["--period", "10parsecs"], "unknown unit `parsecs`"),
        (["--period", "0"], "more than zero"),
        (["--tag", "task"], "use `exception`, `api`, `symbol:NAME`"),
        (["--tag", "0x20000102"], "4-byte aligned"),
        (["--timer", "tmr3"], "unknown timer `tmr3`"),
        (["--timer", "cmsdk:0x4000:x"], "`x` is not a 32-bit number"),
    ] {
        let out = cargo_sample(
            &dir,
            &[
                &[
                    "--release",
                    "--bin",
                    "hot-loops",
                    "--target-dir",
                    target_dir,
                ],
                &args[..],
            ]
            .concat(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("Compiling"),
            "{args:?} built something: {stderr}"
        );
    }
    let made: Vec<_> = std::fs::read_dir(own.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(made.is_empty(), "something was made: {made:?}");
}

/// The bash completion script completes subcommands and options when bash runs it.
#[cfg(unix)]
#[test]
fn the_bash_completion_completes_subcommands_and_options() {
    let out = cargo_sample(&scenarios(), &["completions", "bash"]);
    assert!(out.status.success());
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &out.stdout).unwrap();
    let complete = |words: &str| -> Vec<String> {
        let n = words.split(' ').count() - 1;
        let cmd = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={n}; _cargo__sample cargo-sample \"${{COMP_WORDS[{n}]}}\" \"${{COMP_WORDS[{}]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.path().display(),
            n - 1
        );
        let o = std::process::Command::new("bash")
            .args(["-c", &cmd])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(complete("cargo-sample rep"), ["report"]);
    assert!(complete("cargo-sample --sta").contains(&"--stacks".to_owned()));
    assert!(complete("cargo-sample report --form").contains(&"--format".to_owned()));
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = cargo_sample(&scenarios(), &["completions", shell]);
        assert!(out.status.success() && out.stdout.len() > 1000, "{shell}");
    }
}
