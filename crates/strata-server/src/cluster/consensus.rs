//! Topology by Raft: the nodes of a cluster form one openraft group whose
//! log entries are topology changes ([`super::change`]); every member
//! applies them in log order and serves by the result.
//!
//! A node starts alone, with no group: its changes apply at once, as
//! before it met anyone. CLUSTER MEET joins two nodes. The node told to
//! MEET asks the other over the bus who it is (HELLO). If the other
//! belongs to a group, or neither does, it asks the other to take it in
//! (JOIN); otherwise its own group takes the other in. The node that
//! takes a node in starts a group if it has none (itself the only
//! voter; its topology, slots given before included, is the first entry,
//! SEED), then, through the leader: a JOIN entry (the node and the slots
//! it had given itself), the node added as a learner (it receives the
//! log) and made a voter. From then on every administrative subcommand,
//! on any member, is a proposal: forwarded to the leader, answered once
//! applied.
//!
//! openraft runs on a runtime of its own (one thread, `strata-cluster`),
//! beside the bus's listener. Commands reach it from network threads by
//! spawning onto it and waiting (bounded) for the answer.
//!
//! Replicas follow their primary (`Local`'s role hook). Every 100 ms the
//! leader asks each primary that has replicas who it is; one that has
//! not answered for `cluster-node-timeout` is failed over to its replica
//! with the greatest replication offset (a FAILOVER entry). Each node
//! notes when it last heard from the majority, for its lease
//! (`Local::lease_ok`). Not built yet: slots moving by their shards,
//! FORGET leaving the group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::raft::AppendEntriesResponse;
use openraft::{BasicNode, ChangeMembers, Config, Raft, ServerState};

use super::bus::{self, Hello, Peer, Request, Response};
use super::change::{Applied, Change, Proposal};
use super::local::Local;
use super::nodes_file;
use super::raft_store::{NodeId, Store, TypeConfig};
use super::topology::{NodeRecord, Topology};

/// How long a proposal, a join or a bus call may take before the
/// command answers that it timed out.
const WAIT: Duration = Duration::from_secs(10);

/// A node's Raft id: the first 16 hex digits of its 40-digit id.
pub fn raft_id(id: &str) -> NodeId {
    u64::from_str_radix(id.get(..16).unwrap_or("0"), 16).unwrap_or(0)
}

/// This node's part in its group.
pub struct Consensus {
    runtime: tokio::runtime::Handle,
    raft: Raft<TypeConfig>,
    store: Arc<Store>,
    local: Arc<Local>,
}

