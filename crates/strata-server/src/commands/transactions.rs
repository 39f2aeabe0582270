//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! After MULTI a connection's commands are checked as usual (existence,
//! arity, authentication, memory, a failed log) and queued: each answers
//! `+QUEUED`, or its error, which fails the transaction (EXEC answers
//! EXECABORT). EXEC runs the queue atomically across shards and threads
//! without stopping the world: it locks the shards of every key its
//! commands declare (and of the keys WATCHed) in ascending order, as one
//! pinned lock set ([`strata_engine::keyspace::shards::Locked::is_pinned`]), runs
//! the commands one after another under it, and commits everything they
//! changed as one log group. Other clients wait only for those shards;
//! nobody observes part of a transaction, and after a crash the log has
//! all of it or none. A transaction with a database-wide command
//! (FLUSHALL, KEYS, SCAN, SORT with patterns, …) locks every shard.
//! Introspection commands that read the whole server on their own
//! (INFO, DEBUG, MEMORY) run right after the locks are released, their
//! replies in their place.
//!
//! Values on disk are read before locking: the connection reads the cold
//! values of every queued command, then runs EXEC ([`value_keys`]).
//!
//! WATCH subscribes the connection to the change feed
//! (`strata_engine::feed`) and notes whether each key exists. EXEC, holding
//! the watched keys' shards, drains the feed: any change to a watched key
//! since WATCH (a write, a deletion, an expiry, eviction, FLUSHDB/FLUSHALL
//! or SWAPDB of a key that existed), or a watched key that expired
//! meanwhile, makes EXEC answer a null array and run nothing. A value
//! merely going cold is not a change. A subscriber that falls behind by
//! more than [`WATCH_FEED_GROUPS_MAX`] groups counts as broken (EXEC
//! fails; the client retries, as after any conflict): the feed never
//! grows without bound.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use strata_engine::KeyRef;
use strata_engine::keyspace::shards::Locked;
use strata_engine::storage::record::Kind;
use strata_resp::ReplyWriter;

pub use super::multi_state::{Multi, Queued, Watched, Watching};
use super::{
    CmdResult, Ctx, Dispatched, Gates, call, cold_values_held, count_changes, declared_keys, reject,
};
use crate::commands::Node;
use crate::config::Config;
use crate::net::session::Session;
use crate::observe::stats::{ThreadStats, bump};

/// Groups of changes a WATCHing connection may have unread before its
/// watch counts as broken (see the module docs).
pub const WATCH_FEED_GROUPS_MAX: usize = 1 << 16;
/// Bytes counted per queued argument beyond its own length.
const QUEUED_ARG_OVERHEAD_BYTES: usize = 32;

const ERR_EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// Queues command `id` of a transaction and answers `+QUEUED`.
pub fn queue(
    server: &Node,
    session: &mut Session,
    out: &mut BytesMut,
    config: &Config,
    id: usize,
    args: &[Bytes],
) {
    let mut reply = ReplyWriter::new(out, session.protocol);
    let multi = session.multi.as_mut().expect("queued inside MULTI");
    let bytes: usize = args
        .iter()
        .map(|arg| arg.len() + QUEUED_ARG_OVERHEAD_BYTES)
        .sum();
    if (multi.bytes + bytes) as u64 > config.query_buffer_limit_bytes {
        multi.dirty = true;
        reject(
            server,
            &mut reply,
            "ERR transaction too large: its queued commands exceed client-query-buffer-limit",
        );
        return;
    }
    multi.bytes += bytes;
    multi.queued.push(Queued {
        id,
        args: args.to_vec(),
    });
    session.client.multi.store(
        multi.queued.len() as i64,
        std::sync::atomic::Ordering::Relaxed,
    );
    reply.simple("QUEUED");
}

