//! Whether this node serves a command's keys, or where to send the
//! client: Redis Cluster's redirections, decided as Redis decides them
//! (its `getNodeByQuery`), from the topology and the command's keys.
//!
//! - Keys of different slots: CROSSSLOT.
//! - A slot with no owner: CLUSTERDOWN Hash slot not served.
//! - The cluster not ok: CLUSTERDOWN, or, with
//!   `cluster-allow-reads-when-down yes`, only writes refused.
//! - A slot this node migrates: served if every key is here, ASK to the
//!   node it goes to if none is, TRYAGAIN if some are.
//! - A slot this node imports: served after ASKING (TRYAGAIN for several
//!   keys of which some are still missing), MOVED to the owner otherwise.
//! - A slot another node owns: MOVED (served after READONLY, for reads,
//!   when this node replicates that owner).
//!
//! Sharded pub/sub channels count as keys for the slot, but are never
//! looked up.

use super::topology::Topology;

/// A key (or sharded channel) with its slot and whether it is a channel.
pub type SlotKey<'k> = (&'k [u8], u16, bool);

/// A command's keys as routing sees them.
pub struct Query<'q, 'k> {
    pub keys: &'q [SlotKey<'k>],
    /// The command writes (EXEC: one of its commands does).
    pub write: bool,
    /// The client sent ASKING before it (or the command implies it).
    pub asking: bool,
    /// The client sent READONLY.
    pub readonly: bool,
    /// MIGRATE: served wherever a slot is being moved.
    pub migrate: bool,
}

/// What the cluster's settings say about serving while it is down.
#[derive(Clone, Copy)]
pub struct Health {
    pub ok: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
}

/// Why this node does not serve a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirect {
    CrossSlot,
    TryAgain,
    Down,
    DownReadOnly,
    Unbound,
    /// To node index `node` of the topology.
    Moved {
        slot: u16,
        node: usize,
    },
    Ask {
        slot: u16,
        node: usize,
    },
}

/// The slot this node serves the query in (None: it names no key), or
/// the redirection. `exists` tells whether a key is here (asked only for
/// slots being moved).
pub fn route(
    t: &Topology,
    query: &Query<'_, '_>,
    health: Health,
    mut exists: impl FnMut(&[u8]) -> bool,
) -> Result<Option<u16>, Redirect> {
    let Some(&(first_key, slot, _)) = query.keys.first() else {
        return Ok(None);
    };
    let Some(owner) = t.owner(slot) else {
        return Err(Redirect::Unbound);
    };
    let migrating = owner == t.me && t.migrating_to(slot).is_some();
    let importing = !migrating && t.importing_from(slot).is_some();
    let channels = query.keys.iter().any(|k| k.2);
    let (mut missing, mut present, mut several) = (0, 0, false);
    for &(key, key_slot, _) in query.keys {
        if key_slot != slot {
            return Err(Redirect::CrossSlot);
        }
        several |= importing && key != first_key;
        if (migrating || importing) && !channels {
            match exists(key) {
                true => present += 1,
                false => missing += 1,
            }
        }
    }
    if !health.ok {
        if channels {
            if !health.allow_pubsubshard_when_down {
                return Err(Redirect::Down);
            }
        } else if !health.allow_reads_when_down {
            return Err(Redirect::Down);
        } else if query.write {
            return Err(Redirect::DownReadOnly);
        }
    }
    if (migrating || importing) && query.migrate {
        return Ok(Some(slot));
    }
    if migrating && missing > 0 {
        return match present > 0 {
            true => Err(Redirect::TryAgain),
            false => Err(Redirect::Ask {
                slot,
                node: t.migrating_to(slot).expect("migrating"),
            }),
        };
    }
    if importing && query.asking {
        return match several && missing > 0 {
            true => Err(Redirect::TryAgain),
            false => Ok(Some(slot)),
        };
    }
    let replica_of_owner = t.myself().primary.as_deref() == Some(&t.nodes[owner].id);
    if (query.readonly || channels) && !query.write && replica_of_owner {
        return Ok(Some(slot));
    }
    match owner == t.me {
        true => Ok(Some(slot)),
        false => Err(Redirect::Moved { slot, node: owner }),
    }
}

impl Redirect {
    /// The error a client gets, as Redis words it; `endpoint` names a
    /// node as clients reach it (`ip:port`).
    pub fn text(&self, endpoint: impl Fn(usize) -> String) -> String {
        match self {
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::Down => "CLUSTERDOWN The cluster is down".into(),
            Redirect::DownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts read commands".into()
            }
            Redirect::Unbound => "CLUSTERDOWN Hash slot not served".into(),
            Redirect::Moved { slot, node } => format!("MOVED {slot} {}", endpoint(*node)),
            Redirect::Ask { slot, node } => format!("ASK {slot} {}", endpoint(*node)),
        }
    }

    /// What a script's command gets instead (Redis' texts for scripts).
    pub fn script_text(&self, command: &str) -> String {
        match self {
            Redirect::DownReadOnly => "ERR Script attempted to execute a write command while the cluster is down and readonly".into(),
            Redirect::Down => "ERR Script attempted to execute a command while the cluster is down".into(),
            Redirect::CrossSlot => format!("ERR Command '{command}' in script attempted to access keys that do not hash to the same slot"),
            _ => "ERR Script attempted to access a non local key in a cluster node".into(),
        }
    }
}

