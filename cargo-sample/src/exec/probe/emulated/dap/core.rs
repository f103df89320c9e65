//! The core behind the debug port: the VM stopped and run through QEMU's gdbstub, guest
//! memory and registers, halting, stepping and resets, and the debug registers (DHCSR, DCRSR,
//! DCRDR, DEMCR, DFSR, AIRCR) served in terms of them.

use anyhow::Result;

use super::*;

impl Port {
    // ---- the VM ----

    pub(super) fn lost(&self, e: anyhow::Error) -> Fault {
        match self.gdb.gone() {
            Some(g) => Fault::Lost(g.to_string()),
            None => Fault::Lost(format!("{e:#}")),
        }
    }

    /// Run `f` with the VM stopped, letting it run again after when the core is not halted.
    pub(super) fn stopped<T>(&mut self, f: impl FnOnce(&mut Gdb) -> Result<T>) -> Result<T, Fault> {
        if self.gdb.running() {
            self.gdb.stop().map_err(|e| self.lost(e))?;
            self.retired = true;
        }
        let r = f(&mut self.gdb);
        if !self.halted && self.booted && self.gdb.gone().is_none() {
            self.gdb.resume().map_err(|e| self.lost(e))?;
        }
        match r {
            Ok(v) => Ok(v),
            Err(e) if self.gdb.gone().is_some() => Err(self.lost(e)),
            Err(e) => {
                self.sticky_err = true;
                Err(Fault::Bus(format!("{e:#}")))
            }
        }
    }

    pub(super) fn guest_read(&mut self, addr: u32, len: usize) -> Result<Vec<u8>, Fault> {
        self.reads += 1;
        let n = self.reads;
        let f = self.faults;
        if f.fail_every.is_some_and(|k| k > 0 && n.is_multiple_of(k)) {
            return Err(Fault::Lost(format!(
                "injected read error (every {}th read fails)",
                f.fail_every.unwrap_or(0)
            )));
        }
        if f.kill_after == Some(n) {
            kill(self.vm_pid);
        }
        if f.reset_after == Some(n) {
            // The reset button: the VM restarts and runs on.
            let was_halted = self.halted;
            self.stopped(|g| g.monitor("system_reset").map(|_| ()))?;
            self.reset_st = true;
            self.halted = was_halted;
        }
        self.stopped(|g| g.read(addr, len))
    }

    pub(super) fn guest_write(&mut self, addr: u32, data: &[u8]) -> Result<(), Fault> {
        self.stopped(|g| g.write(addr, data))
    }

    pub(super) fn reg_read(&mut self, regsel: u32) -> Result<u32, Fault> {
        let regs = self.regs.clone();
        if regsel == 20 {
            return self.stopped(|g| {
                let mut v = 0;
                for (name, shift) in SPECIAL {
                    if let Some(n) = regs.num(name) {
                        v |= ((g.read_reg(n)? & 0xFF) as u32) << shift;
                    }
                }
                Ok(v)
            });
        }
        if (0x40..0x60).contains(&regsel) {
            let s = regsel - 0x40;
            if let Some(n) = regs.num(&format!("s{s}")) {
                return self.stopped(|g| Ok(g.read_reg(n)? as u32));
            }
            if let Some(n) = regs.num(&format!("d{}", s / 2)) {
                return self.stopped(|g| Ok((g.read_reg(n)? >> (32 * (s % 2))) as u32));
            }
            return Ok(0);
        }
        match regs.plain(regsel) {
            Some(n) => self.stopped(|g| Ok(g.read_reg(n)? as u32)),
            None => Ok(0),
        }
    }

    pub(super) fn reg_write(&mut self, regsel: u32, v: u32) -> Result<(), Fault> {
        let regs = self.regs.clone();
        if regsel == 20 {
            return self.stopped(|g| {
                for (name, shift) in SPECIAL {
                    if let Some(n) = regs.num(name) {
                        g.write_reg(n, v >> shift & 0xFF)?;
                    }
                }
                Ok(())
            });
        }
        match regs.plain(regsel) {
            Some(n) => self.stopped(|g| g.write_reg(n, v)),
            None => Ok(()),
        }
    }

    /// Halt the core for the debugger.
    pub(super) fn halt(&mut self, reason: u32) -> Result<(), Fault> {
        if !self.halted {
            self.halted = true;
            self.dfsr |= reason;
            if self.gdb.running() {
                self.gdb.stop().map_err(|e| self.lost(e))?;
                self.retired = true;
            }
        }
        Ok(())
    }

    pub(super) fn run(&mut self) -> Result<(), Fault> {
        if self.halted {
            self.halted = false;
            if self.booted {
                self.gdb.resume().map_err(|e| self.lost(e))?;
            }
        }
        Ok(())
    }

