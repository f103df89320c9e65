//! Diagnostics: the report says when it would lie, and what to do about it.
//!
//! A sampled profile goes wrong in known ways. Samples in lockstep with a periodic program see a
//! few points of it over and over. An interrupt that cannot be taken at once (interrupts masked,
//! a handler of the sampler's priority or more urgent running, the core asleep) is taken on the
//! first instruction after the obstacle, which then collects the time of the code it could not
//! see. Code outside the image cannot be named. Too few samples cannot tell close shares apart.
//!
//! Pile-ups are found without the ground truth: in straight-line code every instruction runs as
//! often as the one before it, so a sampled instruction holding many times the samples of its
//! predecessor (which is no branch, and it no branch target) collected time that was not its own.
//! What stands before it tells why.

use std::collections::{HashMap, HashSet};

use super::model::{Diagnostic, Facts, Finding, OUTSIDE, Row};
use crate::analysis::stats::Z95;
use crate::image::disasm::{Code, Insn, Kind};
use crate::image::symbolize::Symbolizer;

/// What the diagnostics look at.
pub struct Input<'a> {
    /// The samples in the order they were taken (empty when the order is not known).
    pub pcs: &'a [u32],
    /// Samples in all.
    pub total: u64,
    /// The samples are address ranges (histogram bins), not single addresses.
    pub binned: bool,
    pub per_pc: &'a HashMap<u32, u64>,
    pub facts: &'a Facts,
    pub functions: &'a [Row],
    /// The image's vector table: `(exception number, handler address)`.
    pub vectors: &'a [(u32, u32)],
    /// With `--truth`: the instructions the firmware executed (sampler-rt's excluded).
    pub exact_total: Option<u64>,
}

/// Why a run has no samples, against its sampling period.
fn no_samples(input: &Input<'_>) -> String {
    let f = input.facts;
    let period = f.period_units;
    let units_per_tick = if f.period_ticks > 0.0 {
        period / f.period_ticks
    } else {
        1.0
    };
    // A period that gives about 100 samples over `ran`.
    let suggest = |ran: f64| ((ran / 100.0 / units_per_tick).floor() as u64).max(2);
    match input.exact_total {
        Some(ran) if (ran as f64) < 2.0 * period => format!(
            "no samples: the firmware ran {ran} {unit} (counted exactly), about {:.2} of one mean \
             sampling period ({period:.0} {unit}), and the first sample did not come. Sample \
             more often (`--period {}` gives about 100 samples), or let the firmware run longer",
            ran as f64 / period,
            suggest(ran as f64),
            unit = f.unit
        ),
        Some(ran) => format!(
            "no samples although the firmware ran {ran} {unit} (counted exactly), {:.0} mean \
             sampling periods ({period:.0} {unit}): interrupts were masked, or the sampler was \
             started late (`sampler_rt::start()`)",
            ran as f64 / period,
            unit = f.unit
        ),
        None => format!(
            "no samples: {} before the first sample, which comes after one mean sampling period \
             ({period:.0} {unit}) on average. Sample more often (`--period`), let the firmware \
             run longer, or add `--truth` to see how long it ran",
            if f.stop.is_empty() {
                "the run ended".to_owned()
            } else {
                f.stop.clone()
            },
            unit = f.unit
        ),
    }
}

