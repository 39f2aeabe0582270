//! Committed records as the Redis commands a replica applies: the
//! replication stream a Redis replica (or a Strata one) reads after the
//! RDB file.
//!
//! Records are effects, not requests: each says what changed, with every
//! time and every random choice already made (docs/storage.md). So the
//! commands sent are deterministic too — a SET with an absolute deadline,
//! LPOP of the count that was popped, SREM of the members SPOP chose,
//! ZADD of final scores — and a replica ends with the primary's data
//! whatever its clock or its random numbers. A group of records (one
//! command, a MULTI, a script) that becomes more than one command is sent
//! inside MULTI/EXEC, so a replica applies it all or nothing.
//!
//! Values a record holds whole (RENAME, COPY, RESTORE, and collection
//! images) travel as `RESTORE key deadline payload REPLACE ABSTTL`, the
//! DUMP payload Redis reads. Field deadlines of hashes travel as
//! `HPEXPIREAT` (Redis 7.4). Stream consumer-group changes travel as
//! Redis 7.4 propagates its own: XCLAIM with TIME and RETRYCOUNT (and
//! LASTID for a delivery), `XGROUP SETID … ENTRIESREAD`, XACK, XGROUP
//! CREATECONSUMER. A pop of one element and the push of what it took (a
//! LIST_OP "moved" right after it) travel as one LMOVE. Function
//! libraries travel one at a time: FUNCTION LOAD … REPLACE, FUNCTION
//! DELETE, and FUNCTION FLUSH for a change of the whole set.

use strata_engine::storage::record::{self, FLAG_EMPTIED, FLAG_INT, Kind, Record};
use strata_engine::types::hash::Field;
use strata_engine::types::list::{End, ListOp};
use strata_engine::types::set::SetOp;
use strata_engine::types::stream::{StreamId, StreamOp};
use strata_engine::types::zset::ZSetOp;
use strata_engine::{Keyspace, ValueType};

/// One command: its arguments.
type Command = Vec<Vec<u8>>;

/// Turns groups of records into RESP commands, remembering the database
/// the replica has selected.
#[derive(Default)]
pub struct Translator {
    db: Option<u16>,
}

impl Translator {
    /// A translator whose replica has nothing selected yet.
    pub fn new() -> Self {
        Translator::default()
    }

    /// A translator whose replica has `db` selected (None: unknown).
    pub fn at(db: Option<u16>) -> Self {
        Translator { db }
    }

    /// The database the replica has selected after what was translated.
    pub fn db(&self) -> Option<u16> {
        self.db
    }

    /// Appends a SELECT of `db` unless it is selected already.
    pub fn select(&mut self, db: u16, out: &mut Vec<u8>) {
        if self.db != Some(db) {
            write_command(out, &[b"SELECT".to_vec(), num(db)]);
            self.db = Some(db);
        }
    }

