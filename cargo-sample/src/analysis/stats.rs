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

/// P(X <= k) for X ~ Binomial(n, p).
pub fn binomial_at_most(k: u64, n: u64, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    binomial_at_least(n - k, n, 1.0 - p)
}

/// The standard normal quantile: x with Φ(x) = q, for 0 < q < 1 (a rational approximation
/// in three regions, relative error below 1.2e-9; one Newton step on `erfc` would add
/// nothing a report prints).
pub fn normal_quantile(q: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    if q <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if q >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |t: f64| {
        let r = (-2.0 * t.ln()).sqrt();
        (((((C[0] * r + C[1]) * r + C[2]) * r + C[3]) * r + C[4]) * r + C[5])
            / ((((D[0] * r + D[1]) * r + D[2]) * r + D[3]) * r + 1.0)
    };
    if q < 0.024_25 {
        tail(q)
    } else if q > 1.0 - 0.024_25 {
        -tail(1.0 - q)
    } else {
        let x = q - 0.5;
        let r = x * x;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * x
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// How far `k` samples of `n` lie from a true share `p`, in standard deviations: the normal
/// deviate with the same tail probability as the binomial's (mid-p: half the probability of
/// exactly `k` counts as beyond), signed like `k - n p`. Where counts are large this is
/// `(k / n - p) / sqrt(p (1 - p) / n)`; where they are small it stays honest (one sample of
/// a share expected at 0.01 samples is a 1 % event, about 2.3 sigma, not the 10 the normal
/// approximation gives). Infinite when `p` makes `k` impossible.
pub fn binomial_z(k: u64, n: u64, p: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let expected = n as f64 * p;
    // P(X = k) from its logarithm: the difference of two tails loses it to rounding once it
    // is below 1e-16 of them (no sample where 300 were expected read as impossible).
    let ln_exactly = |k: u64| {
        if p <= 0.0 || p >= 1.0 {
            return if (p <= 0.0 && k == 0) || (p >= 1.0 && k == n) {
                0.0
            } else {
                f64::NEG_INFINITY
            };
        }
        let (kf, nf) = (k as f64, n as f64);
        ln_gamma(nf + 1.0) - ln_gamma(kf + 1.0) - ln_gamma(nf - kf + 1.0)
            + kf * p.ln()
            + (nf - kf) * (1.0 - p).ln()
    };
    let (further, sign) = if (k as f64) > expected {
        (binomial_at_least(k + 1, n, p), 1.0)
    } else if (k as f64) < expected {
        (
            k.checked_sub(1).map_or(0.0, |j| binomial_at_most(j, n, p)),
            -1.0,
        )
    } else {
        return 0.0;
    };
    let ln_half_exactly = ln_exactly(k) + 0.5f64.ln();
    let beyond = further + ln_half_exactly.exp();
    if beyond > 1e-300 {
        return -sign * normal_quantile(beyond.min(0.5));
    }
    // Beyond what a double holds: the deviate from the tail's logarithm (the tail is then
    // P(X = k)'s half; the normal tail is about φ(z)/z).
    let ln_tail = if further > 0.0 {
        further.ln().max(ln_half_exactly)
    } else {
        ln_half_exactly
    };
    if !ln_tail.is_finite() {
        return sign * f64::INFINITY;
    }
    sign * normal_deviate_of_ln_tail(ln_tail)
}

/// The z > 0 whose upper normal tail has logarithm `ln_tail` (far below 1e-300): the inverse
/// of ln Q(z) ≈ -z²/2 - ln z - ln √(2π), by a few Newton steps from z = √(-2 ln_tail).
fn normal_deviate_of_ln_tail(ln_tail: f64) -> f64 {
    let half_ln_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
    let mut z = (-2.0 * ln_tail).sqrt();
    for _ in 0..8 {
        let f = -0.5 * z * z - z.ln() - half_ln_2pi - ln_tail;
        let slope = -z - 1.0 / z;
        z -= f / slope;
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_deviates_match_the_normal_where_counts_are_large_and_stay_honest_where_small() {
        // Large counts: close to (k/n - p) / sd (at 4 sigma the binomial's skew shows).
        for (k, n, p, within) in [
            (1575u64, 30_000u64, 0.05f64, 0.03),
            (1425, 30_000, 0.05, 0.03),
            (1650, 30_000, 0.05, 0.1),
            (1350, 30_000, 0.05, 0.1),
            (520, 1000, 0.5, 0.03),
        ] {
            let normal = (k as f64 / n as f64 - p) / (p * (1.0 - p) / n as f64).sqrt();
            let z = binomial_z(k, n, p);
            assert!(
                (z - normal).abs() < within,
                "{k}/{n} at {p}: {z} vs {normal}"
            );
        }
        // One sample where 0.01 were expected: P(X >= 1) = 1 - e^-0.01 (about 1 %), half of
        // P(X = 1) counted: about 2.6 sigma, not (1/n - p)/sd = 10.
        let z = binomial_z(1, 30_000, 0.01 / 30_000.0);
        assert!(z > 2.3 && z < 2.8, "{z}");
        // None where 25 were expected: far below.
        assert!(binomial_z(0, 30_000, 25.0 / 30_000.0) < -6.0);
        // None where 300 were expected: far below, and a number (a tail of 1e-131, which the
        // difference of two tails reads as 0).
        let z = binomial_z(0, 29_643, 0.0101);
        assert!(z.is_finite() && z < -20.0 && z > -30.0, "{z}");
        // Beyond a double: 0 of 10^6 at 5 % (a tail of 10^-22000) still a number.
        let z = binomial_z(0, 1_000_000, 0.05);
        assert!(z.is_finite() && z < -200.0, "{z}");
        // The log-space deviate agrees with the quantile where both hold.
        assert!((normal_deviate_of_ln_tail(1e-100f64.ln()) + normal_quantile(1e-100)).abs() < 0.01);
        assert_eq!(binomial_z(3, 100, 0.0), f64::INFINITY);
        assert_eq!(binomial_z(50, 100, 0.5), 0.0);
        // The quantile is the inverse of the normal table.
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-6);
        assert!((normal_quantile(0.00135) + 3.0).abs() < 1e-3);
        assert!((normal_quantile(1e-9) + 5.997_807).abs() < 1e-4);
    }

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
