//! The statistics of sampled shares.
//!
//! With a random sampling period the samples are independent draws, so the count of a
//! function with true share `p` among `n` samples is binomial: its standard deviation is
//! `sqrt(p (1 - p) / n)`. Intervals are Wilson score intervals, which stay inside [0, 1] and
//! behave at small counts where the normal approximation does not.

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Wilson score interval of `k` successes in `n` trials, as fractions.
pub fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = k as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The false-alarm rate a diagnostic allows over all it tests on one run: that of a
/// two-sided 3-sigma bound, shared among the tests (Bonferroni).
pub const FALSE_ALARM: f64 = 0.0027;

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, 9 terms: about 15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(π x).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = G[1..]
        .iter()
        .enumerate()
        .fold(G[0], |a, (i, g)| a + g / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// P(X >= k) for X ~ Binomial(n, p).
pub fn binomial_at_least(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let (kf, nf) = (k as f64, n as f64);
    let ln_pmf = ln_gamma(nf + 1.0) - ln_gamma(kf + 1.0) - ln_gamma(nf - kf + 1.0)
        + kf * p.ln()
        + (nf - kf) * (1.0 - p).ln();
    // Sum the upper terms from k on, each from the one before.
    let ratio = p / (1.0 - p);
    let (mut term, mut sum) = (ln_pmf.exp(), 0.0);
    let mut i = k;
    while i <= n {
        sum += term;
        if term <= sum * 1e-17 && i as f64 > nf * p {
            break;
        }
        term *= (n - i) as f64 / (i + 1) as f64 * ratio;
        i += 1;
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tails_match_exact_sums() {
        // 12 or more of 14 fair draws: (91 + 14 + 1) / 2^14.
        let p = binomial_at_least(12, 14, 0.5);
        assert!((p - 106.0 / 16384.0).abs() < 1e-12, "{p}");
        assert_eq!(binomial_at_least(0, 10, 0.3), 1.0);
        assert_eq!(binomial_at_least(11, 10, 0.3), 0.0);
        // Half or more of 1000 fair draws: 0.5 plus half the middle term.
        let mid = (ln_gamma(1001.0) - 2.0 * ln_gamma(501.0) - 1000.0 * 2f64.ln()).exp();
        let p = binomial_at_least(500, 1000, 0.5);
        assert!((p - (0.5 + mid / 2.0)).abs() < 1e-10, "{p}");
        // ln Γ at integers is ln((n - 1)!).
        assert!((ln_gamma(11.0) - 3_628_800f64.ln()).abs() < 1e-10);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        // Far tails stay positive and tiny rather than underflow to nonsense.
        let far = binomial_at_least(500, 505, 0.8);
        assert!(far > 0.0 && far < 1e-30, "{far}");
    }

    #[test]
    fn wilson_matches_reference_values() {
        // 70 of 100: the textbook interval is [0.6041, 0.7810].
        let (lo, hi) = wilson(70, 100, Z95);
        assert!((lo - 0.6041).abs() < 1e-4, "{lo}");
        assert!((hi - 0.7810).abs() < 1e-4, "{hi}");
        let (lo, hi) = wilson(0, 50, Z95);
        assert!(lo.abs() < 1e-12, "{lo}");
        assert!(hi > 0.05 && hi < 0.08);
        assert_eq!(wilson(5, 0, Z95), (0.0, 1.0));
    }
}
