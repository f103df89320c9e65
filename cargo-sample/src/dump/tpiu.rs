//! The TPIU's formatter (CoreSight), undone: a trace port or an SWO pin with the formatter on
//! carries several trace sources (ITM, ETM, ...) interleaved in 16-byte frames, and this keeps
//! the bytes of one source (the ITM's trace ID, 1 unless the firmware set another).
//!
//! A frame: bytes 0 to 14 carry data or, at even positions with bit 0 set, a change of source
//! ID (bits 7..1); byte 15 holds, for each even position k*2, either the data byte's bit 0 (bit 0
//! of an even data byte is always 0 on the wire) or, after an ID change, whether the byte that
//! follows still belongs to the previous source (1) or to the new one (0). Odd positions are
//! always data of the current source. Between frames a full synchronisation packet
//! (`FF FF FF 7F`) marks where frames start; IDs 0 (nothing) and 0x7D to 0x7F (reserved)
//! carry no data. Bytes before the first change of ID are taken as the wanted source's.

/// Bytes in a formatter frame.
pub const FRAME: usize = 16;
const SYNC: [u8; 4] = [0xFF, 0xFF, 0xFF, 0x7F];

/// A streaming deframer keeping one source's bytes.
#[derive(Debug, Clone)]
pub struct Deframer {
    want: u8,
    id: u8,
    /// Bytes of a frame (or of a synchronisation packet) cut at the end of the last chunk.
    partial: Vec<u8>,
    /// Whether frame boundaries are known: from the start of the capture (it is assumed to
    /// start on one), and again after every synchronisation packet.
    aligned: bool,
    /// Frames taken, and synchronisation packets seen.
    pub frames: u64,
    pub syncs: u64,
    /// Bytes dropped while looking for a synchronisation packet.
    pub skipped: u64,
}

impl Deframer {
    /// Keep source `want`; the capture is taken to start on a frame boundary.
    pub fn new(want: u8) -> Deframer {
        Deframer {
            want,
            // Until a frame names its source, its bytes are taken as the wanted source's (a
            // capture of one source, started after its ID was announced).
            id: want,
            partial: Vec::with_capacity(FRAME),
            aligned: true,
            frames: 0,
            syncs: 0,
            skipped: 0,
        }
    }

    /// Take `data`, appending the wanted source's bytes to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) {
        let mut buf = std::mem::take(&mut self.partial);
        buf.extend_from_slice(data);
        let mut i = 0;
        loop {
            let rest = &buf[i..];
            if !self.aligned {
                // Look for a synchronisation packet: frames start after it.
                match rest.windows(SYNC.len()).position(|w| w == SYNC) {
                    Some(k) => {
                        self.skipped += k as u64;
                        i += k + SYNC.len();
                        self.syncs += 1;
                        self.aligned = true;
                        continue;
                    }
                    None => {
                        // Keep a tail that may begin a synchronisation packet.
                        let keep = rest.len().min(SYNC.len() - 1);
                        self.skipped += (rest.len() - keep) as u64;
                        i = buf.len() - keep;
                        break;
                    }
                }
            }
            if rest.len() >= SYNC.len() && rest[..SYNC.len()] == SYNC {
                self.syncs += 1;
                i += SYNC.len();
                continue;
            }
            // Half-word synchronisation (`FF 7F`) pads a trace port between frames.
            if rest.len() >= 2 && rest[..2] == [0xFF, 0x7F] {
                i += 2;
                continue;
            }
            if rest.len() < FRAME {
                break;
            }
            if rest[0] == 0xFF && rest[1] == 0xFF {
                // The start of a synchronisation packet we have not all of: wait for it.
                if rest.len() < SYNC.len() {
                    break;
                }
            }
            let frame: [u8; FRAME] = rest[..FRAME].try_into().expect("length checked");
            self.frame(&frame, out);
            self.frames += 1;
            i += FRAME;
        }
        self.partial = buf[i..].to_vec();
    }

    /// Bytes left over that make no whole frame (at the end of a capture).
    pub fn leftover(&self) -> usize {
        self.partial.len()
    }

    fn frame(&mut self, f: &[u8; FRAME], out: &mut Vec<u8>) {
        let aux = f[15];
        let mut keep = |id: u8, byte: u8| {
            if id == self.want {
                out.push(byte);
            }
        };
        let mut k = 0;
        while k < 15 {
            let byte = f[k];
            if k % 2 == 1 {
                keep(self.id, byte);
                k += 1;
                continue;
            }
            let bit = (aux >> (k / 2)) & 1;
            if byte & 1 == 0 {
                keep(self.id, byte | bit);
                k += 1;
                continue;
            }
            // A new source: the next byte is the old source's when the bit says so.
            let old = self.id;
            self.id = byte >> 1;
            if k + 1 < 15 {
                keep(if bit == 1 { old } else { self.id }, f[k + 1]);
            }
            k += 2;
        }
    }
}

/// Undo the formatter of a whole capture: the bytes of source `id`, and the deframer's
/// counts.
pub fn deframe(data: &[u8], id: u8) -> (Vec<u8>, Deframer) {
    let mut d = Deframer::new(id);
    let mut out = Vec::with_capacity(data.len());
    d.feed(data, &mut out);
    (out, d)
}

