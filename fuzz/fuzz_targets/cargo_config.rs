//! Fuzz target `cargo_config`: see `cargo_sample::fuzzing::cargo_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::cargo_config(data));
