//! Server commands: INFO, CONFIG, DBSIZE, FLUSHDB, FLUSHALL, TIME, SWAPDB,
//! SHUTDOWN, SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE, MEMORY and
//! COMMAND (generated from the table).

use crate::commands::Node;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::ctx::help_lines;
use super::keyspec::{self, BeginSearch, FindKeys, KeySpec};
use super::spec::flag;
use super::{CmdError, CmdResult, Ctx, ERR_SYNTAX, Spec, is, lossy, parse_i64};
use crate::config::DIRECTIVES;
use crate::data::background;
use crate::data::persistence::Trigger;
use crate::server::ShutdownSave;

pub fn info(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sections: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    // In a script, INFO runs on the script's lock set, which then holds
    // every shard (it escalated as for a database-wide command).
    let mut held = ctx.keys.all();
    let text = crate::observe::info::render(ctx.server, &sections, ctx.now_ms, &mut held);
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// Redis' hidden options: CONFIG GET shows them only when asked for by
/// their exact name, never for a pattern (`CONFIG GET *`), since they are
/// for tests and debugging.
const HIDDEN_OPTIONS: &[&str] = &[
    "key-load-delay",
    "rdb-key-save-delay",
    "watchdog-period",
    "use-exit-on-panic",
    "aof-disable-auto-gc",
    "loading-process-events-interval-bytes",
];

pub fn config_get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let config = ctx.server.config.get();
    let mut pairs: Vec<(&str, String)> = Vec::new();
    // As in Redis: a pattern without glob characters names one option
    // (hidden ones too); a glob matches every option that is not hidden.
    let wanted = |name: &str| {
        args[2..].iter().any(|pattern| {
            if pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
                !HIDDEN_OPTIONS.contains(&name)
                    && strata_engine::glob::matches(pattern, name.as_bytes(), true)
            } else {
                pattern.eq_ignore_ascii_case(name.as_bytes())
            }
        })
    };
    for directive in DIRECTIVES {
        if wanted(directive.name) {
            pairs.push((directive.name, (directive.get)(&config)));
        }
    }
    for accepted in crate::config_accepted::ACCEPTED {
        // An old name is an option of its own for CONFIG GET, as in Redis.
        for name in std::iter::once(accepted.name).chain(accepted.alias) {
            if wanted(name) {
                pairs.push((name, config.accepted_value(accepted)));
            }
        }
    }
    ctx.out.map(pairs.len());
    for (name, value) in pairs {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk(value.as_bytes());
    }
    Ok(())
}

