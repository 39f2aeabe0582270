//! Connection commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, SELECT and
//! the CLIENT family.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use strata_resp::Protocol;

use super::{CmdError, CmdResult, Ctx, ERR_DB_RANGE, ERR_SYNTAX, help_lines, is, lossy, parse_i64};
use crate::net::client::ClientInfo;

pub fn ping(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if ctx.session.subscriptions > 0 && ctx.session.protocol == Protocol::Resp2 {
        // A subscribed RESP2 client gets PING's answer shaped as a message.
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(args.get(1).map_or(&b""[..], |m| &m[..]));
        return Ok(());
    }
    match args {
        [_] => ctx.out.simple("PONG"),
        [_, message] => ctx.out.bulk(message),
        _ => return Err("ERR wrong number of arguments for 'ping' command".into()),
    }
    Ok(())
}

pub fn echo(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.out.bulk(&args[1]);
    Ok(())
}

pub fn quit(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.out.ok();
    ctx.session.close_after_reply = true;
    ctx.session.client.mark_closing();
    Ok(())
}

pub fn reset(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.monitors.remove(ctx.session.client.id);
    super::transactions::end(ctx.session);
    super::tracking::tracking_off(ctx);
    super::pubsub::unsubscribe_all(ctx);
    ctx.session.select(0);
    ctx.session.set_protocol(Protocol::Resp2);
    ctx.session.asking = false;
    ctx.session.cluster_readonly = false;
    // Back to the state of a new connection (Redis' RESET): the default
    // user, authenticated if it needs no password.
    let acl = &ctx.server.acl;
    ctx.session.log_in(acl.default_user(), acl.generation());
    ctx.session.authenticated = !acl.auth_required();
    ctx.session.client.names.lock().name.clear();
    ctx.session.client.no_evict.store(false, Relaxed);
    ctx.session.client.no_touch.store(false, Relaxed);
    // The reply goes out in the protocol the client asked RESET in.
    ctx.out.simple("RESET");
    Ok(())
}

/// Logs the connection in as `user` if `password` opens it (an enabled
/// user; any password for a `nopass` one); a failure goes to ACL LOG.
fn authenticate(ctx: &mut Ctx, command: &[u8], user: &[u8], password: &[u8]) -> CmdResult {
    let acl = &ctx.server.acl;
    if let Some(found) = acl.authenticate(user, password) {
        ctx.session.log_in(found, acl.generation());
        return Ok(());
    }
    let context = crate::acl::log::Context::of_client(ctx.session.multi.is_some());
    crate::commands::permit::record(
        ctx.server,
        ctx.session,
        crate::acl::log::Reason::Auth,
        context,
        String::from_utf8_lossy(command).into_owned(),
        String::from_utf8_lossy(user).into_owned(),
        ctx.now_ms,
    );
    Err("WRONGPASS invalid username-password pair or user is disabled.".into())
}

pub fn auth(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (user, password): (&[u8], &[u8]) = match args {
        [_, password] => {
            if ctx.server.acl.default_user().nopass {
                return Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?".into());
            }
            (b"default", password)
        }
        [_, user, password] => (user, password),
        _ => return Err(ERR_SYNTAX.into()),
    };
    authenticate(ctx, &args[0], user, password)?;
    ctx.out.ok();
    Ok(())
}

/// Redis 7's answer to HELLO without AUTH from a client that has not
/// authenticated.
const ERR_HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

