//! The topology this node serves by (`Local`): read by every command,
//! replaced by a change made alone or by the Raft group's applied state,
//! and kept in the cluster config file.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

use parking_lot::{RwLock, RwLockReadGuard};

use super::nodes_file;
use super::topology::{Moving, Topology};

/// A primary to follow, as (ip, port); None: be a primary.
pub type Role = Option<(String, u16)>;

/// What cluster mode needs from the rest of the server, given at
/// start-up (the server's layers above name cluster, not the reverse).
pub struct Hooks {
    /// Follow this primary (`Some((ip, port))`) or be a primary (`None`):
    /// called when the topology changes this node's role.
    pub follow: Box<dyn Fn(Role) + Send + Sync>,
    /// This node's replication offset (a failover promotes the replica
    /// that has the most).
    pub offset: Box<dyn Fn() -> u64 + Send + Sync>,
    /// A planned failover, on the primary: clients' writes wait until
    /// the given Unix ms (or the release); once every write begun before
    /// has committed and is in the replication stream, the stream's
    /// offset that holds them all.
    pub hold_writes: Box<dyn Fn(u64) -> Result<u64, String> + Send + Sync>,
    /// The end of that pause.
    pub release_writes: Box<dyn Fn() + Send + Sync>,
}

/// The topology this node serves by, and the file that keeps it.
pub struct Local {
    topology: RwLock<Topology>,
    /// [`Topology::serves_every_slot`] of the current topology, read by
    /// every command without the lock.
    serves_every_slot: AtomicBool,
    /// Whether every slot has an owner, likewise.
    covered: AtomicBool,
    path: PathBuf,
    hooks: OnceLock<Hooks>,
    /// `cluster-node-timeout`: how long a primary may not answer before
    /// a replica takes over. A primary in a group of several voters
    /// serves only for half of it after it last heard from a majority
    /// (its lease), so two primaries never serve one slot at once.
    node_timeout_ms: AtomicU64,
    /// When (Unix ms) this node last heard from its group's majority.
    last_contact_ms: AtomicU64,
    /// The group's voters (0 or 1: no lease to keep).
    voters: AtomicUsize,
}

impl Local {
    pub fn new(topology: Topology, path: PathBuf) -> Local {
        Local {
            serves_every_slot: AtomicBool::new(topology.serves_every_slot()),
            covered: AtomicBool::new(topology.is_ok(true)),
            topology: RwLock::new(topology),
            path,
            hooks: OnceLock::new(),
            node_timeout_ms: AtomicU64::new(15_000),
            last_contact_ms: AtomicU64::new(0),
            voters: AtomicUsize::new(0),
        }
    }

    /// Gives the hooks and, as the topology says, sets this node's role.
    pub fn set_hooks(&self, hooks: Hooks) {
        let role = role_of(&self.read());
        if self.hooks.set(hooks).is_ok() && role.is_some() {
            self.announce_role(role);
        }
    }

    fn announce_role(&self, role: Role) {
        if let Some(hooks) = self.hooks.get() {
            (hooks.follow)(role);
        }
    }

    /// This node's replication offset (0 before the hooks are given).
    pub fn offset(&self) -> u64 {
        self.hooks.get().map_or(0, |hooks| (hooks.offset)())
    }

    /// [`Hooks::hold_writes`].
    pub fn hold_writes(&self, until_ms: u64) -> Result<u64, String> {
        match self.hooks.get() {
            Some(hooks) => (hooks.hold_writes)(until_ms),
            None => Err("the node is starting".into()),
        }
    }

    /// [`Hooks::release_writes`].
    pub fn release_writes(&self) {
        if let Some(hooks) = self.hooks.get() {
            (hooks.release_writes)();
        }
    }

    pub fn set_node_timeout_ms(&self, ms: u64) {
        self.node_timeout_ms.store(ms.max(100), Relaxed);
    }

    pub fn node_timeout_ms(&self) -> u64 {
        self.node_timeout_ms.load(Relaxed)
    }

    /// Notes that this node heard from its group's majority at `ms`.
    pub fn note_contact(&self, ms: u64) {
        self.last_contact_ms.fetch_max(ms, Relaxed);
    }

