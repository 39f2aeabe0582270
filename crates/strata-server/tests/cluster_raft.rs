//! Nodes that join each other: three strata-servers made one cluster by
//! `redis-cli --cluster create` (ADDSLOTS, SET-CONFIG-EPOCH, MEET), their
//! topology a Raft group's. A change sent to any node reaches every
//! node; `redis-cli --cluster reshard` moves slots under a cluster
//! client; kill -9 of the group's leader leaves the others changing the
//! topology, and the node restarted on its data directory comes back to
//! the group's topology.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Reply, TestServer, e, ok, temp_dir, wait_until};
use redis::Commands;

fn have_redis_cli() -> bool {
    let found = Command::new("redis-cli")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-cli is not installed, and CI must run this test (apt install redis-tools)"
        );
        eprintln!("skipped: no redis-cli (apt install redis-tools)");
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A cluster node on fixed ports (its address is in the others'
/// topology, so a restart must keep it), in `dir`.
fn node(dir: std::path::PathBuf, port: u16, bus: u16) -> TestServer {
    let (port, bus) = (port.to_string(), bus.to_string());
    TestServer::spawn(
        dir,
        &[
            "--cluster-enabled",
            "yes",
            "--port",
            &port,
            "--cluster-port",
            &bus,
        ],
        None,
        common::READY,
    )
}

/// A new node on ports picked now (again, if another test took one
/// first), with `extra` arguments; its ports.
fn fresh_node(extra: &[&str]) -> (TestServer, (u16, u16)) {
    common::with_free_ports(|| {
        let ports = (free_port(), free_port());
        (node_with(temp_dir(), ports.0, ports.1, extra), ports)
    })
}

/// `count` new nodes, and their ports.
fn fresh_nodes(count: usize, extra: &[&str]) -> (Vec<Option<TestServer>>, Vec<(u16, u16)>) {
    (0..count)
        .map(|_| {
            let (server, ports) = fresh_node(extra);
            (Some(server), ports)
        })
        .unzip()
}

/// Every node's CLUSTER NODES, as (id, slots) per line, sorted: what
/// `redis-cli --cluster check` compares.
fn signature(server: &TestServer) -> Vec<String> {
    let nodes = server.raw().cmd(&["CLUSTER", "NODES"]).as_text();
    let mut lines: Vec<String> = nodes
        .lines()
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            format!("{} {}", words[0], words[8..].join(" "))
        })
        .collect();
    lines.sort();
    lines
}

fn n(nodes: &[Option<TestServer>], i: usize) -> &TestServer {
    nodes[i].as_ref().unwrap()
}

/// Runs redis-cli to its end (at most a minute); its output. A reshard
/// prints more than a pipe holds: `run_within` goes through a file.
fn redis_cli(args: &[&str]) -> String {
    let limit = Duration::from_secs(60);
    let (code, output) = common::run_within(Command::new("redis-cli").args(args), limit);
    assert_eq!(code, 0, "redis-cli {args:?}:\n{output}");
    output
}

/// The client addresses of nodes on `ports`.
fn addresses_of(ports: &[(u16, u16)]) -> Vec<String> {
    ports
        .iter()
        .map(|(p, _)| format!("127.0.0.1:{p}"))
        .collect()
}

/// Three new nodes, started with `extra`, made one cluster of primaries
/// by `redis-cli --cluster create`.
fn three_primaries(extra: &[&str]) -> Started {
    let (nodes, ports) = fresh_nodes(3, extra);
    let addresses = addresses_of(&ports);
    create(&addresses);
    (nodes, ports, addresses)
}

/// `redis-cli --cluster create` of the nodes at `addresses`, primaries
/// only.
fn create(addresses: &[String]) -> String {
    let mut args = vec!["--cluster", "create"];
    args.extend(addresses.iter().map(String::as_str));
    args.push("--cluster-yes");
    redis_cli(&args)
}

#[test]
fn three_nodes_joined_by_redis_cli_share_one_topology() {
    if !have_redis_cli() {
        return;
    }
    let (mut nodes, ports) = fresh_nodes(3, &[]);
    let addresses = addresses_of(&ports);
    let output = create(&addresses);
    assert!(output.contains("All 16384 slots covered"), "{output}");
    wait_until("every node to see three", || {
        (0..3).all(|i| signature(n(&nodes, i)).len() == 3)
    });
    let first = signature(n(&nodes, 0));
    for i in 1..3 {
        assert_eq!(signature(n(&nodes, i)), first, "node {i} differs");
    }
    let info = n(&nodes, 1).raw().cmd(&["CLUSTER", "INFO"]).as_text();
    assert!(info.contains("cluster_state:ok"), "{info}");
    assert!(info.contains("cluster_known_nodes:3"), "{info}");

    // A cluster client spreads keys over the three.
    let client =
        redis::cluster::ClusterClient::new(vec![format!("redis://{}", addresses[0])]).unwrap();
    let mut con = client.get_connection().unwrap();
    for k in 0..300 {
        let _: () = con.set(format!("key:{k}"), k).unwrap();
    }
    let sizes: Vec<i64> = (0..3)
        .map(|i| n(&nodes, i).raw().cmd(&["DBSIZE"]).as_int())
        .collect();
    assert_eq!(sizes.iter().sum::<i64>(), 300);
    assert!(sizes.iter().all(|&s| s > 50), "{sizes:?}");

    // A change made on one node reaches the others.
    let mut raw2 = n(&nodes, 2).raw();
    assert_eq!(raw2.cmd(&["CLUSTER", "DELSLOTS", "16383"]), ok());
    wait_until("node 0 to see slot 16383 unassigned", || {
        let info = n(&nodes, 0).raw().cmd(&["CLUSTER", "INFO"]).as_text();
        info.contains("cluster_slots_assigned:16383")
    });
    assert_eq!(
        n(&nodes, 0).raw().cmd(&["CLUSTER", "ADDSLOTS", "16383"]),
        ok(),
        "node 0 takes it"
    );
    assert_eq!(
        raw2.cmd(&["CLUSTER", "ADDSLOTS", "16383"]),
        e("ERR Slot 16383 is already busy"),
        "the group's answer, on another node"
    );

    // redis-cli moves 500 slots from node 0 to node 2 under the client.
    let from = n(&nodes, 0).raw().cmd(&["CLUSTER", "MYID"]).as_text();
    let to = raw2.cmd(&["CLUSTER", "MYID"]).as_text();
    redis_cli(&[
        "--cluster",
        "reshard",
        &addresses[1],
        "--cluster-from",
        &from,
        "--cluster-to",
        &to,
        "--cluster-slots",
        "500",
        "--cluster-yes",
    ]);
    let check = redis_cli(&["--cluster", "check", &addresses[1]]);
    assert!(
        check.contains("All nodes agree about slots configuration"),
        "{check}"
    );
    assert!(check.contains("All 16384 slots covered"), "{check}");
    for k in 0..300 {
        let got: i64 = con.get(format!("key:{k}")).unwrap();
        assert_eq!(got, k);
    }

    kill_and_restart_each(&mut nodes, &ports);
}

