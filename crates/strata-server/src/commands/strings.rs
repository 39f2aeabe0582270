//! String commands.

use crate::events::notify;
use crate::long_double::{self, AddError};
use bytes::Bytes;
use strata_engine::types::collection::Str;
use strata_engine::types::value::parse_canonical_i64;
use strata_engine::{Value, ValueType};

use super::{
    CmdError, CmdResult, Ctx, ERR_NOT_FLOAT, ERR_NOT_INTEGER, ERR_OVERFLOW, ERR_STRING_TOO_LONG,
    ERR_SYNTAX, is, parse_i64, write_value,
};

pub fn get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let found = match shard.get_as::<Str>(db, key, now)? {
        Some(entry) => {
            write_value(&mut ctx.out, entry.value());
            true
        }
        None => {
            ctx.out.null_bulk();
            false
        }
    };
    ctx.stats.hit(found);
    Ok(())
}

/// How a command sets a key's deadline.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// Leave as is (GETEX without options) or clear (SET without options).
    Unchanged,
    KeepTtl,
    Persist,
    At(u64),
    /// A deadline already in the past: the key ends up deleted.
    Past,
}

/// Converts an EX/PX/EXAT/PXAT amount into an absolute deadline, with
/// Redis' validation (positive, no overflow).
fn deadline(option: &[u8], amount: &[u8], now_ms: u64, command: &str) -> Result<Expiry, CmdError> {
    let amount = parse_i64(amount)?;
    let invalid = || CmdError::from(format!("ERR invalid expire time in '{command}' command"));
    if amount <= 0 {
        return Err(invalid());
    }
    let (relative, seconds) = match option.to_ascii_uppercase().as_slice() {
        b"EX" => (true, true),
        b"PX" => (true, false),
        b"EXAT" => (false, true),
        _ => (false, false),
    };
    let millis = if seconds {
        amount.checked_mul(1000).ok_or_else(invalid)?
    } else {
        amount
    };
    let at = if relative {
        millis.checked_add(now_ms as i64).ok_or_else(invalid)?
    } else {
        millis
    };
    Ok(if at as u64 <= now_ms {
        Expiry::Past
    } else {
        Expiry::At(at as u64)
    })
}

/// Parses `EX|PX|EXAT|PXAT amount` at `args[i]`; `None` when `args[i]` is
/// not one of those options (or lacks its amount).
fn expire_option(
    args: &[Bytes],
    i: usize,
    now_ms: u64,
    command: &str,
) -> Option<Result<Expiry, CmdError>> {
    is_expire_option(args, i).then(|| deadline(&args[i], &args[i + 1], now_ms, command))
}

/// Whether `args[i]` is `EX|PX|EXAT|PXAT` with an amount after it. SET
/// and GETEX read the amount only once every option was checked (GETEX
/// once the key was found too), as Redis does: a conflict of options is
/// a syntax error whatever the amount, and GETEX of a missing key answers
/// nil.
fn is_expire_option(args: &[Bytes], i: usize) -> bool {
    let option = &args[i];
    ["EX", "PX", "EXAT", "PXAT"].iter().any(|o| is(option, o)) && i + 1 < args.len()
}

