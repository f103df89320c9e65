//! Values read from the command line: counts, durations, budgets, and the value lists of
//! types that live below the command layer.

use std::time::Duration;

pub(crate) use crate::spec::parse_u32;

/// `--seed`: a 32-bit number below 2^32 - 1 (the generator's state is the seed plus one).
pub(crate) fn parse_seed(s: &str) -> Result<u32, String> {
    match parse_u32(s)? {
        u32::MAX => Err(format!("`{s}`: a seed is at most 4294967294 (0xFFFFFFFE)")),
        v => Ok(v),
    }
}
use crate::term::ColorWhen;
use clap::ValueEnum;

/// `--color`'s values (the type is the terminal layer's).
impl ValueEnum for ColorWhen {
    fn value_variants<'a>() -> &'a [Self] {
        &[ColorWhen::Auto, ColorWhen::Always, ColorWhen::Never]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            ColorWhen::Auto => PossibleValue::new("auto")
                .help("Colour a stream that is a terminal (and `NO_COLOR` is unset)"),
            ColorWhen::Always => PossibleValue::new("always")
                .help("Always colour standard output and error (never a file written with `-o`)"),
            ColorWhen::Never => PossibleValue::new("never"),
        })
    }
}

/// `--bin-split`'s values (the type is the report's).
impl ValueEnum for crate::report::bins::Split {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::report::bins::Split;
        &[Split::Bytes, Split::Density]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use crate::report::bins::Split;
        Some(clap::builder::PossibleValue::new(match self {
            Split::Bytes => "bytes",
            Split::Density => "density",
        }))
    }
}

/// `30s`, `2m`, `1500ms`, `1.5s`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = t.strip_suffix('m') {
        (v, 60.0)
    } else if let Some(v) = t.strip_suffix('h') {
        (v, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. `30s`, `2m`, `1500ms`)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{s}`: a duration is positive"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// An instruction budget: a count, or a duration of emulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Instructions(u64),
    Nanoseconds(u64),
}

impl Budget {
    /// The budget in instructions when each takes 2^`shift` ns.
    pub fn instructions(self, shift: u8) -> u64 {
        match self {
            Budget::Instructions(n) => n,
            Budget::Nanoseconds(ns) => (ns >> shift).max(1),
        }
    }
}

/// `300M`, `2G`, `1e9`, `500000000`, or a duration: `500ms`, `2s`, `10us`.
pub fn parse_budget(s: &str) -> Result<Budget, String> {
    let t = s.trim();
    for (unit, ns) in [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ] {
        if let Some(num) = t.strip_suffix(unit) {
            let err = || format!("`{s}` is not a duration: use e.g. `500ms`, `2s`, `10us`");
            let v: f64 = num.trim().parse().map_err(|_| err())?;
            let v = v * ns;
            if !(1.0..=1.8e19).contains(&v) {
                return Err(err());
            }
            return Ok(Budget::Nanoseconds(v.round() as u64));
        }
    }
    parse_count(t).map(Budget::Instructions)
}

/// A count with an optional `k`/`M`/`G` suffix or in `1e9` notation.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let err = || {
        format!(
            "`{s}` is not a count: use e.g. `300M`, `2G`, `1e9`, `500000000` or a duration (`500ms`)"
        )
    };
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'm' | 'M')) => (&t[..i], 1e6),
        Some((i, 'g' | 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let v = v * mul;
    if !(1.0..=1.8e19).contains(&v) {
        return Err(err());
    }
    Ok(v.round() as u64)
}

pub(crate) fn parse_u8(s: &str) -> Result<u8, String> {
    let v = if let Some(hex) = s.strip_prefix("0x") {
        u8::from_str_radix(hex, 16)
    } else {
        s.parse()
    };
    v.map_err(|_| format!("`{s}` is not a priority byte (0-255 or 0x00-0xff)"))
}

/// `--core`: a core with a timing model.
pub fn parse_core(s: &str) -> Result<crate::image::timing::Core, String> {
    crate::image::timing::Core::parse(s).ok_or_else(|| {
        let names: Vec<&str> = crate::image::timing::Core::ALL
            .iter()
            .map(|c| c.name())
            .collect();
        format!("no timing model for `{s}` (known: {})", names.join(", "))
    })
}

/// What `--annotate` shows: the N hottest functions, or one function by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Annotate {
    Hottest(usize),
    Function(String),
}

/// `--annotate N` or `--annotate FN`: a number is a count of the hottest functions, anything
/// else a function's name.
pub fn parse_annotate(s: &str) -> Result<Annotate, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("give a number of functions or a function's name".into());
    }
    Ok(match s.parse::<usize>() {
        Ok(n) => Annotate::Hottest(n),
        Err(_) => Annotate::Function(s.to_owned()),
    })
}

#[cfg(test)]
mod annotate_tests {
    use super::*;

    #[test]
    fn annotate_takes_a_count_or_a_name() {
        assert_eq!(parse_annotate("3"), Ok(Annotate::Hottest(3)));
        assert_eq!(
            parse_annotate("hot_a"),
            Ok(Annotate::Function("hot_a".into()))
        );
        assert_eq!(
            parse_annotate("Socket::process"),
            Ok(Annotate::Function("Socket::process".into()))
        );
        assert!(parse_annotate(" ").is_err());
    }
}
