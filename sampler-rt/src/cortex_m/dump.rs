//! The slow path of the sampling interrupt (a chunk full, the limit reached) and everything that
//! sends samples out: semihosting, streamed chunks, the whole dump, a firmware's byte writer.

use core::arch::asm;
use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use super::state::*;
use crate::wire::{self, DumpWriter, Info};
use crate::wire::{PHASE_DUMPED, PHASE_STOPPED};

/// The firmware's byte writer for the dump (`SINK_WRITER`).
pub(crate) static mut WRITER: Option<fn(&[u8])> = None;

/// Bytes of one ring entry: a PC, or a PC and its tag.
///
/// # Safety
/// `s` is the sampler state.
pub(crate) unsafe fn entry_bytes(s: *mut State) -> u32 {
    // SAFETY: see the function's contract.
    let kind = unsafe { (*s).tag_kind };
    let window = (kind >> 8) & 0xFF;
    if window != 0 {
        4 * wire::stack_entry_words(window, (kind >> 16) & 0xFF)
    } else if kind == wire::TAG_NONE as u32 {
        4
    } else {
        8
    }
}

/// # Safety
/// `s` is the sampler state, not yet sampling.
pub(crate) unsafe fn next_chunk(s: *mut State) {
    // SAFETY: called with the sampling interrupt unable to run (before it starts, or from it).
    unsafe {
        let hist = (*s).mode == wire::MODE_HIST;
        let ring = (!hist).then_some((*s).capacity);
        let (chunk, pos) = wire::next_chunk((*s).before, ring, (*s).limit);
        (*s).chunk = chunk;
        (*s).remaining = chunk;
        if !hist {
            (*s).wptr = (*s).ring + entry_bytes(s) * pos;
        }
    }
}

