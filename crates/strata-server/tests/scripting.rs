//! Lua scripts against the real server: conversions and errors as Redis
//! answers them, EVALSHA and the script cache, read-only scripts, the
//! sandbox, cjson and bit, atomic transfers between keys on different
//! shards from several threads while an observer checks the invariant,
//! keys a script did not declare, a looping script answered with -BUSY
//! and SCRIPT KILL, a large script cut by `kill -9` coming back whole
//! or not at all, and the VMs' memory given back after SCRIPT FLUSH and
//! replaced libraries (`used_memory_lua`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use redis::Commands;

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn conversions_errors_and_the_script_cache() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["EVAL", "return 1", "0"]), i(1));
    assert_eq!(
        raw.cmd(&["EVAL", "return {1, 'two', {3}, false, 'not reached'}", "0"]),
        Reply::Array(vec![
            i(1),
            b("two"),
            Reply::Array(vec![i(3)]),
            Reply::NullBulk,
            b("not reached")
        ])
    );
    assert_eq!(raw.cmd(&["EVAL", "return 3.99", "0"]), i(3));
    // Number arguments of redis.call are written with all their
    // precision, as Redis 7.4 writes them (not Lua's `%.14g`; the texts
    // are redis-server 7.4.1's).
    for (number, text) in [
        ("0.1 + 0.2", "0.30000000000000004"),
        ("9007199254740991", "9007199254740991"),
        ("1e17", "100000000000000000"),
        ("1e19", "1e+19"),
        ("1/3", "0.3333333333333333"),
        ("1e-7", "1e-7"),
        ("-0.0", "0"),
    ] {
        let script =
            format!("redis.call('SET', KEYS[1], {number}) return redis.call('GET', KEYS[1])");
        assert_eq!(raw.cmd(&["EVAL", &script, "1", "n"]), b(text), "{number}");
    }
    assert_eq!(
        raw.cmd(&["EVAL", "return {ok='FINE'}", "0"]),
        Reply::simple("FINE")
    );
    assert_eq!(
        raw.cmd(&["EVAL", "return redis.error_reply('MY fault')", "0"]),
        e("MY fault")
    );
    assert_eq!(
        raw.cmd(&[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
            "1",
            "k",
            "v"
        ]),
        b("v")
    );
    // Replies become Lua values: status and error tables, false for nil.
    assert_eq!(
        raw.cmd(&[
            "EVAL",
            "return {redis.call('PING')['ok'], redis.call('GET', 'none') == false}",
            "0"
        ]),
        Reply::Array(vec![b("PONG"), i(1)])
    );
    assert_eq!(
        raw.cmd(&["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "k"]),
        e("ERR value is not an integer or out of range")
    );
    let failed = raw
        .cmd(&["EVAL", "redis.call('INCR', KEYS[1])", "1", "k"])
        .as_text();
    assert!(
        failed.starts_with("ERR value is not an integer or out of range script: ")
            && failed.ends_with(", on @user_script:1."),
        "{failed}"
    );
    assert!(
        raw.cmd(&["EVAL", "return redis.call('NOSUCH')", "0"])
            .as_text()
            .starts_with("ERR Unknown Redis command called from script")
    );
    assert_eq!(
        raw.cmd(&["EVAL", "return 1", "2", "a"]),
        e("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        raw.cmd(&["EVAL", "return 1", "-1"]),
        e("ERR Number of keys can't be negative")
    );
    // The sandbox.
    for (script, needle) in [
        ("x = 1", "Attempt to modify a readonly table"),
        (
            "return redis.call('cluster', 'reset', 'hard')",
            "This Redis command is not allowed from script",
        ),
        (
            "return redis.call('cluster', 'info')",
            "This instance has cluster support disabled",
        ),
        ("redis.call = nil", "Attempt to modify a readonly table"),
        ("cjson.encode = nil", "Attempt to modify a readonly table"),
        ("setmetatable(_G, {})", "Attempt to modify a readonly table"),
        (
            "getmetatable(_G).__index = {}",
            "Attempt to modify a readonly table",
        ),
        (
            "return undefined_thing",
            "Script attempted to access nonexistent global variable 'undefined_thing'",
        ),
        // Redis 7.4: `os` holds `clock` alone.
        (
            "return os.time()",
            "attempt to call field 'time' (a nil value)",
        ),
        (
            "return io.open('/etc/passwd')",
            "nonexistent global variable 'io'",
        ),
        (
            "return loadfile('/etc/passwd')",
            "nonexistent global variable 'loadfile'",
        ),
    ] {
        let reply = raw.cmd(&["EVAL", script, "0"]).as_text();
        assert!(reply.contains(needle), "{script}: {reply}");
    }
    // Libraries.
    assert_eq!(
        raw.cmd(&[
            "EVAL",
            "return cjson.encode(cjson.decode(ARGV[1]))",
            "0",
            "[1,\"a\",{\"k\":true}]"
        ]),
        b("[1,\"a\",{\"k\":true}]")
    );
    assert_eq!(raw.cmd(&["EVAL", "return bit.bxor(5, 3)", "0"]), i(6));
    assert_eq!(
        raw.cmd(&["EVAL", "return bit.tohex(255, 4)", "0"]),
        b("00ff")
    );
    assert_eq!(
        raw.cmd(&["EVAL", "return redis.sha1hex('')", "0"]),
        b("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    // The cache.
    let sha = raw
        .cmd(&["SCRIPT", "LOAD", "return ARGV[1] .. '!'"])
        .as_text();
    assert_eq!(raw.cmd(&["EVALSHA", &sha, "0", "hi"]), b("hi!"));
    assert_eq!(
        raw.cmd(&["EVALSHA", &sha.to_uppercase(), "0", "yo"]),
        b("yo!")
    );
    assert_eq!(
        raw.cmd(&["SCRIPT", "EXISTS", &sha, "0000"]),
        Reply::Array(vec![i(1), i(0)])
    );
    assert!(
        raw.cmd(&["SCRIPT", "LOAD", "return ("])
            .as_text()
            .starts_with("ERR Error compiling script")
    );
    assert_eq!(raw.cmd(&["SCRIPT", "FLUSH"]), ok());
    assert_eq!(
        raw.cmd(&["EVALSHA", &sha, "0"]),
        e("NOSCRIPT No matching script. Please use EVAL.")
    );
    // Read-only scripts.
    assert!(
        raw.cmd(&[
            "EVAL_RO",
            "return redis.call('SET', KEYS[1], 'x')",
            "1",
            "k"
        ])
        .as_text()
        .starts_with("ERR Write commands are not allowed from read-only scripts.")
    );
    assert!(
        raw.cmd(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')",
            "1",
            "k"
        ])
        .as_text()
        .starts_with("ERR Write commands are not allowed from read-only scripts.")
    );
    assert_eq!(
        raw.cmd(&["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "k"]),
        b("v")
    );
    // SELECT inside a script does not change the caller's database.
    assert_eq!(
        raw.cmd(&["EVAL", "redis.call('SELECT', 9); return 1", "0"]),
        i(1)
    );
    assert_eq!(raw.cmd(&["GET", "k"]), b("v"));
}

/// Transfers between keys on different shards from several threads, in
/// scripts; an observer reading both keys at once never sees money
/// created or lost. Undeclared keys work too.
#[test]
fn scripts_are_atomic_across_shards_and_threads() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 300;
    const TRANSFER: &str = "local from = tonumber(redis.call('GET', KEYS[1])) \
        redis.call('SET', KEYS[1], from - ARGV[1]) \
        redis.call('INCRBY', KEYS[2], ARGV[1]) \
        redis.call('INCR', 'undeclared:count') \
        return from";
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.mset(&[("acct:x", 10_000), ("acct:y", 10_000)]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let mut con = server.client();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let (x, y): (i64, i64) = con.mget(&["acct:x", "acct:y"]).unwrap();
                assert_eq!(x + y, 20_000, "a transfer was seen half done");
                reads += 1;
            }
            reads
        })
    };
    let script = redis::Script::new(TRANSFER);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let mut con = server.client();
            let script = script.clone();
            std::thread::spawn(move || {
                for n in 0..PER_THREAD {
                    let (from, to) = if (n + t) % 2 == 0 {
                        ("acct:x", "acct:y")
                    } else {
                        ("acct:y", "acct:x")
                    };
                    let _: i64 = script.key(from).key(to).arg(3).invoke(&mut con).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(observer.join().unwrap() > 0);
    let count: usize = con.get("undeclared:count").unwrap();
    assert_eq!(count, THREADS * PER_THREAD);
    let (x, y): (i64, i64) = con.mget(&["acct:x", "acct:y"]).unwrap();
    assert_eq!(x + y, 20_000);
}

/// INFO runs inside a script, as in Redis: on the script's lock set once
/// every shard is in it, so it sees the script's own writes (keyspace
/// counts) and never waits for a shard the script holds, while scripts
/// and writers on other threads go on. INFO in MULTI still answers.
/// With `min-replicas-to-write` unmet, a script or function that may
/// write is refused at once (NOREPLICAS), and a write inside a script
/// without flags is refused; reads run (Redis 7.4's "not enough good
/// replicas"). Strata ran them all.
#[test]
fn scripts_that_may_write_need_good_replicas() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let library = "#!lua name=lib\n\
        redis.register_function('w', function(keys) return redis.call('set', keys[1], 1) end)\n\
        redis.register_function{function_name='r', callback=function(keys) \
            return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    // (FUNCTION LOAD is a write: loaded while writes are allowed.)
    assert_eq!(raw.cmd(&["FUNCTION", "LOAD", library]), b("lib"));
    assert_eq!(raw.cmd(&["SET", "x", "some value"]), ok());
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
        ok()
    );
    let refused = e("NOREPLICAS Not enough good replicas to write.");
    let read = "return redis.call('get','x')";
    let no_writes = format!("#!lua flags=no-writes\n{read}");
    assert_eq!(raw.cmd(&["EVAL", &no_writes, "1", "x"]), b("some value"));
    assert_eq!(raw.cmd(&["EVAL", read, "1", "x"]), b("some value"));
    let declared = format!("#!lua\n{read}");
    assert_eq!(raw.cmd(&["EVAL", &declared, "1", "x"]), refused);
    // Inside the script, with where it was raised, as Redis words it.
    let write = "return redis.call('set','x', 1)";
    let inside = raw.cmd(&["EVAL", write, "1", "x"]).as_text();
    assert!(
        inside.starts_with("NOREPLICAS Not enough good replicas to write. script: "),
        "{inside}"
    );
    assert_eq!(raw.cmd(&["FCALL", "w", "1", "x"]), refused);
    assert_eq!(raw.cmd(&["FCALL", "r", "1", "x"]), b("some value"));
    assert_eq!(raw.cmd(&["SET", "x", "1"]), refused);
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]),
        ok()
    );
    assert_eq!(raw.cmd(&["EVAL", &declared, "1", "x"]), b("some value"));
}

