//! Embassy tasks as a performance engineer reads an RTOS's task statistics: per task the
//! polls, the time in them (share of the run, mean and longest poll), the latency from a wake
//! to the poll it causes, the samples tagged with it; the executor's idle share; and the
//! exact figures of the same run beside them when QEMU timed the polls (`--truth`).

use std::collections::HashMap;

use serde::Serialize;

use sampler_rt::wire;

use crate::analysis::laps::Scale;
use crate::analysis::stats;
use crate::dump::exact::TaskTimes;
use crate::dump::tasks::{Tasks, bin_range};

/// The task table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TasksReport {
    /// What timed the polls: `DWT CYCCNT`, `SysTick` or `none`.
    pub clock: String,
    /// The unit of every time: `instructions` in QEMU, `cycles` on a board.
    pub unit: String,
    /// Units a tick of the clock: each time is good to one tick (a poll's, a latency's).
    pub tick: f64,
    /// From the first spawn to the end of the run, in units (when polls were timed), the
    /// sampler's own work in it left out (`sampler`): what every share is of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<f64>,
    /// The sampler's own work inside the run (streaming its ring from its interrupt), left out
    /// of every poll, latency and idle period it fell in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampler: Option<f64>,
    /// The executor's time idle (from `executor_idle` to the next `poll_start`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_percent: Option<f64>,
    pub idle_periods: u32,
    /// The exact figures of the executor, when QEMU timed the polls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_idle_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_idle: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_span: Option<u64>,
    /// Samples tagged with a task, of all samples (when samples carried the task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    pub tasks: Vec<TaskRow>,
    /// Polls of tasks beyond the runtime's table (`SAMPLER_RT_TASKS`).
    pub dropped_polls: u32,
    /// Hook events the runtime lost before folding them (`SAMPLER_RT_TASK_EVENTS`).
    pub lost_events: u32,
    /// Hook events not folded yet when the host read the table (a run stopped early).
    #[serde(skip_serializing_if = "is_zero")]
    pub unfolded_events: u32,
    /// Hooks of executors beyond the runtime's table (their idle time is not kept).
    pub other_executor_hooks: u32,
    /// Every executor's idle time, the first (the one of `idle`) first, where the firmware
    /// kept them apart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub executors: Vec<ExecutorRow>,
    /// The longest poll a task may take before the report warns, in units.
    pub max_poll_limit: f64,
    /// What the table cannot say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One task.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskRow {
    /// The task's function (`crate::task`), from the pool its header is in.
    pub name: String,
    /// The task's header address (the tag its samples carry).
    pub id: u32,
    pub polls: u32,
    /// It ran to completion.
    pub ended: bool,
    /// Time in polls, in units, and its share of the span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_poll: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_poll: Option<f64>,
    /// Wakes that led to a poll.
    pub wakes: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_latency: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_latency: Option<f64>,
    /// Samples tagged with the task, their share of all samples and its 95 % interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_ci95: Option<[f64; 2]>,
    /// Where most of the task's samples are: the innermost function of its own code, and its line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hottest_line: Option<String>,
    /// Poll lengths and latencies by powers of two (in units; empty bins left out).
    pub poll_histogram: Vec<HistBin>,
    pub latency_histogram: Vec<HistBin>,
    /// The same run's exact figures (QEMU with `--truth`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<ExactTask>,
}

/// One executor's idle time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExecutorRow {
    /// The executor's address.
    pub id: u32,
    /// Where it idles: `thread mode`, or the interrupt whose handler runs it.
    pub context: String,
    /// Time from its `executor_idle` to its next `poll_start`, in units, and its share of the
    /// span (the time the executor had nothing to poll; for an interrupt executor, the time
    /// between its interrupts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_percent: Option<f64>,
    pub idle_periods: u32,
    /// QEMU's exact count of the same idle periods, told apart by the context they ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_idle: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_idle_percent: Option<f64>,
}

/// A histogram bin: values in `[low, high)` units.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct HistBin {
    pub low: f64,
    pub high: f64,
    pub count: u32,
}

