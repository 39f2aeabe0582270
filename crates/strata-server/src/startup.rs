//! Start-up and shutdown: what `strata-server` does between reading its
//! configuration and exiting, in the order it happens.
//!
//! 1. [`prepare`]: the log file, the data directory and its lock, and the
//!    engine opened on it (`strata_engine::open`: only the listing and the
//!    checkpoint's header are read; the data loads in step 5).
//! 2. [`Bound::bind`]: every listener (tcp, tls, unix, metrics), so a port
//!    in use fails start-up before any thread runs.
//! 3. [`assemble`]: the [`Server`] value (state only; nothing runs yet).
//! 4. [`spawn_threads`]: network threads, the cron, the feed consumers,
//!    the checkpointer.
//! 5. [`serve`]: the accept runtime on the main thread; the data loads in
//!    the background meanwhile (clients get `-LOADING`). It returns on
//!    SIGTERM, SIGINT or SHUTDOWN.
//! 6. [`finish`]: the final checkpoint and the log's last sync.
//!
//! Threads:
//! - the main thread runs a small runtime that accepts connections on every
//!   listener, enforces `maxclients` and protected mode, hands each socket
//!   to a network thread round-robin, samples ops/s, and waits for SIGTERM,
//!   SIGINT or SHUTDOWN;
//! - `threads` network threads each run their own single-threaded runtime
//!   and own their connections for life: a connection's commands run on its
//!   thread directly against the shared, sharded keyspace (no hop to another
//!   thread);
//! - one expiry thread (the cron) runs, `hz` times a second, the active
//!   expiry cycle (which also shrinks emptied tables), the tiering cron
//!   ([`crate::data::tiering`]: the RAM budget when no command enforces it) and
//!   a step of the RAM census behind INFO's memory breakdown; once a
//!   second it returns freed pages to the OS ([`crate::alloc::collect`],
//!   which network threads call too);
//! - `tiering-io-threads` reader threads read cold values;
//! - persistence ([`crate::data::persistence`]): a loading thread at start, the
//!   engine's log writer, and a checkpoint thread.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use strata_engine::Keyspace;
use strata_engine::open::Pending;
use tokio::sync::mpsc;

use crate::commands::CommandTable;
use crate::commands::Node;
use crate::config::Config;
use crate::data::background::{self, Handles};
use crate::data::persistence::{Persistence, Trigger};
use crate::data::tiering::Tiering;
use crate::events::blocking::Blocking;
use crate::observe::stats::ThreadStats;
use crate::server::{Admitted, Parts, Server, ShutdownSave};
use crate::util::{REDIS_VERSION, now_ms};
use crate::{log, log_notice, log_verbose, log_warning, net::connection};

/// Keys the active expiry cycle may delete per shard per run; bounds the
/// time any one shard lock is held by expiry.
const EXPIRE_BUDGET_PER_SHARD: usize = 64;
/// Entries the RAM census (INFO memory's breakdown) visits per cron tick:
/// about a millisecond of the cron thread; a full pass over 1 M keys takes
/// 1.5 s at `hz` 10.
const CENSUS_ENTRIES_PER_TICK: usize = 65_536;
/// A census pass starts at most this often: INFO's breakdown is then at
/// most a few seconds old, and a small keyspace is not walked several
/// times a second (with 100 000 keys that was 3-4 % of a core, taken
/// from the network threads on a small machine).
const CENSUS_PASS_INTERVAL: Duration = Duration::from_secs(2);

/// Stack of a network thread. Scripts run there, and Lua's C library and
/// ours recurse on it (nested pcalls and metamethods up to Lua's 200 C
/// levels, cjson and cmsgpack up to 1000 levels of nesting, the pattern
/// matcher up to 200 items): a debug build overflowed the default 2 MB on
/// a 1000-deep msgpack array. Only the pages touched take memory.
const NETWORK_THREAD_STACK_BYTES: usize = 64 << 20;

