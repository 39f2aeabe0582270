//! Client-side caching (CLIENT TRACKING) against the real server: RESP3
//! invalidation pushes for keys read, once per read; the RESP2 redirect
//! through `__redis__:invalidate`; BCAST with prefixes and NOLOOP;
//! OPTIN with CLIENT CACHING; FLUSHALL's null invalidation; keys expiring
//! in the background; the options' errors; and a reader that never misses
//! an invalidation while writers on other server threads race it.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn invalidate(keys: &[&str]) -> Reply {
    Reply::Push(vec![
        b("invalidate"),
        Reply::Array(keys.iter().map(|k| b(k)).collect()),
    ])
}

fn resp3(server: &TestServer) -> Raw {
    let mut con = server.raw();
    assert!(matches!(con.cmd(&["HELLO", "3"]), Reply::Map(_)));
    con
}

#[test]
fn resp3_pushes_one_invalidation_per_read() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut writer = server.raw();
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(reader.cmd(&["CLIENT", "GETREDIR"]), i(0));
    assert_eq!(writer.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(reader.cmd(&["GET", "k"]), b("1"));
    assert_eq!(writer.cmd(&["SET", "k", "2"]), ok());
    assert_eq!(writer.cmd(&["SET", "k", "3"]), ok());
    // One message: the first write ended the registration.
    assert_eq!(reader.read(), invalidate(&["k"]));
    assert_eq!(reader.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // A key never read is not tracked; a read key is, again.
    assert_eq!(reader.cmd(&["GET", "k"]), b("3"));
    assert_eq!(writer.cmd(&["SET", "other", "x"]), ok());
    assert_eq!(writer.cmd(&["DEL", "k"]), i(1));
    assert_eq!(reader.read(), invalidate(&["k"]));
    // FLUSHALL: a null invalidation, drop everything.
    assert_eq!(writer.cmd(&["FLUSHALL"]), ok());
    assert_eq!(
        reader.read(),
        Reply::Push(vec![b("invalidate"), Reply::Null])
    );
    let info = reader.cmd(&["CLIENT", "TRACKINGINFO"]);
    let Reply::Map(fields) = info else {
        panic!("{info:?}");
    };
    assert_eq!(fields[0], (b("flags"), Reply::Set(vec![b("on")])));
    assert_eq!(fields[1], (b("redirect"), i(0)));
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    assert_eq!(reader.cmd(&["CLIENT", "GETREDIR"]), i(-1));
}

#[test]
fn resp2_redirect_bcast_noloop_and_optin() {
    let server = TestServer::start();
    let mut target = server.raw();
    let target_id = target.cmd(&["CLIENT", "ID"]).as_int().to_string();
    assert_eq!(
        target.cmd(&["SUBSCRIBE", "__redis__:invalidate"]),
        Reply::Array(vec![b("subscribe"), b("__redis__:invalidate"), i(1)])
    );
    let message = |keys: &[&str]| {
        Reply::Array(vec![
            b("message"),
            b("__redis__:invalidate"),
            Reply::Array(keys.iter().map(|k| b(k)).collect()),
        ])
    };
    let mut con = server.raw();
    let mut other = server.raw();
    // Default mode, redirected.
    assert_eq!(
        con.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &target_id]),
        ok()
    );
    assert_eq!(
        con.cmd(&["MGET", "a", "b"]),
        Reply::Array(vec![Reply::NullBulk, Reply::NullBulk])
    );
    assert_eq!(other.cmd(&["SET", "b", "1"]), ok());
    assert_eq!(target.read(), message(&["b"]));
    // BCAST with prefixes: one message per prefix with its keys.
    assert_eq!(con.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    assert_eq!(
        con.cmd(&[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "REDIRECT", &target_id,
            "NOLOOP"
        ]),
        ok()
    );
    assert_eq!(
        other.cmd(&["MSET", "user:1", "a", "user:2", "b", "order:1", "c"]),
        ok()
    );
    let mut keys = target.read().as_array()[2].as_array().to_vec();
    keys.sort_by_key(Reply::as_text);
    assert_eq!(keys, vec![b("user:1"), b("user:2")]);
    // NOLOOP: its own writes are not reported.
    assert_eq!(con.cmd(&["SET", "user:3", "x"]), ok());
    assert_eq!(other.cmd(&["SET", "user:4", "x"]), ok());
    assert_eq!(target.read(), message(&["user:4"]));
    // OPTIN: only the command after CLIENT CACHING YES is tracked.
    let mut optin = resp3(&server);
    assert_eq!(optin.cmd(&["CLIENT", "TRACKING", "ON", "OPTIN"]), ok());
    assert_eq!(optin.cmd(&["GET", "x"]), Reply::Null);
    assert_eq!(optin.cmd(&["CLIENT", "CACHING", "YES"]), ok());
    assert_eq!(optin.cmd(&["GET", "y"]), Reply::Null);
    assert_eq!(other.cmd(&["MSET", "x", "1", "y", "1"]), ok());
    assert_eq!(optin.read(), invalidate(&["y"]));
    assert_eq!(optin.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // Redis' errors.
    for (args, error) in [
        (
            &["CLIENT", "TRACKING", "ON", "PREFIX", "p"][..],
            "ERR PREFIX option requires BCAST mode to be enabled",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"][..],
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"][..],
            "ERR The client ID you want redirect to does not exist",
        ),
        (
            &["CLIENT", "CACHING", "YES"][..],
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ),
    ] {
        assert_eq!(other.cmd(args), e(error), "{args:?}");
    }
    assert_eq!(
        con.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "use"]),
        e(
            "ERR Prefix 'use' overlaps with an existing prefix 'user:'. Prefixes for a single client must not overlap."
        )
    );
}

