//! Lap timing of code regions with a cycle counter.
//!
//! ```ignore
//! use sampler_rt::laps::Region;
//!
//! static SUM: Region = Region::new("sum_array");
//! static LOOP: Region = Region::iteration("main loop");
//!
//! loop {
//!     LOOP.iterate();                   // time since the previous iteration
//!     let total = SUM.measure(|| sum_array(&data));
//!     // or: let lap = SUM.start(); ...; drop(lap);
//! }
//! ```
//!
//! The counter is DWT CYCCNT where it counts (checked by watching it move: QEMU and Cortex-M0
//! have none), else SysTick's current value (free-running from 0xFFFFFF when nobody uses
//! SysTick; the application's own SysTick period when it does). While the sampler paces itself
//! with SysTick at a random period, SysTick cannot time laps: laps are then counted as
//! unmeasured (pace the sampler with a CMSDK timer, or use a core with CYCCNT).
//!
//! Each region keeps its calls, min, max and sum, and its distinct lap values with their counts
//! (up to [`VALUES`]; laps beyond are counted apart), which is what the host needs to find the
//! clusters of a multi-modal distribution. The cost of a lap itself (the instructions between
//! the two counter reads) is measured once as the shortest of several empty laps and sent with
//! the laps; the host subtracts it. Regions reach the host in the dump's LAPS record.
//!
//! Regions are registered at their first lap, up to [`MAX_REGIONS`].
//!
//! While the sampler runs, each lap is also kept in order with the number of samples taken
//! when it started (the last [`TRACE`] laps, `SAMPLER_RT_LAP_TRACE` at build time, 12 bytes
//! each; 0 keeps none), so the host can draw laps on the samples' timeline.

use core::cell::UnsafeCell;
use core::ptr::{addr_of, addr_of_mut};
use core::sync::atomic::{AtomicBool, Ordering};

use crate::wire;

/// Distinct lap values kept per region.
pub const VALUES: usize = 32;
/// Regions the runtime keeps.
pub const MAX_REGIONS: usize = 16;
/// Laps kept in order while the sampler runs (the newest; `SAMPLER_RT_LAP_TRACE`).
pub const TRACE: usize = crate::decimal(env!("SAMPLER_RT_LAP_TRACE"));

/// A named region whose laps are timed.
pub struct Region {
    name: &'static str,
    kind: u8,
    registered: AtomicBool,
    data: UnsafeCell<Data>,
}

// SAFETY: `data` is only touched with interrupts masked (single core).
unsafe impl Sync for Region {}

#[derive(Clone, Copy)]
struct Data {
    /// Counter at the start of the lap in progress (or the previous iteration).
    start: u32,
    /// Samples taken when the lap in progress started (`u32::MAX`: the sampler was not running).
    start_seq: u32,
    started: bool,
    /// The region's index in the table (`u8::MAX`: not in it).
    index: u8,
    calls: u32,
    min: u32,
    max: u32,
    sum: u64,
    /// Laps whose value found no room in `values`.
    overflow: u32,
    /// Laps that could not be timed (no usable counter).
    unmeasured: u32,
    n: u32,
    /// The address of the code `measure`'s laps run, or the return address of the first
    /// `start`/`iterate` call, as `via` says.
    body: u32,
    /// `wire::LAP_VIA_*`.
    via: u8,
    values: [(u32, u32); VALUES],
}

const EMPTY: Data = Data {
    start: 0,
    start_seq: NO_SEQ,
    started: false,
    index: u8::MAX,
    calls: 0,
    min: u32::MAX,
    max: 0,
    sum: 0,
    overflow: 0,
    unmeasured: 0,
    n: 0,
    body: 0,
    via: 0,
    values: [(0, 0); VALUES],
};

/// A lap in progress: the region's time ends when it is dropped.
#[must_use = "the lap ends when this is dropped"]
pub struct Lap<'a> {
    region: &'a Region,
    start: u32,
    seq: u32,
}