/// Starts the server and blocks until it shuts down.
pub fn run(mut config: Config) -> Result<(), String> {
    let (dir_lock, keyspace, pending) = prepare(&config)?;
    config.apply_to_engine(&keyspace);
    let mut bound = Bound::bind(&config)?;
    // `port 0` asks for any free port; CONFIG GET and INFO show the real one.
    config.port = bound.port;
    let unixsocket = config.unixsocket.clone();
    let tls_config = bound.tls_config.take();
    let server = assemble(config, keyspace, dir_lock, tls_config)?;
    announce(&server);
    let _pidfile = PidFile::write(&server.config.get().pidfile);
    let workers = spawn_threads(&server)?;
    follow_configured_primary(&server);
    hook_cluster(&server);
    serve(&server, bound, workers, pending)?;
    // A script still running holds its thread and shards: it stops now
    // (see `scripting::Running::check`), so the final checkpoint can lock
    // every shard.
    server.scripts.stopping.store(true, Relaxed);
    finish(&server);
    if !unixsocket.is_empty() {
        let _ = std::fs::remove_file(&unixsocket);
    }
    log_warning!("Strata is now ready to exit, bye bye...");
    Ok(())
}

/// The log file, the data directory and its lock, and the engine opened
/// on it (the keyspace, not loaded yet).
fn prepare(
    config: &Config,
) -> Result<(strata_engine::storage::dir_lock::DirLock, Keyspace, Pending), String> {
    log::set_level(config.loglevel);
    log::set_file(&config.logfile)
        .map_err(|e| format!("Can't open the log file '{}': {e}", config.logfile))?;
    std::fs::create_dir_all(&config.dir).map_err(|e| {
        format!(
            "Can't create data directory '{}': {e}",
            config.dir.display()
        )
    })?;
    // Before any other file in the directory is touched: a second server
    // on the same directory would delete this one's log (invariant 7).
    let dir_lock = strata_engine::storage::dir_lock::DirLock::acquire(&config.dir)
        .map_err(|e| e.to_string())?;
    // Only the directory listing and the checkpoint's header are read here
    // (the hash seed must be known before the keyspace exists); the data
    // loads after the listeners are up, answering -LOADING meanwhile.
    let (keyspace, pending) =
        strata_engine::open::open(&config.dir, config.databases).map_err(|e| e.to_string())?;
    Ok((dir_lock, keyspace, pending))
}

/// Every listener the configuration asks for, bound before any thread
/// starts.
struct Bound {
    plain: Vec<StdListener>,
    tls: Vec<StdListener>,
    tls_config: Option<Arc<rustls::ServerConfig>>,
    unix: Option<std::os::unix::net::UnixListener>,
    metrics: Vec<StdListener>,
    /// The plain port bound (the one asked for, or a free one for 0).
    port: u16,
}

impl Bound {
    fn bind(config: &Config) -> Result<Bound, String> {
        // `port 0` picks a free port, except beside `tls-port`: there it
        // means TLS only, as in Redis (a plain port nobody asked for would
        // be a way around TLS).
        let tls_only = config.port == 0 && config.tls.port != 0;
        let (plain, port) = if tls_only {
            (Vec::new(), 0)
        } else {
            bind_all(config, config.port)?
        };
        let (tls_config, tls) = match config.tls.port {
            0 => (None, Vec::new()),
            tls_port => {
                let tls_config = crate::net::tls::server_config(&config.tls)?;
                let (tls_listeners, _) =
                    bind_all(config, tls_port).map_err(|e| format!("tls-port {tls_port}: {e}"))?;
                (Some(tls_config), tls_listeners)
            }
        };
        let unix = match config.unixsocket.as_str() {
            "" => None,
            path => Some(bind_unix(path, config.unixsocketperm)?),
        };
        let metrics = match config.metrics_port {
            0 => Vec::new(),
            metrics_port => {
                crate::net::socket::bind_addresses(
                    &config.metrics_bind,
                    config.tcp_backlog,
                    metrics_port,
                )
                .map_err(|e| format!("metrics-port {metrics_port}: {e}"))?
                .0
            }
        };
        Ok(Bound {
            plain,
            tls,
            tls_config,
            unix,
            metrics,
            port,
        })
    }

    /// The log lines that say where clients are served once loaded.
    fn ready_lines(&self) -> Vec<String> {
        (self.plain.iter().map(|l| (l, "tcp")))
            .chain(self.tls.iter().map(|l| (l, "tls")))
            .map(|(l, kind)| {
                let local = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
                format!("Ready to accept connections {kind} on {local}")
            })
            .collect()
    }
}