/// `redis.REDIS_VERSION` is the version INFO reports, and
/// `redis.REDIS_VERSION_NUM` the same as 0x00MMmmpp (it said 7.0.15 while
/// INFO said 7.2.4).
#[test]
fn scripts_see_the_version_info_reports() {
    let server = TestServer::start();
    let mut con = server.client();
    let (text, num): (String, i64) =
        redis::Script::new("return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}")
            .invoke(&mut con)
            .unwrap();
    let info: String = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    let reported = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap();
    assert_eq!(text, reported);
    let parts: Vec<i64> = text.split('.').map(|p| p.parse().unwrap()).collect();
    assert_eq!(num, parts[0] << 16 | parts[1] << 8 | parts[2]);
}

#[test]
fn info_runs_inside_scripts() {
    const SCRIPT: &str = "redis.call('SET', KEYS[1], 'v') \
        redis.call('SET', 'undeclared:' .. ARGV[1], 'w') \
        local info = redis.call('INFO', 'keyspace', 'memory', 'stats', 'tiering') \
        return {string.match(info, 'db0:keys=(%d+)'), \
            string.match(info, 'used_memory:(%d+)') ~= nil and 1 or 0}";
    let server = TestServer::start();
    let mut con = server.client();
    let (keys, memory): (String, i64) = redis::Script::new(SCRIPT)
        .key("k:1")
        .arg("a")
        .invoke(&mut con)
        .unwrap();
    assert_eq!((keys.as_str(), memory), ("2", 1));
    // With writers on other threads, and scripts racing each other. A
    // script that needed every shard once takes them all from its next
    // run on (its first run on each network thread escalates: warmed up
    // here on each connection).
    let script_cons: Vec<_> = (0..2)
        .map(|t| {
            let mut con = server.client();
            let _: (String, i64) = redis::Script::new(SCRIPT)
                .key(format!("warm:{t}"))
                .arg(format!("warm:{t}"))
                .invoke(&mut con)
                .unwrap();
            con
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let mut con = server.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let _: () = con.set(format!("w:{t}:{}", n % 50), n).unwrap();
                    n += 1;
                }
            })
        })
        .collect();
    let scripts: Vec<_> = script_cons
        .into_iter()
        .enumerate()
        .map(|(t, mut con)| {
            std::thread::spawn(move || {
                for n in 0..100 {
                    let (keys, _): (String, i64) = redis::Script::new(SCRIPT)
                        .key(format!("s:{t}:{n}"))
                        .arg(format!("{t}:{n}"))
                        .invoke(&mut con)
                        .unwrap();
                    assert!(keys.parse::<u64>().unwrap() >= 2, "{keys}");
                }
            })
        })
        .collect();
    for script in scripts {
        script.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    // A read-only script may call INFO too.
    let info: String = redis::cmd("EVAL_RO")
        .arg("return redis.call('INFO', 'server')")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert!(info.contains("redis_version:"), "{info}");
    // In MULTI, INFO answers in its place.
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SET", "m", "1"]), Reply::simple("QUEUED"));
    assert_eq!(raw.cmd(&["INFO", "keyspace"]), Reply::simple("QUEUED"));
    let Reply::Array(replies) = raw.cmd(&["EXEC"]) else {
        panic!("EXEC answers an array");
    };
    assert_eq!(replies[0], ok());
    assert!(
        replies[1].as_text().contains("db0:keys="),
        "{:?}",
        replies[1]
    );
}

