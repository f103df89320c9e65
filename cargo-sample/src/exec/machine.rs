//! QEMU machines that cargo-sample knows: their core, clock and memory.

/// One QEMU Cortex-M machine.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    pub name: &'static str,
    pub cpu: &'static str,
    /// Frequency of the SysTick core clock in QEMU, Hz.
    pub systick_hz: u64,
    /// Targets whose code runs on this core.
    pub targets: &'static [&'static str],
    /// CMSDK APB timer 0 (base, interrupt), where the machine has one.
    pub cmsdk_timer: Option<(u32, u32)>,
    /// Device timers that can pace the sampler when the firmware owns SysTick, in the order
    /// they are tried.
    pub timers: &'static [DeviceTimer],
    /// Whether QEMU repeats a run of it exactly under `-icount` (7.2's netduinoplus2 does not:
    /// its STM32 timers' interrupts come at different instructions from run to run).
    pub repeats: bool,
}

/// A device timer that sampler-rt drives (a `wire::TIMER_*` kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTimer {
    /// What `--timer` calls it (`gptm0`).
    pub name: &'static str,
    /// `wire::TIMER_*`.
    pub kind: u8,
    pub base: u32,
    pub irq: u32,
    /// Its interrupt's name as device crates spell it, in the order tried.
    pub vectors: &'static [&'static str],
    /// The value that acknowledges its interrupt.
    pub ack: u8,
    /// Its clock in QEMU, Hz, when it is not the SysTick core clock (0).
    pub hz: u64,
}

impl DeviceTimer {
    /// Bytes of its register block, for finding code that drives it.
    pub fn span(&self) -> u32 {
        if self.kind == sampler_rt::wire::TIMER_STM32 {
            0x400
        } else {
            0x1000
        }
    }

    /// How reports name it: `GPTM0 (IRQ 19)`.
    pub fn describe(&self) -> String {
        format!("{} (IRQ {})", self.name.to_ascii_uppercase(), self.irq)
    }
}

/// The kinds' names (`wire::TIMER_*`), as `--timer KIND:BASE:IRQ` spells them.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        sampler_rt::wire::TIMER_CMSDK => "cmsdk",
        sampler_rt::wire::TIMER_GPTM => "gptm",
        sampler_rt::wire::TIMER_NRF => "nrf",
        sampler_rt::wire::TIMER_STM32 => "stm32",
        _ => "timer",
    }
}

/// How sampler-rt drives a kind of timer: its `wire::TIMER_*`, the acknowledgement value and
/// its clock in QEMU when it is not the core's.
#[derive(Clone, Copy)]
struct Kind {
    kind: u8,
    ack: u8,
    hz: u64,
}

const CMSDK: Kind = Kind {
    kind: sampler_rt::wire::TIMER_CMSDK,
    ack: 1,
    hz: 0,
};
const GPTM: Kind = Kind {
    kind: sampler_rt::wire::TIMER_GPTM,
    ack: 1,
    hz: 0,
};
const NRF: Kind = Kind {
    kind: sampler_rt::wire::TIMER_NRF,
    ack: 0,
    hz: 0,
};
/// QEMU (7.2) clocks the STM32F4's timers at 1 GHz (a real F405 at 84 MHz).
const STM32: Kind = Kind {
    kind: sampler_rt::wire::TIMER_STM32,
    ack: 0,
    hz: 1_000_000_000,
};

const fn timer(
    k: Kind,
    name: &'static str,
    base: u32,
    irq: u32,
    vectors: &'static [&'static str],
) -> DeviceTimer {
    DeviceTimer {
        name,
        kind: k.kind,
        base,
        irq,
        vectors,
        ack: k.ack,
        hz: k.hz,
    }
}

/// CMSDK APB timers 0 and 1 of Arm's mps2 images (AN385/386/500).
const MPS2_TIMERS: &[DeviceTimer] = &[
    timer(CMSDK, "timer0", 0x4000_0000, 8, &["TIMER0"]),
    timer(CMSDK, "timer1", 0x4000_1000, 9, &["TIMER1"]),
];