pub fn config_set(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err("ERR wrong number of arguments for 'config|set' command".into());
    }
    let pairs: Vec<(String, String)> = args[2..]
        .chunks(2)
        .map(|pair| {
            (
                lossy(&pair[0], 256).to_ascii_lowercase(),
                String::from_utf8_lossy(&pair[1]).into_owned(),
            )
        })
        .collect();
    for (i, (name, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(earlier, _)| earlier == name) {
            return Err(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter").into());
        }
    }
    // A new port or bind list is bound before anything changes: a port
    // in use fails the whole CONFIG SET, as in Redis.
    let mut new_plain = None;
    // New TLS settings take effect for new connections, once they load.
    let mut new_tls = None;
    let tls_argument = pairs
        .iter()
        .find(|(name, _)| name.starts_with("tls-"))
        .map(|(name, _)| name.clone());
    ctx.server
        .config
        .set_many_checked(&pairs, |old, new| {
            // The log starts with the server: a cache server (started
            // with `appendonly no`) cannot begin one. A server that runs
            // it may say `no` (and `yes` again): the log goes on, so
            // nothing acknowledged is less safe than the setting says;
            // a restart with `no` starts as a cache (docs/operations.md).
            if new.appendonly && !old.appendonly && ctx.server.keyspace.change_log().is_none() {
                return Err("ERR CONFIG SET failed (possibly related to argument 'appendonly') - Strata starts its log only at start-up: restart with appendonly yes".into());
            }
            if new.port != old.port || new.bind != old.bind {
                new_plain = Some(relisten(ctx.server, old, new)?);
            }
            if new.tls == old.tls || new.tls.port == 0 {
                return Ok(());
            }
            match crate::net::tls::server_config(&new.tls) {
                Ok(tls) => {
                    new_tls = Some(tls);
                    Ok(())
                }
                Err(e) => {
                    crate::log_warning!("Failed to update TLS configuration: {e}");
                    Err(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{}') - Unable to update TLS configuration. Check server logs.",
                        tls_argument.as_deref().unwrap_or("tls-cert-file")
                    ))
                }
            }
        })
        .map_err(CmdError::from)?;
    if let Some(tls) = new_tls {
        *ctx.server.tls.write() = Some(tls);
    }
    if let Some(listeners) = new_plain {
        ctx.server.relisten.replace(listeners);
    }
    let config = ctx.server.config.get();
    config.apply_to_engine(ctx.keyspace());
    let feed_needed = crate::events::notify::needs_feed(config.notify_keyspace_events);
    ctx.server.notify_feed.want(ctx.keyspace(), feed_needed);
    ctx.server.slowlog.trim(config.slowlog_max_len as usize);
    if ctx.server.cluster.enabled() {
        (ctx.server.cluster).set_node_timeout_ms(config.cluster.node_timeout_ms);
    }
    ctx.server.acl.log.trim(config.acllog_max_len as usize);
    if pairs.iter().any(|(name, _)| name == "requirepass") {
        let acl = &ctx.server.acl;
        let rules = acl.rules(&ctx.server.commands, config.acl_pubsub_allchannels);
        acl.set_default_password(&rules, &config.requirepass);
    }
    ctx.out.ok();
    Ok(())
}

/// The TCP listeners a CONFIG SET of `port` or `bind` asks for, with
/// Redis' errors when they cannot be had.
fn relisten(
    server: &Node,
    old: &crate::config::Config,
    new: &crate::config::Config,
) -> Result<Vec<std::net::TcpListener>, String> {
    let tls_only = new.port == 0 && new.tls.port != 0;
    let port = if tls_only { 0 } else { new.port };
    server
        .relisten
        .prepare(&new.bind, new.tcp_backlog, port)
        .map_err(|e| {
            crate::log_warning!("CONFIG SET port/bind: {e}");
            if new.port != old.port {
                "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.".to_string()
            } else {
                "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.".to_string()
            }
        })
}

/// CONFIG REWRITE: the running configuration back into the config file
/// (`config::rewritten` says how).
pub fn config_rewrite(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let config = ctx.server.config.get();
    let users = config
        .aclfile
        .is_empty()
        .then(|| crate::acl::file::rewrite_lines(&ctx.server.acl, &ctx.server.commands, &config));
    crate::config::rewrite_file(&config, users.as_deref())
        .map_err(|e| CmdError::from(format!("ERR {e}")))?;
    crate::log_notice!("CONFIG REWRITE executed with success.");
    ctx.out.ok();
    Ok(())
}

pub fn config_resetstat(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.server.stats.reset(&ctx.server.thread_stats);
    ctx.server.acl.log.reset_counts();
    ctx.server.client_memory.evicted.store(0, Relaxed);
    ctx.server.scripts.evicted.store(0, Relaxed);
    strata_engine::keyspace::lazyfree::reset_freed();
    ctx.server
        .stats
        .expired_keys_base
        .store(ctx.keyspace().expired_keys(), Relaxed);
    ctx.out.ok();
    Ok(())
}

pub fn config_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

pub fn dbsize(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let (keyspace, db) = (ctx.keyspace(), ctx.db());
    let size = keyspace.dbsize_in(ctx.keys.all(), db);
    ctx.out.int(size as i64);
    Ok(())
}

