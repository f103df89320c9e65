//! The firmware's own tags (Cortex-M and ARMv8-A): the word the sampler records with each
//! sample for `cargo sample --tag api`, and the names the dump carries for them.

use core::ptr::{addr_of, addr_of_mut};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::wire;

/// The firmware's own tag: recorded with every sample when the run asks for it
/// (`cargo sample --tag api`). The `embassy` feature sets it to the task being polled.
#[unsafe(no_mangle)]
pub(crate) static SAMPLER_RT_TAG: AtomicU32 = AtomicU32::new(0);

/// The address of the tag word, for the sampler's handler.
pub(crate) fn tag_word_address() -> usize {
    addr_of!(SAMPLER_RT_TAG) as usize
}

/// Tag the samples taken from now on with `tag` (a task, a state, a phase of the program); the
/// report then splits the time by tag. Samples carry it when the run asks for it
/// (`cargo sample --tag api`). One store: cheap enough for a context switch.
#[inline]
pub fn set_tag(tag: u32) {
    SAMPLER_RT_TAG.store(tag, Ordering::Relaxed);
}

/// The tag set by [`set_tag`].
pub fn tag() -> u32 {
    SAMPLER_RT_TAG.load(Ordering::Relaxed)
}

/// Names for tags, sent with the dump: up to this many.
const NAMES: usize = 32;

struct Names {
    len: usize,
    entries: [(u32, &'static str); NAMES],
}

static mut NAME_TABLE: Names = Names {
    len: 0,
    entries: [(0, ""); NAMES],
};

/// Give a tag a name for the report (`name_tag(task_id, "motor")`); the dump carries the table.
/// A tag named twice keeps the last name; names beyond 32 are dropped.
pub fn name_tag(tag: u32, name: &'static str) {
    crate::without_interrupts(|| {
        // SAFETY: interrupts are masked; the table is only read when the dump is sent.
        unsafe {
            let t = &mut *addr_of_mut!(NAME_TABLE);
            if let Some(e) = t.entries[..t.len].iter_mut().find(|e| e.0 == tag) {
                e.1 = name;
            } else if t.len < NAMES {
                t.entries[t.len] = (tag, name);
                t.len += 1;
            }
        }
    });
}

/// The tag names, if any, as a NAMES record, through `put`.
pub(crate) fn write_names(put: &mut dyn FnMut(&[u8])) {
    // SAFETY: sampling is stopped when the dump is sent; nothing changes the table meanwhile.
    let t = unsafe { &*addr_of!(NAME_TABLE) };
    if t.len == 0 {
        return;
    }
    let mut len = 4u32;
    for (_, name) in &t.entries[..t.len] {
        len += 8 + (name.len() as u32).div_ceil(4) * 4;
    }
    put(&wire::record_header(wire::REC_NAMES, len));
    put(&(t.len as u32).to_le_bytes());
    for (tag, name) in &t.entries[..t.len] {
        put(&tag.to_le_bytes());
        put(&(name.len() as u32).to_le_bytes());
        put(name.as_bytes());
        let pad = (4 - name.len() % 4) % 4;
        put(&[0, 0, 0][..pad]);
    }
}
