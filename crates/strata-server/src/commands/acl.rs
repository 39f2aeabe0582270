//! The ACL command family: SETUSER, GETUSER, DELUSER, LIST, USERS,
//! WHOAMI, CAT, LOG, GENPASS, DRYRUN, SAVE, LOAD and HELP, with Redis 7's
//! replies and errors. The rules themselves are `crate::acl`'s.

use bytes::Bytes;

use super::ctx::help_lines;
use super::{CmdError, CmdResult, Ctx, lossy};
use crate::acl::categories::{CATEGORIES, Categories};
use crate::acl::log::Reason;
use crate::acl::selector::{Selector, has_spaces};
use crate::acl::user::User;

/// ACL GENPASS' longest password, in bits.
const GENPASS_BITS_MAX: i64 = 4096;

const ERR_NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// Redis' answer to a subcommand given the wrong arguments, naming it as
/// the client typed it.
fn wrong_arguments(subcommand: &[u8]) -> CmdError {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        lossy(subcommand, 128)
    )
    .into()
}

pub fn acl_setuser(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let name = &args[2];
    if has_spaces(name) {
        return Err("ERR Usernames can't contain spaces or null characters".into());
    }
    let name = String::from_utf8_lossy(name).into_owned();
    let server = ctx.server;
    let rules = server
        .acl
        .rules(&server.commands, ctx.config.acl_pubsub_allchannels);
    let (old, new) = server
        .acl
        .set_user(&rules, &name, &args[3..])
        .map_err(CmdError::from)?;
    if let Some(old) = old {
        kill_revoked_subscribers(ctx, &old, &new);
    }
    ctx.out.ok();
    Ok(())
}

/// Closes the pub/sub clients of a user whose channel permissions no
/// longer cover what they subscribed to (Redis does so at SETUSER).
fn kill_revoked_subscribers(ctx: &mut Ctx, old: &User, new: &User) {
    use crate::acl::selector::{ChannelUse, channel_in};
    use crate::events::pubsub::Kind;
    if new.selectors.iter().any(|s| s.all_channels) {
        return;
    }
    let upcoming: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    // Nothing revoked: every channel pattern the user had, it still has.
    let kept = old
        .selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(c)));
    if kept {
        return;
    }
    let pubsub = &ctx.server.pubsub;
    for client in ctx.server.clients.snapshot() {
        if client.names.lock().user != old.name {
            continue;
        }
        let revoked = pubsub
            .names_of(Kind::Pattern, client.id)
            .iter()
            .any(|p| !channel_in(&upcoming, p, ChannelUse::Pattern))
            || [Kind::Channel, Kind::Shard].into_iter().any(|kind| {
                pubsub
                    .names_of(kind, client.id)
                    .iter()
                    .any(|c| !channel_in(&upcoming, c, ChannelUse::Name))
            });
        if revoked {
            close_client(ctx, &client);
        }
    }
}

/// Closes a client: at once, or after this reply for the caller itself.
fn close_client(ctx: &mut Ctx, client: &crate::net::client::ClientInfo) {
    if client.id == ctx.session.client.id {
        ctx.session.close_after_reply = true;
        client.mark_closing();
    } else {
        client.kill();
    }
}

pub fn acl_deluser(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args[2..].iter().any(|name| name.as_ref() == b"default") {
        return Err("ERR The 'default' user cannot be removed".into());
    }
    let deleted = ctx.server.acl.delete(&args[2..]);
    // Their connections close, the caller's after this reply.
    for client in ctx.server.clients.snapshot() {
        let user = client.names.lock().user.clone();
        if deleted.iter().any(|u| u.name == user) {
            close_client(ctx, &client);
        }
    }
    ctx.out.int(deleted.len() as i64);
    Ok(())
}

