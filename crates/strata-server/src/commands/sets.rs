//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD,
//! SPOP, SRANDMEMBER, SMOVE, SINTER, SINTERCARD, SINTERSTORE, SUNION,
//! SUNIONSTORE, SDIFF, SDIFFSTORE, SSCAN.
//!
//! Reads borrow the stored set ([`SetValue`]) under the shard lock. Writes
//! describe their effect as a [`SetOp`] that the engine applies and logs
//! (a SET_OP record); SPOP picks its members first and logs their removal.
//! A set left empty is deleted in the same lock hold. The multi-key
//! commands hold all their keys' shards (dispatch locks them) and visit one
//! set at a time: SINTER copies its smallest set and filters it by the
//! others, so it costs O(N·M) for N the smallest cardinality, as in Redis.
//! The STORE forms replace the destination with one SET record of the
//! result's image.

use crate::events::notify;
use std::collections::HashSet;
use strata_engine::types::collection::Set;

use bytes::Bytes;
use strata_engine::Value;
use strata_engine::keyspace::shards::{KeyRef, Shard, random_u64};
use strata_engine::types::set::{SetOp, SetValue, image_of, image_of_added, scan_position};

use super::{
    CmdError, CmdResult, Ctx, ERR_SYNTAX, ScanArgs, ScanSlice, is, parse_i64, parse_negatable_i64,
};

/// Replies of SRANDMEMBER with a negative count: beyond this many the
/// reply could not be sent anyway (it would pass every output limit).
const RANDOM_MEMBERS_MAX: u64 = 1 << 24;
const ERR_MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
const ERR_OUT_OF_RANGE: &str = "ERR value is out of range";

/// Runs `read` on the set at `name` (`None` when missing); WRONGTYPE for
/// another type.
fn with_set<R>(
    ctx: &mut Ctx,
    name: &[u8],
    read: impl FnOnce(Option<&SetValue>) -> R,
) -> Result<R, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let entry = ctx.keys.shard(key).get_as::<Set>(db, key, now)?;
    Ok(read(entry.as_ref().and_then(|e| e.value().set())))
}

/// Applies `op` to the set at `key` (which must exist); deletes the key
/// if that left it empty. Returns the members added or removed.
fn change(
    shard: &mut Shard,
    db: usize,
    key: KeyRef,
    op: &SetOp,
    now: u64,
) -> Result<usize, CmdError> {
    Ok(shard
        .change_as::<Set>(db, key, now, op, false)?
        .unwrap_or(0))
}

fn write_members(ctx: &mut Ctx, members: &[Vec<u8>]) {
    ctx.out.set(members.len());
    for member in members {
        ctx.out.bulk(member);
    }
}

pub fn sadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let members: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let shard = ctx.keys.shard(key);
    let added = (shard.change_as::<Set>(db, key, now, &SetOp::Add(members), true)?).unwrap_or(0);
    if added > 0 {
        ctx.notify(notify::SET, "sadd", &args[1]);
    }
    ctx.out.int(added as i64);
    Ok(())
}

pub fn srem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let members = args[2..].iter().map(|a| &a[..]).collect();
    let removed = change(shard, db, key, &SetOp::Remove(members), now)?;
    if removed > 0 {
        ctx.notify_write(notify::SET, "srem", &args[1]);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn smembers(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let members = with_set(ctx, &args[1], |set| set.map(SetValue::members))?;
    write_members(ctx, &members.unwrap_or_default());
    Ok(())
}

pub fn sismember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = with_set(ctx, &args[1], |set| {
        set.is_some_and(|s| s.contains(&args[2]))
    })?;
    ctx.out.int(found as i64);
    Ok(())
}

pub fn smismember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found: Vec<bool> = with_set(ctx, &args[1], |set| {
        args[2..]
            .iter()
            .map(|m| set.is_some_and(|s| s.contains(m)))
            .collect()
    })?;
    ctx.out.array(found.len());
    for f in found {
        ctx.out.int(f as i64);
    }
    Ok(())
}

pub fn scard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = with_set(ctx, &args[1], |set| set.map_or(0, SetValue::len))?;
    ctx.out.int(len as i64);
    Ok(())
}

