//! Little-endian reads from bytes the target wrote: `None` past the end, never a panic.

/// The little-endian `u16` at `at`.
pub fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u32` at `at`.
pub fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u64` at `at`.
pub fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A name in a record's payload: its length (a word, at most `max`), its bytes, zeros up to a
/// multiple of 4. The name and the offset after it.
pub fn padded_name(b: &[u8], at: usize, max: usize) -> Option<(String, usize)> {
    let len = read_u32(b, at)? as usize;
    if len > max {
        return None;
    }
    let name = String::from_utf8_lossy(b.get(at + 4..at + 4 + len)?).into_owned();
    Some((name, at + 4 + len.div_ceil(4) * 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 3, 0, 0, 0, b'a', b'b', b'c', 0];
        assert_eq!(read_u16(&b, 0), Some(0x0201));
        assert_eq!(read_u32(&b, 4), Some(0x0807_0605));
        assert_eq!(read_u64(&b, 0), Some(0x0807_0605_0403_0201));
        assert_eq!(read_u32(&b, 14), None);
        assert_eq!(read_u64(&b, usize::MAX - 2), None);
        assert_eq!(padded_name(&b, 8, 16), Some(("abc".to_owned(), 16)));
        assert_eq!(padded_name(&b, 8, 2), None);
    }
}