impl Drop for Lap<'_> {
    #[inline(never)]
    fn drop(&mut self) {
        // Masked from the counter's read to the trace's count of samples: a sample in between
        // would be counted inside the lap without its time.
        without_interrupts(|| {
            let end = read_counter();
            self.region.record(self.start, end, self.seq);
        });
    }
}

/// `r`, through a register the compiler cannot see into: it cannot rebuild the address later
/// (in the middle of a lap) from what it knew of it.
#[inline(always)]
fn opaque<T>(r: &T) -> &T {
    let mut a = r as *const T as usize;
    // SAFETY: an empty instruction template; the address comes back unchanged.
    unsafe {
        core::arch::asm!("/* {0} */", inout(reg) a, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: `a` is `r`'s address.
    unsafe { &*(a as *const T) }
}

/// A closure and the room for its result, as [`Region::measure`] hands them to the lap code.
struct Call<F, R> {
    f: core::mem::ManuallyDrop<F>,
    out: core::mem::MaybeUninit<R>,
}

/// Call the closure of the [`Call`] at `data` and keep its result there: one function per
/// closure type, the body of that region's laps.
///
/// # Safety
/// `data` points to a `Call<F, R>` whose closure has not been taken.
unsafe fn call_once<F: FnOnce() -> R, R>(data: *mut ()) {
    // SAFETY: as the caller promises.
    let call = unsafe { &mut *data.cast::<Call<F, R>>() };
    // SAFETY: taken once, here.
    let f = unsafe { core::mem::ManuallyDrop::take(&mut call.f) };
    call.out.write(f());
}

/// The counter and the samples taken at the start of a lap, read so that they agree: a sample
/// taken between the two reads would lengthen the lap without being counted in it (or be
/// counted without its time), so the samples taken are read again after the counter and the
/// pair is read anew if one came in between (without masking interrupts, which would hold the
/// sampler off). The instructions after the counter's read are the same every time.
#[inline(always)]
fn start_lap() -> (u32, u32) {
    if TRACE == 0 {
        return (read_counter(), NO_SEQ);
    }
    loop {
        let before = seq();
        let start = read_counter();
        if seq() == before {
            return (start, before);
        }
    }
}

/// A start sequence number meaning "the sampler was not running".
const NO_SEQ: u32 = u32::MAX;

/// The samples taken so far, read right after a lap's first counter read.
#[inline(always)]
fn seq() -> u32 {
    if TRACE == 0 {
        return NO_SEQ;
    }
    crate::running_seq().unwrap_or(NO_SEQ)
}

impl Region {
    /// A region timed from [`start`](Region::start) to the end of its lap.
    pub const fn new(name: &'static str) -> Region {
        Region {
            name,
            kind: wire::LAP_REGION,
            registered: AtomicBool::new(false),
            data: UnsafeCell::new(EMPTY),
        }
    }

    /// The iteration of a loop (a cyclic executive): each [`iterate`](Region::iterate) times
    /// the iteration since the previous one.
    pub const fn iteration(name: &'static str) -> Region {
        Region {
            name,
            kind: wire::LAP_ITERATION,
            registered: AtomicBool::new(false),
            data: UnsafeCell::new(EMPTY),
        }
    }

    /// Start a lap.
    #[inline(never)]
    pub fn start(&self) -> Lap<'_> {
        if !self.registered.load(Ordering::Relaxed) {
            // No call made yet: the link register holds where this one returns.
            self.register(arch::return_address(), wire::LAP_VIA_START);
        }
        let (start, seq) = start_lap();
        Lap {
            region: self,
            start,
            seq,
        }
    }

    /// Time `f`: the lap is `f`'s own code between two reads of the counter, and the cost of
    /// an empty lap is subtracted by the host, so the corrected lap is what `f` takes. (A
    /// [`start`](Region::start) guard is handier but its cost varies by a few instructions
    /// with how the caller keeps the guard.)
    #[inline(always)]
    pub fn measure<F: FnOnce() -> R, R>(&self, f: F) -> R {
        let mut call = Call {
            f: core::mem::ManuallyDrop::new(f),
            out: core::mem::MaybeUninit::uninit(),
        };
        self.time(call_once::<F, R>, (&mut call as *mut Call<F, R>).cast());
        // SAFETY: `time` called `call_once` exactly once, which wrote `out`.
        unsafe { call.out.assume_init() }
    }

    /// The lap around `body(data)`, called once. One copy of this code times every region
    /// (and the calibration's empty lap), so every lap runs exactly the same instructions of
    /// its own: the counter reads, the indirect call and the body's return. The body's
    /// address is kept with the region (a host that counted every instruction finds the
    /// code the laps ran by it).
    #[inline(never)]
    fn time(&self, body: unsafe fn(*mut ()), data: *mut ()) {
        if !self.registered.load(Ordering::Relaxed) {
            self.register(body as usize as u32, wire::LAP_VIA_MEASURE);
        }
        let this = opaque(self);
        // At the end the counter is read where the lap is recorded, interrupts masked (see
        // `Lap::drop`).
        let (start, seq) = start_lap();
        // SAFETY: `data` is the `Call` that `body` was instantiated for (see `measure`).
        unsafe { body(data) };
        without_interrupts(|| {
            let end = read_counter();
            this.record(start, end, seq);
        });
    }

    /// Mark the start of an iteration: the time since the previous mark is one lap.
    #[inline(never)]
    pub fn iterate(&self) {
        if !self.registered.load(Ordering::Relaxed) {
            // No call made yet: the link register holds where this one returns.
            self.register(arch::return_address(), wire::LAP_VIA_ITERATE);
        }
        let now = read_counter();
        without_interrupts(|| {
            // SAFETY: interrupts are masked; nothing else touches `data`.
            let d = unsafe { &mut *self.data.get() };
            let (start, started) = (d.start, d.started);
            d.started = true;
            if started {
                record_into(d, start, now, d.start_seq);
            }
        });
        // The next iteration starts after this bookkeeping.
        let next = seq();
        let again = read_counter();
        without_interrupts(|| {
            // SAFETY: as above.
            let d = unsafe { &mut *self.data.get() };
            d.start = again;
            d.start_seq = next;
        });
    }

    /// Forget the iteration in progress (after work that should not count, e.g. printing).
    pub fn restart(&self) {
        without_interrupts(|| {
            // SAFETY: interrupts are masked.
            let d = unsafe { &mut *self.data.get() };
            d.started = false;
        });
    }

    fn record(&self, start: u32, end: u32, seq: u32) {
        without_interrupts(|| {
            // SAFETY: interrupts are masked; nothing else touches `data`.
            record_into(unsafe { &mut *self.data.get() }, start, end, seq);
        });
    }

    /// Enter the region in the table; `body` is the code its laps run (`measure`), or where
    /// its first `start`/`iterate` call returns, as `via` says (`wire::LAP_VIA_*`).
    #[cold]
    fn register(&self, body: u32, via: u32) {
        without_interrupts(|| {
            if self.registered.load(Ordering::Relaxed) {
                return;
            }
            self.registered.store(true, Ordering::Relaxed);
            // SAFETY: interrupts are masked; the table is only changed here.
            let t = unsafe { &mut *addr_of_mut!(TABLE) };
            if t.len < MAX_REGIONS {
                t.regions[t.len] = self as *const Region;
                // SAFETY: interrupts are masked; no lap of this region is recorded yet.
                unsafe {
                    (*self.data.get()).index = t.len as u8;
                    (*self.data.get()).body = body;
                    (*self.data.get()).via = via as u8;
                    *addr_of_mut!(TRACE_HOOK) = Some((ring_len, write_ring));
                }
                t.len += 1;
            } else {
                t.dropped += 1;
            }
        });
        counter();
    }
}

fn record_into(d: &mut Data, start: u32, end: u32, start_seq: u32) {
    let Some(v) = elapsed(start, end) else {
        d.unmeasured += 1;
        return;
    };
    if start_seq != NO_SEQ && d.index != u8::MAX {
        trace(d.index, start_seq, v);
    }
    d.calls += 1;
    d.sum += v as u64;
    d.min = d.min.min(v);
    d.max = d.max.max(v);
    let n = d.n as usize;
    if let Some(slot) = d.values[..n].iter_mut().find(|e| e.0 == v) {
        slot.1 += 1;
    } else if n < VALUES {
        d.values[n] = (v, 1);
        d.n += 1;
    } else {
        d.overflow += 1;
    }
}

/// The newest laps in order (a ring of [`TRACE`] entries).
struct Trace {
    /// Laps traced since the start; entry `total % TRACE` is the next to write.
    total: u32,
    entries: [[u32; 3]; TRACE],
}

static mut TRACE_RING: Trace = Trace {
    total: 0,
    entries: [[0; 3]; TRACE],
};

/// Keep one lap in the trace. Called with interrupts masked.
fn trace(index: u8, start_seq: u32, ticks: u32) {
    let inside = crate::running_seq()
        .unwrap_or(start_seq)
        .wrapping_sub(start_seq)
        .min(0x00FF_FFFF);
    // SAFETY: interrupts are masked by the caller; nothing else touches the ring.
    let t = unsafe { &mut *addr_of_mut!(TRACE_RING) };
    if let Some(e) = t.entries.get_mut(t.total as usize % TRACE.max(1)) {
        *e = [index as u32 | inside << 8, start_seq, ticks];
        t.total = t.total.wrapping_add(1);
    }
}

struct Table {
    regions: [*const Region; MAX_REGIONS],
    len: usize,
    dropped: u32,
}

static mut TABLE: Table = Table {
    regions: [core::ptr::null(); MAX_REGIONS],
    len: 0,
    dropped: 0,
};

/// The counter in use: `wire::LAP_COUNTER_*`, chosen at the first lap.
static mut COUNTER: u8 = 0xFF;
/// SysTick's period (RVR + 1) when SysTick is the counter.
#[cfg(target_arch = "arm")]
static mut SYSTICK_SPAN: u32 = 1 << 24;
/// The shortest empty lap, in counter ticks.
static mut OVERHEAD: u32 = 0;

fn counter() -> u8 {
    // SAFETY: single core; chosen once, before any lap reads it.
    unsafe {
        if COUNTER == 0xFF {
            COUNTER = choose_counter();
            arch::set_address(COUNTER);
            OVERHEAD = calibrate();
        }
        COUNTER
    }
}

/// Whether the sampler is pacing itself with SysTick right now (then no lap can be read from
/// SysTick). The sampler's `start` says how to tell; until then, it is not.
#[cfg(target_arch = "arm")]
pub(crate) static mut SYSTICK_SAMPLING: fn() -> bool = || false;

/// Cortex-M: DWT CYCCNT, else SysTick.
#[cfg(target_arch = "arm")]
#[path = "arch_arm.rs"]
mod arch;

/// ARMv8-A: the PMU's cycle counter (PMCCNTR_EL0) where there is a PMU, else the virtual
/// generic timer's count (CNTVCT_EL0).
#[cfg(target_arch = "aarch64")]
#[path = "arch_a64.rs"]
mod arch;

use crate::without_interrupts;
use arch::{choose_counter, elapsed, read as read_counter};

/// The shortest of several empty laps: what a lap costs by itself, through the very code a
/// real lap runs.
fn calibrate() -> u32 {
    // Pre-registered: never reported.
    static CAL: Region = Region {
        name: "",
        kind: wire::LAP_REGION,
        registered: AtomicBool::new(true),
        data: UnsafeCell::new(EMPTY),
    };
    for _ in 0..16 {
        CAL.measure(|| ());
    }
    // SAFETY: only this function uses CAL.
    let d = unsafe { &*CAL.data.get() };
    if d.calls == 0 { 0 } else { d.min }
}

/// The LAPS record's payload length.
pub(crate) fn record_len() -> Option<u32> {
    // SAFETY: called with sampling stopped; the table only grows.
    let t = unsafe { &*addr_of!(TABLE) };
    if t.len == 0 {
        return None;
    }
    let mut len = 16u32;
    for &r in &t.regions[..t.len] {
        // SAFETY: registered regions are statics.
        let r = unsafe { &*r };
        // SAFETY: read with interrupts masked by the caller's context (dump time).
        let d = unsafe { &*r.data.get() };
        len += 44 + (r.name.len() as u32).div_ceil(4) * 4 + d.n * 8;
    }
    Some(len)
}

/// The LAP_TRACE record's payload length, when laps were traced.
pub(crate) fn trace_len() -> Option<u32> {
    // SAFETY: set once, at the first region's registration; read at dump time.
    let hook = unsafe { *addr_of!(TRACE_HOOK) };
    hook.and_then(|(len, _)| len())
}

/// The trace, reached only through this hook, which the first registered region sets: the
/// ring's RAM is linked only into firmware that times laps (the dump code refers to the hook).
type TraceHook = (fn() -> Option<u32>, fn(&mut dyn FnMut(&[u8])));
static mut TRACE_HOOK: Option<TraceHook> = None;

fn ring_len() -> Option<u32> {
    // SAFETY: called with sampling stopped.
    let total = unsafe { (*addr_of!(TRACE_RING)).total };
    (total != 0).then(|| 8 + 12 * (total as usize).min(TRACE) as u32)
}

/// Write the LAP_TRACE record's payload through `put`: the laps oldest first.
pub(crate) fn write_trace(mut put: impl FnMut(&[u8])) {
    // SAFETY: as in `trace_len`.
    if let Some((_, write)) = unsafe { *addr_of!(TRACE_HOOK) } {
        write(&mut put);
    }
}

fn write_ring(put: &mut dyn FnMut(&[u8])) {
    // SAFETY: dump time: nothing records meanwhile.
    let t = unsafe { &*addr_of!(TRACE_RING) };
    let count = (t.total as usize).min(TRACE);
    put(&t.total.to_le_bytes());
    put(&(count as u32).to_le_bytes());
    let first = t.total as usize - count;
    for k in first..t.total as usize {
        for w in t.entries[k % TRACE] {
            put(&w.to_le_bytes());
        }
    }
}

/// Write the LAPS record's payload through `put`.
pub(crate) fn write_record(mut put: impl FnMut(&[u8])) {
    // SAFETY: as in `record_len`.
    let t = unsafe { &*addr_of!(TABLE) };
    // SAFETY: plain reads of values set once.
    let (counter, overhead) = unsafe { (COUNTER, OVERHEAD) };
    let put32 = |put: &mut dyn FnMut(&[u8]), v: u32| put(&v.to_le_bytes());
    put32(&mut put, t.len as u32);
    put32(&mut put, counter as u32);
    put32(&mut put, overhead);
    put32(&mut put, t.dropped);
    for &r in &t.regions[..t.len] {
        // SAFETY: registered regions are statics.
        let r = unsafe { &*r };
        // SAFETY: dump time: nothing records meanwhile.
        let d = unsafe { *r.data.get() };
        put32(&mut put, r.name.len() as u32);
        put(r.name.as_bytes());
        let pad = (4 - r.name.len() % 4) % 4;
        put(&[0, 0, 0][..pad]);
        put32(&mut put, r.kind as u32 | u32::from(d.via) << 8);
        put32(&mut put, d.calls);
        put32(&mut put, if d.calls == 0 { 0 } else { d.min });
        put32(&mut put, d.max);
        put32(&mut put, d.sum as u32);
        put32(&mut put, (d.sum >> 32) as u32);
        put32(&mut put, d.overflow);
        put32(&mut put, d.unmeasured);
        put32(&mut put, d.n);
        put32(&mut put, d.body);
        for &(v, c) in &d.values[..d.n as usize] {
            put32(&mut put, v);
            put32(&mut put, c);
        }
    }
}
