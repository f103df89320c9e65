//! The sampler's own cost, gated: every handler variant's exact instructions a sample against
//! the budget committed in `cargo-sample/data/sampler-budget.json`. QEMU counts instructions
//! exactly and the `cost` firmware runs the same workload without and with sampling, so a
//! change that makes a sample one instruction dearer fails here, in every pull request.

use serde_json::Value;

use crate::support::*;

/// Instructions a sample of the `cost` firmware (or `bin`, which prints the same line) with
/// `args`: the workload's time with sampling less its time without, in SysTick ticks turned
/// into instructions, over the samples taken.
fn per_sample(bin: &str, args: &[&str], env: &[(&str, &str)]) -> (f64, u64) {
    let mut all = vec![
        "--release",
        "--bin",
        bin,
        "--samples",
        "0",
        "--period",
        "25600ticks",
    ];
    all.extend_from_slice(args);
    let out = cargo_sample_env(&scenarios(), &all, env);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dir_of(&out.stderr);
    let printed = std::fs::read_to_string(run.join("firmware-output.txt")).unwrap();
    let line = printed
        .lines()
        .find(|l| l.starts_with("cost:"))
        .unwrap_or_else(|| panic!("no `cost:` line in {printed}"));
    let field = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let per_tick = meta["units_per_tick"].as_f64().unwrap();
    let samples = field("samples");
    assert!(samples > 1000, "{line}");
    let extra = (field("sampled_ticks") - field("base_ticks")) as f64 * per_tick;
    (extra / samples as f64, samples)
}

#[test]
fn every_sampler_variant_stays_within_its_committed_budget() {
    let file = repo().join("cargo-sample/data/sampler-budget.json");
    let budget: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut over = Vec::new();
    let mut table = String::new();
    for v in budget["variants"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let args: Vec<&str> = v["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let limit = v["budget"].as_f64().unwrap();
        let bin = v["bin"].as_str().unwrap_or("cost");
        let env: Vec<(&str, &str)> = v["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        let (cost, samples) = per_sample(bin, &args, &env);
        let verdict = if cost >= limit + 0.25 {
            over.push(format!("{name}: {cost:.2} against {limit}"));
            "OVER"
        } else if cost <= limit - 0.25 {
            "cheaper: lower the budget"
        } else {
            "ok"
        };
        table.push_str(&format!(
            "  {name:<32} {cost:>9.2} instructions a sample ({samples} samples), budget {limit}{} {verdict}\n",
            v["goal"]
                .as_f64()
                .map(|g| format!(", goal {g}"))
                .unwrap_or_default()
        ));
    }
    eprintln!("{table}");
    assert!(
        over.is_empty(),
        "over budget ({}):\n{}\n{table}",
        file.display(),
        over.join("\n")
    );
}
