//! Client eviction (`maxmemory-clients`), as Redis 7 has it: what all
//! clients hold together in buffers is bounded; beyond the bound the
//! clients holding the most are closed until the rest fits.
//!
//! A client's memory is its unparsed input (a large argument on its way
//! in), its pending output and its queued transaction. Each connection
//! publishes its figure once per turn of its loop
//! ([`ClientMemory::publish`]), which keeps a running total without
//! walking the clients; the connection that finds the total over the
//! limit evicts ([`ClientMemory::evict`]), one at a time. Clients with CLIENT NO-EVICT
//! on are never chosen. INFO's `evicted_clients` counts them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::net::client::{ClientInfo, ClientRegistry};

#[derive(Default)]
pub struct ClientMemory {
    total_bytes: AtomicU64,
    /// One evicting connection at a time.
    evicting: Mutex<()>,
    pub evicted: AtomicU64,
}

impl ClientMemory {
    /// Records what `client` holds now; returns the new total.
    pub fn publish(&self, client: &ClientInfo, bytes: u64) -> u64 {
        let old = client.memory_bytes.swap(bytes, Relaxed);
        if bytes >= old {
            self.total_bytes.fetch_add(bytes - old, Relaxed) + (bytes - old)
        } else {
            self.total_bytes.fetch_sub(old - bytes, Relaxed) - (old - bytes)
        }
    }

    /// A client gone: its memory leaves the total.
    pub fn forget(&self, client: &ClientInfo) {
        self.publish(client, 0);
    }

    /// Closes the clients holding the most memory until the others fit in
    /// `limit_bytes` (the caller may be one of them: it then finds itself
    /// killed). Does nothing while another connection is evicting.
    pub fn evict(&self, clients: &ClientRegistry, limit_bytes: u64) {
        let Some(_evicting) = self.evicting.try_lock() else {
            return;
        };
        // Counted from the clients themselves: one killed a moment ago still
        // has its figure in the running total until its task ends.
        let clients: Vec<_> = clients
            .snapshot()
            .into_iter()
            .filter(|c| !c.is_killed())
            .collect();
        let mut total: u64 = clients.iter().map(|c| c.memory_bytes.load(Relaxed)).sum();
        if total <= limit_bytes {
            return;
        }
        let mut candidates: Vec<_> = clients
            .into_iter()
            .filter(|c| !c.no_evict.load(Relaxed))
            .collect();
        candidates.sort_by_key(|c| std::cmp::Reverse(c.memory_bytes.load(Relaxed)));
        for client in candidates {
            if total <= limit_bytes {
                break;
            }
            let bytes = client.memory_bytes.load(Relaxed);
            if bytes == 0 {
                break;
            }
            crate::log_notice!(
                "Evicting client: id={} addr={} name={} tot-mem={bytes} (maxmemory-clients {limit_bytes})",
                client.id,
                client.addr_text(),
                client.names.lock().name
            );
            client.kill();
            self.evicted.fetch_add(1, Relaxed);
            total = total.saturating_sub(bytes);
        }
    }
}