/// Cluster mode's state: its config file opened (created for a new
/// node) under `cluster-enabled yes`.
fn open_cluster(config: &Config) -> Result<crate::cluster::Cluster, String> {
    let settings = &config.cluster;
    if !settings.enabled {
        return Ok(crate::cluster::Cluster::disabled());
    }
    let path = config.dir.join(&settings.config_file);
    let mut announced = crate::cluster::Announced::of(settings, config.port);
    let bus = bind_bus(config, &mut announced)?;
    let raft_dir = config.dir.join("cluster-raft");
    crate::cluster::Cluster::open(&path, &announced, &raft_dir, bus)
}

/// The cluster bus's listener, on the first bind address: `cluster-port`
/// if set, else the port plus 10 000 (as Redis); when that is taken or
/// past 65 535, any free port (peers learn it from this node), with a
/// warning. Notes the port in `announced` unless one is announced.
fn bind_bus(
    config: &Config,
    announced: &mut crate::cluster::Announced,
) -> Result<StdListener, String> {
    let first = config
        .bind
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".into());
    let addresses = [first.trim_start_matches('-').to_string()];
    let settings = &config.cluster;
    let wanted = match settings.bus_port {
        0 => config.port.checked_add(10000),
        port => Some(port),
    };
    let bound = match wanted {
        Some(port) => crate::net::socket::bind_addresses(&addresses, config.tcp_backlog, port),
        None => Err("the port plus 10000 is past 65535".into()),
    };
    let (mut listeners, port) = match bound {
        Ok(bound) => bound,
        Err(why) if settings.bus_port == 0 => {
            log_warning!("Cluster bus: {why}; listening on a free port instead");
            crate::net::socket::bind_addresses(&addresses, config.tcp_backlog, 0)?
        }
        Err(why) => return Err(format!("cluster-port {}: {why}", settings.bus_port)),
    };
    if settings.announce_bus_port == 0 {
        announced.cport = port;
    }
    listeners
        .pop()
        .ok_or_else(|| "the cluster bus has no address to listen on".into())
}

/// The server's state, built from the configuration and the (still empty)
/// keyspace; starts the tiering readers and the unblocking thread it
/// holds.
fn assemble(
    config: Config,
    keyspace: Keyspace,
    dir_lock: strata_engine::storage::dir_lock::DirLock,
    tls_config: Option<Arc<rustls::ServerConfig>>,
) -> Result<Arc<Node>, String> {
    let tiering = Tiering::start(
        keyspace.tier().clone(),
        config.tiering_io_threads,
        config.tiering_io_uring,
    )
    .map_err(|e| format!("Can't start the tiering reader threads: {e}"))?;
    let mut commands = CommandTable::new();
    for (old, new) in &config.rename_commands {
        commands.rename(old, new)?;
    }
    let acl = crate::acl::Acl::new(&commands);
    crate::acl::load_at_startup(&acl, &commands, &config)?;
    let thread_stats: Vec<_> = (0..config.threads)
        .map(|_| Arc::new(ThreadStats::new(commands.len())))
        .collect();
    let keyspace = Arc::new(keyspace);
    let blocking = Blocking::start(keyspace.clone())
        .map_err(|e| format!("Can't start the unblocking thread: {e}"))?;
    let persistence = Persistence::new(now_ms() / 1000, thread_stats.clone());
    *persistence.dir_lock.lock() = Some(dir_lock);
    let cluster = open_cluster(&config)?;
    let server = Node::new(
        Server::new(Parts {
            config,
            keyspace,
            persistence,
            tiering,
            blocking,
            acl,
            thread_stats,
            tls: tls_config,
            cluster,
        }),
        commands,
        crate::commands::dispatch,
    );
    let backlog_dir = server.config.get().dir.join("replication").join("backlog");
    server.replication.backlog.spill_to(&backlog_dir);
    server.scripts.set_busy_hooks(crate::scripting::BusyHooks {
        serve_idle: crate::net::busy::serve_idle,
        release: crate::net::busy::release,
    });
    Ok(server)
}

