//! The cluster's topology as one value: its nodes, which node owns each of
//! the 16 384 slots, the slots being moved, and the epochs.
//!
//! Every change is a method here that checks its arguments as Redis
//! does and answers Redis' error text, so that CLUSTER's administrative
//! subcommands are thin: they call one method under the topology's lock
//! and save. A change is deterministic (it reads nothing but the
//! topology and its arguments): the same list of changes gives every
//! node the same topology, which is what a replicated log of them needs.
//!
//! A node that was never given a topology (a fresh `cluster-enabled yes`
//! with no nodes file) serves every slot itself, so that a cluster client
//! can be pointed at one Strata: that claim is *provisional*. The first
//! ADDSLOTS(RANGE) or FLUSHSLOTS replaces it with what it assigns (a
//! cluster being created by `redis-cli --cluster create` assigns each
//! node its range that way); DELSLOTS(RANGE) and SETSLOT start from it
//! (every slot is this node's, then the change applies).

use std::collections::{BTreeMap, BTreeSet};

/// Redis Cluster's slot count.
pub const SLOTS: usize = 16384;

/// An owner index meaning "no node".
const UNOWNED: u16 = u16::MAX;

/// One node of the cluster as the topology knows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeRecord {
    /// 40 hex digits, fixed for the node's life (CLUSTER RESET HARD
    /// gives a new one).
    pub id: String,
    /// The shard (a primary and its replicas) it belongs to, 40 hex
    /// digits (Redis 7.2's `shard-id`).
    pub shard_id: String,
    /// Where clients reach it; empty for this node when nothing is
    /// announced (the address a client connected to is shown then).
    pub ip: String,
    pub port: u16,
    /// Its cluster bus port.
    pub cport: u16,
    pub hostname: String,
    /// The primary it replicates, if it is a replica.
    pub primary: Option<String>,
    pub config_epoch: u64,
}

/// How one slot is being moved (CLUSTER SETSLOT … MIGRATING/IMPORTING).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moving {
    /// This node owns the slot and sends it to that node.
    To(u16),
    /// This node receives the slot from that node.
    From(u16),
}

/// The whole topology, seen from one of its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Every node, in the order they joined.
    pub nodes: Vec<NodeRecord>,
    /// The index in `nodes` of the node this topology is seen from: the
    /// one the slot-administration methods act as (`myself`).
    pub me: usize,
    /// Per slot: the index in `nodes` of its owner, or [`UNOWNED`].
    owners: Vec<u16>,
    /// The slots each node is moving out or in, by (node, slot), with the
    /// other node's index (in Redis each node keeps its own).
    moving: BTreeMap<(u16, u16), Moving>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    /// The one node serves every slot until given a topology (module
    /// doc).
    pub provisional: bool,
    /// Nodes the group forgot (FORGET, a node leaving) while this node
    /// ran: a FORGET of one of them again answers OK (redis-cli sends
    /// FORGET to every node), and the group's leader takes them out of
    /// the Raft membership. Kept in the config file's `vars` line.
    pub forgotten: BTreeSet<String>,
}

/// What a redirection names: a node's id, address and ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
}

/// A run of consecutive slots one node owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
}

pub type Result<T> = std::result::Result<T, String>;

impl Topology {
    /// A node's first topology: itself alone, a primary serving every
    /// slot provisionally.
    pub fn fresh(id: String, shard_id: String) -> Topology {
        Topology {
            nodes: vec![NodeRecord {
                id,
                shard_id,
                ip: String::new(),
                port: 0,
                cport: 0,
                hostname: String::new(),
                primary: None,
                config_epoch: 0,
            }],
            me: 0,
            owners: vec![UNOWNED; SLOTS],
            moving: BTreeMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            provisional: true,
            forgotten: BTreeSet::new(),
        }
    }

    pub fn myself(&self) -> &NodeRecord {
        &self.nodes[self.me]
    }

    fn myself_mut(&mut self) -> &mut NodeRecord {
        let me = self.me;
        &mut self.nodes[me]
    }

