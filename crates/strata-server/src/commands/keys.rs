//! Generic key commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, COPY, MOVE,
//! OBJECT, the EXPIRE/TTL family and PERSIST.

use bytes::Bytes;

use super::ctx::{help_lines, parse_db};
use super::{
    CmdError, CmdResult, Ctx, ERR_NO_SUCH_KEY, ERR_SYNTAX, ScanArgs, is, lossy, parse_i64,
};
use crate::events::notify;

pub fn del(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removed = remove_keys(ctx, &args[1..], false);
    ctx.out.int(removed as i64);
    Ok(())
}

/// UNLINK: like DEL; values are dropped after the locks are released. A
/// replica is sent UNLINK, as Redis sends it.
pub fn unlink(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let removed = remove_keys(ctx, &args[1..], true);
    ctx.out.int(removed as i64);
    Ok(())
}

fn remove_keys(ctx: &mut Ctx, keys: &[Bytes], unlink: bool) -> usize {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let refs: Vec<_> = keys.iter().map(|k| ctx.key(k)).collect();
    let mut removed = Vec::new();
    for (key, name) in refs.iter().zip(keys) {
        let shard = ctx.keys.shard(*key);
        let entry = match unlink {
            true => shard.remove_unlinked(db, *key, now),
            false => shard.remove(db, *key, now),
        };
        if let Some(entry) = entry {
            removed.push(entry);
            ctx.notify(notify::GENERIC, "del", name);
        }
    }
    removed.len()
}

pub fn exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let refs: Vec<_> = args[1..].iter().map(|k| ctx.key(k)).collect();
    let count = refs
        .iter()
        .filter(|k| ctx.keys.shard(**k).contains(db, **k, now))
        .count();
    ctx.out.int(count as i64);
    Ok(())
}

pub fn touch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let refs: Vec<_> = args[1..].iter().map(|k| ctx.key(k)).collect();
    let count = refs
        .iter()
        .filter(|k| ctx.keys.shard(**k).touch(db, **k, now).is_some())
        .count();
    ctx.out.int(count as i64);
    Ok(())
}

pub fn type_(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = ctx.key(&args[1]);
    let name = ctx
        .keys
        .shard(key)
        .peek(ctx.session.db, key, ctx.now_ms)
        .map(|e| e.type_name());
    ctx.out.simple(name.unwrap_or("none"));
    Ok(())
}

pub fn keys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (keyspace, db, now) = (ctx.keyspace(), ctx.db(), ctx.now_ms);
    let keys = keyspace.keys_in(ctx.keys.all(), db, &args[1], now);
    ctx.out.array(keys.len());
    for key in &keys {
        ctx.out.bulk(key);
    }
    Ok(())
}

pub fn scan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let scan = ScanArgs::parse(args, 1, true, false)?;
    let (keyspace, db, now) = (ctx.keyspace(), ctx.db(), ctx.now_ms);
    let held = ctx.keys.all();
    let holds_all = held.is_some();
    let mut expired = Vec::new();
    let (next, keys) = keyspace.scan_in(
        held,
        db,
        scan.cursor,
        scan.count,
        now,
        |entry| {
            scan.matches(entry.key())
                && scan
                    .type_filter
                    .is_none_or(|t| t.eq_ignore_ascii_case(entry.type_name().as_bytes()))
        },
        |entry| expired.push(entry.key().to_vec()),
    );
    // Keys past their deadline the cursor passed are reclaimed, as Redis'
    // SCAN does (its lookup expires them): each as a lazy expiry (logged,
    // notified), under its own shard lock unless a transaction or script
    // holds them all.
    for name in &expired {
        let key = ctx.key(name);
        ctx.keys.shard(key).contains(db, key, now);
        if !holds_all {
            let released = ctx.keys.release();
            ctx.committed(released);
        }
    }
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(keys.len());
    for key in &keys {
        ctx.out.bulk(key);
    }
    Ok(())
}

