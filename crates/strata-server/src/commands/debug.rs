//! DEBUG, behind `enable-debug-command` (checked by dispatch before the
//! subcommand, as Redis does): the subcommands Redis' tests and operators
//! use that mean something in Strata.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::ctx::help_lines;
use strata_resp::Protocol;

use super::{CmdError, CmdResult, Ctx, ERR_NO_SUCH_KEY, is, parse_i64};
use strata_engine::Value;

/// DEBUG is one command in Redis, not a container: an unknown subcommand
/// and a wrong argument count get one message.
pub(crate) fn debug_error(args: &[Bytes]) -> String {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
        super::ctx::lossy(&args[1], 128)
    )
}

/// DEBUG OBJECT key: Redis' one-line summary of a key's value (its
/// address, encoding, serialized length and access field).
pub fn debug_object(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let key = ctx.key(&args[2]);
    // As Redis' DEBUG OBJECT, a key past its deadline that nothing has
    // reclaimed yet is still shown (time 0: no deadline has passed).
    let Some(entry) = ctx.keys.shard(key).peek_loaded(db, key, 0)? else {
        return Err(ERR_NO_SUCH_KEY.into());
    };
    let value = entry.value();
    // Redis counts the value's serialization without its type byte.
    let serialized = crate::rdb::object::dump(value, now).len() - 1 - crate::rdb::FOOTER_BYTES;
    // A quicklist's shape, as Redis 7.2+ adds it (its nodes, their average
    // fill, `list-max-listpack-size`, whether compression is on, their
    // bytes).
    let quicklist = match value {
        strata_engine::types::value::ValueRef::List(list)
            if list.encoding_name() == "quicklist" =>
        {
            let nodes = list.node_count().max(1);
            format!(
                " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
                list.len() as f64 / nodes as f64,
                ctx.config.collection_limits.list_listpack_size,
                u8::from(ctx.config.list_compress_depth != 0),
                list.node_bytes()
            )
        }
        _ => String::new(),
    };
    let line = format!(
        "Value at:{:p} refcount:1 encoding:{} serializedlength:{serialized} lru:{} lru_seconds_idle:{}{quicklist}",
        &*entry,
        entry.encoding_name(),
        entry.access_field(),
        entry.idle_s(now),
    );
    ctx.out.simple(&line);
    Ok(())
}

/// DEBUG DIGEST-VALUE key …: for each key, a 40-hex-digit digest of its
/// value and deadline (all zeros for a missing key), equal for equal
/// values: what Redis' tests compare a COPY or a reload with. Strata's
/// digest is the SHA1 of the value's canonical bytes ([`canonical`]) and
/// its deadline, so it matches between keys of this server, not with
/// Redis' digests.
pub fn debug_digest_value(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    // Every digest before the reply starts: a value that cannot be read
    // from disk answers an error alone, not inside a half-written array.
    let mut digests = Vec::with_capacity(args.len() - 2);
    for arg in &args[2..] {
        let digest = match value_image(ctx, db, arg)? {
            Some(image) => crate::scripting::sha1_hex(&image),
            None => "0".repeat(40),
        };
        digests.push(digest);
    }
    ctx.out.array(digests.len());
    for digest in &digests {
        ctx.out.simple(digest);
    }
    Ok(())
}

/// DEBUG DIGEST: one 40-hex-digit digest of the whole dataset (every
/// database's keys, values and deadlines), forty zeros when it is empty,
/// as Redis' tests compare a dataset before and after a reload. Each key's
/// SHA1 (its database, name, value as DIGEST-VALUE sees it, deadline) is
/// XORed in, so the order keys are visited in does not matter. Equal for
/// equal datasets on Strata; not Redis' digest.
pub fn debug_digest(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let mut total = [0u8; 20];
    for db in 0..ctx.config.databases {
        for name in ctx.keyspace().keys(db, b"*", 0) {
            let Some(image) = value_image(ctx, db, &name)? else {
                continue;
            };
            let mut data = (db as u64).to_le_bytes().to_vec();
            data.extend_from_slice(&(name.len() as u64).to_le_bytes());
            data.extend_from_slice(&name);
            data.extend_from_slice(&image);
            let digest = sha1_smol::Sha1::from(&data).digest().bytes();
            for (byte, mixed) in total.iter_mut().zip(digest) {
                *byte ^= mixed;
            }
        }
    }
    let hex: String = total.iter().map(|b| format!("{b:02x}")).collect();
    ctx.out.simple(&hex);
    Ok(())
}

