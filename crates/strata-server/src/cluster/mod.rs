//! Redis Cluster mode (`cluster-enabled yes`): the topology this node
//! serves by, the redirections it answers and the file that keeps it.
//!
//! What is built: a node speaks the Redis Cluster protocol to clients.
//! It has an id, serves the slots its topology gives it, answers MOVED,
//! ASK, CROSSSLOT, TRYAGAIN and CLUSTERDOWN as Redis does
//! ([`route`]), and answers CLUSTER INFO/NODES/SLOTS/SHARDS and the
//! slot-administration subcommands from its [`topology::Topology`], kept
//! in `cluster-config-file` ([`nodes_file`]). A fresh node serves every
//! slot, so cluster clients (redis-py `RedisCluster`, redis-rs cluster,
//! `redis-cli -c`) work against one Strata. `docs/cluster.md` says what a
//! user sees.
//!
//! What is not built yet: nodes learning about each other (CLUSTER MEET
//! answers an error). The design (`../shared/DESIGN.md`, `docs/cluster.md`)
//! puts membership, slot ownership, epochs and failover in a Raft log
//! (openraft) whose entries are the [`topology::Topology`] changes: each
//! change is a deterministic method on the topology for that reason.
//!
//! Layering: below `commands`; it names only the engine's key slots,
//! `config` and `util`. The commands layer takes the lock, calls a change, saves.

pub mod nodes_file;
pub mod route;
pub mod topology;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::{RwLock, RwLockReadGuard};

use crate::config::ClusterSettings;
use topology::Topology;

/// How this node is reached, as it announces itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announced {
    /// Empty: the address each client connected to.
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
}

impl Announced {
    /// Where this node says it is reached (`cluster-announce-*`), given
    /// the port it listens on.
    pub fn of(settings: &ClusterSettings, port: u16) -> Announced {
        let bus = match (settings.announce_bus_port, settings.bus_port) {
            (0, 0) => port.wrapping_add(10000),
            (0, bus) | (bus, _) => bus,
        };
        Announced {
            ip: settings.announce_ip.clone(),
            port: match settings.announce_port {
                0 => port,
                announced => announced,
            },
            cport: bus,
            hostname: settings.announce_hostname.clone(),
        }
    }
}

/// The cluster state a server holds: disabled, or a topology and its
/// file.
pub struct Cluster {
    enabled: bool,
    topology: RwLock<Topology>,
    /// [`Topology::serves_every_slot`] of the current topology, read by
    /// every command without the lock.
    serves_every_slot: AtomicBool,
    /// Whether every slot has an owner, likewise.
    covered: AtomicBool,
    path: PathBuf,
    /// The config file, locked for as long as this process runs (two
    /// servers given the same file would overwrite each other's
    /// topology, as Redis' own lock prevents).
    _lock: Option<std::fs::File>,
}

impl Cluster {
    /// A server started without `cluster-enabled yes`.
    pub fn disabled() -> Cluster {
        Cluster {
            enabled: false,
            topology: RwLock::new(Topology::fresh(String::new(), String::new())),
            serves_every_slot: AtomicBool::new(true),
            covered: AtomicBool::new(true),
            path: PathBuf::new(),
            _lock: None,
        }
    }

    /// Opens the cluster config file at `path` (creating it for a new
    /// node) and notes where this node is reached.
    pub fn open(path: &Path, announced: &Announced) -> Result<Cluster, String> {
        let why = |e: std::io::Error| format!("{}: {}", path.display(), e);
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path.with_extension("lock"))
            .map_err(why)?;
        lock.try_lock().map_err(|_| {
            format!(
                "Sorry, the cluster configuration file {} is already used by a different Strata or Redis node",
                path.display()
            )
        })?;
        let mut topology = match std::fs::read_to_string(path) {
            Ok(text) if !text.trim().is_empty() => nodes_file::decode(&text).map_err(|e| {
                format!(
                    "Unrecoverable error: corrupted cluster config file {}: {e}",
                    path.display()
                )
            })?,
            Ok(_) => fresh(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => fresh(),
            Err(e) => return Err(why(e)),
        };
        let me = topology.me;
        let me = &mut topology.nodes[me];
        me.ip = announced.ip.clone();
        me.port = announced.port;
        me.cport = announced.cport;
        me.hostname = announced.hostname.clone();
        nodes_file::save(path, &topology).map_err(why)?;
        Ok(Cluster {
            enabled: true,
            serves_every_slot: AtomicBool::new(topology.serves_every_slot()),
            covered: AtomicBool::new(topology.is_ok(true)),
            topology: RwLock::new(topology),
            path: path.to_path_buf(),
            _lock: Some(lock),
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether this node owns every slot and moves none, without the
    /// topology's lock.
    pub fn serves_every_slot(&self) -> bool {
        self.serves_every_slot.load(Relaxed)
    }

    /// Whether every slot has an owner (the cluster is ok unless
    /// `cluster-require-full-coverage yes` and it is not).
    pub fn covered(&self) -> bool {
        self.covered.load(Relaxed)
    }

    pub fn topology(&self) -> RwLockReadGuard<'_, Topology> {
        self.topology.read()
    }

    /// Applies `change` to a copy of the topology, saves the copy and
    /// only then makes it current: a refused change or a failed save
    /// leaves everything as it was.
    pub fn change<R>(
        &self,
        change: impl FnOnce(&mut Topology) -> Result<R, String>,
    ) -> Result<R, String> {
        let mut topology = self.topology.write();
        let mut changed = topology.clone();
        let result = change(&mut changed)?;
        if changed != *topology {
            self.save_topology(&changed)?;
            let (every, covered) = (changed.serves_every_slot(), changed.is_ok(true));
            *topology = changed;
            self.serves_every_slot.store(every, Relaxed);
            self.covered.store(covered, Relaxed);
        }
        Ok(result)
    }

    /// CLUSTER SAVECONFIG.
    pub fn save(&self) -> Result<(), String> {
        self.save_topology(&self.topology.read())
    }

    fn save_topology(&self, topology: &Topology) -> Result<(), String> {
        nodes_file::save(&self.path, topology)
            .map_err(|e| format!("ERR error saving the cluster node config: {e}"))
    }
}

/// A new node's topology: a fresh id, serving every slot.
fn fresh() -> Topology {
    Topology::fresh(crate::util::random_hex(40), crate::util::random_hex(40))
}
