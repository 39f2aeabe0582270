//! Lua scripting: the script cache, one Lua 5.1 VM per worker thread, the
//! sandbox, the libraries scripts use, and a run made through Lua's C API
//! ([`Vm::run`]; the RESP ↔ Lua conversions are `crate::lua_stack`).
//!
//! Scripts are kept server-wide by SHA1 ([`Scripts`]); each worker thread
//! compiles a script into its own VM the first time it runs it there (a
//! VM is not shared between threads, so scripts on different threads run
//! in parallel). SCRIPT FLUSH bumps a generation that makes every VM start
//! afresh.
//!
//! Atomicity is the transaction's (`commands::transactions`): a script
//! runs under one pinned lock set — the shards of its declared KEYS —
//! committed as one log group. Keys it did not declare are allowed, as
//! Redis allows them on a single node: their shard joins the set if that
//! cannot deadlock (in lock order, or free now); if it is busy and out of
//! order and the script has written nothing yet, the script is run again
//! from the start with every shard locked; if it has written, the call
//! waits for the shard a bounded time and then fails like any command
//! error (the writes before stand, as in Redis). Database-wide commands
//! lock every shard the same way.
//!
//! The sandbox follows Redis: no `io`, `loadfile`, `dofile`, `require`,
//! `module`, and of `os` only `os.clock` (Redis 7.4); scripts run in an environment through which no
//! global can be written or read when absent, and the library tables
//! (`redis`, `cjson`, `cmsgpack`, `struct`, `bit`, `string`, `math`,
//! `table`) are read-only (`crate::lua_libs` has the Rust-made ones). A script that runs longer than `busy-reply-threshold`
//! makes other clients' commands answer `-BUSY` until it ends or SCRIPT
//! KILL stops it (only while it has written nothing).

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};
use parking_lot::{Mutex, RwLock};
use strata_resp::{Protocol, ReplyWriter};

/// Scripts and functions a VM remembers as needing every shard (beyond
/// it, others escalate as a first run does).
const EVERY_SHARD_NAMES_MAX: usize = 10_000;
/// Lua instructions between two checks of the time limit and SCRIPT KILL.
const HOOK_INSTRUCTIONS: u32 = 100_000;

/// How many scripts EVAL may leave in the cache, as in Redis 7.4: a new
/// one beyond them evicts the least recently used. SCRIPT LOAD's scripts
/// stay until SCRIPT FLUSH. Without the bound, a client that builds a new
/// script for every call (values spliced into the text) grows the cache
/// and every thread's VM without end.
pub const EVAL_SCRIPTS_MAX: usize = 500;

/// A cached script: its SHA1 (lower case) and body (shared, so a lookup
/// allocates nothing), and for one EVAL added, when it was last used.
#[derive(Clone)]
pub struct Cached {
    pub sha: Arc<str>,
    pub body: Arc<str>,
    /// A tick of [`Scripts::clock`] (`None`: SCRIPT LOAD's, never evicted).
    pub used: Option<Arc<AtomicU64>>,
}

/// The cache: scripts by lower-case SHA1, and which of them EVAL added.
#[derive(Default)]
struct Cache {
    bodies: foldhash::HashMap<String, Cached>,
    evictable: Vec<String>,
}

/// The scripts the server knows, by SHA1, and the scripts running now.
#[derive(Default)]
pub struct Scripts {
    cache: RwLock<Cache>,
    /// Ticks for the least-recently-used order of EVAL's scripts.
    clock: AtomicU64,
    /// INFO's `evicted_scripts` (CONFIG RESETSTAT zeroes it).
    pub evicted: AtomicU64,
    /// Evictions since start, never reset: a VM that sees it move drops
    /// what it compiled of the evicted scripts.
    evictions: AtomicU64,
    /// Bumped by SCRIPT FLUSH: every thread's VM starts afresh.
    generation: AtomicU64,
    /// Scripts past `busy-reply-threshold`, by client id (a script joins
    /// when it becomes busy: the common, short run touches no lock here).
    running: Mutex<HashMap<u64, Arc<Running>>>,
    /// Scripts past `busy-reply-threshold`: other commands answer BUSY.
    pub busy: AtomicUsize,
    /// The server is shutting down: running scripts stop (see
    /// [`Running::check`]).
    pub stopping: AtomicBool,
    /// Bit `n`: network thread `n` runs a busy script (threads past 64
    /// are not tracked). The accept loop sends new clients elsewhere.
    pub busy_threads: AtomicU64,
}

/// One script being run (for BUSY, SCRIPT KILL, FUNCTION KILL and
/// FUNCTION STATS).
pub struct Running {
    client_id: u64,
    /// The network thread it runs on (`thread_index`).
    thread: usize,
    started: Instant,
    pub written: AtomicBool,
    kill: AtomicBool,
    busy: AtomicBool,
    /// A function's name and the FCALL that runs it (`None`: EVAL).
    function: Option<(String, Vec<bytes::Bytes>)>,
}

/// What SCRIPT KILL / FUNCTION KILL found.
pub enum Kill {
    Killed,
    NotBusy,
    Unkillable,
    /// The busy one is of the other kind (a function for SCRIPT KILL, a
    /// script for FUNCTION KILL): the BUSY error naming the right command.
    OtherKind(&'static str),
}

impl Kill {
    /// SCRIPT KILL's / FUNCTION KILL's reply: `+OK` or the error.
    pub fn reply(self) -> Result<(), &'static str> {
        match self {
            Kill::Killed => Ok(()),
            Kill::OtherKind(busy) => Err(busy),
            Kill::NotBusy => Err("NOTBUSY No scripts in execution right now."),
            Kill::Unkillable => Err(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            ),
        }
    }
}