/// `redis-cli --cluster` grows a cluster by a node (add-node,
/// rebalance), shrinks it again (rebalance to weight 0, del-node: FORGET
/// on every node, RESET SOFT of the removed one, which leaves the Raft
/// group), takes the removed node back as a replica, and fixes an open
/// slot and a slot without an owner.
#[test]
fn redis_cli_grows_shrinks_and_fixes_a_cluster() {
    if !have_redis_cli() {
        return;
    }
    let (nodes, ports) = fresh_nodes(4, &[]);
    let addresses = addresses_of(&ports);
    create(&addresses[..3]);
    let id = |i: usize| n(&nodes, i).raw().cmd(&["CLUSTER", "MYID"]).as_text();
    let (first, added) = (id(0), id(3));
    let output = redis_cli(&["--cluster", "add-node", &addresses[3], &addresses[0]]);
    assert!(output.contains("New node added correctly"), "{output}");
    wait_until("every node to see four", || {
        (0..4).all(|i| signature(n(&nodes, i)).len() == 4)
    });
    let client =
        redis::cluster::ClusterClient::new(vec![format!("redis://{}", addresses[0])]).unwrap();
    let mut con = client.get_connection().unwrap();
    for k in 0..2000 {
        let _: () = con.set(format!("key:{k}"), k).unwrap();
    }
    let slots_of_added = || {
        let nodes = n(&nodes, 1).raw().cmd(&["CLUSTER", "NODES"]).as_text();
        let line = nodes.lines().find(|l| l.starts_with(&added)).unwrap_or("");
        line.split(' ').skip(8).count()
    };

    // A small weight moves about a hundred slots (with their keys) in.
    let weight = format!("{}=0.02", &added[..8]);
    redis_cli(&[
        "--cluster",
        "rebalance",
        &addresses[0],
        "--cluster-use-empty-masters",
        "--cluster-weight",
        &weight,
    ]);
    assert!(slots_of_added() > 0, "the new node was given slots");
    assert!(n(&nodes, 3).raw().cmd(&["DBSIZE"]).as_int() > 0);
    agreed(&addresses[1]);

    // Weight 0 empties it; del-node removes it.
    let weight = format!("{}=0", &added[..8]);
    redis_cli(&[
        "--cluster",
        "rebalance",
        &addresses[0],
        "--cluster-weight",
        &weight,
    ]);
    assert_eq!(slots_of_added(), 0);
    assert_eq!(n(&nodes, 3).raw().cmd(&["DBSIZE"]).as_int(), 0);
    let output = redis_cli(&["--cluster", "del-node", &addresses[0], &added]);
    assert!(output.contains("RESET SOFT"), "{output}");
    wait_until("the others to forget it", || {
        (0..3).all(|i| signature(n(&nodes, i)).len() == 3)
    });
    assert_eq!(signature(n(&nodes, 3)).len(), 1, "it forgot the others");
    agreed(&addresses[2]);
    for k in (0..2000).step_by(7) {
        let got: i64 = con.get(format!("key:{k}")).unwrap();
        assert_eq!(got, k);
    }

    // The removed node comes back, as a replica of the first.
    redis_cli(&[
        "--cluster",
        "add-node",
        &addresses[3],
        &addresses[1],
        "--cluster-slave",
        "--cluster-master-id",
        &first,
    ]);
    wait_until("the node to replicate the first", || {
        let keys = n(&nodes, 0).raw().cmd(&["DBSIZE"]).as_int();
        let nodes_seen = signature(n(&nodes, 3)).len();
        // A replica answers LOADING while its first copy loads.
        nodes_seen == 4 && n(&nodes, 3).raw().cmd(&["DBSIZE"]) == Reply::Int(keys)
    });
    agreed(&addresses[3]);

    fix_closes_and_covers(&nodes, &addresses, &first);
    let got: i64 = con.get("key:0").unwrap();
    assert_eq!(got, 0, "the moved key is read where fix put it");
}

