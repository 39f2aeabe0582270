//! The command table and dispatch.
//!
//! Every command is one [`Spec`] in [`table::FAMILIES`]: name, arity, flags,
//! key specs ([`keyspec`]), ACL categories, documentation and handler. The dispatcher
//! checks existence, arity and authentication once, from the spec, before
//! any handler runs; COMMAND, COMMAND INFO/DOCS/COUNT/LIST/GETKEYS(ANDFLAGS) and
//! INFO commandstats are generated from the same table.
//!
//! Handlers live one file per family (`strings.rs`, `keys.rs`, …), take a
//! [`Ctx`] and the arguments (argument 0 is the command name), write their
//! reply through `ctx.out`, and return `Err` with Redis' exact error text
//! when they reply nothing else.
//!
//! Dispatch locks, handlers don't: the shards of the keys a command
//! declares (its key specs) are locked before its handler runs, reached
//! through `ctx.keys.shard(key)`, and committed as one log group after it;
//! the commit's LSN is what the reply waits for (`docs/server.md`).

pub mod acl;
pub mod bits;
pub mod call;
pub mod catalog;
pub mod cluster;
pub mod connection;
pub mod ctx;
pub mod debug;
pub mod describe;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod introspection;
pub mod keys;
pub mod keyspec;
pub mod latency;
pub mod lists;
pub mod memory;
pub mod multi_state;
pub mod pause;
pub mod permit;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
#[macro_use]
pub mod spec;
pub mod streams;
pub mod strings;
pub mod table;
pub mod tracking;
pub mod transactions;
pub mod zsets;

use std::borrow::Cow;

use bytes::Bytes;
use strata_engine::tiering::fetch::{ColdFetch, FailedRead, ReadResult};
use strata_resp::ReplyWriter;

pub(crate) use call::{
    call, cold_values_held, count_changes, declared_keys, declared_keys_known, reject,
};
pub use catalog::Gates;
pub use ctx::{
    CmdError, CmdResult, ColdCommand, ColdValues, CommandTable, Ctx, DispatchFn, Dispatched,
    ERR_DB_RANGE, ERR_DEBUG_NOT_ALLOWED, ERR_LOADING, ERR_NO_SUCH_KEY, ERR_NOAUTH, ERR_NOT_FLOAT,
    ERR_NOT_INTEGER, ERR_OVERFLOW, ERR_STRING_TOO_LONG, ERR_SYNTAX, ERR_WRONGTYPE, Handler, Node,
    Run, SCAN_PASSES_MAX, ScanArgs, ScanSlice, Spec, help_lines, is, lossy, mpop_args, parse_db,
    parse_i64, parse_negatable_i64, parse_timeout, write_value,
};
pub use pause::{held_by_write_pause, may_write};
use spec::traits as trait_;
pub use spec::{Categories, Flags, Traits};

use crate::config::Config;
use crate::log_warning;
use crate::net::session::Session;
use crate::observe::stats::{ThreadStats, bump};

impl CommandTable {
    /// The table of every family in [`table::FAMILIES`].
    pub fn new() -> Self {
        CommandTable::of_families(table::FAMILIES)
    }
}

impl Default for CommandTable {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs one command and writes its reply to `out`. `cold` says what to do
/// about values on disk it reads ([`ColdValues`]): normally
/// [`ColdValues::Defer`], so that no disk read happens under a lock.
/// Inside MULTI, a command is checked and queued instead
/// ([`transactions`]).
#[allow(clippy::too_many_arguments)]
pub fn dispatch(
    server: &Node,
    session: &mut Session,
    out: &mut bytes::BytesMut,
    config: &Config,
    stats: &ThreadStats,
    now_ms: u64,
    args: &[Bytes],
    cold: ColdValues,
) -> Dispatched {
    let mut request = Request {
        server,
        session,
        out,
        config,
        stats,
        now_ms,
        args,
    };
    let dispatched = dispatch_one(&mut request, cold);
    if session.asking && session.multi.is_none() && !is(&args[0], "asking") {
        session.asking = false;
    }
    if !session.bcast_pending.is_empty() {
        tracking::broadcast_pending(server, session, config);
    }
    dispatched
}

/// One command on its way through dispatch: what every step of it reads
/// or writes, as one value rather than seven parameters.
struct Request<'a> {
    server: &'a Node,
    session: &'a mut Session,
    out: &'a mut bytes::BytesMut,
    config: &'a Config,
    stats: &'a ThreadStats,
    now_ms: u64,
    args: &'a [Bytes],
}

