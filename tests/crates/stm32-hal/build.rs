//! memory.x for cortex-m-rt's linker script.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    fs::copy("memory.x", out.join("memory.x")).unwrap();
    println!("cargo::rerun-if-changed=memory.x");
    println!("cargo::rustc-link-search={}", out.display());
}