/// `redis-cli --cluster check` at `at` finds every node agreeing, every
/// slot covered and no warning.
fn agreed(at: &str) {
    let check = redis_cli(&["--cluster", "check", at]);
    assert!(
        check.contains("All nodes agree about slots configuration"),
        "{check}"
    );
    assert!(check.contains("All 16384 slots covered"), "{check}");
    assert!(!check.contains("[WARNING]"), "{check}");
}

/// `redis-cli --cluster fix`: a slot left open by a move (MIGRATING on
/// its owner, IMPORTING on another) is moved and closed; a slot with no
/// owner and no key is given to a node.
fn fix_closes_and_covers(nodes: &[Option<TestServer>], addresses: &[String], first: &str) {
    let second = n(nodes, 1).raw().cmd(&["CLUSTER", "MYID"]).as_text();
    let slot = n(nodes, 0)
        .raw()
        .cmd(&["CLUSTER", "KEYSLOT", "key:0"])
        .as_int();
    let slot = slot.to_string();
    let mut raw0 = n(nodes, 0).raw();
    let keys = raw0.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]).as_int();
    assert!(keys > 0, "key:0 lives on the first node (slot {slot})");
    assert_eq!(
        raw0.cmd(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &second]),
        ok()
    );
    let mut raw1 = n(nodes, 1).raw();
    assert_eq!(
        raw1.cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", first]),
        ok()
    );
    let limit = Duration::from_secs(60);
    let mut check = Command::new("redis-cli");
    check.args(["--cluster", "check", &addresses[0]]);
    let (code, check) = common::run_within(&mut check, limit);
    assert_ne!(code, 0, "check fails on an open slot");
    assert!(check.contains("The following slots are open"), "{check}");
    redis_cli(&["--cluster", "fix", &addresses[0], "--cluster-yes"]);
    let empty = (0..5461)
        .find(|s| {
            raw0.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()])
                .as_int()
                == 0
        })
        .unwrap()
        .to_string();
    assert_eq!(raw0.cmd(&["CLUSTER", "DELSLOTS", &empty]), ok());
    wait_until("the slot to have no owner everywhere", || {
        let info = n(nodes, 2).raw().cmd(&["CLUSTER", "INFO"]).as_text();
        info.contains("cluster_slots_assigned:16383")
    });
    // Covering asks on its standard input even with --cluster-yes.
    let answer = temp_dir().join("yes");
    std::fs::write(&answer, "yes\n").unwrap();
    let mut fix = Command::new("redis-cli");
    fix.args(["--cluster", "fix", &addresses[0]]);
    let answer = std::fs::File::open(&answer).unwrap().into();
    let (code, output) = common::run_within_reading(&mut fix, answer, limit);
    assert_eq!(code, 0, "{output}");
    assert!(
        output.contains(&format!("Covering slot {empty}")),
        "{output}"
    );
    agreed(&addresses[2]);
}

/// kill -9 of each node in turn but the last: the others still change
/// the topology, and the node restarted on its directory catches up.
fn kill_and_restart_each(nodes: &mut [Option<TestServer>], ports: &[(u16, u16)]) {
    for victim in 0..nodes.len() - 1 {
        let dir = nodes[victim].take().unwrap().kill9();
        let survivor = (victim + 1) % nodes.len();
        let started = Instant::now();
        loop {
            let reply = n(nodes, survivor).raw().cmd(&["CLUSTER", "BUMPEPOCH"]);
            if let Reply::Simple(text) = &reply {
                assert!(
                    text.starts_with("BUMPED") || text.starts_with("STILL"),
                    "{text}"
                );
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no change accepted without node {victim}: {reply:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        nodes[victim] = Some(node(dir, ports[victim].0, ports[victim].1));
        wait_until("the restarted node to catch up", || {
            signature(n(nodes, victim)) == signature(n(nodes, survivor))
        });
    }
    assert_eq!(signature(n(nodes, 0)).len(), 3);
}

#[test]
fn meet_checks_its_arguments_and_a_node_is_not_met_twice() {
    let server = TestServer::start_with(&["--cluster-enabled", "yes"]);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["CLUSTER", "MEET", "127.0.0.1", "70000"]),
        e("ERR Invalid base port specified: 70000")
    );
    assert_eq!(
        raw.cmd(&["CLUSTER", "MEET", "nowhere", "7000"]),
        e("ERR Invalid node address specified: nowhere:7000")
    );
    // Meeting itself changes nothing.
    let nodes = raw.cmd(&["CLUSTER", "NODES"]).as_text();
    let cport = nodes.split('@').nth(1).unwrap().split(' ').next().unwrap();
    let port = server.port.to_string();
    assert_eq!(
        raw.cmd(&["CLUSTER", "MEET", "127.0.0.1", &port, cport]),
        ok()
    );
    std::thread::sleep(Duration::from_millis(500));
    let info = raw.cmd(&["CLUSTER", "INFO"]).as_text();
    assert!(info.contains("cluster_known_nodes:1"), "{info}");
}

/// A node given `extra` arguments besides the fixed ports.
fn node_with(dir: std::path::PathBuf, port: u16, bus: u16, extra: &[&str]) -> TestServer {
    let (port, bus) = (port.to_string(), bus.to_string());
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--port",
        &port,
        "--cluster-port",
        &bus,
    ];
    args.extend_from_slice(extra);
    TestServer::spawn(dir, &args, None, common::READY)
}

/// Nodes (taken out when killed), their (client, bus) ports and client
/// addresses.
type Started = (Vec<Option<TestServer>>, Vec<(u16, u16)>, Vec<String>);

