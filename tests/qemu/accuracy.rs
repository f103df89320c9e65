//! The accuracy suite: sampled profiles of the scenarios against the exact instruction
//! counts of the same QEMU run (`--truth`), with the statistics of the binomial law.
//!
//! Nothing here compares with a hard-coded share: every expectation is the exact count.
//!
//! How a row is judged: its sample count is binomial with the exact share as probability. Rows
//! expecting 10 samples or more use the normal law (|z| < 3 sigma); rows expecting fewer use the
//! Poisson tail, which the normal law misstates there. Every table holds many rows, so the
//! per-row false-alarm rate of 3 sigma (0.27 %) is divided among the rows a test judges
//! (Bonferroni): otherwise a correct profiler would fail a few percent of all seeds.

use std::collections::BTreeMap;

use crate::support::*;
use serde_json::Value;

/// Two-sided false-alarm rate of a 3-sigma bound.
const THREE_SIGMA: f64 = 0.0027;

struct Row {
    name: String,
    samples: u64,
    exact: f64,
}

/// The rows with an exact share (sampler-rt's own code, which the exact count leaves out, has
/// none and is not judged).
fn rows(r: &Value, table: &str) -> Vec<Row> {
    let all = r[table].as_array().unwrap();
    assert!(
        all.iter().any(|row| row["exact_percent"].is_f64()),
        "no exact column: --truth missing?"
    );
    all.iter()
        .filter_map(|row| {
            Some(Row {
                name: row["name"].as_str().unwrap().to_owned(),
                samples: row["samples"].as_u64().unwrap(),
                exact: row["exact_percent"].as_f64()?,
            })
        })
        .collect()
}

fn exact_of(r: &Value, name: &str) -> f64 {
    rows(r, "functions")
        .into_iter()
        .find(|row| row.name == name)
        .map(|row| row.exact)
        .unwrap_or(0.0)
}

/// P(X <= k) and P(X >= k) for X ~ Poisson(mu).
fn poisson_tails(k: u64, mu: f64) -> (f64, f64) {
    let mut term = (-mu).exp();
    let mut below = 0.0;
    for i in 0..k {
        below += term;
        term *= mu / (i + 1) as f64;
    }
    // below = P(X < k), term = P(X = k).
    (below + term, 1.0 - below)
}

/// Two-sided probability of a count at least as far from the exact share as `samples`.
fn p_value(samples: u64, n: u64, exact_percent: f64) -> f64 {
    let p = exact_percent / 100.0;
    let mu = p * n as f64;
    if mu >= 10.0 {
        let z = (samples as f64 - mu) / (mu * (1.0 - p)).sqrt();
        erfc(z.abs() / std::f64::consts::SQRT_2)
    } else {
        let (le, ge) = poisson_tails(samples, mu);
        (2.0 * le.min(ge)).min(1.0)
    }
}

/// Complementary error function (Numerical Recipes' erfcc, relative error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let y = t
        * (-x * x - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { y } else { 2.0 - y }
}

/// Rows of a table that fall outside the (Bonferroni-shared) 3-sigma bound, described.
fn outliers(r: &Value, table: &str, rows_judged: usize) -> Vec<String> {
    let n = r["samples"].as_u64().unwrap();
    rows(r, table)
        .into_iter()
        .filter(|row| judged(row, n))
        .filter_map(|row| {
            let p = p_value(row.samples, n, row.exact);
            (p < THREE_SIGMA / rows_judged as f64).then(|| {
                format!(
                    "{}: {} of {n} samples, exact share {:.3} % (expected {:.1}), p = {p:.2e}",
                    row.name,
                    row.samples,
                    row.exact,
                    row.exact / 100.0 * n as f64
                )
            })
        })
        .collect()
}

/// Rows that could show an error: sampled at all, or expecting at least one sample.
fn judged(row: &Row, n: u64) -> bool {
    row.samples > 0 || row.exact / 100.0 * n as f64 >= 1.0
}

fn judged_rows(r: &Value, table: &str) -> usize {
    let n = r["samples"].as_u64().unwrap();
    rows(r, table).iter().filter(|row| judged(row, n)).count()
}

