//! Sorted set commands: ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD,
//! ZCOUNT, ZLEXCOUNT, ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES),
//! ZRANGESTORE, ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
//! ZREVRANGEBYLEX, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZMPOP, the blocking
//! BZPOPMIN, BZPOPMAX, BZMPOP, ZUNION, ZINTER, ZDIFF and their STORE
//! forms, ZINTERCARD, ZRANDMEMBER, ZREMRANGEBYRANK/SCORE/LEX, ZSCAN.
//!
//! Every query is a range of *positions* in the set's order
//! ([`ZSetValue::partition_point`] turns a score or lex bound into one),
//! so ranges by rank, score and lex share one selection ([`select`]) and
//! LIMIT and REV apply to positions. Scores are parsed with C's `strtod`
//! and printed as Redis 7.2+ prints them (the shortest text of the value,
//! `strata_resp::redis_double`), so `1.1` answers `1.1`. Writes log a [`ZSetOp`] with final
//! scores (a ZSET_OP record); ZPOPMIN and the range removals log the
//! members they removed.

use crate::events::notify;
use std::collections::HashMap;
use std::ffi::CString;
use strata_engine::types::collection::ZSet;

use bytes::Bytes;
use strata_engine::Value;
use strata_engine::keyspace::shards::{KeyRef, Shard, random_u64};
use strata_engine::types::set::scan_position;
use strata_engine::types::zset::{ZSetOp, ZSetValue, image_of};
use strata_resp::{Protocol, ReplyWriter};

use super::sets::numkeys_and_limit;
use super::{
    CmdError, CmdResult, Ctx, ERR_NOT_FLOAT, ERR_SYNTAX, ERR_WRONGTYPE, ScanArgs, ScanSlice, is,
    mpop_args, parse_i64, parse_negatable_i64, parse_timeout,
};
use crate::net::session::TimeoutReply;

/// Owned entries (score, member), as commands copy them out of a set.
type Entries = Vec<(f64, Vec<u8>)>;

const ERR_MIN_MAX_FLOAT: &str = "ERR min or max is not a float";
const ERR_MIN_MAX_LEX: &str = "ERR min or max not valid string range item";
const ERR_NAN: &str = "ERR resulting score is not a number (NaN)";
const ERR_LIMIT_NEEDS_SCORE_OR_LEX: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
const ERR_MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
/// Replies of ZRANDMEMBER with a negative count: beyond this many the
/// reply could not be sent anyway.
const RANDOM_MEMBERS_MAX: u64 = 1 << 24;

/// C's `strtod` over all of `text`: `None` unless every byte is used.
pub fn strtod_whole(text: &[u8]) -> Option<(f64, bool)> {
    let c = CString::new(text).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call,
    // and `end` is a valid place for strtod to store its end pointer; errno
    // is this thread's.
    let (value, range_error) = unsafe {
        *libc::__errno_location() = 0;
        let value = libc::strtod(c.as_ptr(), &mut end);
        (value, *libc::__errno_location() == libc::ERANGE)
    };
    let used = end as usize - c.as_ptr() as usize;
    (used == text.len()).then_some((value, range_error))
}

/// A double argument as Redis' `getDoubleFromObject` reads it: all of it,
/// no leading space, no overflow or underflow, not NaN.
pub fn parse_double(arg: &[u8]) -> Option<f64> {
    if arg.first().is_none_or(u8::is_ascii_whitespace) {
        return None;
    }
    let (value, range_error) = strtod_whole(arg)?;
    let bad_range = range_error && (value.is_infinite() || value == 0.0);
    (!bad_range && !value.is_nan()).then_some(value)
}

fn parse_score(arg: &[u8]) -> Result<f64, CmdError> {
    parse_double(arg).ok_or(CmdError::from(ERR_NOT_FLOAT))
}

/// A score as Redis 7.2+ prints it ([`strata_resp::redis_double`]: the
/// shortest digits that read back as the score, `1.1` where 7.0 printed
/// `%.17g`'s `1.1000000000000001`).
pub fn score_text(score: f64) -> Vec<u8> {
    strata_resp::redis_double(score).into_bytes()
}

fn write_score(out: &mut ReplyWriter, score: f64) {
    out.double_text(&score_text(score));
}

/// One end of a score range: `(` makes it exclusive.
#[derive(Clone, Copy, Debug)]
struct ScoreBound {
    value: f64,
    exclusive: bool,
}

fn parse_score_bound(arg: &[u8]) -> Result<ScoreBound, CmdError> {
    let (exclusive, text) = match arg.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, arg),
    };
    // Redis' zslParseRange: plain strtod, all of it, not NaN.
    match strtod_whole(text) {
        Some((value, _)) if !value.is_nan() => Ok(ScoreBound { value, exclusive }),
        _ => Err(ERR_MIN_MAX_FLOAT.into()),
    }
}