/// Three primaries made one cluster by `redis-cli --cluster create`, and
/// a fourth node added as the first one's replica (following it), each
/// started with `extra`; their ports and client addresses.
fn primaries_and_a_replica(extra: &[&str]) -> Started {
    let (nodes, ports) = fresh_nodes(4, extra);
    let addresses = addresses_of(&ports);
    create(&addresses[..3]);
    let primary_id = n(&nodes, 0).raw().cmd(&["CLUSTER", "MYID"]).as_text();
    redis_cli(&[
        "--cluster",
        "add-node",
        &addresses[3],
        &addresses[0],
        "--cluster-slave",
        "--cluster-master-id",
        &primary_id,
    ]);
    wait_until("the replica to follow its primary", || {
        let role = n(&nodes, 3).raw().cmd(&["ROLE"]);
        role.as_array().len() > 3 && role.as_array()[3].as_text() == "connected"
    });
    (nodes, ports, addresses)
}

/// Three primaries and a replica of the first: kill -9 of that primary
/// under writes acknowledged by `WAIT 1`; the replica takes its slots
/// with every acknowledged write, and the old primary, restarted, comes
/// back as the new primary's replica.
#[test]
fn a_replica_takes_over_a_killed_primary_with_every_acknowledged_write() {
    if !have_redis_cli() {
        return;
    }
    let timeout = ["--cluster-node-timeout", "1000"];
    let (mut nodes, ports, addresses) = primaries_and_a_replica(&timeout);
    // "{bar}" keys are in slot 5061, the first primary's.
    let mut primary = n(&nodes, 0).raw();
    let mut acknowledged = 0;
    for k in 0..200 {
        // A busy machine may hold the primary past its lease for a
        // moment (CLUSTERDOWN): the write is retried then.
        wait_until("the write to be served", || {
            primary.cmd(&["SET", &format!("{{bar}}{k}"), &k.to_string()]) == ok()
        });
        if primary.cmd(&["WAIT", "1", "1000"]) == Reply::Int(1) {
            acknowledged = k + 1;
        }
    }
    assert!(
        acknowledged > 150,
        "only {acknowledged} writes reached the replica"
    );
    let killed = Instant::now();
    let dir = nodes[0].take().unwrap().kill9();
    // A planned failover needs its primary: refused at once, as Redis
    // refuses it (the group fails the primary over by itself later).
    assert_eq!(
        n(&nodes, 3).raw().cmd(&["CLUSTER", "FAILOVER"]),
        e("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")
    );
    // Writes to the slot, through any surviving node, until one lands.
    let mut survivor = n(&nodes, 1).raw();
    let took = loop {
        let reply = survivor.cmd(&["SET", "{bar}after", "1"]);
        let served_by_replica = matches!(&reply, Reply::Error(text)
            if text.starts_with(&format!("MOVED 5061 {}", addresses[3])));
        if served_by_replica {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "no failover: {reply:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut promoted = n(&nodes, 3).raw();
    assert_eq!(promoted.cmd(&["SET", "{bar}after", "1"]), ok());
    eprintln!("failover: the replica owned the slot {took:?} after kill -9");
    assert!(took < Duration::from_secs(5), "failover took {took:?}");
    for k in 0..acknowledged {
        assert_eq!(
            promoted.cmd(&["GET", &format!("{{bar}}{k}")]),
            common::b(&k.to_string()),
            "write {k} was acknowledged by WAIT and lost"
        );
    }
    // The old primary comes back as the new one's replica. Its nodes
    // file still makes it the slot's primary: until it has heard from
    // the group and applied the failover, it serves nothing (an old
    // value read there would be a stale read).
    assert_eq!(promoted.cmd(&["SET", "{bar}0", "new"]), ok());
    nodes[0] = Some(node_with(dir, ports[0].0, ports[0].1, &timeout));
    let mut restarted = n(&nodes, 0).raw();
    let watching = Instant::now();
    while watching.elapsed() < Duration::from_millis(1500) {
        match restarted.cmd(&["GET", "{bar}0"]) {
            Reply::Error(text) if text.starts_with("MOVED") => break,
            Reply::Error(text) => assert!(text.starts_with("CLUSTERDOWN"), "{text}"),
            reply => panic!("the restarted old primary served {reply:?}"),
        }
    }
    wait_until("the old primary to follow the new one", || {
        let role = n(&nodes, 0).raw().cmd(&["ROLE"]);
        role.as_array()[0].as_text() == "slave"
            && role.as_array()[2] == Reply::Int(ports[3].0 as i64)
    });
    assert!(
        n(&nodes, 0)
            .raw()
            .cmd(&["SET", "{bar}x", "1"])
            .as_text()
            .starts_with("MOVED 5061"),
        "the old primary redirects to the new one"
    );
}

/// A planned CLUSTER FAILOVER under a write load with no WAIT: the
/// primary holds its writes while its replica catches up, so every write
/// it acknowledged is on the new primary; the writes held are redirected
/// to it (MOVED) and go on there; the old primary follows the new one.
#[test]
fn a_planned_failover_keeps_every_acknowledged_write() {
    if !have_redis_cli() {
        return;
    }
    let (nodes, ports, _) = primaries_and_a_replica(&[]);
    // "{bar}" keys are in slot 5061, the first primary's. The writer
    // follows MOVED and notes each write acknowledged, and the longest
    // wait for one.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, first_port) = (stop.clone(), ports[0].0);
        std::thread::spawn(move || {
            let mut con = common::Raw::connect(first_port);
            let (mut acknowledged, mut longest, mut moved) = (Vec::new(), Duration::ZERO, 0);
            let mut k = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                // Values of 64 KB keep the replica a little behind.
                let value = format!("{k}:{}", "v".repeat(64 << 10));
                let reply = con.cmd(&["SET", &format!("{{bar}}{k}"), &value]);
                longest = longest.max(started.elapsed());
                match reply {
                    Reply::Error(text) if text.starts_with("MOVED") => {
                        let port = text.rsplit(':').next().unwrap().parse().unwrap();
                        con = common::Raw::connect(port);
                        moved += 1;
                        assert!(moved < 5, "redirected again and again: {text}");
                    }
                    reply => {
                        assert_eq!(reply, ok(), "write {k}");
                        acknowledged.push(k);
                        k += 1;
                    }
                }
            }
            (acknowledged, longest, moved)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(n(&nodes, 3).raw().cmd(&["CLUSTER", "FAILOVER"]), ok());
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acknowledged, longest, moved) = writer.join().unwrap();
    eprintln!(
        "planned failover: answered in {took:?}; {} writes, the longest took {longest:?}",
        acknowledged.len()
    );
    assert_eq!(
        moved, 1,
        "the writer was redirected once, to the new primary"
    );
    let role = n(&nodes, 3).raw().cmd(&["ROLE"]);
    assert_eq!(role.as_array()[0].as_text(), "master");
    let mut promoted = n(&nodes, 3).raw();
    for k in &acknowledged {
        let value = promoted.cmd(&["GET", &format!("{{bar}}{k}")]).as_text();
        assert!(
            value.starts_with(&format!("{k}:")),
            "write {k} was acknowledged and lost"
        );
    }
    wait_until("the old primary to follow the new one", || {
        let role = n(&nodes, 0).raw().cmd(&["ROLE"]);
        role.as_array()[0].as_text() == "slave"
            && role.as_array()[2] == Reply::Int(ports[3].0 as i64)
            && role.as_array()[3].as_text() == "connected"
    });
    // It had no write the new primary lacks: it went on from where it
    // was, without a full copy.
    let stats = promoted.cmd(&["INFO", "stats"]).as_text();
    assert!(stats.contains("sync_full:0\r\n"), "{stats}");
    assert!(!stats.contains("sync_partial_ok:0\r\n"), "{stats}");
    // Planned again, back the other way.
    assert_eq!(n(&nodes, 0).raw().cmd(&["CLUSTER", "FAILOVER"]), ok());
    let role = n(&nodes, 0).raw().cmd(&["ROLE"]);
    assert_eq!(role.as_array()[0].as_text(), "master");
}

fn signal(server: &TestServer, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal}");
}

/// A primary cut off from its group's majority (the two others stopped
/// with SIGSTOP) stops serving its slots once its lease (half the node
/// timeout) ends, so no write lands on a primary that a failover may be
/// replacing; it serves again once the others are back.
#[test]
fn a_primary_without_a_majority_stops_serving_within_its_lease() {
    if !have_redis_cli() {
        return;
    }
    // Started with a lease of 2 s; CONFIG SET makes it 0.5 s at once.
    let timeout = ["--cluster-node-timeout", "4000"];
    let (nodes, _, _) = three_primaries(&timeout);
    let nodes: Vec<TestServer> = nodes.into_iter().flatten().collect();
    let mut raw = nodes[0].raw();
    wait_until("the first node to serve its slot", || {
        raw.cmd(&["SET", "{bar}k", "v"]) == ok()
    });
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "cluster-node-timeout", "1000"]),
        ok()
    );
    signal(&nodes[1], "-STOP");
    signal(&nodes[2], "-STOP");
    let cut = Instant::now();
    let refused_after = loop {
        let reply = raw.cmd(&["SET", "{bar}k", "v"]);
        if reply == e("CLUSTERDOWN The cluster is down") {
            break cut.elapsed();
        }
        assert_eq!(reply, ok(), "only OK or CLUSTERDOWN");
        assert!(cut.elapsed() < Duration::from_secs(10), "still serving");
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("lease: writes refused {refused_after:?} after the majority went away");
    assert!(
        refused_after < Duration::from_millis(1500),
        "served for {refused_after:?}"
    );
    assert_eq!(
        raw.cmd(&["SET", "{bar}k", "v"]),
        e("CLUSTERDOWN The cluster is down")
    );
    assert_eq!(raw.cmd(&["PING"]), Reply::Simple("PONG".into()), "no key");
    signal(&nodes[1], "-CONT");
    signal(&nodes[2], "-CONT");
    wait_until("the node to serve again", || {
        raw.cmd(&["SET", "{bar}k", "v"]) == ok()
    });
}