/// SET's and DELEX's compare-and-set conditions (Redis 8.4): IFEQ holds
/// for an existing value equal to the one given, IFNE for a missing key
/// or a value that differs; IFDEQ and IFDNE likewise compare the value's
/// digest (see [`digest_of`]) with a given one, in any letter case.
#[derive(Clone, Copy)]
enum IfValue<'a> {
    Equal(&'a [u8]),
    NotEqual(&'a [u8]),
    DigestEqual(&'a [u8]),
    DigestNotEqual(&'a [u8]),
}

impl<'a> IfValue<'a> {
    /// The condition `option` names with its argument, if it names one.
    fn parse(option: &[u8], argument: &'a [u8]) -> Option<IfValue<'a>> {
        Some(match option.to_ascii_uppercase().as_slice() {
            b"IFEQ" => IfValue::Equal(argument),
            b"IFNE" => IfValue::NotEqual(argument),
            b"IFDEQ" => IfValue::DigestEqual(argument),
            b"IFDNE" => IfValue::DigestNotEqual(argument),
            _ => return None,
        })
    }

    /// Whether the condition holds for the value there is (`None`: no
    /// key). A digest is checked for its length only when there is a
    /// value to compare it with, as Redis checks it.
    fn holds(self, current: Option<&[u8]>) -> Result<bool, CmdError> {
        let digest_matches = |given: &[u8], value: &[u8]| {
            if given.len() != 16 {
                return Err(CmdError::from(
                    "ERR must be exactly 16 hexadecimal characters",
                ));
            }
            Ok(given.eq_ignore_ascii_case(&digest_of(value)))
        };
        Ok(match (self, current) {
            (IfValue::Equal(v), current) => current == Some(v),
            (IfValue::NotEqual(v), current) => current != Some(v),
            (IfValue::DigestEqual(_), None) => false,
            (IfValue::DigestNotEqual(_), None) => true,
            (IfValue::DigestEqual(d), Some(value)) => digest_matches(d, value)?,
            (IfValue::DigestNotEqual(d), Some(value)) => !digest_matches(d, value)?,
        })
    }

    fn same_kind(self, other: IfValue) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
    }
}

/// A string value's digest as DIGEST answers it (Redis 8.4): XXH3-64
/// (seed 0) of its bytes, in 16 lowercase hexadecimal digits.
fn digest_of(value: &[u8]) -> [u8; 16] {
    let mut text = [0u8; 16];
    let hash = xxhash_rust::xxh3::xxh3_64(value);
    for (i, digit) in text.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[((hash >> (60 - 4 * i)) & 0xf) as usize];
    }
    text
}

/// DIGEST key (Redis 8.4): the digest of a string value, nil for no key.
pub fn digest(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    match ctx.keys.shard(key).get_as::<Str>(db, key, now)? {
        Some(entry) => {
            let digest = digest_of(entry.value().as_bytes());
            ctx.out.bulk(&digest);
        }
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

pub fn set(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut condition = None;
    let mut expiry = Expiry::Unchanged;
    let mut expire_at = None;
    let mut i = 3;
    while i < args.len() {
        let option = &args[i];
        // NX, XX, IFEQ and IFNE exclude one another.
        let free = !nx && !xx && condition.is_none();
        if is(option, "NX") && free {
            nx = true;
        } else if is(option, "XX") && free {
            xx = true;
        } else if let Some(parsed) = args
            .get(i + 1)
            .and_then(|argument| IfValue::parse(option, argument))
        {
            // The same condition again replaces the first (as in Redis);
            // another one, NX or XX is a syntax error.
            if nx || xx || condition.is_some_and(|c: IfValue| !c.same_kind(parsed)) {
                return Err(ERR_SYNTAX.into());
            }
            condition = Some(parsed);
            i += 1;
        } else if is(option, "GET") {
            get = true;
        } else if is(option, "KEEPTTL") && expiry == Expiry::Unchanged && expire_at.is_none() {
            expiry = Expiry::KeepTtl;
        } else if expiry == Expiry::Unchanged && expire_at.is_none() && is_expire_option(args, i) {
            expire_at = Some(i);
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    if let Some(at) = expire_at {
        expiry = deadline(&args[at], &args[at + 1], ctx.now_ms, "set")?;
    }
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    // Only SET … GET and the IF conditions need the old value (which may
    // be on disk); they need a string.
    let (exists, holds) = if get || condition.is_some() {
        let existing = shard.get_as::<Str>(db, key, now)?;
        let current = existing.as_ref().map(|e| e.value().as_bytes());
        let holds = match condition {
            Some(c) => c.holds(current)?,
            None => true,
        };
        if get {
            match &existing {
                Some(entry) => write_value(&mut ctx.out, entry.value()),
                None => ctx.out.null_bulk(),
            }
        }
        (existing.is_some(), holds)
    } else {
        (shard.touch(db, key, now).is_some(), true)
    };
    if (nx && exists) || (xx && !exists) || !holds {
        if !get {
            ctx.out.null_bulk();
        }
        return Ok(());
    }
    let value = Value::from_bytes(&args[2]);
    match expiry {
        Expiry::Past => {
            shard.remove(db, key, now);
        }
        Expiry::At(at) => shard.set(db, key, value, Some(at), false, now),
        Expiry::KeepTtl => shard.set(db, key, value, None, true, now),
        Expiry::Unchanged | Expiry::Persist => shard.set(db, key, value, None, false, now),
    }
    if !get {
        ctx.out.ok();
    }
    notify_set(ctx, &args[1], expiry);
    Ok(())
}

/// The events of a string set with `expiry` (SET, SETEX, PSETEX).
fn notify_set(ctx: &Ctx, key: &[u8], expiry: Expiry) {
    ctx.notify(notify::STRING, "set", key);
    match expiry {
        Expiry::At(_) => ctx.notify(notify::GENERIC, "expire", key),
        Expiry::Past => ctx.notify(notify::GENERIC, "del", key),
        _ => {}
    }
}

pub fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let created = !shard.contains(db, key, now);
    if created {
        shard.set(db, key, Value::from_bytes(&args[2]), None, false, now);
        ctx.notify(notify::STRING, "set", &args[1]);
    }
    ctx.out.int(created as i64);
    Ok(())
}

fn setex_generic(ctx: &mut Ctx, args: &[Bytes], unit: &str, command: &str) -> CmdResult {
    let expiry = deadline(unit.as_bytes(), &args[2], ctx.now_ms, command)?;
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    match expiry {
        Expiry::At(at) => shard.set(db, key, Value::from_bytes(&args[3]), Some(at), false, now),
        _ => {
            shard.remove(db, key, now);
        }
    }
    ctx.out.ok();
    notify_set(ctx, &args[1], expiry);
    Ok(())
}

pub fn setex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    setex_generic(ctx, args, "EX", "setex")
}

pub fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    setex_generic(ctx, args, "PX", "psetex")
}

pub fn getset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    match shard.get_as::<Str>(db, key, now)? {
        Some(entry) => write_value(&mut ctx.out, entry.value()),
        None => ctx.out.null_bulk(),
    }
    shard.set(db, key, Value::from_bytes(&args[2]), None, false, now);
    ctx.notify(notify::STRING, "set", &args[1]);
    Ok(())
}

pub fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let removed = ctx.keys.shard(key).take_string(db, key, now)?;
    match &removed {
        Some(entry) => {
            write_value(&mut ctx.out, entry.value());
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
        None => ctx.out.null_bulk(),
    }
    ctx.stats.hit(removed.is_some());
    Ok(())
}

/// DELEX key [IFEQ value | IFNE value | IFDEQ digest | IFDNE digest]
/// (Redis 8.4): DEL of one key of any type, or, with a condition,
/// compare-and-delete of a string. As in Redis, a missing key answers 0
/// whatever the condition says, and a key of another type is refused
/// with its own message rather than WRONGTYPE.
pub fn delex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.len() {
        2 | 4 => {}
        _ => return Err("ERR wrong number of arguments for 'delex' command".into()),
    }
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    if args.len() == 4 {
        let existing = match shard.get_as::<Str>(db, key, now) {
            Err(strata_engine::keyspace::shards::GetError::WrongType) => {
                return Err("ERR Key should be of string type if conditions are specified".into());
            }
            other => other?,
        };
        let Some(entry) = existing else {
            ctx.out.int(0);
            return Ok(());
        };
        let condition = IfValue::parse(&args[2], &args[3])
            .ok_or("ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE")?;
        if !condition.holds(Some(entry.value().as_bytes()))? {
            ctx.out.int(0);
            return Ok(());
        }
    }
    let removed = shard.remove(db, key, now).is_some();
    if removed {
        ctx.notify(notify::GENERIC, "del", &args[1]);
    }
    ctx.out.int(removed as i64);
    Ok(())
}

pub fn getex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut expiry = Expiry::Unchanged;
    let mut expire_at = None;
    let mut i = 2;
    while i < args.len() {
        let option = &args[i];
        let free = expiry == Expiry::Unchanged && expire_at.is_none();
        if is(option, "PERSIST") && free {
            expiry = Expiry::Persist;
        } else if free && is_expire_option(args, i) {
            expire_at = Some(i);
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let Some(entry) = shard.get_as::<Str>(db, key, now)? else {
        ctx.stats.hit(false);
        ctx.out.null_bulk();
        return Ok(());
    };
    if let Some(at) = expire_at {
        expiry = deadline(&args[at], &args[at + 1], now, "getex")?;
    }
    write_value(&mut ctx.out, entry.value());
    let had_deadline = entry.expire_at_ms().is_some();
    // The change, if any, is counted and logged by the commit.
    let event = match expiry {
        Expiry::Past => shard.remove(db, key, now).map(|_| "del"),
        Expiry::At(at) => shard.set_expire(db, key, Some(at), now).then_some("expire"),
        Expiry::Persist if had_deadline => {
            shard.set_expire(db, key, None, now).then_some("persist")
        }
        _ => None,
    };
    if let Some(event) = event {
        ctx.notify(notify::GENERIC, event, &args[1]);
    }
    ctx.stats.hit(true);
    Ok(())
}

pub fn mget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let refs: Vec<_> = args[1..].iter().map(|k| ctx.key(k)).collect();
    ctx.out.array(refs.len());
    let mut hits = 0;
    for key in &refs {
        // As Redis: a key of another type reads as missing here.
        match ctx.keys.shard(*key).get(db, *key, now)? {
            Some(entry) if entry.value_type() == ValueType::String => {
                write_value(&mut ctx.out, entry.value());
                hits += 1;
            }
            _ => ctx.out.null_bulk(),
        }
    }
    crate::observe::stats::bump(&ctx.stats.keyspace_hits, hits);
    crate::observe::stats::bump(&ctx.stats.keyspace_misses, refs.len() as u64 - hits);
    Ok(())
}

/// MSET and MSETNX: all keys are set at once under their shards' locks.
fn mset_generic(ctx: &mut Ctx, args: &[Bytes], only_if_none_exist: bool) -> Result<bool, CmdError> {
    if args.len().is_multiple_of(2) {
        return Err(format!(
            "ERR wrong number of arguments for '{}' command",
            if only_if_none_exist { "msetnx" } else { "mset" }
        )
        .into());
    }
    let (db, now) = (ctx.db(), ctx.now_ms);
    let refs: Vec<_> = args[1..].chunks(2).map(|pair| ctx.key(&pair[0])).collect();
    if only_if_none_exist
        && refs
            .iter()
            .any(|k| ctx.keys.shard(*k).contains(db, *k, now))
    {
        return Ok(false);
    }
    for (key, pair) in refs.iter().zip(args[1..].chunks(2)) {
        ctx.keys
            .shard(*key)
            .set(db, *key, Value::from_bytes(&pair[1]), None, false, now);
    }
    for pair in args[1..].chunks(2) {
        ctx.notify(notify::STRING, "set", &pair[0]);
    }
    Ok(true)
}

pub fn mset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    mset_generic(ctx, args, false)?;
    ctx.out.ok();
    Ok(())
}

