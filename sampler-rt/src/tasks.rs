//! Embassy task statistics (`embassy` feature, Cortex-M), from embassy-executor's trace hooks
//! (enable its `trace` feature).
//!
//! Per task: polls, the time in them, the longest and a histogram of their lengths, and the
//! latency from a wake (`task_ready_begin`) to the poll it causes (`task_exec_begin`), with its
//! longest and histogram; per executor (the first one that spawns, and
//! [`wire::MORE_EXECUTORS`] more) the time from `executor_idle` to the next `poll_start`, and
//! the exception it idles in. Each sample's tag is the task being polled (its
//! header's address), 0 between tasks.
//!
//! Time comes from DWT CYCCNT where it counts, else from SysTick running free (24 bits, from
//! 0xFFFFFF) when the sampler does not pace itself with it; otherwise polls are counted but not
//! timed. The counter is chosen at the first spawn. A poll's time is wall time: it includes the
//! interrupts taken during it (the sampler's too). Every clock reading goes through
//! [`sampler_rt_task_clock`], so that an exact count in QEMU can find the very instants the
//! runtime read.
//!
//! The table holds [`MAX_TASKS`] tasks (`SAMPLER_RT_TASKS` at build time), found by a hash of
//! the task's address; polls of tasks beyond are counted apart. Nothing is allocated.

use core::ptr::{addr_of, addr_of_mut, null_mut, read_volatile, write_volatile};
use core::sync::atomic::Ordering;

use crate::tags::SAMPLER_RT_TAG;
use crate::wire;

/// Tasks whose statistics are kept (`SAMPLER_RT_TASKS`, a power of two, default 8).
pub const MAX_TASKS: usize = crate::decimal(env!("SAMPLER_RT_TASKS"));
/// Polls kept in order while the sampler runs (the newest; `SAMPLER_RT_TASK_TRACE`, 12 bytes
/// each; 0 keeps none).
pub const TRACE: usize = crate::decimal(env!("SAMPLER_RT_TASK_TRACE"));

/// The newest polls in order: `(task, samples taken at its end, ticks)`, and how many were
/// traced.
static mut POLL_TRACE: [[u32; 3]; TRACE] = [[0; 3]; TRACE];
static mut POLLS_TRACED: u32 = 0;
static mut POLL_NEXT: usize = 0;
const BINS: usize = wire::TASK_BINS;

const DEMCR: *mut u32 = 0xE000_EDFC as *mut u32;
const DWT_CTRL: *mut u32 = 0xE000_1000 as *mut u32;
const DWT_CYCCNT: *mut u32 = 0xE000_1004 as *mut u32;
const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;

#[repr(C)]
#[derive(Clone, Copy)]
struct Slot {
    /// The task's header address; 0 while the slot is free.
    id: u32,
    polls: u32,
    max_poll: u32,
    flags: u32,
    busy: u64,
    wakes: u32,
    max_latency: u32,
    latency: u64,
    /// The clock when the poll in progress began, and the sampler's time then.
    begin: u32,
    begin_stolen: u32,
    /// The clock at the first wake since the task's last poll began, when `woken` is 1, and
    /// the sampler's time then.
    ready_at: u32,
    ready_stolen: u32,
    woken: u32,
    poll_hist: [u32; BINS],
    latency_hist: [u32; BINS],
}

const FREE: Slot = Slot {
    id: 0,
    polls: 0,
    max_poll: 0,
    flags: 0,
    busy: 0,
    wakes: 0,
    max_latency: 0,
    latency: 0,
    begin: 0,
    begin_stolen: 0,
    ready_at: 0,
    ready_stolen: 0,
    woken: 0,
    poll_hist: [0; BINS],
    latency_hist: [0; BINS],
};

/// An executor besides the first: its idle time, as the first one's is kept in the table.
#[repr(C)]
#[derive(Clone, Copy)]
struct Exec {
    /// The executor's address; 0 while the entry is free.
    id: u32,
    /// The exception number at its last idle hook (0: thread mode).
    context: u32,
    idling: u32,
    idle_at: u32,
    idle_stolen: u32,
    periods: u32,
    idle: u64,
}

const NO_EXEC: Exec = Exec {
    id: 0,
    context: 0,
    idling: 0,
    idle_at: 0,
    idle_stolen: 0,
    periods: 0,
    idle: 0,
};

