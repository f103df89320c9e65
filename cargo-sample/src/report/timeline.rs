//! The samples in the order they were taken, for formats with a time axis: the Firefox
//! Profiler's processed format (`--format firefox`, opened at profiler.firefox.com or with
//! `samply load`), where each tag (RTIC task, handler, RTOS object) is a thread, and laps and
//! the firmware's log lines are markers among the samples.

use std::collections::HashMap;

use anyhow::{Context, Result};
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, Profile, ReferenceTimestamp, SamplingInterval,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, Timestamp,
};

pub use super::model::{CounterTrack, MarkerKind, Timeline, TimelineMarker};
use super::model::{OUTSIDE, Report, RunFacts};
use crate::analysis::laps::Scale;
use crate::dump::laps::{Laps, Trace};
use crate::image::symbolize::Symbolizer;

impl Timeline {
    /// Each PC's inline chain (function, then what was inlined into it).
    pub fn of_pcs(sym: &mut Symbolizer, ordered: &[u32]) -> Timeline {
        let mut index: HashMap<u32, u32> = HashMap::new();
        let mut t = Timeline::default();
        for &pc in ordered {
            let i = *index.entry(pc).or_insert_with(|| {
                t.stacks.push(super::tree::chain(sym, pc, OUTSIDE));
                (t.stacks.len() - 1) as u32
            });
            t.samples.push(i);
        }
        t
    }

    /// The traced laps as markers. Its length is the lap's corrected ticks in the report's
    /// unit over the mean sampling period in the same unit (or the samples it held, when the
    /// period's length is unknown); it is placed so that it holds the samples the firmware
    /// counted during it.
    pub fn add_laps(
        &mut self,
        laps: &Laps,
        trace: &Trace,
        scale: Scale,
        period_units: f64,
        unit: &str,
    ) {
        for l in &trace.laps {
            let Some(region) = laps.regions.get(l.region as usize) else {
                continue;
            };
            let units = f64::from(l.ticks.saturating_sub(laps.overhead)) * scale.units_per_tick;
            let periods = if period_units > 0.0 {
                units / period_units
            } else {
                f64::from(l.inside)
            };
            let time = scale
                .hz
                .map(|hz| {
                    let s = f64::from(l.ticks.saturating_sub(laps.overhead)) / hz;
                    format!(", {:.2} µs", s * 1e6)
                })
                .unwrap_or_default();
            self.markers.push(TimelineMarker {
                kind: MarkerKind::Lap,
                name: region.name.clone(),
                at: placed(l.start_seq, l.inside, periods),
                periods,
                units,
                samples: l.inside,
                text: format!("{units:.0} {unit}{time}"),
                thread: None,
            });
        }
    }

    /// Embassy's polls traced while sampling: a marker per poll on its task's thread (a thread
    /// of its own when no sample landed in the task), ending where the poll ended among the
    /// samples.
    pub fn add_polls(
        &mut self,
        trace: &crate::dump::tasks::Trace,
        name: impl Fn(u32) -> String,
        units_per_tick: f64,
        period_units: f64,
        unit: &str,
    ) {
        if period_units <= 0.0 {
            return;
        }
        for &(task, end_seq, ticks) in &trace.polls {
            let thread_name = name(task);
            let thread = self.thread_named(&thread_name);
            let units = f64::from(ticks) * units_per_tick;
            let periods = units / period_units;
            // It ended after sample `end_seq - 1` and before sample `end_seq`.
            let end = f64::from(end_seq) - 0.5;
            self.markers.push(TimelineMarker {
                kind: MarkerKind::Poll,
                name: thread_name
                    .strip_prefix("task ")
                    .unwrap_or(&thread_name)
                    .to_owned(),
                at: end - periods,
                periods,
                units,
                samples: 0,
                text: format!("{units:.0} {unit}"),
                thread: Some(thread),
            });
        }
    }

