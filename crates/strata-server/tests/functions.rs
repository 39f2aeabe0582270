//! Function libraries against the real server: FUNCTION LOAD / LIST /
//! DELETE / FLUSH / DUMP / RESTORE / STATS / KILL and FCALL / FCALL_RO
//! with Redis' replies and errors; libraries surviving `kill -9`,
//! checkpoints and FLUSHALL; payloads moving between redis-server and
//! Strata both ways; FUNCTION LOAD inside MULTI; atomic transfers by
//! FCALL from several threads.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use redis::Commands;

const LIBRARY: &str = "#!lua name=bank
local function balance(key)
    return tonumber(redis.call('GET', key) or '0')
end
redis.register_function('transfer', function(keys, args)
    local amount = tonumber(args[1])
    if balance(keys[1]) < amount then
        return redis.error_reply('INSUFFICIENT funds')
    end
    redis.call('DECRBY', keys[1], amount)
    redis.call('INCRBY', keys[2], amount)
    return balance(keys[2])
end)
redis.register_function{
    function_name = 'total',
    callback = function(keys) return balance(keys[1]) + balance(keys[2]) end,
    flags = {'no-writes'},
    description = 'sum of two accounts',
}
";

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn load_call_list_delete_and_their_errors() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FUNCTION", "LOAD", LIBRARY]), b("bank"));
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", LIBRARY]),
        e("ERR Library 'bank' already exists")
    );
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", "REPLACE", LIBRARY]),
        b("bank")
    );
    assert_eq!(raw.cmd(&["SET", "{a}x", "100"]), ok());
    assert_eq!(
        raw.cmd(&["FCALL", "transfer", "2", "{a}x", "{b}y", "30"]),
        i(30)
    );
    // Function names are matched without regard to case.
    assert_eq!(raw.cmd(&["FCALL_RO", "TOTAL", "2", "{a}x", "{b}y"]), i(100));
    assert_eq!(
        raw.cmd(&["FCALL", "transfer", "2", "{a}x", "{b}y", "500"]),
        e("INSUFFICIENT funds")
    );
    assert_eq!(
        raw.cmd(&["FCALL_RO", "transfer", "2", "{a}x", "{b}y", "1"]),
        e("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "nosuch", "0"]),
        e("ERR Function not found")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "total", "x"]),
        e("ERR Bad number of keys provided")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "total", "3", "a"]),
        e("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "total", "-1"]),
        e("ERR Number of keys can't be negative")
    );
    // A runtime error names the function and the line.
    let loaded = raw.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=broken\nredis.register_function('boom', function()\n  return nil + 1\nend)",
    ]);
    assert_eq!(loaded, b("broken"));
    let error = raw.cmd(&["FCALL", "boom", "0"]).as_text();
    assert!(
        error.contains("script: boom, on @user_function:3."),
        "{error}"
    );
    // FUNCTION LIST, filtered, with code.
    let list = raw.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "ba*", "WITHCODE"]);
    let Reply::Array(libraries) = list else {
        panic!("{list:?}")
    };
    assert_eq!(libraries.len(), 1);
    let fields = libraries[0].as_array();
    assert_eq!(fields[0], b("library_name"));
    assert_eq!(fields[1], b("bank"));
    assert_eq!(fields[3], b("LUA"));
    let functions = fields[5].as_array();
    assert_eq!(functions.len(), 2);
    let total = functions
        .iter()
        .map(Reply::as_array)
        .find(|f| f[1] == b("total"))
        .unwrap();
    assert_eq!(total[3], b("sum of two accounts"));
    assert_eq!(total[5], Reply::Array(vec![Reply::simple("no-writes")]));
    assert_eq!(fields[7], b(LIBRARY));
    assert_eq!(
        raw.cmd(&["FUNCTION", "LIST", "bad"]),
        e("ERR Unknown argument bad")
    );
    let stats = raw.cmd(&["FUNCTION", "STATS"]);
    assert_eq!(
        stats,
        Reply::Array(vec![
            b("running_script"),
            Reply::NullBulk,
            b("engines"),
            Reply::Array(vec![
                b("LUA"),
                Reply::Array(vec![b("libraries_count"), i(2), b("functions_count"), i(3)]),
            ]),
        ])
    );
    // Load-time errors, as Redis words them.
    for (code, expected) in [
        ("return 1", "ERR Missing library metadata"),
        ("#!lua name=x\nreturn 1", "ERR No functions registered"),
        ("#!js name=x\nreturn 1", "ERR Engine 'js' not found"),
        (
            "#!lua name=bad-name\nreturn 1",
            "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ),
    ] {
        assert_eq!(raw.cmd(&["FUNCTION", "LOAD", code]), e(expected), "{code}");
    }
    for (code, part) in [
        (
            "#!lua name=x\nreturn redis.call('ping')",
            "nonexistent global variable 'call'",
        ),
        (
            "#!lua name=x\nglobal = 1",
            "Attempt to modify a readonly table",
        ),
        ("#!lua name=x\nreturn (", "Error compiling function"),
        ("#!lua name=x\nwhile true do end", "FUNCTION LOAD timeout"),
        (
            "#!lua name=x\nredis.register_function('transfer', function() end)",
            "Function transfer already exists",
        ),
    ] {
        let error = raw.cmd(&["FUNCTION", "LOAD", code]).as_text();
        assert!(error.contains(part), "{code}: {error}");
    }
    assert_eq!(raw.cmd(&["FUNCTION", "DELETE", "broken"]), ok());
    assert_eq!(
        raw.cmd(&["FUNCTION", "DELETE", "broken"]),
        e("ERR Library not found")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "boom", "0"]),
        e("ERR Function not found")
    );
    assert_eq!(
        raw.cmd(&["FUNCTION", "FLUSH", "bad"]),
        e("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    );
    assert_eq!(raw.cmd(&["FUNCTION", "FLUSH", "ASYNC"]), ok());
    assert_eq!(raw.cmd(&["FUNCTION", "LIST"]), Reply::Array(vec![]));
}

#[test]
fn dump_and_restore_with_each_policy() {
    let server = TestServer::start();
    let mut con = server.client();
    let load = |con: &mut redis::Connection, code: &str| -> redis::RedisResult<String> {
        redis::cmd("FUNCTION").arg("LOAD").arg(code).query(con)
    };
    load(&mut con, LIBRARY).unwrap();
    let payload: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut con).unwrap();
    let restore = |con: &mut redis::Connection, policy: Option<&str>| -> redis::RedisResult<()> {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("RESTORE").arg(&payload);
        if let Some(policy) = policy {
            cmd.arg(policy);
        }
        cmd.query(con)
    };
    let error = restore(&mut con, None).unwrap_err();
    assert!(
        error.to_string().contains("Library bank already exists"),
        "{error}"
    );
    restore(&mut con, Some("REPLACE")).unwrap();
    load(
        &mut con,
        "#!lua name=other\nredis.register_function('other', function() return 7 end)",
    )
    .unwrap();
    restore(&mut con, Some("FLUSH")).unwrap();
    let other: redis::RedisResult<i64> = redis::cmd("FCALL").arg("other").arg(0).query(&mut con);
    assert!(other.is_err(), "FLUSH dropped the other library");
    let total: i64 = redis::cmd("FCALL")
        .arg("total")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut con)
        .unwrap();
    assert_eq!(total, 0);
    let mut damaged = payload.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 1;
    let error: redis::RedisResult<()> = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&damaged)
        .query(&mut con);
    assert!(
        error
            .unwrap_err()
            .to_string()
            .contains("payload version or checksum are wrong")
    );
    let error: redis::RedisResult<()> = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .arg("MERGE")
        .query(&mut con);
    assert!(
        error
            .unwrap_err()
            .to_string()
            .contains("Wrong restore policy given")
    );
}

