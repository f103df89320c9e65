//! ARMv8-A PMU event counting around named regions (aarch64).
//!
//! ```ignore
//! use sampler_rt::pmu::{self, Region};
//!
//! static WORK: Region = Region::new("work");
//!
//! pmu::init(&[pmu::INST_RETIRED, pmu::L1D_CACHE_REFILL]); // unless `cargo sample stat` chose
//! WORK.measure(|| work());
//! pmu::finish(0); // the counts to the host (semihosting), then exit
//! ```
//!
//! `init` probes the PMU (ID_AA64DFR0_EL1.PMUVer, PMCR_EL0.N, PMCEID0/1_EL0), takes the group
//! of events `cargo sample stat` wrote into the image (or the firmware's own), refuses a group
//! larger than the CPU's counters, and programs the event counters and the cycle counter to
//! count at the level it runs at (EL1 and EL0; at EL2 the NSH filter bit adds EL2; at EL3 the
//! counters are enabled in MDCR_EL3). A region's lap reads every counter before and after;
//! the first pre value, the last post value and the sum of deltas of every counter are kept.
//! `finish` writes a dump (INFO and PMU records) through semihosting and exits.
//!
//! While the sampler runs, each region's lap is also kept in order with the number of samples
//! taken when it started and its counts (the newest ones that fit `SAMPLER_RT_PMU_TRACE_WORDS`
//! words), and the sampler's dump carries the PMU record and that trace: `cargo sample --format
//! firefox` draws the counts as counters over time.

use core::arch::asm;
use core::cell::UnsafeCell;
use core::ptr::{addr_of, addr_of_mut};
use core::sync::atomic::{AtomicBool, Ordering};

use crate::semihosting::{SYS_CLOSE, SYS_OPEN, SYS_WRITE, semihost};
use crate::wire::{self, DumpWriter};

mod hooks;
use hooks::{DUMP_HOOK, HOOKS};
pub(crate) use hooks::{record_len, trace_len, write_record, write_trace};

/// Software increment (writes to PMSWINC_EL0).
pub const SW_INCR: u16 = 0x00;
/// L1 data cache refill.
pub const L1D_CACHE_REFILL: u16 = 0x03;
/// L1 data cache access.
pub const L1D_CACHE: u16 = 0x04;
/// Instruction architecturally executed.
pub const INST_RETIRED: u16 = 0x08;
/// Cycle.
pub const CPU_CYCLES: u16 = 0x11;

/// Regions kept.
pub const MAX_REGIONS: usize = 16;
const SLOTS: usize = wire::PMU_MAX_EVENTS + 1;

#[doc(hidden)]
/// The group the host asks for (`cargo sample stat` writes it into the image). Not zeros, so
/// that it lands in initialised data, where the host can patch the ELF file.
#[unsafe(no_mangle)]
#[used]
static mut SAMPLER_RT_PMU_CONFIG: [u8; wire::PMU_CONFIG_LEN] = [0xFF; wire::PMU_CONFIG_LEN];

const OUT_BYTES: usize = crate::decimal(env!("SAMPLER_RT_PMU_OUT_BYTES"));
/// Words of the ring of region laps kept in order while sampling.
const TRACE_WORDS: usize = crate::decimal(env!("SAMPLER_RT_PMU_TRACE_WORDS"));

#[doc(hidden)]
/// Where the counts wait for a debugger when the host asked for that (`wire::PMU_FLAG_MEMORY`:
/// boards, which have no semihosting host). Layout in `wire::PMU_OUT_SYMBOL`.
#[repr(C)]
struct PmuOut {
    magic: u32,
    run_id: u32,
    len: u32,
    full: u32,
    bytes: [u8; OUT_BYTES],
}

#[doc(hidden)]
/// The counts left in memory (found by name by the host).
#[unsafe(no_mangle)]
static mut SAMPLER_RT_PMU_OUT: PmuOut = PmuOut {
    magic: 0,
    run_id: 0,
    len: 0,
    full: 0,
    bytes: [0; OUT_BYTES],
};

const _: () = assert!(core::mem::offset_of!(PmuOut, bytes) == wire::PMU_OUT_HEADER);

