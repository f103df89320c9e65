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
//! interrupts taken during it (the sampler's too).
//!
//! The hooks only append an event (the counter read, what happened, to which task or executor)
//! to a ring of [`EVENTS`] (`SAMPLER_RT_TASK_EVENTS`), with interrupts masked from the read to
//! the append, so that the events are in the order of their reads; the statistics are computed
//! from them when an executor idles (before its idle hook reads the clock, so that the work is
//! neither a poll's nor idle time) and when the run ends. A hook costs 15 to 20 instructions
//! on Thumb-2. Every clock read is the one instruction `sampler_rt_task_clock_read`, so that an
//! exact count in QEMU can find the very instants the runtime read. Events overwritten before
//! they are folded (an executor that never idles while more than [`EVENTS`] happen) are
//! counted, and the polls in progress then forgotten.
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

/// Hook events held until they are folded into the table (`SAMPLER_RT_TASK_EVENTS`, a power
/// of two, default 64, 16 bytes each).
pub const EVENTS: usize = crate::decimal(env!("SAMPLER_RT_TASK_EVENTS"));

/// What the hooks append, in the order their clock reads happened: each event is
/// `[executor, task, kind, raw counter]`, the `k`th at `ring[EVENTS - 1 - k % EVENTS]` (the
/// hooks store downward from `source`, whose address they hold). The statistics are computed
/// from them later ([`sampler_rt_task_fold`]), when an executor idles and when the run ends.
#[repr(C)]
struct Events {
    ring: [[u32; 4]; EVENTS],
    /// The counter register the hooks read (a copy of the table's, once chosen).
    source: *const u32,
    /// Events appended, and folded, so far (wrapping).
    head: u32,
    tail: u32,
    /// Events overwritten before they were folded.
    lost: u32,
}

#[unsafe(no_mangle)]
static mut SAMPLER_RT_TASK_EVENTS: Events = Events {
    ring: [[0; 4]; EVENTS],
    source: core::ptr::null(),
    head: 0,
    tail: 0,
    lost: 0,
};

fn events() -> *mut Events {
    addr_of_mut!(SAMPLER_RT_TASK_EVENTS)
}

/// Event kinds (the third word). An idle hook's is the exception number it runs in (below
/// 0x200), the others are above.
const READY: u32 = 0x201;
const BEGIN: u32 = 0x202;
const END: u32 = 0x203;
const POLL: u32 = 0x204;
const PAUSE: u32 = 0x205;
const RESUME: u32 = 0x206;
const START: u32 = 0x207;
const FREEZE: u32 = 0x208;
const NEW: u32 = 0x209;
const GONE: u32 = 0x20A;
/// An idle hook folds the events once this many are held (and the run's end folds the rest):
/// the folds are few and their cost spread (an executor polling more than a quarter of the
/// ring's events in a round between idle hooks needs a larger ring).
const FOLD_AT: u32 = EVENTS as u32 / 4;

/// Tags of polls preempted by a poll of another executor: how many, then the tags, outermost
/// first (the hooks' cold paths keep it; the tag is the sampler's, read at every sample).
static mut TAG_NEST: [u32; 1 + wire::tasks_table::NEST_MAX] = [0; 1 + wire::tasks_table::NEST_MAX];

const _: () = {
    assert!(EVENTS.is_power_of_two());
    assert!(core::mem::offset_of!(Events, source) == 16 * EVENTS);
    assert!(core::mem::offset_of!(Events, head) == 16 * EVENTS + 4);
    assert!(core::mem::offset_of!(Events, tail) == 16 * EVENTS + 8);
};

/// The hooks' assembly (`lines`), with the operands both variants name.
macro_rules! hooks_asm {
    ($($line:literal),* $(,)?) => {
        core::arch::global_asm!(
            $($line),*,
            ev = sym SAMPLER_RT_TASK_EVENTS,
            state = const 16 * EVENTS,
            mask = const EVENTS - 1,
            tag = sym SAMPLER_RT_TAG,
            nest = sym TAG_NEST,
            ready = const READY,
            poll = const POLL,
            begin = const BEGIN,
            end = const END,
            fold_at = const FOLD_AT,
            push = sym sampler_rt_task_tag_push,
            pop = sym sampler_rt_task_tag_pop,
            fold_when_free = sym sampler_rt_task_fold_when_free,
            tasks = sym SAMPLER_RT_TASKS,
            chosen = const wire::tasks_table::CHOSEN,
            new = const NEW,
            gone = const GONE,
            choose = sym sampler_rt_task_choose,
        );
    };
}

