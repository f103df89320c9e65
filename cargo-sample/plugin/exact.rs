//! A QEMU TCG plugin that counts, exactly, how often each guest instruction executes.
//!
//! QEMU's plugin API changed incompatibly in QEMU 9.0: the global inline counter
//! (`qemu_plugin_register_vcpu_insn_exec_inline`, API version 1, QEMU 4.2 to 8.2) gave way to
//! per-vCPU "scoreboards" (`..._inline_per_vcpu`, API versions 2 and later, QEMU 9.0 on), and
//! QEMU 9.0 raised the oldest version it loads to 2. One library cannot declare both, so this
//! source builds twice: without features for API version 1, with the `api-v2` feature for
//! QEMU 9.0 and later. Debian's QEMU ships no `qemu-plugin.h`; the few functions used are
//! declared here and resolved by QEMU when it loads the library.
//!
//! Every instruction of every translated block gets an inline 64-bit add on its own counter:
//! a few host instructions per guest instruction and no callback. At exit the counts are
//! written to `out=FILE` as little-endian pairs `(pc: u64, count: u64)`, sorted by pc, after
//! an 8-byte header `"SMPLEXC1"`.
//!
//! With `budget=N` the run ends once about N instructions have executed (checked at the start
//! of each translated block, so it overshoots by less than one block): the counts are written
//! and QEMU exits with status 0, leaving an empty `FILE.budget` beside the counts. That check is a callback per block, so it costs more than the
//! inline counters and is only installed when a budget is given.
//!
//! With `ticks=FILE` it also plays the clock of a DWT's PC sampler: the PC of every 64th
//! (`tick=N`: Nth) executed instruction (the one that makes the count a multiple) is appended
//! to `FILE` as a little-endian `u32`, through a 4 KiB buffer (flushed when full and at exit).
//! The block callback counts a block's instructions when it starts, so a block QEMU stops part
//! way (a fault, an I/O access it replays alone) counts whole for this clock and the budget;
//! QEMU ends blocks at interrupts, so those are exact.
//!
//! With `graph=FILE` it follows calls and returns and counts instructions per calling
//! context: a block that ends with a call (`bl`, `blx`; A64 `bl`, `blr`, from QEMU's
//! disassembly) makes the next block a new frame of the calling-context tree; a block that
//! starts at the return address of a frame on the stack pops to it; a block at one of the
//! `handlers=A:B:..` addresses (the vector table's) is an exception frame, popped by the
//! first return at its level (the handler's own return is the exception's). Counts are kept
//! per (node, block start), and a node is keyed by its call site too (inside the call
//! instruction; for an exception, the interrupted block's start), so that the host can name
//! a function that was tail-called into the parent's frame. How many of a block's
//! instructions ran is read from their exact counters when the next block starts (QEMU can
//! stop a block part way: an I/O access it replays alone, a fault), so the graph's counts add
//! up to the per-address counts exactly, and a block stopped before its last instruction
//! neither calls nor returns. It needs `out=FILE` for those counters. Written at exit as `SMPLCCT2`,
//! the nodes (parent, entry, flags, site, calls) then the counts (node, block,
//! instructions). With `contexts=FILE` (alone or beside `graph=`) it follows the same way and
//! writes `SMPLEXH1`, then (handler entry, address, instructions) per instruction run inside an
//! exception, keyed by the innermost exception's handler: the time of each exception per
//! address, which the host needs to tell the time a sampler could see from the time it could
//! not. With `chains=FILE` (beside `graph=` or `contexts=`, which follow exceptions) it
//! writes `SMPLCHN1`, then per handler entry (handler `u32`, entries, tail-chained entries,
//! late-arriving entries: `u64` each): an entry straight after another exception's return is
//! a tail-chain on the core, and one before the first instruction of a less urgent
//! exception just entered is a late arrival; both spare the core an unstacking and stacking
//! that a timing model must not charge. With `laps=FILE` and `lapfns=START:DROP:ITERATE` (the
//! entries of sampler-rt's `Region::start`, `Lap::drop` and `Region::iterate`) it also keeps
//! lap windows: a call of `start` from a site opens one (closed by the next `drop`, innermost
//! first), a call of `iterate` from a site closes that site's open one and opens the next; the
//! instructions run while windows are open, outside the lap code itself, are counted per
//! (window, block start), like the graph's, and kept when the window closes (a window never
//! closed is no lap). Written as `SMPLLAP2`, `u32` key count, keys (kind
//! `u32`: 0 a guard, 1 an iteration; site `u32`, inside the call; laps `u64`), `u32` count
//! count, counts (kind, site, block start `u32` each, instructions `u64`), then `u32` count and
//! the distribution of the windows' lengths (kind, site `u32`, instructions `u64`, windows
//! `u64`).
//!
//! With `tasks=FILE`, `taskfns=BEGIN:END:READY:IDLE:POLL:PAUSE:RESUME:READ` (the entries of
//! sampler-rt's Embassy hooks `_embassy_trace_task_exec_begin`, `..._exec_end`,
//! `..._task_ready_begin`, `_embassy_trace_executor_idle`, `_embassy_trace_poll_start`, of
//! `sampler_rt_task_pause` and `sampler_rt_task_resume` (the sampler's own work inside the
//! application's time, left out of every window it falls in, as the firmware does), and the
//! instruction that reads the counter in the clock they call, `sampler_rt_task_clock_read`) and `taskpools=LO:HI:..`
//! (the address ranges of the tasks' pools) it times Embassy's polls exactly, at the instants
//! the firmware reads its clock: a hook's read is the next execution of that instruction after
//! the hook's entry (hooks of interrupts in between are matched innermost first), counted from
//! the exact counters of the blocks before it. The task a poll or a wake is for is the pool that
//! embassy-executor stored to last before the hook (it marks the task dequeued or queued just
//! before, in thread mode when `handlers=` has exceptions followed), not what the firmware
//! says. A poll that begins while another is running (another executor's, preempting it) is
//! nested in it, and the outer poll's time leaves the nested one's out, as the firmware does.
//! Written as `SMPLTSK1`, `u32` pool count, then per
//! pool (polls, instructions in polls, longest poll, wakes, instructions from wake to poll,
//! longest latency: `u64` each), then the instructions idle (from an idle hook's clock read to
//! the next poll start's), idle periods, instructions from the first clock read to the last,
//! polls whose task was not found, and the sampler's own instructions between its pauses and
//! resumes (`u64` each); then the idle time per executor, told apart by the context its hooks
//! run in (an `InterruptExecutor` idles in its interrupt's handler): a count, then per context
//! the entry of its innermost handler (0: thread mode), instructions idle and idle periods
//! (`u64` each). The idle time above is the first context's to idle.
//!
//! With `landings=FILE` (beside `handlers=`) it writes `SMPLLND1`, then per (handler,
//! context, address): `u32` each and `u64` instructions: each exception's instructions, nested
//! ones included, keyed by where the code it interrupted resumed (the context: the innermost
//! handler then running, 0 thread mode; a chain of tail-chained exceptions resumes where its
//! last one returns): where a sample that came due inside it is taken when the sampler cannot
//! preempt it.
//!
//! With `start=ADDR,startout=FILE` (ADDR: where sampler-rt's `start()` marks that sampling
//! begins), the counts of everything run before the first execution of ADDR are written to
//! `FILE` in the counts' format when it comes: the time no sample could see. With
//! `startgraph=FILE` beside `graph=`, the graph as it stood then goes to `FILE` (its format).
//!
//! Usage: `qemu-system-arm ... -plugin libcargo_sample_exact.so,out=counts.bin[,budget=N][,ticks=FILE]`.
#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

type qemu_plugin_id_t = u64;