pub fn randomkey(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let (keyspace, db, now) = (ctx.keyspace(), ctx.db(), ctx.now_ms);
    match keyspace.random_key_in(ctx.keys.all(), db, now) {
        Some(key) => ctx.out.bulk(&key),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

/// Whether a string is `raw` only for having been changed in place or
/// built so (APPEND, SETRANGE, BITOP): RENAME, MOVE and COPY keep that, as
/// Redis moves or copies the object with its encoding. (A long string is
/// `raw` by its length wherever it goes.)
fn is_raw(encoding: &str) -> bool {
    encoding == "raw"
}

/// RENAME and RENAMENX. Returns whether the key was renamed; errors when
/// the source does not exist.
fn rename_generic(ctx: &mut Ctx, args: &[Bytes], only_if_absent: bool) -> Result<bool, CmdError> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let (source, target) = (ctx.key(&args[1]), ctx.key(&args[2]));
    if !ctx.keys.shard(source).contains(db, source, now) {
        return Err(ERR_NO_SUCH_KEY.into());
    }
    if source.bytes == target.bytes {
        return Ok(!only_if_absent);
    }
    if only_if_absent && ctx.keys.shard(target).contains(db, target, now) {
        return Ok(false);
    }
    let entry = ctx
        .keys
        .shard(source)
        .take(db, source, now)?
        .expect("checked above");
    let (expire, raw) = (entry.expire_at_ms(), is_raw(entry.encoding_name()));
    let target_shard = ctx.keys.shard(target);
    target_shard.set(db, target, entry.value().to_value(), expire, false, now);
    if raw {
        target_shard.mark_raw(db, target, now);
    }
    ctx.notify(notify::GENERIC, "rename_from", &args[1]);
    ctx.notify(notify::GENERIC, "rename_to", &args[2]);
    Ok(true)
}

pub fn rename(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rename_generic(ctx, args, false)?;
    ctx.out.ok();
    Ok(())
}

pub fn renamenx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let renamed = rename_generic(ctx, args, true)?;
    ctx.out.int(renamed as i64);
    Ok(())
}

pub fn copy(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (source_db, now) = (ctx.db(), ctx.now_ms);
    let mut target_db = source_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "REPLACE") {
            replace = true;
            i += 1;
        } else if is(&args[i], "DB") && i + 1 < args.len() {
            target_db = parse_db(ctx, &args[i + 1])?;
            i += 2;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    if ctx.server.cluster.enabled() && (source_db != 0 || target_db != 0) {
        return Err("ERR Copying to another database is not allowed in cluster mode".into());
    }
    let (source, target) = (ctx.key(&args[1]), ctx.key(&args[2]));
    if source.bytes == target.bytes && source_db == target_db {
        return Err("ERR source and destination objects are the same".into());
    }
    let Some(entry) = ctx.keys.shard(source).get(source_db, source, now)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let (value, expire) = (entry.value().to_value(), entry.expire_at_ms());
    let raw = is_raw(entry.encoding_name());
    let target_shard = ctx.keys.shard(target);
    if !replace && target_shard.contains(target_db, target, now) {
        ctx.out.int(0);
        return Ok(());
    }
    target_shard.set(target_db, target, value, expire, false, now);
    target_shard.mark_copied(target_db, target, now);
    if raw {
        target_shard.mark_raw(target_db, target, now);
    }
    ctx.notify_in(target_db, notify::GENERIC, "copy_to", &args[2]);
    ctx.out.int(1);
    Ok(())
}

