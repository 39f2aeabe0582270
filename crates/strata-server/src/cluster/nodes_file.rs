//! The topology as text: CLUSTER NODES' lines and the cluster config
//! file (`cluster-config-file`, `nodes.conf` in the data directory).
//!
//! The file has Redis' format, so an operator reads it as they read
//! Redis' own: one line per node,
//!
//! ```text
//! <id> <ip>:<port>@<cport>[,<hostname>],shard-id=<id> <flags> <primary or -> <ping> <pong> <config-epoch> <link> <slot or range>...
//! ```
//!
//! with `[slot->-id]` / `[slot-<-id]` on this node's line for slots it
//! migrates or imports, then `vars currentEpoch N lastVoteEpoch N`, to
//! which Strata adds `provisional 1` while a fresh node serves every slot
//! by itself (`topology`'s module doc) and `forgotten <id>,<id>…`, the
//! nodes its group forgot. It is written whole to a new
//! file, synced and renamed over the old one: a crash leaves one or the
//! other.

use std::io::Write;
use std::path::Path;

use super::topology::{Endpoint, Moving, NodeRecord, SLOTS, Topology};

/// One node's line as CLUSTER NODES shows it (`for_file`: as the config
/// file keeps it, with the shard id). `me` is where this node is reached.
pub fn node_line(t: &Topology, index: usize, me: &Endpoint, for_file: bool) -> String {
    let node = &t.nodes[index];
    let (ip, port, cport, hostname) = match index == t.me {
        true => (&me.ip, me.port, me.cport, &me.hostname),
        false => (&node.ip, node.port, node.cport, &node.hostname),
    };
    let mut address = format!("{ip}:{port}@{cport}");
    if !hostname.is_empty() || for_file {
        address.push(',');
        address.push_str(hostname);
    }
    if for_file {
        address.push_str(&format!(",shard-id={}", node.shard_id));
    }
    let mut flags = Vec::new();
    if index == t.me {
        flags.push("myself");
    }
    flags.push(if node.primary.is_some() {
        "slave"
    } else {
        "master"
    });
    let primary = node.primary.as_deref().unwrap_or("-");
    let mut line = format!(
        "{} {address} {} {primary} 0 0 {} connected",
        node.id,
        flags.join(","),
        node.config_epoch
    );
    // A provisional claim is not listed: the file keeps it in its vars
    // line, and CLUSTER NODES shows a fresh node as Redis does, with no
    // slot (`redis-cli --cluster create` reads the slots a node lists as
    // the ones to assign it). CLUSTER SLOTS and SHARDS, which clients
    // route by, show the claim.
    let claimed = match t.provisional {
        true => Vec::new(),
        false => t.ranges_of(index),
    };
    for range in claimed {
        match range.first == range.last {
            true => line.push_str(&format!(" {}", range.first)),
            false => line.push_str(&format!(" {}-{}", range.first, range.last)),
        }
    }
    if index == t.me {
        for (slot, moving) in t.moving_of(index) {
            match moving {
                Moving::To(n) => line.push_str(&format!(" [{slot}->-{}]", t.nodes[n as usize].id)),
                Moving::From(n) => {
                    line.push_str(&format!(" [{slot}-<-{}]", t.nodes[n as usize].id))
                }
            }
        }
    }
    line
}

/// The config file's text for `t`.
pub fn encode(t: &Topology) -> String {
    let me = Endpoint {
        ip: t.myself().ip.clone(),
        port: t.myself().port,
        cport: t.myself().cport,
        hostname: t.myself().hostname.clone(),
    };
    let mut text = String::new();
    for index in 0..t.nodes.len() {
        text.push_str(&node_line(t, index, &me, true));
        text.push('\n');
    }
    text.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}",
        t.current_epoch, t.last_vote_epoch
    ));
    if t.provisional {
        text.push_str(" provisional 1");
    }
    if !t.forgotten.is_empty() {
        // Strata's own: the nodes its group forgot (ids, comma-separated).
        let ids: Vec<&str> = t.forgotten.iter().map(String::as_str).collect();
        text.push_str(&format!(" forgotten {}", ids.join(",")));
    }
    text.push('\n');
    text
}

