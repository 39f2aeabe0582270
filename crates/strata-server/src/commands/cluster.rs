//! CLUSTER and the cluster client commands (READONLY, READWRITE,
//! ASKING), over `crate::cluster`'s topology.
//!
//! Without `cluster-enabled yes` every subcommand but KEYSLOT and HELP
//! answers what a standalone Redis answers (cluster support disabled),
//! so clients that probe for cluster mode see a standalone server.
//! KEYSLOT answers anyway: keys are sharded by their slot either way.
//!
//! With it, the reports (INFO, MYID, MYSHARDID, NODES, SLOTS, SHARDS,
//! COUNTKEYSINSLOT, GETKEYSINSLOT, LINKS, REPLICAS, COUNT-FAILURE-REPORTS)
//! read the topology, and the administrative subcommands change it as
//! Redis' do, saved to `cluster-config-file` before they answer, through
//! the Raft group once nodes have met (`docs/cluster.md`). MIGRATION
//! moves slots whole (`crate::replication::migration`).

use bytes::Bytes;
use strata_engine::keyspace::shards::key_slot;

use smallvec::SmallVec;

use super::Node;
use super::ctx::help_lines;
use super::{CmdResult, Ctx, ERR_SYNTAX, Spec, is, parse_i64};
use crate::cluster::Announced;
use crate::cluster::change::Change;
use crate::cluster::nodes_file::node_line;
use crate::cluster::route::{Health, Query, Redirect, SlotKey, cross_slot};
use crate::cluster::topology::{Endpoint, SLOTS, Topology};
use crate::config::ClusterSettings;
use crate::net::client::ClientInfo;

pub const ERR_CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

/// Refuses a subcommand on a server without cluster mode.
fn enabled(ctx: &Ctx) -> CmdResult {
    match ctx.server.cluster.enabled() {
        true => Ok(()),
        false => Err(ERR_CLUSTER_DISABLED.into()),
    }
}

/// Where `client` reaches this node: what is announced, else the
/// address it connected to.
pub fn endpoint_for(settings: &ClusterSettings, port: u16, client: &ClientInfo) -> Endpoint {
    let announced = Announced::of(settings, port);
    let ip = match announced.ip.is_empty() {
        false => announced.ip,
        true if client.unix_socket.is_some() => "127.0.0.1".into(),
        true => client.laddr.ip().to_string(),
    };
    Endpoint {
        ip,
        port: announced.port,
        cport: announced.cport,
        hostname: announced.hostname,
    }
}

fn my_endpoint(ctx: &Ctx) -> Endpoint {
    endpoint_for(&ctx.config.cluster, ctx.server.port(), &ctx.session.client)
}

/// Node `index`'s (ip, port, hostname), this node's as `me`.
fn address_of(t: &Topology, me: &Endpoint, index: usize) -> (String, u16, String) {
    match index == t.me {
        true => (me.ip.clone(), me.port, me.hostname.clone()),
        false => {
            let node = &t.nodes[index];
            (node.ip.clone(), node.port, node.hostname.clone())
        }
    }
}

/// How clients are told to reach node `index` (MOVED, ASK, SLOTS):
/// `cluster-preferred-endpoint-type` (None: unknown-endpoint).
pub fn preferred_endpoint(
    settings: &ClusterSettings,
    me: &Endpoint,
    t: &Topology,
    index: usize,
) -> Option<String> {
    let (ip, _, hostname) = address_of(t, me, index);
    match settings.preferred_endpoint.as_str() {
        "hostname" if !hostname.is_empty() => Some(hostname),
        "hostname" => Some("?".into()),
        "unknown-endpoint" => None,
        _ => Some(ip),
    }
}

/// `endpoint:port` of node `index`, as a redirection names it.
pub fn redirect_address(
    settings: &ClusterSettings,
    me: &Endpoint,
    t: &Topology,
    index: usize,
) -> String {
    let (_, port, _) = address_of(t, me, index);
    let endpoint = preferred_endpoint(settings, me, t, index).unwrap_or_else(|| "?".into());
    format!("{endpoint}:{port}")
}

