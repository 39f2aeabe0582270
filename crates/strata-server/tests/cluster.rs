//! Cluster mode (`cluster-enabled yes`) as cluster clients see it: one
//! node serving every slot, the redirections Redis answers, the
//! topology kept in `cluster-config-file` across a kill -9, and two
//! real nodes given one topology (through their config files) that a
//! cluster client (redis-rs) follows across a manual slot move (SETSLOT
//! MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE), as `redis-cli --cluster
//! reshard` drives one.

mod common;

use common::{Reply, TestServer, b, e, i, ok, temp_dir};
use redis::Commands;

/// "foo" and "bar" are in slots 12182 and 5061 (the cluster spec's
/// examples), "{bar}…" keys with "bar".
const FOO_SLOT: i64 = 12182;
const BAR_SLOT: i64 = 5061;

fn cluster_node(extra: &[&str]) -> TestServer {
    let mut args = vec!["--cluster-enabled", "yes"];
    args.extend_from_slice(extra);
    TestServer::start_with(&args)
}

fn text(reply: Reply) -> String {
    reply.as_text()
}

fn info_field(info: &str, name: &str) -> String {
    common::info_field(info, name)
}

#[test]
fn one_node_serves_every_slot_to_cluster_clients() {
    let server = cluster_node(&[]);
    let mut raw = server.raw();
    let info = text(raw.cmd(&["CLUSTER", "INFO"]));
    assert_eq!(info_field(&info, "cluster_state"), "ok");
    assert_eq!(info_field(&info, "cluster_slots_assigned"), "16384");
    assert_eq!(info_field(&info, "cluster_known_nodes"), "1");
    assert_eq!(info_field(&info, "cluster_size"), "1");
    let id = text(raw.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(id.len(), 40, "{id}");
    let nodes = text(raw.cmd(&["CLUSTER", "NODES"]));
    let port = server.port;
    assert_eq!(
        nodes,
        format!(
            "{id} 127.0.0.1:{port}@{} myself,master - 0 0 0 connected\n",
            port + 10000
        )
    );
    let slots = raw.cmd(&["CLUSTER", "SLOTS"]);
    assert_eq!(
        slots,
        Reply::Array(vec![Reply::Array(vec![
            i(0),
            i(16383),
            Reply::Array(vec![
                b("127.0.0.1"),
                i(port as i64),
                b(&id),
                Reply::Array(vec![])
            ]),
        ])])
    );
    assert_eq!(
        raw.cmd(&["CLUSTER", "KEYSLOT", "foo"]),
        i(FOO_SLOT),
        "the spec's example"
    );
    assert!(
        text(raw.cmd(&["INFO", "cluster"])).contains("cluster_enabled:1"),
        "INFO says so"
    );
    // Keys of one slot together; of several, CROSSSLOT, as in Redis.
    assert_eq!(raw.cmd(&["MSET", "{bar}1", "a", "{bar}2", "b"]), ok());
    assert_eq!(
        raw.cmd(&["MSET", "foo", "a", "bar", "b"]),
        e("CROSSSLOT Keys in request don't hash to the same slot")
    );
    assert_eq!(
        raw.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &BAR_SLOT.to_string()]),
        i(2)
    );
    let mut keys = raw
        .cmd(&["CLUSTER", "GETKEYSINSLOT", &BAR_SLOT.to_string(), "10"])
        .as_array()
        .to_vec();
    keys.sort_by_key(|k| k.as_text());
    assert_eq!(keys, vec![b("{bar}1"), b("{bar}2")]);
    // A transaction over two slots is discarded at EXEC with the
    // redirection itself (not EXECABORT).
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(
        raw.cmd(&["SET", "foo", "1"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        raw.cmd(&["SET", "bar", "1"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        raw.cmd(&["EXEC"]),
        e("CROSSSLOT Keys in request don't hash to the same slot")
    );
    assert_eq!(raw.cmd(&["EXISTS", "foo"]), i(0), "nothing ran");
    assert_eq!(
        raw.cmd(&["EXEC"]),
        e("ERR EXEC without MULTI"),
        "the transaction ended"
    );
    // Only database 0.
    assert_eq!(
        raw.cmd(&["SELECT", "1"]),
        e("ERR SELECT is not allowed in cluster mode")
    );
    assert_eq!(raw.cmd(&["SELECT", "0"]), ok());
    assert_eq!(
        raw.cmd(&["MOVE", "foo", "1"]),
        e("ERR MOVE is not allowed in cluster mode")
    );
    assert_eq!(raw.cmd(&["READONLY"]), ok());
    assert_eq!(raw.cmd(&["READWRITE"]), ok());
    assert_eq!(raw.cmd(&["ASKING"]), ok());

    // A cluster client pointed at the one node.
    let client = redis::cluster::ClusterClient::new(vec![server.url()]).unwrap();
    let mut con = client.get_connection().unwrap();
    for n in 0..200 {
        let _: () = con.set(format!("key:{n}"), n).unwrap();
    }
    for n in 0..200 {
        let got: i64 = con.get(format!("key:{n}")).unwrap();
        assert_eq!(got, n);
    }
    assert_eq!(raw.cmd(&["DBSIZE"]), i(202));
}

/// Scripts keep to one slot: their declared keys, and the keys their
/// commands name.
#[test]
fn scripts_keep_to_one_slot() {
    let server = cluster_node(&[]);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["EVAL", "return 1", "2", "foo", "bar"]),
        e("CROSSSLOT Keys in request don't hash to the same slot")
    );
    let reply = raw.cmd(&[
        "EVAL",
        "redis.call('SET', KEYS[1], 1); return redis.call('SET', 'bar', 1)",
        "1",
        "foo",
    ]);
    assert!(
        reply
            .as_text()
            .contains("Script attempted to access keys that do not hash to the same slot"),
        "{reply:?}"
    );
    assert_eq!(
        raw.cmd(&[
            "EVAL",
            "redis.call('SET', '{bar}x', 1); return redis.call('GET', 'bar')",
            "0",
        ]),
        Reply::NullBulk,
        "undeclared keys of one slot"
    );
    assert_eq!(
        raw.cmd(&["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"]),
        e("ERR Can not run script on cluster, 'no-cluster' flag is set.")
    );
}

#[test]
fn slots_without_an_owner_answer_clusterdown() {
    let server = cluster_node(&[]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["CLUSTER", "DELSLOTSRANGE", "5000", "5100"]), ok());
    assert_eq!(
        raw.cmd(&["CLUSTER", "DELSLOTS", "5000"]),
        e("ERR Slot 5000 is already unassigned")
    );
    assert_eq!(
        raw.cmd(&["CLUSTER", "DELSLOTS", "16384"]),
        e("ERR Invalid or out of range slot")
    );
    assert_eq!(
        raw.cmd(&["GET", "bar"]),
        e("CLUSTERDOWN Hash slot not served")
    );
    let info = text(raw.cmd(&["CLUSTER", "INFO"]));
    assert_eq!(info_field(&info, "cluster_state"), "fail");
    assert_eq!(info_field(&info, "cluster_slots_assigned"), "16283");
    assert_eq!(
        raw.cmd(&["GET", "foo"]),
        e("CLUSTERDOWN The cluster is down")
    );
    assert_eq!(raw.cmd(&["PING"]), Reply::Simple("PONG".into()), "no key");
    common::config_set(&mut server.client(), "cluster-require-full-coverage", "no");
    assert_eq!(raw.cmd(&["SET", "foo", "1"]), ok());
    common::config_set(&mut server.client(), "cluster-require-full-coverage", "yes");
    common::config_set(&mut server.client(), "cluster-allow-reads-when-down", "yes");
    assert_eq!(raw.cmd(&["GET", "foo"]), b("1"));
    assert_eq!(
        raw.cmd(&["SET", "foo", "2"]),
        e("CLUSTERDOWN The cluster is down and only accepts read commands")
    );
    assert_eq!(raw.cmd(&["CLUSTER", "ADDSLOTSRANGE", "5000", "5100"]), ok());
    assert_eq!(
        raw.cmd(&["CLUSTER", "ADDSLOTS", "5000"]),
        e("ERR Slot 5000 is already busy")
    );
    assert_eq!(raw.cmd(&["SET", "bar", "1"]), ok());
    assert_eq!(
        raw.cmd(&["CLUSTER", "FLUSHSLOTS"]),
        e("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.")
    );
    assert_eq!(
        raw.cmd(&["CLUSTER", "RESET"]),
        e("ERR CLUSTER RESET can't be called with master nodes containing keys")
    );
    assert_eq!(raw.cmd(&["FLUSHALL"]), ok());
    let id = text(raw.cmd(&["CLUSTER", "MYID"]));
    assert_eq!(raw.cmd(&["CLUSTER", "RESET", "HARD"]), ok());
    assert_ne!(text(raw.cmd(&["CLUSTER", "MYID"])), id, "a new id");
    let info = text(raw.cmd(&["CLUSTER", "INFO"]));
    assert_eq!(info_field(&info, "cluster_slots_assigned"), "0");
}

