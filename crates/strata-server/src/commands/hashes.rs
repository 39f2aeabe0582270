//! Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HLEN, HEXISTS,
//! HGETALL, HKEYS, HVALS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HRANDFIELD,
//! HSCAN, and the field expiry of Redis 7.4 and 8: HEXPIRE, HPEXPIRE,
//! HEXPIREAT, HPEXPIREAT, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME,
//! HPERSIST, HGETDEL, HGETEX, HSETEX.
//!
//! Reads borrow the stored hash ([`HashRef`]) under the shard lock and
//! reply from it. Writes describe their effect as field changes
//! ([`FieldChange`]) and hand them to the engine, which applies them in
//! place (a table stays a table; a packed hash is rewritten, as Redis
//! rewrites a listpack) and logs just those fields. A hash left without
//! fields is deleted, as in Redis.
//!
//! Field deadlines: an expired field is invisible to every command at
//! once; the engine removes it on the hash's next write or from the
//! active expiry cycle (and logs the removal), deleting the key with its
//! last field.

use crate::events::notify;
use bytes::Bytes;
use strata_engine::Value;
use strata_engine::keyspace::shards::{EntryMut, FieldChange, KeyRef, Shard, random_u64};
use strata_engine::types::collection::Hash;
use strata_engine::types::hash::{Field, HashRef, HashValue, IMAGE_BYTES_MAX, Limits};
use strata_resp::{Protocol, ReplyWriter};

use crate::long_double::{self, AddError};

use super::{
    CmdError, CmdResult, Ctx, ERR_OVERFLOW, ERR_SYNTAX, ScanArgs, ScanSlice, is, parse_i64,
    parse_negatable_i64,
};

/// Largest absolute field deadline, in Unix ms (Redis: 2^48 - 1 >> 2).
const FIELD_DEADLINE_MS_MAX: i64 = 0xFFFF_FFFF_FFFF >> 2;
/// Replies of HRANDFIELD with a negative count: beyond this many the
/// reply could not be sent anyway (it would pass every output limit).
const RANDOM_FIELDS_MAX: u64 = 1 << 24;

/// A hash may not grow past what one log record can hold.
const ERR_HASH_TOO_BIG: &str = "ERR hash value exceeds the maximum size of 3 GB";
const ERR_FIELDS_POSITION: &str =
    "ERR Mandatory argument FIELDS is missing or not at the right position";
const ERR_NUMFIELDS_MATCH: &str =
    "ERR The `numfields` parameter must match the number of arguments";
const ERR_NUMFIELDS_POSITIVE: &str = "ERR Number of fields must be a positive integer";

/// Runs `reply` on the hash at `key` (`None` when missing) under its
/// shard lock; WRONGTYPE for another type.
fn read_hash(
    ctx: &mut Ctx,
    key: &[u8],
    reply: impl FnOnce(&mut ReplyWriter, Option<HashRef>, u64),
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(key), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let entry = shard.get_as::<Hash>(db, key, now)?;
    let hash = entry.as_ref().and_then(|e| e.value().hash());
    reply(&mut ctx.out, hash, now);
    Ok(())
}

/// What [`change_found`] did.
enum Changed {
    /// The hash was changed; this many fields are left.
    Left(usize),
    /// There was no hash: it is to be created from the fields put.
    Missing,
}

/// Applies `changes` to the hash a command found (and read) under its
/// lock, so that a write looks its key up once. Pass the outcome to
/// [`settle`].
fn change_found(
    found: Option<EntryMut>,
    db: usize,
    changes: &[FieldChange],
    now: u64,
) -> Result<Changed, CmdError> {
    let Some(entry) = found else {
        return Ok(Changed::Missing);
    };
    if changes.is_empty() {
        return Ok(Changed::Left(usize::MAX));
    }
    let added: usize = changes
        .iter()
        .map(|c| match c {
            FieldChange::Put(f) => f.name.len() + f.value.len() + 20,
            FieldChange::Remove(_) => 0,
        })
        .sum();
    let current = entry.value().hash().map_or(0, |h| h.image_bytes());
    if current + added > IMAGE_BYTES_MAX {
        return Err(ERR_HASH_TOO_BIG.into());
    }
    Ok(Changed::Left(entry.change::<Hash>(db, changes, now).len))
}