/// Payloads move between redis-server and Strata both ways (Redis
/// compresses long code with LZF; Strata reads it).
#[test]
fn payloads_move_between_redis_and_strata() {
    let Some(redis_server) = RedisServer::start_unless_missing("function payloads") else {
        return;
    };
    let server = TestServer::start();
    let mut strata = server.client();
    let mut redis_con = redis::Client::open(format!("redis://127.0.0.1:{}/", redis_server.port))
        .unwrap()
        .get_connection_with_timeout(TIMEOUT)
        .unwrap();
    let padding = "-- padding that LZF compresses well: ".to_owned() + &"abc".repeat(100);
    let code = format!("{LIBRARY}\n{padding}\n");
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&code)
        .query(&mut redis_con)
        .unwrap();
    let from_redis: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut redis_con)
        .unwrap();
    let () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&from_redis)
        .query(&mut strata)
        .unwrap();
    let listed: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(&mut strata)
        .unwrap();
    assert!(format!("{listed:?}").contains("padding that LZF"));
    let _: () = strata.set("a", 10).unwrap();
    let moved: i64 = redis::cmd("FCALL")
        .arg("transfer")
        .arg(2)
        .arg("a")
        .arg("b")
        .arg(4)
        .query(&mut strata)
        .unwrap();
    assert_eq!(moved, 4);
    let from_strata: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut strata)
        .unwrap();
    let () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&from_strata)
        .arg("FLUSH")
        .query(&mut redis_con)
        .unwrap();
    let total: i64 = redis::cmd("FCALL")
        .arg("total")
        .arg(2)
        .arg("a")
        .arg("b")
        .query(&mut redis_con)
        .unwrap();
    assert_eq!(total, 0, "the library runs on redis-server");
}

