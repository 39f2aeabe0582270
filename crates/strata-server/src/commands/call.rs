//! Running one command's handler under the locks of its declared keys
//! (`call`), and what that needs: the keys a command declares, whether
//! one of its values went cold, the counting of its changes, an error
//! reply. Dispatch, transactions and scripts call it.

use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;
use strata_engine::keyspace::commit::Commit;
use strata_engine::keyspace::shards::Locked;
use strata_engine::tiering::fetch::ColdFetch;
use strata_engine::{KeyRef, Keyspace};
use strata_resp::ReplyWriter;

use super::ctx::{CmdError, Ctx, DECLARED_KEYS_INLINE, Node, Spec};
use super::keyspec;
use super::spec::flag;
use super::tracking;
use crate::config::Config;
use crate::net::session::Session;
use crate::observe::stats::{ThreadStats, bump};

/// The keys a command declares through its key specs, as the engine
/// locks them. The common single-key shape (one key at argument 1) is
/// read without going through the specs.
pub(crate) fn declared_keys<'k>(
    spec: &Spec,
    args: &'k [Bytes],
    keyspace: &Keyspace,
) -> SmallVec<[KeyRef<'k>; DECLARED_KEYS_INLINE]> {
    declared_keys_known(spec, args, keyspace, &[])
}

/// [`declared_keys`], taking the hash of a key in `known` (a script's
/// declared keys, which its commands name again) rather than hashing it.
pub(crate) fn declared_keys_known<'k>(
    spec: &Spec,
    args: &'k [Bytes],
    keyspace: &Keyspace,
    known: &[KeyRef],
) -> SmallVec<[KeyRef<'k>; DECLARED_KEYS_INLINE]> {
    let key = |bytes: &'k [u8]| match known.iter().find(|k| k.bytes == bytes) {
        Some(k) => KeyRef {
            bytes,
            hash: k.hash,
        },
        None => keyspace.key(bytes),
    };
    if keyspec::single_key_at_1(spec.keys).is_some() && args.len() > 1 {
        return smallvec::smallvec![key(&args[1])];
    }
    let mut keys = SmallVec::new();
    for key_spec in spec.keys {
        match key_spec.span(args) {
            Ok(span) => keys.extend(span.map(|at| key(&args[at]))),
            // The arguments do not hold the keys the specs promise.
            Err(_) => return SmallVec::new(),
        }
    }
    keys
}

/// Counts what a command (or transaction) committed as changes to the
/// dataset (rdb_changes_since_last_save): no handler keeps count itself.
/// `one`: the command counts as one change at most (`ONE_CHANGE`).
pub(crate) fn count_changes(stats: &ThreadStats, committed: &Commit, one: bool) {
    use strata_engine::storage::record::{FLAG_EMPTIED, Kind, STREAM_AUX_DELIVERY_ONLY};
    // The DEL of a collection its operation emptied is part of that
    // operation's change (Redis counts the pop, not the deletion);
    // another delivery of pending stream entries is no change (Redis 7.4).
    let not_changes = (committed.changed.changes())
        .filter(|c| {
            c.flags & FLAG_EMPTIED != 0
                || (c.kind == Kind::StreamOp && c.aux == STREAM_AUX_DELIVERY_ONLY)
        })
        .count();
    let mut changes = committed.changed.len() - not_changes;
    if one {
        changes = changes.min(1);
    }
    if changes > 0 {
        bump(&stats.changes, changes as u64);
    }
}

/// The values `args`' keys read that are on disk only, noted under the
/// command's locks `keys` (None when there are none); `declared` spares
/// hashing the keys again.
pub(crate) fn cold_values_held(
    server: &Node,
    db: usize,
    now_ms: u64,
    args: &[Bytes],
    declared: &[KeyRef],
    keys: &mut Locked,
) -> Option<ColdFetch> {
    let mut fetch = ColdFetch::new(db);
    for bytes in server.commands.value_keys(args) {
        let key = declared_key(server, declared, bytes);
        fetch.want_held(keys, key, now_ms);
    }
    (!fetch.is_empty()).then_some(fetch)
}

/// `bytes` as a key, its hash taken from `declared` when it is one of
/// them.
fn declared_key<'k>(server: &Node, declared: &[KeyRef], bytes: &'k [u8]) -> KeyRef<'k> {
    declared
        .iter()
        .find(|k| std::ptr::eq(k.bytes, bytes))
        .map_or_else(
            || server.keyspace.key(bytes),
            |k| KeyRef {
                bytes,
                hash: k.hash,
            },
        )
}

