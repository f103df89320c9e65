//! The text report.

use std::fmt::Write;

use super::model::{ExactFacts, Facts, Report, Row, RunFacts};
use super::{annotate, tree::Node};
use crate::term::paint;

/// Which tables to show.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub lines: bool,
    pub tree: bool,
    pub top: usize,
    pub min_percent: f64,
}

fn si(hz: u64) -> String {
    if hz >= 1_000_000 && hz.is_multiple_of(1000) {
        format!("{} MHz", hz as f64 / 1e6)
    } else {
        format!("{hz} Hz")
    }
}

fn big(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}e9", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}e6", x / 1e6)
    } else {
        format!("{x:.0}")
    }
}

/// Render a report as text.
/// The exception trace of an SWO capture: entries, and times from entry to exit.
fn exceptions(s: &mut String, rows: &[super::model::ExceptionRow]) {
    let _ = writeln!(
        s,
        "\n{}",
        paint(
            "1",
            "exceptions (exception trace; times from entry to exit in timestamp ticks, preemption included)"
        )
    );
    let _ = writeln!(
        s,
        "{:>6} {:>10} {:>8} {:>10} {:>12} {:>10}   name",
        "number", "entries", "timed", "min", "mean", "max"
    );
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    for e in rows {
        let _ = writeln!(
            s,
            "{:>6} {:>10} {:>8} {:>10} {:>12} {:>10}   {}",
            e.number,
            e.entries,
            e.timed,
            opt(e.min_ticks),
            e.mean_ticks
                .map(|m| format!("{m:.1}"))
                .unwrap_or_else(|| "-".into()),
            opt(e.max_ticks),
            e.name
        );
    }
}

/// A figure in the report's unit, or `-`.
fn figure(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 1e7 => format!("{v:.3e}"),
        Some(v) => format!("{v:.0}"),
        None => "-".into(),
    }
}

