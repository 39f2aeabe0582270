//! A topology change as a value: what CLUSTER's administrative
//! subcommands and MEET ask for, applied the same way whether the node
//! is alone (applied at once) or in a Raft group (an entry of its log,
//! applied by every member in log order, `consensus`).
//!
//! Each change is made *by* a node (the `actor`, the node the command
//! was sent to): ADDSLOTS gives slots to it, SETSLOT … MIGRATING marks
//! its own move. Applying reads nothing but the topology and the change,
//! so every member computes the same topology and the same answer.

use serde::{Deserialize, Serialize};

use super::nodes_file;
use super::topology::{NodeRecord, Topology};

/// One change and the node that makes it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Proposal {
    /// The 40-hex id of the node the command was sent to.
    pub actor: String,
    pub change: Change,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Change {
    /// A group's first entry: the topology of the node that started it
    /// (a cluster config file's text), slots given before it had peers
    /// included.
    Seed(String),
    /// CLUSTER MEET's result: `node` joins, with the slots it had been
    /// given by itself (those no other node owns).
    Join {
        node: NodeRecord,
        slots: Vec<u16>,
    },
    AddSlots(Vec<u16>),
    DelSlots(Vec<u16>),
    FlushSlots,
    SetMigrating {
        slot: u16,
        to: String,
    },
    SetImporting {
        slot: u16,
        from: String,
    },
    SetStable {
        slot: u16,
    },
    /// SETSLOT … NODE, with how many keys of the slot the actor holds,
    /// and whether the actor was importing the slot (it then takes a new
    /// config epoch; in a group, slots being moved are each node's own
    /// state, not the log's).
    SetNode {
        slot: u16,
        node: String,
        keys_here: usize,
        imported: bool,
    },
    BumpEpoch,
    SetConfigEpoch(i64),
    Forget(String),
    /// The actor leaves the group (CLUSTER RESET of a joined node): the
    /// others forget it.
    Leave,
    /// CLUSTER REPLICATE, with how many keys the actor holds.
    Replicate {
        primary: String,
        keys_here: usize,
    },
    /// CLUSTER MIGRATION's switch: the actor (the importing node) takes
    /// `slots` from the node `from`, which served them until now.
    TakeSlots {
        slots: Vec<u16>,
        from: String,
    },
    /// A replica takes over from its primary (failure detected by the
    /// group's leader, or CLUSTER FAILOVER on the replica).
    Failover {
        failed: String,
        promoted: String,
    },
}

/// What applying a change answers: the reply's text (`OK`, `BUMPED 3`)
/// or Redis' error.
pub type Applied = Result<String, String>;

impl Change {
    /// Whether the change is the acting node's own state only (SETSLOT
    /// MIGRATING, IMPORTING, STABLE: Redis keeps them per node and does
    /// not propagate them), not an entry of the group's log.
    pub fn is_own_state(&self) -> bool {
        matches!(
            self,
            Change::SetMigrating { .. } | Change::SetImporting { .. } | Change::SetStable { .. }
        )
    }

    /// Applies the change to `topology`, made by the node `actor` (its
    /// index). A refused change leaves the topology as it was.
    pub fn apply(&self, topology: &mut Topology, actor: usize) -> Applied {
        let mut view = topology.clone();
        let me = std::mem::replace(&mut view.me, actor);
        let my_id = topology.nodes[me].id.clone();
        let answer = self.apply_as_actor(&mut view, me)?;
        // Indices may have moved (FORGET): find this node again by id. A
        // node the group forgot keeps its own view, as in Redis, until
        // it is reset; it only notes that it was forgotten.
        match view.find(&my_id) {
            Some(me) => {
                view.me = me;
                *topology = view;
            }
            None => {
                topology.forgotten.insert(my_id);
            }
        }
        Ok(answer)
    }

    /// Applies the change to `t`, whose `me` is the actor; `viewer` is
    /// the node applying it.
    fn apply_as_actor(&self, t: &mut Topology, viewer: usize) -> Applied {
        let ok = |_| "OK".to_string();
        match self {
            Change::Seed(text) => {
                // Applied by `Group` before it has a topology; as a change
                // it replaces everything.
                *t = nodes_file::decode(text)?;
                Ok("OK".into())
            }
            Change::Join { node, slots } => t.join(node.clone(), slots).map(ok),
            Change::AddSlots(slots) => t.add_slots(slots).map(ok),
            Change::DelSlots(slots) => t.del_slots(slots).map(ok),
            Change::FlushSlots => {
                t.flush_slots();
                Ok("OK".into())
            }
            Change::SetMigrating { slot, to } => t.set_migrating(*slot, to).map(ok),
            Change::SetImporting { slot, from } => t.set_importing(*slot, from).map(ok),
            Change::SetStable { slot } => {
                t.set_stable(*slot);
                Ok("OK".into())
            }
            Change::SetNode {
                slot,
                node,
                keys_here,
                imported,
            } => {
                let bumped = t.set_node(*slot, node, *keys_here)?;
                if *imported && !bumped && t.find(node) == Some(t.me) {
                    t.bump_epoch();
                }
                Ok("OK".into())
            }
            Change::BumpEpoch => {
                let word = if t.bump_epoch() { "BUMPED" } else { "STILL" };
                Ok(format!("{word} {}", t.myself().config_epoch))
            }
            Change::SetConfigEpoch(epoch) => t.set_config_epoch(*epoch).map(ok),
            Change::Forget(id) => t.forget(id).map(ok),
            Change::Leave => {
                let leaving = t.myself().id.clone();
                t.me = viewer;
                t.leave(&leaving).map(ok)
            }
            Change::Replicate { primary, keys_here } => t.replicate(primary, *keys_here).map(ok),
            Change::TakeSlots { slots, from } => t.take_slots(slots, from).map(ok),
            Change::Failover { failed, promoted } => {
                let find = |id: &str| t.find(id).ok_or_else(|| format!("ERR Unknown node {id}"));
                let (failed, promoted) = (find(failed)?, find(promoted)?);
                t.fail_over(failed, promoted).map(ok)
            }
        }
    }
}

