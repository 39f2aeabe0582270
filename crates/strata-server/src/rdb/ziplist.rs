//! Reading Redis' ziplist (`ziplist.c`'s format), which Redis before 7.0
//! wrote in RDB payloads for small hashes, sorted sets and list nodes;
//! Redis 7 still reads them, and so does Strata.
//!
//! A ziplist is its total size (4 bytes, little-endian), the offset of its
//! last entry (4), its entry count (2; 65535 means "count them"), the
//! entries, and an end byte `0xff`. Each entry is the previous entry's
//! length (1 byte, or `0xfe` and 4 bytes), then:
//!
//! | first byte | entry |
//! |---|---|
//! | `00xxxxxx` | string of up to 63 bytes |
//! | `01xxxxxx` + 1 byte | string of up to 16383 bytes (big-endian length) |
//! | `10000000` + 4 bytes | string with a 32-bit big-endian length |
//! | `11000000`, `11010000`, `11100000` | 16, 32, 64-bit signed little-endian integer |
//! | `11110000` | 24-bit signed integer |
//! | `11111110` | 8-bit signed integer |
//! | `1111xxxx` | the integer `xxxx - 1` (0 to 12) |

use super::encoding::Malformed;

const END: u8 = 0xff;
const HEADER_BYTES: usize = 10;
const BIG_PREVLEN: u8 = 0xfe;

/// The entries of `ziplist`, in order, integers as their decimal text.
/// Checks sizes, previous-entry lengths and the end byte.
pub fn entries(ziplist: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    let header = ziplist.get(..HEADER_BYTES).ok_or(Malformed)?;
    let total = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if total != ziplist.len() || ziplist.last() != Some(&END) {
        return Err(Malformed);
    }
    let declared = u16::from_le_bytes([header[8], header[9]]);
    let body = &ziplist[HEADER_BYTES..ziplist.len() - 1];
    let mut out = Vec::with_capacity((declared as usize).min(body.len()));
    let (mut at, mut previous) = (0, 0usize);
    while at < body.len() {
        let start = at;
        let prevlen = match body[at] {
            BIG_PREVLEN => {
                let raw = body.get(at + 1..at + 5).ok_or(Malformed)?;
                at += 5;
                u32::from_le_bytes(raw.try_into().expect("4 bytes")) as usize
            }
            END => return Err(Malformed),
            small => {
                at += 1;
                small as usize
            }
        };
        if prevlen != previous {
            return Err(Malformed);
        }
        let (entry, used) = entry(&body[at..])?;
        at += used;
        previous = at - start;
        out.push(entry);
    }
    if declared != u16::MAX && declared as usize != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

/// The entry at the start of `bytes` (after its previous-length) and the
/// bytes its encoding and data take.
fn entry(bytes: &[u8]) -> Result<(Vec<u8>, usize), Malformed> {
    let first = *bytes.first().ok_or(Malformed)?;
    let get = |from: usize, len: usize| bytes.get(from..from + len).ok_or(Malformed);
    let int = |n: i64, used: usize| Ok((n.to_string().into_bytes(), used));
    match first {
        0x00..=0x3f => {
            let len = first as usize;
            Ok((get(1, len)?.to_vec(), 1 + len))
        }
        0x40..=0x7f => {
            let len = (((first & 0x3f) as usize) << 8) | get(1, 1)?[0] as usize;
            Ok((get(2, len)?.to_vec(), 2 + len))
        }
        0x80 => {
            let len = u32::from_be_bytes(get(1, 4)?.try_into().expect("4 bytes")) as usize;
            Ok((get(5, len)?.to_vec(), 5 + len))
        }
        0xc0 => int(
            i16::from_le_bytes(get(1, 2)?.try_into().expect("2")) as i64,
            3,
        ),
        0xd0 => int(
            i32::from_le_bytes(get(1, 4)?.try_into().expect("4")) as i64,
            5,
        ),
        0xe0 => int(i64::from_le_bytes(get(1, 8)?.try_into().expect("8")), 9),
        0xf0 => {
            let b = get(1, 3)?;
            int((i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as i64, 4)
        }
        0xfe => int(get(1, 1)?[0] as i8 as i64, 2),
        0xf1..=0xfd => int((first & 0x0f) as i64 - 1, 1),
        _ => Err(Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist as Redis 6 lays one out: strings and immediate, 8 and
    /// 16-bit integers.
    fn ziplist_of(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut previous = 0usize;
        for entry in entries {
            let start = body.len();
            if previous < 254 {
                body.push(previous as u8);
            } else {
                body.push(BIG_PREVLEN);
                body.extend_from_slice(&(previous as u32).to_le_bytes());
            }
            match std::str::from_utf8(entry)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            {
                Some(n) if (0..=12).contains(&n) => body.push(0xf1 + n as u8),
                Some(n) if i8::try_from(n).is_ok() => body.extend_from_slice(&[0xfe, n as u8]),
                Some(n) => {
                    body.push(0xc0);
                    body.extend_from_slice(&(n as i16).to_le_bytes());
                }
                None if entry.len() < 64 => {
                    body.push(entry.len() as u8);
                    body.extend_from_slice(entry);
                }
                None => {
                    body.push(0x40 | (entry.len() >> 8) as u8);
                    body.push(entry.len() as u8);
                    body.extend_from_slice(entry);
                }
            }
            previous = body.len() - start;
        }
        let mut out = Vec::new();
        out.extend_from_slice(&((HEADER_BYTES + body.len() + 1) as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(END);
        out
    }

    #[test]
    fn entries_read_back_and_damage_is_refused() {
        let long = vec![b'z'; 300];
        let entries_in: Vec<&[u8]> = vec![b"field", b"7", b"-100", b"1000", &long, b"after"];
        let ziplist = ziplist_of(&entries_in);
        let read = entries(&ziplist).unwrap();
        assert_eq!(
            read,
            entries_in.iter().map(|e| e.to_vec()).collect::<Vec<_>>()
        );
        for cut in 0..ziplist.len() {
            assert!(entries(&ziplist[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_prevlen = ziplist.clone();
        bad_prevlen[HEADER_BYTES + 7] = 99;
        assert!(entries(&bad_prevlen).is_err());
    }
}