/// Pearson's chi-square of the function table against the exact shares, over the rows expecting
/// at least 5 samples (the rest pooled into one cell), and its degrees of freedom.
fn chi_square(r: &Value) -> (f64, usize) {
    let n = r["samples"].as_u64().unwrap() as f64;
    let (mut chi, mut cells) = (0.0, 0usize);
    let (mut rest_obs, mut rest_exp) = (0.0, 0.0);
    for row in rows(r, "functions") {
        let e = row.exact / 100.0 * n;
        let o = row.samples as f64;
        if e >= 5.0 {
            chi += (o - e).powi(2) / e;
            cells += 1;
        } else {
            rest_obs += o;
            rest_exp += e;
        }
    }
    if rest_exp >= 5.0 {
        chi += (rest_obs - rest_exp).powi(2) / rest_exp;
        cells += 1;
    }
    (chi, cells.saturating_sub(1))
}

/// Upper 0.1 % points of chi-square for 1..=6 degrees of freedom.
fn chi_square_limit(df: usize) -> f64 {
    [10.83, 13.82, 16.27, 18.47, 20.52, 22.46][df.clamp(1, 6) - 1]
}

#[test]
fn hot_loops_agrees_with_exact_counts_from_100_to_100000_samples() {
    let mut reports = Vec::new();
    for n in [100u64, 1_000, 10_000, 100_000] {
        let (r, _) = profile_in("hot-loops", &["--samples", &n.to_string(), "--truth"]);
        assert_eq!(r["samples"].as_u64(), Some(n));
        reports.push((n, r));
    }
    // Every function and every line, at every N, within the shared 3-sigma bound.
    let judged: usize = reports
        .iter()
        .map(|(_, r)| judged_rows(r, "functions") + judged_rows(r, "lines"))
        .sum();
    let mut bad = Vec::new();
    for (n, r) in &reports {
        for table in ["functions", "lines"] {
            bad.extend(
                outliers(r, table, judged)
                    .into_iter()
                    .map(|o| format!("N={n} {table}: {o}")),
            );
        }
    }
    assert!(bad.is_empty(), "outside 3 sigma:\n{}", bad.join("\n"));
    // The error shrinks like 1/sqrt(N): the normalised error (chi-square) stays at its
    // binomial size at every N instead of growing with it, as a biased profiler's does.
    for (n, r) in &reports {
        let (chi, df) = chi_square(r);
        assert!(
            chi < chi_square_limit(df),
            "N={n}: chi-square {chi:.1} with {df} degrees of freedom"
        );
    }
    let worst = |i: usize| reports[i].1["max_error_points"].as_f64().unwrap();
    assert!(
        worst(3) < worst(1) / 3.0,
        "largest error {} points at 100 000 samples, {} at 1 000",
        worst(3),
        worst(1)
    );
    // A constant-period profiler never saw `run` (0.26 % of the time): we do.
    let big = &reports[3].1;
    let run = share(big, "functions", "hot_loops::run");
    assert!(run > 0.0, "hot_loops::run never sampled");
}

#[test]
fn a_small_function_gets_its_share_over_many_seeds() {
    // hot_loops::run holds 0.26 % of the instructions: about 2.6 samples in 1 000. Over 20
    // seeds the mean count must be that share and the spread the binomial one; a sampler whose
    // phase locks to the timer's tick over-samples it (it follows each call's return).
    let (mut sum_obs, mut sum_exp, mut dispersion) = (0.0, 0.0, 0.0);
    let seeds = 20;
    for seed in 1..=seeds {
        let (r, _) = profile_in(
            "hot-loops",
            &["--samples", "1000", "--truth", "--seed", &seed.to_string()],
        );
        let exact = exact_of(&r, "hot_loops::run") / 100.0 * 1000.0;
        let obs = rows(&r, "functions")
            .into_iter()
            .find(|row| row.name == "hot_loops::run")
            .map(|row| row.samples as f64)
            .unwrap_or(0.0);
        sum_obs += obs;
        sum_exp += exact;
        dispersion += (obs - exact).powi(2) / exact;
    }
    let z = (sum_obs - sum_exp) / sum_exp.sqrt();
    assert!(
        z.abs() < 3.0,
        "run: {sum_obs} samples over {seeds} seeds, exact {sum_exp:.1} ({z:+.1} sigma)"
    );
    // Chi-square with 20 degrees of freedom: 99.8 % of it lies within 6.8 ..= 43.
    assert!(
        (6.8..=43.0).contains(&dispersion),
        "dispersion {dispersion:.1}: the counts are not binomial"
    );
}