/// One end of a lex range.
#[derive(Clone, Debug)]
enum LexBound {
    Min,
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

fn parse_lex_bound(arg: &[u8]) -> Result<LexBound, CmdError> {
    match arg {
        b"-" => Ok(LexBound::Min),
        b"+" => Ok(LexBound::Max),
        [b'[', rest @ ..] => Ok(LexBound::Inclusive(rest.to_vec())),
        [b'(', rest @ ..] => Ok(LexBound::Exclusive(rest.to_vec())),
        _ => Err(ERR_MIN_MAX_LEX.into()),
    }
}

/// What a range selects, before LIMIT and REV.
#[derive(Clone, Debug)]
enum RangeBy {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

impl RangeBy {
    /// Positions `[lo, hi)` of a score or lex range (empty when the bounds
    /// cross); `rev` for the reversed commands, whose lex range on a
    /// listpack is found from its end (see [`packed_lex_positions`]).
    fn positions(&self, zset: &ZSetValue, rev: bool) -> (usize, usize) {
        let (lo, hi) = match self {
            RangeBy::Rank(..) => unreachable!("ranks are positions already"),
            RangeBy::Score(min, max) => (
                zset.partition_point(|s, _| s < min.value || (min.exclusive && s == min.value)),
                zset.partition_point(|s, _| s < max.value || (!max.exclusive && s == max.value)),
            ),
            // Redis' first check (zslIsInLexRange): nothing when the last
            // member is below the minimum or the first above the maximum.
            RangeBy::Lex(min, max) if !lex_may_hold(zset, min, max) => (0, 0),
            RangeBy::Lex(min, max) if zset.encoding_name() == "listpack" => {
                packed_lex_positions(zset, min, max, rev)
            }
            RangeBy::Lex(min, max) => (
                zset.partition_point(|_, m| !at_least(m, min)),
                zset.partition_point(|_, m| at_most(m, max)),
            ),
        };
        (lo, hi.max(lo))
    }
}

/// Whether `member` is at or past the lex bound `min`.
fn at_least(member: &[u8], min: &LexBound) -> bool {
    match min {
        LexBound::Min => true,
        LexBound::Max => false,
        LexBound::Inclusive(v) => member >= &v[..],
        LexBound::Exclusive(v) => member > &v[..],
    }
}

/// Whether `member` is at or before the lex bound `max`.
fn at_most(member: &[u8], max: &LexBound) -> bool {
    match max {
        LexBound::Min => false,
        LexBound::Max => true,
        LexBound::Inclusive(v) => member <= &v[..],
        LexBound::Exclusive(v) => member < &v[..],
    }
}

/// A lex range of a listpack as Redis walks one: from the first member
/// at or past `min` (from the last at or before `max` when reversed), on
/// while members stay in range. With equal scores, as lex ranges assume,
/// that is the range a binary search finds; with mixed scores it is the
/// answer Redis gives (a small set only; a large one is searched, as
/// Redis' skiplist is).
fn packed_lex_positions(
    zset: &ZSetValue,
    min: &LexBound,
    max: &LexBound,
    rev: bool,
) -> (usize, usize) {
    let members: Vec<&[u8]> = zset
        .range(0, zset.len())
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    if rev {
        let Some(hi) = members.iter().rposition(|m| at_most(m, max)) else {
            return (0, 0);
        };
        let lo = members[..=hi]
            .iter()
            .rposition(|m| !at_least(m, min))
            .map_or(0, |below| below + 1);
        (lo, hi + 1)
    } else {
        let Some(lo) = members.iter().position(|m| at_least(m, min)) else {
            return (0, 0);
        };
        let hi = members[lo..]
            .iter()
            .position(|m| !at_most(m, max))
            .map_or(members.len(), |past| lo + past);
        (lo, hi)
    }
}

/// Whether the members at the ends of `zset` leave room for members in
/// `[min, max]` (Redis' `zslIsInLexRange`).
fn lex_may_hold(zset: &ZSetValue, min: &LexBound, max: &LexBound) -> bool {
    let len = zset.len();
    let (Some(&(_, first)), Some(&(_, last))) = (
        zset.range(0, 1).first(),
        zset.range(len.saturating_sub(1), len).first(),
    ) else {
        return false;
    };
    at_least(last, min) && at_most(first, max)
}

/// Redis' rank normalization: the inclusive positions `start..=stop` of a
/// set of `len`, or `None` when empty.
fn rank_span(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
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

/// A whole range request.
#[derive(Clone, Debug)]
struct RangeSpec {
    by: RangeBy,
    rev: bool,
    /// LIMIT offset count (a negative count: all).
    limit: Option<(i64, i64)>,
    withscores: bool,
}

/// The entries `spec` selects, in reply order.
fn select<'z>(zset: &'z ZSetValue, spec: &RangeSpec) -> Vec<(f64, &'z [u8])> {
    let len = zset.len();
    if let RangeBy::Rank(start, stop) = spec.by {
        let Some((start, stop)) = rank_span(start, stop, len) else {
            return Vec::new();
        };
        if !spec.rev {
            return zset.range(start, stop + 1);
        }
        let mut out = zset.range(len - 1 - stop, len - start);
        out.reverse();
        return out;
    }
    let (lo, hi) = spec.by.positions(zset, spec.rev);
    let (offset, count) = spec.limit.unwrap_or((0, -1));
    if offset < 0 {
        return Vec::new();
    }
    let offset = offset as usize;
    let count = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    if !spec.rev {
        let start = lo.saturating_add(offset);
        if start >= hi {
            return Vec::new();
        }
        zset.range(start, start + count.min(hi - start))
    } else {
        let Some(end) = hi.checked_sub(offset).filter(|&e| e > lo) else {
            return Vec::new();
        };
        let start = end.saturating_sub(count).max(lo);
        let mut out = zset.range(start, end);
        out.reverse();
        out
    }
}

/// Writes entries as ZRANGE does: members, or members and scores (flat in
/// RESP2, `[member, score]` pairs in RESP3).
fn write_entries(out: &mut ReplyWriter, entries: &[(f64, &[u8])], withscores: bool) {
    let pairs = withscores && out.protocol() == Protocol::Resp3;
    out.array(entries.len() * if withscores && !pairs { 2 } else { 1 });
    for (score, member) in entries {
        if pairs {
            out.array(2);
        }
        out.bulk(member);
        if withscores {
            write_score(out, *score);
        }
    }
}

/// Runs `reply` on the sorted set at `name` (`None` when missing) under
/// its shard lock; WRONGTYPE for another type.
fn read_zset(
    ctx: &mut Ctx,
    name: &[u8],
    reply: impl FnOnce(&mut ReplyWriter, Option<&ZSetValue>),
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let entry = shard.get_as::<ZSet>(db, key, now)?;
    reply(&mut ctx.out, entry.as_ref().and_then(|e| e.value().zset()));
    Ok(())
}

/// Applies `op` to the sorted set at `key`, creating it for a put, and
/// deletes it when left empty, in one lookup. Returns the members added
/// or removed.
fn change(
    shard: &mut Shard,
    db: usize,
    key: KeyRef,
    op: &ZSetOp,
    now: u64,
) -> Result<usize, CmdError> {
    Ok(shard
        .change_as::<ZSet>(db, key, now, op, true)?
        .unwrap_or(0))
}

/// Replaces `destination` with a sorted set of `entries` (deletes it when
/// there are none); replies the cardinality.
/// `event` is the keyspace notification of a non-empty result (`del`
/// is that of an empty one that deleted the destination).
pub(super) fn store(
    ctx: &mut Ctx,
    destination: &[u8],
    entries: &[(f64, Vec<u8>)],
    event: &str,
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(destination), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    if entries.is_empty() {
        if shard.remove(db, key, now).is_some() {
            ctx.notify(notify::GENERIC, "del", destination);
        }
    } else {
        let image = image_of(entries.iter().map(|(s, m)| (*s, &m[..])));
        shard.set(db, key, Value::ZSet(image.into()), None, false, now);
        ctx.notify(notify::ZSET, event, destination);
    }
    ctx.out.int(entries.len() as i64);
    Ok(())
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut at = 2;
    while let Some(arg) = args.get(at) {
        let flag = match () {
            _ if is(arg, "nx") => &mut nx,
            _ if is(arg, "xx") => &mut xx,
            _ if is(arg, "gt") => &mut gt,
            _ if is(arg, "lt") => &mut lt,
            _ if is(arg, "ch") => &mut ch,
            _ if is(arg, "incr") => &mut incr,
            _ => break,
        };
        *flag = true;
        at += 1;
    }
    let pairs = &args[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(ERR_SYNTAX.into());
    }
    if nx && xx {
        return Err("ERR XX and NX options at the same time are not compatible".into());
    }
    if (gt || lt) && nx || gt && lt {
        return Err("ERR GT, LT, and/or NX options at the same time are not compatible".into());
    }
    if incr && pairs.len() > 2 {
        return Err("ERR INCR option supports a single increment-element pair".into());
    }
    let mut wanted = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        // (-0 stays -0 here: a listpack stores it as 0, a skiplist keeps
        // it, as in Redis; see the engine's `write_mem`.)
        wanted.push((parse_score(&pair[0])?, &pair[1][..]));
    }
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let current = shard.get_as::<ZSet>(db, key, now)?;
    let zset = current.as_ref().and_then(|e| e.value().zset());
    let mut pending: HashMap<&[u8], f64> = HashMap::new();
    let (mut added, mut updated) = (0, 0);
    let mut puts = Vec::new();
    let mut incr_result = None;
    for (score, member) in wanted {
        let old = pending
            .get(member)
            .copied()
            .or_else(|| zset.and_then(|z| z.score(member)));
        let new = match old {
            Some(old) => {
                if nx {
                    continue;
                }
                let new = if incr { old + score } else { score };
                if new.is_nan() {
                    return Err(ERR_NAN.into());
                }
                if (gt && new <= old) || (lt && new >= old) {
                    continue;
                }
                if new != old {
                    updated += 1;
                }
                new
            }
            None => {
                if xx {
                    continue;
                }
                added += 1;
                score
            }
        };
        pending.insert(member, new);
        puts.push((new, member));
        incr_result = Some(new);
    }
    if !puts.is_empty() {
        change(shard, db, key, &ZSetOp::Put(puts), now)?;
    }
    if added + updated > 0 {
        ctx.notify(notify::ZSET, if incr { "zincr" } else { "zadd" }, &args[1]);
    }
    if incr {
        match incr_result {
            Some(score) => write_score(&mut ctx.out, score),
            None => ctx.out.null_bulk(),
        }
    } else {
        ctx.out.int(if ch { added + updated } else { added });
    }
    Ok(())
}

/// ZINCRBY key increment member.
pub fn zincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let increment = parse_score(&args[2])?;
    let member = &args[3][..];
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let old = shard
        .get_as::<ZSet>(db, key, now)?
        .and_then(|e| e.value().zset().and_then(|z| z.score(member)));
    // A new member takes the increment itself (-0 stays -0, as in Redis).
    let new = old.map_or(increment, |old| old + increment);
    if new.is_nan() {
        return Err(ERR_NAN.into());
    }
    change(shard, db, key, &ZSetOp::Put(vec![(new, member)]), now)?;
    ctx.notify(notify::ZSET, "zincr", &args[1]);
    write_score(&mut ctx.out, new);
    Ok(())
}

