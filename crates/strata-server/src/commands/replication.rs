//! SYNC, PSYNC, REPLCONF, REPLICAOF (SLAVEOF) and ROLE: the commands of
//! Redis' replication protocol (`crate::replication`).

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::{CmdResult, Ctx, ERR_SYNTAX, is, parse_i64};
use crate::replication::SyncRequest;

/// SYNC: the old protocol (also `redis-cli --rdb`): the RDB file, then
/// the stream, with no `+FULLRESYNC` line first.
pub fn sync(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    become_replica(ctx, false, "?".into(), -1)
}

/// PSYNC replid offset: the replica continues from `offset` when the
/// backlog still holds it (`+CONTINUE`), else synchronises in full.
pub fn psync(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        if args.len() > 4 || !is(&args[3], "FAILOVER") {
            return Err(ERR_SYNTAX.into());
        }
        // Our primary hands over (FAILOVER): this server becomes the
        // primary, keeping the history it shares with it as its second.
        if ctx.server.replication.promote(Some(&mut ctx.keys)) {
            crate::log_notice!(
                "Becoming the primary at the request of {} (FAILOVER)",
                ctx.session.client.addr
            );
        }
    }
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
    (ctx.session.client.role).store(crate::net::client::ROLE_REPLICA, Relaxed);
    ctx.session.sync_request = Some(SyncRequest {
        replid,
        offset,
        psync,
        listening_port: ctx.session.replica_port,
        rdb_only: ctx.session.rdb_only,
        functions_only: ctx.session.rdb_functions_only,
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
        } else if is(option, "rdb-filter-only") {
            // A space-separated list of what the file keeps: "functions",
            // or nothing (everything), as Redis 7 reads it.
            let mut functions_only = false;
            for filter in value.split(|&c| c == b' ').filter(|f| !f.is_empty()) {
                if !is(filter, "functions") {
                    return Err(format!(
                        "ERR Unsupported rdb-filter-only option: {}",
                        String::from_utf8_lossy(filter)
                    )
                    .into());
                }
                functions_only = true;
            }
            ctx.session.rdb_functions_only = functions_only;
        } else if is(option, "ack") || is(option, "getack") {
            // Only meaningful on a replica's link, which reads them itself.
            return Ok(());
        } else if !["ip-address", "capa", "rdb-channel"]
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
        if replication.promote(Some(&mut ctx.keys)) {
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
    let server = ctx.server.arc();
    replication.drop_replicas_after_sending();
    let link = replication.follow(host.clone(), port);
    crate::log_notice!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        ctx.session.client.addr
    );
    crate::replication::link::start(server, host, port, link);
    ctx.out.ok();
    Ok(())
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (`crate::replication::failover`).
pub fn failover(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    use crate::replication::failover;
    let replication = &ctx.server.replication;
    let (mut to, mut force, mut abort, mut timeout) = (None, false, false, None);
    let mut i = 1;
    while i < args.len() {
        if is(&args[i], "TO") && i + 2 < args.len() && to.is_none() {
            let port = parse_i64(&args[i + 2])?;
            let port = u16::try_from(port).map_err(|_| "ERR Invalid port")?;
            to = Some((String::from_utf8_lossy(&args[i + 1]).into_owned(), port));
            i += 3;
        } else if is(&args[i], "FORCE") && !force {
            force = true;
            i += 1;
        } else if is(&args[i], "ABORT") && !abort {
            abort = true;
            i += 1;
        } else if is(&args[i], "TIMEOUT") && i + 1 < args.len() && timeout.is_none() {
            let ms = parse_i64(&args[i + 1])?;
            if ms <= 0 {
                return Err("ERR FAILOVER timeout must be greater than 0".into());
            }
            timeout = Some(std::time::Duration::from_millis(ms as u64));
            i += 2;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    let running = replication.failover_state.load(Relaxed) != failover::NO_FAILOVER;
    if abort {
        if to.is_some() || force || timeout.is_some() {
            return Err(ERR_SYNTAX.into());
        }
        if !running {
            return Err("ERR No failover in progress.".into());
        }
        replication.failover_abort.store(true, Relaxed);
        ctx.out.ok();
        return Ok(());
    }
    if replication.is_replica() {
        return Err("ERR FAILOVER is not valid when server is a replica.".into());
    }
    let replicas = replication.replicas();
    if replicas.is_empty() {
        return Err("ERR FAILOVER requires connected replicas.".into());
    }
    if running {
        return Err("ERR FAILOVER already in progress.".into());
    }
    if force && (timeout.is_none() || to.is_none()) {
        return Err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.".into(),
        );
    }
    let (host, port) = match to {
        Some((host, port)) => {
            let known = replicas
                .iter()
                .any(|r| r.ip == host && r.listening_port.load(Relaxed) == u64::from(port));
            if !known {
                return Err("ERR FAILOVER target HOST and PORT is not a replica.".into());
            }
            (host, port)
        }
        None => {
            // Redis picks the replica with the largest offset.
            let best = replicas
                .iter()
                .max_by_key(|r| r.acked.load(Relaxed))
                .expect("not empty");
            (best.ip.clone(), best.listening_port.load(Relaxed) as u16)
        }
    };
    let server = ctx.server.arc();
    replication
        .failover_state
        .store(failover::WAITING_FOR_SYNC, Relaxed);
    failover::start(
        server,
        failover::Request {
            host,
            port,
            timeout,
            force,
        },
    );
    ctx.out.ok();
    Ok(())
}

pub fn role(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.replication.role(&mut ctx.out);
    Ok(())
}
