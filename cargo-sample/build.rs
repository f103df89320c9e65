//! Compiles the exact-count QEMU plugin (`qemu-plugin/src/lib.rs`, std only) with the same rustc
//! for the host, so that the binary can carry it: `--truth` then needs no further install step.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let src = dir.join("qemu-plugin/src/lib.rs");
    println!("cargo::rerun-if-changed={}", src.display());
    let lib = out.join("qemu-plugin.so");
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").unwrap_or_default();
    let ok = Command::new(rustc)
        .args([
            "--edition=2024",
            "--crate-type=cdylib",
            "--crate-name=cargo_sample_exact",
        ])
        .args([
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "-C",
            "strip=debuginfo",
            "--target",
            &target,
            "-o",
        ])
        .arg(&lib)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!(
            "cargo::warning=the exact-count QEMU plugin could not be built; `cargo sample --truth` will be unavailable"
        );
        let _ = std::fs::write(&lib, b"");
    }
}
