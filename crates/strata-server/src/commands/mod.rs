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
pub mod catalog;
pub mod cluster;
pub mod connection;
pub mod debug;
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
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;
use strata_engine::commit::Commit;
use strata_engine::keyspace::Locked;
use strata_engine::{KeyRef, Keyspace};
use strata_resp::ReplyWriter;

pub use catalog::Gates;
pub use spec::{Categories, Flags, Traits};
use spec::{flag, traits as trait_};

use crate::config::Config;
use crate::server::Server;
use crate::session::{Block, Session, TimeoutReply};
use crate::stats::{ThreadStats, bump};

/// An error reply: the full text after `-`, starting with its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(pub Cow<'static, str>);

impl From<&'static str> for CmdError {
    fn from(text: &'static str) -> Self {
        CmdError(Cow::Borrowed(text))
    }
}

impl From<String> for CmdError {
    fn from(text: String) -> Self {
        CmdError(Cow::Owned(text))
    }
}

/// A value that had to be read from disk under the lock and could not
/// be: the same error the connection answers when its own read fails.
impl From<strata_engine::keyspace::ColdReadError> for CmdError {
    fn from(error: strata_engine::keyspace::ColdReadError) -> Self {
        CmdError(Cow::Owned(format!(
            "ERR could not read the value of '{}' from disk: {}",
            lossy(&error.key, 128),
            error.why
        )))
    }
}

impl From<strata_engine::keyspace::GetError> for CmdError {
    fn from(error: strata_engine::keyspace::GetError) -> Self {
        match error {
            strata_engine::keyspace::GetError::WrongType => CmdError::from(ERR_WRONGTYPE),
            strata_engine::keyspace::GetError::ColdRead(error) => error.into(),
        }
    }
}

pub type CmdResult = Result<(), CmdError>;
pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_NO_SUCH_KEY: &str = "ERR no such key";
pub const ERR_DB_RANGE: &str = "ERR DB index is out of range";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_STRING_TOO_LONG: &str =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// One command (or subcommand) as data: a row of the table
/// (`commands/table/`), run by a [`Run`].
pub type Spec = catalog::Spec<Run>;

/// The flattened table of every command Strata serves.
pub type CommandTable = catalog::CommandTable<Run>;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Its handler, under the locks of its declared keys.
    Handler(Handler),
    /// EXEC: dispatch runs the queued transaction (it needs the
    /// connection's output rather than one reply).
    Exec,
    /// A script or function (EVAL, FCALL and their kin): its handler,
    /// with its lock set held for the whole run (it may reach keys it did
    /// not declare).
    Script(Handler),
    /// A container: its subcommands do the work.
    Container,
}

impl catalog::RunKind for Run {
    fn is_exec(&self) -> bool {
        matches!(self, Run::Exec)
    }

    fn is_script(&self) -> bool {
        matches!(self, Run::Script(_))
    }
}

impl Spec {
    /// What a row leaves out: no keys, tips or traits, no subcommands.
    pub const DEFAULT: Spec = Spec {
        name: "",
        arity: 0,
        flags: Flags::of(&[]),
        keys: &[],
        keys_hook: None,
        acl: Categories::of(&[]),
        group: "",
        since: "",
        summary: "",
        complexity: "",
        tips: &[],
        traits: Traits::of(&[]),
        run: Run::Container,
        subcommands: &[],
    };

    /// Its handler (EXEC has none of its own; a container neither).
    pub fn handler(&self) -> Option<Handler> {
        match self.run {
            Run::Handler(handler) | Run::Script(handler) => Some(handler),
            Run::Exec | Run::Container => None,
        }
    }
}

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