#[test]
fn libraries_survive_kill_9_checkpoints_and_flushall() {
    let server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FUNCTION", "LOAD", LIBRARY]), b("bank"));
    assert_eq!(raw.cmd(&["FLUSHALL"]), ok());
    assert_eq!(raw.cmd(&["SET", "a", "5"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--appendfsync", "always"], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FCALL", "transfer", "2", "a", "b", "2"]), i(2));
    // Two checkpoint cycles: the log below the first is cut, so the
    // libraries come back from the checkpoint alone.
    for _ in 0..2 {
        let saves = |raw: &mut Raw| info_field(&info(raw), "rdb_saves").parse::<u64>().unwrap();
        let before = saves(&mut raw);
        assert_eq!(
            raw.cmd(&["BGSAVE"]),
            Reply::simple("Background saving started")
        );
        wait_until("the checkpoint", || {
            std::thread::sleep(Duration::from_millis(20));
            saves(&mut raw) > before
        });
    }
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--appendfsync", "always"], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FCALL_RO", "total", "2", "a", "b"]), i(5));
    // Deleting is as durable as loading.
    assert_eq!(raw.cmd(&["FUNCTION", "DELETE", "bank"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FUNCTION", "LIST"]), Reply::Array(vec![]));
    assert_eq!(raw.cmd(&["GET", "b"]), b("2"));
}

fn info(raw: &mut Raw) -> String {
    raw.cmd(&["INFO", "persistence"]).as_text()
}

#[test]
fn function_load_inside_multi_and_not_from_scripts() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SET", "a", "3"]), Reply::simple("QUEUED"));
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", LIBRARY]),
        Reply::simple("QUEUED")
    );
    assert_eq!(
        raw.cmd(&["FCALL", "transfer", "2", "a", "b", "1"]),
        Reply::simple("QUEUED")
    );
    assert_eq!(
        raw.cmd(&["EXEC"]),
        Reply::Array(vec![ok(), b("bank"), i(1)])
    );
    let error = raw
        .cmd(&["EVAL", "return redis.call('FUNCTION', 'FLUSH')", "0"])
        .as_text();
    assert!(
        error.contains("This Redis command is not allowed from script"),
        "{error}"
    );
    assert_eq!(raw.cmd(&["FCALL_RO", "total", "2", "a", "b"]), i(3));
}

/// The same with the looping function on its observer's own network
/// thread (`--threads 1`): there `crate::busy` answers, and FUNCTION STATS
/// went unanswered, leaving the FUNCTION KILL behind it waiting forever.
#[test]
fn a_looping_function_is_stopped_by_function_kill_only() {
    looping_function_stopped_by_function_kill(&[]);
    looping_function_stopped_by_function_kill(&["--threads", "1"]);
}

