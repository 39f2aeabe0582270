//! The encoding pieces every payload uses (see the `rdb` module's
//! documentation): lengths, strings, LZF, the version and CRC64 footer,
//! and a reader over them. A leaf: the value formats (`object`, the
//! packed encodings) build on it.

/// The RDB version Redis 7.0 writes, and Strata's payloads carry unless
/// they need a later layout.
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version whose payloads Strata reads (Redis 7.4's);
/// later ones are refused, as Redis refuses versions newer than its own.
pub const RDB_VERSION_READ_MAX: u16 = 12;
/// Opcode before each library in a functions payload (Redis 7.0 GA).
pub const OPCODE_FUNCTION2: u8 = 245;
/// The 7.0 release candidates' library opcode (name, engine, description
/// and code as separate strings).
pub const OPCODE_FUNCTION: u8 = 246;

const ENCODING_INT8: u8 = 0;
const ENCODING_INT16: u8 = 1;
const ENCODING_INT32: u8 = 2;
const ENCODING_LZF: u8 = 3;

/// Redis' CRC64: polynomial 0xad93d23594c935a9, reflected, initial value
/// and final xor 0 (check value of "123456789": 0xe9c6d914c4b8d9ca).
///
/// Eight bytes a step ("slicing by 8": table `k` gives the effect of a
/// byte followed by `k` zero bytes), so that writing and checking a
/// full synchronisation's gigabytes costs a fraction of a byte-at-a-time
/// loop; the tail goes a byte at a time.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let word = crc ^ u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let byte = |n: u32| ((word >> (8 * n)) & 0xff) as usize;
        crc = CRC64_TABLES[7][byte(0)]
            ^ CRC64_TABLES[6][byte(1)]
            ^ CRC64_TABLES[5][byte(2)]
            ^ CRC64_TABLES[4][byte(3)]
            ^ CRC64_TABLES[3][byte(4)]
            ^ CRC64_TABLES[2][byte(5)]
            ^ CRC64_TABLES[1][byte(6)]
            ^ CRC64_TABLES[0][byte(7)];
    }
    crc64_bytewise(crc, chunks.remainder())
}