/// `redis.call`'s arguments are read off the Lua stack: no argument, or
/// one that is neither a string nor a number, is refused with Redis'
/// error (raised by `redis.call`, returned by `redis.pcall`), and nothing
/// runs; a result 100 tables deep comes back whole (as from Redis), one
/// far deeper answers Redis' stack-limit error.
#[test]
fn redis_call_refuses_bad_arguments() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let error_of = |reply: Reply| match reply {
        Reply::Error(text) => text,
        other => panic!("an error, not {other:?}"),
    };
    let text = error_of(raw.cmd(&["EVAL", "return redis.call()", "0"]));
    assert!(
        text.starts_with(
            "ERR Please specify at least one argument for this redis lib call script: "
        ),
        "{text}"
    );
    assert!(text.ends_with(", on @user_script:1."), "{text}");
    for bad in ["{}", "true", "nil"] {
        let script = format!("return redis.call('SET', 'k', {bad})");
        let text = error_of(raw.cmd(&["EVAL", &script, "0"]));
        assert!(
            text.starts_with("ERR Lua redis lib command arguments must be strings or integers"),
            "{bad}: {text}"
        );
    }
    assert_eq!(raw.cmd(&["EXISTS", "k"]), i(0));
    // redis.pcall hands the error table back instead.
    assert_eq!(
        raw.cmd(&["EVAL", "return redis.pcall('SET', 'k', {}).err", "0"]),
        b("ERR Lua redis lib command arguments must be strings or integers")
    );
    // A result 100 tables deep comes back whole, as Redis 7 returns it;
    // one 5 000 deep stops at the limit with Redis' error.
    let deep = |levels: usize| {
        format!(
            "local t = {{}} local cur = t for i = 1, {levels} do cur[1] = {{}} cur = cur[1] end return t"
        )
    };
    let mut reply = raw.cmd(&["EVAL", &deep(100), "0"]);
    let mut depth = 0;
    while let Reply::Array(mut items) = reply {
        depth += 1;
        if items.is_empty() {
            break;
        }
        reply = items.remove(0);
    }
    assert_eq!(depth, 101);
    let mut reply = raw.cmd(&["EVAL", &deep(5000), "0"]);
    while let Reply::Array(mut items) = reply {
        reply = items.remove(0);
    }
    assert_eq!(reply, e("ERR reached lua stack limit"));
}

#[test]
fn a_looping_script_makes_others_busy_until_killed() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        ok()
    );
    let mut looping = server.raw();
    looping.send(&["EVAL", "local i = 0 while true do i = i + 1 end", "0"]);
    wait_until("the script to be reported busy", || {
        std::thread::sleep(Duration::from_millis(20));
        matches!(con.cmd(&["GET", "k"]), Reply::Error(ref text) if text.starts_with("BUSY "))
    });
    assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok());
    let reply = looping.read().as_text();
    assert!(
        reply.contains("Script killed by user with SCRIPT KILL"),
        "{reply}"
    );
    assert_eq!(con.cmd(&["GET", "k"]), Reply::NullBulk);
    assert_eq!(
        con.cmd(&["SCRIPT", "KILL"]),
        e("NOTBUSY No scripts in execution right now.")
    );
    // A script that has written cannot be killed.
    looping.send(&[
        "EVAL",
        "redis.call('SET', KEYS[1], 1) while true do end",
        "1",
        "w",
    ]);
    wait_until("the writing script to be reported busy", || {
        std::thread::sleep(Duration::from_millis(20));
        matches!(con.cmd(&["PING"]), Reply::Error(ref text) if text.starts_with("BUSY "))
    });
    assert!(
        con.cmd(&["SCRIPT", "KILL"])
            .as_text()
            .starts_with("UNKILLABLE")
    );
    // The server is killed with it (the test server's drop).
}

/// A script writing many large values cut by `kill -9` while its group is
/// being written is whole or absent after the restart; some round must
/// really cut the commit on disk (strata-check sees a torn tail).
#[test]
fn a_script_cut_by_kill_9_is_whole_or_absent() {
    const KEYS: usize = 400;
    const ROUNDS: usize = 8;
    let mut cuts = 0;
    for round in 0..ROUNDS {
        let server = TestServer::start();
        let mut raw = server.raw();
        let before = newest_segment_bytes(&server.dir);
        raw.send(&[
            "EVAL",
            "for n = 1, tonumber(ARGV[1]) do redis.call('SET', 's' .. n, string.rep('v', 20000)) end return 1",
            "0",
            &KEYS.to_string(),
        ]);
        let dir = kill9_while_the_log_grows(server, before, 1 << 20);
        cuts += has_torn_tail(&dir) as usize;
        let server = TestServer::spawn(dir, &[], None, READY);
        let mut con = server.client();
        let present: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert!(
            present == 0 || present == KEYS,
            "round {round}: {present} keys"
        );
    }
    assert!(cuts > 0, "no round cut a commit in {ROUNDS}");
}

