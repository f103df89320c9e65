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