pub fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let members = args[2..].iter().map(|a| &a[..]).collect();
    let removed = change(ctx.keys.shard(key), db, key, &ZSetOp::Remove(members), now)?;
    if removed > 0 {
        ctx.notify_write(notify::ZSET, "zrem", &args[1]);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_zset(ctx, &args[1], |out, zset| {
        match zset.and_then(|z| z.score(&args[2])) {
            Some(score) => write_score(out, score),
            None => out.null_bulk(),
        }
    })
}

pub fn zmscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_zset(ctx, &args[1], |out, zset| {
        out.array(args.len() - 2);
        for member in &args[2..] {
            match zset.and_then(|z| z.score(member)) {
                Some(score) => write_score(out, score),
                None => out.null_bulk(),
            }
        }
    })
}

pub fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_zset(ctx, &args[1], |out, zset| {
        out.int(zset.map_or(0, ZSetValue::len) as i64)
    })
}

fn count_in(ctx: &mut Ctx, args: &[Bytes], by: RangeBy) -> CmdResult {
    read_zset(ctx, &args[1], |out, zset| {
        let count = zset.map_or(0, |z| {
            let (lo, hi) = by.positions(z, false);
            hi - lo
        });
        out.int(count as i64)
    })
}

pub fn zcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = RangeBy::Score(parse_score_bound(&args[2])?, parse_score_bound(&args[3])?);
    count_in(ctx, args, by)
}