    pub fn set_voters(&self, voters: usize) {
        self.voters.store(voters, Relaxed);
    }

    /// Whether this node may serve now: alone or in a group of one, or
    /// within its lease (half the node timeout since it last heard from
    /// a majority).
    pub fn lease_ok(&self, now_ms: u64) -> bool {
        if self.voters.load(Relaxed) <= 1 {
            return true;
        }
        let lease = self.node_timeout_ms() / 2;
        now_ms.saturating_sub(self.last_contact_ms.load(Relaxed)) < lease
    }

    pub fn read(&self) -> RwLockReadGuard<'_, Topology> {
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
            let role = self.replace(&mut topology, changed);
            drop(topology);
            if let Some(role) = role {
                self.announce_role(role);
            }
        }
        Ok(result)
    }

    /// Applies here at once a change the group has committed, made by the
    /// node `actor` (its log brings the same change later, and the
    /// group's topology then replaces this one).
    pub fn apply_committed(
        &self,
        actor: &str,
        change: &super::change::Change,
    ) -> super::change::Applied {
        self.change(|t| {
            let actor = t
                .find(actor)
                .ok_or("ERR the node that made the change is unknown here")?;
            change.apply(t, actor)
        })
    }

    /// Makes `new` current; returns this node's new role if it changed.
    fn replace(&self, current: &mut Topology, new: Topology) -> Option<Role> {
        let (every, covered) = (new.serves_every_slot(), new.is_ok(true));
        let (before, after) = (role_of(current), role_of(&new));
        *current = new;
        self.serves_every_slot.store(every, Relaxed);
        self.covered.store(covered, Relaxed);
        (before != after).then_some(after)
    }

    /// Serves by the group's topology from now on (seen from this node;
    /// one that does not list this node yet is not served by).
    pub fn install(&self, group: &Topology) {
        let mut topology = self.topology.write();
        let Some(me) = group.find(&topology.myself().id) else {
            return;
        };
        let mut new = group.clone();
        new.me = me;
        // Slots this node moves are its own state, not the group's.
        for (slot, moving) in topology.moving_of(topology.me).collect::<Vec<_>>() {
            let other = match moving {
                Moving::To(n) | Moving::From(n) => &topology.nodes[n as usize].id,
            };
            let Some(other) = new.find(other) else {
                continue;
            };
            let moving = match moving {
                Moving::To(_) => Moving::To(other as u16),
                Moving::From(_) => Moving::From(other as u16),
            };
            new.set_moving(me, slot, moving);
        }
        if new != *topology {
            if let Err(why) = nodes_file::save_unsynced(&self.path, &new) {
                crate::log_warning!("error saving the cluster node config: {why}");
            }
            let role = self.replace(&mut topology, new);
            drop(topology);
            if let Some(role) = role {
                self.announce_role(role);
            }
        }
    }

    /// Notes the IP this node was reached at, when it announces none.
    pub fn set_my_ip(&self, ip: &str) {
        let result = self.change(|t| {
            let me = t.me;
            t.nodes[me].ip = ip.to_string();
            Ok(())
        });
        if let Err(why) = result {
            crate::log_warning!("{why}");
        }
    }

    pub fn serves_every_slot(&self) -> bool {
        self.serves_every_slot.load(Relaxed)
    }

    pub fn covered(&self) -> bool {
        self.covered.load(Relaxed)
    }

    /// Writes the current topology to the file (CLUSTER SAVECONFIG).
    pub fn save(&self) -> Result<(), String> {
        self.save_topology(&self.read())
    }

    fn save_topology(&self, topology: &Topology) -> Result<(), String> {
        nodes_file::save(&self.path, topology)
            .map_err(|e| format!("ERR error saving the cluster node config: {e}"))
    }
}

/// The primary this node replicates, as (ip, port); None for a primary.
fn role_of(topology: &Topology) -> Role {
    let primary = topology.myself().primary.as_deref()?;
    let node = &topology.nodes[topology.find(primary)?];
    Some((node.ip.clone(), node.port))
}