/// What the PMU said and what is counted.
struct Pmu {
    ready: bool,
    status: u32,
    n: u32,
    pmceid: [u32; 4],
    dfr0: u64,
    el: u32,
    events: [u16; wire::PMU_MAX_EVENTS],
    count: usize,
    /// The counters that count SW_INCR.
    sw_mask: u64,
    /// `wire::PMU_FLAG_*` and the run's id, from the host's block.
    flags: u32,
    run_id: u32,
}

static mut PMU: Pmu = Pmu {
    ready: false,
    status: wire::PMU_ABSENT,
    n: 0,
    pmceid: [0; 4],
    dfr0: 0,
    el: 0,
    events: [0; wire::PMU_MAX_EVENTS],
    count: 0,
    sw_mask: 0,
    flags: 0,
    run_id: 0,
};

macro_rules! mrs {
    ($reg:literal) => {{
        let v: u64;
        // SAFETY: reading a PMU or identification register has no side effects.
        unsafe { asm!(concat!("mrs {}, ", $reg), out(reg) v, options(nomem, nostack)) };
        v
    }};
}

macro_rules! msr {
    ($reg:literal, $v:expr) => {{
        let v: u64 = $v;
        // SAFETY: PMU control registers; the caller owns the PMU.
        unsafe { asm!(concat!("msr ", $reg, ", {}"), "isb", in(reg) v, options(nostack)) };
    }};
}

/// Count `events` around regions from now on, unless the host chose a group for this run.
/// Returns the wire status: `PMU_OK`, `PMU_TOO_MANY` (more events than counters: nothing is
/// counted and the host is told), or `PMU_ABSENT`.
pub fn init(events: &[u16]) -> u32 {
    // SAFETY: single-threaded bare-metal start-up; the host's block is plain memory.
    let p = unsafe { &mut *addr_of_mut!(PMU) };
    let cfg = crate::host_block(addr_of!(SAMPLER_RT_PMU_CONFIG));
    let (list, count) = match wire::pmu_config_events(&cfg) {
        Some(h) => h,
        None => {
            let mut e = [0u16; wire::PMU_MAX_EVENTS];
            let n = events.len().min(wire::PMU_MAX_EVENTS);
            e[..n].copy_from_slice(&events[..n]);
            (e, events.len())
        }
    };
    (p.flags, p.run_id) = wire::pmu_config_flags(&cfg).unwrap_or((0, 0));
    p.events = list;
    p.count = count.min(wire::PMU_MAX_EVENTS);
    p.ready = true;
    p.el = ((mrs!("CurrentEL") >> 2) & 3) as u32;
    p.dfr0 = mrs!("ID_AA64DFR0_EL1");
    let pmuver = (p.dfr0 >> 8) & 0xF;
    if pmuver == 0 || pmuver == 0xF {
        p.status = wire::PMU_ABSENT;
        return p.status;
    }
    p.n = ((mrs!("PMCR_EL0") >> 11) & 0x1F) as u32;
    let e0 = mrs!("PMCEID0_EL0");
    let e1 = mrs!("PMCEID1_EL0");
    p.pmceid = [e0 as u32, e1 as u32, (e0 >> 32) as u32, (e1 >> 32) as u32];
    if count > p.n as usize {
        p.status = wire::PMU_TOO_MANY;
        return p.status;
    }
    // Let the lower levels count: at EL3 secure counting, at EL2 all counters to EL1.
    if p.el == 3 {
        // MDCR_EL3.SPME (bit 17): counting in Secure state.
        let v = mrs!("MDCR_EL3");
        msr!("MDCR_EL3", v | 1 << 17);
    }
    if p.el >= 2 {
        // MDCR_EL2.HPMN = N (all counters belong to EL1/EL0), HPME off.
        let v = mrs!("MDCR_EL2");
        msr!("MDCR_EL2", (v & !0x9F) | p.n as u64);
    }
    // Count at EL1 and EL0; at EL2 and above also there (NSH, bit 27).
    let filter: u64 = if p.el >= 2 { 1 << 27 } else { 0 };
    p.sw_mask = 0;
    for (i, &e) in p.events[..p.count].iter().enumerate() {
        msr!("PMSELR_EL0", i as u64);
        msr!("PMXEVTYPER_EL0", filter | e as u64);
        if e == SW_INCR {
            p.sw_mask |= 1 << i;
        }
    }
    msr!("PMCCFILTR_EL0", filter);
    let mask = (1u64 << p.count) - 1;
    msr!("PMCNTENCLR_EL0", !mask & 0x7FFF_FFFF);
    msr!("PMCNTENSET_EL0", mask | 1 << 31);
    // E (enable), P (reset event counters), C (reset cycle counter), LC (64-bit cycle counter).
    let pmcr = mrs!("PMCR_EL0");
    msr!("PMCR_EL0", pmcr | 1 | 1 << 1 | 1 << 2 | 1 << 6);
    p.status = wire::PMU_OK;
    p.status
}

