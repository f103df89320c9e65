//! Rebuild when the linker script changes, and let the linker find it.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo::rustc-link-search={dir}");
    println!("cargo::rerun-if-changed=link.ld");
}
