//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE,
//! LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP, and
//! the blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
//!
//! Reads borrow the stored list ([`ListValue`]) under the shard lock and
//! reply from it. Writes describe their effect as a [`ListOp`] that the
//! engine applies and logs as it is (a LIST_OP record), so the bytes
//! logged grow with the arguments, not with the list. A command that
//! leaves a list empty deletes its key in the same lock hold, as Redis
//! does; a push onto a missing key creates the list.
//!
//! A blocking command that finds nothing replies nothing and blocks
//! ([`Ctx::block`]); its connection runs it again when a key changes
//! (`crate::events::blocking`), so the blocking forms are the plain ones plus that.

use bytes::Bytes;
use strata_engine::Value;
use strata_engine::keyspace::shards::{KeyRef, Shard};
use strata_engine::types::collection::List;
use strata_engine::types::list::{Applied, End, ListOp, ListValue};
use strata_resp::ReplyWriter;

use super::{
    CmdError, CmdResult, Ctx, ERR_NO_SUCH_KEY, ERR_SYNTAX, is, mpop_args, parse_i64,
    parse_negatable_i64, parse_timeout,
};
use crate::events::notify;
use crate::net::session::TimeoutReply;

/// The event of a push or pop at `end`.
fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

const ERR_INDEX_RANGE: &str = "ERR index out of range";
const ERR_MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
const ERR_RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
const ERR_COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
const ERR_MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";

/// LEFT or RIGHT.
fn end_word(arg: &[u8]) -> Option<End> {
    if is(arg, "left") {
        Some(End::Head)
    } else if is(arg, "right") {
        Some(End::Tail)
    } else {
        None
    }
}

fn parse_end(arg: &[u8]) -> Result<End, CmdError> {
    end_word(arg).ok_or(ERR_SYNTAX.into())
}

/// A count that must not be negative (LPOP's, RPOP's).
fn parse_positive(arg: &[u8]) -> Result<usize, CmdError> {
    let n = parse_i64(arg).map_err(|_| CmdError::from(ERR_MUST_BE_POSITIVE))?;
    usize::try_from(n).map_err(|_| ERR_MUST_BE_POSITIVE.into())
}

/// Redis' index normalization for LRANGE and LTRIM: the inclusive range
/// `start..=stop` of a list of `len` elements, or `None` when empty.
fn span(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop + len
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

/// A list with `elements` pushed at `end`, as a new key's value.
pub(super) fn new_list(end: End, elements: Vec<&[u8]>) -> Value<'static> {
    let mut list = ListValue::new();
    ListOp::Push(end, elements).apply(&mut list, Default::default());
    let mut image = Vec::with_capacity(list.image_len());
    list.encode_image(&mut image);
    Value::List(image.into())
}

/// Applies `op` to the list at `key` (which must exist) and deletes the
/// key if that left it empty.
fn change(
    shard: &mut Shard,
    db: usize,
    key: KeyRef,
    op: &ListOp,
    now: u64,
) -> Result<Applied, CmdError> {
    let changed = shard.change_as::<List>(db, key, now, op, false)?;
    Ok(changed.ok_or(ERR_NO_SUCH_KEY)?)
}

/// Runs `reply` on the list at `key` (`None` when missing) under its
/// shard lock; WRONGTYPE for another type.
fn read_list(
    ctx: &mut Ctx,
    key: &[u8],
    reply: impl FnOnce(&mut ReplyWriter, Option<&ListValue>),
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(key), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let entry = shard.get_as::<List>(db, key, now)?;
    reply(&mut ctx.out, entry.as_ref().and_then(|e| e.value().list()));
    Ok(())
}

/// Pushes `elements` at `end` of the list at `key`, in one lookup;
/// creates the list unless `existing_only` (LPUSHX, RPUSHX). Returns the
/// new length (0 for a missing key left alone).
fn push_to(
    shard: &mut Shard,
    db: usize,
    key: KeyRef,
    end: End,
    elements: Vec<&[u8]>,
    existing_only: bool,
    now: u64,
) -> Result<usize, CmdError> {
    let op = ListOp::Push(end, elements);
    match shard.change_as::<List>(db, key, now, &op, !existing_only)? {
        None => Ok(0),
        Some(Applied::Len(Some(len))) => Ok(len),
        Some(other) => unreachable!("a push reports its length: {other:?}"),
    }
}

