//! HyperLogLog values in Redis' own byte format, so that `GET` of a key
//! made by PFADD returns bytes Redis accepts (and the reverse), and the
//! estimates are Redis' to the last digit: the same hash (MurmurHash64A,
//! seed `0xadc83b19`), 16 384 registers of 6 bits (P = 14, Q = 50) and the
//! same estimator (Ertl's, as Redis 5+ uses), so the standard error is
//! Redis' 0.81 %.
//!
//! Layout (from Redis' `hyperloglog.c` documentation): a 16-byte header,
//! `HYLL`, an encoding byte (0 dense, 1 sparse), three unused bytes and an
//! 8-byte little-endian cached cardinality whose top bit marks it stale;
//! then either 12 288 bytes of dense registers (register *i* at bit 6·*i*,
//! least significant bits first) or the sparse opcodes: `00xxxxxx` a run
//! of up to 64 zero registers, `01xxxxxx yyyyyyyy` a run of up to 16 384
//! zeros, `1vvvvvxx` a run of up to 4 registers of value 1–32.
//!
//! A change decodes the registers ([`Hll`]), changes them and encodes
//! them again: sparse while every register is ≤ 32 and the sparse form
//! fits `hll-sparse-max-bytes`, dense otherwise, and dense for good once
//! dense (Redis converts at the same points). The cached cardinality is
//! kept as Redis keeps it: a change sets its stale bit, PFCOUNT writes a
//! fresh one.

pub const REGISTERS: usize = 1 << 14;
const P: u32 = 14;
const Q: u32 = 64 - P;
const HEADER: usize = 16;
pub(crate) const DENSE_BYTES: usize = HEADER + REGISTERS * 6 / 8;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const MAX_SPARSE_VALUE: u8 = 32;
/// Redis' default `hll-sparse-max-bytes`.
#[cfg(test)]
pub(crate) const SPARSE_MAX_BYTES_DEFAULT: usize = 3000;

/// Why bytes are not a HyperLogLog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadHll {
    /// Not an HLL at all (Redis: WRONGTYPE … not a valid HyperLogLog).
    NotHll,
    /// The header says HLL but the body is damaged (Redis: INVALIDOBJ).
    Corrupt,
}

/// Redis' MurmurHash64A, as its HyperLogLog hashes elements.
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= (byte as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the run length it counts.
pub fn position(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// An HLL's registers, one byte each while being worked on.
pub struct Registers(pub Box<[u8; REGISTERS]>);

impl Registers {
    pub fn new() -> Registers {
        Registers(Box::new([0; REGISTERS]))
    }

    /// Counts `element`; true when a register grew.
    pub fn add(&mut self, element: &[u8]) -> bool {
        let (index, count) = position(element);
        if self.0[index] < count {
            self.0[index] = count;
            true
        } else {
            false
        }
    }

    /// Takes the larger of each register pair (PFMERGE, PFCOUNT of
    /// several keys).
    pub fn merge(&mut self, other: &Registers) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0.iter()) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Redis' estimate of the number of distinct elements counted.
    pub fn count(&self) -> u64 {
        let m = REGISTERS as f64;
        // Dense registers hold 6 bits: a value written by SET (or by
        // another tool) may exceed Q + 1, the longest run a hash can give.
        // Such registers take no part in the estimate, as in Redis, whose
        // histogram has a slot for each of the 64 values.
        let mut histogram = [0u32; 64];
        for &r in self.0.iter() {
            histogram[(r & 63) as usize] += 1;
        }
        let mut z = m * tau((m - histogram[Q as usize + 1] as f64) / m);
        for j in (1..=Q as usize).rev() {
            z += histogram[j] as f64;
            z *= 0.5;
        }
        z += m * sigma(histogram[0] as f64 / m);
        const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
        let estimate = (ALPHA_INF * m * m / z).round();
        // Registers no hash can give (SET of forged bytes) can leave z at
        // 0: Redis' llroundl then answers LLONG_MIN, which its cast to an
        // unsigned count makes 2^63. Answer the same, not Rust's saturation.
        if !estimate.is_finite() || estimate >= 2f64.powi(63) {
            return 1 << 63;
        }
        estimate as u64
    }

    /// Redis' bytes for these registers with a stale cache: sparse when
    /// every register is at most 32 and that form takes at most
    /// `sparse_max` bytes (header included), else dense.
    pub fn encode(&self, sparse_max: usize) -> Vec<u8> {
        self.encode_sparse(sparse_max, STALE)
            .unwrap_or_else(|| self.encode_dense(STALE))
    }

    fn encode_dense(&self, cache: [u8; 8]) -> Vec<u8> {
        let mut out = header(DENSE, cache);
        out.resize(DENSE_BYTES, 0);
        for (i, &value) in self.0.iter().enumerate() {
            let bit = i * 6;
            let (byte, shift) = (HEADER + bit / 8, bit % 8);
            out[byte] |= value << shift;
            if shift > 2 {
                out[byte + 1] |= value >> (8 - shift);
            }
        }
        out
    }

    fn encode_sparse(&self, sparse_max: usize, cache: [u8; 8]) -> Option<Vec<u8>> {
        let mut out = header(SPARSE, cache);
        let mut i = 0;
        while i < REGISTERS {
            let value = self.0[i];
            let run = self.0[i..].iter().take_while(|&&v| v == value).count();
            if value == 0 {
                let mut left = run;
                while left > 0 {
                    let n = left.min(REGISTERS);
                    if n > 64 {
                        out.push(0x40 | ((n - 1) >> 8) as u8);
                        out.push(((n - 1) & 0xff) as u8);
                    } else {
                        out.push((n - 1) as u8);
                    }
                    left -= n;
                }
            } else {
                if value > MAX_SPARSE_VALUE {
                    return None;
                }
                let mut left = run;
                while left > 0 {
                    let n = left.min(4);
                    out.push(0x80 | ((value - 1) << 2) | (n - 1) as u8);
                    left -= n;
                }
            }
            // As Redis: the whole string, header included, against
            // hll-sparse-max-bytes (STRLEN of a sparse HLL never passes it).
            if out.len() > sparse_max {
                return None;
            }
            i += run;
        }
        Some(out)
    }
}

impl Default for Registers {
    fn default() -> Self {
        Registers::new()
    }
}

fn header(encoding: u8, cache: [u8; 8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 64);
    out.extend_from_slice(b"HYLL");
    out.push(encoding);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&cache);
    out
}