/// The reply of CLUSTER MIGRATION STATUS ID `id`: its one task's fields.
fn migration(server: &TestServer, id: &str) -> std::collections::HashMap<String, String> {
    let reply = server
        .raw()
        .cmd(&["CLUSTER", "MIGRATION", "STATUS", "ID", id]);
    let tasks = reply.as_array();
    assert_eq!(tasks.len(), 1, "{reply:?}");
    let fields = tasks[0].as_array();
    fields
        .chunks(2)
        .map(|pair| (pair[0].as_text(), pair[1].as_text()))
        .collect()
}

/// Waits until task `id` has finished on `server`; its fields.
fn migration_done(server: &TestServer, id: &str) -> std::collections::HashMap<String, String> {
    let mut fields = migration(server, id);
    wait_until("the slot move to finish", || {
        fields = migration(server, id);
        ["completed", "failed", "cancelled"].contains(&fields["state"].as_str())
    });
    fields
}

/// Keys `prefix<n>` whose slots are below `below` (the first primary's
/// after `redis-cli --cluster create` of three), `count` of them.
fn keys_below(prefix: &str, below: u16, count: usize) -> Vec<String> {
    keys_in(prefix, 0..below, count)
}

/// `count` keys `prefix<n>` whose slots are in `slots`.
fn keys_in(prefix: &str, slots: std::ops::Range<u16>, count: usize) -> Vec<String> {
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .filter(|key| slots.contains(&strata_engine::keyspace::shards::key_slot(key.as_bytes())))
        .take(count)
        .collect()
}