/// Whether `args`, outside MULTI, is a command CLIENT PAUSE WRITE
/// holds: one that writes or may (`write`, `may_replicate`: EVAL,
/// PUBLISH, PFCOUNT …), except scripts and functions that declare
/// `no-writes` (Redis 7 lets them run). Unknown commands and wrong
/// argument counts are not held (they fail at once, as in Redis);
/// EXEC is the connection's to decide (`Multi::may_write`).
pub fn held_by_write_pause(node: &Node, args: &[Bytes]) -> bool {
    let Some(id) = node.commands.resolve(args) else {
        return false;
    };
    let spec = node.commands.specs[id];
    if !spec.arity_ok(args.len()) || !(spec.has(flag::WRITE) || spec.has(flag::MAY_REPLICATE)) {
        return false;
    }
    // EVAL, EVALSHA and FCALL have at least 3 arguments here (arity).
    let name = &args[0];
    if is(name, "EVAL") || is(name, "EVALSHA") {
        return !scripting::declares_no_writes(node, &args[1], is(name, "EVALSHA"));
    }
    if is(name, "FCALL") {
        return !functions::declares_no_writes(node, &args[1]);
    }
    true
}

/// A node as dispatch serves it: the server's state and the command table.
/// The table is not part of [`Server`] because its rows name handlers,
/// whose context names the server: what lies below dispatch (the ACL,
/// replication's state, persistence) reaches the state and, where it
/// must read the table, takes it as an argument. Derefs to the state, so
/// `node.keyspace` reads as `server.keyspace` did.
pub struct Node {
    pub server: Server,
    pub commands: CommandTable,
    /// Itself, for the threads a command starts (REPLICAOF's link).
    me: std::sync::Weak<Node>,
}

impl Node {
    pub fn new(server: Server, commands: CommandTable) -> std::sync::Arc<Node> {
        std::sync::Arc::new_cyclic(|me| Node {
            server,
            commands,
            me: me.clone(),
        })
    }

    /// A counted reference to this node (it lives in an `Arc` from
    /// [`Node::new`] on).
    pub fn arc(&self) -> std::sync::Arc<Node> {
        self.me
            .upgrade()
            .expect("a node lives in the Arc it was made in")
    }
}

impl std::ops::Deref for Node {
    type Target = Server;

    fn deref(&self) -> &Server {
        &self.server
    }
}

/// What a handler works with. `'s` is the server's lifetime (what a
/// transaction's locks borrow, kept across its commands); `'a` one
/// command's.
pub struct Ctx<'a, 's> {
    pub server: &'s Node,
    pub session: &'a mut Session,
    pub out: ReplyWriter<'a>,
    pub config: &'a Config,
    pub stats: &'a ThreadStats,
    pub now_ms: u64,
    /// The shards of the command's declared keys, locked by dispatch
    /// before the handler runs and committed after it: a handler reaches
    /// a key through `ctx.keys.shard(key)` and never locks anything.
    pub keys: Locked<'s>,
    /// What a command committed itself before dispatch commits its keys
    /// (FLUSHALL and SWAPDB lock every shard; LCS unlocks early): its
    /// reply waits for that LSN like for any other.
    pub committed: Commit,
    /// The declared keys, hashed once by dispatch: [`Ctx::key`] finds an
    /// argument among them by address and length rather than hash it again.
    pub declared: SmallVec<[KeyRef<'a>; DECLARED_KEYS_INLINE]>,
}

/// Declared keys kept without allocating (most commands have one).
const DECLARED_KEYS_INLINE: usize = 4;

impl<'a, 's> Ctx<'a, 's> {
    pub fn keyspace(&self) -> &'s Keyspace {
        &self.server.keyspace
    }

