//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: running Lua scripts
//! atomically under one pinned lock set (see `crate::scripting` for the
//! VM, the sandbox, the conversions and the lock rules). [`run_script`]
//! is also how FCALL runs a function (`commands::functions`).

use super::spec::{flag, traits as trait_};
use crate::commands::Node;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mlua::{Lua, Value, Variadic};
use strata_engine::KeyRef;
use strata_engine::keyspace::shards::key_slot;
use strata_resp::ReplyWriter;

use super::ctx::help_lines;
use super::transactions::answer_blocked;
use super::{CmdError, CmdResult, Ctx, Gates, call, declared_keys_known, is, parse_i64};
use crate::functions::Libraries;
use crate::observe::stats::bump;
use crate::scripting::{Running, lua_arg, lua_error_text, parse_shebang, protocol_of, with_vm};

/// How long a script that has written waits for the shard of a key it did
/// not declare before the call fails (see `crate::scripting`).
const UNDECLARED_LOCK_WAIT: Duration = Duration::from_secs(1);
/// The error that unwinds a script to be run again with every shard.
const RESTARTING: &str = "ERR strata: the script runs again with every shard locked";

/// What one run of a script ended with.
enum Ran {
    /// Its result written, or its error reply's text (and whether that
    /// error is counted already).
    Done(crate::scripting::stack::Ended),
    /// It met a busy shard before writing anything, or it needed every
    /// shard in an earlier run: run it (again) with every shard locked.
    Restart,
}

/// `redis.call` / `redis.pcall` for one run.
struct Runner<'c, 'a, 's> {
    /// The last call's reply or error text, read by [`raw_call`] once the
    /// call's own values are gone (`crate::scripting::stack`).
    reply: BytesMut,
    error: String,
    ctx: &'c mut Ctx<'a, 's>,
    read_only: bool,
    /// `#!lua flags=allow-oom`: writes are not refused when memory is full.
    allow_oom: bool,
    /// Inside EXEC: the transaction may have written, so never restart.
    in_transaction: bool,
    restart: bool,
    /// The run needed every shard (a database-wide command, INFO): the VM
    /// notes it, and later runs of the script take every shard from the
    /// start rather than escalate half way. (A key it did not declare
    /// only restarts the run that met it busy: most such runs find it
    /// free, and every shard is a high price for the rest.)
    every_shard: bool,
    /// `redis.setresp`.
    resp: u8,
    running: Arc<Running>,
    /// Cluster mode: the slot the script's keys are in (its declared
    /// keys', else the first key a command of it named).
    cluster_slot: Option<u16>,
}

fn error_table(lua: &Lua, text: &str) -> mlua::Result<Value> {
    let table = lua.create_table()?;
    table.set("err", text)?;
    Ok(Value::Table(table))
}

/// The buffers a run writes into, kept for the thread's next run (a small
/// EVALSHA allocated and freed all three each time): the script's result,
/// and the last `redis.call`'s reply and error text.
#[derive(Default)]
struct Scratch {
    result: BytesMut,
    reply: BytesMut,
    error: String,
}

/// Larger scratch buffers are not kept (one big reply must not pin its
/// memory to the thread).
const SCRATCH_RETAINED_BYTES_MAX: usize = 64 << 10;

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

impl Scratch {
    fn take() -> Scratch {
        SCRATCH.with(|scratch| std::mem::take(&mut *scratch.borrow_mut()))
    }

    /// Keeps the buffers for the next run, emptied, unless they grew large.
    fn keep(mut self) {
        let small = self.result.capacity() + self.reply.capacity() + self.error.capacity()
            <= SCRATCH_RETAINED_BYTES_MAX;
        if small {
            self.result.clear();
            self.reply.clear();
            self.error.clear();
            SCRATCH.with(|scratch| *scratch.borrow_mut() = self);
        }
    }
}

/// What a `redis.call` came to: the runner's `reply` (an error reply in
/// it was counted by the command), or an error table of the runner's
/// `error` text (`counted`: already in the error statistics).
enum Called {
    Reply,
    Error { counted: bool },
}