/// A task's polls as QEMU counted them, in instructions.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ExactTask {
    pub polls: u64,
    pub busy: u64,
    /// Of the exact span.
    pub busy_percent: f64,
    pub max_poll: u64,
    pub wakes: u64,
    pub max_latency: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_latency: Option<f64>,
    /// Sampled share minus this, in standard deviations of the binomial law at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_sigma: Option<f64>,
}

/// What the table is made from besides the record.
pub struct Inputs<'a> {
    pub scale: Scale,
    pub unit: &'a str,
    /// Each task's name by its header address.
    pub names: &'a HashMap<u32, String>,
    /// Samples per tag and all samples, when samples carried the task being polled.
    pub sampled: Option<(&'a HashMap<u32, u64>, u64)>,
    /// The hottest line of each task's samples.
    pub lines: &'a HashMap<u32, String>,
    /// The exact times and the pools they are per (`elf::task_pools`' order).
    pub exact: Option<(&'a TaskTimes, &'a [crate::image::elf::TaskPool])>,
    /// `--max-poll` in units, if given.
    pub max_poll: Option<f64>,
    /// Units per second, if known (for the default limit and durations in messages).
    pub units_per_second: Option<f64>,
    /// Per exception number: a label (`GPIO1 (IRQ 7)`) and its handler's entry, from the
    /// vector table (to name executors' contexts and find their exact idle time).
    pub contexts: &'a HashMap<u32, (String, u32)>,
}