pub fn hello(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut protocol = ctx.session.protocol;
    let mut i = 1;
    if let Some(version) = args.get(1) {
        protocol = match parse_i64(version) {
            Ok(2) => Protocol::Resp2,
            Ok(3) => Protocol::Resp3,
            Ok(_) => return Err("NOPROTO unsupported protocol version".into()),
            Err(_) => return Err("ERR Protocol version is not an integer or out of range".into()),
        };
        i = 2;
    }
    let mut new_name = None;
    while i < args.len() {
        if is(&args[i], "AUTH") && i + 2 < args.len() {
            authenticate(ctx, &args[0], &args[i + 1], &args[i + 2])?;
            i += 3;
        } else if is(&args[i], "SETNAME") && i + 1 < args.len() {
            validate_client_name(&args[i + 1])?;
            new_name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Err(format!(
                "ERR Syntax error in HELLO option '{}'",
                lossy(&args[i], 128)
            )
            .into());
        }
    }
    if !ctx.session.authenticated && ctx.server.acl.auth_required() {
        return Err(ERR_HELLO_NOAUTH.into());
    }
    if let Some(name) = new_name {
        ctx.session.client.names.lock().name = String::from_utf8_lossy(&name).into_owned();
    }
    ctx.session.set_protocol(protocol);
    ctx.out.set_protocol(protocol);
    let out = &mut ctx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::util::REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(protocol.version());
    out.bulk(b"id");
    out.int(ctx.session.client.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

pub fn select(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = parse_i64(&args[1])?;
    if ctx.server.cluster.enabled() && db != 0 {
        return Err("ERR SELECT is not allowed in cluster mode".into());
    }
    if db < 0 || db as usize >= ctx.keyspace().db_count() {
        return Err(ERR_DB_RANGE.into());
    }
    ctx.session.select(db as usize);
    ctx.out.ok();
    Ok(())
}

pub fn client_id(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.out.int(ctx.session.client.id as i64);
    Ok(())
}

fn validate_client_name(name: &[u8]) -> CmdResult {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(
            "ERR Client names cannot contain spaces, newlines or special characters.".into(),
        );
    }
    Ok(())
}

pub fn client_setname(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    validate_client_name(&args[2])?;
    ctx.session.client.names.lock().name = String::from_utf8_lossy(&args[2]).into_owned();
    ctx.out.ok();
    Ok(())
}

pub fn client_getname(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let name = ctx.session.client.names.lock().name.clone();
    if name.is_empty() {
        ctx.out.null_bulk();
    } else {
        ctx.out.bulk(name.as_bytes());
    }
    Ok(())
}

/// One CLIENT LIST line, with Redis' field names and order; `args`: the
/// command running (CLIENT LIST or INFO), counted for the caller's line.
fn describe(ctx: &Ctx, client: &ClientInfo, args: &[Bytes]) -> String {
    let running = (client.id == ctx.session.client.id).then_some(args);
    super::describe::describe_client(ctx.server, client, ctx.now_ms, running)
}

/// A client type's name as Redis takes it (`slave` is `replica`).
fn client_type(name: &[u8]) -> Option<&'static str> {
    ["normal", "master", "replica", "pubsub"]
        .into_iter()
        .find(|k| is(name, k))
        .or_else(|| is(name, "slave").then_some("replica"))
}

