//! A whole RDB file, as a Redis primary sends it to a replica (and as
//! `redis-cli --rdb` saves it): written from a copy of the keyspace
//! ([`Writer`]), read back key by key ([`read`]).
//!
//! Layout (Redis' `rdb.h`, written from its description): the magic
//! `REDIS` and the version as four decimal digits; then opcodes, each a
//! byte: `0xFA` an auxiliary field (two strings), `0xFE` select a database
//! (a length), `0xFB` the sizes of the database (two lengths), `0xFC` the
//! next key's deadline in Unix ms (8 bytes, little-endian), `0xFD` the same
//! in seconds (4 bytes), `0xF8` idle time and `0xF9` LFU frequency of the
//! next key, `0xF5` a function library's code (a string), `0xF7` module
//! data (refused: Strata has no modules), and `0xFF` the end, followed by
//! the CRC64 of every byte before it (zero: not computed). Any other byte
//! is a value type: the key as a string, then the value's body (see
//! [`super::object`]).

use std::io::Write;

use strata_engine::{Value, ValueRef};

use super::encoding::{self, Malformed, Reader, write_len, write_string};

const OPCODE_AUX: u8 = 0xFA;
const OPCODE_SELECTDB: u8 = 0xFE;
const OPCODE_RESIZEDB: u8 = 0xFB;
const OPCODE_EXPIRETIME_MS: u8 = 0xFC;
const OPCODE_EXPIRETIME: u8 = 0xFD;
const OPCODE_IDLE: u8 = 0xF8;
const OPCODE_FREQ: u8 = 0xF9;
const OPCODE_MODULE_AUX: u8 = 0xF7;
const OPCODE_SLOT_INFO: u8 = 0xF4;
const OPCODE_EOF: u8 = 0xFF;

/// Writes an RDB file to `out`, keeping its CRC64 as it goes.
pub struct Writer<W: Write> {
    out: W,
    crc: u64,
    db: Option<usize>,
    buf: Vec<u8>,
    written: u64,
}

impl<W: Write> Writer<W> {
    /// Starts the file: magic, version and the auxiliary fields a Redis
    /// replica logs (`redis-ver` — the Redis version this server reports —,
    /// `redis-bits`, `ctime`, `aof-base`).
    pub fn new(out: W, redis_version: &str, now_ms: u64) -> std::io::Result<Self> {
        let mut writer = Writer {
            out,
            crc: 0,
            db: None,
            buf: Vec::with_capacity(64 * 1024),
            written: 0,
        };
        writer
            .buf
            .extend_from_slice(format!("REDIS{:04}", encoding::RDB_VERSION).as_bytes());
        for (name, value) in [
            ("redis-ver", redis_version.to_string()),
            ("redis-bits", "64".to_string()),
            ("ctime", (now_ms / 1000).to_string()),
            ("aof-base", "0".to_string()),
        ] {
            writer.buf.push(OPCODE_AUX);
            write_string(&mut writer.buf, name.as_bytes());
            write_string(&mut writer.buf, value.as_bytes());
        }
        writer.spill()?;
        Ok(writer)
    }

    /// An auxiliary field (`repl-stream-db`: the database the replication
    /// stream after the file has selected).
    pub fn aux(&mut self, name: &str, value: &str) -> std::io::Result<()> {
        self.buf.push(OPCODE_AUX);
        write_string(&mut self.buf, name.as_bytes());
        write_string(&mut self.buf, value.as_bytes());
        self.spill()
    }

    /// The function libraries, as FUNCTION DUMP's payload (its footer
    /// already removed): FUNCTION2 opcodes with each library's code, which
    /// is how an RDB file holds them too.
    pub fn functions(&mut self, dump_body: &[u8]) -> std::io::Result<()> {
        self.buf.extend_from_slice(dump_body);
        self.spill()
    }

    /// One key: its database, deadline and value, encoded into the
    /// writer's buffer (no I/O: callable under a lock; [`Writer::spill`]
    /// writes it out).
    pub fn key(
        &mut self,
        db: usize,
        key: &[u8],
        deadline: Option<u64>,
        value: ValueRef,
        now_ms: u64,
    ) {
        if self.db != Some(db) {
            self.buf.push(OPCODE_SELECTDB);
            write_len(&mut self.buf, db as u64);
            self.db = Some(db);
        }
        if let Some(at) = deadline {
            self.buf.push(OPCODE_EXPIRETIME_MS);
            self.buf.extend_from_slice(&at.to_le_bytes());
        }
        // A payload is the object (type byte, body) and its footer; in a
        // file the key comes between the type byte and the body.
        let payload = super::object::dump(value, now_ms);
        let object = &payload[..payload.len() - encoding::FOOTER_BYTES];
        self.buf.push(object[0]);
        write_string(&mut self.buf, key);
        self.buf.extend_from_slice(&object[1..]);
    }

