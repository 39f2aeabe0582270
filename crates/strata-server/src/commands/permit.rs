//! The ACL's gate on commands: checks a command against the session's
//! user (refreshed first) and records a denial in ACL LOG. Dispatch,
//! transactions and scripts call it; the rules themselves are
//! [`crate::acl`]'s.

use bytes::Bytes;

use super::Node;
use crate::acl;
use crate::net::session::Session;

/// Checks command `id` for the session's user (refreshed first) and logs
/// a denial in ACL LOG under `context`.
pub fn check_command(
    server: &Node,
    session: &mut Session,
    id: usize,
    args: &[Bytes],
    context: acl::log::Context,
    now_ms: u64,
) -> Result<(), acl::Denied> {
    session.refresh_user(&server.acl);
    if session.user_unrestricted {
        return Ok(());
    }
    let denied = server
        .acl
        .check(&session.user, &server.commands, id, args)
        .err();
    let Some(denied) = denied else {
        return Ok(());
    };
    let object = match denied.reason {
        acl::log::Reason::Command => server.commands.full_names[id].clone(),
        _ => String::from_utf8_lossy(&args[denied.at]).into_owned(),
    };
    let username = session.user.name.clone();
    record(
        server,
        session,
        denied.reason,
        context,
        object,
        username,
        now_ms,
    );
    Err(denied)
}

/// [`check_command`] for a command a client sent (queued in MULTI or
/// run): the context is the session's, the error the client's reply.
pub fn check_client_command(
    server: &Node,
    session: &mut Session,
    id: usize,
    args: &[Bytes],
    now_ms: u64,
) -> Result<(), String> {
    let context = acl::log::Context::of_client(session.multi.is_some());
    check_command(server, session, id, args, context, now_ms)
        .map_err(|denied| denied.error(&server.commands.full_names[id]))
}

/// Adds an entry to ACL LOG.
pub fn record(
    server: &Node,
    session: &Session,
    reason: acl::log::Reason,
    context: acl::log::Context,
    object: String,
    username: String,
    now_ms: u64,
) {
    let max_len = server.config.get().acllog_max_len as usize;
    let client_info = super::describe::describe_client(server, &session.client, now_ms, None);
    server.acl.log.add(
        acl::log::Entry {
            count: 1,
            reason,
            context,
            object,
            username,
            time_ms: now_ms,
            client_info,
        },
        max_len,
    );
}