/// Finishes a change: deletes the key of a hash left without fields, or
/// creates the hash from the fields put when there was none.
fn settle(
    shard: &mut Shard,
    db: usize,
    key: KeyRef,
    changed: Changed,
    changes: &[FieldChange],
    now: u64,
) {
    match changed {
        Changed::Left(0) => shard.remove_emptied(db, key, now),
        Changed::Left(_) => {}
        Changed::Missing => {
            // Fields put: created as the put (a replica is sent HSET).
            if shard.create::<Hash>(db, key, changes, now).is_some() {
                return;
            }
            let mut hash = HashValue::new();
            for change in changes {
                match *change {
                    FieldChange::Put(field) => hash.put(field, Limits::NEVER_CONVERT),
                    FieldChange::Remove(name) => {
                        hash.remove(name, now);
                    }
                }
            }
            hash.remove_expired(now);
            if !hash.is_empty() {
                let mut image = Vec::new();
                hash.encode_image(&mut image);
                shard.set(db, key, Value::Hash(image.into()), None, false, now);
            }
        }
    }
}

/// The keyspace notifications of `changes` to the hash at `key`:
/// `put_event` for fields stored, `hdel` for fields removed, `del` when
/// the hash is gone after.
fn notify_changes(ctx: &mut Ctx, key: &[u8], changes: &[FieldChange], put_event: &str) {
    let puts = changes.iter().any(|c| matches!(c, FieldChange::Put(_)));
    let removes = changes.iter().any(|c| matches!(c, FieldChange::Remove(_)));
    match (puts, removes) {
        (true, true) => {
            ctx.notify(notify::HASH, put_event, key);
            ctx.notify_write(notify::HASH, "hdel", key);
        }
        (true, false) => ctx.notify_write(notify::HASH, put_event, key),
        (false, true) => ctx.notify_write(notify::HASH, "hdel", key),
        (false, false) => {}
    }
}

/// A plain field (no deadline) to store.
fn put<'a>(name: &'a [u8], value: &'a [u8]) -> FieldChange<'a> {
    FieldChange::Put(Field {
        name,
        value,
        deadline: None,
    })
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
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let current = hash.as_ref().and_then(|e| e.value().hash());
    let mut names = std::collections::HashSet::new();
    let added = if args.len() == 4 {
        // One field, the common case: no set of names needed.
        current.is_none_or(|h| h.get(&args[2], now).is_none()) as usize
    } else {
        args[2..]
            .chunks(2)
            .filter(|pair| {
                names.insert(&pair[0][..]) && current.is_none_or(|h| h.get(&pair[0], now).is_none())
            })
            .count()
    };
    let changes: Vec<FieldChange> = args[2..].chunks(2).map(|p| put(&p[0], &p[1])).collect();
    let changed = change_found(hash, db, &changes, now)?;
    settle(shard, db, key, changed, &changes, now);
    notify_changes(ctx, &args[1], &changes, "hset");
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
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let exists = hash
        .as_ref()
        .and_then(|e| e.value().hash())
        .is_some_and(|h| h.get(&args[2], now).is_some());
    if !exists {
        let change = [put(&args[2], &args[3])];
        let changed = change_found(hash, db, &change, now)?;
        settle(shard, db, key, changed, &change, now);
        notify_changes(ctx, &args[1], &change, "hset");
    }
    ctx.out.int(!exists as i64);
    Ok(())
}

pub fn hget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_hash(ctx, &args[1], |out, hash, now| {
        match hash.and_then(|h| h.get(&args[2], now)) {
            Some(value) => out.bulk(value),
            None => out.null_bulk(),
        }
    })
}

pub fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_hash(ctx, &args[1], |out, hash, now| {
        out.array(args.len() - 2);
        for field in &args[2..] {
            match hash.and_then(|h| h.get(field, now)) {
                Some(value) => out.bulk(value),
                None => out.null_bulk(),
            }
        }
    })
}

pub fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let current = hash.as_ref().and_then(|e| e.value().hash());
    let mut names = std::collections::HashSet::new();
    let removed: Vec<FieldChange> = args[2..]
        .iter()
        .filter(|f| current.is_some_and(|h| h.get(f, now).is_some()) && names.insert(&f[..]))
        .map(|f| FieldChange::Remove(f))
        .collect();
    if !removed.is_empty() {
        let changed = change_found(hash, db, &removed, now)?;
        settle(shard, db, key, changed, &removed, now);
        notify_changes(ctx, &args[1], &removed, "hdel");
    }
    ctx.out.int(removed.len() as i64);
    Ok(())
}

