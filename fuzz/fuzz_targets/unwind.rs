//! Fuzz target `unwind`: see `cargo_sample::fuzzing::unwind`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::unwind(data));