/// The default limit on a poll: 1 ms, or a twentieth of the run when that is shorter.
pub fn default_limit(span_units: Option<f64>, units_per_second: Option<f64>) -> Option<f64> {
    let ms = units_per_second.map(|u| u / 1000.0);
    let part = span_units.map(|s| s / 20.0);
    match (ms, part) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The task table, and the tasks whose longest poll is over the limit.
pub fn analyse(t: &Tasks, i: &Inputs) -> (TasksReport, Vec<(String, f64, Option<String>)>) {
    let timed = t.timed();
    let u = |ticks: f64| ticks * i.scale.units_per_tick;
    let span = timed.then(|| u(t.span.saturating_sub(t.stolen) as f64));
    // The exact run's time for the application, the sampler's own left out likewise.
    let exact_span = i.exact.map(|(e, _)| e.span.saturating_sub(e.stolen));
    let limit = i
        .max_poll
        .or_else(|| default_limit(span.or(exact_span.map(|s| s as f64)), i.units_per_second))
        .unwrap_or(f64::INFINITY);
    let pool_of = |id: u32| {
        i.exact
            .and_then(|(_, pools)| pools.iter().position(|p| id >= p.1 && id < p.2))
    };
    let mut notes = Vec::new();
    let mut rows: Vec<TaskRow> = t
        .tasks
        .iter()
        .map(|k| {
            let name = i
                .names
                .get(&k.id)
                .cloned()
                .unwrap_or_else(|| format!("task at {:#010x}", k.id));
            let hist = |h: &[u32]| -> Vec<HistBin> {
                (0..h.len())
                    .rev()
                    .filter(|&b| h[b] > 0)
                    .map(|b| {
                        let (lo, hi) = bin_range(b);
                        HistBin {
                            low: u(lo as f64),
                            high: u(hi as f64),
                            count: h[b],
                        }
                    })
                    .collect()
            };
            let (samples, sampled_percent, sampled_ci95) = match i.sampled {
                Some((by_tag, n)) if n > 0 => {
                    let s = by_tag.get(&k.id).copied().unwrap_or(0);
                    let (lo, hi) = stats::wilson(s, n, 1.96);
                    (
                        Some(s),
                        Some(100.0 * s as f64 / n as f64),
                        Some([100.0 * lo, 100.0 * hi]),
                    )
                }
                _ => (None, None, None),
            };
            let exact = i.exact.and_then(|(e, _)| {
                let p = e.pools.get(pool_of(k.id)?)?;
                let whole = exact_span.unwrap_or(0);
                let busy_percent = if whole > 0 {
                    100.0 * p.busy as f64 / whole as f64
                } else {
                    0.0
                };
                let error_sigma = match i.sampled {
                    Some((by_tag, n)) if n > 0 && whole > 0 => Some(stats::binomial_z(
                        by_tag.get(&k.id).copied().unwrap_or(0),
                        n,
                        (p.busy as f64 / whole as f64).clamp(0.0, 1.0),
                    )),
                    _ => None,
                };
                Some(ExactTask {
                    polls: p.polls,
                    busy: p.busy,
                    busy_percent,
                    max_poll: p.max_poll,
                    wakes: p.wakes,
                    max_latency: p.max_latency,
                    mean_latency: (p.wakes > 0).then(|| p.latency as f64 / p.wakes as f64),
                    error_sigma,
                })
            });
            TaskRow {
                name,
                id: k.id,
                polls: k.polls,
                ended: k.ended,
                busy: timed.then(|| u(k.busy as f64)),
                busy_percent: span
                    .filter(|&s| timed && s > 0.0)
                    .map(|s| 100.0 * u(k.busy as f64) / s),
                mean_poll: (timed && k.polls > 0).then(|| u(k.busy as f64) / f64::from(k.polls)),
                max_poll: (timed && k.polls > 0).then(|| u(f64::from(k.max_poll))),
                wakes: k.wakes,
                mean_latency: (timed && k.wakes > 0)
                    .then(|| u(k.latency as f64) / f64::from(k.wakes)),
                max_latency: (timed && k.wakes > 0).then(|| u(f64::from(k.max_latency))),
                samples,
                sampled_percent,
                sampled_ci95,
                hottest_line: i.lines.get(&k.id).cloned(),
                poll_histogram: if timed {
                    hist(&k.poll_hist)
                } else {
                    Vec::new()
                },
                latency_histogram: if timed {
                    hist(&k.latency_hist)
                } else {
                    Vec::new()
                },
                exact,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        let key = |r: &TaskRow| {
            r.busy
                .or(r.exact.map(|e| e.busy as f64))
                .or(r.sampled_percent)
                .unwrap_or(f64::from(r.polls))
        };
        key(b).total_cmp(&key(a)).then(a.name.cmp(&b.name))
    });
    if !timed {
        notes.push(
            "polls are counted, not timed: the core has no cycle counter that counts (DWT \
             CYCCNT; QEMU models none) and SysTick paces the sampler. Pace the sampler with \
             another timer so that SysTick times the polls (in QEMU, leave `--timer` out \
             and cargo-sample takes a free timer of the machine, or name one: `--timer \
             timer0` on mps2 machines; on a board, `sampler_rt::start_with_timer`), or run \
             on a core with CYCCNT"
                .to_owned(),
        );
    }
    if t.dropped > 0 {
        notes.push(format!(
            "{} polls were of tasks beyond the runtime's table of {} tasks: build sampler-rt \
             with a larger `SAMPLER_RT_TASKS` (a power of two)",
            t.dropped,
            t.tasks.len()
        ));
    }
    if t.unfolded_events > 0 {
        notes.push(format!(
            "the run was stopped before the firmware's end: {} hook events were still waiting \
             to be folded into sampler-rt's statistics when the table was read, so the last \
             polls, wakes and idle periods are missing from it",
            t.unfolded_events
        ));
    }
    if t.lost_events > 0 {
        notes.push(format!(
            "{} hook events were overwritten before sampler-rt folded them into its \
             statistics (it folds them when an executor idles and no poll is in progress): \
             the polls, wakes and idle periods they belonged to are missing from the table. An \
             executor ran many polls between idle hooks; build sampler-rt with a larger \
             `SAMPLER_RT_TASK_EVENTS` (a power of two, default 64, 16 bytes each)",
            t.lost_events
        ));
    }
    if t.other_executors > 0 {
        notes.push(format!(
            "more than {} executors ran: the idle time of those beyond is not kept (their \
             tasks are in the table)",
            1 + wire::MORE_EXECUTORS
        ));
    }
    // Each executor, with QEMU's exact idle time of the context it idles in (an executor
    // runs in one: thread mode, or its interrupt's handler). Dumps from before executors were
    // kept apart have the first one only.
    let first = crate::dump::tasks::Executor {
        id: t.executor,
        context: 0,
        idle: t.idle,
        periods: t.idle_periods,
    };
    let list = if t.executors.is_empty() {
        std::slice::from_ref(&first)
    } else {
        t.executors.as_slice()
    };
    let exact_of = |ctx: u32| -> Option<u64> {
        let (e, _) = i.exact?;
        if e.idles.is_empty() {
            // A plugin that kept one executor's: the first's.
            return (ctx == list[0].context).then_some(e.idle);
        }
        let entry = if ctx == 0 { 0 } else { i.contexts.get(&ctx)?.1 };
        e.idles.iter().find(|x| x.0 == entry).map(|x| x.1)
    };
    let executors: Vec<ExecutorRow> = list
        .iter()
        .map(|x| {
            let exact_idle = exact_of(x.context);
            ExecutorRow {
                id: x.id,
                context: match x.context {
                    0 => "thread mode".to_owned(),
                    n => i
                        .contexts
                        .get(&n)
                        .map(|c| c.0.clone())
                        .unwrap_or_else(|| format!("exception {n}")),
                },
                idle: timed.then(|| u(x.idle as f64)),
                idle_percent: span
                    .filter(|&s| s > 0.0)
                    .map(|s| 100.0 * u(x.idle as f64) / s),
                idle_periods: x.periods,
                exact_idle,
                exact_idle_percent: exact_idle
                    .zip(exact_span)
                    .filter(|&(_, whole)| whole > 0)
                    .map(|(e, whole)| 100.0 * e as f64 / whole as f64),
            }
        })
        .collect();
    // In QEMU, WFE returns at once: a thread-mode executor with nothing to poll spins through
    // its loop (poll_start, an empty poll, executor_idle) where a chip would sleep.
    let polls: u64 = t.tasks.iter().map(|k| u64::from(k.polls)).sum();
    if i.unit == "instructions"
        && let Some(x) = list.iter().find(|x| x.context == 0)
        && u64::from(x.periods) > 2 * (polls + 1)
    {
        notes.push(format!(
            "the thread-mode executor went idle {} times for {polls} polls: QEMU's WFE returns \
             at once rather than wait for an event, so between wakes the executor spins \
             through its loop (`poll_start`, an empty poll, `executor_idle`, and sampler-rt \
             folding those hooks' events into its statistics) where a chip would sleep, and the \
             idle share counts only part of that time",
            x.periods
        ));
    }
    // (Not when events were lost: that is why, and said above.)
    if let (Some(e), true, 0) = (executors[0].exact_idle, timed, t.lost_events) {
        let idle = u(t.idle as f64);
        let slack = f64::from(t.idle_periods) * i.scale.units_per_tick + 1.0;
        if (idle - e as f64).abs() > slack && e > 0 {
            notes.push(format!(
                "the executor's idle time by the firmware's clock is {:+.1} % off QEMU's exact \
                 count of the same idle periods, while every poll and latency agrees to the \
                 tick: QEMU (7.2, `-icount`) answers some SysTick reads at the edges of an idle \
                 period, around the executor's WFE, with a time that is not its count of \
                 instructions (the run's total stays right). In QEMU the exact figure is the \
                 right one",
                100.0 * (idle / e as f64 - 1.0)
            ));
        }
    }
    let over: Vec<(String, f64, Option<String>)> = rows
        .iter()
        .filter_map(|r| {
            let longest = r.max_poll.or(r.exact.map(|e| e.max_poll as f64))?;
            (longest > limit).then(|| (r.name.clone(), longest, r.hottest_line.clone()))
        })
        .collect();
    let exact_idle = executors[0].exact_idle;
    let report = TasksReport {
        clock: match t.counter {
            wire::LAP_COUNTER_CYCCNT => "DWT CYCCNT",
            wire::LAP_COUNTER_SYSTICK => "SysTick",
            _ => "none",
        }
        .to_owned(),
        unit: i.unit.to_owned(),
        tick: i.scale.units_per_tick,
        span,
        sampler: timed.then(|| u(t.stolen as f64)),
        idle: timed.then(|| u(t.idle as f64)),
        idle_percent: span
            .filter(|&s| s > 0.0)
            .map(|s| 100.0 * u(t.idle as f64) / s),
        idle_periods: t.idle_periods,
        exact_idle_percent: executors[0].exact_idle_percent,
        exact_idle,
        exact_span,
        samples: i.sampled.map(|(by_tag, _)| {
            rows.iter()
                .map(|r| by_tag.get(&r.id).copied().unwrap_or(0))
                .sum()
        }),
        tasks: rows,
        dropped_polls: t.dropped,
        lost_events: t.lost_events,
        unfolded_events: t.unfolded_events,
        other_executor_hooks: t.other_executors,
        executors: if t.executors.is_empty() {
            Vec::new()
        } else {
            executors
        },
        max_poll_limit: limit,
        notes,
    };
    (report, over)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::exact::PoolTimes;
    use crate::dump::tasks::Task;

    fn task(id: u32, polls: u32, busy: u64, max_poll: u32) -> Task {
        let mut poll_hist = vec![0; wire::TASK_BINS];
        poll_hist[max_poll.leading_zeros() as usize] = polls;
        Task {
            id,
            polls,
            max_poll,
            busy,
            wakes: polls - 1,
            max_latency: 3,
            latency: 2 * u64::from(polls - 1),
            ended: false,
            poll_hist,
            latency_hist: vec![0; wire::TASK_BINS],
        }
    }

    /// The table of the firmware's figures alone (no samples, exact count, names or limit), in
    /// `unit`, one unit a tick.
    fn firmware_figures_only(t: &Tasks, unit: &str) -> TasksReport {
        let none = HashMap::new();
        analyse(
            t,
            &Inputs {
                scale: Scale {
                    units_per_tick: 1.0,
                    hz: None,
                },
                unit,
                names: &none,
                sampled: None,
                lines: &none,
                exact: None,
                max_poll: None,
                units_per_second: None,
                contexts: &HashMap::new(),
            },
        )
        .0
    }

    #[test]
    fn an_executor_spinning_on_qemus_wfe_is_said_to_be_idle_in_qemu_only() {
        let t = Tasks {
            counter: wire::LAP_COUNTER_NONE,
            idle_periods: 300_000,
            tasks: vec![task(0x100, 2, 0, 0)],
            ..Tasks::default()
        };
        let note = |unit: &str| {
            firmware_figures_only(&t, unit)
                .notes
                .iter()
                .any(|n| n.contains("QEMU's WFE returns at once"))
        };
        assert!(note("instructions"));
        assert!(!note("cycles"));
    }

    #[test]
    fn events_lost_or_still_to_fold_are_said_with_how_many() {
        let notes = |lost: u32, unfolded: u32| {
            let t = Tasks {
                counter: wire::LAP_COUNTER_NONE,
                tasks: vec![task(0x100, 2, 0, 0)],
                lost_events: lost,
                unfolded_events: unfolded,
                ..Tasks::default()
            };
            let r = firmware_figures_only(&t, "instructions");
            (r.lost_events, r.unfolded_events, r.notes)
        };
        let (lost, unfolded, n) = notes(7, 0);
        assert_eq!((lost, unfolded), (7, 0));
        assert!(
            n.iter()
                .any(|n| n.starts_with("7 hook events were overwritten")
                    && n.contains("SAMPLER_RT_TASK_EVENTS")),
            "{n:?}"
        );
        let (_, unfolded, n) = notes(0, 6);
        assert_eq!(unfolded, 6);
        assert!(
            n.iter()
                .any(|n| n.contains("6 hook events were still waiting")),
            "{n:?}"
        );
        assert!(notes(0, 0).2.iter().all(|n| !n.contains("hook events")));
    }

    #[test]
    fn times_are_in_units_shares_of_the_span_and_a_long_poll_is_over_the_limit() {
        let t = Tasks {
            counter: wire::LAP_COUNTER_SYSTICK,
            span: 1000,
            idle: 250,
            idle_periods: 4,
            tasks: vec![task(0x100, 10, 100, 12), task(0x200, 2, 600, 500)],
            ..Tasks::default()
        };
        let names = HashMap::from([(0x100, "a".to_owned()), (0x200, "b".to_owned())]);
        let by_tag = HashMap::from([(0x100, 10u64), (0x200, 60u64)]);
        let exact = TaskTimes {
            pools: vec![
                PoolTimes {
                    polls: 10,
                    busy: 4000,
                    max_poll: 480,
                    ..PoolTimes::default()
                },
                PoolTimes {
                    polls: 2,
                    busy: 24_000,
                    max_poll: 20_000,
                    ..PoolTimes::default()
                },
            ],
            idle: 10_000,
            span: 40_000,
            ..TaskTimes::default()
        };
        let pools = [
            ("a".to_owned(), 0x100, 0x180),
            ("b".to_owned(), 0x200, 0x280),
        ];
        let lines = HashMap::from([(0x200, "`f` at src/main.rs:9".to_owned())]);
        let (r, over) = analyse(
            &t,
            &Inputs {
                scale: Scale {
                    units_per_tick: 40.0,
                    hz: Some(25e6),
                },
                unit: "instructions",
                names: &names,
                sampled: Some((&by_tag, 100)),
                lines: &lines,
                exact: Some((&exact, &pools)),
                max_poll: None,
                units_per_second: Some(1e9),
                contexts: &HashMap::new(),
            },
        );
        assert_eq!(r.span, Some(40_000.0));
        assert_eq!(r.idle_percent, Some(25.0));
        assert_eq!(r.exact_idle_percent, Some(25.0));
        // The busiest first.
        assert_eq!(r.tasks[0].name, "b");
        assert_eq!(r.tasks[0].busy, Some(24_000.0));
        assert_eq!(r.tasks[0].busy_percent, Some(60.0));
        assert_eq!(r.tasks[0].max_poll, Some(20_000.0));
        assert_eq!(r.tasks[1].mean_poll, Some(400.0));
        assert_eq!(r.tasks[1].mean_latency, Some(80.0));
        assert_eq!(r.tasks[0].exact.unwrap().busy_percent, 60.0);
        assert!(r.tasks[0].exact.unwrap().error_sigma.unwrap().abs() < 0.01);
        // A twentieth of 40 000 instructions (shorter than 1 ms): only b's poll is over it.
        assert_eq!(r.max_poll_limit, 2000.0);
        assert_eq!(
            over,
            vec![(
                "b".to_owned(),
                20_000.0,
                Some("`f` at src/main.rs:9".to_owned())
            )]
        );
        // The histogram in units: 500 ticks are in [256, 512) ticks.
        assert_eq!(
            r.tasks[0].poll_histogram,
            vec![HistBin {
                low: 256.0 * 40.0,
                high: 512.0 * 40.0,
                count: 2
            }]
        );
    }

    #[test]
    fn untimed_polls_are_counted_and_said_to_be() {
        let t = Tasks {
            counter: wire::LAP_COUNTER_NONE,
            tasks: vec![task(0x100, 3, 0, 0)],
            ..Tasks::default()
        };
        let (r, over) = analyse(
            &t,
            &Inputs {
                scale: Scale {
                    units_per_tick: 1.0,
                    hz: None,
                },
                unit: "cycles",
                names: &HashMap::new(),
                sampled: None,
                lines: &HashMap::new(),
                exact: None,
                max_poll: Some(10.0),
                units_per_second: None,
                contexts: &HashMap::new(),
            },
        );
        assert_eq!(r.tasks[0].polls, 3);
        assert_eq!(r.tasks[0].busy, None);
        assert_eq!(r.tasks[0].name, "task at 0x00000100");
        assert!(r.notes[0].contains("not timed"), "{:?}", r.notes);
        assert!(over.is_empty());
    }
}