/// The keys (and sharded channels) of one command, with their slots, as
/// Redis' key extraction finds them, appended to `out`. The usual shape
/// (one key at argument 1) is read without extracting.
pub fn slot_keys<'k>(spec: &Spec, args: &'k [Bytes], out: &mut SlotKeys<'k>) {
    let channel = |flags: &[&str]| flags.contains(&"not_key");
    if let Some(flags) = super::keyspec::single_key_at_1(spec.keys)
        && spec.keys_hook.is_none()
        && args.len() > 1
    {
        out.push((&args[1], key_slot(&args[1]), channel(flags)));
        return;
    }
    let Ok(keys) = super::keyspec::keys_and_flags(spec.keys, spec.keys_hook, args) else {
        return;
    };
    for (at, flags) in keys {
        out.push((&args[at], key_slot(&args[at]), channel(flags)));
    }
}

/// Where this node stands on a command's keys: the slot it serves them
/// in (None: no key), or the redirection. A node that serves every slot
/// only checks that they share one, without the topology's lock.
/// `exists` tells whether a key is here (asked only for slots being
/// moved).
pub fn route(
    server: &Node,
    settings: &ClusterSettings,
    query: &Query,
    now_ms: u64,
    exists: impl FnMut(&[u8]) -> bool,
) -> Result<Option<u16>, Redirect> {
    let lease = server.cluster.lease_ok(now_ms);
    if lease && server.cluster.serves_every_slot() {
        return match cross_slot(query.keys) {
            Some(redirect) => Err(redirect),
            None => Ok(query.keys.first().map(|key| key.1)),
        };
    }
    let topology = server.cluster.topology();
    let health = Health {
        ok: lease && (server.cluster.covered() || !settings.require_full_coverage),
        allow_reads_when_down: settings.allow_reads_when_down,
        allow_pubsubshard_when_down: settings.allow_pubsubshard_when_down,
    };
    crate::cluster::route::route(&topology, query, health, exists)
}

/// The error `client` gets for `redirect` (MOVED and ASK name the node
/// as that client reaches it).
pub fn redirect_text(
    server: &Node,
    settings: &ClusterSettings,
    client: &ClientInfo,
    redirect: Redirect,
) -> String {
    let me = endpoint_for(settings, server.port(), client);
    let topology = server.cluster.topology();
    redirect.text(|node| redirect_address(settings, &me, &topology, node))
}

/// A command's keys with their slots, kept inline for the usual few.
pub type SlotKeys<'k> = SmallVec<[SlotKey<'k>; 4]>;

/// A slot argument of ADDSLOTS and the like.
fn slot_arg(arg: &[u8]) -> Result<u16, super::CmdError> {
    match parse_i64(arg) {
        Ok(slot) if (0..SLOTS as i64).contains(&slot) => Ok(slot as u16),
        _ => Err("ERR Invalid or out of range slot".into()),
    }
}

pub fn cluster_keyslot(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.out.int(key_slot(&args[2]) as i64);
    Ok(())
}