// The hooks, and the append they share: interrupts masked from the clock read to the count's
// move, so that the events are in the order of their reads whatever context appends them. The
// one read, `sampler_rt_task_clock_read`, is what an exact count in QEMU watches: a hook's
// time is its next execution after the hook's entry. Each hot path is counted in
// instructions (`cargo run --release -p cargo-sample-bench -- --tasks-only`): on Thumb-2, 13
// for the append, 2 to 7 for a hook. Their rare paths (a tag to restore around a nested poll,
// events to fold at an idle hook) are functions of their own.
#[cfg(not(armv6m))]
hooks_asm!(
    ".section .text.sampler_rt_task_hooks,\"ax\",%progbits",
    ".syntax unified",
    ".thumb",
    // (executor r0, task r1, kind r2): append the event.
    ".global sampler_rt_task_event",
    ".type sampler_rt_task_event,%function",
    ".thumb_func",
    "sampler_rt_task_event:",
    "push {{r4, r5, r6, lr}}",
    "mrs r6, primask",
    "cpsid i",
    "ldr r5, ={ev}+{state}",
    "ldm r5, {{r3, r12}}",
    ".global sampler_rt_task_clock_read",
    "sampler_rt_task_clock_read:",
    "ldr r4, [r3]",
    "and lr, r12, #{mask}",
    "sub lr, r5, lr, lsl #4",
    "stmdb lr, {{r0, r1, r2, r4}}",
    "add r12, r12, #1",
    "str r12, [r5, #4]",
    "msr primask, r6",
    "pop {{r4, r5, r6, pc}}",
    ".size sampler_rt_task_event, . - sampler_rt_task_event",
    // (executor r0, task r1, kind r2): append the event without reading the clock.
    ".global sampler_rt_task_note",
    ".type sampler_rt_task_note,%function",
    ".thumb_func",
    "sampler_rt_task_note:",
    "push {{r4, r5, r6, lr}}",
    "mrs r6, primask",
    "cpsid i",
    "ldr r5, ={ev}+{state}",
    "ldr r12, [r5, #4]",
    "movs r4, #0",
    "and lr, r12, #{mask}",
    "sub lr, r5, lr, lsl #4",
    "stmdb lr, {{r0, r1, r2, r4}}",
    "add r12, r12, #1",
    "str r12, [r5, #4]",
    "msr primask, r6",
    "pop {{r4, r5, r6, pc}}",
    ".size sampler_rt_task_note, . - sampler_rt_task_note",
    //
    ".global _embassy_trace_task_ready_begin",
    ".type _embassy_trace_task_ready_begin,%function",
    ".thumb_func",
    "_embassy_trace_task_ready_begin:",
    "movw r2, #{ready}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_task_ready_begin, . - _embassy_trace_task_ready_begin",
    //
    ".global _embassy_trace_poll_start",
    ".type _embassy_trace_poll_start,%function",
    ".thumb_func",
    "_embassy_trace_poll_start:",
    "movw r2, #{poll}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_poll_start, . - _embassy_trace_poll_start",
    //
    ".global _embassy_trace_task_exec_begin",
    ".type _embassy_trace_task_exec_begin,%function",
    ".thumb_func",
    "_embassy_trace_task_exec_begin:",
    "ldr r2, ={tag}",
    "ldr r3, [r2]",
    "cbnz r3, sampler_rt_task_nest_tag",
    "str r1, [r2]",
    "sampler_rt_task_begins:",
    "movw r2, #{begin}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_task_exec_begin, . - _embassy_trace_task_exec_begin",
    //
    ".global _embassy_trace_task_exec_end",
    ".type _embassy_trace_task_exec_end,%function",
    ".thumb_func",
    "_embassy_trace_task_exec_end:",
    "ldr r2, ={tag}",
    "ldr r3, ={nest}",
    "ldr r3, [r3]",
    "cbnz r3, sampler_rt_task_unnest_tag",
    "str r3, [r2]",
    "sampler_rt_task_ends:",
    "movw r2, #{end}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_task_exec_end, . - _embassy_trace_task_exec_end",
    //
    ".global _embassy_trace_executor_idle",
    ".type _embassy_trace_executor_idle,%function",
    ".thumb_func",
    "_embassy_trace_executor_idle:",
    "ldr r3, ={ev}+{state}",
    "ldrd r2, r3, [r3, #4]",
    "subs r2, r2, r3",
    "cmp r2, #{fold_at}",
    "bhs sampler_rt_task_idle_folds",
    "sampler_rt_task_idles:",
    "mrs r2, ipsr",
    "b sampler_rt_task_event",
    ".size _embassy_trace_executor_idle, . - _embassy_trace_executor_idle",
    //
    ".global _embassy_trace_task_new",
    ".type _embassy_trace_task_new,%function",
    ".thumb_func",
    "_embassy_trace_task_new:",
    "ldr r2, ={tasks}+{chosen}",
    "ldr r2, [r2]",
    "cbz r2, sampler_rt_task_chooses",
    "sampler_rt_task_spawned:",
    "movw r2, #{new}",
    "b sampler_rt_task_note",
    ".size _embassy_trace_task_new, . - _embassy_trace_task_new",
    //
    ".global _embassy_trace_task_end",
    ".type _embassy_trace_task_end,%function",
    ".thumb_func",
    "_embassy_trace_task_end:",
    "movw r2, #{gone}",
    "b sampler_rt_task_note",
    ".size _embassy_trace_task_end, . - _embassy_trace_task_end",
    //
    // The rare paths.
    ".type sampler_rt_task_nest_tag,%function",
    ".thumb_func",
    "sampler_rt_task_nest_tag:",
    "push {{r0, r1, r2, lr}}",
    "mov r0, r1",
    "bl {push}",
    "pop {{r0, r1, r2, lr}}",
    "b sampler_rt_task_begins",
    ".size sampler_rt_task_nest_tag, . - sampler_rt_task_nest_tag",
    ".type sampler_rt_task_unnest_tag,%function",
    ".thumb_func",
    "sampler_rt_task_unnest_tag:",
    "push {{r0, r1, r2, lr}}",
    "bl {pop}",
    "pop {{r0, r1, r2, lr}}",
    "b sampler_rt_task_ends",
    ".size sampler_rt_task_unnest_tag, . - sampler_rt_task_unnest_tag",
    ".type sampler_rt_task_idle_folds,%function",
    ".thumb_func",
    "sampler_rt_task_idle_folds:",
    "push {{r0, lr}}",
    "bl {fold_when_free}",
    "pop {{r0, lr}}",
    "b sampler_rt_task_idles",
    ".size sampler_rt_task_idle_folds, . - sampler_rt_task_idle_folds",
    ".type sampler_rt_task_chooses,%function",
    ".thumb_func",
    "sampler_rt_task_chooses:",
    "push {{r0, r1, r2, lr}}",
    "bl {choose}",
    "pop {{r0, r1, r2, lr}}",
    "b sampler_rt_task_spawned",
    ".size sampler_rt_task_chooses, . - sampler_rt_task_chooses",
    ".ltorg",
    ".text",
);

