//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB's subcommands.
//! Delivery and limits are in `crate::events::pubsub`. A RESP2 client with a
//! subscription may only (un)subscribe, PING, QUIT and RESET (checked by
//! dispatch, the table's `WHEN_SUBSCRIBED`); a RESP3 client receives
//! messages as pushes between its replies.

use bytes::Bytes;

use super::ctx::help_lines;
use super::{CmdResult, Ctx};
use crate::events::pubsub::{Counts, Kind};

/// The count a (un)subscribe confirmation carries: channels and patterns
/// together, shard channels on their own.
fn count(kind: Kind, counts: Counts) -> usize {
    match kind {
        Kind::Shard => counts.shard,
        _ => counts.channels + counts.patterns,
    }
}

fn confirm(ctx: &mut Ctx, word: &str, name: Option<&[u8]>, count: usize) {
    // As Redis 7.0: (un)subscribe confirmations are pushes, which CLIENT
    // REPLY OFF and SKIP do not silence, in RESP2 as in RESP3.
    ctx.session.replied_push = true;
    ctx.out.push(3);
    ctx.out.bulk(word.as_bytes());
    match name {
        Some(name) => ctx.out.bulk(name),
        None => ctx.out.null_bulk(),
    }
    ctx.out.int(count as i64);
}

fn note_counts(ctx: &mut Ctx, counts: Counts) {
    ctx.session.subscriptions = counts.channels + counts.patterns + counts.shard;
    let client = &ctx.session.client;
    use std::sync::atomic::Ordering::Relaxed;
    client.subscribed_channels.store(counts.channels, Relaxed);
    client.subscribed_patterns.store(counts.patterns, Relaxed);
    client.subscribed_shard.store(counts.shard, Relaxed);
}

fn subscribe_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind) -> CmdResult {
    let mailbox = ctx.session.client.mailbox().clone();
    let (word, _, _) = kind.words();
    for name in &args[1..] {
        let counts = ctx.server.pubsub.subscribe(kind, name, &mailbox);
        note_counts(ctx, counts);
        confirm(ctx, word, Some(name), count(kind, counts));
    }
    Ok(())
}

fn unsubscribe_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind) -> CmdResult {
    let (_, word, _) = kind.words();
    let id = ctx.session.client.id;
    let pubsub = &ctx.server.pubsub;
    let names = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        pubsub.names_of(kind, id)
    };
    if names.is_empty() {
        let counts = pubsub.counts(id);
        confirm(ctx, word, None, count(kind, counts));
        return Ok(());
    }
    for name in &names {
        let counts = pubsub.unsubscribe(kind, name, id);
        note_counts(ctx, counts);
        confirm(ctx, word, Some(name), count(kind, counts));
    }
    Ok(())
}

pub fn subscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    subscribe_generic(ctx, args, Kind::Channel)
}

pub fn psubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    subscribe_generic(ctx, args, Kind::Pattern)
}

pub fn ssubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    subscribe_generic(ctx, args, Kind::Shard)
}

pub fn unsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    unsubscribe_generic(ctx, args, Kind::Channel)
}

pub fn punsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    unsubscribe_generic(ctx, args, Kind::Pattern)
}

pub fn sunsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    unsubscribe_generic(ctx, args, Kind::Shard)
}

/// Leaves every subscription (RESET).
pub fn unsubscribe_all(ctx: &mut Ctx) {
    ctx.server.pubsub.forget(ctx.session.client.id);
    note_counts(ctx, Counts::default());
    if let Some(mailbox) = ctx.session.client.existing_mailbox() {
        mailbox.clear();
    }
}

pub fn publish(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let limit = ctx.config.output_limit_pubsub;
    let received = ctx.server.pubsub.publish(&args[1], &args[2], false, limit);
    (ctx.server.replication).propagate(ctx.db(), &[b"PUBLISH", &args[1], &args[2]]);
    ctx.out.int(received as i64);
    Ok(())
}

pub fn spublish(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let limit = ctx.config.output_limit_pubsub;
    let received = ctx.server.pubsub.publish(&args[1], &args[2], true, limit);
    (ctx.server.replication).propagate(ctx.db(), &[b"SPUBLISH", &args[1], &args[2]]);
    ctx.out.int(received as i64);
    Ok(())
}

fn channels_generic(ctx: &mut Ctx, args: &[Bytes], shard: bool) -> CmdResult {
    if args.len() > 3 {
        let name = if shard { "shardchannels" } else { "channels" };
        return Err(format!("ERR wrong number of arguments for 'pubsub|{name}' command").into());
    }
    let channels = ctx
        .server
        .pubsub
        .channels(shard, args.get(2).map(|p| &p[..]));
    ctx.out.array(channels.len());
    for channel in &channels {
        ctx.out.bulk(channel);
    }
    Ok(())
}

fn numsub_generic(ctx: &mut Ctx, args: &[Bytes], shard: bool) -> CmdResult {
    ctx.out.map(args.len() - 2);
    for channel in &args[2..] {
        ctx.out.bulk(channel);
        ctx.out
            .int(ctx.server.pubsub.subscribers(shard, channel) as i64);
    }
    Ok(())
}

pub fn pubsub_channels(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    channels_generic(ctx, args, false)
}

pub fn pubsub_shardchannels(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    channels_generic(ctx, args, true)
}

pub fn pubsub_numsub(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    numsub_generic(ctx, args, false)
}

pub fn pubsub_shardnumsub(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    numsub_generic(ctx, args, true)
}

pub fn pubsub_numpat(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.out.int(ctx.server.pubsub.pattern_count() as i64);
    Ok(())
}

pub fn pubsub_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
