//! Emits `cfg(armv6m)` for cores without Thumb-2 (ARMv6-M, ARMv8-M Baseline) and passes the
//! ring capacity (`SAMPLER_RT_RING_SLOTS`, default 10240) to the crate.
use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(armv6m)");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_RING_SLOTS");
    let target = env::var("TARGET").unwrap_or_default();
    if target.starts_with("thumbv6m") || target.starts_with("thumbv8m.base") {
        println!("cargo::rustc-cfg=armv6m");
    }
    let slots = env::var("SAMPLER_RT_RING_SLOTS").unwrap_or_else(|_| "10240".to_string());
    match slots.trim().parse::<u32>() {
        Ok(n) if n > 0 => println!("cargo::rustc-env=SAMPLER_RT_RING_SLOTS={n}"),
        _ => {
            println!(
                "cargo::error=SAMPLER_RT_RING_SLOTS must be a positive number of samples, got `{slots}`"
            );
        }
    }
}
