//! The PMU's records in the sampler's dump, reached through a hook the first region sets, so
//! that firmware that counts no region links none of this.

use core::ptr::addr_of;

use super::*;

/// What the sampler's dump calls, reached only through [`DUMP_HOOK`], which the first region
/// sets: the counts and the trace are linked only into firmware that counts regions.
pub(super) struct Hooks {
    record_len: fn() -> Option<u32>,
    write_record: Writer,
    trace_len: fn() -> Option<u32>,
    write_trace: Writer,
}

/// Writes a record's payload through the function it is given.
type Writer = fn(&mut dyn FnMut(&[u8]));

pub(super) static HOOKS: Hooks = Hooks {
    record_len: pmu_record_len,
    write_record: |put| pmu_write_record(put),
    trace_len: pmu_trace_len,
    write_trace: |put| pmu_write_trace(put),
};

pub(super) static mut DUMP_HOOK: Option<&'static Hooks> = None;

fn hooks() -> Option<&'static Hooks> {
    // SAFETY: set once, at the first region's registration; read at dump time.
    unsafe { *addr_of!(DUMP_HOOK) }
}

/// The PMU record's payload length, when the firmware counted regions (for the sampler's dump).
pub(crate) fn record_len() -> Option<u32> {
    hooks().and_then(|h| (h.record_len)())
}

/// Write the PMU record's payload through `put`.
pub(crate) fn write_record(mut put: impl FnMut(&[u8])) {
    if let Some(h) = hooks() {
        (h.write_record)(&mut put);
    }
}

/// The PMU_TRACE record's payload length, when laps were traced.
pub(crate) fn trace_len() -> Option<u32> {
    hooks().and_then(|h| (h.trace_len)())
}

/// Write the PMU_TRACE record's payload through `put`.
pub(crate) fn write_trace(mut put: impl FnMut(&[u8])) {
    if let Some(h) = hooks() {
        (h.write_trace)(&mut put);
    }
}

fn pmu_record_len() -> Option<u32> {
    // SAFETY: counting is over.
    let (p, t) = unsafe { (&*addr_of!(PMU), &*addr_of!(TABLE)) };
    (p.ready && t.len > 0).then(|| pmu_len(p, t))
}

fn pmu_write_record(put: &mut dyn FnMut(&[u8])) {
    // SAFETY: counting is over.
    let (p, t) = unsafe { (&*addr_of!(PMU), &*addr_of!(TABLE)) };
    payload(p, t, put);
}

fn pmu_trace_len() -> Option<u32> {
    // SAFETY: counting is over.
    let (p, t) = unsafe { (&*addr_of!(PMU), &*addr_of!(TRACE)) };
    let width = 3 + p.count;
    let count = (t.total as usize).min(TRACE_WORDS / width);
    (count > 0).then(|| 12 + (count * width * 4) as u32)
}

/// The PMU_TRACE record's payload: `total`, `count`, the entry's width in words, then the laps
/// oldest first.
fn pmu_write_trace(put: &mut dyn FnMut(&[u8])) {
    // SAFETY: counting is over.
    let (p, t) = unsafe { (&*addr_of!(PMU), &*addr_of!(TRACE)) };
    let width = 3 + p.count;
    let capacity = TRACE_WORDS / width;
    let count = (t.total as usize).min(capacity);
    for v in [t.total, count as u32, width as u32] {
        put(&v.to_le_bytes());
    }
    for k in t.total as usize - count..t.total as usize {
        let at = (k % capacity) * width;
        for w in &t.words[at..at + width] {
            put(&w.to_le_bytes());
        }
    }
}
