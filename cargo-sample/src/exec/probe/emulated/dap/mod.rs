//! The debug access port of the emulated chip: an ADIv5 SW-DP with one AHB-AP in front of the
//! QEMU core, as probe-rs drives a real one. probe-rs writes and reads DP and AP registers; the
//! MEM-AP's transfers become guest memory accesses through the gdbstub, except for the
//! debug-only registers a real core has and QEMU does not model (DHCSR, DCRSR/DCRDR, DEMCR,
//! DFSR, the DWT, the FPB, the ITM, the TPIU, the ROM table and the component IDs), which are
//! served here from the VM's state.
//!
//! Where it differs from silicon: a memory access while the core runs briefly stops the VM
//! (under `-icount` virtual time stops with it, so the firmware cannot tell), where a real
//! MEM-AP steals bus cycles; `DWT_PCSR` is the PC at that stop, which QEMU places at the start
//! of a translated block rather than at any instruction.

use std::collections::HashMap;

use anyhow::Result;

use super::gdb::Gdb;
use super::swo::Swo;

mod core;

/// DPIDR of a Cortex-M3/M4 SW-DP (ADIv5 DPv1, designer Arm).
pub const DPIDR: u32 = 0x2BA0_1477;
/// IDR of the AHB-AP (MEM-AP class, AMBA AHB3) of a Cortex-M3/M4.
pub const AHB_AP_IDR: u32 = 0x2477_0011;
/// The ROM table's address (BASE: present, ADIv5 format).
pub const ROM_TABLE: u32 = 0xE00F_F000;

pub const DHCSR: u32 = 0xE000_EDF0;
pub const DCRSR: u32 = 0xE000_EDF4;
pub const DCRDR: u32 = 0xE000_EDF8;
pub const DEMCR: u32 = 0xE000_EDFC;
pub const DFSR: u32 = 0xE000_ED30;
pub const AIRCR: u32 = 0xE000_ED0C;
pub const DWT: u32 = 0xE000_1000;
pub const FPB: u32 = 0xE000_2000;
pub const ITM: u32 = 0xE000_0000;
pub const TPIU: u32 = 0xE004_0000;
const SCS: u32 = 0xE000_E000;

/// DHCSR bits.
const C_DEBUGEN: u32 = 1;
const C_HALT: u32 = 1 << 1;
const C_STEP: u32 = 1 << 2;
const S_REGRDY: u32 = 1 << 16;
const S_HALT: u32 = 1 << 17;
const S_RETIRE_ST: u32 = 1 << 24;
const S_RESET_ST: u32 = 1 << 25;
/// DFSR bits.
const DFSR_HALTED: u32 = 1;
const DFSR_VCATCH: u32 = 1 << 3;

/// A CoreSight component: where it is, its class, part number and DEVTYPE.
struct Component {
    base: u32,
    class: u8,
    part: u16,
    devtype: u8,
}

/// What the ROM table lists (the parts probe-rs knows as a Cortex-M3's), and the table itself.
const COMPONENTS: [Component; 6] = [
    Component {
        base: SCS,
        class: 0xE,
        part: 0x000,
        devtype: 0,
    },
    Component {
        base: ITM,
        class: 0xE,
        part: 0x001,
        devtype: 0,
    },
    Component {
        base: DWT,
        class: 0xE,
        part: 0x002,
        devtype: 0,
    },
    Component {
        base: FPB,
        class: 0xE,
        part: 0x003,
        devtype: 0,
    },
    Component {
        base: TPIU,
        class: 0x9,
        part: 0x923,
        devtype: 0x11,
    },
    Component {
        base: ROM_TABLE,
        class: 0x1,
        part: 0x4C3,
        devtype: 0,
    },
];