    /// Appends to `out` the commands for the records of one group for
    /// which `keep` holds (the caller leaves out what a copy already
    /// holds). Returns how many records were translated.
    pub fn group(
        &mut self,
        keyspace: &Keyspace,
        now_ms: u64,
        records: &[u8],
        mut keep: impl FnMut(&Record) -> bool,
        out: &mut Vec<u8>,
    ) -> usize {
        if !records.is_empty()
            && record::encoded_len(records) == records.len()
            && let Ok(found) = record::decode(records)
            && is_string_set(&found)
        {
            if !keep(&found) {
                return 0;
            }
            write_string_set(self, &found, out);
            return 1;
        }
        let mut commands: Vec<(u16, Command)> = Vec::new();
        // The record before, if it is a pop of one element this replica
        // takes: its command's index and its end.
        let mut popped: Option<(usize, End)> = None;
        let mut functions_flushed = false;
        let mut taken = 0;
        let mut at = 0;
        while at < records.len() {
            let len = record::encoded_len(&records[at..]);
            let Ok(found) = record::decode(&records[at..at + len]) else {
                break;
            };
            at += len;
            // Only the record right after the pop completes a move.
            let after_pop = popped.take();
            if !keep(&found) {
                continue;
            }
            taken += 1;
            let list_op = match found.kind {
                Kind::ListOp => ListOp::decode(found.payload).ok(),
                _ => None,
            };
            // A move is a pop and the push of what it took, next to each
            // other: one LMOVE, as Redis sends it. (A push whose pop this
            // replica does not take, as a copy already holds it, goes as
            // a push.)
            if let (Some(ListOp::Moved(to, _)), Some((pop_at, from))) = (&list_op, after_pop)
                && commands[pop_at].0 == found.db
            {
                let source = commands[pop_at].1[1].clone();
                commands[pop_at].1 = lmove(source, found.key, from, *to);
                continue;
            }
            if let Some(ListOp::Pop(end, 1)) = list_op {
                popped = Some((commands.len(), end));
            }
            // After the FUNCTION FLUSH a change of the whole set starts
            // with, its deleted libraries are gone already.
            if found.kind == Kind::Meta && found.key == crate::functions::META_NAME {
                functions_flushed = true;
            } else if functions_flushed
                && found.kind == Kind::Meta
                && found.key.starts_with(crate::functions::LIBRARY_META_PREFIX)
                && found.payload.is_empty()
            {
                continue;
            }
            for command in commands_of(keyspace, &found, now_ms) {
                commands.push((found.db, command));
            }
        }
        // FLUSHALL's record names its client's database, so it selects
        // it as Redis does; these name none of their own, and select
        // only the stream's first database.
        let global = |command: &Command| {
            command
                .first()
                .is_some_and(|name| name == b"SWAPDB" || name == b"FUNCTION")
        };
        let wrap = commands.len() > 1;
        // (A SELECT goes inside MULTI, where Redis writes it too.)
        if wrap {
            write_command(out, &[b"MULTI".to_vec()]);
        }
        for (db, command) in commands {
            if self.db.is_none() || (!global(&command) && self.db != Some(db)) {
                write_command(out, &[b"SELECT".to_vec(), num(db)]);
                self.db = Some(db);
            }
            write_command(out, &command);
        }
        if wrap {
            write_command(out, &[b"EXEC".to_vec()]);
        }
        taken
    }
}

/// Appends one command in RESP (an array of bulk strings).
pub fn write_command(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    write_header(out, b'*', args.len());
    for arg in args {
        write_bulk(out, arg);
    }
}

/// `<kind><n>\r\n`: an array's or a bulk string's header.
fn write_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// One bulk string.
fn write_bulk(out: &mut Vec<u8>, arg: &[u8]) {
    write_header(out, b'$', arg.len());
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Whether `record` is a string's SET: as the only record of a group,
/// the commonest write, which [`write_string_set`] writes straight.
fn is_string_set(record: &Record) -> bool {
    record.kind == Kind::Set
        && ValueType::from_record_code(record.value_type) == Some(ValueType::String)
}

/// The command [`set_commands`] makes of a string's SET record, written
/// straight from the record without building it first (a write load's
/// stream producer spent a good part of its time allocating and freeing
/// those arguments).
fn write_string_set(translator: &mut Translator, record: &Record, out: &mut Vec<u8>) {
    translator.select(record.db, out);
    let mut buffer = itoa::Buffer::new();
    let deadline = (record.aux != 0).then(|| buffer.format(record.aux));
    write_header(out, b'*', if deadline.is_some() { 5 } else { 3 });
    write_bulk(out, b"SET");
    write_bulk(out, record.key);
    write_bulk(out, record.payload);
    if let Some(deadline) = deadline {
        write_bulk(out, b"PXAT");
        write_bulk(out, deadline.as_bytes());
    }
}

fn num(n: impl std::fmt::Display) -> Vec<u8> {
    n.to_string().into_bytes()
}

fn cmd(name: &str, key: &[u8]) -> Command {
    vec![name.as_bytes().to_vec(), key.to_vec()]
}

fn with<'a>(mut command: Command, args: impl IntoIterator<Item = &'a [u8]>) -> Command {
    command.extend(args.into_iter().map(<[u8]>::to_vec));
    command
}