// The same on cores without Thumb-2 (ARMv6-M, ARMv8-M Baseline): a few instructions more.
#[cfg(armv6m)]
hooks_asm!(
    ".section .text.sampler_rt_task_hooks,\"ax\",%progbits",
    ".syntax unified",
    ".thumb",
    ".global sampler_rt_task_event",
    ".type sampler_rt_task_event,%function",
    ".thumb_func",
    "sampler_rt_task_event:",
    "push {{r4, r5, r6, r7, lr}}",
    "mrs r6, primask",
    "cpsid i",
    "ldr r5, ={ev}+{state}",
    "ldr r3, [r5]",
    "ldr r7, [r5, #4]",
    ".global sampler_rt_task_clock_read",
    "sampler_rt_task_clock_read:",
    "ldr r4, [r3]",
    "ldr r3, ={mask}",
    "ands r3, r7",
    "lsls r3, r3, #4",
    "subs r3, r5, r3",
    "subs r3, #16",
    "stm r3!, {{r0, r1, r2, r4}}",
    "adds r7, #1",
    "str r7, [r5, #4]",
    "msr primask, r6",
    "pop {{r4, r5, r6, r7, pc}}",
    ".size sampler_rt_task_event, . - sampler_rt_task_event",
    ".global sampler_rt_task_note",
    ".type sampler_rt_task_note,%function",
    ".thumb_func",
    "sampler_rt_task_note:",
    "push {{r4, r5, r6, r7, lr}}",
    "mrs r6, primask",
    "cpsid i",
    "ldr r5, ={ev}+{state}",
    "ldr r7, [r5, #4]",
    "movs r4, #0",
    "ldr r3, ={mask}",
    "ands r3, r7",
    "lsls r3, r3, #4",
    "subs r3, r5, r3",
    "subs r3, #16",
    "stm r3!, {{r0, r1, r2, r4}}",
    "adds r7, #1",
    "str r7, [r5, #4]",
    "msr primask, r6",
    "pop {{r4, r5, r6, r7, pc}}",
    ".size sampler_rt_task_note, . - sampler_rt_task_note",
    //
    ".global _embassy_trace_task_ready_begin",
    ".type _embassy_trace_task_ready_begin,%function",
    ".thumb_func",
    "_embassy_trace_task_ready_begin:",
    "ldr r2, ={ready}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_task_ready_begin, . - _embassy_trace_task_ready_begin",
    //
    ".global _embassy_trace_poll_start",
    ".type _embassy_trace_poll_start,%function",
    ".thumb_func",
    "_embassy_trace_poll_start:",
    "ldr r2, ={poll}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_poll_start, . - _embassy_trace_poll_start",
    //
    ".global _embassy_trace_task_exec_begin",
    ".type _embassy_trace_task_exec_begin,%function",
    ".thumb_func",
    "_embassy_trace_task_exec_begin:",
    "ldr r2, ={tag}",
    "ldr r3, [r2]",
    "cmp r3, #0",
    "bne sampler_rt_task_nest_tag",
    "str r1, [r2]",
    "sampler_rt_task_begins:",
    "ldr r2, ={begin}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_task_exec_begin, . - _embassy_trace_task_exec_begin",
    //
    ".global _embassy_trace_task_exec_end",
    ".type _embassy_trace_task_exec_end,%function",
    ".thumb_func",
    "_embassy_trace_task_exec_end:",
    "ldr r2, ={tag}",
    "ldr r3, ={nest}",
    "ldr r3, [r3]",
    "cmp r3, #0",
    "bne sampler_rt_task_unnest_tag",
    "str r3, [r2]",
    "sampler_rt_task_ends:",
    "ldr r2, ={end}",
    "b sampler_rt_task_event",
    ".size _embassy_trace_task_exec_end, . - _embassy_trace_task_exec_end",
    //
    ".global _embassy_trace_executor_idle",
    ".type _embassy_trace_executor_idle,%function",
    ".thumb_func",
    "_embassy_trace_executor_idle:",
    "ldr r3, ={ev}+{state}",
    "ldr r2, [r3, #4]",
    "ldr r3, [r3, #8]",
    "subs r2, r2, r3",
    "ldr r3, ={fold_at}",
    "cmp r2, r3",
    "bhs sampler_rt_task_idle_folds",
    "sampler_rt_task_idles:",
    "mrs r2, ipsr",
    "b sampler_rt_task_event",
    ".size _embassy_trace_executor_idle, . - _embassy_trace_executor_idle",
    //
    ".global _embassy_trace_task_new",
    ".type _embassy_trace_task_new,%function",
    ".thumb_func",
    "_embassy_trace_task_new:",
    "ldr r2, ={tasks}+{chosen}",
    "ldr r2, [r2]",
    "cmp r2, #0",
    "beq sampler_rt_task_chooses",
    "sampler_rt_task_spawned:",
    "ldr r2, ={new}",
    "b sampler_rt_task_note",
    ".size _embassy_trace_task_new, . - _embassy_trace_task_new",
    //
    ".global _embassy_trace_task_end",
    ".type _embassy_trace_task_end,%function",
    ".thumb_func",
    "_embassy_trace_task_end:",
    "ldr r2, ={gone}",
    "b sampler_rt_task_note",
    ".size _embassy_trace_task_end, . - _embassy_trace_task_end",
    //
    ".type sampler_rt_task_nest_tag,%function",
    ".thumb_func",
    "sampler_rt_task_nest_tag:",
    "push {{r0, r1, r2, lr}}",
    "mov r0, r1",
    "bl {push}",
    "pop {{r0, r1, r2, r3}}",
    "mov lr, r3",
    "b sampler_rt_task_begins",
    ".size sampler_rt_task_nest_tag, . - sampler_rt_task_nest_tag",
    ".type sampler_rt_task_unnest_tag,%function",
    ".thumb_func",
    "sampler_rt_task_unnest_tag:",
    "push {{r0, r1, r2, lr}}",
    "bl {pop}",
    "pop {{r0, r1, r2, r3}}",
    "mov lr, r3",
    "b sampler_rt_task_ends",
    ".size sampler_rt_task_unnest_tag, . - sampler_rt_task_unnest_tag",
    ".type sampler_rt_task_idle_folds,%function",
    ".thumb_func",
    "sampler_rt_task_idle_folds:",
    "push {{r0, lr}}",
    "bl {fold_when_free}",
    "pop {{r0, r3}}",
    "mov lr, r3",
    "b sampler_rt_task_idles",
    ".size sampler_rt_task_idle_folds, . - sampler_rt_task_idle_folds",
    ".type sampler_rt_task_chooses,%function",
    ".thumb_func",
    "sampler_rt_task_chooses:",
    "push {{r0, r1, r2, lr}}",
    "bl {choose}",
    "pop {{r0, r1, r2, r3}}",
    "mov lr, r3",
    "b sampler_rt_task_spawned",
    ".size sampler_rt_task_chooses, . - sampler_rt_task_chooses",
    ".ltorg",
    ".text",
);