pub fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_hash(ctx, &args[1], |out, hash, now| {
        out.int(hash.map_or(0, |h| h.live_len(now)) as i64)
    })
}

pub fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_hash(ctx, &args[1], |out, hash, now| {
        out.int(hash.is_some_and(|h| h.get(&args[2], now).is_some()) as i64)
    })
}

pub fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_hash(ctx, &args[1], |out, hash, now| {
        out.int(
            hash.and_then(|h| h.get(&args[2], now))
                .map_or(0, <[u8]>::len) as i64,
        )
    })
}

pub fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    list(ctx, args, true, true)
}

/// HGETALL (fields and values, a map), HKEYS and HVALS (an array).
fn list(ctx: &mut Ctx, args: &[Bytes], fields: bool, values: bool) -> CmdResult {
    read_hash(ctx, &args[1], |out, hash, now| {
        let len = hash.map_or(0, |h| h.live_len(now));
        if fields && values {
            out.map(len);
        } else {
            out.array(len);
        }
        for (field, value) in hash.into_iter().flat_map(|h| h.iter(now)) {
            if fields {
                out.bulk(field);
            }
            if values {
                out.bulk(value);
            }
        }
    })
}

pub fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    list(ctx, args, true, false)
}

pub fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    list(ctx, args, false, true)
}

/// HINCRBY and HINCRBYFLOAT: stores what `compute` makes of the field's
/// current value (None when missing), keeping the field's deadline, and
/// returns it.
fn increment(
    ctx: &mut Ctx,
    args: &[Bytes],
    event: &str,
    compute: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, CmdError>,
) -> Result<Vec<u8>, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let field = hash
        .as_ref()
        .and_then(|e| e.value().hash())
        .and_then(|h| h.field(&args[2], now));
    let text = compute(field.map(|f| f.value))?;
    let change = FieldChange::Put(Field {
        name: &args[2],
        value: &text,
        deadline: field.and_then(|f| f.deadline),
    });
    let changed = change_found(hash, db, &[change], now)?;
    settle(shard, db, key, changed, &[change], now);
    notify_changes(ctx, &args[1], &[change], event);
    Ok(text)
}

pub fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = parse_i64(&args[3])?;
    let mut result = 0;
    increment(ctx, args, "hincrby", |current| {
        let current = match current {
            None => 0,
            Some(text) => strata_engine::types::value::parse_canonical_i64(text)
                .ok_or(CmdError::from("ERR hash value is not an integer"))?,
        };
        result = current
            .checked_add(by)
            .ok_or(CmdError::from(ERR_OVERFLOW))?;
        Ok(result.to_string().into_bytes())
    })?;
    ctx.out.int(result);
    Ok(())
}

pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let error = |error| match error {
        AddError::CurrentNotFloat => CmdError::from("ERR hash value is not a float"),
        AddError::IncrementNotFloat => CmdError::from(super::ERR_NOT_FLOAT),
        AddError::NotFinite => CmdError::from("ERR increment would produce NaN or Infinity"),
        // Redis 7.4 checks the increment before the sum.
        AddError::IncrementNotFinite => CmdError::from("ERR value is NaN or Infinity"),
    };
    // Redis reads the increment before it looks the key up: a bad one is
    // the error even on a key of another type.
    long_double::add(None, &args[3]).map_err(error)?;
    let text = increment(ctx, args, "hincrbyfloat", |current| {
        long_double::add(current, &args[3]).map_err(error)
    })?;
    ctx.out.bulk(&text);
    Ok(())
}