#[repr(C)]
pub struct qemu_plugin_tb {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct qemu_plugin_insn {
    _opaque: [u8; 0],
}

/// `QEMU_PLUGIN_INLINE_ADD_U64`: 0 in every API version.
const INLINE_ADD_U64: c_int = 0;
/// `QEMU_PLUGIN_CB_NO_REGS`.
const CB_NO_REGS: c_int = 0;
/// `QEMU_PLUGIN_MEM_W`: stores only.
const MEM_W: c_int = 2;
/// `QEMU_PLUGIN_MEM_RW`: loads and stores.
const MEM_RW: c_int = 3;

unsafe extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(
        id: qemu_plugin_id_t,
        cb: extern "C" fn(qemu_plugin_id_t, *mut qemu_plugin_tb),
    );
    fn qemu_plugin_tb_n_insns(tb: *const qemu_plugin_tb) -> usize;
    fn qemu_plugin_tb_get_insn(tb: *const qemu_plugin_tb, idx: usize) -> *mut qemu_plugin_insn;
    fn qemu_plugin_insn_vaddr(insn: *const qemu_plugin_insn) -> u64;
    fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut qemu_plugin_tb,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_atexit_cb(
        id: qemu_plugin_id_t,
        cb: extern "C" fn(qemu_plugin_id_t, *mut c_void),
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_vcpu_insn_exec_cb(
        insn: *mut qemu_plugin_insn,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_vcpu_mem_cb(
        insn: *mut qemu_plugin_insn,
        cb: extern "C" fn(u32, u32, u64, *mut c_void),
        flags: c_int,
        rw: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_insn_disas(insn: *const qemu_plugin_insn) -> *mut c_char;
    fn qemu_plugin_insn_size(insn: *const qemu_plugin_insn) -> usize;
    fn free(ptr: *mut c_void);
    fn _exit(status: c_int) -> !;
}

/// API version 1: one plain `u64` per guest address, added to by QEMU's generated code.
#[cfg(not(feature = "api-v2"))]
mod counter {
    use super::*;

    /// The plugin API version this library was written for; QEMU refuses a mismatch by name.
    #[unsafe(no_mangle)]
    pub static qemu_plugin_version: c_int = 1;

    unsafe extern "C" {
        fn qemu_plugin_register_vcpu_insn_exec_inline(
            insn: *mut qemu_plugin_insn,
            op: c_int,
            ptr: *mut c_void,
            imm: u64,
        );
    }

    /// Boxed so that the address QEMU adds to never moves.
    pub struct Counter(Box<u64>);

    impl Counter {
        pub fn new() -> Counter {
            Counter(Box::new(0))
        }

        /// # Safety
        /// `insn` is an instruction of the block being translated.
        pub unsafe fn attach(&mut self, insn: *mut qemu_plugin_insn) {
            let ptr: *mut u64 = &mut *self.0;
            // SAFETY: see the function's contract; the counter outlives the translated code.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, INLINE_ADD_U64, ptr.cast(), 1)
            };
        }

        pub fn total(&self) -> u64 {
            *self.0
        }

        /// A reader of this counter that can live in a translated block's data.
        pub fn probe(&self) -> Probe {
            Probe(&*self.0)
        }
    }

    /// Reads one counter (the box it points into is never freed).
    #[derive(Clone, Copy)]
    pub struct Probe(*const u64);

    // SAFETY: read only from the vCPU thread's callbacks and at exit, under the plugin's locks;
    // it never writes.
    unsafe impl Send for Probe {}
    unsafe impl Sync for Probe {}

    impl Probe {
        pub fn get(self) -> u64 {
            // SAFETY: points into a `Box<u64>` that is never freed; QEMU's generated code
            // writes it on this same thread.
            unsafe { std::ptr::read_volatile(self.0) }
        }
    }
}

/// API version 2 and later (QEMU 9.0 on): a one-`u64` scoreboard per guest address, summed
/// over vCPUs at the end.
#[cfg(feature = "api-v2")]
mod counter {
    use super::*;

    /// The plugin API version this library was written for. QEMU 9.0 and later load every
    /// version from 2 to their own; the functions used here are in all of them.
    #[unsafe(no_mangle)]
    pub static qemu_plugin_version: c_int = 2;

    #[repr(C)]
    pub struct qemu_plugin_scoreboard {
        _opaque: [u8; 0],
    }

    /// `qemu_plugin_u64`: a `u64` at `offset` in each vCPU's entry of a scoreboard.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct qemu_plugin_u64 {
        score: *mut qemu_plugin_scoreboard,
        offset: usize,
    }

    unsafe extern "C" {
        fn qemu_plugin_scoreboard_new(element_size: usize) -> *mut qemu_plugin_scoreboard;
        fn qemu_plugin_u64_sum(entry: qemu_plugin_u64) -> u64;
        fn qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
            insn: *mut qemu_plugin_insn,
            op: c_int,
            entry: qemu_plugin_u64,
            imm: u64,
        );
    }

    pub struct Counter(qemu_plugin_u64);

    // SAFETY: the scoreboard is QEMU's; it is only read at exit, under the plugin's lock.
    unsafe impl Send for Counter {}

    impl Counter {
        pub fn new() -> Counter {
            // SAFETY: allocates a scoreboard of one u64 per vCPU, never freed (it lives as
            // long as the translated code that adds to it).
            let score = unsafe { qemu_plugin_scoreboard_new(8) };
            Counter(qemu_plugin_u64 { score, offset: 0 })
        }

        /// # Safety
        /// `insn` is an instruction of the block being translated.
        pub unsafe fn attach(&mut self, insn: *mut qemu_plugin_insn) {
            // SAFETY: see the function's contract.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, INLINE_ADD_U64, self.0, 1)
            };
        }

        pub fn total(&self) -> u64 {
            // SAFETY: a scoreboard entry this plugin created.
            unsafe { qemu_plugin_u64_sum(self.0) }
        }

        /// A reader of this counter that can live in a translated block's data.
        pub fn probe(&self) -> Probe {
            Probe(self.0)
        }
    }

    /// Reads one counter (its scoreboard is never freed).
    #[derive(Clone, Copy)]
    pub struct Probe(qemu_plugin_u64);

    // SAFETY: as for `Counter`; it never writes.
    unsafe impl Send for Probe {}
    unsafe impl Sync for Probe {}

    impl Probe {
        pub fn get(self) -> u64 {
            // SAFETY: a scoreboard entry this plugin created.
            unsafe { qemu_plugin_u64_sum(self.0) }
        }
    }
}

pub use counter::qemu_plugin_version;
use counter::{Counter, Probe};

/// Instruction budget (0 = none) and instructions started so far.
static BUDGET: AtomicU64 = AtomicU64::new(0);
static STARTED: AtomicU64 = AtomicU64::new(0);

struct Counters {
    by_pc: HashMap<u64, Counter>,
    out: Option<String>,
}

static STATE: Mutex<Option<Counters>> = Mutex::new(None);

/// Instructions between two ticks (`tick=N`; 64 by default, the DWT's finest tap).
static TICK: AtomicU64 = AtomicU64::new(64);

/// `stack=LOW:HIGH,stackout=FILE`: the main stack's range, and the lowest address a store
/// reached inside it (`u64::MAX` while none did).
static STACK_LOW: AtomicU64 = AtomicU64::new(0);
static STACK_HIGH: AtomicU64 = AtomicU64::new(0);
static STACK_DEEPEST: AtomicU64 = AtomicU64::new(u64::MAX);
static STACK_OUT: Mutex<Option<String>> = Mutex::new(None);

/// A store: the lowest address written in the stack's range so far, and the last task pool
/// written to.
extern "C" fn on_store(_vcpu: u32, _info: u32, vaddr: u64, _data: *mut c_void) {
    if vaddr >= STACK_LOW.load(Ordering::Relaxed) && vaddr < STACK_HIGH.load(Ordering::Relaxed) {
        STACK_DEEPEST.fetch_min(vaddr, Ordering::Relaxed);
    }
    if vaddr >= POOLS_LOW.load(Ordering::Relaxed) && vaddr < POOLS_HIGH.load(Ordering::Relaxed) {
        let pools = POOLS.get().map(Vec::as_slice).unwrap_or(&[]);
        let a = vaddr as u32;
        if let Some(i) = pools.iter().position(|&(lo, hi)| a >= lo && a < hi) {
            LAST_POOL[usize::from(in_exception())].store(i as u64 + 1, Ordering::Relaxed);
        }
    }
}

/// The entry of the innermost exception handler running (0: thread mode, or exceptions not
/// followed).
fn current_handler() -> u32 {
    GRAPH
        .lock()
        .map(|g| {
            g.as_ref()
                .filter(|g| g.follows())
                .map_or(0, |g| g.inner[g.current() as usize])
        })
        .unwrap_or(0)
}

/// Whether the code running is an exception handler's (when exceptions are followed: the task
/// a hook is for is the pool its own context, thread mode or handler, stored to last; a
/// handler that wakes a task between a thread-mode store and its hook changes nothing).
fn in_exception() -> bool {
    GRAPH
        .lock()
        .map(|g| {
            g.as_ref()
                .is_some_and(|g| g.follows() && g.inner[g.current() as usize] != 0)
        })
        .unwrap_or(false)
}

/// `taskpools=`: the tasks' pools, their span, and the last one stored to (index + 1; 0: none).
static POOLS: std::sync::OnceLock<Vec<(u32, u32)>> = std::sync::OnceLock::new();
static POOLS_LOW: AtomicU64 = AtomicU64::new(0);
static POOLS_HIGH: AtomicU64 = AtomicU64::new(0);
/// The last pool stored to in thread mode and in handlers (index + 1; 0: none).
static LAST_POOL: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// One pool's polls and wakes, in instructions.
#[derive(Default, Clone)]
struct PoolTimes {
    polls: u64,
    busy: u64,
    max_poll: u64,
    wakes: u64,
    latency: u64,
    max_latency: u64,
    /// The clock read of the first wake since the pool's last poll began, and the sampler's
    /// time then.
    ready_at: Option<(u64, u64)>,
}