#[test]
fn ticked_loop_lies_in_lockstep_and_is_exact_with_jitter() {
    // A constant period equal to the loop's tick (16 000 timer ticks) sees one phase only.
    let (locked, _) = profile_in(
        "ticked-loop",
        &[
            "--samples",
            "2000",
            "--period",
            "16000ticks",
            "--no-jitter",
            "--truth",
        ],
    );
    let top = &rows(&locked, "functions")[0];
    let top_share = 100.0 * top.samples as f64 / 2000.0;
    assert!(
        top_share - top.exact > 50.0,
        "lockstep should pile samples on {}: {top_share:.1} % sampled, {:.1} % exact",
        top.name,
        top.exact
    );
    assert!(
        locked["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "lockstep"),
        "{}",
        locked["diagnostics"]
    );
    assert!(locked["max_error_points"].as_f64().unwrap() > 50.0);

    let (free, _) = profile_in(
        "ticked-loop",
        &["--samples", "5000", "--period", "16000ticks", "--truth"],
    );
    let judged = judged_rows(&free, "functions");
    let bad = outliers(&free, "functions", judged);
    assert!(bad.is_empty(), "with jitter:\n{}", bad.join("\n"));
    let (chi, df) = chi_square(&free);
    assert!(chi < chi_square_limit(df), "chi-square {chi:.1}, {df} df");
}

#[test]
fn masked_interrupts_move_their_time_onto_the_instruction_after_cpsie() {
    let (r, _) = profile_in("irq-masked", &["--samples", "5000", "--truth"]);
    let n = 5000.0;
    let locked_exact = exact_of(&r, "locked");
    assert!(
        locked_exact > 20.0,
        "locked runs {locked_exact:.1} % of the instructions"
    );
    // The sampler cannot enter the masked region...
    assert!(share(&r, "functions", "locked") < 0.5);
    // ...so its time lands on irq_on, a two-instruction function, exactly as much of it as
    // the masked region (and the masking instruction) take.
    let masked = exact_of(&r, "irq_on") + locked_exact + exact_of(&r, "irq_off");
    let on = share(&r, "functions", "irq_on");
    let s = sigma_points(masked, n);
    assert!(
        (on - masked).abs() < 3.0 * s,
        "irq_on sampled {on:.2} %, masked time {masked:.2} % (sigma {s:.2})"
    );
    // Outside the masked region the profile is right.
    let a = share(&r, "functions", "hot_a");
    let ea = exact_of(&r, "hot_a");
    assert!(
        (a - ea).abs() < 3.0 * sigma_points(ea, n),
        "hot_a {a} vs {ea}"
    );
}

/// Thread mode on the process stack (as under an RTOS): the image writes PSP, so the sampler
/// finds each exception frame by EXC_RETURN instead of at the stack pointer, in every mode.
/// Read at the main stack, every sample would be a word of it: all outside the code.
#[test]
fn thread_mode_on_the_process_stack_is_sampled_where_it_runs() {
    for extra in [&[][..], &["--mode", "hist"], &["--stacks", "16"]] {
        let mut args = vec!["--samples", "3000", "--truth"];
        args.extend_from_slice(extra);
        let r = profile("process-stack", &args);
        let judged = judged_rows(&r, "functions");
        let bad = outliers(&r, "functions", judged);
        assert!(bad.is_empty(), "{extra:?}:\n{}", bad.join("\n"));
        assert!(share(&r, "functions", "hot_a") > 60.0, "{extra:?}");
        if !extra.is_empty() && extra[0] == "--stacks" {
            let unwound = r["unwinding"]["complete"].as_u64().unwrap();
            assert!(
                unwound > 2900,
                "{unwound} of 3000 stacks reached their root"
            );
        }
    }
}

#[test]
fn an_equal_priority_handler_is_invisible_and_a_more_urgent_sampler_sees_it_exactly() {
    let (equal, _) = profile_in(
        "foreign-isr",
        &["--samples", "3000", "--priority", "0x40", "--truth"],
    );
    // Invisible inside: no sample in isr_work. Its time (the handler's, isr_work included) is
    // the held-off row, within 3 sigma of the handler's exact share.
    assert!(share(&equal, "functions", "isr_work") < 0.5);
    let held = equal["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"].as_str().unwrap().starts_with("[held off"))
        .unwrap_or_else(|| panic!("{:#?}", equal["functions"]));
    let work = held["exact_percent"].as_f64().unwrap();
    assert!(
        work > 20.0,
        "the handler runs {work:.1} % of the instructions"
    );
    let n = equal["samples"].as_f64().unwrap();
    assert!(
        (held["percent"].as_f64().unwrap() - work).abs() < 3.0 * sigma_points(work, n),
        "{held}"
    );

    let (urgent, _) = profile_in("foreign-isr", &["--samples", "3000", "--truth"]);
    let judged = judged_rows(&urgent, "functions");
    let bad = outliers(&urgent, "functions", judged);
    assert!(bad.is_empty(), "more urgent sampler:\n{}", bad.join("\n"));
    assert!(share(&urgent, "functions", "isr_work") > 20.0);
}