/// A new HLL's cache: stale (the top bit of its last byte).
const STALE: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 0x80];

/// An HLL as stored: its registers, its encoding and its cached
/// cardinality (Redis keeps a dense HLL dense, and invalidates the cache
/// by setting one bit, leaving the rest).
pub struct Hll {
    pub registers: Registers,
    pub dense: bool,
    pub cache: [u8; 8],
}

impl Hll {
    pub fn new() -> Hll {
        Hll {
            registers: Registers::new(),
            dense: false,
            cache: STALE,
        }
    }

    /// The cached cardinality, if valid.
    pub fn cached(&self) -> Option<u64> {
        (self.cache[7] & 0x80 == 0).then(|| u64::from_le_bytes(self.cache))
    }

    /// Marks the cache stale (after a register changed).
    pub fn invalidate(&mut self) {
        self.cache[7] |= 0x80;
    }

    pub fn set_cache(&mut self, count: u64) {
        self.cache = count.to_le_bytes();
    }

    /// Redis' bytes: dense if it was dense, else sparse while it fits.
    pub fn encode(&self, sparse_max: usize) -> Vec<u8> {
        let sparse = if self.dense {
            None
        } else {
            self.registers.encode_sparse(sparse_max, self.cache)
        };
        sparse.unwrap_or_else(|| self.registers.encode_dense(self.cache))
    }
}

impl Default for Hll {
    fn default() -> Self {
        Hll::new()
    }
}

