//! strata-server as a library: everything the `strata-server` binary
//! runs (its `main.rs` only calls [`main`]), in modules the integration
//! tests and tools can reach. The map of the crate, by layer:
//! - [`startup`]: the steps from the configuration to serving, the accept
//!   loop, shutdown; [`supervise`]: systemd readiness;
//! - [`server`]: the shared state below dispatch (the node: state and
//!   command table); [`config`] (with [`config_accepted`]): redis.conf
//!   directives, command line, CONFIG GET/SET;
//! - [`net`]: connections, sockets, TLS, sessions, the client registry,
//!   client eviction, serving idle connections while a script is busy;
//! - [`commands`]: the declarative command table, admission, the call,
//!   and one module per command family; [`write_gate`]: the commands each
//!   thread runs between their pause check and their commit;
//! - [`events`]: pub/sub, keyspace notifications, tracking, blocked
//!   commands, MONITOR: what one client's command makes others see;
//! - [`observe`]: INFO, metrics, statistics, latency histograms, SLOWLOG;
//! - [`data`]: loading at start, checkpoints, reply durability, the
//!   server's side of tiering;
//! - [`scripting`] (its VM, hook, libraries and RESP ↔ Lua conversions),
//!   [`functions`]: Lua scripts and functions;
//! - [`replication`], [`cluster`], [`rdb`]: replicas and failover, Redis
//!   Cluster, the RDB format;
//! - [`acl`]: users and their rules; [`alloc`], [`log`]: the counting
//!   allocator and the Redis-style log; [`util`], [`geohash`],
//!   [`long_double`]: small leaves.

pub mod acl;
pub mod alloc;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod config_accepted;
pub mod data;
pub mod events;
pub mod functions;
pub mod geohash;
pub mod log;
pub mod long_double;
pub mod net;
pub mod observe;
pub mod rdb;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod startup;
pub mod supervise;
pub mod util;
pub mod write_gate;

#[global_allocator]
static GLOBAL: alloc::CountingAlloc = alloc::CountingAlloc;

/// The `strata-server` command: `--version`, `--help`, or a server run
/// with the configuration the arguments give (exits on failure).
/// `STRATA_TRACE=error|warn|info|debug|trace`: what the libraries that
/// trace (openraft, for the cluster's Raft group) say, on stderr.
fn trace_to_stderr() {
    let Ok(level) = std::env::var("STRATA_TRACE") else {
        return;
    };
    match level.parse::<tracing_subscriber::filter::LevelFilter>() {
        Ok(level) => tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::stderr)
            .init(),
        Err(_) => eprintln!("STRATA_TRACE={level}: not a level (error, warn, info, debug, trace)"),
    }
}

pub fn main() {
    alloc::configure();
    trace_to_stderr();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("-v" | "--version")) {
        println!(
            "Strata server v={} (Redis {} compatible)",
            env!("CARGO_PKG_VERSION"),
            util::REDIS_VERSION
        );
        return;
    }
    if matches!(args.first().map(String::as_str), Some("-h" | "--help")) {
        print!("{}", config::help());
        return;
    }
    let config = match config::Config::from_args(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if config.daemonize {
        // Before any thread exists, as redis-server does: the parent exits,
        // the child runs on in a new session with its standard streams on
        // /dev/null (so logs go to `logfile`), in the same directory.
        // SAFETY: no other thread exists yet; daemon(3) forks and setsid()s.
        if unsafe { libc::daemon(1, 0) } != 0 {
            eprintln!("Can't daemonize: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
    }
    // Entries choose their layout by what the allocator really hands out.
    strata_engine::keyspace::shards::set_size_class(alloc::size_class);
    // As Redis' `disable-thp yes`: transparent huge pages make the
    // allocator's partly used 2 MB regions fully resident (measured: RSS
    // 105 MB instead of 87 MB under a 64 MB budget with 1-4 KB values), and
    // RSS is what a RAM budget is judged by.
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    // A file-size limit (RLIMIT_FSIZE) must surface as a write error
    // (EFBIG) that the log reports and retries, not kill the process.
    // SAFETY: installing SIG_IGN before any thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    if let Err(e) = startup::run(config) {
        log_warning!("{e}");
        std::process::exit(1);
    }
}