/// `replicaof host port` in the configuration: the link starts now and
/// connects once the data directory is loaded.
fn follow_configured_primary(server: &Arc<Node>) {
    let config = server.config.get();
    let setting = config.setting("replicaof");
    let mut words = setting.split_whitespace();
    let (Some(host), Some(port)) = (words.next(), words.next().and_then(|p| p.parse().ok())) else {
        return;
    };
    let link = server.replication.follow(host.to_string(), port);
    // A restarted replica continues where its data ends.
    link.resume_saved
        .store(true, std::sync::atomic::Ordering::Relaxed);
    crate::replication::link::start(server.clone(), host.to_string(), port, link);
}

/// Gives cluster mode what it asks of the server: to follow the primary
/// its topology names (or be a primary), and this node's replication
/// offset.
fn hook_cluster(server: &Arc<Node>) {
    if !server.cluster.enabled() {
        return;
    }
    let (follow_node, offset_node) = (Arc::downgrade(server), Arc::downgrade(server));
    let (hold_node, release_node) = (Arc::downgrade(server), Arc::downgrade(server));
    server.cluster.set_hooks(crate::cluster::local::Hooks {
        follow: Box::new(move |primary| {
            if let Some(server) = follow_node.upgrade() {
                cluster_role(&server, primary);
            }
        }),
        offset: Box::new(move || {
            offset_node
                .upgrade()
                .map_or(0, |server| server.replication.offset())
        }),
        hold_writes: Box::new(move |until_ms| match hold_node.upgrade() {
            Some(server) => crate::replication::failover::hold_writes(&server, until_ms),
            None => Err("the server is stopping".into()),
        }),
        release_writes: Box::new(move || {
            if let Some(server) = release_node.upgrade() {
                server.client_unpause();
            }
        }),
    });
}

/// Makes this node a replica of `primary`, or a primary (None), as the
/// cluster's topology says.
fn cluster_role(server: &Arc<Node>, primary: Option<(String, u16)>) {
    let replication = &server.replication;
    match primary {
        Some((host, port)) => {
            if replication.following() == Some((host.clone(), port)) {
                return;
            }
            replication.drop_replicas_after_sending();
            let link = replication.follow(host.clone(), port);
            log_notice!("Cluster: this node replicates {host}:{port}");
            crate::replication::link::start(server.clone(), host, port, link);
        }
        None => {
            if replication.promote(None) {
                log_notice!("Cluster: this node is a primary now");
            }
        }
    }
}

/// The start-up lines of the log.
fn announce(server: &Node) {
    let config = server.config.get();
    log_notice!(
        "Strata {} (Redis {} compatible) starting, pid={}, port={}, threads={}",
        env!("CARGO_PKG_VERSION"),
        REDIS_VERSION,
        std::process::id(),
        server.port(),
        config.threads
    );
    // A directive left at Redis' default asks for nothing Strata does not
    // do: noted at `verbose` only, so a stock redis.conf starts with a
    // warning only where its operator changed something that cannot apply.
    for (name, value) in &config.accepted {
        let Some(why) = crate::config_accepted::note(name) else {
            continue;
        };
        let at_default = crate::config_accepted::find(name)
            .is_some_and(|accepted| accepted.default.eq_ignore_ascii_case(value));
        if at_default {
            log_verbose!(
                "'{name} {value}' (Redis' default) is accepted for redis.conf compatibility and has no effect: {why}"
            );
        } else {
            log_warning!(
                "'{name} {value}' is accepted for redis.conf compatibility and has no effect: {why}"
            );
        }
    }
}

/// Network threads (one sender each, to hand them connections) and the
/// background threads: the cron, the notification and tracking feeds, the
/// checkpointer.
fn spawn_threads(server: &Arc<Node>) -> Result<Vec<mpsc::UnboundedSender<Admitted>>, String> {
    let mut workers = Vec::new();
    for index in 0..server.thread_stats.len() {
        let (sender, receiver) = mpsc::unbounded_channel::<Admitted>();
        let server = server.clone();
        let stats = server.thread_stats[index].clone();
        std::thread::Builder::new()
            .name(format!("strata-net-{index}"))
            .stack_size(NETWORK_THREAD_STACK_BYTES)
            .spawn(move || network_thread(server, stats, receiver, index))
            .map_err(|e| format!("Can't start network thread: {e}"))?;
        workers.push(sender);
    }
    let handles = Handles::of(server);
    std::thread::Builder::new()
        .name("strata-expire".into())
        .spawn(move || expiry_thread(handles))
        .map_err(|e| format!("Can't start expiry thread: {e}"))?;
    crate::events::notify::spawn_feed_events(
        server.keyspace.clone(),
        server.config.clone(),
        server.pubsub.clone(),
        server.notify_feed.clone(),
    )
    .map_err(|e| format!("Can't start the notification thread: {e}"))?;
    crate::events::tracking::spawn_feed_invalidations(
        server.keyspace.clone(),
        server.config.clone(),
        server.tracking.clone(),
    )
    .map_err(|e| format!("Can't start the tracking thread: {e}"))?;
    background::spawn_checkpointer(Handles::of(server))
        .map_err(|e| format!("Can't start the checkpoint thread: {e}"))?;
    Ok(workers)
}