pub fn zlexcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = RangeBy::Lex(parse_lex_bound(&args[2])?, parse_lex_bound(&args[3])?);
    count_in(ctx, args, by)
}

/// Which form of range command is parsing: its fixed options and the
/// order of its bounds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// ZRANGE and ZRANGESTORE: BYSCORE/BYLEX/REV/LIMIT/WITHSCORES options.
    Range { store: bool },
    /// ZREVRANGE, ZRANGEBYSCORE… : the selection is the command's own.
    Fixed { by: Fixed, rev: bool },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fixed {
    Rank,
    Score,
    Lex,
}

/// Parses a range command's bounds (`args[at]`, `args[at + 1]`) and
/// options.
fn parse_range(args: &[Bytes], at: usize, form: Form) -> Result<RangeSpec, CmdError> {
    let (mut by, mut rev, mut limit, mut withscores) = (Fixed::Rank, false, None, false);
    if let Form::Fixed { by: fixed, rev: r } = form {
        by = fixed;
        rev = r;
    }
    let mut i = at + 2;
    while i < args.len() {
        let arg = &args[i];
        let left = args.len() - i - 1;
        if is(arg, "withscores") && form != (Form::Range { store: true }) {
            withscores = true;
        } else if is(arg, "limit") && left >= 2 {
            let offset = parse_i64(&args[i + 1])?;
            let count = parse_i64(&args[i + 2])?;
            limit = Some((offset, count));
            i += 2;
        } else if matches!(form, Form::Range { .. }) && is(arg, "byscore") {
            by = Fixed::Score;
        } else if matches!(form, Form::Range { .. }) && is(arg, "bylex") {
            by = Fixed::Lex;
        } else if matches!(form, Form::Range { .. }) && is(arg, "rev") {
            rev = true;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    if by == Fixed::Rank {
        // Redis refuses a LIMIT on ranks only when its count is not -1
        // (what it reads as no LIMIT); the offset is then ignored.
        if limit.is_some_and(|(_, count)| count != -1) {
            return Err(ERR_LIMIT_NEEDS_SCORE_OR_LEX.into());
        }
        limit = None;
    }
    if withscores && by == Fixed::Lex {
        return Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX".into());
    }
    // Reversed score and lex ranges name the maximum first.
    let (first, second) = (&args[at], &args[at + 1]);
    let (min, max) = if rev && by != Fixed::Rank {
        (second, first)
    } else {
        (first, second)
    };
    let by = match by {
        Fixed::Rank => RangeBy::Rank(parse_i64(first)?, parse_i64(second)?),
        Fixed::Score => RangeBy::Score(parse_score_bound(min)?, parse_score_bound(max)?),
        Fixed::Lex => RangeBy::Lex(parse_lex_bound(min)?, parse_lex_bound(max)?),
    };
    Ok(RangeSpec {
        by,
        rev,
        limit,
        withscores,
    })
}

fn range_reply(ctx: &mut Ctx, args: &[Bytes], form: Form) -> CmdResult {
    let spec = parse_range(args, 2, form)?;
    read_zset(ctx, &args[1], |out, zset| {
        let entries = zset.map_or_else(Vec::new, |z| select(z, &spec));
        write_entries(out, &entries, spec.withscores);
    })
}

pub fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(ctx, args, Form::Range { store: false })
}

pub fn zrevrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(
        ctx,
        args,
        Form::Fixed {
            by: Fixed::Rank,
            rev: true,
        },
    )
}