/// An executor's context (its handler's entry, 0 thread mode), its idle period in progress
/// (clock read and the sampler's time then), instructions idle and idle periods.
type ExecutorIdle = (u32, Option<(u64, u64)>, u64, u64);

/// Embassy's polls, timed at the firmware's clock reads (`tasks=`).
struct TaskWatch {
    out: String,
    /// Entries of the hooks (begin, end, ready, idle, poll start, the sampler's pause and
    /// resume), and the clock's read.
    fns: [u32; 8],
    /// Hooks entered whose clock read is still to come, with the pool stored to last and the
    /// handler they run in.
    pending: Vec<(usize, u64, u32)>,
    /// Polls in progress (a poll of another executor nests in the one it preempts), with
    /// their clock reads, the sampler's time then, and the instructions of the polls nested in
    /// them so far (left out of their own, as the firmware does).
    running: Vec<(u64, u64, u64, u64)>,
    pools: Vec<PoolTimes>,
    /// Per context an executor idles in (its handler's entry, 0 thread mode), in the order
    /// they first idled: the idle period in progress, instructions idle and idle periods.
    idles: Vec<ExecutorIdle>,
    /// The sampler's own time (streaming a chunk) so far, and its current pause's start.
    stolen: u64,
    paused_at: u64,
    first: Option<u64>,
    last: u64,
    unknown: u64,
    /// Instructions run before the current block, from the exact counters of each block
    /// (QEMU replays an I/O access in a block of its own: counting whole blocks at their start
    /// would count the rest of the first one twice, at every read of the clock).
    count: u64,
    /// The block running, and its counters when it started.
    prev: Option<(&'static Block, Vec<u64>)>,
}

static TASKS: Mutex<Option<TaskWatch>> = Mutex::new(None);

impl TaskWatch {
    /// A block starts: the previous one's instructions that ran are counted (its counters that
    /// moved), then the block's hook or clock read is taken.
    fn block(&mut self, b: &'static Block) {
        if let Some((p, start)) = self.prev.take() {
            let ran = p
                .counters
                .iter()
                .zip(&start)
                .filter(|(c, v)| c.get() != **v)
                .count();
            // The clock's read, if it ran: at its place in the block (an interrupt may have
            // cut the block before it, and the read then starts a block of its own). A read of
            // a device register that ends a block which the next block starts again was not
            // done: QEMU stopped there to replay it alone.
            let replayed = b.pcs.first() == Some(&self.fns[7]);
            if let Some(i) = p.pcs[..ran]
                .iter()
                .position(|&pc| pc == self.fns[7])
                .filter(|&i| !(replayed && i + 1 == ran && ran < p.pcs.len()))
            {
                let t = self.count + i as u64;
                self.first.get_or_insert(t);
                self.last = t;
                if let Some((kind, pool, handler)) = self.pending.pop() {
                    self.clock(kind, pool, handler, t);
                }
            }
            self.count += ran as u64;
        }
        self.prev = Some((b, b.counters.iter().map(|c| c.get()).collect()));
        let Some(&pc) = b.pcs.first() else { return };
        if let Some(kind) = self.fns[..7].iter().position(|&f| f == pc) {
            self.pending.push((
                kind,
                LAST_POOL[usize::from(in_exception())].load(Ordering::Relaxed),
                current_handler(),
            ));
        }
    }

    /// Hook `kind`'s clock read at `t`, for the pool stored to last before it (index + 1), in
    /// the handler entered at `handler` (0: thread mode). The sampler's own time inside a
    /// window is left out of it, as the firmware does.
    fn clock(&mut self, kind: usize, pool: u64, handler: u32, t: u64) {
        let slot = (pool as usize).checked_sub(1);
        let stolen = self.stolen;
        match kind {
            0 => {
                self.running.push((pool, t, stolen, 0));
                match slot.and_then(|i| self.pools.get_mut(i)) {
                    Some(p) => {
                        if let Some((r, s0)) = p.ready_at.take() {
                            let l = t - r - (stolen - s0);
                            p.wakes += 1;
                            p.latency += l;
                            p.max_latency = p.max_latency.max(l);
                        }
                    }
                    None => self.unknown += 1,
                }
            }
            1 => {
                let Some((pool, b, s0, nested)) = self.running.pop() else {
                    return;
                };
                let wall = t - b - (stolen - s0);
                if let Some(outer) = self.running.last_mut() {
                    outer.3 += wall;
                }
                if let Some(p) = (pool as usize)
                    .checked_sub(1)
                    .and_then(|i| self.pools.get_mut(i))
                {
                    let d = wall.saturating_sub(nested);
                    p.polls += 1;
                    p.busy += d;
                    p.max_poll = p.max_poll.max(d);
                }
            }
            2 => {
                if let Some(p) = slot.and_then(|i| self.pools.get_mut(i)) {
                    p.ready_at.get_or_insert((t, stolen));
                }
            }
            3 => match self.idles.iter_mut().find(|e| e.0 == handler) {
                Some(e) => e.1 = Some((t, stolen)),
                None => self.idles.push((handler, Some((t, stolen)), 0, 0)),
            },
            4 => {
                if let Some(e) = self.idles.iter_mut().find(|e| e.0 == handler)
                    && let Some((a, s0)) = e.1.take()
                {
                    e.2 += t - a - (stolen - s0);
                    e.3 += 1;
                }
            }
            5 => self.paused_at = t,
            _ => self.stolen += t - self.paused_at,
        }
    }