/// Runs the accept runtime on this thread until SIGTERM, SIGINT or
/// SHUTDOWN; starts the loader and the metrics endpoint in it.
fn serve(
    server: &Arc<Node>,
    bound: Bound,
    workers: Vec<mpsc::UnboundedSender<Admitted>>,
    pending: Pending,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("Can't start the accept runtime: {e}"))?;
    let server = server.clone();
    runtime.block_on(async move {
        // Signal handlers go in before the server announces readiness, so a
        // SIGTERM/SIGINT sent right after "Ready" shuts down cleanly instead
        // of killing the process.
        let signals = Signals::install()?;
        let notifier =
            crate::supervise::Notifier::from_setting(&server.config.get().supervised).map(Arc::new);
        if let Some(notifier) = &notifier {
            notifier.send("STATUS=Loading the dataset");
        }
        let ready_lines = bound.ready_lines();
        background::spawn_loader(Handles::of(&server), pending, ready_lines, notifier.clone());
        crate::observe::metrics::spawn(server.clone(), bound.metrics);
        let (accepted_tx, accepted_rx) = mpsc::channel::<Incoming>(1024);
        let new_listeners = server.relisten.connect(&bound.plain);
        let listening = listen(bound.plain, bound.tls, bound.unix, &server)?;
        let mut plain = Vec::new();
        for (listener, tls) in listening {
            let is_plain = !tls && matches!(listener, crate::net::socket::Listener::Tcp(_));
            let task = tokio::spawn(accept_forever(listener, tls, accepted_tx.clone()));
            if is_plain {
                plain.push(task);
            }
        }
        let relisten = Relistening {
            new_listeners,
            accepting: plain,
            accepted: accepted_tx,
        };
        dispatch_connections(&server, accepted_rx, workers, signals, relisten).await;
        if let Some(notifier) = &notifier {
            notifier.send("STOPPING=1\nSTATUS=Saving and shutting down");
        }
        Ok::<(), String>(())
    })
}

/// A connection as accepted: the socket, its peer, and whether it came in
/// on `tls-port`.
type Incoming = (crate::net::socket::Accepted, SocketAddr, bool);

/// The listeners in the runtime, each with whether it is `tls-port`'s.
fn listen(
    plain: Vec<StdListener>,
    tls: Vec<StdListener>,
    unix: Option<std::os::unix::net::UnixListener>,
    server: &Node,
) -> Result<Vec<(crate::net::socket::Listener, bool)>, String> {
    let mut listening = Vec::new();
    let tcp = plain.into_iter().map(|l| (l, false));
    for (listener, tls) in tcp.chain(tls.into_iter().map(|l| (l, true))) {
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let kind = if tls { "tls" } else { "tcp" };
        log_notice!("Listening on {kind} {local} (loading the dataset)");
        listening.push((crate::net::socket::Listener::Tcp(listener), tls));
    }
    if let Some(listener) = unix {
        let listener = tokio::net::UnixListener::from_std(listener).map_err(|e| e.to_string())?;
        log_notice!(
            "Listening on unix socket {}",
            server.config.get().unixsocket
        );
        listening.push((crate::net::socket::Listener::Unix(listener), false));
    }
    Ok(listening)
}

