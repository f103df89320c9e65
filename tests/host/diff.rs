//! `cargo sample diff`: noise is not a change, a real change is.

use std::path::Path;

use crate::support::*;
use serde_json::Value;

fn diff(a: &Path, b: &Path) -> Value {
    let out = cargo_sample(
        &scenarios(),
        &[
            "diff",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn change<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {d}"))
}

#[test]
fn another_seed_is_no_change_and_another_program_is() {
    let (ra, a) = profile_in("hot-loops", &["--samples", "10000", "--seed", "11"]);
    let (rb, b) = profile_in("hot-loops", &["--samples", "10000", "--seed", "12"]);
    let d = diff(&a, &b);
    assert_eq!(d["different_builds"], false);
    let flagged: Vec<&Value> = d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["significant"] == true)
        .collect();
    assert!(flagged.is_empty(), "noise flagged as change: {flagged:?}");
    // The statistic is the pooled two-proportion z, computed here from the two reports.
    let k = |r: &Value| share(r, "functions", "hot_a") / 100.0 * 10_000.0;
    let (ka, kb) = (k(&ra), k(&rb));
    let pool = (ka + kb) / 20_000.0;
    let z = (kb - ka) / 10_000.0 / (pool * (1.0 - pool) * 2.0 / 10_000.0).sqrt();
    let reported = change(&d, "hot_a")["z"].as_f64().unwrap();
    assert!((reported - z).abs() < 1e-9, "{reported} vs {z}");

    // foreign-isr runs hot_a as much, and isr_work instead of hot_b and hot_c.
    let (_, c) = profile_in("foreign-isr", &["--samples", "10000"]);
    let d = diff(&a, &c);
    assert_eq!(d["different_builds"], true);
    for name in ["hot_b", "hot_c", "isr_work"] {
        assert_eq!(change(&d, name)["significant"], true, "{name}");
    }
    assert_eq!(change(&d, "hot_a")["significant"], false);
}

#[test]
fn exact_runs_differ_exactly() {
    let (_, a) = profile_in("early-exit", &["--exact"]);
    let (_, b) = profile_in("early-exit", &["--exact"]);
    let d = diff(&a, &b);
    for c in d["changes"].as_array().unwrap() {
        assert_eq!(c["change_points"], 0.0);
        assert_eq!(c["significant"], false);
        assert!(c.get("z").is_none());
    }
    // Against a sampled run of the same program, the sampled side's binomial spread is used.
    let (_, s) = profile_in("early-exit", &[]);
    let d = diff(&a, &s);
    assert!(change(&d, "hot_a")["z"].as_f64().is_some());
}