    pub fn key<'k>(&self, bytes: &'k [u8]) -> KeyRef<'k> {
        match self.declared.iter().find(|k| std::ptr::eq(k.bytes, bytes)) {
            // The same argument (same address and length: same bytes).
            Some(declared) => KeyRef {
                bytes,
                hash: declared.hash,
            },
            None => self.server.keyspace.key(bytes),
        }
    }

    /// Publishes keyspace notification `event` of `class` (`notify`
    /// module) on `key` of the current database, if configured.
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.notify_in(self.session.db, class, event, key);
    }

    /// [`Ctx::notify`] for a change to a collection, followed by `del`
    /// when the change left it empty (and so deleted it), as Redis does.
    pub fn notify_write(&mut self, class: u32, event: &str, key: &[u8]) {
        let flags = self.config.notify_keyspace_events;
        if !crate::notify::wanted(flags, class | crate::notify::GENERIC) {
            return;
        }
        self.notify(class, event, key);
        if crate::notify::wanted(flags, crate::notify::GENERIC) {
            let (db, now, key_ref) = (self.db(), self.now_ms, self.key(key));
            if self.keys.shard(key_ref).peek(db, key_ref, now).is_none() {
                self.notify(crate::notify::GENERIC, "del", key);
            }
        }
    }

    /// [`Ctx::notify`] for a key of database `db`.
    pub fn notify_in(&self, db: usize, class: u32, event: &str, key: &[u8]) {
        let flags = self.config.notify_keyspace_events;
        if crate::notify::wanted(flags, class) {
            let limit = self.config.output_limit_pubsub;
            crate::notify::publish(&self.server.pubsub, limit, flags, event, db, key);
        }
    }

    pub fn db(&self) -> usize {
        self.session.db
    }

    /// Notes what a command committed itself (see [`Ctx::committed`]).
    pub fn committed(&mut self, commit: Commit) {
        self.committed.absorb(commit);
    }
}

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
    if let [
        keyspec::KeySpec {
            begin: keyspec::BeginSearch::Index(1),
            find:
                keyspec::FindKeys::Range {
                    last_key: 0,
                    step: 1,
                    limit: 0,
                },
            ..
        },
    ] = spec.keys
        && args.len() > 1
    {
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

/// What [`dispatch`] did with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatched {
    /// It ran; its reply waits for this LSN, if it logged anything.
    Ran(Option<u64>),
    /// A value it reads went cold since the connection checked: nothing
    /// ran and nothing was replied; read the value first and run it again.
    Cold,
}

/// Runs one command and writes its reply to `out`. With `defer_cold`, a
/// command whose value went cold after the connection looked is not run
/// under its locks (which would read the disk there): [`Dispatched::Cold`].
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
    defer_cold: bool,
) -> Dispatched {
    let dispatched = dispatch_one(
        server, session, out, config, stats, now_ms, args, defer_cold,
    );
    if !session.bcast_pending.is_empty() {
        tracking::broadcast_pending(server, session, config);
    }
    dispatched
}

/// [`dispatch`] but for what BCAST tracking clients are told after.
#[allow(clippy::too_many_arguments)]
fn dispatch_one(
    server: &Node,
    session: &mut Session,
    out: &mut bytes::BytesMut,
    config: &Config,
    stats: &ThreadStats,
    now_ms: u64,
    args: &[Bytes],
    defer_cold: bool,
) -> Dispatched {
    if session.watch.is_some() {
        transactions::check_feed(session);
    }
    let admitted = admit(server, session, out, config, stats, now_ms, args);
    if std::mem::take(&mut session.pushes_first)
        && let Some(mailbox) = session.client.existing_mailbox()
    {
        mailbox.drain_into(out);
    }
    let Some(id) = admitted else {
        // A command refused while queuing fails the whole transaction;
        // EXEC refused ends it (`admit` answered EXECABORT).
        if let Some(multi) = &mut session.multi {
            multi.dirty = true;
            if server.commands.is_exec(&args[0]) {
                transactions::end(session);
            }
        }
        return Dispatched::Ran(None);
    };
    if session.multi.is_some() && !server.commands.gates(id).has(Gates::RUNS_AT_ONCE) {
        transactions::queue(server, session, out, config, id, args);
        return Dispatched::Ran(None);
    }
    if matches!(server.commands.specs[id].run, Run::Exec) {
        let ran = transactions::run_exec(server, session, out, config, stats, now_ms, defer_cold);
        // After the commands it ran, as Redis shows it (not when it
        // waits for cold values: it runs again then).
        if server.monitors.active() && !matches!(ran, Dispatched::Cold) {
            let from = session.client.monitor_source();
            server.monitors.feed(session.db, Some(&from), args, config);
        }
        return ran;
    }
    let spec = server.commands.specs[id];
    let declared = declared_keys(spec, args, &server.keyspace);
    let mut keys = if server.commands.gates(id).has(Gates::PINNED) {
        server.keyspace.lock_pinned(&declared, false)
    } else {
        server.keyspace.lock_keys(&declared)
    };
    if defer_cold
        && !declared.is_empty()
        && server.keyspace.tier().cold_keys() > 0
        && reads_cold(server, session.db, now_ms, args, &declared, &mut keys)
    {
        // Unlocks; what it logged (a lazily expired key) is no reply's.
        keys.commit();
        return Dispatched::Cold;
    }
    let (keys, mut committed) = call(
        server, session, out, config, stats, now_ms, id, args, keys, declared,
    );
    committed.absorb(keys.commit());
    count_changes(stats, &committed);
    Dispatched::Ran(committed.lsn)
}

