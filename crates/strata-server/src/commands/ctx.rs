//! What a command handler works with: its context ([`Ctx`]) on the
//! [`Node`] it runs on, the error and result types, the run kinds of the
//! table's rows, and the small argument helpers every family shares.
//! A leaf of the commands layer: the families, dispatch and the threads
//! that run commands (the replica's link) name it; it names no family
//! and no part of dispatch.

use std::borrow::Cow;

use bytes::Bytes;
use smallvec::SmallVec;
use strata_engine::keyspace::commit::Commit;
use strata_engine::keyspace::shards::Locked;
use strata_engine::tiering::fetch::{ColdFetch, ReadResult};
use strata_engine::types::collection::Typed;
use strata_engine::{KeyRef, Keyspace};
use strata_resp::ReplyWriter;

use super::catalog;
use super::spec::{Categories, Flags, Traits};
use crate::config::Config;
use crate::net::session::{Block, Session, TimeoutReply};
use crate::observe::stats::ThreadStats;
use crate::server::Server;

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
impl From<strata_engine::keyspace::shards::ColdReadError> for CmdError {
    fn from(error: strata_engine::keyspace::shards::ColdReadError) -> Self {
        CmdError(Cow::Owned(format!(
            "ERR could not read the value of '{}' from disk: {}",
            lossy(&error.key, 128),
            error.why
        )))
    }
}