/// CLUSTER INFO.
pub fn cluster_info(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let t = ctx.server.cluster.topology();
    let assigned = t.assigned();
    let state = match t.is_ok(ctx.config.cluster.require_full_coverage) {
        true => "ok",
        false => "fail",
    };
    let text = format!(
        "cluster_state:{state}\r\n\
         cluster_slots_assigned:{assigned}\r\n\
         cluster_slots_ok:{assigned}\r\n\
         cluster_slots_pfail:0\r\n\
         cluster_slots_fail:0\r\n\
         cluster_known_nodes:{}\r\n\
         cluster_size:{}\r\n\
         cluster_current_epoch:{}\r\n\
         cluster_my_epoch:{}\r\n\
         cluster_stats_messages_sent:0\r\n\
         cluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        t.nodes.len(),
        t.serving_primaries(),
        t.current_epoch,
        my_epoch(&t),
    );
    drop(t);
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// A replica's epoch is its primary's (Redis' `cluster_my_epoch`).
fn my_epoch(t: &Topology) -> u64 {
    let primary = t.myself().primary.as_deref().and_then(|id| t.find(id));
    t.nodes[primary.unwrap_or(t.me)].config_epoch
}

pub fn cluster_myid(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let id = ctx.server.cluster.topology().myself().id.clone();
    ctx.out.bulk(id.as_bytes());
    Ok(())
}

pub fn cluster_myshardid(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let id = ctx.server.cluster.topology().myself().shard_id.clone();
    ctx.out.bulk(id.as_bytes());
    Ok(())
}

/// CLUSTER NODES: one line per node, this node's first.
pub fn cluster_nodes(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let me = my_endpoint(ctx);
    let t = ctx.server.cluster.topology();
    let mut text = String::new();
    for index in 0..t.nodes.len() {
        text.push_str(&node_line(&t, index, &me, false));
        text.push('\n');
    }
    drop(t);
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// One node as CLUSTER SLOTS lists it: endpoint, port, id, and the
/// other networking facts (ip, hostname) that are not the endpoint.
fn write_slots_node(ctx: &mut Ctx, t: &Topology, index: usize) {
    let me = my_endpoint(ctx);
    let endpoint = preferred_endpoint(&ctx.config.cluster, &me, t, index);
    let (ip, port, hostname) = address_of(t, &me, index);
    let preferred = ctx.config.cluster.preferred_endpoint.as_str();
    let mut extra: Vec<(&str, String)> = Vec::new();
    if preferred != "ip" {
        extra.push(("ip", ip));
    }
    if preferred != "hostname" && !hostname.is_empty() {
        extra.push(("hostname", hostname));
    }
    ctx.out.array(4);
    match endpoint {
        Some(endpoint) => ctx.out.bulk(endpoint.as_bytes()),
        None => ctx.out.null_bulk(),
    }
    ctx.out.int(port as i64);
    ctx.out.bulk(t.nodes[index].id.as_bytes());
    ctx.out.map(extra.len());
    for (name, value) in extra {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk(value.as_bytes());
    }
}

/// CLUSTER SLOTS: each run of slots with its primary, then its replicas.
pub fn cluster_slots(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let t = ctx.server.cluster.topology().clone();
    let mut runs = Vec::new();
    for index in 0..t.nodes.len() {
        if t.nodes[index].primary.is_none() {
            runs.extend(t.ranges_of(index).into_iter().map(|r| (r, index)));
        }
    }
    runs.sort_by_key(|(range, _)| range.first);
    ctx.out.array(runs.len());
    for (range, owner) in runs {
        let replicas = t.replicas_of(owner);
        ctx.out.array(3 + replicas.len());
        ctx.out.int(range.first as i64);
        ctx.out.int(range.last as i64);
        write_slots_node(ctx, &t, owner);
        for replica in replicas {
            write_slots_node(ctx, &t, replica);
        }
    }
    Ok(())
}

/// CLUSTER SHARDS: each primary with its slots and its nodes.
pub fn cluster_shards(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let t = ctx.server.cluster.topology().clone();
    let primaries: Vec<usize> = (0..t.nodes.len())
        .filter(|&i| t.nodes[i].primary.is_none())
        .collect();
    ctx.out.array(primaries.len());
    for primary in primaries {
        let ranges = t.ranges_of(primary);
        ctx.out.map(2);
        ctx.out.bulk(b"slots");
        ctx.out.array(ranges.len() * 2);
        for range in ranges {
            ctx.out.int(range.first as i64);
            ctx.out.int(range.last as i64);
        }
        ctx.out.bulk(b"nodes");
        let nodes: Vec<usize> = std::iter::once(primary)
            .chain(t.replicas_of(primary))
            .collect();
        ctx.out.array(nodes.len());
        for index in nodes {
            write_shard_node(ctx, &t, index);
        }
    }
    Ok(())
}

fn write_shard_node(ctx: &mut Ctx, t: &Topology, index: usize) {
    let node = &t.nodes[index];
    let me = my_endpoint(ctx);
    let (ip, port, hostname) = address_of(t, &me, index);
    let endpoint =
        preferred_endpoint(&ctx.config.cluster, &me, t, index).unwrap_or_else(|| "?".into());
    let role = match node.primary {
        Some(_) => "replica",
        None => "master",
    };
    let offset = match index == t.me {
        true => ctx.server.replication.offset() as i64,
        false => 0,
    };
    let mut fields: Vec<(&str, Result<String, i64>)> = vec![
        ("id", Ok(node.id.clone())),
        ("port", Err(port as i64)),
        ("ip", Ok(ip)),
        ("endpoint", Ok(endpoint)),
    ];
    if !hostname.is_empty() {
        fields.push(("hostname", Ok(hostname)));
    }
    fields.push(("role", Ok(role.into())));
    fields.push(("replication-offset", Err(offset)));
    fields.push(("health", Ok("online".into())));
    ctx.out.map(fields.len());
    for (name, value) in fields {
        ctx.out.bulk(name.as_bytes());
        match value {
            Ok(text) => ctx.out.bulk(text.as_bytes()),
            Err(number) => ctx.out.int(number),
        }
    }
}

/// CLUSTER LINKS: the bus links to other nodes (none: nodes do not talk
/// to each other yet).
pub fn cluster_links(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    ctx.out.array(0);
    Ok(())
}

/// CLUSTER REPLICAS / SLAVES node-id: the replicas' CLUSTER NODES lines.
pub fn cluster_replicas(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let me = my_endpoint(ctx);
    let t = ctx.server.cluster.topology().clone();
    let id = String::from_utf8_lossy(&args[2]);
    let node = t
        .find(&id)
        .ok_or_else(|| format!("ERR Unknown node {id}"))?;
    if t.nodes[node].primary.is_some() {
        return Err("ERR The specified node is not a master".into());
    }
    let replicas = t.replicas_of(node);
    ctx.out.array(replicas.len());
    for replica in replicas {
        ctx.out.bulk(node_line(&t, replica, &me, false).as_bytes());
    }
    Ok(())
}

/// CLUSTER COUNT-FAILURE-REPORTS node-id: reports from other nodes that
/// it failed (none: nodes do not gossip).
pub fn cluster_count_failure_reports(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let id = String::from_utf8_lossy(&args[2]);
    if ctx.server.cluster.topology().find(&id).is_none() {
        return Err(format!("ERR Unknown node {id}").into());
    }
    ctx.out.int(0);
    Ok(())
}

/// The keys this node holds in `slot`: how many, and the first `max`.
fn keys_in_slot(ctx: &mut Ctx, slot: u16, max: usize) -> (usize, Vec<Vec<u8>>) {
    let keyspace = ctx.keyspace();
    keyspace.keys_in_slot(ctx.keys.all(), 0, slot, max, ctx.now_ms)
}

/// CLUSTER COUNTKEYSINSLOT slot.
pub fn cluster_countkeysinslot(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let slot = parse_i64(&args[2])?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err("ERR Invalid slot".into());
    }
    let (count, _) = keys_in_slot(ctx, slot as u16, 0);
    ctx.out.int(count as i64);
    Ok(())
}

/// CLUSTER GETKEYSINSLOT slot count.
pub fn cluster_getkeysinslot(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let slot = parse_i64(&args[2])?;
    let max = parse_i64(&args[3])?;
    if !(0..SLOTS as i64).contains(&slot) || max < 0 {
        return Err("ERR Invalid slot or number of keys".into());
    }
    let (_, keys) = keys_in_slot(ctx, slot as u16, max as usize);
    ctx.out.array(keys.len());
    for key in keys {
        ctx.out.bulk(&key);
    }
    Ok(())
}

/// The slots ADDSLOTS / DELSLOTS name.
fn slots_listed(args: &[Bytes]) -> Result<Vec<u16>, super::CmdError> {
    args[2..].iter().map(|a| slot_arg(a)).collect()
}

/// The slots ADDSLOTSRANGE / DELSLOTSRANGE name (start end pairs).
fn slots_in_ranges(args: &[Bytes]) -> Result<Vec<u16>, super::CmdError> {
    if args.len() % 2 == 1 {
        let name = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        return Err(format!("ERR wrong number of arguments for 'cluster|{name}' command").into());
    }
    let mut slots = Vec::new();
    for pair in args[2..].chunks(2) {
        let (first, last) = (slot_arg(&pair[0])?, slot_arg(&pair[1])?);
        if first > last {
            return Err(format!(
                "ERR start slot number {first} is greater than end slot number {last}"
            )
            .into());
        }
        slots.extend(first..=last);
    }
    Ok(slots)
}

/// Makes a topology change as this node (through its Raft group once it
/// has one) and answers its reply.
fn submit(ctx: &mut Ctx, change: Change) -> CmdResult {
    let answer = ctx.server.cluster.submit(change)?;
    match answer.as_str() {
        "OK" => ctx.out.ok(),
        text => ctx.out.simple(text),
    }
    Ok(())
}

pub fn cluster_addslots(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let slots = slots_listed(args)?;
    submit(ctx, Change::AddSlots(slots))
}

pub fn cluster_addslotsrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let slots = slots_in_ranges(args)?;
    submit(ctx, Change::AddSlots(slots))
}