pub fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let set = mset_generic(ctx, args, true)?;
    ctx.out.int(set as i64);
    Ok(())
}

/// MSETEX numkeys key value [key value ...] [NX | XX]
/// [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL] (Redis 8.4): MSET with one
/// expiry for every key, all or nothing under NX (no key exists) or XX
/// (every key exists). Replies 1 when it set the keys, else 0.
pub fn msetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let numkeys = parse_i64(&args[1])
        .ok()
        .filter(|n| (1..=i32::MAX as i64).contains(n))
        .ok_or("ERR invalid numkeys value")? as usize;
    let options_at = 2 + 2 * numkeys;
    if options_at > args.len() {
        return Err("ERR wrong number of key-value pairs".into());
    }
    let (mut nx, mut xx) = (false, false);
    let mut expiry = Expiry::Unchanged;
    let mut expiry_option: Option<&[u8]> = None;
    let mut i = options_at;
    while i < args.len() {
        let option = &args[i];
        if is(option, "NX") && !xx {
            nx = true;
        } else if is(option, "XX") && !nx {
            xx = true;
        } else if is(option, "KEEPTTL") && matches!(expiry, Expiry::Unchanged | Expiry::KeepTtl) {
            expiry = Expiry::KeepTtl;
        } else if expiry != Expiry::KeepTtl
            && expiry_option.is_none_or(|o| o.eq_ignore_ascii_case(option))
            && let Some(parsed) = expire_option(args, i, ctx.now_ms, "msetex")
        {
            // The same expiry again replaces the first, as in Redis.
            expiry = parsed?;
            expiry_option = Some(option);
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    let (db, now) = (ctx.db(), ctx.now_ms);
    let pairs = &args[2..options_at];
    let refs: Vec<_> = pairs.chunks(2).map(|pair| ctx.key(&pair[0])).collect();
    if nx || xx {
        let exists = |ctx: &mut Ctx, k| ctx.keys.shard(k).contains(db, k, now);
        let refused = refs.iter().any(|&k| exists(ctx, k) == nx);
        if refused {
            ctx.out.int(0);
            return Ok(());
        }
    }
    for (key, pair) in refs.iter().zip(pairs.chunks(2)) {
        let shard = ctx.keys.shard(*key);
        let value = Value::from_bytes(&pair[1]);
        match expiry {
            Expiry::At(at) => shard.set(db, *key, value, Some(at), false, now),
            Expiry::KeepTtl => shard.set(db, *key, value, None, true, now),
            Expiry::Past => {
                shard.remove(db, *key, now);
            }
            Expiry::Unchanged | Expiry::Persist => shard.set(db, *key, value, None, false, now),
        }
    }
    for pair in pairs.chunks(2) {
        match expiry {
            // Redis signals the expiry before the set here (SET: after).
            Expiry::At(_) => {
                ctx.notify(notify::GENERIC, "expire", &pair[0]);
                ctx.notify(notify::STRING, "set", &pair[0]);
            }
            Expiry::Past => ctx.notify(notify::GENERIC, "del", &pair[0]),
            _ => ctx.notify(notify::STRING, "set", &pair[0]),
        }
    }
    ctx.out.int(1);
    Ok(())
}

pub fn append(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let limit = ctx.config.proto_max_bulk_len;
    let shard = ctx.keys.shard(key);
    let length = match shard.get_as::<Str>(db, key, now)? {
        Some(entry) => {
            if (entry.value().len() + args[2].len()) as u64 > limit {
                return Err(ERR_STRING_TOO_LONG.into());
            }
            let end = entry.value().len();
            entry.write_at(db, end, &args[2])
        }
        None => {
            shard.set(db, key, Value::from_bytes(&args[2]), None, false, now);
            args[2].len()
        }
    };
    ctx.notify(notify::STRING, "append", &args[1]);
    ctx.out.int(length as i64);
    Ok(())
}

pub fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let length = ctx
        .keys
        .shard(key)
        .get_as::<Str>(db, key, now)?
        .map_or(0, |e| e.value().len());
    ctx.out.int(length as i64);
    Ok(())
}

