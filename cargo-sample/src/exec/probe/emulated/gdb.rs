//! A client for QEMU's gdbstub (the GDB remote serial protocol): stop and resume the VM, read
//! and write guest memory and core registers, send monitor commands.
//!
//! The protocol in brief: a packet is `$data#xx` (`xx` the sum of the data bytes, in hex); the
//! receiver acknowledges with `+` until both sides agree on `QStartNoAckMode`. While the VM
//! runs, the client may only send the interrupt byte (0x03); QEMU stops the VM and answers
//! with a stop reply (`T..`/`S..`), or with `W..`/`X..` when the guest has ended.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long an answer may take before QEMU counts as gone.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// How the connection to QEMU was lost, for the caller's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gone {
    /// The guest ended (`W`: exit code, `X`: signal).
    Exited(String),
    /// The socket closed or failed.
    Closed(String),
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gone::Exited(how) => write!(
                f,
                "the emulated chip is gone: the firmware ended QEMU ({how})"
            ),
            Gone::Closed(why) => write!(
                f,
                "the emulated chip is gone: QEMU closed the debug connection ({why})"
            ),
        }
    }
}

/// A byte stream to QEMU's gdbstub.
pub trait Stream: Read + Write + Send {
    fn set_timeout(&mut self, t: Option<Duration>) -> std::io::Result<()>;
}

impl Stream for std::net::TcpStream {
    fn set_timeout(&mut self, t: Option<Duration>) -> std::io::Result<()> {
        self.set_read_timeout(t)
    }
}

#[cfg(unix)]
impl Stream for std::os::unix::net::UnixStream {
    fn set_timeout(&mut self, t: Option<Duration>) -> std::io::Result<()> {
        self.set_read_timeout(t)
    }
}

/// One connection to the gdbstub.
pub struct Gdb {
    io: Box<dyn Stream>,
    /// Bytes read but not yet parsed.
    pending: Vec<u8>,
    /// Whether the VM runs (only the interrupt byte may be sent).
    running: bool,
    /// Set once the connection is lost; every later call fails with it.
    gone: Option<Gone>,
    acks: bool,
    /// The largest packet QEMU takes.
    packet_size: usize,
}

impl std::fmt::Debug for Gdb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gdb")
            .field("running", &self.running)
            .field("gone", &self.gone)
            .finish()
    }
}

fn checksum(data: &[u8]) -> u8 {
    data.iter().fold(0u8, |a, b| a.wrapping_add(*b))
}

/// Hex of bytes, as the protocol writes memory.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of hex; `None` if it is not hex.
pub fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect()
}

impl Gdb {
    /// Take over a connected stream: agree on no acknowledgements and learn the packet size.
    pub fn new(io: Box<dyn Stream>) -> Result<Gdb> {
        let mut g = Gdb {
            io,
            pending: Vec::new(),
            running: false,
            gone: None,
            acks: true,
            packet_size: 4096,
        };
        let sup = g.request("qSupported:swbreak+;hwbreak+")?;
        if let Some(n) = String::from_utf8_lossy(&sup)
            .split(';')
            .find_map(|f| f.strip_prefix("PacketSize="))
            .and_then(|n| usize::from_str_radix(n, 16).ok())
        {
            g.packet_size = n.clamp(64, 1 << 16);
        }
        if g.request("QStartNoAckMode")? == b"OK" {
            g.acks = false;
        }
        Ok(g)
    }

    /// Whether the VM runs.
    pub fn running(&self) -> bool {
        self.running
    }

    /// How the connection was lost, if it was.
    pub fn gone(&self) -> Option<&Gone> {
        self.gone.as_ref()
    }

    fn lost(&mut self, g: Gone) -> anyhow::Error {
        self.running = false;
        let e = anyhow::anyhow!("{g}");
        self.gone = Some(g);
        e
    }

    fn check(&self) -> Result<()> {
        match &self.gone {
            Some(g) => bail!("{g}"),
            None => Ok(()),
        }
    }

    fn send(&mut self, data: &[u8]) -> Result<()> {
        let mut p = Vec::with_capacity(data.len() + 4);
        p.push(b'$');
        p.extend_from_slice(data);
        p.extend_from_slice(format!("#{:02x}", checksum(data)).as_bytes());
        if let Err(e) = self.io.write_all(&p).and_then(|_| self.io.flush()) {
            return Err(self.lost(Gone::Closed(e.to_string())));
        }
        Ok(())
    }

