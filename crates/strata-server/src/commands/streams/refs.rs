//! Redis 8.2's consumer-group references: XDELEX, XACKDEL, and the
//! KEEPREF / DELREF / ACKED strategy XADD's and XTRIM's trimming take.
//!
//! An entry is *referenced* while a consumer group still needs it: the
//! group has not had it delivered yet, or has it pending
//! ([`StreamValue::is_referenced`]). The strategies say what deleting an
//! entry does about that:
//! - KEEPREF (the default, XDEL's behaviour): the entry goes, pending
//!   lists keep their now dangling IDs;
//! - DELREF: the entry goes and so does its ID from every group's and
//!   consumer's pending list;
//! - ACKED: only an entry no group needs goes; the others stay.
//!
//! Everything is made of the operations XDEL, XACK and trimming already
//! log (`Delete`, `Ack`, `TrimEntries`), decided here from the stream as
//! it is, so replay repeats it exactly.

use bytes::Bytes;
use strata_engine::types::stream::{StreamId, StreamOp, StreamValue, Trim};

use super::common::*;
use crate::commands::{CmdError, CmdResult, Ctx, ERR_SYNTAX, is};
use crate::events::notify;

/// An entry's reply in XDELEX and XACKDEL.
const NOT_FOUND: i64 = -1;
const DELETED: i64 = 1;
const STILL_REFERENCED: i64 = 2;

/// `[KEEPREF | DELREF | ACKED] IDS numids id ...` from `args[from..]`, in
/// any order: the strategy and the IDs (unparsed: Redis checks them only
/// when the key exists).
fn parse_ids_block(args: &[Bytes], from: usize) -> Result<(Refs, &[Bytes]), CmdError> {
    let mut refs = None;
    let mut ids = None;
    let mut i = from;
    while i < args.len() {
        if let Some(parsed) = Refs::parse(&args[i]) {
            if refs.is_some() {
                return Err(ERR_SYNTAX.into());
            }
            refs = Some(parsed);
            i += 1;
        } else if is(&args[i], "IDS") && i + 1 < args.len() {
            let count = crate::commands::parse_i64(&args[i + 1])
                .ok()
                .filter(|&n| n > 0)
                .ok_or("ERR Number of IDs must be a positive integer")?
                as usize;
            let first = i + 2;
            if count > args.len() - first {
                return Err("ERR The `numids` parameter must match the number of arguments".into());
            }
            // A second IDS block replaces the first, as in Redis.
            ids = Some(&args[first..first + count]);
            i = first + count;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    let ids = ids.ok_or("ERR IDS option is required")?;
    Ok((refs.unwrap_or_default(), ids))
}

fn parse_ids(ids: &[Bytes]) -> Result<Vec<StreamId>, CmdError> {
    ids.iter().map(|id| parse_id(id, 0, true)).collect()
}

fn reply_all(ctx: &mut Ctx, replies: &[i64]) {
    ctx.out.array(replies.len());
    for &reply in replies {
        ctx.out.int(reply);
    }
}

/// The operations that delete `entries` (and, for DELREF, take `ids` out
/// of every pending list), applied in order; answers the entries removed.
fn delete(
    ctx: &mut Ctx,
    name: &[u8],
    unreference: Vec<(Vec<u8>, Vec<StreamId>)>,
    entries: Vec<StreamId>,
) -> Result<u64, CmdError> {
    let key = ctx.key(name);
    for (group, ids) in &unreference {
        change(
            ctx,
            key,
            &StreamOp::Ack {
                group,
                ids: ids.clone(),
            },
            false,
        )?;
    }
    if entries.is_empty() {
        return Ok(0);
    }
    let removed = change(ctx, key, &StreamOp::Delete(entries), false)?;
    if removed > 0 {
        ctx.notify(notify::STREAM, "xdel", name);
    }
    Ok(removed)
}

/// XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id ... (Redis 8.2):
/// per ID, 1 deleted, -1 not in the stream, 2 kept because a group still
/// needs it (ACKED).
pub fn xdelex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    // As in Redis: the type first, then the arguments; a missing key
    // answers -1 for every ID without looking at them.
    let exists = with_stream(ctx, &args[1], |stream, _| stream.is_some())?;
    let (refs, ids) = parse_ids_block(args, 2)?;
    if !exists {
        reply_all(ctx, &vec![NOT_FOUND; ids.len()]);
        return Ok(());
    }
    let ids = parse_ids(ids)?;
    let plan = with_stream(ctx, &args[1], |stream, _| {
        let stream = stream.expect("checked above under the same lock");
        let mut gone = std::collections::BTreeSet::new();
        let replies: Vec<i64> = (ids.iter())
            .map(|&id| {
                if refs == Refs::Acked && stream.is_referenced(id) {
                    STILL_REFERENCED
                } else if stream.get(id).is_some() && gone.insert(id) {
                    DELETED
                } else {
                    NOT_FOUND
                }
            })
            .collect();
        let unreference = match refs {
            Refs::Delete => stream.pending_among(&ids),
            _ => Vec::new(),
        };
        (replies, unreference, gone.into_iter().collect::<Vec<_>>())
    })?;
    let (replies, unreference, entries) = plan;
    delete(ctx, &args[1], unreference, entries)?;
    reply_all(ctx, &replies);
    Ok(())
}

/// XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id ... (Redis
/// 8.2): acknowledges each ID pending in the group and deletes its entry
/// as the strategy allows. Per ID, -1 not pending in the group (nothing
/// done), 1 acknowledged and deleted (also when the entry was gone
/// already), 2 acknowledged and kept because another group needs it
/// (ACKED). A missing key or group answers -1 for every ID.
pub fn xackdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let exists = with_stream(ctx, &args[1], |stream, _| stream.is_some())?;
    let (refs, ids) = parse_ids_block(args, 3)?;
    let group: &[u8] = &args[2];
    let has_group = exists
        && with_stream(ctx, &args[1], |stream, _| {
            stream.is_some_and(|s| s.groups.contains_key(group))
        })?;
    if !has_group {
        reply_all(ctx, &vec![NOT_FOUND; ids.len()]);
        return Ok(());
    }
    let ids = parse_ids(ids)?;
    let plan = with_stream(ctx, &args[1], |stream, _| {
        let stream = stream.expect("checked above under the same lock");
        plan_ack_delete(stream, group, refs, &ids)
    })?;
    let (replies, acked, unreference, entries) = plan;
    let key = ctx.key(&args[1]);
    if !acked.is_empty() {
        change(ctx, key, &StreamOp::Ack { group, ids: acked }, false)?;
    }
    delete(ctx, &args[1], unreference, entries)?;
    reply_all(ctx, &replies);
    Ok(())
}