pub fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(
        ctx,
        args,
        Form::Fixed {
            by: Fixed::Score,
            rev: false,
        },
    )
}

pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(
        ctx,
        args,
        Form::Fixed {
            by: Fixed::Score,
            rev: true,
        },
    )
}

pub fn zrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(
        ctx,
        args,
        Form::Fixed {
            by: Fixed::Lex,
            rev: false,
        },
    )
}

pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_reply(
        ctx,
        args,
        Form::Fixed {
            by: Fixed::Lex,
            rev: true,
        },
    )
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub fn zrangestore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let spec = parse_range(args, 3, Form::Range { store: true })?;
    let (db, key, now) = (ctx.db(), ctx.key(&args[2]), ctx.now_ms);
    let entries: Entries = match ctx.keys.shard(key).get_as::<ZSet>(db, key, now)? {
        Some(entry) => select(entry.value().zset().expect("a sorted set"), &spec)
            .into_iter()
            .map(|(s, m)| (s, m.to_vec()))
            .collect(),
        None => Vec::new(),
    };
    store(ctx, &args[1], &entries, "zrangestore")
}

/// ZRANK and ZREVRANK key member [WITHSCORE].
fn rank(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> CmdResult {
    let withscore = match &args[3..] {
        [] => false,
        [option] if is(option, "withscore") => true,
        _ => return Err(ERR_SYNTAX.into()),
    };
    read_zset(ctx, &args[1], |out, zset| {
        let found = zset.and_then(|z| {
            let rank = z.rank(&args[2])?;
            let rank = if rev { z.len() - 1 - rank } else { rank };
            Some((rank, z.score(&args[2]).expect("a member")))
        });
        match (found, withscore) {
            (Some((rank, _)), false) => out.int(rank as i64),
            (Some((rank, score)), true) => {
                out.array(2);
                out.int(rank as i64);
                write_score(out, score);
            }
            (None, false) => out.null_bulk(),
            (None, true) => out.null_array(),
        }
    })
}

pub fn zrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, false)
}

pub fn zrevrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rank(ctx, args, true)
}

/// Pops up to `count` entries from the low (`max` false) or high end of
/// the sorted set at `key`; `None` when missing (WRONGTYPE as an error,
/// or as missing while a blocked command runs again).
fn pop_from(
    ctx: &mut Ctx,
    name: &[u8],
    max: bool,
    count: usize,
) -> Result<Option<Entries>, CmdError> {
    let (db, key, now, retry) = (ctx.db(), ctx.key(name), ctx.now_ms, ctx.session.block_retry);
    if ctx.waits_behind(name) {
        // Another client's turn on this key comes first.
        return Ok(None);
    }
    let shard = ctx.keys.shard(key);
    let popped: Entries = match shard.get_as::<ZSet>(db, key, now) {
        Ok(Some(entry)) => {
            let zset = entry.value().zset().expect("a sorted set");
            let len = zset.len();
            let n = count.min(len);
            let mut entries = if max {
                zset.range(len - n, len)
            } else {
                zset.range(0, n)
            };
            if max {
                entries.reverse();
            }
            entries.into_iter().map(|(s, m)| (s, m.to_vec())).collect()
        }
        Ok(None) => return Ok(None),
        Err(_) if retry => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let members = popped.iter().map(|(_, m)| &m[..]).collect();
    change(shard, db, key, &ZSetOp::Pop { max, members }, now)?;
    ctx.notify_write(notify::ZSET, if max { "zpopmax" } else { "zpopmin" }, name);
    Ok(Some(popped))
}

/// Writes popped entries: flat `member, score` pairs, or `[member,
/// score]` arrays when `nested`.
fn write_popped(out: &mut ReplyWriter, popped: &[(f64, Vec<u8>)], nested: bool) {
    out.array(popped.len() * if nested { 1 } else { 2 });
    for (score, member) in popped {
        if nested {
            out.array(2);
        }
        out.bulk(member);
        write_score(out, *score);
    }
}

/// ZPOPMIN and ZPOPMAX key [count].
fn zpop(ctx: &mut Ctx, args: &[Bytes], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(ERR_SYNTAX.into());
    }
    let count = match args.get(2) {
        Some(arg) => {
            let n = parse_i64(arg).map_err(|_| CmdError::from(ERR_MUST_BE_POSITIVE))?;
            Some(usize::try_from(n).map_err(|_| CmdError::from(ERR_MUST_BE_POSITIVE))?)
        }
        None => None,
    };
    if count == Some(0) {
        // Redis checks the key's type first.
        let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
        ctx.keys.shard(key).get_as::<ZSet>(db, key, now)?;
        ctx.out.array(0);
        return Ok(());
    }
    let popped = pop_from(ctx, &args[1], max, count.unwrap_or(1))?.unwrap_or_default();
    let nested = count.is_some() && ctx.out.protocol() == Protocol::Resp3;
    write_popped(&mut ctx.out, &popped, nested);
    Ok(())
}

