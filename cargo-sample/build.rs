//! Compiles the exact-count QEMU plugin (`plugin/exact.rs`, std only) with the same rustc
//! for the host, twice: for plugin API version 1 (QEMU 4.2 to 8.2) and for version 2 and later
//! (QEMU 9.0 on). The binary carries both, so `--truth` and `--exact` need no install step.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn build(src: &Path, lib: &Path, features: &[&str]) -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").unwrap_or_default();
    let mut cmd = Command::new(rustc);
    cmd.args([
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
    ])
    .args(["--target", &target]);
    for f in features {
        cmd.arg("--cfg").arg(format!("feature=\"{f}\""));
    }
    cmd.arg("-o").arg(lib).arg(src);
    cmd.status().is_ok_and(|s| s.success())
}

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let src = dir.join("plugin/exact.rs");
    println!("cargo::rerun-if-changed={}", src.display());
    for (name, features) in [
        ("qemu-plugin-api1.so", &[][..]),
        ("qemu-plugin-api2.so", &["api-v2"][..]),
    ] {
        let lib = out.join(name);
        if !build(&src, &lib, features) {
            println!(
                "cargo::warning=the exact-count QEMU plugin ({name}) could not be built; `--truth` and `--exact` \
                 will count through QEMU's exec log instead (exact, but much slower)"
            );
            let _ = std::fs::write(&lib, b"");
        }
    }
}
