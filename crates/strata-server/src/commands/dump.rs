//! DUMP, RESTORE and MIGRATE: a key's value in Redis' own serialization
//! (see `rdb::object`), so keys move between Redis and Strata both ways.
//!
//! MIGRATE talks to the target server from inside the command, as Redis
//! does: it holds the locks of the keys it moves (so no write comes
//! between reading them and deleting them) and blocks its network thread
//! for at most `timeout` per step. Redis blocks every client meanwhile;
//! Strata blocks that thread's clients and those waiting for the keys.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use super::{CmdResult, Ctx, ERR_SYNTAX, is, parse_i64};
use crate::events::notify;
use crate::rdb;

pub fn dump(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let key = ctx.key(&args[1]);
    match ctx.keys.shard(key).get(db, key, now)? {
        Some(entry) => {
            let payload = rdb::object::dump(entry.value(), now);
            ctx.out.bulk(&payload);
        }
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], with
/// Redis 7's checks in Redis' order.
pub fn restore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let (mut replace, mut absolute, mut idle) = (false, false, None);
    let mut freq = None;
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "REPLACE") {
            replace = true;
        } else if is(&args[i], "ABSTTL") {
            absolute = true;
        } else if is(&args[i], "IDLETIME") && more && freq.is_none() {
            let seconds = parse_i64(&args[i + 1])?;
            if seconds < 0 {
                return Err("ERR Invalid IDLETIME value, must be >= 0".into());
            }
            idle = Some(seconds as u64);
            i += 1;
        } else if is(&args[i], "FREQ") && more && idle.is_none() {
            let count = parse_i64(&args[i + 1])?;
            if !(0..=255).contains(&count) {
                return Err("ERR Invalid FREQ value, must be >= 0 and <= 255".into());
            }
            freq = Some(count as u8);
            i += 1;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    let key = ctx.key(&args[1]);
    if !replace && ctx.keys.shard(key).contains(db, key, now) {
        return Err("BUSYKEY Target key name already exists.".into());
    }
    let ttl = parse_i64(&args[2])?;
    if ttl < 0 {
        return Err("ERR Invalid TTL value, must be >= 0".into());
    }
    let body = rdb::verify(&args[3]).ok_or("ERR DUMP payload version or checksum are wrong")?;
    let value = rdb::object::restore(body).map_err(|_| "ERR Bad data format")?;
    let deadline = match ttl as u64 {
        0 => None,
        ms if absolute => Some(ms),
        ms => Some(now.saturating_add(ms)),
    };
    let expired = deadline.is_some_and(|at| at <= now);
    // A key replaced by a value restored already expired is deleted, and
    // a replica is sent DEL, or UNLINK under lazyfree-lazy-server-del.
    let unlink = expired && ctx.lazy_server_del();
    let shard = ctx.keys.shard(key);
    let deleted = replace
        && match unlink {
            true => shard.remove_unlinked(db, key, now),
            false => shard.remove(db, key, now),
        }
        .is_some();
    if expired {
        // Restored already expired: nothing is added; a replaced key is
        // gone.
        if deleted {
            ctx.notify(notify::GENERIC, "del", &args[1]);
        }
        ctx.out.ok();
        return Ok(());
    }
    shard.set(db, key, value, deadline, false, now);
    // IDLETIME counts under LRU, FREQ under LFU (`strata_engine::keyspace::access`).
    if let Some(entry) = shard.peek(db, key, now) {
        if let Some(seconds) = idle {
            entry.set_idle_s(seconds, now);
        }
        if let Some(counter) = freq {
            entry.set_frequency(counter, now);
        }
    }
    ctx.notify(notify::GENERIC, "restore", &args[1]);
    ctx.out.ok();
    Ok(())
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password] [AUTH2 username password] [KEYS key...].
pub fn migrate(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let options = MigrateOptions::parse(args)?;
    let (copy, replace, auth, keys) = (options.copy, options.replace, options.auth, options.keys);
    let timeout_ms = parse_i64(&args[5])?;
    let target_db = parse_i64(&args[4])?;
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });

    // Serialize what is there; a key that expired meanwhile is skipped.
    let mut moving = Vec::new();
    for name in keys {
        let key = ctx.key(name);
        if let Some(entry) = ctx.keys.shard(key).get(db, key, now)? {
            let ttl = entry
                .expire_at_ms()
                .map_or(0, |at| at.saturating_sub(now).max(1));
            moving.push((name, ttl, rdb::object::dump(entry.value(), now)));
        }
    }
    if moving.is_empty() {
        ctx.out.simple("NOKEY");
        return Ok(());
    }

    // A cluster node's target imports the slot: RESTORE-ASKING is served
    // there without ASKING, as Redis' MIGRATE sends it.
    let restore: &[u8] = match ctx.server.cluster.enabled() {
        true => b"RESTORE-ASKING",
        false => b"RESTORE",
    };
    let request = migrate_request(auth, target_db, &moving, replace, restore);
    let host = String::from_utf8_lossy(&args[1]);
    let port = parse_i64(&args[2])?;
    let mut target =
        connect(&host, port, timeout).ok_or("IOERR error or timeout connecting to the client")?;
    target
        .write_all(&request)
        .map_err(|_| "IOERR error or timeout writing to target instance")?;
    let mut replies = BufReader::new(target);
    let mut read_reply = || -> Result<String, &'static str> {
        let mut line = String::new();
        match replies.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line.trim_end().to_owned()),
            _ => Err("IOERR error or timeout reading to target instance"),
        }
    };
    // AUTH and SELECT: the first error stops the migration.
    let preamble = 1 + auth.is_some() as usize;
    for _ in 0..preamble {
        let reply = read_reply()?;
        if let Some(error) = reply.strip_prefix('-') {
            return Err(format!("ERR Target instance replied with error: {error}").into());
        }
    }
    let mut first_error = None;
    for (name, _, _) in &moving {
        let reply = read_reply()?;
        match reply.strip_prefix('-') {
            Some(error) => {
                first_error.get_or_insert_with(|| error.to_owned());
            }
            None if !copy => {
                let key = ctx.key(name);
                if ctx.keys.shard(key).remove(db, key, now).is_some() {
                    ctx.notify(notify::GENERIC, "del", name);
                }
            }
            None => {}
        }
    }
    match first_error {
        Some(error) => Err(format!("ERR Target instance replied with error: {error}").into()),
        None => {
            ctx.out.ok();
            Ok(())
        }
    }
}

