//! Every input of the committed fuzz corpus and every crash the fuzzers ever found, replayed
//! through the fuzz targets' code in an ordinary (debug, overflow-checked) build: none panics.

use std::path::Path;

#[test]
fn the_fuzz_corpus_and_past_crashes_replay_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut replayed = 0;
    for (name, run) in cargo_sample::fuzzing::TARGETS {
        for dir in [
            root.join("fuzz/corpus").join(name),
            root.join("tests/fuzz-regressions").join(name),
        ] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let data = std::fs::read(e.path()).unwrap();
                let outcome = std::panic::catch_unwind(|| run(&data));
                assert!(outcome.is_ok(), "{name}: {} panics", e.path().display());
                replayed += 1;
            }
        }
    }
    // The corpus is there (a checkout without it would test nothing).
    assert!(replayed > 100, "only {replayed} inputs replayed");
}