/// The four general-purpose timers of the LM3S6965 (timer A of each, 32-bit periodic); the
/// `lm3s6965` device crate calls their interrupts `TIMER_0A`..`TIMER_3A`.
const LM3S_TIMERS: &[DeviceTimer] = &[
    timer(GPTM, "gptm0", 0x4003_0000, 19, &["TIMER_0A", "TIMER0A"]),
    timer(GPTM, "gptm1", 0x4003_1000, 21, &["TIMER_1A", "TIMER1A"]),
    timer(GPTM, "gptm2", 0x4003_2000, 23, &["TIMER_2A", "TIMER2A"]),
    timer(GPTM, "gptm3", 0x4003_3000, 35, &["TIMER_3A", "TIMER3A"]),
];

/// The STM32F405's 32-bit general-purpose timers TIM2 and TIM5. QEMU (7.2) interrupts every
/// ARR ticks of their 1 GHz clock, and only without prescaler.
const STM32F4_TIMERS: &[DeviceTimer] = &[
    timer(STM32, "tim2", 0x4000_0000, 28, &["TIM2"]),
    timer(STM32, "tim5", 0x4000_0C00, 50, &["TIM5"]),
];

/// The nRF51's three TIMERs (the `nrf51-pac` names).
const NRF51_TIMERS: &[DeviceTimer] = &[
    timer(NRF, "timer0", 0x4000_8000, 8, &["TIMER0"]),
    timer(NRF, "timer1", 0x4000_9000, 9, &["TIMER1"]),
    timer(NRF, "timer2", 0x4000_A000, 10, &["TIMER2"]),
];

/// Targets a Cortex-M4/M7 runs.
const V7EM: &[&str] = &[
    "thumbv7em-none-eabihf",
    "thumbv7em-none-eabi",
    "thumbv7m-none-eabi",
    "thumbv6m-none-eabi",
];
/// Targets a Cortex-M33/M55 runs.
const V8M: &[&str] = &[
    "thumbv8m.main-none-eabihf",
    "thumbv8m.main-none-eabi",
    "thumbv8m.base-none-eabi",
    "thumbv7m-none-eabi",
    "thumbv6m-none-eabi",
];

/// Machines measured with QEMU 7.2 (one instruction per nanosecond under `-icount shift=0`).
pub const MACHINES: &[Machine] = &[
    Machine {
        // ARMv8-A: the generic timer's 62.5 MHz stands in for SysTick.
        name: "virt",
        cpu: "cortex-a53",
        systick_hz: 62_500_000,
        targets: &["aarch64-unknown-none", "aarch64-unknown-none-softfloat"],
        cmsdk_timer: None,
        timers: &[],
        repeats: true,
    },
    Machine {
        name: "mps2-an385",
        cpu: "cortex-m3",
        systick_hz: 25_000_000,
        targets: &["thumbv7m-none-eabi", "thumbv6m-none-eabi"],
        cmsdk_timer: Some((0x4000_0000, 8)),
        timers: MPS2_TIMERS,
        repeats: true,
    },
    Machine {
        name: "lm3s6965evb",
        cpu: "cortex-m3",
        systick_hz: 12_500_000,
        targets: &["thumbv7m-none-eabi", "thumbv6m-none-eabi"],
        cmsdk_timer: None,
        timers: LM3S_TIMERS,
        repeats: true,
    },
    Machine {
        name: "mps2-an386",
        cpu: "cortex-m4",
        systick_hz: 25_000_000,
        targets: V7EM,
        cmsdk_timer: Some((0x4000_0000, 8)),
        timers: MPS2_TIMERS,
        repeats: true,
    },
    Machine {
        name: "mps2-an500",
        cpu: "cortex-m7",
        systick_hz: 25_000_000,
        targets: V7EM,
        cmsdk_timer: Some((0x4000_0000, 8)),
        timers: MPS2_TIMERS,
        repeats: true,
    },
    Machine {
        name: "netduinoplus2",
        cpu: "cortex-m4",
        systick_hz: 168_000_000,
        targets: V7EM,
        cmsdk_timer: None,
        timers: STM32F4_TIMERS,
        repeats: false,
    },
    Machine {
        name: "microbit",
        cpu: "cortex-m0",
        systick_hz: 16_000_000,
        targets: &["thumbv6m-none-eabi"],
        cmsdk_timer: None,
        timers: NRF51_TIMERS,
        repeats: true,
    },
    Machine {
        name: "mps2-an505",
        cpu: "cortex-m33",
        systick_hz: 20_000_000,
        targets: V8M,
        cmsdk_timer: Some((0x4000_0000, 3)),
        timers: &[timer(CMSDK, "timer0", 0x4000_0000, 3, &["TIMER0"])],
        repeats: true,
    },
    Machine {
        name: "mps3-an547",
        cpu: "cortex-m55",
        systick_hz: 32_000_000,
        targets: V8M,
        cmsdk_timer: Some((0x4800_0000, 3)),
        timers: &[timer(CMSDK, "timer0", 0x4800_0000, 3, &["TIMER0"])],
        repeats: true,
    },
];

