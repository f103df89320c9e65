//! Emits `cfg(armv6m)` for cores without Thumb-2 (ARMv6-M, ARMv8-M Baseline) and passes the
//! ring capacity (`SAMPLER_RT_RING_SLOTS`, default 10240), the number of histogram counters
//! (`SAMPLER_RT_HIST_BINS`, a power of two, default 4096) and the ARMv8-A PMU counts' buffer
//! for debuggers (`SAMPLER_RT_PMU_OUT_BYTES`, default 4096) and the laps kept in order for the
//! timeline (`SAMPLER_RT_LAP_TRACE`, default 256, 12 bytes each) and the ARMv8-A PMU region laps
//! kept for it (`SAMPLER_RT_PMU_TRACE_WORDS`, default 2048) and the Embassy tasks the `embassy`
//! feature keeps statistics of (`SAMPLER_RT_TASKS`, a power of two, default 8) and the newest
//! polls it keeps in order (`SAMPLER_RT_TASK_TRACE`, default 256, 12 bytes each) and the hook
//! events it holds until an executor idles (`SAMPLER_RT_TASK_EVENTS`, a power of two, default 64,
//! 16 bytes each) to the crate.
use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(armv6m)");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_RING_SLOTS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_HIST_BINS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_PMU_OUT_BYTES");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_LAP_TRACE");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_TASKS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_TASK_TRACE");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_TASK_EVENTS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_PMU_TRACE_WORDS");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_TIMER_VECTOR");
    println!("cargo::rerun-if-env-changed=SAMPLER_RT_TIMER_ACK");
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
    let trace = env::var("SAMPLER_RT_LAP_TRACE").unwrap_or_else(|_| "256".to_string());
    match trace.trim().parse::<u32>() {
        Ok(n) if n <= 1 << 16 => println!("cargo::rustc-env=SAMPLER_RT_LAP_TRACE={n}"),
        _ => println!(
            "cargo::error=SAMPLER_RT_LAP_TRACE must be a number of laps up to 65536 (0 for none), got `{trace}`"
        ),
    }
    let tasks = env::var("SAMPLER_RT_TASKS").unwrap_or_else(|_| "8".to_string());
    match tasks.trim().parse::<u32>() {
        Ok(n) if n.is_power_of_two() && n <= 256 => {
            println!("cargo::rustc-env=SAMPLER_RT_TASKS={n}")
        }
        _ => println!(
            "cargo::error=SAMPLER_RT_TASKS must be a power of two from 1 to 256 (the Embassy tasks whose statistics are kept), got `{tasks}`"
        ),
    }
    let polls = env::var("SAMPLER_RT_TASK_TRACE").unwrap_or_else(|_| "256".to_string());
    match polls.trim().parse::<u32>() {
        Ok(n) if n <= 1 << 16 => println!("cargo::rustc-env=SAMPLER_RT_TASK_TRACE={n}"),
        _ => println!(
            "cargo::error=SAMPLER_RT_TASK_TRACE must be a number of polls up to 65536 (0 for none), got `{polls}`"
        ),
    }
    let events = env::var("SAMPLER_RT_TASK_EVENTS").unwrap_or_else(|_| "64".to_string());
    match events.trim().parse::<u32>() {
        Ok(n) if n.is_power_of_two() && (4..=4096).contains(&n) => {
            println!("cargo::rustc-env=SAMPLER_RT_TASK_EVENTS={n}")
        }
        _ => println!(
            "cargo::error=SAMPLER_RT_TASK_EVENTS must be a power of two from 4 to 4096 (the Embassy hook events held until the executor idles, 16 bytes each), got `{events}`"
        ),
    }
    let words = env::var("SAMPLER_RT_PMU_TRACE_WORDS").unwrap_or_else(|_| "2048".to_string());
    match words.trim().parse::<u32>() {
        Ok(n) if n <= 1 << 20 => println!("cargo::rustc-env=SAMPLER_RT_PMU_TRACE_WORDS={n}"),
        _ => println!(
            "cargo::error=SAMPLER_RT_PMU_TRACE_WORDS must be a number of words up to 1048576 (0 for none), got `{words}`"
        ),
    }
    let out = env::var("SAMPLER_RT_PMU_OUT_BYTES").unwrap_or_else(|_| "4096".to_string());
    match out.trim().parse::<u32>() {
        Ok(n) if n <= 1 << 24 => println!("cargo::rustc-env=SAMPLER_RT_PMU_OUT_BYTES={n}"),
        _ => println!(
            "cargo::error=SAMPLER_RT_PMU_OUT_BYTES must be a number of bytes up to 16777216, got `{out}`"
        ),
    }
    // A device timer's interrupt handler, built in when cargo-sample paces the sampler with a
    // timer other than SysTick: `SAMPLER_RT_TIMER_VECTOR` names the vector as the device crate
    // spells it, `SAMPLER_RT_TIMER_ACK` is the value that acknowledges the interrupt.
    let vector = env::var("SAMPLER_RT_TIMER_VECTOR").unwrap_or_default();
    let ack = env::var("SAMPLER_RT_TIMER_ACK").unwrap_or_else(|_| "1".to_string());
    let mut handler = String::new();
    println!("cargo::rustc-check-cfg=cfg(sampler_rt_device_timer)");
    if !vector.trim().is_empty() {
        // SysTick is left to the application; `none` builds no handler at all.
        println!("cargo::rustc-cfg=sampler_rt_device_timer");
    }
    if !vector.trim().is_empty() && vector.trim() != "none" {
        let name = vector.trim();
        let ident = !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match ack.trim().parse::<u8>() {
            Ok(a) if ident => {
                handler = format!(
                    "#[cfg(not(target_arch = \"aarch64\"))]\ncrate::timer_interrupt!({name}, ack = {a});\n"
                )
            }
            _ => println!(
                "cargo::error=SAMPLER_RT_TIMER_VECTOR must name an interrupt (got `{name}`) and SAMPLER_RT_TIMER_ACK be a byte (got `{ack}`)"
            ),
        }
    }
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(std::path::Path::new(&out).join("timer_vector.rs"), handler)
        .expect("writing timer_vector.rs");

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
