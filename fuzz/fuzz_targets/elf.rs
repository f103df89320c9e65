//! Fuzz target `elf`: see `cargo_sample::fuzzing::elf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::elf(data));
