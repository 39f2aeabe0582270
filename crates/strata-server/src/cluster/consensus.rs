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
//! (`Local::lease_ok`).
//!
//! A planned CLUSTER FAILOVER ([`hand_over`]) is run by the replica: its
//! primary holds clients' writes (HOLD) and answers the replication
//! offset holding every write before; the replica catches up to it,
//! proposes the switch, and tells the primary (RELEASE), which applies
//! the committed switch at once so the writes it held are redirected.
//!
//! A node leaves the group by FORGET (every member drops it; the leader
//! takes nodes the topology no longer has out of the Raft membership) or
//! by its own RESET (it asks the group to forget it, then drops its Raft
//! files and starts a fresh Raft instance, alone). Not built yet: slots
//! moving by their shards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// How long a node leaving its group waits for the group to forget it.
const LEAVING: Duration = Duration::from_secs(2);

/// A node's Raft id: the first 16 hex digits of its 40-digit id.
pub fn raft_id(id: &str) -> NodeId {
    u64::from_str_radix(id.get(..16).unwrap_or("0"), 16).unwrap_or(0)
}

/// This node's part in its group.
pub struct Consensus {
    runtime: tokio::runtime::Handle,
    group: Shared,
    local: Arc<Local>,
    dir: std::path::PathBuf,
}

/// The Raft instance and its storage; replaced whole when the node
/// leaves its group (CLUSTER RESET).
#[derive(Clone)]
struct Group {
    raft: Raft<TypeConfig>,
    store: Arc<Store>,
}

/// The current [`Group`], read afresh by every request and every tick,
/// and whether it takes Raft messages: a node that left its group
/// refuses them (its old leader may still be sending) until it is met
/// again (a HELLO, or its own JOIN).
#[derive(Clone)]
struct Shared {
    group: Arc<parking_lot::RwLock<Group>>,
    takes_raft: Arc<AtomicBool>,
}

impl Shared {
    fn get(&self) -> Group {
        self.group.read().clone()
    }

    fn replace(&self, group: Group) {
        *self.group.write() = group;
    }

    fn open_to_raft(&self, open: bool) {
        self.takes_raft.store(open, Ordering::Release);
    }