/// The keys whose values a queued transaction reads, for the connection
/// to read from disk before EXEC locks anything.
pub fn value_keys(server: &Node, session: &Session) -> Vec<Bytes> {
    let Some(multi) = &session.multi else {
        return Vec::new();
    };
    multi
        .queued
        .iter()
        .flat_map(|queued| {
            server
                .commands
                .value_keys(&queued.args)
                .into_iter()
                .map(Bytes::copy_from_slice)
        })
        .collect()
}

pub fn multi(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err("ERR MULTI calls can not be nested".into());
    }
    ctx.session.multi = Some(Multi::default());
    ctx.session
        .client
        .multi
        .store(0, std::sync::atomic::Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// Leaves MULTI and forgets the watched keys (EXEC, DISCARD, RESET).
pub fn end(session: &mut Session) {
    session.multi = None;
    unwatch_all(session);
    session
        .client
        .multi
        .store(-1, std::sync::atomic::Ordering::Relaxed);
}

pub fn discard(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.session.multi.is_none() {
        return Err("ERR DISCARD without MULTI".into());
    }
    end(ctx.session);
    ctx.out.ok();
    Ok(())
}

pub fn watch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if ctx.session.multi.is_some() {
        return Err("ERR WATCH inside MULTI is not allowed".into());
    }
    let db = ctx.db();
    let keyspace = ctx.keyspace();
    let watching = ctx.session.watch.get_or_insert_with(|| Watching {
        // Subscribed before any key is looked at: whatever changes after
        // the look is in the feed.
        subscription: Some(keyspace.subscribe(WATCH_FEED_GROUPS_MAX)),
        ..Watching::default()
    });
    for arg in &args[1..] {
        if watching
            .keys
            .iter()
            .any(|w| w.db == db && w.key[..] == arg[..])
        {
            continue;
        }
        let key = keyspace.key(arg);
        let state = ctx.keys.shard(key).is_live(db, key, ctx.now_ms);
        watching.keys.push(Watched {
            db,
            // A copy: a slice would keep the request's input buffer.
            key: Bytes::copy_from_slice(arg),
            live: state == Some(true),
            stale: state == Some(false),
            swapped: false,
        });
    }
    let count = watching.keys.len();
    ctx.session
        .client
        .watched_keys
        .store(count, std::sync::atomic::Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

pub fn unwatch(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    unwatch_all(ctx.session);
    ctx.out.ok();
    Ok(())
}

/// Forgets the watched keys.
fn unwatch_all(session: &mut Session) {
    session.watch = None;
    session
        .client
        .watched_keys
        .store(0, std::sync::atomic::Ordering::Relaxed);
}

/// Reads what the feed reported since the connection last looked and
/// marks its watch broken if a watched key changed. Called at EXEC with
/// the watched keys' shards locked (so nothing about them is missing) and
/// before other commands (so an idle watcher's queue stays short).
pub fn check_feed(session: &mut Session) {
    let Some(watching) = &mut session.watch else {
        return;
    };
    let Some(subscription) = &watching.subscription else {
        return;
    };
    loop {
        let group = match subscription.try_recv() {
            Ok(Some(group)) => group,
            Ok(None) => return,
            Err(_lagged) => {
                watching.broken = true;
                break;
            }
        };
        for change in &group.changes {
            let db = change.db as usize;
            for watched in &mut watching.keys {
                let touched = match change.kind {
                    Kind::FlushAll => watched.live,
                    Kind::FlushDb => watched.db == db && watched.live,
                    Kind::SwapDb => {
                        let other = change.aux as usize;
                        if watched.db == db || watched.db == other {
                            watched.swapped = true;
                            watched.live
                        } else {
                            false
                        }
                    }
                    _ if watched.db != db || watched.key[..] != change.key[..] => false,
                    Kind::Del if watched.stale => {
                        // An expired key reclaimed: no change.
                        watched.stale = false;
                        false
                    }
                    _ => true,
                };
                watching.broken |= touched;
            }
        }
        if watching.broken {
            break;
        }
    }
    // Broken for good: stop receiving.
    watching.subscription = None;
}

/// Whether the watched keys changed since WATCH: what the feed reported,
/// or a key that expired meanwhile. `keys` holds their shards.
fn watch_broken(server: &Node, session: &mut Session, keys: &mut Locked, now_ms: u64) -> bool {
    check_feed(session);
    let Some(watching) = &session.watch else {
        return false;
    };
    watching.broken
        || watching.keys.iter().any(|watched| {
            let key = server.keyspace.key(&watched.key);
            let live = keys.shard(key).is_live(watched.db, key, now_ms) == Some(true);
            (watched.live && !live) || (watched.swapped && live)
        })
}

/// EXEC: runs the queued transaction (see the module docs).
pub fn run_exec(
    server: &Node,
    session: &mut Session,
    out: &mut BytesMut,
    config: &Config,
    stats: &ThreadStats,
    now_ms: u64,
    defer_cold: bool,
) -> Dispatched {
    let exec_id = server.commands.exec_id;
    let started = quanta::Instant::now();
    let refused = match &session.multi {
        None => "ERR EXEC without MULTI",
        Some(multi) if multi.dirty => ERR_EXECABORT,
        Some(_) => "",
    };
    if !refused.is_empty() {
        if session.multi.is_some() {
            end(session);
        }
        bump(&stats.commands[exec_id].failed, 1);
        reject(
            server,
            &mut ReplyWriter::new(out, session.protocol),
            refused,
        );
        return Dispatched::Ran(None);
    }
    let multi = session.multi.take().expect("checked above");
    let (mut keys, declared) = lock_transaction(server, session, &multi);
    if defer_cold && server.keyspace.tier().cold_keys() > 0 {
        let db = session.db;
        let cold = multi.queued.iter().any(|queued| {
            cold_values_held(server, db, now_ms, &queued.args, &[], &mut keys).is_some()
        });
        if cold {
            keys.commit();
            session.multi = Some(multi);
            return Dispatched::Cold(None);
        }
    }
    if watch_broken(server, session, &mut keys, now_ms) {
        let committed = keys.commit();
        end(session);
        bump(&stats.commands[exec_id].calls, 1);
        ReplyWriter::new(out, session.protocol).null_array();
        return Dispatched::Ran(committed.lsn);
    }
    unwatch_all(session);
    ReplyWriter::new(out, session.protocol).array(multi.queued.len());
    let run = Run {
        server,
        config,
        stats,
        now_ms,
    };
    let committed = run.queued(session, out, &multi, keys, &declared);
    end(session);
    let counters = &stats.commands[exec_id];
    bump(&counters.calls, 1);
    bump(&counters.usec, started.elapsed().as_micros() as u64);
    count_changes(stats, &committed, false);
    Dispatched::Ran(committed.lsn)
}

/// Each queued command's declared keys, hashed once, and where each
/// command's are among them.
struct Declared<'a> {
    keys: Vec<KeyRef<'a>>,
    spans: Vec<std::ops::Range<usize>>,
}

/// Locks what the transaction needs: the declared and watched keys'
/// shards, or every shard when a command may reach keys it did not
/// declare (a script: it must never wait for a shard half way).
fn lock_transaction<'s, 'm>(
    server: &'s Node,
    session: &Session,
    multi: &'m Multi,
) -> (Locked<'s>, Declared<'m>) {
    let gates = |id: usize| server.commands.gates(id);
    let all = multi.queued.iter().any(|queued| {
        gates(queued.id).has(Gates::DATABASE_WIDE) || gates(queued.id).has(Gates::PINNED)
    });
    let mut declared = Declared {
        keys: Vec::new(),
        spans: Vec::with_capacity(multi.queued.len()),
    };
    for queued in &multi.queued {
        let start = declared.keys.len();
        declared.keys.extend(declared_keys(
            server.commands.specs[queued.id],
            &queued.args,
            &server.keyspace,
        ));
        declared.spans.push(start..declared.keys.len());
    }
    let mut lock_set = declared.keys.clone();
    if let Some(watching) = &session.watch {
        lock_set.extend(watching.keys.iter().map(|k| server.keyspace.key(&k.key)));
    }
    (server.keyspace.lock_pinned(&lock_set, all), declared)
}

/// What every command of a running transaction shares.
struct Run<'s> {
    server: &'s Node,
    config: &'s Config,
    stats: &'s ThreadStats,
    now_ms: u64,
}