/// SIGTERM while a script loops: the script, which wrote nothing, is
/// stopped, and the server saves and exits cleanly instead of waiting
/// for it forever.
#[test]
fn sigterm_stops_a_looping_script_and_exits_cleanly() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
        ok()
    );
    let mut looping = server.raw();
    // It holds its key's shard, which the final checkpoint needs.
    looping.send(&[
        "EVAL",
        "redis.call('GET', KEYS[1]) while true do end",
        "1",
        "k",
    ]);
    wait_until("the script to be reported busy", || {
        std::thread::sleep(Duration::from_millis(20));
        matches!(con.cmd(&["PING"]), Reply::Error(ref text) if text.starts_with("BUSY "))
    });
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
    server.exited();
}

/// While a script keeps its network thread busy, clients that connect are
/// given to the other threads: each is answered (-BUSY, and SCRIPT KILL
/// works) instead of waiting behind the script.
#[test]
fn new_clients_avoid_the_thread_of_a_busy_script() {
    use std::io::{Read, Write};
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut con = server.raw();
    let mut looping = start_busy_script(&server, &mut con, "while true do end");
    for n in 0..4 {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut reply = [0u8; 128];
        let read = stream.read(&mut reply).unwrap_or(0);
        let text = String::from_utf8_lossy(&reply[..read]);
        assert!(text.starts_with("-BUSY "), "client {n} got {text:?}");
    }
    let mut operator = server.raw();
    assert_eq!(operator.cmd(&["SCRIPT", "KILL"]), ok());
    assert!(looping.read().as_text().contains("Script killed"));
}

/// The clients already connected to the thread that runs a busy script
/// are answered too (here one network thread holds them all): `-BUSY`
/// for each request of a pipeline, also one that arrives in pieces;
/// SCRIPT KILL from one of them stops the script; MULTI, which must run
/// on its connection, waits for the script's end and is then answered in
/// order. Before `crate::busy`, all of them waited until the script ended.
#[test]
fn clients_on_the_busy_scripts_thread_are_answered() {
    let server = TestServer::start_with(&["--threads", "1"]);
    let mut con = server.raw();
    let mut transaction = server.raw();
    let mut pipelined = server.raw();
    assert_eq!(transaction.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(pipelined.cmd(&["PING"]), Reply::simple("PONG"));
    let mut looping = start_busy_script(&server, &mut con, "while true do end");
    pipelined.send_raw(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPI");
    std::thread::sleep(Duration::from_millis(30));
    pipelined.send_raw(b"NG\r\n");
    for _ in 0..2 {
        assert!(matches!(pipelined.read(), Reply::Error(ref text) if text.starts_with("BUSY ")));
    }
    // WATCH needs the session: it and what follows wait for the script.
    // (MULTI is answered during the script, as Redis answers it: see
    // `transactions_during_a_busy_script`.)
    transaction.send(&["WATCH", "k"]);
    transaction.send(&["GET", "k"]);
    let patience = Some(Duration::from_millis(200));
    transaction.stream.set_read_timeout(patience).unwrap();
    assert_eq!(transaction.try_read(), None, "WATCH waits for the script");
    transaction.stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok());
    assert!(looping.read().as_text().contains("Script killed"));
    assert_eq!(transaction.read(), ok());
    assert_eq!(transaction.read(), b("v"));
    assert_eq!(transaction.cmd(&["MULTI"]), ok());
    assert_eq!(transaction.cmd(&["GET", "k"]), Reply::simple("QUEUED"));
    assert_eq!(transaction.cmd(&["EXEC"]), Reply::Array(vec![b("v")]));
    assert_eq!(pipelined.cmd(&["GET", "k"]), b("v"));
    assert_eq!(
        con.cmd(&["SCRIPT", "KILL"]),
        e("NOTBUSY No scripts in execution right now.")
    );
}

/// SCRIPT KILL stops a script that catches errors with pcall or xpcall
/// around its loop: the stop is raised again past them (Redis raises it
/// at every line). Without that, the script went on forever.
#[test]
fn pcall_does_not_catch_script_kill() {
    let server = TestServer::start();
    let mut con = server.raw();
    for catcher in ["pcall(f)", "xpcall(f, function(e) return e end)"] {
        let body = format!(
            "local f = function() while 1 do redis.call('ping') end end while 1 do {catcher} end"
        );
        let mut looping = start_busy_script(&server, &mut con, &body);
        assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok());
        let reply = looping.read().as_text();
        assert!(reply.contains("killed by user"), "{catcher}: {reply}");
        assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
    }
    // Outside a stop, pcall still catches.
    let caught = con.cmd(&["EVAL", "return tostring(pcall(error, 'x'))", "0"]);
    assert_eq!(caught, b("false"));
}