    fn write(&self) {
        let mut b = b"SMPLTSK1".to_vec();
        b.extend_from_slice(&(self.pools.len() as u32).to_le_bytes());
        for p in &self.pools {
            for v in [
                p.polls,
                p.busy,
                p.max_poll,
                p.wakes,
                p.latency,
                p.max_latency,
            ] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        let span = self.first.map_or(0, |f| self.last - f);
        // An idle period still in progress counts up to the last clock read (the runtime's
        // at the start of its dump), as the firmware counts it.
        let idles: Vec<(u32, u64, u64)> = self
            .idles
            .iter()
            .map(|e| {
                let open = e.1.map_or(0, |(a, s0)| {
                    self.last.saturating_sub(a + (self.stolen - s0))
                });
                (e.0, e.2 + open, e.3)
            })
            .collect();
        let (idle, periods) = idles.first().map_or((0, 0), |e| (e.1, e.2));
        for v in [idle, periods, span, self.unknown, self.stolen] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(idles.len() as u64).to_le_bytes());
        for e in &idles {
            for v in [u64::from(e.0), e.1, e.2] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        write_file(&self.out, &b);
    }
}

/// The stack file: `SMPLSTK1`, then the range and the lowest address stored to (`u64`s,
/// little-endian; the last `u64::MAX` when no store reached the range).
fn write_stack() {
    let Some(path) = STACK_OUT.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    let mut b = b"SMPLSTK1".to_vec();
    for v in [&STACK_LOW, &STACK_HIGH, &STACK_DEEPEST] {
        b.extend_from_slice(&v.load(Ordering::Relaxed).to_le_bytes());
    }
    write_file(&path, &b);
}

/// The tick file, when asked for.
static TICKS: Mutex<Option<std::io::BufWriter<std::fs::File>>> = Mutex::new(None);

/// What a block's callback needs: its instructions' addresses and their counters, and whether
/// it ends with a call (`bl`, `blx`; A64 `bl`, `blr`): the address the call returns to, and
/// its target when the instruction names it.
struct Block {
    pcs: Vec<u32>,
    /// The exact counters of its instructions (in the call-graph mode): how many of them ran
    /// is read from them, not guessed.
    counters: Vec<Probe>,
    call: Option<(u32, Option<u32>)>,
    /// It ends with a return (`bx lr`, `pop {.., pc}`, `ldr pc, ..`; A64 `ret`, `eret`); for
    /// a conditional one (`bxne lr`, `popeq {.., pc}` in an IT block), the address after it,
    /// where it goes on when its condition fails. (Only then: an exception's return can
    /// tail-chain into a handler that starts right after the returning instruction.)
    ret: Option<Option<u32>>,
}

/// A frame of the followed stack.
struct Frame {
    node: u32,
    /// Where its call returns; `None` for an exception frame.
    ret: Option<u32>,
    /// Exception frames: the call pending when the exception came in (resumed after it).
    pending: Option<(u32, Option<u32>)>,
    /// Where the frame's function was entered.
    entry: u32,
    /// No instruction has run in it yet: a more urgent exception came in before the first
    /// one (late arrival), and the block at `entry` that follows its return resumes it.
    fresh: bool,
    /// Instructions run in the whole run when it was entered.
    entered_at: u64,
    /// Exception frames: the exceptions that returned just before it was entered, tail-chained
    /// to it, with their instructions: they return where it does.
    chained: Vec<(u32, u64)>,
}

/// The calling-context tree (`graph=FILE`): each node a function entered by a call (or an
/// exception entry) under its parent node; instructions counted per node and block start.
struct Graph {
    out: String,
    /// parent, entry PC, 1 for an exception entry, call site, calls.
    nodes: Vec<(u32, u32, u32, u32, u64)>,
    children: HashMap<(u32, u32, u32, u32), u32>,
    counts: HashMap<(u32, u32), u64>,
    stack: Vec<Frame>,
    /// The block that started last and its node, counted once the next block starts.
    prev: Option<(u32, &'static Block)>,
    /// Its counters' values when it started: those that moved since are the instructions
    /// that ran (a block can stop part way: an I/O access QEMU replays, a fault).
    before: Vec<u64>,
    /// The call the previous block ended with (if it ran to its end).
    pending: Option<(u32, Option<u32>)>,
    /// The previous block ran to its end and that end was a return (for a conditional one,
    /// the address after it, where it goes on when its condition fails).
    returned: Option<Option<u32>>,
    /// Exception handlers' entry addresses (`handlers=A:B:...`).
    handlers: Vec<u32>,
    /// Per node, the entry of the innermost exception around it (0: none).
    inner: Vec<u32>,
    /// Instructions per (innermost exception's entry, address), outside thread mode
    /// (`contexts=FILE`).
    contexts: HashMap<(u32, u32), u64>,
    contexts_out: Option<String>,
    /// Instructions settled so far, in the whole run.
    total: u64,
    /// Per (handler, context resumed, address resumed at): the instructions of that
    /// exception's entries that returned there (a chain of tail-chained exceptions returns
    /// where the last one does), nested exceptions included (`landings=FILE`): where a sample
    /// due while a handler the sampler cannot preempt ran is taken.
    landings: HashMap<(u32, u32, u32), u64>,
    /// Exceptions returned from whose chain has not returned yet: (handler, instructions).
    returned_chain: Vec<(u32, u64)>,
    landings_out: Option<String>,
    /// `startgraph=FILE`: the graph as it stood when the block at `start=` first began.
    start_out: Option<String>,
    /// Threads an RTOS switched away from (each task runs on a process stack of its own, with
    /// a stack of calls of its own): their frames and the span of stack addresses each
    /// touched. The running thread's frames are the bottom of `stack`, its span `span`.
    threads: Vec<SavedThread>,
    span: (u64, u64),
    /// A handler wrote the process stack pointer (`msr psp`: an RTOS switching tasks) since
    /// thread mode last ran.
    psp_written: bool,
    /// Back in thread mode after such a handler: which thread resumed is found at its first
    /// access of its stack; what ran meanwhile, to move if it was another.
    resuming: Option<Resuming>,
    /// Returns to an address no followed call returns to (a sign of a graph crossing stacks).
    stray_returns: u64,
    /// Per handler: entries, entries tail-chained (straight after another exception's
    /// return, without going back to the code it interrupted), and entries that came in late
    /// (before the first instruction of a less urgent exception just entered) (`chains=FILE`).
    chains: HashMap<u32, [u64; 3]>,
    chains_out: Option<String>,
    /// Lap windows (`laps=FILE`, `lapfns=START:DROP:ITERATE`): the entries of sampler-rt's
    /// `Region::start`, `Lap::drop` and `Region::iterate`.
    lapfns: [u32; 3],
    /// Per node: it runs inside one of those functions (its instructions are the lap code's
    /// own, in no window).
    in_lapfn: Vec<bool>,
    /// Open windows: `(kind, site)`, kind 0 a `start()` guard (closed by the next `drop`,
    /// innermost first), 1 an iteration (closed by the next `iterate` from the same site),
    /// with the instructions run in them so far per block start (kept once the window closes:
    /// one never closed, such as the code after a loop's last iteration, is no lap).
    windows: Vec<((u32, u32), HashMap<u32, u64>)>,
    /// Per window key: windows closed (laps).
    laps: HashMap<(u32, u32), u64>,
    /// Per (window key, block start): instructions run in the window.
    lap_counts: HashMap<(u32, u32, u32), u64>,
    /// Per (window key, instructions in one window): windows that ran that many.
    lap_totals: HashMap<(u32, u32, u64), u64>,
    laps_out: Option<String>,
}

/// A thread an RTOS switched away from: its frames, the span of stack addresses it touched,
/// and the call it was making when it was interrupted (entered when it resumes).
type SavedThread = (Vec<Frame>, (u64, u64), Option<(u32, Option<u32>)>);

/// Thread mode resumed after a handler wrote PSP.
struct Resuming {
    /// The call the interrupted thread was making (its target not yet run): it belongs to the
    /// thread that resumes only if that is the interrupted one.
    pending: Option<(u32, Option<u32>)>,
    /// How many frames of `stack` were the interrupted thread's.
    depth: usize,
    /// The first block run back in thread mode: a new thread's entry.
    first: u32,
    /// Counts settled since: (node, block start, instructions).
    settled: Vec<(u32, u32, u64)>,
    /// Nodes entered since (a call or an exception each).
    called: Vec<u32>,
}

/// A node's flags: entered by an exception; the entry of a thread (a task's first run).
const EXCEPTION: u32 = 1;
const THREAD: u32 = 2;

/// Stack accesses this far below a thread's lowest one still count as its own (a frame
/// deeper than any before; other tasks' stacks lie beyond their control blocks).
const SPAN_SLACK: u64 = 64;

static GRAPH: Mutex<Option<Graph>> = Mutex::new(None);

/// Frames deeper than this are not followed (runaway recursion): counted at the deepest.
const MAX_DEPTH: usize = 4096;

impl Graph {
    fn new(out: String, handlers: Vec<u32>) -> Graph {
        Graph {
            out,
            // Node 0: the root (what runs before any call is followed).
            nodes: vec![(0, 0, 0, 0, 0)],
            children: HashMap::new(),
            counts: HashMap::new(),
            stack: Vec::new(),
            prev: None,
            before: Vec::new(),
            pending: None,
            returned: None,
            handlers,
            inner: vec![0],
            contexts: HashMap::new(),
            contexts_out: None,
            total: 0,
            landings: HashMap::new(),
            returned_chain: Vec::new(),
            landings_out: None,
            start_out: None,
            threads: Vec::new(),
            span: (u64::MAX, 0),
            psp_written: false,
            resuming: None,
            stray_returns: 0,
            chains: HashMap::new(),
            chains_out: None,
            lapfns: [u32::MAX; 3],
            in_lapfn: vec![false],
            windows: Vec::new(),
            laps: HashMap::new(),
            lap_counts: HashMap::new(),
            lap_totals: HashMap::new(),
            laps_out: None,
        }
    }

    /// The node of `entry` entered from `site` (inside the call instruction, or the start of
    /// the interrupted block) under `parent`. The site tells the host which function made the
    /// call when a tail call left another function running in the parent's frame.
    fn child(&mut self, parent: u32, entry: u32, exception: u32, site: u32) -> u32 {
        let n = self.nodes.len() as u32;
        let id = *self
            .children
            .entry((parent, entry, exception, site))
            .or_insert(n);
        if id == n {
            self.nodes.push((parent, entry, exception, site, 0));
            let inner = if exception & EXCEPTION != 0 {
                entry
            } else {
                self.inner[parent as usize]
            };
            self.inner.push(inner);
            let lap_code = self.in_lapfn[parent as usize]
                || (exception & EXCEPTION == 0 && self.lapfns.contains(&entry));
            self.in_lapfn.push(lap_code);
        }
        id
    }

    /// Whether calls and exceptions are followed: a graph or per-exception counts asked for.
    fn follows(&self) -> bool {
        !self.out.is_empty()
            || self.contexts_out.is_some()
            || self.landings_out.is_some()
            || self.chains_out.is_some()
            || self.laps_out.is_some()
    }

    fn current(&self) -> u32 {
        self.stack.last().map(|f| f.node).unwrap_or(0)
    }

    /// Count the previous block's instructions that ran (its counters that moved since it
    /// started; they ran in order, so they are a prefix of it). Returns whether it ran to
    /// its end, and its start; a frame in which an instruction ran is no longer fresh.
    fn settle(&mut self) -> Option<(bool, u32)> {
        let (node, b) = self.prev.take()?;
        let ran = b
            .counters
            .iter()
            .zip(&self.before)
            .filter(|(c, before)| c.get() != **before)
            .count();
        if ran > 0 {
            self.total += ran as u64;
            *self.counts.entry((node, b.pcs[0])).or_default() += ran as u64;
            if let Some(r) = self.resuming.as_mut() {
                r.settled.push((node, b.pcs[0], ran as u64));
            }
            if !self.windows.is_empty() && !self.in_lapfn[node as usize] {
                for (_, open) in &mut self.windows {
                    *open.entry(b.pcs[0]).or_default() += ran as u64;
                }
            }
            let inner = self.inner[node as usize];
            if inner != 0 && self.contexts_out.is_some() {
                for &pc in &b.pcs[..ran] {
                    *self.contexts.entry((inner, pc)).or_default() += 1;
                }
            }
            if let Some(f) = self.stack.last_mut() {
                f.fresh = false;
            }
        }
        Some((ran == b.pcs.len(), b.pcs[0]))
    }

