//! One client as CLIENT LIST and CLIENT INFO show it, and as ACL LOG
//! records it: a leaf beside the families that need it (`connection`
//! for CLIENT, `permit` for ACL LOG).

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;

use super::ctx::Node;
use crate::net::client::ClientInfo;

/// The bytes `args` took as a RESP request.
fn request_bytes(args: &[Bytes]) -> usize {
    let header = |n: usize| n.to_string().len() + 3;
    header(args.len())
        + args
            .iter()
            .map(|a| header(a.len()) + a.len() + 2)
            .sum::<usize>()
}

/// One CLIENT LIST line (also ACL LOG's `client-info`). `running`: the
/// command this client is running now, if it is the caller: as in Redis,
/// its request still counts in `qbuf` and its arguments in `argv-mem`.
pub fn describe_client(
    server: &Node,
    client: &ClientInfo,
    now_ms: u64,
    running: Option<&[Bytes]>,
) -> String {
    let names = client.names.lock().clone();
    let last = client.last_command.load(Relaxed);
    let command = if last == 0 {
        "NULL".to_owned()
    } else {
        server.commands.full_names[last - 1].clone()
    };
    let idle_s = now_ms.saturating_sub(client.last_active_ms.load(Relaxed)) / 1000;
    let (qbuf, qbuf_free, argv_mem) = match running {
        Some(args) => (
            request_bytes(args),
            0,
            args.iter().map(|a| a.len()).sum::<usize>(),
        ),
        None => (
            client.query_buffer_bytes.load(Relaxed),
            client.query_buffer_free.load(Relaxed),
            0,
        ),
    };
    let omem = client.output_buffer_bytes.load(Relaxed);
    let mut flags = String::new();
    let multi = client.multi.load(Relaxed);
    if multi >= 0 {
        flags.push('x');
    }
    let (sub, psub, ssub) = (
        client.subscribed_channels.load(Relaxed),
        client.subscribed_patterns.load(Relaxed),
        client.subscribed_shard.load(Relaxed),
    );
    match client.role.load(Relaxed) {
        crate::net::client::ROLE_REPLICA => flags.push('S'),
        crate::net::client::ROLE_MASTER => flags.push('M'),
        _ => {}
    }
    if sub + psub + ssub > 0 {
        flags.push('P');
    }
    if client.blocked.load(Relaxed) {
        flags.push('b');
    }
    if client.no_evict.load(Relaxed) {
        flags.push('e');
    }
    if client.no_touch.load(Relaxed) {
        flags.push('T');
    }
    if server.monitors.is_monitor(client.id) {
        flags.push('O');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf={} qbuf-free={} argv-mem={} multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
        client.id,
        client.addr_text(),
        client.laddr_text(),
        client.fd,
        names.name,
        client.created.elapsed().as_secs(),
        idle_s,
        flags,
        client.db.load(Relaxed),
        sub,
        psub,
        ssub,
        multi,
        client.watched_keys.load(Relaxed),
        qbuf,
        qbuf_free,
        argv_mem,
        omem,
        (qbuf + omem).max(client.memory_bytes.load(Relaxed) as usize),
        command,
        names.user,
        client.resp.load(Relaxed),
        names.lib_name,
        names.lib_ver
    )
}
