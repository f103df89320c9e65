//! The dump's TASKS record: what sampler-rt's Embassy hooks kept of each task (polls, time in
//! polls, wake-to-poll latency) and of the executor's idle time, in raw counter ticks.

use sampler_rt::wire;

use super::le::read_u32;

/// The TASKS record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    /// `wire::LAP_COUNTER_*`: what the ticks are (none: polls are counted, not timed).
    pub counter: u8,
    /// Polls of tasks beyond the runtime's table.
    pub dropped: u32,
    /// The executor whose idle time was kept (its address).
    pub executor: u32,
    /// Ticks from the first spawn to the dump.
    pub span: u64,
    /// Ticks the executor spent idle (from `executor_idle` to the next `poll_start`).
    pub idle: u64,
    pub idle_periods: u32,
    /// Hooks of executors beyond the runtime's table (their idle time is not kept).
    pub other_executors: u32,
    /// Ticks of the sampler's own work inside the run (streaming its ring), left out of every
    /// poll, latency and idle period.
    pub stolen: u64,
    pub tasks: Vec<Task>,
    /// Every executor whose idle time was kept, the first (the one above) first; empty in
    /// dumps from before the record had them.
    pub executors: Vec<Executor>,
    /// Hook events overwritten before the runtime folded them (its ring was too small for
    /// what happened between two folds): the statistics miss them. 0 in dumps from before.
    pub lost_events: u32,
    /// Hook events still held, not folded, when a host read the table out of memory (a run
    /// stopped before the firmware's end): the last polls are missing. Always 0 in a dump
    /// (the firmware folds them all first).
    pub unfolded_events: u32,
}

/// One executor's idle time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Executor {
    /// Its address.
    pub id: u32,
    /// The exception number it idled in (IPSR at its idle hook; 0: thread mode, 16 + n: IRQ n).
    pub context: u32,
    /// Ticks idle (from `executor_idle` to the next `poll_start`), the sampler's own left out.
    pub idle: u64,
    pub periods: u32,
}

/// One task's statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Task {
    /// The task's header address.
    pub id: u32,
    pub polls: u32,
    /// The longest poll, in ticks.
    pub max_poll: u32,
    /// Ticks in polls.
    pub busy: u64,
    /// Wakes followed by a poll (each measured from the first wake since the previous poll
    /// began).
    pub wakes: u32,
    pub max_latency: u32,
    pub latency: u64,
    /// It ran to completion.
    pub ended: bool,
    /// Poll lengths by leading zeros of their ticks ([`bin_range`]).
    pub poll_hist: Vec<u32>,
    /// Latencies, the same way.
    pub latency_hist: Vec<u32>,
}

impl Tasks {
    /// Whether polls were timed.
    pub fn timed(&self) -> bool {
        self.counter != wire::LAP_COUNTER_NONE
    }
}

/// The TASK_TRACE record: the newest polls in the order they ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Polls traced while the sampler ran (the oldest beyond `polls` were overwritten).
    pub total: u32,
    /// `(task, samples taken when the poll ended, ticks)`, oldest first.
    pub polls: Vec<(u32, u32, u32)>,
}