    /// A block starts: settle the previous one, follow calls, returns and exceptions.
    fn block(&mut self, b: &'static Block) {
        let pc = b.pcs[0];
        let settled = self.settle();
        if u64::from(pc) == START_AT.load(Ordering::Relaxed)
            && let Some(path) = self.start_out.take()
        {
            // The sampler starts here: the graph so far is the time no sample could see.
            write_file(&path, &self.encode());
        }
        if settled.is_some_and(|(whole, _)| !whole) {
            // Stopped part way: its last instruction (a call, a return) did not run.
            self.pending = None;
            self.returned = None;
        }
        let mut site = settled.map(|(_, start)| start);
        let mut popped = false;
        let returned = self
            .returned
            .take()
            .is_some_and(|failed| failed != Some(pc));
        if returned && self.stack.last().is_some_and(|f| f.ret.is_none()) {
            // A return at the level of an exception frame (its handler, or code the handler
            // branched to) is the exception's return: back to the frame it interrupted, with
            // the call that was pending then.
            let f = self.stack.pop().expect("checked above");
            popped = true;
            self.returned_chain.extend(f.chained);
            self.returned_chain
                .push((f.entry, self.total.saturating_sub(f.entered_at)));
            self.pending = f.pending;
            // An exception entered now (tail-chained) interrupts the same code as this one.
            site = Some(self.nodes[f.node as usize].3).filter(|&s| s != 0);
        }
        let target = self.pending.and_then(|p| p.1);
        // Back at the first instruction of a handler that was preempted before it ran one:
        // the same exception, resumed, not entered again.
        let resumed = self
            .stack
            .last()
            .is_some_and(|f| f.ret.is_none() && f.fresh && f.entry == pc);
        if self.handlers.contains(&pc) && target != Some(pc) && !resumed {
            self.enter_exception(pc, site, popped);
        } else {
            if popped {
                // Back in the code the exception (and those chained to it) interrupted:
                // where their samples land.
                let context = self.inner[self.current() as usize];
                for (handler, n) in std::mem::take(&mut self.returned_chain) {
                    *self.landings.entry((handler, context, pc)).or_default() += n;
                }
                if self.psp_written && self.stack.iter().all(|f| f.ret.is_some()) {
                    // Thread mode again, after a task switch perhaps: its first stack access
                    // tells which thread this is. (One still unknown from an earlier switch
                    // is taken to be the interrupted thread; a handler that ran meanwhile
                    // without switching leaves it to be found.)
                    self.psp_written = false;
                    if let Some(r) = self.resuming.take() {
                        self.resume(r, None, 0);
                    }
                    self.resuming = Some(Resuming {
                        pending: self.pending.take(),
                        depth: self.stack.len(),
                        first: pc,
                        settled: Vec::new(),
                        called: Vec::new(),
                    });
                }
            }
            self.call_or_return(pc, returned && !popped);
        }
        self.prev = Some((self.current(), b));
        self.before.clear();
        self.before.extend(b.counters.iter().map(|c| c.get()));
        self.pending = b.call;
        self.returned = b.ret;
    }

    /// An exception came in before the block at `pc` (the call pending, if any, is resumed
    /// after it); `site` is the start of the block it interrupted, `chained` whether another
    /// exception returned just before (a tail-chain on the core: no unstacking and stacking).
    fn enter_exception(&mut self, pc: u32, site: Option<u32>, chained: bool) {
        // A less urgent exception entered but not begun: on the core this one arrived late,
        // took over its stacking, and the other follows it by tail-chaining.
        let late = !chained
            && self
                .stack
                .last()
                .is_some_and(|f| f.ret.is_none() && f.fresh);
        let c = self.chains.entry(pc).or_default();
        c[0] += 1;
        c[1] += u64::from(chained);
        c[2] += u64::from(late);
        let node = self.child(self.current(), pc, EXCEPTION, site.unwrap_or(0));
        self.nodes[node as usize].4 += 1;
        if let Some(r) = self.resuming.as_mut() {
            r.called.push(node);
        }
        if self.stack.len() < MAX_DEPTH {
            self.stack.push(Frame {
                node,
                ret: None,
                pending: self.pending.take(),
                entry: pc,
                fresh: true,
                entered_at: self.total,
                chained: if chained {
                    std::mem::take(&mut self.returned_chain)
                } else {
                    Vec::new()
                },
            });
        }
    }

    /// A call of sampler-rt's lap code from `site`: `kind` 0 `Region::start` (opens a guard's
    /// window), 1 `Lap::drop` (closes the innermost guard's), 2 `Region::iterate` (closes the
    /// iteration's window from this site, and opens the next).
    fn lap_event(&mut self, kind: usize, site: u32) {
        let closing = match kind {
            0 => None,
            1 => self.windows.iter().rposition(|w| w.0.0 == 0),
            _ => self.windows.iter().position(|w| w.0 == (1, site)),
        };
        if let Some(i) = closing {
            let (key, counts) = self.windows.remove(i);
            *self.laps.entry(key).or_default() += 1;
            let mut total = 0;
            for (block, n) in counts {
                *self.lap_counts.entry((key.0, key.1, block)).or_default() += n;
                total += n;
            }
            *self.lap_totals.entry((key.0, key.1, total)).or_default() += 1;
        }
        match kind {
            0 => self.windows.push(((0, site), HashMap::new())),
            1 => {}
            _ => self.windows.push(((1, site), HashMap::new())),
        }
    }

    /// The block at `pc` is a call's target, a return (`returned`: the block before ended with
    /// one), or the next block of the same frame.
    fn call_or_return(&mut self, pc: u32, returned: bool) {
        // Reached by the call the previous block ended with: at its target, or, where the
        // instruction does not name one (`blx r1`), anywhere but the call's own return address
        // (where a conditional call whose condition failed, `blxne r1`, goes on).
        let taken = |&(ret, target): &(u32, Option<u32>)| target.map_or(pc != ret, |t| t == pc);
        if let Some((ret, _)) = self.pending.take().filter(taken) {
            if let Some(kind) = self.lapfns.iter().position(|&f| f == pc)
                && !self.in_lapfn[self.current() as usize]
            {
                self.lap_event(kind, ret.wrapping_sub(2));
            }
            let node = self.child(self.current(), pc, 0, ret.wrapping_sub(2));
            self.nodes[node as usize].4 += 1;
            if let Some(r) = self.resuming.as_mut() {
                r.called.push(node);
            }
            if self.stack.len() < MAX_DEPTH {
                self.stack.push(Frame {
                    node,
                    ret: Some(ret),
                    pending: None,
                    entry: pc,
                    fresh: true,
                    entered_at: self.total,
                    chained: Vec::new(),
                });
            }
        } else {
            // A return: to the innermost frame (above the nearest exception) whose call
            // returns here.
            let floor = self
                .stack
                .iter()
                .rposition(|f| f.ret.is_none())
                .map(|i| i + 1)
                .unwrap_or(0);
            match self.stack[floor..].iter().rposition(|f| f.ret == Some(pc)) {
                Some(i) => self.stack.truncate(floor + i),
                None if returned => self.stray_returns += 1,
                None => {}
            }
        }
    }

    /// An access of the stack at `addr` by the running code (a push, a pop, an access through
    /// SP). In thread mode it widens the running thread's span; the first one after a task
    /// switch says which thread resumed: the one whose span holds it, or a new one (a task's
    /// first run) when none does. Another thread's frames then replace the interrupted one's,
    /// and what ran since the switch moves to them.
    fn sp_access(&mut self, addr: u64) {
        if self.stack.iter().any(|f| f.ret.is_none()) {
            return;
        }
        let holds = |s: (u64, u64)| s.0.saturating_sub(SPAN_SLACK) <= addr && addr <= s.1;
        if let Some(r) = self.resuming.take() {
            let to = (!holds(self.span)).then(|| self.threads.iter().position(|t| holds(t.1)));
            self.resume(r, to, addr);
        }
        self.span = (self.span.0.min(addr), self.span.1.max(addr));
    }

