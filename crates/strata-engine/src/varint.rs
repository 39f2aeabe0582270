//! LEB128 varints (7 bits a byte, low first): the lengths and counts of
//! the packed images that hashes and lists are stored and logged as.

/// Writes `n` into `out`; returns the bytes used.
pub(crate) fn put_varint(out: &mut [u8; 10], mut n: usize) -> usize {
    let mut used = 0;
    while n >= 0x80 {
        out[used] = n as u8 | 0x80;
        n >>= 7;
        used += 1;
    }
    out[used] = n as u8;
    used + 1
}

/// Bytes `n` takes as a varint.
pub(crate) fn varint_len(n: usize) -> usize {
    (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize
}

/// Appends `n` to `out`.
pub(crate) fn write_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The varint at the start of `bytes` and the bytes it took; `None` when
/// it is cut short or does not fit a `usize`.
pub(crate) fn read_varint(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut n: usize = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        n |= ((b & 0x7f) as usize).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
}

/// A varint length and that many bytes, at `*at`; advances `*at`.
pub(crate) fn read_bytes<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let (len, used) = read_varint(bytes.get(*at..)?)?;
    let start = *at + used;
    let end = start.checked_add(len)?;
    let found = bytes.get(start..end)?;
    *at = end;
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lengths() {
        for n in [
            0usize,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as usize,
            usize::MAX,
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, n);
            assert_eq!(out.len(), varint_len(n), "{n}");
            let mut fixed = [0u8; 10];
            let used = put_varint(&mut fixed, n);
            assert_eq!(&fixed[..used], &out[..]);
            assert_eq!(read_varint(&out), Some((n, out.len())));
            assert_eq!(read_varint(&out[..out.len() - 1]), None, "cut short: {n}");
        }
        let mut at = 0;
        assert_eq!(
            read_bytes(&[3, b'a', b'b', b'c', 9], &mut at),
            Some(&b"abc"[..])
        );
        assert_eq!(at, 4);
        assert_eq!(read_bytes(&[3, b'a'], &mut 0), None);
    }
}