/// HRANDFIELD key [count [WITHVALUES]].
pub fn hrandfield(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() == 2 {
        return read_hash(ctx, &args[1], |out, hash, now| {
            match hash.and_then(|h| h.random_field(now, random_u64)) {
                Some(field) => out.bulk(field.name),
                None => out.null_bulk(),
            }
        });
    }
    let count = parse_negatable_i64(&args[2])?;
    let with_values = match args.get(3) {
        None => false,
        Some(option) if args.len() == 4 && is(option, "WITHVALUES") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
                return Err("ERR value is out of range".into());
            }
            true
        }
        Some(_) => return Err(ERR_SYNTAX.into()),
    };
    if count < 0 && count.unsigned_abs() > RANDOM_FIELDS_MAX {
        return Err("ERR value is out of range".into());
    }
    let resp3 = ctx.out.protocol() == Protocol::Resp3;
    read_hash(ctx, &args[1], |out, hash, now| {
        let Some(hash) = hash.filter(|_| count != 0) else {
            out.array(0);
            return;
        };
        let reply_field = |out: &mut ReplyWriter, field: &Field| {
            if with_values && resp3 {
                out.array(2);
            }
            out.bulk(field.name);
            if with_values {
                out.bulk(field.value);
            }
        };
        let picked: Vec<Field> = if count < 0 && hash.encoding_name() == "hashtable" {
            (0..count.unsigned_abs())
                .filter_map(|_| hash.random_field(now, random_u64))
                .collect()
        } else if count < 0 {
            let live: Vec<Field> = hash.fields().filter(|f| f.is_live(now)).collect();
            if live.is_empty() {
                Vec::new()
            } else {
                (0..count.unsigned_abs())
                    .map(|_| live[(random_u64() % live.len() as u64) as usize])
                    .collect()
            }
        } else {
            // Distinct fields: a partial shuffle of the live ones.
            let mut live: Vec<Field> = hash.fields().filter(|f| f.is_live(now)).collect();
            let wanted = (count as usize).min(live.len());
            if wanted < live.len() {
                for i in 0..wanted {
                    let j = i + (random_u64() % (live.len() - i) as u64) as usize;
                    live.swap(i, j);
                }
                live.truncate(wanted);
            }
            live
        };
        out.array(if with_values && !resp3 {
            picked.len() * 2
        } else {
            picked.len()
        });
        for field in &picked {
            reply_field(out, field);
        }
    })
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES].
///
/// A packed hash is returned whole with cursor 0, as Redis does for a
/// listpack. For a table the cursor is a position in the order of a
/// fixed hash of the field names (independent of the table's layout, so
/// growing, shrinking or reloading the hash between calls loses nothing:
/// every field present for the whole iteration is returned at least
/// once). Each call returns the fields in the next slice of that order.
pub fn hscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(scan) = ScanArgs::parse_for_key::<Hash>(ctx, args, true)? else {
        return Ok(());
    };
    let (cursor, count, values) = (scan.cursor, scan.count, !scan.no_values);
    read_hash(ctx, &args[1], |out, hash, now| {
        let Some(hash) = hash else {
            out.array(2);
            out.bulk(b"0");
            out.array(0);
            return;
        };
        let keep = |f: &Field| f.is_live(now) && scan.matches(f.name);
        let (next, found): (u64, Vec<Field>) = if hash.encoding_name() == "hashtable" {
            let slice = ScanSlice::new(cursor, count, hash.len());
            let found = hash
                .fields()
                .filter(|f| slice.contains(scan_position(f.name)) && keep(f))
                .collect();
            (slice.next_cursor(), found)
        } else {
            (0, hash.fields().filter(keep).collect())
        };
        out.array(2);
        out.bulk(next.to_string().as_bytes());
        out.array(found.len() * if values { 2 } else { 1 });
        for field in &found {
            out.bulk(field.name);
            if values {
                out.bulk(field.value);
            }
        }
    })
}

/// A field name's place in HSCAN's order: a hash with a fixed seed, so
/// the order survives the table being rebuilt or reloaded.
fn scan_position(name: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6873_6361_6e5f_7631).hash_one(name)
}

/// The fields of a `FIELDS numfields field…` block starting at
/// `args[at]`, with Redis 7.4's errors (`count_error` when numfields is
/// not a positive integer).
fn fields_block<'a>(
    args: &'a [Bytes],
    at: usize,
    count_error: &'static str,
) -> Result<&'a [Bytes], CmdError> {
    if !args.get(at).is_some_and(|a| is(a, "FIELDS")) {
        return Err(ERR_FIELDS_POSITION.into());
    }
    let count = args
        .get(at + 1)
        .and_then(|a| strata_engine::types::value::parse_canonical_i64(a))
        .filter(|&n| n >= 1)
        .ok_or(CmdError::from(count_error))?;
    let fields = &args[at + 2..];
    if fields.len() as i64 != count {
        return Err(ERR_NUMFIELDS_MATCH.into());
    }
    Ok(fields)
}

