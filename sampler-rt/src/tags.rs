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

/// One named tag; the layout a host reads out of memory (`wire::names_entries`).
#[repr(C)]
#[derive(Clone, Copy)]
struct NameEntry {
    tag: u32,
    len: u32,
    ptr: *const u8,
}

/// The tag names: sent with the dump, and read out of memory by a host that reads the ring.
#[repr(C)]
struct Names {
    len: u32,
    entries: [NameEntry; wire::NAMES_MAX],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    let (at, size) = wire::names_layout(size_of::<usize>() == 8);
    assert!(offset_of!(Names, entries) == at);
    assert!(size_of::<NameEntry>() == size);
};

/// The names (found by name by the host).
#[unsafe(no_mangle)]
static mut SAMPLER_RT_NAMES: Names = Names {
    len: 0,
    entries: [NameEntry {
        tag: 0,
        len: 0,
        ptr: core::ptr::null(),
    }; wire::NAMES_MAX],
};

/// Give a tag a name for the report (`name_tag(task_id, "motor")`); the dump carries the table.
/// A tag named twice keeps the last name; names beyond 32 are dropped.
pub fn name_tag(tag: u32, name: &'static str) {
    let entry = NameEntry {
        tag,
        len: name.len() as u32,
        ptr: name.as_ptr(),
    };
    crate::without_interrupts(|| {
        // SAFETY: interrupts are masked; the table is only read when the dump is sent, or by a
        // host, which reads `len` entries (the count grows after the entry is written).
        unsafe {
            let t = &mut *addr_of_mut!(SAMPLER_RT_NAMES);
            let n = t.len as usize;
            if let Some(e) = t.entries[..n].iter_mut().find(|e| e.tag == tag) {
                *e = entry;
            } else if n < wire::NAMES_MAX {
                t.entries[n] = entry;
                core::ptr::write_volatile(addr_of_mut!(t.len), n as u32 + 1);
            }
        }
    });
}

/// A name of the table.
fn name_of(e: &NameEntry) -> &'static [u8] {
    // SAFETY: every entry was made from a `&'static str`.
    unsafe { core::slice::from_raw_parts(e.ptr, e.len as usize) }
}

/// The tag names, if any, as a NAMES record, through `put`.
pub(crate) fn write_names(put: &mut dyn FnMut(&[u8])) {
    // SAFETY: sampling is stopped when the dump is sent; nothing changes the table meanwhile.
    let t = unsafe { &*addr_of!(SAMPLER_RT_NAMES) };
    let entries = &t.entries[..t.len as usize];
    if entries.is_empty() {
        return;
    }
    let mut len = 4u32;
    for e in entries {
        len += 8 + e.len.div_ceil(4) * 4;
    }
    put(&wire::record_header(wire::REC_NAMES, len));
    put(&t.len.to_le_bytes());
    for e in entries {
        put(&e.tag.to_le_bytes());
        put(&e.len.to_le_bytes());
        put(name_of(e));
        let pad = (4 - e.len as usize % 4) % 4;
        put(&[0, 0, 0][..pad]);
    }
}
