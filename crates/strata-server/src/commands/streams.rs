//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID,
//! XREAD, XREADGROUP, XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER,
//! DELCONSUMER, HELP), XACK, XPENDING, XCLAIM, XAUTOCLAIM and XINFO
//! (STREAM [FULL], GROUPS, CONSUMERS, HELP), with Redis 7.4's replies and
//! error texts.
//!
//! Reads borrow the stored stream (`strata_engine::stream::StreamValue`)
//! under the shard lock. Every change is a [`StreamOp`] the engine applies
//! and logs as it is: XADD logs its entry, XACK its IDs, XREADGROUP the
//! IDs it delivered, never the stream. A command decides everything that
//! depends on the clock or the configuration (the new ID, where a trim
//! cuts, whether an entry starts a node) before it makes the operation,
//! so replaying it gives the same stream. Streams stay when emptied, as
//! in Redis.
//!
//! XREAD and XREADGROUP with BLOCK that find nothing block like BLPOP
//! (`crate::blocking`): they run again when a key changes. XREAD's `$` is
//! replaced by the stream's last ID when it blocks, as Redis does, so the
//! command that runs again waits for entries after that one.

use bytes::Bytes;
use strata_engine::collection::Stream;
use strata_engine::keyspace::KeyRef;
use strata_engine::stream::{Fields, Group, StreamId, StreamOp, StreamValue, Trim};
use strata_resp::Protocol;

use super::connection::help_lines;
use super::{CmdError, CmdResult, Ctx, ERR_NO_SUCH_KEY, ERR_SYNTAX, is, parse_i64};
use crate::notify;
use crate::session::TimeoutReply;

const ERR_INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
const ERR_START: &str = "ERR invalid start ID for the interval";
const ERR_END: &str = "ERR invalid end ID for the interval";
const ERR_ID_TOO_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

// --- arguments -------------------------------------------------------------

/// An ID argument: `ms-seq`, `ms` (the sequence is `missing_seq`), `-` and
/// `+` unless `strict`, and `ms-*` where `star` allows it (XADD). Also
/// answers whether the sequence was given.
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> Result<(StreamId, bool), CmdError> {
    let invalid = || CmdError::from(ERR_INVALID_ID);
    match arg {
        b"-" if !strict => return Ok((StreamId::MIN, true)),
        b"+" if !strict => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid)?;
    match seq {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, parse_u64(seq).ok_or_else(invalid)?), true)),
    }
}

fn parse_id(arg: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId, CmdError> {
    Ok(parse_id_full(arg, missing_seq, strict, false)?.0)
}

/// Unsigned decimal digits that fit 64 bits.
fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A range bound: `(` makes it exclusive (then `-` and `+` are refused).
fn parse_bound(arg: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id(&arg[1..], missing_seq, true)?;
        return if start {
            id.next().ok_or(CmdError::from(ERR_START))
        } else {
            id.prev().ok_or(CmdError::from(ERR_END))
        };
    }
    parse_id(arg, missing_seq, false)
}

/// A COUNT argument; a negative one counts as 0.
fn parse_count(arg: &[u8]) -> Result<u64, CmdError> {
    Ok(parse_i64(arg)?.max(0) as u64)
}

/// XADD's and XTRIM's trimming options, from `args[2..]`; for XADD also
/// NOMKSTREAM and where the ID is.
struct TrimArgs {
    trim: Option<Trim>,
    nomkstream: bool,
    id_at: usize,
}

fn parse_trim_args(args: &[Bytes], xadd: bool, node_entries: u64) -> Result<TrimArgs, CmdError> {
    const ERR_BOTH: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    let mut i = 2;
    let (mut strategy, mut approx, mut limit) = (None, false, None);
    let mut nomkstream = false;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        }
        if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if strategy.is_some() {
                return Err(ERR_BOTH.into());
            }
            approx = false;
            if more >= 2 && (&args[i + 1][..] == b"~" || &args[i + 1][..] == b"=") {
                approx = &args[i + 1][..] == b"~";
                i += 1;
            }
            let value = &args[i + 1];
            strategy = Some(if is(opt, "maxlen") {
                let len = parse_i64(value)?;
                if len < 0 {
                    return Err("ERR The MAXLEN argument must be >= 0.".into());
                }
                Trim::MaxLen {
                    len: len as u64,
                    approx: false,
                    limit: 0,
                }
            } else {
                Trim::MinId {
                    id: parse_id(value, 0, true)?,
                    approx: false,
                    limit: 0,
                }
            });
            i += 2;
        } else if is(opt, "limit") && more > 0 {
            let n = parse_i64(&args[i + 1])?;
            if n < 0 {
                return Err("ERR The LIMIT argument must be >= 0.".into());
            }
            limit = Some(n as u64);
            i += 2;
        } else if xadd && is(opt, "nomkstream") {
            nomkstream = true;
            i += 1;
        } else if xadd {
            break;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    if limit.is_some_and(|n| n > 0) && strategy.is_none() {
        return Err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy".into(),
        );
    }
    if !xadd && strategy.is_none() {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy".into());
    }
    if limit.is_some() && !approx {
        return Err("ERR syntax error, LIMIT cannot be used without the special ~ option".into());
    }
    // Approximate trimming does at most 100 nodes' work unless told.
    let limit = if approx {
        limit.unwrap_or(100 * node_entries)
    } else {
        0
    };
    let trim = strategy.map(|s| match s {
        Trim::MaxLen { len, .. } => Trim::MaxLen { len, approx, limit },
        Trim::MinId { id, .. } => Trim::MinId { id, approx, limit },
    });
    Ok(TrimArgs {
        trim,
        nomkstream,
        id_at: i,
    })
}

// --- replies ---------------------------------------------------------------

fn write_id(out: &mut strata_resp::ReplyWriter, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

/// `[id, [field, value, ...]]`.
fn write_entry(out: &mut strata_resp::ReplyWriter, id: StreamId, fields: Fields) {
    out.array(2);
    write_id(out, id);
    out.array(fields.len());
    for item in fields.iter() {
        out.bulk(item);
    }
}

fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    )
    .into()
}

