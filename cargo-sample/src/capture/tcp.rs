//! Recording a trace stream from a TCP port, as debug servers offer SWO: J-Link GDB Server's
//! SWO telnet port (2332 by default), OpenOCD's `tpiu`/`swo` output to a TCP port,
//! orbuculum's raw port (3443). Every chunk is written to the
//! capture file as it arrives, so an interrupted recording keeps everything received.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::interrupt::{INTERRUPTED, install_handler};

/// Why a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The server closed the connection.
    Closed,
    /// `--duration` passed.
    Duration,
    /// Ctrl-C.
    Interrupted,
}

/// Connect to `addr` and write what it sends to `out` until the server closes, `duration`
/// passes or Ctrl-C. `chunk` sees every chunk (for progress). Returns the bytes and the end.
pub fn record(
    addr: &str,
    out: &Path,
    duration: Option<Duration>,
    mut chunk: impl FnMut(&[u8]),
) -> Result<(u64, End)> {
    let target = addr
        .to_socket_addrs()
        .with_context(|| format!("`{addr}` is not HOST:PORT"))?
        .next()
        .with_context(|| format!("`{addr}` names no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&target, Duration::from_secs(5)).with_context(|| {
            format!(
                "connecting to {addr}: is the debug server running with its SWO (or trace) output \
                 on that port?"
            )
        })?;
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .context("setting a read timeout")?;
    let mut file = std::fs::File::create(out)
        .with_context(|| format!("creating the capture file {}", out.display()))?;
    install_handler();
    let started = Instant::now();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let end = loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            break End::Interrupted;
        }
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break End::Duration;
        }
        match stream.read(&mut buf) {
            Ok(0) => break End::Closed,
            Ok(n) => {
                file.write_all(&buf[..n])
                    .and_then(|()| file.flush())
                    .with_context(|| format!("writing {}", out.display()))?;
                total += n as u64;
                chunk(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) if total > 0 => {
                // A connection reset after data: what arrived is the capture.
                crate::term::warn(format!(
                    "the connection to {addr} failed after {total} bytes ({e}); reporting what \
                     arrived"
                ));
                break End::Closed;
            }
            Err(e) => bail!("reading from {addr}: {e}"),
        }
    };
    file.sync_all().ok();
    Ok((total, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn everything_sent_is_in_the_file_when_the_server_closes() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap().to_string();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let sent = data.clone();
        let t = std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            for c in sent.chunks(7_001) {
                s.write_all(c).unwrap();
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("swo.bin");
        let mut seen = 0;
        let (n, end) = record(&addr, &out, None, |c| seen += c.len()).unwrap();
        t.join().unwrap();
        assert_eq!(
            (n as usize, seen, end),
            (data.len(), data.len(), End::Closed)
        );
        assert_eq!(std::fs::read(&out).unwrap(), data);
    }

    #[test]
    fn a_server_that_never_closes_is_left_after_the_duration_with_what_it_sent() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            s.write_all(b"abc").unwrap();
            // Hold the connection open until the client goes.
            let mut b = [0u8; 1];
            let _ = s.read(&mut b);
        });
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("swo.bin");
        let (n, end) = record(&addr, &out, Some(Duration::from_millis(300)), |_| {}).unwrap();
        assert_eq!((n, end), (3, End::Duration));
        assert_eq!(std::fs::read(&out).unwrap(), b"abc");
        drop(t);
    }

    #[test]
    fn nobody_listening_is_an_error_that_says_what_to_start() {
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap().to_string();
        drop(free);
        let dir = tempfile::tempdir().unwrap();
        let e = record(&addr, &dir.path().join("x"), None, |_| {}).unwrap_err();
        assert!(format!("{e:#}").contains("debug server"), "{e:#}");
    }
}