/// The commands that make one record's change.
fn commands_of(keyspace: &Keyspace, found: &Record, now_ms: u64) -> Vec<Command> {
    let key = found.key;
    let bad = |what: &str| {
        crate::log_warning!(
            "replication: a {what} record of '{}' does not decode; not sent",
            String::from_utf8_lossy(key)
        );
        Vec::new()
    };
    match found.kind {
        Kind::Set => set_commands(keyspace, found, now_ms),
        // The operation before it empties the replica's copy too.
        Kind::Del if found.flags & FLAG_EMPTIED != 0 => Vec::new(),
        Kind::Del if found.aux == 1 => vec![cmd("UNLINK", key)],
        Kind::Del => vec![cmd("DEL", key)],
        Kind::Expire if found.aux == 0 => vec![cmd("PERSIST", key)],
        Kind::Expire => vec![with(cmd("PEXPIREAT", key), [&num(found.aux)[..]])],
        Kind::FlushDb => vec![vec![b"FLUSHDB".to_vec()]],
        Kind::FlushAll => vec![vec![b"FLUSHALL".to_vec()]],
        Kind::SwapDb => vec![vec![b"SWAPDB".to_vec(), num(found.db), num(found.aux)]],
        Kind::SetRange => vec![with(
            cmd("SETRANGE", key),
            [&num(found.aux)[..], found.payload],
        )],
        Kind::HashPut => match strata_engine::types::hash::decode_puts(found.payload) {
            // As put, a field named twice included (HSET k f 1 f 2).
            Ok(fields) => hash_put(key, fields.into_iter()),
            Err(_) => bad("hash"),
        },
        Kind::HashDel => match strata_engine::types::hash::decode_names(found.payload) {
            Ok(names) => vec![with(cmd("HDEL", key), names)],
            Err(_) => bad("hash"),
        },
        Kind::ListOp => match ListOp::decode(found.payload) {
            Ok(op) => vec![list_command(key, op)],
            Err(_) => bad("list"),
        },
        Kind::SetOp => match SetOp::decode(found.payload) {
            Ok(SetOp::Add(members)) => vec![with(cmd("SADD", key), members)],
            Ok(SetOp::Remove(members)) => vec![with(cmd("SREM", key), members)],
            Err(_) => bad("set"),
        },
        Kind::ZSetOp => match ZSetOp::decode(found.payload) {
            Ok(ZSetOp::Put(entries)) => {
                let mut command = cmd("ZADD", key);
                for (score, member) in entries {
                    command.push(num(score));
                    command.push(member.to_vec());
                }
                vec![command]
            }
            Ok(ZSetOp::Remove(members)) => vec![with(cmd("ZREM", key), members)],
            Ok(ZSetOp::Pop { max, members }) => {
                let name = if max { "ZPOPMAX" } else { "ZPOPMIN" };
                vec![with(cmd(name, key), [&num(members.len())[..]])]
            }
            Err(_) => bad("sorted set"),
        },
        Kind::StreamOp => match StreamOp::decode(found.payload) {
            Ok(op) => stream_commands(key, op),
            Err(_) => bad("stream"),
        },
        // One library's item: its code, or nothing once it is deleted.
        Kind::Meta if key.starts_with(crate::functions::LIBRARY_META_PREFIX) => {
            match found.payload.is_empty() {
                true => vec![with(
                    cmd("FUNCTION", b"DELETE"),
                    [&key[crate::functions::LIBRARY_META_PREFIX.len()..]],
                )],
                false => vec![with(
                    cmd("FUNCTION", b"LOAD"),
                    [&b"REPLACE"[..], found.payload],
                )],
            }
        }
        Kind::Meta if key == crate::functions::META_NAME => {
            let mut commands = vec![vec![b"FUNCTION".to_vec(), b"FLUSH".to_vec()]];
            if !found.payload.is_empty() {
                commands.push(vec![
                    b"FUNCTION".to_vec(),
                    b"RESTORE".to_vec(),
                    found.payload.to_vec(),
                ]);
            }
            commands
        }
        _ => Vec::new(),
    }
}