/// The libraries scripts use (cjson, cmsgpack, struct, bit) give the same
/// bytes as redis-server's: each script runs on both and the replies are
/// compared.
#[test]
fn lua_libraries_match_redis() {
    let Some(redis_server) = RedisServer::start_unless_missing("the Lua library comparison") else {
        return;
    };
    let server = TestServer::start();
    let mut strata = server.raw();
    let mut redis = Raw::connect(redis_server.port);
    let hex = "local h = '' for i = 1, #s do h = h .. string.format('%02x', string.byte(s, i)) end return h";
    let scripts: Vec<String> = [
        "local s = cmsgpack.pack(0.1, -1099511627776, 1.5, 2^40, -33, 300, 70000, 'x', true, false, nil)",
        "local s = cmsgpack.pack({1, 2, 3}, {a = 1}, {}, string.rep('y', 40), string.rep('z', 300))",
        "local a = {x = nil, y = 5} local b = {x = a} a.x = b local s = cmsgpack.pack(a)",
        "local s = struct.pack('>i4<hBbl!4d', 1, -2, 255, -1, 1234567890123, 2.5)",
        "local s = struct.pack('s c3 x f', 'abc', 'defg', 1.25)",
        "local s = cjson.encode({1, 2, 'three', {a = {b = 'c/d'}}, 1.5, 0.1, 1e20})",
        "local s = cjson.encode({['k\\n'] = 'v\\t\\1', [5] = false})",
    ]
    .iter()
    .map(|body| format!("{body} {hex}"))
    .collect();
    let mut all: Vec<&str> = scripts.iter().map(String::as_str).collect();
    all.extend([
        "return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}))}",
        "local t = cmsgpack.unpack(cmsgpack.pack({a = 1, b = {c = 'd'}})) return {t.a, t.b.c}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(7, 8), 0)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(7, 8, 9), 2, 1)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(7, 8, 9), 0, 0)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(7, 8, 9), 0, 1)}",
        "return {struct.unpack('>i4<hBbl', struct.pack('>i4<hBbl', 1, -2, 255, -1, 1234567890123))}",
        "return {struct.unpack('i2 c0 s', struct.pack('i2 c0 s', 3, 'abc', 'tail'))}",
        "return struct.size('>i4!8dbc10')",
        "return {bit.band(0xff, 0x0f), bit.bor(1, 2, 4), bit.lshift(1, 31), bit.tohex(-1, -4), bit.rol(1, 33), bit.bswap(0x12345678)}",
        "return cjson.decode('[1, 2.5, \"x\", {\"a\": [true, false]}]')[4].a[1]",
        "return pcall(cjson.encode, {[1] = 1, [20] = 2})",
        "return pcall(cmsgpack.unpack, '\\218\\0')",
    ]);
    let mut differences = Vec::new();
    for script in all {
        let ours = strata.cmd(&["EVAL", script, "0"]);
        let theirs = redis.cmd(&["EVAL", script, "0"]);
        if ours != theirs {
            differences.push(format!(
                "{script}\n  redis:  {theirs:?}\n  strata: {ours:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// SHUTDOWN NOSAVE is the way out of a busy script that has written, also
/// for a client on the script's own network thread (`--threads 1`, served
/// by `crate::busy`): it used to wait there behind the endless script.
/// The script's writes are not kept; writes acknowledged before it are.
#[test]
fn shutdown_nosave_from_the_busy_scripts_thread_stops_the_server() {
    let args = ["--threads", "1", "--appendonly", "yes"];
    let server = TestServer::start_with(&args);
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SET", "before", "1"]), ok());
    let _looping = start_busy_script(
        &server,
        &mut con,
        "redis.call('SET', 'k', 'v') while true do end",
    );
    assert!(
        con.cmd(&["SCRIPT", "KILL"])
            .as_text()
            .starts_with("UNKILLABLE ")
    );
    con.send(&["SHUTDOWN", "NOSAVE"]);
    // The script's thread exits the process at once (status 1), unless
    // the main thread's shutdown, which does not wait for it, ends first
    // (status 0).
    let (status, dir) = server.exited_with_status();
    assert!(matches!(status.code(), Some(0 | 1)), "{status}");
    let restarted = TestServer::spawn(dir, &args, None, common::READY);
    let mut con = restarted.raw();
    assert_eq!(con.cmd(&["GET", "before"]), b("1"));
    assert_eq!(con.cmd(&["GET", "k"]), Reply::NullBulk);
}

/// DEBUG PROTOCOL's replies of each type, in RESP2 and RESP3, and as
/// scripts see them (under DEBUG SET-DISABLE-DENY-SCRIPTS 1, which lets
/// scripts call `noscript` commands but never script commands); the
/// `big_number` and `verbatim_string` tables scripts return.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn debug_protocol_and_deny_scripts_switch() {
    let server = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut con = server.raw();
    let mut resp3 = server.raw();
    assert!(matches!(resp3.cmd(&["HELLO", "3"]), Reply::Map(_)));
    let debug = |con: &mut Raw, name: &str| con.cmd(&["DEBUG", "PROTOCOL", name]);
    assert_eq!(
        debug(&mut con, "bignum"),
        b("1234567999999999999999999999999999999")
    );
    assert_eq!(
        debug(&mut resp3, "bignum"),
        Reply::BigNumber("1234567999999999999999999999999999999".into())
    );
    assert_eq!(debug(&mut con, "double"), b("3.141"));
    assert_eq!(debug(&mut resp3, "double"), Reply::Double("3.141".into()));
    assert_eq!(debug(&mut con, "map").as_array().len(), 6);
    assert!(
        matches!(debug(&mut resp3, "map"), Reply::Map(ref pairs) if pairs[1].1 == Reply::Bool(true))
    );
    assert_eq!(debug(&mut resp3, "set"), Reply::Set(vec![i(0), i(1), i(2)]));
    assert_eq!(debug(&mut con, "null"), Reply::NullBulk);
    assert_eq!(debug(&mut resp3, "null"), Reply::Null);
    assert_eq!(debug(&mut con, "true"), i(1));
    assert_eq!(debug(&mut resp3, "false"), Reply::Bool(false));
    assert_eq!(
        debug(&mut resp3, "verbatim"),
        Reply::Verbatim("txt".into(), b"This is a verbatim\nstring".to_vec())
    );
    assert_eq!(
        debug(&mut resp3, "attrib"),
        b("Some real reply following the attribute")
    );
    assert_eq!(
        debug(&mut con, "push"),
        e("ERR RESP2 is not supported by this command")
    );
    assert_eq!(
        debug(&mut resp3, "push"),
        Reply::Push(vec![b("server-cpu-usage"), i(42)])
    );
    assert_eq!(resp3.read(), b("Some real reply following the push reply"));
    assert!(
        debug(&mut con, "nope")
            .as_text()
            .starts_with("ERR Wrong protocol type name.")
    );

    let from_script = |con: &mut Raw, body: &str| con.cmd(&["EVAL", body, "0"]);
    let call_debug = "return redis.call('debug', 'protocol', 'bignum')";
    assert!(
        from_script(&mut con, call_debug)
            .as_text()
            .contains("not allowed from script")
    );
    assert_eq!(con.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]), ok());
    assert_eq!(
        from_script(&mut con, call_debug),
        b("1234567999999999999999999999999999999")
    );
    assert_eq!(
        from_script(&mut resp3, &format!("redis.setresp(3) {call_debug}")),
        Reply::BigNumber("1234567999999999999999999999999999999".into())
    );
    assert_eq!(
        from_script(
            &mut resp3,
            "redis.setresp(3) return redis.call('debug', 'protocol', 'attrib')"
        ),
        b("Some real reply following the attribute")
    );
    assert!(
        from_script(&mut con, "return redis.call('client', 'list')")
            .as_text()
            .contains("id=")
    );
    for refused in [
        "return redis.call('eval', 'return 1', 0)",
        "return redis.call('debug', 'reload')",
    ] {
        assert!(
            from_script(&mut con, refused)
                .as_text()
                .contains("not allowed from script"),
            "{refused}"
        );
    }
    assert_eq!(con.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]), ok());
    assert!(
        from_script(&mut con, "return redis.call('client', 'list')")
            .as_text()
            .contains("not allowed from script")
    );

    assert_eq!(
        from_script(&mut con, "return {big_number='123\\r\\n123'}"),
        b("123  123")
    );
    assert_eq!(
        from_script(&mut resp3, "return {big_number='42'}"),
        Reply::BigNumber("42".into())
    );
    assert_eq!(
        from_script(
            &mut resp3,
            "return {verbatim_string={format='txt', string='hi'}}"
        ),
        Reply::Verbatim("txt".into(), b"hi".to_vec())
    );

    // DEBUG OBJECT shows a key past its deadline that nothing reclaimed
    // yet, as Redis' does; reading it expires it.
    assert_eq!(con.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    assert_eq!(con.cmd(&["SET", "short", "v", "PX", "1"]), ok());
    std::thread::sleep(Duration::from_millis(5));
    assert!(
        con.cmd(&["DEBUG", "OBJECT", "short"])
            .as_text()
            .starts_with("Value at:")
    );
    assert_eq!(con.cmd(&["EXISTS", "short"]), i(0));
}

/// A script's error reply is counted once in INFO errorstats, however it
/// came about (Redis 7's rules): returned by `redis.error_reply`, or a
/// command's error raised or returned (counted when the command failed),
/// or a command refused inside the script (the command's rejected call).
#[test]
fn script_errors_are_counted_once() {
    let server = TestServer::start();
    let mut con = server.raw();
    let errorstat = |con: &mut Raw, code: &str| {
        let info = con.cmd(&["INFO", "errorstats"]).as_text();
        info_field(&info, &format!("errorstat_{code}"))
    };
    let reset = |con: &mut Raw| assert_eq!(con.cmd(&["CONFIG", "RESETSTAT"]), ok());
    reset(&mut con);
    assert_eq!(
        con.cmd(&["EVAL", "return redis.error_reply('MY_CODE custom')", "0"]),
        e("MY_CODE custom")
    );
    assert_eq!(errorstat(&mut con, "MY_CODE"), "count=1");
    assert_eq!(
        con.cmd(&["EVAL", "return redis.error_reply('')", "0"]),
        e("ERR")
    );
    assert_eq!(errorstat(&mut con, "ERR"), "count=1");
    for body in [
        "return redis.pcall('select', 99)",
        "return redis.call('select', 99)",
    ] {
        reset(&mut con);
        let reply = con.cmd(&["EVAL", body, "0"]).as_text();
        assert!(reply.starts_with("ERR DB index is out of range"), "{reply}");
        assert_eq!(errorstat(&mut con, "ERR"), "count=1", "{body}");
        let stats = con.cmd(&["INFO", "commandstats"]).as_text();
        assert!(
            info_field(&stats, "cmdstat_eval").ends_with("failed_calls=1"),
            "{stats}"
        );
    }
    reset(&mut con);
    let reply = con.cmd(&["EVAL_RO", "return redis.call('set', 'x', 'y')", "1", "x"]);
    assert!(
        reply
            .as_text()
            .starts_with("ERR Write commands are not allowed from read-only scripts.")
    );
    assert_eq!(errorstat(&mut con, "ERR"), "count=1");
    let stats = con.cmd(&["INFO", "commandstats"]).as_text();
    let set = info_field(&stats, "cmdstat_set");
    assert!(
        set.starts_with("calls=0,") && set.contains("rejected_calls=1"),
        "{set}"
    );
}

/// Transactions during a busy script, as Redis answers them, on the
/// script's own network thread (`--threads 1`, served by `crate::busy`)
/// and across threads: MULTI is accepted, a command refused with -BUSY
/// fails the transaction, EXEC during the script answers EXECABORT and
/// ends it. On the script's thread a client sending MULTI used to wait
/// behind the endless script, and the SCRIPT KILL after it with it.
#[test]
fn transactions_during_a_busy_script() {
    for args in [&[][..], &["--threads", "1"][..]] {
        let server = TestServer::start_with(args);
        let mut con = server.raw();
        assert_eq!(con.cmd(&["SET", "xx", "1"]), ok());
        let mut begun_before = server.raw();
        assert_eq!(begun_before.cmd(&["MULTI"]), ok());
        assert_eq!(begun_before.cmd(&["INCR", "xx"]), Reply::simple("QUEUED"));
        // WATCHes, then MULTI; during the script its EXEC is refused
        // (which unwatches), then it begins another MULTI.
        let mut rewatched = server.raw();
        assert_eq!(rewatched.cmd(&["WATCH", "xx"]), ok());
        assert_eq!(rewatched.cmd(&["MULTI"]), ok());
        let mut begun_during = server.raw();
        let mut looping = start_busy_script(&server, &mut con, "while true do end");
        assert!(rewatched.cmd(&["EXEC"]).as_text().starts_with("EXECABORT "));
        assert_eq!(rewatched.cmd(&["MULTI"]), ok());
        assert_eq!(begun_during.cmd(&["MULTI"]), ok(), "{args:?}");
        assert!(
            begun_during
                .cmd(&["INCR", "xx"])
                .as_text()
                .starts_with("BUSY ")
        );
        let aborted = begun_before.cmd(&["EXEC"]).as_text();
        assert!(
            aborted.starts_with("EXECABORT Transaction discarded because of: BUSY "),
            "{args:?}: {aborted}"
        );
        assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok());
        assert!(looping.read().as_text().contains("Script killed"));
        assert_eq!(begun_during.cmd(&["INCR", "xx"]), Reply::simple("QUEUED"));
        assert_eq!(
            begun_during.cmd(&["EXEC"]),
            e("EXECABORT Transaction discarded because of previous errors.")
        );
        assert_eq!(con.cmd(&["GET", "xx"]), b("1"));
        // The refused EXEC ended the WATCH: a change now breaks nothing.
        assert_eq!(con.cmd(&["SET", "xx", "2"]), ok());
        assert_eq!(rewatched.cmd(&["INCR", "xx"]), Reply::simple("QUEUED"));
        assert_eq!(
            rewatched.cmd(&["EXEC"]),
            Reply::Array(vec![i(3)]),
            "{args:?}"
        );
        for client in [&mut begun_before, &mut begun_during, &mut rewatched] {
            assert_eq!(client.cmd(&["PING", "out"]), b("out"), "left MULTI");
        }
    }
}