/// A group's state: the topology once seeded, and the answer of every
/// change (deterministic: the same on every member).
pub fn apply_proposal(state: &mut Option<Topology>, proposal: &Proposal) -> Applied {
    if let Change::Seed(text) = &proposal.change {
        *state = Some(nodes_file::decode(text)?);
        return Ok("OK".into());
    }
    let Some(topology) = state else {
        return Err("ERR the cluster has no topology yet".into());
    };
    let Some(actor) = topology.find(&proposal.actor) else {
        return Err(format!("ERR Unknown node {}", proposal.actor));
    };
    proposal.change.apply(topology, actor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_act_as_their_node_and_keep_the_viewer() {
        let mut a = Topology::fresh("a".repeat(40), "s".repeat(40));
        a.add_slots(&[1, 2]).unwrap();
        let mut state = Some(a.clone());
        let b = NodeRecord {
            id: "b".repeat(40),
            shard_id: "t".repeat(40),
            ip: "127.0.0.1".into(),
            port: 7001,
            cport: 17001,
            hostname: String::new(),
            primary: None,
            config_epoch: 0,
        };
        let join = Proposal {
            actor: "a".repeat(40),
            change: Change::Join {
                node: b.clone(),
                slots: vec![2, 3],
            },
        };
        assert_eq!(apply_proposal(&mut state, &join), Ok("OK".into()));
        let t = state.as_ref().unwrap();
        assert_eq!(t.owner(2), Some(0), "a's already");
        assert_eq!(t.owner(3), Some(1), "b brought it");
        let by_b = Proposal {
            actor: "b".repeat(40),
            change: Change::AddSlots(vec![7]),
        };
        assert_eq!(apply_proposal(&mut state, &by_b), Ok("OK".into()));
        let t = state.as_ref().unwrap();
        assert_eq!((t.owner(7), t.me), (Some(1), 0), "b's slot, seen from a");
        let refused = Proposal {
            actor: "b".repeat(40),
            change: Change::AddSlots(vec![1]),
        };
        assert_eq!(
            apply_proposal(&mut state, &refused),
            Err("ERR Slot 1 is already busy".into())
        );
        let bump = Proposal {
            actor: "b".repeat(40),
            change: Change::BumpEpoch,
        };
        assert_eq!(apply_proposal(&mut state, &bump), Ok("BUMPED 1".into()));
    }

    #[test]
    fn a_forgotten_or_leaving_node_keeps_its_own_view() {
        let mut a = Topology::fresh("a".repeat(40), "s".repeat(40));
        let mut b_node = a.myself().clone();
        b_node.id = "b".repeat(40);
        a.upsert(b_node.clone());
        let mut c_node = b_node.clone();
        c_node.id = "c".repeat(40);
        a.upsert(c_node);
        let mut b = a.clone();
        b.me = 1;
        // FORGET b, made by a: a drops it; b keeps its view, noting it.
        let forget = Change::Forget("b".repeat(40));
        assert_eq!(forget.apply(&mut a, 0), Ok("OK".into()));
        assert_eq!(a.nodes.len(), 2);
        assert!(a.forgotten.contains(&"b".repeat(40)));
        let before = b.nodes.clone();
        assert_eq!(forget.apply(&mut b, 0), Ok("OK".into()));
        assert_eq!((b.nodes.clone(), b.me), (before, 1));
        assert!(b.forgotten.contains(&"b".repeat(40)));
        // c leaves (RESET): the others drop it, itself included nowhere
        // but its own view.
        let mut c = a.clone();
        c.me = c.find(&"c".repeat(40)).unwrap();
        let actor = c.me;
        assert_eq!(Change::Leave.apply(&mut a, actor), Ok("OK".into()));
        assert_eq!(a.nodes.len(), 1);
        assert_eq!(a.myself().id, "a".repeat(40));
        assert_eq!(Change::Leave.apply(&mut c, actor), Ok("OK".into()));
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.myself().id, "c".repeat(40));
        // A node joining again is no longer forgotten.
        a.join(b_node, &[]).unwrap();
        assert!(!a.forgotten.contains(&"b".repeat(40)));
    }
}