impl Machine {
    /// The `-icount shift` that runs the core at about the clock of its timers: the smallest N
    /// with 2^N ns per instruction at least one tick of the SysTick clock (6 on the 25 MHz
    /// mps2 boards: 15.6 million instructions a second against 25 MHz timers).
    ///
    /// Two things depend on it. Timer-paced firmware only behaves as on the board when the
    /// core is about as fast as on the board (at shift 0 QEMU runs it at 1 GHz, 40 times
    /// faster than its 25 MHz timers). And a sampling timer can only interrupt on its ticks:
    /// with 40 instructions a tick, code that a timer interrupt starts at a fixed point is seen
    /// at one instruction in 40, whatever the random period; with at least one tick per
    /// instruction every instruction can be sampled.
    pub fn default_icount_shift(&self) -> u8 {
        let ns_per_tick = 1e9 / self.systick_hz as f64;
        let mut shift = 0u8;
        while f64::from(1u32 << shift) < ns_per_tick && shift < 10 {
            shift += 1;
        }
        shift
    }

    /// Instructions per SysTick tick under `-icount shift`.
    pub fn instructions_per_tick(&self, shift: u8) -> f64 {
        1e9 / self.systick_hz as f64 / f64::from(1u32 << shift)
    }
}

/// Look a machine up by name.
pub fn find(name: &str) -> Option<&'static Machine> {
    MACHINES.iter().find(|m| m.name == name)
}

/// The default machine for a target triple when the crate's runner does not name one.
pub fn default_for(triple: &str) -> Option<&'static Machine> {
    let name = match triple {
        t if t.starts_with("thumbv6m") => "microbit",
        t if t.starts_with("thumbv7m") => "mps2-an385",
        t if t.starts_with("thumbv7em") => "mps2-an386",
        t if t.starts_with("thumbv8m") => "mps2-an505",
        t if t.starts_with("aarch64") => "virt",
        _ => return None,
    };
    find(name)
}

/// Names of all known machines, for messages.
pub fn names() -> String {
    MACHINES
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_triple_family_has_a_default_that_runs_it() {
        for t in [
            "thumbv6m-none-eabi",
            "thumbv7m-none-eabi",
            "thumbv7em-none-eabihf",
            "thumbv8m.main-none-eabihf",
        ] {
            let m = default_for(t).unwrap();
            assert!(m.targets.contains(&t), "{} does not run {t}", m.name);
        }
        assert!(default_for("x86_64-unknown-linux-gnu").is_none());
    }

    #[test]
    fn default_shifts_give_at_least_one_tick_per_instruction() {
        let shift = |n: &str| find(n).unwrap().default_icount_shift();
        assert_eq!(shift("mps2-an385"), 6);
        assert_eq!(shift("lm3s6965evb"), 7);
        assert_eq!(shift("microbit"), 6);
        assert_eq!(shift("netduinoplus2"), 3);
        assert_eq!(shift("mps3-an547"), 5);
        for m in MACHINES {
            let k = m.instructions_per_tick(m.default_icount_shift());
            assert!(k <= 1.0 && k > 0.5, "{}: {k} instructions a tick", m.name);
        }
        assert_eq!(find("mps2-an385").unwrap().instructions_per_tick(0), 40.0);
    }
}