#[test]
fn background_expiry_invalidates() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(reader.cmd(&["SET", "soon", "v", "PX", "100"]), ok());
    // Read, then left to expire in the background: the change feed's
    // thread sends the invalidation.
    assert_eq!(reader.cmd(&["GET", "soon"]), b("v"));
    assert_eq!(reader.read(), invalidate(&["soon"]));
}

/// Readers cache a counter and drop it on invalidation while writers on
/// other connections (other server threads) increment it: after the
/// writers stop, every reader's cached value must be the final one or
/// absent. A missed invalidation leaves a stale value behind.
#[test]
fn no_reader_is_left_with_a_stale_value() {
    const READERS: usize = 3;
    const WRITES: usize = 300;
    let server = TestServer::start_with(&["--threads", "2"]);
    let port = server.port;
    let done = std::sync::atomic::AtomicBool::new(false);
    let finals: Vec<Option<String>> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let done = &done;
                scope.spawn(move || {
                    let mut con = Raw::connect(port);
                    assert!(matches!(con.cmd(&["HELLO", "3"]), Reply::Map(_)));
                    assert_eq!(con.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
                    let mut cached: Option<String> = None;
                    let deadline = Instant::now() + Duration::from_secs(30);
                    let mut quiet_rounds = 0;
                    while quiet_rounds < 3 && Instant::now() < deadline {
                        if cached.is_none() {
                            con.send(&["GET", "counter"]);
                        } else {
                            con.send(&["PING"]);
                        }
                        // Pushes may come before the reply.
                        loop {
                            match con.read() {
                                Reply::Push(parts) => {
                                    assert_eq!(parts[0], b("invalidate"));
                                    cached = None;
                                }
                                Reply::Simple(_) => break,
                                Reply::Bulk(value) => {
                                    cached = Some(String::from_utf8(value).unwrap());
                                    break;
                                }
                                Reply::Null => break,
                                other => panic!("{other:?}"),
                            }
                        }
                        if done.load(std::sync::atomic::Ordering::SeqCst) {
                            quiet_rounds += 1;
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    cached
                })
            })
            .collect();
        let writers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(move || {
                    let mut con = Raw::connect(port);
                    for _ in 0..WRITES {
                        assert!(matches!(con.cmd(&["INCR", "counter"]), Reply::Int(_)));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let expected = (2 * WRITES).to_string();
    for cached in finals {
        assert!(
            cached.is_none() || cached.as_deref() == Some(&expected),
            "a reader kept {cached:?}, the value is {expected}"
        );
    }
}

/// Past `tracking-table-max-keys`, a remembered key is dropped with an
/// invalidation (the client must not keep what is no longer tracked).
#[test]
fn the_table_limit_drops_keys_with_an_invalidation() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    assert_eq!(
        reader.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]),
        ok()
    );
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(reader.cmd(&["GET", "a"]), Reply::Null);
    // The second key takes the table over its limit: one key leaves it.
    reader.send(&["GET", "b"]);
    let (mut pushes, mut replies) = (Vec::new(), Vec::new());
    while replies.is_empty() || pushes.is_empty() {
        match reader.read() {
            Reply::Push(parts) => pushes.push(parts),
            other => replies.push(other),
        }
    }
    assert_eq!(replies, vec![Reply::Null]);
    assert!(
        pushes[0] == invalidate(&["a"]).as_array() || pushes[0] == invalidate(&["b"]).as_array(),
        "{pushes:?}"
    );
    let info = reader.cmd(&["INFO", "stats"]).as_text();
    assert_eq!(info_field(&info, "tracking_total_keys"), "1");
}

/// A lowered `tracking-table-max-keys` applies without another read: the
/// cron drops keys past it with an invalidation, as Redis' does (the
/// limit used to be enforced only when a key was next remembered, so a
/// client could wait for the invalidation forever).
#[test]
fn a_lowered_table_limit_applies_without_another_read() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut admin = server.raw();
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(
        reader.cmd(&["MGET", "a", "b"]),
        Reply::Array(vec![Reply::Null, Reply::Null])
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]),
        ok()
    );
    let Reply::Push(parts) = reader.read() else {
        panic!("an invalidation push");
    };
    assert!(
        parts == invalidate(&["a"]).as_array() || parts == invalidate(&["b"]).as_array(),
        "{parts:?}"
    );
    let info = admin.cmd(&["INFO", "stats"]).as_text();
    assert_eq!(info_field(&info, "tracking_total_keys"), "1");
}