/// The timings: a heartbeat every 100 ms, an election after 300–600 ms
/// without one (openraft adds its leader lease first).
fn config() -> Arc<Config> {
    let config = Config {
        cluster_name: "strata".into(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        install_snapshot_timeout: 2000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(200),
        max_in_snapshot_log_to_keep: 50,
        ..Config::default()
    };
    Arc::new(config.validate().expect("valid Raft timings"))
}

impl Consensus {
    /// Starts this node's Raft instance on its own thread, over the
    /// storage in `dir`, and serves the bus on `listener`.
    pub fn start(
        dir: &std::path::Path,
        local: Arc<Local>,
        listener: std::net::TcpListener,
    ) -> Result<Consensus, String> {
        let installer = local.clone();
        let store = Store::open(
            dir,
            Box::new(move |topology: &Topology| installer.install(topology)),
        )
        .map_err(|e| format!("{}: {e}", dir.display()))?;
        if let Some(topology) = store.topology() {
            local.install(&topology);
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cluster bus: {e}"))?;
        let my_id = raft_id(&local.read().myself().id);
        let (sender, receiver) = std::sync::mpsc::channel();
        let thread_store = store.clone();
        std::thread::Builder::new()
            .name("strata-cluster".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = sender.send(Err(format!("cluster runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let (log, machine) = openraft::storage::Adaptor::new(thread_store);
                    let raft = match Raft::new(my_id, config(), bus::Network, log, machine).await {
                        Ok(raft) => raft,
                        Err(e) => {
                            let _ = sender.send(Err(format!("cluster Raft: {e}")));
                            return;
                        }
                    };
                    let _ = sender.send(Ok((tokio::runtime::Handle::current(), raft)));
                    std::future::pending::<()>().await;
                });
            })
            .map_err(|e| format!("cluster thread: {e}"))?;
        let (runtime, raft) = receiver
            .recv()
            .map_err(|_| "the cluster thread stopped".to_string())??;
        let consensus = Consensus {
            runtime,
            raft,
            store,
            local,
        };
        consensus.serve_bus(listener);
        consensus.watch();
        Ok(consensus)
    }

    /// Every 100 ms: notes the group's size and, on the leader, its
    /// contact with a majority (the lease), and looks for failed
    /// primaries to fail over.
    fn watch(&self) {
        let (raft, local) = (self.raft.clone(), self.local.clone());
        self.runtime.spawn(async move {
            let mut answered: BTreeMap<String, u64> = BTreeMap::new();
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let metrics = raft.metrics().borrow().clone();
                let voters = metrics.membership_config.membership().voter_ids().count();
                local.set_voters(voters);
                if metrics.state != ServerState::Leader {
                    answered.clear();
                    continue;
                }
                let now = crate::util::now_ms();
                if let Some(ms) = metrics.millis_since_quorum_ack {
                    local.note_contact(now.saturating_sub(ms));
                }
                if voters <= 1 {
                    local.note_contact(now);
                }
                detect_failures(&raft, &local, &mut answered, now).await;
            }
        });
    }

    /// Whether this node belongs to a group (it changes its topology by
    /// proposals then).
    pub fn in_group(&self) -> bool {
        self.store.has_state()
    }

    /// Proposes `change` made by this node and waits for its answer.
    pub fn propose(&self, change: Change) -> Applied {
        let proposal = Proposal {
            actor: self.local.read().myself().id.clone(),
            change,
        };
        let raft = self.raft.clone();
        self.block_on(async move { propose(&raft, proposal).await })
    }

    /// CLUSTER FAILOVER on a replica: it takes over from its primary now.
    pub fn fail_over(&self) -> Applied {
        let (me, primary) = {
            let topology = self.local.read();
            let myself = topology.myself();
            (myself.id.clone(), myself.primary.clone())
        };
        let Some(failed) = primary else {
            return Err("ERR You should send CLUSTER FAILOVER to a replica".into());
        };
        self.propose(Change::Failover {
            failed,
            promoted: me,
        })
    }

    /// CLUSTER MEET: joins the node whose bus is at `ip:cport` in the
    /// background (as Redis' MEET answers before the handshake).
    pub fn meet(&self, ip: String, cport: u16) {
        let (raft, store, local) = (self.raft.clone(), self.store.clone(), self.local.clone());
        self.runtime.spawn(async move {
            if let Err(why) = meet(&raft, &store, &local, &ip, cport).await {
                crate::log_warning!("CLUSTER MEET {ip}:{cport} failed: {why}");
            }
        });
    }

    /// Runs `work` on the cluster runtime and waits for it, at most
    /// [`WAIT`].
    fn block_on<F>(&self, work: F) -> Applied
    where
        F: std::future::Future<Output = Applied> + Send + 'static,
    {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = sender.send(work.await);
        });
        receiver
            .recv_timeout(WAIT + Duration::from_secs(1))
            .unwrap_or_else(|_| Err("ERR the cluster did not apply the change in time".into()))
    }

    /// Accepts bus connections and answers their requests.
    fn serve_bus(&self, listener: std::net::TcpListener) {
        let (raft, store, local) = (self.raft.clone(), self.store.clone(), self.local.clone());
        self.runtime.spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => listener,
                Err(e) => {
                    crate::log_warning!("cluster bus: {e}");
                    return;
                }
            };
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let (raft, store, local) = (raft.clone(), store.clone(), local.clone());
                tokio::spawn(async move {
                    let _ = serve_peer(stream, peer, raft, store, local).await;
                });
            }
        });
    }
}

