//! The topology this node serves by (`Local`): read by every command,
//! replaced by a change made alone or by the Raft group's applied state,
//! and kept in the cluster config file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::{RwLock, RwLockReadGuard};

use super::nodes_file;
use super::topology::Topology;

/// The topology this node serves by, and the file that keeps it.
pub struct Local {
    topology: RwLock<Topology>,
    /// [`Topology::serves_every_slot`] of the current topology, read by
    /// every command without the lock.
    serves_every_slot: AtomicBool,
    /// Whether every slot has an owner, likewise.
    covered: AtomicBool,
    path: PathBuf,
}

impl Local {
    pub fn new(topology: Topology, path: PathBuf) -> Local {
        Local {
            serves_every_slot: AtomicBool::new(topology.serves_every_slot()),
            covered: AtomicBool::new(topology.is_ok(true)),
            topology: RwLock::new(topology),
            path,
        }
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
            self.replace(&mut topology, changed);
        }
        Ok(result)
    }

    fn replace(&self, current: &mut Topology, new: Topology) {
        let (every, covered) = (new.serves_every_slot(), new.is_ok(true));
        *current = new;
        self.serves_every_slot.store(every, Relaxed);
        self.covered.store(covered, Relaxed);
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
        if new != *topology {
            if let Err(why) = self.save_topology(&new) {
                crate::log_warning!("{why}");
            }
            self.replace(&mut topology, new);
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