    /// The index of node `id` (a node's id is case-insensitive hex).
    pub fn find(&self, id: &str) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.id.eq_ignore_ascii_case(id))
    }

    fn known(&self, id: &str) -> Result<usize> {
        self.find(id)
            .ok_or_else(|| format!("ERR I don't know about node {id}"))
    }

    /// The index of the node that owns `slot`.
    pub fn owner(&self, slot: u16) -> Option<usize> {
        // A provisional claim is the one node's.
        if self.provisional {
            return Some(0);
        }
        match self.owners[slot as usize] {
            UNOWNED => None,
            index => Some(index as usize),
        }
    }

    /// The node this node sends `slot` to, while it migrates.
    pub fn migrating_to(&self, slot: u16) -> Option<usize> {
        match self.moving.get(&(self.me as u16, slot)) {
            Some(Moving::To(node)) => Some(*node as usize),
            _ => None,
        }
    }

    /// The node this node receives `slot` from, while it imports.
    pub fn importing_from(&self, slot: u16) -> Option<usize> {
        match self.moving.get(&(self.me as u16, slot)) {
            Some(Moving::From(node)) => Some(*node as usize),
            _ => None,
        }
    }

    /// The slots node `index` is moving, in order.
    pub fn moving_of(&self, index: usize) -> impl Iterator<Item = (u16, Moving)> + '_ {
        (self.moving.iter())
            .filter(move |((node, _), _)| *node as usize == index)
            .map(|((_, slot), moving)| (*slot, *moving))
    }

    /// Slots that have an owner.
    pub fn assigned(&self) -> usize {
        (0..SLOTS as u16)
            .filter(|&s| self.owner(s).is_some())
            .count()
    }

    /// The runs of slots node `index` owns, in order.
    pub fn ranges_of(&self, index: usize) -> Vec<SlotRange> {
        let mut ranges: Vec<SlotRange> = Vec::new();
        for slot in 0..SLOTS as u16 {
            if self.owner(slot) != Some(index) {
                continue;
            }
            match ranges.last_mut() {
                Some(range) if range.last + 1 == slot => range.last = slot,
                _ => ranges.push(SlotRange {
                    first: slot,
                    last: slot,
                }),
            }
        }
        ranges
    }

    /// The slots node `index` owns.
    pub fn slots_of(&self, index: usize) -> Vec<u16> {
        (0..SLOTS as u16)
            .filter(|&s| self.owner(s) == Some(index))
            .collect()
    }

    /// The primaries that own at least one slot (CLUSTER INFO's
    /// `cluster_size`).
    pub fn serving_primaries(&self) -> usize {
        let mut serving = vec![false; self.nodes.len()];
        for slot in 0..SLOTS as u16 {
            if let Some(owner) = self.owner(slot) {
                serving[owner] = true;
            }
        }
        serving.into_iter().filter(|s| *s).count()
    }

    /// The replicas of node `index`.
    pub fn replicas_of(&self, index: usize) -> Vec<usize> {
        let id = &self.nodes[index].id;
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].primary.as_deref() == Some(id))
            .collect()
    }

    /// Whether this node owns every slot and moves none (nothing but
    /// CROSSSLOT can refuse a command then).
    pub fn serves_every_slot(&self) -> bool {
        let me = self.me as u16;
        let mine = self.provisional || self.owners.iter().all(|&o| o == me);
        let moving = self.moving_of(self.me).next().is_some();
        mine && !moving && self.myself().primary.is_none()
    }

    /// Whether the cluster can serve: every slot has an owner, unless
    /// `cluster-require-full-coverage no`.
    pub fn is_ok(&self, require_full_coverage: bool) -> bool {
        !require_full_coverage || self.assigned() == SLOTS
    }

    /// Ends the provisional claim: from no slot (`keep` false) or from
    /// every slot the one node's (`keep` true).
    fn settle(&mut self, keep: bool) {
        if std::mem::take(&mut self.provisional) {
            let owner = if keep { 0 } else { UNOWNED };
            self.owners.iter_mut().for_each(|o| *o = owner);
        }
    }

    /// CLUSTER ADDSLOTS / ADDSLOTSRANGE: `slots` become this node's.
    pub fn add_slots(&mut self, slots: &[u16]) -> Result<()> {
        let mut seen = vec![false; SLOTS];
        let provisional = self.provisional;
        for &slot in slots {
            if !provisional && self.owners[slot as usize] != UNOWNED {
                return Err(format!("ERR Slot {slot} is already busy"));
            }
            if std::mem::replace(&mut seen[slot as usize], true) {
                return Err(format!("ERR Slot {slot} specified multiple times"));
            }
        }
        self.settle(false);
        let me = self.me as u16;
        for &slot in slots {
            self.moving.remove(&(me, slot));
            self.owners[slot as usize] = me;
        }
        Ok(())
    }

    /// CLUSTER DELSLOTS / DELSLOTSRANGE: `slots` no longer have an owner.
    pub fn del_slots(&mut self, slots: &[u16]) -> Result<()> {
        let mut seen = vec![false; SLOTS];
        for &slot in slots {
            if self.owner(slot).is_none() {
                return Err(format!("ERR Slot {slot} is already unassigned"));
            }
            if std::mem::replace(&mut seen[slot as usize], true) {
                return Err(format!("ERR Slot {slot} specified multiple times"));
            }
        }
        self.settle(true);
        let me = self.me as u16;
        for &slot in slots {
            self.owners[slot as usize] = UNOWNED;
            self.moving.remove(&(me, slot));
        }
        Ok(())
    }

    /// CLUSTER FLUSHSLOTS (the caller checks that the database is empty).
    pub fn flush_slots(&mut self) {
        self.settle(false);
        let me = self.me as u16;
        for owner in &mut self.owners {
            if *owner == me {
                *owner = UNOWNED;
            }
        }
        self.moving.retain(|(node, _), _| *node != me);
    }

    /// CLUSTER SETSLOT slot MIGRATING node-id.
    pub fn set_migrating(&mut self, slot: u16, to: &str) -> Result<()> {
        if self.owner(slot) != Some(self.me) {
            return Err(format!("ERR I'm not the owner of hash slot {slot}"));
        }
        let to = self.known(to)?;
        if self.nodes[to].primary.is_some() {
            return Err("ERR Target node is not a master".into());
        }
        self.settle(true);
        (self.moving).insert((self.me as u16, slot), Moving::To(to as u16));
        Ok(())
    }

    /// CLUSTER SETSLOT slot IMPORTING node-id.
    pub fn set_importing(&mut self, slot: u16, from: &str) -> Result<()> {
        if self.owner(slot) == Some(self.me) {
            return Err(format!("ERR I'm already the owner of hash slot {slot}"));
        }
        let from = self.known(from)?;
        if self.nodes[from].primary.is_some() {
            return Err("ERR Target node is not a master".into());
        }
        self.settle(true);
        (self.moving).insert((self.me as u16, slot), Moving::From(from as u16));
        Ok(())
    }

    /// CLUSTER SETSLOT slot STABLE.
    pub fn set_stable(&mut self, slot: u16) {
        self.moving.remove(&(self.me as u16, slot));
    }

    /// CLUSTER SETSLOT slot NODE node-id: `keys_here` is how many keys of
    /// the slot this node holds (it may not give away a slot with keys
    /// unless it is migrating it). Returns whether this node's config
    /// epoch was bumped (it took the slot over from an import).
    pub fn set_node(&mut self, slot: u16, id: &str, keys_here: usize) -> Result<bool> {
        let node = self
            .find(id)
            .ok_or_else(|| format!("ERR Unknown node {id}"))?;
        if self.nodes[node].primary.is_some() {
            return Err("ERR Target node is not a master".into());
        }
        let me = self.me;
        if self.owner(slot) == Some(me) && node != me && keys_here > 0 {
            return Err(format!(
                "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
            ));
        }
        self.settle(true);
        let imported = node == me && self.importing_from(slot).is_some();
        if (self.migrating_to(slot).is_some() && keys_here == 0) || imported {
            self.moving.remove(&(me as u16, slot));
        }
        self.owners[slot as usize] = node as u16;
        if imported {
            self.bump_epoch();
        }
        Ok(imported)
    }

    /// CLUSTER MIGRATION's switch, as the importing node: `slots`, each
    /// served by `from` until now, become this node's in one step, with a
    /// new greatest config epoch; any move of them noted by SETSLOT ends.
    /// Slots already this node's are taken again without a change (the
    /// switch may be retried).
    pub fn take_slots(&mut self, slots: &[u16], from: &str) -> Result<()> {
        let from_index = self
            .find(from)
            .ok_or_else(|| format!("ERR Unknown node {from}"))?;
        let me = self.me;
        if self.myself().primary.is_some() {
            return Err("ERR Target node is not a master".into());
        }
        if slots.iter().all(|&slot| self.owner(slot) == Some(me)) {
            return Ok(());
        }
        if let Some(&slot) = (slots.iter()).find(|&&slot| self.owner(slot) != Some(from_index)) {
            return Err(format!("ERR Slot {slot} is not served by node {from}"));
        }
        self.settle(true);
        for &slot in slots {
            self.owners[slot as usize] = me as u16;
            self.moving.retain(|&(_, moving), _| moving != slot);
        }
        self.bump_epoch();
        Ok(())
    }

    /// CLUSTER BUMPEPOCH: this node's config epoch becomes a new greatest
    /// one, unless it already is the greatest (and not 0). Returns
    /// whether it changed.
    pub fn bump_epoch(&mut self) -> bool {
        let mine = self.myself().config_epoch;
        let greatest =
            (self.nodes.iter().map(|n| n.config_epoch)).fold(self.current_epoch, u64::max);
        if mine == 0 || mine != greatest {
            self.current_epoch = greatest + 1;
            self.myself_mut().config_epoch = greatest + 1;
            true
        } else {
            false
        }
    }

    /// CLUSTER SET-CONFIG-EPOCH: only on a node that has never had one
    /// and knows no other node.
    pub fn set_config_epoch(&mut self, epoch: i64) -> Result<()> {
        if epoch < 0 {
            return Err(format!("ERR Invalid config epoch specified: {epoch}"));
        }
        if self.nodes.len() > 1 {
            return Err(
                "ERR The user can assign a config epoch only when the node does not know any other node."
                    .into(),
            );
        }
        if self.myself().config_epoch != 0 {
            return Err("ERR Node config epoch is already non-zero".into());
        }
        self.myself_mut().config_epoch = epoch as u64;
        self.current_epoch = self.current_epoch.max(epoch as u64);
        Ok(())
    }

    /// CLUSTER FORGET node-id.
    pub fn forget(&mut self, id: &str) -> Result<()> {
        let Some(node) = self.find(id) else {
            // Forgotten already: redis-cli sends FORGET to every node, and
            // in a group the first one removed it from all.
            return match self.forgotten.contains(id) {
                true => Ok(()),
                false => Err(format!("ERR Unknown node {id}")),
            };
        };
        if node == self.me {
            return Err("ERR I tried hard but I can't forget myself...".into());
        }
        if self.myself().primary.as_deref() == Some(&self.nodes[node].id) {
            return Err("ERR Can't forget my master!".into());
        }
        self.remove_node(node);
        Ok(())
    }

    /// Drops node `index` (never this one): its slots lose their owner
    /// and its moves end; indices above it move down.
    pub fn remove_node(&mut self, index: usize) {
        assert_ne!(index, self.me, "a node never drops itself");
        let removed = index as u16;
        let shift = |n: u16| if n > removed { n - 1 } else { n };
        for owner in &mut self.owners {
            if *owner == removed {
                *owner = UNOWNED;
            } else if *owner != UNOWNED {
                *owner = shift(*owner);
            }
        }
        let moving = std::mem::take(&mut self.moving);
        for ((node, slot), moving) in moving {
            let other = match moving {
                Moving::To(n) | Moving::From(n) => n,
            };
            if node == removed || other == removed {
                continue;
            }
            let moving = match moving {
                Moving::To(n) => Moving::To(shift(n)),
                Moving::From(n) => Moving::From(shift(n)),
            };
            self.moving.insert((shift(node), slot), moving);
        }
        let removed_id = self.nodes[index].id.clone();
        for node in &mut self.nodes {
            if node.primary.as_deref() == Some(&removed_id) {
                node.primary = None;
            }
        }
        self.nodes.remove(index);
        self.forgotten.insert(removed_id);
        if self.me > index {
            self.me -= 1;
        }
    }

    /// The node `id` leaves (CLUSTER RESET of a node in a group): the
    /// others forget it as FORGET would, with no check but that it is
    /// known. Seen from the leaving node nothing changes but `forgotten`
    /// (its own view is reset by itself).
    pub fn leave(&mut self, id: &str) -> Result<()> {
        let node = self
            .find(id)
            .ok_or_else(|| format!("ERR Unknown node {id}"))?;
        if node == self.me {
            self.forgotten.insert(id.to_string());
            return Ok(());
        }
        self.remove_node(node);
        Ok(())
    }

    /// CLUSTER RESET: this node forgets every other node and its slots
    /// (the caller checks that a primary holds no keys). HARD also takes
    /// a new id and sets the epochs to 0.
    pub fn reset(&mut self, hard: Option<(String, String)>) {
        let myself = self.myself().clone();
        let epochs = (self.current_epoch, self.last_vote_epoch);
        *self = Topology::fresh(myself.id.clone(), myself.shard_id.clone());
        self.provisional = false;
        self.nodes[0] = NodeRecord {
            primary: None,
            ..myself
        };
        (self.current_epoch, self.last_vote_epoch) = epochs;
        if let Some((id, shard_id)) = hard {
            let me = self.myself_mut();
            me.id = id;
            me.shard_id = shard_id;
            me.config_epoch = 0;
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
        }
    }

    /// CLUSTER REPLICATE node-id: this node becomes a replica of that
    /// primary (and of its shard). A primary must hold no slot and, by
    /// `keys_here`, no key first.
    pub fn replicate(&mut self, id: &str, keys_here: usize) -> Result<()> {
        let primary = self
            .find(id)
            .ok_or_else(|| format!("ERR Unknown node {id}"))?;
        if primary == self.me {
            return Err("ERR Can't replicate myself".into());
        }
        if self.nodes[primary].primary.is_some() {
            return Err("ERR I can only replicate a master, not a replica.".into());
        }
        let owns_slots = !self.provisional && self.owners.contains(&(self.me as u16));
        if self.myself().primary.is_none() && (owns_slots || keys_here > 0) {
            return Err(
                "ERR To set a master the node must be empty and without assigned slots.".into(),
            );
        }
        let (id, shard_id) = (
            self.nodes[primary].id.clone(),
            self.nodes[primary].shard_id.clone(),
        );
        let me = self.me as u16;
        self.moving.retain(|(node, _), _| *node != me);
        let myself = self.myself_mut();
        myself.primary = Some(id);
        myself.shard_id = shard_id;
        Ok(())
    }

    /// A failover: replica `promoted` takes primary `failed`'s slots with
    /// a new greatest config epoch; `failed` and the other replicas of it
    /// become the new primary's replicas.
    pub fn fail_over(&mut self, failed: usize, promoted: usize) -> Result<()> {
        let failed_id = self.nodes[failed].id.clone();
        if self.nodes[promoted].primary.as_deref() != Some(&failed_id) {
            return Err("ERR the node to promote does not replicate that primary".into());
        }
        let promoted_id = self.nodes[promoted].id.clone();
        for owner in &mut self.owners {
            if *owner == failed as u16 {
                *owner = promoted as u16;
            }
        }
        let (failed16, promoted16) = (failed as u16, promoted as u16);
        self.moving
            .retain(|(node, _), _| *node != failed16 && *node != promoted16);
        for (index, node) in self.nodes.iter_mut().enumerate() {
            if index == promoted {
                node.primary = None;
            } else if index == failed || node.primary.as_deref() == Some(&failed_id) {
                node.primary = Some(promoted_id.clone());
            }
        }
        let greatest =
            (self.nodes.iter().map(|n| n.config_epoch)).fold(self.current_epoch, u64::max);
        self.current_epoch = greatest + 1;
        self.nodes[promoted].config_epoch = greatest + 1;
        Ok(())
    }

    /// CLUSTER MEET's outcome: `node` joins (or, known already, has its
    /// address updated), and the `slots` it had given itself become its
    /// own where no node owns them. The one node's provisional claim
    /// becomes its own first.
    pub fn join(&mut self, node: NodeRecord, slots: &[u16]) -> Result<()> {
        if let Some(known) = self.find(&node.id) {
            let record = &mut self.nodes[known];
            (record.ip, record.port, record.cport) = (node.ip, node.port, node.cport);
            return Ok(());
        }
        self.settle(true);
        self.forgotten.remove(&node.id);
        self.current_epoch = self.current_epoch.max(node.config_epoch);
        let index = self.upsert(node) as u16;
        for &slot in slots {
            let owner = &mut self.owners[slot as usize % SLOTS];
            if *owner == UNOWNED {
                *owner = index;
            }
        }
        Ok(())
    }

    /// Adds a node (or updates the one with its id); returns its index.
    pub fn upsert(&mut self, node: NodeRecord) -> usize {
        match self.find(&node.id) {
            Some(index) => {
                self.nodes[index] = node;
                index
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }

    /// Sets the owner of `slot` directly (loading a nodes file).
    pub(crate) fn set_owner(&mut self, slot: u16, index: Option<usize>) {
        self.settle(false);
        self.owners[slot as usize] = index.map_or(UNOWNED, |i| i as u16);
    }

    /// Sets how node `index` moves `slot` directly (loading a nodes file).
    pub(crate) fn set_moving(&mut self, index: usize, slot: u16, moving: Moving) {
        self.moving.insert((index as u16, slot), moving);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, port: u16) -> NodeRecord {
        NodeRecord {
            id: id.repeat(40),
            shard_id: id.repeat(40),
            ip: "127.0.0.1".into(),
            port,
            cport: port + 10000,
            hostname: String::new(),
            primary: None,
            config_epoch: 0,
        }
    }

    #[test]
    fn a_fresh_node_serves_every_slot_until_given_some() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        assert_eq!(t.owner(0), Some(0));
        assert_eq!(t.assigned(), SLOTS);
        assert_eq!(
            t.ranges_of(0),
            vec![SlotRange {
                first: 0,
                last: 16383
            }]
        );
        t.add_slots(&[5, 6, 7]).unwrap();
        assert_eq!(t.ranges_of(0), vec![SlotRange { first: 5, last: 7 }]);
        assert_eq!(t.owner(4), None);
        assert_eq!(t.add_slots(&[6]), Err("ERR Slot 6 is already busy".into()));
        assert_eq!(
            t.add_slots(&[9, 9]),
            Err("ERR Slot 9 specified multiple times".into())
        );
        assert_eq!(t.owner(9), None, "a refused change changes nothing");
        assert!(!t.is_ok(true));
        assert!(t.is_ok(false));
    }

    /// CLUSTER MIGRATION's switch: the slots change hands at once, the
    /// taker gets the greatest epoch, and a slot the giver does not
    /// serve refuses the whole change.
    #[test]
    fn taking_slots_moves_them_in_one_step() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.add_slots(&[1]).unwrap();
        let b = t.upsert(node("b", 7001));
        t.set_owner(10, Some(b));
        t.set_owner(11, Some(b));
        t.set_owner(12, Some(b));
        t.nodes[b].config_epoch = 5;
        t.set_moving(0, 10, Moving::From(b as u16));
        t.take_slots(&[10, 11], &"b".repeat(40)).unwrap();
        assert_eq!(
            (t.owner(10), t.owner(11), t.owner(12)),
            (Some(0), Some(0), Some(b))
        );
        assert_eq!(t.myself().config_epoch, 6, "a new greatest epoch");
        assert_eq!(
            t.importing_from(10),
            None,
            "the move noted by SETSLOT ended"
        );
        let before = t.clone();
        t.take_slots(&[10, 11], &"b".repeat(40)).unwrap();
        assert_eq!(t, before, "taken again: nothing changes");
        assert_eq!(
            t.take_slots(&[12, 13], &"b".repeat(40)),
            Err(format!(
                "ERR Slot 13 is not served by node {}",
                "b".repeat(40)
            ))
        );
        assert_eq!(t.owner(12), Some(b), "a refused change changes nothing");
        assert!(t.take_slots(&[12], &"c".repeat(40)).is_err());
    }

    #[test]
    fn deleting_from_the_provisional_claim_keeps_the_rest() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.del_slots(&[100]).unwrap();
        assert_eq!(
            t.ranges_of(0),
            vec![
                SlotRange { first: 0, last: 99 },
                SlotRange {
                    first: 101,
                    last: 16383
                }
            ]
        );
        assert_eq!(
            t.del_slots(&[100]),
            Err("ERR Slot 100 is already unassigned".into())
        );
        t.flush_slots();
        assert_eq!(t.assigned(), 0);
    }

    #[test]
    fn slots_move_between_known_nodes() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.add_slots(&[1, 2]).unwrap();
        let b = t.upsert(node("b", 7001));
        assert_eq!(
            t.set_migrating(1, &"c".repeat(40)),
            Err(format!("ERR I don't know about node {}", "c".repeat(40)))
        );
        t.set_migrating(1, &"b".repeat(40)).unwrap();
        assert_eq!(t.migrating_to(1), Some(b));
        assert!(
            t.set_node(1, &"b".repeat(40), 3).is_err(),
            "keys still here"
        );
        t.set_node(1, &"b".repeat(40), 0).unwrap();
        assert_eq!(t.owner(1), Some(b));
        assert_eq!(t.migrating_to(1), None);
        // Importing it back bumps this node's epoch when it takes it.
        t.set_importing(1, &"b".repeat(40)).unwrap();
        assert_eq!(t.importing_from(1), Some(b));
        assert_eq!(t.set_node(1, &"a".repeat(40), 0), Ok(true));
        assert_eq!(t.owner(1), Some(0));
        assert_eq!(t.myself().config_epoch, 1);
        t.forget(&"b".repeat(40)).unwrap();
        assert_eq!(t.nodes.len(), 1);
        assert_eq!(
            t.forget(&"a".repeat(40)),
            Err("ERR I tried hard but I can't forget myself...".into())
        );
    }

    #[test]
    fn forgetting_a_node_keeps_the_others_straight() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.add_slots(&[1, 2, 3]).unwrap();
        let b = t.upsert(node("b", 7001));
        let c = t.upsert(node("c", 7002));
        t.set_owner(10, Some(b));
        t.set_owner(11, Some(c));
        t.set_migrating(1, &"c".repeat(40)).unwrap();
        t.set_migrating(2, &"b".repeat(40)).unwrap();
        // Seen from c, with c's own move.
        let mut from_c = t.clone();
        from_c.me = c;
        from_c.set_importing(1, &"a".repeat(40)).unwrap();
        from_c.forget(&"b".repeat(40)).unwrap();
        assert_eq!((from_c.me, from_c.nodes.len()), (1, 2));
        assert_eq!(from_c.owner(11), Some(1), "c's slot, c now index 1");
        assert_eq!(from_c.owner(10), None, "b's slot");
        assert_eq!(from_c.importing_from(1), Some(0), "from a");
        from_c.me = 0;
        assert_eq!(from_c.migrating_to(1), Some(1), "a's move to c");
        assert_eq!(from_c.migrating_to(2), None, "a's move to b ended");
    }

    #[test]
    fn a_replica_takes_over_its_primarys_slots() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.add_slots(&[1, 2]).unwrap();
        let b = t.upsert(node("b", 7001));
        let c = t.upsert(node("c", 7002));
        // b replicates a (b has no slot); a cannot, holding slots.
        t.me = b;
        assert_eq!(
            t.replicate(&"b".repeat(40), 0),
            Err("ERR Can't replicate myself".into())
        );
        t.replicate(&"a".repeat(40), 0).unwrap();
        assert_eq!(t.myself().shard_id, "s".repeat(40), "a's shard");
        t.me = c;
        assert_eq!(
            t.replicate(&"b".repeat(40), 0),
            Err("ERR I can only replicate a master, not a replica.".into())
        );
        assert_eq!(
            t.replicate(&"a".repeat(40), 3),
            Err("ERR To set a master the node must be empty and without assigned slots.".into())
        );
        t.me = 0;
        assert_eq!(
            t.replicate(&"c".repeat(40), 0),
            Err("ERR To set a master the node must be empty and without assigned slots.".into())
        );
        assert_eq!(t.replicas_of(0), vec![b]);
        t.fail_over(0, b).unwrap();
        assert_eq!((t.owner(1), t.owner(2)), (Some(b), Some(b)));
        assert_eq!(t.nodes[0].primary.as_deref(), Some(&*"b".repeat(40)));
        assert_eq!(t.nodes[b].primary, None);
        assert_eq!(t.nodes[b].config_epoch, t.current_epoch);
        assert!(t.fail_over(0, c).is_err(), "c does not replicate a");
    }

    #[test]
    fn epochs() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        assert!(t.bump_epoch());
        assert_eq!((t.current_epoch, t.myself().config_epoch), (1, 1));
        assert!(!t.bump_epoch(), "already the greatest and not shared");
        let mut other = Topology::fresh("a".repeat(40), "s".repeat(40));
        other.set_config_epoch(5).unwrap();
        assert_eq!(other.current_epoch, 5);
        assert_eq!(
            other.set_config_epoch(6),
            Err("ERR Node config epoch is already non-zero".into())
        );
    }
}