fn incr_generic(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(key), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let result = match shard.get_as::<Str>(db, key, now)? {
        Some(entry) => {
            let value = entry.value();
            let current = value
                .as_int()
                .or_else(|| parse_canonical_i64(value.as_bytes()))
                .ok_or(CmdError::from(ERR_NOT_INTEGER))?;
            let next = current
                .checked_add(delta)
                .ok_or(CmdError::from(ERR_OVERFLOW))?;
            entry.set_value(db, Value::Int(next));
            next
        }
        None => {
            shard.set(db, key, Value::Int(delta), None, false, now);
            delta
        }
    };
    ctx.notify(notify::STRING, "incrby", key.bytes);
    ctx.out.int(result);
    Ok(())
}

pub fn incr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_generic(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_generic(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = parse_i64(&args[2])?;
    incr_generic(ctx, &args[1], delta)
}

pub fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = parse_i64(&args[2])?;
    let negated = delta
        .checked_neg()
        .ok_or(CmdError::from("ERR decrement would overflow"))?;
    incr_generic(ctx, &args[1], negated)
}

pub fn incrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let entry = shard.get_as::<Str>(db, key, now)?;
    let current = entry.as_ref().map(|e| e.value());
    let text =
        long_double::add(current.as_ref().map(|v| v.as_bytes()), &args[2]).map_err(|error| {
            match error {
                AddError::CurrentNotFloat | AddError::IncrementNotFloat => {
                    CmdError::from(ERR_NOT_FLOAT)
                }
                AddError::NotFinite | AddError::IncrementNotFinite => {
                    CmdError::from("ERR increment would produce NaN or Infinity")
                }
            }
        })?;
    // As Redis: the sum is stored as text, never integer-encoded.
    let value = Value::owned(text.clone());
    match entry {
        Some(entry) => entry.set_value(db, value),
        None => shard.set(db, key, value, None, false, now),
    }
    ctx.notify(notify::STRING, "incrbyfloat", &args[1]);
    ctx.out.bulk(&text);
    Ok(())
}

