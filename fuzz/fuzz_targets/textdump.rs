//! Fuzz target `textdump`: see `cargo_sample::fuzzing::textdump`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::textdump(data));