impl<'s> Run<'s> {
    /// Runs the queued commands in order under `keys`, their replies into
    /// `out`; what they committed.
    fn queued(
        &self,
        session: &mut Session,
        out: &mut BytesMut,
        multi: &Multi,
        mut keys: Locked<'s>,
        declared: &Declared,
    ) -> strata_engine::keyspace::commit::Commit {
        let server = self.server;
        // Replies go straight to `out` except where a command runs after
        // the locks: there the reply is spliced in afterwards.
        let mut later: Vec<(usize, &Queued)> = Vec::new();
        let has_later = (multi.queued.iter()).any(|q| self.runs_unlocked(q.id));
        let mut body = BytesMut::new();
        let mut committed = strata_engine::keyspace::commit::Commit::default();
        session.in_exec = true;
        for (queued, span) in multi.queued.iter().zip(&declared.spans) {
            let buffer: &mut BytesMut = if has_later { &mut body } else { &mut *out };
            // The rules may have changed since the command was queued.
            if let Err(denied) = crate::commands::permit::check_command(
                server,
                session,
                queued.id,
                &queued.args,
                crate::acl::log::Context::Multi,
                self.now_ms,
            ) {
                let mut reply = ReplyWriter::new(buffer, session.protocol);
                reject(server, &mut reply, &denied.exec_error());
                continue;
            }
            if self.runs_unlocked(queued.id) {
                later.push((buffer.len(), queued));
                continue;
            }
            let keys_of: SmallVec<[KeyRef; 4]> =
                declared.keys[span.clone()].iter().copied().collect();
            let (back, by_handler) = self.call(session, buffer, queued, keys, keys_of);
            keys = back;
            committed.absorb(by_handler);
            answer_blocked(session, buffer);
        }
        session.in_exec = false;
        committed.absorb(keys.commit());
        for (at, queued) in later.iter().rev() {
            let mut reply = BytesMut::new();
            let nothing = server.keyspace.lock_nothing();
            let (back, by_handler) =
                self.call(session, &mut reply, queued, nothing, SmallVec::new());
            committed.absorb(by_handler);
            committed.absorb(back.commit());
            let rest = body.split_off(*at);
            body.extend_from_slice(&reply);
            body.extend_from_slice(&rest);
        }
        out.extend_from_slice(&body);
        committed
    }

    fn runs_unlocked(&self, id: usize) -> bool {
        self.server.commands.gates(id).has(Gates::RUNS_UNLOCKED)
    }

    fn call<'a>(
        &self,
        session: &'a mut Session,
        out: &'a mut BytesMut,
        queued: &Queued,
        keys: Locked<'s>,
        declared: SmallVec<[KeyRef<'a>; 4]>,
    ) -> (Locked<'s>, strata_engine::keyspace::commit::Commit)
    where
        's: 'a,
    {
        call(
            self.server,
            session,
            out,
            self.config,
            self.stats,
            self.now_ms,
            queued.id,
            &queued.args,
            keys,
            declared,
        )
    }
}

/// A blocking command inside a transaction or script does not wait: it
/// answers as if its timeout had passed.
pub fn answer_blocked(session: &mut Session, out: &mut BytesMut) {
    if let Some(block) = session.block.take() {
        let mut reply = ReplyWriter::new(out, session.protocol);
        block.timeout_reply.write_to(&mut reply);
    }
}
