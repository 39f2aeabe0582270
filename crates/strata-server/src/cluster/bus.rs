//! The cluster bus: how nodes talk to each other, on each node's bus
//! port (`cluster-port`, else the client port + 10 000, as Redis').
//!
//! A connection carries requests and their answers in turn, each a
//! frame: a 4-byte big-endian length, then that many bytes of JSON. A
//! frame over [`FRAME_MAX`] closes the connection. The requests are
//! Raft's three RPCs and the few a node needs to join or change the
//! topology (`consensus`): HELLO (who are you), JOIN (take me in),
//! PROPOSE (a change, sent to the leader), and HOLD / RELEASE (a planned
//! failover pausing its primary's writes).
//!
//! The network side of openraft ([`Network`]) opens one connection per
//! peer and keeps it; a failed call drops it, and the next one connects
//! again.

use std::time::Duration;

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::change::{Applied, Proposal};
use super::raft_store::{NodeId, TypeConfig};
use super::topology::NodeRecord;

/// The largest frame either side accepts (a topology snapshot is tens
/// of kilobytes).
pub const FRAME_MAX: usize = 16 << 20;

/// How long connecting to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Serialize, Deserialize)]
pub enum Request {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// Who are you? `seen_as` is the address the asker reached it at.
    Hello {
        seen_as: String,
    },
    /// Take `node` into your group, with the slots it gave itself.
    Join {
        node: NodeRecord,
        slots: Vec<u16>,
        seen_as: String,
    },
    /// Apply this change (sent to the leader).
    Propose(Proposal),
    /// A planned failover, sent by a replica to its primary: hold
    /// clients' writes until `until_ms` (Unix) or the release, and say
    /// the replication offset that holds every write before.
    Hold {
        until_ms: u64,
    },
    /// The failover is over: writes go on. `committed`: the switch of
    /// roles the group committed (the old primary applies it at once, not
    /// waiting for its log to bring it: the writes held are redirected).
    Release {
        committed: Option<Proposal>,
    },
}

#[derive(Serialize, Deserialize)]
pub enum Response {
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    Hello(Hello),
    Joined(Result<(), String>),
    /// The answer and the entry's log index (the proposer waits until it
    /// applied that far itself).
    Proposed(Result<(Applied, u64), String>),
    /// The offset holding every write made before the hold.
    Held(Result<u64, String>),
    Released,
}

/// A node's answer to HELLO.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Hello {
    pub node: NodeRecord,
    /// The slots it gave itself (none while its claim is provisional).
    pub slots: Vec<u16>,
    /// Whether it belongs to a Raft group already.
    pub in_group: bool,
    /// Its replication offset (a failover promotes the replica with the
    /// most).
    pub offset: u64,
}

/// Reads one frame (None: the peer closed the connection between frames).
pub async fn read_frame(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = u32::from_be_bytes(length) as usize;
    if length > FRAME_MAX {
        return Err(std::io::Error::other(format!(
            "a cluster bus frame of {length} bytes is over the limit"
        )));
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(Some(body))
}

pub async fn write_frame(stream: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body);
    stream.write_all(&frame).await
}

/// A connection to one peer's bus, opened on first use.
pub struct Peer {
    address: String,
    /// The peer's Raft id (0 when not known: a HELLO or JOIN).
    target: NodeId,
    stream: Option<TcpStream>,
}

impl Peer {
    pub fn new(address: String, target: NodeId) -> Peer {
        Peer {
            address,
            target,
            stream: None,
        }
    }

    /// Sends `request` and reads the answer within `timeout`; the
    /// connection is dropped on any failure.
    pub async fn call(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> std::io::Result<Response> {
        let result = tokio::time::timeout(timeout, self.exchange(request)).await;
        match result {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                self.stream = None;
                Err(e)
            }
            Err(_) => {
                self.stream = None;
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer from {} in time", self.address),
                ))
            }
        }
    }

    async fn exchange(&mut self, request: &Request) -> std::io::Result<Response> {
        if self.stream.is_none() {
            let connect = TcpStream::connect(&self.address);
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect"))??;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().expect("connected above");
        let body = serde_json::to_vec(request).map_err(std::io::Error::other)?;
        write_frame(stream, &body).await?;
        let answer = read_frame(stream)
            .await?
            .ok_or_else(|| std::io::Error::other("the peer closed the connection"))?;
        serde_json::from_slice(&answer).map_err(std::io::Error::other)
    }
}

/// openraft's side of the bus: one [`Peer`] per target.
pub struct Network;

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        Peer::new(node.addr.clone(), target)
    }
}

type RaftRpcError<E = openraft::error::Infallible> =
    RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

fn rpc_error<E: std::error::Error>(e: std::io::Error) -> RPCError<NodeId, BasicNode, E> {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::TimedOut => {
            RPCError::Unreachable(Unreachable::new(&e))
        }
        _ => RPCError::Network(NetworkError::new(&e)),
    }
}

fn unexpected<E: std::error::Error>() -> RPCError<NodeId, BasicNode, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(
        "an answer of another kind",
    )))
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RaftRpcError> {
        let response =
            (self.call(&Request::Append(rpc), option.hard_ttl()).await).map_err(rpc_error)?;
        match response {
            Response::Append(result) => result.map_err(|e| {
                RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e))
            }),
            _ => Err(unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RaftRpcError<InstallSnapshotError>> {
        let response =
            (self.call(&Request::Snapshot(rpc), option.hard_ttl()).await).map_err(rpc_error)?;
        match response {
            Response::Snapshot(result) => result.map_err(|e| {
                RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e))
            }),
            _ => Err(unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RaftRpcError> {
        let response =
            (self.call(&Request::Vote(rpc), option.hard_ttl()).await).map_err(rpc_error)?;
        match response {
            Response::Vote(result) => result.map_err(|e| {
                RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e))
            }),
            _ => Err(unexpected()),
        }
    }
}