/// MIGRATE's options after its five fixed arguments.
struct MigrateOptions<'a> {
    copy: bool,
    replace: bool,
    /// AUTH password, or AUTH2 username password.
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: &'a [Bytes],
}

impl<'a> MigrateOptions<'a> {
    fn parse(args: &'a [Bytes]) -> Result<MigrateOptions<'a>, super::CmdError> {
        let (mut copy, mut replace) = (false, false);
        let mut auth: Option<(Option<&[u8]>, &[u8])> = None;
        let mut keys = &args[3..4];
        let mut i = 6;
        while i < args.len() {
            let more = args.len() - 1 - i;
            if is(&args[i], "COPY") {
                copy = true;
            } else if is(&args[i], "REPLACE") {
                replace = true;
            } else if is(&args[i], "AUTH") && more >= 1 {
                auth = Some((None, &args[i + 1]));
                i += 1;
            } else if is(&args[i], "AUTH2") && more >= 2 {
                auth = Some((Some(&args[i + 1]), &args[i + 2]));
                i += 2;
            } else if is(&args[i], "KEYS") {
                if !args[3].is_empty() {
                    return Err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string".into());
                }
                keys = &args[i + 1..];
                break;
            } else {
                return Err(ERR_SYNTAX.into());
            }
            i += 1;
        }
        // The key specs (what dispatch locked) find KEYS from the end; a key
        // named "keys" in the list would leave keys unlocked.
        if keys.len() > 1 && keys.iter().any(|k| is(k, "KEYS")) {
            return Err("ERR MIGRATE cannot move a key named KEYS in a list of keys".into());
        }
        Ok(MigrateOptions {
            copy,
            replace,
            auth,
            keys,
        })
    }
}

/// The commands MIGRATE sends: AUTH, SELECT, then a RESTORE (`restore`)
/// per key.
fn migrate_request(
    auth: Option<(Option<&[u8]>, &[u8])>,
    target_db: i64,
    moving: &[(&Bytes, u64, Vec<u8>)],
    replace: bool,
    restore: &[u8],
) -> Vec<u8> {
    let mut request = Vec::new();
    if let Some((user, password)) = auth {
        let mut words: Vec<&[u8]> = vec![b"AUTH"];
        words.extend(user);
        words.push(password);
        write_command(&mut request, &words);
    }
    write_command(&mut request, &[b"SELECT", target_db.to_string().as_bytes()]);
    for (name, ttl, payload) in moving {
        let ttl = ttl.to_string();
        let mut words: Vec<&[u8]> = vec![restore, name, ttl.as_bytes(), payload];
        if replace {
            words.push(b"REPLACE");
        }
        write_command(&mut request, &words);
    }
    request
}

/// Appends a command in RESP.
fn write_command(out: &mut Vec<u8>, words: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
    for word in words {
        out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
        out.extend_from_slice(word);
        out.extend_from_slice(b"\r\n");
    }
}

/// A connection to the target with `timeout` for connecting, each write
/// and each read.
fn connect(host: &str, port: i64, timeout: Duration) -> Option<TcpStream> {
    let port = u16::try_from(port).ok()?;
    let address = (host, port).to_socket_addrs().ok()?.next()?;
    let stream = TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    stream.set_nodelay(true).ok()?;
    Some(stream)
}