/// [`dispatch`] but for what BCAST tracking clients are told after.
fn dispatch_one(r: &mut Request, cold: ColdValues) -> Dispatched {
    if r.session.watch.is_some() {
        transactions::check_feed(r.session);
    }
    let (id, reading) = match cold {
        // Admitted when its values were found on disk: not again.
        ColdValues::Fetched(fetched) => {
            let (admitted, results) = *fetched;
            (admitted.id, Reading::Fetched(admitted.fetch, results))
        }
        cold => {
            let defer = matches!(cold, ColdValues::Defer);
            match route(r, defer) {
                Ok(id) if defer => (id, Reading::Defer),
                Ok(id) => (id, Reading::UnderLock),
                Err(handled) => return handled,
            }
        }
    };
    run_admitted(r, id, reading)
}

/// Admits a command and routes it: refused, queued inside MULTI, or EXEC
/// run, it is handled here (`Err`, what dispatch answers); otherwise its
/// table index, for its handler to run under its locks.
fn route(r: &mut Request, defer: bool) -> Result<usize, Dispatched> {
    let admitted = admit(r);
    if std::mem::take(&mut r.session.pushes_first)
        && let Some(mailbox) = r.session.client.existing_mailbox()
    {
        mailbox.drain_into(r.out);
    }
    let Some(id) = admitted else {
        // A command refused while queuing fails the whole transaction;
        // EXEC refused ends it (`admit` answered EXECABORT).
        if let Some(multi) = &mut r.session.multi {
            multi.dirty = true;
            if r.server.commands.is_exec(&r.args[0]) {
                transactions::end(r.session);
            }
        }
        return Err(Dispatched::Ran(None));
    };
    if r.session.multi.is_some() && !r.server.commands.gates(id).has(Gates::RUNS_AT_ONCE) {
        transactions::queue(r.server, r.session, r.out, r.config, id, r.args);
        return Err(Dispatched::Ran(None));
    }
    if matches!(r.server.commands.specs[id].run, Run::Exec) {
        let ran = transactions::run_exec(
            r.server, r.session, r.out, r.config, r.stats, r.now_ms, defer,
        );
        // After the commands it ran, as Redis shows it (not when it
        // waits for cold values: it runs again then).
        if r.server.monitors.active() && !matches!(ran, Dispatched::Cold(_)) {
            let from = r.session.client.monitor_source();
            r.server
                .monitors
                .feed(r.session.db, Some(&from), r.args, r.config);
        }
        return Err(ran);
    }
    Ok(id)
}

/// How an admitted command meets values on disk (see [`ColdValues`]).
enum Reading {
    Defer,
    UnderLock,
    Fetched(ColdFetch, Vec<ReadResult>),
}

/// Locks admitted command `id`'s keys and runs it (unless `reading`
/// defers it for values on disk), then commits. Inlined: every command
/// passes here, and a call of its own cost the hot path ~100 instructions
/// (`bench/instructions.sh`).
#[inline(always)]
fn run_admitted(r: &mut Request, id: usize, reading: Reading) -> Dispatched {
    let spec = r.server.commands.specs[id];
    let declared = declared_keys(spec, r.args, &r.server.keyspace);
    let mut keys = if r.server.commands.gates(id).has(Gates::PINNED) {
        r.server.keyspace.lock_pinned(&declared, false)
    } else {
        r.server.keyspace.lock_keys(&declared)
    };
    let mut lent = None;
    match reading {
        Reading::Defer => {
            if !declared.is_empty()
                && r.server.keyspace.tier().cold_keys() > 0
                && let Some(fetch) = cold_values_held(
                    r.server,
                    r.session.db,
                    r.now_ms,
                    r.args,
                    &declared,
                    &mut keys,
                )
            {
                // Unlocks; what it logged (a lazily expired key) is no
                // reply's.
                keys.commit();
                return Dispatched::Cold(Some(Box::new(ColdCommand { id, fetch })));
            }
        }
        Reading::UnderLock => {}
        Reading::Fetched(fetch, results) => {
            let (values, failed) = fetch.install_held(&mut keys, results, r.now_ms);
            if let Some(failed) = failed.first() {
                values.release_held(&mut keys, r.now_ms);
                keys.commit();
                cold_read_failed(r.server, r.session, r.out, failed);
                return Dispatched::Ran(None);
            }
            lent = Some(values);
        }
    }
    let (mut keys, mut committed) = call(
        r.server, r.session, r.out, r.config, r.stats, r.now_ms, id, r.args, keys, declared,
    );
    if let Some(lent) = lent {
        // Still under the command's locks: no lock of its own.
        lent.release_held(&mut keys, r.now_ms);
    }
    committed.absorb(keys.commit());
    let one = r.server.commands.gates(id).has(Gates::ONE_CHANGE);
    count_changes(r.stats, &committed, one);
    (r.server.blocking).wake_changed(&committed.changed, &mut r.session.woken);
    Dispatched::Ran(committed.lsn)
}

