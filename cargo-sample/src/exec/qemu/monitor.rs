//! QEMU's human monitor: reading the sampler's memory and the core's registers while the
//! guest runs (live reads), when it is cut short (snapshots), and quitting cleanly.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::MemoryBlock;
use crate::capture::live::Memory;

/// Where QEMU's human monitor listens: a Unix socket in QEMU's working directory, or a
/// localhost TCP port on systems without Unix sockets.
#[cfg(unix)]
pub(crate) mod endpoint {
    use std::path::{Path, PathBuf};

    pub type Stream = std::os::unix::net::UnixStream;

    pub struct Addr(PathBuf);

    impl Addr {
        pub fn new(work: &Path) -> std::io::Result<Addr> {
            Ok(Addr(work.join("monitor.sock")))
        }
        pub fn qemu_arg(&self) -> String {
            format!("unix:{},server=on,wait=off", self.0.display())
        }
        pub fn connect(&self) -> std::io::Result<Stream> {
            Stream::connect(&self.0)
        }
    }
}

#[cfg(not(unix))]
pub(crate) mod endpoint {
    use std::path::Path;

    pub type Stream = std::net::TcpStream;

    pub struct Addr(u16);

    impl Addr {
        pub fn new(_work: &Path) -> std::io::Result<Addr> {
            // A free port: the system's choice for a listener, released for QEMU to take.
            let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
            Ok(Addr(l.local_addr()?.port()))
        }
        pub fn qemu_arg(&self) -> String {
            format!("tcp:127.0.0.1:{},server=on,wait=off", self.0)
        }
        pub fn connect(&self) -> std::io::Result<Stream> {
            Stream::connect(("127.0.0.1", self.0))
        }
    }
}

use endpoint::Stream as MonitorStream;

/// Connect to QEMU's monitor once it listens; `dir` is where its memory reads land.
pub(crate) fn connect_monitor(socket: &endpoint::Addr, dir: &Path) -> Option<Monitor> {
    let sock = socket.connect().ok()?;
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut m = Monitor {
        sock,
        dir: dir.to_path_buf(),
        reads: 0,
    };
    // The greeting and first prompt.
    hmp_wait(&mut m.sock);
    Some(m)
}

/// Guest memory through the human monitor: `pmemsave` into QEMU's working directory.
pub(crate) struct Monitor {
    sock: MonitorStream,
    dir: PathBuf,
    reads: u64,
}

impl Memory for Monitor {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<()> {
        self.reads += 1;
        let file = self.dir.join(format!("live-{}.bin", self.reads % 2));
        let _ = std::fs::remove_file(&file);
        hmp(
            &mut self.sock,
            &format!("pmemsave {addr:#x} {} \"{}\"", buf.len(), file.display()),
        )?;
        let bytes = wait_for_file(&file, buf.len())?;
        buf.copy_from_slice(&bytes[..buf.len()]);
        Ok(())
    }

    fn write(&mut self, _addr: u32, _bytes: &[u8]) -> Result<()> {
        bail!("QEMU's monitor has no command that writes guest memory")
    }
}

/// Read until the monitor's prompt (which may arrive split across reads).
pub(crate) fn hmp_wait(sock: &mut MonitorStream) {
    let mut buf = [0u8; 4096];
    let mut tail: Vec<u8> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.windows(6).any(|w| w == b"(qemu)") {
                    break;
                }
                // Keep only what could begin a prompt.
                let keep = tail.len().saturating_sub(5);
                tail.drain(..keep);
            }
        }
    }
}

/// Ask QEMU to quit through the monitor and give it a moment to run its exit handlers.
pub(crate) fn quit_cleanly(monitor: &endpoint::Addr, child: &mut std::process::Child) {
    if let Ok(mut s) = monitor.connect() {
        let _ = s.write_all(b"quit\n");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What a snapshot saved: the sampler's state and ring (if it had started), and the core.
pub(crate) type Snapshot = (
    Option<(Vec<u8>, Vec<u8>)>,
    Option<crate::dump::fault::CoreState>,
);

/// Stop the guest and save the sampler's state and ring, and the core's registers and fault
/// status, through the human monitor.
pub(crate) fn take_snapshot(
    monitor: &endpoint::Addr,
    dir: &Path,
    state: MemoryBlock,
) -> Result<Snapshot> {
    let mut sock = monitor.connect().context("connecting to QEMU's monitor")?;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    hmp_wait(&mut sock);
    hmp(&mut sock, "stop")?;
    let core = core_state(&mut sock, dir);
    let memory = sampler_memory(&mut sock, dir, state).ok();
    let _ = hmp(&mut sock, "quit");
    Ok((memory, core))
}

/// The core's registers (`info registers`) and its fault status registers (`memsave` reads
/// through the core's own view, where the System Control Block is).
pub(crate) fn core_state(
    sock: &mut MonitorStream,
    dir: &Path,
) -> Option<crate::dump::fault::CoreState> {
    sock.write_all(b"info registers\n").ok()?;
    let text = hmp_text(sock);
    let mut s = crate::dump::fault::CoreState::from_registers(&text)?;
    let file = dir.join("scb.bin");
    // CFSR, HFSR, DFSR, MMFAR, BFAR.
    if hmp(
        sock,
        &format!("memsave 0xe000ed28 20 \"{}\"", file.display()),
    )
    .is_ok()
        && let Ok(b) = wait_for_file(&file, 20)
    {
        let w = |o: usize| crate::dump::le::read_u32(&b, o).unwrap_or(0);
        s.cfsr = w(0);
        s.hfsr = w(4);
        s.mmfar = w(12);
        s.bfar = w(16);
    }
    Some(s)
}

/// Everything the monitor prints up to its next prompt.
pub(crate) fn hmp_text(sock: &mut MonitorStream) -> String {
    let mut buf = [0u8; 4096];
    let mut all = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                all.extend_from_slice(&buf[..n]);
                if all.windows(6).any(|w| w == b"(qemu)") {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// The sampler's state block and its ring (or bins).
pub(crate) fn sampler_memory(
    sock: &mut MonitorStream,
    dir: &Path,
    state: MemoryBlock,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let state_file = dir.join("state.bin");
    hmp(
        sock,
        &format!(
            "pmemsave {:#x} {} \"{}\"",
            state.addr,
            state.len,
            state_file.display()
        ),
    )?;
    let state_bytes = wait_for_file(&state_file, state.len as usize)?;
    let (ring_addr, ring_len) = crate::capture::snapshot::ring_region(&state_bytes)
        .context("the sampler had not started when the run was cut short")?;
    let ring_file = dir.join("ring.bin");
    hmp(
        sock,
        &format!(
            "pmemsave {ring_addr:#x} {ring_len} \"{}\"",
            ring_file.display()
        ),
    )?;
    let ring_bytes = wait_for_file(&ring_file, ring_len as usize)?;
    Ok((state_bytes, ring_bytes))
}

pub(crate) fn hmp(sock: &mut MonitorStream, line: &str) -> Result<()> {
    sock.write_all(line.as_bytes())?;
    sock.write_all(b"\n")?;
    // Drain the echo and prompt; the monitor answers pmemsave only once the file is written.
    hmp_wait(sock);
    Ok(())
}

pub(crate) fn wait_for_file(path: &Path, len: usize) -> Result<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(b) = std::fs::read(path)
            && b.len() >= len
        {
            return Ok(b);
        }
        if Instant::now() > deadline {
            bail!("QEMU did not save {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
