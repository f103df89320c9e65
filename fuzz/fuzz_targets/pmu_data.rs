//! Fuzz target `pmu_data`: see `cargo_sample::fuzzing::pmu_data`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cargo_sample::fuzzing::pmu_data(data));
