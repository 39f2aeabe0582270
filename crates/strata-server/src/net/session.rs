//! Per-connection state that commands read and change (selected database,
//! protocol version, authentication). Owned by the connection task; the
//! parts other clients may see are mirrored into its [`ClientInfo`].

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use strata_resp::Protocol;

use crate::acl::Acl;
use crate::acl::user::User;
use crate::net::client::ClientInfo;

pub struct Session {
    pub client: Arc<ClientInfo>,
    pub db: usize,
    pub protocol: Protocol,
    pub authenticated: bool,
    /// The ACL user commands run as (the default user until AUTH), as of
    /// [`Session::user_generation`] (`crate::acl`).
    pub user: Arc<User>,
    pub user_generation: u64,
    /// `user.unrestricted()`, kept so the check per command reads a bool.
    pub user_unrestricted: bool,
    /// Set by QUIT and protocol errors: flush the replies, then close.
    pub close_after_reply: bool,
    /// Set by SYNC and PSYNC: once the replies before it are out, the
    /// connection becomes a replica's (`crate::replication::primary`).
    pub sync_request: Option<crate::replication::state::SyncRequest>,
    /// The port REPLCONF listening-port announced.
    pub replica_port: u16,
    /// REPLCONF rdb-only 1: SYNC sends the RDB file and closes.
    pub rdb_only: bool,
    /// `REPLCONF rdb-filter-only functions`: a copy of the libraries only.
    pub rdb_functions_only: bool,
    /// The blocked command's wait ended by its timeout: it runs once more
    /// to answer ([`TimeoutReply::Rerun`]).
    pub block_timed_out: bool,
    /// The change WAIT waits for replicas to acknowledge, kept while it
    /// is blocked.
    pub wait_target: Option<u64>,
    /// This session applies a primary's stream (`crate::replication::link`):
    /// replica-read-only does not apply to it.
    pub primary_link: bool,
    /// Set by a blocking command that found nothing (it replied nothing):
    /// the connection waits on these keys and runs it again.
    pub block: Option<Block>,
    /// Set while a blocked command runs again: a key that now holds
    /// another type is skipped rather than an error (Redis 7.0 keeps such
    /// a client blocked).
    pub block_retry: bool,
    /// The blocked client's place in its keys' queues while it waits
    /// (`Ctx::waits_behind`).
    pub block_waiter: Option<std::sync::Arc<crate::events::blocking::Waiter>>,
    /// Blocked clients this connection's commands woke since its replies
    /// last went out: the replies wait until they ran
    /// (`crate::events::blocking::await_runs`).
    pub woken: Vec<crate::events::blocking::Woken>,
    /// Commands queued since MULTI (`commands::transactions`).
    pub multi: Option<crate::commands::multi_state::Multi>,
    /// CLIENT REPLY OFF: no command's reply is sent.
    pub replies_off: bool,
    /// The running command's reply is dropped (CLIENT REPLY SKIP, and the
    /// command after it).
    pub skip_reply: bool,
    pub skip_next_reply: bool,
    /// The running command answered with RESP3 pushes (subscription
    /// confirmations), which CLIENT REPLY OFF does not silence.
    pub replied_push: bool,
    /// Channels, patterns and shard channels subscribed to, together.
    pub subscriptions: usize,
    /// Set while EXEC runs its commands (a script there shares the
    /// transaction's locks).
    pub in_exec: bool,
    /// Keys WATCHed, and what has changed since.
    pub watch: Option<crate::commands::multi_state::Watching>,
    /// CLIENT TRACKING's options while on (`crate::events::tracking`).
    pub tracking: Option<crate::events::tracking::Options>,
    /// CLIENT CACHING YES/NO was given for the next command.
    pub caching: bool,
    /// Keys changed by the running command, transaction or script, for
    /// BCAST tracking clients (`commands::tracking`).
    pub bcast_pending: Vec<bytes::Bytes>,
    /// Set while a script's `redis.call` runs a command.
    /// The error the running command returns was already counted in
    /// the error statistics (a script's error from a command inside it).
    pub error_counted: bool,
    pub in_script: bool,
    /// Pushes waiting for this client go out before the running
    /// command's reply (invalidations of keys evicted to make room for it).
    pub pushes_first: bool,
    /// The time TIME answers inside the running script: taken at its
    /// first TIME, the same for the rest of the script, as Redis freezes
    /// time in a script.
    pub script_time: Option<std::time::Duration>,
    /// The keys the read-only commands of the running script read: what
    /// client-side caching tracks for it once it ends, as Redis 7.4 does
    /// (neither its declared keys nor what it only wrote).
    pub script_reads: Vec<bytes::Bytes>,
    /// How long the command that just ran held the server without
    /// running (DEBUG SLEEP's pause), added to its measured duration.
    pub slept_us: u64,
    /// Cluster mode: ASKING was the last command (the next one may use a
    /// slot this node imports).
    pub asking: bool,
    /// Cluster mode: READONLY (reads of the slots of the primary this
    /// node replicates are served here).
    pub cluster_readonly: bool,
}

