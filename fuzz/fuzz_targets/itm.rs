//! Fuzz target `itm`: see `cargo_sample::fuzzing::itm`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::itm(data));