/// A cluster client writes and reads all over the key space (the
/// slots moved included) until told to stop; answers the last value
/// acknowledged per key and every error it saw.
fn cluster_load(
    address: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(std::collections::HashMap<String, u64>, Vec<String>)> {
    std::thread::spawn(move || {
        let client =
            redis::cluster::ClusterClient::new(vec![format!("redis://{address}")]).unwrap();
        let mut con = client.get_connection().unwrap();
        let (mut acknowledged, mut errors) = (std::collections::HashMap::new(), Vec::new());
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let key = format!("load:{}", n % 2000);
            match con.set::<_, _, ()>(&key, n) {
                Ok(()) => {
                    acknowledged.insert(key.clone(), n);
                }
                Err(error) => errors.push(format!("SET {key}: {error}")),
            }
            if let Err(error) = con.get::<_, Option<u64>>(&key) {
                errors.push(format!("GET {key}: {error}"));
            }
            n += 1;
        }
        (acknowledged, errors)
    })
}

/// A plain connection to the old owner reads a moved key throughout:
/// served there until the switch, MOVED after it, never ASK. Answers
/// the other errors it got.
fn watch_moved_key(
    port: u16,
    key: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut con = common::Raw::connect(port);
        let mut seen = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match con.cmd(&["GET", &key]) {
                Reply::Error(text) if !text.starts_with("MOVED") => seen.push(text),
                Reply::Error(_) => {}
                reply => assert_eq!(reply, common::b(&key), "before the switch"),
            }
        }
        seen
    })
}

/// Waits until every node gives slots 0-4095 to the node `owner`.
fn wait_for_owner(nodes: &[Option<TestServer>], owner: &str) {
    wait_until("every node to give slots 0-4095 to the target", || {
        (0..nodes.len()).all(|i| {
            let slots = n(nodes, i).raw().cmd(&["CLUSTER", "SLOTS"]);
            slots.as_array().iter().any(|range| {
                let range = range.as_array();
                range[0] == Reply::Int(0)
                    && range[1] == Reply::Int(4095)
                    && range[2].as_array()[2].as_text() == owner
            })
        })
    });
}

/// CLUSTER MIGRATION IMPORT moves 4096 slots whole from the first
/// primary to the second while a cluster client writes and reads all
/// over the key space: no client error, no ASK redirection, every key
/// (and its type and deadline) on the new owner, every acknowledged
/// write there, the group agreeing on the new owner, and the keys gone
/// from the old one.
#[test]
fn slots_move_whole_under_load_with_no_client_error() {
    if !have_redis_cli() {
        return;
    }
    let (nodes, ports, addresses) = three_primaries(&[]);
    let mut source = n(&nodes, 0).raw();
    let keys = keys_below("k:", 4096, 20_000);
    for key in &keys {
        assert_eq!(source.cmd(&["SET", key, key]), ok());
    }
    let typed = keys_below("typed:", 4096, 4);
    assert_eq!(
        source.cmd(&["HSET", &typed[0], "f", "v", "g", "w"]),
        Reply::Int(2)
    );
    assert_eq!(
        source.cmd(&["RPUSH", &typed[1], "a", "b", "c"]),
        Reply::Int(3)
    );
    assert_eq!(source.cmd(&["ZADD", &typed[2], "1.5", "m"]), Reply::Int(1));
    assert_eq!(source.cmd(&["SET", &typed[3], "soon", "EX", "1000"]), ok());

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = cluster_load(addresses[0].clone(), stop.clone());
    let watcher = watch_moved_key(ports[0].0, keys[0].clone(), stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    let mut target = n(&nodes, 1).raw();
    let id = target
        .cmd(&["CLUSTER", "MIGRATION", "IMPORT", "0", "4095"])
        .as_text();
    let imported = migration_done(n(&nodes, 1), &id);
    assert_eq!(imported["state"], "completed", "{imported:?}");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acknowledged, errors) = load.join().unwrap();
    let not_moved = watcher.join().unwrap();
    assert_eq!(
        errors,
        Vec::<String>::new(),
        "the cluster client saw errors"
    );
    assert_eq!(
        not_moved,
        Vec::<String>::new(),
        "the old owner answered other than MOVED"
    );
    let exported = migration(n(&nodes, 0), &id);
    eprintln!("slot move: {exported:?}");
    assert_eq!(exported["state"], "completed", "{exported:?}");
    assert!(
        exported["keys"].parse::<u64>().unwrap() >= 20_004,
        "{exported:?}"
    );

    wait_for_owner(&nodes, &target.cmd(&["CLUSTER", "MYID"]).as_text());
    for key in &keys {
        assert_eq!(target.cmd(&["GET", key]), common::b(key), "{key}");
    }
    assert_eq!(
        target.cmd(&["HGET", &typed[0], "g"]),
        common::b("w"),
        "a hash"
    );
    assert_eq!(target.cmd(&["LINDEX", &typed[1], "2"]), common::b("c"));
    assert_eq!(target.cmd(&["ZSCORE", &typed[2], "m"]), common::b("1.5"));
    let ttl = target.cmd(&["TTL", &typed[3]]).as_int();
    assert!((990..=1000).contains(&ttl), "the deadline moved too: {ttl}");
    let client =
        redis::cluster::ClusterClient::new(vec![format!("redis://{}", addresses[2])]).unwrap();
    let mut con = client.get_connection().unwrap();
    for (key, value) in &acknowledged {
        let got: Option<u64> = con.get(key).unwrap();
        assert_eq!(got, Some(*value), "the last write acknowledged to {key}");
    }
    wait_until("the old owner to delete the keys it gave", || {
        let count = source.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "0"]).as_int()
            + (0..4096)
                .step_by(97)
                .map(|slot| {
                    source
                        .cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
                        .as_int()
                })
                .sum::<i64>();
        count == 0
    });
    assert!(
        source
            .cmd(&["GET", &keys[0]])
            .as_text()
            .starts_with("MOVED ")
    );
}

