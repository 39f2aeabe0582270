//! Redis' serialization pieces that travel outside an RDB file: the
//! payloads of FUNCTION DUMP / FUNCTION RESTORE and of DUMP / RESTORE of
//! keys ([`object`]), which end with the RDB version and a CRC64.
//!
//! The formats are Redis 7.0's (`rdb.h`, `crc64.c`), written from their
//! description:
//!
//! - a *length* is 1 byte (`00xxxxxx`, up to 63), 2 bytes (`01xxxxxx`
//!   then a byte: 14 bits, big-endian), `0x80` and a 32-bit big-endian
//!   number, or `0x81` and a 64-bit one; `11xxxxxx` marks a specially
//!   encoded string instead (0, 1, 2: an 8, 16 or 32-bit little-endian
//!   integer written as its decimal text; 3: LZF-compressed bytes as the
//!   compressed length, the original length, then the data);
//! - a *string* is a length and that many bytes;
//! - a payload ends with the RDB version (2 bytes, little-endian) and the
//!   CRC64 (Jones polynomial, reflected, as Redis computes it) of every
//!   byte before it (8 bytes, little-endian).
//!
//! Strata writes strings uncompressed (Redis reads both) and reads every
//! encoding, so payloads move between Redis and Strata both ways.

pub mod encoding;
pub mod file;
pub mod intset;
pub mod listpack;
pub mod object;
pub mod stream;
pub mod ziplist;

pub use encoding::{
    FOOTER_BYTES, Malformed, OPCODE_FUNCTION, OPCODE_FUNCTION2, RDB_VERSION, RDB_VERSION_READ_MAX,
    Reader, crc64, lzf_decompress, seal, seal_version, verify, write_len, write_string,
};
