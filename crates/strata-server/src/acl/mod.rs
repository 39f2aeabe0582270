//! Access control lists, as Redis 7 has them: users with hashed
//! passwords, and per user selectors of commands, keys and channels
//! (`user.rs`, `selector.rs`), categories from the command table
//! (`categories.rs`), and the log of denials (`log.rs`).
//!
//! Where it sits: dispatch asks [`Acl::check`] about every command after
//! authentication and arity and before it runs or is queued (again at
//! EXEC, and for every `redis.call` of a script); AUTH and HELLO AUTH
//! ask [`Acl::authenticate`]. The users live here behind one lock; a
//! connection keeps the user it authenticated as, refreshed when the
//! [`Acl::generation`] moves (any SETUSER, DELUSER or LOAD), so a change
//! applies to connected clients from their next command, as in Redis.
//! The default user, unrestricted as Redis creates it, is checked for
//! nothing at all, so a server without ACL rules pays one atomic load.
//!
//! `requirepass` is the default user's password, as in Redis: setting it
//! runs `resetpass >password` (or `nopass` when empty) on that user.
//! Users come from `user` lines of the configuration or from `aclfile`
//! (not both); ACL SAVE writes the file, CONFIG REWRITE the `user` lines
//! (`file.rs`).

pub mod categories;
pub mod file;
pub mod log;
pub mod registry;
pub mod selector;
pub mod user;

pub use file::load_at_startup;
pub use registry::{Acl, Denied, user_from_line};