fn looping_function_stopped_by_function_kill(args: &[&str]) {
    let server = TestServer::start_with(args);
    let mut con = server.raw();
    let mut resp3 = server.raw();
    assert!(matches!(resp3.cmd(&["HELLO", "3"]), Reply::Map(_)));
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        ok()
    );
    assert_eq!(
        con.cmd(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=loop\nredis.register_function('spin', function() while true do end end)"
        ]),
        b("loop")
    );
    let mut looping = server.raw();
    looping.send(&["FCALL", "spin", "0"]);
    wait_until("the function to be reported busy", || {
        std::thread::sleep(Duration::from_millis(20));
        con.cmd(&["PING"]).as_text().contains("FUNCTION KILL")
    });
    let stats = con.cmd(&["FUNCTION", "STATS"]);
    let running = stats.as_array()[1].as_array().to_vec();
    assert_eq!(running[1], b("spin"));
    assert_eq!(
        running[3],
        Reply::Array(vec![b("FCALL"), b("spin"), b("0")])
    );
    let Reply::Map(stats) = resp3.cmd(&["FUNCTION", "STATS"]) else {
        panic!("FUNCTION STATS is a map in RESP3");
    };
    assert_eq!(stats[0].0, b("running_script"));
    assert!(matches!(stats[0].1, Reply::Map(ref running) if running[0].1 == b("spin")));
    assert!(
        con.cmd(&["SCRIPT", "KILL"])
            .as_text()
            .contains("You can only call FUNCTION KILL")
    );
    assert_eq!(con.cmd(&["FUNCTION", "KILL"]), ok());
    let reply = looping.read().as_text();
    assert!(reply.contains("Script killed by user"), "{reply}");
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
    assert_eq!(
        con.cmd(&["FUNCTION", "KILL"]),
        e("NOTBUSY No scripts in execution right now.")
    );
}

/// FCALL transfers between keys on different shards from several threads
/// while an observer checks that the total never changes.
#[test]
fn transfers_by_fcall_are_atomic_across_threads() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 300;
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut con = server.client();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIBRARY)
        .query(&mut con)
        .unwrap();
    let accounts: Vec<String> = (0..8).map(|n| format!("account:{n}")).collect();
    for account in &accounts {
        let _: () = con.set(account, 1000).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let (stop, accounts, mut con) = (stop.clone(), accounts.clone(), server.client());
        std::thread::spawn(move || {
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) {
                let values: Vec<i64> = con.mget(&accounts).unwrap();
                assert_eq!(values.iter().sum::<i64>(), 8000, "{values:?}");
                checks += 1;
            }
            checks
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (accounts, mut con) = (accounts.clone(), server.client());
            std::thread::spawn(move || {
                let mut moved = 0;
                for n in 0..PER_THREAD {
                    let from = &accounts[(t + n) % 8];
                    let to = &accounts[(t * 3 + n * 5 + 1) % 8];
                    if from == to {
                        continue;
                    }
                    // Each transfer runs (answering the receiver's balance)
                    // or is refused for funds: a FCALL failing otherwise
                    // would leave the sum unchanged and the test blind.
                    let reply: redis::RedisResult<i64> = redis::cmd("FCALL")
                        .arg("transfer")
                        .arg(2)
                        .arg(from)
                        .arg(to)
                        .arg(7)
                        .query(&mut con);
                    match reply {
                        Ok(balance) => {
                            assert!(balance >= 7, "transfer {n} of thread {t}: {balance}");
                            moved += 1;
                        }
                        Err(e) => assert_eq!(e.code(), Some("INSUFFICIENT"), "{e}"),
                    }
                }
                moved
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let moved: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(moved > THREADS * PER_THREAD / 2, "{moved} transfers ran");
    assert!(Instant::now() < deadline);
    stop.store(true, Ordering::Relaxed);
    assert!(observer.join().unwrap() > 0);
    let values: Vec<i64> = con.mget(&accounts).unwrap();
    assert_eq!(values.iter().sum::<i64>(), 8000);
}

/// A library of its own name, `bytes` long or so.
fn numbered_library(n: u32, bytes: usize) -> String {
    format!(
        "#!lua name=lib{n}\n-- {}\nredis.register_function('f{n}', function() return {n} end)",
        "x".repeat(bytes)
    )
}

fn log_bytes_written(raw: &mut Raw) -> u64 {
    info_field(&info(raw), "strata_log_bytes_written")
        .parse()
        .unwrap()
}

/// Each FUNCTION LOAD logs the library it loads, not the whole set again:
/// 300 libraries of about 1 KB loaded one by one log well under 1 MB
/// (the whole set each time came to 45 MB). FLUSH, a RESTORE that fails
/// halfway and a DELETE survive kill -9 as they were answered.
#[test]
fn each_library_is_logged_once_and_survives_kill_9() {
    let server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut raw = server.raw();
    let before = log_bytes_written(&mut raw);
    for n in 0..300 {
        assert_eq!(
            raw.cmd(&["FUNCTION", "LOAD", &numbered_library(n, 1000)]),
            b(&format!("lib{n}"))
        );
    }
    let logged = log_bytes_written(&mut raw) - before;
    assert!(logged < 1_000_000, "300 loads logged {logged} bytes");
    assert_eq!(raw.cmd(&["FUNCTION", "DELETE", "lib7"]), ok());
    // A payload of lib300 and lib8, made on another server.
    let dump = {
        let other = TestServer::start();
        let mut other = other.raw();
        for n in [300, 8] {
            assert_eq!(
                other.cmd(&["FUNCTION", "LOAD", &numbered_library(n, 10)]),
                b(&format!("lib{n}"))
            );
        }
        let Reply::Bulk(dump) = other.cmd(&["FUNCTION", "DUMP"]) else {
            panic!("a payload")
        };
        dump
    };
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", &numbered_library(900, 10)]),
        b("lib900")
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--appendfsync", "always"], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FCALL", "f299", "0"]), i(299));
    assert_eq!(raw.cmd(&["FCALL", "f7", "0"]), e("ERR Function not found"));
    // RESTORE … APPEND meets lib8, which is there: lib300 is not added
    // either.
    let mut con = server.client();
    let appended: redis::RedisResult<()> = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&dump)
        .arg("APPEND")
        .query(&mut con);
    assert!(appended.is_err(), "lib8 is there already");
    assert_eq!(
        raw.cmd(&["FCALL", "f300", "0"]),
        e("ERR Function not found")
    );
    assert_eq!(raw.cmd(&["FUNCTION", "DELETE", "lib900"]), ok());
    assert_eq!(raw.cmd(&["FUNCTION", "FLUSH"]), ok());
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", &numbered_library(5, 10)]),
        b("lib5")
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    let listed = raw.cmd(&["FUNCTION", "LIST"]);
    assert_eq!(listed.as_array().len(), 1, "{listed:?}");
    assert_eq!(raw.cmd(&["FCALL", "f5", "0"]), i(5));
}