    /// The thread named `name`, added when there is none.
    fn thread_named(&mut self, name: &str) -> u32 {
        match self.threads.iter().position(|t| t == name) {
            Some(i) => i as u32,
            None => {
                self.threads.push(name.to_owned());
                (self.threads.len() - 1) as u32
            }
        }
    }

    /// The PMU regions' laps counted while sampling: a marker per lap (its counts, and the
    /// instructions per cycle when INST_RETIRED is counted), and a counter track per event
    /// (the cycle counter last) to which each lap adds its count at its end. The cycle
    /// counter's delta, in the report's unit (`units_per_cycle`), is the lap's length.
    pub fn add_pmu(
        &mut self,
        record: &crate::dump::pmu::Record,
        trace: &crate::dump::pmu::Trace,
        units_per_cycle: f64,
        period_units: f64,
        name: impl Fn(u16) -> String,
    ) {
        let mut names: Vec<String> = record.events.iter().map(|&e| name(e)).collect();
        names.push("cycle counter".into());
        let mut tracks: Vec<CounterTrack> = names
            .iter()
            .enumerate()
            .map(|(i, n)| CounterTrack {
                name: n.clone(),
                description: match record.events.get(i) {
                    Some(e) => format!("PMU event {e:#06x}, counted in the regions' laps"),
                    None => "PMCCNTR_EL0, counted in the regions' laps".into(),
                },
                points: Vec::new(),
            })
            .collect();
        for l in &trace.laps {
            let (Some(region), Some(&cycles)) =
                (record.regions.get(l.region as usize), l.deltas.last())
            else {
                continue;
            };
            if l.deltas.len() != names.len() {
                continue;
            }
            let units = f64::from(cycles) * units_per_cycle;
            let periods = if period_units > 0.0 {
                units / period_units
            } else {
                f64::from(l.inside)
            };
            let at = placed(l.start_seq, l.inside, periods);
            let mut text: Vec<String> = names
                .iter()
                .zip(&l.deltas)
                .map(|(n, d)| format!("{n} {d}"))
                .collect();
            let inst = record.events.iter().position(|&e| e == 0x08);
            if let Some(i) = inst.filter(|_| cycles > 0) {
                text.push(format!(
                    "IPC {:.3}",
                    f64::from(l.deltas[i]) / f64::from(cycles)
                ));
            }
            self.markers.push(TimelineMarker {
                kind: MarkerKind::Lap,
                name: region.name.clone(),
                at,
                periods,
                units,
                samples: l.inside,
                text: text.join(" · "),
                thread: None,
            });
            for (track, &d) in tracks.iter_mut().zip(&l.deltas) {
                track.points.push((at, 0.0));
                track.points.push((at + periods, f64::from(d)));
            }
        }
        self.counters
            .extend(tracks.into_iter().filter(|t| !t.points.is_empty()));
    }

    /// The firmware's log lines as instants: a line stamped with `k` samples taken was
    /// logged between samples `k - 1` and `k`.
    pub fn add_logs(&mut self, lines: &[crate::dump::defmt::LogLine]) {
        for l in lines {
            let Some(k) = l.samples_taken() else { continue };
            let mut text = l.message.clone();
            if let Some(loc) = &l.location {
                text.push_str(&format!("  ({loc})"));
            }
            self.markers.push(TimelineMarker {
                kind: MarkerKind::Log,
                name: l.level.clone(),
                at: f64::from(k) - 0.5,
                periods: 0.0,
                units: 0.0,
                samples: 0,
                text,
                thread: None,
            });
        }
    }

    /// Threads from the samples' tags, named as the report's tag table names them.
    pub fn set_threads(&mut self, tags: &[u32], name: impl Fn(u32) -> String) {
        if tags.len() != self.samples.len() || tags.is_empty() {
            return;
        }
        let mut index: HashMap<u32, u32> = HashMap::new();
        self.thread_of = tags
            .iter()
            .map(|&t| {
                *index.entry(t).or_insert_with(|| {
                    self.threads.push(name(t));
                    (self.threads.len() - 1) as u32
                })
            })
            .collect();
    }
}