/// Everything the report should say about a sampled profile.
pub fn sampled(
    input: &Input<'_>,
    sym: &mut Symbolizer,
    code: Option<&mut Code>,
) -> Vec<Diagnostic> {
    let mut d = Vec::new();
    let n = input.total as usize;
    if n == 0 {
        d.push(Diagnostic::warning(Finding::NoSamples, no_samples(input)));
        return d;
    }
    // Lockstep needs the order of the samples; pile-ups need single addresses.
    let locked = !input.pcs.is_empty() && lockstep(input, sym, &mut d);
    if let Some(code) = code
        && !locked
        && !input.binned
        && !input.facts.on_events
    {
        // Pile-ups are judged against independent samples; in lockstep nothing is. Samples on
        // an event's overflow pile up after the instructions that cause it, as they should.
        pile_ups(input, sym, code, &mut d);
    }
    if let Some(out) = input.functions.iter().find(|r| r.name == OUTSIDE) {
        d.push(
            Diagnostic::warning(
                Finding::OutsideImage,
                format!(
                    "{:.2} % of the samples are outside every function of this ELF: code copied to \
                     RAM, a bootloader, or another image. They are listed as `{OUTSIDE}`; `--lines` \
                     shows their addresses",
                    out.percent
                ),
            )
            .at(out.percent, Vec::new()),
        );
    }
    let f = input.facts;
    if f.overwritten > 0 {
        d.push(Diagnostic::warning(
            Finding::Overwritten,
            format!(
                "the ring holds {n} samples: the newest {n} of {} were kept, the older {} are not in the \
                 profile. Rebuild with a larger SAMPLER_RT_RING_SLOTS, or stream the samples",
                f.taken, f.overwritten
            ),
        ));
    }
    if f.lost > 0 {
        let share = 100.0 * f.lost as f64 / (f.lost as f64 + n as f64);
        d.push(
            Diagnostic::warning(
                Finding::Lost,
                format!(
                    "{} samples ({share:.2} %) were lost before they reached the host and are not in \
                     the profile: the shares are of the samples that arrived",
                    f.lost
                ),
            )
            .at(share, Vec::new()),
        );
    }
    if f.foreign_interrupts > 0 {
        d.push(Diagnostic::warning(
            Finding::ForeignInterrupts,
            format!(
                "the sampler's exception vectors took {} that {} not its own, and disabled \
                 {} unserved: the firmware has interrupts of its own, and it did not run as it \
                 does without the sampler. Keep the firmware's vectors: call \
                 `sampler_rt::start_keeping_vectors()` instead of `start()`, and from its IRQ \
                 handler `sampler_rt::on_irq(intid)` with the number it read from the GIC",
                crate::term::plural(f.foreign_interrupts as u64, "interrupt"),
                if f.foreign_interrupts == 1 {
                    "was"
                } else {
                    "were"
                },
                if f.foreign_interrupts == 1 {
                    "it"
                } else {
                    "them"
                },
            ),
        ));
    }
    resolution(input, sym, &mut d);
    d
}