/// The BUSY errors: which command may stop what is running.
pub const BUSY_SCRIPT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl Scripts {
    /// EVAL's `body`: cached (evicting the least recently used of EVAL's
    /// scripts when there are [`EVAL_SCRIPTS_MAX`]) unless it is already.
    pub fn store_for_eval(&self, body: &[u8]) -> Cached {
        self.store(body, true)
    }

    /// SCRIPT LOAD's `body`: cached for good (one EVAL added stays
    /// evictable, as in Redis).
    pub fn store_loaded(&self, body: &[u8]) -> Cached {
        self.store(body, false)
    }

    fn store(&self, body: &[u8], evictable: bool) -> Cached {
        let sha = sha1_hex(body);
        if let Some(cached) = self.cache.read().bodies.get(&sha) {
            return cached.clone();
        }
        let mut cache = self.cache.write();
        if let Some(cached) = cache.bodies.get(&sha) {
            return cached.clone();
        }
        if evictable {
            while cache.evictable.len() >= EVAL_SCRIPTS_MAX {
                self.evict_oldest(&mut cache);
            }
            cache.evictable.push(sha.clone());
        }
        let cached = Cached {
            sha: Arc::from(sha.as_str()),
            body: Arc::from(String::from_utf8_lossy(body)),
            used: evictable.then(|| Arc::new(AtomicU64::new(self.tick()))),
        };
        cache.bodies.insert(sha, cached.clone());
        cached
    }

    fn evict_oldest(&self, cache: &mut Cache) {
        let bodies = &cache.bodies;
        let last_used = |sha: &String| {
            let used = bodies.get(sha).and_then(|c| c.used.as_ref());
            used.map_or(0, |used| used.load(Relaxed))
        };
        let Some(oldest) =
            (0..cache.evictable.len()).min_by_key(|&i| last_used(&cache.evictable[i]))
        else {
            return;
        };
        let sha = cache.evictable.swap_remove(oldest);
        cache.bodies.remove(&sha);
        self.evicted.fetch_add(1, Relaxed);
        self.evictions.fetch_add(1, Relaxed);
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Relaxed) + 1
    }

    /// Notes that a script EVAL added ran now (its place in the eviction
    /// order); nothing for SCRIPT LOAD's.
    pub fn touch(&self, used: Option<&Arc<AtomicU64>>) {
        if let Some(used) = used {
            used.store(self.tick(), Relaxed);
        }
    }

    /// Script `sha`, in any case.
    pub fn get(&self, sha: &[u8]) -> Option<Cached> {
        let cache = self.cache.read();
        let found = match std::str::from_utf8(sha) {
            Ok(text) if !text.bytes().any(|b| b.is_ascii_uppercase()) => cache.bodies.get(text),
            _ => (cache.bodies).get(&String::from_utf8_lossy(sha).to_ascii_lowercase()),
        };
        found.cloned()
    }

    /// Scripts cached and the bytes of their bodies (INFO memory).
    pub fn cached(&self) -> (usize, usize) {
        let cache = self.cache.read();
        let bytes = cache.bodies.values().map(|c| c.body.len()).sum();
        (cache.bodies.len(), bytes)
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    pub fn flush(&self) {
        *self.cache.write() = Cache::default();
        self.generation.fetch_add(1, Relaxed);
    }

    /// Notes that client `client_id` runs a script (`function`: a
    /// function's name and its FCALL).
    pub fn begin(
        &self,
        client_id: u64,
        function: Option<(String, Vec<bytes::Bytes>)>,
    ) -> Arc<Running> {
        Arc::new(Running {
            client_id,
            thread: THREAD_INDEX.with(std::cell::Cell::get),
            started: Instant::now(),
            written: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            function,
        })
    }

    /// Notes that `running` ended.
    pub fn end(&self, running: &Running) {
        if running.busy.load(Relaxed) {
            self.running.lock().remove(&running.client_id);
            self.busy.fetch_sub(1, Relaxed);
            if running.thread < 64 {
                self.busy_threads.fetch_and(!(1 << running.thread), Relaxed);
            }
            crate::busy::release();
        }
    }

    /// SCRIPT KILL (`functions` false) or FUNCTION KILL: stops every busy
    /// script (function) that has not written.
    pub fn kill(&self, functions: bool) -> Kill {
        let running = self.running.lock();
        let busy: Vec<_> = running.values().filter(|r| r.busy.load(Relaxed)).collect();
        if busy.is_empty() {
            return Kill::NotBusy;
        }
        if busy.iter().any(|r| r.written.load(Relaxed)) {
            return Kill::Unkillable;
        }
        if let Some(other) = busy.iter().find(|r| r.function.is_some() != functions) {
            return Kill::OtherKind(match other.function {
                Some(_) => BUSY_FUNCTION,
                None => BUSY_SCRIPT,
            });
        }
        for script in busy {
            script.kill.store(true, Relaxed);
        }
        Kill::Killed
    }
}

impl Scripts {
    /// The BUSY error other clients get while a script runs too long.
    pub fn busy_error(&self) -> &'static str {
        let running = self.running.lock();
        match running
            .values()
            .any(|r| r.busy.load(Relaxed) && r.function.is_some())
        {
            true => BUSY_FUNCTION,
            false => BUSY_SCRIPT,
        }
    }

    /// FUNCTION STATS' running script: the function's name, its FCALL
    /// and how long it has run, in ms. `Err` when the busy one is a
    /// script (EVAL), which FUNCTION STATS answers with BUSY.
    #[allow(clippy::type_complexity)]
    pub fn running_function(
        &self,
    ) -> Result<Option<(String, Vec<bytes::Bytes>, u64)>, ScriptIsBusy> {
        let running = self.running.lock();
        let mut found = None;
        for script in running.values().filter(|r| r.busy.load(Relaxed)) {
            match &script.function {
                None => return Err(ScriptIsBusy),
                Some((name, command)) => {
                    let ms = script.started.elapsed().as_millis() as u64;
                    found = Some((name.clone(), command.clone(), ms));
                }
            }
        }
        Ok(found)
    }
}

/// The busy script is an EVAL, not a function.
#[derive(Debug)]
pub struct ScriptIsBusy;

impl Running {
    /// Called from the VM's hook: notes that the script passed the time
    /// limit; errs if SCRIPT KILL asked it to stop.
    /// SCRIPT KILL or a shutdown is stopping this run.
    fn stopping(&self, scripts: &Scripts) -> bool {
        self.kill.load(Relaxed) || scripts.stopping.load(Relaxed)
    }

    fn check(self: &Arc<Self>, scripts: &Scripts, busy_after_ms: u64) -> Result<(), &'static str> {
        if !self.busy.load(Relaxed) && self.started.elapsed().as_millis() as u64 >= busy_after_ms {
            self.busy.store(true, Relaxed);
            scripts.running.lock().insert(self.client_id, self.clone());
            scripts.busy.fetch_add(1, Relaxed);
            if self.thread < 64 {
                scripts.busy_threads.fetch_or(1 << self.thread, Relaxed);
            }
            crate::log_warning!(
                "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the SCRIPT KILL command.",
                self.started.elapsed().as_millis()
            );
        }
        if self.busy.load(Relaxed) {
            // This thread's other clients are answered from here meanwhile
            // (a SCRIPT KILL among them is seen just below).
            crate::busy::serve_idle();
        }
        if self.kill.load(Relaxed) {
            return Err("ERR Script killed by user with SCRIPT KILL...");
        }
        if scripts.stopping.load(Relaxed) {
            // A busy script holds its network thread and its shards, which
            // shutdown needs. One that wrote nothing is stopped; one that
            // wrote cannot be (it is atomic): the process exits at once,
            // its writes uncommitted, as SHUTDOWN NOSAVE on Redis does.
            if self.written.load(Relaxed) {
                crate::log_warning!(
                    "Shutting down with a script running that has written: exiting without its writes"
                );
                std::process::exit(1);
            }
            return Err("ERR Script killed: the server is shutting down");
        }
        Ok(())
    }
}

