//! Client-side caching commands: CLIENT TRACKING, CLIENT CACHING, CLIENT
//! GETREDIR and CLIENT TRACKINGINFO, with Redis 7's options and errors.
//! What is remembered and when invalidations go out is `crate::events::tracking`;
//! dispatch calls [`remember_read`] and [`invalidate_changes`].

use super::spec::flag;
use bytes::Bytes;
use strata_engine::storage::record::Kind;

use super::{CmdResult, Ctx, ERR_SYNTAX, Spec, is, parse_i64};
use crate::commands::Node;
use crate::config::Config;
use crate::events::tracking::Options;
use crate::net::session::Session;

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p …] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
pub fn client_tracking(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut options = Options::default();
    let mut redirect_to = None;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        let arg = &args[i];
        if is(arg, "redirect") && more {
            i += 1;
            if options.redirect != 0 {
                return Err("ERR A client can only redirect to a single other client".into());
            }
            let id = parse_i64(&args[i])?;
            let target = (id > 0)
                .then(|| ctx.server.clients.get(id as u64))
                .flatten();
            if target.is_none() {
                return Err("ERR The client ID you want redirect to does not exist".into());
            }
            redirect_to = target;
            options.redirect = id as u64;
        } else if is(arg, "bcast") {
            options.bcast = true;
        } else if is(arg, "optin") {
            options.optin = true;
        } else if is(arg, "optout") {
            options.optout = true;
        } else if is(arg, "noloop") {
            options.noloop = true;
        } else if is(arg, "prefix") && more {
            i += 1;
            // A copy: a slice would keep the request's input buffer.
            options.prefixes.push(Bytes::copy_from_slice(&args[i]));
        } else {
            return Err(ERR_SYNTAX.into());
        }
        i += 1;
    }
    if is(&args[2], "off") {
        tracking_off(ctx);
        ctx.out.ok();
        return Ok(());
    }
    if !is(&args[2], "on") {
        return Err(ERR_SYNTAX.into());
    }
    if !options.bcast && !options.prefixes.is_empty() {
        return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
    }
    if let Some(current) = &ctx.session.tracking {
        if current.bcast != options.bcast {
            return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
        }
        if (options.optin && current.optout) || (options.optout && current.optin) {
            return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
        }
    }
    if options.bcast && (options.optin || options.optout) {
        return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
    }
    if options.optin && options.optout {
        return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
    }
    let id = ctx.session.client.id;
    if options.bcast
        && let Some(error) = ctx.server.tracking.prefix_collision(id, &options.prefixes)
    {
        return Err(error.into());
    }
    let mailbox = ctx.session.client.mailbox().clone();
    let keyspace = ctx.keyspace();
    ctx.server
        .tracking
        .enable(keyspace, id, mailbox, redirect_to, options.clone());
    ctx.session.tracking = Some(options);
    ctx.session.caching = false;
    ctx.out.ok();
    Ok(())
}

/// Ends tracking for the running client (CLIENT TRACKING OFF, RESET).
pub fn tracking_off(ctx: &mut Ctx) {
    if ctx.session.tracking.take().is_some() {
        let keyspace = ctx.keyspace();
        ctx.server.tracking.disable(keyspace, ctx.session.client.id);
    }
    ctx.session.caching = false;
}

/// CLIENT CACHING YES|NO: whether the next command's keys are tracked,
/// in OPTIN (YES) or OPTOUT (NO) mode.
pub fn client_caching(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(options) = &ctx.session.tracking else {
        return Err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled".into());
    };
    if is(&args[2], "yes") {
        if !options.optin {
            return Err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
                    .into(),
            );
        }
    } else if is(&args[2], "no") {
        if !options.optout {
            return Err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
                    .into(),
            );
        }
    } else {
        return Err(ERR_SYNTAX.into());
    }
    ctx.session.caching = true;
    ctx.out.ok();
    Ok(())
}

