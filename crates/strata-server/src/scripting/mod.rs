//! Lua scripting: the script cache, one Lua 5.1 VM per worker thread, the
//! sandbox, the libraries scripts use, and a run made through Lua's C API
//! ([`Vm::run`]; the RESP ↔ Lua conversions are `crate::scripting::stack`).
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
//! `table`) are read-only (`crate::scripting::libs` has the Rust-made ones). A script that runs longer than `busy-reply-threshold`
//! makes other clients' commands answer `-BUSY` until it ends or SCRIPT
//! KILL stops it (only while it has written nothing).
//!
//! The module's parts: [`cache`] (the scripts kept server-wide, the run
//! that may be busy or killed, shebang flags), [`vm`] (one thread's Lua
//! state, the sandbox set up from [`prelude`]'s Lua text, compiling and
//! running), [`hook`] (the instruction hook: busy runs, SCRIPT KILL, the
//! FUNCTION LOAD deadline, panics kept from unwinding through Lua), and
//! [`run`] (a run's protected call and the conversions it needs);
//! [`stack`] (RESP ↔ Lua), [`libs`] (the Rust-made libraries),
//! [`patterns`] (Lua's pattern functions, bounded) and [`guards`] (the
//! read-only library tables).

mod cache;
pub mod guards;
mod hook;
pub mod libs;
pub mod patterns;
mod prelude;
mod run;
pub mod stack;
mod vm;

pub use cache::{
    BUSY_FUNCTION, BUSY_SCRIPT, BusyHooks, Cached, EVAL_SCRIPTS_MAX, Kill, Running, ScriptFlags,
    ScriptIsBusy, Scripts, parse_shebang, set_thread_index, sha1_hex,
};
pub use hook::{catch_panic, raise_panicked};
pub use run::Slot;
pub use run::{lua_arg, protocol_of};
pub use stack::{format_g, format_lua_number, lua_error_text};
pub use vm::{LOAD_TIMEOUT, Registered, Vm, drop_stale_vm, vms_bytes, with_vm};