pub fn sha1_hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

/// The flags a script declares in its shebang line (`#!lua flags=…`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ScriptFlags {
    /// The script has a shebang line (Redis 7's flag semantics apply).
    pub declared: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
}

/// Parses a shebang line; returns the flags and the body with the line
/// blanked (so line numbers stay right).
pub fn parse_shebang(body: &str) -> Result<(ScriptFlags, Cow<'_, str>), String> {
    let Some(rest) = body.strip_prefix("#!") else {
        return Ok((ScriptFlags::default(), Cow::Borrowed(body)));
    };
    let line_end = rest.find('\n').unwrap_or(rest.len());
    let line = &rest[..line_end];
    let mut words = line.split(' ').filter(|w| !w.is_empty());
    if words.next() != Some("lua") {
        return Err("ERR Unexpected engine in script shebang".into());
    }
    let mut flags = ScriptFlags {
        declared: true,
        ..ScriptFlags::default()
    };
    for word in words {
        let Some(list) = word.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {word}"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    let rest_of_body = &rest[line_end..];
    Ok((flags, Cow::Owned(format!("--{line}{rest_of_body}"))))
}

/// A value held in the Lua registry (`luaL_ref`), pushed by a run
/// through the C API rather than through mlua: a script, a library
/// function, or one of the prelude's values [`Slots`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(c_int);

/// The prelude's values a run pushes.
#[derive(Clone, Copy)]
struct Slots {
    /// The globals scripts see (the prelude's `visible`): KEYS and ARGV
    /// go there.
    visible: Slot,
    /// Runs a script function, turning any error into an error table.
    trampoline: Slot,
    /// The same for a library function, given KEYS and ARGV.
    trampoline_args: Slot,
    /// The C function a run's protected call runs ([`run_protected`]).
    run: Slot,
    /// The protected call's error handler: the error as text.
    error_text: Slot,
}

/// One worker thread's Lua state.
pub struct Vm {
    pub lua: Lua,
    /// The main Lua state, on which runs are made through the C API
    /// ([`Vm::run`]); the same for the VM's life.
    state: *mut lua_State,
    slots: Slots,
    generation: u64,
    /// The scripts this VM compiled, by lower-case SHA1, with their
    /// flags: EVALSHA of one of them needs no look into the shared cache
    /// (its lock and reference counts are lines every thread would bounce).
    functions: foldhash::HashMap<String, (Slot, ScriptFlags, Option<Arc<AtomicU64>>)>,
    /// [`Scripts::evictions`] when this VM last dropped evicted scripts.
    evictions_seen: u64,
    /// Where the running script's `redis.call` implementation is put.
    pub private: Table,
    /// The generation of the libraries loaded into this VM.
    library_generation: u64,
    /// Their functions, by lower-case name.
    callbacks: HashMap<String, Slot>,
    /// Scripts (by SHA1) and functions (by name) that needed every shard
    /// in a run here (`commands::scripting`: they take every shard from
    /// the start from then on).
    every_shard: std::collections::HashSet<String>,
    /// `redis.call`, `redis.pcall` and `private.setresp` are in place:
    /// they are made once per VM by `commands::scripting`, which owns what
    /// they run.
    pub runner_installed: bool,
}

/// A run the hook checks: the cache, the run and `busy-reply-threshold`.
type Watched = (Arc<Scripts>, Arc<Running>, u64);

/// Notes which network thread this is (for [`Scripts::busy_threads`]).
pub fn set_thread_index(index: usize) {
    THREAD_INDEX.with(|cell| cell.set(index));
}

thread_local! {
    static THREAD_INDEX: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    static VM: std::cell::RefCell<Option<Vm>> = const { std::cell::RefCell::new(None) };
    static WATCHED: std::cell::RefCell<Option<Watched>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread's VM, made afresh after SCRIPT FLUSH.
pub fn with_vm<R>(scripts: &Scripts, f: impl FnOnce(&mut Vm) -> R) -> R {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let generation = scripts.generation.load(Relaxed);
        if slot.as_ref().is_none_or(|vm| vm.generation != generation) {
            *slot = Some(Vm::new(generation).expect("a new Lua state"));
        }
        let vm = slot.as_mut().expect("made above");
        let evictions = scripts.evictions.load(Relaxed);
        if vm.evictions_seen != evictions {
            vm.forget_evicted(scripts);
            vm.evictions_seen = evictions;
        }
        let result = f(vm);
        VM_BYTES.with(|bytes| bytes.store(vm.lua.used_memory(), Relaxed));
        result
    })
}

/// What every thread's VM holds, as each last saw it after a run: it is
/// read from the VM's allocator, so each thread publishes its own.
static VMS_BYTES: Mutex<Vec<Arc<AtomicUsize>>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's entry in [`VMS_BYTES`].
    static VM_BYTES: Arc<AtomicUsize> = {
        let bytes = Arc::new(AtomicUsize::new(0));
        VMS_BYTES.lock().push(bytes.clone());
        bytes
    };
}

/// Bytes the Lua VMs hold, every thread's together (INFO's
/// `used_memory_vm_eval`; the VMs also hold the function libraries).
pub fn vms_bytes() -> usize {
    VMS_BYTES
        .lock()
        .iter()
        .map(|bytes| bytes.load(Relaxed))
        .sum()
}