#[repr(C)]
struct Table {
    /// The counter register the clock reads (a zero word when there is none; null, which
    /// reads the vector table's first word, until the first spawn chooses).
    source: *const u32,
    /// XORed into the raw value, so that the clock counts up (SysTick counts down).
    flip: u32,
    /// The counter's significant bits.
    mask: u32,
    /// `wire::LAP_COUNTER_*`, once `chosen` is 1.
    counter: u32,
    chosen: u32,
    /// The task being polled (0 between polls) and its slot.
    current_id: u32,
    current: *mut Slot,
    /// The executor whose idle time is kept (the first that spawned a task).
    executor: u32,
    /// Hooks of executors beyond the table (their idle time is not kept).
    others: u32,
    /// The clock at the last executor hook, and the time from the first to it.
    last: u32,
    span: u64,
    idle: u64,
    idle_at: u32,
    idle_stolen: u32,
    idling: u32,
    idle_periods: u32,
    /// Polls of tasks that found no slot.
    dropped: u32,
    /// The sampler's own time inside the application's (streaming a full chunk of the ring
    /// from its interrupt), left out of every poll, latency and idle period it falls in:
    /// wrapping ticks for the hooks, and the whole.
    stolen: u32,
    stolen_total: u64,
    paused_at: u32,
    /// The clock when the dump began (the end of the run), once it did.
    end: u32,
    ended: u32,
    /// The exception number at the first executor's last idle hook.
    context: u32,
    more: [Exec; wire::MORE_EXECUTORS],
    /// Polls preempted by a poll of another executor (an `InterruptExecutor`'s), outermost
    /// first: the task, its slot and the ticks of polls nested in it so far; and the running
    /// poll's. A poll's time leaves out the polls nested in it, as an RTOS charges a task only
    /// for its own time.
    depth: u32,
    nested: u32,
    nest: [[u32; 3]; wire::tasks_table::NEST_MAX],
    slots: [Slot; MAX_TASKS],
}

static ZERO: u32 = 0;

/// The statistics (found by name by the host). All zero: in `.bss`.
#[unsafe(no_mangle)]
static mut SAMPLER_RT_TASKS: Table = Table {
    source: core::ptr::null(),
    flip: 0,
    mask: 0,
    counter: 0,
    chosen: 0,
    current_id: 0,
    current: null_mut(),
    executor: 0,
    others: 0,
    last: 0,
    span: 0,
    idle: 0,
    idle_at: 0,
    idle_stolen: 0,
    idling: 0,
    idle_periods: 0,
    dropped: 0,
    stolen: 0,
    stolen_total: 0,
    paused_at: 0,
    end: 0,
    ended: 0,
    context: 0,
    more: [NO_EXEC; wire::MORE_EXECUTORS],
    depth: 0,
    nested: 0,
    nest: [[0; 3]; wire::tasks_table::NEST_MAX],
    slots: [FREE; MAX_TASKS],
};

fn table() -> *mut Table {
    addr_of_mut!(SAMPLER_RT_TASKS)
}

/// The task clock: the chosen counter, counting up. Every hook reads time through this one
/// function (the read's address, `sampler_rt_task_clock_read`, is what an exact count in QEMU
/// watches). Reads `source` (a counter
/// register, or ZERO) and XORs `flip`, the table's first two words.
#[unsafe(no_mangle)]
#[unsafe(naked)]
pub extern "C" fn sampler_rt_task_clock() -> u32 {
    core::arch::naked_asm!(
        "ldr r0, ={t}",
        "ldm r0, {{r0, r1}}",
        // The read (its address is what an exact count in QEMU watches).
        ".global sampler_rt_task_clock_read",
        "sampler_rt_task_clock_read:",
        "ldr r0, [r0]",
        "eors r0, r1",
        "bx lr",
        ".ltorg",
        t = sym SAMPLER_RT_TASKS,
    )
}