/// Resolves Redis' inclusive, possibly negative [start, end] over `len`
/// bytes; `None` for an empty range.
pub fn byte_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    clamped_range(start, end, len)
}

/// [`byte_range`] without its first rule: BITPOS clamps a range of two
/// negative ends whatever their order (`-2 -100` of one byte is byte 0),
/// as Redis does.
pub fn clamped_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if len == 0 {
        return None;
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    (start <= end && start < len).then_some((start as usize, end as usize))
}

pub fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (start, end) = (parse_i64(&args[2])?, parse_i64(&args[3])?);
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    match shard.get_as::<Str>(db, key, now)? {
        Some(entry) => {
            let bytes = entry.value().as_bytes();
            match byte_range(start, end, bytes.len()) {
                Some((from, to)) => ctx.out.bulk(&bytes[from..=to]),
                None => ctx.out.bulk(b""),
            }
        }
        None => ctx.out.bulk(b""),
    }
    Ok(())
}

pub fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let offset = parse_i64(&args[2])?;
    if offset < 0 {
        return Err("ERR offset is out of range".into());
    }
    let offset = offset as usize;
    let patch = &args[3];
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let limit = ctx.config.proto_max_bulk_len;
    let shard = ctx.keys.shard(key);
    let entry = shard.get_as::<Str>(db, key, now)?;
    if patch.is_empty() {
        let length = entry.map_or(0, |e| e.value().len());
        ctx.out.int(length as i64);
        return Ok(());
    }
    if (offset + patch.len()) as u64 > limit {
        return Err(ERR_STRING_TOO_LONG.into());
    }
    let length = match entry {
        Some(entry) => entry.write_at(db, offset, patch),
        None => shard.create_at(db, key, offset, patch, now),
    };
    ctx.notify(notify::STRING, "setrange", &args[1]);
    ctx.out.int(length as i64);
    Ok(())
}