/// INFO memory's `used_memory_lua` (and `used_memory_vm_eval`/`_total`)
/// is what the network threads' Lua VMs hold, and 10 000 EVALs leave it
/// bounded (Redis' "EVAL does not leak in the Lua stack").
#[test]
fn lua_memory_is_reported_and_does_not_grow() {
    let server = TestServer::start_with(&["--threads", "1"]);
    let mut con = server.raw();
    let lua_bytes = |con: &mut Raw| -> u64 {
        let info = con.cmd(&["INFO", "memory"]).as_text();
        let total = info_field(&info, "used_memory_vm_total");
        assert_eq!(info_field(&info, "used_memory_vm_eval"), total);
        info_field(&info, "used_memory_lua").parse().unwrap()
    };
    assert_eq!(con.cmd(&["EVAL", "return 1", "0"]), i(1));
    let first = lua_bytes(&mut con);
    assert!(first > 10_000, "a VM with its libraries: {first}");
    let script = "return redis.call('INCR', KEYS[1])";
    for n in 1..=10_000i64 {
        con.send(&["EVAL", script, "1", "x"]);
        if n % 500 == 0 {
            for _ in 0..500 {
                con.read();
            }
        }
    }
    assert_eq!(con.cmd(&["GET", "x"]), b("10000"));
    let after = lua_bytes(&mut con);
    assert!(
        after < 4 * first,
        "{first} bytes after one EVAL, {after} after 10 000"
    );
}

