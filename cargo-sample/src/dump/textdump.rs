//! The text dump of a C PC-sampling profiler (`prof_dump()` over a UART or semihosting),
//! so that its users get the same report from the same ELF:
//!
//! ```text
//! prof raw n=10000                        raw PCs follow, eight to a line
//! p 080002b4 080002b8 080002ac 080002b2 ...
//! g 20000a10 20000a10 20000b40 ...         optional: a tag per sample, same order
//! prof hist base=0x08000000 shift=4 n=100000 out=0
//! h 0000 0001 0a3c ...                     bins of 2^shift bytes from base, sixteen to a line
//! end
//! ```
//!
//! Lines of any other kind (the firmware's own output) are skipped.

use anyhow::{Context, Result, bail};

/// What a text dump holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextDump {
    /// Raw PCs, in order.
    pub raw: Vec<u32>,
    /// The `n=` of `prof raw`: samples taken (more than `raw` when the ring wrapped).
    pub raw_taken: Option<u64>,
    /// Tags, one per raw PC when present.
    pub tags: Vec<u32>,
    /// The bins: 16-bit counters (four hex digits each), as sampler-rt's.
    pub hist: Option<crate::dump::Hist>,
    /// The `n=` of `prof hist`: samples taken.
    pub hist_taken: Option<u64>,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parse a text dump.
pub fn parse(text: &str) -> Result<TextDump> {
    let mut d = TextDump::default();
    let mut seen_any = false;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = line.trim_end_matches('\r');
        let words = |prefix: &str, width: usize| -> Result<Vec<u32>> {
            line[prefix.len()..]
                .split_whitespace()
                .map(|w| {
                    if w.len() > width {
                        bail!("line {lineno}: `{w}` is longer than {width} hex digits");
                    }
                    u32::from_str_radix(w, 16)
                        .with_context(|| format!("line {lineno}: `{w}` is not a hex number"))
                })
                .collect()
        };
        if line.starts_with("prof raw") {
            seen_any = true;
            d.raw_taken = field(line, "n").and_then(number);
        } else if line.starts_with("prof hist") {
            seen_any = true;
            let base = field(line, "base")
                .and_then(number)
                .with_context(|| format!("line {lineno}: `prof hist` without `base=`"))?;
            let shift = field(line, "shift")
                .and_then(number)
                .filter(|&s| (1..=16).contains(&s))
                .with_context(|| {
                    format!("line {lineno}: `prof hist` without a `shift=` of 1 to 16")
                })?;
            d.hist_taken = field(line, "n").and_then(number);
            d.hist = Some(crate::dump::Hist {
                base: base as u32,
                shift: shift as u32,
                outside: field(line, "out")
                    .and_then(number)
                    .unwrap_or(0)
                    .min(u64::from(u32::MAX)) as u32,
                bins: Vec::new(),
            });
        } else if line.starts_with("p ") {
            d.raw.extend(words("p ", 8)?);
        } else if line.starts_with("g ") {
            d.tags.extend(words("g ", 8)?);
        } else if line.starts_with("h ") {
            let bins = words("h ", 4)?;
            match d.hist.as_mut() {
                // Four hex digits: each fits.
                Some(h) => h.bins.extend(bins.into_iter().map(|b| b as u16)),
                None => bail!("line {lineno}: histogram bins before a `prof hist` line"),
            }
        }
    }
    if !seen_any && d.raw.is_empty() {
        bail!(
            "no `prof raw` or `prof hist` line: this is not a text dump of the sampling profiler"
        );
    }
    if !d.tags.is_empty() && d.tags.len() != d.raw.len() {
        bail!(
            "{} tags for {} samples: the `g` lines must tag every `p` sample",
            d.tags.len(),
            d.raw.len()
        );
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_raw_tags_and_bins_and_skips_the_rest() {
        let text = "span=123\nprof raw n=10\np 080002b4 080002b8\np 080002ac\n\
                    g 20000a10 20000a10 20000b40\nprof hist base=0x08000000 shift=4 n=100 out=3\n\
                    h 0000 0001 0a3c\nh ffff\nend\n";
        let d = parse(text).unwrap();
        assert_eq!(d.raw, [0x0800_02b4, 0x0800_02b8, 0x0800_02ac]);
        assert_eq!(d.raw_taken, Some(10));
        assert_eq!(d.tags, [0x2000_0a10, 0x2000_0a10, 0x2000_0b40]);
        assert_eq!(d.hist_taken, Some(100));
        let h = d.hist.unwrap();
        assert_eq!((h.base, h.shift, h.outside), (0x0800_0000, 4, 3));
        assert_eq!(h.bins, [0, 1, 0x0a3c, 0xffff]);
    }

    #[test]
    fn damage_is_named_with_its_line() {
        let e = parse("prof raw n=2\np 0800zz00\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("0800zz00"), "{e}");
        assert!(parse("hello\nworld\n").is_err());
        assert!(parse("h 0001\n").is_err());
        let e = parse("prof raw n=2\np 1 2\ng 3\n").unwrap_err().to_string();
        assert!(e.contains("1 tags for 2 samples"), "{e}");
        assert!(parse("prof hist base=0x0 shift=0\n").is_err());
    }
}
