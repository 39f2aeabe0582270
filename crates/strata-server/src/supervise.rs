//! `supervised systemd` (or `auto` under systemd): readiness and status
//! through systemd's notify socket ($NOTIFY_SOCKET, sd_notify's protocol:
//! newline-separated `KEY=value` in one datagram), so a `Type=notify`
//! unit starts dependents only once the data is loaded, and shows
//! "Loading…" / "Ready" in `systemctl status`. Without a notify socket,
//! or with `supervised no` / `upstart`, nothing is sent (upstart's
//! SIGSTOP handshake is not supported: start-up says so).

use std::os::unix::net::UnixDatagram;

use crate::log_notice;

/// Where notifications go, if systemd asked for them.
pub struct Notifier {
    socket: UnixDatagram,
    path: String,
}

impl Notifier {
    /// The notifier for `supervised` (`no`, `upstart`, `systemd`, `auto`).
    pub fn from_setting(supervised: &str) -> Option<Notifier> {
        let path = std::env::var("NOTIFY_SOCKET")
            .ok()
            .filter(|p| !p.is_empty());
        match (supervised, &path) {
            ("systemd" | "auto", Some(_)) => {}
            ("systemd", None) => {
                crate::log_warning!("systemd supervision requested, but NOTIFY_SOCKET not found");
                return None;
            }
            ("upstart", _) => {
                crate::log_warning!(
                    "upstart supervision (SIGSTOP when ready) is not supported; running unsupervised"
                );
                return None;
            }
            _ => return None,
        }
        let socket = UnixDatagram::unbound().ok()?;
        log_notice!(
            "supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
        );
        Some(Notifier {
            socket,
            path: path.expect("matched above"),
        })
    }

    /// Sends `message` (`READY=1`, `STATUS=…`); a failure is logged once
    /// and otherwise ignored, as sd_notify's callers do.
    pub fn send(&self, message: &str) {
        let sent = match self.path.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name)
                    .and_then(|address| self.socket.send_to_addr(message.as_bytes(), &address))
            }
            None => self.socket.send_to(message.as_bytes(), &self.path),
        };
        if let Err(e) = sent {
            crate::log_warning!("systemd notification '{message}' failed: {e}");
        }
    }
}