/// What CLUSTER MIGRATION refuses among three primaries: IMPORTs of
/// slots that cannot move, and the nodes' own steps that no task asked
/// for.
fn migration_refusals(nodes: &[Option<TestServer>]) {
    let mut target = n(nodes, 1).raw();
    for (args, error) in [
        (
            vec!["6000", "6000"],
            "ERR Slot 6000 is already served by this node",
        ),
        (
            vec!["5000", "5000", "11000", "11000"],
            "ERR The slots are served by more than one node: import them from each with an IMPORT of its own",
        ),
        (
            vec!["7", "3"],
            "ERR start slot number 7 is greater than end slot number 3",
        ),
        (vec!["0", "16384"], "ERR Invalid or out of range slot"),
    ] {
        let mut command = vec!["CLUSTER", "MIGRATION", "IMPORT"];
        command.extend(args);
        assert_eq!(target.cmd(&command), e(error));
    }
    assert_eq!(
        target.cmd(&["CLUSTER", "MIGRATION", "STATUS"]),
        Reply::Array(vec![])
    );
    assert_eq!(
        target.cmd(&["CLUSTER", "MIGRATION", "CANCEL", "ALL"]),
        Reply::Int(0)
    );
    // The nodes' own steps refuse what no task asked for.
    let target_id = target.cmd(&["CLUSTER", "MYID"]).as_text();
    for (args, error) in [
        (
            vec!["LINK", "nosuch"],
            "ERR No slot import waits for this link",
        ),
        (
            vec!["COMMIT", "nosuch"],
            "ERR No slot import is linked to this connection",
        ),
        (
            vec!["EXPORT", "t", &target_id, "6000", "6000"],
            "ERR Slot 6000 is not served by this node",
        ),
        (vec!["STATUS", "ID"], "ERR syntax error"),
        (vec!["CANCEL"], "ERR syntax error"),
        (vec!["NOSUCH"], "ERR syntax error"),
    ] {
        let mut command = vec!["CLUSTER", "MIGRATION"];
        command.extend(args);
        assert_eq!(n(nodes, 0).raw().cmd(&command), e(error), "{command:?}");
    }
}

/// A slot move the target cannot take (its memory is full) fails: the
/// slots stay with their owner, every key still there, and the target
/// deletes what it had been sent; the same move succeeds once the
/// target has room. IMPORT checks its slots first.
#[test]
fn a_failed_slot_move_leaves_the_slots_where_they_were() {
    if !have_redis_cli() {
        return;
    }
    let (nodes, _, _) = three_primaries(&[]);
    migration_refusals(&nodes);
    let mut target = n(&nodes, 1).raw();
    let mut source = n(&nodes, 0).raw();
    let keys = keys_below("big:", 100, 1000);
    let value = "x".repeat(4096);
    for key in &keys {
        assert_eq!(source.cmd(&["SET", key, &value]), ok());
    }
    assert_eq!(target.cmd(&["CONFIG", "SET", "maxmemory", "1mb"]), ok());
    let id = target
        .cmd(&["CLUSTER", "MIGRATION", "IMPORT", "0", "99"])
        .as_text();
    let imported = migration_done(n(&nodes, 1), &id);
    assert_eq!(imported["state"], "failed", "{imported:?}");
    let exported = migration_done(n(&nodes, 0), &id);
    assert_eq!(exported["state"], "failed", "{exported:?}");
    assert!(exported["last_error"].contains("OOM"), "{exported:?}");
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..3 {
        let slots = n(&nodes, i).raw().cmd(&["CLUSTER", "SLOTS"]);
        let first = slots
            .as_array()
            .iter()
            .find(|range| range.as_array()[0] == Reply::Int(0))
            .unwrap_or_else(|| panic!("node {i}: {slots:?}"));
        assert_eq!(first.as_array()[1], Reply::Int(5460), "node {i}: {slots:?}");
    }
    for key in &keys {
        assert_eq!(source.cmd(&["STRLEN", key]), Reply::Int(4096), "{key}");
    }
    wait_until("the target to delete what it was sent", || {
        keys.iter()
            .map(|key| strata_engine::keyspace::shards::key_slot(key.as_bytes()).to_string())
            .all(|slot| target.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]) == Reply::Int(0))
    });

    // With room, the move succeeds; the source copies the 4 MB at
    // 2 MB/s at most (`cluster-migration-max-rate`).
    assert_eq!(target.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(
        source.cmd(&["CONFIG", "SET", "cluster-migration-max-rate", "2mb"]),
        ok()
    );
    let started = Instant::now();
    let id = target
        .cmd(&["CLUSTER", "MIGRATION", "IMPORT", "0", "99"])
        .as_text();
    assert_eq!(migration_done(n(&nodes, 1), &id)["state"], "completed");
    let took = started.elapsed();
    assert!(took > Duration::from_millis(1500), "paced: {took:?}");
    for key in &keys {
        assert_eq!(target.cmd(&["STRLEN", key]), Reply::Int(4096), "{key}");
    }
    let listed = target.cmd(&["CLUSTER", "MIGRATION", "STATUS", "ALL"]);
    assert_eq!(listed.as_array().len(), 2, "both tasks are reported");
}