/// CLIENT TRACKINGINFO of a BCAST client without PREFIX lists the empty
/// prefix it tracks, as Redis lists it.
#[test]
fn bcast_without_prefix_shows_the_empty_prefix() {
    let server = TestServer::start();
    let mut con = resp3(&server);
    assert_eq!(con.cmd(&["CLIENT", "TRACKING", "ON", "BCAST"]), ok());
    let Reply::Map(info) = con.cmd(&["CLIENT", "TRACKINGINFO"]) else {
        panic!("TRACKINGINFO is a map in RESP3");
    };
    assert_eq!(info[2], (b("prefixes"), Reply::Array(vec![b("")])));
    assert_eq!(con.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    assert_eq!(
        con.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:"]),
        ok()
    );
    let Reply::Map(info) = con.cmd(&["CLIENT", "TRACKINGINFO"]) else {
        panic!("TRACKINGINFO is a map in RESP3");
    };
    assert_eq!(info[2], (b("prefixes"), Reply::Array(vec![b("p:")])));
}

/// With the cron paused (DEBUG PAUSE-CRON 1), a lowered
/// `tracking-table-max-keys` applies before the next command of any
/// client, also one that is queued in MULTI: its invalidation comes
/// before `+QUEUED`, as in Redis (whose unit/tracking checks this), and
/// the transaction goes on.
#[test]
fn a_lowered_table_limit_applies_at_the_next_command_with_the_cron_paused() {
    let server = TestServer::start();
    let mut admin = server.raw();
    let mut reader = resp3(&server);
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
        ok()
    );
    assert_eq!(admin.cmd(&["DEBUG", "PAUSE-CRON", "1"]), ok());
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(
        reader.cmd(&["MGET", "1{tag}", "2{tag}"]),
        Reply::Array(vec![Reply::Null, Reply::Null])
    );
    assert_eq!(reader.cmd(&["MULTI"]), ok());
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]),
        ok()
    );
    // The cron is paused: the limit applies before the next command.
    reader.send(&["PING"]);
    let Reply::Push(parts) = reader.read() else {
        panic!("an invalidation push before QUEUED");
    };
    assert!(
        parts == invalidate(&["1{tag}"]).as_array() || parts == invalidate(&["2{tag}"]).as_array(),
        "{parts:?}"
    );
    assert_eq!(reader.read(), Reply::Simple("QUEUED".into()));
    assert_eq!(
        reader.cmd(&["EXEC"]),
        Reply::Array(vec![Reply::Simple("PONG".into())])
    );
    assert_eq!(admin.cmd(&["DEBUG", "PAUSE-CRON", "0"]), ok());
    assert_eq!(
        admin.cmd(&["DEBUG", "PAUSE-CRON", "x"]),
        e("ERR value is not an integer or out of range")
    );
}