/// Answers a command whose value could not be read from disk (and logs
/// why).
fn cold_read_failed(
    server: &Node,
    session: &Session,
    out: &mut bytes::BytesMut,
    failed: &FailedRead,
) {
    let FailedRead { key, why, .. } = failed;
    log_warning!(
        "Could not read the value of key '{}' from disk: {why}",
        String::from_utf8_lossy(key)
    );
    let text = format!(
        "ERR could not read the value of '{}' from disk: {why}",
        lossy(key, 128)
    );
    server.stats.record_error(&text);
    ReplyWriter::new(out, session.protocol).error(&text);
}

/// Checks a command before it runs (existence, arity, authentication,
/// loading, a failed log, memory) and answers the error if it may not;
/// returns its table index if it may.
fn admit(r: &mut Request) -> Option<usize> {
    let id = match resolve(r.server, r.session, r.config, r.now_ms, r.args) {
        Ok(id) => id,
        Err(message) => {
            reject(
                r.server,
                &mut ReplyWriter::new(r.out, r.session.protocol),
                &message,
            );
            return None;
        }
    };
    let mut admission = Admission {
        server: r.server,
        session: &mut *r.session,
        config: r.config,
        now_ms: r.now_ms,
        args: r.args,
        id,
    };
    let Some(refused) = GATES.iter().find_map(|gate| gate(&mut admission)) else {
        return Some(id);
    };
    bump(&r.stats.commands[id].rejected, 1);
    // EXEC refused inside MULTI ends the transaction with EXECABORT
    // (`dispatch_one` ends it), as Redis words it.
    let exec = matches!(r.server.commands.specs[id].run, Run::Exec);
    let redirect = crate::cluster::route::is_redirect(&refused);
    let message = match exec && r.session.multi.is_some() && !redirect {
        true => format!("EXECABORT Transaction discarded because of: {refused}").into(),
        false => refused,
    };
    reject(
        r.server,
        &mut ReplyWriter::new(r.out, r.session.protocol),
        &message,
    );
    None
}

/// Why a command may not run: the error to answer.
type Refusal = Cow<'static, str>;

/// The command's table index (a container with arguments resolves to its
/// subcommand), or the error for an unknown command or subcommand.
fn resolve(
    server: &Node,
    session: &mut Session,
    config: &Config,
    now_ms: u64,
    args: &[Bytes],
) -> Result<usize, Refusal> {
    let table = &server.commands;
    let Some(id) = table.lookup(&args[0]) else {
        let mut message = format!(
            "ERR unknown command '{}', with args beginning with: ",
            lossy(&args[0], 128)
        );
        for arg in &args[1..] {
            if message.len() >= 128 + 60 {
                break;
            }
            message.push_str(&format!("'{}' ", lossy(arg, 128)));
        }
        return Err(message.into());
    };
    // DEBUG is protected (`enable-debug-command`): refused before its
    // subcommand is looked at, as Redis refuses it.
    if id == table.debug_id
        && args.len() >= 2
        && !config
            .enable_debug_command
            .allows(session.client.is_local())
    {
        return Err(ERR_DEBUG_NOT_ALLOWED.into());
    }
    // A container with arguments resolves to its subcommand first, then
    // arity is checked once on what was resolved (Redis' order).
    if table.specs[id].subcommands.is_empty() || args.len() < 2 {
        return Ok(id);
    }
    match table.lookup_subcommand(id, &args[1]) {
        Some(sub) => Ok(sub),
        None if id == table.debug_id => {
            // DEBUG is one command to ACL rules: a subcommand Strata
            // lacks is still refused to a user who may not run it.
            crate::commands::permit::check_client_command(server, session, id, args, now_ms)?;
            Err(debug::debug_error(args).into())
        }
        None => Err(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            lossy(&args[1], 128),
            table.specs[id].name.to_ascii_uppercase()
        )
        .into()),
    }
}

