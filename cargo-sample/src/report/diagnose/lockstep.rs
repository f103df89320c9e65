//! Samples in step with a periodic program: the same few addresses again and again, the
//! correlation time of the function series, the lag at which the samples repeat.

use std::collections::HashMap;

use crate::image::symbolize::Symbolizer;
use crate::report::model::Input;
use crate::report::model::{Diagnostic, Finding, OUTSIDE};

/// Samples in step with the program: the sequence repeats, or each sample says much about the
/// next. Returns whether the samples are too dependent to judge pile-ups on.
pub(crate) fn lockstep(input: &Input<'_>, sym: &mut Symbolizer, d: &mut Vec<Diagnostic>) -> bool {
    let pcs = input.pcs;
    let n = pcs.len();
    let distinct = input.per_pc.len();
    let dwt = input.facts.timer == "DWT";
    let advice = if dwt {
        "The DWT samples at a constant period and cannot jitter it: choose a `--period` out of \
         step with the loop (the DWT makes 64 or 1024 cycles times 1 to 16), or sample with \
         `--method timer`, whose period is random"
    } else if input.facts.jitter_ticks == 0 {
        "Keep the random period on (drop `--no-jitter` / `--jitter 0`)"
    } else {
        "Widen the random span (`--jitter`) or change `--period`"
    };
    if let Some(k) = repeat_lag(pcs) {
        d.push(Diagnostic::warning(
            Finding::Lockstep,
            format!(
                "the samples repeat every {k} samples ({distinct} distinct addresses in {n}): the \
                 sampling period is in step with a loop of the program, which is then seen at the \
                 same {k} points over and over while the rest of it is never sampled. {advice}"
            ),
        ));
        return true;
    }
    // Consecutive samples that depend on each other mislead only when the period can be in
    // step with a loop. With a random span at least as wide as the mean period it cannot: a
    // loop no longer than the span is met at a fresh random point by every sample, and a
    // longer one is swept in order at a random offset. What correlation remains then is the
    // program changing what it does more slowly than the sampling (phases, a slow state
    // machine), which makes the shares of this run more precise than independent samples
    // would, not less: nothing to say.
    if input.facts.timer_hz != 0
        && input.facts.jitter_ticks > 0
        && f64::from(input.facts.jitter_ticks) >= input.facts.period_ticks
    {
        return false;
    }
    // The function of each sample, for the correlation between consecutive samples.
    let mut ids: HashMap<u32, usize> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let series: Vec<usize> = pcs
        .iter()
        .take(50_000)
        .map(|&pc| {
            *ids.entry(pc).or_insert_with(|| {
                let name = sym.function_of(pc as u64).unwrap_or(OUTSIDE).to_owned();
                *by_name.entry(name.clone()).or_insert_with(|| {
                    names.push(name);
                    names.len() - 1
                })
            })
        })
        .collect();
    if let Some((tau, f)) = correlation_time(&series, names.len()) {
        let name = &names[f];
        let eff = n as f64 / tau;
        if tau >= 10.0 {
            d.push(Diagnostic::warning(
                Finding::Lockstep,
                format!(
                    "consecutive samples are strongly correlated (for {name}, one sample is worth \
                     1/{tau:.0} of an independent one: {n} samples count as about {eff:.0}): the \
                     sampling is in step with a loop of the program, or the program changes what it \
                     does far more slowly than the sampling period. Either way the shares are \
                     uncertain far beyond the intervals shown, and a loop in step is seen at too few \
                     of its points. {advice}, or sample for longer"
                ),
            ));
            return true;
        }
        if tau >= 2.0 {
            d.push(Diagnostic::note(
                Finding::Correlated,
                format!(
                    "consecutive samples are correlated (for {name}, {n} samples count as about \
                     {eff:.0} independent ones): the intervals, which assume independent samples, are \
                     too narrow by about {:.1} times. A wider random span (`--jitter`) or a longer \
                     period makes the samples independent",
                    tau.sqrt()
                ),
            ));
        }
    }
    if input.facts.jitter_ticks == 0 && input.facts.timer_hz != 0 {
        d.push(Diagnostic::note(
            Finding::ConstantPeriod,
            "constant sampling period: none of this run's samples repeat, but a program that runs \
             in step with the period would be seen at the same few points every time"
                .into(),
        ));
    }
    false
}

/// The integrated autocorrelation time of "the sample is in function f", for the function
/// (holding 5 % to 95 % of the samples) where it is largest: `(tau, f)`. Independent samples
/// give 1; `n / tau` samples are worth as much as `n` independent ones.
pub fn correlation_time(series: &[usize], functions: usize) -> Option<(f64, usize)> {
    let n = series.len();
    if n < 200 {
        return None;
    }
    let mut counts = vec![0usize; functions];
    for &f in series {
        counts[f] += 1;
    }
    let mut best: Option<(f64, usize)> = None;
    let mut order: Vec<usize> = (0..functions).collect();
    order.sort_by(|a, b| counts[*b].cmp(&counts[*a]));
    for &f in order.iter().take(4) {
        let p = counts[f] as f64 / n as f64;
        if !(0.05..=0.95).contains(&p) {
            continue;
        }
        let x: Vec<f64> = series
            .iter()
            .map(|&g| if g == f { 1.0 - p } else { -p })
            .collect();
        let var = p * (1.0 - p);
        let max_lag = (n / 5).min(2000);
        let mut tau = 1.0;
        for k in 1..=max_lag {
            let m = n - k;
            let cov: f64 = (0..m).map(|i| x[i] * x[i + k]).sum::<f64>() / m as f64;
            let rho = cov / var;
            // Sum while the correlation is clearly there (beyond the noise of 1/sqrt(n)).
            if rho < 3.0 / (n as f64).sqrt() {
                break;
            }
            tau += 2.0 * rho;
        }
        if best.is_none_or(|b| tau > b.0) {
            best = Some((tau, f));
        }
    }
    best
}

/// The smallest lag at which the sample sequence repeats itself (90 % of positions equal).
pub fn repeat_lag(pcs: &[u32]) -> Option<usize> {
    let n = pcs.len();
    if n < 64 {
        return None;
    }
    let max_lag = (n / 4).min(2048);
    for k in 1..=max_lag {
        let m = (n - k).min(4096);
        let same = (0..m).filter(|&i| pcs[i] == pcs[i + k]).count();
        if same * 10 >= m * 9 {
            return Some(k);
        }
    }
    None
}