/// Counts what a command (or transaction) committed as changes to the
/// dataset (rdb_changes_since_last_save): no handler keeps count itself.
pub(crate) fn count_changes(stats: &ThreadStats, committed: &Commit) {
    if !committed.changed.is_empty() {
        bump(&stats.changes, committed.changed.len() as u64);
    }
}

/// Whether a value one of `args`' keys reads is on disk only (see
/// [`dispatch`]); `declared` spares hashing the keys again.
pub(crate) fn reads_cold(
    server: &Node,
    db: usize,
    now_ms: u64,
    args: &[Bytes],
    declared: &[KeyRef],
    keys: &mut Locked,
) -> bool {
    server.commands.value_keys(args).into_iter().any(|bytes| {
        let key = declared
            .iter()
            .find(|k| std::ptr::eq(k.bytes, bytes))
            .map_or_else(
                || server.keyspace.key(bytes),
                |k| KeyRef {
                    bytes,
                    hash: k.hash,
                },
            );
        keys.shard(key)
            .peek(db, key, now_ms)
            .is_some_and(|entry| entry.is_cold())
    })
}

/// Checks a command before it runs (existence, arity, authentication,
/// loading, a failed log, memory) and answers the error if it may not;
/// returns its table index if it may.
fn admit(
    server: &Node,
    session: &mut Session,
    out: &mut bytes::BytesMut,
    config: &Config,
    stats: &ThreadStats,
    now_ms: u64,
    args: &[Bytes],
) -> Option<usize> {
    let id = match resolve(server, session, config, now_ms, args) {
        Ok(id) => id,
        Err(message) => {
            reject(
                server,
                &mut ReplyWriter::new(out, session.protocol),
                &message,
            );
            return None;
        }
    };
    let mut admission = Admission {
        server,
        session,
        config,
        now_ms,
        args,
        id,
    };
    let Some(refused) = GATES.iter().find_map(|gate| gate(&mut admission)) else {
        return Some(id);
    };
    bump(&stats.commands[id].rejected, 1);
    // EXEC refused inside MULTI ends the transaction with EXECABORT
    // (`dispatch_one` ends it), as Redis words it.
    let exec = matches!(server.commands.specs[id].run, Run::Exec);
    let message = match exec && session.multi.is_some() {
        true => format!("EXECABORT Transaction discarded because of: {refused}").into(),
        false => refused,
    };
    reject(
        server,
        &mut ReplyWriter::new(out, session.protocol),
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
            Err(debug_error(args).into())
        }
        None if id == table.cluster_id
            && cluster::DISABLED_SUBCOMMANDS
                .iter()
                .any(|name| args[1].eq_ignore_ascii_case(name.as_bytes())) =>
        {
            Err(cluster::ERR_CLUSTER_DISABLED.into())
        }
        None => Err(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            lossy(&args[1], 128),
            table.specs[id].name.to_ascii_uppercase()
        )
        .into()),
    }
}

/// DEBUG is one command in Redis, not a container: an unknown subcommand
/// and a wrong argument count get one message.
fn debug_error(args: &[Bytes]) -> String {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
        lossy(&args[1], 128)
    )
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
        true => debug_error(a.args).into(),
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
    let writes = gates.has(Gates::WRITE)
        || queue.is_some_and(|multi| transactions::may_write(multi, a.server));
    if !replica && writes {
        let good = replication.good_replicas(a.now_ms, settings.min_replicas_max_lag_s);
        if good < settings.min_replicas_to_write {
            return Some("NOREPLICAS Not enough good replicas to write.".into());
        }
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
    let result = strata_engine::access::with_no_touch(no_touch, || handler(&mut ctx, args));
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
    let threshold = config.slowlog_log_slower_than;
    if threshold >= 0
        && micros >= threshold as u64
        && !ctx.session.in_script
        && !spec.has(flag::SKIP_SLOWLOG)
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

/// Argument text for error messages: lossy UTF-8, at most `max` bytes.
pub fn lossy(arg: &[u8], max: usize) -> Cow<'_, str> {
    String::from_utf8_lossy(&arg[..arg.len().min(max)])
}