fn push(ctx: &mut Ctx, args: &[Bytes], end: End, existing_only: bool) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let elements = args[2..].iter().map(|a| &a[..]).collect();
    let len = push_to(
        ctx.keys.shard(key),
        db,
        key,
        end,
        elements,
        existing_only,
        now,
    )?;
    if len > 0 {
        ctx.notify(notify::LIST, push_event(end), &args[1]);
    }
    ctx.out.int(len as i64);
    Ok(())
}

pub fn lpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, args, End::Head, false)
}

pub fn rpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, args, End::Tail, false)
}

pub fn lpushx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, args, End::Head, true)
}

pub fn rpushx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push(ctx, args, End::Tail, true)
}

/// Pops up to `count` elements at `end` of the list at `key`: `None`
/// when there is no such key.
fn pop_from(
    shard: &mut Shard,
    db: usize,
    key: KeyRef,
    end: End,
    count: usize,
    now: u64,
) -> Result<Option<Vec<Vec<u8>>>, CmdError> {
    let Some(entry) = shard.get_as::<List>(db, key, now)? else {
        return Ok(None);
    };
    // The count popped, not asked (a replica is sent `LPOP key 2` for
    // LPOP key 10 of a list of two, as Redis sends it).
    let count = count.min(entry.value().list().map_or(0, ListValue::len));
    match change(shard, db, key, &ListOp::Pop(end, count), now)? {
        Applied::Popped(popped) => Ok(Some(popped)),
        other => unreachable!("a pop reports its elements: {other:?}"),
    }
}

fn pop(ctx: &mut Ctx, args: &[Bytes], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        )
        .into());
    }
    let count = args.get(2).map(|a| parse_positive(a)).transpose()?;
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    if count == Some(0) {
        // Redis answers an empty array for an existing list, and checks
        // the key's type first.
        return match shard.get_as::<List>(db, key, now)? {
            Some(_) => {
                ctx.out.array(0);
                Ok(())
            }
            None => {
                ctx.out.null_array();
                Ok(())
            }
        };
    }
    let popped = pop_from(shard, db, key, end, count.unwrap_or(1), now)?;
    if popped.is_some() {
        ctx.notify_write(notify::LIST, pop_event(end), &args[1]);
    }
    match (popped, count) {
        (None, Some(_)) => ctx.out.null_array(),
        (None, None) => ctx.out.null_bulk(),
        (Some(elements), Some(_)) => {
            ctx.out.array(elements.len());
            for element in &elements {
                ctx.out.bulk(element);
            }
        }
        (Some(elements), None) => ctx.out.bulk(&elements[0]),
    }
    Ok(())
}

pub fn lpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    pop(ctx, args, End::Head)
}

pub fn rpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    pop(ctx, args, End::Tail)
}

pub fn llen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_list(ctx, &args[1], |out, list| {
        out.int(list.map_or(0, ListValue::len) as i64)
    })
}

pub fn lrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (start, stop) = (parse_i64(&args[2])?, parse_i64(&args[3])?);
    read_list(ctx, &args[1], |out, list| {
        let Some(list) = list else {
            return out.array(0);
        };
        match span(start, stop, list.len()) {
            Some((start, stop)) => {
                out.array(stop - start + 1);
                for element in list.range(start, stop) {
                    out.bulk(element);
                }
            }
            None => out.array(0),
        }
    })
}

/// A Redis index (negative from the tail) into a list of `len`.
fn index_of(index: i64, len: usize) -> Option<usize> {
    let index = if index < 0 { index + len as i64 } else { index };
    (0..len as i64).contains(&index).then_some(index as usize)
}

/// LINDEX and LSET look their key up before they read the index, as
/// Redis does: a missing key or another type is the answer whatever the
/// index says.
pub fn lindex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let entry = ctx.keys.shard(key).get_as::<List>(db, key, now)?;
    let Some(list) = entry.as_ref().and_then(|e| e.value().list()) else {
        ctx.out.null_bulk();
        return Ok(());
    };
    let index = parse_i64(&args[2])?;
    match index_of(index, list.len()).and_then(|i| list.get(i)) {
        Some(element) => ctx.out.bulk(element),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

pub fn lset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let len = shard
        .get_as::<List>(db, key, now)?
        .ok_or(ERR_NO_SUCH_KEY)?
        .value()
        .list()
        .map_or(0, ListValue::len);
    let index = parse_i64(&args[2])?;
    let index = index_of(index, len).ok_or(ERR_INDEX_RANGE)?;
    change(shard, db, key, &ListOp::Set(index, &args[3]), now)?;
    ctx.notify(notify::LIST, "lset", &args[1]);
    ctx.out.ok();
    Ok(())
}

