//! Redis Cluster mode (`cluster-enabled yes`): the topology this node
//! serves by, the redirections it answers, the file that keeps it, and
//! the Raft group that decides it once nodes have met.
//!
//! - [`topology`]: the nodes, each slot's owner, the slots being moved,
//!   the epochs; every change a deterministic method answering Redis'
//!   error.
//! - [`change`]: a change as a value, made by one node (the actor);
//!   applied at once on a node alone, or as an entry of the group's log.
//! - [`route`]: a command's keys to "served here" or MOVED, ASK,
//!   CROSSSLOT, TRYAGAIN, CLUSTERDOWN, as Redis decides.
//! - [`nodes_file`]: CLUSTER NODES' lines and `cluster-config-file`.
//! - [`local`]: the topology commands read, replaced whole.
//! - [`consensus`], [`raft_store`], [`bus`]: the Raft group (openraft
//!   0.9), its storage in `cluster-raft/`, and the bus between nodes.
//!
//! A fresh node serves every slot, so cluster clients (redis-py
//! `RedisCluster`, redis-rs cluster, `redis-cli -c`) work against one
//! Strata; CLUSTER MEET (or `redis-cli --cluster create`) joins nodes
//! into one group; replicas follow their primary, a failed primary is
//! replaced by its replica, and a primary cut off from the majority
//! stops serving (its lease); FORGET and RESET take a node out of its
//! group. Not built yet: slots moving by their shards. `docs/cluster.md`
//! says what a user sees.
//!
//! Layering: below `commands`; it names only the engine's key slots,
//! `config`, `log` and `util`.

pub mod bus;
pub mod change;
pub mod consensus;
pub mod local;
pub mod nodes_file;
pub mod raft_store;
pub mod route;
pub mod topology;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLockReadGuard;

use crate::config::ClusterSettings;
pub use local::Local;
use topology::Topology;

/// How this node is reached, as it announces itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announced {
    /// Empty: the address each client connected to.
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
    /// `cluster-node-timeout`.
    pub node_timeout_ms: u64,
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
            node_timeout_ms: settings.node_timeout_ms,
        }
    }
}

/// The cluster state a server holds: disabled, or a topology, its file
/// and (once the node met another) its Raft group.
pub struct Cluster {
    enabled: bool,
    local: Arc<Local>,
    consensus: Option<consensus::Consensus>,
    /// The config file, locked for as long as this process runs (two
    /// servers given the same file would overwrite each other's
    /// topology, as Redis' own lock prevents).
    _lock: Option<std::fs::File>,
}

impl Cluster {
    /// A server started without `cluster-enabled yes`.
    pub fn disabled() -> Cluster {
        let topology = Topology::fresh(String::new(), String::new());
        Cluster {
            enabled: false,
            local: Arc::new(Local::new(topology, PathBuf::new())),
            consensus: None,
            _lock: None,
        }
    }

