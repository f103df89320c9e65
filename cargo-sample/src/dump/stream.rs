//! A dump among other bytes: a serial port or a UART log carries the firmware's own output
//! (and defmt frames) before the dump, and a board reset mid-dump starts a fresh one.

use sampler_rt::wire;

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
}