// --- reading and changing ---------------------------------------------------

/// Runs `read` on the stream at `name` (`None` when missing); WRONGTYPE
/// for another type.
fn with_stream<R>(
    ctx: &mut Ctx,
    name: &[u8],
    read: impl FnOnce(Option<&StreamValue>, &mut strata_resp::ReplyWriter) -> R,
) -> Result<R, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let entry = ctx.keys.shard(key).get_as::<Stream>(db, key, now)?;
    Ok(read(
        entry.as_ref().and_then(|e| e.value().stream()),
        &mut ctx.out,
    ))
}

/// Applies `op` to the stream at `key` (creating it when the operation
/// makes one and `create`); answers what it changed.
fn change(ctx: &mut Ctx, key: KeyRef, op: &StreamOp, create: bool) -> Result<u64, CmdError> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    Ok(shard
        .change_as::<Stream>(db, key, now, op, create)?
        .unwrap_or(0))
}

fn node_limits(ctx: &Ctx) -> (u64, u64) {
    (
        ctx.config.stream_node_max_entries,
        ctx.config.stream_node_max_bytes,
    )
}

// --- XADD, XLEN, XRANGE, XDEL, XTRIM, XSETID ---------------------------------

/// The ID XADD gives: `*` from the clock, `ms-*` the next sequence, or the
/// one given (which must be past the last).
fn next_id(
    last: StreamId,
    given: Option<(StreamId, bool)>,
    now_ms: u64,
) -> Result<StreamId, CmdError> {
    match given {
        None if now_ms > last.ms => Ok(StreamId::new(now_ms, 0)),
        None => last.next().ok_or(CmdError::from(ERR_ID_TOO_SMALL)),
        Some((id, false)) if id.ms == last.ms => match last.seq.checked_add(1) {
            Some(seq) => Ok(StreamId::new(id.ms, seq)),
            None => Err(ERR_ID_TOO_SMALL.into()),
        },
        Some((id, false)) if id.ms > last.ms => Ok(StreamId::new(id.ms, 0)),
        Some((id, true)) if id > last => Ok(id),
        Some(_) => Err(ERR_ID_TOO_SMALL.into()),
    }
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...].
pub fn xadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (node_entries, node_bytes) = node_limits(ctx);
    let parsed = parse_trim_args(args, true, node_entries)?;
    let id_at = parsed.id_at;
    let given = match args.get(id_at) {
        Some(arg) if &arg[..] == b"*" => None,
        Some(arg) => Some(parse_id_full(arg, 0, true, true)?),
        None => None,
    };
    let fields_at = id_at + 1;
    if args.len() < fields_at + 2 || (args.len() - fields_at) % 2 == 1 {
        return Err("ERR wrong number of arguments for 'xadd' command".into());
    }
    if given.is_some_and(|(id, seq_given)| seq_given && id.is_zero()) {
        return Err("ERR The ID specified in XADD must be greater than 0-0".into());
    }
    let fields: Vec<&[u8]> = args[fields_at..].iter().map(|a| &a[..]).collect();
    let packed: usize = fields.iter().map(|f| f.len() + 2).sum();
    let (now, name) = (ctx.now_ms, &args[1]);
    let state = with_stream(ctx, name, |stream, _| {
        stream.map(|s| (s.last_id, s.starts_node(packed, node_entries, node_bytes)))
    })?;
    let (last, new_node) = match state {
        None if parsed.nomkstream => {
            ctx.out.null_bulk();
            return Ok(());
        }
        None => (StreamId::MIN, true),
        Some(state) => state,
    };
    if last == StreamId::MAX {
        return Err(
            "ERR The stream has exhausted the last possible ID, unable to add more items".into(),
        );
    }
    let id = next_id(last, given, now)?;
    let key = ctx.key(name);
    let add = StreamOp::Add {
        id,
        fields,
        new_node,
    };
    change(ctx, key, &add, true)?;
    write_id(&mut ctx.out, id);
    ctx.notify(notify::STREAM, "xadd", name);
    if let Some(trim) = parsed.trim {
        trim_stream(ctx, name, trim)?;
    }
    Ok(())
}

/// Trims the stream at `name` as `trim` says; answers the entries removed.
fn trim_stream(ctx: &mut Ctx, name: &[u8], trim: Trim) -> Result<u64, CmdError> {
    let cut = with_stream(ctx, name, |stream, _| stream.and_then(|s| s.trim_cut(trim)))?;
    let Some(cut) = cut else {
        return Ok(0);
    };
    let key = ctx.key(name);
    let removed = change(ctx, key, &StreamOp::TrimThrough(cut), false)?;
    if removed > 0 {
        ctx.notify(notify::STREAM, "xtrim", name);
    }
    Ok(removed)
}

pub fn xtrim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (node_entries, _) = node_limits(ctx);
    let parsed = parse_trim_args(args, false, node_entries)?;
    let exists = with_stream(ctx, &args[1], |stream, _| stream.is_some())?;
    let removed = match (exists, parsed.trim) {
        (true, Some(trim)) => trim_stream(ctx, &args[1], trim)?,
        _ => 0,
    };
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn xlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = with_stream(ctx, &args[1], |stream, _| {
        stream.map_or(0, StreamValue::len)
    })?;
    ctx.out.int(len as i64);
    Ok(())
}

fn range_command(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> CmdResult {
    let (start, end) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = parse_bound(start, 0, true)?;
    let end = parse_bound(end, u64::MAX, false)?;
    let mut count = None;
    let mut i = 4;
    while i < args.len() {
        if is(&args[i], "count") && i + 1 < args.len() {
            count = Some(parse_count(&args[i + 1])?);
            i += 2;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    with_stream(ctx, &args[1], |stream, out| match (stream, count) {
        (None, _) => out.array(0),
        (Some(_), Some(0)) => out.null_array(),
        (Some(stream), count) => {
            let limit = count.map_or(usize::MAX, |n| n as usize);
            let entries: Vec<_> = stream.range(start, end, rev).take(limit).collect();
            out.array(entries.len());
            for (id, fields) in entries {
                write_entry(out, id, fields);
            }
        }
    })
}

pub fn xrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_command(ctx, args, false)
}

pub fn xrevrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_command(ctx, args, true)
}

pub fn xdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let ids = (args[2..].iter())
        .map(|a| parse_id(a, 0, true))
        .collect::<Result<Vec<_>, _>>()?;
    let exists = with_stream(ctx, &args[1], |stream, _| stream.is_some())?;
    let deleted = if exists {
        let key = ctx.key(&args[1]);
        change(ctx, key, &StreamOp::Delete(ids), false)?
    } else {
        0
    };
    if deleted > 0 {
        ctx.notify(notify::STREAM, "xdel", &args[1]);
    }
    ctx.out.int(deleted as i64);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id].