/// Samples in step with the program: the sequence repeats, or each sample says much about the
/// next. Returns whether the samples are too dependent to judge pile-ups on.
fn lockstep(input: &Input<'_>, sym: &mut Symbolizer, d: &mut Vec<Diagnostic>) -> bool {
    let pcs = input.pcs;
    let n = pcs.len();
    let distinct = input.per_pc.len();
    let advice = if input.facts.jitter_ticks == 0 {
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

/// Instructions holding far more samples than the instruction before them.
fn pile_ups(input: &Input<'_>, sym: &mut Symbolizer, code: &mut Code, d: &mut Vec<Diagnostic>) {
    let total: u64 = input.per_pc.values().sum();
    // Group the sampled addresses by function.
    let mut by_function: HashMap<(u64, u64), Vec<u32>> = HashMap::new();
    for &pc in input.per_pc.keys() {
        if let Some(r) = sym.range_of(pc as u64) {
            by_function.entry(r).or_default().push(pc);
        }
    }
    let handlers = handler_names(input, sym, code);
    let mut found: Vec<(Kind, u32, u64, Insn, String)> = Vec::new();
    for ((start, end), pcs) in by_function {
        let insns = code.function(start as u32, end as u32).to_vec();
        let targets: HashSet<u32> = insns.iter().filter_map(|i| i.target).collect();
        for pc in pcs {
            let s = input.per_pc[&pc];
            if s < 5 {
                continue;
            }
            let Some(idx) = insns.iter().position(|i| i.addr == pc) else {
                continue;
            };
            let Some(prev) = idx.checked_sub(1).map(|j| insns[j].clone()) else {
                continue;
            };
            let before = input.per_pc.get(&prev.addr).copied().unwrap_or(0);
            let share = 100.0 * s as f64 / total as f64;
            let kind = match prev.kind {
                Kind::Unmask | Kind::MaskWrite | Kind::Sleep => prev.kind,
                // Other causes need a real pile: in straight-line code, many times the samples
                // of the instruction before, and a share worth mentioning.
                Kind::Store | Kind::Other | Kind::Svc
                    if !targets.contains(&pc)
                        && s >= 10
                        && share >= 0.5
                        && s > 4 * (before + 1) =>
                {
                    prev.kind
                }
                _ => continue,
            };
            if matches!(kind, Kind::Unmask | Kind::MaskWrite | Kind::Sleep)
                && (share < 0.5 || s <= 2 * (before + 1))
            {
                continue;
            }
            let name = sym.function_of(pc as u64).unwrap_or(OUTSIDE).to_owned();
            found.push((kind, pc, s, prev, name));
        }
    }
    found.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    for (kind, pc, s, prev, name) in found {
        let share = 100.0 * s as f64 / total as f64;
        let mut explained = Vec::new();
        let at = format!("{name} at {pc:#x}");
        let msg = match kind {
            Kind::Unmask | Kind::MaskWrite => {
                let (region, names) = masked_region(sym, code, pc, &prev);
                explained = names;
                format!(
                    "{share:.2} % of the samples ({s}) are on {at}, the instruction right after \
                     `{}` re-enables interrupts: a sampling interrupt that fires while interrupts \
                     are masked waits, and lands here. These samples are the time of the masked \
                     region{region}, not of the instruction they land on; and a region longer than \
                     the period loses samples as well. No sampling setting changes this (a masked \
                     region holds off every interrupt): for the time really spent inside the \
                     region, count it exactly with `--truth` (the exact share beside each row, in \
                     QEMU) or `--exact`, or time it with laps",
                    prev.text
                )
            }
            Kind::Sleep => format!(
                "{share:.2} % of the samples ({s}) found the core asleep in `{}` (they are on {at}, \
                 the instruction after it): that is idle time, not work done by {name}",
                prev.text
            ),
            _ => {
                let cause = if prev.kind == Kind::Store {
                    format!(
                        "after a store (`{}`) that may pend an interrupt whose handler the sampler \
                         cannot preempt",
                        prev.text
                    )
                } else if prev.kind == Kind::Svc {
                    format!("after `{}`, a supervisor call", prev.text)
                } else {
                    format!("after `{}`", prev.text)
                };
                format!(
                    "{share:.2} % of the samples ({s}) pile up on {at}, {cause}: more than 4 times the \
                     samples of the instruction before it, which runs as often. The sampling interrupt \
                     was held off and was taken here, so this is the time of code the sampler could not \
                     see — most often an interrupt handler of the sampler's priority or more urgent{}. \
                     Sample at a more urgent priority (`--priority`, 0 is the most urgent and the default)",
                    handlers
                )
            }
        };
        let diag_kind = match kind {
            Kind::Unmask | Kind::MaskWrite => Finding::MaskedSkid,
            Kind::Sleep => Finding::Asleep,
            _ => Finding::HeldOff,
        };
        let diag = if kind == Kind::Sleep {
            Diagnostic::note(diag_kind, msg)
        } else {
            Diagnostic::warning(diag_kind, msg)
        };
        let mut diag = diag.at(share, vec![pc]);
        diag.functions = explained;
        d.push(diag);
    }
}

/// Where interrupts were masked: the function that unmasks, and when that is a small helper
/// (`irq_on`, an `enable()`), the functions that call it.
/// Where interrupts were masked, in words, and the functions that hold the region: the one
/// that unmasks, and when that is a small helper (`irq_on`, an `enable()`), the functions that
/// call it.
fn masked_region(
    sym: &mut Symbolizer,
    code: &mut Code,
    pc: u32,
    unmask: &Insn,
) -> (String, Vec<String>) {
    let Some((start, end)) = sym.range_of(pc as u64) else {
        return (String::new(), Vec::new());
    };
    let owner = sym.function_of(pc as u64).unwrap_or("?").to_owned();
    let insns = code.function(start as u32, end as u32);
    let small = insns.len() <= 8;
    // A function that masks before it unmasks holds the region itself, however small.
    let masks_too = insns
        .iter()
        .any(|i| i.addr < unmask.addr && i.kind == Kind::Mask);
    if !small || masks_too {
        return (
            format!(" in {owner} (it ends at {:#x})", unmask.addr),
            vec![owner],
        );
    }
    let callers = callers_of(sym, code, start as u32);
    let text = if callers.is_empty() {
        format!(" that {owner} ends")
    } else {
        format!(
            " that {owner} ends, in its caller{} {}",
            if callers.len() > 1 { "s" } else { "" },
            callers.join(", ")
        )
    };
    let mut names = vec![owner];
    names.extend(callers);
    (text, names)
}

/// Functions with a direct call to `target`.
fn callers_of(sym: &mut Symbolizer, code: &mut Code, target: u32) -> Vec<String> {
    let mut names = Vec::new();
    for (start, end, name) in sym.all_functions() {
        if code.function(start as u32, end as u32).iter().any(|i| {
            // A call, or a tail call: a branch to the start from another function.
            i.target == Some(target)
                && (i.kind == Kind::Call || (i.kind == Kind::Branch && start as u32 != target))
        }) && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

/// ` (handlers in this image: IRQ31, ...)`, the interrupt handlers other than the defaults and
/// the sampler's own.
fn handler_names(input: &Input<'_>, sym: &mut Symbolizer, code: &mut Code) -> String {
    let mut names = Vec::new();
    for &(n, addr) in input.vectors {
        if n < 2 {
            continue;
        }
        let Some(name) = sym.function_of(addr as u64).map(str::to_owned) else {
            continue;
        };
        // cortex-m-rt's defaults, and the sampler's own entry (or a timer handler that only
        // acknowledges and branches to it).
        let default = matches!(
            name.as_str(),
            "DefaultHandler" | "DefaultHandler_" | "HardFault_"
        );
        let sampler = sym.is_sampler(addr as u64)
            || sym.range_of(addr as u64).is_some_and(|(a, b)| {
                code.function(a as u32, b as u32)
                    .iter()
                    .any(|i| i.target.is_some_and(|t| sym.is_sampler(t as u64)))
                    || code
                        .function(a as u32, b as u32)
                        .iter()
                        .any(|i| i.text.contains("sampler"))
            });
        if default || sampler || names.contains(&name) {
            continue;
        }
        names.push(name);
    }
    if names.is_empty() {
        String::new()
    } else {
        format!(" (handlers in this image: {})", names.join(", "))
    }
}

/// With the exact count of the same run: functions far outside their binomial bounds. Five
/// sigma, so that a sound profile of many rows practically never trips it.
pub fn against_exact(functions: &[Row], found: &[Diagnostic]) -> Option<Diagnostic> {
    let mut off: Vec<&Row> = functions
        .iter()
        .filter(|r| r.error_sigma.is_some_and(|s| s.abs() > 5.0))
        .collect();
    if off.is_empty() {
        return None;
    }
    off.sort_by(|a, b| {
        let key = |r: &Row| r.error_points.unwrap_or(0.0).abs();
        key(b).total_cmp(&key(a))
    });
    let list: Vec<String> = off
        .iter()
        .take(4)
        .map(|r| {
            format!(
                "{} {:.2} % sampled vs {:.2} % exact",
                r.name,
                r.percent,
                r.exact_percent.unwrap_or(0.0)
            )
        })
        .collect();
    // Say why when another diagnostic already does, rather than suggest settings that cannot
    // help (a masked region holds off the sampler whatever its period or priority).
    let why = if found.iter().any(|d| d.kind == Finding::MaskedSkid) {
        "The masked-skid warning explains it: samples taken while interrupts were masked land \
         after the region. The exact column is where the time went"
    } else if found.iter().any(|d| d.kind == Finding::HeldOff) {
        "The held-off warning explains it: a handler the sampler could not preempt held the \
         samples back (`--priority`)"
    } else if found.iter().any(|d| d.kind == Finding::Lockstep) {
        "The lockstep warning explains it: the samples were in step with the program \
         (`--jitter`)"
    } else {
        "The samples are not a fair draw of the run: in step with the program (widen the random \
         span, `--jitter`), or held off by code the sampler could not preempt"
    };
    Some(Diagnostic::warning(
        Finding::DisagreesWithExact,
        format!(
            "the sampled profile disagrees with the exact count of the same run beyond 5 sigma: \
             {}. {why}",
            list.join("; ")
        ),
    ))
}

/// Too few samples for the shares shown.
fn resolution(input: &Input<'_>, sym: &Symbolizer, d: &mut Vec<Diagnostic>) {
    let n = input.total as f64;
    if n < 100.0 {
        d.push(Diagnostic::warning(
            Finding::FewSamples,
            format!(
                "only {n} samples: a share of 50 % is uncertain by ±{:.0} points (95 %)",
                100.0 * Z95 * (0.25 / n).sqrt()
            ),
        ));
    }
    // A row that holds a masked region's pile is explained already; comparing it with its
    // neighbours would only add noise.
    let piled: HashSet<String> = d
        .iter()
        .filter(|x| x.kind == Finding::MaskedSkid)
        .flat_map(|x| {
            x.addresses
                .iter()
                .filter_map(|&pc| sym.function_of(pc as u64).map(str::to_owned))
                .chain(x.functions.iter().cloned())
        })
        .collect();
    let top: Vec<&Row> = input
        .functions
        .iter()
        .filter(|r| r.percent >= 1.0 && !piled.contains(&r.name))
        .take(10)
        .collect();
    let mut shown = 0;
    for w in top.windows(2) {
        let (a, b) = (w[0].percent / 100.0, w[1].percent / 100.0);
        let diff = a - b;
        // Two shares of one multinomial sample: var(a - b) = (a + b - (a - b)^2) / n.
        let var = (a + b - diff * diff) / n;
        if diff >= Z95 * var.sqrt() {
            continue;
        }
        let need = if diff > 0.0 {
            let k = Z95 * Z95 * (a + b - diff * diff) / (diff * diff);
            format!("about {} samples would", round_up(k))
        } else {
            "no number of samples may".into()
        };
        d.push(Diagnostic::note(
            Finding::Indistinct,
            format!(
                "{} and {} ({:.2} % and {:.2} %) cannot be told apart with {n} samples: {need} \
                 separate shares this close (95 %)",
                w[0].name, w[1].name, w[0].percent, w[1].percent
            ),
        ));
        shown += 1;
        if shown == 3 {
            break;
        }
    }
}

/// Two significant digits, rounded up: 2_347 -> 2_400.
fn round_up(x: f64) -> u64 {
    if x < 100.0 {
        return x.ceil() as u64;
    }
    let mag = 10f64.powi(x.log10().floor() as i32 - 1);
    ((x / mag).ceil() * mag) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeating_sequence_is_found_at_its_period() {
        let cycle: Vec<u32> = (0..186).map(|i| 0x1000 + 2 * ((i * 71) % 186)).collect();
        let pcs: Vec<u32> = cycle.iter().cycle().take(10_000).copied().collect();
        assert_eq!(repeat_lag(&pcs), Some(186));
        // An independent sequence does not repeat, and its samples are uncorrelated.
        let mut x = 0x2545_F491u32;
        let random: Vec<u32> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                0x1000 + 2 * (x % 40)
            })
            .collect();
        assert_eq!(repeat_lag(&random), None);
        let series: Vec<usize> = random.iter().map(|&pc| (pc as usize / 2) % 3).collect();
        let (tau, _) = correlation_time(&series, 3).unwrap();
        assert!(tau < 1.2, "independent samples: tau {tau}");
        // Samples that stay in one function for about 20 samples at a time: tau near 40.
        let slow: Vec<usize> = (0..20_000).map(|i| (i / 20) % 3).collect();
        let (tau, _) = correlation_time(&slow, 3).unwrap();
        assert!(tau > 10.0, "slow phases: tau {tau}");
    }

    fn facts(taken: u32, lost: u32, overwritten: u32) -> Facts {
        Facts {
            firmware: "fw".into(),
            machine: "m".into(),
            unit: "instructions".into(),
            on_events: false,
            foreign_interrupts: 0,
            timer: "SysTick".into(),
            timer_hz: 25_000_000,
            period_ticks: 16_000.5,
            period_units: 10_000.0,
            jitter_ticks: 16_384,
            priority: 0,
            taken,
            lost,
            overwritten,
            requested: taken,
            stop: "sample limit reached".into(),
            source: "dump".into(),
            duration_units: 0.0,
        }
    }

    /// The diagnostics of samples spread evenly over 50 addresses of a fixture function.
    fn run_with(f: &Facts) -> Vec<Diagnostic> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        let mut sym = Symbolizer::new(&path, &data, None).unwrap();
        let mut x = 0x2545_F491u32;
        let pcs: Vec<u32> = (0..2000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                0xff0 + 2 * (x % 5)
            })
            .collect();
        let mut per_pc = HashMap::new();
        for &pc in &pcs {
            *per_pc.entry(pc).or_default() += 1;
        }
        let input = Input {
            pcs: &pcs,
            total: pcs.len() as u64,
            binned: false,
            per_pc: &per_pc,
            facts: f,
            functions: &[],
            vectors: &[],
            exact_total: None,
        };
        sampled(&input, &mut sym, None)
    }

    fn row(name: &str, percent: f64) -> Row {
        Row {
            name: name.into(),
            count: 0,
            samples: None,
            instructions: None,
            percent,
            ci95: None,
            function: None,
            exact_percent: None,
            error_points: None,
            error_sigma: None,
        }
    }

    #[test]
    fn a_row_explained_by_a_masked_pile_is_not_compared_with_its_neighbours() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        let sym = Symbolizer::new(&path, &data, None).unwrap();
        let f = facts(200, 0, 0);
        let per_pc = HashMap::new();
        let rows = [row("hot_a", 50.5), row("hot_b", 49.5)];
        let input = Input {
            pcs: &[],
            total: 200,
            binned: false,
            per_pc: &per_pc,
            facts: &f,
            functions: &rows,
            vectors: &[],
            exact_total: None,
        };
        let mut d = Vec::new();
        resolution(&input, &sym, &mut d);
        assert_eq!(
            d.iter().filter(|x| x.kind == Finding::Indistinct).count(),
            1
        );
        // hot_a spans 0xfee..0xffc in the fixture: a masked pile there explains its row.
        let mut d =
            vec![Diagnostic::warning(Finding::MaskedSkid, String::new()).at(50.5, vec![0xff0])];
        resolution(&input, &sym, &mut d);
        assert_eq!(
            d.iter().filter(|x| x.kind == Finding::Indistinct).count(),
            0,
            "{d:?}"
        );
    }

    #[test]
    fn no_samples_are_measured_against_the_period() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        let mut sym = Symbolizer::new(&path, &data, None).unwrap();
        let mut f = facts(0, 0, 0);
        f.stop = "the firmware ended the run".into();
        let per_pc = HashMap::new();
        let mut input = Input {
            pcs: &[],
            total: 0,
            binned: false,
            per_pc: &per_pc,
            facts: &f,
            functions: &[],
            vectors: &[],
            exact_total: Some(1072),
        };
        let d = sampled(&input, &mut sym, None);
        assert_eq!(d[0].kind, Finding::NoSamples);
        assert!(
            d[0].message.contains("ran 1072 instructions"),
            "{}",
            d[0].message
        );
        assert!(
            d[0].message.contains("0.11 of one mean sampling period"),
            "{}",
            d[0].message
        );
        assert!(!d[0].message.contains("start"), "{}", d[0].message);
        input.exact_total = None;
        let d = sampled(&input, &mut sym, None);
        assert!(
            d[0].message
                .contains("the firmware ended the run before the first sample")
        );
    }

    #[test]
    fn lost_and_overwritten_samples_are_reported_and_only_then() {
        assert_eq!(run_with(&facts(2000, 0, 0)), Vec::new());
        let d = run_with(&facts(2600, 100, 600));
        let kinds: Vec<Finding> = d.iter().map(|d| d.kind).collect();
        assert_eq!(kinds, [Finding::Overwritten, Finding::Lost]);
        assert!(
            d[0].message
                .contains("the older 600 are not in the profile")
        );
        assert!(
            d[1].message.contains("100 samples (4.76 %) were lost"),
            "{}",
            d[1].message
        );
    }

    #[test]
    fn rounding_for_messages() {
        assert_eq!(round_up(2347.0), 2400);
        assert_eq!(round_up(57.2), 58);
        assert_eq!(round_up(100_001.0), 110_000);
    }
}