/// Redis 7.4's eviction of EVAL's scripts: at most 500 stay, the least
/// recently used (by EVAL or EVALSHA) goes first, SCRIPT LOAD's stay, and
/// what was evicted is gone on every thread (EVALSHA answers NOSCRIPT).
#[test]
fn eval_scripts_are_evicted_least_recently_used_first() {
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut con = server.raw();
    let stat = |con: &mut Raw, name: &str| -> u64 {
        let info = con.cmd(&["INFO", "everything"]).as_text();
        info_field(&info, name).parse().unwrap()
    };
    let sha = |body: &str| con_sha(body);
    // 500 scripts fill the cache; EVALSHA finds the first and the last.
    for j in 1..=500 {
        assert_eq!(con.cmd(&["EVAL", &format!("return {j}"), "0"]), i(j));
    }
    assert_eq!(stat(&mut con, "number_of_cached_scripts"), 500);
    assert_eq!(stat(&mut con, "evicted_scripts"), 0);
    // "return 1" and "return 2" used again, one by EVAL, one by EVALSHA
    // (on another connection, which may be on the other thread).
    let mut other = server.raw();
    assert_eq!(con.cmd(&["EVAL", "return 1", "0"]), i(1));
    assert_eq!(other.cmd(&["EVALSHA", &sha("return 2"), "0"]), i(2));
    // One more: "return 3" is now the least recently used.
    assert_eq!(con.cmd(&["EVAL", "return 1000", "0"]), i(1000));
    assert_eq!(stat(&mut con, "evicted_scripts"), 1);
    assert_eq!(stat(&mut con, "number_of_cached_scripts"), 500);
    for con in [&mut con, &mut other] {
        let evicted = con.cmd(&["EVALSHA", &sha("return 3"), "0"]);
        assert_eq!(evicted, e("NOSCRIPT No matching script. Please use EVAL."));
        assert_eq!(con.cmd(&["EVALSHA", &sha("return 1"), "0"]), i(1));
        assert_eq!(con.cmd(&["EVALSHA", &sha("return 2"), "0"]), i(2));
        assert_eq!(con.cmd(&["EVALSHA", &sha("return 4"), "0"]), i(4));
    }
    // SCRIPT LOAD's scripts are never evicted; EVAL's still are.
    assert_eq!(con.cmd(&["SCRIPT", "FLUSH"]), ok());
    assert_eq!(con.cmd(&["CONFIG", "RESETSTAT"]), ok());
    for j in 1..=700 {
        con.cmd(&["SCRIPT", "LOAD", &format!("return {j}")]);
        assert_eq!(
            con.cmd(&["EVAL", &format!("return 'str_{j}'"), "0"]),
            b(&format!("str_{j}"))
        );
    }
    assert_eq!(stat(&mut con, "evicted_scripts"), 200);
    assert_eq!(stat(&mut con, "number_of_cached_scripts"), 700 + 500);
    assert_eq!(con.cmd(&["EVALSHA", &sha("return 1"), "0"]), i(1));
    assert_eq!(con.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(stat(&mut con, "evicted_scripts"), 0);
}

/// A client that builds a new script for every call (values spliced into
/// its text) keeps the cache and the VM bounded.
#[test]
fn a_new_script_per_call_does_not_grow_memory() {
    let server = TestServer::start_with(&["--threads", "1"]);
    let mut con = server.raw();
    let memory = |con: &mut Raw| -> (u64, u64) {
        let info = con.cmd(&["INFO", "memory"]).as_text();
        let field = |name: &str| info_field(&info, name).parse::<u64>().unwrap();
        (
            field("used_memory_scripts_eval"),
            field("used_memory_vm_eval"),
        )
    };
    let call = |con: &mut Raw, n: u64| {
        let script = format!("return redis.call('SET', KEYS[1], '{n}')");
        con.send(&["EVAL", &script, "1", "k"]);
    };
    for n in 0..2_000 {
        call(&mut con, n);
    }
    for _ in 0..2_000 {
        con.read();
    }
    let (scripts, vm) = memory(&mut con);
    for n in 2_000..20_000 {
        call(&mut con, n);
        if n % 1_000 == 999 {
            for _ in 0..1_000 {
                con.read();
            }
        }
    }
    assert_eq!(con.cmd(&["GET", "k"]), b("19999"));
    let (scripts_after, vm_after) = memory(&mut con);
    assert!(
        scripts_after <= scripts + scripts / 10,
        "the cache grew: {scripts} -> {scripts_after}"
    );
    assert!(vm_after < 2 * vm, "the VM grew: {vm} -> {vm_after}");
}

/// The SHA1 of a script, as the server names it.
fn con_sha(body: &str) -> String {
    let mut hasher = sha1_smol::Sha1::new();
    hasher.update(body.as_bytes());
    hasher.digest().to_string()
}

/// Runs `body` as an EVAL on a new connection until `con` is answered
/// -BUSY (`busy-reply-threshold` set to 50 ms first); returns the script's
/// connection.
fn start_busy_script(server: &TestServer, con: &mut Raw, body: &str) -> Raw {
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
        ok()
    );
    let mut looping = server.raw();
    looping.send(&["EVAL", body, "0"]);
    wait_until("the script to be reported busy", || {
        std::thread::sleep(Duration::from_millis(20));
        matches!(con.cmd(&["PING"]), Reply::Error(ref text) if text.starts_with("BUSY "))
    });
    looping
}