/// A SET record: a string as SET (with PXAT), any other value as RESTORE.
fn set_commands(keyspace: &Keyspace, found: &Record, now_ms: u64) -> Vec<Command> {
    let key = found.key;
    let value_type = ValueType::from_record_code(found.value_type);
    if value_type == Some(ValueType::String) {
        let mut command = with(cmd("SET", key), [found.payload]);
        if found.aux != 0 {
            command.push(b"PXAT".to_vec());
            command.push(num(found.aux));
        }
        return vec![command];
    }
    let copy = value_type.map(|value_type| {
        keyspace.image_copy(
            value_type,
            found.payload.to_vec(),
            found.flags & FLAG_INT != 0,
        )
    });
    let Some(Ok(copy)) = copy else {
        crate::log_warning!(
            "replication: the image of '{}' does not decode; not sent",
            String::from_utf8_lossy(key)
        );
        return Vec::new();
    };
    let payload = crate::rdb::object::dump(copy.value(), now_ms);
    vec![with(
        cmd("RESTORE", key),
        [&num(found.aux)[..], &payload, b"REPLACE", b"ABSTTL"],
    )]
}

/// HSET of the fields put, then HPEXPIREAT of those with deadlines.
fn hash_put<'a>(key: &[u8], fields: impl Iterator<Item = Field<'a>>) -> Vec<Command> {
    let mut set = cmd("HSET", key);
    let mut expiring = Vec::new();
    for field in fields {
        set.push(field.name.to_vec());
        set.push(field.value.to_vec());
        if let Some(at) = field.deadline {
            expiring.push(vec![
                b"HPEXPIREAT".to_vec(),
                key.to_vec(),
                num(at),
                b"FIELDS".to_vec(),
                b"1".to_vec(),
                field.name.to_vec(),
            ]);
        }
    }
    let mut commands = vec![set];
    commands.extend(expiring);
    commands
}

/// LMOVE source destination from to, with the ends in lower case as
/// Redis writes them for a blocked client it serves.
fn lmove(source: Vec<u8>, destination: &[u8], from: End, to: End) -> Command {
    let word = |end: End| match end {
        End::Head => b"left".to_vec(),
        End::Tail => b"right".to_vec(),
    };
    vec![
        b"LMOVE".to_vec(),
        source,
        destination.to_vec(),
        word(from),
        word(to),
    ]
}

fn list_command(key: &[u8], op: ListOp) -> Command {
    let end = |end: End, head: &str, tail: &str| match end {
        End::Head => cmd(head, key),
        End::Tail => cmd(tail, key),
    };
    match op {
        ListOp::Push(at, elements) => with(end(at, "LPUSH", "RPUSH"), elements),
        ListOp::Moved(at, element) => with(end(at, "LPUSH", "RPUSH"), [element]),
        ListOp::Pop(at, count) => with(end(at, "LPOP", "RPOP"), [&num(count)[..]]),
        ListOp::Set(index, element) => with(cmd("LSET", key), [&num(index)[..], element]),
        ListOp::Insert {
            pivot,
            after,
            element,
        } => {
            let place: &[u8] = if after { b"AFTER" } else { b"BEFORE" };
            with(cmd("LINSERT", key), [place, pivot, element])
        }
        ListOp::Remove { count, element } => with(cmd("LREM", key), [&num(count)[..], element]),
        ListOp::Trim(start, stop) => with(cmd("LTRIM", key), [&num(start)[..], &num(stop)[..]]),
    }
}

fn id(id: StreamId) -> Vec<u8> {
    num(id)
}