/// Parses FLUSHDB/FLUSHALL's optional SYNC|ASYNC; true for ASYNC.
fn parse_flush_mode(args: &[Bytes]) -> Result<bool, CmdError> {
    match args {
        [_] => Ok(false),
        [_, mode] if is(mode, "ASYNC") => Ok(true),
        [_, mode] if is(mode, "SYNC") => Ok(false),
        _ => Err(ERR_SYNTAX.into()),
    }
}

/// Frees a flushed database's contents: in the background for ASYNC, so
/// the caller's connection is not held up by freeing millions of values.
/// As in Redis 7.4, the keys count as lazily freed objects (INFO
/// `lazyfreed_objects`) for ASYNC and for a FLUSHALL / FLUSHDB a client
/// sends outside MULTI and scripts (Redis runs that one as a blocking
/// ASYNC; here the command frees them itself, which the client waits for
/// all the same), not for one inside a transaction or script.
fn dispose(ctx: &Ctx, flushed: strata_engine::keyspace::shards::Flushed, asynchronous: bool) {
    let keys = flushed.keys();
    if asynchronous {
        std::thread::Builder::new()
            .name("strata-lazyfree".into())
            .spawn(move || {
                drop(flushed);
                strata_engine::keyspace::lazyfree::count_freed(keys);
            })
            .map(drop)
            .unwrap_or(());
    } else {
        drop(flushed);
        if !ctx.session.in_exec && !ctx.session.in_script {
            strata_engine::keyspace::lazyfree::count_freed(keys);
        }
    }
}

pub fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let asynchronous = parse_flush_mode(args)?;
    let (keyspace, db) = (ctx.keyspace(), ctx.db());
    let (flushed, lsn) = keyspace.flush_db_in(ctx.keys.all(), db);
    ctx.committed(lsn);
    dispose(ctx, flushed, asynchronous);
    ctx.out.ok();
    Ok(())
}

pub fn flushall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let asynchronous = parse_flush_mode(args)?;
    flush_all_keys(ctx, asynchronous);
    ctx.out.ok();
    Ok(())
}

/// Empties every database (FLUSHALL, DEBUG RELOAD of an RDB file).
pub(crate) fn flush_all_keys(ctx: &mut Ctx, asynchronous: bool) {
    let keyspace = ctx.keyspace();
    // The tracking table empties with every shard locked: a read registers
    // its key under its shard's lock, so it came before the flush (and
    // hears its null invalidation) or comes after (and stays), as Redis
    // empties the table on FLUSHALL.
    let tracking = &ctx.server.tracking;
    let db = ctx.db();
    let (flushed, lsn) = keyspace.flush_all_in(ctx.keys.all(), db, || tracking.forget_keys());
    ctx.committed(lsn);
    dispose(ctx, flushed, asynchronous);
}

pub fn time(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let clock = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    };
    let now = match ctx.session.in_script {
        true => *ctx.session.script_time.get_or_insert_with(clock),
        false => clock(),
    };
    ctx.out.array(2);
    ctx.out.bulk(now.as_secs().to_string().as_bytes());
    ctx.out.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}

pub fn swapdb(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if ctx.server.cluster.enabled() {
        return Err("ERR SWAPDB is not allowed in cluster mode".into());
    }
    let a = parse_i64(&args[1]).map_err(|_| CmdError::from("ERR invalid first DB index"))?;
    let b = parse_i64(&args[2]).map_err(|_| CmdError::from("ERR invalid second DB index"))?;
    let count = ctx.keyspace().db_count() as i64;
    if !(0..count).contains(&a) || !(0..count).contains(&b) {
        return Err("ERR DB index is out of range".into());
    }
    let keyspace = ctx.keyspace();
    let lsn = keyspace.swap_db_in(ctx.keys.all(), a as usize, b as usize);
    ctx.committed(lsn);
    ctx.out.ok();
    Ok(())
}

