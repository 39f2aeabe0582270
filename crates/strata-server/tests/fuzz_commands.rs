//! Randomized commands against the real server: every command in the
//! table, with adversarial arguments, pipelined on one connection. A panic
//! in any handler would drop the connection and lose replies; the test
//! demands one reply per command and a healthy server afterwards.

mod common;

use common::{Raw, Reply, TestServer};

/// SplitMix64, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// Commands (and `container|subcommand`s) that would end the test rather
/// than exercise a handler: stopping or pausing the server (DEBUG SLEEP 100
/// holds the connection's thread for 100 s, as it holds Redis), closing
/// the connection, or turning its replies off; and the blocking commands,
/// which wait as long as they are told to on keys nobody fills here
/// (`blocking.rs` covers their arguments and errors); and the
/// (un)subscribe commands, which answer once per channel and restrict what
/// the connection may run next (`pubsub.rs` covers them); and MONITOR,
/// whose lines come between the replies (`introspection.rs` covers it);
/// and the replication commands.
/// Everything else in COMMAND LIST is fuzzed, CLIENT and CONFIG
/// subcommands included.
const EXCLUDED: &[&str] = &[
    "shutdown",
    "quit",
    "debug|sleep",
    // Panics on purpose (`script_safety.rs` checks what that leaves).
    "debug|panic",
    // Fails the log's next fsync, after which every write is refused
    // until a restart (`durability.rs` covers it).
    "debug|fail-fsync",
    "client|pause",
    "client|reply",
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "monitor",
    // Turn the connection into a replica's stream, or the server into a
    // replica of whatever host the arguments name, or hand its role over
    // (`replication.rs` covers them).
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "failover",
];

const ARGS: &[&str] = &[
    "0",
    "1",
    "-1",
    "7",
    "100",
    "-100",
    "99999",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "abc",
    "",
    "*",
    "?",
    "[a-",
    "\\",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "NX",
    "XX",
    "GT",
    "LT",
    "GET",
    "KEEPTTL",
    "PERSIST",
    "BIT",
    "BYTE",
    "AND",
    "OR",
    "XOR",
    "NOT",
    "i8",
    "u63",
    "i64",
    "u64",
    "#1",
    "#-1",
    "OVERFLOW",
    "SAT",
    "FAIL",
    "WRAP",
    "INCRBY",
    "SET",
    "MATCH",
    "COUNT",
    "TYPE",
    "string",
    "REPLACE",
    "DB",
    "LEN",
    "IDX",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "SAMPLES",
    "ASYNC",
    "SYNC",
    "k1",
    "k2",
    "k3",
    "num",
    "0.5",
    "inf",
    "-inf",
    "nan",
    "1e308",
    "5.0e3",
    "ENCODING",
    "IDLETIME",
    "FREQ",
    "REFCOUNT",
    "USAGE",
    "HELP",
    "COUNT",
    "INFO",
    "DOCS",
    "LIST",
    "GETKEYS",
    "FILTERBY",
    "ACLCAT",
    "PATTERN",
    "get*",
    "15",
    "16",
    // CONFIG SET/GET names and values that leave the server usable.
    "hz",
    "loglevel",
    "notice",
    "maxmemory-samples",
    "appendfsync",
    "everysec",
    "save",
    "slowlog-log-slower-than",
    // CLIENT subcommand options.
    "ID",
    "SKIPME",
    "yes",
    "ON",
    "OFF",
    "lib-name",
    "lib-ver",
    "worker",
];

#[test]
fn random_commands_never_break_a_connection_or_the_server() {
    let server = TestServer::start();
    let mut r = server.raw();
    let names: Vec<String> = r
        .cmd(&["COMMAND", "LIST"])
        .as_array()
        .iter()
        .map(|n| n.as_text())
        .filter(|n| !EXCLUDED.contains(&n.as_str()))
        .collect();
    assert!(names.len() > 50, "{names:?}");
    assert!(names.iter().any(|n| n == "config|set"), "{names:?}");
    assert!(names.iter().any(|n| n == "client|kill"), "{names:?}");
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for seed in 1..=8u64 {
        let mut rng = Rng(seed);
        let mut batch = Vec::new();
        let mut sent = Vec::new();
        let commands = 5000;
        for _ in 0..commands {
            // `client|kill` is sent as CLIENT KILL.
            let mut args: Vec<&str> = rng.pick(&names).split('|').collect();
            let count = rng.next() % 7;
            for _ in 0..count {
                args.push(rng.pick(ARGS));
            }
            sent.push(args.join(" "));
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            batch.extend(Raw::encode(&args));
        }
        r.send_raw(&batch);
        for n in 0..commands {
            // Any reply is fine; a missing one means the handler panicked.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.read()))
                .unwrap_or_else(|_| {
                    panic!(
                        "seed {seed}: no reply to command {n} ({:?}; the one before: {:?})",
                        sent[n],
                        n.checked_sub(1).map(|p| &sent[p])
                    )
                });
        }
        // RESET leaves a MULTI or WATCH the random commands may have begun.
        assert_eq!(r.cmd(&["RESET"]), Reply::simple("RESET"), "seed {seed}");
        assert_eq!(r.cmd(&["PING"]), Reply::simple("PONG"), "seed {seed}");
    }
    let mut fresh = server.raw();
    assert_eq!(fresh.cmd(&["SET", "after", "fuzz"]), Reply::simple("OK"));
    assert_eq!(fresh.cmd(&["GET", "after"]), Reply::bulk("fuzz"));
}