    /// Opens the cluster config file at `path` (creating it for a new
    /// node), notes where this node is reached, and starts its part in a
    /// Raft group (storage in `raft_dir`, the bus on `bus`).
    pub fn open(
        path: &Path,
        announced: &Announced,
        raft_dir: &Path,
        bus: std::net::TcpListener,
    ) -> Result<Cluster, String> {
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
        // An IP learnt from a peer is kept unless one is announced.
        if !announced.ip.is_empty() {
            me.ip = announced.ip.clone();
        }
        me.port = announced.port;
        me.cport = announced.cport;
        me.hostname = announced.hostname.clone();
        nodes_file::save(path, &topology).map_err(why)?;
        let local = Arc::new(Local::new(topology, path.to_path_buf()));
        local.set_node_timeout_ms(announced.node_timeout_ms);
        let consensus = consensus::Consensus::start(raft_dir, local.clone(), bus)?;
        Ok(Cluster {
            enabled: true,
            local,
            consensus: Some(consensus),
            _lock: Some(lock),
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether this node owns every slot and moves none, without the
    /// topology's lock.
    pub fn serves_every_slot(&self) -> bool {
        self.local.serves_every_slot()
    }

    /// Whether every slot has an owner (the cluster is ok unless
    /// `cluster-require-full-coverage yes` and it is not).
    pub fn covered(&self) -> bool {
        self.local.covered()
    }

    pub fn topology(&self) -> RwLockReadGuard<'_, Topology> {
        self.local.read()
    }

    /// Whether this node belongs to a Raft group.
    pub fn in_group(&self) -> bool {
        self.consensus.as_ref().is_some_and(|c| c.in_group())
    }

    /// Makes `change` as this node: through the group once it has one,
    /// else at once. Answers the reply's text or Redis' error.
    pub fn submit(&self, change: change::Change) -> change::Applied {
        let apply_here = |change: &change::Change| {
            self.local.change(|t| {
                let me = t.me;
                change.apply(t, me)
            })
        };
        let Some(consensus) = self.consensus.as_ref().filter(|c| c.in_group()) else {
            return apply_here(&change);
        };
        if change.is_own_state() {
            return apply_here(&change);
        }
        if let change::Change::Forget(id) = &change {
            // redis-cli sends FORGET to every node: the group forgot the
            // node at the first.
            let topology = self.local.read();
            if topology.find(id).is_none() && topology.forgotten.contains(id) {
                return Ok("OK".into());
            }
        }
        if let change::Change::SetNode { slot, node, .. } = &change {
            // Checked here first (keys, node). A slot the group already
            // gives to that node changes only this node's own move:
            // redis-cli sends SETSLOT … NODE to every primary.
            let mut view = self.local.read().clone();
            let me = view.me;
            change.apply(&mut view, me)?;
            let settled = {
                let topology = self.local.read();
                let owner = topology.owner(*slot);
                owner.is_some() && owner == topology.find(node)
            };
            let answer = match settled {
                true => "OK".to_string(),
                false => consensus.propose(change.clone())?,
            };
            apply_here(&change::Change::SetStable { slot: *slot })?;
            return Ok(answer);
        }
        consensus.propose(change)
    }

    /// CLUSTER RESET: leaves the group, if this node is in one, then
    /// forgets every other node and its slots; HARD (`fresh` ids) also
    /// takes a new id and sets the epochs to 0.
    pub fn reset(&self, fresh: Option<(String, String)>) -> Result<(), String> {
        if let Some(consensus) = self.consensus.as_ref().filter(|c| c.in_group()) {
            let next_id = match &fresh {
                Some((id, _)) => id.clone(),
                None => self.local.read().myself().id.clone(),
            };
            consensus.leave(next_id)?;
        }
        self.local.change(|t| {
            t.reset(fresh);
            Ok(())
        })
    }

    /// Changes this node's own topology without the group (CLUSTER RESET
    /// of a node alone).
    pub fn change_alone<R>(
        &self,
        change: impl FnOnce(&mut Topology) -> Result<R, String>,
    ) -> Result<R, String> {
        self.local.change(change)
    }

    /// Gives cluster mode what it needs from the server (`Hooks`) and
    /// sets this node's role as its topology says.
    pub fn set_hooks(&self, hooks: local::Hooks) {
        self.local.set_hooks(hooks);
    }

    /// `cluster-node-timeout` changed (CONFIG SET): failure detection and
    /// the lease (half of it) follow at once.
    pub fn set_node_timeout_ms(&self, ms: u64) {
        self.local.set_node_timeout_ms(ms);
    }

    /// Whether this node may serve keys now: alone, or within its lease
    /// from its group's majority.
    pub fn lease_ok(&self, now_ms: u64) -> bool {
        self.local.lease_ok(now_ms)
    }

    /// CLUSTER FAILOVER on a replica of a joined node: planned (the
    /// primary's writes held while this replica catches up) or at once.
    pub fn fail_over(&self, planned: bool) -> change::Applied {
        match &self.consensus {
            Some(consensus) if consensus.in_group() => consensus.fail_over(planned),
            _ => Err("ERR You should send CLUSTER FAILOVER to a replica".into()),
        }
    }

    /// Applies here at once `change`, made by the node `actor`, which
    /// the group has committed (CLUSTER MIGRATION's switch, on the node
    /// that gave the slots, before its held clients go on).
    pub fn apply_committed(&self, actor: &str, change: &change::Change) -> change::Applied {
        self.local.apply_committed(actor, change)
    }

    /// CLUSTER MEET: joins the node whose bus is at `ip:cport` (in the
    /// background).
    pub fn meet(&self, ip: String, cport: u16) -> Result<(), String> {
        match &self.consensus {
            Some(consensus) => {
                consensus.meet(ip, cport);
                Ok(())
            }
            None => Err("ERR This instance has cluster support disabled".into()),
        }
    }

    /// CLUSTER SAVECONFIG.
    pub fn save(&self) -> Result<(), String> {
        self.local.save()
    }
}

/// A new node's topology: a fresh id, serving every slot.
fn fresh() -> Topology {
    Topology::fresh(crate::util::random_hex(40), crate::util::random_hex(40))
}