pub fn zpopmin(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zpop(ctx, args, true)
}

/// BZPOPMIN and BZPOPMAX key [key ...] timeout: `[key, member, score]`.
fn bzpop(ctx: &mut Ctx, args: &[Bytes], max: bool) -> CmdResult {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    let deadline = parse_timeout(&timeout[0], ctx.now_ms)?;
    for name in keys {
        if let Some(popped) = pop_from(ctx, name, max, 1)? {
            let (score, member) = &popped[0];
            ctx.out.array(3);
            ctx.out.bulk(name);
            ctx.out.bulk(member);
            write_score(&mut ctx.out, *score);
            return Ok(());
        }
    }
    ctx.block(keys, deadline, TimeoutReply::NullArray);
    Ok(())
}

pub fn bzpopmin(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bzpop(ctx, args, false)
}

pub fn bzpopmax(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bzpop(ctx, args, true)
}

/// MIN (false) or MAX (true).
fn side_word(arg: &[u8]) -> Option<bool> {
    if is(arg, "min") {
        Some(false)
    } else if is(arg, "max") {
        Some(true)
    } else {
        None
    }
}

/// Pops from the first non-empty sorted set of `keys`, replying
/// `[key, [[member, score] …]]`; false (nothing replied) when all are
/// missing.
fn mpop_first(ctx: &mut Ctx, keys: &[Bytes], max: bool, count: usize) -> Result<bool, CmdError> {
    for name in keys {
        if let Some(popped) = pop_from(ctx, name, max, count)? {
            ctx.out.array(2);
            ctx.out.bulk(name);
            write_popped(&mut ctx.out, &popped, true);
            return Ok(true);
        }
    }
    Ok(false)
}

pub fn zmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (keys, max, count) = mpop_args(args, 1, side_word)?;
    if !mpop_first(ctx, keys, max, count)? {
        ctx.out.null_array();
    }
    Ok(())
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count].
pub fn bzmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let deadline = parse_timeout(&args[1], ctx.now_ms)?;
    let (keys, max, count) = mpop_args(args, 2, side_word)?;
    if !mpop_first(ctx, keys, max, count)? {
        ctx.block(keys, deadline, TimeoutReply::NullArray);
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Algebra {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(how: Aggregate, into: &mut f64, value: f64) {
    match how {
        Aggregate::Sum => {
            *into += value;
            if into.is_nan() {
                *into = 0.0;
            }
        }
        Aggregate::Min => *into = into.min(value),
        Aggregate::Max => *into = into.max(value),
    }
}

/// `score` times `weight`, NaN (0 × inf) counting as 0, as in Redis.
fn weighted(score: f64, weight: f64) -> f64 {
    let value = score * weight;
    if value.is_nan() { 0.0 } else { value }
}

/// The members in every input, with their weighted scores aggregated;
/// the smallest input is walked and the others looked up.
fn intersect(inputs: &[Entries], weights: &[f64], how: Aggregate) -> Entries {
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| inputs[i].len());
    let lookups: Vec<HashMap<&[u8], f64>> = inputs
        .iter()
        .map(|input| input.iter().map(|(s, m)| (&m[..], *s)).collect())
        .collect();
    let first = order[0];
    inputs[first]
        .iter()
        .filter_map(|(score, member)| {
            let mut value = weighted(*score, weights[first]);
            for &other in &order[1..] {
                let score = lookups[other].get(&member[..])?;
                // Unlike the first, these products go to the sum as they
                // are, as in Redis: inf + (inf × 0) is NaN, so 0.
                aggregate(how, &mut value, *score * weights[other]);
            }
            Some((value, member.clone()))
        })
        .collect()
}

/// The entries of a sorted set or (scores 1) a set at `name`; `None` when
/// missing; WRONGTYPE for another type.
fn input_entries(ctx: &mut Ctx, name: &[u8]) -> Result<Option<Entries>, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let Some(entry) = ctx.keys.shard(key).get(db, key, now)? else {
        return Ok(None);
    };
    let value = entry.value();
    let mut out = Vec::new();
    if let Some(zset) = value.zset() {
        zset.for_each(|s, m| out.push((s, m.to_vec())));
    } else if let Some(set) = value.set() {
        set.for_each(|m| out.push((1.0, m.to_vec())));
    } else {
        return Err(ERR_WRONGTYPE.into());
    }
    Ok(Some(out))
}