pub fn shutdown(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let save = shutdown_mode(args)?;
    crate::log_warning!("User requested shutdown...");
    ctx.server.request_shutdown(save);
    // Like Redis, the client gets no reply: the connection just closes.
    ctx.session.close_after_reply = true;
    Ok(())
}

/// What SHUTDOWN's options ask for, or their error.
pub fn shutdown_mode(args: &[Bytes]) -> Result<ShutdownSave, CmdError> {
    let mut save = ShutdownSave::Default;
    for option in &args[1..] {
        let chosen = if is(option, "NOSAVE") {
            Some(ShutdownSave::NoSave)
        } else if is(option, "SAVE") {
            Some(ShutdownSave::Save)
        } else {
            None
        };
        if let Some(chosen) = chosen {
            // Redis 7: SAVE and NOSAVE together are a syntax error.
            if save != ShutdownSave::Default && save != chosen {
                return Err(ERR_SYNTAX.into());
            }
            save = chosen;
        }
        if is(option, "ABORT") {
            return Err("ERR No shutdown in progress.".into());
        }
        if !["NOSAVE", "SAVE", "NOW", "FORCE"]
            .iter()
            .any(|o| is(option, o))
        {
            return Err(ERR_SYNTAX.into());
        }
    }
    Ok(save)
}

/// COMMAND INFO's entry for one command, as Redis 7 writes it.
fn write_command_info(ctx: &mut Ctx, full_name: &str, spec: &Spec) {
    let ((first, last, step), movable) = keyspec::legacy_range(spec.keys);
    // Redis lists `movablekeys` (worked out from the key specs) between
    // `no_multi` and `allow_busy`.
    let mut flags: Vec<&str> = spec.flags.shown().collect();
    if movable {
        let at = flags
            .iter()
            .position(|f| *f == "allow_busy")
            .unwrap_or(flags.len());
        flags.insert(at, "movablekeys");
    }
    ctx.out.array(10);
    ctx.out.bulk(full_name.as_bytes());
    ctx.out.int(spec.arity as i64);
    ctx.out.set(flags.len());
    for flag in flags {
        ctx.out.simple(flag);
    }
    ctx.out.int(first as i64);
    ctx.out.int(last as i64);
    ctx.out.int(step as i64);
    ctx.out.set(spec.acl.count());
    for category in spec.acl.names() {
        ctx.out.simple(&format!("@{category}"));
    }
    let tips = spec.tips;
    ctx.out.set(tips.len());
    for tip in tips {
        ctx.out.bulk(tip.as_bytes());
    }
    ctx.out.set(spec.keys.len());
    for key_spec in spec.keys {
        write_key_spec(ctx, key_spec);
    }
    ctx.out.array(spec.subcommands.len());
    for sub in spec.subcommands {
        let name = format!("{full_name}|{}", sub.name);
        write_command_info(ctx, &name, sub);
    }
}

