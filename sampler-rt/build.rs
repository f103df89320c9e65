//! Emits `cfg(armv6m)` for cores without Thumb-2 (ARMv6-M, ARMv8-M Baseline) and passes the
//! ring capacity (`SAMPLER_RT_RING_SLOTS`, default 10240), the number of histogram counters
//! (`SAMPLER_RT_HIST_BINS`, a power of two, default 4096) and the ARMv8-A PMU counts' buffer
//! for debuggers (`SAMPLER_RT_PMU_OUT_BYTES`, default 4096) to the crate.
use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(armv6m)");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_RING_SLOTS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_HIST_BINS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_PMU_OUT_BYTES");
    let target = env::var("TARGET").unwrap_or_default();
    if target.starts_with("thumbv6m") || target.starts_with("thumbv8m.base") {
        println!("cargo::rustc-cfg=armv6m");
    }
    let slots = env::var("SAMPLER_RT_RING_SLOTS").unwrap_or_else(|_| "10240".to_string());
    match slots.trim().parse::<u32>() {
        Ok(n) => println!("cargo::rustc-env=SAMPLER_RT_RING_SLOTS={n}"),
        _ => println!(
            "cargo::error=SAMPLER_RT_RING_SLOTS must be a number of samples (0 for a build with bins only), got `{slots}`"
        ),
    }
    let out = env::var("SAMPLER_RT_PMU_OUT_BYTES").unwrap_or_else(|_| "4096".to_string());
    match out.trim().parse::<u32>() {
        Ok(n) if n <= 1 << 24 => println!("cargo::rustc-env=SAMPLER_RT_PMU_OUT_BYTES={n}"),
        _ => println!(
            "cargo::error=SAMPLER_RT_PMU_OUT_BYTES must be a number of bytes up to 16777216, got `{out}`"
        ),
    }
    let bins = env::var("SAMPLER_RT_HIST_BINS").unwrap_or_else(|_| "4096".to_string());
    match bins.trim().parse::<u32>() {
        Ok(n) if n == 0 || (n.is_power_of_two() && (4..=1 << 20).contains(&n)) => {
            println!("cargo::rustc-env=SAMPLER_RT_HIST_BINS={n}")
        }
        _ => println!(
            "cargo::error=SAMPLER_RT_HIST_BINS must be a power of two from 4 to 1048576 (or 0 for no bins), got `{bins}`"
        ),
    }
}