/// An absolute field deadline from a command's time argument: `amount`
/// seconds or ms, relative to `base_ms` (0 for the *AT forms), with
/// Redis' errors. The result may be in the past.
fn field_deadline(
    amount: &[u8],
    seconds: bool,
    base_ms: u64,
    command: &str,
) -> Result<u64, CmdError> {
    let amount = parse_i64(amount)?;
    let invalid = || CmdError::from(format!("ERR invalid expire time in '{command}' command"));
    if amount < 0 {
        return Err("ERR invalid expire time, must be >= 0".into());
    }
    let millis = if seconds {
        if amount > FIELD_DEADLINE_MS_MAX / 1000 {
            return Err(invalid());
        }
        amount * 1000
    } else {
        amount
    };
    if millis > FIELD_DEADLINE_MS_MAX - base_ms as i64 {
        return Err(invalid());
    }
    Ok(millis as u64 + base_ms)
}

/// Deadline changes for `fields` of the hash at `key`: `decide` maps each
/// live field to its new deadline (`Some(None)`: none) or no change, and
/// the reply code; the changes are applied in one step.
fn change_deadlines(
    ctx: &mut Ctx,
    name: &[u8],
    put_event: &str,
    fields: &[Bytes],
    missing_key_code: i64,
    mut decide: impl FnMut(Field, u64) -> (Option<Option<u64>>, i64),
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let current = hash.as_ref().and_then(|e| e.value().hash());
    let mut codes = Vec::with_capacity(fields.len());
    // Owned copies of the values to store again with their new deadline.
    let mut updates: Vec<(&[u8], Vec<u8>, Option<u64>)> = Vec::new();
    for name in fields {
        let Some(hash) = current else {
            codes.push(missing_key_code);
            continue;
        };
        // A field named twice sees what its first mention did, as Redis
        // applies them one by one: gone (a deadline in the past), or its
        // new deadline.
        let earlier = (updates.iter().rev())
            .find(|(n, _, _)| *n == &name[..])
            .map(|(_, value, deadline)| (value.clone(), *deadline));
        let value_then;
        let field = match earlier {
            Some((_, Some(at))) if at <= now => {
                codes.push(-2);
                continue;
            }
            Some((value, deadline)) => {
                value_then = value;
                Field {
                    name,
                    value: &value_then,
                    deadline,
                }
            }
            None => match hash.field(name, now) {
                Some(field) => field,
                None => {
                    codes.push(-2);
                    continue;
                }
            },
        };
        let (change, code) = decide(field, now);
        if let Some(deadline) = change {
            updates.retain(|(n, _, _)| *n != &name[..]);
            updates.push((name, field.value.to_vec(), deadline));
        }
        codes.push(code);
    }
    let changes: Vec<FieldChange> = updates
        .iter()
        .map(|(name, value, deadline)| match deadline {
            Some(at) if *at <= now => FieldChange::Remove(name),
            _ => FieldChange::Put(Field {
                name,
                value,
                deadline: *deadline,
            }),
        })
        .collect();
    if !changes.is_empty() {
        let changed = change_found(hash, db, &changes, now)?;
        settle(shard, db, key, changed, &changes, now);
        notify_changes(ctx, name, &changes, put_event);
    }
    ctx.out.array(codes.len());
    for code in codes {
        ctx.out.int(code);
    }
    Ok(())
}

/// HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT: `key time [NX|XX|GT|LT]
/// FIELDS numfields field…`. Per field: -2 no such field, 0 condition not
/// met, 1 deadline set, 2 deleted (a deadline already past).
pub fn hexpire_generic(ctx: &mut Ctx, args: &[Bytes], seconds: bool, relative: bool) -> CmdResult {
    // Another type is refused before the time is read, as in Redis.
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    ctx.keys.shard(key).get_as::<Hash>(db, key, now)?;
    let command = String::from_utf8_lossy(&args[0]).to_lowercase();
    let base = if relative { ctx.now_ms } else { 0 };
    let at = field_deadline(&args[2], seconds, base, &command)?;
    let condition = ["NX", "XX", "GT", "LT"]
        .into_iter()
        .find(|c| is(&args[3], c));
    let fields_at = if condition.is_some() { 4 } else { 3 };
    let fields = fields_block(
        args,
        fields_at,
        "ERR Parameter `numFields` should be greater than 0",
    )?;
    change_deadlines(ctx, &args[1], "hexpire", fields, -2, |field, now| {
        let met = match (condition, field.deadline) {
            (Some("NX"), Some(_)) => false,
            (Some("XX" | "GT"), None) => false,
            (Some("GT"), Some(old)) => at > old,
            (Some("LT"), Some(old)) => at < old,
            _ => true,
        };
        if !met {
            (None, 0)
        } else if at <= now {
            (Some(Some(at)), 2)
        } else {
            (Some(Some(at)), 1)
        }
    })
}