/// The first ID after `id` (XTRIM MINID keeps IDs at or above it).
fn after(id: StreamId) -> StreamId {
    match id.seq.checked_add(1) {
        Some(seq) => StreamId { ms: id.ms, seq },
        None => StreamId {
            ms: id.ms.saturating_add(1),
            seq: 0,
        },
    }
}

fn group_id(last_id: StreamId, entries_read: Option<u64>) -> Vec<Vec<u8>> {
    let mut args = vec![id(last_id)];
    if let Some(read) = entries_read {
        args.push(b"ENTRIESREAD".to_vec());
        args.push(num(read));
    }
    args
}

fn stream_commands(key: &[u8], op: StreamOp) -> Vec<Command> {
    let xgroup = |sub: &str, group: &[u8]| {
        vec![
            b"XGROUP".to_vec(),
            sub.as_bytes().to_vec(),
            key.to_vec(),
            group.to_vec(),
        ]
    };
    match op {
        StreamOp::Add { id: at, fields, .. } => {
            vec![with(with(cmd("XADD", key), [&id(at)[..]]), fields)]
        }
        StreamOp::Delete(ids) | StreamOp::TrimEntries(ids) => {
            let mut command = cmd("XDEL", key);
            command.extend(ids.into_iter().map(id));
            vec![command]
        }
        StreamOp::TrimThrough(last) => {
            vec![with(cmd("XTRIM", key), [&b"MINID"[..], &id(after(last))])]
        }
        StreamOp::SetId {
            last_id,
            entries_added,
            max_deleted,
        } => {
            let mut command = with(cmd("XSETID", key), [&id(last_id)[..]]);
            if let Some(added) = entries_added {
                command.push(b"ENTRIESADDED".to_vec());
                command.push(num(added));
            }
            if let Some(deleted) = max_deleted {
                command.push(b"MAXDELETEDID".to_vec());
                command.push(id(deleted));
            }
            vec![command]
        }
        StreamOp::CreateGroup {
            group,
            last_id,
            entries_read,
        } => {
            let mut command = xgroup("CREATE", group);
            command.extend(group_id(last_id, entries_read));
            command.push(b"MKSTREAM".to_vec());
            vec![command]
        }
        StreamOp::SetGroupId {
            group,
            last_id,
            entries_read,
        } => {
            let mut command = xgroup("SETID", group);
            command.extend(group_id(last_id, entries_read));
            vec![command]
        }
        StreamOp::DestroyGroup { group } => vec![xgroup("DESTROY", group)],
        StreamOp::CreateConsumer {
            group, consumer, ..
        } => vec![with(xgroup("CREATECONSUMER", group), [consumer])],
        StreamOp::DeleteConsumer { group, consumer } => {
            vec![with(xgroup("DELCONSUMER", group), [consumer])]
        }
        StreamOp::Deliver {
            group,
            consumer,
            now_ms,
            ids,
            history,
            noack,
            entries_read,
        } => {
            let read = Delivery {
                now_ms,
                history,
                noack,
                entries_read,
            };
            deliver(key, group, consumer, &ids, read)
        }
        StreamOp::Ack { group, ids } => {
            let mut command = with(cmd("XACK", key), [group]);
            command.extend(ids.into_iter().map(id));
            vec![command]
        }
        StreamOp::Claim {
            group,
            consumer,
            claims,
            ..
        } => claims
            .into_iter()
            .map(|(at, delivered_ms, count)| claim(key, group, consumer, at, delivered_ms, count))
            .collect(),
    }
}

/// XCLAIM … FORCE JUSTID: `at` pending with `consumer`, delivered at
/// `delivered_ms`, `count` times.
fn claim(
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    at: StreamId,
    delivered_ms: u64,
    count: u64,
) -> Command {
    with(
        cmd("XCLAIM", key),
        [
            group,
            consumer,
            b"0",
            &id(at),
            b"TIME",
            &num(delivered_ms),
            b"RETRYCOUNT",
            &num(count),
            b"FORCE",
            b"JUSTID",
        ],
    )
}

