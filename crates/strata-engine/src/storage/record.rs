//! The log record: the unit of durability, byte by byte.
//!
//! Every mutation becomes one record; log segments and checkpoint files are
//! sequences of records (`docs/storage.md` is the reference). All integers
//! are little-endian.
//!
//! ```text
//! offset size field
//!  0     4    header_crc  CRC32C of bytes 4..40 (so it covers body_crc too)
//!  4     4    body_crc    CRC32C of bytes 40..total_len (key and payload)
//!  8     4    total_len   whole record, header included
//! 12     4    key_len
//! 16     8    lsn         log sequence number, +1 per record
//! 24     8    aux         SET/EXPIRE: deadline in Unix ms (0: none);
//!                         SWAPDB: the second database; DEL: 1 for an
//!                         UNLINK; checkpoint: an LSN
//! 32     2    db
//! 34     1    kind        see [`Kind`]
//! 35     1    flags       [`FLAG_GROUP_CONTINUES`], [`FLAG_INT`], [`FLAG_LOCATED`],
//!                         [`FLAG_EXPIRED`], [`FLAG_EVICTED`], [`FLAG_NEW`],
//!                         [`FLAG_BACKGROUND`]
//! 36     1    value_type  0: string, 1: hash (SET, HASH_* and checkpoint records)
//! 37     3    zero
//! 40          key bytes, then payload bytes (total_len - 40 - key_len)
//! ```
//!
//! Two CRCs let recovery tell a torn write from corruption: a header that
//! checks out but whose body runs past the end of the file was cut short by
//! a crash; a header that does not check out while non-zero bytes follow is
//! damage.
//!
//! A command that changes several keys (MSET, RENAME, MOVE, FLUSHALL …)
//! appends a *group*: every record but the last has
//! [`FLAG_GROUP_CONTINUES`]. Recovery applies a group only when its last
//! record is present and valid, so a multi-key command is all or nothing.

/// A STREAM_OP record's `aux` when the operation only counts another
/// delivery of entries already pending (XREADGROUP with an ID, not `>`):
/// replayed like any other, so the counts survive a restart, but not a
/// change to the dataset (`rdb_changes_since_last_save`), as Redis 7.4
/// counts it.
pub const STREAM_AUX_DELIVERY_ONLY: u64 = 1;

/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 40;
/// More records follow that belong to the same command.
pub(crate) const FLAG_GROUP_CONTINUES: u8 = 1;
/// A SET payload that is the canonical text of an integer (encoding int).
pub const FLAG_INT: u8 = 2;
/// Checkpoint files only: the SET's payload ends with the 8-byte location
/// (`tier::loc`) of the same value's record in the log, so the value
/// loads into RAM already able to leave it without being written again.
pub(crate) const FLAG_LOCATED: u8 = 4;
/// A DEL or HASH_DEL made because a deadline passed (the key's, or its
/// fields'), not by a command. Replayed like any other; the change feed
/// reports it as an expiry (keyspace notifications `expired`, `hexpired`).
pub(crate) const FLAG_EXPIRED: u8 = 8;
/// A DEL made by a deleting eviction policy (`allkeys-lru` …): replayed
/// like any other; the change feed reports it as an eviction.
pub(crate) const FLAG_EVICTED: u8 = 16;
/// A SET that created its key (it did not exist): replayed like any
/// other; the change feed reports it as a new key (notification `new`).
pub(crate) const FLAG_NEW: u8 = 32;
/// Made by the server's own background work (active expiry, eviction),
/// not while a command held the lock: the change feed says so (client
/// tracking invalidates those keys from the feed, the others at once).
pub(crate) const FLAG_BACKGROUND: u8 = 64;
/// A DEL of a collection the operation logged just before it emptied
/// (Redis deletes an emptied collection): replayed like any other; a
/// replica's own run of that operation deletes the key too, so the
/// replication stream leaves it out, as Redis' does.
pub const FLAG_EMPTIED: u8 = 128;
/// Largest record accepted when reading: two maximal bulk strings (key and
/// value, 512 MB each) plus the header, as `total_len` is 32-bit.
pub const RECORD_BYTES_MAX: usize = u32::MAX as usize;

