//! Reading and writing Redis' listpack (`listpack.c`'s format, as Redis 7 writes it
//! in RDB payloads for small hashes, sorted sets, sets and list nodes).
//!
//! A listpack is its total size (4 bytes, little-endian), its element
//! count (2 bytes; 65535 means "count them"), the elements, and an end
//! byte `0xff`. Each element is an encoding byte (with data), then a
//! back-length of 1 to 5 bytes that lets readers walk backwards:
//!
//! | first byte | element |
//! |---|---|
//! | `0xxxxxxx` | 7-bit unsigned integer |
//! | `10xxxxxx` | string of up to 63 bytes |
//! | `110xxxxx` + 1 byte | 13-bit signed integer |
//! | `1110xxxx` + 1 byte | string of up to 4095 bytes (big-endian length) |
//! | `11110000` + 4 bytes | string with a 32-bit little-endian length |
//! | `11110001`..`11110100` | 16, 24, 32, 64-bit signed little-endian integer |
//!
//! Integers come back as their decimal text, as Redis returns them.

use super::encoding::Malformed;

const END: u8 = 0xff;
const HEADER_BYTES: usize = 6;

/// The elements of `listpack`, in order. Checks the header's size, the
/// end byte and every back-length, so a damaged listpack is refused
/// rather than half read.
pub fn elements(listpack: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    let header = listpack.get(..HEADER_BYTES).ok_or(Malformed)?;
    let total = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if total != listpack.len() || listpack.last() != Some(&END) {
        return Err(Malformed);
    }
    let declared = u16::from_le_bytes([header[4], header[5]]);
    let body = &listpack[HEADER_BYTES..listpack.len() - 1];
    let mut out = Vec::with_capacity((declared as usize).min(body.len()));
    let mut at = 0;
    while at < body.len() {
        let (element, used) = element(&body[at..])?;
        at += used;
        let backlen = backlen_size(used);
        let stored = body.get(at..at + backlen).ok_or(Malformed)?;
        if decode_backlen(stored) != Some(used) {
            return Err(Malformed);
        }
        at += backlen;
        out.push(element);
    }
    if declared != u16::MAX && declared as usize != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

/// The element at the start of `bytes` and the bytes its encoding and
/// data take (without the back-length).
fn element(bytes: &[u8]) -> Result<(Vec<u8>, usize), Malformed> {
    let first = *bytes.first().ok_or(Malformed)?;
    let get = |from: usize, len: usize| bytes.get(from..from + len).ok_or(Malformed);
    let int = |n: i64, used: usize| Ok((n.to_string().into_bytes(), used));
    match first {
        0x00..=0x7f => int(first as i64, 1),
        0x80..=0xbf => {
            let len = (first & 0x3f) as usize;
            Ok((get(1, len)?.to_vec(), 1 + len))
        }
        0xc0..=0xdf => {
            let raw = (((first & 0x1f) as u16) << 8) | get(1, 1)?[0] as u16;
            // Sign-extend from 13 bits.
            int(((raw << 3) as i16 >> 3) as i64, 2)
        }
        0xe0..=0xef => {
            let len = (((first & 0x0f) as usize) << 8) | get(1, 1)?[0] as usize;
            Ok((get(2, len)?.to_vec(), 2 + len))
        }
        0xf0 => {
            let len = u32::from_le_bytes(get(1, 4)?.try_into().expect("4 bytes")) as usize;
            Ok((get(5, len)?.to_vec(), 5 + len))
        }
        0xf1 => int(
            i16::from_le_bytes(get(1, 2)?.try_into().expect("2")) as i64,
            3,
        ),
        0xf2 => {
            let b = get(1, 3)?;
            // Sign-extend from 24 bits.
            int((i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as i64, 4)
        }
        0xf3 => int(
            i32::from_le_bytes(get(1, 4)?.try_into().expect("4")) as i64,
            5,
        ),
        0xf4 => int(i64::from_le_bytes(get(1, 8)?.try_into().expect("8")), 9),
        _ => Err(Malformed),
    }
}

/// Bytes of the back-length that follows an element of `len` bytes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..16383 => 2,
        16383..2097151 => 3,
        2097151..268435455 => 4,
        _ => 5,
    }
}