/// Parses a strict 64-bit integer argument, as Redis' `getLongLongFromObject`.
pub fn parse_i64(arg: &[u8]) -> Result<i64, CmdError> {
    strata_engine::value::parse_canonical_i64(arg).ok_or(CmdError::from(ERR_NOT_INTEGER))
}

/// A SCAN-family call's cursor and options: MATCH, COUNT, and the
/// options only some members take (`extra`: TYPE for SCAN; NOVALUES for
/// HSCAN, which takes no value).
pub struct ScanArgs<'a> {
    pub cursor: u64,
    /// None for no pattern or `*`.
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub type_filter: Option<&'a [u8]>,
    pub no_values: bool,
}

impl<'a> ScanArgs<'a> {
    /// Parses `cursor [MATCH p] [COUNT n] [TYPE t] [NOVALUES]` from
    /// `args[at..]`, accepting TYPE only with `with_type` and NOVALUES
    /// only with `with_novalues`, with Redis' errors.
    pub fn parse(
        args: &'a [Bytes],
        at: usize,
        with_type: bool,
        with_novalues: bool,
    ) -> Result<ScanArgs<'a>, CmdError> {
        let cursor = std::str::from_utf8(&args[at])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(CmdError::from("ERR invalid cursor"))?;
        let mut parsed = ScanArgs {
            cursor,
            pattern: None,
            count: 10,
            type_filter: None,
            no_values: false,
        };
        let mut i = at + 1;
        while i < args.len() {
            if with_novalues && is(&args[i], "NOVALUES") {
                parsed.no_values = true;
                i += 1;
                continue;
            }
            let Some(value) = args.get(i + 1) else {
                return Err(ERR_SYNTAX.into());
            };
            if is(&args[i], "MATCH") {
                parsed.pattern = Some(&value[..]).filter(|p| *p != b"*");
            } else if is(&args[i], "COUNT") {
                let n = parse_i64(value)?;
                if n < 1 {
                    return Err(ERR_SYNTAX.into());
                }
                parsed.count = n as usize;
            } else if with_type && is(&args[i], "TYPE") {
                parsed.type_filter = Some(value);
            } else {
                return Err(ERR_SYNTAX.into());
            }
            i += 2;
        }
        Ok(parsed)
    }

    /// Whether `name` passes MATCH.
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern
            .is_none_or(|p| strata_engine::glob::matches(p, name, false))
    }
}

/// One call's share of a SCAN-family iteration over a hash table
/// encoding (HSCAN, SSCAN, ZSCAN). The cursor is a position in the order
/// of a fixed hash of the names (independent of the table's layout, so a
/// collection growing, shrinking or reloaded between calls loses nothing:
/// every name present for the whole iteration is returned at least once);
/// a call returns the names whose position falls in the next slice. A
/// slice holds at least 1/[`SCAN_PASSES_MAX`] of the collection, so a full
/// iteration costs a bounded number of passes whatever COUNT says (COUNT
/// is a hint in Redis too).
pub struct ScanSlice {
    start: u128,
    end: u128,
}

/// See [`ScanSlice`].
pub const SCAN_PASSES_MAX: usize = 64;

impl ScanSlice {
    pub fn new(cursor: u64, count: usize, len: usize) -> ScanSlice {
        let slice = count.max(len / SCAN_PASSES_MAX + 1) as u128;
        let width = ((1u128 << 64) * slice / len.max(1) as u128).max(1);
        ScanSlice {
            start: cursor as u128,
            end: (cursor as u128 + width).min(1u128 << 64),
        }
    }

    /// Whether the name at `position` belongs to this call.
    pub fn contains(&self, position: u64) -> bool {
        (self.start..self.end).contains(&(position as u128))
    }

    /// The cursor to return (0: the iteration is complete).
    pub fn next_cursor(&self) -> u64 {
        if self.end >= 1u128 << 64 {
            0
        } else {
            self.end as u64
        }
    }
}