pub fn move_(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if ctx.server.cluster.enabled() {
        return Err("ERR MOVE is not allowed in cluster mode".into());
    }
    let (source_db, now) = (ctx.db(), ctx.now_ms);
    let target_db = parse_db(ctx, &args[2])?;
    if target_db == source_db {
        return Err("ERR source and destination objects are the same".into());
    }
    let key = ctx.key(&args[1]);
    // A key and its namesake in another database share a shard: one lock.
    let shard = ctx.keys.shard(key);
    if !shard.contains(source_db, key, now) || shard.contains(target_db, key, now) {
        ctx.out.int(0);
        return Ok(());
    }
    let entry = shard.take(source_db, key, now)?.expect("checked above");
    let (expire, raw) = (entry.expire_at_ms(), is_raw(entry.encoding_name()));
    shard.set(target_db, key, entry.value().to_value(), expire, false, now);
    if raw {
        shard.mark_raw(target_db, key, now);
    }
    ctx.notify_in(source_db, notify::GENERIC, "move_from", &args[1]);
    ctx.notify_in(target_db, notify::GENERIC, "move_to", &args[1]);
    ctx.out.int(1);
    Ok(())
}

pub fn object_encoding(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = ctx.key(&args[2]);
    let encoding = ctx
        .keys
        .shard(key)
        .peek_loaded(ctx.session.db, key, ctx.now_ms)?
        .map(|e| e.encoding_name());
    match encoding {
        Some(name) => ctx.out.bulk(name.as_bytes()),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

pub fn object_idletime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = ctx.key(&args[2]);
    let now = ctx.now_ms;
    let idle = ctx
        .keys
        .shard(key)
        .peek(ctx.session.db, key, now)
        .map(|e| e.idle_s(now));
    match idle {
        Some(_) if strata_engine::keyspace::access::is_lfu() => Err("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.".into()),
        Some(seconds) => {
            ctx.out.int(seconds as i64);
            Ok(())
        }
        None => {
            ctx.out.null_bulk();
            Ok(())
        }
    }
}

/// OBJECT RESIDENCY (Strata): "ram" when the key's value is in RAM,
/// "disk" when only its location is (tiering).
pub fn object_residency(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = ctx.key(&args[2]);
    let cold = ctx
        .keys
        .shard(key)
        .peek(ctx.session.db, key, ctx.now_ms)
        .map(|e| e.is_cold());
    match cold {
        Some(true) => ctx.out.bulk(b"disk"),
        Some(false) => ctx.out.bulk(b"ram"),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

/// OBJECT FREQ: the key's decayed LFU counter, under an LFU policy
/// (`strata_engine::keyspace::access`); what `redis-cli --hotkeys` reads.
pub fn object_freq(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = ctx.key(&args[2]);
    let now = ctx.now_ms;
    let frequency = ctx
        .keys
        .shard(key)
        .peek(ctx.session.db, key, now)
        .map(|e| e.frequency(now));
    match frequency {
        None => ctx.out.null_bulk(),
        Some(_) if !strata_engine::keyspace::access::is_lfu() => return Err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.".into()),
        Some(counter) => ctx.out.int(counter as i64),
    }
    Ok(())
}

/// Redis' refcount of a shared object (`OBJ_SHARED_REFCOUNT`).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// OBJECT REFCOUNT: 1, except for what Redis shares: an int-encoded
/// string from 0 to 9 999 is one of Redis' shared integers (refcount
/// 2 147 483 647) unless an LRU or LFU policy with a `maxmemory` keeps
/// per-key access data, as Redis' tests of shared integers expect.
pub fn object_refcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = ctx.key(&args[2]);
    let policy = ctx.config.maxmemory_policy;
    let per_key_access = ctx.config.maxmemory > 0 && (policy.is_lru() || policy.is_lfu());
    let refcount = ctx
        .keys
        .shard(key)
        .peek(ctx.session.db, key, ctx.now_ms)
        .map(|entry| {
            // `as_int` answers only for an int-encoded string.
            let small = !entry.is_copied_int()
                && entry
                    .value()
                    .as_int()
                    .is_some_and(|n| (0..10_000).contains(&n));
            match small && !per_key_access {
                true => SHARED_REFCOUNT,
                false => 1,
            }
        });
    match refcount {
        Some(count) => ctx.out.int(count),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

pub fn object_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "RESIDENCY <key>",
            "    Strata: \"ram\" when the value of <key> is in RAM, \"disk\" when it is",
            "    only on disk (tiering).",
        ],
    );
    Ok(())
}

#[derive(Clone, Copy)]
enum TimeUnit {
    Seconds,
    Milliseconds,
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX/XX/GT/LT.
fn expire_generic(ctx: &mut Ctx, args: &[Bytes], unit: TimeUnit, absolute: bool) -> CmdResult {
    // The options are checked before the time is read, as in Redis.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in &args[3..] {
        match () {
            _ if is(option, "NX") => nx = true,
            _ if is(option, "XX") => xx = true,
            _ if is(option, "GT") => gt = true,
            _ if is(option, "LT") => lt = true,
            _ => return Err(format!("ERR Unsupported option {}", lossy(option, 128)).into()),
        }
    }
    if nx && (xx || gt || lt) {
        return Err("ERR NX and XX, GT or LT options at the same time are not compatible".into());
    }
    if gt && lt {
        return Err("ERR GT and LT options at the same time are not compatible".into());
    }
    let amount = parse_i64(&args[2])?;
    let now = ctx.now_ms;
    let invalid = || {
        CmdError::from(format!(
            "ERR invalid expire time in '{}' command",
            lossy(&args[0], 32).to_ascii_lowercase()
        ))
    };
    let millis = match unit {
        TimeUnit::Seconds => amount.checked_mul(1000).ok_or_else(invalid)?,
        TimeUnit::Milliseconds => amount,
    };
    let deadline = if absolute {
        millis
    } else {
        millis.checked_add(now as i64).ok_or_else(invalid)?
    };
    let (db, key) = (ctx.db(), ctx.key(&args[1]));
    let shard = ctx.keys.shard(key);
    let Some(entry) = shard.touch(db, key, now) else {
        ctx.out.int(0);
        return Ok(());
    };
    let current = entry.expire_at_ms();
    let allowed = match current {
        // A key without a deadline counts as an infinite TTL.
        None => !xx && !gt,
        Some(at) => !nx && (!gt || deadline > at as i64) && (!lt || deadline < at as i64),
    };
    if !allowed {
        ctx.out.int(0);
        return Ok(());
    }
    let event = if deadline <= now as i64 {
        shard.remove(db, key, now);
        "del"
    } else {
        shard.set_expire(db, key, Some(deadline as u64), now);
        "expire"
    };
    ctx.notify(notify::GENERIC, event, &args[1]);
    ctx.out.int(1);
    Ok(())
}

pub fn expire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Seconds, false)
}