/// The identification registers at the top of a component's 4 KiB (Arm's JEP106 code).
fn id_register(c: &Component, off: u32) -> u32 {
    const ARM_ID: u32 = 0x3B;
    const ARM_CONTINUATION: u32 = 4;
    match off {
        0xFCC => match c.class {
            0x1 => 1, // MEMTYPE: system memory present
            _ => c.devtype as u32,
        },
        0xFD0 => ARM_CONTINUATION,
        0xFE0 => (c.part & 0xFF) as u32,
        0xFE4 => (ARM_ID & 0xF) << 4 | (c.part >> 8) as u32,
        0xFE8 => 0x08 | ARM_ID >> 4,
        0xFF0 => 0x0D,
        0xFF4 => (c.class as u32) << 4,
        0xFF8 => 0x05,
        0xFFC => 0xB1,
        _ => 0,
    }
}

/// The ROM table's entries: each component's offset from the table, present, 32-bit format.
fn rom_entry(index: u32) -> u32 {
    COMPONENTS
        .iter()
        .filter(|c| c.base != ROM_TABLE)
        .nth(index as usize)
        .map(|c| (c.base.wrapping_sub(ROM_TABLE) & 0xFFFF_F000) | 0b11)
        .unwrap_or(0)
}

/// Why an access failed, as the wire would say it.
#[derive(Debug)]
pub enum Fault {
    /// The access faulted on the bus (a FAULT acknowledge, STICKYERR set).
    Bus(String),
    /// The probe lost the target (QEMU is gone, or an injected read error).
    Lost(String),
}

/// How probe-rs's core register numbers (DCRSR.REGSEL) map onto QEMU's gdb registers.
#[derive(Debug, Default, Clone)]
pub struct RegMap {
    by_name: HashMap<String, u32>,
}

impl RegMap {
    pub fn new(regs: Vec<(String, u32)>) -> RegMap {
        RegMap {
            by_name: regs.into_iter().collect(),
        }
    }

    fn num(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The gdb register for a REGSEL value holding one whole register.
    fn plain(&self, regsel: u32) -> Option<u32> {
        match regsel {
            0..=12 => self.num(&format!("r{regsel}")),
            13 => self.num("sp"),
            14 => self.num("lr"),
            15 => self.num("pc"),
            16 => self.num("xpsr"),
            17 => self.num("msp"),
            18 => self.num("psp"),
            0x21 => self.num("fpscr"),
            _ => None,
        }
    }
}

/// The four special registers REGSEL 20 packs: CONTROL, FAULTMASK, BASEPRI, PRIMASK.
const SPECIAL: [(&str, u32); 4] = [
    ("control", 24),
    ("faultmask", 16),
    ("basepri", 8),
    ("primask", 0),
];

/// The state of the emulated debug port, MEM-AP and debug registers.
#[derive(Debug)]
pub struct Port {
    pub gdb: Gdb,
    pub regs: RegMap,
    // DP
    ctrl: u32,
    select: u32,
    rdbuff: u32,
    sticky_err: bool,
    // MEM-AP
    csw: u32,
    tar: u32,
    // Core debug
    halted: bool,
    /// Whether the core has come out of a reset since QEMU started: before, memory holds no
    /// image and the VM stays stopped (QEMU would lock up on the empty vector table), though
    /// the core reports running, as a chip whose flash is blank.
    booted: bool,
    dhcsr: u32,
    reset_st: bool,
    retired: bool,
    demcr: u32,
    dcrdr: u32,
    dfsr: u32,
    /// DWT, FPB, ITM and TPIU registers as written.
    written: HashMap<u32, u32>,
    /// Reads of guest memory so far, and the faults to inject.
    reads: u64,
    pub faults: Faults,
    /// QEMU's process id (to kill it, as a board that loses power).
    pub vm_pid: u32,
    /// Where the SWO bytes come from, if the chip has a trace port.
    pub swo: Option<Swo>,
    /// Where `DWT_PCSR` is read from, in the core's time; without it, the PC where the VM
    /// stops.
    pub pcsr: Option<super::pcsr::Timeline>,
    /// The probe's SWD clock, for the time a read takes.
    pub speed_khz: u32,
}

impl Port {
    /// The port of a VM that QEMU holds stopped before its first instruction (`-S`).
    pub fn new(gdb: Gdb, regs: RegMap) -> Port {
        Port {
            gdb,
            regs,
            ctrl: 0,
            select: 0,
            rdbuff: 0,
            sticky_err: false,
            csw: 0x0300_0042, // 32-bit, no increment, DeviceEn, HPROT as reset
            tar: 0,
            halted: false,
            booted: false,
            dhcsr: 0,
            reset_st: true,
            retired: false,
            demcr: 0,
            dcrdr: 0,
            dfsr: 0,
            written: HashMap::new(),
            reads: 0,
            faults: Faults::default(),
            vm_pid: 0,
            swo: None,
            pcsr: None,
            speed_khz: 4000,
        }
    }

