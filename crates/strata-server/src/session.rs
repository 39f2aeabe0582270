//! Per-connection state that commands read and change (selected database,
//! protocol version, authentication). Owned by the connection task; the
//! parts other clients may see are mirrored into its [`ClientInfo`].

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use strata_resp::Protocol;

use crate::client::ClientInfo;

pub struct Session {
    pub client: Arc<ClientInfo>,
    pub db: usize,
    pub protocol: Protocol,
    pub authenticated: bool,
    /// Set by QUIT and protocol errors: flush the replies, then close.
    pub close_after_reply: bool,
}

impl Session {
    pub fn new(client: Arc<ClientInfo>) -> Self {
        Session {
            client,
            db: 0,
            protocol: Protocol::Resp2,
            authenticated: false,
            close_after_reply: false,
        }
    }

    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.client.db.store(db, Relaxed);
    }

    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        self.client.resp.store(protocol.version() as u8, Relaxed);
    }
}
