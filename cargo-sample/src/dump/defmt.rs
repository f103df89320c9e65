//! The firmware's defmt log: frames (as `defmt-rtt` or `defmt-semihosting` send them) decoded
//! with `defmt-decoder` against the ELF that ran, into text lines like `probe-rs run` prints.

use anyhow::{Context, Result};
use defmt_decoder::{DecodeError, Locations, StreamDecoder, Table};

/// A streaming decoder of one image's defmt frames.
pub struct DefmtLog {
    decoder: Box<dyn StreamDecoder + Send + Sync + 'static>,
    locations: Option<Locations>,
    /// Frames decoded, and stretches of bytes that decoded to nothing (skipped).
    pub frames: u64,
    pub malformed: u64,
    /// Whether the timestamp is sampler-rt's count of samples taken (its `defmt-timestamp`).
    pub stamped_with_samples: bool,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The timestamp as the firmware's format displays it.
    pub timestamp: Option<String>,
    /// `ERROR` ... `TRACE`, or `PRINT` for `println!`.
    pub level: String,
    pub message: String,
    /// `file:line` of the call, relative to the current directory when inside it.
    pub location: Option<String>,
}

impl LogLine {
    /// The line as printed: `[timestamp ]LEVEL message  (file:line)`.
    pub fn text(&self) -> String {
        let mut line = String::new();
        if let Some(ts) = &self.timestamp {
            line.push_str(&format!("{ts} "));
        }
        line.push_str(&format!("{:<5} {}", self.level, self.message));
        if let Some(loc) = &self.location {
            line.push_str(&format!("  ({loc})"));
        }
        line
    }

    /// The number of samples taken when the line was logged, for a firmware whose timestamp is
    /// sampler-rt's.
    pub fn samples_taken(&self) -> Option<u32> {
        self.timestamp.as_deref()?.trim().parse().ok()
    }
}

impl std::fmt::Debug for DefmtLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefmtLog")
            .field("frames", &self.frames)
            .field("malformed", &self.malformed)
            .finish()
    }
}

impl DefmtLog {
    /// Whether the image logs through defmt (has a defmt table).
    pub fn in_elf(elf: &[u8]) -> bool {
        Table::parse(elf).ok().flatten().is_some()
    }

    /// The decoder of `elf`'s defmt table; `None` when the image does not use defmt.
    pub fn of_elf(elf: &[u8]) -> Result<Option<DefmtLog>> {
        let Some(table) = Table::parse(elf).context("reading the image's defmt table")? else {
            return Ok(None);
        };
        let locations = table.get_locations(elf).ok().filter(|l| !l.is_empty());
        let stamped_with_samples = timestamp_package(&table).as_deref() == Some("sampler-rt");
        // The stream decoder borrows its table for as long as it lives: one table per run,
        // kept for the rest of the process.
        let table: &'static Table = Box::leak(Box::new(table));
        Ok(Some(DefmtLog {
            decoder: table.new_stream_decoder(),
            locations,
            frames: 0,
            malformed: 0,
            stamped_with_samples,
        }))
    }

    /// Take bytes of the stream; the lines of the frames they complete, as printed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.feed_lines(bytes).iter().map(LogLine::text).collect()
    }

    /// Take bytes of the stream; the frames they complete.
    pub fn feed_lines(&mut self, bytes: &[u8]) -> Vec<LogLine> {
        self.decoder.received(bytes);
        let mut lines = Vec::new();
        loop {
            match self.decoder.decode() {
                Ok(frame) => {
                    self.frames += 1;
                    let location = self
                        .locations
                        .as_ref()
                        .and_then(|l| l.get(&frame.index()))
                        .map(|loc| {
                            let file = std::env::current_dir()
                                .ok()
                                .and_then(|d| {
                                    loc.file.strip_prefix(d).ok().map(|p| p.to_path_buf())
                                })
                                .unwrap_or_else(|| loc.file.clone());
                            format!("{}:{}", file.display(), loc.line)
                        });
                    lines.push(LogLine {
                        timestamp: frame.display_timestamp().map(|t| t.to_string()),
                        level: frame
                            .level()
                            .map(|l| l.as_str().to_uppercase())
                            .unwrap_or_else(|| "PRINT".into()),
                        message: frame.display_message().to_string(),
                        location,
                    });
                }
                Err(DecodeError::UnexpectedEof) => break,
                Err(DecodeError::Malformed) => {
                    // The decoder resynchronises on the next frame; a raw (unframed) stream
                    // cannot and stops here.
                    self.malformed += 1;
                    if self.malformed > 1000 {
                        break;
                    }
                }
            }
        }
        lines
    }
}

/// The crate that defined the table's timestamp (`defmt::timestamp!`), read from the symbol
/// defmt gave it (JSON naming its package).
fn timestamp_package(table: &Table) -> Option<String> {
    let t = serde_json::to_value(table).ok()?;
    let raw = t.get("timestamp")?.get("raw_symbol")?.as_str()?;
    let sym: serde_json::Value = serde_json::from_str(raw).ok()?;
    Some(sym.get("package")?.as_str()?.to_owned())
}