/// HPERSIST key FIELDS numfields field…: -2 no such field, -1 no
/// deadline, 1 deadline removed.
pub fn hpersist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let fields = fields_block(args, 2, ERR_NUMFIELDS_POSITIVE)?;
    change_deadlines(
        ctx,
        &args[1],
        "hpersist",
        fields,
        -2,
        |field, _| match field.deadline {
            Some(_) => (Some(None), 1),
            None => (None, -1),
        },
    )
}

/// HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME: per field -2 no such field,
/// -1 no deadline, else the time left (or the deadline), in seconds
/// rounded up or in ms.
pub fn httl_generic(ctx: &mut Ctx, args: &[Bytes], seconds: bool, remaining: bool) -> CmdResult {
    let fields = fields_block(args, 2, ERR_NUMFIELDS_POSITIVE)?;
    read_hash(ctx, &args[1], |out, hash, now| {
        out.array(fields.len());
        for name in fields {
            let code = match hash.and_then(|h| h.deadline(name, now)) {
                None => -2,
                Some(None) => -1,
                Some(Some(at)) => {
                    let base = if remaining { now } else { 0 };
                    let ms = (at - base) as i64;
                    if seconds { (ms + 999) / 1000 } else { ms }
                }
            };
            out.int(code);
        }
    })
}

/// Replies the values of `fields` (null for a missing one) and applies
/// `change` to each field found: HGETDEL and HGETEX.
fn get_and_change(
    ctx: &mut Ctx,
    name: &[u8],
    fields: &[Bytes],
    change: Option<Option<u64>>,
    delete: bool,
) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let current = hash.as_ref().and_then(|e| e.value().hash());
    let mut found: Vec<(&[u8], Vec<u8>)> = Vec::new();
    ctx.out.array(fields.len());
    for name in fields {
        // A field named twice is gone the second time (HGETDEL).
        let gone = delete && found.iter().any(|(n, _)| *n == &name[..]);
        match current.and_then(|h| h.get(name, now)).filter(|_| !gone) {
            Some(value) => {
                ctx.out.bulk(value);
                if !found.iter().any(|(n, _)| *n == &name[..]) {
                    found.push((name, value.to_vec()));
                }
            }
            None => ctx.out.null_bulk(),
        }
    }
    let changes: Vec<FieldChange> = found
        .iter()
        .filter_map(|(name, value)| match (delete, change) {
            (true, _) => Some(FieldChange::Remove(name)),
            (false, Some(Some(at))) if at <= now => Some(FieldChange::Remove(name)),
            (false, Some(deadline)) => Some(FieldChange::Put(Field {
                name,
                value,
                deadline,
            })),
            (false, None) => None,
        })
        .collect();
    if !changes.is_empty() {
        let changed = change_found(hash, db, &changes, now)?;
        settle(shard, db, key, changed, &changes, now);
        let event = match change {
            Some(None) => "hpersist",
            _ => "hexpire",
        };
        notify_changes(ctx, name, &changes, event);
    }
    Ok(())
}

/// HGETDEL key FIELDS numfields field…
pub fn hgetdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let fields = fields_block(args, 2, ERR_NUMFIELDS_POSITIVE)?;
    get_and_change(ctx, &args[1], fields, None, true)
}

/// HGETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST] FIELDS numfields
/// field…
pub fn hgetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let option = ["EX", "PX", "EXAT", "PXAT", "PERSIST"]
        .into_iter()
        .find(|o| is(&args[2], o));
    let (change, fields_at) = match option {
        None => (None, 2),
        Some("PERSIST") => (Some(None), 3),
        Some(unit) => {
            let seconds = unit == "EX" || unit == "EXAT";
            let base = if unit.ends_with("AT") { 0 } else { ctx.now_ms };
            let at = field_deadline(&args[3], seconds, base, "hgetex")?;
            (Some(Some(at)), 4)
        }
    };
    let fields = fields_block(args, fields_at, ERR_NUMFIELDS_POSITIVE)?;
    get_and_change(ctx, &args[1], fields, change, false)
}

