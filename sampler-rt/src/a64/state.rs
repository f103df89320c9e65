//! The sampler's state, ring, bins and configuration (found by the host by symbol), the GIC's
//! addresses, and stopping the sampling sources.

use core::arch::asm;
use core::mem::MaybeUninit;
use core::ptr::{addr_of, addr_of_mut};

use crate::wire::{self, Config};

pub(crate) const RING_SLOTS: usize = crate::decimal(env!("SAMPLER_RT_RING_SLOTS"));
pub(crate) const HIST_BINS: usize = crate::decimal(env!("SAMPLER_RT_HIST_BINS"));

/// GICv2 distributor and CPU interface of QEMU `virt`.
pub(crate) const GICD: usize = 0x0800_0000;
pub(crate) const GICC: usize = 0x0801_0000;
/// The EL1 virtual timer's interrupt (PPI 11).
pub(crate) const VTIMER_IRQ: u32 = 27;
/// The PMU's overflow interrupt on `virt` (PPI 7).
pub(crate) const PMU_IRQ: u32 = 23;

/// The run's configuration, written into the image by `cargo sample`.
#[unsafe(no_mangle)]
#[used]
#[unsafe(link_section = ".data.SAMPLER_RT_CONFIG")]
pub(crate) static mut SAMPLER_RT_CONFIG: [u8; wire::CONFIG_LEN] = wire::config_placeholder();

/// The sampler's state (the handler's fields first, at fixed offsets).
#[repr(C)]
pub struct State {
    pub(crate) wptr: u64,
    pub(crate) remaining: u32,
    pub(crate) rng: u32,
    pub(crate) reload: u32,
    pub(crate) mask: u32,
    pub(crate) before: u32,
    pub(crate) chunk: u32,
    pub(crate) limit: u32,
    pub(crate) capacity: u32,
    pub(crate) ring: u64,
    pub(crate) phase: u32,
    pub(crate) sent: u32,
    /// At the Cortex-M state's `sink` offset: a host that read the last samples clears it.
    pub(crate) sink: u32,
    /// The semihosting handle of the dump file plus one (0: not open).
    pub(crate) handle: u32,
    pub(crate) config_found: u8,
    /// `MODE_RING` or `MODE_HIST`. In histogram mode the ring's fields hold the bins': `wptr`
    /// the counters' address, `ring` the code address of bin 0, `capacity` the outside
    /// counter's index, `sent` the shift.
    pub(crate) mode: u8,
    /// Byte 0: the host's beat (`wire::state_offsets::A64_HOST_BEAT`).
    pub(crate) _pad: [u8; 2],
    /// `TAG_WORD`: the word recorded with each sample (ring entries are then (pc, tag)
    /// pairs); 0 = no tag.
    pub(crate) tag_addr: u32,
    pub(crate) crc: u32,
    /// `TIMER_*` (the generic timer, or the PMU).
    pub(crate) timer: u8,
    /// Words of stack kept with each sample (0: none; ring entries are then STACKS entries).
    pub(crate) window: u8,
    /// Frame records (the x29 chain) kept with each sample beyond the window.
    pub(crate) records: u8,
    pub(crate) _pad2: u8,
    pub(crate) magic: u32,
    /// Interrupts the sampler's vectors took that were not the sampler's (ended unserved).
    pub(crate) foreign: u32,
}

// The host reads this block by these offsets (`wire::StateView`); the handler uses the first.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(State, remaining) == 8);
    assert!(offset_of!(State, reload) == 16);
    assert!(offset_of!(State, before) == 24);
    assert!(offset_of!(State, capacity) == 36);
    assert!(offset_of!(State, ring) == 40);
    assert!(offset_of!(State, phase) == 48);
    assert!(offset_of!(State, sink) == wire::state_offsets::SINK);
    assert!(offset_of!(State, config_found) == 64);
    assert!(offset_of!(State, _pad) == wire::state_offsets::A64_HOST_BEAT);
    assert!(offset_of!(State, mode) == 65);
    assert!(offset_of!(State, sent) == 52);
    assert!(offset_of!(State, tag_addr) == 68);
    assert!(offset_of!(State, timer) == 76);
    assert!(offset_of!(State, window) == 77);
    assert!(offset_of!(State, records) == 78);
    assert!(offset_of!(State, magic) == 80);
    assert!(offset_of!(State, foreign) == 84);
    assert!(core::mem::size_of::<State>() <= wire::STATE_LEN);
};

/// The state: the host finds it by name.
#[unsafe(no_mangle)]
pub static mut SAMPLER_RT_STATE: State = State {
    wptr: 0,
    remaining: 0,
    rng: 0,
    reload: 0,
    mask: 0,
    before: 0,
    chunk: 0,
    limit: 0,
    capacity: 0,
    ring: 0,
    phase: 0,
    sent: 0,
    sink: 0,
    handle: 0,
    config_found: 0,
    mode: 0,
    _pad: [0; 2],
    tag_addr: 0,
    crc: 0,
    timer: 0,
    window: 0,
    records: 0,
    _pad2: 0,
    magic: 0,
    foreign: 0,
};

/// With stacks: the address above the stack (from the configuration), no window reaches it.
pub(crate) static mut STACK_TOP: u64 = 0;

pub(crate) static mut RING: MaybeUninit<[u32; RING_SLOTS]> = MaybeUninit::uninit();

/// Histogram mode: the counters, and the outside one last. Zeroed by `start`.
pub(crate) static mut BINS: MaybeUninit<[u16; HIST_BINS + 1]> = MaybeUninit::uninit();

/// The number of histogram counters this build has, for the host (which reads it from the ELF
/// to choose the bin size of a run).
#[unsafe(no_mangle)]
pub(crate) static SAMPLER_RT_HIST_COUNTERS: u32 = HIST_BINS as u32;

pub(crate) const IDLE: u32 = wire::PHASE_IDLE as u32;
pub(crate) const RUNNING: u32 = wire::PHASE_RUNNING as u32;
pub(crate) const STOPPED: u32 = wire::PHASE_STOPPED as u32;
pub(crate) const DUMPED: u32 = wire::PHASE_DUMPED as u32;

pub(crate) fn state() -> *mut State {
    addr_of_mut!(SAMPLER_RT_STATE)
}

pub(crate) fn read_config() -> Option<Config> {
    Config::decode(&crate::host_block(addr_of!(SAMPLER_RT_CONFIG)))
}

/// Stop both sampling sources (the virtual timer, PMU counter 0's interrupt).
pub(crate) fn stop_timers() {
    // SAFETY: timer and PMU control registers the sampler set up.
    unsafe {
        asm!(
            "msr cntv_ctl_el0, xzr",
            "msr pmintenclr_el1, {bits}",
            "isb",
            bits = in(reg) 1u64 << 31 | 1,
        )
    };
}

pub(crate) fn taken(s: *mut State) -> u32 {
    // SAFETY: plain reads.
    unsafe { (*s).before + (*s).chunk - (*s).remaining }
}