    /// Bytes encoded but not yet written out ([`Writer::spill`]).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Ends the file (EOF and CRC64) and returns the writer and the bytes
    /// written.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        self.buf.push(OPCODE_EOF);
        self.spill()?;
        self.out.write_all(&self.crc.to_le_bytes())?;
        self.out.flush()?;
        Ok((self.out, self.written + 8))
    }

    /// Writes what is buffered to the output.
    pub fn spill(&mut self) -> std::io::Result<()> {
        self.crc = encoding::crc64(self.crc, &self.buf);
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// What an RDB file holds, in order.
pub enum Item {
    /// A key of database `db`, with its deadline (Unix ms).
    Key {
        db: usize,
        key: Vec<u8>,
        deadline: Option<u64>,
        value: Value<'static>,
    },
    /// A function library's code.
    Function(Vec<u8>),
    /// `repl-stream-db`: the database the stream after the file selects.
    StreamDb(usize),
}

/// Reads the RDB file in `bytes`, handing each item to `each` in order.
/// Checks the CRC64 when the file has one.
pub fn read(bytes: &[u8], mut each: impl FnMut(Item)) -> Result<(), String> {
    let version = bytes
        .get(..9)
        .filter(|head| head.starts_with(b"REDIS"))
        .and_then(|head| std::str::from_utf8(&head[5..]).ok())
        .and_then(|digits| digits.parse::<u16>().ok())
        .ok_or("not an RDB file (no REDIS magic)")?;
    if version > encoding::RDB_VERSION_READ_MAX {
        return Err(format!("can't handle RDB format version {version}"));
    }
    let mut reader = Reader::new(&bytes[9..]);
    let bad = |what: &str| format!("bad RDB file ({what})");
    let mut db = 0usize;
    let mut deadline = None;
    loop {
        let at = bytes.len() - reader.remaining();
        let opcode = reader.byte().map_err(|_| bad("cut short"))?;
        match opcode {
            OPCODE_EOF => {
                let crc = reader.u64_le().unwrap_or(0);
                if version >= 5 && crc != 0 && crc != encoding::crc64(0, &bytes[..=at]) {
                    return Err("wrong RDB checksum".into());
                }
                return Ok(());
            }
            OPCODE_AUX => {
                let name = reader.string().map_err(|_| bad("aux"))?;
                let value = reader.string().map_err(|_| bad("aux"))?;
                if name == b"repl-stream-db"
                    && let Some(db) = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                {
                    each(Item::StreamDb(db));
                }
            }
            OPCODE_SELECTDB => db = reader.len().map_err(|_| bad("select"))? as usize,
            OPCODE_RESIZEDB => {
                reader.len().map_err(|_| bad("resize"))?;
                reader.len().map_err(|_| bad("resize"))?;
            }
            OPCODE_SLOT_INFO => {
                for _ in 0..3 {
                    reader.len().map_err(|_| bad("slot info"))?;
                }
            }
            OPCODE_EXPIRETIME_MS => deadline = Some(reader.u64_le().map_err(|_| bad("expire"))?),
            OPCODE_EXPIRETIME => {
                let secs = reader.take(4).map_err(|_| bad("expire"))?;
                let secs = u32::from_le_bytes(secs.try_into().expect("4 bytes"));
                deadline = Some(u64::from(secs) * 1000);
            }
            OPCODE_IDLE => {
                reader.len().map_err(|_| bad("idle"))?;
            }
            OPCODE_FREQ => {
                reader.byte().map_err(|_| bad("freq"))?;
            }
            encoding::OPCODE_FUNCTION2 => {
                each(Item::Function(
                    reader.string().map_err(|_| bad("function"))?,
                ));
            }
            OPCODE_MODULE_AUX | encoding::OPCODE_FUNCTION => {
                return Err("the RDB file holds module data or pre-7.0 functions".into());
            }
            kind => {
                let key = reader.string().map_err(|_| bad("key"))?;
                let value =
                    super::object::read_typed(&mut reader, kind).map_err(|_: Malformed| {
                        bad(&format!("value of '{}'", String::from_utf8_lossy(&key)))
                    })?;
                each(Item::Key {
                    db,
                    key,
                    deadline: deadline.take(),
                    value,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_file_reads_back() {
        let mut writer = Writer::new(Vec::new(), "7.2.4", 1_000).unwrap();
        let value = ValueRef::Str {
            bytes: b"hello",
            int: false,
        };
        writer.key(0, b"a", None, value, 1_000);
        writer.key(3, b"b", Some(5_000), value, 1_000);
        let (bytes, len) = writer.finish().unwrap();
        assert_eq!(len as usize, bytes.len());
        let mut keys = Vec::new();
        read(&bytes, |item| {
            if let Item::Key {
                db, key, deadline, ..
            } = item
            {
                keys.push((db, key, deadline));
            }
        })
        .unwrap();
        assert_eq!(
            keys,
            vec![(0, b"a".to_vec(), None), (3, b"b".to_vec(), Some(5_000))]
        );
        let mut damaged = bytes.clone();
        let last = damaged.len() - 9;
        damaged[last - 1] ^= 1;
        assert!(read(&damaged, |_| {}).is_err());
    }
}