const PRELUDE: &str = r#"
local private = ...
local raw_error = error
local getinfo = debug.getinfo
-- redis.call and redis.pcall are C functions `commands::scripting` sets
-- (as in Redis: a `return redis.call(...)` keeps the script's frame for
-- the error's line).
redis = {}
redis.error_reply = function(text)
    if type(text) ~= 'string' then raw_error('wrong number or type of arguments', 2) end
    if string.sub(text, 1, 1) == '-' then text = string.sub(text, 2) end
    if text == '' then text = 'ERR' end
    return {err = text}
end
redis.status_reply = function(text)
    if type(text) ~= 'string' then raw_error('wrong number or type of arguments', 2) end
    return {ok = text}
end
redis.sha1hex = function(...)
    if select('#', ...) ~= 1 then raw_error('wrong number of arguments', 2) end
    return private.sha1hex(...)
end
redis.log = function(level, ...) return private.log(level, ...) end
redis.setresp = function(version) return private.setresp(version) end
redis.acl_check_cmd = function(...)
    local allowed = private.acl_check_cmd(...)
    if type(allowed) == 'table' then raw_error(allowed) end
    return allowed
end
redis.set_repl = function(mode) end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function(...) end
redis.LOG_DEBUG = 0
redis.LOG_VERBOSE = 1
redis.LOG_NOTICE = 2
redis.LOG_WARNING = 3
redis.REPL_NONE = 0
redis.REPL_SLAVE = 1
redis.REPL_REPLICA = 1
redis.REPL_AOF = 2
redis.REPL_ALL = 3
redis.REDIS_VERSION = '7.0.15'
redis.REDIS_VERSION_NUM = 0x07000f
local handler = function(err)
    if type(err) ~= 'table' then
        err = {err = 'ERR ' .. tostring(err)}
    end
    if err.source == nil then
        for level = 2, 32 do
            local info = getinfo(level, 'Sl')
            if info == nil then break end
            if info.source == '@user_script' or info.source == '@user_function' then
                err.source = info.source
                err.line = info.currentline
                break
            end
        end
        if err.source == nil then
            -- Raised from a tail call: the script's frame is gone.
            err.source = private.source
            err.line = '?'
        end
    end
    return err
end
local raw_xpcall = xpcall
local trampoline = function(f)
    private.source = '@user_script'
    return raw_xpcall(f, handler)
end
-- A function's call (FCALL): its KEYS and ARGV are arguments.
private.trampoline_args = function(f, keys, argv)
    private.source = '@user_function'
    return raw_xpcall(function() return f(keys, argv) end, handler)
end
-- A script stopped by SCRIPT KILL or shutdown must not go on by catching
-- the error that stops it: the scripts' pcall and xpcall raise it again
-- (Redis gets there by raising it at every line).
local raw_pcall = pcall
local stopping = private.stopping
local function unless_stopped(ok, ...)
    if not ok and stopping() then raw_error((...), 0) end
    return ok, ...
end
pcall = function(...) return unless_stopped(raw_pcall(...)) end
-- The error handler of xpcall is not called for the error that stops a
-- run: Lua calls a handler with hooks off when the hook raised the error,
-- so a handler that loops would never be stopped.
xpcall = function(f, handler, ...)
    if type(handler) ~= 'function' then return unless_stopped(raw_xpcall(f, handler, ...)) end
    local guarded = function(e)
        if stopping() then return e end
        return handler(e)
    end
    return unless_stopped(raw_xpcall(f, guarded, ...))
end
-- A coroutine stopped by the hook returns the error to its resumer: it
-- is raised again there.
local raw_resume = coroutine.resume
coroutine.resume = function(...) return unless_stopped(raw_resume(...)) end
loadfile = nil
debug = nil
-- Not in Redis' sandbox here: an environment changed with setfenv stays
-- with a compiled script for the next caller, and a userdata's __gc runs
-- with hooks off (a loop there could never be stopped).
local raw_setfenv = setfenv
getfenv = nil
setfenv = nil
newproxy = nil
dofile = nil
require = nil
module = nil
io = nil
-- Redis 7.4 gives scripts `os.clock` alone (the CPU seconds the server
-- has used, as C's clock()).
os = {clock = private.os_clock}
package = nil
print = nil
-- Scripts run in `env`, an empty table in front of the globals: reading
-- a missing global fails, and nothing can be written through it, nor
-- through the library tables it shows (read-only proxies), as Redis 7's
-- read-only tables behave.
local real = _G
local rawget, type, tostring = rawget, type, tostring
local raw_setmetatable, raw_loadstring, raw_rawset = setmetatable, loadstring, rawset
local protected = raw_setmetatable({}, {__mode = 'k'})
-- The table behind each read-only proxy, for pairs and next.
local behind = raw_setmetatable({}, {__mode = 'k'})
local function readonly() raw_error('Attempt to modify a readonly table', 2) end
local function protect(t)
    local proxy = raw_setmetatable({}, {__index = t, __newindex = readonly, __metatable = false})
    protected[proxy] = true
    behind[proxy] = t
    return proxy
end
local shown = {}
for _, name in ipairs({'redis', 'cjson', 'bit', 'cmsgpack', 'struct', 'string', 'math', 'table', 'coroutine', 'os'}) do
    shown[name] = protect(real[name])
end
-- Strings share one metatable in a VM, and so every later script: what
-- getmetatable('') gives is a read-only view whose __index is the
-- scripts' read-only string table.
local string_meta = getmetatable('')
string_meta.__metatable = protect({__index = shown.string})
local env = {}
-- What scripts see behind `env`: the libraries' read-only proxies, every
-- other global (filled in at the end of this prelude), KEYS and ARGV (set
-- per run) and `_G` as `env`. A table rather than a function, so that a
-- global read is one more table lookup for the VM, not two Lua calls.
local visible = {}
private.visible = visible
private.lookup = function(name, level)
    local value = rawget(visible, name)
    if value == nil then
        raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", level + 1)
    end
    return value
end
raw_setmetatable(env, {
    __index = visible,
    __newindex = readonly,
    __metatable = protect({}),
})
protected[env] = true
private.env = env
private.readonly = readonly
private.protect = protect
private.mark_protected = function(t) protected[t] = true end
real.setmetatable = function(t, mt)
    if protected[t] then raw_error('Attempt to modify a readonly table', 2) end
    return raw_setmetatable(t, mt)
end
real.rawset = function(t, k, v)
    if protected[t] then raw_error('Attempt to modify a readonly table', 2) end
    return raw_rawset(t, k, v)
end
-- pairs and next see through a read-only proxy to what it shows (a
-- script can list `os`, `string`..., as in Redis), never writably.
local raw_pairs, raw_next = pairs, next
real.pairs = function(t)
    local under = behind[t]
    if under ~= nil then return raw_pairs(under) end
    return raw_pairs(t)
end
real.next = function(t, k)
    local under = behind[t]
    if under ~= nil then return raw_next(under, k) end
    return raw_next(t, k)
end
-- Only source text: precompiled chunks are refused, as Redis refuses them.
real.loadstring = function(text, name)
    if type(text) == 'string' and text:byte(1) == 27 then return nil end
    local chunk, err = raw_loadstring(text, name)
    if chunk then raw_setfenv(chunk, env) end
    return chunk, err
end
for name, value in pairs(real) do visible[name] = value end
for name, proxy in pairs(shown) do visible[name] = proxy end
visible._G = env
raw_setmetatable(visible, {
    __index = function(_, name)
        raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end,
})
raw_setmetatable(real, {
    __newindex = readonly,
    __index = function(t, name)
        raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end,
})
return trampoline
"#;

/// Functions' side of a VM (run after [`PRELUDE`], with its `private`
/// table and the scripts' `redis` table): the environment libraries load
/// and run in, and `redis.register_function`.
///
/// As in Redis, a library's top level sees only a load-time `redis` (with
/// `register_function`, `log` and the version constants) and no other
/// global, and its functions see the globals scripts see, with a
/// read-only `redis` that has no `register_function`. Neither can create
/// globals. One environment serves every library: the `loading` flag
/// decides which view a lookup gets.
const FUNCTIONS_PRELUDE: &str = r#"
local private, redis_api = ...
local raw_error, setmetatable, type, pairs, tostring = error, setmetatable, type, pairs, tostring
local lower, find, select = string.lower, string.find, select
local loading = nil
local readonly, lookup = private.readonly, private.lookup
local function missing(name)
    raw_error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end
local flag_names = {}
for _, name in pairs(private.flag_names) do flag_names[name] = true end
local function register(...)
    if loading == nil then
        raw_error('redis.register_function can only be called on FUNCTION LOAD command', 2)
    end
    local count = select('#', ...)
    if count < 1 or count > 2 then
        raw_error('wrong number of arguments to redis.register_function', 2)
    end
    local name, callback, description, flags = nil, nil, nil, {}
    if count == 1 then
        local named = ...
        if type(named) ~= 'table' then
            raw_error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).', 2)
        end
        for key, value in pairs(named) do
            if type(key) ~= 'string' then
                raw_error('named argument key given to redis.register_function is not a string', 2)
            end
            key = lower(key)
            if key == 'function_name' then
                if type(value) ~= 'string' and type(value) ~= 'number' then
                    raw_error('function_name argument given to redis.register_function must be a string', 2)
                end
                name = tostring(value)
            elseif key == 'description' then
                if type(value) ~= 'string' and type(value) ~= 'number' then
                    raw_error('description argument given to redis.register_function must be a string', 2)
                end
                description = tostring(value)
            elseif key == 'callback' then
                if type(value) ~= 'function' then
                    raw_error('callback argument given to redis.register_function must be a function', 2)
                end
                callback = value
            elseif key == 'flags' then
                if type(value) ~= 'table' then
                    raw_error('flags argument to redis.register_function must be a table representing function flags', 2)
                end
                local n = 1
                while value[n] ~= nil do
                    local flag = value[n]
                    if (type(flag) ~= 'string' and type(flag) ~= 'number') or not flag_names[lower(flag)] then
                        raw_error('unknown flag given', 2)
                    end
                    flags[#flags + 1] = lower(flag)
                    n = n + 1
                end
            else
                raw_error('unknown argument given to redis.register_function', 2)
            end
        end
        if name == nil then raw_error('redis.register_function must get a function name argument', 2) end
        if callback == nil then raw_error('redis.register_function must get a callback argument', 2) end
    else
        name, callback = ...
        if type(name) ~= 'string' and type(name) ~= 'number' then
            raw_error('first argument to redis.register_function must be a string', 2)
        end
        name = tostring(name)
        if type(callback) ~= 'function' then
            raw_error('second argument to redis.register_function must be a function', 2)
        end
    end
    if #name == 0 or find(name, '[^%w_]') then
        raw_error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long', 2)
    end
    if loading.seen[lower(name)] then
        raw_error('Function already exists in the library', 2)
    end
    loading.seen[lower(name)] = true
    loading.list[#loading.list + 1] = {name = name, callback = callback, description = description, flags = flags}
end
local load_api = {
    register_function = register,
    log = redis_api.log,
    LOG_DEBUG = redis_api.LOG_DEBUG,
    LOG_VERBOSE = redis_api.LOG_VERBOSE,
    LOG_NOTICE = redis_api.LOG_NOTICE,
    LOG_WARNING = redis_api.LOG_WARNING,
    REDIS_VERSION = redis_api.REDIS_VERSION,
    REDIS_VERSION_NUM = redis_api.REDIS_VERSION_NUM,
}
local load_redis = setmetatable({}, {
    __index = function(_, name)
        local value = load_api[name]
        if value == nil then missing(name) end
        return value
    end,
    __newindex = readonly,
    __metatable = false,
})
local env = {}
setmetatable(env, {
    __index = function(_, name)
        if loading ~= nil then
            if name == 'redis' then return load_redis end
            missing(name)
        end
        if name == 'KEYS' or name == 'ARGV' then missing(name) end
        if name == '_G' then return env end
        return lookup(name, 2)
    end,
    __newindex = readonly,
    __metatable = private.protect({}),
})
private.mark_protected(env)
private.mark_protected(load_redis)
private.functions_env = env
private.begin_load = function() loading = {seen = {}, list = {}} end
private.finish_load = function()
    local list = loading and loading.list or {}
    loading = nil
    return list
end
"#;

/// A function a library registered while it loaded: its callback pinned
/// in the registry when the loader asked to keep it. (An mlua handle per
/// callback would not do: mlua keeps its handles on one auxiliary Lua
/// stack of at most 8000 slots, and a library of 10 000 functions made
/// FUNCTION LOAD fail with "out of Lua stack".)
pub struct Registered {
    pub info: crate::functions::FunctionInfo,
    pub callback: Option<Slot>,
}

/// How long FUNCTION LOAD may run a library's top level (Redis: 500 ms).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

impl Vm {
    /// A VM of no thread, for work outside commands (loading libraries at
    /// start-up).
    pub fn scratch() -> mlua::Result<Vm> {
        Vm::new(0)
    }

    fn new(generation: u64) -> mlua::Result<Vm> {
        // SAFETY: `debug` is the only library mlua deems unsafe; the prelude
        // keeps `debug.getinfo` for error locations and removes the rest of
        // it from the scripts' reach, as it removes `io` and `os`.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        let private = lua.create_table()?;
        private.set(
            "sha1hex",
            lua.create_function(|_, text: mlua::LuaString| Ok(sha1_hex(&text.as_bytes())))?,
        )?;
        private.set(
            "stopping",
            lua.create_function(|_, ()| {
                Ok(WATCHED.with(|watched| {
                    watched
                        .borrow()
                        .as_ref()
                        .is_some_and(|(scripts, running, _)| running.stopping(scripts))
                }))
            })?,
        )?;
        private.set(
            "os_clock",
            lua.create_function(|_, ()| {
                let mut now = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: writes the process' CPU time into `now`.
                unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
                Ok(now.tv_sec as f64 + now.tv_nsec as f64 / 1e9)
            })?,
        )?;
        private.set(
            "log",
            lua.create_function(|_, (level, text): (i64, mlua::LuaString)| {
                let text = String::from_utf8_lossy(&text.as_bytes()).into_owned();
                match level {
                    3 => crate::log_warning!("{text}"),
                    2 => crate::log_notice!("{text}"),
                    _ => crate::log_verbose!("{text}"),
                }
                Ok(())
            })?,
        )?;
        // SAFETY: the protected call's stack is empty; `install` pushes 4
        // values at most.
        unsafe { lua.exec_raw::<()>((), |state| crate::lua_guards::install(state))? };
        let globals = lua.globals();
        globals.set("cjson", crate::lua_libs::cjson(&lua)?)?;
        globals.set("bit", crate::lua_libs::bit(&lua)?)?;
        globals.set("cmsgpack", crate::lua_libs::cmsgpack(&lua)?)?;
        globals.set("struct", crate::lua_libs::structs(&lua)?)?;
        private.set("flag_names", crate::functions::FLAG_NAMES)?;
        let trampoline: Function = lua
            .load(PRELUDE)
            .set_name("=prelude")
            .call(private.clone())?;
        let redis_api: Table = globals.raw_get("redis")?;
        lua.load(FUNCTIONS_PRELUDE)
            .set_name("=functions")
            .call::<()>((private.clone(), redis_api))?;
        let trampoline_args: Function = private.raw_get("trampoline_args")?;
        let visible: Table = private.raw_get("visible")?;
        let error_text: Function = lua
            .load("return function(error) return tostring(error) end")
            .set_name("=error_text")
            .eval()?;
        // SAFETY: `run_protected` keeps Lua's C function protocol.
        let run = unsafe { lua.create_c_function(run_protected)? };
        let mut state = std::ptr::null_mut();
        // SAFETY: the closure only notes the state it runs on: the main
        // state, since no coroutine is running.
        unsafe { lua.exec_raw::<()>((), |main| state = main)? };
        let slots = Slots {
            visible: pin(&lua, visible)?,
            trampoline: pin(&lua, trampoline)?,
            trampoline_args: pin(&lua, trampoline_args)?,
            run: pin(&lua, run)?,
            error_text: pin(&lua, error_text)?,
        };
        let vm = Vm {
            lua,
            state,
            slots,
            generation,
            functions: foldhash::HashMap::default(),
            private,
            library_generation: 0,
            evictions_seen: 0,
            callbacks: HashMap::new(),
            every_shard: std::collections::HashSet::new(),
            runner_installed: false,
        };
        vm.install_hook();
        // What building the VM left behind (the preludes' temporaries).
        vm.lua.gc_collect()?;
        vm.lua.gc_collect()?;
        Ok(vm)
    }

    /// Runs a library's top level (`body`: its code after the shebang
    /// line) and returns the functions it registered; errors as FUNCTION
    /// LOAD words them. `timeout`: FUNCTION LOAD's limit (none when
    /// loading what was already accepted once).
    pub fn load_library(
        &self,
        body: &str,
        timeout: Option<Duration>,
        keep_callbacks: bool,
    ) -> Result<Vec<Registered>, String> {
        let env: Table = self
            .private
            .raw_get("functions_env")
            .map_err(|e| internal_error(&e))?;
        let chunk = self
            .lua
            .load(body)
            .set_name("@user_function")
            .set_environment(env)
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", lua_error_text(&e)))?;
        let begin: Function = self
            .private
            .raw_get("begin_load")
            .map_err(|e| internal_error(&e))?;
        let finish: Function = self
            .private
            .raw_get("finish_load")
            .map_err(|e| internal_error(&e))?;
        begin.call::<()>(()).map_err(|e| internal_error(&e))?;
        LOAD_DEADLINE.set(timeout.map(|limit| Instant::now() + limit));
        let ran = chunk.call::<()>(());
        LOAD_DEADLINE.set(None);
        let list: Table = finish.call(()).map_err(|e| internal_error(&e))?;
        if let Err(error) = ran {
            return Err(format!(
                "ERR Error registering functions: {}",
                lua_error_text(&error)
            ));
        }
        let mut registered = Vec::new();
        for entry in list.sequence_values::<Table>() {
            let entry = entry.map_err(|e| internal_error(&e))?;
            let flags: Vec<String> = entry.get("flags").map_err(|e| internal_error(&e))?;
            let flags = crate::functions::FLAG_NAMES
                .iter()
                .enumerate()
                .filter(|(_, name)| flags.iter().any(|f| f == *name))
                .fold(0u8, |bits, (n, _)| bits | 1 << n);
            registered.push(Registered {
                info: crate::functions::FunctionInfo {
                    name: entry.get("name").map_err(|e| internal_error(&e))?,
                    description: entry.get("description").map_err(|e| internal_error(&e))?,
                    flags,
                },
                callback: match keep_callbacks {
                    true => {
                        let callback: Function =
                            entry.get("callback").map_err(|e| internal_error(&e))?;
                        Some(pin(&self.lua, callback).map_err(|e| internal_error(&e))?)
                    }
                    false => None,
                },
            });
        }
        Ok(registered)
    }

    /// The callback of function `name` of `libraries`, loading every
    /// library into this VM first when they changed since it last did.
    pub fn library_function(
        &mut self,
        libraries: &crate::functions::Libraries,
        name: &str,
    ) -> Option<Slot> {
        if self.library_generation != libraries.generation {
            for (_, slot) in std::mem::take(&mut self.callbacks) {
                self.unpin(slot);
            }
            for library in libraries.libraries.values() {
                let loaded = crate::functions::parse_metadata(&library.code)
                    .and_then(|meta| self.load_library(meta.body, None, true));
                match loaded {
                    Ok(registered) => {
                        for function in registered {
                            let Some(slot) = function.callback else {
                                continue;
                            };
                            let name = function.info.name.to_ascii_lowercase();
                            if let Some(old) = self.callbacks.insert(name, slot) {
                                self.unpin(old);
                            }
                        }
                    }
                    Err(error) => {
                        crate::log_warning!("Library {} did not load: {error}", library.name)
                    }
                }
            }
            self.library_generation = libraries.generation;
        }
        self.callbacks.get(&name.to_ascii_lowercase()).copied()
    }

    /// The compiled function of script `sha`.
    pub fn function(
        &mut self,
        sha: &str,
        body: &str,
        used: Option<&Arc<AtomicU64>>,
    ) -> Result<Slot, String> {
        if let Some((slot, ..)) = self.functions.get(sha) {
            return Ok(*slot);
        }
        let (flags, body) = parse_shebang(body)?;
        let env: Table = self.private.raw_get("env").map_err(|e| e.to_string())?;
        let function = self
            .lua
            .load(&*body)
            .set_name("@user_script")
            .set_environment(env)
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling script (new function): {}",
                    lua_error_text(&e)
                )
            })?;
        let slot = pin(&self.lua, function).map_err(|e| format!("ERR {e}"))?;
        (self.functions).insert(sha.to_owned(), (slot, flags, used.cloned()));
        Ok(slot)
    }

    /// Drops what this VM compiled of scripts no longer in the cache
    /// (evicted), so that EVALSHA answers NOSCRIPT for them here too and
    /// the VM lets them go.
    fn forget_evicted(&mut self, scripts: &Scripts) {
        let cache = scripts.cache.read();
        let mut gone = Vec::new();
        self.functions.retain(|sha, (slot, ..)| {
            let kept = cache.bodies.contains_key(sha);
            if !kept {
                gone.push(*slot);
            }
            kept
        });
        drop(cache);
        for slot in gone {
            self.unpin(slot);
        }
    }

    /// Script `sha` (lower-case) if this VM compiled it.
    pub fn compiled(&self, sha: &str) -> Option<Slot> {
        self.functions.get(sha).map(|(slot, ..)| *slot)
    }

    /// Whether script or function `name` needed every shard in a run.
    pub fn needs_every_shard(&self, name: &str) -> bool {
        !self.every_shard.is_empty() && self.every_shard.contains(name)
    }

    /// Notes that script or function `name` needed every shard.
    pub fn note_every_shard(&mut self, name: &str) {
        if self.every_shard.len() < EVERY_SHARD_NAMES_MAX && !self.every_shard.contains(name) {
            self.every_shard.insert(name.to_owned());
        }
    }

    /// Lets the registry forget `slot`.
    fn unpin(&self, slot: Slot) {
        // SAFETY: `luaL_unref` frees a registry entry and neither
        // allocates nor raises.
        unsafe { ffi::luaL_unref(self.state, ffi::LUA_REGISTRYINDEX, slot.0) };
    }

    /// The flags of script `sha` (lower-case) if this VM compiled it: it
    /// is then in the cache, since SCRIPT FLUSH replaces every VM.
    /// Notes the script's use in the eviction order.
    pub fn use_compiled(&self, sha: &str, scripts: &Scripts) -> Option<ScriptFlags> {
        let (_, flags, used) = self.functions.get(sha)?;
        scripts.touch(used.as_ref());
        Some(*flags)
    }

    /// Runs script or function `function` (`as_arguments`: a library
    /// function, given KEYS and ARGV as arguments; otherwise a script,
    /// which reads them as globals) through its trampoline, and writes
    /// its result to `out` (`resp3`: asked once it ended, as the script
    /// may choose with `redis.setresp`); its error reply's text otherwise
    /// (`name`: where errors say it was).
    ///
    /// The run is one protected call made through Lua's C API on the
    /// main state, of a C function ([`run_protected`]) that builds KEYS and
    /// ARGV, calls the trampoline and converts the result on the stack
    /// (`crate::lua_stack`): mlua's own protected call makes two C
    /// closures per call in Lua 5.1, and its values a reference each.
    pub fn run(
        &self,
        function: Slot,
        as_arguments: bool,
        (keys, argv): (&[bytes::Bytes], &[bytes::Bytes]),
        name: &str,
        resp3: &dyn Fn() -> bool,
        out: &mut ReplyWriter,
    ) -> crate::lua_stack::Ended {
        let mut call = RunCall {
            slots: self.slots,
            function,
            as_arguments,
            keys,
            argv,
            name,
            resp3,
            out,
            ended: None,
        };
        let state = self.state;
        // SAFETY: the main state is not in use (runs do not nest: the
        // commands a script calls cannot run scripts); the stack is left
        // as it was found. Growing the stack by 3 may fail only for want
        // of memory, which Lua's panic handler ends the process for, as
        // the allocator's own failure would.
        unsafe {
            let top = ffi::lua_gettop(state);
            ffi::lua_checkstack(state, 3);
            ffi::lua_rawgeti(
                state,
                ffi::LUA_REGISTRYINDEX,
                self.slots.error_text.0.into(),
            );
            ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, self.slots.run.0.into());
            ffi::lua_pushlightuserdata(state, (&mut call as *mut RunCall).cast());
            let status = ffi::lua_pcall(state, 1, 0, top + 1);
            let ended = match (status, call.ended) {
                (ffi::LUA_OK, Some(ended)) => ended,
                // The error handler made the error text.
                _ => {
                    let text = crate::lua_stack::text_at(state, -1);
                    let text = text.as_deref().unwrap_or("unknown error");
                    Err((format!("ERR {text}"), false))
                }
            };
            ffi::lua_settop(state, top);
            // A script's `collectgarbage('stop')` ends with its run.
            ffi::lua_gc(state, ffi::LUA_GCRESTART, 0);
            if let Some(payload) = CAUGHT_PANIC.with(|caught| caught.borrow_mut().take()) {
                std::panic::resume_unwind(payload);
            }
            ended
        }
    }

    /// Makes the time-limit hook watch one run (until [`Vm::unwatch`]).
    /// The hook itself stays installed: setting one per run cost an
    /// allocation on every EVAL.
    pub fn watch(&self, scripts: Arc<Scripts>, running: Arc<Running>, busy_after_ms: u64) {
        WATCHED.with(|watched| *watched.borrow_mut() = Some((scripts, running, busy_after_ms)));
    }

    pub fn unwatch(&self) {
        WATCHED.with(|watched| *watched.borrow_mut() = None);
    }

    /// Installs [`count_hook`] on the main state. It is a plain C hook
    /// rather than mlua's: Lua 5.1 gives a coroutine its creator's hook
    /// when it is made, and mlua's hook finds its callback by thread, so a
    /// loop inside a coroutine ran unchecked (never busy, never killed).
    fn install_hook(&self) {
        // SAFETY: setting a hook neither allocates nor raises.
        unsafe {
            ffi::lua_sethook(
                self.state,
                Some(count_hook),
                ffi::LUA_MASKCOUNT,
                HOOK_INSTRUCTIONS as c_int,
            );
        }
    }
}

