//! Let the linker find the kernel's script, and rebuild when it changes.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo::rustc-link-search={dir}");
    println!("cargo::rerun-if-changed=kernel.ld");
}
