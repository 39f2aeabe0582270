//! XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID: a stream's entries.

use bytes::Bytes;
use strata_engine::types::stream::{StreamId, StreamOp, StreamValue, Trim};

use super::common::Refs;
use super::common::*;
use super::refs::trim_with_refs;
use crate::commands::{CmdError, CmdResult, Ctx, ERR_NO_SUCH_KEY, ERR_SYNTAX, is, parse_i64};
use crate::events::notify;

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

/// XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED]
/// [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value
/// [field value ...].
pub fn xadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (node_entries, node_bytes) = node_limits(ctx);
    let parsed = parse_trim_args(args, true, node_entries)?;
    let (id_at, given) = (parsed.id_at, parsed.given);
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
        trim_stream(ctx, name, trim, parsed.refs)?;
    }
    Ok(())
}

/// Trims the stream at `name` as `trim` says, `refs` deciding about the
/// entries consumer groups still reference; answers the entries removed.
fn trim_stream(ctx: &mut Ctx, name: &[u8], trim: Trim, refs: Refs) -> Result<u64, CmdError> {
    if refs != Refs::Keep {
        return trim_with_refs(ctx, name, trim, refs);
    }
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
        (true, Some(trim)) => trim_stream(ctx, &args[1], trim, parsed.refs)?,
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
    // As Redis: a missing key answers 0 (and a wrong type its error)
    // before the IDs are looked at.
    let exists = with_stream(ctx, &args[1], |stream, _| stream.is_some())?;
    let deleted = if exists {
        let ids = (args[2..].iter())
            .map(|a| parse_id(a, 0, true))
            .collect::<Result<Vec<_>, _>>()?;
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