/// `count` distinct positions of `0..len` (count < len), at random.
fn distinct_positions(len: usize, count: usize) -> Vec<usize> {
    if count * 2 < len {
        let mut picked = HashSet::with_capacity(count);
        while picked.len() < count {
            picked.insert((random_u64() % len as u64) as usize);
        }
        picked.into_iter().collect()
    } else {
        // A partial Fisher-Yates shuffle.
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = i + (random_u64() % (len - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        all
    }
}

/// SPOP key [count].
pub fn spop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
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
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let unlink = ctx.lazy_server_del();
    let shard = ctx.keys.shard(key);
    let mut whole = false;
    let picked: Vec<Vec<u8>> = match shard.get_as::<Set>(db, key, now)? {
        None => Vec::new(),
        Some(entry) => {
            let set = entry.value().set().expect("a set");
            let wanted = count.unwrap_or(1);
            if wanted >= set.len() {
                whole = count.is_some();
                set.members()
            } else {
                distinct_positions(set.len(), wanted)
                    .into_iter()
                    .map(|i| set.member_at(i))
                    .collect()
            }
        }
    };
    if whole {
        // The whole set: deleted, and sent to a replica as DEL, or UNLINK
        // under lazyfree-lazy-server-del, as Redis sends it.
        match unlink {
            true => shard.remove_unlinked(db, key, now),
            false => shard.remove(db, key, now),
        };
        ctx.notify_write(notify::SET, "spop", &args[1]);
        ctx.notify(notify::GENERIC, "del", &args[1]);
    } else if !picked.is_empty() {
        let members = picked.iter().map(|m| &m[..]).collect();
        change(shard, db, key, &SetOp::Remove(members), now)?;
        ctx.notify_write(notify::SET, "spop", &args[1]);
    }
    match count {
        None => match picked.first() {
            Some(member) => ctx.out.bulk(member),
            None => ctx.out.null_bulk(),
        },
        Some(_) => write_members(ctx, &picked),
    }
    Ok(())
}

/// SRANDMEMBER key [count]: a negative count allows repeats.
pub fn srandmember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(ERR_SYNTAX.into());
    }
    let Some(count) = args.get(2) else {
        let picked = with_set(ctx, &args[1], |set| {
            set.filter(|s| !s.is_empty())
                .map(|s| s.member_at((random_u64() % s.len() as u64) as usize))
        })?;
        match picked {
            Some(member) => ctx.out.bulk(&member),
            None => ctx.out.null_bulk(),
        }
        return Ok(());
    };
    let count = parse_negatable_i64(count)?;
    if count < 0 && count.unsigned_abs() > RANDOM_MEMBERS_MAX {
        return Err(ERR_OUT_OF_RANGE.into());
    }
    let picked: Vec<Vec<u8>> = with_set(ctx, &args[1], |set| {
        let Some(set) = set else {
            return Vec::new();
        };
        let len = set.len();
        if count < 0 {
            (0..count.unsigned_abs())
                .map(|_| set.member_at((random_u64() % len as u64) as usize))
                .collect()
        } else if count as usize >= len {
            set.members()
        } else {
            distinct_positions(len, count as usize)
                .into_iter()
                .map(|i| set.member_at(i))
                .collect()
        }
    })?;
    ctx.out.array(picked.len());
    for member in &picked {
        ctx.out.bulk(member);
    }
    Ok(())
}

/// SMOVE source destination member.
pub fn smove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let (source, destination, member) = (ctx.key(&args[1]), ctx.key(&args[2]), &args[3][..]);
    let Some(present) = with_set(ctx, &args[1], |set| set.map(|s| s.contains(member)))? else {
        ctx.out.int(0);
        return Ok(());
    };
    // The destination's type is checked before anything moves.
    ctx.keys
        .shard(destination)
        .get_as::<Set>(db, destination, now)?;
    if source.bytes == destination.bytes || !present {
        ctx.out.int(present as i64);
        return Ok(());
    }
    change(
        ctx.keys.shard(source),
        db,
        source,
        &SetOp::Remove(vec![member]),
        now,
    )?;
    let shard = ctx.keys.shard(destination);
    // A member the destination has already leaves it untouched: no
    // record, so a WATCH on it holds (as in Redis).
    let added = match shard.get_as::<Set>(db, destination, now)? {
        Some(entry) if entry.value().set().is_some_and(|s| s.contains(member)) => false,
        Some(entry) => {
            entry.change::<Set>(db, &SetOp::Add(vec![member]), now);
            true
        }
        None => {
            let image = image_of_added(&[member]).0;
            shard.set(db, destination, Value::Set(image.into()), None, false, now);
            true
        }
    };
    ctx.notify_write(notify::SET, "srem", &args[1]);
    if added {
        ctx.notify(notify::SET, "sadd", &args[2]);
    }
    ctx.out.int(1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// The members of `op` over the sets `names` (missing keys are empty
/// sets), with Redis' rule that every key's type is checked first.
fn algebra(
    ctx: &mut Ctx,
    names: &[Bytes],
    op: Algebra,
    limit: usize,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut lens = Vec::with_capacity(names.len());
    for name in names {
        lens.push(with_set(ctx, name, |set| set.map(SetValue::len))?);
    }
    match op {
        Algebra::Inter => {
            if lens.iter().any(Option::is_none) {
                return Ok(Vec::new());
            }
            // Start from the smallest set and keep what every other has.
            let smallest = (0..names.len())
                .min_by_key(|&i| lens[i])
                .expect("at least one key");
            let mut members =
                with_set(ctx, &names[smallest], |s| s.map(SetValue::members))?.unwrap_or_default();
            for (i, name) in names.iter().enumerate() {
                if i == smallest || members.is_empty() {
                    continue;
                }
                members = with_set(ctx, name, |set| {
                    let set = set.expect("checked above");
                    members.into_iter().filter(|m| set.contains(m)).collect()
                })?;
            }
            if limit > 0 {
                members.truncate(limit);
            }
            Ok(members)
        }
        Algebra::Union => {
            let mut seen: HashSet<Vec<u8>> = HashSet::new();
            let mut members = Vec::new();
            for name in names {
                with_set(ctx, name, |set| {
                    if let Some(set) = set {
                        set.for_each(|m| {
                            if !seen.contains(m) {
                                seen.insert(m.to_vec());
                                members.push(m.to_vec());
                            }
                        });
                    }
                })?;
            }
            Ok(members)
        }
        Algebra::Diff => {
            let mut members =
                with_set(ctx, &names[0], |s| s.map(SetValue::members))?.unwrap_or_default();
            for name in &names[1..] {
                if members.is_empty() {
                    break;
                }
                members = with_set(ctx, name, |set| match set {
                    Some(set) => members.into_iter().filter(|m| !set.contains(m)).collect(),
                    None => members,
                })?;
            }
            Ok(members)
        }
    }
}

/// Replaces `destination` with a set of `members` (deletes it when there
/// are none); replies the cardinality.
fn store(ctx: &mut Ctx, destination: &[u8], members: &[Vec<u8>], event: &str) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(destination), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    if members.is_empty() {
        if shard.remove(db, key, now).is_some() {
            ctx.notify(notify::GENERIC, "del", destination);
        }
    } else {
        let image = image_of(members.iter().map(|m| &m[..]));
        shard.set(db, key, Value::Set(image.into()), None, false, now);
        ctx.notify(notify::SET, event, destination);
    }
    ctx.out.int(members.len() as i64);
    Ok(())
}