const _: () = {
    use core::mem::offset_of;
    use wire::tasks_table as w;
    // The layout a host reads out of memory (and the RAM a task takes, as the crate's
    // documentation says).
    assert!(core::mem::size_of::<Slot>() == w::SLOT_SIZE);
    assert!(offset_of!(Table, flip) == w::FLIP && offset_of!(Table, mask) == w::MASK);
    assert!(offset_of!(Table, counter) == w::COUNTER && offset_of!(Table, chosen) == w::CHOSEN);
    assert!(offset_of!(Table, executor) == w::EXECUTOR && offset_of!(Table, others) == w::OTHERS);
    assert!(offset_of!(Table, last) == w::LAST && offset_of!(Table, span) == w::SPAN);
    assert!(offset_of!(Table, idle) == w::IDLE && offset_of!(Table, idle_at) == w::IDLE_AT);
    assert!(offset_of!(Table, idle_stolen) == w::IDLE_STOLEN);
    assert!(offset_of!(Table, idling) == w::IDLING);
    assert!(offset_of!(Table, idle_periods) == w::IDLE_PERIODS);
    assert!(offset_of!(Table, dropped) == w::DROPPED && offset_of!(Table, stolen) == w::STOLEN);
    assert!(offset_of!(Table, stolen_total) == w::STOLEN_TOTAL);
    assert!(offset_of!(Table, end) == w::END && offset_of!(Table, ended) == w::ENDED);
    assert!(offset_of!(Table, context) == w::CONTEXT && offset_of!(Table, more) == w::MORE);
    assert!(core::mem::size_of::<Exec>() == w::EXEC_SIZE);
    assert!(offset_of!(Exec, id) == w::EXEC_ID && offset_of!(Exec, context) == w::EXEC_CONTEXT);
    assert!(offset_of!(Exec, idling) == w::EXEC_IDLING);
    assert!(offset_of!(Exec, idle_at) == w::EXEC_IDLE_AT);
    assert!(offset_of!(Exec, idle_stolen) == w::EXEC_IDLE_STOLEN);
    assert!(offset_of!(Exec, periods) == w::EXEC_PERIODS && offset_of!(Exec, idle) == w::EXEC_IDLE);
    assert!(offset_of!(Table, depth) == w::DEPTH && offset_of!(Table, nested) == w::NESTED);
    assert!(offset_of!(Table, nest) == w::NEST);
    assert!(offset_of!(Table, slots) == w::SLOTS);
    assert!(offset_of!(Slot, id) == w::ID && offset_of!(Slot, polls) == w::POLLS);
    assert!(offset_of!(Slot, max_poll) == w::MAX_POLL && offset_of!(Slot, flags) == w::FLAGS);
    assert!(offset_of!(Slot, busy) == w::BUSY && offset_of!(Slot, wakes) == w::WAKES);
    assert!(offset_of!(Slot, max_latency) == w::MAX_LATENCY);
    assert!(offset_of!(Slot, latency) == w::LATENCY);
    assert!(offset_of!(Slot, poll_hist) == w::POLL_HIST);
    assert!(offset_of!(Slot, latency_hist) == w::LATENCY_HIST);
    assert!(core::mem::offset_of!(Table, source) == 0);
    assert!(core::mem::offset_of!(Table, flip) == 4);
};

/// Ticks from `a` to `b` of the clock.
#[inline(always)]
unsafe fn ticks(t: *mut Table, a: u32, b: u32) -> u32 {
    // SAFETY: the caller's table.
    b.wrapping_sub(a) & unsafe { (*t).mask }
}

/// Count `v` ticks in a histogram, by its leading zeros (`wire::TASK_BINS`).
#[inline(always)]
unsafe fn bin(h: *mut [u32; BINS], v: u32) {
    let k = v.leading_zeros() as usize;
    // SAFETY: k <= 32 < BINS; the histogram is the caller's slot's.
    unsafe { *(*h).as_mut_ptr().add(k) += 1 };
}

/// Whether the sampler takes SysTick in this run (its configuration says so, or the built-in
/// defaults do).
fn sampler_takes_systick() -> bool {
    match crate::cortex_m::run_config() {
        Some(c) => c.mode != wire::MODE_OFF && c.timer == wire::TIMER_SYSTICK,
        None => true,
    }
}