/// The counters now: the group's event counters, then the cycle counter.
#[inline(always)]
fn read_all(out: &mut [u64; SLOTS], count: usize) {
    for (i, slot) in out.iter_mut().enumerate().take(count) {
        msr!("PMSELR_EL0", i as u64);
        *slot = mrs!("PMXEVCNTR_EL0");
    }
    out[count] = mrs!("PMCCNTR_EL0");
}

/// A named region whose events are counted.
pub struct Region {
    name: &'static str,
    registered: AtomicBool,
    data: UnsafeCell<Data>,
}

// SAFETY: single core, and regions are not measured from interrupt handlers.
unsafe impl Sync for Region {}

#[derive(Clone, Copy)]
struct Data {
    /// The region's index in the table (`u8::MAX`: not in it).
    index: u8,
    calls: u32,
    pre: [u64; SLOTS],
    post: [u64; SLOTS],
    sum: [u64; SLOTS],
}

impl Region {
    /// A region.
    pub const fn new(name: &'static str) -> Region {
        Region {
            name,
            registered: AtomicBool::new(false),
            data: UnsafeCell::new(Data {
                index: u8::MAX,
                calls: 0,
                pre: [0; SLOTS],
                post: [0; SLOTS],
                sum: [0; SLOTS],
            }),
        }
    }

    /// Count the events of `f`.
    #[inline(never)]
    pub fn measure<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.registered.load(Ordering::Relaxed) {
            self.register();
        }
        // SAFETY: set once by `init`.
        let (ok, count) = unsafe {
            let p = &*addr_of!(PMU);
            (p.status == wire::PMU_OK, p.count)
        };
        if !ok {
            return f();
        }
        let mut pre = [0u64; SLOTS];
        let mut post = [0u64; SLOTS];
        let seq = if TRACE_WORDS > 0 {
            crate::running_seq()
        } else {
            None
        };
        read_all(&mut pre, count);
        let r = f();
        read_all(&mut post, count);
        // SAFETY: single core; nothing else touches this region's data.
        let d = unsafe { &mut *self.data.get() };
        if let Some(seq) = seq {
            trace(d.index, seq, &pre, &post, count);
        }
        if d.calls == 0 {
            d.pre = pre;
        }
        d.post = post;
        for i in 0..=count {
            d.sum[i] = d.sum[i].wrapping_add(post[i].wrapping_sub(pre[i]));
        }
        d.calls += 1;
        r
    }

    fn register(&self) {
        self.registered.store(true, Ordering::Relaxed);
        // SAFETY: single core.
        let t = unsafe { &mut *addr_of_mut!(TABLE) };
        if t.len < MAX_REGIONS {
            t.regions[t.len] = self as *const Region;
            // SAFETY: single core; no lap of this region is recorded yet.
            unsafe {
                (*self.data.get()).index = t.len as u8;
                *addr_of_mut!(DUMP_HOOK) = Some(&HOOKS);
            }
            t.len += 1;
        }
    }
}

/// The newest region laps in order: entries of `2 + count + 1` words (the region and the
/// samples inside, the samples taken at its start, then each counter's delta, the cycle
/// counter last), in a ring of whole entries.
struct Trace {
    /// Laps traced since the start.
    total: u32,
    words: [u32; TRACE_WORDS],
}

static mut TRACE: Trace = Trace {
    total: 0,
    words: [0; TRACE_WORDS],
};