pub fn lcs(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    // Both keys first, as Redis reads them: another type is LCS's own
    // error, before any option is looked at.
    let (db, now) = (ctx.db(), ctx.now_ms);
    let string_at = |ctx: &mut Ctx, name: &[u8]| -> Result<Vec<u8>, CmdError> {
        let key = ctx.key(name);
        match ctx.keys.shard(key).get(db, key, now)? {
            None => Ok(Vec::new()),
            Some(entry) if entry.value_type() == ValueType::String => {
                Ok(entry.value().as_bytes().to_vec())
            }
            Some(_) => Err("ERR The specified keys must contain string values".into()),
        }
    };
    let a = string_at(ctx, &args[1])?;
    let b = string_at(ctx, &args[2])?;
    let (mut want_len, mut want_idx, mut with_match_len) = (false, false, false);
    let mut min_match_len = 0usize;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "LEN") {
            want_len = true;
        } else if is(&args[i], "IDX") {
            want_idx = true;
        } else if is(&args[i], "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(&args[i], "MINMATCHLEN") && i + 1 < args.len() {
            min_match_len = parse_i64(&args[i + 1])?.max(0) as usize;
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    if want_len && want_idx {
        return Err("ERR If you want both the length and indexes, please just use IDX.".into());
    }
    // The table below is O(len(a) × len(b)) work on copies: no lock for it.
    let lsn = ctx.keys.release();
    ctx.committed(lsn);
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    if cells > u32::MAX as u128 || cells * 4 > ctx.config.proto_max_bulk_len as u128 {
        return Err(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len".into(),
        );
    }
    let table = LcsTable::new(&a, &b);
    let total = table.at(a.len(), b.len()) as usize;
    if want_len {
        ctx.out.int(total as i64);
        return Ok(());
    }
    let (common, matches) = table.walk_back(&a, &b, total, min_match_len);
    if !want_idx {
        ctx.out.bulk(&common);
        return Ok(());
    }
    ctx.out.map(2);
    ctx.out.bulk(b"matches");
    ctx.out.array(matches.len());
    for ((a_start, a_end), (b_start, b_end)) in matches {
        ctx.out.array(if with_match_len { 3 } else { 2 });
        ctx.out.array(2);
        ctx.out.int(a_start as i64);
        ctx.out.int(a_end as i64);
        ctx.out.array(2);
        ctx.out.int(b_start as i64);
        ctx.out.int(b_end as i64);
        if with_match_len {
            ctx.out.int((a_end - a_start + 1) as i64);
        }
    }
    ctx.out.bulk(b"len");
    ctx.out.int(total as i64);
    Ok(())
}