/// What admission's gates look at: a resolved command and who sends it.
struct Admission<'a> {
    server: &'a Node,
    session: &'a mut Session,
    config: &'a Config,
    now_ms: u64,
    args: &'a [Bytes],
    id: usize,
}

impl Admission<'_> {
    fn gates(&self) -> Gates {
        self.server.commands.gates(self.id)
    }

    fn full_name(&self) -> &str {
        &self.server.commands.full_names[self.id]
    }

    /// The transaction EXEC would run (None for any other command): EXEC
    /// is checked against what its queue does.
    fn exec_queue(&self) -> Option<&transactions::Multi> {
        let exec = matches!(self.server.commands.specs[self.id].run, Run::Exec);
        exec.then_some(self.session.multi.as_ref()).flatten()
    }
}

/// The checks a resolved command passes before it runs, in Redis' order:
/// the first that refuses answers.
const GATES: &[fn(&mut Admission) -> Option<Refusal>] = &[
    arity_gate,
    auth_gate,
    acl_gate,
    cluster_gate,
    loading_gate,
    disk_error_gate,
    memory_gate,
    replica_gate,
    busy_script_gate,
    subscribed_gate,
    multi_gate,
];

fn arity_gate(a: &mut Admission) -> Option<Refusal> {
    if a.server.commands.specs[a.id].arity_ok(a.args.len()) {
        return None;
    }
    Some(match a.full_name().starts_with("debug|") {
        true => debug::debug_error(a.args).into(),
        false => format!(
            "ERR wrong number of arguments for '{}' command",
            a.full_name()
        )
        .into(),
    })
}

fn auth_gate(a: &mut Admission) -> Option<Refusal> {
    let refused =
        !a.session.authenticated && !a.gates().has(Gates::NO_AUTH) && a.server.acl.auth_required();
    refused.then_some(ERR_NOAUTH.into())
}

fn acl_gate(a: &mut Admission) -> Option<Refusal> {
    crate::commands::permit::check_client_command(a.server, a.session, a.id, a.args, a.now_ms)
        .err()
        .map(Into::into)
}

/// Cluster mode: whether this node serves the command's keys, else the
/// redirection (`crate::cluster::route`). Commands that name no key
/// pass, and so does the primary's stream; EXEC is judged on every
/// command it queued.
fn cluster_gate(a: &mut Admission) -> Option<Refusal> {
    if !a.server.cluster.enabled() || a.session.primary_link {
        return None;
    }
    let table = &a.server.commands;
    let spec = table.specs[a.id];
    let exec = matches!(spec.run, Run::Exec);
    if !exec && spec.keys.is_empty() && spec.keys_hook.is_none() {
        return None;
    }
    let mut keys = cluster::SlotKeys::new();
    let mut write = a.gates().has(Gates::WRITE);
    match exec {
        true => {
            for queued in &a.session.multi.as_ref()?.queued {
                cluster::slot_keys(table.specs[queued.id], &queued.args, &mut keys);
                write |= table.gates(queued.id).has(Gates::WRITE);
            }
        }
        false => cluster::slot_keys(spec, a.args, &mut keys),
    }
    let query = crate::cluster::route::Query {
        keys: &keys,
        write,
        asking: a.session.asking || spec.has(spec::flag::ASKING),
        readonly: a.session.cluster_readonly,
        migrate: a.id == table.migrate_id,
    };
    let keyspace = &a.server.keyspace;
    let exists = |key: &[u8]| {
        let key = keyspace.key(key);
        keyspace.lock(key).is_live(0, key, a.now_ms) == Some(true)
    };
    let settings = &a.config.cluster;
    let redirect = cluster::route(a.server, settings, &query, a.now_ms, exists).err()?;
    let text = cluster::redirect_text(a.server, settings, &a.session.client, redirect);
    Some(text.into())
}