type AckDeletePlan = (
    Vec<i64>,
    Vec<StreamId>,
    Vec<(Vec<u8>, Vec<StreamId>)>,
    Vec<StreamId>,
);

/// XACKDEL's replies and what it acknowledges, unreferences and deletes.
fn plan_ack_delete(
    stream: &StreamValue,
    group: &[u8],
    refs: Refs,
    ids: &[StreamId],
) -> AckDeletePlan {
    let pending = &stream.groups[group].pending;
    let mut acked = Vec::new();
    let mut entries = Vec::new();
    let replies = (ids.iter())
        .map(|&id| {
            if !pending.contains_key(&id) || acked.contains(&id) {
                return NOT_FOUND;
            }
            acked.push(id);
            if refs == Refs::Acked && stream.is_referenced_apart_from(id, Some(group)) {
                return STILL_REFERENCED;
            }
            entries.push(id);
            DELETED
        })
        .collect();
    let unreference = match refs {
        Refs::Delete => (stream.pending_among(&entries).into_iter())
            .filter(|(name, _)| name != group)
            .collect(),
        _ => Vec::new(),
    };
    (replies, acked, unreference, entries)
}

/// Trims the stream at `name` with references counted (DELREF, ACKED);
/// answers the entries removed.
pub(super) fn trim_with_refs(
    ctx: &mut Ctx,
    name: &[u8],
    trim: Trim,
    refs: Refs,
) -> Result<u64, CmdError> {
    let plan = with_stream(ctx, name, |stream, _| {
        stream.map(|s| {
            let ids = s.trim_entries(trim, refs == Refs::Acked);
            let unreference = match refs {
                Refs::Delete => s.pending_among(&ids),
                _ => Vec::new(),
            };
            (ids, unreference)
        })
    })?;
    let Some((ids, unreference)) = plan else {
        return Ok(0);
    };
    if ids.is_empty() {
        return Ok(0);
    }
    let key = ctx.key(name);
    for (group, held) in &unreference {
        change(
            ctx,
            key,
            &StreamOp::Ack {
                group,
                ids: held.clone(),
            },
            false,
        )?;
    }
    let removed = change(ctx, key, &StreamOp::TrimEntries(ids), false)?;
    if removed > 0 {
        ctx.notify(notify::STREAM, "xtrim", name);
    }
    Ok(removed)
}