/// How an XREADGROUP delivered: when, whether from the consumer's
/// history or new entries, with NOACK, and the group's read counter
/// after.
struct Delivery {
    now_ms: u64,
    history: bool,
    noack: bool,
    entries_read: Option<u64>,
}

/// XREADGROUP's effects, as Redis 7.4 propagates them: new entries become
/// pending with the consumer (XCLAIM … FORCE JUSTID with a count of 1,
/// which also makes the consumer) and move the group's last ID and read
/// counter (`XGROUP SETID … ENTRIESREAD`); a history read counts one more
/// delivery (XCLAIM without JUSTID counts it). The consumer is made by
/// `XGROUP CREATECONSUMER` only where no XCLAIM makes it: with NOACK, as
/// Redis does, and for a read that delivered nothing (Redis sends nothing
/// then, and its replica lacks the consumer; a Strata replica keeps it).
fn deliver(
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    ids: &[StreamId],
    read: Delivery,
) -> Vec<Command> {
    let Delivery {
        now_ms,
        history,
        noack,
        entries_read,
    } = read;
    let mut commands = Vec::new();
    if noack || ids.is_empty() {
        commands.push(with(
            cmd("XGROUP", b"CREATECONSUMER"),
            [key, group, consumer],
        ));
    }
    if history {
        for &at in ids {
            commands.push(with(
                cmd("XCLAIM", key),
                [group, consumer, b"0", &id(at), b"TIME", &num(now_ms)],
            ));
        }
        return commands;
    }
    if !noack {
        for &at in ids {
            // LASTID: the group's last ID moves with each new entry.
            let mut claimed = claim(key, group, consumer, at, now_ms, 1);
            claimed.extend([b"LASTID".to_vec(), id(at)]);
            commands.push(claimed);
        }
    }
    if let Some(&last) = ids.iter().max() {
        let mut setid = with(cmd("XGROUP", b"SETID"), [key, group]);
        setid.extend(group_id(last, entries_read));
        commands.push(setid);
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::storage::record::Draft;

    /// A one-record group of a string's SET is written straight from the
    /// record, exactly as the general path writes it (SELECT first when
    /// the database changes); any other group takes the general path.
    #[test]
    fn a_lone_string_set_is_written_as_the_general_path_writes_it() {
        let keyspace = Keyspace::new(16);
        let mut cases = Vec::new();
        for (db, key, value, deadline) in [
            (0u16, &b"k"[..], &b"v"[..], 0u64),
            (3, b"k\r\n\x00bin", b"", 1_795_881_721_352),
            (3, b"other", &[7u8; 300][..], 0),
        ] {
            let mut group = Vec::new();
            record::encode(
                &mut group,
                &Draft {
                    kind: Kind::Set,
                    db,
                    aux: deadline,
                    flags: 0,
                    value_type: 0,
                    key,
                    payload: value,
                },
            );
            record::seal(&mut group, 1, 0);
            cases.push(group);
        }
        let mut fast = Translator::at(Some(0));
        let mut general = Translator::at(Some(0));
        for group in &cases {
            let mut straight = Vec::new();
            assert_eq!(fast.group(&keyspace, 0, group, |_| true, &mut straight), 1);
            let found = record::decode(group).unwrap();
            assert!(is_string_set(&found));
            let mut expected = Vec::new();
            for command in set_commands(&keyspace, &found, 0) {
                general.select(found.db, &mut expected);
                write_command(&mut expected, &command);
            }
            assert_eq!(
                String::from_utf8_lossy(&straight),
                String::from_utf8_lossy(&expected)
            );
        }
        // A record the caller leaves out writes nothing.
        let mut out = Vec::new();
        assert_eq!(fast.group(&keyspace, 0, &cases[0], |_| false, &mut out), 0);
        assert!(out.is_empty());
    }
}