/// The CROSSSLOT refusal, if `keys` are not all of one slot (all that can
/// refuse a command on a node that serves every slot).
pub fn cross_slot(keys: &[SlotKey]) -> Option<Redirect> {
    let first = keys.first()?.1;
    keys.iter()
        .any(|k| k.1 != first)
        .then_some(Redirect::CrossSlot)
}

/// Whether an error text is one of the redirections (EXEC answers it
/// as it is, not as EXECABORT).
pub fn is_redirect(text: &str) -> bool {
    ["MOVED ", "ASK ", "CROSSSLOT ", "TRYAGAIN ", "CLUSTERDOWN "]
        .iter()
        .any(|p| text.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::super::topology::NodeRecord;
    use super::*;
    use strata_engine::keyspace::shards::key_slot;

    const OK: Health = Health {
        ok: true,
        allow_reads_when_down: false,
        allow_pubsubshard_when_down: true,
    };

    fn two_nodes() -> Topology {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.upsert(NodeRecord {
            id: "b".repeat(40),
            shard_id: "t".repeat(40),
            ip: "10.0.0.2".into(),
            port: 7001,
            cport: 17001,
            hostname: String::new(),
            primary: None,
            config_epoch: 1,
        });
        t.add_slots(&(0..8192).collect::<Vec<_>>()).unwrap();
        for slot in 8192..16384 {
            t.set_owner(slot, Some(1));
        }
        t
    }

    fn query<'k>(keys: &[&'k str], write: bool) -> Query<'static, 'k> {
        let keys: Vec<SlotKey<'k>> = keys
            .iter()
            .map(|k| (k.as_bytes(), key_slot(k.as_bytes()), false))
            .collect();
        Query {
            keys: Vec::leak(keys),
            write,
            asking: false,
            readonly: false,
            migrate: false,
        }
    }

    #[test]
    fn keys_are_served_moved_or_refused() {
        let t = two_nodes();
        // "foo" is slot 12182 (node b), "bar" 5061 (here).
        let none = |_: &[u8]| false;
        assert_eq!(route(&t, &query(&["bar"], true), OK, none), Ok(Some(5061)));
        assert_eq!(
            route(&t, &query(&["foo"], false), OK, none),
            Err(Redirect::Moved {
                slot: 12182,
                node: 1
            })
        );
        assert_eq!(
            route(&t, &query(&["foo", "bar"], false), OK, none),
            Err(Redirect::CrossSlot)
        );
        assert_eq!(
            route(&t, &query(&["{bar}1", "{bar}2"], false), OK, none),
            Ok(Some(5061))
        );
        assert_eq!(route(&t, &query(&[], true), OK, none), Ok(None));
        let text = Redirect::Moved {
            slot: 12182,
            node: 1,
        }
        .text(|n| format!("{}:{}", t.nodes[n].ip, t.nodes[n].port));
        assert_eq!(text, "MOVED 12182 10.0.0.2:7001");
    }

    #[test]
    fn a_down_cluster_refuses_or_serves_reads() {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.del_slots(&[5061]).unwrap();
        let none = |_: &[u8]| false;
        assert_eq!(
            route(&t, &query(&["bar"], false), OK, none),
            Err(Redirect::Unbound)
        );
        let down = Health { ok: false, ..OK };
        assert_eq!(
            route(&t, &query(&["{x}"], false), down, none),
            Err(Redirect::Down)
        );
        let reads = Health {
            allow_reads_when_down: true,
            ..down
        };
        assert_eq!(
            route(&t, &query(&["{x}"], true), reads, none),
            Err(Redirect::DownReadOnly)
        );
        assert!(route(&t, &query(&["{x}"], false), reads, none).is_ok());
    }

    #[test]
    fn slots_being_moved_ask_or_try_again() {
        let mut t = two_nodes();
        t.set_migrating(5061, &"b".repeat(40)).unwrap();
        let here = |k: &[u8]| k == b"{bar}here";
        assert_eq!(
            route(&t, &query(&["{bar}here"], true), OK, here),
            Ok(Some(5061))
        );
        assert_eq!(
            route(&t, &query(&["{bar}gone"], true), OK, here),
            Err(Redirect::Ask {
                slot: 5061,
                node: 1
            })
        );
        assert_eq!(
            route(&t, &query(&["{bar}here", "{bar}gone"], true), OK, here),
            Err(Redirect::TryAgain)
        );
        let mut migrate = query(&["{bar}gone"], true);
        migrate.migrate = true;
        assert_eq!(route(&t, &migrate, OK, here), Ok(Some(5061)));
        // Importing "foo"'s slot: only after ASKING.
        t.set_importing(12182, &"b".repeat(40)).unwrap();
        let mut asking = query(&["foo"], true);
        assert!(matches!(
            route(&t, &asking, OK, here),
            Err(Redirect::Moved { .. })
        ));
        asking.asking = true;
        assert_eq!(route(&t, &asking, OK, here), Ok(Some(12182)));
        let mut several = query(&["{foo}a", "{foo}b"], true);
        several.asking = true;
        assert_eq!(route(&t, &several, OK, here), Err(Redirect::TryAgain));
    }
}
