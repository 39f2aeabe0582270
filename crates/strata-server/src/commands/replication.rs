//! SYNC, PSYNC, REPLCONF, REPLICAOF (SLAVEOF) and ROLE: the commands of
//! Redis' replication protocol (`crate::replication`).

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::{CmdResult, Ctx, ERR_SYNTAX, is, parse_i64};
use crate::replication::primary::SyncRequest;

/// SYNC: the old protocol (also `redis-cli --rdb`): the RDB file, then
/// the stream, with no `+FULLRESYNC` line first.
pub fn sync(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    become_replica(ctx, false, "?".into(), -1)
}

/// PSYNC replid offset: the replica continues from `offset` when the
/// backlog still holds it (`+CONTINUE`), else synchronises in full.
pub fn psync(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let replid = String::from_utf8_lossy(&args[1]).into_owned();
    let offset = parse_i64(&args[2]).unwrap_or(-1);
    become_replica(ctx, true, replid, offset)
}

fn become_replica(ctx: &mut Ctx, psync: bool, replid: String, offset: i64) -> CmdResult {
    if ctx.server.replication.is_replica() && !ctx.server.replication.link_up() {
        return Err("NOMASTERLINK Can't SYNC while not connected with my master".into());
    }
    if ctx.session.sync_request.is_some() {
        return Ok(());
    }
    (ctx.session.client.role).store(crate::client::ROLE_REPLICA, Relaxed);
    ctx.session.sync_request = Some(SyncRequest {
        replid,
        offset,
        psync,
        listening_port: ctx.session.replica_port,
        rdb_only: ctx.session.rdb_only,
    });
    Ok(())
}

/// REPLCONF option value …: listening-port, ip-address, capa, ack,
/// getack, rdb-only, rdb-filter-only.
pub fn replconf(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(ERR_SYNTAX.into());
    }
    let mut i = 1;
    while i < args.len() {
        let (option, value) = (&args[i], &args[i + 1]);
        if is(option, "listening-port") {
            let port = parse_i64(value)?;
            ctx.session.replica_port = u16::try_from(port).map_err(|_| "ERR invalid port")?;
        } else if is(option, "rdb-only") {
            ctx.session.rdb_only = value.as_ref() == b"1";
        } else if is(option, "ack") || is(option, "getack") {
            // Only meaningful on a replica's link, which reads them itself.
            return Ok(());
        } else if !["ip-address", "capa", "rdb-filter-only", "rdb-channel"]
            .iter()
            .any(|known| is(option, known))
        {
            return Err(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(option)
            )
            .into());
        }
        i += 2;
    }
    ctx.out.ok();
    Ok(())
}

/// REPLICAOF host port | NO ONE.
pub fn replicaof(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let replication = &ctx.server.replication;
    if is(&args[1], "no") && is(&args[2], "one") {
        if replication.promote() {
            crate::log_notice!(
                "MASTER MODE enabled (user request from '{}')",
                ctx.session.client.addr
            );
        }
        ctx.out.ok();
        return Ok(());
    }
    let port = parse_i64(&args[2]).map_err(|_| "ERR Invalid master port")?;
    let port = u16::try_from(port).map_err(|_| "ERR Invalid master port")?;
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    if let Some((current_host, current_port)) = replication.following()
        && current_host.eq_ignore_ascii_case(&host)
        && current_port == port
    {
        ctx.out.simple("OK Already connected to specified master");
        return Ok(());
    }
    let Some(server) = replication.server() else {
        return Err("ERR the server is not running".into());
    };
    replication.drop_replicas();
    let link = replication.follow(host.clone(), port);
    link.read_only
        .store(ctx.config.setting("replica-read-only") == "yes", Relaxed);
    crate::log_notice!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        ctx.session.client.addr
    );
    crate::replication::link::start(server, host, port, link);
    ctx.out.ok();
    Ok(())
}

pub fn role(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.replication.role(&mut ctx.out);
    Ok(())
}