/// Any connected RESP3 client can receive redirected invalidations, also
/// one that neither tracks nor subscribes, and also while its replies are
/// off (CLIENT REPLY OFF silences replies, not pushes), as in Redis; once
/// it is gone the tracking client hears `tracking-redir-broken`.
#[test]
fn a_plain_resp3_client_receives_redirected_invalidations() {
    let server = TestServer::start();
    let mut target = resp3(&server);
    let target_id = target.cmd(&["CLIENT", "ID"]).as_int().to_string();
    let mut reader = resp3(&server);
    let mut writer = server.raw();
    assert_eq!(
        reader.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &target_id]),
        ok()
    );
    assert_eq!(writer.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(reader.cmd(&["GET", "k"]), b("1"));
    target.send(&["CLIENT", "REPLY", "OFF"]);
    assert_eq!(writer.cmd(&["SET", "k", "2"]), ok());
    assert_eq!(target.read(), invalidate(&["k"]));
    // Nothing else was sent meanwhile: the next reply is CLIENT REPLY ON's.
    assert_eq!(target.cmd(&["CLIENT", "REPLY", "ON"]), ok());
    assert_eq!(target.cmd(&["PING"]), Reply::Simple("PONG".into()));
    drop(target);
    assert_eq!(reader.cmd(&["GET", "k"]), b("2"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The target's connection ends a moment after its socket closes.
        assert_eq!(writer.cmd(&["SET", "k", "3"]), ok());
        reader.send(&["GET", "k"]);
        match reader.read() {
            Reply::Push(parts) => {
                assert_eq!(
                    parts,
                    vec![b("tracking-redir-broken"), i(target_id.parse().unwrap())]
                );
                break;
            }
            reply => assert_eq!(reply, b("3")),
        }
        assert!(Instant::now() < deadline, "no tracking-redir-broken");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// FLUSHALL empties the table of remembered keys (with every shard
/// locked, so no read is forgotten unannounced): every tracking client
/// hears a null invalidation, and a key read after the flush is tracked
/// again. FLUSHDB keeps the table, as in Redis.
#[test]
fn flushall_empties_the_tracking_table() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut writer = server.raw();
    assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    assert_eq!(
        reader.cmd(&["MGET", "a", "b"]),
        Reply::Array(vec![Reply::Null, Reply::Null])
    );
    let total = |con: &mut Raw| {
        info_field(
            &con.cmd(&["INFO", "stats"]).as_text(),
            "tracking_total_keys",
        )
    };
    assert_eq!(total(&mut writer), "2");
    assert_eq!(writer.cmd(&["FLUSHDB"]), ok());
    assert_eq!(
        reader.read(),
        Reply::Push(vec![b("invalidate"), Reply::Null])
    );
    assert_eq!(total(&mut writer), "2");
    assert_eq!(writer.cmd(&["FLUSHALL", "ASYNC"]), ok());
    assert_eq!(total(&mut writer), "0");
    assert_eq!(
        reader.read(),
        Reply::Push(vec![b("invalidate"), Reply::Null])
    );
    assert_eq!(reader.cmd(&["GET", "a"]), Reply::Null);
    assert_eq!(writer.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(reader.read(), invalidate(&["a"]));
}

/// A key evicted to make room for a command is invalidated before that
/// command's reply, as Redis evicts before it runs a command (Redis'
/// "Tracking invalidation message of eviction keys should be before
/// response"); and a script tracks the keys its read-only commands read,
/// not the keys it declares (Redis 7.4).
#[test]
fn evictions_are_invalidated_before_the_reply_and_scripts_track_what_they_read() {
    let server = TestServer::start();
    let mut r = resp3(&server);
    let mut writer = server.raw();
    assert_eq!(r.cmd(&["CLIENT", "TRACKING", "ON"]), ok());
    // The first write sets the log's buffers up (about 1 MB): before the
    // budget is measured.
    assert_eq!(writer.cmd(&["SET", "warm", "1"]), ok());
    let info = r.cmd(&["INFO", "memory"]).as_text();
    let field = |name: &str| -> u64 {
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("{name}:")))
            .unwrap();
        line.split_once(':').unwrap().1.trim().parse().unwrap()
    };
    let used = field("used_memory") - field("mem_not_counted_for_evict");
    let limit = (used + 1024 * 1024).to_string();
    assert_eq!(
        writer.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]),
        ok()
    );
    assert_eq!(writer.cmd(&["CONFIG", "SET", "maxmemory", &limit]), ok());
    assert_eq!(r.cmd(&["SETEX", "volatile-key", "10000", "x"]), ok());
    assert_eq!(r.cmd(&["GET", "volatile-key"]), b("x"));
    // 2 MB over a budget 1 MB away: the next command evicts first.
    assert_eq!(r.cmd(&["SETBIT", "big-key", "16000000", "0"]), i(0));
    r.send(&["GETBIT", "big-key", "0"]);
    assert_eq!(r.read(), invalidate(&["volatile-key"]));
    assert_eq!(r.read(), i(0));
    // Told once: the change feed, which also sees the eviction, finds
    // nobody left to tell (it told a second time once, Redis' test saw it).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(r.cmd(&["PING"]), Reply::simple("PONG"));
    assert_eq!(writer.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());

    // A script that only writes tracks nothing; one that reads tracks
    // what it read.
    assert_eq!(writer.cmd(&["MSET", "k1", "1", "k2", "1"]), ok());
    let write = "redis.call('set', 'k3', 'bar')";
    assert_eq!(r.cmd(&["EVAL", write, "2", "k1", "k2"]), Reply::Null);
    assert_eq!(writer.cmd(&["MSET", "k1", "2", "k2", "2"]), ok());
    assert_eq!(r.cmd(&["PING"]), Reply::simple("PONG"));
    let read = "redis.call('get', 'k2')";
    assert_eq!(r.cmd(&["EVAL", read, "2", "k1", "k2"]), Reply::Null);
    assert_eq!(writer.cmd(&["MSET", "k1", "3", "k2", "3"]), ok());
    assert_eq!(r.read(), invalidate(&["k2"]));
    assert_eq!(r.cmd(&["PING"]), Reply::simple("PONG"));
}