unsafe extern "C" {
    /// Append an event read now (the hooks' shared path, above; `sampler_rt_task_note`
    /// appends one without reading the clock).
    fn sampler_rt_task_event(executor: u32, task: u32, kind: u32);
}

/// A poll begins while a tag is set (another executor's poll it preempts, or the
/// application's own tag): that tag comes back when this poll ends.
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_task_tag_push(task: u32) {
    crate::without_interrupts(|| {
        let before = SAMPLER_RT_TAG.load(Ordering::Relaxed);
        if before != 0 {
            // SAFETY: interrupts are masked; only these two functions touch the nest.
            unsafe {
                let nest = &mut *addr_of_mut!(TAG_NEST);
                let d = nest[0] as usize;
                if let Some(slot) = nest.get_mut(1 + d) {
                    *slot = before;
                }
                nest[0] += 1;
            }
        }
        SAMPLER_RT_TAG.store(task, Ordering::Relaxed);
    });
}

/// A poll that began while a tag was set ends: that tag is back.
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_task_tag_pop() {
    crate::without_interrupts(|| {
        // SAFETY: as for the push.
        let tag = unsafe {
            let nest = &mut *addr_of_mut!(TAG_NEST);
            nest[0] = nest[0].saturating_sub(1);
            nest.get(1 + nest[0] as usize).copied().unwrap_or(0)
        };
        SAMPLER_RT_TAG.store(tag, Ordering::Relaxed);
    });
}

