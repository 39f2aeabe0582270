//! `strata-server [/path/to/strata.conf] [--option value ...]`
//!
//! A Redis-compatible key-value server. The map of the crate:
//! - [`config`]: redis.conf directives, command line, CONFIG GET/SET;
//! - [`server`]: listeners, network threads, background threads, shutdown;
//! - [`connection`]: one client's read → execute → write loop and limits;
//! - [`commands`]: the declarative command table and one module per family;
//! - [`info`], [`stats`], [`client`], [`session`]: what INFO and CLIENT see;
//! - [`persistence`]: loading at start, reply durability, checkpoints;
//! - [`alloc`], [`log`]: the counting allocator and the Redis-style log.

mod acl;
mod alloc;
mod blocking;
mod busy;
mod client;
mod client_eviction;
mod commands;
mod config;
mod config_accepted;
mod connection;
mod feed_slot;
mod functions;
mod geohash;
mod histogram;
mod info;
mod log;
mod long_double;
mod lua_guards;
mod lua_libs;
mod lua_patterns;
mod lua_stack;
mod metrics;
mod monitor;
mod notify;
mod persistence;
mod pubsub;
mod rdb;
mod scripting;
mod server;
mod session;
mod slowlog;
mod socket;
mod stats;
mod supervise;
mod tiering;
mod tls;
mod tracking;

#[global_allocator]
static GLOBAL: alloc::CountingAlloc = alloc::CountingAlloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("-v" | "--version")) {
        println!(
            "Strata server v={} (Redis {} compatible)",
            env!("CARGO_PKG_VERSION"),
            server::REDIS_VERSION
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
    strata_engine::keyspace::set_size_class(alloc::size_class);
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
    if let Err(e) = server::run(config) {
        log_warning!("{e}");
        std::process::exit(1);
    }
}