pub fn xsetid(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let id = parse_id(&args[2], 0, true)?;
    let (mut entries_added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "entriesadded") && more {
            let n = parse_i64(&args[i + 1])?;
            if n < 0 {
                return Err("ERR entries_added must be positive".into());
            }
            entries_added = Some(n as u64);
        } else if is(&args[i], "maxdeletedid") && more {
            let deleted = parse_id(&args[i + 1], 0, true)?;
            if id < deleted {
                return Err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id".into());
            }
            max_deleted = Some(deleted);
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 2;
    }
    let checked = with_stream(ctx, &args[1], |stream, _| {
        let stream = stream.ok_or(CmdError::from(ERR_NO_SUCH_KEY))?;
        if id < stream.max_deleted {
            return Err(CmdError::from(
                "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id",
            ));
        }
        if let Some((last, _)) = stream.last() {
            if id < last {
                return Err(
                    "ERR The ID specified in XSETID is smaller than the target stream top item"
                        .into(),
                );
            }
            if entries_added.is_some_and(|n| (stream.len() as u64) > n) {
                return Err("ERR The entries_added specified in XSETID is smaller than the target stream length".into());
            }
        }
        Ok(())
    })?;
    checked?;
    let key = ctx.key(&args[1]);
    let op = StreamOp::SetId {
        last_id: id,
        entries_added,
        max_deleted: max_deleted.filter(|d| !d.is_zero()),
    };
    change(ctx, key, &op, false)?;
    ctx.notify(notify::STREAM, "xsetid", &args[1]);
    ctx.out.ok();
    Ok(())
}

// --- XREAD, XREADGROUP --------------------------------------------------------

struct ReadArgs<'a> {
    count: usize,
    /// Deadline when BLOCK was given (`Some(None)`: for ever).
    block: Option<Option<u64>>,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    keys: &'a [Bytes],
    ids: &'a [Bytes],
}

fn parse_read_args<'a>(
    args: &'a [Bytes],
    group: bool,
    now_ms: u64,
) -> Result<ReadArgs<'a>, CmdError> {
    let name = if group { "xreadgroup" } else { "xread" };
    let mut read = ReadArgs {
        count: 0,
        block: None,
        group: None,
        noack: false,
        keys: &[],
        ids: &[],
    };
    let mut i = 1;
    let mut streams_at = None;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if is(opt, "block") && more > 0 {
            read.block = Some(parse_block_timeout(&args[i + 1], now_ms)?);
            i += 2;
        } else if is(opt, "count") && more > 0 {
            read.count = parse_count(&args[i + 1])? as usize;
            i += 2;
        } else if is(opt, "streams") && more > 0 {
            let rest = args.len() - (i + 1);
            if !rest.is_multiple_of(2) {
                let symbol = if group { '>' } else { '$' };
                return Err(format!("ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified.").into());
            }
            streams_at = Some(i + 1);
            break;
        } else if is(opt, "group") && more >= 2 {
            if !group {
                return Err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.".into());
            }
            read.group = Some((&args[i + 1][..], &args[i + 2][..]));
            i += 3;
        } else if is(opt, "noack") {
            if !group {
                return Err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.".into());
            }
            read.noack = true;
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    let Some(at) = streams_at else {
        return Err(ERR_SYNTAX.into());
    };
    if group && read.group.is_none() {
        return Err("ERR Missing GROUP option for XREADGROUP".into());
    }
    let half = (args.len() - at) / 2;
    read.keys = &args[at..at + half];
    read.ids = &args[at + half..];
    Ok(read)
}

/// BLOCK's milliseconds as a deadline (`None`: 0, for ever).
fn parse_block_timeout(arg: &[u8], now_ms: u64) -> Result<Option<u64>, CmdError> {
    let ms = strata_engine::value::parse_canonical_i64(arg).ok_or(CmdError::from(
        "ERR timeout is not an integer or out of range",
    ))?;
    if ms < 0 {
        return Err("ERR timeout is negative".into());
    }
    if ms == 0 {
        return Ok(None);
    }
    Ok(Some(now_ms.saturating_add(ms as u64)))
}

/// Writes the top of a read reply: an array (RESP2) or map (RESP3) of
/// `served` streams.
fn write_read_top(out: &mut strata_resp::ReplyWriter, served: usize) {
    if out.protocol() == Protocol::Resp3 {
        out.map(served);
    } else {
        out.array(served);
    }
}

/// Entries of one stream that a read serves, copied out of the lock.
type Served = Vec<(StreamId, Option<Vec<Vec<u8>>>)>;

fn copy_entries<'a>(entries: impl Iterator<Item = (StreamId, Fields<'a>)>) -> Served {
    entries
        .map(|(id, fields)| (id, Some(fields.iter().map(<[u8]>::to_vec).collect())))
        .collect()
}

fn write_served(out: &mut strata_resp::ReplyWriter, key: &[u8], entries: &Served) {
    if out.protocol() != Protocol::Resp3 {
        out.array(2);
    }
    out.bulk(key);
    out.array(entries.len());
    for (id, fields) in entries {
        out.array(2);
        write_id(out, *id);
        match fields {
            Some(fields) => {
                out.array(fields.len());
                for item in fields {
                    out.bulk(item);
                }
            }
            None => out.null_array(),
        }
    }
}

/// XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...].
pub fn xread(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let read = parse_read_args(args, false, ctx.now_ms)?;
    // The IDs, `$` and `+` resolved against each stream.
    let mut after = Vec::with_capacity(read.keys.len());
    let retry = ctx.session.block_retry;
    for (key, id) in read.keys.iter().zip(read.ids) {
        let stream_last = match with_stream(ctx, key, |stream, _| {
            stream.map(|s| (s.last_id, s.last().map(|(id, _)| id)))
        }) {
            Ok(last) => last,
            // Woken, a key of another type is waited on (below).
            Err(_) if retry => None,
            Err(e) => return Err(e),
        };
        let resolved = match &id[..] {
            b"$" => stream_last.map_or(StreamId::MIN, |(last, _)| last),
            b"+" => match stream_last {
                None => StreamId::MIN,
                Some((last, _)) => last
                    .prev()
                    .ok_or(CmdError::from("ERR the stream last element ID is 0-0"))?,
            },
            b">" => {
                return Err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.".into());
            }
            _ => parse_id(id, 0, true)?,
        };
        after.push(resolved);
    }
    let mut served = Vec::new();
    for (key, &gt) in read.keys.iter().zip(&after) {
        // Woken, a key that holds another type now serves nothing: the
        // reader waits on (as in Redis), it is not answered WRONGTYPE.
        if retry && with_stream(ctx, key, |_, _| ()).is_err() {
            continue;
        }
        let entries = with_stream(ctx, key, |stream, _| {
            let stream = stream?;
            let newest = stream.last()?.0;
            if newest <= gt {
                return None;
            }
            let start = gt.next()?;
            let limit = if read.count == 0 {
                usize::MAX
            } else {
                read.count
            };
            Some(copy_entries(
                stream.range(start, StreamId::MAX, false).take(limit),
            ))
        })?;
        if let Some(entries) = entries {
            served.push((key, entries));
        }
    }
    if !served.is_empty() {
        write_read_top(&mut ctx.out, served.len());
        for (key, entries) in &served {
            write_served(&mut ctx.out, key, entries);
        }
        return Ok(());
    }
    match read.block {
        None => ctx.out.null_array(),
        Some(deadline) => {
            // Run again with `$` as the IDs it stood for now.
            let mut again = args.to_vec();
            let ids_at = args.len() - read.ids.len();
            for (n, id) in read.ids.iter().enumerate() {
                if &id[..] == b"$" {
                    again[ids_at + n] = Bytes::from(after[n].to_string());
                }
            }
            ctx.block_as(read.keys, deadline, TimeoutReply::NullArray, again);
        }
    }
    Ok(())
}

/// XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS
/// key [key ...] id [id ...].
pub fn xreadgroup(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let read = parse_read_args(args, true, ctx.now_ms)?;
    let (group, consumer) = read.group.expect("checked by parse_read_args");
    let mut wanted = Vec::with_capacity(read.keys.len());
    for (key, id) in read.keys.iter().zip(read.ids) {
        let found = with_stream(ctx, key, |stream, _| {
            stream.is_some_and(|s| s.groups.contains_key(group))
        })?;
        if !found {
            return Err(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(group)
            )
            .into());
        }
        let history = match &id[..] {
            b">" => None,
            b"$" | b"+" => {
                let which = String::from_utf8_lossy(id);
                return Err(format!("ERR The {which} ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The {which} ID would just return an empty result set.").into());
            }
            _ => Some(parse_id(id, 0, true)?),
        };
        wanted.push(history);
    }
    let limit = if read.count == 0 {
        usize::MAX
    } else {
        read.count
    };
    let mut served = Vec::new();
    for (key, history) in read.keys.iter().zip(wanted) {
        let entries = with_stream(ctx, key, |stream, _| {
            let stream = stream.expect("checked above");
            let group = &stream.groups[group];
            match history {
                Some(after) => Some(pending_history(stream, group, consumer, after, limit)),
                None => {
                    let start = group.last_id.next()?;
                    let entries =
                        copy_entries(stream.range(start, StreamId::MAX, false).take(limit));
                    (!entries.is_empty()).then_some(entries)
                }
            }
        })?;
        let ids: Vec<StreamId> = (entries.iter().flatten())
            .filter(|(_, fields)| fields.is_some())
            .map(|(id, _)| *id)
            .collect();
        let created = with_stream(ctx, key, |stream, _| {
            stream.is_some_and(|s| !s.groups[group].consumers.contains_key(consumer))
        })?;
        // A read that delivers nothing to a known consumer changes only
        // its seen time; while blocked it changes nothing at all, or
        // the change would wake this very reader again, for ever.
        if created || !ids.is_empty() || !ctx.session.block_retry {
            let op = StreamOp::Deliver {
                group,
                consumer,
                now_ms: ctx.now_ms,
                ids,
                history: history.is_some(),
                noack: read.noack,
            };
            let key_ref = ctx.key(key);
            change(ctx, key_ref, &op, false)?;
        }
        if created {
            ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
        }
        if let Some(entries) = entries {
            served.push((key, entries));
        }
    }
    if !served.is_empty() {
        write_read_top(&mut ctx.out, served.len());
        for (key, entries) in &served {
            write_served(&mut ctx.out, key, entries);
        }
        return Ok(());
    }
    match read.block {
        None => ctx.out.null_array(),
        Some(deadline) => {
            ctx.block(read.keys, deadline, TimeoutReply::NullArray);
            if let Some(block) = &mut ctx.session.block {
                block.on_nokey = true;
            }
        }
    }
    Ok(())
}

/// A consumer's pending entries after `after` (a history read): deleted
/// entries come back with no fields, as in Redis.
fn pending_history(
    stream: &StreamValue,
    group: &Group,
    consumer: &[u8],
    after: StreamId,
    limit: usize,
) -> Served {
    let Some(owner) = group.consumers.get(consumer) else {
        return Vec::new();
    };
    let Some(start) = after.next() else {
        return Vec::new();
    };
    (owner.pending.range(start..).take(limit))
        .map(|&id| {
            let fields = stream
                .get(id)
                .map(|f| f.iter().map(<[u8]>::to_vec).collect());
            (id, fields)
        })
        .collect()
}