#[test]
fn the_judge_itself_flags_a_biased_count() {
    // The statistics above must be able to fail: 10 samples where 2.65 are expected is
    // flagged, 4 is not; 710 of 1000 against 69.67 % is 0.9 sigma, 760 is 4.4.
    assert!(p_value(10, 1000, 0.265) < THREE_SIGMA);
    assert!(p_value(4, 1000, 0.265) > 0.05);
    assert!(p_value(710, 1000, 69.67) > 0.05);
    assert!(p_value(760, 1000, 69.67) < THREE_SIGMA);
    assert!((erfc(0.0) - 1.0).abs() < 1e-6 && (erfc(3.0 / 2f64.sqrt()) - 0.0027).abs() < 1e-4);
}

/// Work before the sampler starts (`late-start`: cortex-m-rt zeroes a `.bss` table and
/// `set_up` fills it, 1.9 % of the run): no sample can fall there, so `--truth` compares the
/// samples with the time after `start()` and says what it left out. Without it, `set_up` read
/// 0 samples against 1.3 % (about -12 sigma). Every address of the code that runs only before
/// `start()` (the reset handler, `set_up`) was counted before it as often as an `--exact` run of
/// the same image counts it in all.
#[test]
fn what_ran_before_the_sampler_started_is_left_out_of_the_comparison() {
    let (r, dir) = profile_in("late-start", &["--truth", "-n", "10000", "--period", "300"]);
    for f in r["functions"].as_array().unwrap() {
        if let Some(s) = f["error_sigma"].as_f64() {
            assert!(s.abs() < 3.5, "{f}");
        }
    }
    assert!(
        !kinds(&r).contains(&"disagrees-with-exact".to_owned()),
        "{:#?}",
        r["diagnostics"]
    );
    let before = r["unseen"]["before_start"].as_u64().unwrap();
    // The same image counted whole (an `--exact` build of the crate would have no sampler's
    // buffers in its `.bss`, which the reset handler zeroes).
    let image = dir.join("firmware.elf");
    let (_, whole) = profile_in(
        "late-start",
        &[
            "--elf",
            image.to_str().unwrap(),
            "--machine",
            "mps2-an385",
            "--exact",
        ],
    );
    use cargo_sample::dump::exact;
    let counts = |path: std::path::PathBuf| -> BTreeMap<u32, u64> {
        exact::parse(&std::fs::read(path).unwrap())
            .unwrap()
            .into_iter()
            .collect()
    };
    let first = counts(dir.join(exact::BEFORE_START_FILE));
    let all = counts(whole.join(exact::FILE));
    let elf = whole.join("firmware.elf");
    let sym =
        cargo_sample::image::symbolize::Symbolizer::new(&elf, &std::fs::read(&elf).unwrap(), None)
            .unwrap();
    let mut only_before = 0;
    for (&pc, &n) in &all {
        let f = sym.function_of(u64::from(pc)).unwrap_or("");
        if f == "Reset" || f == "late_start::set_up" {
            assert_eq!(first.get(&pc), Some(&n), "{f} at {pc:#x}");
            only_before += n;
        }
    }
    assert!(only_before > 50_000, "{only_before}");
    assert!(
        (only_before..only_before + 1000).contains(&before),
        "{before} instructions before start(), {only_before} in Reset and set_up"
    );
}