thread_local! {
    /// The [`Runner`] of the run in progress on this thread (null between
    /// runs), for the VM's `redis.call`, `redis.pcall` and
    /// `private.setresp`. They are made once per VM rather than per run: a
    /// scoped pair of callbacks cost about a tenth of an EVALSHA.
    static RUNNER: Cell<*mut ()> = const { Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` (the script) with `runner` as this thread's current run.
fn with_runner<R>(runner: &mut Runner, f: impl FnOnce() -> R) -> R {
    struct Reset(*mut ());
    impl Drop for Reset {
        fn drop(&mut self) {
            RUNNER.with(|cell| cell.set(self.0));
        }
    }
    let previous = RUNNER.with(|cell| cell.replace((runner as *mut Runner).cast()));
    let _reset = Reset(previous);
    f()
}

/// Calls `f` with the current run's [`Runner`], or answers `None` when no
/// script runs on this thread (a library's top level called a saved
/// `redis.call` while loading).
fn current_runner<R>(f: impl FnOnce(&mut Runner) -> R) -> Option<R> {
    let pointer = RUNNER.with(Cell::get);
    if pointer.is_null() {
        return None;
    }
    // SAFETY: the pointer is set by `with_runner` from a `&mut Runner`
    // that outlives the call and that nothing else touches while the
    // script runs; it is reset before `with_runner` returns, even on a
    // panic. Commands a script calls cannot start another script
    // (EVAL, FCALL and SCRIPT are `noscript`), and `redis.call` and
    // `redis.setresp` never run inside each other, so this is the only
    // reference in use.
    let runner = unsafe { &mut *pointer.cast::<Runner<'static, 'static, 'static>>() };
    Some(f(runner))
}

const NOT_IN_A_RUN: &str = "ERR redis.call is only available while a script runs";

/// Puts `redis.call`'s and `redis.setresp`'s implementations into the
/// VM's private table.
fn install_runner(lua: &Lua, private: &mlua::Table) -> mlua::Result<()> {
    // SAFETY: both keep Lua's C function protocol (module docs of
    // `crate::scripting::stack`).
    let (call, pcall) = unsafe {
        (
            lua.create_c_function(redis_call)?,
            lua.create_c_function(redis_pcall)?,
        )
    };
    let redis: mlua::Table = lua.globals().raw_get("redis")?;
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    let setresp = lua.create_function(|_, version: i64| {
        if version != 2 && version != 3 {
            return Err(mlua::Error::RuntimeError(
                "RESP version must be 2 or 3.".into(),
            ));
        }
        current_runner(|runner| runner.resp = version as u8)
            .ok_or_else(|| mlua::Error::RuntimeError(NOT_IN_A_RUN.into()))
    })?;
    let acl_check_cmd = lua.create_function(|lua, args: Variadic<Value>| {
        current_runner(|runner| runner.acl_check_cmd(lua, args))
            .unwrap_or_else(|| Err(mlua::Error::RuntimeError(NOT_IN_A_RUN.into())))
    })?;
    private.raw_set("acl_check_cmd", acl_check_cmd)?;
    private.raw_set("setresp", setresp)
}

/// `redis.call`: runs a command and returns its reply, raising an error
/// reply (or a refusal) as its error table.
unsafe extern "C-unwind" fn redis_call(state: *mut mlua::lua_State) -> std::ffi::c_int {
    // SAFETY: Lua calls this with the call's arguments on `state`.
    unsafe { raw_call(state, true) }
}

/// `redis.pcall`: as `redis.call`, returning error tables.
unsafe extern "C-unwind" fn redis_pcall(state: *mut mlua::lua_State) -> std::ffi::c_int {
    // SAFETY: Lua calls this with the call's arguments on `state`.
    unsafe { raw_call(state, false) }
}

/// `redis.call` and `redis.pcall` (`raise`: an error table is raised
/// rather than returned), plain Lua C functions (see `crate::scripting::stack`).
/// The arguments are read and the command runs in [`call_from_stack`],
/// whose owned values are gone before anything that may raise a Lua
/// error is pushed.
///
/// # Safety
/// `state` is the state of a C function called from Lua.
unsafe fn raw_call(state: *mut mlua::lua_State, raise: bool) -> std::ffi::c_int {
    // SAFETY: Lua calls this with the call's arguments on `state`.
    let Some(called) = crate::scripting::catch_panic(|| unsafe { call_from_stack(state) }) else {
        // SAFETY: inside the run's protected call; nothing owned here.
        unsafe { crate::scripting::raise_panicked(state) }
    };
    // What the run's runner holds, borrowed: nothing owned lives in this
    // frame from here on.
    let runner = RUNNER
        .with(Cell::get)
        .cast::<Runner<'static, 'static, 'static>>();
    // SAFETY: `call_from_stack` answered `Some` only with a runner set
    // (see `current_runner`); the Lua calls below run in the script's
    // protected call, with the arguments popped first.
    unsafe {
        mlua::ffi::lua_settop(state, 0);
        let failed = match called {
            None => {
                crate::scripting::stack::push_error_table(state, NOT_IN_A_RUN.as_bytes(), false);
                true
            }
            Some(Called::Error { counted }) => {
                crate::scripting::stack::push_error_table(
                    state,
                    (*runner).error.as_bytes(),
                    counted,
                );
                true
            }
            Some(Called::Reply) => {
                let reply = &(*runner).reply;
                if let Err(text) = crate::scripting::stack::push_reply(state, reply, 0) {
                    mlua::ffi::lua_pushstring(state, text.as_ptr().cast());
                    mlua::ffi::lua_error(state);
                }
                // `call` counted the command's error.
                let failed = reply.first() == Some(&b'-');
                if failed {
                    mlua::ffi::lua_pushboolean(state, 1);
                    mlua::ffi::lua_setfield(state, -2, crate::scripting::stack::COUNTED.as_ptr());
                }
                failed
            }
        };
        if failed && raise {
            mlua::ffi::lua_error(state);
        }
    }
    1
}

/// Reads `redis.call`'s arguments off `state` and runs the command; `None`
/// when no script runs on this thread.
///
/// # Safety
/// `state` is a C function's Lua state with its arguments.
unsafe fn call_from_stack(state: *mut mlua::lua_State) -> Option<Called> {
    current_runner(|runner| {
        runner.reply.clear();
        // SAFETY: as the function's contract.
        match unsafe { crate::scripting::stack::read_args(state) } {
            Ok(args) => runner.call(&args),
            Err(text) => runner.fail(text, false),
        }
    })
}

impl Runner<'_, '_, '_> {
    /// Answers the call with an error table of `text`.
    fn fail(&mut self, text: &str, counted: bool) -> Called {
        self.error.clear();
        self.error.push_str(text);
        Called::Error { counted }
    }

    /// `redis.acl_check_cmd(command, args…)`: whether the user running
    /// the script may run that command with those arguments.
    fn acl_check_cmd(&mut self, lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
        // An error table, raised by the prelude as `redis.call` raises.
        let raise = |text: &str| error_table(lua, text);
        if args.is_empty() {
            return raise("ERR Please specify at least one argument for this redis lib call");
        }
        let Some(args) = args.iter().map(lua_arg).collect::<Option<Vec<Bytes>>>() else {
            return raise("ERR Lua redis lib command arguments must be strings or integers");
        };
        let server = self.ctx.server;
        let Some(id) = server.commands.resolve(&args) else {
            return raise("ERR Invalid command passed to redis.acl_check_cmd()");
        };
        let session = &mut *self.ctx.session;
        session.refresh_user(&server.acl);
        let allowed = session.user_unrestricted
            || server
                .acl
                .check(&session.user, &server.commands, id, &args)
                .is_ok();
        Ok(Value::Boolean(allowed))
    }

    fn written(&self) -> bool {
        self.running.written.load(Relaxed)
    }

    /// Makes `key`'s shard (with `None`, every shard) part of the lock
    /// set, by the rules in `crate::scripting`'s module docs.
    fn lock(&mut self, key: Option<KeyRef>) -> Result<(), &'static str> {
        // Read the clock only once the shard turned out to be busy: the
        // common call finds it in the lock set already.
        let mut started = None;
        self.every_shard |= key.is_none();
        loop {
            let taken = match key {
                Some(key) => self.ctx.keys.shard_or_escalate(key).is_some(),
                None => self.ctx.keys.escalate_all(),
            };
            if taken {
                return Ok(());
            }
            if !self.written() && !self.in_transaction {
                self.restart = true;
                return Err(RESTARTING);
            }
            // It has written: undone whole (`strata_engine::keyspace::undo`), it runs
            // again with every shard locked.
            if !self.in_transaction && self.ctx.keys.undo() {
                self.restart = true;
                return Err(RESTARTING);
            }
            // Not reached: a run that cannot be undone holds every shard,
            // and so does a transaction that runs scripts.
            if started.get_or_insert_with(Instant::now).elapsed() > UNDECLARED_LOCK_WAIT {
                return Err(
                    "ERR a key the script did not declare stayed locked by other clients; the script's earlier writes stand",
                );
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Runs the command `args` for the script: its checks, its lock, the
    /// command itself with its reply in `self.reply`.
    fn call(&mut self, args: &[Bytes]) -> Called {
        if self.restart {
            return self.fail(RESTARTING, false);
        }
        let id = match self.resolve(args) {
            Ok(id) => id,
            Err(text) => return self.fail(text, false),
        };
        if let Some(refused) = self.refuse(id, args) {
            return refused;
        }
        let server = self.ctx.server;
        let spec = server.commands.specs[id];
        let name = server.commands.full_names[id].as_str();
        let database_wide = server.commands.gates(id).has(Gates::DATABASE_WIDE);
        let declared = declared_keys_known(spec, args, &server.keyspace, &self.ctx.declared);
        // INFO reads every shard: it runs on the script's lock set once
        // every shard is in it (`commands::server::info`).
        let locked = if database_wide || name == "info" {
            self.lock(None)
        } else {
            declared.iter().try_for_each(|key| self.lock(Some(*key)))
        };
        if let Err(text) = locked {
            return self.fail(text, false);
        }
        let writes = spec.has(flag::WRITE);
        if writes && let Err(text) = self.keep_images(name, database_wide, &declared) {
            return self.fail(text, false);
        }
        if writes || spec.has(flag::PUBSUB) {
            self.running.written.store(true, Relaxed);
        }
        // Runs on the script's locks, its reply in `self.reply` in the
        // script's protocol.
        let ctx = &mut *self.ctx;
        let client_protocol = ctx.session.protocol;
        ctx.session.protocol = protocol_of(self.resp);
        let keys = std::mem::replace(&mut ctx.keys, server.keyspace.lock_nothing());
        ctx.session.in_script = true;
        let (back, by_handler) = call(
            server,
            &mut *ctx.session,
            &mut self.reply,
            ctx.config,
            ctx.stats,
            ctx.now_ms,
            id,
            args,
            keys,
            declared,
        );
        ctx.session.in_script = false;
        ctx.keys = back;
        ctx.committed(by_handler);
        answer_blocked(ctx.session, &mut self.reply);
        ctx.session.protocol = client_protocol;
        Called::Reply
    }

    /// The table index of the command `args` names (a container resolves
    /// to its subcommand), or the error a script gets.
    fn resolve(&self, args: &[Bytes]) -> Result<usize, &'static str> {
        const UNKNOWN: &str = "ERR Unknown Redis command called from script";
        let table = &self.ctx.server.commands;
        let id = table.lookup(&args[0]).ok_or(UNKNOWN)?;
        if table.specs[id].subcommands.is_empty() || args.len() < 2 {
            return Ok(id);
        }
        match table.lookup_subcommand(id, &args[1]) {
            Some(sub) => Ok(sub),
            None => Err(UNKNOWN),
        }
    }

    /// Why command `id` may not run from this script, if it may not:
    /// arity, `noscript`, ACL, what Strata cannot run under a script's
    /// locks, a read-only script's writes, memory.
    fn refuse(&mut self, id: usize, args: &[Bytes]) -> Option<Called> {
        let server = self.ctx.server;
        let table = &server.commands;
        let spec = table.specs[id];
        if !spec.arity_ok(args.len()) {
            return Some(self.fail(
                "ERR Wrong number of args calling Redis command from script",
                false,
            ));
        }
        if spec.has(flag::NOSCRIPT) && !may_call_noscript(server, id) {
            return Some(self.fail("ERR This Redis command is not allowed from script", false));
        }
        if let Some(refused) = self.cluster_refusal(id, args) {
            return Some(self.fail(&refused, false));
        }
        if let Err(denied) = crate::commands::permit::check_command(
            server,
            self.ctx.session,
            id,
            args,
            crate::acl::log::Context::Lua,
            self.ctx.now_ms,
        ) {
            let text = format!(
                "ERR The user executing the script {}",
                denied.short_reason()
            );
            return Some(self.fail(&text, false));
        }
        // Commands that lock shards on their own cannot run under the
        // script's locks, except those the table marks as safe there (DEBUG
        // subcommands that touch no key, reached only with
        // SET-DISABLE-DENY-SCRIPTS; INFO, once the script holds every shard).
        if spec.is(trait_::RUNS_UNLOCKED) && !spec.is(trait_::UNDER_SCRIPT_LOCKS) {
            return Some(self.fail(
                "ERR This Redis command is not allowed from script on Strata: it reads the whole server",
                false,
            ));
        }
        // PUBLISH and the like count as writes for a read-only script
        // (Redis 7: `may_replicate`).
        let writes = spec.has(flag::WRITE) || spec.has(flag::MAY_REPLICATE);
        if writes && self.read_only {
            return Some(self.reject(
                id,
                "ERR Write commands are not allowed from read-only scripts.",
            ));
        }
        if spec.has(flag::WRITE)
            && let Err(error) = refuse_without_replicas(self.ctx)
        {
            return Some(self.reject(id, &error.0));
        }
        // Memory is checked before the run's first write only: once it has
        // written, a script runs to its end (as in Redis), or it would be
        // left half done.
        if spec.has(flag::DENYOOM)
            && !self.allow_oom
            && !self.written()
            && let Some(error) = server
                .tiering
                .refuses_writes(&server.keyspace, self.ctx.config)
        {
            return Some(self.reject(id, error));
        }
        None
    }

    /// Cluster mode: a command of the script may only name keys this
    /// node serves, all in the script's one slot (Redis' texts for
    /// scripts).
    fn cluster_refusal(&mut self, id: usize, args: &[Bytes]) -> Option<String> {
        let server = self.ctx.server;
        if !server.cluster.enabled() || self.ctx.session.primary_link {
            return None;
        }
        let table = &server.commands;
        let spec = table.specs[id];
        let mut keys = super::cluster::SlotKeys::new();
        super::cluster::slot_keys(spec, args, &mut keys);
        let query = crate::cluster::route::Query {
            keys: &keys,
            write: spec.has(flag::WRITE),
            asking: self.ctx.session.asking,
            readonly: self.ctx.session.cluster_readonly,
            migrate: false,
        };
        // Keys of a slot being moved: the script's own locks hold them.
        let keyspace = &server.keyspace;
        let (keys_held, now_ms) = (&mut self.ctx.keys, self.ctx.now_ms);
        let exists = |key: &[u8]| {
            let key = keyspace.key(key);
            (keys_held.shard_or_escalate(key)).is_some_and(|shard| shard.contains(0, key, now_ms))
        };
        let settings = &self.ctx.config.cluster;
        match super::cluster::route(server, settings, &query, now_ms, exists) {
            Err(redirect) => Some(redirect.script_text(&table.full_names[id])),
            Ok(Some(slot)) => match self.cluster_slot.replace(slot) {
                Some(before) if before != slot => Some(
                    "ERR Script attempted to access keys that do not hash to the same slot".into(),
                ),
                _ => None,
            },
            Ok(None) => None,
        }
    }

    /// Before a write: keeps the images the run needs to be undone
    /// (`strata_engine::keyspace::undo`) of the keys it may change, `declared`, in
    /// the current database (MOVE and COPY: in every one). A write the
    /// images cannot cover (a database-wide one, or past their bound)
    /// makes the run hold every shard first, after which nothing will
    /// need undoing.
    fn keep_images(
        &mut self,
        name: &str,
        database_wide: bool,
        declared: &[KeyRef],
    ) -> Result<(), &'static str> {
        if !self.ctx.keys.can_undo() {
            return Ok(());
        }
        let (db, now_ms) = (self.ctx.session.db, self.ctx.now_ms);
        let dbs = match name {
            "move" | "copy" => 0..self.ctx.server.keyspace.db_count(),
            _ => db..db + 1,
        };
        let keys = &mut self.ctx.keys;
        let full = database_wide
            || declared.iter().any(|key| {
                dbs.clone()
                    .any(|db| keys.capture(db, *key, now_ms).is_err())
            });
        if full {
            self.lock(None)?;
            self.ctx.keys.give_up_undo();
        }
        Ok(())
    }

    /// Refuses command `id` for the state the server or the script is in
    /// (memory full, a write from a read-only script): counted as Redis
    /// counts it (the command's rejected calls, the error), once.
    fn reject(&mut self, id: usize, text: &str) -> Called {
        bump(&self.ctx.stats.commands[id].rejected, 1);
        self.ctx.server.stats.record_error(text);
        self.fail(text, true)
    }
}

/// Whether a script may call `noscript` command `id`: only under DEBUG
/// SET-DISABLE-DENY-SCRIPTS 1, and never one the table marks
/// `NEVER_FROM_SCRIPTS` (itself or its container: commands that run or
/// manage scripts, transactions or subscriptions would re-enter the
/// running script's VM or change its session's mode).
fn may_call_noscript(server: &Node, id: usize) -> bool {
    let table = &server.commands;
    let name = table.full_names[id].as_str();
    let parent = name.split('|').next().unwrap_or(name);
    let never = |id: usize| table.specs[id].is(trait_::NEVER_FROM_SCRIPTS);
    let refused = never(id) || table.original_id(parent.as_bytes()).is_some_and(never);
    server.deny_scripts_disabled.load(Relaxed) && !refused
}

/// What a run executes.
#[derive(Clone, Copy)]
pub enum Target<'t> {
    /// EVAL / EVALSHA: a script of the cache; without its body, one this
    /// thread's VM has compiled.
    /// The body comes with its place in the eviction order (EVAL's).
    Script {
        sha: &'t str,
        body: Option<(&'t str, Option<&'t Arc<std::sync::atomic::AtomicU64>>)>,
    },
    /// FCALL: a function of the libraries (`crate::functions`).
    Function {
        libraries: &'t Libraries,
        name: &'t str,
    },
}

impl Target<'_> {
    /// The name errors give as `script: <name>`.
    fn name(&self) -> &str {
        match self {
            Target::Script { sha, .. } => sha,
            Target::Function { name, .. } => name,
        }
    }
}

/// Runs the script once under `ctx.keys`; its result is written to
/// `scratch.result` (in the client's protocol).
fn run_once(
    ctx: &mut Ctx,
    target: Target,
    keys: &[Bytes],
    argv: &[Bytes],
    (read_only, allow_oom): (bool, bool),
    running: &Arc<Running>,
    scratch: &mut Scratch,
) -> Ran {
    let server = ctx.server;
    let scripts = &server.scripts;
    let busy_after_ms = ctx.config.busy_reply_threshold_ms;
    let in_transaction = ctx.session.in_exec;
    let protocol = ctx.session.protocol;
    with_vm(scripts, |vm| {
        let function = match target {
            Target::Script {
                sha,
                body: Some((body, used)),
            } => vm.function(sha, body, used),
            // SCRIPT FLUSH ran since EVALSHA found it compiled.
            Target::Script { sha, body: None } => vm
                .compiled(sha)
                .ok_or_else(|| "NOSCRIPT No matching script. Please use EVAL.".to_owned()),
            Target::Function { libraries, name } => vm
                .library_function(libraries, name)
                .ok_or_else(|| "ERR Function not found".to_owned()),
        };
        let function = match function {
            Ok(function) => function,
            Err(text) => return Ran::Done(Err((text, false))),
        };
        // A script that needed every shard before takes them all from the
        // start, rather than escalate from its keys' shards half way
        // (which waits, and after a write may fail, when other clients
        // hold shards out of order). Not inside EXEC, whose lock set is
        // the transaction's.
        if !in_transaction && vm.needs_every_shard(target.name()) && ctx.keys.all().is_none() {
            return Ran::Restart;
        }
        if !vm.runner_installed {
            if let Err(error) = install_runner(&vm.lua, &vm.private) {
                return Ran::Done(Err((format!("ERR {}", lua_error_text(&error)), false)));
            }
            vm.runner_installed = true;
        }
        vm.watch(server.scripts.clone(), running.clone(), busy_after_ms);
        let cluster_slot = (ctx.declared.first()).map(|key| key_slot(key.bytes));
        let mut runner = Runner {
            reply: std::mem::take(&mut scratch.reply),
            error: std::mem::take(&mut scratch.error),
            ctx,
            read_only,
            allow_oom,
            in_transaction,
            restart: false,
            every_shard: false,
            resp: 2,
            running: running.clone(),
            cluster_slot,
        };
        // A function's KEYS and ARGV are its arguments; a script's, globals.
        let as_arguments = matches!(target, Target::Function { .. });
        let resp3 = || current_runner(|runner| runner.resp == 3).unwrap_or(false);
        let mut out = ReplyWriter::new(&mut scratch.result, protocol);
        let ended = with_runner(&mut runner, || {
            vm.run(
                function,
                as_arguments,
                (keys, argv),
                target.name(),
                &resp3,
                &mut out,
            )
        });
        vm.unwatch();
        scratch.reply = std::mem::take(&mut runner.reply);
        scratch.error = std::mem::take(&mut runner.error);
        if runner.every_shard {
            vm.note_every_shard(target.name());
        }
        match runner.restart {
            true => Ran::Restart,
            false => Ran::Done(ended),
        }
    })
}

/// The KEYS and ARGV of EVAL's or FCALL's arguments (the count at 2).
pub fn split_keys<'a>(
    args: &'a [Bytes],
    bad_count: &'static str,
) -> Result<(&'a [Bytes], &'a [Bytes]), CmdError> {
    let numkeys = parse_i64(&args[2]).map_err(|_| CmdError::from(bad_count))?;
    if numkeys > (args.len() - 3) as i64 {
        return Err("ERR Number of keys can't be greater than number of args".into());
    }
    if numkeys < 0 {
        return Err("ERR Number of keys can't be negative".into());
    }
    Ok(args[3..].split_at(numkeys as usize))
}

fn eval_generic(ctx: &mut Ctx, args: &[Bytes], by_sha: bool, read_only: bool) -> CmdResult {
    super::introspection::feed_script_call(ctx, args);
    let (keys, argv) = split_keys(args, super::ERR_NOT_INTEGER)?;
    let scripts = &ctx.server.scripts;
    // EVALSHA of a script this thread's VM compiled (by its lower-case
    // SHA1): its flags are known, and the shared cache is not looked at.
    let compiled = match std::str::from_utf8(&args[1]) {
        Ok(sha) if by_sha && !sha.bytes().any(|b| b.is_ascii_uppercase()) => {
            with_vm(scripts, |vm| vm.use_compiled(sha, scripts)).map(|flags| (sha, flags))
        }
        _ => None,
    };
    let cached;
    let (target, flags) = match compiled {
        Some((sha, flags)) => (Target::Script { sha, body: None }, flags),
        None => {
            cached = if by_sha {
                scripts.get(&args[1]).ok_or(CmdError::from(
                    "NOSCRIPT No matching script. Please use EVAL.",
                ))?
            } else {
                scripts.store_for_eval(&args[1])
            };
            scripts.touch(cached.used.as_ref());
            let (flags, _) = parse_shebang(&cached.body).map_err(CmdError::from)?;
            let target = Target::Script {
                sha: &cached.sha,
                body: Some((&cached.body, cached.used.as_ref())),
            };
            (target, flags)
        }
    };
    // A script that declares its flags and may write is refused at once
    // when memory is full, whatever it would do (Redis 7).
    if flags.no_cluster && ctx.server.cluster.enabled() {
        return Err("ERR Can not run script on cluster, 'no-cluster' flag is set.".into());
    }
    if flags.declared {
        if read_only && !flags.no_writes {
            return Err("ERR Can not execute a script with write flag using *_ro command.".into());
        }
        refuse_if_oom(ctx, flags.no_writes || flags.allow_oom)?;
        if !flags.no_writes {
            refuse_without_replicas(ctx)?;
        }
    }
    let modes = (read_only || flags.no_writes, flags.allow_oom);
    run_script(ctx, target, keys, argv, modes, None)
}

/// Whether EVAL's script (`by_sha`: EVALSHA's cached one) declares
/// `no-writes` in its shebang (CLIENT PAUSE WRITE lets it run).
pub fn declares_no_writes(server: &Node, script: &[u8], by_sha: bool) -> bool {
    let body = match by_sha {
        true => match server.scripts.get(script) {
            Some(cached) => cached.body,
            None => return false,
        },
        false => String::from_utf8_lossy(script).into(),
    };
    parse_shebang(&body).is_ok_and(|(flags, _)| flags.declared && flags.no_writes)
}

/// Refuses a write, or a script or function that may write, while fewer
/// replicas are good than `min-replicas-to-write` asks (on a primary; its
/// own primary's stream passes), as Redis refuses it.
pub fn refuse_without_replicas(ctx: &Ctx) -> CmdResult {
    let replication = &ctx.server.replication;
    match replication.too_few_replicas(ctx.now_ms, ctx.config.replication) {
        Some(refused) if !ctx.session.primary_link => Err(refused.into()),
        _ => Ok(()),
    }
}

/// Refuses a script or function that may write, not being `exempt`
/// (`no-writes`, `allow-oom`), while memory is over `maxmemory`.
pub fn refuse_if_oom(ctx: &Ctx, exempt: bool) -> CmdResult {
    let server = ctx.server;
    match server.tiering.refuses_writes(&server.keyspace, ctx.config) {
        Some(error) if !exempt => Err(error.into()),
        _ => Ok(()),
    }
}

/// Runs a script or function atomically and writes its reply. `modes`:
/// (read-only, allow-oom); `function`: a function's name and its FCALL
/// (for FUNCTION STATS).
pub fn run_script(
    ctx: &mut Ctx,
    target: Target,
    keys: &[Bytes],
    argv: &[Bytes],
    modes: (bool, bool),
    function: Option<(String, Vec<Bytes>)>,
) -> CmdResult {
    let scripts = &ctx.server.scripts;
    let client_id = ctx.session.client.id;
    // SELECT inside a script does not change the caller's database.
    let caller_db = ctx.session.db;
    let running = scripts.begin(client_id, function);
    let mut scratch = Scratch::take();
    // A top-level run can be undone (`strata_engine::keyspace::undo`); inside EXEC
    // the lock set is the transaction's, which holds every shard when it
    // runs scripts.
    let undoable = !ctx.session.in_exec;
    let messages = crate::events::pubsub::Held::begin();
    let ended = loop {
        if undoable {
            ctx.keys.keep_undo(ctx.now_ms);
        }
        match run_once(ctx, target, keys, argv, modes, &running, &mut scratch) {
            Ran::Restart => {
                // Nothing written, or undone: take every shard and start
                // over, from the caller's database.
                scratch.result.clear();
                messages.discard();
                running.written.store(false, Relaxed);
                ctx.session.select(caller_db);
                let keyspace = ctx.keyspace();
                let held = std::mem::replace(&mut ctx.keys, keyspace.lock_nothing());
                ctx.committed(held.commit());
                ctx.keys = keyspace.lock_pinned(&[], true);
            }
            Ran::Done(ended) => break ended,
        }
    };
    messages.release(&ctx.server.pubsub);
    scripts.end(&running);
    ctx.session.select(caller_db);
    if ended.is_ok() {
        ctx.out.encoded(&scratch.result);
    }
    scratch.keep();
    ended.map_err(|(text, counted)| {
        ctx.session.error_counted = counted;
        text.into()
    })
}

pub fn eval(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

pub fn evalsha(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

pub fn eval_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

pub fn evalsha_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

pub fn script_load(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let scripts = ctx.server.scripts.clone();
    let sha = crate::scripting::sha1_hex(&args[2]);
    let body = String::from_utf8_lossy(&args[2]).into_owned();
    parse_shebang(&body).map_err(CmdError::from)?;
    // Compiled here so a syntax error is reported now, as Redis does.
    let used = scripts.get(sha.as_bytes()).and_then(|cached| cached.used);
    with_vm(&scripts, |vm| vm.function(&sha, &body, used.as_ref())).map_err(CmdError::from)?;
    scripts.store_loaded(&args[2]);
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

pub fn script_exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.out.array(args.len() - 2);
    for sha in &args[2..] {
        let known = ctx.server.scripts.exists(sha);
        ctx.out.int(known as i64);
    }
    Ok(())
}

pub fn script_flush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.get(2) {
        None => {}
        Some(mode) if is(mode, "ASYNC") || is(mode, "SYNC") => {}
        Some(_) => {
            return Err("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into());
        }
    }
    if args.len() > 3 {
        return Err("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into());
    }
    ctx.server.scripts.flush();
    ctx.out.ok();
    Ok(())
}

pub fn script_kill(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    kill(ctx, false)
}

/// SCRIPT KILL, or FUNCTION KILL (`functions`).
pub fn kill(ctx: &mut Ctx, functions: bool) -> CmdResult {
    ctx.server.scripts.kill(functions).reply()?;
    ctx.out.ok();
    Ok(())
}

pub fn script_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}