fn crc64_bytewise(mut crc: u64, data: &[u8]) -> u64 {
    for &byte in data {
        crc = CRC64_TABLES[0][((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// The reflected polynomial.
const CRC64_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// `CRC64_TABLES[0]` is the byte-at-a-time table; `CRC64_TABLES[k][n]`
/// is byte `n` followed by `k` zero bytes.
static CRC64_TABLES: [[u64; 256]; 8] = {
    let mut tables = [[0u64; 256]; 8];
    let mut n = 0;
    while n < 256 {
        let mut crc = n as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ CRC64_POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][n] = crc;
        n += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut n = 0;
        while n < 256 {
            let previous = tables[k - 1][n];
            tables[k][n] = (previous >> 8) ^ tables[0][(previous & 0xff) as usize];
            n += 1;
        }
        k += 1;
    }
    tables
};

/// Appends an RDB length.
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Appends an RDB string, uncompressed.
pub fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    write_len(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Bytes a payload ends with: the RDB version and the CRC64.
pub const FOOTER_BYTES: usize = 10;

/// Ends a payload: the RDB version and the CRC64 of everything before.
pub fn seal(out: &mut Vec<u8>) {
    seal_version(out, RDB_VERSION);
}

/// Ends a payload that needs RDB version `version`'s layouts.
pub fn seal_version(out: &mut Vec<u8>, version: u16) {
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The body of a payload (without its version and CRC) when both check
/// out, as Redis' `verifyDumpPayload`.
pub fn verify(payload: &[u8]) -> Option<&[u8]> {
    if payload.len() < 10 {
        return None;
    }
    let (rest, crc) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([rest[rest.len() - 2], rest[rest.len() - 1]]);
    if version > RDB_VERSION_READ_MAX {
        return None;
    }
    let crc = u64::from_le_bytes(crc.try_into().expect("8 bytes"));
    (crc64(0, rest) == crc).then(|| &rest[..rest.len() - 2])
}

/// Reads RDB items from a byte slice.
pub struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

/// A payload that does not parse.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed;

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, at: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.at)
    }

    /// A 64-bit little-endian number (a millisecond time).
    pub fn u64_le(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub fn take(&mut self, len: usize) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(len).ok_or(Malformed)?;
        let bytes = self.data.get(self.at..end).ok_or(Malformed)?;
        self.at = end;
        Ok(bytes)
    }

    pub fn byte(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    /// A length, or (`true`, encoding) for a specially encoded string.
    fn len_or_encoding(&mut self) -> Result<(bool, u64), Malformed> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => (false, (first & 0x3f) as u64),
            1 => (false, (((first & 0x3f) as u64) << 8) | self.byte()? as u64),
            3 => (true, (first & 0x3f) as u64),
            _ => match first {
                0x80 => (
                    false,
                    u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")) as u64,
                ),
                0x81 => (
                    false,
                    u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")),
                ),
                _ => return Err(Malformed),
            },
        })
    }

    pub fn len(&mut self) -> Result<u64, Malformed> {
        match self.len_or_encoding()? {
            (false, len) => Ok(len),
            (true, _) => Err(Malformed),
        }
    }

    /// A string in any of its encodings.
    pub fn string(&mut self) -> Result<Vec<u8>, Malformed> {
        let (encoded, len) = self.len_or_encoding()?;
        if !encoded {
            let len = usize::try_from(len).map_err(|_| Malformed)?;
            return Ok(self.take(len)?.to_vec());
        }
        let int = |bytes: &[u8]| -> i64 {
            match bytes.len() {
                1 => bytes[0] as i8 as i64,
                2 => i16::from_le_bytes([bytes[0], bytes[1]]) as i64,
                _ => i32::from_le_bytes(bytes.try_into().expect("4 bytes")) as i64,
            }
        };
        match len as u8 {
            ENCODING_INT8 => Ok(int(self.take(1)?).to_string().into_bytes()),
            ENCODING_INT16 => Ok(int(self.take(2)?).to_string().into_bytes()),
            ENCODING_INT32 => Ok(int(self.take(4)?).to_string().into_bytes()),
            ENCODING_LZF => {
                let compressed = usize::try_from(self.len()?).map_err(|_| Malformed)?;
                let original = usize::try_from(self.len()?).map_err(|_| Malformed)?;
                let data = self.take(compressed)?;
                lzf_decompress(data, original)
            }
            _ => Err(Malformed),
        }
    }
}

/// Largest string an LZF block may claim to expand to (Redis' bulk limit).
const LZF_OUTPUT_MAX: usize = 512 << 20;

/// Expands LZF data (liblzf's format: a control byte below 32 starts a
/// run of that many plus one literal bytes; above, its top 3 bits (7:
/// plus the next byte) are a back reference's length minus 2 and its low
/// 5 bits with the next byte the distance minus 1) into exactly `len`
/// bytes.
pub fn lzf_decompress(input: &[u8], len: usize) -> Result<Vec<u8>, Malformed> {
    if len > LZF_OUTPUT_MAX {
        return Err(Malformed);
    }
    let mut out = Vec::with_capacity(len);
    let mut at = 0;
    while at < input.len() {
        let control = input[at] as usize;
        at += 1;
        if control < 32 {
            let run = control + 1;
            let literal = input.get(at..at + run).ok_or(Malformed)?;
            out.extend_from_slice(literal);
            at += run;
        } else {
            let mut run = control >> 5;
            if run == 7 {
                run += *input.get(at).ok_or(Malformed)? as usize;
                at += 1;
            }
            let low = *input.get(at).ok_or(Malformed)? as usize;
            at += 1;
            let distance = ((control & 0x1f) << 8) + low + 1;
            let start = out.len().checked_sub(distance).ok_or(Malformed)?;
            // The reference may overlap what it writes: copy byte by byte.
            for n in 0..run + 2 {
                let byte = out[start + n];
                out.push(byte);
            }
        }
        if out.len() > len {
            return Err(Malformed);
        }
    }
    if out.len() != len {
        return Err(Malformed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64_bytewise(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        // Eight at a time gives what a byte at a time does, from any
        // starting value and for every length and alignment.
        let data: Vec<u8> = (0..1000u32)
            .map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..9 {
            for len in [0, 1, 7, 8, 9, 15, 16, 17, 100, 991 - start] {
                let slice = &data[start..start + len];
                let seed = 0x1234_5678_9abc_def0 ^ len as u64;
                assert_eq!(
                    crc64(seed, slice),
                    crc64_bytewise(seed, slice),
                    "{start} {len}"
                );
            }
        }
    }

    #[test]
    fn lengths_and_strings_round_trip() {
        for len in [0u64, 1, 63, 64, 16383, 16384, 1 << 20, u32::MAX as u64 + 1] {
            let mut out = Vec::new();
            write_len(&mut out, len);
            assert_eq!(Reader::new(&out).len(), Ok(len), "{len}");
        }
        let mut out = Vec::new();
        write_string(&mut out, b"hello");
        // Integer encodings: 8-bit -3, 16-bit 1000, 32-bit 100000.
        out.extend_from_slice(&[0xc0, 0xfd, 0xc1, 0xe8, 0x03, 0xc2, 0xa0, 0x86, 0x01, 0x00]);
        let mut reader = Reader::new(&out);
        assert_eq!(reader.string().unwrap(), b"hello");
        assert_eq!(reader.string().unwrap(), b"-3");
        assert_eq!(reader.string().unwrap(), b"1000");
        assert_eq!(reader.string().unwrap(), b"100000");
        assert!(reader.is_empty());
    }

    #[test]
    fn lzf_expands_literals_and_overlapping_references() {
        // "abcabcabcabc": 3 literals, then a reference 3 back of length 9.
        let data = [2, b'a', b'b', b'c', (7 << 5) as u8, 0, 2];
        assert_eq!(lzf_decompress(&data, 12).unwrap(), b"abcabcabcabc");
        assert_eq!(lzf_decompress(&data, 11), Err(Malformed));
        assert_eq!(
            lzf_decompress(&[0x20, 5], 2),
            Err(Malformed),
            "before the start"
        );
        let mut payload = vec![0xc3];
        write_len(&mut payload, data.len() as u64);
        write_len(&mut payload, 12);
        payload.extend_from_slice(&data);
        assert_eq!(Reader::new(&payload).string().unwrap(), b"abcabcabcabc");
    }

    #[test]
    fn sealed_payloads_verify_and_damage_is_caught() {
        let mut payload = vec![OPCODE_FUNCTION2];
        write_string(&mut payload, b"#!lua name=x\n");
        let body = payload.clone();
        seal(&mut payload);
        assert_eq!(verify(&payload), Some(&body[..]));
        let mut damaged = payload.clone();
        damaged[3] ^= 1;
        assert_eq!(verify(&damaged), None);
        assert_eq!(verify(b"bad_payload"), None);
    }
}