/// Redis 7.2+ lets scripts call the blocking commands, which then do not
/// block: with nothing to pop they answer as their timeout would (nil),
/// with something they pop it. (7.0 refused them as `noscript`, and
/// Redis 7.4.1's scripting tests stopped at the first.)
#[test]
fn scripts_call_blocking_commands_without_blocking() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for (script, keys) in [
        ("return redis.pcall('blpop', KEYS[1], 0)", &["l"][..]),
        ("return redis.pcall('brpop', KEYS[1], 0)", &["l"]),
        (
            "return redis.pcall('blmove', KEYS[1], KEYS[2], 'left', 'right', 0)",
            &["l", "m"],
        ),
        (
            "return redis.pcall('brpoplpush', KEYS[1], KEYS[2], 0)",
            &["l", "m"],
        ),
        ("return redis.pcall('bzpopmin', KEYS[1], 0)", &["z"]),
        ("return redis.pcall('bzpopmax', KEYS[1], 0)", &["z"]),
    ] {
        let mut args = vec!["EVAL", script, if keys.len() == 1 { "1" } else { "2" }];
        args.extend_from_slice(keys);
        assert_eq!(raw.cmd(&args), Reply::NullBulk, "{script}");
    }
    assert_eq!(raw.cmd(&["RPUSH", "l", "a", "b"]), Reply::Int(2));
    assert_eq!(
        raw.cmd(&["EVAL", "return redis.call('blpop', KEYS[1], 0)", "1", "l"]),
        Reply::Array(vec![b("l"), b("a")])
    );
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('pop', function(k) return redis.call('brpop', k[1], 0) end)"]),
        b("lib")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "pop", "1", "l"]),
        Reply::Array(vec![b("l"), b("b")])
    );
}

/// Redis 7.4's `os` in scripts: `os.clock` (the server's CPU seconds)
/// and nothing else, read-only; `pairs` over a library table lists it.
#[test]
fn scripts_have_os_clock_only() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let spin =
        "local s = os.clock() while os.clock() - s < 0.05 do end return {double = os.clock() - s}";
    let Reply::Bulk(elapsed) = raw.cmd(&["EVAL", spin, "0"]) else {
        panic!("os.clock did not measure");
    };
    let elapsed: f64 = String::from_utf8(elapsed).unwrap().parse().unwrap();
    assert!((0.05..1.0).contains(&elapsed), "{elapsed}");
    // pairs lists what a library shows (Redis' sandbox test walks `os`).
    let listed = "local n = {} for k in pairs(os) do table.insert(n, k) end return n";
    assert_eq!(
        raw.cmd(&["EVAL", listed, "0"]),
        Reply::Array(vec![b("clock")])
    );
    let counted = "local c = 0 for _ in pairs(string) do c = c + 1 end return c";
    assert_eq!(raw.cmd(&["EVAL", counted, "0"]), Reply::Int(15));
    for (script, needle) in [
        (
            "return os.time()",
            "attempt to call field 'time' (a nil value)",
        ),
        ("os.clock = nil", "Attempt to modify a readonly table"),
    ] {
        let reply = raw.cmd(&["EVAL", script, "0"]);
        assert!(reply.as_text().contains(needle), "{script}: {reply:?}");
    }
}

/// TIME inside a script answers the same time throughout the script, as
/// Redis freezes time in a script; the next command sees the clock again.
#[test]
fn time_is_frozen_inside_a_script() {
    let server = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]), ok());
    let script = "local a = redis.call('TIME') redis.call('DEBUG', 'SLEEP', 0.01) \
                  local b = redis.call('TIME') return {a[1], a[2], b[1], b[2]}";
    let reply = raw.cmd(&["EVAL", script, "0"]);
    let parts = reply.as_array();
    assert_eq!(parts[..2], parts[2..], "{reply:?}");
    let first = raw.cmd(&["TIME"]);
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert_ne!(raw.cmd(&["TIME"]), first);
}

/// `used_memory_lua` as INFO reports it.
fn lua_memory(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
    info_field(&info, "used_memory_lua").parse().unwrap()
}

/// Redis' "EVAL does not leak in the Lua stack" flushes the scripts on one
/// connection and reads `used_memory_lua` after running scripts on
/// another: every thread's VM that SCRIPT FLUSH made stale is given back
/// (each thread drops its own before it sleeps), and libraries replaced
/// over and over leave no garbage behind.
#[test]
fn script_flush_and_replaced_libraries_give_the_vms_memory_back() {
    let server = TestServer::start_with(&["--threads", "2"]);
    // Enough connections that both threads compile many scripts.
    let mut connections: Vec<redis::Connection> = (0..4).map(|_| server.client()).collect();
    for (n, con) in connections.iter_mut().enumerate() {
        for script in 0..300 {
            let body = format!("return {{'{n}', {script}, '{}'}}", "x".repeat(100));
            let _: redis::Value = redis::cmd("EVAL").arg(body).arg(0).query(con).unwrap();
        }
    }
    let mut con = server.client();
    let before = lua_memory(&mut con);
    assert!(before > 200 * 1024, "{before} bytes before the flush");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
    wait_until("the stale VMs are dropped", || {
        lua_memory(&mut con) < 100 * 1024
    });
    // The library Redis' test loads, as its run_script_on_connection
    // writes it.
    let library = "#!lua name=test\nredis.register_function('test', function(KEYS, ARGV)\n \
                   return redis.call(\"incr\",KEYS[1]) \nend)";
    let mut pipe = redis::pipe();
    for _ in 0..10_000 {
        pipe.cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(library)
            .ignore();
        pipe.cmd("FCALL").arg("test").arg(1).arg("x").ignore();
    }
    let _: () = pipe.query(&mut connections[0]).unwrap();
    let count: u64 = connections[0].get("x").unwrap();
    assert_eq!(count, 10_000);
    let after = lua_memory(&mut con);
    assert!(
        after < 100 * 1024,
        "{after} bytes after 10 000 replaced libraries"
    );
}
