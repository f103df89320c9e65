//! The dump from a serial port, for boards without a usable probe connection: the firmware
//! writes the same bytes it would write through semihosting with its own UART writer
//! (`sampler_rt::set_writer`), and the host picks the dump out of whatever else the port carries
//! (boot messages, logs) by its file header.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};
use sampler_rt::wire;

/// Open `path` for reading at `baud` (raw mode, 8N1). A path that is not a terminal (a FIFO, a
/// file a logger writes) is read as it is; the returned flag says whether it was a terminal.
pub fn open(path: &Path, baud: u32) -> Result<(File, bool)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| {
            format!(
                "opening the serial port {} (is it the right device, and may you read it? On \
                 Linux, add yourself to the `dialout` group)",
                path.display()
            )
        })?;
    let fd = file.as_raw_fd();
    // SAFETY: plain termios calls on a descriptor we own; `t` is fully written by tcgetattr.
    let tty = unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            false
        } else {
            libc::cfmakeraw(&mut t);
            let speed = speed_constant(baud).with_context(|| {
                format!("{baud} baud is not a rate this system's serial driver takes")
            })?;
            libc::cfsetispeed(&mut t, speed);
            libc::cfsetospeed(&mut t, speed);
            t.c_cflag |= libc::CLOCAL | libc::CREAD;
            // Return after 100 ms without data, so the reader can look at the clock.
            t.c_cc[libc::VMIN] = 0;
            t.c_cc[libc::VTIME] = 1;
            if libc::tcsetattr(fd, libc::TCSANOW, &t) != 0 {
                anyhow::bail!(
                    "configuring {} for {baud} baud: {}",
                    path.display(),
                    std::io::Error::last_os_error()
                );
            }
            true
        }
    };
    Ok((file, tty))
}

fn speed_constant(baud: u32) -> Option<libc::speed_t> {
    Some(match baud {
        9600 => libc::B9600,
        19200 => libc::B19200,
        38400 => libc::B38400,
        57600 => libc::B57600,
        115_200 => libc::B115200,
        230_400 => libc::B230400,
        460_800 => libc::B460800,
        921_600 => libc::B921600,
        1_000_000 => libc::B1000000,
        2_000_000 => libc::B2000000,
        3_000_000 => libc::B3000000,
        4_000_000 => libc::B4000000,
        _ => return None,
    })
}

/// Read what is there now (nothing is not an error).
pub fn read_some(f: &mut File, buf: &mut Vec<u8>) -> Result<usize> {
    let mut chunk = [0u8; 4096];
    match f.read(&mut chunk) {
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(n)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e).context("reading the serial port"),
    }
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
        crate::dump::encode(&info, 0, pcs)
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
    fn a_board_reset_mid_dump_gives_the_fresh_dump() {
        let first = a_dump(&[1, 2, 3, 4]);
        let mut port = first[..first.len() / 2].to_vec();
        let at = port.len();
        port.extend_from_slice(&a_dump(&[5, 6]));
        assert_eq!(find_dump(&port), Some((at, true)));
    }

    #[test]
    fn a_fifo_is_read_without_terminal_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("uart");
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: creating a FIFO at a path in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (mut f, tty) = open(&path, 115_200).unwrap();
        assert!(!tty);
        let mut w = OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut w, b"SMPL").unwrap();
        let mut got = Vec::new();
        read_some(&mut f, &mut got).unwrap();
        assert_eq!(got, b"SMPL");
        assert_eq!(read_some(&mut f, &mut got).unwrap(), 0);
    }

    #[test]
    fn unknown_rates_are_refused() {
        assert!(speed_constant(115_200).is_some());
        assert!(speed_constant(123_456).is_none());
    }
}