/// An idle hook's fold, when no poll is in progress (an interrupt executor idling inside a
/// thread-mode poll would make that poll's time the fold's), unless the ring is three quarters
/// full. The fold's time is the executor's, between its polls and outside its idle periods.
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_task_fold_when_free() {
    let e = events();
    // SAFETY: plain reads of words the hooks move.
    let held = unsafe {
        read_volatile(addr_of!((*e).head)).wrapping_sub(read_volatile(addr_of!((*e).tail)))
    };
    if SAMPLER_RT_TAG.load(Ordering::Relaxed) == 0 || held >= (EVENTS as u32 / 4) * 3 {
        sampler_rt_task_fold();
    }
}

/// Fold the events appended so far into the table, oldest first, each with interrupts masked
/// (a hook of a preempting context appends meanwhile, and may fold too: each event is folded
/// once, whole). Called at an idle hook before its own read, and when the run ends.
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_task_fold() {
    let (e, t) = (events(), table());
    loop {
        // Masked here, not through a helper of its own: a sample held off lands in this
        // function, whose time it is.
        let primask: u32;
        // SAFETY: reading PRIMASK and masking interrupts has no memory effects.
        unsafe {
            core::arch::asm!("mrs {}, PRIMASK", "cpsid i", out(reg) primask, options(nomem, nostack))
        };
        let mut n = 0;
        // SAFETY: the events and the table are only changed with interrupts masked (here and in
        // the hooks' append), on one core.
        while n < FOLD_MASKED && unsafe { fold_one(e, t) } {
            n += 1;
        }
        if primask & 1 == 0 {
            // SAFETY: interrupts were enabled on entry.
            unsafe { core::arch::asm!("cpsie i", options(nomem, nostack)) };
        }
        if n < FOLD_MASKED {
            break;
        }
    }
}

