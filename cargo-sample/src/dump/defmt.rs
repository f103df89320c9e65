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
        // The stream decoder borrows its table for as long as it lives: one table per run,
        // kept for the rest of the process.
        let table: &'static Table = Box::leak(Box::new(table));
        Ok(Some(DefmtLog {
            decoder: table.new_stream_decoder(),
            locations,
            frames: 0,
            malformed: 0,
        }))
    }

    /// Take bytes of the stream; the lines of the frames they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.decoder.received(bytes);
        let mut lines = Vec::new();
        loop {
            match self.decoder.decode() {
                Ok(frame) => {
                    self.frames += 1;
                    let mut line = String::new();
                    if let Some(ts) = frame.display_timestamp() {
                        line.push_str(&format!("{ts} "));
                    }
                    let level = frame
                        .level()
                        .map(|l| l.as_str().to_uppercase())
                        .unwrap_or_else(|| "PRINT".into());
                    line.push_str(&format!("{level:<5} {}", frame.display_message()));
                    if let Some(loc) = self.locations.as_ref().and_then(|l| l.get(&frame.index())) {
                        let file = std::env::current_dir()
                            .ok()
                            .and_then(|d| loc.file.strip_prefix(d).ok().map(|p| p.to_path_buf()))
                            .unwrap_or_else(|| loc.file.clone());
                        line.push_str(&format!("  ({}:{})", file.display(), loc.line));
                    }
                    lines.push(line);
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