    /// The thread running since `r` is the interrupted one (`to` `None`), a suspended one
    /// (`Some(Some(i))`, an index of `threads`), or a new one (`Some(None)`: a task's first
    /// run, entered at `r.first`, its stack at `addr`). The interrupted thread is kept with
    /// the call it was making; the resumed one enters its own, when its first block is that
    /// call's target; what ran since the switch moves under its frames.
    fn resume(&mut self, r: Resuming, to: Option<Option<usize>>, addr: u64) {
        let depth = r.depth.min(self.stack.len());
        let since = self.stack.split_off(depth);
        let old_top = self.current();
        let switched = to.is_some();
        let pending = match to {
            None => r.pending,
            Some(found) => {
                let (frames, span, pending) = match found {
                    Some(i) => self.threads.swap_remove(i),
                    None => {
                        let node = self.child(0, r.first, THREAD, 0);
                        self.nodes[node as usize].4 += 1;
                        let entry = Frame {
                            node,
                            ret: Some(u32::MAX),
                            pending: None,
                            entry: r.first,
                            fresh: false,
                            entered_at: self.total,
                            chained: Vec::new(),
                        };
                        (vec![entry], (addr, addr), None)
                    }
                };
                let old = std::mem::replace(&mut self.stack, frames);
                let span = std::mem::replace(&mut self.span, span);
                self.threads.push((old, span, r.pending));
                pending
            }
        };
        if let Some((ret, _)) =
            pending.filter(|&(ret, t)| t.map_or(r.first != ret, |t| t == r.first))
        {
            let node = self.child(self.current(), r.first, 0, ret.wrapping_sub(2));
            self.nodes[node as usize].4 += 1;
            self.stack.push(Frame {
                node,
                ret: Some(ret),
                pending: None,
                entry: r.first,
                fresh: false,
                entered_at: self.total,
                chained: Vec::new(),
            });
        }
        if !switched && self.current() == old_top {
            self.stack.extend(since);
            return;
        }
        // Everything run since the switch is the resumed thread's: each block against its
        // frames (one that starts where a call of its returns to is that return), and each
        // node entered since under them.
        let mut map: HashMap<u32, u32> = HashMap::new();
        let mut starts: Vec<(u32, u32, u64)> = r.settled;
        if let Some(p) = &self.prev {
            starts.push((p.0, p.1.pcs[0], 0));
        }
        for &(node, block, n) in &starts {
            if switched && let Some(i) = self.stack.iter().rposition(|f| f.ret == Some(block)) {
                self.stack.truncate(i);
            }
            let Some(to) = self.map_node(node, old_top, &mut map) else {
                continue;
            };
            if to != node && n > 0 {
                if let Some(c) = self.counts.get_mut(&(node, block)) {
                    *c = c.saturating_sub(n);
                }
                *self.counts.entry((to, block)).or_default() += n;
            }
        }
        for node in r.called {
            if let Some(to) = map.get(&node).copied().filter(|&to| to != node) {
                self.nodes[node as usize].4 = self.nodes[node as usize].4.saturating_sub(1);
                self.nodes[to as usize].4 += 1;
            }
        }
        for mut f in since {
            if let Some(to) = self.map_node(f.node, old_top, &mut map) {
                f.node = to;
            }
            self.stack.push(f);
        }
        if let Some(p) = self.prev.as_ref().map(|p| p.0) {
            let to = self.map_node(p, old_top, &mut map);
            if let (Some(to), Some(prev)) = (to, self.prev.as_mut()) {
                prev.0 = to;
            }
        }
    }

    /// Where `node`, run since a task switch, goes in the resumed thread: `old_top` (the
    /// interrupted thread's innermost frame) becomes the resumed thread's innermost frame now,
    /// and a node below it the same node under its parent's new place. `None` for a node not
    /// below `old_top`.
    fn map_node(&mut self, node: u32, old_top: u32, map: &mut HashMap<u32, u32>) -> Option<u32> {
        if node == old_top {
            return Some(self.current());
        }
        if let Some(&to) = map.get(&node) {
            return Some(to);
        }
        if node == 0 {
            return None;
        }
        let (parent, entry, flags, site, _) = self.nodes[node as usize];
        let p = self.map_node(parent, old_top, map)?;
        let to = self.child(p, entry, flags, site);
        map.insert(node, to);
        Some(to)
    }

    fn write(&mut self) {
        self.settle();
        if let Some(path) = &self.laps_out {
            let mut keys: Vec<_> = self.laps.iter().collect();
            keys.sort_unstable();
            let mut counts: Vec<_> = self.lap_counts.iter().collect();
            counts.sort_unstable();
            let mut b = Vec::with_capacity(16 + 16 * keys.len() + 20 * counts.len());
            b.extend_from_slice(b"SMPLLAP2");
            b.extend_from_slice(&(keys.len() as u32).to_le_bytes());
            for ((kind, site), n) in keys {
                b.extend_from_slice(&kind.to_le_bytes());
                b.extend_from_slice(&site.to_le_bytes());
                b.extend_from_slice(&n.to_le_bytes());
            }
            b.extend_from_slice(&(counts.len() as u32).to_le_bytes());
            for ((kind, site, block), n) in counts {
                b.extend_from_slice(&kind.to_le_bytes());
                b.extend_from_slice(&site.to_le_bytes());
                b.extend_from_slice(&block.to_le_bytes());
                b.extend_from_slice(&n.to_le_bytes());
            }
            let mut totals: Vec<_> = self.lap_totals.iter().collect();
            totals.sort_unstable();
            b.extend_from_slice(&(totals.len() as u32).to_le_bytes());
            for ((kind, site, total), n) in totals {
                b.extend_from_slice(&kind.to_le_bytes());
                b.extend_from_slice(&site.to_le_bytes());
                b.extend_from_slice(&total.to_le_bytes());
                b.extend_from_slice(&n.to_le_bytes());
            }
            write_file(path, &b);
        }
        if let Some(path) = &self.chains_out {
            let mut c: Vec<_> = self.chains.iter().collect();
            c.sort_unstable();
            let mut b = Vec::with_capacity(8 + 28 * c.len());
            b.extend_from_slice(b"SMPLCHN1");
            for (handler, n) in c {
                b.extend_from_slice(&handler.to_le_bytes());
                for v in n {
                    b.extend_from_slice(&v.to_le_bytes());
                }
            }
            write_file(path, &b);
        }
        if let Some(path) = &self.landings_out {
            let mut c: Vec<_> = self.landings.iter().collect();
            c.sort_unstable();
            let mut b = Vec::with_capacity(8 + 20 * c.len());
            b.extend_from_slice(b"SMPLLND1");
            for ((handler, context, pc), n) in c {
                for v in [handler, context, pc] {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                b.extend_from_slice(&n.to_le_bytes());
            }
            write_file(path, &b);
        }
        if let Some(path) = &self.contexts_out {
            let mut c: Vec<_> = self.contexts.iter().collect();
            c.sort_unstable();
            let mut b = Vec::with_capacity(8 + 16 * c.len());
            b.extend_from_slice(b"SMPLEXH1");
            for ((handler, pc), n) in c {
                b.extend_from_slice(&handler.to_le_bytes());
                b.extend_from_slice(&pc.to_le_bytes());
                b.extend_from_slice(&n.to_le_bytes());
            }
            write_file(path, &b);
        }
        if !self.out.is_empty() {
            write_file(&self.out, &self.encode());
        }
    }

    /// The graph as its file holds it.
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + 24 * self.nodes.len() + 16 * self.counts.len());
        b.extend_from_slice(b"SMPLCCT2");
        b.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        for (parent, entry, flags, site, calls) in &self.nodes {
            b.extend_from_slice(&parent.to_le_bytes());
            b.extend_from_slice(&entry.to_le_bytes());
            b.extend_from_slice(&flags.to_le_bytes());
            b.extend_from_slice(&site.to_le_bytes());
            b.extend_from_slice(&calls.to_le_bytes());
        }
        let mut counts: Vec<_> = self.counts.iter().filter(|c| *c.1 > 0).collect();
        counts.sort_unstable();
        b.extend_from_slice(&(counts.len() as u32).to_le_bytes());
        for ((node, pc), n) in counts {
            b.extend_from_slice(&node.to_le_bytes());
            b.extend_from_slice(&pc.to_le_bytes());
            b.extend_from_slice(&n.to_le_bytes());
        }
        // Trailer (readers of the format before it stop at the counts): returns that went where
        // no followed call returns.
        b.extend_from_slice(&self.stray_returns.to_le_bytes());
        b
    }
}

/// Write a file whole (through a temporary name), or say why not.
fn write_file(path: &str, b: &[u8]) {
    let tmp = format!("{path}.tmp");
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(b))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        eprintln!("cargo-sample exact-count plugin: cannot write {path}: {e}");
    }
}

/// Whether an instruction (QEMU's disassembly of it) returns from a function: `bx lr`, or a
/// load into PC from the stack (`pop {.., pc}`, `ldm sp!, {.., pc}`, `ldr pc, [sp], #4`).
/// A load into PC through another register is a computed jump (a dispatch through a table, a
/// tail call through a function pointer: `ldm.w r1, {r0, r2, r3, pc}`, `ldr pc, [r3, #12]`),
/// not a return. `Some(true)` when the return carries a condition (in an IT block: `bxne lr`,
/// `popeq {r4, pc}`), which may fail.
fn returns(disas: &str) -> Option<bool> {
    let d = disas.to_ascii_lowercase();
    let mut words = d.splitn(2, char::is_whitespace);
    let m = words.next().unwrap_or("");
    let m = m.trim_end_matches(".w").trim_end_matches(".n");
    let ops = words.next().unwrap_or("").trim();
    if m == "ret" || m == "eret" {
        return Some(false);
    }
    let (base, conditional) = match CONDITIONS.iter().find_map(|c| m.strip_suffix(c)) {
        Some(b) if matches!(b, "bx" | "pop" | "ldm" | "ldmia" | "ldmfd" | "ldr") => (b, true),
        _ => (m, false),
    };
    let returns = (base == "bx" && ops == "lr")
        || (base == "pop" && ops.contains("pc"))
        || (base.starts_with("ldm") && ops.starts_with("sp") && ops.contains("pc"))
        || (base == "ldr" && ops.starts_with("pc") && ops.contains("[sp"));
    returns.then_some(conditional)
}