/// What a blocking command waits for (see `crate::events::blocking`).
pub struct Block {
    pub keys: Vec<bytes::Bytes>,
    /// When to give up (Unix ms); `None` waits for ever.
    pub deadline_ms: Option<u64>,
    /// The reply on timeout: BLPOP's kind answers a null array, BLMOVE's
    /// a null bulk string.
    pub timeout_reply: TimeoutReply,
    /// What runs when woken, when not the command itself.
    pub rerun: Option<Vec<bytes::Bytes>>,
    /// Whether the deletion of a key ends the wait (XREADGROUP).
    pub on_nokey: bool,
    /// Whether a replica's acknowledgement wakes it (WAIT, WAITAOF).
    pub on_ack: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    NullArray,
    NullBulk,
    /// WAIT's count of replicas.
    Int(i64),
    /// The command runs once more with [`Session::block_timed_out`] set
    /// and answers what it has by then (WAIT: the replicas that did
    /// acknowledge).
    Rerun,
}

impl TimeoutReply {
    pub fn write_to(self, reply: &mut strata_resp::ReplyWriter) {
        match self {
            TimeoutReply::NullArray => reply.null_array(),
            TimeoutReply::NullBulk => reply.null_bulk(),
            TimeoutReply::Int(n) => reply.int(n),
            // (The connection reruns the command instead; a transaction
            // never blocks WAIT or WAITAOF.)
            TimeoutReply::Rerun => reply.int(0),
        }
    }
}

impl Session {
    pub fn new(client: Arc<ClientInfo>, acl: &Acl) -> Self {
        let default = acl.default_user();
        Session {
            client,
            db: 0,
            protocol: Protocol::Resp2,
            // Redis' rule: authenticated when the default user opens
            // without a password.
            authenticated: default.enabled && default.nopass,
            user_unrestricted: default.unrestricted(),
            user: default,
            user_generation: acl.generation(),
            close_after_reply: false,
            sync_request: None,
            replica_port: 0,
            rdb_only: false,
            rdb_functions_only: false,
            block_timed_out: false,
            wait_target: None,
            primary_link: false,
            block: None,
            block_retry: false,
            block_waiter: None,
            woken: Vec::new(),
            multi: None,
            watch: None,
            in_exec: false,
            replies_off: false,
            skip_reply: false,
            skip_next_reply: false,
            replied_push: false,
            subscriptions: 0,
            tracking: None,
            caching: false,
            error_counted: false,
            in_script: false,
            bcast_pending: Vec::new(),
            script_reads: Vec::new(),
            pushes_first: false,
            script_time: None,
            slept_us: 0,
            asking: false,
            cluster_readonly: false,
        }
    }

    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.client.db.store(db, Relaxed);
    }

    /// Runs as `user` from now on (AUTH, HELLO AUTH, RESET).
    pub fn log_in(&mut self, user: Arc<User>, generation: u64) {
        self.client.names.lock().user = user.name.clone();
        self.user_unrestricted = user.unrestricted();
        self.user = user;
        self.user_generation = generation;
        self.authenticated = true;
    }

    /// The user as the ACL has it now: a SETUSER since the last command
    /// applies to this one. A deleted user's connection is being closed;
    /// until then it may run nothing.
    pub fn refresh_user(&mut self, acl: &Acl) {
        let generation = acl.generation();
        if generation != self.user_generation {
            self.user = acl
                .get(&self.user.name)
                .unwrap_or_else(|| acl.deleted(&self.user.name));
            self.user_unrestricted = self.user.unrestricted();
            self.user_generation = generation;
        }
    }

    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        self.client.resp.store(protocol.version() as u8, Relaxed);
    }
}
