//! A cluster cut by a real network partition: each node runs in a
//! network namespace of its own, joined to the others by a bridge, and a
//! partition takes a node's link down. Clients work on one register key
//! (read, write, compare-and-set by script, each write confirmed by
//! `WAIT 1`) while its primary is cut off from the majority, comes back,
//! and then the new primary is killed with `kill -9`. A checker in the
//! test (Wing & Gong's search, as Knossos does) then decides whether the
//! history of those operations is linearizable.
//!
//! Namespaces need root: the test is ignored by default, and `.ci/run`
//! runs it when it is root (`cargo test --test cluster_partition --
//! --ignored`).

mod common;

use std::collections::HashSet;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use common::temp_dir;

/// `ip` with `args`, which must succeed.
fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?}");
}

/// The namespaces, their links and the bridge between them; removed on
/// drop.
struct Net {
    prefix: String,
    subnet: String,
    nodes: usize,
}

impl Net {
    fn new(nodes: usize) -> Net {
        let pid = std::process::id();
        let net = Net {
            prefix: format!("sp{}", pid % 100_000),
            subnet: format!("10.213.{}", pid % 250),
            nodes,
        };
        let bridge = net.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}.254/24", net.subnet),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for i in 0..nodes {
            let (ns, inside, outside) = (net.ns(i), net.inside(i), net.outside(i));
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &inside, "type", "veth", "peer", "name", &outside,
            ]);
            ip(&["link", "set", &inside, "netns", &ns]);
            ip(&["link", "set", &outside, "master", &bridge]);
            ip(&["link", "set", &outside, "up"]);
            let address = format!("{}/24", net.address(i));
            ip(&[
                "netns", "exec", &ns, "ip", "addr", "add", &address, "dev", &inside,
            ]);
            ip(&["netns", "exec", &ns, "ip", "link", "set", &inside, "up"]);
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        }
        net
    }

    fn bridge(&self) -> String {
        format!("{}br", self.prefix)
    }

    fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    fn inside(&self, i: usize) -> String {
        format!("{}i{i}", self.prefix)
    }

    fn outside(&self, i: usize) -> String {
        format!("{}o{i}", self.prefix)
    }

    fn address(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }

    /// Cuts node `i` off from every other node and from the clients.
    fn cut(&self, i: usize) {
        ip(&["link", "set", &self.outside(i), "down"]);
    }

    fn heal(&self, i: usize) {
        ip(&["link", "set", &self.outside(i), "up"]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for i in 0..self.nodes {
            let _ = Command::new("ip")
                .args(["link", "del", &self.outside(i)])
                .status();
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(i)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .status();
    }
}

/// A strata-server in node `i`'s namespace, on port 6379 of its address.
struct Node {
    child: Child,
    dir: std::path::PathBuf,
    address: String,
}

impl Node {
    fn start(net: &Net, i: usize, dir: std::path::PathBuf) -> Node {
        let address = net.address(i);
        let binary = env!("CARGO_BIN_EXE_strata-server");
        let child = Command::new("ip")
            .args(["netns", "exec", &net.ns(i), binary])
            .args(["--bind", &address, "--port", "6379", "--dir"])
            .arg(&dir)
            .args(["--cluster-enabled", "yes", "--cluster-port", "16379"])
            .args(["--cluster-node-timeout", "1000", "--threads", "2"])
            .args(["--cluster-announce-ip", &address, "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let node = Node {
            child,
            dir,
            address,
        };
        common::wait_until("the node to answer", || {
            node.command(&["PING"])
                .is_ok_and(|r| r == redis::Value::SimpleString("PONG".into()))
        });
        node
    }

    fn endpoint(&self) -> String {
        format!("{}:6379", self.address)
    }

    /// One command on a new connection (short timeouts).
    fn command(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let mut con = connect(&self.endpoint())?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut con)
    }

    fn role(&self) -> String {
        match self.command(&["ROLE"]) {
            Ok(redis::Value::Array(items)) => match items.first() {
                Some(redis::Value::BulkString(role)) => String::from_utf8_lossy(role).into(),
                _ => String::new(),
            },
            _ => String::new(),
        }
    }

    fn kill9(mut self) -> std::path::PathBuf {
        let _ = self.child.kill();
        common::wait_bounded(&mut self.child);
        std::mem::take(&mut self.dir)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(endpoint: &str) -> redis::RedisResult<redis::Connection> {
    let address: std::net::SocketAddr = endpoint.parse().unwrap();
    let stream = TcpStream::connect_timeout(&address, Duration::from_millis(500))?;
    drop(stream);
    let client = redis::Client::open(format!("redis://{endpoint}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_millis(500))?;
    con.set_read_timeout(Some(Duration::from_secs(1)))?;
    con.set_write_timeout(Some(Duration::from_secs(1)))?;
    Ok(con)
}

/// One operation on the register, as a client saw it.
#[derive(Clone, Debug)]
struct Op {
    /// When it was sent and when its outcome was known, in µs since the
    /// start; `None`: not known (it may take effect at any time after
    /// it was sent, or never).
    invoke: u64,
    complete: Option<u64>,
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Write(String),
    Read(Option<String>),
    /// Compare-and-set: expected, new, whether it set.
    Cas(String, String, bool),
}

/// Whether `history` is linearizable for a register that starts absent:
/// a depth-first search for an order of the operations that respects
/// real time (an operation completed before another was invoked comes
/// first) and the register's semantics; operations of unknown outcome
/// may be placed anywhere after their invocation, or left out, and reads
/// of the values they wrote are not checked.
fn linearizable(history: &[Op]) -> Result<(), String> {
    let mut ops: Vec<Op> = history.to_vec();
    ops.sort_by_key(|op| op.invoke);
    // Replication is asynchronous, as in Redis: a read on the primary can
    // see a write its replica has not yet received, and a failover then
    // loses that write. Such a write's outcome is unknown (WAIT did not
    // confirm it), and so is what a read of it proves: those reads are
    // left out. A read of an acknowledged value is always checked, so a
    // stale read still fails.
    let unconfirmed: HashSet<String> = ops
        .iter()
        .filter(|op| op.complete.is_none())
        .filter_map(|op| match &op.kind {
            Kind::Write(value) | Kind::Cas(_, value, _) => Some(value.clone()),
            Kind::Read(_) => None,
        })
        .collect();
    ops.retain(|op| !matches!(&op.kind, Kind::Read(Some(value)) if unconfirmed.contains(value)));
    // An unknown write nobody observed changes nothing a check can see.
    let observed: HashSet<String> = ops
        .iter()
        .filter(|op| op.complete.is_some())
        .filter_map(|op| match &op.kind {
            Kind::Read(Some(value)) => Some(value.clone()),
            Kind::Cas(expected, _, _) => Some(expected.clone()),
            _ => None,
        })
        .collect();
    ops.retain(|op| {
        op.complete.is_some()
            || match &op.kind {
                Kind::Write(value) | Kind::Cas(_, value, _) => observed.contains(value),
                Kind::Read(_) => false,
            }
    });
    let mut seen = HashSet::new();
    let mut done = vec![false; ops.len()];
    let mut budget = 20_000_000u64;
    match search(&ops, &mut done, None, &mut seen, &mut budget) {
        Some(true) => Ok(()),
        Some(false) => Err(format!("no linearization of {} operations", ops.len())),
        None => Err("the search ran out of its budget".into()),
    }
}

fn search(
    ops: &[Op],
    done: &mut Vec<bool>,
    value: Option<String>,
    seen: &mut HashSet<(Vec<bool>, Option<String>)>,
    budget: &mut u64,
) -> Option<bool> {
    *budget = budget.checked_sub(1)?;
    if !seen.insert((done.clone(), value.clone())) {
        return Some(false);
    }
    if !(0..ops.len()).any(|i| !done[i] && ops[i].complete.is_some()) {
        return Some(true);
    }
    // Whatever is linearized next must have been invoked before every
    // pending known operation completed.
    let horizon = (0..ops.len())
        .filter(|&i| !done[i])
        .filter_map(|i| ops[i].complete)
        .min()
        .unwrap_or(u64::MAX);
    for i in 0..ops.len() {
        if done[i] || ops[i].invoke > horizon {
            continue;
        }
        let known = ops[i].complete.is_some();
        let next = match &ops[i].kind {
            Kind::Write(new) => Some(Some(new.clone())),
            Kind::Read(read) => (*read == value).then(|| value.clone()),
            Kind::Cas(expected, new, set) => {
                let equal = value.as_ref() == Some(expected);
                match *set || !known {
                    true => equal.then(|| Some(new.clone())),
                    false => (!equal).then(|| value.clone()),
                }
            }
        };
        let Some(next) = next else {
            continue;
        };
        done[i] = true;
        let found = search(ops, done, next, seen, budget);
        done[i] = false;
        match found {
            Some(true) => return Some(true),
            None => return None,
            Some(false) => {}
        }
    }
    Some(false)
}

/// Compare-and-set as a script (one slot: the key's).
const CAS: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
    redis.call('SET', KEYS[1], ARGV[2]) return 1 else return 0 end";

/// "{bar}" is slot 5061: the first primary's.
const KEY: &str = "{bar}register";

/// One client: operations on the register until `stop`, following
/// MOVED; its history.
fn client(id: usize, first: String, stop: Arc<AtomicBool>, start: Instant) -> Vec<Op> {
    let mut history = Vec::new();
    let mut endpoint = first;
    let mut con: Option<redis::Connection> = None;
    let mut last_read: Option<String> = None;
    let mut seq = 0u64;
    let since = |at: Instant| at.duration_since(start).as_micros() as u64;
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(5));
        if con.is_none() {
            con = connect(&endpoint).ok();
            if con.is_none() {
                continue;
            }
        }
        let c = con.as_mut().unwrap();
        seq += 1;
        let new = format!("c{id}-{seq}");
        let choice = seq % 10;
        let invoke = since(Instant::now());
        let (kind, reply): (Kind, redis::RedisResult<redis::Value>) = match choice {
            0..=4 => (Kind::Read(None), redis::cmd("GET").arg(KEY).query(c)),
            5..=7 => (
                Kind::Write(new.clone()),
                redis::cmd("SET").arg(KEY).arg(&new).query(c),
            ),
            _ => {
                let expected = last_read.clone().unwrap_or_default();
                let reply = redis::cmd("EVAL")
                    .arg(CAS)
                    .arg(1)
                    .arg(KEY)
                    .arg(&expected)
                    .arg(&new)
                    .query(c);
                (Kind::Cas(expected, new.clone(), false), reply)
            }
        };
        let op = |kind: Kind, complete: Option<Instant>| Op {
            invoke,
            complete: complete.map(since),
            kind,
        };
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                if let Some((to, _)) = e.redirect_node() {
                    endpoint = to.to_string();
                    con = None;
                } else if e.is_io_error() || e.is_timeout() {
                    // The outcome is unknown (a read has no effect).
                    con = None;
                    if !matches!(kind, Kind::Read(_)) {
                        history.push(op(kind, None));
                    }
                }
                // Refused (MOVED, CLUSTERDOWN, TRYAGAIN): not applied.
                continue;
            }
        };
        let kind = match kind {
            Kind::Read(_) => {
                let value = match reply {
                    redis::Value::BulkString(bytes) => Some(String::from_utf8(bytes).unwrap()),
                    _ => None,
                };
                last_read = value.clone();
                history.push(op(Kind::Read(value), Some(Instant::now())));
                continue;
            }
            Kind::Cas(expected, new, _) => {
                if reply == redis::Value::Int(0) {
                    history.push(op(Kind::Cas(expected, new, false), Some(Instant::now())));
                    continue;
                }
                Kind::Cas(expected, new, true)
            }
            write => write,
        };
        // A write counts once a replica has it too.
        let replicated: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(300).query(c);
        match replicated {
            Ok(1) => history.push(op(kind, Some(Instant::now()))),
            Ok(_) => history.push(op(kind, None)),
            Err(_) => {
                con = None;
                history.push(op(kind, None));
            }
        }
    }
    history
}

fn am_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Three primaries (redis-cli --cluster create) and a replica of the
/// first, one per namespace.
fn cluster_of_four(net: &Net) -> Vec<Option<Node>> {
    let nodes: Vec<Option<Node>> = (0..4)
        .map(|i| Some(Node::start(net, i, temp_dir())))
        .collect();
    let endpoint = |i: usize| nodes[i].as_ref().unwrap().endpoint();
    let mut create = Command::new("redis-cli");
    create.args(["--cluster", "create"]);
    create.args((0..3).map(endpoint));
    create.arg("--cluster-yes");
    let (code, output) = common::run_within(&mut create, Duration::from_secs(60));
    assert_eq!(code, 0, "{output}");
    let first_id = match nodes[0]
        .as_ref()
        .unwrap()
        .command(&["CLUSTER", "MYID"])
        .unwrap()
    {
        redis::Value::BulkString(id) => String::from_utf8(id).unwrap(),
        other => panic!("{other:?}"),
    };
    let mut add = Command::new("redis-cli");
    add.args(["--cluster", "add-node", &endpoint(3), &endpoint(0)]);
    add.args(["--cluster-slave", "--cluster-master-id", &first_id]);
    let (code, output) = common::run_within(&mut add, Duration::from_secs(60));
    assert_eq!(code, 0, "{output}");
    common::wait_until("the replica to follow", || {
        nodes[3].as_ref().unwrap().role() == "slave"
    });
    nodes
}

#[test]
#[ignore = "needs root for network namespaces: .ci/run runs it when it is root"]
fn a_partitioned_primary_stops_and_the_register_stays_linearizable() {
    assert!(am_root(), "network namespaces need root");
    let net = Net::new(4);
    let mut nodes = cluster_of_four(&net);
    let endpoint = |nodes: &[Option<Node>], i: usize| nodes[i].as_ref().unwrap().endpoint();
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
        .map(|id| {
            let (stop, first) = (stop.clone(), endpoint(&nodes, 0));
            std::thread::spawn(move || client(id, first, stop, start))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));

    // The primary is cut off: inside its namespace it stops serving
    // within its lease (half the node timeout), and its replica takes
    // over.
    net.cut(0);
    let cut = Instant::now();
    let inside = |what: &str| {
        let output = Command::new("ip")
            .args([
                "netns",
                "exec",
                &net.ns(0),
                "redis-cli",
                "-h",
                &net.address(0),
            ])
            .args(["SET", "{bar}probe", what])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    common::wait_until("the cut-off primary to refuse writes", || {
        inside("1").contains("CLUSTERDOWN")
    });
    let refused_after = cut.elapsed();
    common::wait_until("the replica to take over", || {
        nodes[3].as_ref().unwrap().role() == "master"
    });
    let promoted_after = cut.elapsed();
    assert!(
        refused_after < promoted_after,
        "the old primary stopped ({refused_after:?}) before the replica took over ({promoted_after:?})"
    );
    std::thread::sleep(Duration::from_millis(1000));
    net.heal(0);
    common::wait_until("the old primary to follow the new one", || {
        nodes[0].as_ref().unwrap().role() == "slave"
    });
    std::thread::sleep(Duration::from_millis(1000));

    // kill -9 of the new primary: the old one takes over again.
    let dir = nodes[3].take().unwrap().kill9();
    common::wait_until("the first node to take over again", || {
        nodes[0].as_ref().unwrap().role() == "master"
    });
    nodes[3] = Some(Node::start(&net, 3, dir));
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Relaxed);
    let history: Vec<Op> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();

    let known = |f: fn(&Kind) -> bool| {
        history
            .iter()
            .filter(|op| op.complete.is_some() && f(&op.kind))
            .count()
    };
    let writes = known(|k| matches!(k, Kind::Write(_) | Kind::Cas(_, _, true)));
    let reads = known(|k| matches!(k, Kind::Read(_)));
    let unknown = history.iter().filter(|op| op.complete.is_none()).count();
    eprintln!(
        "partition: writes refused {refused_after:?} after the cut, replica promoted after \
         {promoted_after:?}; {writes} writes and {reads} reads acknowledged, {unknown} unknown"
    );
    assert!(
        writes > 50 && reads > 50,
        "too little happened: {writes} writes, {reads} reads"
    );
    if let Err(why) = linearizable(&history) {
        panic!("{why}:\n{history:#?}");
    }
}

#[test]
fn the_checker_refuses_a_stale_read_and_a_lost_write() {
    let op = |invoke, complete, kind| Op {
        invoke,
        complete,
        kind,
    };
    let w = |v: &str| Kind::Write(v.into());
    let r = |v: Option<&str>| Kind::Read(v.map(String::from));
    // Sequential and right.
    let fine = [op(0, Some(1), w("a")), op(2, Some(3), r(Some("a")))];
    assert!(linearizable(&fine).is_ok());
    // A read after a completed write sees the value before it: stale.
    let stale = [
        op(0, Some(1), w("a")),
        op(2, Some(3), w("b")),
        op(4, Some(5), r(Some("a"))),
    ];
    assert!(linearizable(&stale).is_err());
    // Concurrent writes may land in either order.
    let concurrent = [
        op(0, Some(10), w("a")),
        op(1, Some(9), w("b")),
        op(11, Some(12), r(Some("a"))),
    ];
    assert!(linearizable(&concurrent).is_ok());
    // An acknowledged write that a later read does not see: lost.
    let lost = [op(0, Some(1), w("a")), op(5, Some(6), r(None))];
    assert!(linearizable(&lost).is_err());
    // An unknown write may show up later, or never.
    let unknown = [
        op(0, None, w("a")),
        op(5, Some(6), r(None)),
        op(7, Some(8), r(Some("a"))),
    ];
    assert!(linearizable(&unknown).is_ok());
    // A read saw a write its replica never got, and the failover lost it:
    // asynchronous replication allows that for an unconfirmed write.
    let dirty = [
        op(0, Some(1), w("a")),
        op(2, None, w("b")),
        op(3, Some(4), r(Some("b"))),
        op(5, Some(6), r(Some("a"))),
    ];
    assert!(linearizable(&dirty).is_ok());
    // ... but not for an acknowledged one.
    let lost_after_read = [
        op(0, Some(1), w("a")),
        op(2, Some(3), w("b")),
        op(4, Some(5), r(Some("b"))),
        op(6, Some(7), r(Some("a"))),
    ];
    assert!(linearizable(&lost_after_read).is_err());
    // A compare-and-set that set and one that did not.
    let cas = [
        op(0, Some(1), w("a")),
        op(2, Some(3), Kind::Cas("a".into(), "b".into(), true)),
        op(4, Some(5), Kind::Cas("a".into(), "c".into(), false)),
        op(6, Some(7), r(Some("b"))),
    ];
    assert!(linearizable(&cas).is_ok());
    let wrong_cas = [
        op(0, Some(1), w("a")),
        op(2, Some(3), Kind::Cas("a".into(), "b".into(), false)),
    ];
    assert!(linearizable(&wrong_cas).is_err());
}
