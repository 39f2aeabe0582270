//! Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HLEN, HEXISTS,
//! HGETALL, HKEYS, HVALS, HSTRLEN, HINCRBY, HINCRBYFLOAT.
//!
//! A hash is stored as its image (`strata_engine::hash`): a command reads
//! it, changes it and stores it again, and the log records the new image.
//! That is right for the small hashes most applications keep (Redis'
//! listpack works the same way); for big hashes it costs a pass over the
//! hash per change — field-level records and an in-place table are the
//! next step (see the README).

use bytes::Bytes;
use strata_engine::Value;
use strata_engine::hash::{HashValue, Limits};
use strata_engine::keyspace::{KeyRef, ShardGuard};

use crate::long_double::{self, AddError};

use super::{CmdError, CmdResult, Ctx, ERR_OVERFLOW, parse_i64};

/// The hash at `key` (None when missing); WRONGTYPE for another type.
fn read(
    shard: &mut ShardGuard,
    db: usize,
    key: KeyRef,
    now: u64,
) -> Result<Option<HashValue>, CmdError> {
    match shard.get_hash(db, key, now)? {
        Some(entry) => HashValue::decode_image(entry.value().as_bytes(), Limits::default())
            .map(Some)
            .map_err(|_| CmdError::from("ERR the stored hash is damaged")),
        None => Ok(None),
    }
}

/// Stores `hash` at `key` (deleting the key when the hash is empty),
/// keeping the key's deadline.
fn store(shard: &mut ShardGuard, db: usize, key: KeyRef, hash: &HashValue, now: u64) -> CmdResult {
    if hash.is_empty() {
        shard.remove(db, key, now);
        return Ok(());
    }
    let mut image = Vec::new();
    hash.encode_image(&mut image);
    match shard.get_hash(db, key, now)? {
        Some(entry) => entry.set_value(db, Value::Hash(image.into())),
        None => shard.set(db, key, Value::Hash(image.into()), None, false, now),
    }
    Ok(())
}

/// Reads the hash at `args[1]` for a read-only command.
fn read_only(ctx: &Ctx, args: &[Bytes]) -> Result<Option<HashValue>, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let mut shard = ctx.keyspace().lock(key);
    read(&mut shard, db, key, now)
}

fn set_fields(ctx: &mut Ctx, args: &[Bytes]) -> Result<usize, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&args[0]).to_lowercase()
        )
        .into());
    }
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let mut shard = ctx.keyspace().lock(key);
    let mut hash = read(&mut shard, db, key, now)?.unwrap_or_default();
    let mut added = 0;
    for pair in args[2..].chunks(2) {
        added += hash.insert(&pair[0], &pair[1], Limits::default(), now) as usize;
    }
    store(&mut shard, db, key, &hash, now)?;
    drop(shard);
    ctx.dirty(1);
    Ok(added)
}

pub fn hset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let added = set_fields(ctx, args)?;
    ctx.out.int(added as i64);
    Ok(())
}

pub fn hmset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    set_fields(ctx, args)?;
    ctx.out.ok();
    Ok(())
}

pub fn hsetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let mut shard = ctx.keyspace().lock(key);
    let mut hash = read(&mut shard, db, key, now)?.unwrap_or_default();
    if hash.get(&args[2], now).is_some() {
        drop(shard);
        ctx.out.int(0);
        return Ok(());
    }
    hash.insert(&args[2], &args[3], Limits::default(), now);
    store(&mut shard, db, key, &hash, now)?;
    drop(shard);
    ctx.dirty(1);
    ctx.out.int(1);
    Ok(())
}

pub fn hget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match read_only(ctx, args)?
        .as_ref()
        .and_then(|h| h.get(&args[2], ctx.now_ms))
    {
        Some(value) => ctx.out.bulk(value),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

pub fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let hash = read_only(ctx, args)?;
    ctx.out.array(args.len() - 2);
    for field in &args[2..] {
        match hash.as_ref().and_then(|h| h.get(field, ctx.now_ms)) {
            Some(value) => ctx.out.bulk(value),
            None => ctx.out.null_bulk(),
        }
    }
    Ok(())
}

pub fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let mut shard = ctx.keyspace().lock(key);
    let mut hash = read(&mut shard, db, key, now)?.unwrap_or_default();
    let removed = args[2..]
        .iter()
        .filter(|field| hash.remove(field, now))
        .count();
    if removed > 0 {
        store(&mut shard, db, key, &hash, now)?;
        drop(shard);
        ctx.dirty(1);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let count = read_only(ctx, args)?.map_or(0, |h| h.iter(ctx.now_ms).count());
    ctx.out.int(count as i64);
    Ok(())
}

pub fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = read_only(ctx, args)?.is_some_and(|h| h.get(&args[2], ctx.now_ms).is_some());
    ctx.out.int(found as i64);
    Ok(())
}

pub fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let length = read_only(ctx, args)?
        .and_then(|h| h.get(&args[2], ctx.now_ms).map(<[u8]>::len))
        .unwrap_or(0);
    ctx.out.int(length as i64);
    Ok(())
}

pub fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let hash = read_only(ctx, args)?.unwrap_or_default();
    let fields: Vec<(&[u8], &[u8])> = hash.iter(ctx.now_ms).collect();
    ctx.out.map(fields.len());
    for (field, value) in fields {
        ctx.out.bulk(field);
        ctx.out.bulk(value);
    }
    Ok(())
}

fn list(ctx: &mut Ctx, args: &[Bytes], values: bool) -> CmdResult {
    let hash = read_only(ctx, args)?.unwrap_or_default();
    let items: Vec<&[u8]> = hash
        .iter(ctx.now_ms)
        .map(|(f, v)| if values { v } else { f })
        .collect();
    ctx.out.array(items.len());
    for item in items {
        ctx.out.bulk(item);
    }
    Ok(())
}

pub fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    list(ctx, args, false)
}

pub fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    list(ctx, args, true)
}

pub fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let increment = parse_i64(&args[3])?;
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let mut shard = ctx.keyspace().lock(key);
    let mut hash = read(&mut shard, db, key, now)?.unwrap_or_default();
    let current = match hash.get(&args[2], now) {
        None => 0,
        Some(text) => strata_engine::value::parse_canonical_i64(text)
            .ok_or(CmdError::from("ERR hash value is not an integer"))?,
    };
    let result = current
        .checked_add(increment)
        .ok_or(CmdError::from(ERR_OVERFLOW))?;
    hash.insert(
        &args[2],
        result.to_string().as_bytes(),
        Limits::default(),
        now,
    );
    store(&mut shard, db, key, &hash, now)?;
    drop(shard);
    ctx.dirty(1);
    ctx.out.int(result);
    Ok(())
}

pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let mut shard = ctx.keyspace().lock(key);
    let mut hash = read(&mut shard, db, key, now)?.unwrap_or_default();
    let text =
        long_double::add(hash.get(&args[2], now), &args[3]).map_err(|error| match error {
            AddError::CurrentNotFloat => CmdError::from("ERR hash value is not a float"),
            AddError::IncrementNotFloat => CmdError::from(super::ERR_NOT_FLOAT),
            AddError::NotFinite => CmdError::from("ERR increment would produce NaN or Infinity"),
        })?;
    hash.insert(&args[2], &text, Limits::default(), now);
    store(&mut shard, db, key, &hash, now)?;
    drop(shard);
    ctx.dirty(1);
    ctx.out.bulk(&text);
    Ok(())
}
