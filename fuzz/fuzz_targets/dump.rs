//! Fuzz target `dump`: see `cargo_sample::fuzzing::dump`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::dump(data));