// --- XGROUP -------------------------------------------------------------------

/// The group options after `args[5]` (MKSTREAM with CREATE, ENTRIESREAD).
fn group_options(args: &[Bytes], create: bool) -> Result<(bool, Option<Option<u64>>), CmdError> {
    let (mut mkstream, mut entries_read) = (false, None);
    let mut i = 5;
    while i < args.len() {
        if create && is(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(&args[i], "entriesread") && i + 1 < args.len() {
            let n = parse_i64(&args[i + 1])?;
            if n < -1 {
                return Err("ERR value for ENTRIESREAD must be positive or -1".into());
            }
            entries_read = Some((n >= 0).then_some(n as u64));
            i += 2;
        } else {
            return Err(subcommand_syntax("XGROUP", &args[1]));
        }
    }
    Ok((mkstream, entries_read))
}

fn subcommand_syntax(command: &str, sub: &[u8]) -> CmdError {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {command} HELP.",
        String::from_utf8_lossy(sub)
    )
    .into()
}

const ERR_XGROUP_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

/// What XGROUP's subcommands need to know of the stream first.
struct GroupState {
    last_id: StreamId,
    group: Option<(bool, Vec<Vec<u8>>)>,
}

fn group_state(ctx: &mut Ctx, name: &[u8], group: &[u8]) -> Result<Option<GroupState>, CmdError> {
    with_stream(ctx, name, |stream, _| {
        stream.map(|s| GroupState {
            last_id: s.last_id,
            group: s
                .groups
                .get(group)
                .map(|g| (true, g.consumers.keys().cloned().collect())),
        })
    })
}

/// The stream and group an XGROUP subcommand other than CREATE works on.
fn existing_group(ctx: &mut Ctx, args: &[Bytes]) -> Result<GroupState, CmdError> {
    let state = group_state(ctx, &args[2], &args[3])?.ok_or(CmdError::from(ERR_XGROUP_KEY))?;
    if state.group.is_none() {
        return Err(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            String::from_utf8_lossy(&args[3]),
            String::from_utf8_lossy(&args[2])
        )
        .into());
    }
    Ok(state)
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n].
pub fn xgroup_create(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mkstream, entries_read) = group_options(args, true)?;
    let state = group_state(ctx, &args[2], &args[3])?;
    if state.is_none() && !mkstream {
        return Err(ERR_XGROUP_KEY.into());
    }
    let last_id = match &args[4][..] {
        b"$" => state.as_ref().map_or(StreamId::MIN, |s| s.last_id),
        id => parse_id(id, 0, true)?,
    };
    if state.as_ref().is_some_and(|s| s.group.is_some()) {
        return Err("BUSYGROUP Consumer Group name already exists".into());
    }
    let key = ctx.key(&args[2]);
    let op = StreamOp::CreateGroup {
        group: &args[3],
        last_id,
        entries_read: entries_read.flatten(),
    };
    change(ctx, key, &op, true)?;
    ctx.notify(notify::STREAM, "xgroup-create", &args[2]);
    ctx.out.ok();
    Ok(())
}

/// XGROUP SETID key group id|$ [ENTRIESREAD n].
pub fn xgroup_setid(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax("XGROUP", &args[1]));
    }
    let (_, entries_read) = group_options(args, false)?;
    let state = existing_group(ctx, args)?;
    let last_id = match &args[4][..] {
        b"$" => state.last_id,
        id => parse_id(id, 0, false)?,
    };
    let key = ctx.key(&args[2]);
    let op = StreamOp::SetGroupId {
        group: &args[3],
        last_id,
        entries_read: entries_read.flatten(),
    };
    change(ctx, key, &op, false)?;
    ctx.notify(notify::STREAM, "xgroup-setid", &args[2]);
    ctx.out.ok();
    Ok(())
}

/// XGROUP DESTROY key group.
pub fn xgroup_destroy(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let state = group_state(ctx, &args[2], &args[3])?.ok_or(CmdError::from(ERR_XGROUP_KEY))?;
    if state.group.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    let key = ctx.key(&args[2]);
    change(ctx, key, &StreamOp::DestroyGroup { group: &args[3] }, false)?;
    ctx.notify(notify::STREAM, "xgroup-destroy", &args[2]);
    ctx.out.int(1);
    Ok(())
}

/// XGROUP CREATECONSUMER key group consumer.
pub fn xgroup_createconsumer(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let state = existing_group(ctx, args)?;
    let exists =
        (state.group.iter()).any(|(_, consumers)| consumers.iter().any(|c| c[..] == args[4][..]));
    if exists {
        ctx.out.int(0);
        return Ok(());
    }
    let key = ctx.key(&args[2]);
    let op = StreamOp::CreateConsumer {
        group: &args[3],
        consumer: &args[4],
        now_ms: ctx.now_ms,
    };
    change(ctx, key, &op, false)?;
    ctx.notify(notify::STREAM, "xgroup-createconsumer", &args[2]);
    ctx.out.int(1);
    Ok(())
}

/// XGROUP DELCONSUMER key group consumer: answers its pending count.
pub fn xgroup_delconsumer(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let state = existing_group(ctx, args)?;
    let exists =
        (state.group.iter()).any(|(_, consumers)| consumers.iter().any(|c| c[..] == args[4][..]));
    if !exists {
        ctx.out.int(0);
        return Ok(());
    }
    let key = ctx.key(&args[2]);
    let op = StreamOp::DeleteConsumer {
        group: &args[3],
        consumer: &args[4],
    };
    let pending = change(ctx, key, &op, false)?;
    ctx.notify(notify::STREAM, "xgroup-delconsumer", &args[2]);
    ctx.out.int(pending as i64);
    Ok(())
}

pub fn xgroup_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
    Ok(())
}

// --- XACK, XPENDING, XCLAIM, XAUTOCLAIM ------------------------------------------

