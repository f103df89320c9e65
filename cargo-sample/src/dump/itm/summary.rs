//! What an ITM/SWO stream held, summed up: packets by kind, PC samples, overflows, and the
//! exception trace turned into time per exception.

use super::*;

/// Counts of each kind of packet, and the PC samples in order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub pcs: Vec<u32>,
    pub sleep: u64,
    /// Where each sleep sample came among the PC samples: the number of PC samples before it.
    pub sleep_at: Vec<usize>,
    pub instrumentation: u64,
    pub event_counter: u64,
    pub exception: u64,
    pub data_trace: u64,
    pub sync: u64,
    pub overflow: u64,
    pub timestamp: u64,
    pub extension: u64,
    pub invalid: u64,
    pub skipped: u64,
    /// Exception trace, per exception number (lowest first).
    pub exceptions: Vec<ExceptionStats>,
}

/// What the exception trace tells of one exception: how often it was entered and, when the
/// stream carries local timestamps, how long each entry lasted until its exit (in timestamp
/// clock ticks, including any exception that preempted it).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ExceptionStats {
    pub number: u16,
    pub entries: u64,
    /// Entries whose exit was seen with a time on both ends.
    pub timed: u64,
    pub min: Option<u64>,
    pub mean: Option<f64>,
    pub max: Option<u64>,
}

/// Follows exception entries and exits, timed by the local timestamps that come after them.
#[derive(Debug, Default)]
struct ExceptionClock {
    /// Time of the last local timestamp (None before the first).
    time: Option<u64>,
    /// Events since that timestamp: `(number, function)`, timed by the next one.
    waiting: Vec<(u16, u8)>,
    /// Exceptions entered and not exited, innermost last, with their entry time.
    active: Vec<(u16, Option<u64>)>,
    stats: std::collections::BTreeMap<u16, (u64, u64, u64, u64, u64)>,
}

impl ExceptionClock {
    fn event(&mut self, number: u16, function: u8) {
        self.waiting.push((number, function));
    }

    fn timestamp(&mut self, delta: u32) {
        let t = self.time.unwrap_or(0) + delta as u64;
        self.time = Some(t);
        self.settle(Some(t));
    }

    /// Packets were lost: entries in progress can no longer be timed.
    fn lost(&mut self) {
        self.settle(None);
        self.active.clear();
    }

    fn settle(&mut self, at: Option<u64>) {
        for (number, function) in std::mem::take(&mut self.waiting) {
            // (entries, timed, sum, min, max)
            let st = self.stats.entry(number).or_insert((0, 0, 0, u64::MAX, 0));
            match function {
                1 => {
                    st.0 += 1;
                    self.active.push((number, at));
                }
                2 => {
                    if let Some(i) = self.active.iter().rposition(|a| a.0 == number) {
                        if let (Some(start), Some(end)) = (self.active[i].1, at) {
                            let d = end.saturating_sub(start);
                            st.1 += 1;
                            st.2 += d;
                            st.3 = st.3.min(d);
                            st.4 = st.4.max(d);
                        }
                        self.active.truncate(i);
                    }
                }
                _ => {}
            }
        }
    }

    fn finish(mut self) -> Vec<ExceptionStats> {
        // Events after the last timestamp are counted, not timed.
        self.settle(None);
        self.stats
            .into_iter()
            .map(|(number, (entries, timed, sum, min, max))| ExceptionStats {
                number,
                entries,
                timed,
                min: (timed > 0).then_some(min),
                mean: (timed > 0).then(|| sum as f64 / timed as f64),
                max: (timed > 0).then_some(max),
            })
            .collect()
    }
}

/// Decode a whole capture.
pub fn summarize(data: &[u8], wait_for_sync: bool) -> Summary {
    let mut s = Summary::default();
    let mut clock = ExceptionClock::default();
    let mut p = Parser::new(wait_for_sync);
    p.feed(data, &mut |e| match e {
        Event::PcSample(pc) => s.pcs.push(pc),
        Event::Sleep => {
            s.sleep += 1;
            s.sleep_at.push(s.pcs.len());
        }
        Event::Instrumentation { .. } => s.instrumentation += 1,
        Event::CounterWrap(_) => s.event_counter += 1,
        Event::ExceptionTrace { number, function } => {
            s.exception += 1;
            clock.event(number, function);
        }
        Event::DataTrace { .. } => s.data_trace += 1,
        Event::Sync => s.sync += 1,
        Event::Overflow => {
            s.overflow += 1;
            clock.lost();
        }
        Event::LocalTimestamp { delta, .. } => {
            s.timestamp += 1;
            clock.timestamp(delta);
        }
        Event::GlobalTimestamp { .. } => s.timestamp += 1,
        Event::Extension { .. } => s.extension += 1,
        Event::Invalid(_) => s.invalid += 1,
    });
    s.skipped = p.skipped;
    s.exceptions = clock.finish();
    s
}

/// One event per line, in the form the pyOCD cross-check prints too: timestamps as running
/// sums, instrumentation with port, value and size.
pub fn event_lines(data: &[u8], wait_for_sync: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut time = 0u64;
    let mut p = Parser::new(wait_for_sync);
    p.feed(data, &mut |e| {
        let _ = match e {
            Event::PcSample(pc) => writeln!(out, "pc {pc:#010x}"),
            Event::Sleep => writeln!(out, "sleep"),
            Event::Instrumentation { port, value, size } => {
                writeln!(out, "itm {port} {value:#x} {size}")
            }
            Event::CounterWrap(m) => writeln!(out, "counter {m:#04x}"),
            Event::ExceptionTrace { number, function } => {
                writeln!(out, "exception {number} {function}")
            }
            Event::Overflow => writeln!(out, "overflow"),
            Event::LocalTimestamp { delta, tc } => {
                time += delta as u64;
                writeln!(out, "timestamp {tc} {time}")
            }
            Event::DataTrace {
                comparator,
                kind,
                value,
                size,
            } => writeln!(out, "data {comparator} {kind:?} {value:#x} {size}"),
            Event::Sync | Event::GlobalTimestamp { .. } | Event::Extension { .. } => Ok(()),
            Event::Invalid(b) => writeln!(out, "invalid {b:#04x}"),
        };
    });
    out
}