/// CLIENT GETREDIR: -1 when not tracking, else the redirect target (0:
/// none).
pub fn client_getredir(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let redirect = ctx
        .session
        .tracking
        .as_ref()
        .map_or(-1, |o| o.redirect as i64);
    ctx.out.int(redirect);
    Ok(())
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes, as Redis' map.
pub fn client_trackinginfo(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let registered = ctx.server.tracking.options(ctx.session.client.id);
    let mut flags: Vec<&str> = Vec::new();
    let (redirect, prefixes) = match &registered {
        None => {
            flags.push("off");
            (-1, Vec::new())
        }
        Some((options, broken)) => {
            flags.push("on");
            if options.bcast {
                flags.push("bcast");
            }
            if options.optin {
                flags.push("optin");
                if ctx.session.caching {
                    flags.push("caching-yes");
                }
            }
            if options.optout {
                flags.push("optout");
                if ctx.session.caching {
                    flags.push("caching-no");
                }
            }
            if options.noloop {
                flags.push("noloop");
            }
            if *broken {
                flags.push("broken_redirect");
            }
            // BCAST without PREFIX tracks the empty prefix: Redis lists it.
            let prefixes = match options.bcast && options.prefixes.is_empty() {
                true => vec![Bytes::new()],
                false => options.prefixes.clone(),
            };
            (options.redirect as i64, prefixes)
        }
    };
    ctx.out.map(3);
    ctx.out.bulk(b"flags");
    ctx.out.set(flags.len());
    for flag in flags {
        ctx.out.bulk(flag.as_bytes());
    }
    ctx.out.bulk(b"redirect");
    ctx.out.int(redirect);
    ctx.out.bulk(b"prefixes");
    ctx.out.array(prefixes.len());
    for prefix in &prefixes {
        ctx.out.bulk(prefix);
    }
    Ok(())
}

/// After a command ran, before its locks go: remembers the keys a
/// read-only command read for a tracking client (default mode, honouring
/// OPTIN/OPTOUT and CLIENT CACHING), and ends a CLIENT CACHING that was
/// for this command.
pub(crate) fn remember_read(ctx: &mut Ctx, spec: &Spec) {
    let Some(options) = &ctx.session.tracking else {
        return;
    };
    if ctx.session.in_script {
        // A script tracks the keys its read-only commands read, after it.
        if spec.has(flag::READONLY) && !options.bcast {
            let read = ctx.declared.iter().map(|k| Bytes::copy_from_slice(k.bytes));
            ctx.session.script_reads.extend(read);
        }
        return;
    }
    let caching = std::mem::take(&mut ctx.session.caching);
    if spec.name == "caching" {
        // CLIENT CACHING is for the command after it.
        ctx.session.caching = caching;
        return;
    }
    let script = matches!(spec.run, super::Run::Script(_));
    let script_reads = std::mem::take(&mut ctx.session.script_reads);
    // A script's own keys are not what it read (EVAL_RO too).
    let read = !script && spec.has(flag::READONLY);
    if options.bcast || (!read && script_reads.is_empty()) {
        return;
    }
    if (options.optin && !caching) || (options.optout && caching) {
        return;
    }
    let max_keys = ctx.config.tracking_table_max_keys as usize;
    let declared = ctx.declared.iter().filter(|_| read).map(|k| k.bytes);
    ctx.server.tracking.remember(
        ctx.session.client.id,
        declared.chain(script_reads.iter().map(|k| &k[..])),
        max_keys,
        ctx.config.output_limit_pubsub,
    );
}

/// After a command ran, before its locks go: tells default-mode tracking
/// clients of the keys it changed (the changes after the first `before`
/// of its locks' group: a transaction's earlier commands told theirs),
/// under those locks (`crate::events::tracking`), and of what it committed itself
/// (FLUSHALL …); gathers the keys for BCAST clients, told once the whole
/// command, transaction or script is done ([`broadcast_pending`]).
pub(crate) fn invalidate_changes(ctx: &mut Ctx, before: usize) {
    let server = ctx.server;
    let tracking = &server.tracking;
    let (writer, limit) = (Some(ctx.session.client.id), ctx.config.output_limit_pubsub);
    let mut flushed = false;
    let mut changed: Vec<Bytes> = Vec::new();
    ctx.keys.pending_changes(before, |kind, _, key| {
        if !key.is_empty() {
            changed.push(Bytes::copy_from_slice(key));
        }
        flushed |= matches!(kind, Kind::FlushDb | Kind::FlushAll);
    });
    let refs: Vec<&[u8]> = changed.iter().map(|k| &k[..]).collect();
    tracking.invalidate(&refs, writer, true, limit);
    let mut after: Vec<Bytes> = Vec::new();
    for (kind, _, key) in ctx.committed.changed.iter() {
        flushed |= matches!(kind, Kind::FlushDb | Kind::FlushAll);
        if !key.is_empty() {
            after.push(Bytes::copy_from_slice(key));
        }
    }
    let refs: Vec<&[u8]> = after.iter().map(|k| &k[..]).collect();
    tracking.invalidate(&refs, writer, false, limit);
    if flushed {
        tracking.invalidate_all(limit);
    }
    if tracking.has_bcast() {
        let pending = &mut ctx.session.bcast_pending;
        pending.extend(changed);
        pending.extend(after);
        if pending.len() > BCAST_PENDING_KEYS_MAX {
            broadcast_pending(server, ctx.session, ctx.config);
        }
    }
}

/// Keys gathered for BCAST clients at most; past it, they are told at
/// once (a huge transaction does not buffer without bound).
const BCAST_PENDING_KEYS_MAX: usize = 1 << 20;

/// Tells BCAST clients of the keys the finished command (or transaction,
/// or script) changed.
pub(crate) fn broadcast_pending(server: &Node, session: &mut Session, config: &Config) {
    let pending = std::mem::take(&mut session.bcast_pending);
    let refs: Vec<&[u8]> = pending.iter().map(|k| &k[..]).collect();
    server
        .tracking
        .broadcast(&refs, Some(session.client.id), config.output_limit_pubsub);
}
