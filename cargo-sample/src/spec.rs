//! What the user asked for, as values. The command line is read into these once (clap calls
//! their `FromStr`, so a malformed value is refused before anything is built); the steps that
//! know the machine and the image resolve them later (`Period::ticks` with the timer's clock,
//! a `Tag`'s symbol in the ELF, a `TimerChoice` on the machine and its CPU).

use std::fmt;
use std::str::FromStr;

/// A 32-bit number, decimal or `0x` hex (an address, an interrupt number, a seed).
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("`{s}` is not a 32-bit number (decimal or 0x hex)"))
}

/// A sampling period as given: in the run's unit (`10000`: instructions in QEMU, cycles on a
/// board), timer ticks (`16000ticks`), a duration (`10us`), or a rate (`100khz`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Period {
    /// The unit the report counts in: instructions in QEMU, the core's cycles on a board.
    Units(f64),
    Ticks(f64),
    Seconds(f64),
    Hertz(f64),
}

impl FromStr for Period {
    type Err = String;

    fn from_str(s: &str) -> Result<Period, String> {
        let t = s.trim().to_ascii_lowercase();
        let split = t
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let v: f64 = num.parse().map_err(|_| {
            format!(
                "`{s}` is not a period: use instructions in QEMU or cycles on a board (`10000`), \
                 timer ticks (`16000ticks`), a duration (`10us`) or a rate (`100khz`)"
            )
        })?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(format!("`{s}`: a period is more than zero"));
        }
        Ok(match unit.trim() {
            "" => Period::Units(v),
            "ticks" => Period::Ticks(v),
            "ns" => Period::Seconds(v / 1e9),
            "us" | "µs" => Period::Seconds(v / 1e6),
            "ms" => Period::Seconds(v / 1e3),
            "s" => Period::Seconds(v),
            "hz" => Period::Hertz(v),
            "khz" => Period::Hertz(v * 1e3),
            "mhz" => Period::Hertz(v * 1e6),
            other => return Err(format!("unknown unit `{other}` in period `{s}`")),
        })
    }
}

impl Period {
    /// Whether the period needs the timer's clock to be counted in ticks.
    pub fn needs_clock(self) -> bool {
        !matches!(self, Period::Ticks(_) | Period::Units(_))
    }

    /// The period in ticks of a timer at `timer_hz` that advances `units_per_tick` of the run's
    /// unit a tick (2 ..= 2^24, what the timers take).
    pub fn ticks(self, timer_hz: u64, units_per_tick: f64) -> Result<u64, String> {
        let hz = timer_hz as f64;
        let ticks = match self {
            Period::Units(u) => u / units_per_tick,
            Period::Ticks(t) => t,
            Period::Seconds(s) => s * hz,
            Period::Hertz(f) => hz / f,
        }
        .round();
        if !(2.0..=16_777_216.0).contains(&ticks) {
            return Err(format!(
                "a period of {ticks} ticks is out of range: the timer takes 2 ..= 16777216 ticks"
            ));
        }
        Ok(ticks as u64)
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Period::Units(u) => write!(f, "{u}"),
            Period::Ticks(t) => write!(f, "{t}ticks"),
            Period::Seconds(s) => write!(f, "{}us", s * 1e6),
            Period::Hertz(h) => write!(f, "{h}hz"),
        }
    }
}

/// What each sample is tagged with (`--tag`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// The exception that was running (Cortex-M's stacked xPSR).
    Exception,
    /// The firmware's own tag word (`sampler_rt::set_tag`, the Embassy hooks).
    Api,
    /// The word at an ELF symbol (an RTOS's current-task pointer).
    Symbol(String),
    /// The word at an address.
    Address(u32),
}

impl FromStr for Tag {
    type Err = String;

    fn from_str(s: &str) -> Result<Tag, String> {
        match s {
            "exception" => return Ok(Tag::Exception),
            "api" => return Ok(Tag::Api),
            _ => {}
        }
        if let Some(name) = s.strip_prefix("symbol:") {
            if name.is_empty() {
                return Err("`symbol:` needs the symbol's name, e.g. `symbol:pxCurrentTCB`".into());
            }
            return Ok(Tag::Symbol(name.to_owned()));
        }
        let addr = s
            .strip_prefix("0x")
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                format!(
                    "`{s}`: use `exception`, `api`, `symbol:NAME` (e.g. `symbol:pxCurrentTCB`) \
                     or an address such as `0x20000100`"
                )
            })?;
        if addr % 4 != 0 {
            return Err(format!("`{s}`: the word must be 4-byte aligned"));
        }
        Ok(Tag::Address(addr))
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tag::Exception => f.write_str("exception"),
            Tag::Api => f.write_str("api"),
            Tag::Symbol(s) => write!(f, "symbol:{s}"),
            Tag::Address(a) => write!(f, "{a:#x}"),
        }
    }
}

/// The timer that paces the sampler (`--timer`), before the machine is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerChoice {
    /// SysTick on Cortex-M; the generic timer on ARMv8-A (also spelled `generic`).
    SysTick,
    Generic,
    /// An Arm CMSDK APB timer: `(base, irq)`, or the machine's timer 0.
    Cmsdk(Option<(u32, u32)>),
    /// A device timer of a kind sampler-rt drives, at `(base, irq)`: `gptm:BASE:IRQ`
    /// (Stellaris/Tiva), `nrf:BASE:IRQ` (Nordic TIMER).
    Device(u8, u32, u32),
    /// One of the machine's timers by name (`gptm0`, `timer1`).
    Named(String),
    /// An ARMv8-A PMU event's overflow, by name or number.
    Pmu(String),
}