fn read_algebra(ctx: &mut Ctx, args: &[Bytes], op: Algebra) -> CmdResult {
    let members = algebra(ctx, &args[1..], op, 0)?;
    write_members(ctx, &members);
    Ok(())
}

fn store_algebra(ctx: &mut Ctx, args: &[Bytes], op: Algebra) -> CmdResult {
    let members = algebra(ctx, &args[2..], op, 0)?;
    let event = match op {
        Algebra::Inter => "sinterstore",
        Algebra::Union => "sunionstore",
        Algebra::Diff => "sdiffstore",
    };
    store(ctx, &args[1], &members, event)
}

pub fn sinter(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_algebra(ctx, args, Algebra::Inter)
}

pub fn sunion(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_algebra(ctx, args, Algebra::Union)
}

pub fn sdiff(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_algebra(ctx, args, Algebra::Diff)
}

pub fn sinterstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store_algebra(ctx, args, Algebra::Inter)
}

pub fn sunionstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store_algebra(ctx, args, Algebra::Union)
}

pub fn sdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store_algebra(ctx, args, Algebra::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit].
pub fn sintercard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (names, limit) = numkeys_and_limit(args)?;
    let members = algebra(ctx, names, Algebra::Inter, limit)?;
    ctx.out.int(members.len() as i64);
    Ok(())
}

/// `numkeys key… [LIMIT limit]` from `args[1..]` (SINTERCARD,
/// ZINTERCARD), with Redis' errors.
pub fn numkeys_and_limit(args: &[Bytes]) -> Result<(&[Bytes], usize), CmdError> {
    const ERR_NUMKEYS: &str = "ERR numkeys should be greater than 0";
    let numkeys = parse_i64(&args[1]).map_err(|_| CmdError::from(ERR_NUMKEYS))?;
    if numkeys < 1 {
        return Err(ERR_NUMKEYS.into());
    }
    if numkeys as u64 > (args.len() - 2) as u64 {
        return Err("ERR Number of keys can't be greater than number of args".into());
    }
    let numkeys = numkeys as usize;
    let mut limit = 0;
    let mut rest = &args[2 + numkeys..];
    while let Some(option) = rest.first() {
        match rest.get(1) {
            Some(value) if is(option, "LIMIT") => {
                let n = parse_i64(value)
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or(CmdError::from("ERR LIMIT can't be negative"))?;
                limit = n as usize;
                rest = &rest[2..];
            }
            _ => return Err(ERR_SYNTAX.into()),
        }
    }
    Ok((&args[2..2 + numkeys], limit))
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: an intset or listpack
/// whole with cursor 0, as Redis does; a hash table in slices of a fixed
/// order ([`ScanSlice`]).
pub fn sscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(scan) = ScanArgs::parse_for_key::<Set>(ctx, args, false)? else {
        return Ok(());
    };
    let (next, found) = with_set(ctx, &args[1], |set| {
        let Some(set) = set else {
            return (0, Vec::new());
        };
        let mut found = Vec::new();
        if set.encoding_name() == "hashtable" {
            let slice = ScanSlice::new(scan.cursor, scan.count, set.len());
            set.for_each(|m| {
                if slice.contains(scan_position(m)) && scan.matches(m) {
                    found.push(m.to_vec());
                }
            });
            (slice.next_cursor(), found)
        } else {
            set.for_each(|m| {
                if scan.matches(m) {
                    found.push(m.to_vec());
                }
            });
            (0, found)
        }
    })?;
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len());
    for member in &found {
        ctx.out.bulk(member);
    }
    Ok(())
}