/// Parses a config file's text; the error says which line is wrong.
pub fn decode(text: &str) -> Result<Topology, String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut nodes = Vec::new();
    let mut slot_words: Vec<(usize, Vec<&str>)> = Vec::new();
    let mut myself = None;
    let mut vars: Vec<&str> = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let bad = |why: &str| format!("line {}: {why}: {line}", n + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        if words[0] == "vars" {
            vars = words[1..].to_vec();
            continue;
        }
        if words.len() < 8 {
            return Err(bad("fewer than 8 fields"));
        }
        let (node, flags) = parse_node(&words).map_err(|why| bad(&why))?;
        if flags.contains(&"myself") {
            if myself.is_some() {
                return Err(bad("a second node flagged myself"));
            }
            myself = Some(nodes.len());
        }
        slot_words.push((nodes.len(), words[8..].to_vec()));
        nodes.push(node);
    }
    let Some(me) = myself else {
        return Err("no node is flagged myself".into());
    };
    let mut t = Topology::fresh(nodes[me].id.clone(), nodes[me].shard_id.clone());
    t.nodes = nodes;
    t.me = me;
    let mut provisional = false;
    for pair in vars.chunks(2) {
        let [name, value] = pair else {
            return Err("the vars line has a name without a value".into());
        };
        if *name == "forgotten" {
            t.forgotten = value.split(',').map(str::to_owned).collect();
            continue;
        }
        let number = value
            .parse::<u64>()
            .map_err(|_| format!("vars: {name} is not a number"))?;
        match *name {
            "currentEpoch" => t.current_epoch = number,
            "lastVoteEpoch" => t.last_vote_epoch = number,
            "provisional" => provisional = number == 1,
            _ => {}
        }
    }
    t.set_owner(0, None);
    for (index, words) in slot_words {
        for word in words {
            apply_slot_word(&mut t, index, word)
                .map_err(|why| format!("node {}: {why}: {word}", t.nodes[index].id))?;
        }
    }
    t.provisional = provisional;
    Ok(t)
}

/// One node line's first eight fields; the flags as words.
fn parse_node<'a>(words: &[&'a str]) -> Result<(NodeRecord, Vec<&'a str>), String> {
    let id = words[0];
    if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the node id is not 40 hex digits".into());
    }
    let mut address = words[1].split(',');
    let endpoint = address.next().unwrap_or_default();
    let hostname = address.next().unwrap_or_default().to_owned();
    let shard_id = address
        .find_map(|aux| aux.strip_prefix("shard-id="))
        .unwrap_or(id)
        .to_owned();
    let (ip_port, cport) = endpoint
        .split_once('@')
        .ok_or("the address has no @bus-port")?;
    let (ip, port) = ip_port.rsplit_once(':').ok_or("the address has no :port")?;
    let number = |text: &str| text.parse::<u16>().map_err(|_| format!("bad port {text}"));
    let flags: Vec<&str> = words[2].split(',').collect();
    let primary = match words[3] {
        "-" => None,
        id => Some(id.to_owned()),
    };
    let config_epoch = words[6]
        .parse()
        .map_err(|_| format!("bad config epoch {}", words[6]))?;
    Ok((
        NodeRecord {
            id: id.to_owned(),
            shard_id,
            ip: ip.to_owned(),
            port: number(port)?,
            cport: number(cport)?,
            hostname,
            primary,
            config_epoch,
        },
        flags,
    ))
}

/// Applies one slot field of node `index`'s line: `N`, `N-M`,
/// `[N->-id]` or `[N-<-id]`.
fn apply_slot_word(t: &mut Topology, index: usize, word: &str) -> Result<(), String> {
    let slot = |text: &str| match text.parse::<u16>() {
        Ok(slot) if (slot as usize) < SLOTS => Ok(slot),
        _ => Err("not a slot".to_string()),
    };
    if let Some(inner) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
        let (slot_text, moving, other) = if let Some((s, id)) = inner.split_once("->-") {
            (s, true, id)
        } else if let Some((s, id)) = inner.split_once("-<-") {
            (s, false, id)
        } else {
            return Err("not a moving slot".into());
        };
        let other = t.find(other).ok_or("names an unknown node")? as u16;
        let moving = match moving {
            true => Moving::To(other),
            false => Moving::From(other),
        };
        t.set_moving(index, slot(slot_text)?, moving);
        return Ok(());
    }
    let (first, last) = match word.split_once('-') {
        Some((first, last)) => (slot(first)?, slot(last)?),
        None => (slot(word)?, slot(word)?),
    };
    if first > last {
        return Err("a range that ends before it starts".into());
    }
    for s in first..=last {
        t.set_owner(s, Some(index));
    }
    Ok(())
}