#[test]
fn the_topology_survives_kill9_and_is_locked() {
    let server = cluster_node(&[]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["CLUSTER", "DELSLOTS", "7", "9"]), ok());
    assert_eq!(
        raw.cmd(&["CLUSTER", "BUMPEPOCH"]),
        Reply::Simple("BUMPED 1".into())
    );
    assert_eq!(
        raw.cmd(&["CLUSTER", "BUMPEPOCH"]),
        Reply::Simple("STILL 1".into())
    );
    let id = text(raw.cmd(&["CLUSTER", "MYID"]));
    let before = text(raw.cmd(&["CLUSTER", "NODES"]));
    assert!(
        before.ends_with(" 1 connected 0-6 8 10-16383\n"),
        "{before}"
    );
    // A second server cannot take the same file.
    let file = server.dir.join("data").join("nodes.conf");
    let (status, log) = TestServer::run_to_exit(
        &temp_dir(),
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            file.to_str().unwrap(),
        ],
    );
    assert!(!status.success());
    assert!(
        log.iter()
            .any(|l| l.contains("is already used by a different")),
        "{log:?}"
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--cluster-enabled", "yes"], None, common::READY);
    let mut raw = server.raw();
    assert_eq!(text(raw.cmd(&["CLUSTER", "MYID"])), id);
    let after = text(raw.cmd(&["CLUSTER", "NODES"]));
    let port_changed = |text: &str| text.split(' ').skip(2).collect::<Vec<_>>().join(" ");
    assert_eq!(port_changed(&after), port_changed(&before));
    // A corrupt file stops start-up rather than serve a wrong topology.
    let dir = server.kill9();
    let file = dir.join("data").join("nodes.conf");
    let corrupt = std::fs::read_to_string(&file)
        .unwrap()
        .replace("0-6", "0-99999");
    std::fs::write(&file, corrupt).unwrap();
    let (status, log) = TestServer::run_to_exit(&dir, &["--cluster-enabled", "yes"]);
    assert!(!status.success());
    assert!(
        log.iter()
            .any(|l| l.contains("corrupted cluster config file")),
        "{log:?}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node's line in a config file.
fn line(id: &str, port: u16, myself: bool, epoch: u64, slots: &str) -> String {
    let flags = if myself { "myself,master" } else { "master" };
    let bus = port + 10000;
    format!("{id} 127.0.0.1:{port}@{bus},,shard-id={id} {flags} - 0 0 {epoch} connected {slots}\n")
}

/// Two nodes, A with slots 0-8191 and B with 8192-16383, each told of
/// the other through its config file.
fn two_nodes() -> (TestServer, TestServer, String, String) {
    common::with_free_ports(two_nodes_once)
}

fn two_nodes_once() -> (TestServer, TestServer, String, String) {
    let (id_a, id_b) = ("a".repeat(40), "b".repeat(40));
    let (port_a, port_b) = (free_port(), free_port());
    let mut servers = Vec::new();
    for (me, my_port, my_slots, other, other_port, other_slots) in [
        (&id_a, port_a, "0-8191", &id_b, port_b, "8192-16383"),
        (&id_b, port_b, "8192-16383", &id_a, port_a, "0-8191"),
    ] {
        let dir = temp_dir();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let text = line(me, my_port, true, 1, my_slots)
            + &line(other, other_port, false, 2, other_slots)
            + "vars currentEpoch 2 lastVoteEpoch 0\n";
        std::fs::write(dir.join("data").join("nodes.conf"), text).unwrap();
        let port = my_port.to_string();
        servers.push(TestServer::spawn(
            dir,
            &["--cluster-enabled", "yes", "--port", &port],
            None,
            common::READY,
        ));
    }
    let b_node = servers.pop().unwrap();
    let a_node = servers.pop().unwrap();
    (a_node, b_node, id_a, id_b)
}

#[test]
fn two_nodes_redirect_and_move_a_slot_under_a_cluster_client() {
    let (a, b_node, id_a, id_b) = two_nodes();
    let mut ra = a.raw();
    let mut rb = b_node.raw();
    assert_eq!(
        ra.cmd(&["GET", "foo"]),
        e(&format!("MOVED {FOO_SLOT} 127.0.0.1:{}", b_node.port))
    );
    assert_eq!(
        rb.cmd(&["GET", "bar"]),
        e(&format!("MOVED {BAR_SLOT} 127.0.0.1:{}", a.port))
    );
    let info = text(ra.cmd(&["CLUSTER", "INFO"]));
    assert_eq!(info_field(&info, "cluster_known_nodes"), "2");
    assert_eq!(info_field(&info, "cluster_size"), "2");
    assert_eq!(ra.cmd(&["CLUSTER", "SLOTS"]).as_array().len(), 2);

    let client =
        redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", a.port)]).unwrap();
    let mut con = client.get_connection().unwrap();
    for n in 0..300 {
        let _: () = con.set(format!("key:{n}"), n).unwrap();
        let _: () = con.set(format!("{{bar}}{n}"), n).unwrap();
    }
    let on_a = ra.cmd(&["DBSIZE"]).as_int();
    let on_b = rb.cmd(&["DBSIZE"]).as_int();
    assert_eq!(on_a + on_b, 600);
    assert!(on_a > 300 && on_b > 0, "{on_a} {on_b}");

    // Move "bar"'s slot from A to B as redis-cli --cluster reshard does.
    let slot = BAR_SLOT.to_string();
    assert_eq!(
        rb.cmd(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &id_a]),
        ok()
    );
    assert_eq!(
        ra.cmd(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &id_b]),
        ok()
    );
    // A key not on A any more is asked for at B; one still there is
    // served by A.
    assert_eq!(
        ra.cmd(&["GET", "{bar}absent"]),
        e(&format!("ASK {BAR_SLOT} 127.0.0.1:{}", b_node.port))
    );
    assert_eq!(ra.cmd(&["GET", "{bar}7"]), b("7"));
    assert!(
        text(rb.cmd(&["GET", "{bar}7"])).starts_with("MOVED"),
        "B serves an importing slot only after ASKING"
    );
    assert_eq!(rb.cmd(&["ASKING"]), ok());
    assert_eq!(rb.cmd(&["GET", "{bar}absent"]), Reply::NullBulk);
    assert!(
        text(rb.cmd(&["GET", "{bar}absent"])).starts_with("MOVED"),
        "ASKING is for the next command only"
    );
    // The cluster client keeps working while keys move in batches.
    let port_b = b_node.port.to_string();
    loop {
        let keys = ra.cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "50"]);
        let keys: Vec<String> = keys.as_array().iter().map(|k| k.as_text()).collect();
        if keys.is_empty() {
            break;
        }
        let mut migrate = vec!["MIGRATE", "127.0.0.1", &port_b, "", "0", "5000", "KEYS"];
        migrate.extend(keys.iter().map(String::as_str));
        assert_eq!(ra.cmd(&migrate), ok());
        for n in (0..300).step_by(37) {
            let got: i64 = con.get(format!("{{bar}}{n}")).unwrap();
            assert_eq!(got, n, "read through ASK while moving");
        }
    }
    for node in [&mut rb, &mut ra] {
        assert_eq!(
            node.cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &id_b]),
            ok()
        );
    }
    assert_eq!(
        ra.cmd(&["GET", "{bar}7"]),
        e(&format!("MOVED {BAR_SLOT} 127.0.0.1:{}", b_node.port))
    );
    assert_eq!(
        text(rb.cmd(&["CLUSTER", "NODES"]))
            .lines()
            .find(|l| l.contains("myself"))
            .map(|l| l.split(' ').nth(6).unwrap().to_owned()),
        Some("3".into()),
        "B took the slot with a new config epoch"
    );
    for n in 0..300 {
        let got: i64 = con.get(format!("{{bar}}{n}")).unwrap();
        assert_eq!(got, n, "after the move");
        let got: i64 = con.get(format!("key:{n}")).unwrap();
        assert_eq!(got, n);
    }
    assert_eq!(rb.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), i(300));
    assert_eq!(ra.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), i(0));
}