pub fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Milliseconds, false)
}

pub fn expireat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Seconds, true)
}

pub fn pexpireat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Milliseconds, true)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for a missing key, -1 for a key
/// without a deadline.
fn ttl_generic(ctx: &mut Ctx, args: &[Bytes], unit: TimeUnit, absolute: bool) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let deadline = ctx
        .keys
        .shard(key)
        .peek(db, key, now)
        .map(|e| e.expire_at_ms());
    let reply = match deadline {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => {
            let millis = if absolute { at } else { at.saturating_sub(now) };
            match (unit, absolute) {
                (TimeUnit::Milliseconds, _) => millis as i64,
                (TimeUnit::Seconds, true) => (millis / 1000) as i64,
                (TimeUnit::Seconds, false) => ((millis + 500) / 1000) as i64,
            }
        }
    };
    ctx.out.int(reply);
    Ok(())
}

pub fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, args, TimeUnit::Seconds, false)
}

pub fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, args, TimeUnit::Milliseconds, false)
}

pub fn expiretime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, args, TimeUnit::Seconds, true)
}

pub fn pexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, args, TimeUnit::Milliseconds, true)
}

pub fn persist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    let had_deadline = shard
        .touch(db, key, now)
        .and_then(|e| e.expire_at_ms())
        .is_some();
    if had_deadline {
        shard.set_expire(db, key, None, now);
        ctx.notify(notify::GENERIC, "persist", &args[1]);
    }
    ctx.out.int(had_deadline as i64);
    Ok(())
}
