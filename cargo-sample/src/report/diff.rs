//! `cargo sample diff A B`: did the change matter? Per function, the share before and after,
//! the change in points, and a test of whether it is more than sampling noise.
//!
//! Two sampled runs are compared with the two-proportion z test (pooled variance); a sampled
//! run against an exact one with the binomial law at the exact share; two exact runs need no
//! test. Many functions are compared at once, so the significance level is shared among them
//! (Holm's step-down): a run compared with itself under another seed shows no change.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::Report;

/// One function compared.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change {
    pub name: String,
    pub before_percent: f64,
    pub after_percent: f64,
    /// After minus before, in percentage points.
    pub change_points: f64,
    /// The test statistic (none when both runs are exact).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub z: Option<f64>,
    /// Two-sided p-value (0 or 1 when both runs are exact).
    pub p_value: f64,
    /// Significant at 5 % for the whole table (Holm).
    pub significant: bool,
}

/// Both sides and the changes, largest first.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub before: Side,
    pub after: Side,
    pub changes: Vec<Change>,
    /// Whether the two runs ran different code (the comparison is then by function name).
    pub different_builds: bool,
}

/// What a side of the comparison is.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub run: String,
    pub firmware: String,
    pub mode: crate::runs::Mode,
    /// Samples, or instructions of an exact run.
    pub count: u64,
}

/// Standard normal upper tail, `P(Z > z)`.
pub fn normal_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Abramowitz and Stegun 7.1.26 is too coarse in the tails;
/// this is the Chebyshev fit of Numerical Recipes, relative error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

fn shares(r: &Report) -> (BTreeMap<String, u64>, u64, bool) {
    let exact = r.mode == crate::runs::Mode::Exact;
    let total = if exact {
        r.instructions.unwrap_or(0)
    } else {
        r.samples.unwrap_or(0)
    };
    let m = r
        .functions
        .iter()
        .filter(|row| row.count > 0)
        .map(|row| (row.name.clone(), row.count))
        .collect();
    (m, total, exact)
}

/// Compare two reports.
pub fn compare(
    before: &Report,
    after: &Report,
    names: (&str, &str),
    different_builds: bool,
) -> Diff {
    let (a, na, a_exact) = shares(before);
    let (b, nb, b_exact) = shares(after);
    let mut changes: Vec<Change> = Vec::new();
    let names_all: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for name in names_all {
        let ka = a.get(name).copied().unwrap_or(0) as f64;
        let kb = b.get(name).copied().unwrap_or(0) as f64;
        let pa = ka / na.max(1) as f64;
        let pb = kb / nb.max(1) as f64;
        let (z, p) = match (a_exact, b_exact) {
            (true, true) => (None, if pa == pb { 1.0 } else { 0.0 }),
            (false, false) => {
                let pool = (ka + kb) / (na + nb).max(1) as f64;
                let se = (pool * (1.0 - pool) * (1.0 / na.max(1) as f64 + 1.0 / nb.max(1) as f64))
                    .sqrt();
                z_and_p(pb - pa, se)
            }
            // One side is exact: the binomial spread of the sampled side at the exact share.
            (true, false) => z_and_p(pb - pa, (pa * (1.0 - pa) / nb.max(1) as f64).sqrt()),
            (false, true) => z_and_p(pb - pa, (pb * (1.0 - pb) / na.max(1) as f64).sqrt()),
        };
        changes.push(Change {
            name: name.clone(),
            before_percent: 100.0 * pa,
            after_percent: 100.0 * pb,
            change_points: 100.0 * (pb - pa),
            z,
            p_value: p,
            significant: false,
        });
    }
    // Holm: sort by p, compare the k-th smallest with alpha / (m - k).
    let mut order: Vec<usize> = (0..changes.len()).collect();
    order.sort_by(|&i, &j| changes[i].p_value.total_cmp(&changes[j].p_value));
    let m = changes.len();
    for (k, &i) in order.iter().enumerate() {
        if changes[i].p_value <= 0.05 / (m - k) as f64 {
            changes[i].significant = true;
        } else {
            break;
        }
    }
    changes.sort_by(|x, y| {
        y.change_points
            .abs()
            .total_cmp(&x.change_points.abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    let side = |r: &Report, run: &str, count: u64| Side {
        run: run.to_owned(),
        firmware: r.facts_firmware(),
        mode: r.mode,
        count,
    };
    Diff {
        before: side(before, names.0, na),
        after: side(after, names.1, nb),
        changes,
        different_builds,
    }
}

fn z_and_p(diff: f64, se: f64) -> (Option<f64>, f64) {
    if se <= 0.0 {
        return (None, if diff == 0.0 { 1.0 } else { 0.0 });
    }
    let z = diff / se;
    (Some(z), (2.0 * normal_tail(z.abs())).min(1.0))
}

/// The comparison as text.
pub fn text(d: &Diff, top: usize) -> String {
    use crate::term::paint;
    use std::fmt::Write;
    let mut s = String::new();
    let unit = |side: &Side| {
        if side.mode == crate::runs::Mode::Exact {
            "instructions"
        } else {
            "samples"
        }
    };
    let _ = writeln!(
        s,
        "{} {} ({}, {} {}) → {} ({}, {} {})",
        paint("1", "Change from"),
        d.before.run,
        d.before.firmware,
        d.before.count,
        unit(&d.before),
        d.after.run,
        d.after.firmware,
        d.after.count,
        unit(&d.after)
    );
    if d.different_builds {
        let _ = writeln!(
            s,
            "the two runs ran different builds: functions are matched by name"
        );
    }
    let _ = writeln!(
        s,
        "\n{}",
        paint(
            "1",
            &format!(
                "{:>8} {:>8} {:>9} {:>7}   function",
                "before", "after", "change", "z"
            )
        )
    );
    let mut shown = 0;
    for c in &d.changes {
        if top != 0 && shown >= top {
            break;
        }
        if c.before_percent < 0.005 && c.after_percent < 0.005 {
            continue;
        }
        shown += 1;
        let z =
            c.z.map(|z| format!("{z:>+7.1}"))
                .unwrap_or_else(|| format!("{:>7}", "exact"));
        let row = format!(
            "{:>7.2}% {:>7.2}% {:>+8.2}p {z}{} {}",
            c.before_percent,
            c.after_percent,
            c.change_points,
            if c.significant { " *" } else { "  " },
            c.name
        );
        let _ = writeln!(
            s,
            "{}",
            if c.significant {
                paint("1", &row)
            } else {
                paint("2", &row)
            }
        );
    }
    let n = d.changes.iter().filter(|c| c.significant).count();
    let _ = writeln!(
        s,
        "\n{}",
        if n == 0 {
            "no change is larger than sampling noise (5 %, shared among all functions)".to_owned()
        } else {
            format!(
                "* {n} significant change{} (5 %, shared among all functions)",
                if n == 1 { "" } else { "s" }
            )
        }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_match_tables() {
        assert!((normal_tail(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_tail(1.959_964) - 0.025).abs() < 1e-6);
        assert!((normal_tail(3.0) - 0.001_349_9).abs() < 1e-6);
    }
}