pub fn cluster_delslots(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let slots = slots_listed(args)?;
    submit(ctx, Change::DelSlots(slots))
}

pub fn cluster_delslotsrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let slots = slots_in_ranges(args)?;
    submit(ctx, Change::DelSlots(slots))
}

pub fn cluster_flushslots(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    if ctx.keyspace().dbsize_in(ctx.keys.all(), 0) != 0 {
        return Err("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.".into());
    }
    submit(ctx, Change::FlushSlots)
}

/// CLUSTER SETSLOT slot IMPORTING|MIGRATING node-id | STABLE | NODE node-id.
pub fn cluster_setslot(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    if ctx.server.cluster.topology().myself().primary.is_some() {
        return Err("ERR Please use SETSLOT only with masters.".into());
    }
    let slot = slot_arg(&args[2])?;
    let node = args
        .get(4)
        .map(|id| String::from_utf8_lossy(id).into_owned());
    let action = &args[3];
    let change = match (node, args.len()) {
        (Some(to), 5) if is(action, "migrating") => Change::SetMigrating { slot, to },
        (Some(from), 5) if is(action, "importing") => Change::SetImporting { slot, from },
        (None, 4) if is(action, "stable") => Change::SetStable { slot },
        (Some(node), 5) if is(action, "node") => {
            let (keys_here, _) = keys_in_slot(ctx, slot, 0);
            let imported = ctx.server.cluster.topology().importing_from(slot).is_some();
            Change::SetNode {
                slot,
                node,
                keys_here,
                imported,
            }
        }
        _ => {
            return Err(
                "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"
                    .into(),
            );
        }
    };
    submit(ctx, change)
}

