//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted
//! numerically or (ALPHA) as bytes, optionally by other keys' values (BY
//! pattern), sliced (LIMIT), projected through other keys (GET pattern,
//! `#` for the element, `key->field` for a hash field) and stored as a
//! list (STORE).
//!
//! BY, GET and STORE name keys the arguments cannot declare (Redis marks
//! them "unknown"), so SORT copies the source's elements under its lock,
//! releases it, and then reads each pattern key and writes the
//! destination under that key's own lock, one at a time (never two locks
//! held, so no deadlock). Difference from Redis: the pattern keys are read
//! one by one, not as one snapshot with the source (Redis is single
//! threaded); each value read is a committed one.

use crate::events::notify;
use bytes::Bytes;
use strata_engine::types::list::End;

use super::lists::new_list;
use super::zsets::strtod_whole;
use super::{CmdError, CmdResult, Ctx, ERR_SYNTAX, ERR_WRONGTYPE, is, parse_i64};

struct Options {
    by: Option<Bytes>,
    /// BY with a pattern without `*`: keep the source's order.
    dont_sort: bool,
    limit: Option<(i64, i64)>,
    gets: Vec<Bytes>,
    desc: bool,
    alpha: bool,
    store: Option<Bytes>,
}

/// `reads_every_key`: the user may read any key (BY and GET read keys no
/// argument names, so Redis refuses them to users who may not).
fn parse(args: &[Bytes], read_only: bool, reads_every_key: bool) -> Result<Options, CmdError> {
    let mut options = Options {
        by: None,
        dont_sort: false,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let arg = &args[i];
        if is(arg, "asc") {
            options.desc = false;
        } else if is(arg, "desc") {
            options.desc = true;
        } else if is(arg, "alpha") {
            options.alpha = true;
        } else if is(arg, "limit") && left >= 2 {
            options.limit = Some((parse_i64(&args[i + 1])?, parse_i64(&args[i + 2])?));
            i += 2;
        } else if is(arg, "store") && left >= 1 && !read_only {
            options.store = Some(args[i + 1].clone());
            i += 1;
        } else if is(arg, "by") && left >= 1 {
            let pattern = args[i + 1].clone();
            options.dont_sort = !pattern.contains(&b'*');
            if !options.dont_sort && !reads_every_key {
                return Err(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.".into(),
                );
            }
            options.by = Some(pattern);
            i += 1;
        } else if is(arg, "get") && left >= 1 {
            if !reads_every_key {
                return Err(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.".into(),
                );
            }
            options.gets.push(args[i + 1].clone());
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    Ok(options)
}

/// The value a BY or GET pattern names for `element`: the string at the
/// key with the first `*` replaced by the element, or a field of the hash
/// there (`key*->field`); `None` when missing or of another type.
fn lookup(ctx: &mut Ctx, pattern: &[u8], element: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    if pattern == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let arrow = pattern
        .windows(2)
        .rposition(|w| w == b"->")
        .filter(|&at| at > star && at + 2 < pattern.len());
    let (key_pattern, field) = match arrow {
        Some(at) => (&pattern[..at], Some(&pattern[at + 2..])),
        None => (pattern, None),
    };
    let mut name = Vec::with_capacity(key_pattern.len() + element.len());
    name.extend_from_slice(&key_pattern[..star]);
    name.extend_from_slice(element);
    name.extend_from_slice(&key_pattern[star + 1..]);
    let keyspace = ctx.keyspace();
    let key = keyspace.key(&name);
    let (db, now) = (ctx.db(), ctx.now_ms);
    let mut guard = None;
    // In a transaction or script every shard is already held.
    let shard = match ctx.keys.all() {
        Some(all) => all.shard(key.shard()),
        None => &mut **guard.insert(keyspace.lock(key)),
    };
    let value = match shard.get(db, key, now)? {
        Some(entry) => {
            let value = entry.value();
            match (field, value.hash()) {
                (Some(field), Some(hash)) => hash.get(field, ctx.now_ms).map(<[u8]>::to_vec),
                (None, None) if value.value_type() == strata_engine::ValueType::String => {
                    Some(value.as_bytes().to_vec())
                }
                _ => None,
            }
        }
        None => None,
    };
    if let Some(guard) = guard {
        ctx.committed(guard.commit());
    }
    Ok(value)
}

fn sort_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> CmdResult {
    let server = ctx.server;
    let reads_every_key = ctx.session.user_unrestricted
        || server.commands.resolve(args).is_some_and(|id| {
            (server.acl).reads_every_key(&ctx.session.user, &server.commands, id, args)
        });
    let mut options = parse(args, read_only, reads_every_key)?;
    let (mut elements, is_set) = read_elements(ctx, &args[1])?;
    // No other key is declared: from here on each is locked on its own.
    let released = ctx.keys.release();
    ctx.committed(released);
    // A set has no order of its own: stored or scripted results are
    // sorted so they are the same everywhere (Redis forces ALPHA).
    if options.dont_sort && is_set && options.store.is_some() {
        options.dont_sort = false;
        options.alpha = true;
        options.by = None;
    }
    // Unsorted, DESC still reads a list or sorted set from its end.
    if options.dont_sort && !is_set && options.desc {
        elements.reverse();
    }
    if !options.dont_sort {
        elements = sorted(ctx, &options, elements)?;
    }
    if let Some((offset, count)) = options.limit {
        elements = limited(elements, offset, count);
    }
    let mut rows: Vec<Option<Vec<u8>>> = Vec::new();
    if options.gets.is_empty() {
        rows.extend(elements.into_iter().map(Some));
    } else {
        for element in &elements {
            for pattern in &options.gets {
                rows.push(lookup(ctx, pattern, element)?);
            }
        }
    }
    match options.store {
        None => {
            ctx.out.array(rows.len());
            for row in &rows {
                match row {
                    Some(value) => ctx.out.bulk(value),
                    None => ctx.out.null_bulk(),
                }
            }
        }
        Some(destination) => store(ctx, &destination, &rows),
    }
    Ok(())
}

/// The elements of the list, set or sorted set at `key` (none if it does
/// not exist), and whether it is a set.
fn read_elements(ctx: &mut Ctx, key: &[u8]) -> Result<(Vec<Vec<u8>>, bool), CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(key), ctx.now_ms);
    let Some(entry) = ctx.keys.shard(key).get(db, key, now)? else {
        return Ok((Vec::new(), false));
    };
    let value = entry.value();
    if let Some(list) = value.list() {
        Ok((list.iter().map(<[u8]>::to_vec).collect(), false))
    } else if let Some(set) = value.set() {
        Ok((set.members(), true))
    } else if let Some(zset) = value.zset() {
        let all = zset.range(0, zset.len());
        Ok((all.into_iter().map(|(_, m)| m.to_vec()).collect(), false))
    } else {
        Err(ERR_WRONGTYPE.into())
    }
}