/// The formatter itself, for synthetic captures (`cargo sample swo --synthesize-from ..
/// --tpiu`): `sources` in order, each `(id, bytes)`, in frames after a synchronisation
/// packet, and another after every fourth frame.
pub fn frame(sources: &[(u8, &[u8])]) -> Vec<u8> {
    let mut items: Vec<(u8, u8)> = Vec::new();
    for (id, data) in sources {
        items.extend(data.iter().map(|&b| (*id, b)));
    }
    let mut out = SYNC.to_vec();
    let mut id = 0u8;
    let mut i = 0;
    let mut frames = 0;
    while i < items.len() {
        let mut f = [0u8; FRAME];
        let mut k = 0;
        while k < 15 {
            let Some(&(src, b)) = items.get(i) else {
                // Nothing left: switch to source 0 (its byte, if any, means nothing).
                if k % 2 == 0 {
                    f[k] = 1;
                    id = 0;
                    k += 2;
                } else {
                    unreachable!("an odd slot is only reached with data of its source");
                }
                continue;
            };
            if k % 2 == 1 {
                debug_assert_eq!(src, id, "an odd slot holds the current source's data");
                f[k] = b;
                i += 1;
                k += 1;
            } else if src != id {
                // A new source, the next byte its own (aux bit 0).
                f[k] = (src << 1) | 1;
                id = src;
                if k < 14 {
                    f[k + 1] = b;
                    i += 1;
                }
                k += 2;
            } else {
                let next = items.get(i + 1).map(|n| n.0).unwrap_or(0);
                if k < 14 && next != id {
                    // The odd slot after this one cannot hold another source: change
                    // now, the next byte still this source's (aux bit 1).
                    f[k] = (next << 1) | 1;
                    f[15] |= 1 << (k / 2);
                    f[k + 1] = b;
                    id = next;
                    i += 1;
                    k += 2;
                } else {
                    f[k] = b & !1;
                    f[15] |= (b & 1) << (k / 2);
                    i += 1;
                    k += 1;
                }
            }
        }
        out.extend_from_slice(&f);
        frames += 1;
        if frames % 4 == 0 {
            out.extend_from_slice(&SYNC);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame written by hand from the rules: ID 1, data 0x10 (even, bit 0 from aux), 0x21,
    /// ID change to 2 with the next byte still source 1's (0x33), data 0x44 for 2, ...
    #[test]
    fn a_frame_written_by_hand_gives_each_source_its_bytes() {
        let mut f = [0u8; FRAME];
        f[0] = (1 << 1) | 1; // ID 1; aux bit 0 = 0: byte 1 is the new source's
        f[1] = 0xA1;
        f[2] = 0x10; // data, bit 0 = aux bit 1
        f[3] = 0x21;
        f[4] = (2 << 1) | 1; // ID 2; aux bit 2 = 1: byte 5 is still source 1's
        f[5] = 0x33;
        f[6] = 0x44; // data of 2, bit 0 = aux bit 3 = 0
        f[7] = 0x55;
        f[8] = (1 << 1) | 1; // back to 1, aux bit 4 = 0
        f[9] = 0x66;
        f[10] = 0x76; // data of 1, aux bit 5 = 1 -> 0x77
        f[11] = 0x88;
        f[12] = 0x98; // aux bit 6 = 0
        f[13] = 0xA9;
        f[14] = 0xBA; // aux bit 7 = 1 -> 0xBB
        f[15] = 0b1010_0110;
        let (one, d) = deframe(&f, 1);
        assert_eq!(
            one,
            [0xA1, 0x11, 0x21, 0x33, 0x66, 0x77, 0x88, 0x98, 0xA9, 0xBB]
        );
        assert_eq!(d.frames, 1);
        let (two, _) = deframe(&f, 2);
        assert_eq!(two, [0x44, 0x55]);
    }

    #[test]
    fn interleaved_sources_come_apart_whatever_the_chunks() {
        let itm: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let etm: Vec<u8> = (0..500u32).map(|i| (i * 7) as u8).collect();
        let mut sources = Vec::new();
        for (a, b) in itm.chunks(37).zip(etm.chunks(19)) {
            sources.push((1u8, a));
            sources.push((3u8, b));
        }
        let framed = frame(&sources);
        for chunk in [1, 3, 16, 17, 1000] {
            let mut d = Deframer::new(1);
            let mut out = Vec::new();
            for c in framed.chunks(chunk) {
                d.feed(c, &mut out);
            }
            let expected: Vec<u8> = itm
                .chunks(37)
                .take(sources.len() / 2)
                .flatten()
                .copied()
                .collect();
            assert_eq!(out, expected, "chunks of {chunk}");
            assert_eq!(d.leftover(), 0);
        }
        let mut d = Deframer::new(3);
        let mut out = Vec::new();
        d.feed(&framed, &mut out);
        let expected: Vec<u8> = etm
            .chunks(19)
            .take(sources.len() / 2)
            .flatten()
            .copied()
            .collect();
        assert_eq!(out, expected);
    }

    #[test]
    fn a_capture_started_mid_frame_resynchronises() {
        let itm: Vec<u8> = (0..400u32).map(|i| (i * 13 + 1) as u8).collect();
        let framed = frame(&[(1, &itm)]);
        // Lose the first 7 bytes and look for the next synchronisation packet.
        let mut d = Deframer::new(1);
        d.aligned = false;
        let mut out = Vec::new();
        d.feed(&framed[7..], &mut out);
        assert!(d.skipped > 0 && d.syncs >= 1);
        assert!(!out.is_empty());
        // What comes after the resynchronisation is the stream's tail, intact.
        assert!(itm.ends_with(&out), "{} bytes", out.len());
    }
}