/// Accepts on one listener until the dispatcher is gone.
async fn accept_forever(
    listener: crate::net::socket::Listener,
    tls: bool,
    accepted: mpsc::Sender<Incoming>,
) {
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                if accepted.send((socket, peer, tls)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                log_warning!("Accepting client connection: {e}");
                // Out of file descriptors and similar: back off instead of
                // spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// SIGTERM and SIGINT, installed once.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals, String> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(|e| e.to_string())?,
            int: signal(SignalKind::interrupt()).map_err(|e| e.to_string())?,
        })
    }
}

/// The plain TCP accept tasks and where CONFIG SET `port` / `bind` sends
/// their replacements (`crate::net::socket::Relisten`).
struct Relistening {
    new_listeners: mpsc::UnboundedReceiver<crate::net::socket::Replacement>,
    accepting: Vec<tokio::task::JoinHandle<()>>,
    accepted: mpsc::Sender<Incoming>,
}

impl Relistening {
    /// Stops accepting on the old listeners and starts on `listeners`;
    /// `closed` is told once the old ones are (their tasks dropped them).
    fn replace(&mut self, listeners: Vec<StdListener>, closed: std::sync::mpsc::Sender<()>) {
        let old: Vec<_> = self.accepting.drain(..).collect();
        for task in &old {
            task.abort();
        }
        tokio::spawn(async move {
            for task in old {
                let _ = task.await;
            }
            let _ = closed.send(());
        });
        for listener in listeners {
            let local = listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => {
                    log_notice!("Ready to accept connections tcp on {local}");
                    let listener = crate::net::socket::Listener::Tcp(listener);
                    let task = accept_forever(listener, false, self.accepted.clone());
                    self.accepting.push(tokio::spawn(task));
                }
                Err(e) => log_warning!("Listening on {local}: {e}"),
            }
        }
    }
}

/// Admits each accepted connection and hands it to a network thread;
/// samples ops/s and trims the tracking table; returns on a signal or
/// SHUTDOWN.
async fn dispatch_connections(
    server: &Node,
    mut accepted: mpsc::Receiver<Incoming>,
    workers: Vec<mpsc::UnboundedSender<Admitted>>,
    mut signals: Signals,
    mut relisten: Relistening,
) {
    let mut next_worker = 0usize;
    let mut sample = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            Some((stream, peer, on_tls_port)) = accepted.recv() => {
                let tls = if on_tls_port { server.tls.read().clone() } else { None };
                if let Some(admitted) = admit(server, stream, peer, tls) {
                    next_worker = hand_over(server, &workers, next_worker, admitted);
                }
            }
            Some((listeners, closed)) = relisten.new_listeners.recv() => {
                relisten.replace(listeners, closed);
            }
            _ = sample.tick(), if !server.cron_paused.load(Relaxed) => {
                let (net_in, net_out) = server.total_net_bytes();
                server
                    .stats
                    .sample_ops(now_ms(), server.total_commands(), net_in, net_out);
                let config = server.config.get();
                server.tracking.trim(
                    config.tracking_table_max_keys as usize,
                    config.output_limit_pubsub,
                );
            }
            _ = signals.term.recv() => {
                log_warning!("Received SIGTERM scheduling shutdown...");
                break;
            }
            _ = signals.int.recv() => {
                log_warning!("Received SIGINT scheduling shutdown...");
                break;
            }
            _ = server.shutdown_notified() => break,
        }
    }
}

/// Sends `admitted` to the next network thread round-robin, skipping one
/// that runs a busy script (it serves nobody until the script ends, and
/// the new client may be an operator's SCRIPT KILL); the next index.
fn hand_over(
    server: &Node,
    workers: &[mpsc::UnboundedSender<Admitted>],
    next_worker: usize,
    admitted: Admitted,
) -> usize {
    let busy = server.scripts.busy_threads.load(Relaxed);
    let free = (0..workers.len())
        .map(|n| (next_worker + n) % workers.len())
        .find(|&index| index >= 64 || busy & (1 << index) == 0);
    let index = free.unwrap_or(next_worker % workers.len());
    if let Err(unsent) = workers[index].send(admitted) {
        server.clients.unregister(unsent.0.client.id);
    }
    index + 1
}

/// Binds every `bind` address. A `-` prefix marks an optional address
/// (skipped if unavailable, as Redis' default `-::1`). Port 0 picks a free
/// port for the first address and reuses it for the others.
fn bind_all(config: &Config, port: u16) -> Result<(Vec<StdListener>, u16), String> {
    crate::net::socket::bind_addresses(&config.bind, config.tcp_backlog, port)
}