/// ZUNION, ZINTER, ZDIFF and their STORE forms: the result, and whether
/// WITHSCORES was given.
fn algebra(
    ctx: &mut Ctx,
    args: &[Bytes],
    op: Algebra,
    store: bool,
) -> Result<(Entries, bool), CmdError> {
    let at = if store { 2 } else { 1 };
    let numkeys = parse_i64(&args[at])?;
    if numkeys < 1 {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        return Err(format!("ERR at least 1 input key is needed for '{name}' command").into());
    }
    if numkeys as u64 > (args.len() - at - 1) as u64 {
        return Err(ERR_SYNTAX.into());
    }
    let names = &args[at + 1..at + 1 + numkeys as usize];
    let mut inputs = Vec::with_capacity(names.len());
    for name in names {
        inputs.push(input_entries(ctx, name)?.unwrap_or_default());
    }
    let mut weights = vec![1.0; names.len()];
    let mut how = Aggregate::Sum;
    let mut withscores = false;
    let mut i = at + 1 + names.len();
    while i < args.len() {
        let left = args.len() - i - 1;
        if op != Algebra::Diff && is(&args[i], "weights") && left >= names.len() {
            for (w, arg) in weights.iter_mut().zip(&args[i + 1..]) {
                *w = parse_double(arg).ok_or(CmdError::from("ERR weight value is not a float"))?;
            }
            i += names.len();
        } else if op != Algebra::Diff && is(&args[i], "aggregate") && left >= 1 {
            let name = &args[i + 1];
            how = if is(name, "sum") {
                Aggregate::Sum
            } else if is(name, "min") {
                Aggregate::Min
            } else if is(name, "max") {
                Aggregate::Max
            } else {
                return Err(ERR_SYNTAX.into());
            };
            i += 1;
        } else if !store && is(&args[i], "withscores") {
            withscores = true;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    let mut result: Entries = match op {
        Algebra::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (input, &weight) in inputs.into_iter().zip(&weights) {
                for (score, member) in input {
                    let value = weighted(score, weight);
                    match acc.get_mut(&member) {
                        Some(into) => aggregate(how, into, value),
                        None => {
                            acc.insert(member, value);
                        }
                    }
                }
            }
            acc.into_iter().map(|(m, s)| (s, m)).collect()
        }
        Algebra::Inter => intersect(&inputs, &weights, how),
        Algebra::Diff => {
            let others: Vec<std::collections::HashSet<&[u8]>> = inputs[1..]
                .iter()
                .map(|input| input.iter().map(|(_, m)| &m[..]).collect())
                .collect();
            inputs[0]
                .iter()
                .filter(|(_, m)| !others.iter().any(|o| o.contains(&m[..])))
                .cloned()
                .collect()
        }
    };
    result.sort_by(|a, b| strata_engine::types::zset::cmp_entry((a.0, &a.1), (b.0, &b.1)));
    Ok((result, withscores))
}

fn algebra_reply(ctx: &mut Ctx, args: &[Bytes], op: Algebra) -> CmdResult {
    let (result, withscores) = algebra(ctx, args, op, false)?;
    let entries: Vec<(f64, &[u8])> = result.iter().map(|(s, m)| (*s, &m[..])).collect();
    write_entries(&mut ctx.out, &entries, withscores);
    Ok(())
}

fn algebra_store(ctx: &mut Ctx, args: &[Bytes], op: Algebra) -> CmdResult {
    let (result, _) = algebra(ctx, args, op, true)?;
    let event = match op {
        Algebra::Union => "zunionstore",
        Algebra::Inter => "zinterstore",
        Algebra::Diff => "zdiffstore",
    };
    store(ctx, &args[1], &result, event)
}

pub fn zunion(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    algebra_reply(ctx, args, Algebra::Union)
}

pub fn zinter(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    algebra_reply(ctx, args, Algebra::Inter)
}

pub fn zdiff(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    algebra_reply(ctx, args, Algebra::Diff)
}

pub fn zunionstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    algebra_store(ctx, args, Algebra::Union)
}

pub fn zinterstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    algebra_store(ctx, args, Algebra::Inter)
}

pub fn zdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    algebra_store(ctx, args, Algebra::Diff)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit].
pub fn zintercard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let numkeys = parse_i64(&args[1])?;
    if numkeys < 1 {
        return Err("ERR at least 1 input key is needed for 'zintercard' command".into());
    }
    if numkeys as u64 > (args.len() - 2) as u64 {
        return Err(ERR_SYNTAX.into());
    }
    // The keys are read before the options, as in Redis: another type is
    // the error whatever LIMIT says.
    let names = &args[2..2 + numkeys as usize];
    let mut inputs = Vec::with_capacity(names.len());
    for name in names {
        inputs.push(input_entries(ctx, name)?.unwrap_or_default());
    }
    let (_, limit) = numkeys_and_limit(args)?;
    let found = intersect(&inputs, &vec![1.0; inputs.len()], Aggregate::Sum).len();
    let count = if limit > 0 { found.min(limit) } else { found };
    ctx.out.int(count as i64);
    Ok(())
}