/// Where a lap of `periods` sampling periods starts on the samples' axis (sample `k` at `k`):
/// it began after sample `start_seq - 1` and before sample `start_seq`, and held samples
/// `start_seq` to `start_seq + inside - 1`. Of the starts that keep exactly those samples
/// inside, the middle one.
fn placed(start_seq: u32, inside: u32, periods: f64) -> f64 {
    let (s, inside) = (f64::from(start_seq), f64::from(inside));
    let lo = (s - 1.0).max(s + inside - 1.0 - periods);
    let hi = s.min(s + inside - periods);
    (lo + hi) / 2.0
}

/// The report's timeline in the Firefox Profiler's processed profile format (JSON).
pub fn firefox(r: &Report) -> Result<Vec<u8>> {
    let t = r.timeline.as_ref().context(
        "`--format firefox` needs the samples in the order taken: a sampled run's ring (not bins, \
         not an exact count)",
    )?;
    let RunFacts::Sampled(f) = &r.facts else {
        anyhow::bail!("`--format firefox` is for sampled runs; an exact count has no time axis");
    };
    // The time between two samples: the mean period in seconds when the clock is known, else
    // a nanosecond per unit (an instruction in QEMU).
    let period_s = if f.timer_hz > 0 {
        f.period_ticks / f.timer_hz as f64
    } else {
        f.period_units * 1e-9
    }
    .max(1e-9);
    let mut p = Profile::new(
        &format!("{} · {}", r.facts_firmware(), r.facts_machine()),
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_nanos((period_s * 1e9) as u64),
    );
    let process = p.add_process(
        &r.facts_firmware(),
        1,
        Timestamp::from_millis_since_reference(0.0),
    );
    let names: Vec<String> = if t.threads.is_empty() {
        vec![r.facts_firmware()]
    } else {
        t.threads.clone()
    };
    let threads: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            // Not the process's main thread, which would be named after the process.
            let h = p.add_thread(
                process,
                i as u32 + 1,
                Timestamp::from_millis_since_reference(0.0),
                false,
            );
            p.set_thread_name(h, n);
            h
        })
        .collect();
    // Each thread interns its own stacks.
    let mut interned: HashMap<(usize, u32), Option<fxprof_processed_profile::StackHandle>> =
        HashMap::new();
    let at = |periods: f64| Timestamp::from_millis_since_reference(periods * period_s * 1e3);
    for (k, &s) in t.samples.iter().enumerate() {
        let th = t.thread_of.get(k).copied().unwrap_or(0) as usize;
        let thread = threads[th];
        let stack = match interned.get(&(th, s)) {
            Some(h) => *h,
            None => {
                let frames: Vec<FrameInfo> = t.stacks[s as usize]
                    .iter()
                    .map(|name| FrameInfo {
                        frame: Frame::Label(p.intern_string(name)),
                        category_pair: CategoryHandle::OTHER.into(),
                        flags: FrameFlags::empty(),
                    })
                    .collect();
                let h = p.intern_stack_frames(thread, frames.into_iter());
                interned.insert((th, s), h);
                h
            }
        };
        let seq = f64::from(t.first_seq) + k as f64;
        p.add_sample(
            thread,
            at(seq),
            stack,
            CpuDelta::from_millis(period_s * 1e3),
            1,
        );
    }
    for c in &t.counters {
        let h = p.add_counter(process, &c.name, "PMU", &c.description);
        for &(when, count) in &c.points {
            p.add_counter_sample(h, at(when.max(0.0)), count, u32::from(count > 0.0));
        }
    }
    if !t.markers.is_empty() {
        // On the only thread, beside its samples; with threads per tag, on a thread of their
        // own (a lap or a line belongs to no one task).
        let thread = if threads.len() == 1 || t.markers.iter().all(|m| m.thread.is_some()) {
            threads[0]
        } else {
            let h = p.add_thread(
                process,
                threads.len() as u32 + 1,
                Timestamp::from_millis_since_reference(0.0),
                false,
            );
            p.set_thread_name(h, "laps and logs");
            h
        };
        p.set_thread_show_markers_in_timeline(thread, true);
        let laps = p.add_category("Lap", CategoryColor::Blue);
        let logs = p.add_category("Log", CategoryColor::Green);
        let polls = p.add_category("Poll", CategoryColor::Yellow);
        for m in &t.markers {
            let name = p.intern_string(&m.name);
            let text = p.intern_string(&m.text);
            match m.kind {
                MarkerKind::Lap => p.add_marker(
                    thread,
                    MarkerTiming::Interval(at(m.at), at(m.at + m.periods)),
                    LapMarker {
                        name,
                        text,
                        category: laps,
                        units: m.units,
                        samples: m.samples,
                    },
                ),
                MarkerKind::Poll => {
                    let on = m
                        .thread
                        .and_then(|i| threads.get(i as usize))
                        .copied()
                        .unwrap_or(thread);
                    p.set_thread_show_markers_in_timeline(on, true);
                    p.add_marker(
                        on,
                        MarkerTiming::Interval(at(m.at), at(m.at + m.periods)),
                        PollMarker {
                            name,
                            text,
                            category: polls,
                            units: m.units,
                        },
                    )
                }
                MarkerKind::Log => p.add_marker(
                    thread,
                    MarkerTiming::Instant(at(m.at)),
                    LogMarker {
                        name,
                        text,
                        category: logs,
                    },
                ),
            };
        }
    }
    Ok(serde_json::to_vec(&p)?)
}