fn trace(index: u8, start_seq: u32, pre: &[u64; SLOTS], post: &[u64; SLOTS], count: usize) {
    if index == u8::MAX {
        return;
    }
    let width = 3 + count;
    let capacity = TRACE_WORDS / width;
    if capacity == 0 {
        return;
    }
    let inside = crate::running_seq()
        .unwrap_or(start_seq)
        .wrapping_sub(start_seq)
        .min(0x00FF_FFFF);
    // SAFETY: single core; regions are not measured from interrupt handlers.
    let t = unsafe { &mut *addr_of_mut!(TRACE) };
    let at = (t.total as usize % capacity) * width;
    t.words[at] = index as u32 | inside << 8;
    t.words[at + 1] = start_seq;
    for i in 0..=count {
        t.words[at + 2 + i] = post[i].wrapping_sub(pre[i]) as u32;
    }
    t.total = t.total.wrapping_add(1);
}

struct Table {
    regions: [*const Region; MAX_REGIONS],
    len: usize,
}

static mut TABLE: Table = Table {
    regions: [core::ptr::null(); MAX_REGIONS],
    len: 0,
};

/// Counter 0's PMSWINC bit when the sampler samples on SW_INCR overflows (set by the sampler's
/// `start`), so that [`sw_incr`] advances it too.
static mut SAMPLER_SW_INCR_MASK: u64 = 0;

/// The sampler samples every N software increments on counter 0.
pub(crate) fn sampler_counts_sw_incr() {
    // SAFETY: written once, by `start`, before sampling begins.
    unsafe { SAMPLER_SW_INCR_MASK = 1 };
}

#[inline]
fn sampler_sw_incr_mask() -> u64 {
    // SAFETY: a plain read; written once by `start`.
    unsafe { core::ptr::read_volatile(addr_of!(SAMPLER_SW_INCR_MASK)) }
}

/// Add one to the counters that count `SW_INCR`: those of the group (if it has the event), and
/// the sampler's counter when it samples every N software increments (`--timer pmu:sw_incr`).
#[inline]
pub fn sw_incr() {
    // SAFETY: set once by `init`.
    let mask = unsafe { (*addr_of!(PMU)).sw_mask } | sampler_sw_incr_mask();
    msr!("PMSWINC_EL0", mask);
}

// ---------------------------------------------------------------------------------------------
// The dump, through semihosting (AArch64: `hlt #0xf000`, operation in w0, block in x1).

/// Where the dump goes: a semihosting file, or `SAMPLER_RT_PMU_OUT`.
enum Sink {
    File(u64),
    Memory { at: usize, full: bool },
}

struct Out {
    sink: Sink,
    /// The CRC register of the dump so far ([`wire::DumpWriter`]).
    crc: u32,
}

impl wire::DumpWriter for Out {
    fn raw(&mut self, b: &[u8]) {
        match &mut self.sink {
            Sink::File(handle) => {
                let block = [*handle, b.as_ptr() as u64, b.len() as u64];
                semihost(SYS_WRITE, block.as_ptr());
            }
            Sink::Memory { at, full } => {
                let room = OUT_BYTES - *at;
                let n = b.len().min(room);
                *full |= n < b.len();
                // SAFETY: counting is over; the buffer is only written here, within its size.
                unsafe {
                    let dst = addr_of_mut!(SAMPLER_RT_PMU_OUT.bytes) as *mut u8;
                    core::ptr::copy_nonoverlapping(b.as_ptr(), dst.add(*at), n);
                }
                *at += n;
            }
        }
    }
    fn crc_word(&mut self) -> &mut u32 {
        &mut self.crc
    }
}

/// Payload length of the PMU record.
fn pmu_len(p: &Pmu, t: &Table) -> u32 {
    let mut len = 44 + 4 * p.count as u32 + 4;
    for &r in &t.regions[..t.len] {
        // SAFETY: registered regions are statics.
        let r = unsafe { &*r };
        len += 4 + (r.name.len() as u32).div_ceil(4) * 4 + 8 + 24 * (p.count as u32 + 1);
    }
    len
}

/// Whether this run is `cargo sample stat`'s: the host wrote its configuration.
pub(crate) fn stat_run() -> bool {
    wire::pmu_config_events(&crate::host_block(addr_of!(SAMPLER_RT_PMU_CONFIG))).is_some()
}

/// Whether the firmware counts regions ([`init`] was called).
pub(crate) fn counting() -> bool {
    // SAFETY: a plain read of a flag set once at start-up.
    unsafe { (*addr_of!(PMU)).ready }
}