thread_local! {
    /// FUNCTION LOAD's deadline for the library being loaded (`None`:
    /// none), checked by [`count_hook`].
    static LOAD_DEADLINE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// What the instruction hook does, for C code that runs long without Lua
/// instructions (`crate::lua_patterns`): notes a busy run, serves the
/// thread's other clients, and raises the error that stops a killed run.
///
/// # Safety
/// `state` is in a protected call; the caller's frames own nothing.
pub(crate) unsafe fn check_running(state: *mut lua_State) {
    // SAFETY: as the function's contract.
    unsafe { count_hook(state, std::ptr::null_mut()) }
}

/// Whether the code running on this thread must stop: the error to raise.
fn hook_verdict() -> Result<(), &'static str> {
    if LOAD_DEADLINE
        .get()
        .is_some_and(|deadline| Instant::now() > deadline)
    {
        return Err("FUNCTION LOAD timeout");
    }
    WATCHED.with(|watched| match &*watched.borrow() {
        Some((scripts, running, busy_after_ms)) => running.check(scripts, *busy_after_ms),
        None => Ok(()),
    })
}

/// Called every [`HOOK_INSTRUCTIONS`] Lua instructions, in the main state
/// and in every coroutine: notes a run that became busy, serves the
/// thread's other clients meanwhile, and stops a killed run or a library
/// past its load deadline by raising an error. A script's error is an
/// error table (the reply's text as Redis words it); FUNCTION LOAD's a
/// string, which its caller words.
unsafe extern "C-unwind" fn count_hook(state: *mut lua_State, _: *mut ffi::lua_Debug) {
    let verdict = catch_panic(hook_verdict);
    // SAFETY: Lua calls a hook inside the running code's protected call;
    // this frame owns nothing when an error is raised.
    unsafe {
        match verdict {
            Some(Ok(())) => {}
            Some(Err(text)) if LOAD_DEADLINE.get().is_some() => {
                ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                ffi::lua_error(state);
            }
            Some(Err(text)) => {
                crate::lua_stack::push_error_table(state, text.as_bytes(), false);
                ffi::lua_error(state);
            }
            None => raise_panicked(state),
        }
    }
}

