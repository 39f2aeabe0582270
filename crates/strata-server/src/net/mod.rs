//! The network side: one client's connection loop and its sockets, TLS,
//! the registry of connected clients, per-connection state, client
//! eviction, and answering a thread's idle connections while a script is
//! busy.
//!
//! - `connection`: one client's read → execute → write loop and its limits;
//!   `socket`: TCP and unix sockets, the listeners; `tls`: TLS sessions.
//! - `session`: what commands read and change per connection (database,
//!   protocol, user); `client`: the connected clients as CLIENT LIST and
//!   KILL see them; `client_eviction`: `maxmemory-clients`.
//! - `busy`: serving a thread's other connections while a script runs.

pub mod busy;
pub mod client;
pub mod client_eviction;
pub mod connection;
pub mod session;
pub mod socket;
pub mod tls;