/// One key specification as COMMAND INFO shows it.
fn write_key_spec(ctx: &mut Ctx, key_spec: &KeySpec) {
    let noted = !key_spec.notes.is_empty();
    ctx.out.map(3 + noted as usize);
    if noted {
        ctx.out.bulk(b"notes");
        ctx.out.bulk(key_spec.notes.as_bytes());
    }
    ctx.out.bulk(b"flags");
    write_key_flags(ctx, key_spec.flags);
    ctx.out.bulk(b"begin_search");
    ctx.out.map(2);
    ctx.out.bulk(b"type");
    match key_spec.begin {
        BeginSearch::Index(index) => {
            ctx.out.bulk(b"index");
            ctx.out.bulk(b"spec");
            ctx.out.map(1);
            ctx.out.bulk(b"index");
            ctx.out.int(index as i64);
        }
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            ctx.out.bulk(b"keyword");
            ctx.out.bulk(b"spec");
            ctx.out.map(2);
            ctx.out.bulk(b"keyword");
            ctx.out.bulk(keyword.as_bytes());
            ctx.out.bulk(b"startfrom");
            ctx.out.int(start_from as i64);
        }
        BeginSearch::Unknown => {
            ctx.out.bulk(b"unknown");
            ctx.out.bulk(b"spec");
            ctx.out.map(0);
        }
    }
    ctx.out.bulk(b"find_keys");
    ctx.out.map(2);
    ctx.out.bulk(b"type");
    let fields: [(&[u8], i32); 3] = match key_spec.find {
        FindKeys::Unknown => {
            ctx.out.bulk(b"unknown");
            ctx.out.bulk(b"spec");
            ctx.out.map(0);
            return;
        }
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => {
            ctx.out.bulk(b"range");
            [
                (b"lastkey", last_key),
                (b"keystep", step),
                (b"limit", limit),
            ]
        }
        FindKeys::Keynum {
            keynum_index,
            first_key,
            step,
        } => {
            ctx.out.bulk(b"keynum");
            [
                (b"keynumidx", keynum_index),
                (b"firstkey", first_key),
                (b"keystep", step),
            ]
        }
    };
    ctx.out.bulk(b"spec");
    ctx.out.map(3);
    for (name, value) in fields {
        ctx.out.bulk(name);
        ctx.out.int(value as i64);
    }
}

/// Key spec flags as a set, in Redis' order.
fn write_key_flags(ctx: &mut Ctx, flags: &[&str]) {
    let ordered: Vec<&str> = keyspec::FLAG_ORDER
        .iter()
        .copied()
        .filter(|flag| flags.contains(flag))
        .collect();
    ctx.out.set(ordered.len());
    for flag in ordered {
        ctx.out.simple(flag);
    }
}

pub fn command_all(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let commands: Vec<_> = ctx.server.commands.top_level().collect();
    ctx.out.array(commands.len());
    for (_, spec) in commands {
        write_command_info(ctx, spec.name, spec);
    }
    Ok(())
}

pub fn command_count(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.out.int(ctx.server.commands.top_level().count() as i64);
    Ok(())
}

/// Resolves `name` or `parent|sub` to its spec.
fn find_spec(ctx: &Ctx, name: &[u8]) -> Option<(String, &'static Spec)> {
    let table = &ctx.server.commands;
    let text = String::from_utf8_lossy(name).to_ascii_lowercase();
    let id = match text.split_once('|') {
        Some((parent, sub)) => {
            table.lookup_subcommand(table.lookup(parent.as_bytes())?, sub.as_bytes())?
        }
        None => table.lookup(text.as_bytes())?,
    };
    Some((table.full_names[id].clone(), table.specs[id]))
}

pub fn command_info(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() == 2 {
        return command_all(ctx, args);
    }
    ctx.out.array(args.len() - 2);
    for name in &args[2..] {
        match find_spec(ctx, name) {
            Some((full_name, spec)) => write_command_info(ctx, &full_name, spec),
            // Redis answers a null (`$-1` in RESP2) for an unknown name.
            None => ctx.out.null_bulk(),
        }
    }
    Ok(())
}

fn write_command_docs(ctx: &mut Ctx, spec: &Spec, full_name: &str) {
    ctx.out.bulk(full_name.as_bytes());
    let has_subcommands = !spec.subcommands.is_empty();
    ctx.out.map(4 + has_subcommands as usize);
    ctx.out.bulk(b"summary");
    ctx.out.bulk(spec.summary.as_bytes());
    ctx.out.bulk(b"since");
    ctx.out.bulk(spec.since.as_bytes());
    ctx.out.bulk(b"group");
    ctx.out.bulk(spec.group.as_bytes());
    ctx.out.bulk(b"complexity");
    ctx.out.bulk(spec.complexity.as_bytes());
    if has_subcommands {
        ctx.out.bulk(b"subcommands");
        ctx.out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            let mut sub_doc = Spec {
                group: spec.group,
                ..*sub
            };
            sub_doc.subcommands = &[];
            write_command_docs(ctx, &sub_doc, &format!("{full_name}|{}", sub.name));
        }
    }
}

