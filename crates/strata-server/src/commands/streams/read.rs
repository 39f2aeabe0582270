//! XREAD and XREADGROUP, with BLOCK (see the parent module).

use bytes::Bytes;
use strata_engine::types::stream::{Fields, Group, StreamId, StreamOp, StreamValue};
use strata_resp::Protocol;

use super::common::*;
use crate::commands::{CmdError, CmdResult, Ctx, ERR_SYNTAX, is};
use crate::events::notify;
use crate::net::session::TimeoutReply;

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
    let ms = strata_engine::types::value::parse_canonical_i64(arg).ok_or(CmdError::from(
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
            // Redis stands for `>` with the largest ID, so that ID given
            // explicitly reads new entries too.
            _ => Some(parse_id(id, 0, true)?).filter(|&id| id != StreamId::MAX),
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
        let (created, entries_read) = with_stream(ctx, key, |stream, _| {
            let stream = stream.expect("checked above");
            let found = &stream.groups[group];
            let entries_read = match history {
                Some(_) => found.entries_read,
                None => stream.read_counter_after(found, &ids),
            };
            (!found.consumers.contains_key(consumer), entries_read)
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
                entries_read,
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