/// Choose the counter: CYCCNT where it counts, else SysTick running free when the sampler
/// leaves it and nobody else runs it with another period.
#[cold]
#[inline(never)]
unsafe fn choose(t: *mut Table, executor: u32) {
    // SAFETY: architected debug and SysTick registers of every ARMv6-M/ARMv7-M/ARMv8-M core
    // (ARMv6-M has no DWT cycle counter: the writes are ignored and CYCCNT reads zero there);
    // the table is only written by the hooks, on one core.
    unsafe {
        (*t).executor = executor;
        write_volatile(DEMCR, read_volatile(DEMCR) | 1 << 24);
        write_volatile(DWT_CTRL, read_volatile(DWT_CTRL) | 1);
        let a = read_volatile(DWT_CYCCNT);
        for _ in 0..8 {
            core::arch::asm!("nop", options(nomem, nostack, preserves_flags));
        }
        const SYSTICK: (*const u32, u32, u32, u8) = (
            SYST_CVR as *const u32,
            0x00FF_FFFF,
            0x00FF_FFFF,
            wire::LAP_COUNTER_SYSTICK,
        );
        let none = (addr_of!(ZERO), 0, 0, wire::LAP_COUNTER_NONE);
        let (source, flip, mask, counter) = if read_volatile(DWT_CYCCNT) != a {
            (
                DWT_CYCCNT as *const u32,
                0,
                u32::MAX,
                wire::LAP_COUNTER_CYCCNT,
            )
        } else if sampler_takes_systick() {
            none
        } else if read_volatile(SYST_CSR) & 1 == 0 {
            write_volatile(SYST_RVR, 0x00FF_FFFF);
            write_volatile(SYST_CVR, 0);
            write_volatile(SYST_CSR, 0b101);
            SYSTICK
        } else if read_volatile(SYST_RVR) & 0x00FF_FFFF == 0x00FF_FFFF {
            // Already running free (the laps chose it first).
            SYSTICK
        } else {
            none
        };
        (*t).source = source;
        (*t).flip = flip;
        (*t).mask = mask;
        (*t).counter = u32::from(counter);
        write_volatile(addr_of_mut!((*t).chosen), 1);
        (*t).last = sampler_rt_task_clock();
    }
}

/// The task's slot, made at its first hook; null when the table is full.
#[inline(always)]
unsafe fn find(t: *mut Table, id: u32) -> *mut Slot {
    let mut i = ((id >> 3) ^ (id >> 9)) as usize & (MAX_TASKS - 1);
    for _ in 0..MAX_TASKS {
        // SAFETY: i < MAX_TASKS.
        let s = unsafe { addr_of_mut!((*t).slots[i]) };
        // SAFETY: a slot's id is written once, from 0, with interrupts masked.
        let v = unsafe { read_volatile(addr_of!((*s).id)) };
        if v == id {
            return s;
        }
        if v == 0 {
            // SAFETY: the caller's table.
            return unsafe { claim(t, id, i) };
        }
        i = (i + 1) & (MAX_TASKS - 1);
    }
    null_mut()
}