/// Embassy's task table: the firmware's figures, the sampled share, and the exact figures of
/// the same run under each task when QEMU timed the polls.
fn tasks(s: &mut String, t: &crate::analysis::tasks::TasksReport) {
    let exact = t.tasks.iter().any(|k| k.exact.is_some());
    let sampled = t.tasks.iter().any(|k| k.sampled_percent.is_some());
    let _ = writeln!(
        s,
        "\n{}",
        paint(
            "1",
            &format!(
                "Embassy tasks (time in {}, timed by {}{})",
                t.unit,
                t.clock,
                if exact {
                    "; `exact`: QEMU's count of the same polls"
                } else {
                    ""
                }
            )
        )
    );
    let _ = writeln!(
        s,
        "{:>7} {:>8} {:>11} {:>10} {:>10} {:>6} {:>10} {:>10}{}  task",
        "polls",
        "busy %",
        "busy",
        "mean poll",
        "max poll",
        "wakes",
        "mean lat",
        "max lat",
        if sampled { "   sampled %" } else { "" },
    );
    for k in &t.tasks {
        let sampled_col = match (k.sampled_percent, k.sampled_ci95) {
            (Some(p), Some([lo, hi])) => format!(" {p:>6.2} ±{:<4.2}", (hi - lo) / 2.0),
            _ if sampled => format!("{:>12}", "-"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{:>7} {:>8} {:>11} {:>10} {:>10} {:>6} {:>10} {:>10}{sampled_col}  {}{}",
            k.polls,
            k.busy_percent
                .map(|p| format!("{p:.2}"))
                .unwrap_or_else(|| "-".into()),
            figure(k.busy),
            figure(k.mean_poll),
            figure(k.max_poll),
            k.wakes,
            figure(k.mean_latency),
            figure(k.max_latency),
            k.name,
            if k.ended { " (ended)" } else { "" },
        );
        if let Some(e) = &k.exact {
            let sigma = e
                .error_sigma
                .map(|z| format!("  sampled {z:+.1} sigma"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{:>7} {:>8} {:>11} {:>10} {:>10} {:>6} {:>10} {:>10}  exact{sigma}",
                e.polls,
                format!("{:.2}", e.busy_percent),
                figure(Some(e.busy as f64)),
                figure((e.polls > 0).then(|| e.busy as f64 / e.polls as f64)),
                figure(Some(e.max_poll as f64)),
                e.wakes,
                figure(e.mean_latency),
                figure((e.wakes > 0).then_some(e.max_latency as f64)),
            );
        }
    }
    let idle = match (t.idle_percent, t.idle) {
        (Some(p), Some(i)) => format!(
            "executor idle {p:.2} % ({} {}, {} periods)",
            figure(Some(i)),
            t.unit,
            t.idle_periods
        ),
        _ => format!("executor idle: not timed ({} periods)", t.idle_periods),
    };
    let exact_idle = match (t.exact_idle_percent, t.exact_idle) {
        (Some(p), Some(i)) => format!("; exact {p:.2} % ({} {})", figure(Some(i as f64)), t.unit),
        _ => String::new(),
    };
    let own = match t.sampler {
        Some(o) if o > 0.0 => format!(
            "; the sampler's own work ({} {}, streaming its ring) is left out of every figure",
            figure(Some(o)),
            t.unit
        ),
        _ => String::new(),
    };
    let _ = writeln!(s, "{idle}{exact_idle}{own}");
    // More than one executor: each one's idle time, by where it idles.
    if t.executors.len() > 1 {
        for x in &t.executors {
            let idle = match (x.idle_percent, x.idle) {
                (Some(p), Some(i)) => format!("idle {p:.2} % ({} {})", figure(Some(i)), t.unit),
                _ => "idle: not timed".to_owned(),
            };
            let exact = match (x.exact_idle_percent, x.exact_idle) {
                (Some(p), Some(i)) => {
                    format!("; exact {p:.2} % ({} {})", figure(Some(i as f64)), t.unit)
                }
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "  executor {:#010x} in {}: {idle}, {} periods{exact}",
                x.id, x.context, x.idle_periods
            );
        }
    }
    for n in &t.notes {
        let _ = writeln!(s, "{}", paint("2", &format!("note: {n}")));
    }
}

pub fn render(r: &Report, opts: Options) -> String {
    let mut s = String::new();
    match &r.facts {
        RunFacts::Sampled(f) => header_sampled(&mut s, r, f),
        RunFacts::Exact(f) => header_exact(&mut s, r, f),
    }
    table(&mut s, "function", &r.functions, opts, false);
    if r.functions
        .iter()
        .any(|row| row.error_sigma.is_some_and(|x| x.abs() > 3.0))
    {
        let _ = writeln!(
            s,
            "{}",
            paint("1;31", "! rows beyond 3 sigma of the exact share")
        );
    }
    if r.inlined
        .iter()
        .any(|row| Some(&row.name) != row.function.as_ref())
    {
        table(&mut s, "innermost inlined function", &r.inlined, opts, true);
    }
    if opts.lines {
        table(&mut s, "source line", &r.lines, opts, true);
    }
    if !r.tags.is_empty() {
        if matches!(r.facts, RunFacts::Exact(_)) {
            table(&mut s, "exception or task", &r.tags, opts, false);
        } else {
            table(&mut s, "tag", &r.tags, opts, false);
        }
        if !r.tag_functions.is_empty() {
            table(&mut s, "tag / function", &r.tag_functions, opts, false);
        }
    }
    if !r.exceptions.is_empty() {
        exceptions(&mut s, &r.exceptions);
    }
    if let Some(t) = &r.tasks {
        tasks(&mut s, t);
    }
    if let Some(e) = &r.callers {
        crate::report::calls::render(&mut s, e, true, &r.unit);
    }
    if let Some(e) = &r.callees {
        crate::report::calls::render(&mut s, e, false, &r.unit);
    }
    if opts.tree {
        tree(&mut s, r, opts);
    }
    for f in &r.annotate {
        annotated(&mut s, r, f);
    }
    for d in &r.diagnostics {
        let label = if d.severity == super::model::Severity::Warning {
            paint("1;33", "warning")
        } else {
            paint("1;36", "note")
        };
        let _ = writeln!(s, "\n{label}: {}", d.message);
    }
    s
}

fn header_sampled(s: &mut String, r: &Report, f: &Facts) {
    let _ = writeln!(
        s,
        "{} {} on {} · {} samples · unit: {}",
        paint("1", "Profile of"),
        paint("1", &f.firmware),
        f.machine,
        r.samples.unwrap_or(0),
        f.unit
    );
    if f.timer_hz == 0 && f.period_ticks <= 1.0 {
        // A text dump says nothing of the timer.
        let _ = writeln!(
            s,
            "taken {} · period and timer not recorded in the dump",
            f.taken
        );
    } else if f.timer.starts_with("DWT_PCSR") {
        // The host's reads set the pace: there is no period to state.
        let _ = writeln!(
            s,
            "DWT_PCSR read by the host through the probe, as fast as it allows (no period: the \
             reads' moments are the probe's)"
        );
        let _ = writeln!(s, "taken {} · {}", f.taken, f.stop);
    } else {
        // A board whose clock was not given has cycles and no times.
        let board = f.timer_hz == 0;
        let jitter = match (f.jitter_ticks, board) {
            (0, _) => "constant period".to_owned(),
            (n, true) => format!("random span {n}"),
            (n, false) => format!("random span {n} ticks"),
        };
        let timer = if board {
            f.timer.clone()
        } else {
            format!(
                "{:.1} ticks of {} {}",
                f.period_ticks,
                f.timer,
                si(f.timer_hz)
            )
        };
        let _ = writeln!(
            s,
            "period {:.0} {} mean ({timer}, {jitter}), priority {:#04x}{}",
            f.period_units,
            f.unit,
            f.priority,
            if board && f.timer == "the firmware's timer" {
                " · its clock not given (`sampler_rt::Timer::hz`): ticks taken as core cycles"
            } else if board && !f.on_events {
                " · clock not given (`--clock HZ`)"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "taken {} · lost {} · run ≈ {} {} · {}",
            f.taken,
            f.lost,
            big(f.duration_units),
            f.unit,
            f.stop
        );
    }
    if let (Some(max), Some(n)) = (r.max_error_points, r.exact_instructions) {
        let worst = r
            .functions
            .iter()
            .filter(|row| {
                row.error_points
                    .is_some_and(|e| (e.abs() - max).abs() < 1e-12)
            })
            .map(|row| row.name.as_str())
            .next()
            .unwrap_or("-");
        let _ = writeln!(
            s,
            "exact: {n} instructions counted (sampler-rt's own excluded) · largest error {max:.2} points ({worst})"
        );
        if let Some(u) = &r.unseen {
            for line in u.lines(n) {
                let _ = writeln!(s, "{line}");
            }
        }
    }
    if let Some(t) = &r.timing {
        let _ = writeln!(
            s,
            "cycles: each row's share of the cycles estimated by the {} from its samples and, \
             beside it, from the exact counts (the samples fall by instructions; diff and sigma \
             judge those)",
            t.model
        );
    }
    if let Some(u) = &r.unwinding {
        let rooted = u.complete + u.handler_root;
        let failed: u64 = u.failed.iter().map(|f| f.1).sum();
        let _ = writeln!(
            s,
            "stacks: {rooted} of {} unwound to their root ({:.2} %){}{} · {} tail calls put \
             back · {} exception frames · deepest stack kept {} words",
            u.samples,
            100.0 * rooted as f64 / u.samples.max(1) as f64,
            if u.truncated > 0 {
                format!(" · {} cut short by the window", u.truncated)
            } else {
                String::new()
            },
            if failed > 0 {
                format!(" · {failed} failed")
            } else {
                String::new()
            },
            u.tail_calls,
            u.exception_frames,
            u.window_words
        );
    }
}

/// A time given in microseconds, in the unit that reads best (`812 µs`, `12.3 ms`, `1.52 s`).
/// A duration given in seconds, in the unit that suits it.
pub fn duration_of(seconds: f64) -> String {
    duration(seconds * 1e6)
}

fn duration(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3} ms", us / 1e3)
    } else if us >= 1.0 {
        format!("{us:.2} µs")
    } else {
        format!("{:.0} ns", us * 1e3)
    }
}

/// `48 MHz`, `32.768 kHz`.
fn hertz(hz: u32) -> String {
    let hz = f64::from(hz);
    if hz >= 1e6 {
        format!("{} MHz", hz / 1e6)
    } else if hz >= 1e3 {
        format!("{} kHz", hz / 1e3)
    } else {
        format!("{hz} Hz")
    }
}

fn header_exact(s: &mut String, r: &Report, f: &ExactFacts) {
    let n = r.instructions.unwrap_or(0);
    match (&r.timing, r.cycles) {
        (Some(t), Some(c)) => {
            let _ = writeln!(
                s,
                "{} {} on {} · {} estimated cycles ({c}) · {} instructions · CPI {:.3} · unit: \
                 estimated cycles",
                paint("1", "Exact profile of"),
                paint("1", &f.firmware),
                f.machine,
                big(c as f64),
                big(n as f64),
                t.cpi,
            );
            let _ = writeln!(
                s,
                "every executed instruction counted by {} · {} · cycles estimated by the {} \
                 (not measured){}{}",
                f.counted_by,
                f.stop,
                t.model,
                match (t.clock_hz, t.seconds) {
                    (Some(hz), Some(sec)) => format!(" · {} at {}", duration(sec * 1e6), hertz(hz)),
                    _ => String::new(),
                },
                match (t.exceptions, t.chained_exceptions) {
                    (0, _) => String::new(),
                    (n, Some(c)) if c > 0 => format!(
                        " · {} exception entries, {} of them tail-chained or late",
                        big(n as f64),
                        big(c as f64)
                    ),
                    (n, _) => format!(" · {} exception entries", big(n as f64)),
                }
            );
            for c in &t.caveats {
                let _ = writeln!(s, "{}", paint("2", &format!("note: {c}")));
            }
        }
        _ => {
            let _ = writeln!(
                s,
                "{} {} on {} · {} instructions ({n}) · unit: instructions",
                paint("1", "Exact profile of"),
                paint("1", &f.firmware),
                f.machine,
                big(n as f64),
            );
            let _ = writeln!(
                s,
                "every executed instruction counted by {} · {}",
                f.counted_by, f.stop
            );
        }
    }
    if let Some(st) = r.stack {
        let _ = writeln!(
            s,
            "main stack: {} bytes at its deepest, of {} between {:#010x} and the data below \
             (stores counted; an exception frame the core pushed there adds up to 32 bytes, 104 \
             with the FPU's state)",
            st.bytes,
            st.top - st.limit,
            st.top
        );
    }
}

fn table(s: &mut String, title: &str, rows: &[Row], opts: Options, show_fn: bool) {
    let truth = rows.iter().any(|r| r.exact_percent.is_some());
    let exact_mode = rows.iter().any(|r| r.instructions.is_some());
    let extra = if truth {
        format!(" {:>8} {:>7} {:>6}", "exact", "diff", "sigma")
    } else {
        String::new()
    };
    let cycle_shares = rows.iter().any(|r| r.cycles_percent.is_some());
    let extra = if cycle_shares {
        format!("{extra} {:>8} {:>8}", "cycles", "exact")
    } else {
        extra
    };
    let inclusive = rows.iter().any(|r| r.inclusive_percent.is_some());
    // Sampled with stacks: the inclusive share beside the self share (and the exact one).
    let sampled_inclusive = rows.iter().any(|r| r.inclusive_samples.is_some());
    let exact_inclusive = rows.iter().any(|r| r.exact_inclusive_percent.is_some());
    let extra = if sampled_inclusive {
        format!(
            "{extra} {:>9}{}",
            "inclusive",
            if exact_inclusive { "    exact" } else { "" }
        )
    } else {
        extra
    };
    let cycles = rows.iter().any(|r| r.cycles.is_some());
    let timed = rows.iter().any(|r| r.microseconds.is_some());
    // An exact run's functions: how many times each was called (exceptions say their entries
    // beside the name).
    let calls =
        exact_mode && !title.starts_with("exception") && rows.iter().any(|r| r.calls.is_some());
    let calls_col = |row: &Row| match (calls, row.calls) {
        (false, _) => String::new(),
        (true, Some(n)) => format!(" {n:>10}"),
        (true, None) => format!(" {:>10}", ""),
    };
    let calls_head = if calls {
        format!(" {:>10}", "calls")
    } else {
        String::new()
    };
    let head = if cycles {
        format!(
            "{:>8} {:>14}{} {:>12} {:>5}{}{calls_head}   {title}",
            "self",
            "cycles",
            if timed {
                format!(" {:>10}", "time")
            } else {
                String::new()
            },
            "instructions",
            "CPI",
            if inclusive {
                format!(" {:>9} {:>14}", "inclusive", "incl. cycles")
            } else {
                String::new()
            }
        )
    } else if exact_mode && inclusive {
        format!(
            "{:>8} {:>14} {:>9}{calls_head}   {title}",
            "self", "instructions", "inclusive"
        )
    } else if exact_mode {
        format!(
            "{:>8} {:>14}{calls_head}   {title}",
            "share", "instructions"
        )
    } else {
        format!(
            "{:>8} {:>9} {:>17}{extra}   {title}",
            "share", "samples", "95% interval"
        )
    };
    let _ = writeln!(s, "\n{}", paint("1", &head));
    if inclusive || sampled_inclusive {
        let note = format!(
            "  inclusive: the function, what it called, and the exceptions that interrupted it \
             while it ran (a handler's time counts under the code it interrupted){}",
            if exact_inclusive {
                ", in both columns"
            } else {
                ""
            }
        );
        let _ = writeln!(s, "{}", paint("2", &note));
    }
    let mut shown = 0;
    let mut hidden = (0usize, 0u64);
    for row in rows {
        // Code that ran a negligible share and was never sampled says nothing.
        let negligible = row.count == 0
            && row.exact_percent.is_none_or(|x| x < 0.005)
            && row.inclusive_samples.unwrap_or(0) == 0;
        if (opts.top != 0 && shown >= opts.top) || row.percent < opts.min_percent || negligible {
            hidden.0 += 1;
            hidden.1 += row.count;
            continue;
        }
        shown += 1;
        let mut name = row.name.clone();
        if show_fn
            && let Some(func) = &row.function
            && func != &row.name
        {
            name = format!("{name}  {}", paint("2", &format!("in {func}")));
        }
        if let Some(n) = row.calls.filter(|_| title.starts_with("exception")) {
            name = format!(
                "{name}  {}",
                paint(
                    "2",
                    &format!("{n} entr{}", if n == 1 { "y" } else { "ies" })
                )
            );
        }
        let mut cols = String::new();
        if let (Some(x), Some(e), Some(sg)) = (row.exact_percent, row.error_points, row.error_sigma)
        {
            let mark = if sg.abs() > 3.0 { "!" } else { " " };
            cols = format!(" {x:>7.2}% {e:>+7.2} {sg:>+5.1}{mark}");
            if sg.abs() > 3.0 {
                cols = paint("1;31", &cols);
            }
        }
        if let (Some(c), Some(x)) = (row.cycles_percent, row.exact_cycles_percent) {
            cols.push_str(&format!(" {c:>7.2}% {x:>7.2}%"));
        }
        if let (Some(inc), true) = (row.inclusive_percent, sampled_inclusive) {
            // A lower bound where stacks stopped short of their root.
            let at_least = if row.inclusive_at_most_percent.is_some() {
                "≥"
            } else {
                " "
            };
            cols.push_str(&format!(" {at_least}{inc:>7.2}%"));
            if let Some(x) = row.exact_inclusive_percent {
                cols.push_str(&format!(" {x:>7.2}%"));
            }
        }
        if let Some(c) = row.cycles {
            let cpi = row.cpi.map(|x| format!("{x:.2}")).unwrap_or_default();
            let inc = match (row.inclusive_percent, row.inclusive_cycles) {
                (Some(p), Some(ic)) => format!(" {p:>8.2}% {ic:>14}"),
                _ => String::new(),
            };
            let time = row
                .microseconds
                .map(|us| format!(" {:>10}", duration(us)))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{:>7.2}% {c:>14}{time} {:>12} {cpi:>5}{inc}{}   {name}",
                row.percent,
                row.instructions.unwrap_or(0),
                calls_col(row)
            );
            continue;
        }
        match row.ci95 {
            Some([lo, hi]) => {
                let _ = writeln!(
                    s,
                    "{:>7.2}% {:>9} {:>7.2} – {:<7.2}{cols}   {name}",
                    row.percent, row.count, lo, hi
                );
            }
            None => match row.inclusive_percent {
                Some(inc) => {
                    let _ = writeln!(
                        s,
                        "{:>7.2}% {:>14} {:>8.2}%{}   {name}",
                        row.percent,
                        row.count,
                        inc,
                        calls_col(row)
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "{:>7.2}% {:>14}{}   {name}",
                        row.percent,
                        row.count,
                        calls_col(row)
                    );
                }
            },
        }
    }
    if hidden.0 > 0 {
        let what = if cycles {
            "estimated cycles"
        } else if exact_mode {
            "instructions"
        } else {
            "samples"
        };
        let _ = writeln!(
            s,
            "{}",
            paint(
                "2",
                &format!("   ... {} more rows, {} {what}", hidden.0, hidden.1)
            )
        );
    }
}

