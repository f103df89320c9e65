//! The end of a chunk (from the interrupt), and the dump through semihosting: opened once,
//! streamed chunk by chunk, closed with the INFO and the records of laps and tags.

use core::ptr::{addr_of, read_volatile};

use super::state::*;
use crate::wire::{self, DumpWriter};

unsafe extern "C" {
    static __stext: u8;
    static __etext: u8;
}

/// Words per ring entry: the PC, and the tag when there is one; a STACKS entry with stacks.
pub(crate) fn entry_words(s: *mut State) -> usize {
    // SAFETY: plain reads of the state.
    unsafe {
        if (*s).window != 0 {
            wire::stack_entry_words((*s).window as u32, (*s).records as u32) as usize
        } else if (*s).tag_addr == 0 {
            1
        } else {
            2
        }
    }
}

/// # Safety
/// The sampling interrupt cannot run.
pub(crate) unsafe fn next_chunk(s: *mut State) {
    // SAFETY: see the contract.
    unsafe {
        let hist = (*s).mode == wire::MODE_HIST;
        let ring = (!hist).then_some((*s).capacity);
        let (chunk, pos) = wire::next_chunk((*s).before, ring, (*s).limit);
        (*s).chunk = chunk;
        (*s).remaining = chunk;
        if !hist {
            (*s).wptr = (*s).ring + 4 * entry_words(s) as u64 * pos as u64;
        }
    }
}

/// The end of a chunk, from the interrupt.
pub(crate) extern "C" fn sampler_rt_a64_slow() {
    let s = state();
    // SAFETY: inside the sampling interrupt, which cannot preempt itself.
    unsafe {
        (*s).before += (*s).chunk;
        (*s).chunk = 0;
        if (*s).limit != 0 && (*s).before >= (*s).limit {
            stop_timers();
            (*s).phase = STOPPED;
            if (*s).sink == wire::SINK_SEMIHOSTING as u32 {
                send_dump(s, wire::STOP_LIMIT);
                crate::semihosting::exit(0);
            }
        } else {
            if (*s).sink == wire::SINK_SEMIHOSTING as u32 && (*s).mode != wire::MODE_HIST {
                stream(s, (*s).before);
            }
            next_chunk(s);
        }
    }
}

/// Open the dump file (header and a first INFO) if needed.
///
/// # Safety
/// Called with the sampling interrupt unable to run.
pub(crate) unsafe fn open(s: *mut State) -> bool {
    // SAFETY: see the contract.
    unsafe {
        if (*s).handle == 0 {
            let name = b"sampler.dump\0";
            let block = [name.as_ptr() as u64, 5, (name.len() - 1) as u64];
            let h = crate::semihosting::semihost(crate::semihosting::SYS_OPEN, block.as_ptr());
            if h < 0 {
                return false;
            }
            (*s).handle = h as u32 + 1;
            let info = info_now(s, 0, wire::STOP_RUNNING);
            let mut f = File(s);
            f.begin();
            f.info(&info);
        }
        true
    }
}

/// The open dump file as the format's writer: bytes through semihosting, the CRC register in
/// the state (it outlives each call, from the first chunk to the end).
pub(crate) struct File(pub(crate) *mut State);

impl wire::DumpWriter for File {
    fn raw(&mut self, b: &[u8]) {
        // SAFETY: a `File` is made only while the dump file is open (`handle` set).
        unsafe {
            let block = [
                (*self.0).handle as u64 - 1,
                b.as_ptr() as u64,
                b.len() as u64,
            ];
            crate::semihosting::semihost(crate::semihosting::SYS_WRITE, block.as_ptr());
        }
    }

    fn crc_word(&mut self) -> &mut u32 {
        // SAFETY: the state is the sampler's static; the interrupt cannot run meanwhile.
        unsafe { &mut (*self.0).crc }
    }
}

/// Write bytes, folding them into the running CRC-32.
///
/// # Safety
/// The file is open.
pub(crate) unsafe fn put(s: *mut State, b: &[u8]) {
    File(s).put(b);
}

