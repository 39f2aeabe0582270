//! One worker thread's Lua state: the sandbox made from the prelude,
//! scripts compiled into it, libraries loaded, and a run through Lua's
//! C API.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua, LuaOptions, StdLib, Table};
use parking_lot::Mutex;
use strata_resp::ReplyWriter;

use super::cache::*;
use super::hook::*;
use super::prelude::{FUNCTIONS_PRELUDE, PRELUDE};
use super::run::*;
use super::stack::lua_error_text;

/// Scripts and functions a VM remembers as needing every shard (beyond
/// it, others escalate as a first run does).
const EVERY_SHARD_NAMES_MAX: usize = 10_000;
/// Lua instructions between two checks of the time limit and SCRIPT KILL.
const HOOK_INSTRUCTIONS: u32 = 100_000;

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

thread_local! {
    static VM: std::cell::RefCell<Option<Vm>> = const { std::cell::RefCell::new(None) };
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

/// Drops this thread's VM once SCRIPT FLUSH has made it stale, so the
/// memory it holds is given back, and no longer counted in
/// `used_memory_lua`, without waiting for this thread's next script
/// (Redis' test of a leak in the Lua stack flushes on one connection and
/// reads `used_memory_lua` after scripts on another). Network threads
/// call it before they park.
pub fn drop_stale_vm(scripts: &Scripts) {
    VM.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return;
        };
        let generation = scripts.generation.load(Relaxed);
        if slot.as_ref().is_some_and(|vm| vm.generation != generation) {
            *slot = None;
            VM_BYTES.with(|bytes| bytes.store(0, Relaxed));
        }
    });
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
    /// Collects this VM's garbage at once. Work on function libraries
    /// (compiling one to check it, replacing them) leaves garbage in bulk;
    /// libraries change rarely, so a full collection then is cheap, where
    /// the incremental collector would hold up to twice the live heap
    /// (`used_memory_lua`).
    pub fn collect_garbage(&self) {
        let _ = self.lua.gc_collect();
    }

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
        unsafe { lua.exec_raw::<()>((), |state| super::guards::install(state))? };
        let globals = lua.globals();
        globals.set("cjson", super::libs::cjson(&lua)?)?;
        globals.set("bit", super::libs::bit(&lua)?)?;
        globals.set("cmsgpack", super::libs::cmsgpack(&lua)?)?;
        globals.set("struct", super::libs::structs(&lua)?)?;
        private.set("flag_names", crate::functions::FLAG_NAMES)?;
        // The version INFO and HELLO report, also as 0x00MMmmpp.
        private.set("redis_version", crate::util::REDIS_VERSION)?;
        private.set("redis_version_num", crate::util::redis_version_num())?;
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
            // The replaced libraries' functions are garbage now.
            self.collect_garbage();
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
    /// (`super::stack`): mlua's own protected call makes two C
    /// closures per call in Lua 5.1, and its values a reference each.
    pub fn run(
        &self,
        function: Slot,
        as_arguments: bool,
        (keys, argv): (&[bytes::Bytes], &[bytes::Bytes]),
        name: &str,
        resp3: &dyn Fn() -> bool,
        out: &mut ReplyWriter,
    ) -> super::stack::Ended {
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
                    let text = super::stack::text_at(state, -1);
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