/// Decode a TASK_TRACE payload; `None` if it is damaged.
pub fn decode_trace(p: &[u8]) -> Option<Trace> {
    let total = read_u32(p, 0)?;
    let count = read_u32(p, 4)? as usize;
    if count > total as usize || count > p.len().saturating_sub(8) / 12 {
        return None;
    }
    let polls = (0..count)
        .map(|k| {
            let w = |i: usize| read_u32(p, 8 + 12 * k + 4 * i);
            Some((w(0)?, w(1)?, w(2)?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Trace { total, polls })
}

/// The values a histogram bin counts, in ticks: `[low, high)` (bin 32 holds the zeros).
pub fn bin_range(bin: usize) -> (u64, u64) {
    match bin {
        32 => (0, 1),
        b => (1u64 << (31 - b), 1u64 << (32 - b)),
    }
}

/// Decode a TASKS payload; `None` if it is damaged.
pub fn decode(p: &[u8]) -> Option<Tasks> {
    let w = |i: usize| read_u32(p, 4 * i);
    let u64_at = |i: usize| Some(u64::from(w(i)?) | u64::from(w(i + 1)?) << 32);
    let first = w(0)?;
    let bins = ((first >> 8) & 0xFF) as usize;
    let n = w(1)? as usize;
    let header = wire::TASKS_HEADER_WORDS as usize;
    let entry = wire::TASK_FIXED_WORDS as usize + 2 * bins;
    if bins != wire::TASK_BINS || p.len() < 4 * (header + n * entry) {
        return None;
    }
    let tasks = (0..n)
        .map(|k| {
            let at = header + k * entry;
            let hist = |from: usize| (0..bins).map(|b| w(from + b)).collect::<Option<Vec<_>>>();
            Some(Task {
                id: w(at)?,
                polls: w(at + 1)?,
                max_poll: w(at + 2)?,
                busy: u64_at(at + 3)?,
                wakes: w(at + 5)?,
                max_latency: w(at + 6)?,
                latency: u64_at(at + 7)?,
                ended: w(at + 9)? & wire::TASK_ENDED != 0,
                poll_hist: hist(at + 10)?,
                latency_hist: hist(at + 10 + bins)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    // The executors section, where the record has one.
    let at = header + n * entry;
    let mut lost_events = 0;
    let executors = match w(at) {
        None => Vec::new(),
        Some(m) => {
            let e = wire::EXECUTOR_WORDS as usize;
            if m as usize > 1 + wire::MORE_EXECUTORS || p.len() < 4 * (at + 1 + m as usize * e) {
                return None;
            }
            // Then the events lost, where the record has them.
            lost_events = w(at + 1 + m as usize * e).unwrap_or(0);
            (0..m as usize)
                .map(|k| {
                    let b = at + 1 + k * e;
                    Some(Executor {
                        id: w(b)?,
                        context: w(b + 1)?,
                        idle: u64_at(b + 2)?,
                        periods: w(b + 4)?,
                    })
                })
                .collect::<Option<Vec<_>>>()?
        }
    };
    Some(Tasks {
        counter: first as u8,
        dropped: w(2)?,
        executor: w(3)?,
        span: u64_at(4)?,
        idle: u64_at(6)?,
        idle_periods: w(8)?,
        other_executors: w(9)?,
        stolen: u64_at(10)?,
        tasks,
        executors,
        lost_events,
        unfolded_events: 0,
    })
}

/// The statistics as a host reads them out of the firmware's memory (sampler-rt's task table,
/// `wire::tasks_table`), with the figures the firmware's TASKS record would have: up to the
/// run's end if it ended, else up to the last executor hook. `None` before the first spawn.
pub fn from_memory(b: &[u8]) -> Option<Tasks> {
    use wire::tasks_table as w;
    let r32 = |at: usize| read_u32(b, at);
    let r64 = |at: usize| Some(u64::from(read_u32(b, at)?) | u64::from(read_u32(b, at + 4)?) << 32);
    if r32(w::CHOSEN)? == 0 {
        return None;
    }
    let counter = r32(w::COUNTER)? as u8;
    let timed = counter != wire::LAP_COUNTER_NONE;
    let mask = r32(w::MASK)?;
    let ticks = |a: u32, z: u32| z.wrapping_sub(a) & mask;
    let last = r32(w::LAST)?;
    let end = if r32(w::ENDED)? != 0 {
        r32(w::END)?
    } else {
        last
    };
    let stolen = r32(w::STOLEN)?;
    let span = if timed {
        r64(w::SPAN)? + u64::from(ticks(last, end))
    } else {
        0
    };
    let mut idle = r64(w::IDLE)?;
    if timed && r32(w::IDLING)? != 0 {
        let inside = stolen.wrapping_sub(r32(w::IDLE_STOLEN)?);
        idle += u64::from(ticks(r32(w::IDLE_AT)?, end).wrapping_sub(inside));
    }
    let first = Executor {
        id: r32(w::EXECUTOR)?,
        context: r32(w::CONTEXT)?,
        idle,
        periods: r32(w::IDLE_PERIODS)?,
    };
    let mut executors = vec![first];
    for k in 0..wire::MORE_EXECUTORS {
        let at = w::MORE + k * w::EXEC_SIZE;
        let id = r32(at + w::EXEC_ID)?;
        if id == 0 {
            continue;
        }
        let mut idle = r64(at + w::EXEC_IDLE)?;
        if timed && r32(at + w::EXEC_IDLING)? != 0 {
            let inside = stolen.wrapping_sub(r32(at + w::EXEC_IDLE_STOLEN)?);
            idle += u64::from(ticks(r32(at + w::EXEC_IDLE_AT)?, end).wrapping_sub(inside));
        }
        executors.push(Executor {
            id,
            context: r32(at + w::EXEC_CONTEXT)?,
            idle,
            periods: r32(at + w::EXEC_PERIODS)?,
        });
    }
    let slots = b.len().checked_sub(w::SLOTS)? / w::SLOT_SIZE;
    let mut tasks = Vec::new();
    for k in 0..slots {
        let at = w::SLOTS + k * w::SLOT_SIZE;
        let id = r32(at + w::ID)?;
        if id == 0 {
            continue;
        }
        let hist = |from: usize| {
            (0..wire::TASK_BINS)
                .map(|i| r32(at + from + 4 * i))
                .collect::<Option<Vec<_>>>()
        };
        tasks.push(Task {
            id,
            polls: r32(at + w::POLLS)?,
            max_poll: r32(at + w::MAX_POLL)?,
            busy: r64(at + w::BUSY)?,
            wakes: r32(at + w::WAKES)?,
            max_latency: r32(at + w::MAX_LATENCY)?,
            latency: r64(at + w::LATENCY)?,
            ended: r32(at + w::FLAGS)? & wire::TASK_ENDED != 0,
            poll_hist: hist(w::POLL_HIST)?,
            latency_hist: hist(w::LATENCY_HIST)?,
        });
    }
    Some(Tasks {
        counter,
        dropped: r32(w::DROPPED)?,
        executor: r32(w::EXECUTOR)?,
        span,
        idle,
        idle_periods: r32(w::IDLE_PERIODS)?,
        other_executors: r32(w::OTHERS)?,
        stolen: r64(w::STOLEN_TOTAL)?,
        tasks,
        executors,
        // Kept beside the table (the events still to fold are not in it yet).
        lost_events: 0,
        unfolded_events: 0,
    })
}

/// The TASKS payload of `t` (as the firmware writes it).
pub fn encode(t: &Tasks) -> Vec<u8> {
    let mut words = vec![
        u32::from(t.counter) | (wire::TASK_BINS as u32) << 8,
        t.tasks.len() as u32,
        t.dropped,
        t.executor,
        t.span as u32,
        (t.span >> 32) as u32,
        t.idle as u32,
        (t.idle >> 32) as u32,
        t.idle_periods,
        t.other_executors,
        t.stolen as u32,
        (t.stolen >> 32) as u32,
    ];
    for k in &t.tasks {
        words.extend([
            k.id,
            k.polls,
            k.max_poll,
            k.busy as u32,
            (k.busy >> 32) as u32,
            k.wakes,
            k.max_latency,
            k.latency as u32,
            (k.latency >> 32) as u32,
            if k.ended { wire::TASK_ENDED } else { 0 },
        ]);
        for h in [&k.poll_hist, &k.latency_hist] {
            words.extend((0..wire::TASK_BINS).map(|b| h.get(b).copied().unwrap_or(0)));
        }
    }
    if !t.executors.is_empty() {
        words.push(t.executors.len() as u32);
        for e in &t.executors {
            words.extend([
                e.id,
                e.context,
                e.idle as u32,
                (e.idle >> 32) as u32,
                e.periods,
            ]);
        }
        words.push(t.lost_events);
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Tasks {
        let mut poll_hist = vec![0; wire::TASK_BINS];
        poll_hist[32 - 7] = 3;
        Tasks {
            counter: wire::LAP_COUNTER_SYSTICK,
            dropped: 1,
            executor: 0x2000_0100,
            span: 5 << 32 | 7,
            idle: 1234,
            idle_periods: 9,
            other_executors: 0,
            stolen: 77,
            tasks: vec![Task {
                id: 0x2000_0200,
                polls: 3,
                max_poll: 100,
                busy: 250,
                wakes: 2,
                max_latency: 40,
                latency: 60,
                ended: true,
                poll_hist,
                latency_hist: vec![0; wire::TASK_BINS],
            }],
            executors: vec![
                Executor {
                    id: 0x2000_0100,
                    context: 0,
                    idle: 1234,
                    periods: 9,
                },
                Executor {
                    id: 0x2000_0300,
                    context: 23,
                    idle: 3 << 32 | 5,
                    periods: 4,
                },
            ],
            lost_events: 3,
            unfolded_events: 0,
        }
    }

    #[test]
    fn a_record_decodes_to_what_was_encoded_and_a_short_one_is_refused() {
        let t = sample();
        let bytes = encode(&t);
        assert_eq!(
            bytes.len(),
            4 * (wire::TASKS_HEADER_WORDS
                + wire::TASK_FIXED_WORDS
                + 2 * wire::TASK_BINS as u32
                + 1
                + 2 * wire::EXECUTOR_WORDS
                + 1) as usize
        );
        assert_eq!(decode(&bytes), Some(t.clone()));
        // A record from before the events lost were counted: none lost.
        let mut unaware = t.clone();
        unaware.lost_events = 0;
        assert_eq!(decode(&bytes[..bytes.len() - 4]), Some(unaware));
        assert_eq!(decode(&bytes[..bytes.len() - 8]), None);
        // A record from before the executors section: the same, without them.
        let short = 4
            * (wire::TASKS_HEADER_WORDS + wire::TASK_FIXED_WORDS + 2 * wire::TASK_BINS as u32)
                as usize;
        let mut before = t;
        before.executors.clear();
        before.lost_events = 0;
        assert_eq!(decode(&bytes[..short]), Some(before));
    }

    #[test]
    fn bins_are_powers_of_two_by_leading_zeros() {
        // 100 ticks has 25 leading zeros: bin 25 holds [64, 128).
        assert_eq!(bin_range(100u32.leading_zeros() as usize), (64, 128));
        assert_eq!(bin_range(0), (1 << 31, 1 << 32));
        assert_eq!(bin_range(32), (0, 1));
        assert_eq!(bin_range(31), (1, 2));
    }
}