/// A redirect target that QUITs is gone for the tracking client as soon
/// as QUIT is answered: the next invalidation is `tracking-redir-broken`,
/// never lost on the closing connection (Redis 7.4.1's "RESP3 based
/// basic tracking-redir-broken with client reply off" hung on that once
/// under load). Fifty rounds, each with a new target.
#[test]
fn a_target_that_quits_is_broken_at_once() {
    let server = TestServer::start();
    let mut reader = resp3(&server);
    let mut writer = server.raw();
    for round in 0..50 {
        let mut target = resp3(&server);
        let target_id = target.cmd(&["CLIENT", "ID"]).as_int();
        assert_eq!(
            reader.cmd(&[
                "CLIENT",
                "TRACKING",
                "ON",
                "REDIRECT",
                &target_id.to_string()
            ]),
            ok()
        );
        assert_eq!(writer.cmd(&["SET", "k", "1"]), ok());
        assert_eq!(reader.cmd(&["GET", "k"]), b("1"));
        assert_eq!(target.cmd(&["QUIT"]), ok());
        assert_eq!(writer.cmd(&["SET", "k", "2"]), ok());
        assert_eq!(
            reader.read(),
            Reply::Push(vec![b("tracking-redir-broken"), i(target_id)]),
            "round {round}"
        );
        assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "OFF"]), ok());
    }
}