pub fn command_docs(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let specs: Vec<(String, &'static Spec)> = if args.len() == 2 {
        ctx.server
            .commands
            .top_level()
            .map(|(_, s)| (s.name.to_owned(), s))
            .collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|name| find_spec(ctx, name))
            .collect()
    };
    ctx.out.map(specs.len());
    for (full_name, spec) in specs {
        write_command_docs(ctx, spec, &full_name);
    }
    Ok(())
}

/// A COMMAND LIST FILTERBY predicate over (full name, spec).
type CommandFilter = dyn Fn(&str, &Spec) -> bool;

pub fn command_list(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let table = &ctx.server.commands;
    let filter: Box<CommandFilter> = match args.len() {
        2 => Box::new(|_, _| true),
        5 if is(&args[2], "FILTERBY") => {
            let value = String::from_utf8_lossy(&args[4]).to_ascii_lowercase();
            if is(&args[3], "MODULE") {
                Box::new(|_, _| false)
            } else if is(&args[3], "ACLCAT") {
                Box::new(move |_, spec| spec.acl.names().any(|c| c == value))
            } else if is(&args[3], "PATTERN") {
                Box::new(move |name, _| {
                    strata_engine::glob::matches(value.as_bytes(), name.as_bytes(), true)
                })
            } else {
                return Err(ERR_SYNTAX.into());
            }
        }
        _ => return Err(ERR_SYNTAX.into()),
    };
    let names: Vec<&String> = table
        .full_names
        .iter()
        .enumerate()
        .filter(|(i, name)| filter(name, table.specs[*i]))
        .map(|(_, n)| n)
        .collect();
    ctx.out.array(names.len());
    for name in names {
        ctx.out.bulk(name.as_bytes());
    }
    Ok(())
}

/// The spec (and full name) of the command in COMMAND GETKEYS'
/// arguments, after Redis' checks (known command, its arity).
fn command_to_inspect(ctx: &Ctx, command: &[Bytes]) -> Result<(usize, &'static Spec), CmdError> {
    let table = &ctx.server.commands;
    let mut id = table
        .lookup(&command[0])
        .ok_or(CmdError::from("ERR Invalid command specified"))?;
    if !table.specs[id].subcommands.is_empty() && command.len() >= 2 {
        id = table.lookup_subcommand(id, &command[1]).unwrap_or(id);
    }
    let spec: &'static Spec = table.specs[id];
    let arity_ok = if spec.arity >= 0 {
        command.len() == spec.arity as usize
    } else {
        command.len() >= (-spec.arity) as usize
    };
    if !arity_ok {
        return Err("ERR Invalid number of arguments specified for command".into());
    }
    Ok((id, spec))
}

/// The keys of the command in `args[2..]`, each with its flags, with
/// Redis' answers: a command that takes no keys is an error; one whose
/// keys are optional (EVAL with 0 keys) has none; for the others, no key
/// found means the arguments are wrong.
fn keys_to_report(ctx: &Ctx, args: &[Bytes]) -> Result<Vec<(usize, keyspec::KeyFlags)>, CmdError> {
    let (_, spec) = command_to_inspect(ctx, &args[2..])?;
    if spec.keys.is_empty() && spec.keys_hook.is_none() {
        return Err("ERR The command has no key arguments".into());
    }
    match keyspec::keys_and_flags(spec.keys, spec.keys_hook, &args[2..]) {
        Ok(keys) if !keys.is_empty() => Ok(keys),
        _ if spec.has(flag::NO_MANDATORY_KEYS) => Ok(Vec::new()),
        _ => Err("ERR Invalid arguments specified for command".into()),
    }
}

pub fn command_getkeys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let keys = keys_to_report(ctx, args)?;
    ctx.out.array(keys.len());
    for (at, _) in keys {
        ctx.out.bulk(&args[2 + at]);
    }
    Ok(())
}