/// Answers one bus connection's requests until it closes.
async fn serve_peer(
    mut stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    raft: Raft<TypeConfig>,
    store: Arc<Store>,
    local: Arc<Local>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    while let Some(body) = bus::read_frame(&mut stream).await? {
        let request: Request = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
        let response = match request {
            Request::Append(rpc) => {
                let answer = raft.append_entries(rpc).await;
                // The leader reached this node: it is in its group's
                // majority (the lease, `Local::lease_ok`).
                if matches!(&answer, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_))) {
                    local.note_contact(crate::util::now_ms());
                }
                Response::Append(answer)
            }
            Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
            Request::Snapshot(rpc) => Response::Snapshot(raft.install_snapshot(rpc).await),
            Request::Hello { seen_as } => {
                learn_my_ip(&local, &seen_as);
                Response::Hello(hello(&store, &local))
            }
            Request::Join {
                mut node,
                slots,
                seen_as,
            } => {
                learn_my_ip(&local, &seen_as);
                if node.ip.is_empty() {
                    node.ip = peer.ip().to_string();
                }
                Response::Joined(admit(&raft, &store, &local, node, slots).await)
            }
            Request::Propose(proposal) => {
                let proposed = match propose_at_leader(&raft, proposal).await {
                    (answer, Some(index)) => Ok((answer, index)),
                    (Err(why), None) => Err(why),
                    (Ok(_), None) => Err("ERR the change has no log index".into()),
                };
                Response::Proposed(proposed)
            }
        };
        let body = serde_json::to_vec(&response).map_err(std::io::Error::other)?;
        bus::write_frame(&mut stream, &body).await?;
    }
    Ok(())
}

/// This node's answer to HELLO.
fn hello(store: &Store, local: &Local) -> Hello {
    let topology = local.read();
    let slots = match topology.provisional {
        true => Vec::new(),
        false => topology.slots_of(topology.me),
    };
    Hello {
        node: topology.myself().clone(),
        slots,
        in_group: store.has_state(),
        offset: local.offset(),
    }
}

/// Notes the address a peer reached this node at as its own, when it
/// announces none and has not learnt one (Redis learns its IP so too).
fn learn_my_ip(local: &Local, seen_as: &str) {
    let Some((ip, _)) = seen_as.rsplit_once(':') else {
        return;
    };
    if local.read().myself().ip.is_empty() {
        local.set_my_ip(ip);
    }
}

/// A node's bus address in the group's membership.
fn bus_address(node: &NodeRecord) -> String {
    format!("{}:{}", node.ip, node.cport)
}

/// Proposes through the leader: here if this node leads, else sent to
/// the leader over the bus.
async fn propose(raft: &Raft<TypeConfig>, proposal: Proposal) -> Applied {
    let (answer, index) = propose_at_leader(raft, proposal).await;
    // Answered once this node applied it too: a client's next command
    // here (MIGRATE after SETSLOT … IMPORTING) sees the change.
    if let Some(index) = index {
        let applied = raft
            .wait(Some(WAIT))
            .applied_index_at_least(Some(index), "the change applied here")
            .await;
        if applied.is_err() {
            return Err("ERR the change was not applied on this node in time".into());
        }
    }
    answer
}

/// Proposes through the leader; the answer and the entry's log index.
async fn propose_at_leader(raft: &Raft<TypeConfig>, proposal: Proposal) -> (Applied, Option<u64>) {
    let written = tokio::time::timeout(WAIT, raft.client_write(proposal.clone())).await;
    match written {
        Err(_) => (
            Err("ERR the cluster did not apply the change in time".into()),
            None,
        ),
        Ok(Ok(response)) => (response.data, Some(response.log_id.index)),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
            let Some(leader) = forward.leader_node else {
                let why = "CLUSTERDOWN the cluster has no leader to change its topology";
                return (Err(why.into()), None);
            };
            let mut peer = Peer::new(leader.addr.clone(), forward.leader_id.unwrap_or(0));
            match peer.call(&Request::Propose(proposal), WAIT).await {
                Ok(Response::Proposed(Ok((applied, index)))) => (applied, Some(index)),
                Ok(Response::Proposed(Err(why))) => (Err(why), None),
                Ok(_) => (Err("ERR the leader answered something else".into()), None),
                Err(e) => (
                    Err(format!("ERR the cluster's leader cannot be reached: {e}")),
                    None,
                ),
            }
        }
        Ok(Err(e)) => (
            Err(format!("ERR the cluster cannot change its topology: {e}")),
            None,
        ),
    }
}