fn tree(s: &mut String, r: &Report, opts: Options) {
    // The call tree of sampled stacks has no exact column (the exact graph is by function).
    let truth = r.max_error_points.is_some() && r.unwinding.is_none();
    let head = format!(
        "{:>8} {:>8}{}   {}",
        "total",
        "self",
        if truth {
            format!(" {:>8}", "exact")
        } else {
            String::new()
        },
        if r.unwinding.is_some() {
            "call tree (each function below its caller, what was inlined into it below it)"
        } else {
            "inline tree (a function, then what was inlined into it)"
        }
    );
    let _ = writeln!(s, "\n{}", paint("1", &head));
    let mut shown = 0;
    for node in &r.tree {
        if (opts.top != 0 && shown >= opts.top) || !worth_showing(node, opts) {
            continue;
        }
        shown += 1;
        tree_node(s, node, 0, opts, truth);
    }
    if shown < r.tree.len() {
        let _ = writeln!(
            s,
            "{}",
            paint(
                "2",
                &format!("   ... {} more functions", r.tree.len() - shown)
            )
        );
    }
}

fn tree_node(s: &mut String, n: &Node, depth: usize, opts: Options, truth: bool) {
    let exact = match (truth, n.exact_total_percent) {
        (true, Some(x)) => format!(" {x:>7.2}%"),
        (true, None) => format!(" {:>8}", ""),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "{:>7.2}% {:>7.2}%{exact}   {}{}",
        n.total_percent,
        n.self_percent,
        "  ".repeat(depth),
        n.name
    );
    for c in &n.children {
        if worth_showing(c, opts) {
            tree_node(s, c, depth + 1, opts, truth);
        }
    }
}