    /// An error if QEMU has gone (the firmware ended it, or it was killed).
    pub fn check_alive(&mut self) -> Result<(), Fault> {
        match self.gdb.poll_stopped() {
            Ok(_) => Ok(()),
            Err(e) => Err(self.lost(e)),
        }
    }

    /// Whether the core is halted for the debugger.
    pub fn halted(&self) -> bool {
        self.halted
    }

    // ---- DP ----

    pub fn dp_read(&mut self, addr: u8, bank: u8) -> u32 {
        match addr {
            0x0 => DPIDR,
            0x4 if bank == 0 => {
                // CSYSPWRUPACK (31) and CDBGPWRUPACK (29) follow their requests (30, 28).
                let acks = (self.ctrl & (1 << 30 | 1 << 28)) << 1;
                self.ctrl | acks | (self.sticky_err as u32) << 5
            }
            0x4 => 0,
            0x8 => 0, // RESEND: nothing to resend
            _ => self.rdbuff,
        }
    }

    pub fn dp_write(&mut self, addr: u8, v: u32) {
        match addr {
            // ABORT: STKERRCLR (bit 2) clears the sticky error.
            0x0 if v & 1 << 2 != 0 => self.sticky_err = false,
            0x0 => {}
            0x4 => {
                if v & 1 << 5 != 0 {
                    self.sticky_err = false; // W1C on DPv0
                }
                self.ctrl = v & 0x5000_0F01;
            }
            0x8 => self.select = v,
            _ => {}
        }
    }

    fn apsel(&self) -> u32 {
        self.select >> 24
    }

    // ---- AP ----

    pub fn ap_read(&mut self, reg: u8) -> Result<u32, Fault> {
        if self.apsel() != 0 {
            return Ok(0); // no AP there: IDR 0 ends probe-rs's scan
        }
        let v = match reg {
            0x00 => self.csw | 1 << 6, // DeviceEn
            0x04 => self.tar,
            0x08 => 0,
            0x0C => {
                let v = self.transfer_read(self.tar)?;
                self.advance(1);
                v
            }
            0x10 | 0x14 | 0x18 | 0x1C => {
                self.transfer_read((self.tar & !0xF) + (reg as u32 - 0x10))?
            }
            0xF4 => 0,                // CFG: little-endian, 32-bit addresses
            0xF8 => ROM_TABLE | 0b11, // BASE
            0xFC => AHB_AP_IDR,
            _ => 0,
        };
        self.rdbuff = v;
        Ok(v)
    }