/// PFDEBUG DECODE's text of a sparse HLL: `z:<run>` for a run of zero
/// registers, `Z:<run>` for a long one, `v:<value>,<run>` otherwise.
pub fn sparse_text(bytes: &[u8]) -> Option<String> {
    if bytes.get(4) != Some(&SPARSE) {
        return None;
    }
    let mut parts = Vec::new();
    let mut at = HEADER;
    while at < bytes.len() {
        let op = bytes[at];
        if op & 0xc0 == 0 {
            parts.push(format!("z:{}", (op & 0x3f) as usize + 1));
            at += 1;
        } else if op & 0xc0 == 0x40 {
            let low = *bytes.get(at + 1)? as usize;
            parts.push(format!("Z:{}", (((op & 0x3f) as usize) << 8 | low) + 1));
            at += 2;
        } else {
            parts.push(format!("v:{},{}", ((op >> 2) & 0x1f) + 1, (op & 3) + 1));
            at += 1;
        }
    }
    Some(parts.join(" "))
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

/// Redis HLL `bytes`: registers, encoding and cache.
pub fn decode(bytes: &[u8]) -> Result<Hll, BadHll> {
    let registers = decode_registers(bytes)?;
    Ok(Hll {
        registers,
        dense: bytes[4] == DENSE,
        cache: bytes[8..16].try_into().expect("8 bytes"),
    })
}

/// The registers of Redis HLL `bytes`.
fn decode_registers(bytes: &[u8]) -> Result<Registers, BadHll> {
    if bytes.len() < HEADER || &bytes[..4] != b"HYLL" || bytes[4] > SPARSE {
        return Err(BadHll::NotHll);
    }
    let mut registers = Registers::new();
    if bytes[4] == DENSE {
        if bytes.len() != DENSE_BYTES {
            return Err(BadHll::NotHll);
        }
        for i in 0..REGISTERS {
            let bit = i * 6;
            let (byte, shift) = (HEADER + bit / 8, bit % 8);
            let low = bytes[byte] as u16 >> shift;
            let high = bytes
                .get(byte + 1)
                .map_or(0, |&b| (b as u16) << (8 - shift));
            registers.0[i] = ((low | high) & 63) as u8;
        }
        return Ok(registers);
    }
    let mut at = HEADER;
    let mut index = 0usize;
    while at < bytes.len() {
        let op = bytes[at];
        let (value, run, used) = if op & 0xc0 == 0 {
            (0, (op & 0x3f) as usize + 1, 1)
        } else if op & 0xc0 == 0x40 {
            let low = *bytes.get(at + 1).ok_or(BadHll::Corrupt)? as usize;
            (0, (((op & 0x3f) as usize) << 8 | low) + 1, 2)
        } else {
            (((op >> 2) & 0x1f) + 1, (op & 3) as usize + 1, 1)
        };
        if index + run > REGISTERS {
            return Err(BadHll::Corrupt);
        }
        registers.0[index..index + run].fill(value);
        index += run;
        at += used;
    }
    if index != REGISTERS {
        return Err(BadHll::Corrupt);
    }
    Ok(registers)
}

/// PFSELFTEST: checks the dense register packing with every value in
/// every position pattern, that sparse and dense encodings of the same
/// registers decode alike and count alike, and that the estimate stays
/// within six standard errors while 100 000 elements are added. `Err`
/// says what failed.
pub fn self_test() -> Result<(), String> {
    let mut registers = Registers::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..1000 {
        for (i, r) in registers.0.iter_mut().enumerate() {
            *r = ((next() as usize ^ i) % 64) as u8;
        }
        let back =
            decode_registers(&registers.encode_dense(STALE)).map_err(|e| format!("{e:?}"))?;
        if back.0 != registers.0 {
            return Err("TESTFAILED Register error".into());
        }
    }
    let mut registers = Registers::new();
    let standard_error = 1.04 / (REGISTERS as f64).sqrt();
    for n in 1..=100_000u64 {
        registers.add(&next().to_le_bytes());
        if n % 5_000 == 0 || n < 100 {
            let dense =
                decode_registers(&registers.encode_dense(STALE)).map_err(|e| format!("{e:?}"))?;
            let either =
                decode_registers(&registers.encode(usize::MAX)).map_err(|e| format!("{e:?}"))?;
            if dense.0 != registers.0 || either.0 != registers.0 {
                return Err("TESTFAILED Sparse and dense representations differ".into());
            }
            let estimate = registers.count() as f64;
            let error = (estimate - n as f64).abs() / n as f64;
            let allowed = if n < 100 { 0.05 } else { standard_error * 6.0 };
            if error > allowed {
                return Err(format!(
                    "TESTFAILED Too big error. card:{n} abserr:{}",
                    (estimate - n as f64).abs()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_sparse_turns_dense() {
        let mut registers = Registers::new();
        let empty = registers.encode(SPARSE_MAX_BYTES_DEFAULT);
        // Redis' empty HLL: the header and one XZERO of 16 384 registers.
        assert_eq!(empty.len(), HEADER + 2);
        assert_eq!(&empty[HEADER..], &[0x7f, 0xff]);
        assert_eq!(registers.count(), 0);
        for i in 0..1000 {
            registers.add(format!("element:{i}").as_bytes());
        }
        let sparse = registers.encode(SPARSE_MAX_BYTES_DEFAULT);
        assert_eq!(sparse[4], SPARSE);
        assert_eq!(decode(&sparse).unwrap().registers.0, registers.0);
        let dense = registers.encode(0);
        assert_eq!(dense[4], DENSE);
        assert_eq!(dense.len(), DENSE_BYTES);
        assert_eq!(decode(&dense).unwrap().registers.0, registers.0);
        let estimate = registers.count() as f64;
        assert!((estimate - 1000.0).abs() < 1000.0 * 0.05, "{estimate}");
        assert_eq!(decode(b"not an hll").err(), Some(BadHll::NotHll));
        let mut broken = sparse.clone();
        broken.pop();
        assert_eq!(decode(&broken).err(), Some(BadHll::Corrupt));
    }

    #[test]
    fn the_self_test_passes() {
        self_test().unwrap();
    }

    #[test]
    fn a_large_count_has_redis_error() {
        let mut registers = Registers::new();
        let n = 200_000;
        for i in 0..n {
            registers.add(format!("{i}").as_bytes());
        }
        let estimate = registers.count() as f64;
        assert!(
            (estimate - n as f64).abs() / (n as f64) < 0.0081 * 3.0,
            "{estimate}"
        );
    }
}