/// HSETEX key [FNX | FXX] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
/// FIELDS numfields field value…: 1 when the fields were set, 0 when the
/// condition kept them from being set.
pub fn hsetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    #[derive(Clone, Copy, PartialEq)]
    enum Ttl {
        Clear,
        Keep,
        At(u64),
    }
    let (mut condition, mut ttl, mut have_ttl) = (None, Ttl::Clear, false);
    let mut i = 2;
    let pairs = loop {
        let Some(arg) = args.get(i) else {
            return Err(wrong_arity("hsetex"));
        };
        if is(arg, "FIELDS") {
            if i + 3 >= args.len() {
                return Err(wrong_arity("hsetex"));
            }
            let count = strata_engine::types::value::parse_canonical_i64(&args[i + 1])
                .filter(|n| (1..=i32::MAX as i64).contains(n))
                .ok_or(CmdError::from("ERR invalid number of fields"))?;
            let rest = &args[i + 2..];
            if !rest.len().is_multiple_of(2) || count as usize != rest.len() / 2 {
                return Err(wrong_arity("hsetex"));
            }
            break rest;
        } else if is(arg, "FNX") || is(arg, "FXX") {
            if condition.is_some() {
                return Err("ERR Only one of FXX or FNX arguments can be specified".into());
            }
            condition = Some(is(arg, "FNX"));
        } else if let Some(unit) = ["EX", "PX", "EXAT", "PXAT", "KEEPTTL"]
            .into_iter()
            .find(|o| is(arg, o))
        {
            if have_ttl {
                return Err(
                    "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified"
                        .into(),
                );
            }
            have_ttl = true;
            if unit == "KEEPTTL" {
                ttl = Ttl::Keep;
            } else {
                let Some(amount) = args.get(i + 1) else {
                    return Err("ERR missing expire time".into());
                };
                let seconds = unit == "EX" || unit == "EXAT";
                let base = if unit.ends_with("AT") { 0 } else { ctx.now_ms };
                ttl = Ttl::At(field_deadline(amount, seconds, base, "hsetex")?);
                i += 1;
            }
        } else {
            return Err(format!("ERR unknown argument: {}", String::from_utf8_lossy(arg)).into());
        }
        i += 1;
    };
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let hash = shard.get_as::<Hash>(db, key, now)?;
    let current = hash.as_ref().and_then(|e| e.value().hash());
    let exists = |name: &[u8]| current.is_some_and(|h| h.get(name, now).is_some());
    let allowed = match condition {
        Some(true) => pairs.chunks(2).all(|p| !exists(&p[0])),
        Some(false) => pairs.chunks(2).all(|p| exists(&p[0])),
        None => true,
    };
    if !allowed {
        ctx.out.int(0);
        return Ok(());
    }
    let deadlines: Vec<Option<u64>> = pairs
        .chunks(2)
        .map(|p| match ttl {
            Ttl::Clear => None,
            Ttl::At(at) => Some(at),
            Ttl::Keep => current.and_then(|h| h.deadline(&p[0], now)).flatten(),
        })
        .collect();
    let changes: Vec<FieldChange> = pairs
        .chunks(2)
        .zip(&deadlines)
        .map(|(p, &deadline)| match deadline {
            Some(at) if at <= now => FieldChange::Remove(&p[0]),
            _ => FieldChange::Put(Field {
                name: &p[0],
                value: &p[1],
                deadline,
            }),
        })
        .collect();
    let changed = change_found(hash, db, &changes, now)?;
    settle(shard, db, key, changed, &changes, now);
    notify_changes(ctx, &args[1], &changes, "hset");
    if matches!(ttl, Ttl::At(at) if at > now) {
        ctx.notify(notify::HASH, "hexpire", &args[1]);
    }
    ctx.out.int(1);
    Ok(())
}

fn wrong_arity(command: &str) -> CmdError {
    format!("ERR wrong number of arguments for '{command}' command").into()
}