/// CLUSTER MEET's work on the node it was sent to.
async fn meet(
    raft: &Raft<TypeConfig>,
    store: &Arc<Store>,
    local: &Arc<Local>,
    ip: &str,
    cport: u16,
) -> Result<(), String> {
    let address = format!("{ip}:{cport}");
    let mut peer = Peer::new(address.clone(), 0);
    let seen_as = address.clone();
    let other = match peer.call(&Request::Hello { seen_as }, WAIT).await {
        Ok(Response::Hello(hello)) => hello,
        Ok(_) => return Err("an answer of another kind".into()),
        Err(e) => return Err(e.to_string()),
    };
    let mut node = other.node;
    if node.ip.is_empty() {
        node.ip = ip.to_string();
    }
    if local.read().find(&node.id).is_some() {
        return Ok(());
    }
    if other.in_group && store.has_state() {
        return Err("both nodes belong to a cluster already (merging two is not supported)".into());
    }
    if other.in_group || !store.has_state() {
        let mine = hello(store, local);
        let request = Request::Join {
            node: mine.node,
            slots: mine.slots,
            seen_as: address,
        };
        return match peer.call(&request, WAIT * 3).await {
            Ok(Response::Joined(result)) => result,
            Ok(_) => Err("an answer of another kind".into()),
            Err(e) => Err(e.to_string()),
        };
    }
    admit(raft, store, local, node, other.slots).await
}

/// Takes `node` into this node's group (starting one if there is none):
/// the JOIN entry, then the node as a learner, then as a voter. Sent on
/// to the leader when this node does not lead.
async fn admit(
    raft: &Raft<TypeConfig>,
    store: &Arc<Store>,
    local: &Arc<Local>,
    node: NodeRecord,
    slots: Vec<u16>,
) -> Result<(), String> {
    if !store.has_state() {
        start_group(raft, local).await?;
    }
    let leader = raft.current_leader().await;
    let me = raft_id(&local.read().myself().id);
    if leader != Some(me) {
        let metrics = raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership().clone();
        let Some(address) = leader.and_then(|id| membership.get_node(&id).map(|n| n.addr.clone()))
        else {
            return Err("the group has no leader".into());
        };
        let mut peer = Peer::new(address, leader.unwrap_or(0));
        let request = Request::Join {
            node,
            slots,
            seen_as: String::new(),
        };
        return match peer.call(&request, WAIT * 3).await {
            Ok(Response::Joined(result)) => result,
            Ok(_) => Err("an answer of another kind".into()),
            Err(e) => Err(e.to_string()),
        };
    }
    // Nodes met at once (redis-cli MEETs every node together) are taken
    // in one after the other: the group changes its membership one step
    // at a time.
    let _one_at_a_time = ADMITTING.lock().await;
    let actor = local.read().myself().id.clone();
    let id = raft_id(&node.id);
    let address = bus_address(&node);
    let join = Proposal {
        actor,
        change: Change::Join { node, slots },
    };
    propose(raft, join).await?;
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    let learner = BTreeMap::from([(id, BasicNode::new(address))]);
    change_membership(raft, ChangeMembers::AddNodes(learner), deadline)
        .await
        .map_err(|e| format!("adding the node as a learner: {e}"))?;
    let voter = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
    change_membership(raft, voter, deadline)
        .await
        .map_err(|e| format!("making the node a voter: {e}"))
}