/// A stored back-length: 7 bits per byte, most significant first; every
/// byte after the first carries the top bit (readers walking backwards
/// stop at the byte without it).
fn decode_backlen(stored: &[u8]) -> Option<usize> {
    let mut value = 0usize;
    for (n, byte) in stored.iter().enumerate() {
        if (byte & 0x80 != 0) != (n > 0) {
            return None;
        }
        value = (value << 7) | (byte & 0x7f) as usize;
    }
    Some(value)
}

/// A listpack of `elements` as Redis lays it out: an element that is an
/// integer's canonical text is stored as that integer (so it reads back
/// as the same text), any other as a string.
pub fn encode(elements: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for element in elements {
        let start = body.len();
        match strata_engine::types::value::parse_canonical_i64(element) {
            Some(n) if (0..=127).contains(&n) => body.push(n as u8),
            Some(n) if (-4096..4096).contains(&n) => {
                let raw = (n as u16) & 0x1fff;
                body.push(0xc0 | (raw >> 8) as u8);
                body.push(raw as u8);
            }
            Some(n) if i16::try_from(n).is_ok() => {
                body.push(0xf1);
                body.extend_from_slice(&(n as i16).to_le_bytes());
            }
            Some(n) if (-(1 << 23)..(1 << 23)).contains(&n) => {
                body.push(0xf2);
                body.extend_from_slice(&(n as i32).to_le_bytes()[..3]);
            }
            Some(n) if i32::try_from(n).is_ok() => {
                body.push(0xf3);
                body.extend_from_slice(&(n as i32).to_le_bytes());
            }
            Some(n) => {
                body.push(0xf4);
                body.extend_from_slice(&n.to_le_bytes());
            }
            None if element.len() < 64 => {
                body.push(0x80 | element.len() as u8);
                body.extend_from_slice(element);
            }
            None if element.len() < 4096 => {
                body.push(0xe0 | (element.len() >> 8) as u8);
                body.push(element.len() as u8);
                body.extend_from_slice(element);
            }
            None => {
                body.push(0xf0);
                body.extend_from_slice(&(element.len() as u32).to_le_bytes());
                body.extend_from_slice(element);
            }
        }
        let len = body.len() - start;
        let size = backlen_size(len);
        for n in (0..size).rev() {
            let group = ((len >> (7 * n)) & 0x7f) as u8;
            body.push(if n + 1 < size { group | 0x80 } else { group });
        }
    }
    let mut out = Vec::new();
    out.extend_from_slice(&((HEADER_BYTES + body.len() + 1) as u32).to_le_bytes());
    // 65535 and more: "count them".
    out.extend_from_slice(&(elements.len().min(u16::MAX as usize) as u16).to_le_bytes());
    out.extend_from_slice(&body);
    out.push(END);
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The writer under its old name, for the tests that use it.
    pub(crate) fn listpack_of(elements: &[&[u8]]) -> Vec<u8> {
        super::encode(elements)
    }

    #[test]
    fn every_encoding_reads_back() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let elements: Vec<&[u8]> = vec![
            b"a",
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"30000",
            b"-32768",
            b"8000000",
            b"-8388608",
            b"2000000000",
            b"-9223372036854775808",
            b"9223372036854775807",
            &mid,
            &long,
            b"",
        ];
        let listpack = listpack_of(&elements);
        let read = elements_of(&listpack);
        assert_eq!(
            read,
            elements.iter().map(|e| e.to_vec()).collect::<Vec<_>>()
        );
    }

    fn elements_of(listpack: &[u8]) -> Vec<Vec<u8>> {
        elements(listpack).expect("reads")
    }

    #[test]
    fn damage_is_refused() {
        let listpack = listpack_of(&[b"hello", b"42"]);
        for cut in 0..listpack.len() {
            assert!(elements(&listpack[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_count = listpack.clone();
        bad_count[4] = 3;
        assert!(elements(&bad_count).is_err());
        let mut bad_backlen = listpack.clone();
        bad_backlen[HEADER_BYTES + 6] = 9;
        assert!(elements(&bad_backlen).is_err());
    }
}