/// A slot move reaches the replicas: the target's replica gets the keys
/// moved in (through the target's stream), the source's replica loses
/// the keys moved out (the DELs that follow the switch).
#[test]
fn a_slot_move_reaches_the_replicas_of_both_nodes() {
    if !have_redis_cli() {
        return;
    }
    let (nodes, _, _) = primaries_and_a_replica(&[]);
    let (mut first, mut second) = (n(&nodes, 0).raw(), n(&nodes, 1).raw());
    let mut replica = n(&nodes, 3).raw();
    assert_eq!(replica.cmd(&["READONLY"]), ok());
    // In: slots 5461-5600 from the second primary to the first.
    let moving_in = keys_in("in:", 5461..5601, 300);
    for key in &moving_in {
        assert_eq!(second.cmd(&["SET", key, key]), ok());
    }
    let id = first
        .cmd(&["CLUSTER", "MIGRATION", "IMPORT", "5461", "5600"])
        .as_text();
    assert_eq!(migration_done(n(&nodes, 0), &id)["state"], "completed");
    wait_until(
        "the first primary's replica to hold the keys moved in",
        || {
            moving_in
                .iter()
                .all(|key| replica.cmd(&["GET", key]) == common::b(key))
        },
    );
    // Out: slots 0-99 from the first primary to the third.
    let moving_out = keys_below("out:", 100, 300);
    for key in &moving_out {
        assert_eq!(first.cmd(&["SET", key, key]), ok());
    }
    wait_until("the replica to hold them first", || {
        moving_out
            .iter()
            .all(|key| replica.cmd(&["GET", key]) == common::b(key))
    });
    let id = n(&nodes, 2)
        .raw()
        .cmd(&["CLUSTER", "MIGRATION", "IMPORT", "0", "99"])
        .as_text();
    assert_eq!(migration_done(n(&nodes, 2), &id)["state"], "completed");
    wait_until(
        "the first primary's replica to lose the keys moved out",
        || {
            (0..100).all(|slot| {
                replica.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]) == Reply::Int(0)
            })
        },
    );
}

/// The port of the primary CLUSTER SLOTS (asked of `server`) gives `slot`.
fn owner_port(server: &TestServer, slot: i64) -> u16 {
    let slots = server.raw().cmd(&["CLUSTER", "SLOTS"]);
    let range = slots
        .as_array()
        .iter()
        .find(|range| {
            let range = range.as_array();
            range[0].as_int() <= slot && slot <= range[1].as_int()
        })
        .unwrap_or_else(|| panic!("no owner of {slot}: {slots:?}"));
    range.as_array()[2].as_array()[1].as_int() as u16
}

/// Six nodes, three primaries with a replica each (`redis-cli --cluster
/// create --cluster-replicas 1`): 4096 slots move whole to another
/// primary, writes to them go on there (acknowledged by `WAIT 1`), and
/// after kill -9 of that new owner its replica serves every key moved
/// and every acknowledged write.
#[test]
fn six_nodes_move_slots_whole_and_survive_the_new_owners_failover() {
    if !have_redis_cli() {
        return;
    }
    let (mut nodes, ports) = fresh_nodes(6, &["--cluster-node-timeout", "1000"]);
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(addresses_of(&ports));
    args.extend([
        "--cluster-replicas".into(),
        "1".into(),
        "--cluster-yes".into(),
    ]);
    redis_cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_until("three replicas to follow their primaries", || {
        (0..6)
            .filter(|&i| {
                let role = n(&nodes, i).raw().cmd(&["ROLE"]);
                role.as_array()[0].as_text() == "slave"
                    && role.as_array()[3].as_text() == "connected"
            })
            .count()
            == 3
    });
    let index_of = |port: u16| ports.iter().position(|(p, _)| *p == port).unwrap();
    let source = index_of(owner_port(n(&nodes, 0), 0));
    let target = index_of(owner_port(n(&nodes, 0), 16383));
    let keys = keys_below("six:", 4096, 2000);
    let mut con = n(&nodes, source).raw();
    for key in &keys {
        assert_eq!(con.cmd(&["SET", key, key]), ok());
    }
    let id = n(&nodes, target)
        .raw()
        .cmd(&["CLUSTER", "MIGRATION", "IMPORT", "0", "4095"])
        .as_text();
    assert_eq!(migration_done(n(&nodes, target), &id)["state"], "completed");
    let mut con = n(&nodes, target).raw();
    for key in keys.iter().take(100) {
        assert_eq!(con.cmd(&["SET", key, "after"]), ok());
    }
    assert_eq!(con.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let survivor = (0..6).find(|&i| i != target && i != source).unwrap();
    nodes[target].take().unwrap().kill9();
    wait_until("the new owner's replica to take slot 0", || {
        let port = owner_port(n(&nodes, survivor), 0);
        port != ports[target].0
    });
    let promoted = index_of(owner_port(n(&nodes, survivor), 0));
    let mut con = n(&nodes, promoted).raw();
    wait_until("the promoted replica to serve", || {
        con.cmd(&["GET", &keys[0]]) == common::b("after")
    });
    for (k, key) in keys.iter().enumerate() {
        let expected = if k < 100 { "after" } else { key.as_str() };
        assert_eq!(con.cmd(&["GET", key]), common::b(expected), "{key}");
    }
}
