//! The samples in the order they were taken, for formats with a time axis: the Firefox
//! Profiler's processed format (`--format firefox`, opened at profiler.firefox.com or with
//! `samply load`), where each tag (RTIC task, handler, RTOS object) is a thread.

use std::collections::HashMap;

use anyhow::{Context, Result};
use fxprof_processed_profile::{
    CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, Profile, ReferenceTimestamp,
    SamplingInterval, Timestamp,
};

pub use super::model::Timeline;
use super::model::{OUTSIDE, Report, RunFacts};
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
        let at = Timestamp::from_millis_since_reference(k as f64 * period_s * 1e3);
        p.add_sample(thread, at, stack, CpuDelta::from_millis(period_s * 1e3), 1);
    }
    Ok(serde_json::to_vec(&p)?)
}