/// Whether an instruction (QEMU's disassembly of it, lower case) writes the process stack
/// pointer: `msr psp, r0`.
fn writes_psp(d: &str) -> bool {
    d.starts_with("msr")
        && d.split_whitespace()
            .nth(1)
            .is_some_and(|r| r.starts_with("psp"))
}

/// Whether an instruction (lower case) reads or writes memory through SP: `push`, `pop`,
/// `ldr r0, [sp, #4]`, `stmdb sp!, {..}`, `vpush`.
fn accesses_stack(d: &str) -> bool {
    let m = d.split_whitespace().next().unwrap_or("");
    m.starts_with("push")
        || m.starts_with("pop")
        || m.starts_with("vpush")
        || m.starts_with("vpop")
        || ((m.starts_with("ld")
            || m.starts_with("st")
            || m.starts_with("vld")
            || m.starts_with("vst"))
            && (d.contains("[sp") || d.contains(" sp!")))
}

/// A write of PSP ran (`msr psp`): in a handler, a task switch perhaps (thread mode that sets
/// up its own process stack switches nothing).
extern "C" fn on_psp_write(_vcpu: u32, _data: *mut c_void) {
    if let Some(g) = GRAPH.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
        && g.stack.iter().any(|f| f.ret.is_none())
    {
        g.psp_written = true;
    }
}

/// An access of the stack through SP, at `vaddr`.
extern "C" fn on_sp_access(_vcpu: u32, _info: u32, vaddr: u64, _data: *mut c_void) {
    if let Some(g) = GRAPH.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        g.sp_access(vaddr);
    }
}

/// The condition codes an instruction in an IT block carries.
const CONDITIONS: [&str; 16] = [
    "eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le",
];

/// Whether an instruction (QEMU's disassembly of it) is a call, and its target if named.
fn call_of(disas: &str) -> Option<Option<u32>> {
    let mut words = disas.split_whitespace();
    let mnemonic = words.next()?.trim_end_matches(".w").to_ascii_lowercase();
    // In an IT block a call carries its condition (`blxne r1`, `bleq f`). The condition is
    // two letters, so `blt`, `ble`, `bls` and `blo` stay what they are: conditional branches.
    let base = ["blx", "bl"].into_iter().find(|b| {
        mnemonic
            .strip_prefix(b)
            .is_some_and(|c| c.is_empty() || CONDITIONS.contains(&c))
    });
    if base.is_none() && mnemonic != "blr" {
        return None;
    }
    let target = words
        .next()
        .map(|t| t.trim_start_matches('#').trim_end_matches(','))
        .and_then(|t| u32::from_str_radix(t.trim_start_matches("0x"), 16).ok())
        .map(|t| t & !1);
    Some(target)
}

extern "C" fn on_block(_vcpu: u32, data: *mut c_void) {
    // SAFETY: the pointer is a `Block` leaked at translation, never freed.
    let block: &'static Block = unsafe { &*(data as *const Block) };
    let n = block.pcs.len() as u64;
    let before = STARTED.fetch_add(n, Ordering::Relaxed);
    let total = before + n;
    let tick = TICK.load(Ordering::Relaxed);
    if total / tick > before / tick {
        let mut guard = TICKS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = guard.as_mut() {
            let mut k = (before / tick + 1) * tick;
            while k <= total {
                let pc = block.pcs[(k - before - 1) as usize];
                let _ = w.write_all(&pc.to_le_bytes());
                k += tick;
            }
        }
    }
    let budget = BUDGET.load(Ordering::Relaxed);
    let ends = budget != 0 && total >= budget;
    if !ends && let Some(g) = GRAPH.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        // (At the budget the run ends before this block runs: it is not followed.)
        g.block(block);
    }
    // After the graph: a hook's context (thread mode or a handler) is the block's own, the
    // return from a handler that came just before it already followed.
    if let Some(w) = TASKS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        w.block(block);
    }
    if ends {
        write_counts();
        // Tell the host that the budget, not the program, ended the run.
        let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(path) = guard.as_ref().and_then(|s| s.out.as_ref()) {
            let _ = std::fs::write(format!("{path}.budget"), b"");
        }
        // SAFETY: ends the process at once; QEMU holds nothing that must be flushed.
        unsafe { _exit(0) }
    }
}

extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.as_mut() else { return };
    // SAFETY: QEMU passes a valid translation block for the duration of this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    let counting = state.out.is_some();
    let stacking =
        STACK_HIGH.load(Ordering::Relaxed) != 0 || POOLS_HIGH.load(Ordering::Relaxed) != 0;
    let tasking = TASKS.lock().map(|t| t.is_some()).unwrap_or(false);
    let graphing = GRAPH
        .lock()
        .map(|g| g.as_ref().is_some_and(Graph::follows))
        .unwrap_or(false);
    let mut pcs = Vec::with_capacity(n);
    let mut counters = Vec::new();
    let mut call = None;
    let mut ret = None;
    for i in 0..n {
        // SAFETY: i < n, as the API requires; the instruction belongs to this block.
        unsafe {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let pc = qemu_plugin_insn_vaddr(insn);
            pcs.push(pc as u32);
            if graphing {
                let text = qemu_plugin_insn_disas(insn);
                if !text.is_null() {
                    let d = CStr::from_ptr(text).to_string_lossy().to_ascii_lowercase();
                    free(text.cast());
                    if i + 1 == n {
                        let size = qemu_plugin_insn_size(insn) as u32;
                        call = call_of(&d).map(|t| (pc as u32 + size, t));
                        ret =
                            returns(&d).map(|conditional| conditional.then_some(pc as u32 + size));
                    }
                    // What an RTOS's task switch shows: a write of PSP in a handler, then the
                    // resumed thread's accesses of its own stack.
                    if writes_psp(&d) {
                        qemu_plugin_register_vcpu_insn_exec_cb(
                            insn,
                            on_psp_write,
                            CB_NO_REGS,
                            std::ptr::null_mut(),
                        );
                    }
                    if accesses_stack(&d) {
                        qemu_plugin_register_vcpu_mem_cb(
                            insn,
                            on_sp_access,
                            CB_NO_REGS,
                            MEM_RW,
                            std::ptr::null_mut(),
                        );
                    }
                }
            }
            if stacking {
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    on_store,
                    CB_NO_REGS,
                    MEM_W,
                    std::ptr::null_mut(),
                );
            }
            if counting {
                let counter = state.by_pc.entry(pc).or_insert_with(Counter::new);
                counter.attach(insn);
                if graphing || tasking {
                    counters.push(counter.probe());
                }
            }
        }
    }
    if pcs
        .first()
        .is_some_and(|&pc| u64::from(pc) == START_AT.load(Ordering::Relaxed))
    {
        // SAFETY: registering on the block QEMU is translating; no user data.
        unsafe {
            qemu_plugin_register_vcpu_tb_exec_cb(tb, on_start, CB_NO_REGS, std::ptr::null_mut())
        };
    }
    let ticking = TICKS.lock().map(|t| t.is_some()).unwrap_or(false);
    if (BUDGET.load(Ordering::Relaxed) != 0 || ticking || graphing || tasking) && !pcs.is_empty() {
        let block = Box::into_raw(Box::new(Block {
            pcs,
            counters,
            call,
            ret,
        }))
        .cast::<c_void>();
        // SAFETY: registering on the block QEMU is translating; the user data lives for ever.
        unsafe { qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, CB_NO_REGS, block) };
    }
}

extern "C" fn on_exit(_id: qemu_plugin_id_t, _userdata: *mut c_void) {
    write_counts();
}

fn flush_ticks() {
    if let Some(w) = TICKS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = w.flush();
    }
}

fn write_counts() {
    flush_ticks();
    write_stack();
    if let Some(w) = TASKS.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        w.write();
    }
    if let Some(g) = GRAPH.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
        && g.follows()
    {
        g.write();
    }
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.as_ref() else { return };
    let Some(path) = &state.out else { return };
    write_file(path, &encode_counts(state));
}