pub fn client_list(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut wanted_ids: Option<Vec<u64>> = None;
    let mut wanted_kind: Option<&str> = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "TYPE") && i + 1 < args.len() {
            let kind = &args[i + 1];
            let Some(kind) = client_type(kind) else {
                return Err(format!("ERR Unknown client type '{}'", lossy(kind, 64)).into());
            };
            wanted_kind = Some(kind);
            i += 2;
        } else if is(&args[i], "ID") && i + 1 < args.len() {
            let mut ids = Vec::new();
            for arg in &args[i + 1..] {
                let id = parse_i64(arg)
                    .ok()
                    .filter(|&id| id > 0)
                    .ok_or(CmdError::from("ERR Invalid client ID"))?;
                ids.push(id as u64);
            }
            wanted_ids = Some(ids);
            i = args.len();
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    let mut text = String::new();
    for client in ctx.server.clients.snapshot() {
        // A killed client is gone but for its task's last steps.
        if client.is_killed() {
            continue;
        }
        if wanted_ids
            .as_ref()
            .is_some_and(|ids| !ids.contains(&client.id))
            || wanted_kind.is_some_and(|kind| client.kind() != kind)
        {
            continue;
        }
        text.push_str(&describe(ctx, &client, args));
        text.push('\n');
    }
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

pub fn client_info(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut line = describe(ctx, &ctx.session.client, args);
    line.push('\n');
    ctx.out.verbatim("txt", line.as_bytes());
    Ok(())
}

/// CLIENT KILL MAXAGE's seconds, with Redis' errors.
fn parse_max_age(value: &[u8]) -> Result<u64, CmdError> {
    let age = parse_i64(value)
        .map_err(|_| CmdError::from("ERR maxage is not an integer or out of range"))?;
    if age <= 0 {
        return Err("ERR maxage should be greater than 0".into());
    }
    Ok(age as u64)
}

pub fn client_kill(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let me = ctx.session.client.id;
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port, replies OK or an error.
        let addr = lossy(&args[2], 256).into_owned();
        let target = ctx
            .server
            .clients
            .snapshot()
            .into_iter()
            .find(|c| c.addr_text() == addr);
        let Some(target) = target else {
            return Err("ERR No such client".into());
        };
        target.kill();
        ctx.out.ok();
        return Ok(());
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut skip_me = true;
    let mut max_age_s = None;
    let mut user: Option<String> = None;
    // TYPE: `Some(subscribed?)`, or `Some(None)` for a type nobody has.
    let mut kind: Option<&str> = None;
    let mut i = 2;
    while i + 1 < args.len() {
        let value = &args[i + 1];
        if is(&args[i], "ID") {
            id = Some(
                parse_i64(value)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(CmdError::from("ERR client-id should be greater than 0"))?
                    as u64,
            );
        } else if is(&args[i], "ADDR") {
            addr = Some(lossy(value, 256).into_owned());
        } else if is(&args[i], "LADDR") {
            laddr = Some(lossy(value, 256).into_owned());
        } else if is(&args[i], "SKIPME") {
            skip_me = match () {
                _ if is(value, "yes") => true,
                _ if is(value, "no") => false,
                _ => return Err(ERR_SYNTAX.into()),
            };
        } else if is(&args[i], "MAXAGE") {
            max_age_s = Some(parse_max_age(value)?);
        } else if is(&args[i], "TYPE") {
            kind = Some(client_type(value).ok_or_else(|| {
                CmdError::from(format!("ERR Unknown client type '{}'", lossy(value, 128)))
            })?);
        } else if is(&args[i], "USER") {
            if ctx
                .server
                .acl
                .get(&String::from_utf8_lossy(value))
                .is_none()
            {
                return Err(format!("ERR No such user '{}'", lossy(value, 128)).into());
            }
            user = Some(String::from_utf8_lossy(value).into_owned());
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 2;
    }
    if i != args.len() {
        return Err(ERR_SYNTAX.into());
    }
    let mut killed = 0;
    for client in ctx.server.clients.snapshot() {
        // A client killed earlier stays registered until its task has
        // closed; it is gone for every purpose but that, so not counted.
        let matches = !client.is_killed()
            && id.is_none_or(|id| client.id == id)
            && addr.as_ref().is_none_or(|a| client.addr_text() == *a)
            && laddr.as_ref().is_none_or(|a| client.laddr_text() == *a)
            && max_age_s.is_none_or(|age| client.created.elapsed().as_secs() >= age)
            && user.as_ref().is_none_or(|u| client.names.lock().user == *u)
            && kind.is_none_or(|kind| client.kind() == kind)
            && !(skip_me && client.id == me);
        if matches {
            client.kill();
            killed += 1;
        }
    }
    ctx.out.int(killed);
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL]: for `timeout` ms, every client's
/// commands (ALL, the default) or those that may write (WRITE) wait, the
/// caller's included; they run in order when the pause ends.
pub fn client_pause(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let timeout = parse_i64(&args[2])
        .map_err(|_| CmdError::from("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err("ERR timeout is negative".into());
    }
    let writes_only = match args.get(3) {
        None => false,
        Some(mode) if is(mode, "WRITE") => true,
        Some(mode) if is(mode, "ALL") => false,
        Some(_) => return Err(ERR_SYNTAX.into()),
    };
    if args.len() > 4 {
        return Err(ERR_SYNTAX.into());
    }
    let until = ctx.now_ms.saturating_add(timeout as u64);
    ctx.server.client_pause(until, writes_only, ctx.now_ms);
    ctx.out.ok();
    Ok(())
}

/// CLIENT UNPAUSE: ends a CLIENT PAUSE at once.
pub fn client_unpause(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.client_unpause();
    ctx.out.ok();
    Ok(())
}

pub fn client_setinfo(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let value = &args[3];
    if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            lossy(&args[2], 32).to_ascii_lowercase()
        )
        .into());
    }
    let value = String::from_utf8_lossy(value).into_owned();
    let mut names = ctx.session.client.names.lock();
    if is(&args[2], "LIB-NAME") {
        names.lib_name = value;
    } else if is(&args[2], "LIB-VER") {
        names.lib_ver = value;
    } else {
        return Err(format!("ERR Unrecognized option '{}'", lossy(&args[2], 64)).into());
    }
    drop(names);
    ctx.out.ok();
    Ok(())
}

fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "on") {
        Ok(true)
    } else if is(arg, "off") {
        Ok(false)
    } else {
        Err(ERR_SYNTAX.into())
    }
}

/// CLIENT REPLY ON|OFF|SKIP: the connection drops the replies of the
/// commands this turns off (published messages still arrive).
pub fn client_reply(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let session = &mut *ctx.session;
    if is(&args[2], "ON") {
        session.replies_off = false;
        session.skip_reply = false;
        ctx.out.ok();
    } else if is(&args[2], "OFF") {
        session.replies_off = true;
    } else if is(&args[2], "SKIP") {
        session.skip_reply = true;
        session.skip_next_reply = true;
    } else {
        return Err(super::ERR_SYNTAX.into());
    }
    Ok(())
}

pub fn client_no_evict(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.session
        .client
        .no_evict
        .store(on_off(&args[2])?, Relaxed);
    ctx.out.ok();
    Ok(())
}

/// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]: 1 when that client was
/// blocked and now stops waiting, 0 otherwise.
pub fn client_unblock(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let id = parse_i64(&args[2])?;
    let how = match args.get(3..) {
        Some([]) | None => crate::net::client::UNBLOCK_TIMEOUT,
        Some([reason]) if is(reason, "timeout") => crate::net::client::UNBLOCK_TIMEOUT,
        Some([reason]) if is(reason, "error") => crate::net::client::UNBLOCK_ERROR,
        Some([_]) => return Err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into()),
        Some(_) => return Err(ERR_SYNTAX.into()),
    };
    let unblocked = ctx
        .server
        .clients
        .snapshot()
        .iter()
        .find(|c| c.id as i64 == id)
        .is_some_and(|c| c.unblock(how));
    ctx.out.int(unblocked as i64);
    Ok(())
}

pub fn client_no_touch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.session
        .client
        .no_touch
        .store(on_off(&args[2])?, Relaxed);
    ctx.out.ok();
    Ok(())
}

pub fn client_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "CLIENT",
        &[
            "ID",
            "    Return the ID of the current connection.",
            "GETNAME",
            "    Return the name of the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "LIST [TYPE <type>] [ID <id> [<id> ...]]",
            "    Return information about client connections.",
            "KILL <ip:port> | <option> <value> [...]",
            "    Kill connections (ID, ADDR, LADDR, USER, SKIPME, MAXAGE, TYPE).",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library name or version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "NO-EVICT (ON|OFF)",
            "    Accepted; client eviction does not apply.",
            "NO-TOUCH (ON|OFF)",
            "    Accepted; commands still update key access times.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
        ],
    );
    Ok(())
}