/// What a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The full current image of a value, with its deadline in `aux`.
    Set = 1,
    /// The key no longer exists (`aux` 1: deleted as an UNLINK, which a
    /// replica is sent as such; replayed alike).
    Del = 2,
    /// The key's deadline is now `aux` (0: persist).
    Expire = 3,
    /// Database `db` is emptied.
    FlushDb = 4,
    /// Every database is emptied.
    FlushAll = 5,
    /// Databases `db` and `aux` swap contents.
    SwapDb = 6,
    /// Part of a string value changed (SETRANGE, APPEND, SETBIT, BITFIELD):
    /// the payload's bytes are written at byte offset `aux` of the value,
    /// which is first zero-padded to `aux` if shorter; a missing key
    /// becomes that string (no deadline). The deadline is unchanged.
    SetRange = 7,
    /// Fields of a hash were stored: the payload is an image of just those
    /// fields (`hash` module: varint count, then each field with its value
    /// and deadline), put into the hash in order; a missing key becomes a
    /// hash of them. The key's deadline is unchanged.
    HashPut = 8,
    /// Fields of a hash were removed: the payload is a varint count, then
    /// each name as a varint length and its bytes.
    HashDel = 9,
    /// A list changed: the payload is the operation (`list::ListOp`:
    /// push, pop, set, insert, remove or trim), replayed on the list; a
    /// missing key becomes a list of the elements a push adds. The key's
    /// deadline is unchanged.
    ListOp = 10,
    /// A set changed: the payload is the operation (`set::SetOp`: add or
    /// remove members); a missing key becomes a set of the members added.
    SetOp = 11,
    /// A sorted set changed: the payload is the operation (`zset::ZSetOp`:
    /// put members with their final scores, or remove members); a missing
    /// key becomes a sorted set of the members put.
    ZSetOp = 12,
    /// A stream changed: the payload is the operation
    /// (`stream::StreamOp`: an entry added, entries deleted or trimmed,
    /// group and consumer changes, deliveries, acknowledgements, claims);
    /// a missing key becomes the stream an XADD or XGROUP CREATE MKSTREAM
    /// makes. `aux` is [`STREAM_AUX_DELIVERY_ONLY`] for a delivery of
    /// entries already pending (XREADGROUP with an ID), 0 otherwise.
    StreamOp = 14,
    /// Server state kept beside the keyspace (today the function
    /// libraries, `FUNCTION LOAD`): key: the item's name; payload: its
    /// whole image, which replaces the previous one (empty: removed). It
    /// belongs to shard 0: committed with every shard locked, copied into
    /// shard 0's part of a checkpoint and replayed from shard 0's LSN. Not
    /// a change of any key (the change feed leaves it out).
    Meta = 13,
    /// Checkpoint file: first record. `aux`: LSN from which the log must be
    /// replayed; key: [`crate::storage::checkpoint::CheckpointMeta`] bytes.
    CheckpointBegin = 16,
    /// Checkpoint file: the SET records that follow, up to the next marker,
    /// are shard `db`'s contents, which include every record of that shard
    /// with an LSN below `aux`.
    CheckpointShard = 17,
    /// Checkpoint file: last record; `aux`: the LSN the next write gets.
    CheckpointEnd = 18,
    /// Checkpoint file: a key whose value is on disk only (tiering): the
    /// payload is the location (u64: segment << 32 | offset) of the
    /// value's SET record in the log; `aux` the deadline, flags as SET.
    CheckpointCold = 19,
}

impl Kind {
    pub(crate) fn from_u8(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Set,
            2 => Kind::Del,
            3 => Kind::Expire,
            4 => Kind::FlushDb,
            5 => Kind::FlushAll,
            6 => Kind::SwapDb,
            7 => Kind::SetRange,
            8 => Kind::HashPut,
            9 => Kind::HashDel,
            10 => Kind::ListOp,
            11 => Kind::SetOp,
            12 => Kind::ZSetOp,
            14 => Kind::StreamOp,
            13 => Kind::Meta,
            16 => Kind::CheckpointBegin,
            17 => Kind::CheckpointShard,
            18 => Kind::CheckpointEnd,
            19 => Kind::CheckpointCold,
            _ => return None,
        })
    }
}

