//! Watching the server run: SLOWLOG GET / LEN / RESET / HELP (the slow
//! log, `crate::observe::slowlog`, which says what is logged) and MONITOR
//! (`crate::events::monitor`).

use bytes::Bytes;

use super::ctx::help_lines;
use super::{CmdResult, Ctx, parse_i64};

/// MONITOR: from now on this client receives a line for every command
/// the server runs, until RESET or it closes. A second MONITOR is
/// ignored without a reply, as in Redis.
pub fn monitor(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let client = ctx.session.client.clone();
    let mailbox = client.mailbox().clone();
    if ctx.server.monitors.add(client.id, mailbox) {
        ctx.out.ok();
    }
    Ok(())
}

/// Feeds EVAL, EVALSHA or FCALL to the monitors before it runs, so the
/// commands its script calls come after it (they are `skip_monitor`).
pub fn feed_script_call(ctx: &Ctx, args: &[Bytes]) {
    let server = ctx.server;
    if server.monitors.active() {
        let from = ctx.session.client.monitor_source();
        server
            .monitors
            .feed(ctx.session.db, Some(&from), args, ctx.config);
    }
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, all
/// with -1), each `[id, unix time, microseconds, args, addr, name]`.
pub fn slowlog_get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    const ERR_COUNT: &str = "ERR count should be greater than or equal to -1";
    let count = match args.get(2) {
        None => Some(10),
        Some(arg) => match parse_i64(arg).map_err(|_| ERR_COUNT)? {
            -1 => None,
            n if n < -1 => return Err(ERR_COUNT.into()),
            n => Some(n as usize),
        },
    };
    let entries = ctx.server.slowlog.newest(count);
    ctx.out.array(entries.len());
    for entry in entries {
        ctx.out.array(6);
        ctx.out.int(entry.id as i64);
        ctx.out.int(entry.time_s as i64);
        ctx.out.int(entry.micros as i64);
        ctx.out.array(entry.args.len());
        for arg in &entry.args {
            ctx.out.bulk(arg);
        }
        ctx.out.bulk(entry.addr.as_bytes());
        ctx.out.bulk(entry.name.as_bytes());
    }
    Ok(())
}

pub fn slowlog_len(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.out.int(ctx.server.slowlog.len() as i64);
    Ok(())
}

pub fn slowlog_reset(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.slowlog.reset();
    ctx.out.ok();
    Ok(())
}

pub fn slowlog_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}