    fn takes_raft(&self) -> bool {
        self.takes_raft.load(Ordering::Acquire)
    }
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

/// Opens the storage in `dir` and starts a Raft instance on it as the
/// node `id` (on the cluster runtime).
async fn open_group(dir: &std::path::Path, local: &Arc<Local>, id: &str) -> Result<Group, String> {
    let installer = local.clone();
    let store = Store::open(
        dir,
        Box::new(move |topology: &Topology| installer.install(topology)),
    )
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    if let Some(topology) = store.topology() {
        local.install(&topology);
    }
    let (log, machine) = openraft::storage::Adaptor::new(store.clone());
    let raft = Raft::new(raft_id(id), config(), bus::Network, log, machine)
        .await
        .map_err(|e| format!("cluster Raft: {e}"))?;
    Ok(Group { raft, store })
}

impl Consensus {
    /// Starts this node's Raft instance on its own thread, over the
    /// storage in `dir`, and serves the bus on `listener`.
    pub fn start(
        dir: &std::path::Path,
        local: Arc<Local>,
        listener: std::net::TcpListener,
    ) -> Result<Consensus, String> {
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cluster bus: {e}"))?;
        let my_id = local.read().myself().id.clone();
        let (sender, receiver) = std::sync::mpsc::channel();
        let (thread_dir, thread_local) = (dir.to_path_buf(), local.clone());
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
                    let opened = open_group(&thread_dir, &thread_local, &my_id).await;
                    let opened = opened.map(|group| (tokio::runtime::Handle::current(), group));
                    let failed = opened.is_err();
                    let _ = sender.send(opened);
                    if !failed {
                        std::future::pending::<()>().await;
                    }
                });
            })
            .map_err(|e| format!("cluster thread: {e}"))?;
        let (runtime, group) = receiver
            .recv()
            .map_err(|_| "the cluster thread stopped".to_string())??;
        // A node of a group serves only within its lease from the start,
        // before its first tick counts the voters (openraft's metrics may
        // not hold the membership yet): taken as at least two.
        if group.store.has_state() {
            let metrics = group.raft.metrics().borrow().clone();
            let voters = metrics.membership_config.membership().voter_ids().count();
            local.set_voters(voters.max(2));
        }
        let consensus = Consensus {
            runtime,
            group: Shared {
                group: Arc::new(parking_lot::RwLock::new(group)),
                takes_raft: Arc::new(AtomicBool::new(true)),
            },
            local,
            dir: dir.to_path_buf(),
        };
        consensus.serve_bus(listener);
        consensus.watch();
        Ok(consensus)
    }

    /// Every 100 ms: notes the group's size and, on the leader, its
    /// contact with a majority (the lease), and takes forgotten nodes
    /// out of the membership. The search for failed primaries runs in a
    /// loop of its own: its pings to busy primaries (up to a quarter of
    /// the node timeout each) must not hold back the leader's lease.
    fn watch(&self) {
        let (group, local) = (self.group.clone(), self.local.clone());
        self.runtime.spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let raft = group.get().raft;
                let metrics = raft.metrics().borrow().clone();
                let voters = metrics.membership_config.membership().voter_ids().count();
                local.set_voters(voters);
                if metrics.state != ServerState::Leader {
                    continue;
                }
                let now = crate::util::now_ms();
                if let Some(ms) = metrics.millis_since_quorum_ack {
                    local.note_contact(now.saturating_sub(ms));
                }
                if voters <= 1 {
                    local.note_contact(now);
                }
                prune_members(&raft, &local);
            }
        });
        let (group, local) = (self.group.clone(), self.local.clone());
        self.runtime.spawn(async move {
            let mut answered: BTreeMap<String, u64> = BTreeMap::new();
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let raft = group.get().raft;
                if raft.metrics().borrow().state != ServerState::Leader {
                    answered.clear();
                    continue;
                }
                detect_failures(&raft, &local, &mut answered, crate::util::now_ms()).await;
            }
        });
    }

    /// Whether this node belongs to a group (it changes its topology by
    /// proposals then).
    pub fn in_group(&self) -> bool {
        self.group.get().store.has_state()
    }

    /// Proposes `change` made by this node and waits for its answer.
    pub fn propose(&self, change: Change) -> Applied {
        let proposal = Proposal {
            actor: self.local.read().myself().id.clone(),
            change,
        };
        let raft = self.group.get().raft;
        self.block_on(async move { propose(&raft, proposal).await })
    }

    /// CLUSTER FAILOVER on a replica. Planned (no option): the primary
    /// holds its clients' writes, this replica catches up with every
    /// write it acknowledged, the group switches their roles, and the
    /// writes held go on (redirected here). FORCE and TAKEOVER (`planned`
    /// false): the switch at once, without the primary.
    pub fn fail_over(&self, planned: bool) -> Applied {
        let (me, primary) = {
            let topology = self.local.read();
            let myself = topology.myself();
            let primary = myself
                .primary
                .as_ref()
                .and_then(|id| topology.find(id))
                .map(|index| topology.nodes[index].clone());
            (myself.id.clone(), primary)
        };
        let Some(primary) = primary else {
            return Err("ERR You should send CLUSTER FAILOVER to a replica".into());
        };
        let change = Change::Failover {
            failed: primary.id.clone(),
            promoted: me.clone(),
        };
        if !planned {
            return self.propose(change);
        }
        let (raft, local) = (self.group.get().raft, self.local.clone());
        self.block_on(async move {
            let proposal = Proposal { actor: me, change };
            hand_over(&raft, &local, &primary, proposal).await
        })
    }

    /// CLUSTER MEET: joins the node whose bus is at `ip:cport` in the
    /// background (as Redis' MEET answers before the handshake).
    pub fn meet(&self, ip: String, cport: u16) {
        let Group { raft, store } = self.group.get();
        let local = self.local.clone();
        self.group.open_to_raft(true);
        self.runtime.spawn(async move {
            if let Err(why) = meet(&raft, &store, &local, &ip, cport).await {
                crate::log_warning!("CLUSTER MEET {ip}:{cport} failed: {why}");
            }
        });
    }

    /// CLUSTER RESET of a node in a group: asks the group to forget this
    /// node (unless it did already), then drops its Raft state and
    /// starts afresh, alone, as the node `next_id` (a new id after
    /// RESET HARD). The group's answer is not waited for long: a node
    /// cut off from its group still leaves.
    pub fn leave(&self, next_id: String) -> Applied {
        let (group, local, dir) = (self.group.clone(), self.local.clone(), self.dir.clone());
        self.block_on(async move {
            let Group { raft, .. } = group.get();
            let (me, others, forgotten) = {
                let topology = local.read();
                let me = topology.myself().id.clone();
                let forgotten = topology.forgotten.contains(&me);
                (me, topology.nodes.len() > 1, forgotten)
            };
            if others && !forgotten {
                let proposal = Proposal {
                    actor: me,
                    change: Change::Leave,
                };
                let asked = tokio::time::timeout(LEAVING, propose_at_leader(&raft, proposal)).await;
                match asked {
                    Ok((Err(why), _)) if !why.starts_with("ERR Unknown node") => {
                        crate::log_warning!("Cluster: leaving the group: {why}");
                    }
                    Err(_) => crate::log_warning!("Cluster: the group did not answer: left alone"),
                    _ => {}
                }
            }
            if let Err(e) = raft.shutdown().await {
                crate::log_warning!("Cluster: stopping Raft: {e}");
            }
            Store::wipe(&dir).map_err(|e| format!("ERR {}: {e}", dir.display()))?;
            group.open_to_raft(false);
            let fresh = open_group(&dir, &local, &next_id).await?;
            group.replace(fresh);
            Ok("OK".into())
        })
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
        let (group, local) = (self.group.clone(), self.local.clone());
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
                let (group, local) = (group.clone(), local.clone());
                tokio::spawn(async move {
                    let _ = serve_peer(stream, peer, group, local).await;
                });
            }
        });
    }
}