/// A record being written: everything but its LSN and CRCs, which are
/// filled in by [`seal`] when the log assigns the LSN.
pub struct Draft<'a> {
    pub kind: Kind,
    pub db: u16,
    pub aux: u64,
    pub flags: u8,
    /// The value's type for SET and checkpoint records ([`VALUE_STRING`],
    /// [`VALUE_HASH`]); 0 otherwise.
    pub value_type: u8,
    pub key: &'a [u8],
    pub payload: &'a [u8],
}

impl<'a> Draft<'a> {
    /// A [`Kind::Meta`] record: metadata item `name` is now `image`.
    pub fn meta(name: &'a [u8], image: &'a [u8]) -> Draft<'a> {
        Draft {
            kind: Kind::Meta,
            db: 0,
            aux: 0,
            flags: 0,
            value_type: 0,
            key: name,
            payload: image,
        }
    }
}

/// `value_type` of a string value.
pub(crate) const VALUE_STRING: u8 = 0;
/// `value_type` of a hash value: the payload is its image (`hash` module).
pub(crate) const VALUE_HASH: u8 = 1;
/// `value_type` of a list value: the payload is its image (`list` module).
pub(crate) const VALUE_LIST: u8 = 2;
/// `value_type` of a set value: the payload is its image (`set` module).
pub(crate) const VALUE_SET: u8 = 3;
/// `value_type` of a sorted set value: the payload is its image (`zset`
/// module).
pub(crate) const VALUE_ZSET: u8 = 4;
/// `value_type` of a stream: the payload is its image (`stream` module).
pub(crate) const VALUE_STREAM: u8 = 5;

/// Appends `draft` to `out` with LSN 0 and no header CRC yet; returns the
/// record's length. The body CRC is computed here, outside any log lock.
pub fn encode(out: &mut Vec<u8>, draft: &Draft) -> usize {
    let total = HEADER_BYTES + draft.key.len() + draft.payload.len();
    assert!(total <= RECORD_BYTES_MAX, "record of {total} bytes");
    let start = out.len();
    out.reserve(total);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&(draft.key.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&draft.aux.to_le_bytes());
    out.extend_from_slice(&draft.db.to_le_bytes());
    out.extend_from_slice(&[draft.kind as u8, draft.flags, draft.value_type, 0, 0, 0]);
    out.extend_from_slice(draft.key);
    out.extend_from_slice(draft.payload);
    let body_crc = crc32c::crc32c(&out[start + HEADER_BYTES..]);
    out[start + 4..start + 8].copy_from_slice(&body_crc.to_le_bytes());
    total
}

/// Stamps `lsn` (and optionally more flags) into an encoded record and
/// computes its header CRC.
pub fn seal(record: &mut [u8], lsn: u64, extra_flags: u8) {
    debug_assert!(record.len() >= HEADER_BYTES);
    record[16..24].copy_from_slice(&lsn.to_le_bytes());
    record[35] |= extra_flags;
    let header_crc = crc32c::crc32c(&record[4..HEADER_BYTES]);
    record[0..4].copy_from_slice(&header_crc.to_le_bytes());
}

/// Length of the encoded record at the start of `bytes` (for walking a
/// buffer of records this process encoded).
pub fn encoded_len(bytes: &[u8]) -> usize {
    u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize
}

/// A decoded, CRC-checked record borrowing from its buffer.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub lsn: u64,
    pub aux: u64,
    pub db: u16,
    pub kind: Kind,
    pub flags: u8,
    pub value_type: u8,
    pub key: &'a [u8],
    pub payload: &'a [u8],
}

impl Record<'_> {
    pub(crate) fn continues_group(&self) -> bool {
        self.flags & FLAG_GROUP_CONTINUES != 0
    }
}