/// Applies connection-level admission rules and registers the client, so
/// client ids follow accept order and `maxclients` counts every accepted
/// connection. Returns the connection to serve.
fn admit(
    server: &Node,
    stream: crate::net::socket::Accepted,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Option<Admitted> {
    let config = server.config.get();
    server.stats.connections_received.fetch_add(1, Relaxed);
    let mut stream = stream;
    if server.clients.count() as u64 >= config.maxclients {
        server.stats.rejected_connections.fetch_add(1, Relaxed);
        stream.refuse(b"-ERR max number of clients reached\r\n");
        return None;
    }
    let (local, unix_socket) = match &stream {
        crate::net::socket::Accepted::Tcp(tcp) => {
            if config.protected_mode && server.acl.default_user().nopass && !is_local(peer.ip()) {
                server.stats.rejected_connections.fetch_add(1, Relaxed);
                stream.refuse(ERR_DENIED.as_bytes());
                return None;
            }
            let _ = tcp.set_nodelay(true);
            if config.tcp_keepalive_s > 0 {
                let keepalive = socket2::TcpKeepalive::new()
                    .with_time(Duration::from_secs(config.tcp_keepalive_s));
                let _ = socket2::SockRef::from(tcp).set_tcp_keepalive(&keepalive);
            }
            (tcp.local_addr().ok()?, None)
        }
        // A unix socket is local: protected mode lets it in, as in Redis.
        crate::net::socket::Accepted::Unix(_) => {
            (peer, Some(Arc::from(config.unixsocket.as_str())))
        }
    };
    let fd = stream.as_raw_fd();
    let client = server
        .clients
        .register(peer, local, unix_socket, fd, now_ms());
    Some(Admitted {
        stream,
        client,
        tls,
    })
}

/// The unix socket at `path` (`unixsocket`), its file made anew (a stale
/// one is removed, as Redis does) with `unixsocketperm`'s mode when set.
fn bind_unix(path: &str, mode: u32) -> Result<std::os::unix::net::UnixListener, String> {
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| format!("Failed opening Unix socket: {path}: {e}"))?;
    if mode != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("Failed setting the mode of Unix socket {path}: {e}"))?;
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("Unix socket {path}: {e}"))?;
    Ok(listener)
}

fn network_thread(
    server: Arc<Node>,
    stats: Arc<ThreadStats>,
    mut receiver: mpsc::UnboundedReceiver<Admitted>,
    index: usize,
) {
    crate::scripting::set_thread_index(index);
    crate::net::busy::start_thread(server.clone());
    // The thread parks without yielding first. A yield before each park
    // once won a little on unpipelined small commands with the load
    // generator on the same 2 cores, but the kernel's scheduler (EEVDF)
    // pushes a yielding thread's deadline back a whole slice each time,
    // so under CPU contention (a full sync's copy, a busy neighbour) the
    // network threads fell behind everything else: 40 000 SETs/s dropped
    // to 30 000 with 0.5 s latencies while two busy loops ran, where Redis
    // and Strata without the yield kept 40 000 at 11-14 ms
    // (docs/performance.md, "CPU contention").
    // The change feed's sleeping readers are woken at the end of each
    // connection's turn and, at the latest, before this thread parks
    // (`strata_engine::feed`, "Wake-ups wait for the end of a turn"). A
    // Lua VM that SCRIPT FLUSH made stale is dropped then too.
    strata_engine::feed::defer_wakeups();
    let parking = server.clone();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(move || {
            strata_engine::feed::wake_deferred();
            crate::scripting::drop_stale_vm(&parking.scripts);
        })
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            log_warning!("Can't start a network thread runtime: {e}");
            std::process::exit(1);
        }
    };
    // Connections on this thread write the log themselves when they wait
    // for it (see connection.rs), so commits here need not wake the writer.
    strata_engine::storage::log::set_flushes_itself();
    runtime.block_on(async move {
        server.tiering.readers.serve_thread_ring();
        tokio::spawn(async {
            let mut every = tokio::time::interval(crate::alloc::COLLECT_INTERVAL);
            loop {
                every.tick().await;
                crate::alloc::collect();
            }
        });
        while let Some(admitted) = receiver.recv().await {
            let server = server.clone();
            let stats = stats.clone();
            tokio::spawn(async move { connection::serve(server, stats, admitted).await });
        }
    });
}