/// Answers one bus connection's requests until it closes.
async fn serve_peer(
    mut stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    group: Shared,
    local: Arc<Local>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    while let Some(body) = bus::read_frame(&mut stream).await? {
        let request: Request = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
        let Group { raft, store } = group.get();
        let raft_message = matches!(
            request,
            Request::Append(_) | Request::Vote(_) | Request::Snapshot(_)
        );
        if raft_message && !group.takes_raft() {
            return Ok(());
        }
        if let Request::Append(rpc) = &request
            && rpc.prev_log_id.is_none()
            && rpc.entries.first().is_some_and(|e| e.log_id.index > 1)
        {
            // Entries after a gap, from the start of the log (seen from
            // openraft 0.9.25's leader once, for a node that lost its
            // log): taking them would leave a log that cannot be applied.
            // Unanswered, the leader tries again.
            crate::log_warning!("Cluster: the leader sent log entries after a gap; refused");
            return Ok(());
        }
        let response = match request {
            Request::Append(rpc) => {
                let (received, commit) = (crate::util::now_ms(), rpc.leader_commit);
                let answer = raft.append_entries(rpc).await;
                // The leader reached this node: it is in its group's
                // majority (the lease, `Local::lease_ok`).
                if matches!(&answer, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_))) {
                    renew_lease(&raft, &local, received, commit.map(|c| c.index));
                }
                Response::Append(answer)
            }
            Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
            Request::Snapshot(rpc) => Response::Snapshot(raft.install_snapshot(rpc).await),
            Request::Hello { seen_as } => {
                group.open_to_raft(true);
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
            Request::Hold { until_ms } => Response::Held(hold(&local, until_ms).await),
            Request::Release { committed } => {
                release(&local, committed).await;
                Response::Released
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

/// How long a planned failover waits for the replica to catch up (Redis'
/// manual failover timeout).
const HANDOVER: Duration = Duration::from_secs(5);

/// A planned failover, on the replica: HOLD on the primary, catch up
/// with the offset it answers, propose the switch, RELEASE.
async fn hand_over(
    raft: &Raft<TypeConfig>,
    local: &Local,
    primary: &NodeRecord,
    proposal: Proposal,
) -> Applied {
    let mut peer = Peer::new(bus_address(primary), raft_id(&primary.id));
    let started = std::time::Instant::now();
    // Should this replica stop before RELEASE, the hold ends by itself.
    let until_ms = crate::util::now_ms() + 2 * HANDOVER.as_millis() as u64;
    let offset = match peer.call(&Request::Hold { until_ms }, WAIT).await {
        Ok(Response::Held(Ok(offset))) => offset,
        held => {
            let why = match held {
                Ok(Response::Held(Err(why))) => format!("ERR the primary refused: {why}"),
                _ => "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE".into(),
            };
            crate::log_warning!("Cluster: manual failover refused: {why}");
            return Err(why);
        }
    };
    let deadline = tokio::time::Instant::now() + HANDOVER;
    let mut answer = Err("ERR Manual failover timed out: this replica did not catch up with its primary (CLUSTER FAILOVER FORCE does not wait)".to_string());
    let mut committed = None;
    while tokio::time::Instant::now() < deadline {
        if local.offset() >= offset {
            answer = propose(raft, proposal.clone()).await;
            committed = answer.is_ok().then_some(proposal);
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let released = peer.call(&Request::Release { committed }, WAIT).await;
    if !matches!(released, Ok(Response::Released)) {
        crate::log_warning!(
            "Cluster: the old primary did not answer RELEASE; its hold ends by itself"
        );
    }
    let outcome = match &answer {
        Ok(_) => "done".to_string(),
        Err(why) => format!("abandoned ({why})"),
    };
    crate::log_notice!(
        "Cluster: manual failover {outcome} in {} ms (the primary's writes were held meanwhile)",
        started.elapsed().as_millis()
    );
    answer
}

/// Renews this node's lease from the leader's message received at
/// `received`, once the node has applied what the leader had committed
/// then (`commit`). Until then its topology may be behind the group's:
/// a node restarted on an old nodes file, or back from a partition,
/// would otherwise serve slots the group gave to another node before
/// it applied that change. Not waited for in the reply to the leader.
fn renew_lease(raft: &Raft<TypeConfig>, local: &Arc<Local>, received: u64, commit: Option<u64>) {
    let applied = raft.metrics().borrow().last_applied.map(|id| id.index);
    if commit.is_none() || applied >= commit {
        local.note_contact(received);
        return;
    }
    let (raft, local) = (raft.clone(), local.clone());
    tokio::spawn(async move {
        let caught_up = raft
            .wait(Some(Duration::from_millis(500)))
            .applied_index_at_least(commit, "the leader's commit applied here")
            .await;
        if caught_up.is_ok() {
            local.note_contact(received);
        }
    });
}

/// HOLD on a primary: its writes wait (`Hooks::hold_writes`).
async fn hold(local: &Arc<Local>, until_ms: u64) -> Result<u64, String> {
    if local.read().myself().primary.is_some() {
        return Err("a replica has no writes to hold".into());
    }
    let local = local.clone();
    let held = tokio::task::spawn_blocking(move || local.hold_writes(until_ms)).await;
    held.map_err(|e| e.to_string())?
}

/// RELEASE on the old primary: it applies the switch the group committed
/// (its log brings the same change later) so that it serves as a
/// replica and the writes held are redirected; they go on as soon as the
/// topology says so, while the node starts following its new primary.
async fn release(local: &Arc<Local>, committed: Option<Proposal>) {
    let still_primary = local.read().myself().primary.is_none();
    if let Some(proposal) = committed.filter(|_| still_primary) {
        let applying = local.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(why) = applying.apply_committed(&proposal.actor, &proposal.change) {
                crate::log_warning!("Cluster: applying the failover here: {why}");
            }
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while local.read().myself().primary.is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    local.release_writes();
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

/// On the leader: takes nodes the topology no longer has (FORGET, a
/// node leaving) out of the Raft membership, in the background (a
/// membership change in progress makes it wait for the next tick).
fn prune_members(raft: &Raft<TypeConfig>, local: &Local) {
    let kept: BTreeSet<NodeId> = {
        let topology = local.read();
        topology
            .nodes
            .iter()
            .filter(|node| !topology.forgotten.contains(&node.id))
            .map(|node| raft_id(&node.id))
            .collect()
    };
    let metrics = raft.metrics().borrow().clone();
    let membership = metrics.membership_config.membership();
    let gone = |ids: &mut dyn Iterator<Item = NodeId>| -> BTreeSet<NodeId> {
        ids.filter(|id| !kept.contains(id)).collect()
    };
    let voters = gone(&mut membership.voter_ids());
    let learners = gone(&mut membership.learner_ids());
    let change = match (voters.is_empty(), learners.is_empty()) {
        (false, _) => ChangeMembers::RemoveVoters(voters),
        (true, false) => ChangeMembers::RemoveNodes(learners),
        (true, true) => return,
    };
    if PRUNING.swap(true, Ordering::AcqRel) {
        return;
    }
    let raft = raft.clone();
    tokio::spawn(async move {
        let changed = tokio::time::timeout(WAIT, raft.change_membership(change, false));
        if let Ok(Err(e)) = changed.await {
            crate::log_warning!("Cluster: removing forgotten nodes from the group: {e}");
        }
        PRUNING.store(false, Ordering::Release);
    });
}

/// One membership pruning at a time (`prune_members`).
static PRUNING: AtomicBool = AtomicBool::new(false);

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