pub fn cluster_bumpepoch(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    submit(ctx, Change::BumpEpoch)
}

pub fn cluster_set_config_epoch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let epoch = parse_i64(&args[2])?;
    submit(ctx, Change::SetConfigEpoch(epoch))
}

pub fn cluster_saveconfig(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    ctx.server.cluster.save()?;
    ctx.out.ok();
    Ok(())
}

pub fn cluster_forget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let id = String::from_utf8_lossy(&args[2]).into_owned();
    submit(ctx, Change::Forget(id))
}

/// CLUSTER REPLICATE node-id: this node becomes a replica of that
/// primary (it must hold no slot and no key first).
pub fn cluster_replicate(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let primary = String::from_utf8_lossy(&args[2]).into_owned();
    let keys_here = ctx.keyspace().dbsize_in(ctx.keys.all(), 0);
    submit(ctx, Change::Replicate { primary, keys_here })
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER]: a replica takes over from its
/// primary; without an option once it has every write the primary
/// acknowledged (the primary's writes are held meanwhile), with one at
/// once. Answered when done (Redis answers OK first).
pub fn cluster_failover(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let planned = match &args[2..] {
        [] => true,
        [option] if is(option, "force") || is(option, "takeover") => false,
        _ => return Err(ERR_SYNTAX.into()),
    };
    ctx.server.cluster.fail_over(planned)?;
    ctx.out.ok();
    Ok(())
}

