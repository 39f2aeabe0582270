//! The scripts kept server-wide by SHA1, the run in progress (busy,
//! killed), and a script's shebang flags.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

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
pub(super) struct Cache {
    pub(super) bodies: foldhash::HashMap<String, Cached>,
    evictable: Vec<String>,
}

/// The scripts the server knows, by SHA1, and the scripts running now.
#[derive(Default)]
pub struct Scripts {
    pub(super) cache: RwLock<Cache>,
    /// Ticks for the least-recently-used order of EVAL's scripts.
    clock: AtomicU64,
    /// INFO's `evicted_scripts` (CONFIG RESETSTAT zeroes it).
    pub evicted: AtomicU64,
    /// Evictions since start, never reset: a VM that sees it move drops
    /// what it compiled of the evicted scripts.
    pub(super) evictions: AtomicU64,
    /// Bumped by SCRIPT FLUSH: every thread's VM starts afresh.
    pub(super) generation: AtomicU64,
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
    /// What a busy script does for the other clients of its thread,
    /// given by the network layer at start-up ([`Scripts::set_busy_hooks`]).
    busy_hooks: std::sync::OnceLock<BusyHooks>,
}

/// What a busy script does for the other clients of its network thread:
/// answers them meanwhile (`serve_idle`) and wakes them when it ends
/// (`release`). The network layer (`crate::net::busy`) supplies them, since
/// scripting sits below dispatch and cannot call it.
#[derive(Clone, Copy)]
pub struct BusyHooks {
    pub serve_idle: fn(),
    pub release: fn(),
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
    /// Start-up gives what a busy script does for its thread's other
    /// clients (once; later calls change nothing).
    pub fn set_busy_hooks(&self, hooks: BusyHooks) {
        let _ = self.busy_hooks.set(hooks);
    }

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
            if let Some(hooks) = self.busy_hooks.get() {
                (hooks.release)();
            }
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
    pub(super) fn stopping(&self, scripts: &Scripts) -> bool {
        self.kill.load(Relaxed) || scripts.stopping.load(Relaxed)
    }

    pub(super) fn check(
        self: &Arc<Self>,
        scripts: &Scripts,
        busy_after_ms: u64,
    ) -> Result<(), &'static str> {
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
            if let Some(hooks) = scripts.busy_hooks.get() {
                (hooks.serve_idle)();
            }
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
    /// `no-cluster`: refused under `cluster-enabled yes`.
    pub no_cluster: bool,
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
                "no-cluster" => flags.no_cluster = true,
                "allow-stale" | "allow-cross-slot-keys" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    let rest_of_body = &rest[line_end..];
    Ok((flags, Cow::Owned(format!("--{line}{rest_of_body}"))))
}

/// Notes which network thread this is (for [`Scripts::busy_threads`]).
pub fn set_thread_index(index: usize) {
    THREAD_INDEX.with(|cell| cell.set(index));
}

thread_local! {
    /// This network thread's index ([`set_thread_index`]).
    static THREAD_INDEX: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}