/// ZRANDMEMBER key [count [WITHSCORES]]: a negative count repeats.
pub fn zrandmember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let withscores = match args.get(3..) {
        None | Some([]) => false,
        Some([option]) if is(option, "withscores") => true,
        Some(_) => return Err(ERR_SYNTAX.into()),
    };
    let Some(count) = args.get(2) else {
        return read_zset(ctx, &args[1], |out, zset| {
            match zset.filter(|z| !z.is_empty()) {
                Some(z) => {
                    let at = (random_u64() % z.len() as u64) as usize;
                    out.bulk(z.range(at, at + 1)[0].1);
                }
                None => out.null_bulk(),
            }
        });
    };
    let count = parse_negatable_i64(count)?;
    let too_many = withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count);
    if too_many || count < 0 && count.unsigned_abs() > RANDOM_MEMBERS_MAX {
        return Err("ERR value is out of range".into());
    }
    read_zset(ctx, &args[1], |out, zset| {
        let Some(zset) = zset else {
            out.array(0);
            return;
        };
        let len = zset.len();
        let picked: Vec<(f64, &[u8])> = if count < 0 {
            (0..count.unsigned_abs())
                .map(|_| {
                    let at = (random_u64() % len as u64) as usize;
                    zset.range(at, at + 1)[0]
                })
                .collect()
        } else if count as usize >= len {
            zset.range(0, len)
        } else {
            let mut positions: Vec<usize> = (0..len).collect();
            for i in 0..count as usize {
                let j = i + (random_u64() % (len - i) as u64) as usize;
                positions.swap(i, j);
            }
            positions[..count as usize]
                .iter()
                .map(|&at| zset.range(at, at + 1)[0])
                .collect()
        };
        write_entries(out, &picked, withscores);
    })
}

/// Removes what `by` selects (ZREMRANGEBYRANK/SCORE/LEX); replies how many.
/// `event` is the keyspace notification of a removal.
fn remove_range(ctx: &mut Ctx, args: &[Bytes], by: RangeBy, event: &str) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let members: Vec<Vec<u8>> = match shard.get_as::<ZSet>(db, key, now)? {
        Some(entry) => {
            let spec = RangeSpec {
                by,
                rev: false,
                limit: None,
                withscores: false,
            };
            select(entry.value().zset().expect("a sorted set"), &spec)
                .into_iter()
                .map(|(_, m)| m.to_vec())
                .collect()
        }
        None => Vec::new(),
    };
    if !members.is_empty() {
        let op = ZSetOp::Remove(members.iter().map(|m| &m[..]).collect());
        change(shard, db, key, &op, now)?;
        ctx.notify_write(notify::ZSET, event, &args[1]);
    }
    ctx.out.int(members.len() as i64);
    Ok(())
}

pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = RangeBy::Rank(parse_i64(&args[2])?, parse_i64(&args[3])?);
    remove_range(ctx, args, by, "zremrangebyrank")
}

pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = RangeBy::Score(parse_score_bound(&args[2])?, parse_score_bound(&args[3])?);
    remove_range(ctx, args, by, "zremrangebyscore")
}

pub fn zremrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = RangeBy::Lex(parse_lex_bound(&args[2])?, parse_lex_bound(&args[3])?);
    remove_range(ctx, args, by, "zremrangebylex")
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: a listpack whole with
/// cursor 0, as Redis does; a skiplist in slices of a fixed order
/// ([`ScanSlice`]). Scores are bulk strings, as ZSCORE prints them.
pub fn zscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(scan) = ScanArgs::parse_for_key::<ZSet>(ctx, args, false)? else {
        return Ok(());
    };
    read_zset(ctx, &args[1], |out, zset| {
        let mut found = Vec::new();
        let mut next = 0;
        if let Some(zset) = zset {
            if zset.encoding_name() == "skiplist" {
                let slice = ScanSlice::new(scan.cursor, scan.count, zset.len());
                found = zset.range(0, zset.len());
                found.retain(|(_, m)| slice.contains(scan_position(m)) && scan.matches(m));
                next = slice.next_cursor();
            } else {
                found = zset.range(0, zset.len());
                found.retain(|(_, m)| scan.matches(m));
            }
        }
        out.array(2);
        out.bulk(next.to_string().as_bytes());
        out.array(found.len() * 2);
        for (score, member) in found {
            out.bulk(member);
            out.bulk(&score_text(score));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_redis_and_print_as_redis_7_4() {
        assert_eq!(score_text(1.1), b"1.1");
        assert_eq!(score_text(1.0), b"1");
        assert_eq!(score_text(-0.5), b"-0.5");
        assert_eq!(score_text(1e20), b"1e+20");
        assert_eq!(score_text(f64::INFINITY), b"inf");
        assert_eq!(parse_double(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b"nan"), None);
        assert_eq!(parse_double(b" 1"), None);
        assert_eq!(parse_double(b"1e400"), None);
        assert_eq!(parse_double(b"1x"), None);
        assert_eq!(parse_double(b""), None);
    }
}