/// XACK key group id [id ...].
pub fn xack(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = with_stream(ctx, &args[1], |stream, _| {
        stream.is_some_and(|s| s.groups.contains_key(&args[2][..]))
    })?;
    if !found {
        ctx.out.int(0);
        return Ok(());
    }
    let ids = (args[3..].iter())
        .map(|a| parse_id(a, 0, true))
        .collect::<Result<Vec<_>, _>>()?;
    let key = ctx.key(&args[1]);
    let op = StreamOp::Ack {
        group: &args[2],
        ids,
    };
    let acked = change(ctx, key, &op, false)?;
    ctx.out.int(acked as i64);
    Ok(())
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]].
pub fn xpending(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return Err(ERR_SYNTAX.into());
    }
    let mut range = None;
    if args.len() >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if is(&args[3], "idle") {
            min_idle = parse_i64(&args[4])?;
            if args.len() < 8 {
                return Err(ERR_SYNTAX.into());
            }
            at += 2;
        }
        let count = parse_count(&args[at + 2])?;
        let start = parse_bound(&args[at], 0, true)?;
        let end = parse_bound(&args[at + 1], u64::MAX, false)?;
        let consumer = args.get(at + 3).map(|c| &c[..]);
        range = Some((min_idle, start, end, count, consumer));
    }
    let now = ctx.now_ms as i64;
    let (key, group_name) = (&args[1], &args[2][..]);
    with_stream(ctx, key, |stream, out| {
        let group = stream
            .and_then(|s| s.groups.get(group_name))
            .ok_or_else(|| no_group(key, group_name))?;
        let Some((min_idle, start, end, count, consumer)) = range else {
            pending_summary(out, group);
            return Ok(());
        };
        let ids: Vec<StreamId> = match consumer {
            Some(name) => match group.consumers.get(name) {
                None => {
                    out.array(0);
                    return Ok(());
                }
                Some(c) => c
                    .pending
                    .range(start..)
                    .take_while(|id| **id <= end)
                    .copied()
                    .collect(),
            },
            None => group
                .pending
                .range(start..)
                .take_while(|(id, _)| **id <= end)
                .map(|(id, _)| *id)
                .collect(),
        };
        let rows: Vec<_> = (ids.into_iter())
            .map(|id| (id, &group.pending[&id]))
            .filter(|(_, p)| min_idle == 0 || now - p.delivered_ms as i64 >= min_idle)
            .take(count as usize)
            .collect();
        out.array(rows.len());
        for (id, pending) in rows {
            out.array(4);
            write_id(out, id);
            out.bulk(&pending.consumer);
            out.int((now - pending.delivered_ms as i64).max(0));
            out.int(pending.deliveries as i64);
        }
        Ok::<(), CmdError>(())
    })?
}

fn pending_summary(out: &mut strata_resp::ReplyWriter, group: &Group) {
    out.array(4);
    out.int(group.pending.len() as i64);
    let (Some((first, _)), Some((last, _))) = (
        group.pending.iter().next(),
        group.pending.iter().next_back(),
    ) else {
        out.null_bulk();
        out.null_bulk();
        out.null_array();
        return;
    };
    write_id(out, *first);
    write_id(out, *last);
    let busy: Vec<_> = (group.consumers.iter())
        .filter(|(_, c)| !c.pending.is_empty())
        .collect();
    out.array(busy.len());
    for (name, consumer) in busy {
        out.array(2);
        out.bulk(name);
        out.bulk(consumer.pending.len().to_string().as_bytes());
    }
}

/// What a claim found for one pending ID.
enum Claimed {
    /// The entry is gone: the ID stops being pending.
    Deleted(StreamId),
    /// Claimed: new delivery time and count, and the entry.
    Taken(StreamId, u64, u64, Option<Vec<Vec<u8>>>),
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms]
/// [TIME ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id].
pub fn xclaim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, group_name, consumer) = (&args[1], &args[2][..], &args[3][..]);
    let found = with_stream(ctx, key, |s, _| {
        s.is_some_and(|s| s.groups.contains_key(group_name))
    })?;
    if !found {
        return Err(no_group(key, group_name));
    }
    let min_idle = strata_engine::value::parse_canonical_i64(&args[4])
        .ok_or(CmdError::from(
            "ERR Invalid min-idle-time argument for XCLAIM",
        ))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_id(&args[j], 0, true) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let ClaimOptions {
        force,
        justid,
        retry,
        delivery,
        last_id,
    } = claim_options(args, j, now)?;
    let delivered = delivery.map_or(now, |t| if t < 0 || t > now { now } else { t }) as u64;
    let claims = with_stream(ctx, key, |stream, _| {
        let stream = stream.expect("checked above");
        let group = &stream.groups[group_name];
        let mut claims = Vec::new();
        for &id in &ids {
            let pending = group.pending.get(&id);
            let Some(fields) = stream.get(id) else {
                if pending.is_some() {
                    claims.push(Claimed::Deleted(id));
                }
                continue;
            };
            let count = match pending {
                None if !force => continue,
                None => 0,
                Some(p) => {
                    if min_idle > 0 && now - (p.delivered_ms as i64) < min_idle {
                        continue;
                    }
                    p.deliveries
                }
            };
            let count = match retry {
                Some(n) if n >= 0 => n as u64,
                _ if justid => count,
                _ => count + 1,
            };
            let copy = (!justid).then(|| fields.iter().map(<[u8]>::to_vec).collect());
            claims.push(Claimed::Taken(id, delivered, count, copy));
        }
        claims
    })?;
    apply_claims(ctx, key, group_name, consumer, &claims, Some(last_id))?;
    let taken: Vec<_> = claims
        .iter()
        .filter(|c| matches!(c, Claimed::Taken(..)))
        .collect();
    ctx.out.array(taken.len());
    for claim in taken {
        if let Claimed::Taken(id, _, _, fields) = claim {
            write_claimed(&mut ctx.out, *id, fields.as_ref());
        }
    }
    Ok(())
}

/// XCLAIM's options after its IDs.
struct ClaimOptions {
    force: bool,
    justid: bool,
    retry: Option<i64>,
    /// The delivery time IDLE or TIME gives.
    delivery: Option<i64>,
    last_id: StreamId,
}

