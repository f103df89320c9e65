//! The dump from a serial port, for boards without a usable probe connection: the firmware
//! writes the same bytes it would write through semihosting with its own UART writer
//! (`sampler_rt::set_writer`), and the host picks the dump out of whatever else the port carries
//! (boot messages, logs) by its file header.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

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

#[cfg(test)]
mod tests {
    use super::*;

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