pub fn command_getkeysandflags(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let keys = keys_to_report(ctx, args)?;
    ctx.out.array(keys.len());
    for (at, flags) in keys {
        ctx.out.array(2);
        ctx.out.bulk(&args[2 + at]);
        write_key_flags(ctx, flags);
    }
    Ok(())
}

pub fn command_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
        ],
    );
    Ok(())
}

pub fn save(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    match background::checkpoint(&background::Handles::of(ctx.server), Trigger::Save) {
        Ok(_) => {
            ctx.out.ok();
            Ok(())
        }
        Err(e) if e == "in progress" => Err("ERR Background save already in progress".into()),
        Err(_) => Err("ERR".into()),
    }
}

pub fn bgsave(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let schedule = match args.get(1) {
        None => false,
        Some(option) if args.len() == 2 && is(option, "SCHEDULE") => true,
        Some(_) => return Err(ERR_SYNTAX.into()),
    };
    if ctx.server.persistence.request(Trigger::Bgsave) {
        ctx.out.simple("Background saving started");
        return Ok(());
    }
    if schedule {
        ctx.out.simple("Background saving scheduled");
        return Ok(());
    }
    Err("ERR Background save already in progress".into())
}

pub fn bgrewriteaof(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let persistence = &ctx.server.persistence;
    if persistence.request(Trigger::Rewrite) {
        ctx.out
            .simple("Background append only file rewriting started");
        return Ok(());
    }
    // As Redis does when a BGSAVE child is running: run it afterwards.
    if persistence.schedule(Trigger::Rewrite) {
        ctx.out
            .simple("Background append only file rewriting scheduled");
        return Ok(());
    }
    Err("ERR Background append only file rewriting already in progress".into())
}

pub fn lastsave(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let last = ctx.server.persistence.last_save_s.load(Relaxed);
    ctx.out.int(last as i64);
    Ok(())
}

