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

#[cfg(test)]
mod tests {
    use super::*;

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