/// Writes `t` to `path`: a new file, synced, renamed over the old one,
/// and the directory synced.
pub fn save(path: &Path, t: &Topology) -> std::io::Result<()> {
    write(path, t, true)
}

/// [`save`] without the syncs: for a node in a Raft group, whose log
/// holds the topology (the file is its copy for operators and for a
/// start before the group answers).
pub fn save_unsynced(path: &Path, t: &Topology) -> std::io::Result<()> {
    write(path, t, false)
}

fn write(path: &Path, t: &Topology, sync: bool) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp-strata");
    {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(encode(t).as_bytes())?;
        if sync {
            file.sync_all()?;
        }
    }
    std::fs::rename(&temporary, path)?;
    if let Some(dir) = path.parent().filter(|d| sync && !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Topology {
        let mut t = Topology::fresh("a".repeat(40), "s".repeat(40));
        t.nodes[0].ip = "10.0.0.1".into();
        t.nodes[0].port = 7000;
        t.nodes[0].cport = 17000;
        t.add_slots(&(0..100).chain([200, 300, 301]).collect::<Vec<_>>())
            .unwrap();
        t.upsert(NodeRecord {
            id: "b".repeat(40),
            shard_id: "t".repeat(40),
            ip: "10.0.0.2".into(),
            port: 7001,
            cport: 17001,
            hostname: "b.example".into(),
            primary: None,
            config_epoch: 2,
        });
        t.upsert(NodeRecord {
            id: "c".repeat(40),
            shard_id: "t".repeat(40),
            ip: "10.0.0.3".into(),
            port: 7002,
            cport: 17002,
            hostname: String::new(),
            primary: Some("b".repeat(40)),
            config_epoch: 2,
        });
        t.set_importing(500, &"b".repeat(40)).unwrap();
        t.set_node(400, &"b".repeat(40), 0).unwrap();
        t.set_migrating(300, &"b".repeat(40)).unwrap();
        t.current_epoch = 3;
        t
    }

    #[test]
    fn the_file_reads_back_what_was_written() {
        let t = sample();
        let text = encode(&t);
        assert!(text.contains(" myself,master - 0 0 0 connected 0-99 200 300-301 [300->-"));
        assert!(text.contains(&format!(
            "{} 10.0.0.3:7002@17002,,shard-id={} slave {} 0 0 2 connected\n",
            "c".repeat(40),
            "t".repeat(40),
            "b".repeat(40)
        )));
        assert!(text.ends_with("vars currentEpoch 3 lastVoteEpoch 0\n"));
        assert!(decode(&text) == Ok(t.clone()), "read back differs");
        // The nodes a group forgot are kept (a Raft snapshot is this
        // text too).
        let mut forgot = t;
        forgot.forgotten = ["d".repeat(40), "e".repeat(40)].into_iter().collect();
        assert!(
            decode(&encode(&forgot)) == Ok(forgot),
            "forgotten nodes lost"
        );
        // This node need not come first in the file.
        let mut lines: Vec<&str> = text.lines().collect();
        lines.swap(0, 1);
        let reordered = decode(&lines.join("\n")).unwrap();
        assert_eq!((reordered.me, &reordered.myself().id), (1, &"a".repeat(40)));
        assert_eq!(reordered.owner(200), Some(1));
        assert_eq!(reordered.owner(400), Some(0), "b's");
        assert_eq!(reordered.migrating_to(300), Some(0), "to b");
        assert_eq!(reordered.importing_from(500), Some(0), "from b");
        assert!(decode(&encode(&reordered)) == Ok(reordered), "reordered");
        let fresh = Topology::fresh("d".repeat(40), "e".repeat(40));
        assert!(decode(&encode(&fresh)) == Ok(fresh), "fresh");
    }

    #[test]
    fn bad_files_are_refused_with_the_line() {
        let text = encode(&sample());
        let broken = text.replacen(" 0-99 ", " 0-99999 ", 1);
        assert!(decode(&broken).unwrap_err().contains("not a slot"));
        assert!(decode(&text.replacen("myself,", "", 1)).is_err());
        let short = format!("{} 1.2.3.4:1@2 master\n", "f".repeat(40));
        assert!(decode(&short).unwrap_err().starts_with("line 1"));
    }
}