/// WAIT's and WAITAOF's timeout: milliseconds, 0 for none.
fn wait_deadline(now_ms: u64, arg: &[u8]) -> Result<Option<u64>, CmdError> {
    let ms = parse_i64(arg)
        .map_err(|_| CmdError::from("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err("ERR timeout is negative".into());
    }
    Ok((ms > 0).then(|| now_ms.saturating_add(ms as u64)))
}

/// The last change committed before this connection's WAIT or WAITAOF
/// began (kept while it blocks: a rerun waits for the same one).
fn wait_target(ctx: &mut Ctx) -> u64 {
    *ctx.session
        .wait_target
        .get_or_insert_with(|| ctx.server.keyspace.next_change_seq().saturating_sub(1))
}

/// Asks the replicas for an acknowledgement now and blocks the
/// connection until one arrives or `deadline` (then the command runs
/// again and answers what it has).
fn block_for_acks(ctx: &mut Ctx, target: u64, deadline: Option<u64>) {
    ctx.server.replication.request_acks(target);
    ctx.block(&[], deadline, crate::net::session::TimeoutReply::Rerun);
    if let Some(block) = &mut ctx.session.block {
        block.on_ack = true;
    }
}

/// WAIT numreplicas timeout: how many replicas hold every change
/// committed before it (this connection's writes among them), waiting
/// until `numreplicas` do or the timeout passes (0: for ever, or until
/// CLIENT UNBLOCK). It asks the replicas for an acknowledgement at once
/// rather than wait for their next one. In a script or EXEC it does not
/// wait; on a replica it is refused, as in Redis.
pub fn wait(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let replication = &ctx.server.replication;
    if replication.is_replica() {
        return Err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.".into());
    }
    let wanted = parse_i64(&args[1])?;
    let deadline = wait_deadline(ctx.now_ms, &args[2])?;
    let target = wait_target(ctx);
    let holding = replication.holding(target) as i64;
    let cannot_wait = ctx.session.in_exec || ctx.session.in_script;
    if holding >= wanted || cannot_wait || ctx.session.block_timed_out {
        ctx.session.wait_target = None;
        ctx.out.int(holding);
        return Ok(());
    }
    block_for_acks(ctx, target, deadline);
    Ok(())
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): the local count is 1
/// once this connection's writes are on disk (the log is written and
/// synced now), 0 with `appendonly no`; the replica count is how many
/// replicas have synced every change committed before it to their own
/// log (their `REPLCONF ACK <offset> FACK <synced offset>`). It waits as
/// WAIT does, and is refused on a replica, as in Redis.
pub fn waitaof(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let numlocal = parse_i64(&args[1])
        .ok()
        .filter(|n| (0..=1).contains(n))
        .ok_or("ERR value is out of range, value must between 0 and 1")?;
    let wanted = parse_i64(&args[2])
        .ok()
        .filter(|&n| n >= 0)
        .ok_or("ERR value is out of range, must be positive")?;
    let deadline = wait_deadline(ctx.now_ms, &args[3])?;
    let replication = &ctx.server.replication;
    if replication.is_replica() {
        return Err("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.".into());
    }
    if numlocal > 0 && !ctx.config.appendonly {
        return Err(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.".into(),
        );
    }
    let local = match ctx.server.keyspace.change_log() {
        Some(log) if ctx.config.appendonly => {
            log.flush_now();
            log.sync_now() as i64
        }
        _ => 0,
    };
    let target = wait_target(ctx);
    let holding = replication.holding_synced(target) as i64;
    let cannot_wait = ctx.session.in_exec || ctx.session.in_script;
    if (local >= numlocal && holding >= wanted) || cannot_wait || ctx.session.block_timed_out {
        ctx.session.wait_target = None;
        ctx.out.array(2);
        ctx.out.int(local);
        ctx.out.int(holding);
        return Ok(());
    }
    block_for_acks(ctx, target, deadline);
    Ok(())
}

/// MODULE's refusal while `enable-module-command` does not allow it (its
/// default, `no`, as in Redis 7).
const ERR_MODULE_NOT_ALLOWED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// MODULE LOAD / LOADEX / UNLOAD, where `enable-module-command` allows
/// them: Strata cannot load Redis modules (they are C libraries
/// built against Redis' own API), so the list is empty, a load fails as a
/// Redis load of a bad library does (the log says why) and nothing can be
/// unloaded.
fn module_allowed(ctx: &Ctx) -> Result<(), CmdError> {
    // The same gate as `enable-debug-command` (the setting is an accepted
    // directive, kept as text).
    let gate = crate::config::Gate::parse(&ctx.config.setting("enable-module-command"));
    match gate.is_some_and(|gate| gate.allows(ctx.session.client.is_local())) {
        true => Ok(()),
        false => Err(ERR_MODULE_NOT_ALLOWED.into()),
    }
}

/// MODULE LIST: not protected in Redis (LOAD, LOADEX and UNLOAD are).
pub fn module_list(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.out.array(0);
    Ok(())
}

pub fn module_load(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    module_allowed(ctx)?;
    crate::log_warning!(
        "Module {} failed to load: Strata cannot load Redis modules",
        lossy(&args[2], 256)
    );
    Err("ERR Error loading the extension. Please check the server logs.".into())
}

pub fn module_unload(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    module_allowed(ctx)?;
    Err("ERR Error unloading module: no such module with that name".into())
}

/// MODULE HELP, word for word Redis 7's (whose last line says "Prints",
/// where the other containers' helps say "Print").
pub fn module_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    const LINES: &[&str] = &[
        "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD <path> [<arg> ...]",
        "    Load a module library from <path>, passing to it any optional arguments.",
        "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        "    Load a module library from <path>, while passing it module configurations and optional arguments.",
        "UNLOAD <name>",
        "    Unload a module.",
        "HELP",
        "    Prints this help.",
    ];
    ctx.out.array(LINES.len());
    for line in LINES {
        ctx.out.simple(line);
    }
    Ok(())
}
