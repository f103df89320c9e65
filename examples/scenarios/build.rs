//! Puts memory.x and device.x where cortex-m-rt's link.x finds them, and links defmt-app and
//! uart-defmt with defmt's linker script.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    for f in ["memory.x", "device.x"] {
        fs::copy(f, out.join(f)).unwrap();
        println!("cargo::rerun-if-changed={f}");
    }
    println!("cargo::rustc-link-search={}", out.display());
    // defmt's section layout, for the bin that logs through it (its table must be kept).
    if env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo::rustc-link-arg-bin=defmt-app=-Tdefmt.x");
        println!("cargo::rustc-link-arg-bin=uart-defmt=-Tdefmt.x");
    }
}