impl From<strata_engine::keyspace::shards::GetError> for CmdError {
    fn from(error: strata_engine::keyspace::shards::GetError) -> Self {
        match error {
            strata_engine::keyspace::shards::GetError::WrongType => CmdError::from(ERR_WRONGTYPE),
            strata_engine::keyspace::shards::GetError::ColdRead(error) => error.into(),
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

/// A node as dispatch serves it: the server's state and the command table.
/// The table is not part of [`Server`] because its rows name handlers,
/// whose context names the server: what lies below dispatch (the ACL,
/// replication's state, persistence) reaches the state and, where it
/// must read the table, takes it as an argument. Derefs to the state, so
/// `node.keyspace` reads as `server.keyspace` did.
pub struct Node {
    pub server: Server,
    pub commands: CommandTable,
    /// Runs one command as a client's: dispatch, given at start-up to
    /// what runs commands from below it (the replica's link).
    pub dispatch: DispatchFn,
    /// Itself, for the threads a command starts (REPLICAOF's link).
    me: std::sync::Weak<Node>,
}

impl Node {
    pub fn new(
        server: Server,
        commands: CommandTable,
        dispatch: DispatchFn,
    ) -> std::sync::Arc<Node> {
        std::sync::Arc::new_cyclic(|me| Node {
            server,
            commands,
            dispatch,
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
pub(crate) const DECLARED_KEYS_INLINE: usize = 4;

impl<'a, 's> Ctx<'a, 's> {
    pub fn keyspace(&self) -> &'s Keyspace {
        &self.server.keyspace
    }

    /// While a blocked command runs again: whether a client that blocked
    /// on `key` before this one still waits there. Its turn comes first
    /// (Redis serves a key's clients in the order they blocked), so the
    /// command treats the key as empty.
    pub fn waits_behind(&self, key: &[u8]) -> bool {
        match &self.session.block_waiter {
            Some(waiter) if self.session.block_retry => {
                !(self.server.blocking).first_in_line(self.session.db, key, waiter)
            }
            _ => false,
        }
    }

    /// `lazyfree-lazy-server-del`: deletions the server makes for a
    /// command (SPOP of a whole set, RESTORE of an expired value over a
    /// key) go to replicas as UNLINK rather than DEL, as in Redis.
    pub fn lazy_server_del(&self) -> bool {
        (self.config.accepted.get("lazyfree-lazy-server-del"))
            .is_some_and(|value| value.eq_ignore_ascii_case("yes"))
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
        if !crate::events::notify::wanted(flags, class | crate::events::notify::GENERIC) {
            return;
        }
        self.notify(class, event, key);
        if crate::events::notify::wanted(flags, crate::events::notify::GENERIC) {
            let (db, now, key_ref) = (self.db(), self.now_ms, self.key(key));
            if self.keys.shard(key_ref).peek(db, key_ref, now).is_none() {
                self.notify(crate::events::notify::GENERIC, "del", key);
            }
        }
    }

    /// [`Ctx::notify`] for a key of database `db`.
    pub fn notify_in(&self, db: usize, class: u32, event: &str, key: &[u8]) {
        let flags = self.config.notify_keyspace_events;
        if crate::events::notify::wanted(flags, class) {
            let limit = self.config.output_limit_pubsub;
            crate::events::notify::publish(&self.server.pubsub, limit, flags, event, db, key);
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

/// What dispatch (`crate::commands::dispatch`) did with a command.
#[derive(Debug)]
pub enum Dispatched {
    /// It ran; its reply waits for this LSN, if it logged anything.
    Ran(Option<u64>),
    /// A value it reads is on disk only: nothing ran and nothing was
    /// replied. With the command admitted and its values noted under its
    /// locks (`Some`), the caller reads them and hands them back
    /// ([`ColdValues::Fetched`]); EXEC (`None`) is dispatched again once
    /// its commands' values are read.
    Cold(Option<Box<ColdCommand>>),
}

/// A command admitted whose values must be read first.
#[derive(Debug)]
pub struct ColdCommand {
    /// Its index in the table.
    pub id: usize,
    /// The values it reads that are on disk only.
    pub fetch: ColdFetch,
}

/// What dispatch does about values on disk a command reads.
pub enum ColdValues {
    /// Finds them under the locks and does not run the command
    /// ([`Dispatched::Cold`]): no disk read under a lock.
    Defer,
    /// Runs it, reading under the lock what is still on disk (a command
    /// must make progress).
    ReadUnderLock,
    /// They were read for this admitted command: it is not admitted
    /// again; they go into their entries under its locks, it runs, and
    /// those only lent to it leave RAM again before it unlocks.
    Fetched(Box<(ColdCommand, Vec<ReadResult>)>),
}

/// Argument text for error messages: lossy UTF-8, at most `max` bytes.
pub fn lossy(arg: &[u8], max: usize) -> Cow<'_, str> {
    String::from_utf8_lossy(&arg[..arg.len().min(max)])
}

/// Parses a strict 64-bit integer argument, as Redis' `getLongLongFromObject`.
pub fn parse_i64(arg: &[u8]) -> Result<i64, CmdError> {
    strata_engine::types::value::parse_canonical_i64(arg).ok_or(CmdError::from(ERR_NOT_INTEGER))
}

/// An integer a command may negate: any but -9223372036854775808, which
/// Redis refuses with its range error (`getRangeLongFromObjectOrReply`
/// from -LONG_MAX to LONG_MAX: HRANDFIELD, SRANDMEMBER and ZRANDMEMBER's
/// counts, LPOS' RANK).
pub fn parse_negatable_i64(arg: &[u8]) -> Result<i64, CmdError> {
    match parse_i64(arg)? {
        i64::MIN => Err(format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )
        .into()),
        n => Ok(n),
    }
}

/// A SCAN-family cursor.
fn parse_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(CmdError::from("ERR invalid cursor"))
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
        let cursor = parse_cursor(&args[at])?;
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

    /// HSCAN, SSCAN and ZSCAN (`key cursor …` in `args[1..]`): as
    /// [`ScanArgs::parse`], in Redis' order of checks: the cursor, then
    /// the key (another type is WRONGTYPE; a missing key answers an empty
    /// scan, `Ok(None)`, whatever the options say), then the options.
    pub fn parse_for_key<C: Typed>(
        ctx: &mut Ctx,
        args: &'a [Bytes],
        with_novalues: bool,
    ) -> Result<Option<ScanArgs<'a>>, CmdError> {
        parse_cursor(&args[2])?;
        let (db, key, now) = (ctx.db(), ctx.key(&args[1]), ctx.now_ms);
        if ctx.keys.shard(key).get_as::<C>(db, key, now)?.is_none() {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            ctx.out.array(0);
            return Ok(None);
        }
        ScanArgs::parse(args, 2, false, with_novalues).map(Some)
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
    // Redis 7.4's checks (7.0 converted without one, and called what
    // overflowed negative).
    if ms >= i64::MAX as f64 {
        return Err("ERR timeout is out of range".into());
    }
    if ms < 0.0 {
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

/// Runs one command as a client's (dispatch): what a thread below the
/// dispatcher that runs commands (the replica's link) is given by
/// [`Node`], since it cannot name dispatch itself.
pub type DispatchFn = fn(
    &Node,
    &mut Session,
    &mut bytes::BytesMut,
    &Config,
    &ThreadStats,
    u64,
    &[Bytes],
    ColdValues,
) -> Dispatched;

/// Writes a HELP reply: an array of status lines.
pub fn help_lines(ctx: &mut Ctx, command: &str, lines: &[&str]) {
    ctx.out.array(lines.len() + 3);
    ctx.out.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in lines {
        ctx.out.simple(line);
    }
    ctx.out.simple("HELP");
    ctx.out.simple("    Print this help.");
}

/// Parses a database index argument with Redis' two error texts.
pub fn parse_db(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let db = parse_i64(arg).map_err(|_| CmdError::from(ERR_NOT_INTEGER))?;
    if db < 0 || db as usize >= ctx.keyspace().db_count() {
        return Err(ERR_DB_RANGE.into());
    }
    Ok(db as usize)
}