/// The fields of a header whose CRC checked out.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub total_len: usize,
    pub key_len: usize,
    body_crc: u32,
}

/// Why the bytes at some offset are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Fewer bytes than a header remain.
    ShortHeader,
    /// The header's CRC, lengths or kind are wrong.
    BadHeader,
    /// The header is fine but the body runs past the available bytes.
    ShortBody,
    /// The header is fine but the body's CRC is wrong.
    BadBody,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invalid::ShortHeader => "incomplete record header",
            Invalid::BadHeader => "record header checksum mismatch",
            Invalid::ShortBody => "record body cut short",
            Invalid::BadBody => "record body checksum mismatch",
        })
    }
}

/// Checks the header at the start of `bytes`.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header, Invalid> {
    if bytes.len() < HEADER_BYTES {
        return Err(Invalid::ShortHeader);
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    if u32_at(0) != crc32c::crc32c(&bytes[4..HEADER_BYTES]) {
        return Err(Invalid::BadHeader);
    }
    let total_len = u32_at(8) as usize;
    let key_len = u32_at(12) as usize;
    if total_len < HEADER_BYTES + key_len || Kind::from_u8(bytes[34]).is_none() {
        return Err(Invalid::BadHeader);
    }
    Ok(Header {
        total_len,
        key_len,
        body_crc: u32_at(4),
    })
}

/// Decodes the record at the start of `bytes`, checking both CRCs.
pub fn decode(bytes: &[u8]) -> Result<Record<'_>, Invalid> {
    let header = parse_header(bytes)?;
    decode_with_header(bytes, header)
}

/// Decodes a record whose header was already checked; `bytes` starts with
/// the header.
pub(crate) fn decode_with_header(bytes: &[u8], header: Header) -> Result<Record<'_>, Invalid> {
    if bytes.len() < header.total_len {
        return Err(Invalid::ShortBody);
    }
    let body = &bytes[HEADER_BYTES..header.total_len];
    if crc32c::crc32c(body) != header.body_crc {
        return Err(Invalid::BadBody);
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    Ok(Record {
        lsn: u64_at(16),
        aux: u64_at(24),
        db: u16::from_le_bytes([bytes[32], bytes[33]]),
        kind: Kind::from_u8(bytes[34]).expect("checked by parse_header"),
        flags: bytes[35],
        value_type: bytes[36],
        key: &body[..header.key_len],
        payload: &body[header.key_len..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut buf = Vec::new();
        let len = encode(
            &mut buf,
            &Draft {
                kind: Kind::Set,
                db: 3,
                aux: 12345,
                flags: FLAG_INT,
                value_type: 0,
                key: b"key",
                payload: b"42",
            },
        );
        assert_eq!(len, buf.len());
        seal(&mut buf, 7, FLAG_GROUP_CONTINUES);
        buf
    }

    #[test]
    fn round_trip() {
        let buf = sample();
        let record = decode(&buf).unwrap();
        assert_eq!(record.lsn, 7);
        assert_eq!(record.aux, 12345);
        assert_eq!(record.db, 3);
        assert_eq!(record.kind, Kind::Set);
        assert_eq!(record.flags, FLAG_INT | FLAG_GROUP_CONTINUES);
        assert!(record.continues_group());
        assert_eq!(record.key, b"key");
        assert_eq!(record.payload, b"42");
        assert_eq!(encoded_len(&buf), buf.len());
    }

    #[test]
    fn every_truncation_and_every_flipped_bit_is_detected() {
        let buf = sample();
        for cut in 0..buf.len() {
            let error = decode(&buf[..cut]).unwrap_err();
            let expected = if cut < HEADER_BYTES {
                Invalid::ShortHeader
            } else {
                Invalid::ShortBody
            };
            assert_eq!(error, expected, "cut at {cut}");
        }
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut damaged = buf.clone();
                damaged[byte] ^= 1 << bit;
                assert!(decode(&damaged).is_err(), "flip {byte}:{bit} undetected");
            }
        }
    }
}
