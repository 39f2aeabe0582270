//! Connected clients as other connections see them: CLIENT LIST/INFO/KILL,
//! INFO clients and `maxclients` read this registry. The connection task
//! owns everything else about its client; what is shared here is atomics
//! (updated once per command, never contended) and a mutex for the
//! rarely-changed names.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Default, Clone)]
pub struct Names {
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
}

pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub fd: i32,
    pub created: Instant,
    pub last_active_ms: AtomicU64,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    /// Command table index + 1 of the last command run; 0 for none.
    pub last_command: AtomicUsize,
    pub query_buffer_bytes: AtomicUsize,
    pub output_buffer_bytes: AtomicUsize,
    pub names: Mutex<Names>,
    pub no_evict: AtomicBool,
    pub no_touch: AtomicBool,
    killed: AtomicBool,
    kill_signal: Notify,
}

impl ClientInfo {
    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.kill_signal.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    pub async fn killed(&self) {
        self.kill_signal.notified().await
    }
}

#[derive(Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl ClientRegistry {
    pub fn register(
        &self,
        addr: SocketAddr,
        laddr: SocketAddr,
        fd: i32,
        now_ms: u64,
    ) -> Arc<ClientInfo> {
        let id = self.next_id.fetch_add(1, Relaxed) + 1;
        let client = Arc::new(ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            last_active_ms: AtomicU64::new(now_ms),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            last_command: AtomicUsize::new(0),
            query_buffer_bytes: AtomicUsize::new(0),
            output_buffer_bytes: AtomicUsize::new(0),
            names: Mutex::new(Names::default()),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            kill_signal: Notify::new(),
        });
        self.clients.lock().insert(id, client.clone());
        client
    }

    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn count(&self) -> usize {
        self.clients.lock().len()
    }

    /// All clients, ordered by id.
    pub fn snapshot(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }
}
