//! The ITM/DWT packet stream a Cortex-M core sends over SWO (ARMv7-M Architecture Reference
//! Manual, appendix "Debug ITM and DWT Packet Protocol"), decoded in one pass over the bytes.
//!
//! Every packet starts with a header byte. Its two low bits are the payload size of a source
//! packet (1, 2 or 4 bytes; 0 for a protocol packet). Source packets come from software
//! (instrumentation: a write to a stimulus port) or, with header bit 2 set, from the DWT
//! hardware: event counter wrap (discriminator 0), exception trace (1), periodic PC sample (2:
//! four bytes of PC, or one byte of 0 when the core slept) and data trace (8 to 23). Protocol
//! packets are synchronisation (at least 47 zero bits, then a one: `00 00 00 00 00 80`),
//! overflow (`0x70`: packets were lost), local and global timestamps and extensions (the
//! stimulus port page); their payloads continue while bit 7 of a byte is set.
//!
//! The parser keeps a packet cut between two chunks of input, so a live stream can be fed as
//! it arrives; [`Parser::new`] with `wait_for_sync` ignores everything before the first
//! synchronisation packet (a capture that started mid-packet).

mod summary;
pub use summary::{ExceptionStats, Summary, event_lines, summarize};

/// Kinds of data trace packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataTrace {
    /// The PC of an access that matched comparator `n`.
    Pc,
    /// The low address bits of the access.
    Address,
    /// The value read or written.
    Value { write: bool },
}

/// One decoded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Sync,
    /// The ITM's FIFO overflowed: packets were lost before this point.
    Overflow,
    /// A local timestamp: time since the last one, in the timestamp clock; `tc` says how it
    /// relates to the packets before it (0 synchronous ... 3 delayed).
    LocalTimestamp {
        delta: u32,
        tc: u8,
    },
    /// A global timestamp packet (GTS1 `high = false`, GTS2 `high = true`) and its value bits.
    GlobalTimestamp {
        value: u64,
        high: bool,
    },
    /// An extension packet: the stimulus port page (`hardware = false`) or a DWT extension.
    Extension {
        value: u32,
        hardware: bool,
    },
    /// A write to stimulus port `port` (page * 32 + address) of `size` bytes.
    Instrumentation {
        port: u16,
        value: u32,
        size: u8,
    },
    /// DWT event counters that wrapped (CPI, exception, sleep, LSU, fold, cycle bits).
    CounterWrap(u8),
    /// Exception `number` entered (1), exited (2) or returned to (3).
    ExceptionTrace {
        number: u16,
        function: u8,
    },
    /// A periodic PC sample.
    PcSample(u32),
    /// A periodic PC sample taken while the core slept.
    Sleep,
    /// A data trace packet of comparator `comparator`.
    DataTrace {
        comparator: u8,
        kind: DataTrace,
        value: u32,
        size: u8,
    },
    /// A byte that starts no valid packet (reserved header, broken sync); skipped.
    Invalid(u8),
}

/// A streaming ITM decoder.
#[derive(Debug, Clone)]
pub struct Parser {
    /// Bytes of a packet cut at the end of the previous chunk.
    pending: Vec<u8>,
    page: u16,
    waiting: bool,
    /// Zero bytes of a synchronisation packet seen so far (it may span chunks).
    zeros: usize,
    /// Bytes ignored while waiting for synchronisation.
    pub skipped: u64,
}

/// What a header byte needs: a fixed number of payload bytes, or a continuation-bit payload.
#[derive(Clone, Copy)]
enum Need {
    Fixed(usize),
    Continued,
}

impl Parser {
    pub fn new(wait_for_sync: bool) -> Parser {
        Parser {
            pending: Vec::with_capacity(16),
            page: 0,
            waiting: wait_for_sync,
            zeros: 0,
            skipped: 0,
        }
    }