/// The name, category and one string field every marker type here has.
macro_rules! marker_text {
    () => {
        fn name(&self, _: &mut Profile) -> StringHandle {
            self.name
        }

        fn category(&self, _: &mut Profile) -> CategoryHandle {
            self.category
        }

        fn string_field_value(&self, _: u32) -> StringHandle {
            self.text
        }
    };
}

/// A lap of a timed region.
struct LapMarker {
    name: StringHandle,
    text: StringHandle,
    category: CategoryHandle,
    units: f64,
    samples: u32,
}

impl StaticSchemaMarker for LapMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "Lap";
    const DESCRIPTION: Option<&'static str> =
        Some("A lap of a region timed with sampler_rt::laps, its own cost subtracted");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.lap}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.lap}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.lap}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "lap",
            label: "Lap",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "units",
            label: "Length (report unit)",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "samples",
            label: "Samples taken during the lap",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    marker_text!();

    fn number_field_value(&self, field_index: u32) -> f64 {
        if field_index == 1 {
            self.units.round()
        } else {
            f64::from(self.samples)
        }
    }
}

/// A poll of an Embassy task.
struct PollMarker {
    name: StringHandle,
    text: StringHandle,
    category: CategoryHandle,
    units: f64,
}

impl StaticSchemaMarker for PollMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "Poll";
    const DESCRIPTION: Option<&'static str> =
        Some("A poll of an Embassy task, timed by sampler-rt's trace hooks");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.poll}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.poll}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.poll}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "poll",
            label: "Poll",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "units",
            label: "Length (report unit)",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    marker_text!();

    fn number_field_value(&self, _: u32) -> f64 {
        self.units.round()
    }
}

/// A line the firmware logged.
struct LogMarker {
    name: StringHandle,
    text: StringHandle,
    category: CategoryHandle,
}

impl StaticSchemaMarker for LogMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "Log";
    const DESCRIPTION: Option<&'static str> = Some("A line the firmware logged with defmt");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.message}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.message}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.message}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "message",
        label: "Message",
        format: MarkerFieldFormat::String,
        flags: MarkerFieldFlags::SEARCHABLE,
    }];

    marker_text!();

    fn number_field_value(&self, _: u32) -> f64 {
        0.0
    }
}