/// `elements` in the order BY, ALPHA and DESC ask for.
fn sorted(
    ctx: &mut Ctx,
    options: &Options,
    elements: Vec<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut keyed: Vec<(Option<Vec<u8>>, f64, Vec<u8>)> = Vec::with_capacity(elements.len());
    for element in elements {
        let by = match &options.by {
            Some(pattern) => lookup(ctx, pattern, &element)?,
            None => Some(element.clone()),
        };
        let score = match (&by, options.alpha) {
            (Some(text), false) => match strtod_whole(text) {
                Some((value, false)) if !value.is_nan() => value,
                _ => return Err("ERR One or more scores can't be converted into double".into()),
            },
            _ => 0.0,
        };
        keyed.push((by, score, element));
    }
    let alpha = options.alpha;
    keyed.sort_by(|a, b| {
        let order = if alpha {
            if options.by.is_some() {
                a.0.cmp(&b.0)
            } else {
                a.2.cmp(&b.2)
            }
        } else {
            a.1.partial_cmp(&b.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.2.cmp(&b.2))
        };
        if options.desc { order.reverse() } else { order }
    });
    Ok(keyed.into_iter().map(|(_, _, e)| e).collect())
}

/// LIMIT offset count (a negative count: to the end).
fn limited(elements: Vec<Vec<u8>>, offset: i64, count: i64) -> Vec<Vec<u8>> {
    let len = elements.len() as i64;
    let start = offset.max(0);
    let end = if count < 0 {
        len
    } else {
        start.saturating_add(count).min(len)
    };
    if start >= len || end <= start {
        Vec::new()
    } else {
        elements[start as usize..end as usize].to_vec()
    }
}

/// STORE: `rows` as a list at `destination` (deleted when empty); the
/// reply is their count.
fn store(ctx: &mut Ctx, destination: &[u8], rows: &[Option<Vec<u8>>]) {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let keyspace = ctx.keyspace();
    let key = keyspace.key(destination);
    let mut guard = None;
    let shard = match ctx.keys.all() {
        Some(all) => all.shard(key.shard()),
        None => &mut **guard.insert(keyspace.lock(key)),
    };
    let event = if rows.is_empty() {
        shard.remove(db, key, now).map(|_| (notify::GENERIC, "del"))
    } else {
        let elements = rows.iter().map(|r| r.as_deref().unwrap_or(b"")).collect();
        shard.set(db, key, new_list(End::Tail, elements), None, false, now);
        Some((notify::LIST, "sortstore"))
    };
    if let Some(guard) = guard {
        ctx.committed(guard.commit());
    }
    if let Some((class, event)) = event {
        ctx.notify(class, event, destination);
    }
    ctx.out.int(rows.len() as i64);
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
/// [ALPHA] [STORE destination].
pub fn sort(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, false)
}

/// SORT_RO: SORT without STORE.
pub fn sort_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, true)
}