/// Without cluster mode, CLUSTER answers as a standalone Redis does
/// (KEYSLOT excepted), and so do the cluster client commands.
#[test]
fn standalone_servers_answer_cluster_disabled() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for args in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "NODES"],
        &["READONLY"],
        &["ASKING"],
    ] {
        assert_eq!(
            raw.cmd(args),
            e("ERR This instance has cluster support disabled"),
            "{args:?}"
        );
    }
    assert_eq!(raw.cmd(&["CLUSTER", "KEYSLOT", "foo"]), i(FOO_SLOT));
    assert_eq!(raw.cmd(&["SELECT", "1"]), ok());
}

/// A Python interpreter that can `import redis.cluster`.
fn python_with_redis_cluster() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", "import redis.cluster"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// redis-py's `RedisCluster`, unchanged, over two nodes.
#[test]
fn redis_py_cluster_client_over_two_nodes() {
    let Some(python) = python_with_redis_cluster() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-py (python3-redis) is not installed, and CI must run the cluster client test"
        );
        eprintln!("skipped: no python3 with redis-py (apt install python3-redis)");
        return;
    };
    let (a, b_node, _, _) = two_nodes();
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients/redis_py_cluster.py");
    let (code, output) = common::run_bounded(
        std::process::Command::new(python)
            .arg(&script)
            .arg(a.port.to_string()),
    );
    assert_eq!(code, 0, "redis-py cluster test failed:\n{output}");
    // redis-py logs its EVALSHA-then-EVAL fallback to stderr.
    let done = output.lines().find_map(|l| l.strip_prefix("ok "));
    let checks: u32 = done.unwrap_or("0").trim().parse().unwrap();
    assert!(checks >= 10, "only {checks} checks ran:\n{output}");
    let on_b = b_node.raw().cmd(&["DBSIZE"]).as_int();
    assert!(on_b > 50, "the client wrote to both nodes ({on_b} on B)");
}