    /// Decode `data`, calling `out` for every complete packet.
    pub fn feed(&mut self, data: &[u8], out: &mut impl FnMut(Event)) {
        let mut i = 0;
        // Finish a packet left over from the previous chunk.
        while !self.pending.is_empty() && i < data.len() {
            self.pending.push(data[i]);
            i += 1;
            let pending = std::mem::take(&mut self.pending);
            match self.packet(&pending, out) {
                Some(_) => {}
                None => self.pending = pending,
            }
        }
        while i < data.len() {
            if self.waiting {
                i = self.find_sync(data, i);
                continue;
            }
            let h = data[i];
            if h == 0 || self.zeros > 0 {
                i = self.sync_bytes(data, i, out);
                continue;
            }
            // The hot path: a whole 5-byte source packet.
            if h & 3 == 3 && i + 5 <= data.len() {
                let v = u32::from_le_bytes([data[i + 1], data[i + 2], data[i + 3], data[i + 4]]);
                self.source(h, v, 4, out);
                i += 5;
                continue;
            }
            match self.packet(&data[i..], out) {
                Some(n) => i += n,
                None => {
                    self.pending.extend_from_slice(&data[i..]);
                    i = data.len();
                }
            }
        }
    }

    /// Skip to the end of the first synchronisation packet from `i`.
    fn find_sync(&mut self, data: &[u8], mut i: usize) -> usize {
        while i < data.len() {
            let b = data[i];
            i += 1;
            if b == 0 {
                self.zeros += 1;
            } else if b == 0x80 && self.zeros >= 5 {
                self.zeros = 0;
                self.waiting = false;
                self.page = 0;
                return i;
            } else {
                self.skipped += self.zeros as u64 + 1;
                self.zeros = 0;
            }
        }
        i
    }

    /// Consume the zeros of a synchronisation packet and its final 0x80.
    fn sync_bytes(&mut self, data: &[u8], mut i: usize, out: &mut impl FnMut(Event)) -> usize {
        while i < data.len() {
            let b = data[i];
            if b == 0 {
                self.zeros += 1;
                i += 1;
                continue;
            }
            let zeros = std::mem::take(&mut self.zeros);
            if b == 0x80 && zeros >= 5 {
                self.page = 0;
                out(Event::Sync);
                return i + 1;
            }
            // Too few zeros: each is a broken packet; the byte after them starts anew.
            for _ in 0..zeros {
                out(Event::Invalid(0));
            }
            return i;
        }
        i
    }

    fn need(h: u8) -> Need {
        match h & 3 {
            1 => Need::Fixed(1),
            2 => Need::Fixed(2),
            3 => Need::Fixed(4),
            _ => {
                if h == 0x70 {
                    Need::Fixed(0)
                } else if h & 0x0F == 0 {
                    // Local timestamp: format 1 continues while bit 7 is set, format 2 is one byte.
                    if h & 0x80 != 0 {
                        Need::Continued
                    } else {
                        Need::Fixed(0)
                    }
                } else if h == 0x94 || h == 0xB4 || h & 0x08 != 0 {
                    // Global timestamps and extensions carry on while bit 7 is set.
                    if h & 0x80 != 0 {
                        Need::Continued
                    } else {
                        Need::Fixed(0)
                    }
                } else {
                    Need::Fixed(0)
                }
            }
        }
    }

    /// Decode one packet at the start of `b`; its length, or `None` when it is cut short.
    fn packet(&mut self, b: &[u8], out: &mut impl FnMut(Event)) -> Option<usize> {
        let h = b[0];
        let len = match Self::need(h) {
            Need::Fixed(n) => {
                if b.len() < 1 + n {
                    return None;
                }
                1 + n
            }
            Need::Continued => {
                // Up to 4 (timestamps, extensions) or 6 (global timestamp 2) more bytes.
                let max = if h == 0xB4 { 6 } else { 4 };
                let mut n = 1;
                loop {
                    if n >= b.len() {
                        return None;
                    }
                    let c = b[n];
                    n += 1;
                    if c & 0x80 == 0 || n > max {
                        break;
                    }
                }
                n
            }
        };
        let payload = &b[1..len];
        match h & 3 {
            0 => self.protocol(h, payload, out),
            s => {
                let size = 1u8 << (s - 1);
                let mut v = 0u32;
                for (k, byte) in payload.iter().enumerate() {
                    v |= (*byte as u32) << (8 * k);
                }
                self.source(h, v, size, out);
            }
        }
        Some(len)
    }