pub fn acl_getuser(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(user) = ctx.server.acl.get(&String::from_utf8_lossy(&args[2])) else {
        ctx.out.null_bulk();
        return Ok(());
    };
    let (table, categories) = (&ctx.server.commands, &ctx.server.acl.categories);
    let out = &mut ctx.out;
    out.map(6);
    out.bulk(b"flags");
    let flags = user.flags();
    out.set(flags.len());
    for flag in flags {
        out.bulk(flag.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(user.passwords.len());
    for password in &user.passwords {
        out.bulk(password.as_bytes());
    }
    write_selector(out, user.root(), table, categories);
    out.bulk(b"selectors");
    out.array(user.selectors.len() - 1);
    for selector in &user.selectors[1..] {
        out.map(3);
        write_selector(out, selector, table, categories);
    }
    Ok(())
}

/// A selector's three fields of ACL GETUSER.
fn write_selector(
    out: &mut strata_resp::ReplyWriter,
    selector: &Selector,
    table: &super::CommandTable,
    categories: &Categories,
) {
    out.bulk(b"commands");
    out.bulk(selector.describe_commands(table, categories).as_bytes());
    out.bulk(b"keys");
    out.bulk(selector.describe_keys().as_bytes());
    out.bulk(b"channels");
    out.bulk(selector.describe_channels().as_bytes());
}

pub fn acl_list(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let lines = crate::acl::file::user_lines(&ctx.server.acl, &ctx.server.commands);
    ctx.out.array(lines.len());
    for line in lines {
        ctx.out.bulk(line.as_bytes());
    }
    Ok(())
}

pub fn acl_users(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let users = ctx.server.acl.users();
    ctx.out.array(users.len());
    for user in users {
        ctx.out.bulk(user.name.as_bytes());
    }
    Ok(())
}

pub fn acl_whoami(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let name = ctx.session.user.name.clone();
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

pub fn acl_cat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args {
        [_, _] => {
            ctx.out.array(CATEGORIES.len());
            for category in CATEGORIES {
                ctx.out.bulk(category.as_bytes());
            }
        }
        [_, _, category] => {
            let name = String::from_utf8_lossy(category).to_ascii_lowercase();
            let Some(bit) = Categories::bit_of(&name) else {
                return Err(format!("ERR Unknown category '{}'", lossy(category, 128)).into());
            };
            let server = ctx.server;
            let names: Vec<&String> = (0..server.commands.len())
                .filter(|&id| server.acl.categories.of(id) & bit != 0)
                .map(|id| &server.commands.full_names[id])
                .collect();
            ctx.out.array(names.len());
            for name in names {
                ctx.out.bulk(name.as_bytes());
            }
        }
        _ => {
            return Err(wrong_arguments(&args[1]));
        }
    }
    Ok(())
}

pub fn acl_genpass(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let bits = match args.get(2) {
        Some(arg) => super::parse_i64(arg)?,
        None => 256,
    };
    if args.len() > 3 {
        return Err(wrong_arguments(&args[1]));
    }
    if bits <= 0 || bits > GENPASS_BITS_MAX {
        return Err(format!("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_BITS_MAX}").into());
    }
    let chars = (bits as usize).div_ceil(4);
    let mut random = vec![0u8; chars.div_ceil(2)];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
        .map_err(|_| CmdError::from("ERR could not read random bytes"))?;
    let mut hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    ctx.out.bulk(hex.as_bytes());
    Ok(())
}

pub fn acl_log(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut count = 10;
    match args {
        [_, _] => {}
        [_, _, arg] if arg.eq_ignore_ascii_case(b"reset") => {
            ctx.server.acl.log.reset();
            ctx.out.ok();
            return Ok(());
        }
        [_, _, arg] => count = super::parse_i64(arg)?.max(0) as usize,
        _ => {
            return Err(wrong_arguments(&args[1]));
        }
    }
    let entries = ctx.server.acl.log.latest(count);
    let now_ms = ctx.now_ms;
    let out = &mut ctx.out;
    out.array(entries.len());
    for entry in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(entry.count as i64);
        out.bulk(b"reason");
        out.bulk(entry.reason.name().as_bytes());
        out.bulk(b"context");
        out.bulk(entry.context.name().as_bytes());
        out.bulk(b"object");
        out.bulk(entry.object.as_bytes());
        out.bulk(b"username");
        out.bulk(entry.username.as_bytes());
        out.bulk(b"age-seconds");
        out.double(now_ms.saturating_sub(entry.time_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(entry.client_info.as_bytes());
    }
    Ok(())
}

pub fn acl_dryrun(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let server = ctx.server;
    let Some(user) = server.acl.get(&String::from_utf8_lossy(&args[2])) else {
        return Err(format!("ERR User '{}' not found", lossy(&args[2], 128)).into());
    };
    let command = &args[3..];
    let table = &server.commands;
    let Some(id) = table.resolve(command) else {
        return Err(format!("ERR Command '{}' not found", lossy(&args[3], 128)).into());
    };
    if !table.specs[id].arity_ok(command.len()) {
        return Err(format!(
            "ERR wrong number of arguments for '{}' command",
            table.full_names[id]
        )
        .into());
    }
    match server.acl.check(&user, table, id, command) {
        Ok(()) => ctx.out.ok(),
        Err(denied) => {
            let text = match denied.reason {
                Reason::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    table.full_names[id]
                ),
                Reason::Key => format!(
                    "This user has no permissions to access the '{}' key",
                    lossy(&command[denied.at], 1 << 20)
                ),
                _ => format!(
                    "This user has no permissions to access the '{}' channel",
                    lossy(&command[denied.at], 1 << 20)
                ),
            };
            ctx.out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

pub fn acl_save(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.config.aclfile.is_empty() {
        return Err(ERR_NO_ACL_FILE.into());
    }
    crate::acl::file::save_file(&ctx.server.acl, &ctx.server.commands, &ctx.config.aclfile)
        .map_err(|e| {
            crate::log_warning!("Writing ACL file for ACL SAVE: {e}");
            CmdError::from("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        })?;
    ctx.out.ok();
    Ok(())
}

pub fn acl_load(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.config.aclfile.is_empty() {
        return Err(ERR_NO_ACL_FILE.into());
    }
    crate::acl::file::load_file(&ctx.server.acl, &ctx.server.commands, ctx.config)
        .map_err(|errors| CmdError::from(format!("ERR {errors}")))?;
    // Every user was replaced: the clients logged in as one other than
    // the default user close (Redis frees those users), the caller's
    // after this reply.
    for client in ctx.server.clients.snapshot() {
        if client.names.lock().user != "default" {
            close_client(ctx, &client);
        }
    }
    ctx.out.ok();
    Ok(())
}

pub fn acl_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}