/// Entered from the handlers (a tail branch, in handler mode) when the current chunk is full:
/// at the end of the ring, or when the requested number of samples is taken.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn sampler_rt_slow() {
    let s = state();
    // SAFETY: runs inside the sampling interrupt, which cannot preempt itself.
    unsafe {
        (*s).before += (*s).chunk;
        (*s).chunk = 0;
        if (*s).limit != 0 && (*s).before >= (*s).limit {
            stop_timer(s);
            (*s).phase = PHASE_STOPPED;
            (*s).stop = wire::STOP_LIMIT;
            match (*s).sink {
                wire::SINK_SEMIHOSTING => {
                    send_dump(s);
                    semihosting_exit(0);
                }
                // Once, from the interrupt: the program goes on afterwards.
                wire::SINK_WRITER => send_dump(s),
                _ => {}
            }
        } else {
            if (*s).sink == wire::SINK_SEMIHOSTING && (*s).mode == wire::MODE_RING {
                #[cfg(feature = "embassy")]
                crate::tasks::sampler_rt_task_pause();
                stream_chunk(s);
                #[cfg(feature = "embassy")]
                crate::tasks::sampler_rt_task_resume();
            }
            next_chunk(s);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Semihosting and the dump.

pub(crate) const SYS_OPEN: u32 = 0x01;
pub(crate) const SYS_CLOSE: u32 = 0x02;
pub(crate) const SYS_WRITE: u32 = 0x05;
pub(crate) const SYS_EXIT: u32 = 0x18;
pub(crate) const SYS_EXIT_EXTENDED: u32 = 0x20;
pub(crate) const ADP_STOPPED_APPLICATION_EXIT: u32 = 0x2_0026;
/// Name of the dump file the firmware creates in the host's working directory.
pub(crate) const DUMP_FILE: &[u8] = b"sampler.dump\0";

/// # Safety
/// Only where a semihosting host is attached (otherwise `bkpt` faults).
pub(crate) unsafe fn semihost(op: u32, arg: *const u32) -> i32 {
    let ret: i32;
    // SAFETY: the semihosting calling convention; the host reads `arg`'s block.
    unsafe {
        asm!("bkpt #0xab", inout("r0") op as i32 => ret, in("r1") arg, options(nostack));
    }
    ret
}

pub(crate) fn semihosting_exit(code: i32) -> ! {
    // SAFETY: `exit` is documented to need semihosting; the sampler calls it only with the
    // semihosting sink that the host enabled.
    unsafe {
        if code == 0 {
            semihost(SYS_EXIT, ADP_STOPPED_APPLICATION_EXIT as *const u32);
        } else {
            let block = [ADP_STOPPED_APPLICATION_EXIT, code as u32];
            semihost(SYS_EXIT_EXTENDED, block.as_ptr());
        }
    }
    loop {
        // SAFETY: waiting for an interrupt has no memory effects.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}

/// The dump file of a run with the semihosting sink. It is opened at the first full chunk (or
/// at the end), and every full chunk is appended to it as a PCS record while the program runs,
/// so a run may take any number of samples and a run that dies keeps all chunks sent before.
pub(crate) struct Stream {
    open: bool,
    /// Through the firmware's writer rather than semihosting.
    writer: Option<fn(&[u8])>,
    handle: u32,
    /// The CRC register of the dump so far ([`wire::DumpWriter`]).
    crc: u32,
    /// Samples already in the file (sequence numbers below this).
    sent: u32,
}

pub(crate) static mut STREAM: Stream = Stream {
    open: false,
    writer: None,
    handle: 0,
    crc: wire::Crc32::new().state(),
    sent: 0,
};

impl wire::DumpWriter for Stream {
    fn raw(&mut self, bytes: &[u8]) {
        if let Some(w) = self.writer {
            w(bytes);
            return;
        }
        let block = [self.handle, bytes.as_ptr() as u32, bytes.len() as u32];
        // SAFETY: only reached with the semihosting sink, which the host enabled.
        unsafe { semihost(SYS_WRITE, block.as_ptr()) };
    }

    fn crc_word(&mut self) -> &mut u32 {
        &mut self.crc
    }
}

unsafe extern "C" {
    static __stext: u8;
    static __etext: u8;
}

pub(crate) fn code_range() -> (u32, u32) {
    (addr_of!(__stext) as u32, addr_of!(__etext) as u32)
}

/// The CRC of the code, computed for the first INFO record and kept for the last one: the
/// image's code does not change while it runs, and a CRC of it costs about ten instructions a
/// byte.
static mut CODE_CRC: Option<u32> = None;

/// The INFO record's contents for the state as it is now.
///
/// # Safety
/// The state is not changed meanwhile.
pub(crate) unsafe fn info_now(s: *mut State, taken: u32) -> Info {
    // SAFETY: see the function's contract; the code range is the image's own.
    unsafe {
        let (code_start, code_end) = code_range();
        let code =
            core::slice::from_raw_parts(code_start as *const u8, (code_end - code_start) as usize);
        Info {
            mode: (*s).mode,
            timer: (*s).timer,
            stop: (*s).stop,
            arch: ARCH,
            reload: (*s).reload,
            jitter_mask: wire::jitter_mask(ARCH, (*s).jitter),
            limit: (*s).limit,
            capacity: (*s).capacity,
            taken,
            lost: 0,
            code_start,
            code_end,
            code_crc: *(*addr_of_mut!(CODE_CRC)).get_or_insert_with(|| wire::crc32(code)),
            config_addr: addr_of!(SAMPLER_RT_CONFIG) as u32,
            config_found: (*s).config_found,
            priority: (*s).priority,
            rt_version: crate::RT_VERSION,
            tag_kind: (*s).tag_kind as u8,
            foreign: 0,
            timer_hz: match super::firmware_timer() {
                Some(t) if (*s).timer == wire::TIMER_CUSTOM => t.hz,
                _ => 0,
            },
        }
    }
}

/// The stream, opened (file header and a first INFO record written) if it was not yet.
///
/// # Safety
/// Semihosting sink; called with the sampling interrupt unable to run (from it, or stopped).
pub(crate) unsafe fn stream(s: *mut State) -> Option<&'static mut Stream> {
    // SAFETY: see the function's contract: nothing else touches STREAM meanwhile.
    unsafe {
        let st = &mut *addr_of_mut!(STREAM);
        if !st.open {
            if (*s).sink == wire::SINK_WRITER {
                st.writer = Some((*addr_of!(WRITER))?);
            } else {
                let block = [DUMP_FILE.as_ptr() as u32, 5, (DUMP_FILE.len() - 1) as u32];
                let handle = semihost(SYS_OPEN, block.as_ptr());
                if handle < 0 {
                    return None;
                }
                st.handle = handle as u32;
            }
            st.open = true;
            st.begin();
            st.info(&info_now(s, st.sent));
        }
        Some(st)
    }
}

/// Append samples `from..to` (sequence numbers; at most one ring's worth) as a PCS record.
///
/// # Safety
/// As [`stream`].
pub(crate) unsafe fn send_samples(s: *mut State, st: &mut Stream, from: u32, to: u32) {
    if to <= from {
        return;
    }
    // SAFETY: the ring has `capacity` slots and sequence number q lives in slot q % capacity.
    unsafe {
        let cap = (*s).capacity;
        let ring = (*s).ring as *const u8;
        let e = entry_bytes(s) as usize;
        let bytes = |a: u32, b: u32| {
            core::slice::from_raw_parts(ring.add(e * a as usize), e * (b - a) as usize)
        };
        let window = ((*s).tag_kind >> 8) & 0xFF;
        if window != 0 {
            st.stacks(ring as *const u32, cap, e as u32 / 4, from, to - from);
            st.sent = to;
            return;
        }
        let kind = if e == 8 {
            wire::REC_PCS_TAGS
        } else {
            wire::REC_PCS
        };
        st.record(kind, 8 + e as u32 * (to - from));
        st.put32(from);
        st.put32(to - from);
        let (a, b) = (wire::rem(from, cap), wire::rem(to, cap));
        if b > a {
            st.put(bytes(a, b));
        } else {
            st.put(bytes(a, cap));
            st.put(bytes(0, b));
        }
        st.check();
        st.sent = to;
    }
}

/// Append the histogram as a HIST record: the counters as the handler left them (their bytes are
/// the little-endian `u16`s of the record), the last one as `outside`.
///
/// # Safety
/// As [`stream`]; histogram mode.
pub(crate) unsafe fn send_hist(s: *mut State, st: &mut Stream) {
    // SAFETY: `bins` is counter 0 of the array this module owns, `last_bin + 1` counters long.
    unsafe {
        let count = (*s).last_bin;
        let counters = (*s).bins as *const u8;
        let bytes = core::slice::from_raw_parts(counters, 2 * count as usize);
        let outside = u16::from_le_bytes([
            read_volatile(counters.add(2 * count as usize)),
            read_volatile(counters.add(2 * count as usize + 1)),
        ]);
        st.record(wire::REC_HIST, wire::hist_len(count));
        st.put(&wire::hist_header(
            (*s).hist_base,
            (*s).hist_word & 0xFF,
            outside as u32,
            count,
        ));
        st.put(bytes);
        if count % 2 == 1 {
            st.put(&[0, 0]);
        }
    }
}

/// Send the chunk that just filled up, and restart the timer's period, so that the time spent
/// writing (it is inside the interrupt) does not leave a sample pending for the instruction
/// that happens to follow.
///
/// # Safety
/// From the slow path, semihosting sink.
pub(crate) unsafe fn stream_chunk(s: *mut State) {
    // SAFETY: see the function's contract.
    unsafe {
        let Some(st) = stream(s) else { return };
        let taken = (*s).before;
        let from = st.sent.max(taken.saturating_sub((*s).capacity));
        send_samples(s, st, from, taken);
        restart_period(s);
    }
}

/// Clear a pending sampling interrupt and start a fresh period.
///
/// # Safety
/// The timer this state started is running.
#[inline(never)]
pub(crate) unsafe fn restart_period(s: *mut State) {
    // SAFETY: registers of the timer this state programmed.
    unsafe {
        match driver((*s).timer) {
            Some(d) => {
                let base = (*s).reload_reg - d.reload;
                write_volatile((base + d.ack) as *mut u32, d.ack_value);
                match (*s).timer {
                    wire::TIMER_CMSDK => write_volatile(
                        (base + CMSDK_VALUE) as *mut u32,
                        read_volatile((base + CMSDK_RELOAD) as *const u32),
                    ),
                    // Disabling and enabling timer A reloads it from TAILR.
                    wire::TIMER_GPTM => {
                        write_volatile((base + GPTM_CTL) as *mut u32, 0);
                        write_volatile((base + GPTM_CTL) as *mut u32, 1);
                    }
                    wire::TIMER_NRF => write_volatile((base + NRF_TASKS_CLEAR) as *mut u32, 1),
                    // The counter runs on (see `start_device`): only the flag is cleared.
                    _ => {}
                }
                let irq = read_config().map(|c| c.timer_irq).unwrap_or(0);
                write_volatile(NVIC_ICPR.add((irq / 32) as usize), 1 << (irq % 32));
            }
            None if (*s).timer == wire::TIMER_CUSTOM => {
                let priority = read_config().map(|c| c.priority).unwrap_or(0);
                super::restart_firmware_timer((*s).reload, priority);
            }
            None => {
                write_volatile(SYST_CVR, 0);
                write_volatile(SCB_ICSR, ICSR_PENDSTCLR);
            }
        }
    }
}

/// # Safety
/// Sampling stopped; the state is not changed by anyone else meanwhile.
pub(crate) unsafe fn send_dump(s: *mut State) {
    // The run's end for the task statistics: the dump's own time is not the application's.
    #[cfg(feature = "embassy")]
    crate::tasks::freeze();
    // SAFETY: see the function's contract; every pointer is into the state, ring or code.
    unsafe {
        if (*s).sink == wire::SINK_HOST {
            wait_for_host(s);
            return;
        }
        if (*s).phase == PHASE_DUMPED
            || !matches!((*s).sink, wire::SINK_SEMIHOSTING | wire::SINK_WRITER)
        {
            return;
        }
        (*s).phase = PHASE_DUMPED;
        let taken = (*s).before + (*s).chunk - (*s).remaining;
        let Some(st) = stream(s) else { return };
        if (*s).mode == wire::MODE_HIST {
            send_hist(s, st);
        } else {
            let from = st.sent.max(taken.saturating_sub((*s).capacity));
            send_samples(s, st, from, taken);
        }
        crate::tags::write_names(&mut |b| st.put(b));
        write_priorities(st);
        if let Some(words) = super::held_off_record() {
            st.record(wire::REC_HELD_OFF, 12);
            for w in words {
                st.put32(w);
            }
        }
        if let Some(len) = crate::laps::record_len() {
            st.record(wire::REC_LAPS, len);
            crate::laps::write_record(|b| st.put(b));
        }
        if let Some(len) = crate::laps::trace_len() {
            st.record(wire::REC_LAP_TRACE, len);
            crate::laps::write_trace(|b| st.put(b));
        }
        #[cfg(feature = "embassy")]
        if let Some(len) = crate::tasks::record_len() {
            st.record(wire::REC_TASKS, len);
            crate::tasks::write_record(|w| st.put32(w));
        }
        #[cfg(feature = "embassy")]
        if let Some(len) = crate::tasks::trace_len() {
            st.record(wire::REC_TASK_TRACE, len);
            crate::tasks::write_trace(|w| st.put32(w));
        }
        // The final INFO supersedes the first one: readers keep the last.
        st.info(&info_now(s, taken));
        st.end();
        if st.writer.is_none() {
            semihost(SYS_CLOSE, [st.handle].as_ptr());
        }
        st.open = false;
    }
}

/// The PRIORITIES record: the system handlers' priority bytes (SHPR1-3; SysTick enabled when
/// it interrupts), and each enabled device interrupt's (NVIC_IPR), all read as words (ARMv6-M
/// has no byte access there).
fn write_priorities(st: &mut Stream) {
    const SHPR: u32 = 0xE000_ED18;
    const ICTR: *const u32 = 0xE000_E004 as *const u32;
    // SAFETY: architected registers of every ARMv6-M/ARMv7-M/ARMv8-M core, read only.
    unsafe {
        let shpr = |n: u32| -> u8 {
            let word = read_volatile((SHPR + ((n - 4) & !3)) as *const u32);
            (word >> (8 * (n % 4))) as u8
        };
        let systick = read_volatile(SYST_CSR) & 0b11 == 0b11;
        // ARMv6-M has no ICTR (it reads 0): one word of 32 interrupts.
        let words = if cfg!(armv6m) {
            1
        } else {
            ((read_volatile(ICTR) & 0xF) + 1).min(16)
        };
        let mut entries = [0u32; 48];
        let mut n = 0;
        for exc in [4u32, 5, 6, 11, 14, 15] {
            let enabled = exc != 15 || systick;
            entries[n] = wire::priority_entry(exc as u16, shpr(exc), enabled);
            n += 1;
        }
        'words: for w in 0..words {
            let set = read_volatile(NVIC_ISER.add(w as usize));
            for bit in 0..32 {
                if set & (1 << bit) == 0 {
                    continue;
                }
                if n == entries.len() {
                    break 'words;
                }
                let irq = w * 32 + bit;
                let ipr = read_volatile(NVIC_IPR.add((irq / 4) as usize));
                let prio = (ipr >> (8 * (irq % 4))) as u8;
                entries[n] = wire::priority_entry((16 + irq) as u16, prio, true);
                n += 1;
            }
        }
        st.record(wire::REC_PRIORITIES, 4 + 4 * n as u32);
        st.put32(n as u32);
        for e in &entries[..n] {
            st.put32(*e);
        }
    }
}

/// Sampling is stopped; give the host reading the ring the time to take the last samples. It
/// acknowledges by clearing the `sink` byte, and changes its beat byte while it reads.
///
/// # Safety
/// `s` is the sampler state.
pub(crate) unsafe fn wait_for_host(s: *mut State) {
    // SAFETY: the host writes both bytes through the debug port; they are read as volatile.
    unsafe {
        let sink = addr_of!((*s).sink);
        let beat = addr_of!((*s).tag_kind)
            .cast::<u8>()
            .add(wire::state_offsets::HOST_BEAT - wire::state_offsets::TAG_KIND);
        crate::host_wait::wait_while_host_reads(|| read_volatile(sink) == wire::SINK_HOST, beat);
    }
}