/// CLUSTER RESET [HARD|SOFT]: a node in a Raft group leaves it first
/// (the group forgets it), then forgets every other node.
pub fn cluster_reset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    let hard = match &args[2..] {
        [] => false,
        [word] if is(word, "hard") => true,
        [word] if is(word, "soft") => false,
        _ => return Err(ERR_SYNTAX.into()),
    };
    let primary = ctx.server.cluster.topology().myself().primary.is_none();
    if primary && ctx.keyspace().dbsize_in(ctx.keys.all(), 0) != 0 {
        return Err("ERR CLUSTER RESET can't be called with master nodes containing keys".into());
    }
    let fresh = hard.then(|| (crate::util::random_hex(40), crate::util::random_hex(40)));
    ctx.server.cluster.reset(fresh)?;
    ctx.out.ok();
    Ok(())
}

/// CLUSTER MEET ip port [cluster-bus-port]: the arguments checked as
/// Redis checks them, then the join goes on in the background.
pub fn cluster_meet(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    if args.len() > 5 {
        return Err(ERR_SYNTAX.into());
    }
    let port = |arg: &Bytes| {
        parse_i64(arg)
            .ok()
            .filter(|p| (0..=65535).contains(p))
            .map(|p| p as u16)
    };
    let Some(base) = port(&args[3]) else {
        return Err(format!(
            "ERR Invalid base port specified: {}",
            String::from_utf8_lossy(&args[3])
        )
        .into());
    };
    let bus = match args.get(4) {
        None => base.checked_add(10000).unwrap_or(0),
        Some(bus) => port(bus).ok_or_else(|| {
            format!(
                "ERR Invalid bus port specified: {}",
                String::from_utf8_lossy(bus)
            )
        })?,
    };
    let ip = String::from_utf8_lossy(&args[2]).into_owned();
    if ip.parse::<std::net::IpAddr>().is_err() {
        return Err(format!(
            "ERR Invalid node address specified: {ip}:{}",
            String::from_utf8_lossy(&args[3])
        )
        .into());
    }
    ctx.server.cluster.meet(ip, bus)?;
    ctx.out.ok();
    Ok(())
}