/// Steps of the fold in one stretch with interrupts masked (a step folds an event, or an empty
/// round's two).
const FOLD_MASKED: usize = 2;

/// Fold the oldest event held (with the next, when they are an empty round), if any.
#[inline(always)]
unsafe fn fold_one(e: *mut Events, t: *mut Table) -> bool {
    // SAFETY: the caller's, interrupts masked.
    unsafe {
        let head = read_volatile(addr_of!((*e).head));
        let mut tail = (*e).tail;
        if head == tail {
            return false;
        }
        if head.wrapping_sub(tail) > EVENTS as u32 {
            // Overwritten before they were folded: what was in progress is unknown.
            (*e).lost = (*e)
                .lost
                .wrapping_add(head.wrapping_sub(tail) - EVENTS as u32);
            tail = head.wrapping_sub(EVENTS as u32);
            resync(t);
        }
        let at = |k: u32| EVENTS - 1 - (k as usize & (EVENTS - 1));
        let [executor, task, kind, raw] = (*e).ring[at(tail)];
        let flip = (*t).flip;
        // An empty round (a poll start, then the same executor's idle hook): both at once,
        // the usual pair where an executor has nothing to do.
        if kind == POLL && tail.wrapping_add(1) != head {
            let [next, _, idle_kind, idle_raw] = (*e).ring[at(tail.wrapping_add(1))];
            if next == executor && idle_kind < 0x200 {
                (*e).tail = tail.wrapping_add(2);
                poll_start(t, executor, raw ^ flip);
                idle(t, executor, idle_kind, idle_raw ^ flip);
                return true;
            }
        }
        (*e).tail = tail.wrapping_add(1);
        apply(t, executor, task, kind, raw ^ flip);
        true
    }
}

/// Events were lost: forget the polls, wakes and idle periods in progress.
#[cold]
unsafe fn resync(t: *mut Table) {
    // SAFETY: the caller's table, interrupts masked.
    unsafe {
        (*t).current_id = 0;
        (*t).depth = 0;
        (*t).nested = 0;
        (*t).idling = 0;
        for s in (*t).slots.iter_mut() {
            s.woken = 0;
        }
        for x in (*t).more.iter_mut() {
            x.idling = 0;
        }
    }
}

/// One event into the table.
#[inline(always)]
unsafe fn apply(t: *mut Table, executor: u32, task: u32, kind: u32, now: u32) {
    // SAFETY: the caller's table, interrupts masked.
    unsafe {
        match kind {
            READY => ready(t, task, now),
            BEGIN => begin(t, task, now),
            END => end(t, task, now),
            POLL => poll_start(t, executor, now),
            PAUSE => (*t).paused_at = now,
            RESUME => {
                let d = ticks(t, (*t).paused_at, now);
                (*t).stolen = (*t).stolen.wrapping_add(d);
                (*t).stolen_total += u64::from(d);
            }
            START => (*t).last = now,
            FREEZE => {
                (*t).end = now;
                (*t).ended = 1;
            }
            NEW => {
                find(t, task);
            }
            GONE => {
                let s = find(t, task);
                if !s.is_null() {
                    (*s).flags |= wire::TASK_ENDED;
                }
            }
            k if k < 0x200 => idle(t, executor, k, now),
            _ => {}
        }
    }
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
    let k = leading_zeros(v) as usize;
    // SAFETY: k <= 32 < BINS; the histogram is the caller's slot's.
    unsafe { *(*h).as_mut_ptr().add(k) += 1 };
}