/// Runs command `id`'s handler with `keys` (already locked) and counts it;
/// hands the locks back with what the handler committed itself.
#[allow(clippy::too_many_arguments)]
pub(crate) fn call<'a, 's>(
    server: &'s Node,
    session: &'a mut Session,
    out: &'a mut bytes::BytesMut,
    config: &'a Config,
    stats: &'a ThreadStats,
    now_ms: u64,
    id: usize,
    args: &[Bytes],
    keys: Locked<'s>,
    declared: SmallVec<[KeyRef<'a>; DECLARED_KEYS_INLINE]>,
) -> (Locked<'s>, Commit) {
    let spec = server.commands.specs[id];
    session
        .client
        .last_command
        .store(id + 1, std::sync::atomic::Ordering::Relaxed);
    let handler = spec
        .handler()
        .expect("a container without arguments fails its arity check; EXEC runs apart");
    let started = quanta::Instant::now();
    let protocol = session.protocol;
    let mut ctx = Ctx {
        server,
        session,
        out: ReplyWriter::new(out, protocol),
        config,
        stats,
        now_ms,
        keys,
        committed: Commit::default(),
        declared,
    };
    // Changes before this command's (earlier ones of a transaction).
    let changes_before = server
        .tracking
        .is_active()
        .then(|| ctx.keys.pending_count());
    // CLIENT NO-TOUCH: the command leaves access times alone (TOUCH
    // itself still touches, as in Redis).
    let no_touch = ctx
        .session
        .client
        .no_touch
        .load(std::sync::atomic::Ordering::Relaxed)
        && spec.name != "touch";
    let result =
        strata_engine::keyspace::access::with_no_touch(no_touch, || handler(&mut ctx, args));
    if let Some(before) = changes_before {
        tracking::invalidate_changes(&mut ctx, before);
    }
    if ctx.session.tracking.is_some() {
        tracking::remember_read(&mut ctx, spec);
    }
    if !ctx.session.in_script {
        // A script's frozen time ends with it (EVAL, FCALL).
        ctx.session.script_time = None;
    }
    let took = started.elapsed() + Duration::from_micros(std::mem::take(&mut ctx.session.slept_us));
    let micros = took.as_micros() as u64;
    let counters = &stats.commands[id];
    // A command that blocks counts one call, when it ends (served here, on
    // a timeout or CLIENT UNBLOCK by its connection), as in Redis.
    if ctx.session.block.is_none() {
        bump(&counters.calls, 1);
    }
    bump(&counters.usec, micros);
    if config.latency_tracking {
        counters
            .histogram
            .get_or_init(Default::default)
            .record(took.as_nanos() as u64);
    }
    if strata_engine::latency::is_on() {
        let event = if spec.has(flag::FAST) {
            "fast-command"
        } else {
            "command"
        };
        strata_engine::latency::sample(event, took);
    }
    // A blocked command shows once, when it first runs (its retries as
    // the keys change do not), as Redis shows it.
    if server.monitors.active()
        && !spec.has(flag::SKIP_MONITOR)
        && !spec.has(flag::ADMIN)
        && !ctx.session.block_retry
    {
        let from = (!ctx.session.in_script).then(|| ctx.session.client.monitor_source());
        server
            .monitors
            .feed(ctx.session.db, from.as_deref(), args, config);
    }
    // Redis decides with the value after the command: a CONFIG SET
    // turning the slow log off is not logged, one turning it on is.
    let threshold = match args[0].eq_ignore_ascii_case(b"config") {
        true => server.config.get().slowlog_log_slower_than,
        false => config.slowlog_log_slower_than,
    };
    // A run that blocked (it found nothing) is not logged: a blocking
    // command shows once it is served, as in Redis.
    if threshold >= 0
        && micros >= threshold as u64
        && !ctx.session.in_script
        && !spec.has(flag::SKIP_SLOWLOG)
        && ctx.session.block.is_none()
    {
        let client = &ctx.session.client;
        let who = (client.addr_text(), client.names.lock().name.clone());
        // The live length: this command may be the CONFIG SET changing it.
        let max_len = server.config.get().slowlog_max_len as usize;
        server
            .slowlog
            .record(args, micros, now_ms / 1000, who, max_len);
    }
    if let Err(CmdError(text)) = result {
        bump(&counters.failed, 1);
        // A script's error already counted when a command inside it
        // failed is not counted twice (Redis' rule).
        if !std::mem::take(&mut ctx.session.error_counted) {
            server.stats.record_error(&text);
        }
        ctx.out.error(&text);
    }
    let keys = std::mem::replace(&mut ctx.keys, server.keyspace.lock_nothing());
    (keys, ctx.committed)
}

pub(crate) fn reject(server: &Node, reply: &mut ReplyWriter, text: &str) {
    server.stats.record_error(text);
    reply.error(text);
}
