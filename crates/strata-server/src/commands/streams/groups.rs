//! XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM: consumer groups and their
//! pending entries.

use bytes::Bytes;
use strata_engine::types::stream::{Group, StreamId, StreamOp};

use super::common::*;
use crate::commands::ctx::help_lines;
use crate::commands::{CmdError, CmdResult, Ctx, ERR_SYNTAX, is, parse_i64};
use crate::events::notify;

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
    let min_idle = strata_engine::types::value::parse_canonical_i64(&args[4])
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
                // FORCE makes a pending entry delivered once, which the
                // claim then counts again, as Redis does (a new entry
                // claimed without JUSTID shows 2 deliveries).
                None => 1,
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
            strata_engine::types::value::parse_canonical_i64(&args[j + 1]).ok_or_else(|| {
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
    let min_idle = strata_engine::types::value::parse_canonical_i64(&args[4])
        .ok_or(CmdError::from(
            "ERR Invalid min-idle-time argument for XAUTOCLAIM",
        ))?
        .max(0);
    let start = parse_bound(&args[5], 0, true)?;
    let (mut count, mut justid) = (100u64, false);
    let mut j = 6;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = match strata_engine::types::value::parse_canonical_i64(&args[j + 1]) {
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