    /// A system reset (AIRCR.SYSRESETREQ): the VM resets; with DEMCR.VC_CORERESET the core
    /// halts on its first instruction.
    pub(super) fn reset(&mut self) -> Result<(), Fault> {
        let catch = self.demcr & 1 != 0;
        if self.gdb.running() {
            self.gdb.stop().map_err(|e| self.lost(e))?;
        }
        self.gdb.monitor("system_reset").map_err(|e| self.lost(e))?;
        self.reset_st = true;
        self.booted = true;
        self.written.retain(|a, _| *a >= TPIU); // the DWT/FPB/ITM reset; the TPIU keeps
        if let Some(s) = &mut self.swo {
            s.core_reset();
        }
        if catch {
            self.halted = true;
            self.dfsr |= DFSR_VCATCH;
        } else {
            self.halted = false;
            self.gdb.resume().map_err(|e| self.lost(e))?;
        }
        Ok(())
    }

    // ---- debug registers ----

    pub(super) fn debug_read(&mut self, addr: u32) -> Result<u32, Fault> {
        Ok(match addr {
            DHCSR => {
                let mut v = self.dhcsr & 0xF | S_REGRDY;
                if self.halted {
                    v |= S_HALT | C_HALT;
                }
                if self.reset_st {
                    v |= S_RESET_ST;
                    self.reset_st = false;
                }
                if self.retired || !self.halted {
                    v |= S_RETIRE_ST;
                    self.retired = false;
                }
                v
            }
            DCRSR => 0,
            DCRDR => self.dcrdr,
            DEMCR => self.demcr,
            DFSR => self.dfsr,
            a if a & 0xFFF >= 0xFCC && component_at(a).is_some() => {
                id_register(component_at(a).unwrap_or(&COMPONENTS[0]), a & 0xFFF)
            }
            a if (ROM_TABLE..ROM_TABLE + 0xF00).contains(&a) => rom_entry((a - ROM_TABLE) / 4),
            // DWT_CTRL: four comparators, everything implemented.
            0xE000_1000 => self.written.get(&addr).copied().unwrap_or(0) | 4 << 28,
            // DWT_PCSR: the PC where the core is, or all ones while halted.
            0xE000_101C => {
                if self.halted || self.demcr & 1 << 24 == 0 {
                    0xFFFF_FFFF
                } else if let Some(t) = &mut self.pcsr {
                    match t.read(self.speed_khz, std::time::Duration::from_millis(50)) {
                        Some(pc) => pc,
                        None => {
                            self.check_alive()?;
                            0xFFFF_FFFF
                        }
                    }
                } else {
                    let pc = self.regs.plain(15);
                    match pc {
                        Some(n) => self.stopped(|g| Ok(g.read_reg(n)? as u32))?,
                        None => 0,
                    }
                }
            }
            // FP_CTRL: six code and two literal comparators.
            0xE000_2000 => self.written.get(&addr).copied().unwrap_or(0) & 1 | 6 << 4 | 2 << 8,
            // TPIU_SSPSR: port sizes 1-4; TPIU_SPPR, ACPR, FFCR as written.
            0xE004_0000 => 0xF,
            _ => self.written.get(&addr).copied().unwrap_or(0),
        })
    }

    pub(super) fn debug_write(&mut self, addr: u32, v: u32) -> Result<(), Fault> {
        match addr {
            DHCSR => {
                if v >> 16 != 0xA05F {
                    return Ok(()); // without DBGKEY the write is ignored
                }
                self.dhcsr = v & 0xF;
                if v & C_DEBUGEN == 0 {
                    return self.run();
                }
                if v & C_HALT != 0 {
                    return self.halt(DFSR_HALTED);
                }
                if v & C_STEP != 0 && self.halted {
                    self.stopped(|g| g.step())?;
                    self.retired = true;
                    self.dfsr |= DFSR_HALTED;
                    return Ok(());
                }
                self.run()?;
            }
            DCRSR => {
                let regsel = v & 0x7F;
                if v & 1 << 16 != 0 {
                    self.reg_write(regsel, self.dcrdr)?;
                } else {
                    self.dcrdr = self.reg_read(regsel)?;
                }
            }
            DCRDR => self.dcrdr = v,
            DEMCR => {
                self.demcr = v;
                if let Some(s) = &mut self.swo {
                    s.register_written(addr, v);
                }
            }
            DFSR => self.dfsr &= !v,
            AIRCR => {
                if v >> 16 == 0x05FA && v & 0b101 != 0 {
                    self.reset()?;
                } else {
                    self.stopped(|g| g.write(addr, &v.to_le_bytes()))?;
                }
            }
            _ => {
                self.written.insert(addr, v);
                if let Some(s) = &mut self.swo {
                    s.register_written(addr, v);
                }
            }
        }
        Ok(())
    }
}