/// `pidfile`: written at start, removed when the server exits normally.
struct PidFile(Option<std::path::PathBuf>);

impl PidFile {
    fn write(path: &str) -> PidFile {
        if path.is_empty() {
            return PidFile(None);
        }
        match std::fs::write(path, format!("{}\n", std::process::id())) {
            Ok(()) => PidFile(Some(path.into())),
            Err(e) => {
                // As redis-server: the server runs on without it.
                log_warning!("Failed to write PID file '{path}': {e}");
                PidFile(None)
            }
        }
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Final checkpoint (as [`ShutdownSave`] says; never while still
/// loading), then the log writes and syncs what it holds.
fn finish(server: &Node) {
    if server.persistence.is_loading() {
        return;
    }
    let asked = server.shutdown_save();
    let save = match asked {
        ShutdownSave::Save => true,
        ShutdownSave::NoSave => false,
        ShutdownSave::Default => {
            let config = server.config.get();
            config.appendonly || !config.save_points.is_empty()
        }
    };
    // With the log of changes on, every acknowledged write is in it and the
    // final checkpoint only shortens the next start: after none changed
    // since the last checkpoint (an idle server), it would shorten
    // nothing, and writing it took 0.47 s for 1 M keys.
    let persistence = &server.persistence;
    let unchanged = asked == ShutdownSave::Default
        && server.keyspace.change_log().is_some()
        && persistence.last_save_ok.load(Relaxed)
        && persistence.saves.load(Relaxed) > 0
        && persistence.total_changes() == persistence.changes_at_last_save.load(Relaxed);
    if save && unchanged {
        log_notice!("Nothing changed since the last checkpoint: no final one is needed.");
    } else if save {
        log_notice!("Saving the final checkpoint before exiting.");
        // A background checkpoint may be running; wait for it to finish
        // rather than skip the final one.
        loop {
            match background::checkpoint(&Handles::of(server), Trigger::Shutdown) {
                Err(e) if e == "in progress" => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    log_warning!(
                        "Final checkpoint failed: {e}; the log keeps every write it holds"
                    );
                    break;
                }
                Ok(_) => break,
            }
        }
    }
    if let Some(log) = server.keyspace.log() {
        log.shutdown();
        log_notice!("Log synced to disk.");
    }
}

fn expiry_thread(server: Handles) {
    let mut collected = Instant::now();
    let mut census_pass_began = Instant::now();
    let mut census_next_pass: Option<Instant> = None;
    loop {
        let hz = server.config.get().hz.max(1);
        std::thread::sleep(Duration::from_millis(1000 / hz));
        if collected.elapsed() >= crate::alloc::COLLECT_INTERVAL {
            crate::alloc::collect();
            collected = Instant::now();
        }
        if census_next_pass.is_none_or(|at| Instant::now() >= at) {
            if census_next_pass.take().is_some() {
                census_pass_began = Instant::now();
            }
            if server.keyspace.census_step(CENSUS_ENTRIES_PER_TICK) {
                census_next_pass = Some(census_pass_began + CENSUS_PASS_INTERVAL);
            }
        }
        server
            .tiering
            .tick(&server.keyspace, &server.config.get(), &server.persistence);
        if server.persistence.is_loading()
            || !server.active_expire.load(Relaxed)
            || server.cron_paused.load(Relaxed)
        {
            continue;
        }
        let cycle = Instant::now();
        server
            .keyspace
            .active_expire_cycle(now_ms(), EXPIRE_BUDGET_PER_SHARD);
        strata_engine::latency::sample("expire-cycle", cycle.elapsed());
    }
}

/// Redis 7's reply to a non-local client in protected mode, word for word.
const ERR_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Whether protected mode lets `ip` in: as Redis, only 127.0.0.1 and ::1
/// (not the rest of 127.0.0.0/8).
fn is_local(ip: std::net::IpAddr) -> bool {
    ip == std::net::Ipv4Addr::LOCALHOST || ip == std::net::Ipv6Addr::LOCALHOST
}