/// Redis' LCS table: `at(i, j)` is the length of the longest common
/// subsequence of `a[..i]` and `b[..j]`.
struct LcsTable {
    cells: Vec<u32>,
    width: usize,
}

/// A match: its range in the first string and in the second.
type LcsMatch = ((usize, usize), (usize, usize));

impl LcsTable {
    fn new(a: &[u8], b: &[u8]) -> LcsTable {
        let width = b.len() + 1;
        let mut table = LcsTable {
            cells: vec![0u32; (a.len() + 1) * width],
            width,
        };
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                table.cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    table.at(i - 1, j - 1) + 1
                } else {
                    table.at(i - 1, j).max(table.at(i, j - 1))
                };
            }
        }
        table
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// The common string (`total` long) and the matches of at least
    /// `min_match_len` (0: all).
    fn walk_back(
        &self,
        a: &[u8],
        b: &[u8],
        total: usize,
        min_match_len: usize,
    ) -> (Vec<u8>, Vec<LcsMatch>) {
        // Walk back from the end, collecting the common string and the matching
        // ranges (reported last to first, as Redis does).
        let mut common = vec![0u8; total];
        let mut matches: Vec<LcsMatch> = Vec::new();
        let (mut i, mut j, mut idx) = (a.len(), b.len(), total);
        let mut range: Option<LcsMatch> = None;
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common[idx - 1] = a[i - 1];
                match &mut range {
                    None => range = Some(((i - 1, i - 1), (j - 1, j - 1))),
                    Some(((a_start, _), (b_start, _))) if *a_start == i && *b_start == j => {
                        *a_start -= 1;
                        *b_start -= 1;
                    }
                    Some(_) => emit = true,
                }
                if range.is_some_and(|((a_start, _), (b_start, _))| a_start == 0 || b_start == 0) {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = range.is_some();
            }
            if emit && let Some(found) = range.take() {
                let length = found.0.1 - found.0.0 + 1;
                if min_match_len == 0 || length >= min_match_len {
                    matches.push(found);
                }
            }
        }
        (common, matches)
    }
}

#[cfg(test)]
mod tests {
    use super::byte_range;

    #[test]
    fn ranges_like_redis() {
        assert_eq!(byte_range(0, 3, 10), Some((0, 3)));
        assert_eq!(byte_range(-3, -1, 10), Some((7, 9)));
        assert_eq!(byte_range(0, -1, 10), Some((0, 9)));
        assert_eq!(byte_range(10, 100, 10), None);
        assert_eq!(byte_range(5, 3, 10), None);
        assert_eq!(byte_range(-1, -5, 10), None);
        assert_eq!(byte_range(-100, 100, 10), Some((0, 9)));
        assert_eq!(byte_range(0, 0, 0), None);
    }
}
