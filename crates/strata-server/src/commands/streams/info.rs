//! XINFO STREAM [FULL], GROUPS, CONSUMERS, HELP.

use bytes::Bytes;
use strata_engine::types::stream::{Group, StreamId, StreamValue};

use super::common::*;
use crate::commands::ctx::help_lines;
use crate::commands::{CmdError, CmdResult, Ctx, ERR_NO_SUCH_KEY, is, parse_i64};

// --- XINFO ----------------------------------------------------------------------

fn write_lag(out: &mut strata_resp::ReplyWriter, stream: &StreamValue, group: &Group) {
    match stream.lag(group) {
        Some(lag) => out.int(lag),
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
            Some(count) => info_full(out, stream, count),
        }
        Ok::<(), CmdError>(())
    })?
}

fn info_full(out: &mut strata_resp::ReplyWriter, stream: &StreamValue, count: usize) {
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