/// The counts so far as the counts file holds them: `SMPLEXC1`, then `(pc, count)` pairs
/// sorted by pc.
fn encode_counts(state: &Counters) -> Vec<u8> {
    let mut pairs: Vec<(u64, u64)> = state
        .by_pc
        .iter()
        .map(|(pc, c)| (*pc, c.total()))
        .filter(|&(_, n)| n > 0)
        .collect();
    pairs.sort_unstable();
    let mut bytes = Vec::with_capacity(8 + 16 * pairs.len());
    bytes.extend_from_slice(b"SMPLEXC1");
    for (pc, c) in pairs {
        bytes.extend_from_slice(&pc.to_le_bytes());
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    bytes
}

/// `start=ADDR,startout=FILE`: where the firmware starts its sampler, and the file that gets
/// the counts of every instruction run before the first time it gets there (the time no
/// sample could see).
static START_AT: AtomicU64 = AtomicU64::new(u64::MAX);
static START_OUT: Mutex<Option<String>> = Mutex::new(None);

/// The block at `start=` begins: the first time, the counts so far (none of its own yet: a
/// block's counters move as its instructions run) are written to `startout=`.
extern "C" fn on_start(_vcpu: u32, _data: *mut c_void) {
    let Some(path) = START_OUT.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(state) = guard.as_ref() {
        write_file(&path, &encode_counts(state));
    }
}

/// The call graph's state, made on first use, changed by `f` (argument parsing).
fn with_graph(f: impl FnOnce(&mut Graph)) {
    let mut g = GRAPH.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(|| Graph::new(String::new(), Vec::new())));
}

/// The task watch's state, made on first use, changed by `f` (argument parsing).
fn with_tasks(f: impl FnOnce(&mut TaskWatch)) {
    let mut t = TASKS.lock().unwrap_or_else(|e| e.into_inner());
    f(t.get_or_insert_with(|| TaskWatch {
        out: String::new(),
        fns: [u32::MAX; 8],
        pending: Vec::new(),
        running: Vec::new(),
        pools: Vec::new(),
        idles: Vec::new(),
        stolen: 0,
        paused_at: 0,
        first: None,
        last: 0,
        unknown: 0,
        count: 0,
        prev: None,
    }));
}

/// Hexadecimal addresses separated by `:`, the Thumb bit cleared.
fn addresses(v: &str) -> Vec<u32> {
    v.split(':')
        .filter_map(|h| u32::from_str_radix(h.trim_start_matches("0x"), 16).ok())
        .map(|h| h & !1)
        .collect()
}

/// Entry point QEMU calls after loading the library.
///
/// # Safety
/// Called by QEMU with `argc` valid C strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    _info: *const c_void,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let mut out = None;
    for i in 0..argc.max(0) as usize {
        // SAFETY: QEMU passes argc valid NUL-terminated strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        match arg.split_once('=') {
            Some(("out", v)) => out = Some(v.to_owned()),
            Some(("ticks", v)) => match std::fs::File::create(v) {
                Ok(f) => {
                    *TICKS.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(std::io::BufWriter::with_capacity(4096, f))
                }
                Err(e) => {
                    eprintln!("cargo-sample exact-count plugin: cannot create {v}: {e}");
                    return -1;
                }
            },
            Some(("graph", v)) => {
                with_graph(|g| g.out = v.to_owned());
            }
            Some(("contexts", v)) => {
                with_graph(|g| g.contexts_out = Some(v.to_owned()));
            }
            Some(("landings", v)) => {
                with_graph(|g| g.landings_out = Some(v.to_owned()));
            }
            Some(("laps", v)) => {
                with_graph(|g| g.laps_out = Some(v.to_owned()));
            }
            Some(("lapfns", v)) => {
                let list = addresses(v);
                if list.len() != 3 {
                    eprintln!(
                        "cargo-sample exact-count plugin: lapfns=`{v}` is not START:DROP:ITERATE"
                    );
                    return -1;
                }
                with_graph(|g| g.lapfns = [list[0], list[1], list[2]]);
            }
            Some(("stack", v)) => {
                let range = addresses(v);
                if range.len() != 2 || range[0] >= range[1] {
                    eprintln!("cargo-sample exact-count plugin: stack=`{v}` is not LOW:HIGH");
                    return -1;
                }
                STACK_LOW.store(u64::from(range[0]), Ordering::Relaxed);
                STACK_HIGH.store(u64::from(range[1]), Ordering::Relaxed);
            }
            Some(("tasks", v)) => with_tasks(|w| w.out = v.to_owned()),
            Some(("taskfns", v)) => {
                let list = addresses(v);
                if list.len() != 8 {
                    eprintln!(
                        "cargo-sample exact-count plugin: taskfns=`{v}` is not BEGIN:END:READY:IDLE:POLL:PAUSE:RESUME:READ"
                    );
                    return -1;
                }
                with_tasks(|w| w.fns.copy_from_slice(&list));
            }
            Some(("taskpools", v)) => {
                let list: Vec<u32> = v
                    .split(':')
                    .filter_map(|h| u32::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                    .collect();
                let pools: Vec<(u32, u32)> =
                    list.chunks(2).map(|c| (c[0], c[c.len() - 1])).collect();
                if !list.len().is_multiple_of(2) || pools.iter().any(|&(lo, hi)| lo >= hi) {
                    eprintln!(
                        "cargo-sample exact-count plugin: taskpools=`{v}` is not LO:HI:LO:HI.."
                    );
                    return -1;
                }
                let low = pools.iter().map(|p| p.0).min().unwrap_or(0);
                let high = pools.iter().map(|p| p.1).max().unwrap_or(0);
                POOLS_LOW.store(u64::from(low), Ordering::Relaxed);
                POOLS_HIGH.store(u64::from(high), Ordering::Relaxed);
                with_tasks(|w| w.pools = vec![PoolTimes::default(); pools.len()]);
                let _ = POOLS.set(pools);
            }
            Some(("start", v)) => match addresses(v).as_slice() {
                [a] => START_AT.store(u64::from(*a), Ordering::Relaxed),
                _ => {
                    eprintln!("cargo-sample exact-count plugin: start=`{v}` is not an address");
                    return -1;
                }
            },
            Some(("startgraph", v)) => {
                with_graph(|g| g.start_out = Some(v.to_owned()));
            }
            Some(("startout", v)) => {
                *START_OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(v.to_owned());
            }
            Some(("stackout", v)) => {
                *STACK_OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(v.to_owned());
            }
            Some(("chains", v)) => {
                with_graph(|g| g.chains_out = Some(v.to_owned()));
            }
            Some(("handlers", v)) => {
                let list = addresses(v);
                with_graph(|g| g.handlers = list);
            }
            Some(("tick", v)) => match v.parse::<u64>() {
                Ok(n) if n > 0 => TICK.store(n, Ordering::Relaxed),
                _ => {
                    eprintln!(
                        "cargo-sample exact-count plugin: tick=`{v}` is not a positive number"
                    );
                    return -1;
                }
            },
            Some(("budget", v)) => match v.parse::<u64>() {
                Ok(n) => BUDGET.store(n, Ordering::Relaxed),
                Err(_) => {
                    eprintln!("cargo-sample exact-count plugin: budget=`{v}` is not a number");
                    return -1;
                }
            },
            _ => {
                eprintln!(
                    "cargo-sample exact-count plugin: unknown argument `{arg}` (takes out=FILE, budget=N, ticks=FILE, tick=N, graph=FILE, contexts=FILE, chains=FILE, laps=FILE, lapfns=A:B:C, handlers=A:B:.., landings=FILE, stack=LOW:HIGH, stackout=FILE, start=ADDR, startout=FILE, startgraph=FILE, tasks=FILE, taskfns=A:B:C:D:E:F:G:H, taskpools=LO:HI:..)"
                );
                return -1;
            }
        }
    }
    let graphing = GRAPH
        .lock()
        .map(|g| g.as_ref().is_some_and(Graph::follows))
        .unwrap_or(false);
    let tasks_incomplete = TASKS
        .lock()
        .map(|t| {
            t.as_ref()
                .is_some_and(|w| w.out.is_empty() || w.fns.contains(&u32::MAX))
        })
        .unwrap_or(false);
    let tasks_without_counts = out.is_none() && TASKS.lock().map(|t| t.is_some()).unwrap_or(false);
    if tasks_incomplete || tasks_without_counts {
        eprintln!(
            "cargo-sample exact-count plugin: tasks=FILE, taskfns=... and taskpools=... go together, with out=FILE"
        );
        return -1;
    }
    if graphing && out.is_none() {
        // The graph reads how much of each block ran from the exact counters.
        eprintln!(
            "cargo-sample exact-count plugin: graph=FILE, contexts=FILE, chains=FILE and landings=FILE need out=FILE"
        );
        return -1;
    }
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Counters {
        by_pc: HashMap::new(),
        out,
    });
    // SAFETY: registering callbacks with the id QEMU gave us.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
        qemu_plugin_register_atexit_cb(id, on_exit, std::ptr::null_mut());
    }
    0
}