fn claim_options(args: &[Bytes], mut j: usize, now: i64) -> Result<ClaimOptions, CmdError> {
    let (mut force, mut justid, mut retry) = (false, false, None);
    let (mut delivery, mut last_id) = (None, StreamId::MIN);
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = &args[j][..];
        let number = |text: &str| {
            strata_engine::value::parse_canonical_i64(&args[j + 1]).ok_or_else(|| {
                CmdError::from(format!("ERR Invalid {text} option argument for XCLAIM"))
            })
        };
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && more {
            delivery = Some(now - number("IDLE")?);
            j += 1;
        } else if is(opt, "time") && more {
            delivery = Some(number("TIME")?);
            j += 1;
        } else if is(opt, "retrycount") && more {
            retry = Some(number("RETRYCOUNT")?);
            j += 1;
        } else if is(opt, "lastid") && more {
            last_id = parse_id(&args[j + 1], 0, true)?;
            j += 1;
        } else {
            return Err(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )
            .into());
        }
        j += 1;
    }
    Ok(ClaimOptions {
        force,
        justid,
        retry,
        delivery,
        last_id,
    })
}

fn write_claimed(out: &mut strata_resp::ReplyWriter, id: StreamId, fields: Option<&Vec<Vec<u8>>>) {
    match fields {
        None => write_id(out, id),
        Some(fields) => {
            out.array(2);
            write_id(out, id);
            out.array(fields.len());
            for item in fields {
                out.bulk(item);
            }
        }
    }
}

/// Logs what a claim decided: deleted IDs acknowledged, the others given
/// to `consumer` (created if new), the group's last ID raised to `last`.
fn apply_claims(
    ctx: &mut Ctx,
    name: &[u8],
    group: &[u8],
    consumer: &[u8],
    claims: &[Claimed],
    last: Option<StreamId>,
) -> CmdResult {
    let (created, raise) = with_stream(ctx, name, |stream, _| {
        let g = &stream.expect("checked above").groups[group];
        let raise = last.filter(|&l| l > g.last_id).map(|l| (l, g.entries_read));
        (!g.consumers.contains_key(consumer), raise)
    })?;
    let key = ctx.key(name);
    if let Some((last_id, entries_read)) = raise {
        let op = StreamOp::SetGroupId {
            group,
            last_id,
            entries_read,
        };
        change(ctx, key, &op, false)?;
    }
    let deleted: Vec<StreamId> = (claims.iter())
        .filter_map(|c| match c {
            Claimed::Deleted(id) => Some(*id),
            Claimed::Taken(..) => None,
        })
        .collect();
    if !deleted.is_empty() {
        change(
            ctx,
            key,
            &StreamOp::Ack {
                group,
                ids: deleted,
            },
            false,
        )?;
    }
    let taken: Vec<(StreamId, u64, u64)> = (claims.iter())
        .filter_map(|c| match c {
            Claimed::Taken(id, at, count, _) => Some((*id, *at, *count)),
            Claimed::Deleted(_) => None,
        })
        .collect();
    let op = StreamOp::Claim {
        group,
        consumer,
        now_ms: ctx.now_ms,
        claims: taken,
        active: true,
    };
    change(ctx, key, &op, false)?;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", name);
    }
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID].
pub fn xautoclaim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, group_name, consumer) = (&args[1], &args[2][..], &args[3][..]);
    let min_idle = strata_engine::value::parse_canonical_i64(&args[4])
        .ok_or(CmdError::from(
            "ERR Invalid min-idle-time argument for XAUTOCLAIM",
        ))?
        .max(0);
    let start = parse_bound(&args[5], 0, true)?;
    let (mut count, mut justid) = (100u64, false);
    let mut j = 6;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = match strata_engine::value::parse_canonical_i64(&args[j + 1]) {
                Some(n) if (1..=i64::MAX / 16).contains(&n) => n as u64,
                _ => return Err("ERR COUNT must be > 0".into()),
            };
            j += 2;
        } else if is(&args[j], "justid") {
            justid = true;
            j += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    let found = with_stream(ctx, key, |s, _| {
        s.is_some_and(|s| s.groups.contains_key(group_name))
    })?;
    if !found {
        return Err(no_group(key, group_name));
    }
    let now = ctx.now_ms as i64;
    let (claims, next) = with_stream(ctx, key, |stream, _| {
        let stream = stream.expect("checked above");
        let group = &stream.groups[group_name];
        let (mut claims, mut left, mut attempts) = (Vec::new(), count, count * 10);
        let mut pending = group.pending.range(start..);
        let mut next = StreamId::MIN;
        loop {
            if attempts == 0 || left == 0 {
                next = pending.next().map_or(StreamId::MIN, |(id, _)| *id);
                break;
            }
            let Some((&id, p)) = pending.next() else {
                break;
            };
            attempts -= 1;
            let Some(fields) = stream.get(id) else {
                claims.push(Claimed::Deleted(id));
                left -= 1;
                continue;
            };
            if min_idle > 0 && now - (p.delivered_ms as i64) < min_idle {
                continue;
            }
            let deliveries = if justid {
                p.deliveries
            } else {
                p.deliveries + 1
            };
            let copy = (!justid).then(|| fields.iter().map(<[u8]>::to_vec).collect());
            claims.push(Claimed::Taken(id, now as u64, deliveries, copy));
            left -= 1;
        }
        (claims, next)
    })?;
    apply_claims(ctx, key, group_name, consumer, &claims, None)?;
    let out = &mut ctx.out;
    out.array(3);
    write_id(out, next);
    let taken: Vec<_> = claims
        .iter()
        .filter(|c| matches!(c, Claimed::Taken(..)))
        .collect();
    out.array(taken.len());
    for claim in taken {
        if let Claimed::Taken(id, _, _, fields) = claim {
            write_claimed(out, *id, fields.as_ref());
        }
    }
    let deleted: Vec<_> = (claims.iter())
        .filter_map(|c| match c {
            Claimed::Deleted(id) => Some(*id),
            Claimed::Taken(..) => None,
        })
        .collect();
    out.array(deleted.len());
    for id in deleted {
        write_id(out, id);
    }
    Ok(())
}