    fn protocol(&mut self, h: u8, payload: &[u8], out: &mut impl FnMut(Event)) {
        // Continuation payloads: 7 bits a byte, least significant first.
        let value = || {
            let mut v = 0u64;
            for (k, byte) in payload.iter().enumerate() {
                v |= ((*byte & 0x7F) as u64) << (7 * k);
            }
            v
        };
        if h == 0x70 {
            out(Event::Overflow);
        } else if h & 0x0F == 0 {
            if h & 0x80 != 0 {
                out(Event::LocalTimestamp {
                    delta: value() as u32,
                    tc: (h >> 4) & 3,
                });
            } else {
                let d = (h >> 4) & 7;
                if d == 0 || d == 7 {
                    out(Event::Invalid(h));
                } else {
                    out(Event::LocalTimestamp {
                        delta: d as u32,
                        tc: 0,
                    });
                }
            }
        } else if h == 0x94 || h == 0xB4 {
            out(Event::GlobalTimestamp {
                value: value(),
                high: h == 0xB4,
            });
        } else if h & 0x08 != 0 {
            // Extension: EX[2:0] in the header, the higher bits in continuation bytes; SH (bit 2)
            // 0 = the stimulus port page of the instrumentation packets that follow.
            let hardware = h & 0x04 != 0;
            let mut v = ((h >> 4) & 7) as u32;
            for (k, byte) in payload.iter().enumerate() {
                v |= ((*byte & 0x7F) as u32) << (3 + 7 * k);
            }
            if !hardware {
                // Stimulus ports are numbered in pages of 32; a 16-bit port number holds 2048
                // pages (ITM has 8; larger values come only from damaged streams).
                self.page = (v & 0x7FF) as u16;
            }
            out(Event::Extension { value: v, hardware });
        } else {
            out(Event::Invalid(h));
        }
    }

    #[inline]
    fn source(&mut self, h: u8, v: u32, size: u8, out: &mut impl FnMut(Event)) {
        let a = h >> 3;
        if h & 4 == 0 {
            out(Event::Instrumentation {
                port: self.page * 32 + a as u16,
                value: v,
                size,
            });
            return;
        }
        match a {
            0 => out(Event::CounterWrap(v as u8)),
            1 => {
                let function = ((v >> 12) & 3) as u8;
                if function == 0 {
                    out(Event::Invalid(h));
                } else {
                    out(Event::ExceptionTrace {
                        number: (v & 0x1FF) as u16,
                        function,
                    });
                }
            }
            2 => {
                if size == 4 && v != 0 {
                    out(Event::PcSample(v));
                } else {
                    out(Event::Sleep);
                }
            }
            8..=23 => {
                let kind = match ((h >> 6) & 3, (h >> 3) & 1) {
                    (1, 0) => Some(DataTrace::Pc),
                    (1, 1) => Some(DataTrace::Address),
                    (2, bit3) => Some(DataTrace::Value { write: bit3 == 1 }),
                    _ => None,
                };
                match kind {
                    Some(kind) => out(Event::DataTrace {
                        comparator: (h >> 4) & 3,
                        kind,
                        value: v,
                        size,
                    }),
                    None => out(Event::Invalid(h)),
                }
            }
            _ => out(Event::Invalid(h)),
        }
    }
}

