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

use std::collections::HashSet;

use crate::analysis::stats::Z95;
use crate::image::disasm::Code;
use crate::image::symbolize::Symbolizer;
pub use crate::report::model::Input;
use crate::report::model::{Diagnostic, Facts, Finding, OUTSIDE, Row};
use sampler_rt::wire;

mod lockstep;
mod pileup;

use lockstep::lockstep;
pub use lockstep::{correlation_time, repeat_lag};
use pileup::pile_ups;

/// Why a run has no samples, against its sampling period.
fn no_samples(input: &Input<'_>) -> String {
    let f = input.facts;
    if f.stop == crate::report::model::stop_reason(sampler_rt::wire::STOP_TIMER_TAKEN) {
        return "no samples: the sampler did not start, because SysTick's vector in the table \
                the core uses (VTOR) is not the sampler's: the application installed a SysTick \
                handler of its own at run time (a vector table moved to RAM, as RTOS ports do), \
                and taking SysTick would have broken it. In QEMU pace the sampler with another \
                timer (`--timer NAME`); on a board, with a timer of the chip through \
                `sampler_rt::start_with_timer`"
            .to_owned();
    }
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

/// The run's facts against each other: the samples, each a mean period apart at the timer's
/// assumed clock, span at most the whole run, which `--truth` counted exactly (the sampler's
/// own instructions left out, so the span may exceed it by the sampler's share; half again is
/// far beyond that). A span longer than that means the timer ticks faster than assumed.
fn clock_mismatch(input: &Input<'_>) -> Option<Diagnostic> {
    let f = input.facts;
    let ran = input.exact_total? as f64;
    if f.on_events || ran <= 0.0 || input.total < 10 || f.duration_units <= 1.5 * ran {
        return None;
    }
    let ratio = f.duration_units / ran;
    let clock = if f.timer_hz > 0 {
        format!(
            ": it runs at about {:.3} MHz, not {:.3} MHz",
            ratio * f.timer_hz as f64 / 1e6,
            f.timer_hz as f64 / 1e6
        )
    } else {
        String::new()
    };
    Some(Diagnostic::warning(
        Finding::ClockMismatch,
        format!(
            "the timer's clock is not the one assumed{clock}. {} samples a mean period of \
             {:.0} {unit} apart span {:.3e} {unit}, but the whole run is {:.3e} {unit} counted \
             exactly: the real period is about {:.0} {unit}, {ratio:.1} times shorter. The shares \
             stand; every period, duration and rate derived from the clock does not. Give the \
             timer's clock (a timer the machine knows by name, or `sampler_rt::Timer`'s `hz`)",
            input.total,
            f.period_units,
            f.duration_units,
            ran,
            f.period_units / ratio,
            unit = f.unit,
        ),
    ))
}

/// Whether any function of the image has an instruction that sleeps (`wfi`, `wfe`).
fn image_sleeps(sym: &Symbolizer, code: &mut Code) -> bool {
    sym.ranges().into_iter().any(|r| {
        code.of(r)
            .iter()
            .any(|i| i.kind == crate::image::disasm::Kind::Sleep)
    })
}

/// The samples span more time than the run executed instructions, in an image that sleeps:
/// time went on while the core slept (in QEMU as on a chip), which the exact count of
/// instructions has no share for.
/// `piled`: the share of the samples that found the core asleep after a `wfi`; far more than
/// the time slept means the firmware wakes on the sampler's interrupt and works right after
/// each sample, where no sample falls.
fn slept_note(input: &Input<'_>, piled: f64) -> Diagnostic {
    let f = input.facts;
    let ran = input.exact_total.unwrap_or(0) as f64;
    let asleep = 100.0 * (1.0 - ran / f.duration_units.max(1.0));
    // Three standard deviations of a share of the samples, and at least five points.
    let n = input.total.max(1) as f64;
    let spread = (3.0 * 100.0 * (asleep / 100.0 * (1.0 - asleep / 100.0) / n).sqrt()).max(5.0);
    let woken = if piled > asleep + spread {
        format!(
            " Yet {piled:.1} % of the samples found it asleep, more than the time it slept: the \
             firmware wakes on the sampler's interrupt too and works right after it (a `wfi` \
             loop that runs on every wake), just after each sample and before the next, where \
             no sample falls. Its work is under-sampled; a longer period (`--period`) lets it \
             sleep between samples"
        )
    } else {
        String::new()
    };
    Diagnostic::note(
        Finding::Asleep,
        format!(
            "the core slept for about {asleep:.0} % of the run: {} samples a mean period of \
             {:.0} {unit} apart span {:.3e} {unit} of time, but the run executed {ran:.3e} \
             instructions (counted exactly), and the image sleeps (`wfi`, `wfe`: time goes on \
             while the core sleeps, without instructions). A sample that found the core asleep \
             sits where it woke: after its `wfi`, or after the unmasking that ends a critical \
             section it slept in. The exact count has no share for sleep: those rows read high \
             against it, every other row low.{woken}",
            input.total,
            f.period_units,
            f.duration_units,
            unit = f.unit,
        ),
    )
    .at(asleep, Vec::new())
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
    let mut code = code;
    // The core slept: the samples span more time than the run has instructions for, and the
    // image has an instruction that sleeps. Samples then sit where the core woke, which is
    // neither lockstep nor a wrong clock.
    let slept = !input.facts.on_events
        && input
            .exact_total
            .is_some_and(|ran| ran > 0 && input.facts.duration_units > 1.5 * ran as f64)
        && code.as_deref_mut().is_some_and(|c| image_sleeps(sym, c));
    // Lockstep needs the order of the samples; pile-ups need single addresses.
    let locked = !slept && !input.pcs.is_empty() && lockstep(input, sym, &mut d);
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
    if slept {
        // Samples found asleep after a `wfi` (the pile-up note), against the time slept.
        let piled: f64 = d
            .iter()
            .filter(|x| x.kind == Finding::Asleep)
            .filter_map(|x| x.percent)
            .sum();
        d.push(slept_note(input, piled));
    } else if let Some(d2) = clock_mismatch(input) {
        d.push(d2);
    }
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

/// With the exact count of the same run: functions far outside their binomial bounds. Five
/// sigma, so that a sound profile of many rows practically never trips it. Each row is
/// explained by the diagnostic that names it (a handler as urgent as the sampler, a masked
/// region's pile), the others by what the run's diagnostics say in general.
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
    // The diagnostic that names a row's function, and what to call it.
    let naming = |r: &Row| {
        found
            .iter()
            .filter(|d| d.functions.contains(&r.name))
            .find_map(|d| match d.kind {
                Finding::Unpreemptable => {
                    Some("the warning on handlers as urgent as the sampler explains it")
                }
                Finding::MaskedSkid => Some("the masked-skid warning explains it"),
                Finding::HeldOff => Some("the held-off warning explains it"),
                _ => None,
            })
    };
    let list: Vec<String> = off
        .iter()
        .take(4)
        .map(|r| {
            format!(
                "{} {:.2} % sampled vs {:.2} % exact{}",
                r.name,
                r.percent,
                r.exact_percent.unwrap_or(0.0),
                naming(r).map(|w| format!(" ({w})")).unwrap_or_default()
            )
        })
        .collect();
    // Say why for the rows no diagnostic names, when a finding about the whole run does,
    // rather than suggest settings that cannot help. A masked region's skid is no such
    // finding: it moves the time of the functions it names, and a row it does not name is not
    // put down to it.
    let unnamed = off.iter().take(4).any(|r| naming(r).is_none());
    let why = if !unnamed {
        ""
    } else if found
        .iter()
        .any(|d| d.kind == Finding::Asleep && d.message.starts_with("the core slept"))
    {
        " The note on sleep explains it: the samples are of time, the exact count of \
         instructions, and the core slept"
    } else if found.iter().any(|d| d.kind == Finding::HeldOff) {
        " The held-off warning explains it: a handler the sampler could not preempt held the \
         samples back (`--priority`)"
    } else if found.iter().any(|d| d.kind == Finding::Lockstep) {
        " The lockstep warning explains it: the samples were in step with the program \
         (`--jitter`)"
    } else {
        " No finding here explains it: the samples may be in step with the program (widen the \
         random span, `--jitter`) or held off by code the sampler could not preempt; if \
         neither is so, please report it with the run's directory"
    };
    Some(Diagnostic::warning(
        Finding::DisagreesWithExact,
        format!(
            "the sampled profile disagrees with the exact count of the same run beyond 5 sigma: \
             {}.{why}",
            list.join("; ")
        ),
    ))
}

/// Too few samples for the shares shown.
fn resolution(input: &Input<'_>, sym: &Symbolizer, d: &mut Vec<Diagnostic>) {
    d.extend(ended_first(input.facts));
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

/// Fewer samples than asked for because the firmware ended first: how many, and the period
/// that would take them all in a run this long.
fn ended_first(f: &Facts) -> Option<Diagnostic> {
    let ended = f.stop == crate::report::model::stop_reason(wire::STOP_FIRMWARE);
    if !ended
        || f.requested == 0
        || f.taken == 0
        || u64::from(f.taken) * 10 >= u64::from(f.requested) * 9
    {
        return None;
    }
    // The period that spreads the asked-for samples over the same run, two significant
    // digits, rounded down.
    let period = f.period_units * f64::from(f.taken) / f64::from(f.requested);
    let mag = 10f64.powi((period.max(1.0).log10().floor() as i32 - 1).max(0));
    let period = ((period / mag).floor() * mag).max(1.0) as u64;
    Some(Diagnostic::note(
        Finding::FewSamples,
        format!(
            "{} samples were asked for and {} taken: the firmware ended first. `--period {period}` \
             ({period} {} between samples on average) would take about {} in a run this long",
            f.requested, f.taken, f.unit, f.requested
        ),
    ))
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

    /// A row is explained by the diagnostic that names its function: a handler as urgent as
    /// the sampler is not put down to a masked region's pile elsewhere.
    #[test]
    fn each_disagreement_names_the_diagnostic_that_covers_its_row() {
        let row = |name: &str, percent: f64, exact: f64, sigma: f64| Row {
            name: name.into(),
            percent,
            exact_percent: Some(exact),
            error_points: Some(percent - exact),
            error_sigma: Some(sigma),
            ..Default::default()
        };
        let rows = [
            row("SysTick", 0.0, 2.07, -12.0),
            row("after_masked", 9.0, 3.0, 20.0),
            row("elsewhere", 30.0, 25.0, 6.0),
        ];
        let mut urgent = Diagnostic::warning(Finding::Unpreemptable, "urgent".into());
        urgent.functions = vec!["SysTick".into()];
        let mut masked = Diagnostic::warning(Finding::MaskedSkid, "masked".into());
        masked.functions = vec!["after_masked".into()];
        let d = against_exact(&rows, &[urgent.clone(), masked.clone()]).unwrap();
        assert!(
            d.message.contains(
                "SysTick 0.00 % sampled vs 2.07 % exact (the warning on handlers as urgent as \
                 the sampler explains it)"
            ),
            "{}",
            d.message
        );
        assert!(d.message.contains(
            "after_masked 9.00 % sampled vs 3.00 % exact (the masked-skid warning explains it)"
        ));
        // The row no diagnostic names is not put down to the masked region's skid, which
        // moves other functions' time.
        assert!(
            d.message
                .contains("elsewhere 30.00 % sampled vs 25.00 % exact; ")
                || d.message
                    .contains("elsewhere 30.00 % sampled vs 25.00 % exact."),
            "{}",
            d.message
        );
        assert!(
            d.message.contains("No finding here explains it")
                && !d.message.contains("The masked-skid warning"),
            "{}",
            d.message
        );
        // Every row named: no general reason.
        let d = against_exact(&rows[..1], &[urgent, masked]).unwrap();
        assert!(d.message.ends_with("explains it)."), "{}", d.message);
    }
    use super::*;
    use crate::report::model::Facts;
    use std::collections::HashMap;

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
            source: crate::runs::Source::Dump,
            duration_units: 0.0,
        }
    }

    #[test]
    fn a_run_the_firmware_ended_before_its_samples_says_so_with_the_period_that_would_do() {
        let mut f = facts(2_100, 0, 0);
        f.requested = 10_000;
        f.stop = crate::report::model::stop_reason(wire::STOP_FIRMWARE).into();
        let d = ended_first(&f).unwrap();
        assert_eq!(d.severity, crate::report::model::Severity::Note);
        assert!(
            d.message.starts_with(
                "10000 samples were asked for and 2100 taken: the firmware ended first. \
                 `--period 2100` (2100 instructions between samples on average) would take about \
                 10000"
            ),
            "{}",
            d.message
        );
        // Nearly all taken, or the sample limit ended it, or nothing asked: nothing to say.
        f.taken = 9_500;
        assert!(ended_first(&f).is_none());
        f.taken = 2_100;
        f.stop = "sample limit reached".into();
        assert!(ended_first(&f).is_none());
    }

    /// The next number of a xorshift32 sequence.
    fn xorshift(x: &mut u32) -> u32 {
        *x ^= *x << 13;
        *x ^= *x >> 17;
        *x ^= *x << 5;
        *x
    }

    /// The diagnostics of samples spread evenly over 5 addresses of a fixture function.
    fn run_with(f: &Facts) -> Vec<Diagnostic> {
        let mut x = 0x2545_F491u32;
        let pcs: Vec<u32> = (0..2000)
            .map(|_| 0xff0 + 2 * (xorshift(&mut x) % 5))
            .collect();
        diagnose(&pcs, f, None, false)
    }

    /// The diagnostics of `pcs` (fixture addresses) under `f`, with `urgent` handlers, and
    /// with the code (for pile-ups) when `code` says so.
    fn diagnose(pcs: &[u32], f: &Facts, urgent: Option<&[String]>, code: bool) -> Vec<Diagnostic> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hot-loops.elf");
        let data = std::fs::read(&path).unwrap();
        let mut sym = Symbolizer::new(&path, &data, None).unwrap();
        let mut disasm = Code::new(&data).unwrap();
        let mut per_pc = HashMap::new();
        for &pc in pcs {
            *per_pc.entry(pc).or_default() += 1;
        }
        let input = Input {
            pcs,
            total: pcs.len() as u64,
            binned: false,
            per_pc: &per_pc,
            facts: f,
            functions: &[],
            vectors: &[],
            exact_total: None,
            urgent,
        };
        sampled(&input, &mut sym, code.then_some(&mut disasm))
    }

    #[test]
    fn samples_spanning_more_than_the_whole_run_name_the_timers_real_clock() {
        let per_pc = HashMap::new();
        // 1 684 instructions a period counted, 10 000 assumed: a 168 MHz clock that is 1 GHz.
        let mut f = facts(10_000, 0, 0);
        f.timer_hz = 168_000_000;
        f.duration_units = 10_000.0 * 10_000.0;
        let input = |exact: Option<u64>| Input {
            pcs: &[],
            total: 10_000,
            binned: false,
            per_pc: &per_pc,
            facts: &f,
            functions: &[],
            vectors: &[],
            exact_total: exact,
            urgent: None,
        };
        let d = clock_mismatch(&input(Some(16_839_925))).unwrap();
        assert_eq!(d.kind, Finding::ClockMismatch);
        assert!(d.message.contains("about 997.6"), "{}", d.message);
        assert!(
            d.message.contains("about 1684 instructions"),
            "{}",
            d.message
        );
        // A run that agrees, one longer than its samples (code before `start`), and one
        // without exact counts: nothing to say.
        assert!(clock_mismatch(&input(Some(100_500_000))).is_none());
        assert!(clock_mismatch(&input(Some(400_000_000))).is_none());
        assert!(clock_mismatch(&input(None)).is_none());
    }

    fn row(name: &str, percent: f64) -> Row {
        Row {
            name: name.into(),
            percent,
            ..Row::default()
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
            urgent: None,
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
            urgent: None,
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
    fn slow_phases_under_a_wide_random_span_are_not_called_correlated() {
        // 400 samples in hot_a, then 400 in hot_b, and so on: consecutive samples depend on
        // each other because the program changes phase slowly.
        let mut x = 0x2545_F491u32;
        let pcs: Vec<u32> = (0..8000u32)
            .map(|i| if (i / 400) % 2 == 0 { 0xff0 } else { 0x1000 } + 2 * (xorshift(&mut x) % 4))
            .collect();
        let kinds = |f: &Facts| -> Vec<Finding> {
            diagnose(&pcs, f, Some(&[]), true)
                .iter()
                .map(|d| d.kind)
                .collect()
        };
        // The default span (wider than the period): no loop can be in step, and slow phases
        // make the shares more precise, not less.
        assert_eq!(kinds(&facts(8000, 0, 0)), Vec::<Finding>::new());
        // A span far narrower than the period: the same series may be a loop in step.
        let mut narrow = facts(8000, 0, 0);
        narrow.jitter_ticks = 256;
        assert_eq!(kinds(&narrow), [Finding::Lockstep]);
    }

    #[test]
    fn a_pile_is_named_only_beyond_chance_and_only_where_something_can_hold_the_sampler_off() {
        let f = facts(0, 0, 0);
        // hot_loops' straight-line code: 0xff0, 0xff2 (its successor), 0xff4.
        let pile = |on_next: usize, on_prev: usize| -> Vec<u32> {
            let mut v = vec![0xff0; on_prev];
            v.extend(std::iter::repeat_n(0xff2, on_next));
            v.extend(std::iter::repeat_n(0xff4, 400));
            // In a random order, as independent samples come.
            let mut x = 0x2545_F491u32;
            for i in (1..v.len()).rev() {
                v.swap(i, xorshift(&mut x) as usize % (i + 1));
            }
            v
        };
        let held = |pcs: &[u32], urgent: Option<&[String]>| {
            diagnose(pcs, &f, urgent, true)
                .into_iter()
                .filter(|d| d.kind == Finding::HeldOff)
                .collect::<Vec<_>>()
        };
        // 13 samples after 2: more than 4 times, and yet within what chance gives when a few
        // addresses are tested (P = 0.0037 for an even split).
        assert!(held(&pile(13, 2), None).is_empty());
        // 120 after 2: no chance at all; a held-off warning, naming what can hold it off.
        let urgent = ["SysTick at 0x00".to_owned()];
        let d = held(&pile(120, 2), Some(&urgent));
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].message.contains("SysTick at 0x00"), "{}", d[0].message);
        // The sampler is at 0: no advice to raise its priority.
        assert!(!d[0].message.contains("`--priority`"), "{}", d[0].message);
        // Nothing in the firmware as urgent as the sampler: no handler to blame.
        assert!(held(&pile(120, 2), Some(&[])).is_empty());
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