thread_local! {
    /// A panic caught in Rust code that Lua called during a run, resumed
    /// once the run's protected call returned (see [`catch_panic`]).
    static CAUGHT_PANIC: std::cell::RefCell<Option<Box<dyn std::any::Any + Send>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f`, Rust code called from Lua during a run: a panic must not
/// unwind through Lua's C frames, so it is kept for [`Vm::run`] to resume
/// after the protected call, and `None` says the caller should raise a
/// Lua error to end the run.
pub fn catch_panic<R>(f: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(payload) => {
            CAUGHT_PANIC.with(|caught| *caught.borrow_mut() = Some(payload));
            None
        }
    }
}

/// Puts `value` in the registry: its slot.
fn pin(lua: &Lua, value: impl mlua::IntoLua) -> mlua::Result<Slot> {
    let mut slot = 0;
    // SAFETY: the protected call's stack holds `value` alone, which
    // `luaL_ref` pops.
    unsafe {
        lua.exec_raw::<()>(value, |state| {
            slot = ffi::luaL_ref(state, ffi::LUA_REGISTRYINDEX)
        })?
    };
    Ok(Slot(slot))
}

/// One run's inputs and outcome, lent to [`run_protected`] as a light
/// userdata.
struct RunCall<'r, 'w> {
    slots: Slots,
    function: Slot,
    as_arguments: bool,
    keys: &'r [bytes::Bytes],
    argv: &'r [bytes::Bytes],
    name: &'r str,
    resp3: &'r dyn Fn() -> bool,
    out: &'r mut ReplyWriter<'w>,
    ended: Option<crate::lua_stack::Ended>,
}

/// The body of a run's protected call (see [`Vm::run`]): KEYS and ARGV
/// made (globals in `visible`, or the function's arguments), the
/// trampoline called, its result written. Owns nothing while it calls
/// Lua (a raised error unwinds over it: `crate::lua_stack`).
unsafe extern "C-unwind" fn run_protected(state: *mut lua_State) -> c_int {
    // SAFETY: `Vm::run` pushed a pointer to its `RunCall`, which outlives
    // this call; Lua gives a C function room for LUA_MINSTACK (20)
    // values, of which this pushes 4 at most.
    unsafe {
        let call = &mut *ffi::lua_touserdata(state, 1).cast::<RunCall>();
        ffi::lua_settop(state, 0);
        let slot = |slot: Slot| ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, slot.0.into());
        if call.as_arguments {
            slot(call.slots.trampoline_args);
            slot(call.function);
            push_strings(state, call.keys);
            push_strings(state, call.argv);
            ffi::lua_call(state, 3, 2);
        } else {
            slot(call.slots.visible);
            push_strings(state, call.keys);
            ffi::lua_setfield(state, 1, c"KEYS".as_ptr());
            push_strings(state, call.argv);
            ffi::lua_setfield(state, 1, c"ARGV".as_ptr());
            ffi::lua_settop(state, 0);
            slot(call.slots.trampoline);
            slot(call.function);
            ffi::lua_call(state, 1, 2);
        }
        let written = catch_panic(|| {
            let resp3 = (call.resp3)();
            crate::lua_stack::write_result(state, call.out, resp3, call.name)
        });
        match written {
            Some(ended) => call.ended = Some(ended),
            None => raise_panicked(state),
        }
        0
    }
}

/// Ends the run with a Lua error after [`catch_panic`] caught a panic.
///
/// # Safety
/// `state` is in a protected call; the calling frame owns nothing.
pub unsafe fn raise_panicked(state: *mut lua_State) -> ! {
    // SAFETY: as the function's contract.
    unsafe {
        ffi::lua_pushstring(
            state,
            c"internal error (a panic, resumed after the run)".as_ptr(),
        );
        ffi::lua_error(state)
    }
}

/// Pushes a new table of `items` (a sequence of strings).
///
/// # Safety
/// `state` is in a protected call, with room for 2 values.
unsafe fn push_strings(state: *mut lua_State, items: &[bytes::Bytes]) {
    // SAFETY: as the function's contract.
    unsafe {
        let count = items.len().min(c_int::MAX as usize) as c_int;
        ffi::lua_createtable(state, count, 0);
        for (n, item) in items.iter().enumerate() {
            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
            ffi::lua_rawseti(state, -2, n as ffi::lua_Integer + 1);
        }
    }
}

/// An error of the VM itself (out of memory, say) as a reply's text: with
/// an error code, as every reply error has.
fn internal_error(error: &mlua::Error) -> String {
    format!("ERR {}", lua_error_text(error))
}

/// The text of a Lua error, without mlua's traceback.
pub fn lua_error_text(error: &mlua::Error) -> String {
    match error {
        mlua::Error::RuntimeError(text) | mlua::Error::SyntaxError { message: text, .. } => {
            text.clone()
        }
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// Converts a Lua argument of `redis.call` to a command argument.
pub fn lua_arg(value: &Value) -> Option<bytes::Bytes> {
    match value {
        Value::String(s) => Some(bytes::Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Some(bytes::Bytes::from(n.to_string())),
        Value::Number(n) => Some(bytes::Bytes::from(crate::lua_stack::number_text(*n))),
        _ => None,
    }
}

/// A number as Lua 5.1's `tostring` writes it: C's `%.14g`.
pub fn format_lua_number(n: f64) -> String {
    format_g(n, 14)
}

/// A number as C's `%.<digits>g` writes it (`digits` ≥ 1).
pub fn format_g(n: f64, digits: usize) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let strip = |text: &str| -> String {
        match text.contains('.') {
            true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
            false => text.to_owned(),
        }
    };
    // `digits` significant digits, rounded; the exponent decides the style.
    let scientific = format!("{n:.*e}", digits - 1);
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} writes an exponent");
    let exponent: i32 = exponent.parse().expect("a decimal exponent");
    if !(-4..digits as i32).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exponent.abs())
    } else {
        strip(&format!("{n:.*}", (digits as i32 - 1 - exponent) as usize))
    }
}

/// The protocol a script's `redis.call` replies are converted from.
pub fn protocol_of(version: u8) -> Protocol {
    if version == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

#[cfg(test)]
mod tests {
    use super::format_lua_number;

    #[test]
    fn numbers_are_written_as_lua_5_1_does() {
        for (n, text) in [
            (0.1 + 0.2, "0.3"),
            (123.0, "123"),
            (-12.5, "-12.5"),
            (1e14, "1e+14"),
            (99_999_999_999_999.0, "99999999999999"),
            (1e20, "1e+20"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1.0 / 3.0, "0.33333333333333"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_lua_number(n), text, "{n}");
        }
    }
}