/// `name`'s value in `db` as DIGEST-VALUE and DIGEST hash it: its
/// canonical bytes ([`canonical`]) and deadline, or `None` when there is no
/// such key. As DEBUG OBJECT, a key past its deadline still counts. Read
/// under its shard's lock, released after (the next key may live in
/// another shard).
fn value_image(ctx: &mut Ctx, db: usize, name: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let now = ctx.now_ms;
    let key = ctx.key(name);
    let image = ctx.keys.shard(key).peek_loaded(db, key, 0)?.map(|entry| {
        let mut data = canonical(entry.value(), now);
        data.extend_from_slice(&entry.expire_at_ms().unwrap_or(0).to_le_bytes());
        data
    });
    let released = ctx.keys.release();
    ctx.committed(released);
    Ok(image)
}

/// A value's bytes for DEBUG DIGEST-VALUE, the same for equal values:
/// hashes and sets by their fields and members in sorted order (a table's
/// order depends on its history), everything else as DUMP writes it.
fn canonical(value: strata_engine::types::value::ValueRef, now_ms: u64) -> Vec<u8> {
    use strata_engine::types::value::ValueRef;
    let mut out = Vec::new();
    let mut put = |bytes: &[u8]| {
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    match value {
        ValueRef::Hash(hash) => {
            let mut fields: Vec<_> = hash
                .fields()
                .map(|f| (f.name, f.value, f.deadline.unwrap_or(0)))
                .collect();
            fields.sort_unstable();
            put(b"hash");
            for (name, value, deadline) in fields {
                put(name);
                put(value);
                put(&deadline.to_le_bytes());
            }
        }
        ValueRef::Set(set) => {
            let mut members = set.members();
            members.sort_unstable();
            put(b"set");
            for member in &members {
                put(member);
            }
        }
        other => put(&crate::rdb::object::dump(other, now_ms)),
    }
    out
}

/// DEBUG CHANGE-REPL-ID: Redis' tests call it between replication
/// scenarios; Strata has no replication, so there is nothing to change.
pub fn debug_change_repl_id(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.replication.change_id();
    ctx.out.ok();
    Ok(())
}

/// DEBUG HTSTATS-KEY key [FULL]: the shape of the hash table a hash, set
/// or sorted set is kept in, in Redis' words. Strata's tables are open
/// addressing (one element per slot, no chains, no incremental rehash):
/// "table size" is the elements the table holds before it grows, and FULL
/// says that every element has a slot of its own.
pub fn debug_htstats_key(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    // As Redis: a fourth argument other than FULL is ignored.
    let full = args.get(3).is_some_and(|word| is(word, "full"));
    let db = ctx.db();
    let key = ctx.key(&args[2]);
    let now = ctx.now_ms;
    let stats = {
        let Some(entry) = ctx.keys.shard(key).peek_loaded(db, key, now)? else {
            return Err(ERR_NO_SUCH_KEY.into());
        };
        entry.value().table_shape()
    };
    let Some((capacity, elements)) = stats else {
        return Err(
            "ERR The value stored at the specified key is not represented using an hash table"
                .into(),
        );
    };
    let mut text = format!(
        "Hash table 0 stats (main hash table):\n table size: {capacity}\n number of elements: {elements}\n"
    );
    if full && elements > 0 {
        text.push_str(&format!(
            " different slots: {elements}\n max chain length: 1\n avg chain length (counted): 1.00\n avg chain length (computed): 1.00\n Chain length distribution:\n   1: {elements} (100.00%)\n"
        ));
    }
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

pub fn debug_sleep(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    // Redis reads the time with strtod: the longest numeric prefix counts,
    // anything else (or a negative time) sleeps 0 seconds.
    let text = &args[2];
    let seconds = (0..=text.len())
        .rev()
        .find_map(|end| {
            std::str::from_utf8(&text[..end])
                .ok()
                .and_then(|t| t.trim_start().parse::<f64>().ok())
        })
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(0.0);
    // Like Redis' DEBUG SLEEP, the whole server stops executing commands for
    // the duration: every connection checks the pause before each command.
    ctx.server
        .pause_until(ctx.now_ms + (seconds * 1000.0) as u64);
    // Its time is the server's, as Redis' DEBUG SLEEP's is (SLOWLOG).
    ctx.session.slept_us = (seconds * 1_000_000.0) as u64;
    ctx.out.ok();
    Ok(())
}

/// DEBUG POPULATE count [prefix] [size]: adds string keys `prefix:0` …
/// `prefix:count-1` (prefix `key`) holding `value:N`, cut or padded with
/// zero bytes to `size` when given; a key that exists is left alone, as in
/// Redis. Redis' tests fill a database with it. Keys are grouped by shard
/// a batch at a time, so each shard lock is taken once per batch and held
/// only for its share; every key is logged as any write is.
pub fn debug_populate(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    const BATCH: u64 = 16 * 1024;
    if args.len() > 5 {
        return Err(debug_error(args).into());
    }
    let positive = |arg: &[u8]| {
        parse_i64(arg)
            .ok()
            .filter(|n| *n >= 0)
            .ok_or(CmdError::from(
                "ERR value is out of range, must be positive",
            ))
    };
    let count = positive(&args[2])? as u64;
    let prefix: &[u8] = args.get(3).map_or(b"key", |p| &p[..]);
    let size = match args.get(4) {
        Some(size) => Some(positive(size)? as usize),
        None => None,
    };
    if size.is_some_and(|s| s > ctx.config.proto_max_bulk_len as usize) {
        return Err(super::ERR_STRING_TOO_LONG.into());
    }
    let (db, now) = (ctx.db(), ctx.now_ms);
    let mut start = 0;
    while start < count {
        let end = count.min(start + BATCH);
        let mut names: Vec<Vec<u8>> = (start..end)
            .map(|n| {
                let mut name = prefix.to_vec();
                name.push(b':');
                name.extend_from_slice(n.to_string().as_bytes());
                name
            })
            .collect();
        let keyspace = ctx.keyspace();
        names.sort_by_cached_key(|name| keyspace.key(name).shard());
        let mut shard_of_previous = None;
        for name in &names {
            let key = ctx.key(name);
            if shard_of_previous.is_some_and(|s| s != key.shard()) {
                let released = ctx.keys.release();
                ctx.committed(released);
            }
            shard_of_previous = Some(key.shard());
            let shard = ctx.keys.shard(key);
            if shard.contains(db, key, now) {
                continue;
            }
            let number = &name[prefix.len() + 1..];
            let mut value = b"value:".to_vec();
            value.extend_from_slice(number);
            if let Some(size) = size.filter(|s| *s != 0) {
                value.resize(size, 0);
            }
            shard.set(db, key, Value::from_bytes(&value), None, false, now);
        }
        let released = ctx.keys.release();
        ctx.committed(released);
        start = end;
    }
    ctx.out.ok();
    Ok(())
}

/// DEBUG SET-ACTIVE-EXPIRE 0|1: whether the cron reclaims expired keys
/// (tests use 0 to see lazy expiry alone).
pub fn debug_set_active_expire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let on = parse_i64(&args[2])? != 0;
    ctx.server.active_expire.store(on, Relaxed);
    ctx.out.ok();
    Ok(())
}

/// DEBUG SHARD-LOCKS (Strata's own): how many shard locks the thread
/// serving this connection has taken since it started. Tests read it
/// before and after a command to count what the command took (the
/// thread's other connections add to it too).
pub fn debug_shard_locks(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let taken = strata_engine::keyspace::shards::shard_locks_taken();
    ctx.out.int(taken as i64);
    Ok(())
}

/// DEBUG FAIL-FSYNC (Strata's own): the log's next fsync fails as if the
/// device had refused it. Tests use it to see what clients get then:
/// writes refused with -MISCONF, reads served, and under `appendfsync
/// always` the connections whose replies wait for that fsync closed.
pub fn debug_fail_fsync(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let log = ctx
        .server
        .keyspace
        .change_log()
        .ok_or("ERR the log is off (appendonly no)")?;
    log.fail_next_fsync();
    ctx.out.ok();
    Ok(())
}

/// DEBUG PAUSE-CRON 0|1: stops (1) or resumes (0) the periodic work
/// Redis' serverCron does (`Server::cron_paused`). Tests use it to see
/// what happens without the cron, e.g. a lowered tracking-table-max-keys
/// applied by the next command alone.
pub fn debug_pause_cron(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let paused = parse_i64(&args[2])? != 0;
    ctx.server.cron_paused.store(paused, Relaxed);
    ctx.out.ok();
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: writes a checkpoint (unless
/// NOSAVE), then stores every value in RAM again from its image, as a
/// load builds it (`Keyspace::rebuild_values`). Redis empties its
/// dataset and loads the RDB file back; Strata's dataset is already what
/// its checkpoint and log hold, so rebuilding the values gives what a load
/// would (encodings chosen afresh, WATCHed keys touched) without emptying
/// anything. NOFLUSH without MERGE fails as in Redis when there is data (a
/// load on top of it would meet every key twice); with MERGE it is a
/// plain reload.
///
/// NOSAVE with an RDB file where Redis keeps its own (`dir`/`dbfilename`,
/// put there by `redis-cli --rdb` or copied from a Redis) loads that
/// file instead, as Redis' reload does: see [`reload_rdb_file`].
pub fn debug_reload(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut save, mut flush, mut merge) = (true, true, false);
    for option in &args[2..] {
        if is(option, "NOSAVE") {
            save = false;
        } else if is(option, "NOFLUSH") {
            flush = false;
        } else if is(option, "MERGE") {
            merge = true;
        } else {
            return Err(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.".into(),
            );
        }
    }
    if !save && flush && !merge {
        let config = ctx.server.config.get();
        let path = config.dir.join(config.setting("dbfilename"));
        drop(config);
        if path.is_file() {
            return reload_rdb_file(ctx, &path);
        }
    }
    if save && !save_waiting(ctx) {
        return Err("ERR Error trying to save the DB".into());
    }
    let has_data =
        ctx.keyspace().total_keys() > 0 || ctx.server.functions.snapshot().function_count() > 0;
    if !flush && !merge && has_data {
        return Err("ERR Error trying to load the RDB dump, check server logs.".into());
    }
    let (rebuilt, committed) = ctx.keyspace().rebuild_values(ctx.now_ms);
    ctx.committed(committed);
    crate::log_notice!("DB reloaded by DEBUG RELOAD ({rebuilt} values rebuilt)");
    ctx.out.ok();
    Ok(())
}

/// Replaces the dataset and the function libraries with the RDB file at
/// `path`. The file is read whole and checked (its CRC too) before
/// anything changes; a damaged one fails as Redis' does and leaves the
/// data as it was. Then the file's libraries replace the current ones
/// (all or none: one that does not load fails the reload there), every
/// database is emptied, and each key is stored as a write (logged, so a
/// restart finds the loaded data), with other clients answered LOADING
/// meanwhile.
fn reload_rdb_file(ctx: &mut Ctx, path: &std::path::Path) -> CmdResult {
    use crate::rdb::file::Item;
    let failed = |why: String| {
        crate::log_warning!("DEBUG RELOAD of {}: {why}", path.display());
        CmdError::from("ERR Error trying to load the RDB dump, check server logs.")
    };
    let rdb = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
    let mut codes = Vec::new();
    crate::rdb::file::read(&rdb, |item| {
        if let Item::Function(code) = item {
            codes.push(String::from_utf8_lossy(&code).into_owned());
        }
    })
    .map_err(failed)?;
    // The libraries first: one that does not load fails the reload
    // before anything else changed.
    super::functions::replace_all(ctx, &codes)?;
    let _loading = Loading::begin(&ctx.server.persistence.loading);
    super::server::flush_all_keys(ctx, false);
    let keyspace = ctx.keyspace();
    let (now, mut keys) = (ctx.now_ms, 0u64);
    let read = crate::rdb::file::read(&rdb, |item| {
        if let Item::Key {
            db,
            key,
            deadline,
            value,
        } = item
            && db < keyspace.db_count()
            && deadline.is_none_or(|at| at > now)
        {
            let k = keyspace.key(&key);
            let mut shard = keyspace.lock(k);
            shard.set(db, k, value, deadline, false, now);
            ctx.committed(shard.commit());
            keys += 1;
        }
    });
    read.map_err(failed)?;
    crate::log_notice!(
        "DB reloaded by DEBUG RELOAD from {} ({keys} keys)",
        path.display()
    );
    ctx.out.ok();
    Ok(())
}

/// Other clients are answered LOADING while it lives (a reload from an
/// RDB file), whichever way the reload ends.
struct Loading<'a>(&'a std::sync::atomic::AtomicBool);

impl<'a> Loading<'a> {
    fn begin(flag: &'a std::sync::atomic::AtomicBool) -> Self {
        flag.store(true, std::sync::atomic::Ordering::Release);
        Loading(flag)
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Writes a checkpoint, waiting (up to 10 s) for one already running to
/// end first, as Redis' DEBUG RELOAD waits for its child.
fn save_waiting(ctx: &Ctx) -> bool {
    let handles = crate::data::background::Handles::of(ctx.server);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match crate::data::background::checkpoint(&handles, crate::data::persistence::Trigger::Save)
        {
            Ok(_) => return true,
            Err(_)
                if handles.persistence.checkpoint_running()
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return false,
        }
    }
}

/// DEBUG LOADAOF: Redis reloads its dataset from the append-only file.
/// Strata's log already holds every acknowledged write, so reloading is
/// rebuilding every value the way loading does (as DEBUG RELOAD, without
/// writing a checkpoint first).
pub fn debug_loadaof(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let (rebuilt, committed) = ctx.keyspace().rebuild_values(ctx.now_ms);
    ctx.committed(committed);
    crate::log_notice!("DB reloaded by DEBUG LOADAOF ({rebuilt} values rebuilt)");
    ctx.out.ok();
    Ok(())
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD size: list elements of at least
/// `size` bytes are stored alone in a node of their own (Redis' plain
/// nodes; 0 restores the default, 1 GB). Tests lower it to exercise them.
pub fn debug_quicklist_packed_threshold(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    /// Redis' largest threshold: 4 GB less 1 MB.
    const THRESHOLD_BYTES_MAX: u64 = (1 << 32) - (1 << 20);
    let text = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
    let bytes = match text.strip_suffix('b') {
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse().ok()
        }
        _ => crate::config::parse_memory(&text),
    };
    let Some(bytes) = bytes.filter(|&b| b <= THRESHOLD_BYTES_MAX) else {
        return Err(
            "ERR argument must be a memory value bigger than 1 and smaller than 4gb".into(),
        );
    };
    strata_engine::types::limits::set_list_plain_bytes_min(bytes as usize);
    ctx.out.ok();
    Ok(())
}

/// DEBUG PROTOCOL type: a reply of each RESP type, as Redis' tests use
/// them to check clients' and scripts' parsing (the same values as
/// Redis').
pub fn debug_protocol(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let out = &mut ctx.out;
    let name = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
    match name.as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        // Redis' value, not PI.
        "double" => out.double_text(b"3.141"),
        "bignum" => out.big_number("1234567999999999999999999999999999999"),
        "null" => out.null_bulk(),
        "array" | "set" => {
            match name.as_str() {
                "array" => out.array(3),
                _ => out.set(3),
            }
            (0..3).for_each(|n| out.int(n));
        }
        "map" => {
            out.map(3);
            for n in 0..3 {
                out.int(n);
                out.boolean(n == 1);
            }
        }
        "attrib" => {
            if out.protocol() == Protocol::Resp3 {
                out.attribute(1);
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if out.protocol() != Protocol::Resp3 {
                return Err("ERR RESP2 is not supported by this command".into());
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "true" | "false" => out.boolean(name == "true"),
        "verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        _ => {
            return Err("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false".into());
        }
    }
    Ok(())
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS 0|1: with 1, scripts may call commands
/// flagged `noscript` (Redis' tests call CLIENT and DEBUG that way) —
/// except those that run or manage scripts themselves, which a script
/// can never re-enter.
/// DEBUG PANIC: a panic in a command, for the tests that check what one
/// leaves behind (nothing of a script or transaction that had written:
/// `strata_engine::keyspace::undo`). Unlike Redis', which crashes the server, it
/// ends only its connection (or the process, when a transaction's writes
/// could not be undone otherwise).
pub fn debug_panic(_ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    panic!("DEBUG PANIC");
}

pub fn debug_set_disable_deny_scripts(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let disabled = parse_i64(&args[2])? != 0;
    ctx.server.deny_scripts_disabled.store(disabled, Relaxed);
    ctx.out.ok();
    Ok(())
}

pub fn debug_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "DEBUG",
        &[
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "FAIL-FSYNC",
            "    Make the log's next fsync fail, as a device that refused it would",
            "    (Strata's own; writes are refused until a restart).",
            "HTSTATS-KEY <key> [full]",
            "    Show the hash table of a hash, set or sorted set kept in one: its",
            "    capacity and elements (open addressing: one element per slot).",
            "OBJECT <key>",
            "    Show low level info about the key and associated value.",
            "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
            "    Save the dataset to disk (a checkpoint), then rebuild every value as",
            "    loading it would. NOSAVE skips the checkpoint.",
            "PANIC",
            "    Panic inside the command: the connection closes, the server runs on",
            "    (a transaction that wrote first ends the process: nothing half done).",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. Values are value:<num>, padded",
            "    or cut to <size>. Strata logs and replicates them as any write.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SHARD-LOCKS",
            "    The shard locks this connection's thread has taken (Strata's own).",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in the background.",
            "SET-DISABLE-DENY-SCRIPTS <0|1>",
            "    Setting it to 1 lets scripts call commands flagged noscript (tests).",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ],
    );
    Ok(())
}
