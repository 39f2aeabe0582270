//! What CLIENT PAUSE WRITE holds: a command that writes or may, and a
//! transaction holding one. Dispatch and the connection ask it.

use bytes::Bytes;

use super::ctx::{Node, is};
use super::multi_state::Multi;
use super::spec::flag;
use super::{functions, scripting};

/// Whether `args`, outside MULTI, is a command CLIENT PAUSE WRITE
/// holds: one that writes or may (`write`, `may_replicate`: EVAL,
/// PUBLISH, PFCOUNT …), except scripts and functions that declare
/// `no-writes` (Redis 7 lets them run). Unknown commands and wrong
/// argument counts are not held (they fail at once, as in Redis);
/// EXEC is the connection's to decide (`Multi::may_write`).
pub fn held_by_write_pause(node: &Node, args: &[Bytes]) -> bool {
    let Some(id) = node.commands.resolve(args) else {
        return false;
    };
    let spec = node.commands.specs[id];
    if !spec.arity_ok(args.len()) || !(spec.has(flag::WRITE) || spec.has(flag::MAY_REPLICATE)) {
        return false;
    }
    // EVAL, EVALSHA and FCALL have at least 3 arguments here (arity).
    let name = &args[0];
    if is(name, "EVAL") || is(name, "EVALSHA") {
        return !scripting::declares_no_writes(node, &args[1], is(name, "EVALSHA"));
    }
    if is(name, "FCALL") {
        return !functions::declares_no_writes(node, &args[1]);
    }
    true
}

/// Whether a queued command writes or may (EXEC then waits for a
/// CLIENT PAUSE WRITE).
pub fn may_write(multi: &Multi, server: &Node) -> bool {
    (multi.queued.iter()).any(|queued| held_by_write_pause(server, &queued.args))
}