/// A stream as a core would send it: every sample of `pcs` as a periodic PC packet, among
/// writes to stimulus ports 0 and 1, local timestamps, exception trace, event counter wraps,
/// sleep samples, overflows and synchronisation packets; with `full`, also data trace, global
/// timestamps and extension (page) packets, which some decoders do not read.
pub fn synthetic(pcs: &[u32], full: bool) -> Vec<u8> {
    const SYNC: [u8; 6] = [0, 0, 0, 0, 0, 0x80];
    let mut s = Vec::with_capacity(pcs.len() * 6 + 64);
    s.extend_from_slice(&SYNC);
    for (k, &pc) in pcs.iter().enumerate() {
        s.push(0x17);
        s.extend_from_slice(&pc.to_le_bytes());
        if k % 7 == 3 {
            s.extend_from_slice(&[0x01, 0x48 + (k % 20) as u8]);
        }
        if k % 50 == 10 {
            s.push(0x0B);
            s.extend_from_slice(&((k as u32).wrapping_mul(977)).to_le_bytes());
        }
        if k % 64 == 20 {
            s.extend_from_slice(&[0x15, 0x00]);
        }
        if k % 100 == 30 {
            s.extend_from_slice(&[0xC0, 0x85, 0x12]);
        }
        if k % 100 == 60 {
            s.extend_from_slice(&[0x0E, 0x0F, 0x10]);
        }
        if k % 500 == 250 {
            s.extend_from_slice(&[0x05, 0x04]);
        }
        if k % 1000 == 500 {
            s.push(0x70);
        }
        if k % 1000 == 999 {
            s.extend_from_slice(&SYNC);
        }
        if k % 300 == 150 {
            s.push(0x30); // local timestamp, format 2: 3 ticks
        }
        if full {
            if k % 400 == 200 {
                // Data trace of comparator 1: PC value, then the data value written (2 bytes).
                s.push(0x57);
                s.extend_from_slice(&pc.to_le_bytes());
                s.extend_from_slice(&[0x9E, 0x34, 0x12]);
            }
            if k % 700 == 350 {
                s.extend_from_slice(&[0x94, 0x81, 0x02]); // global timestamp 1
            }
            if k % 900 == 450 {
                // Page 1 of the stimulus ports, a write to port 33, back to page 0.
                s.extend_from_slice(&[0x18, 0x09, 0x7A, 0x08]);
            }
        }
    }
    s.push(0x20);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exception trace packets and local timestamps, encoded from the protocol's rules.
    fn exception(number: u16, function: u8) -> [u8; 3] {
        [0x0E, number as u8, (function << 4) | (number >> 8) as u8]
    }
    fn timestamp(delta: u32) -> Vec<u8> {
        let mut v = vec![0xC0];
        let mut d = delta;
        loop {
            let more = d >= 0x80;
            v.push((d as u8 & 0x7F) | if more { 0x80 } else { 0 });
            d >>= 7;
            if !more {
                break;
            }
        }
        v
    }

    #[test]
    fn exception_trace_gives_counts_and_entry_to_exit_times() {
        let mut s = Vec::new();
        let at = |s: &mut Vec<u8>, events: &[(u16, u8)], delta: u32| {
            for &(n, f) in events {
                s.extend_from_slice(&exception(n, f));
            }
            s.extend_from_slice(&timestamp(delta));
        };
        at(&mut s, &[(15, 1)], 10); // t = 10
        at(&mut s, &[(15, 2), (0, 3)], 20); // 30: 15 lasted 20
        at(&mut s, &[(16, 1)], 10); // 40
        at(&mut s, &[(15, 1)], 10); // 50: preempts 16
        at(&mut s, &[(15, 2), (16, 3)], 5); // 55: 5
        at(&mut s, &[(16, 2)], 15); // 70: 16 lasted 30, preemption included
        at(&mut s, &[(15, 1)], 200); // 270
        s.push(0x70); // overflow: 15's exit cannot be timed
        at(&mut s, &[(15, 2)], 20);
        s.extend_from_slice(&exception(300, 1)); // no timestamp after it: counted only
        let sum = summarize(&s, false);
        assert_eq!(sum.exception, 11);
        let by: std::collections::HashMap<u16, &ExceptionStats> =
            sum.exceptions.iter().map(|e| (e.number, e)).collect();
        let e15 = by[&15];
        assert_eq!(
            (e15.entries, e15.timed, e15.min, e15.max),
            (3, 2, Some(5), Some(20))
        );
        assert_eq!(e15.mean, Some(12.5));
        let e16 = by[&16];
        assert_eq!(
            (e16.entries, e16.timed, e16.min, e16.max),
            (1, 1, Some(30), Some(30))
        );
        let e300 = by[&300];
        assert_eq!((e300.entries, e300.timed, e300.mean), (1, 0, None));
        assert_eq!(by[&0].entries, 0);
    }

    fn events(data: &[u8], wait: bool) -> Vec<Event> {
        let mut v = Vec::new();
        Parser::new(wait).feed(data, &mut |e| v.push(e));
        v
    }

    #[test]
    fn every_kind_of_packet() {
        let b = [
            0, 0, 0, 0, 0, 0x80, // sync
            0x17, 0xb4, 0x02, 0x00, 0x08, // PC sample
            0x15, 0x00, // sleep
            0x01, 0x41, // port 0, one byte
            0x0B, 1, 2, 3, 4, // port 1, a word
            0x0E, 0x0F, 0x10, // exception 15 entered
            0x05, 0x04, // event counter: sleep wrapped
            0x70, // overflow
            0xC0, 0x85, 0x12, // local timestamp 1: 0x05 | 0x12 << 7
            0x30, // local timestamp 2: 3
            0x94, 0x81, 0x02, // global timestamp 1
            0x47, 0x10, 0x20, 0x30, 0x40, // data trace: PC of comparator 0
            0x98, 0x01, // extension: stimulus page 9 (EX = 1 | 0x01 << 3)
            0x09, 0x7A, // port 9 * 32 + 1
        ];
        let e = events(&b, false);
        assert_eq!(
            e,
            [
                Event::Sync,
                Event::PcSample(0x0800_02b4),
                Event::Sleep,
                Event::Instrumentation {
                    port: 0,
                    value: 0x41,
                    size: 1
                },
                Event::Instrumentation {
                    port: 1,
                    value: 0x0403_0201,
                    size: 4
                },
                Event::ExceptionTrace {
                    number: 15,
                    function: 1
                },
                Event::CounterWrap(4),
                Event::Overflow,
                Event::LocalTimestamp {
                    delta: 0x05 | 0x12 << 7,
                    tc: 0
                },
                Event::LocalTimestamp { delta: 3, tc: 0 },
                Event::GlobalTimestamp {
                    value: 1 | 2 << 7,
                    high: false
                },
                Event::DataTrace {
                    comparator: 0,
                    kind: DataTrace::Pc,
                    value: 0x4030_2010,
                    size: 4
                },
                Event::Extension {
                    value: 9,
                    hardware: false
                },
                Event::Instrumentation {
                    port: 289,
                    value: 0x7A,
                    size: 1
                },
            ]
        );
    }

    #[test]
    fn packets_cut_between_chunks_are_kept() {
        let pcs: Vec<u32> = (0..3000).map(|i| 0x0800_0000 + 2 * i).collect();
        let stream = synthetic(&pcs, true);
        let whole = events(&stream, false);
        for chunk in [1, 2, 3, 5, 7, 64, 4093] {
            let mut p = Parser::new(false);
            let mut got = Vec::new();
            for c in stream.chunks(chunk) {
                p.feed(c, &mut |e| got.push(e));
            }
            assert_eq!(got, whole, "chunks of {chunk}");
        }
        let s = summarize(&stream, false);
        assert_eq!(s.pcs, pcs);
        assert_eq!(s.invalid, 0);
        assert!(s.data_trace > 0 && s.extension > 0 && s.timestamp > 0 && s.overflow > 0);
    }

    #[test]
    fn a_capture_cut_mid_packet_resumes_at_the_next_sync() {
        let pcs: Vec<u32> = (0..5000).map(|i| 0x0800_0000 + 2 * (i % 700)).collect();
        let stream = synthetic(&pcs, false);
        let cut = &stream[5005..];
        let s = summarize(cut, true);
        assert!(s.skipped > 0);
        assert_eq!(s.invalid, 0);
        // The samples after the first sync are the tail of the source, in order.
        assert!(!s.pcs.is_empty());
        assert_eq!(s.pcs[..], pcs[pcs.len() - s.pcs.len()..]);
    }
}