/// Append the samples from `sent` to `upto` (those still in the ring) as a PCS record.
///
/// # Safety
/// The sampling interrupt cannot run.
pub(crate) unsafe fn stream(s: *mut State, upto: u32) {
    // SAFETY: see the contract; the ring holds sample q in slot q % capacity.
    unsafe {
        if !open(s) {
            return;
        }
        let cap = (*s).capacity;
        let from = (*s).sent.max(upto.saturating_sub(cap));
        let n = upto - from;
        if n == 0 {
            return;
        }
        let words = entry_words(s);
        if (*s).window != 0 {
            File(s).stacks((*s).ring as *const u32, cap, words as u32, from, n);
            (*s).sent = upto;
            return;
        }
        let kind = if words == 2 {
            wire::REC_PCS_TAGS
        } else {
            wire::REC_PCS
        };
        File(s).record(kind, 8 + 4 * words as u32 * n);
        put(s, &from.to_le_bytes());
        put(s, &n.to_le_bytes());
        let ring = (*s).ring as *const u32;
        let mut q = from;
        while q < upto {
            let slot = q % cap;
            let run = (cap - slot).min(upto - q);
            let bytes = core::slice::from_raw_parts(
                ring.add(words * slot as usize) as *const u8,
                4 * words * run as usize,
            );
            put(s, bytes);
            q += run;
        }
        File(s).check();
        (*s).sent = upto;
    }
}

/// # Safety
/// The state does not change meanwhile.
pub(crate) unsafe fn info_now(s: *mut State, taken: u32, stop: u8) -> wire::Info {
    // SAFETY: the code range is the image's own.
    unsafe {
        let a = addr_of!(__stext) as usize;
        let b = addr_of!(__etext) as usize;
        let code = core::slice::from_raw_parts(a as *const u8, b - a);
        wire::Info {
            mode: if (*s).capacity == 0 {
                wire::MODE_OFF
            } else if (*s).mode == wire::MODE_HIST {
                wire::MODE_HIST
            } else {
                wire::MODE_RING
            },
            timer: if (*s).timer == wire::TIMER_PMU {
                wire::TIMER_PMU
            } else {
                wire::TIMER_GENERIC
            },
            stop,
            arch: 8,
            reload: (*s).reload,
            jitter_mask: (*s).mask,
            limit: (*s).limit,
            capacity: (*s).capacity,
            taken,
            lost: 0,
            code_start: a as u32,
            code_end: b as u32,
            code_crc: wire::crc32(code),
            config_addr: addr_of!(SAMPLER_RT_CONFIG) as u32,
            config_found: (*s).config_found,
            priority: 0,
            rt_version: crate::RT_VERSION,
            tag_kind: if (*s).tag_addr == 0 {
                wire::TAG_NONE
            } else {
                wire::TAG_WORD
            },
            foreign: (*s).foreign,
            timer_hz: 0,
        }
    }
}

/// Append the bins as a HIST record (the counters' bytes are the record's little-endian
/// `u16`s; the last counter is `outside`).
///
/// # Safety
/// Sampling is stopped; histogram mode; the file is open.
pub(crate) unsafe fn send_hist(s: *mut State) {
    // SAFETY: `wptr` is counter 0 of BINS, `capacity + 1` counters long.
    unsafe {
        let count = (*s).capacity;
        let counters = (*s).wptr as *const u8;
        let outside = read_volatile((counters as *const u16).add(count as usize));
        File(s).record(wire::REC_HIST, wire::hist_len(count));
        put(
            s,
            &wire::hist_header((*s).ring as u32, (*s).sent, outside as u32, count),
        );
        put(s, core::slice::from_raw_parts(counters, 2 * count as usize));
        if count % 2 == 1 {
            put(s, &[0, 0]);
        }
    }
}

/// # Safety
/// Sampling is stopped.
pub(crate) unsafe fn send_dump(s: *mut State, stop: u8) {
    // SAFETY: see the contract.
    unsafe {
        if (*s).phase == DUMPED || !open(s) {
            return;
        }
        (*s).phase = DUMPED;
        let n = taken(s);
        if (*s).mode == wire::MODE_HIST {
            send_hist(s);
        } else {
            stream(s, n);
        }
        if let Some(len) = crate::laps::record_len() {
            File(s).record(wire::REC_LAPS, len);
            crate::laps::write_record(|b| put(s, b));
        }
        if let Some(len) = crate::laps::trace_len() {
            File(s).record(wire::REC_LAP_TRACE, len);
            crate::laps::write_trace(|b| put(s, b));
        }
        if let Some(len) = crate::pmu::record_len() {
            File(s).record(wire::REC_PMU, len);
            crate::pmu::write_record(|b| put(s, b));
            if let Some(len) = crate::pmu::trace_len() {
                File(s).record(wire::REC_PMU_TRACE, len);
                crate::pmu::write_trace(|b| put(s, b));
            }
        }
        crate::tags::write_names(&mut |b| put(s, b));
        let info = info_now(s, n, stop);
        let mut f = File(s);
        f.info(&info);
        f.end();
        crate::semihosting::semihost(
            crate::semihosting::SYS_CLOSE,
            [(*s).handle as u64 - 1].as_ptr(),
        );
        (*s).handle = 0;
    }
}
