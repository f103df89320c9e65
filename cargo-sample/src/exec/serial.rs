//! The dump from a serial port, for boards without a usable probe connection: the firmware
//! writes the same bytes it would write through semihosting with its own UART writer
//! (`sampler_rt::set_writer`), and the host picks the dump out of whatever else the port carries
//! (boot messages, logs) by its file header.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use sampler_rt::wire;

/// What the dump is read from: a serial port (any baud rate the driver takes, on every
/// platform `serialport` supports), or a plain file or pipe a logger writes.
pub enum Port {
    Serial(Box<dyn serialport::SerialPort>),
    File(File),
}

/// Open `path` for reading at `baud` (raw, 8N1). A path that is not a serial port (a FIFO, a
/// file a logger writes) is read as it is; the returned flag says whether it was a port.
pub fn open(path: &Path, baud: u32) -> Result<(Port, bool)> {
    let name = path.to_string_lossy();
    match serialport::new(name.as_ref(), baud)
        .timeout(Duration::from_millis(100))
        .open()
    {
        Ok(p) => Ok((Port::Serial(p), true)),
        Err(e) if path.exists() && !is_port(path) => {
            let _ = e;
            Ok((Port::File(open_plain(path)?), false))
        }
        Err(e) => Err(e).with_context(|| {
            format!(
                "opening the serial port {} at {baud} baud (is it the right device, and may you \
                 read it? On Linux, add yourself to the `dialout` group)",
                path.display()
            )
        }),
    }
}

/// Whether `path` is a terminal device (a serial port or a pseudo terminal).
#[cfg(unix)]
fn is_port(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

#[cfg(not(unix))]
fn is_port(path: &Path) -> bool {
    path.to_string_lossy().to_ascii_uppercase().contains("COM")
}

/// A FIFO opens without waiting for its writer.
#[cfg(unix)]
fn open_plain(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

#[cfg(not(unix))]
fn open_plain(path: &Path) -> Result<File> {
    File::open(path).with_context(|| format!("opening {}", path.display()))
}

/// Read what is there now (nothing is not an error).
pub fn read_some(port: &mut Port, buf: &mut Vec<u8>) -> Result<usize> {
    let mut chunk = [0u8; 4096];
    let r = match port {
        Port::Serial(p) => p.read(&mut chunk),
        Port::File(f) => f.read(&mut chunk),
    };
    match r {
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(n)
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(0)
        }
        Err(e) => Err(e).context("reading the serial port"),
    }
}

/// How much of what the port carried is the firmware's own output for sure: everything before
/// the first dump header, or, while none has come, all but the bytes that could begin one.
pub fn before_dump(bytes: &[u8]) -> usize {
    let header = wire::file_header();
    bytes
        .windows(header.len())
        .position(|w| w == header.as_slice())
        .unwrap_or_else(|| bytes.len().saturating_sub(header.len() - 1))
}

/// Where the dump starts in what the port carried (after the last file header, so a board
/// that was reset mid-dump gives its fresh dump), and whether it is complete.
pub fn find_dump(bytes: &[u8]) -> Option<(usize, bool)> {
    let header = wire::file_header();
    let start = bytes
        .windows(header.len())
        .rposition(|w| w == header.as_slice())?;
    let (d, err) = crate::dump::decode_partial(&bytes[start..]);
    Some((start, err.is_none() && d.complete))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sampler_rt::wire::Info;

    fn a_dump(pcs: &[u32]) -> Vec<u8> {
        let info = Info {
            mode: wire::MODE_RING,
            taken: pcs.len() as u32,
            capacity: 64,
            ..Info::default()
        };
        crate::dump::encode(&crate::dump::Dump::of_samples(
            info,
            0,
            pcs.to_vec(),
            Vec::new(),
        ))
    }

    #[test]
    fn the_dump_is_found_among_log_lines_and_known_complete_only_at_its_end() {
        let dump = a_dump(&[0x100, 0x104, 0x108]);
        let mut port = b"boot ok\r\nhello from the app\r\n".to_vec();
        let at = port.len();
        for (i, &b) in dump.iter().enumerate() {
            port.push(b);
            let found = find_dump(&port);
            if i + 1 < wire::FILE_HEADER_LEN {
                assert_eq!(found, None);
            } else {
                assert_eq!(
                    found,
                    Some((at, i + 1 == dump.len())),
                    "after {} bytes",
                    i + 1
                );
            }
        }
        // What follows the dump (more logging) does not spoil it.
        port.extend_from_slice(b"bye\r\n");
        assert_eq!(find_dump(&port), Some((at, true)));
    }

    #[test]
    fn the_firmwares_output_ends_where_a_dump_may_begin() {
        let dump = a_dump(&[0x100, 0x102]);
        let mut port = b"thirty bytes of the firmware's".to_vec();
        assert_eq!(port.len(), 30);
        // No header yet: all but the last 15 bytes (which could begin one) are the firmware's.
        assert_eq!(before_dump(&port), 15);
        port.extend_from_slice(&dump[..5]);
        assert_eq!(before_dump(&port), 20);
        port.extend_from_slice(&dump[5..]);
        assert_eq!(before_dump(&port), 30);
        port.extend_from_slice(b"after");
        port.extend_from_slice(&dump);
        assert_eq!(before_dump(&port), 30);
    }

    #[test]
    fn a_board_reset_mid_dump_gives_the_fresh_dump() {
        let first = a_dump(&[1, 2, 3, 4]);
        let mut port = first[..first.len() / 2].to_vec();
        let at = port.len();
        port.extend_from_slice(&a_dump(&[5, 6]));
        assert_eq!(find_dump(&port), Some((at, true)));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_read_without_terminal_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("uart");
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: creating a FIFO at a path in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (mut f, tty) = open(&path, 115_200).unwrap();
        assert!(!tty);
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut w, b"SMPL").unwrap();
        let mut got = Vec::new();
        read_some(&mut f, &mut got).unwrap();
        assert_eq!(got, b"SMPL");
        assert_eq!(read_some(&mut f, &mut got).unwrap(), 0);
    }

    /// A terminal device (here a pseudo terminal) is opened as a serial port at any rate the
    /// driver takes, including one that is not a standard constant.
    #[cfg(unix)]
    #[test]
    fn a_terminal_is_opened_as_a_serial_port_at_any_rate() {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors into the integers given.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0);
        // SAFETY: `slave` is a terminal descriptor this test owns.
        let name = unsafe { std::ffi::CStr::from_ptr(libc::ttyname(slave)) }
            .to_str()
            .unwrap()
            .to_owned();
        for baud in [115_200, 250_000] {
            let (mut port, tty) = open(Path::new(&name), baud).unwrap();
            assert!(tty);
            // SAFETY: writing to the pseudo terminal's other end, a descriptor we own.
            let n = unsafe { libc::write(master, b"SMPL".as_ptr().cast(), 4) };
            assert_eq!(n, 4);
            let mut got = Vec::new();
            for _ in 0..20 {
                read_some(&mut port, &mut got).unwrap();
                if got.len() >= 4 {
                    break;
                }
            }
            assert_eq!(got, b"SMPL");
        }
        // SAFETY: closing descriptors this test opened.
        unsafe {
            libc::close(master);
            libc::close(slave);
        }
    }
}
