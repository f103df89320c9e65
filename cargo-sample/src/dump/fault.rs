//! A firmware stuck in a fault handler: what the core's registers and the fault status
//! registers say, in words (read through QEMU's monitor when a run is cut short).

use serde::{Deserialize, Serialize};

/// The core's state when the run was cut short.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreState {
    /// The active exception (xPSR bits 8:0): 0 thread mode, 3 HardFault, ...
    pub exception: u32,
    pub pc: u32,
    /// Configurable fault status (CFSR), HardFault status (HFSR), fault addresses.
    pub cfsr: u32,
    pub hfsr: u32,
    pub mmfar: u32,
    pub bfar: u32,
}

/// Exception names of the ARMv7-M vector table's system part.
fn exception_name(n: u32) -> Option<&'static str> {
    Some(match n {
        2 => "NMI",
        3 => "HardFault",
        4 => "MemManage",
        5 => "BusFault",
        6 => "UsageFault",
        _ => return None,
    })
}

impl CoreState {
    /// Parse `info registers` of an M-profile core (`R15=...`, `XPSR=...`).
    pub fn from_registers(text: &str) -> Option<CoreState> {
        let field = |key: &str| -> Option<u32> {
            let at = text.find(key)? + key.len();
            let hex: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            u32::from_str_radix(&hex, 16).ok()
        };
        Some(CoreState {
            exception: field("XPSR=")? & 0x1FF,
            pc: field("R15=")?,
            ..CoreState::default()
        })
    }

    /// Whether the core sits in a fault handler.
    pub fn faulted(&self) -> bool {
        (2..=6).contains(&self.exception)
    }

    /// What happened, in words: `HardFault (escalated): precise data bus error at 0xf0000000`.
    pub fn describe(&self) -> String {
        let name = exception_name(self.exception).unwrap_or("an exception");
        let mut causes = Vec::new();
        let c = self.cfsr;
        let bits: [(u32, &str); 14] = [
            (1 << 0, "instruction access violation"),
            (1 << 1, "data access violation"),
            (1 << 4, "MemManage fault on exception entry stacking"),
            (1 << 8, "instruction bus error"),
            (1 << 9, "precise data bus error"),
            (1 << 10, "imprecise data bus error"),
            (1 << 12, "bus fault on exception entry stacking"),
            (1 << 16, "undefined instruction"),
            (1 << 17, "invalid state (Thumb bit clear)"),
            (1 << 18, "invalid exception return"),
            (1 << 19, "no coprocessor"),
            (1 << 24, "unaligned access"),
            (1 << 25, "division by zero"),
            (1 << 11, "bus fault on exception return unstacking"),
        ];
        for (bit, what) in bits {
            if c & bit != 0 {
                let mut s = what.to_owned();
                if bit == 1 << 9 && c & (1 << 15) != 0 {
                    s += &format!(" at {:#010x}", self.bfar);
                }
                if bit == 1 << 1 && c & (1 << 7) != 0 {
                    s += &format!(" at {:#010x}", self.mmfar);
                }
                causes.push(s);
            }
        }
        let escalated = self.exception == 3 && self.hfsr & (1 << 30) != 0;
        format!(
            "{name}{}{}{}",
            if escalated { " (escalated)" } else { "" },
            if causes.is_empty() { "" } else { ": " },
            causes.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_of_a_core_in_hardfault() {
        let text = "R00=00000000 R01=20000100 R02=00000000 R03=00000000\r\n\
                    R12=00000000 R13=20001fd8 R14=fffffff9 R15=000004a2\r\n\
                    XPSR=61000003 -ZC- T handler\r\n";
        let s = CoreState::from_registers(text).unwrap();
        assert_eq!((s.exception, s.pc), (3, 0x4a2));
        assert!(s.faulted());
        let s = CoreState {
            cfsr: 1 << 9 | 1 << 15,
            hfsr: 1 << 30,
            bfar: 0xF000_0000,
            ..s
        };
        assert_eq!(
            s.describe(),
            "HardFault (escalated): precise data bus error at 0xf0000000"
        );
        assert!(!CoreState::default().faulted());
        assert_eq!(CoreState::from_registers("nothing"), None);
    }
}