/// CLUSTER MIGRATION (Redis 8.4): IMPORT, STATUS and CANCEL, and the
/// nodes' own EXPORT, LINK and COMMIT (`crate::replication::migration`).
pub fn cluster_migration(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    use crate::replication::migration;
    enabled(ctx)?;
    let text = |arg: &Bytes| String::from_utf8_lossy(arg).into_owned();
    let verb = &args[2];
    let tasks = &ctx.server.replication.migrations;
    let client_id = ctx.session.client.id;
    if is(verb, "import") && args.len() >= 5 {
        let slots = slots_in_ranges(&args[1..])?;
        let id = migration::import(&ctx.server.arc(), slots)?;
        ctx.out.bulk(id.as_bytes());
    } else if is(verb, "status") {
        let id = match &args[3..] {
            [] => None,
            [all] if is(all, "all") => None,
            [word, id] if is(word, "id") => Some(text(id)),
            _ => return Err(ERR_SYNTAX.into()),
        };
        let listed: Vec<_> = (tasks.all().into_iter())
            .filter(|t| id.as_ref().is_none_or(|id| &t.id == id))
            .collect();
        ctx.out.array(listed.len());
        for task in listed {
            migration_status(ctx, &task);
        }
    } else if is(verb, "cancel") {
        let id = match &args[3..] {
            [all] if is(all, "all") => None,
            [word, id] if is(word, "id") => Some(text(id)),
            _ => return Err(ERR_SYNTAX.into()),
        };
        ctx.out.int(tasks.cancel(id.as_deref()) as i64);
    } else if is(verb, "export") && args.len() >= 7 {
        let slots = slots_in_ranges(&args[3..])?;
        migration::export(&ctx.server.arc(), text(&args[3]), text(&args[4]), slots)?;
        ctx.out.ok();
    } else if is(verb, "link") && args.len() == 4 {
        migration::link(ctx.server, &text(&args[3]), client_id)?;
        ctx.session.primary_link = true;
        ctx.out.ok();
    } else if is(verb, "commit") && args.len() == 4 {
        migration::commit(ctx.server, &text(&args[3]), client_id)?;
        ctx.out.simple("COMMITTED");
    } else {
        return Err(ERR_SYNTAX.into());
    }
    Ok(())
}

/// One task, as CLUSTER MIGRATION STATUS reports it (a map).
fn migration_status(ctx: &mut Ctx, task: &crate::replication::slot_tasks::Task) {
    use crate::replication::slot_tasks::Operation;
    let (phase, error) = task.phase();
    let operation = match task.operation {
        Operation::Import => "import",
        Operation::Export => "export",
    };
    let fields: [(&str, String); 10] = [
        ("id", task.id.clone()),
        ("slots", task.ranges()),
        ("source", task.source.clone()),
        ("dest", task.dest.clone()),
        ("operation", operation.into()),
        ("state", phase.name().into()),
        ("last_error", error),
        (
            "keys",
            task.keys
                .load(std::sync::atomic::Ordering::Relaxed)
                .to_string(),
        ),
        ("create_time", task.created_ms.to_string()),
        (
            "end_time",
            task.ended_ms
                .load(std::sync::atomic::Ordering::Relaxed)
                .to_string(),
        ),
    ];
    let pause = task
        .pause_ms
        .load(std::sync::atomic::Ordering::Relaxed)
        .to_string();
    ctx.out.map(fields.len() + 1);
    for (name, value) in fields.iter().chain([&("write_pause_ms", pause)]) {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk(value.as_bytes());
    }
}

/// READONLY: reads of the slots of the primary this node replicates are
/// served here.
pub fn readonly(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    ctx.session.cluster_readonly = true;
    ctx.out.ok();
    Ok(())
}

pub fn readwrite(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    ctx.session.cluster_readonly = false;
    ctx.out.ok();
    Ok(())
}

/// ASKING: the next command may use a slot this node imports.
pub fn asking(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    enabled(ctx)?;
    ctx.session.asking = true;
    ctx.out.ok();
    Ok(())
}

pub fn cluster_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MIGRATION IMPORT <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Move the slots whole from the node that serves them to this node; returns a task id.",
            "MIGRATION STATUS [ID <task-id> | ALL]",
            "    Report slot moves this node takes part in.",
            "MIGRATION CANCEL <ID <task-id> | ALL>",
            "    Stop running slot moves; returns how many.",
            "MYID",
            "    Return the node id.",
            "MYSHARDID",
            "    Return the node's shard id.",
            "NODES",
            "    Return cluster configuration seen by node.",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings.",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
        ],
    );
    Ok(())
}