/// Above `--min-percent`, and sampled or at least 0.005 % of the exact count.
fn worth_showing(n: &Node, opts: Options) -> bool {
    n.total_percent >= opts.min_percent
        && (n.total_count > 0 || n.exact_total_percent.is_some_and(|x| x >= 0.005))
}

fn annotated(s: &mut String, r: &Report, f: &annotate::Function) {
    let unit = if r.cycles.is_some() {
        "estimated cycles"
    } else if r.mode == crate::runs::Mode::Exact {
        "instructions"
    } else {
        "samples"
    };
    let _ = writeln!(
        s,
        "\n{} {:.2}% ({} {unit}) · {:#010x}..{:#010x}",
        paint("1", &f.name),
        f.percent,
        f.count,
        f.start,
        f.end
    );
    let truth = f.instructions.iter().any(|i| i.exact_percent.is_some());
    for i in &f.instructions {
        if let Some(line) = &i.line {
            let text = match &i.source {
                Some(src) => format!("{line}  {src}"),
                None => line.clone(),
            };
            let _ = writeln!(s, "{:>30}{}", "", paint("2", &text));
        }
        let exact = match i.exact_percent {
            Some(x) if truth => format!(" {x:>7.2}%"),
            _ => String::new(),
        };
        let counts = if i.count > 0 {
            format!("{:>7.2}% {:>9}", i.percent, i.count)
        } else {
            format!("{:>8} {:>9}", "", "")
        };
        let text = if i.data {
            paint("2", &i.text)
        } else {
            i.text.clone()
        };
        let row = format!("{counts}{exact}   {:>8x}:  {text}", i.addr);
        let _ = writeln!(
            s,
            "{}",
            if i.percent >= 5.0 {
                paint("1", &row)
            } else {
                row
            }
        );
    }
}
