//! `cargo sample diff`: noise is not a change, a real change is.

use std::path::Path;

use crate::support::*;
use serde_json::Value;

/// `cargo sample diff A B --format FORMAT`'s output.
fn diff_as(a: &Path, b: &Path, format: &str) -> Vec<u8> {
    let out = cargo_sample(
        &scenarios(),
        &[
            "diff",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--format",
            format,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn diff(a: &Path, b: &Path) -> Value {
    serde_json::from_slice(&diff_as(a, b, "json")).unwrap()
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

fn diff_svg(a: &Path, b: &Path) -> String {
    String::from_utf8(diff_as(a, b, "svg")).unwrap()
}

#[test]
fn the_differential_flamegraph_is_red_where_a_share_grew_and_neutral_where_nothing_changed() {
    // The same program counted exactly twice: no frame changed.
    let (_, a) = profile_in("early-exit", &["--exact"]);
    let (_, b) = profile_in("early-exit", &["--exact"]);
    let same = svg_frames(&diff_svg(&a, &b));
    assert!(same.len() > 3);
    for (name, fill) in &same {
        assert_eq!(fill, "rgb(250,250,250)", "{name}");
    }
    // `cost` spends all its time in hot_a, hot-loops 70 %: hot_a grew, drawn red.
    let (_, h) = profile_in("hot-loops", &["--samples", "5000"]);
    let (_, c) = profile_in("cost", &["--samples", "5000"]);
    let grown = svg_frames(&diff_svg(&h, &c));
    let (_, fill) = grown
        .iter()
        .find(|(n, _)| n == "hot_a")
        .unwrap_or_else(|| panic!("no hot_a in {grown:?}"));
    let rgb: Vec<u32> = fill
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(rgb[0] == 255 && rgb[1] == rgb[2] && rgb[1] < 240, "{fill}");
}