impl FromStr for TimerChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<TimerChoice, String> {
        let num = parse_u32;
        let parts: Vec<&str> = s.split(':').collect();
        Ok(match parts.as_slice() {
            ["systick"] => TimerChoice::SysTick,
            ["generic"] => TimerChoice::Generic,
            ["cmsdk"] => TimerChoice::Cmsdk(None),
            ["cmsdk", base, irq] => TimerChoice::Cmsdk(Some((num(base)?, num(irq)?))),
            ["pmu", event] if !event.is_empty() => TimerChoice::Pmu((*event).to_owned()),
            ["gptm", base, irq] => {
                TimerChoice::Device(sampler_rt::wire::TIMER_GPTM, num(base)?, num(irq)?)
            }
            ["nrf", base, irq] => {
                TimerChoice::Device(sampler_rt::wire::TIMER_NRF, num(base)?, num(irq)?)
            }
            ["stm32", base, irq] => {
                TimerChoice::Device(sampler_rt::wire::TIMER_STM32, num(base)?, num(irq)?)
            }
            [name]
                if name.len() >= 4
                    && (name.starts_with("gptm")
                        || name.starts_with("timer")
                        || name.starts_with("tim"))
                    && name[name.len() - 1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                TimerChoice::Named((*name).to_owned())
            }
            _ => {
                return Err(format!(
                    "unknown timer `{s}`: use `systick`, a timer of the machine by name \
                     (`gptm0` on lm3s6965evb, `timer0` on microbit and mps2, `tim2` on \
                     netduinoplus2), `cmsdk:BASE:IRQ`, `gptm:BASE:IRQ`, `nrf:BASE:IRQ` or \
                     `stm32:BASE:IRQ` (e.g. \
                     `cmsdk:0x40000000:8`), or on ARMv8-A `generic` or `pmu:EVENT` (e.g. \
                     `pmu:cpu_cycles`)"
                ));
            }
        })
    }
}

impl fmt::Display for TimerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerChoice::SysTick => f.write_str("systick"),
            TimerChoice::Generic => f.write_str("generic"),
            TimerChoice::Cmsdk(None) => f.write_str("cmsdk"),
            TimerChoice::Cmsdk(Some((b, i))) => write!(f, "cmsdk:{b:#x}:{i}"),
            TimerChoice::Pmu(e) => write!(f, "pmu:{e}"),
            TimerChoice::Device(k, b, i) => {
                let kind = match *k {
                    sampler_rt::wire::TIMER_NRF => "nrf",
                    sampler_rt::wire::TIMER_STM32 => "stm32",
                    _ => "gptm",
                };
                write!(f, "{kind}:{b:#x}:{i}")
            }
            TimerChoice::Named(n) => f.write_str(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_in_every_unit() {
        let p = |s: &str, hz| s.parse::<Period>().and_then(|p| p.ticks(hz, 1.0));
        assert_eq!(p("250ticks", 25_000_000), Ok(250));
        assert_eq!(p("250", 25_000_000), Ok(250));
        // A bare number is in the run's unit: 0.625 instructions a tick (mps2's 25 MHz SysTick
        // at the default `-icount` shift 6: 40 ns a tick, 64 ns an instruction).
        let insns = |s: &str, per_tick| s.parse::<Period>().and_then(|p| p.ticks(1, per_tick));
        assert_eq!(insns("1000", 0.625), Ok(1600));
        assert_eq!(insns("10000", 0.625), Ok(16_000));
        assert_eq!(insns("1000ticks", 0.625), Ok(1000));
        assert_eq!(
            "16000ticks".parse::<Period>().unwrap().to_string(),
            "16000ticks"
        );
        assert_eq!(p("10us", 25_000_000), Ok(250));
        assert_eq!(p("100kHz", 25_000_000), Ok(250));
        assert_eq!(p("1ms", 12_500_000), Ok(12_500));
        assert!(p("1", 25_000_000).is_err());
        assert!(p("1s", 168_000_000).is_err());
        assert!("10 parsecs".parse::<Period>().is_err());
        assert!("0".parse::<Period>().is_err());
        assert!("10us".parse::<Period>().unwrap().needs_clock());
        assert!(!"250".parse::<Period>().unwrap().needs_clock());
    }

    #[test]
    fn tags_and_timers_are_read_once() {
        assert_eq!("exception".parse(), Ok(Tag::Exception));
        assert_eq!("api".parse(), Ok(Tag::Api));
        assert_eq!(
            "symbol:pxCurrentTCB".parse(),
            Ok(Tag::Symbol("pxCurrentTCB".into()))
        );
        assert_eq!("0x20000100".parse(), Ok(Tag::Address(0x2000_0100)));
        assert!("0x20000101".parse::<Tag>().is_err());
        assert!("symbol:".parse::<Tag>().is_err());
        assert!("task".parse::<Tag>().is_err());
        assert_eq!("systick".parse(), Ok(TimerChoice::SysTick));
        assert_eq!(
            "cmsdk:0x40001000:9".parse(),
            Ok(TimerChoice::Cmsdk(Some((0x4000_1000, 9))))
        );
        assert_eq!("cmsdk".parse(), Ok(TimerChoice::Cmsdk(None)));
        assert_eq!(
            "pmu:cpu_cycles".parse(),
            Ok(TimerChoice::Pmu("cpu_cycles".into()))
        );
        assert!("tmr3".parse::<TimerChoice>().is_err());
        assert_eq!(
            "tim2".parse::<TimerChoice>(),
            Ok(TimerChoice::Named("tim2".into()))
        );
        assert!("cmsdk:x:1".parse::<TimerChoice>().is_err());
        for s in [
            "systick",
            "generic",
            "cmsdk",
            "cmsdk:0x40001000:9",
            "pmu:cpu_cycles",
        ] {
            assert_eq!(s.parse::<TimerChoice>().unwrap().to_string(), s);
        }
    }
}