/// Case-insensitive comparison of an argument with an option name.
pub fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

/// Writes a stored string value as a bulk reply.
pub fn write_value(out: &mut ReplyWriter, value: strata_engine::ValueRef) {
    out.bulk(value.as_bytes());
}

/// A blocking command's timeout (seconds, fractions allowed, as Redis'
/// `getTimeoutFromObjectOrReply`) as a deadline in Unix ms from `now_ms`;
/// `None` (timeout 0) waits for ever.
pub fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<Option<u64>, CmdError> {
    const ERR_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
    let text = std::str::from_utf8(arg).map_err(|_| CmdError::from(ERR_NOT_FLOAT))?;
    let seconds: f64 = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        // strtold reads hexadecimal too.
        Some(hex) => u128::from_str_radix(hex, 16).map(|n| n as f64).ok(),
        None if text.starts_with(|c: char| c.is_ascii_whitespace()) => None,
        None => text.parse().ok(),
    }
    .filter(|s: &f64| !s.is_nan())
    .ok_or(CmdError::from(ERR_NOT_FLOAT))?;
    let ms = (seconds * 1000.0).ceil();
    // Redis converts to a 64-bit integer without a range check, and x86
    // gives the most negative one for anything out of range.
    if ms < 0.0 || ms >= i64::MAX as f64 {
        return Err("ERR timeout is negative".into());
    }
    let ms = ms as u64;
    if ms == 0 {
        return Ok(None);
    }
    if ms > i64::MAX as u64 - now_ms {
        return Err("ERR timeout is out of range".into());
    }
    Ok(Some(now_ms + ms))
}

/// The arguments of LMPOP and ZMPOP (and their blocking forms) from
/// `args[at..]`: `numkeys key… <side> [COUNT count]`, where `side` parses
/// the LEFT/RIGHT or MIN/MAX word; with Redis' errors.
pub fn mpop_args<T>(
    args: &[Bytes],
    at: usize,
    side: impl Fn(&[u8]) -> Option<T>,
) -> Result<(&[Bytes], T, usize), CmdError> {
    const ERR_NUMKEYS: &str = "ERR numkeys should be greater than 0";
    const ERR_COUNT: &str = "ERR count should be greater than 0";
    let numkeys = parse_i64(&args[at]).map_err(|_| CmdError::from(ERR_NUMKEYS))?;
    if numkeys <= 0 {
        return Err(ERR_NUMKEYS.into());
    }
    let numkeys = numkeys as usize;
    let Some(rest) = args.get(at + 1 + numkeys..).filter(|rest| !rest.is_empty()) else {
        return Err(ERR_SYNTAX.into());
    };
    let side = side(&rest[0]).ok_or(CmdError::from(ERR_SYNTAX))?;
    let count = match &rest[1..] {
        [] => 1,
        [name, value] if is(name, "count") => {
            let n = parse_i64(value).map_err(|_| CmdError::from(ERR_COUNT))?;
            if n <= 0 {
                return Err(ERR_COUNT.into());
            }
            n as usize
        }
        _ => return Err(ERR_SYNTAX.into()),
    };
    Ok((&args[at + 1..at + 1 + numkeys], side, count))
}

impl Ctx<'_, '_> {
    /// Blocks the client on `keys` (a blocking command that found nothing
    /// and replied nothing): the connection runs the command again when
    /// one of them changes, until `deadline_ms`.
    pub fn block(&mut self, keys: &[Bytes], deadline_ms: Option<u64>, timeout_reply: TimeoutReply) {
        self.session.block = Some(Block {
            keys: keys.to_vec(),
            deadline_ms,
            timeout_reply,
            rerun: None,
            on_nokey: false,
            on_ack: false,
        });
    }

    /// [`Ctx::block`], running `rerun` instead of the command when woken
    /// (XREAD's `$` becomes the ID it stood for when the command blocked).
    pub fn block_as(
        &mut self,
        keys: &[Bytes],
        deadline_ms: Option<u64>,
        timeout_reply: TimeoutReply,
        rerun: Vec<Bytes>,
    ) {
        self.block(keys, deadline_ms, timeout_reply);
        if let Some(block) = &mut self.session.block {
            block.rerun = Some(rerun);
        }
    }
}