fn loading_gate(a: &mut Admission) -> Option<Refusal> {
    let refused = a.server.persistence.is_loading() && !a.gates().has(Gates::LOADING);
    refused.then_some(ERR_LOADING.into())
}

fn disk_error_gate(a: &mut Admission) -> Option<Refusal> {
    if !a.gates().has(Gates::REFUSED_ON_DISK_ERROR) {
        return None;
    }
    let error = a.server.keyspace.change_log()?.write_error()?;
    Some(
        format!(
            "MISCONF Errors writing to the AOF file: {}",
            crate::util::strerror(&error)
        )
        .into(),
    )
}

/// On a replica: READONLY for writes (replica-read-only), MASTERDOWN
/// while the link is down (replica-serve-stale-data no). The primary's
/// own stream passes.
fn replica_gate(a: &mut Admission) -> Option<Refusal> {
    let replication = &a.server.replication;
    let settings = a.config.replication;
    let replica = replication.is_replica();
    if a.session.primary_link || (!replica && settings.min_replicas_to_write == 0) {
        return None;
    }
    let gates = a.gates();
    // EXEC writes when its queue does (Redis checks the transaction then:
    // EXECABORT … NOREPLICAS / READONLY).
    let queue = a.exec_queue();
    let writes =
        gates.has(Gates::WRITE) || queue.is_some_and(|multi| pause::may_write(multi, a.server));
    if writes && let Some(refused) = replication.too_few_replicas(a.now_ms, settings) {
        return Some(refused.into());
    }
    let stale_ok =
        gates.has(Gates::STALE) && queue.is_none_or(|multi| multi.all_stale(&a.server.commands));
    replication
        .refusal(writes, stale_ok, settings)
        .map(Into::into)
}

fn memory_gate(a: &mut Admission) -> Option<Refusal> {
    let denyoom = a.gates().has(Gates::DENYOOM)
        || a.exec_queue()
            .is_some_and(|multi| multi.uses_memory(&a.server.commands));
    let mut evicted = Vec::new();
    let refused = (a.server.tiering).admit(
        &a.server.keyspace,
        a.config,
        denyoom,
        a.now_ms,
        &mut evicted,
    );
    if !evicted.is_empty() && a.server.tracking.is_active() {
        // As Redis evicts before the command runs, tracking clients hear
        // of the evicted keys before its reply (this client too: its
        // pushes go out before the reply, `dispatch_one`). Under the
        // keys' locks, their registrations end here, so the change feed
        // does not tell them a second time; and no reader can have read
        // the key again in between. (BCAST clients hear of them from the
        // feed, as of other background deletes.)
        let keyspace = &a.server.keyspace;
        let refs: Vec<_> = evicted.iter().map(|k| keyspace.key(k)).collect();
        let _locked = keyspace.lock_keys(&refs);
        let keys: Vec<&[u8]> = evicted.iter().map(|k| &k[..]).collect();
        let limit = a.config.output_limit_pubsub;
        a.server.tracking.invalidate(&keys, None, true, limit);
        a.session.pushes_first = true;
    }
    refused.map(Into::into)
}

fn busy_script_gate(a: &mut Admission) -> Option<Refusal> {
    let busy = a
        .server
        .scripts
        .busy
        .load(std::sync::atomic::Ordering::Relaxed)
        > 0;
    (busy && !a.gates().has(Gates::ALLOW_BUSY)).then(|| a.server.scripts.busy_error().into())
}

fn subscribed_gate(a: &mut Admission) -> Option<Refusal> {
    let refused = a.session.subscriptions > 0
        && a.session.protocol == strata_resp::Protocol::Resp2
        && !a.server.commands.specs[a.id].is(trait_::WHEN_SUBSCRIBED);
    refused.then(|| {
        format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            a.full_name()
        )
        .into()
    })
}

fn multi_gate(a: &mut Admission) -> Option<Refusal> {
    let refused = a.session.multi.is_some() && a.gates().has(Gates::NO_MULTI);
    refused.then_some("ERR Command not allowed inside a transaction".into())
}