/// Send the counts to the host (a `sampler.dump` file through semihosting) and exit with
/// `code`. In a run that is not `cargo sample stat`'s this is [`crate::exit`]: one ending
/// serves an image that is both sampled and counted. When the host asked for the counts in memory (a board: `cargo sample stat --chip`),
/// leave them in `SAMPLER_RT_PMU_OUT` for the debugger instead and idle.
pub fn finish(code: i32) -> ! {
    if !stat_run() {
        // Not a `cargo sample stat` run (a sampling run, or no host at all): the sampler's
        // ending sends what that run asked for (the dump, with these regions' counts in it),
        // and a `flush()` before this one is not written over.
        crate::exit(code)
    }
    // SAFETY: single core; counting is over.
    let (p, t) = unsafe { (&*addr_of!(PMU), &*addr_of!(TABLE)) };
    if p.flags & wire::PMU_FLAG_MEMORY != 0 {
        let mut o = Out {
            sink: Sink::Memory { at: 0, full: false },
            crc: 0,
        };
        write_dump(&mut o, p, t);
        if let Sink::Memory { at, full } = o.sink {
            // SAFETY: plain stores; the magic goes last, after a barrier, so that a debugger
            // that sees it sees the rest.
            unsafe {
                let out = addr_of_mut!(SAMPLER_RT_PMU_OUT);
                core::ptr::write_volatile(addr_of_mut!((*out).run_id), p.run_id);
                core::ptr::write_volatile(addr_of_mut!((*out).len), at as u32);
                core::ptr::write_volatile(addr_of_mut!((*out).full), full as u32);
                asm!("dsb sy", options(nostack));
                core::ptr::write_volatile(addr_of_mut!((*out).magic), wire::PMU_OUT_MAGIC);
                asm!("dsb sy", options(nostack));
            }
        }
        let _ = code;
        loop {
            // SAFETY: waiting has no memory effects.
            unsafe { asm!("wfi", options(nomem, nostack)) };
        }
    }
    let name = b"sampler.dump\0";
    let block = [name.as_ptr() as u64, 5, (name.len() - 1) as u64];
    let handle = semihost(SYS_OPEN, block.as_ptr());
    if handle >= 0 {
        let mut o = Out {
            sink: Sink::File(handle as u64),
            crc: 0,
        };
        write_dump(&mut o, p, t);
        if let Sink::File(h) = o.sink {
            semihost(SYS_CLOSE, [h].as_ptr());
        }
    }
    crate::semihosting::exit(code)
}

/// The dump: header, INFO, PMU, END with the CRC.
fn write_dump(o: &mut Out, p: &Pmu, t: &Table) {
    o.begin();
    let info = wire::Info {
        mode: wire::MODE_OFF,
        arch: 8,
        rt_version: crate::RT_VERSION,
        ..wire::Info::default()
    };
    o.info(&info);
    o.record(wire::REC_PMU, pmu_len(p, t));
    payload(p, t, &mut |b| o.put(b));
    o.end();
}

/// The PMU record's payload.
fn payload(p: &Pmu, t: &Table, put: &mut dyn FnMut(&[u8])) {
    let put32 = |put: &mut dyn FnMut(&[u8]), v: u32| put(&v.to_le_bytes());
    let put64 = |put: &mut dyn FnMut(&[u8]), v: u64| put(&v.to_le_bytes());
    for v in p.pmceid {
        put32(put, v);
    }
    put64(put, p.dfr0);
    put32(put, p.n);
    put32(put, p.el);
    put32(put, if p.ready { p.status } else { wire::PMU_ABSENT });
    put32(put, 0);
    put32(put, p.count as u32);
    for &e in &p.events[..p.count] {
        put32(put, e as u32);
    }
    put32(put, t.len as u32);
    for &r in &t.regions[..t.len] {
        // SAFETY: registered regions are statics; counting is over.
        let (r, d) = unsafe { (&*r, &*(*r).data.get()) };
        put32(put, r.name.len() as u32);
        put(r.name.as_bytes());
        put(&[0, 0, 0][..(4 - r.name.len() % 4) % 4]);
        put32(put, d.calls);
        put32(put, 0);
        for i in 0..=p.count {
            put64(put, d.pre[i]);
            put64(put, d.post[i]);
            put64(put, d.sum[i]);
        }
    }
}