// --- XINFO ----------------------------------------------------------------------

fn write_lag(out: &mut strata_resp::ReplyWriter, stream: &StreamValue, group: &Group) {
    match stream.lag(group) {
        Some(lag) => out.int(lag as i64),
        None => out.null_bulk(),
    }
}

fn write_entries_read(out: &mut strata_resp::ReplyWriter, group: &Group) {
    match group.entries_read {
        Some(n) => out.int(n as i64),
        None => out.null_bulk(),
    }
}

/// XINFO STREAM key [FULL [COUNT n]].
pub fn xinfo_stream(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let full = match args.len() {
        3 => None,
        4 if is(&args[3], "full") => Some(10),
        6 if is(&args[3], "full") && is(&args[4], "count") => {
            let n = parse_i64(&args[5])?;
            Some(if n < 0 { 10 } else { n as usize })
        }
        _ => return Err(subcommand_syntax("XINFO", &args[1])),
    };
    let now = ctx.now_ms;
    with_stream(ctx, &args[2], |stream, out| {
        let stream = stream.ok_or(CmdError::from(ERR_NO_SUCH_KEY))?;
        out.map(if full.is_some() { 9 } else { 10 });
        out.bulk(b"length");
        out.int(stream.len() as i64);
        out.bulk(b"radix-tree-keys");
        out.int(stream.nodes().count() as i64);
        out.bulk(b"radix-tree-nodes");
        // Redis' radix tree has a root and, per key, about two nodes.
        out.int(match stream.nodes().count() {
            0 => 1,
            keys => keys as i64 * 2,
        });
        out.bulk(b"last-generated-id");
        write_id(out, stream.last_id);
        out.bulk(b"max-deleted-entry-id");
        write_id(out, stream.max_deleted);
        out.bulk(b"entries-added");
        out.int(stream.entries_added as i64);
        out.bulk(b"recorded-first-entry-id");
        write_id(out, stream.first_id().unwrap_or_default());
        match full {
            None => {
                out.bulk(b"groups");
                out.int(stream.groups.len() as i64);
                for (name, edge) in [
                    (&b"first-entry"[..], stream.first()),
                    (b"last-entry", stream.last()),
                ] {
                    out.bulk(name);
                    match edge {
                        Some((id, fields)) => write_entry(out, id, fields),
                        None => out.null_bulk(),
                    }
                }
            }
            Some(count) => info_full(out, stream, count, now),
        }
        Ok::<(), CmdError>(())
    })?
}

fn info_full(out: &mut strata_resp::ReplyWriter, stream: &StreamValue, count: usize, _now: u64) {
    let limit = if count == 0 { usize::MAX } else { count };
    out.bulk(b"entries");
    let entries: Vec<_> = stream
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(limit)
        .collect();
    out.array(entries.len());
    for (id, fields) in entries {
        write_entry(out, id, fields);
    }
    out.bulk(b"groups");
    out.array(stream.groups.len());
    for (name, group) in &stream.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        write_id(out, group.last_id);
        out.bulk(b"entries-read");
        write_entries_read(out, group);
        out.bulk(b"lag");
        write_lag(out, stream, group);
        out.bulk(b"pel-count");
        out.int(group.pending.len() as i64);
        out.bulk(b"pending");
        let pending: Vec<_> = group.pending.iter().take(limit).collect();
        out.array(pending.len());
        for (id, p) in pending {
            out.array(4);
            write_id(out, *id);
            out.bulk(&p.consumer);
            out.int(p.delivered_ms as i64);
            out.int(p.deliveries as i64);
        }
        out.bulk(b"consumers");
        out.array(group.consumers.len());
        for (name, consumer) in &group.consumers {
            out.map(5);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"seen-time");
            out.int(consumer.seen_ms as i64);
            out.bulk(b"active-time");
            out.int(consumer.active_ms.map_or(-1, |t| t as i64));
            out.bulk(b"pel-count");
            out.int(consumer.pending.len() as i64);
            out.bulk(b"pending");
            let ids: Vec<_> = consumer.pending.iter().take(limit).collect();
            out.array(ids.len());
            for id in ids {
                let p = &group.pending[id];
                out.array(3);
                write_id(out, *id);
                out.int(p.delivered_ms as i64);
                out.int(p.deliveries as i64);
            }
        }
    }
}

/// XINFO GROUPS key.
pub fn xinfo_groups(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    with_stream(ctx, &args[2], |stream, out| {
        let stream = stream.ok_or(CmdError::from(ERR_NO_SUCH_KEY))?;
        out.array(stream.groups.len());
        for (name, group) in &stream.groups {
            out.map(6);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"consumers");
            out.int(group.consumers.len() as i64);
            out.bulk(b"pending");
            out.int(group.pending.len() as i64);
            out.bulk(b"last-delivered-id");
            write_id(out, group.last_id);
            out.bulk(b"entries-read");
            write_entries_read(out, group);
            out.bulk(b"lag");
            write_lag(out, stream, group);
        }
        Ok::<(), CmdError>(())
    })?
}

/// XINFO CONSUMERS key group.
pub fn xinfo_consumers(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms as i64;
    let (key, group_name) = (&args[2], &args[3][..]);
    with_stream(ctx, key, |stream, out| {
        let stream = stream.ok_or(CmdError::from(ERR_NO_SUCH_KEY))?;
        let group = stream.groups.get(group_name).ok_or_else(|| {
            CmdError::from(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(group_name),
                String::from_utf8_lossy(key)
            ))
        })?;
        out.array(group.consumers.len());
        for (name, consumer) in &group.consumers {
            out.map(4);
            out.bulk(b"name");
            out.bulk(name);
            out.bulk(b"pending");
            out.int(consumer.pending.len() as i64);
            out.bulk(b"idle");
            out.int((now - consumer.seen_ms as i64).max(0));
            out.bulk(b"inactive");
            out.int(consumer.active_ms.map_or(-1, |t| (now - t as i64).max(0)));
        }
        Ok::<(), CmdError>(())
    })?
}

pub fn xinfo_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}