pub fn linsert(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let after = if is(&args[2], "after") {
        true
    } else if is(&args[2], "before") {
        false
    } else {
        return Err(ERR_SYNTAX.into());
    };
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let Some(entry) = shard.get_as::<List>(db, key, now)? else {
        ctx.out.int(0);
        return Ok(());
    };
    // A missing pivot changes nothing, and so logs nothing.
    let has_pivot = entry
        .value()
        .list()
        .is_some_and(|l| l.iter().any(|e| e == &args[3][..]));
    if !has_pivot {
        ctx.out.int(-1);
        return Ok(());
    }
    let op = ListOp::Insert {
        pivot: &args[3],
        after,
        element: &args[4],
    };
    match entry.change::<List>(db, &op, now) {
        Applied::Len(Some(len)) => ctx.out.int(len as i64),
        other => unreachable!("the pivot was there: {other:?}"),
    }
    ctx.notify(notify::LIST, "linsert", &args[1]);
    Ok(())
}

pub fn lrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let count = parse_i64(&args[2])?;
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let Some(entry) = shard.get_as::<List>(db, key, now)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let element = &args[3][..];
    if !entry
        .value()
        .list()
        .is_some_and(|l| l.iter().any(|e| e == element))
    {
        ctx.out.int(0);
        return Ok(());
    }
    match change(shard, db, key, &ListOp::Remove { count, element }, now)? {
        Applied::Removed(removed) => ctx.out.int(removed as i64),
        other => unreachable!("a removal counts: {other:?}"),
    }
    ctx.notify_write(notify::LIST, "lrem", &args[1]);
    Ok(())
}

pub fn ltrim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (start, stop) = (parse_i64(&args[2])?, parse_i64(&args[3])?);
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    if let Some(entry) = shard.get_as::<List>(db, key, now)? {
        let len = entry.value().list().map_or(0, ListValue::len);
        match span(start, stop, len) {
            Some((0, stop)) if stop + 1 == len => {}
            Some((start, stop)) => {
                change(shard, db, key, &ListOp::Trim(start, stop), now)?;
            }
            None => {
                shard.remove(db, key, now);
            }
        }
        ctx.notify_write(notify::LIST, "ltrim", &args[1]);
    }
    ctx.out.ok();
    Ok(())
}

pub fn lpos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
    for option in args[3..].chunks(2) {
        let [name, value] = option else {
            return Err(ERR_SYNTAX.into());
        };
        if is(name, "rank") {
            // Redis 7.2+ refuses LLONG_MIN (its negation overflows).
            rank = parse_negatable_i64(value)?;
            if rank == 0 {
                return Err(ERR_RANK_ZERO.into());
            }
        } else if is(name, "count") {
            // Redis answers its "can't be negative" for anything but a
            // count, a word included.
            let n = parse_i64(value).map_err(|_| ERR_COUNT_NEGATIVE)?;
            count = Some(usize::try_from(n).map_err(|_| ERR_COUNT_NEGATIVE)?);
        } else if is(name, "maxlen") {
            let n = parse_i64(value).map_err(|_| ERR_MAXLEN_NEGATIVE)?;
            maxlen = usize::try_from(n).map_err(|_| ERR_MAXLEN_NEGATIVE)?;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    let element = &args[2][..];
    read_list(ctx, &args[1], |out, list| {
        let found = list.map_or_else(Vec::new, |l| {
            l.positions(element, rank, count.unwrap_or(1), maxlen)
        });
        match count {
            Some(_) => {
                out.array(found.len());
                for index in found {
                    out.int(index as i64);
                }
            }
            None => match found.first() {
                Some(&index) => out.int(index as i64),
                None => out.null_bulk(),
            },
        }
    })
}

/// Pops at `from` of `source` and pushes at `to` of `destination`
/// (LMOVE, RPOPLPUSH, and the blocking forms), replying with the element
/// moved; false (nothing replied) when `source` is missing. The
/// destination's type is checked before anything moves.
fn move_element(ctx: &mut Ctx, args: &[Bytes], from: End, to: End) -> Result<bool, CmdError> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let (source, destination) = (ctx.key(&args[1]), ctx.key(&args[2]));
    if source_list(ctx, source)?.is_none() {
        return Ok(false);
    }
    ctx.keys
        .shard(destination)
        .get_as::<List>(db, destination, now)?;
    let shard = ctx.keys.shard(source);
    let entry = shard
        .get_as::<List>(db, source, now)?
        .expect("checked above");
    let Applied::Popped(mut popped) = entry.change::<List>(db, &ListOp::Pop(from, 1), now) else {
        unreachable!("a pop reports its elements");
    };
    let element = popped.pop().expect("a list is never empty");
    // The push says it moves what the pop took: the replication stream
    // sends the two as one LMOVE, as Redis does.
    let moved = ListOp::Moved(to, &element);
    (ctx.keys.shard(destination)).change_as::<List>(db, destination, now, &moved, true)?;
    // Only now: moving the last element of a list onto itself keeps it.
    let shard = ctx.keys.shard(source);
    if shard
        .peek(db, source, now)
        .is_some_and(|e| e.value().list().is_some_and(ListValue::is_empty))
    {
        shard.remove_emptied(db, source, now);
    }
    ctx.out.bulk(&element);
    ctx.notify(notify::LIST, push_event(to), &args[2]);
    ctx.notify_write(notify::LIST, pop_event(from), &args[1]);
    Ok(true)
}