    pub fn ap_write(&mut self, reg: u8, v: u32) -> Result<(), Fault> {
        if self.apsel() != 0 {
            return Ok(());
        }
        match reg {
            0x00 => self.csw = v,
            0x04 => self.tar = v,
            0x0C => {
                self.transfer_write(self.tar, v)?;
                self.advance(1);
            }
            0x10 | 0x14 | 0x18 | 0x1C => {
                self.transfer_write((self.tar & !0xF) + (reg as u32 - 0x10), v)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Block reads of DRW: one guest read for the run when it is plain memory (each value
    /// in the byte lanes its address selects, whatever the transfer size).
    pub fn ap_read_block(&mut self, reg: u8, out: &mut [u32]) -> Result<(), Fault> {
        let size = self.size();
        let n = out.len() as u32;
        if self.apsel() == 0 && reg == 0x0C && self.increments() {
            let at = self.tar;
            if !emulated(at, n * size) {
                let bytes = self.guest_read(at, (n * size) as usize)?;
                for (i, (o, c)) in out
                    .iter_mut()
                    .zip(bytes.chunks_exact(size as usize))
                    .enumerate()
                {
                    let lane = (at + i as u32 * size) & 3;
                    *o = c
                        .iter()
                        .enumerate()
                        .fold(0, |v, (k, b)| v | (*b as u32) << (8 * (lane + k as u32)));
                }
                self.advance(n);
                self.rdbuff = out.last().copied().unwrap_or(0);
                return Ok(());
            }
        }
        for o in out.iter_mut() {
            *o = self.ap_read(reg)?;
        }
        Ok(())
    }

    pub fn ap_write_block(&mut self, reg: u8, values: &[u32]) -> Result<(), Fault> {
        let size = self.size();
        let n = values.len() as u32;
        if self.apsel() == 0 && reg == 0x0C && self.increments() {
            let at = self.tar;
            if !emulated(at, n * size) {
                let bytes: Vec<u8> = values
                    .iter()
                    .enumerate()
                    .flat_map(|(i, v)| {
                        let lane = (at + i as u32 * size) & 3;
                        (0..size).map(move |k| (v >> (8 * (lane + k))) as u8)
                    })
                    .collect();
                self.guest_write(at, &bytes)?;
                self.advance(n);
                return Ok(());
            }
        }
        for v in values {
            self.ap_write(reg, *v)?;
        }
        Ok(())
    }

    fn size(&self) -> u32 {
        match self.csw & 0b111 {
            0 => 1,
            1 => 2,
            _ => 4,
        }
    }

    fn increments(&self) -> bool {
        self.csw >> 4 & 0b11 == 0b01
    }

    fn advance(&mut self, transfers: u32) {
        if self.increments() {
            self.tar = self.tar.wrapping_add(transfers * self.size());
        }
    }

    /// One DRW read: the value in the byte lanes the address selects.
    fn transfer_read(&mut self, addr: u32) -> Result<u32, Fault> {
        let size = self.size();
        let lane = addr & 3;
        if emulated(addr, size) {
            let word = self.debug_read(addr & !3)?;
            return Ok(word);
        }
        let bytes = self.guest_read(addr, size as usize)?;
        let mut v = 0u32;
        for (i, b) in bytes.iter().enumerate() {
            v |= (*b as u32) << (8 * (lane + i as u32));
        }
        Ok(v)
    }

    fn transfer_write(&mut self, addr: u32, v: u32) -> Result<(), Fault> {
        let size = self.size();
        if emulated(addr, size) {
            return self.debug_write(addr & !3, v);
        }
        let lane = addr & 3;
        let bytes: Vec<u8> = (0..size).map(|i| (v >> (8 * (lane + i))) as u8).collect();
        self.guest_write(addr, &bytes)
    }
}

/// Faults to inject, counted in reads of guest memory (tests of how a capture survives them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Every Nth read fails.
    pub fail_every: Option<u64>,
    /// QEMU is killed at the Nth read (the board loses power; the probe its target).
    pub kill_after: Option<u64>,
    /// The chip is reset at the Nth read (the reset button, a watchdog).
    pub reset_after: Option<u64>,
}

impl Faults {
    /// `fail-every:N`, `kill-after:N`, `reset-after:N`, comma-separated.
    pub fn parse(s: &str) -> Result<Faults, String> {
        let mut f = Faults::default();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once(':')
                .ok_or_else(|| format!("`{part}`: expected KIND:N"))?;
            let n: u64 = v
                .parse()
                .map_err(|_| format!("`{part}`: N is not a number"))?;
            match k {
                "fail-every" => f.fail_every = Some(n),
                "kill-after" => f.kill_after = Some(n),
                "reset-after" => f.reset_after = Some(n),
                _ => {
                    return Err(format!(
                        "`{k}`: the faults are fail-every, kill-after, reset-after"
                    ));
                }
            }
        }
        Ok(f)
    }
}

#[cfg(unix)]
fn kill(pid: u32) {
    // SAFETY: signalling the QEMU process this probe started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

#[cfg(not(unix))]
fn kill(_pid: u32) {}

/// The component whose 4 KiB holds `addr`, if it is one the ROM table lists.
fn component_at(addr: u32) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| addr & !0xFFF == c.base)
}

/// Whether `[addr, addr+len)` touches a register served here rather than by QEMU.
pub fn emulated(addr: u32, len: u32) -> bool {
    let end = addr.saturating_add(len.max(1));
    let overlaps = |a: u32, b: u32| addr < b && end > a;
    overlaps(DFSR, DFSR + 4)
        || overlaps(AIRCR, AIRCR + 4)
        || overlaps(DHCSR, DHCSR + 16)
        || overlaps(0xE000_EFCC, 0xE000_F000) // the SCS's identification
        || overlaps(ITM, FPB + 0x1000) // ITM, DWT, FPB
        || overlaps(TPIU, TPIU + 0x1000)
        || overlaps(ROM_TABLE, ROM_TABLE + 0x1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rom_table_points_at_each_component() {
        let entries: Vec<u32> = (0..6).map(rom_entry).collect();
        // SCS, ITM, DWT, FPB, TPIU, then the end marker.
        let bases: Vec<u32> = entries[..5]
            .iter()
            .map(|e| ROM_TABLE.wrapping_add(e & 0xFFFF_F000))
            .collect();
        assert_eq!(bases, [SCS, ITM, DWT, FPB, TPIU]);
        assert!(entries[..5].iter().all(|e| e & 0b11 == 0b11));
        assert_eq!(entries[5], 0);
    }

    #[test]
    fn identification_registers_spell_arms_parts() {
        let dwt = component_at(DWT + 0xFE0).unwrap();
        let pidr = |o| id_register(dwt, o);
        let part = pidr(0xFE0) | (pidr(0xFE4) & 0xF) << 8;
        let jep = pidr(0xFE4) >> 4 | (pidr(0xFE8) & 0x7) << 4;
        assert_eq!((part, jep, pidr(0xFD0)), (0x002, 0x3B, 4));
        assert_eq!(pidr(0xFE8) & 0x8, 0x8, "JEDEC code used");
        let cidr: u32 = (0..4).map(|i| pidr(0xFF0 + 4 * i) << (8 * i)).sum();
        assert_eq!(cidr, 0xB105_E00D);
        let tpiu = component_at(TPIU).unwrap();
        assert_eq!(id_register(tpiu, 0xFCC), 0x11);
    }

    #[test]
    fn faults_parse_and_say_what_is_wrong() {
        let f = Faults::parse("fail-every:50,kill-after:300").unwrap();
        assert_eq!(
            (f.fail_every, f.kill_after, f.reset_after),
            (Some(50), Some(300), None)
        );
        assert!(Faults::parse("melt:3").unwrap_err().contains("fail-every"));
        assert!(Faults::parse("kill-after").unwrap_err().contains("KIND:N"));
    }

    #[test]
    fn debug_registers_are_served_here_and_memory_is_not() {
        assert!(emulated(DHCSR, 4));
        assert!(emulated(0xE000_101C, 4));
        assert!(emulated(0xE000_EDEC, 8), "a block reaching DHCSR");
        assert!(!emulated(0x2000_0000, 1024));
        assert!(!emulated(0xE000_ED00, 4), "CPUID comes from QEMU");
        assert!(!emulated(0xE000_E010, 16), "SysTick comes from QEMU");
    }
}