    /// The next packet's data (acknowledged when acks are on), waiting up to `timeout`.
    fn receive(&mut self, timeout: Duration) -> Result<Vec<u8>> {
        let until = Instant::now() + timeout;
        loop {
            // A whole packet in what was read: `$...#xx`.
            if let Some(start) = self.pending.iter().position(|&b| b == b'$') {
                if let Some(end) = self.pending[start..].iter().position(|&b| b == b'#') {
                    let end = start + end;
                    if self.pending.len() >= end + 3 {
                        let raw = self.pending[start + 1..end].to_vec();
                        self.pending.drain(..end + 3);
                        if self.acks {
                            let _ = self.io.write_all(b"+");
                        }
                        return Ok(unescape(&raw));
                    }
                }
            } else {
                // Acknowledgements and noise before a packet.
                self.pending.clear();
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "QEMU's debug connection did not answer within {} s",
                    timeout.as_secs()
                );
            }
            let _ = self
                .io
                .set_timeout(Some(left.min(Duration::from_millis(500))));
            let mut buf = [0u8; 8192];
            match self.io.read(&mut buf) {
                Ok(0) => return Err(self.lost(Gone::Closed("end of stream".into()))),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(Gone::Closed(e.to_string()))),
            }
        }
    }

    /// Send a request and take its answer (with the VM stopped).
    pub fn request(&mut self, data: &str) -> Result<Vec<u8>> {
        self.check()?;
        if self.running {
            bail!("internal: a request to QEMU while the VM runs");
        }
        self.send(data.as_bytes())?;
        let r = self.receive(ANSWER_TIMEOUT)?;
        self.exit_reply(&r)?;
        Ok(r)
    }

    /// An exit reply (`W`/`X`) means the guest is gone.
    fn exit_reply(&mut self, r: &[u8]) -> Result<()> {
        match r.first() {
            Some(b'W') if r.len() == 3 => {
                let code = u8::from_str_radix(&String::from_utf8_lossy(&r[1..]), 16).unwrap_or(0);
                Err(self.lost(Gone::Exited(format!("exit code {code}"))))
            }
            Some(b'X') => Err(self.lost(Gone::Exited(format!(
                "signal {}",
                String::from_utf8_lossy(&r[1..])
            )))),
            _ => Ok(()),
        }
    }

    /// Stop the VM (virtual time stops with it under `-icount`). Returns the stop reply.
    pub fn stop(&mut self) -> Result<Vec<u8>> {
        self.check()?;
        if !self.running {
            return Ok(Vec::new());
        }
        if let Err(e) = self.io.write_all(&[0x03]).and_then(|_| self.io.flush()) {
            return Err(self.lost(Gone::Closed(e.to_string())));
        }
        loop {
            let r = self.receive(ANSWER_TIMEOUT)?;
            self.exit_reply(&r)?;
            if matches!(r.first(), Some(b'T' | b'S')) {
                self.running = false;
                return Ok(r);
            }
            // Console output (`O...`) or stray answers: keep waiting for the stop.
        }
    }

    /// Let the VM run.
    pub fn resume(&mut self) -> Result<()> {
        self.check()?;
        if self.running {
            return Ok(());
        }
        self.send(b"c")?;
        self.running = true;
        Ok(())
    }

    /// Execute one instruction (the VM stopped before and after).
    pub fn step(&mut self) -> Result<()> {
        self.check()?;
        if self.running {
            bail!("internal: a step while the VM runs");
        }
        self.send(b"s")?;
        loop {
            let r = self.receive(ANSWER_TIMEOUT)?;
            self.exit_reply(&r)?;
            if matches!(r.first(), Some(b'T' | b'S')) {
                return Ok(());
            }
        }
    }

    /// Whether the VM stopped by itself (it runs and a stop or exit reply is waiting).
    pub fn poll_stopped(&mut self) -> Result<bool> {
        self.check()?;
        if !self.running {
            return Ok(false);
        }
        match self.receive(Duration::from_millis(1)) {
            Ok(r) => {
                self.exit_reply(&r)?;
                if matches!(r.first(), Some(b'T' | b'S')) {
                    self.running = false;
                    return Ok(true);
                }
                Ok(false)
            }
            Err(_) if self.gone.is_none() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Read guest memory (the VM stopped).
    pub fn read(&mut self, addr: u32, len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        // Each byte comes back as two hex digits; leave room for the framing.
        let chunk = (self.packet_size.saturating_sub(16) / 2).max(16);
        while out.len() < len {
            let a = addr.wrapping_add(out.len() as u32);
            let n = chunk.min(len - out.len());
            let r = self.request(&format!("m{a:x},{n:x}"))?;
            if r.first() == Some(&b'E') {
                bail!("the core's bus faulted reading {n} bytes at {a:#010x}");
            }
            let bytes = unhex(&r).context("QEMU answered a memory read with something else")?;
            if bytes.is_empty() {
                bail!("the core's bus faulted reading {n} bytes at {a:#010x}");
            }
            out.extend_from_slice(&bytes);
        }
        out.truncate(len);
        Ok(out)
    }

    /// Write guest memory (the VM stopped; writes reach ROM too, as a debugger's do).
    pub fn write(&mut self, addr: u32, data: &[u8]) -> Result<()> {
        let chunk = (self.packet_size.saturating_sub(32) / 2).max(16);
        for (i, part) in data.chunks(chunk).enumerate() {
            let a = addr.wrapping_add((i * chunk) as u32);
            let r = self.request(&format!("M{a:x},{:x}:{}", part.len(), hex(part)))?;
            if r != b"OK" {
                bail!(
                    "the core's bus faulted writing {} bytes at {a:#010x}",
                    part.len()
                );
            }
        }
        Ok(())
    }

    /// Read a register by its gdb number (little-endian, as many bytes as it has).
    pub fn read_reg(&mut self, n: u32) -> Result<u64> {
        let r = self.request(&format!("p{n:x}"))?;
        let bytes = unhex(&r).with_context(|| format!("QEMU has no register {n}"))?;
        Ok(bytes
            .iter()
            .take(8)
            .rev()
            .fold(0u64, |a, b| a << 8 | *b as u64))
    }

    /// Write a 32-bit register by its gdb number.
    pub fn write_reg(&mut self, n: u32, v: u32) -> Result<()> {
        let r = self.request(&format!("P{n:x}={}", hex(&v.to_le_bytes())))?;
        if r != b"OK" {
            bail!("QEMU refused to write register {n}");
        }
        Ok(())
    }

    /// A monitor command (`qRcmd`), its output.
    pub fn monitor(&mut self, cmd: &str) -> Result<String> {
        self.check()?;
        if self.running {
            bail!("internal: a monitor command while the VM runs");
        }
        self.send(format!("qRcmd,{}", hex(cmd.as_bytes())).as_bytes())?;
        let mut text = Vec::new();
        loop {
            let r = self.receive(ANSWER_TIMEOUT)?;
            self.exit_reply(&r)?;
            match r.first() {
                Some(b'O') if r != b"OK" => text.extend(unhex(&r[1..]).unwrap_or_default()),
                Some(b'E') => bail!("QEMU refused `{cmd}`"),
                _ => return Ok(String::from_utf8_lossy(&text).into_owned()),
            }
        }
    }

    /// A `qXfer` object read in full (e.g. `features`, `target.xml`).
    pub fn xfer(&mut self, object: &str, annex: &str) -> Result<String> {
        let mut out = Vec::new();
        loop {
            let r = self.request(&format!(
                "qXfer:{object}:read:{annex}:{:x},{:x}",
                out.len(),
                self.packet_size.saturating_sub(16)
            ))?;
            match r.first() {
                Some(b'm') => out.extend_from_slice(&r[1..]),
                Some(b'l') => {
                    out.extend_from_slice(&r[1..]);
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                _ => bail!("QEMU does not describe `{annex}`"),
            }
        }
    }
}

/// Undo the protocol's escapes (`}` then the byte xor 0x20) and run-length encoding.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'}' if i + 1 < raw.len() => {
                out.push(raw[i + 1] ^ 0x20);
                i += 2;
            }
            b'*' if i + 1 < raw.len() && !out.is_empty() => {
                let n = raw[i + 1].saturating_sub(29) as usize;
                let last = *out.last().unwrap_or(&0);
                out.extend(std::iter::repeat_n(last, n));
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The core registers QEMU describes, by name, with their gdb numbers: the target description
/// and the files it includes, numbered as gdb numbers them (in order, `regnum` restarting it).
pub fn register_numbers(gdb: &mut Gdb) -> Result<Vec<(String, u32)>> {
    let top = gdb.xfer("features", "target.xml")?;
    let mut regs = Vec::new();
    let mut next = 0u32;
    let mut files = vec![top];
    let mut seen = 0;
    while seen < files.len() {
        let text = files[seen].clone();
        seen += 1;
        for tag in text.split('<').skip(1) {
            if let Some(href) = tag.strip_prefix("xi:include").and_then(|t| attr(t, "href")) {
                files.push(gdb.xfer("features", &href)?);
                continue;
            }
            if let Some(t) = tag.strip_prefix("reg ")
                && let Some(name) = attr(t, "name")
            {
                if let Some(n) = attr(t, "regnum").and_then(|n| n.parse().ok()) {
                    next = n;
                }
                regs.push((name, next));
                next += 1;
            }
        }
    }
    Ok(regs)
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!("{name}=\""))? + name.len() + 2;
    let end = tag[at..].find('"')?;
    Some(tag[at..at + end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_odd_input() {
        assert_eq!(hex(&[0x00, 0xab, 0x10]), "00ab10");
        assert_eq!(unhex(b"00ab10"), Some(vec![0, 0xab, 0x10]));
        assert_eq!(unhex(b"0ab"), None);
        assert_eq!(unhex(b"zz"), None);
    }

    #[test]
    fn escapes_and_run_lengths_are_undone() {
        // `}` escapes `#` (0x23 ^ 0x20 = 0x03); `0* ` is '0' repeated 3 more times (' ' = 32).
        assert_eq!(unescape(b"a}\x03b"), b"a#b");
        assert_eq!(unescape(b"0* "), b"0000");
        assert_eq!(checksum(b"OK"), 0x9a);
    }

    #[test]
    fn register_attributes_are_read() {
        let t = r#"reg name="xpsr" bitsize="32" regnum="25" type="int"/>"#;
        assert_eq!(attr(t, "name").as_deref(), Some("xpsr"));
        assert_eq!(attr(t, "regnum").as_deref(), Some("25"));
        assert_eq!(attr(t, "group"), None);
    }
}