/// Whether the list at `key` exists (WRONGTYPE for another type, except
/// while a blocked command runs again: then it counts as missing, as it
/// does while a client that blocked on it earlier still waits).
fn source_list(ctx: &mut Ctx, key: KeyRef) -> Result<Option<()>, CmdError> {
    if ctx.waits_behind(key.bytes) {
        return Ok(None);
    }
    let (db, now, retry) = (ctx.db(), ctx.now_ms, ctx.session.block_retry);
    match ctx.keys.shard(key).get_as::<List>(db, key, now) {
        Ok(found) => Ok(found.map(|_| ())),
        Err(_) if retry => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub fn lmove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (from, to) = (parse_end(&args[3])?, parse_end(&args[4])?);
    if !move_element(ctx, args, from, to)? {
        ctx.out.null_bulk();
    }
    Ok(())
}

pub fn rpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if !move_element(ctx, args, End::Tail, End::Head)? {
        ctx.out.null_bulk();
    }
    Ok(())
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
pub fn blmove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (from, to) = (parse_end(&args[3])?, parse_end(&args[4])?);
    let deadline = parse_timeout(&args[5], ctx.now_ms)?;
    if !move_element(ctx, args, from, to)? {
        ctx.block(&args[1..2], deadline, TimeoutReply::NullBulk);
    }
    Ok(())
}

/// BRPOPLPUSH source destination timeout.
pub fn brpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let deadline = parse_timeout(&args[3], ctx.now_ms)?;
    if !move_element(ctx, args, End::Tail, End::Head)? {
        ctx.block(&args[1..2], deadline, TimeoutReply::NullBulk);
    }
    Ok(())
}

/// Pops up to `count` elements at `end` of the first non-empty list of
/// `names`, replying `[key, elements]` (`[key, element]` with `single`,
/// BLPOP's shape); false (nothing replied) when every list is missing.
fn pop_first(
    ctx: &mut Ctx,
    names: &[Bytes],
    end: End,
    count: usize,
    single: bool,
) -> Result<bool, CmdError> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    for name in names {
        let key = ctx.key(name);
        if source_list(ctx, key)?.is_none() {
            continue;
        }
        let popped =
            pop_from(ctx.keys.shard(key), db, key, end, count, now)?.expect("the list exists");
        ctx.notify_write(notify::LIST, pop_event(end), name);
        ctx.out.array(2);
        ctx.out.bulk(name);
        if single {
            ctx.out.bulk(&popped[0]);
        } else {
            ctx.out.array(popped.len());
            for element in &popped {
                ctx.out.bulk(element);
            }
        }
        return Ok(true);
    }
    Ok(false)
}

/// BLPOP and BRPOP: key [key ...] timeout.
fn blocking_pop(ctx: &mut Ctx, args: &[Bytes], end: End) -> CmdResult {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    let deadline = parse_timeout(&timeout[0], ctx.now_ms)?;
    if !pop_first(ctx, keys, end, 1, true)? {
        ctx.block(keys, deadline, TimeoutReply::NullArray);
    }
    Ok(())
}

pub fn blpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    blocking_pop(ctx, args, End::Head)
}

pub fn brpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    blocking_pop(ctx, args, End::Tail)
}

pub fn lmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (keys, end, count) = mpop_args(args, 1, end_word)?;
    if !pop_first(ctx, keys, end, count, false)? {
        ctx.out.null_array();
    }
    Ok(())
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub fn blmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let deadline = parse_timeout(&args[1], ctx.now_ms)?;
    let (keys, end, count) = mpop_args(args, 2, end_word)?;
    if !pop_first(ctx, keys, end, count, false)? {
        ctx.block(keys, deadline, TimeoutReply::NullArray);
    }
    Ok(())
}