/// `v.leading_zeros()`, in line: ARMv6-M has no `clz`, and the library's call would be a
/// function of its own inside the fold's masked stretch.
#[inline(always)]
fn leading_zeros(v: u32) -> u32 {
    if cfg!(armv6m) {
        let (mut v, mut n) = (v, 0);
        if v == 0 {
            return 32;
        }
        for s in [16, 8, 4, 2, 1] {
            if v >> (32 - s) == 0 {
                n += s;
                v <<= s;
            }
        }
        n
    } else {
        v.leading_zeros()
    }
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
        (*events()).source = source;
        sampler_rt_task_event(executor, 0, START);
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

/// The first spawn chooses the clock (`_embassy_trace_task_new`'s rare path).
#[unsafe(no_mangle)]
extern "C" fn sampler_rt_task_choose(executor_id: u32) {
    let t = table();
    // SAFETY: the hooks run on one core; see `choose`.
    unsafe {
        if read_volatile(addr_of!((*t).chosen)) == 0 {
            choose(t, executor_id);
        }
    }
}

/// A poll begins (the hook has set the sample tag).
#[inline(always)]
unsafe fn begin(t: *mut Table, task_id: u32, now: u32) {
    // SAFETY: the fold's table. A wake between this poll's beginning and its own was folded
    // after it, and waits for the next poll.
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

/// A poll ends.
#[inline(always)]
unsafe fn end(t: *mut Table, task_id: u32, now: u32) {
    // SAFETY: the fold's table.
    unsafe {
        let mut s = (*t).current;
        if (*t).current_id != task_id {
            // The task has no slot (or events were lost).
            s = find(t, task_id);
            if s.is_null() {
                (*t).dropped += 1;
                if (*t).depth != 0 {
                    unnest(t, 0);
                }
                return;
            }
            if (*t).current_id == 0 {
                // Its beginning was lost: no time to count.
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
        // Its place among the samples: the samples taken by the time it is folded (the
        // executor's next idle hook, or the run's end).
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

/// A task is woken: the first wake since its last poll began is kept.
#[inline(always)]
unsafe fn ready(t: *mut Table, task_id: u32, now: u32) {
    // SAFETY: the fold's table.
    unsafe {
        let s = find(t, task_id);
        if !s.is_null() && (*s).woken == 0 {
            (*s).ready_at = now;
            (*s).ready_stolen = (*t).stolen;
            (*s).woken = 1;
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
/// left out of its own (its tag is back already: the hooks' own business).
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
        }
    }
}

/// An executor hook at `now`: the span grows to it, for the first executor; another's goes
/// to [`other_executor`] (`false`).
#[inline(always)]
unsafe fn executor_hook(t: *mut Table, executor_id: u32, now: u32, idle: Option<u32>) -> bool {
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

/// A hook of an executor other than the first (an `InterruptExecutor`, a second thread
/// executor): its idle period begins (`idle`) or ends, in its entry of the table, which its
/// first hook claims; an executor beyond the table is only counted.
#[cold]
#[inline(never)]
unsafe fn other_executor(t: *mut Table, executor_id: u32, now: u32, idle: Option<u32>) {
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
        if let Some(context) = idle {
            (*e).idle_at = now;
            (*e).idle_stolen = (*t).stolen;
            (*e).context = context;
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

/// An executor idles, in exception `context` (0: thread mode).
#[inline(always)]
unsafe fn idle(t: *mut Table, executor_id: u32, context: u32, now: u32) {
    // SAFETY: the fold's table.
    unsafe {
        if !executor_hook(t, executor_id, now, Some(context)) {
            return;
        }
        (*t).idle_at = now;
        (*t).idle_stolen = (*t).stolen;
        (*t).context = context;
        (*t).idling = 1;
    }
}

/// An executor starts a round of polls.
#[inline(always)]
unsafe fn poll_start(t: *mut Table, executor_id: u32, now: u32) {
    // SAFETY: the fold's table.
    unsafe {
        if !executor_hook(t, executor_id, now, None) {
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
    // SAFETY: the append masks interrupts itself.
    unsafe { sampler_rt_task_event(0, 0, PAUSE) };
}

/// The sampler's own work ends (see [`sampler_rt_task_pause`]).
#[unsafe(no_mangle)]
#[inline(never)]
pub(crate) extern "C" fn sampler_rt_task_resume() {
    // SAFETY: as above.
    unsafe { sampler_rt_task_event(0, 0, RESUME) };
}

/// The run ends: the dump begins (its own time is not the application's). The events still
/// held are folded.
pub(crate) fn freeze() {
    let t = table();
    // SAFETY: sampling has stopped; the thread that sends the dump calls this once (a fold it
    // interrupted is between two events).
    unsafe {
        if read_volatile(addr_of!((*t).ended)) == 0 && (*t).chosen != 0 {
            sampler_rt_task_event(0, 0, FREEZE);
            sampler_rt_task_fold();
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
    let executors = 1 + (1 + more) * wire::EXECUTOR_WORDS + 1;
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
        // The events lost before they were folded.
        put((*events()).lost);
    }
}