/// Give `id` the first free slot from `i` (or the one another context gave it meanwhile).
#[cold]
#[inline(never)]
unsafe fn claim(t: *mut Table, id: u32, mut i: usize) -> *mut Slot {
    crate::without_interrupts(|| {
        for _ in 0..MAX_TASKS {
            // SAFETY: i < MAX_TASKS; interrupts are masked.
            unsafe {
                let s = addr_of_mut!((*t).slots[i]);
                if (*s).id == id {
                    return s;
                }
                if (*s).id == 0 {
                    write_volatile(addr_of_mut!((*s).id), id);
                    return s;
                }
            }
            i = (i + 1) & (MAX_TASKS - 1);
        }
        null_mut()
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_task_new(executor_id: u32, task_id: u32) {
    let t = table();
    // SAFETY: the hooks run on one core; see `find` and `choose`.
    unsafe {
        if read_volatile(addr_of!((*t).chosen)) == 0 {
            choose(t, executor_id);
        }
        find(t, task_id);
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_task_exec_begin(_executor_id: u32, task_id: u32) {
    SAMPLER_RT_TAG.store(task_id, Ordering::Relaxed);
    let now = sampler_rt_task_clock();
    let t = table();
    // SAFETY: as above. A wake from an interrupt between the read of `woken` and its clearing
    // is merged with this poll's: it came before the poll began.
    unsafe {
        if (*t).current_id != 0 {
            nest(t);
        }
        (*t).nested = 0;
        let s = find(t, task_id);
        (*t).current_id = if s.is_null() { 0 } else { task_id };
        (*t).current = s;
        if s.is_null() {
            return;
        }
        (*s).begin = now;
        let stolen = (*t).stolen;
        (*s).begin_stolen = stolen;
        if (*s).woken != 0 {
            (*s).woken = 0;
            let l =
                ticks(t, (*s).ready_at, now).wrapping_sub(stolen.wrapping_sub((*s).ready_stolen));
            (*s).wakes += 1;
            (*s).latency += u64::from(l);
            if l > (*s).max_latency {
                (*s).max_latency = l;
            }
            bin(addr_of_mut!((*s).latency_hist), l);
        }
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_task_exec_end(_executor_id: u32, task_id: u32) {
    let now = sampler_rt_task_clock();
    SAMPLER_RT_TAG.store(0, Ordering::Relaxed);
    let t = table();
    // SAFETY: as above.
    unsafe {
        let mut s = (*t).current;
        if (*t).current_id != task_id {
            // The task has no slot (or the hooks were entered out of order).
            s = find(t, task_id);
            if s.is_null() {
                (*t).dropped += 1;
                if (*t).depth != 0 {
                    unnest(t, 0);
                }
                return;
            }
        }
        (*t).current_id = 0;
        let wall =
            ticks(t, (*s).begin, now).wrapping_sub((*t).stolen.wrapping_sub((*s).begin_stolen));
        let d = wall.saturating_sub((*t).nested);
        if (*t).depth != 0 {
            unnest(t, wall);
        }
        (*s).polls += 1;
        (*s).busy += u64::from(d);
        if d > (*s).max_poll {
            (*s).max_poll = d;
        }
        bin(addr_of_mut!((*s).poll_hist), d);
        if TRACE > 0
            && let Some(seq) = crate::running_seq()
        {
            // The next entry to write wraps without a division (none on ARMv6-M).
            let at = *addr_of!(POLL_NEXT);
            *addr_of_mut!(POLL_TRACE[at]) = [task_id, seq, d];
            *addr_of_mut!(POLL_NEXT) = if at + 1 == TRACE { 0 } else { at + 1 };
            *addr_of_mut!(POLLS_TRACED) = (*addr_of!(POLLS_TRACED)).wrapping_add(1);
        }
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_task_ready_begin(_executor_id: u32, task_id: u32) {
    let now = sampler_rt_task_clock();
    let t = table();
    // SAFETY: as above (this hook also runs in interrupt handlers: it writes only its task's
    // wake, which the poll reads).
    unsafe {
        let s = find(t, task_id);
        if !s.is_null() && (*s).woken == 0 {
            (*s).ready_at = now;
            (*s).ready_stolen = (*t).stolen;
            write_volatile(addr_of_mut!((*s).woken), 1);
        }
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_task_end(_executor_id: u32, task_id: u32) {
    let t = table();
    // SAFETY: as above.
    unsafe {
        let s = find(t, task_id);
        if !s.is_null() {
            (*s).flags |= wire::TASK_ENDED;
        }
    }
}

/// A poll of another executor begins inside the running one: keep the running one's.
#[cold]
#[inline(never)]
unsafe fn nest(t: *mut Table) {
    // SAFETY: the caller's table; the nested poll's hooks run in a handler that preempted the
    // outer poll, and end before it resumes.
    unsafe {
        let d = (*t).depth as usize;
        if let Some(e) = (*t).nest.get_mut(d) {
            *e = [(*t).current_id, (*t).current as u32, (*t).nested];
        }
        (*t).depth += 1;
    }
}

/// A nested poll of `wall` ticks ended: the poll it preempted runs again, with those ticks
/// left out of its own, and its task's tag back on the samples.
#[cold]
#[inline(never)]
unsafe fn unnest(t: *mut Table, wall: u32) {
    // SAFETY: as for `nest`.
    unsafe {
        (*t).depth -= 1;
        if let Some(&[id, slot, nested]) = (*t).nest.get((*t).depth as usize) {
            (*t).current_id = id;
            (*t).current = slot as *mut Slot;
            (*t).nested = nested.wrapping_add(wall);
            SAMPLER_RT_TAG.store(id, Ordering::Relaxed);
        }
    }
}

/// An executor hook at `now`: the span grows to it, for the first executor; another's goes
/// to [`other_executor`] (`false`).
#[inline(always)]
unsafe fn executor_hook(t: *mut Table, executor_id: u32, now: u32, idle: bool) -> bool {
    // SAFETY: the caller's table.
    unsafe {
        if executor_id != (*t).executor {
            other_executor(t, executor_id, now, idle);
            return false;
        }
        (*t).span += u64::from(ticks(t, (*t).last, now));
        (*t).last = now;
    }
    true
}

/// The exception number the core is in (0: thread mode).
#[inline(always)]
fn ipsr() -> u32 {
    let v: u32;
    // SAFETY: reading a special register.
    unsafe {
        core::arch::asm!("mrs {}, ipsr", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    v & 0x1FF
}

/// A hook of an executor other than the first (an `InterruptExecutor`, a second thread
/// executor): its idle period begins (`idle`) or ends, in its entry of the table, which its
/// first hook claims; an executor beyond the table is only counted.
#[cold]
#[inline(never)]
unsafe fn other_executor(t: *mut Table, executor_id: u32, now: u32, idle: bool) {
    // SAFETY: the caller's table; an entry is claimed with interrupts masked, and each
    // executor's hooks run in its own context, one at a time.
    unsafe {
        // Its entry, found without masking (an entry's id is written once); only a first hook
        // claims one, with interrupts masked.
        let found = (0..wire::MORE_EXECUTORS)
            .map(|i| addr_of_mut!((*t).more[i]))
            .find(|&e| read_volatile(addr_of!((*e).id)) == executor_id);
        let e = found.unwrap_or_else(|| {
            crate::without_interrupts(|| {
                for i in 0..wire::MORE_EXECUTORS {
                    let e = addr_of_mut!((*t).more[i]);
                    if (*e).id == executor_id {
                        return e;
                    }
                    if (*e).id == 0 {
                        (*e).id = executor_id;
                        return e;
                    }
                }
                null_mut()
            })
        });
        if e.is_null() {
            (*t).others += 1;
            return;
        }
        if idle {
            (*e).idle_at = now;
            (*e).idle_stolen = (*t).stolen;
            (*e).context = ipsr();
            (*e).idling = 1;
        } else if (*e).idling != 0 {
            (*e).idling = 0;
            let stolen = (*t).stolen.wrapping_sub((*e).idle_stolen);
            (*e).idle += u64::from(ticks(t, (*e).idle_at, now).wrapping_sub(stolen));
            (*e).periods += 1;
        }
    }
}

/// The idle period in progress, up to `now`, the sampler's own time in it left out.
#[inline(always)]
unsafe fn idle_until(t: *mut Table, now: u32) -> u32 {
    // SAFETY: the caller's table.
    unsafe {
        let stolen = (*t).stolen.wrapping_sub((*t).idle_stolen);
        ticks(t, (*t).idle_at, now).wrapping_sub(stolen)
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_executor_idle(executor_id: u32) {
    let now = sampler_rt_task_clock();
    let t = table();
    // SAFETY: as above.
    unsafe {
        if !executor_hook(t, executor_id, now, true) {
            return;
        }
        (*t).idle_at = now;
        (*t).idle_stolen = (*t).stolen;
        (*t).context = ipsr();
        (*t).idling = 1;
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn _embassy_trace_poll_start(executor_id: u32) {
    let now = sampler_rt_task_clock();
    let t = table();
    // SAFETY: as above.
    unsafe {
        if !executor_hook(t, executor_id, now, false) {
            return;
        }
        if (*t).idling != 0 {
            (*t).idling = 0;
            (*t).idle += u64::from(idle_until(t, now));
            (*t).idle_periods += 1;
        }
    }
}

/// The sampler's own work begins inside the application's time (streaming a chunk of the
/// ring from its interrupt): left out of the polls, latencies and idle periods it falls in.
#[unsafe(no_mangle)]
#[inline(never)]
pub(crate) extern "C" fn sampler_rt_task_pause() {
    let now = sampler_rt_task_clock();
    // SAFETY: called from the sampling interrupt, which no hook preempts.
    unsafe { (*table()).paused_at = now };
}

/// The sampler's own work ends (see [`sampler_rt_task_pause`]).
#[unsafe(no_mangle)]
#[inline(never)]
pub(crate) extern "C" fn sampler_rt_task_resume() {
    let now = sampler_rt_task_clock();
    let t = table();
    // SAFETY: as above.
    unsafe {
        let d = ticks(t, (*t).paused_at, now);
        (*t).stolen = (*t).stolen.wrapping_add(d);
        (*t).stolen_total += u64::from(d);
    }
}

/// The run ends: the dump begins (its own time is not the application's).
pub(crate) fn freeze() {
    let t = table();
    // SAFETY: sampling has stopped; the thread that sends the dump calls this once.
    unsafe {
        if (*t).ended == 0 && (*t).chosen != 0 {
            (*t).end = sampler_rt_task_clock();
            (*t).ended = 1;
        }
    }
}

/// The TASK_TRACE record's payload length, when polls were traced.
pub(crate) fn trace_len() -> Option<u32> {
    // SAFETY: read at dump time.
    let total = unsafe { *addr_of!(POLLS_TRACED) };
    (TRACE > 0 && total > 0).then(|| 8 + 12 * total.min(TRACE as u32))
}

/// The TASK_TRACE record's payload, oldest poll first.
pub(crate) fn write_trace(mut put: impl FnMut(u32)) {
    // SAFETY: read at dump time; sampling has stopped, so no poll is traced meanwhile.
    unsafe {
        let total = *addr_of!(POLLS_TRACED);
        let count = total.min(TRACE as u32);
        put(total);
        put(count);
        // The oldest kept is `count` entries before the next one to write.
        let next = *addr_of!(POLL_NEXT);
        for k in 0..count as usize {
            let at = (next + TRACE - count as usize + k)
                .checked_rem(TRACE)
                .unwrap_or(0);
            for w in *addr_of!(POLL_TRACE[at]) {
                put(w);
            }
        }
    }
}

/// The TASKS record's payload length, when any task was seen.
pub(crate) fn record_len() -> Option<u32> {
    let t = table();
    // SAFETY: read at dump time; slots only ever gain an id.
    let n = unsafe { (*t).slots.iter().filter(|s| s.id != 0).count() } as u32;
    // SAFETY: as above; an executor entry only ever gains an id.
    let more = unsafe { (*t).more.iter().filter(|e| e.id != 0).count() } as u32;
    let executors = 1 + (1 + more) * wire::EXECUTOR_WORDS;
    (n != 0).then(|| {
        4 * (wire::TASKS_HEADER_WORDS + n * (wire::TASK_FIXED_WORDS + 2 * BINS as u32) + executors)
    })
}

/// The TASKS record's payload, word by word (the length is [`record_len`]'s).
pub(crate) fn write_record(mut put: impl FnMut(u32)) {
    let t = table();
    // SAFETY: read at dump time, from the thread that sends the dump; a hook interrupting it
    // changes a count by one at most.
    unsafe {
        freeze();
        let now = (*t).end;
        let timed = (*t).chosen != 0 && (*t).counter != u32::from(wire::LAP_COUNTER_NONE);
        let span = if timed {
            (*t).span + u64::from(ticks(t, (*t).last, now))
        } else {
            0
        };
        let mut idle = (*t).idle;
        if timed && (*t).idling != 0 {
            idle += u64::from(idle_until(t, now));
        }
        let counter = if timed {
            (*t).counter
        } else {
            u32::from(wire::LAP_COUNTER_NONE)
        };
        let used = (*t).slots.iter().filter(|s| s.id != 0);
        put(counter | (BINS as u32) << 8);
        put(used.clone().count() as u32);
        put((*t).dropped);
        put((*t).executor);
        put(span as u32);
        put((span >> 32) as u32);
        put(idle as u32);
        put((idle >> 32) as u32);
        put((*t).idle_periods);
        put((*t).others);
        put((*t).stolen_total as u32);
        put(((*t).stolen_total >> 32) as u32);
        for s in used.clone() {
            put(s.id);
            put(s.polls);
            put(s.max_poll);
            put(s.busy as u32);
            put((s.busy >> 32) as u32);
            put(s.wakes);
            put(s.max_latency);
            put(s.latency as u32);
            put((s.latency >> 32) as u32);
            put(s.flags);
            for &v in s.poll_hist.iter().chain(s.latency_hist.iter()) {
                put(v);
            }
        }
        // The executors: the first, then the others that idled, each with the period in
        // progress at the end.
        let more = (*t).more.iter().filter(|e| e.id != 0);
        put(1 + more.clone().count() as u32);
        for v in [(*t).executor, (*t).context] {
            put(v);
        }
        put(idle as u32);
        put((idle >> 32) as u32);
        put((*t).idle_periods);
        for e in more {
            let mut idle = e.idle;
            if timed && e.idling != 0 {
                let stolen = (*t).stolen.wrapping_sub(e.idle_stolen);
                idle += u64::from(ticks(t, e.idle_at, now).wrapping_sub(stolen));
            }
            put(e.id);
            put(e.context);
            put(idle as u32);
            put((idle >> 32) as u32);
            put(e.periods);
        }
    }
}