/// One node taken into the group at a time (`admit`).
static ADMITTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Changes the group's membership by `change`, waiting for a change in
/// progress to commit first, until `deadline`.
async fn change_membership(
    raft: &Raft<TypeConfig>,
    change: ChangeMembers<NodeId, BasicNode>,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    loop {
        let changed =
            tokio::time::timeout_at(deadline, raft.change_membership(change.clone(), true));
        match changed.await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_),
            )))) => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("not done in time".into()),
        }
    }
}

/// Starts a group with this node as its only voter, seeded with its
/// topology.
async fn start_group(raft: &Raft<TypeConfig>, local: &Arc<Local>) -> Result<(), String> {
    let (me, address, seed) = {
        let topology = local.read();
        let myself = topology.myself();
        if myself.ip.is_empty() {
            return Err("this node does not know its own address yet".into());
        }
        (
            raft_id(&myself.id),
            bus_address(myself),
            nodes_file::encode(&topology),
        )
    };
    let members = BTreeMap::from([(me, BasicNode::new(address))]);
    match raft.initialize(members).await {
        Ok(()) | Err(RaftError::APIError(_)) => {}
        Err(e) => return Err(format!("starting the group: {e}")),
    }
    let led = raft
        .wait(Some(WAIT))
        .state(ServerState::Leader, "this node leads its new group")
        .await;
    led.map_err(|e| format!("starting the group: {e}"))?;
    let actor = local.read().myself().id.clone();
    propose(
        raft,
        Proposal {
            actor,
            change: Change::Seed(seed),
        },
    )
    .await
    .map(|_| ())
}

/// On the leader: pings every primary that has replicas; one that has
/// not answered for `cluster-node-timeout` is failed over to its replica
/// with the greatest replication offset. `answered` holds when each
/// primary last answered (first seen: now).
async fn detect_failures(
    raft: &Raft<TypeConfig>,
    local: &Arc<Local>,
    answered: &mut BTreeMap<String, u64>,
    now: u64,
) {
    let topology = local.read().clone();
    let timeout = local.node_timeout_ms();
    let ping = Duration::from_millis((timeout / 4).clamp(50, 500));
    for primary in 0..topology.nodes.len() {
        let node = &topology.nodes[primary];
        let replicas = topology.replicas_of(primary);
        if node.primary.is_some() || replicas.is_empty() || primary == topology.me {
            continue;
        }
        let last = *answered.entry(node.id.clone()).or_insert(now);
        if hello_of(node, ping).await.is_some() {
            answered.insert(node.id.clone(), now);
            continue;
        }
        if now.saturating_sub(last) < timeout {
            continue;
        }
        let mut best: Option<(u64, String)> = None;
        for replica in replicas {
            let candidate = &topology.nodes[replica];
            let offset = match replica == topology.me {
                true => Some(local.offset()),
                false => hello_of(candidate, ping).await.map(|hello| hello.offset),
            };
            if let Some(offset) = offset
                && best.as_ref().is_none_or(|(most, _)| offset > *most)
            {
                best = Some((offset, candidate.id.clone()));
            }
        }
        let Some((offset, promoted)) = best else {
            continue;
        };
        crate::log_warning!(
            "Cluster: primary {} did not answer for {timeout} ms: failing over to {promoted} (offset {offset})",
            node.id
        );
        let change = Change::Failover {
            failed: node.id.clone(),
            promoted,
        };
        let actor = topology.myself().id.clone();
        if let Err(why) = propose(raft, Proposal { actor, change }).await {
            crate::log_warning!("Cluster: the failover was not applied: {why}");
        }
        answered.insert(node.id.clone(), now);
    }
}

/// A node's answer to HELLO within `timeout`, if it answers.
async fn hello_of(node: &NodeRecord, timeout: Duration) -> Option<Hello> {
    let address = bus_address(node);
    let mut peer = Peer::new(address.clone(), raft_id(&node.id));
    match peer
        .call(&Request::Hello { seen_as: address }, timeout)
        .await
    {
        Ok(Response::Hello(hello)) => Some(hello),
        _ => None,
    }
}