/// A data directory written before libraries had items of their own
/// keeps every library in one item (`functions`, FUNCTION DUMP's
/// payload): it loads, and the next change moves the set to items per
/// library, which the restarts after it read.
#[test]
fn a_directory_with_every_library_in_one_item_loads_and_moves_on() {
    let payload = {
        let other = TestServer::start();
        let mut other = other.raw();
        assert_eq!(other.cmd(&["FUNCTION", "LOAD", LIBRARY]), b("bank"));
        let Reply::Bulk(payload) = other.cmd(&["FUNCTION", "DUMP"]) else {
            panic!("a payload")
        };
        payload
    };
    let dir = TestServer::start().kill9();
    {
        // The old layout, written through the engine as the old build did.
        let (keyspace, pending) = strata_engine::open::open(&dir.join("data"), 16).unwrap();
        let settings = strata_engine::open::LoadSettings::default();
        pending.load(&keyspace, 0, settings, |_| {}).unwrap();
        keyspace
            .update_meta_in(None, b"functions", |_| Ok::<_, ()>((payload, ())))
            .unwrap();
        let log = keyspace.log().expect("the log is on").clone();
        assert!(log.sync_now());
    }
    let server = TestServer::spawn(dir, &["--appendfsync", "always"], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "a", "3"]), ok());
    assert_eq!(raw.cmd(&["FCALL", "transfer", "2", "a", "b", "1"]), i(1));
    assert_eq!(
        raw.cmd(&["FUNCTION", "LOAD", &numbered_library(1, 10)]),
        b("lib1")
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--appendfsync", "always"], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FCALL", "f1", "0"]), i(1));
    assert_eq!(raw.cmd(&["FUNCTION", "DELETE", "bank"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["FUNCTION", "LIST"]).as_array().len(), 1);
    assert_eq!(raw.cmd(&["FCALL", "f1", "0"]), i(1));
}
