//! Scripts written to hurt the server, and scripts that are merely
//! unlucky, against the real binary: each case here once crashed it, hung
//! it, leaked one user's script into another's, or left a script half
//! applied (issue "Every input safe").
//!
//! - Lua's C library: `unpack` over a range whose count overflows an
//!   `int`, and a pattern deep enough to overflow the thread's stack, are
//!   errors; the server keeps answering.
//! - A loop inside a coroutine is seen as busy and stopped by SCRIPT
//!   KILL; so is an `xpcall` whose error handler loops.
//! - The sandbox: what one script changes (the string metatable, a
//!   library table through `rawset`) is not seen by the next script of
//!   another user; `getfenv`, `setfenv` and `newproxy` are gone.
//! - All or nothing: a script that wrote and then needs a key it did not
//!   declare, held by other clients, is undone and run again (a reader
//!   never sees half of it, its messages are published once); a command
//!   that panics inside a script leaves none of the script's writes; a
//!   script over the memory limit is refused before its first write and
//!   never between two.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::*;

#[test]
fn unpack_of_a_huge_range_is_an_error() {
    let server = TestServer::start();
    let mut con = server.raw();
    let reply = con.cmd(&["EVAL", "return unpack({1,2,3},-2147483648,2147483647)", "0"]);
    assert!(
        reply.as_text().contains("too many results to unpack"),
        "{reply:?}"
    );
    assert_eq!(
        con.cmd(&["EVAL", "return {unpack({1,2,3}, 2)}", "0"]),
        Reply::Array(vec![i(2), i(3)])
    );
    assert_eq!(
        con.cmd(&["EVAL", "return {unpack({1,2,3}, 3, 2)}", "0"]),
        Reply::Array(vec![])
    );
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
}

#[test]
fn a_pattern_deep_enough_to_overflow_the_stack_is_an_error() {
    let server = TestServer::start();
    let mut con = server.raw();
    let reply = con.cmd(&[
        "EVAL",
        "return string.find(string.rep('a',50000), string.rep('a?',50000)..string.rep('a',50000))",
        "0",
    ]);
    assert!(reply.as_text().contains("pattern too complex"), "{reply:?}");
    for call in [
        "string.match(s, p)",
        "string.gmatch(s, p)()",
        "string.gsub(s, p, '')",
    ] {
        let script =
            format!("local s = string.rep('a', 300) local p = string.rep('a?', 300) return {call}");
        let reply = con.cmd(&["EVAL", &script, "0"]);
        assert!(
            reply.as_text().contains("pattern too complex"),
            "{call}: {reply:?}"
        );
    }
    // Ordinary patterns, a plain find of the same text, and string methods.
    assert_eq!(
        con.cmd(&["EVAL", "return string.find('hello', 'l+')", "0"]),
        i(3)
    );
    assert_eq!(
        con.cmd(&[
            "EVAL",
            "return string.find(string.rep('a?', 300), string.rep('a?', 300), 1, true)",
            "0"
        ]),
        i(1)
    );
    assert_eq!(
        con.cmd(&[
            "EVAL",
            "return ('x=1, y=2'):gsub('(%w+)=(%w+)', '%2=%1')",
            "0"
        ]),
        b("1=x, 2=y")
    );
    let reply = con.cmd(&["EVAL", "return string.rep('x', 2^30)", "0"]);
    assert!(
        reply.as_text().contains("resulting string too large"),
        "{reply:?}"
    );
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
}

/// A loop inside a coroutine made no script busy: other clients blocked
/// on its keys, SCRIPT KILL answered NOTBUSY, and only kill -9 stopped
/// the server.
#[test]
fn a_loop_inside_a_coroutine_is_busy_and_killable() {
    let server = TestServer::start();
    let mut con = server.raw();
    for body in [
        "coroutine.wrap(function() while true do end end)()",
        "local co = coroutine.create(function() while true do end end) coroutine.resume(co) return 'survived'",
    ] {
        let mut looping = start_busy_script(&server, &mut con, body, &[]);
        assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok(), "{body}");
        let reply = looping.read().as_text();
        assert!(reply.contains("Script killed by user"), "{body}: {reply}");
        assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
    }
    // One that wrote cannot be killed, but it is busy, its key answers
    // BUSY rather than blocking a thread, and SHUTDOWN NOSAVE ends it.
    let mut looping = start_busy_script(
        &server,
        &mut con,
        "redis.call('SET', KEYS[1], 'x') coroutine.wrap(function() while true do end end)()",
        &["k"],
    );
    assert!(matches!(con.cmd(&["GET", "k"]), Reply::Error(ref t) if t.starts_with("BUSY ")));
    assert!(
        con.cmd(&["SCRIPT", "KILL"])
            .as_text()
            .starts_with("UNKILLABLE")
    );
    con.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(looping.closed_within(TIMEOUT));
    // Status 0 or 1: the script's thread may end the process (exit 1,
    // its writes uncommitted) before the main thread's clean exit.
    let (_, dir) = server.exited_with_status();
    let server = TestServer::spawn(dir, &[], None, READY);
    assert_eq!(server.raw().cmd(&["GET", "k"]), Reply::NullBulk);
}

/// A pattern that backtracks for ever (`a?` forty times on forty `a`s:
/// 2^40 steps) runs where Lua's instruction hook never fires: in Lua's C
/// matcher the script was neither busy nor killable and its thread was
/// lost. The matcher is Strata's now and looks at the script every so
/// many steps.
#[test]
fn a_pattern_that_backtracks_for_ever_is_busy_and_killable() {
    let server = TestServer::start();
    let mut con = server.raw();
    for (function, more) in [("find", ""), ("match", ""), ("gsub", ", 'x'")] {
        let body = format!(
            "return string.{function}(string.rep('a', 40), string.rep('a?', 40) .. string.rep('a', 40){more})"
        );
        let mut looping = start_busy_script(&server, &mut con, &body, &[]);
        assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok(), "{function}");
        let reply = looping.read().as_text();
        assert!(
            reply.contains("Script killed by user"),
            "{function}: {reply}"
        );
    }
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
}

/// Lua runs an error handler with hooks off when the hook raised the
/// error: a handler that looped kept the script running after SCRIPT
/// KILL answered OK.
#[test]
fn an_xpcall_handler_that_loops_is_killed() {
    let server = TestServer::start();
    let mut con = server.raw();
    for body in [
        "return xpcall(function() while true do end end, function(e) while true do end end)",
        "return xpcall(function() error('x') end, function(e) while true do end end)",
    ] {
        let mut looping = start_busy_script(&server, &mut con, body, &[]);
        assert_eq!(con.cmd(&["SCRIPT", "KILL"]), ok(), "{body}");
        let reply = looping.read().as_text();
        assert!(reply.contains("Script killed by user"), "{body}: {reply}");
        assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
    }
    // A handler still handles ordinary errors.
    assert_eq!(
        con.cmd(&[
            "EVAL",
            "local ok, v = xpcall(function() error('boom', 0) end, function(e) return 'handled ' .. e end) return v",
            "0"
        ]),
        b("handled boom")
    );
}

/// One network thread (one Lua VM) runs a restricted user's script and
/// then an admin's: nothing the first changed reaches the second.
#[test]
fn scripts_cannot_change_what_later_scripts_see() {
    let server = TestServer::start_with(&["--threads", "1"]);
    let mut admin = server.raw();
    assert_eq!(admin.cmd(&["SET", "secret", "s3cr3t"]), ok());
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "m", "on", ">pw", "~m:*", "+@all"]),
        ok()
    );
    let mut user = server.raw();
    assert_eq!(user.cmd(&["AUTH", "m", "pw"]), ok());
    let attacks = [
        "getmetatable('').__index = function(s, k) redis.call('SET', 'm:loot', redis.call('GET', 'secret')) return string[k] end",
        "getmetatable('').__index.upper = function() return 'evil' end",
        "rawset(string, 'upper', function() return 'evil' end)",
        "rawset(_G, 'upper', function() return 'evil' end)",
        "coroutine.wrap = function() return function() return 'evil' end end",
        "rawset(coroutine, 'wrap', function() return 'evil' end)",
        "setmetatable(getmetatable(''), {})",
        "collectgarbage('stop')",
    ];
    for attack in attacks {
        let reply = user.cmd(&["EVAL", attack, "0"]);
        let refused = matches!(&reply, Reply::Error(text) if text.contains("readonly table"));
        assert!(
            refused || attack.starts_with("collectgarbage"),
            "{attack}: {reply:?}"
        );
    }
    for name in ["getfenv", "setfenv", "newproxy"] {
        let reply = user.cmd(&["EVAL", &format!("return type({name})"), "0"]);
        assert!(
            reply.as_text().contains("nonexistent global variable"),
            "{name}: {reply:?}"
        );
    }
    let check = "return {('abc'):upper(), string.upper('x'), coroutine.wrap(function() return 'co' end)(), tostring(getmetatable('').__index == string)}";
    assert_eq!(
        admin.cmd(&["EVAL", check, "0"]),
        Reply::Array(vec![b("ABC"), b("X"), b("co"), b("true")])
    );
    assert_eq!(admin.cmd(&["EXISTS", "m:loot"]), i(0));
    // The garbage collector runs again after the script that stopped it.
    assert_eq!(
        admin.cmd(&["EVAL", "return collectgarbage('step', 0) ~= nil", "0"]),
        i(1)
    );
}

/// FUNCTION LOAD of a library with 10 000 functions: Redis loads it;
/// Strata answered "out of Lua stack …" with no error code.
#[test]
fn a_library_of_many_functions_loads() {
    let server = TestServer::start();
    let mut con = server.raw();
    let body = "#!lua name=many\nfor i = 1, 10000 do redis.register_function('f' .. i, function() return i end) end";
    assert_eq!(con.cmd(&["FUNCTION", "LOAD", body]), b("many"));
    assert_eq!(con.cmd(&["FCALL", "f9999", "0"]), i(9999));
    // A library Lua cannot compile is an error with its code.
    let huge = format!(
        "#!lua name=huge\nlocal t = {{{}}}\nredis.register_function('g', function() return #t end)",
        (0..300_000)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let reply = con.cmd(&["FUNCTION", "LOAD", &huge]);
    assert!(
        matches!(&reply, Reply::Error(text) if text.starts_with("ERR ")),
        "{reply:?}"
    );
}

/// A script writes `a1`, works a while, then writes `a2`, neither
/// declared, while other clients keep reading both with MGET (which
/// holds one shard while it waits for the other). The script used to
/// fail after a second with its first write kept; now it is undone and
/// runs again with every shard, and no reader ever sees one key without
/// the other. Its PUBLISH goes out once per script, however often it ran.
#[test]
fn a_script_that_meets_a_busy_undeclared_key_is_undone_and_run_again() {
    let server = TestServer::start();
    let stop = Arc::new(AtomicBool::new(false));
    let torn = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let mut con = server.raw();
            let (stop, torn) = (stop.clone(), torn.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let reply = con.cmd(&["MGET", "a1", "a2"]);
                    let values = reply.as_array();
                    if (values[0] == Reply::NullBulk) != (values[1] == Reply::NullBulk) {
                        torn.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let mut subscriber = server.raw();
    subscriber.cmd(&["SUBSCRIBE", "done"]);
    let mut con = server.raw();
    const RUNS: usize = 8;
    for run in 0..RUNS {
        assert_eq!(
            con.cmd(&["DEL", "a1", "a2"]),
            i(if run == 0 { 0 } else { 2 })
        );
        let reply = con.cmd(&[
            "EVAL",
            "redis.call('SET', 'a1', '1') redis.call('PUBLISH', 'done', ARGV[1]) for i = 1, 1e6 do end redis.call('SET', 'a2', '1') return 1",
            "0",
            &run.to_string(),
        ]);
        assert_eq!(reply, i(1), "run {run}");
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(torn.load(Ordering::Relaxed), 0, "reads saw half a script");
    for run in 0..RUNS {
        let message = subscriber.read();
        assert_eq!(
            message,
            Reply::Array(vec![b("message"), b("done"), b(&run.to_string())])
        );
    }
    subscriber
        .stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert_eq!(subscriber.try_read(), None, "a message went out twice");
}

/// A command that panics inside a script: the script's earlier writes
/// are undone (they used to be committed and survive a restart), the
/// connection closes, the server runs on.
#[test]
fn a_panic_inside_a_script_leaves_none_of_its_writes() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SET", "b", "0"]), ok());
    assert_eq!(con.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]), ok());
    let mut script = server.raw();
    script.send(&[
        "EVAL",
        "redis.call('SET', 'a', '1') redis.call('SET', 'b', '1') redis.call('RPUSH', 'l', 'x') redis.call('DEBUG', 'PANIC') return 1",
        "0",
    ]);
    assert!(script.closed_within(TIMEOUT));
    assert_eq!(
        con.cmd(&["MGET", "a", "b"]),
        Reply::Array(vec![Reply::NullBulk, b("0")])
    );
    assert_eq!(con.cmd(&["EXISTS", "l"]), i(0));
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["MGET", "a", "b"]),
        Reply::Array(vec![Reply::NullBulk, b("0")])
    );
}

/// The same inside MULTI/EXEC, whose writes are not kept as images: the
/// process ends before the transaction's group is written, and recovery
/// finds none of it.
#[test]
fn a_panic_inside_a_transaction_leaves_none_of_its_writes() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SET", "b", "0"]), ok());
    assert_eq!(con.cmd(&["MULTI"]), ok());
    for command in [
        &["SET", "a", "1"][..],
        &["SET", "b", "1"],
        &["DEBUG", "PANIC"],
    ] {
        assert_eq!(con.cmd(command), Reply::simple("QUEUED"));
    }
    con.send(&["EXEC"]);
    assert!(con.closed_within(TIMEOUT));
    let (status, dir) = server.exited_with_status();
    assert!(!status.success(), "{status}");
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["MGET", "a", "b"]),
        Reply::Array(vec![Reply::NullBulk, b("0")])
    );
}

/// Over `maxmemory` with `noeviction`: a script whose first write would
/// grow memory is refused before it; once a script has written, it runs
/// to its end (it used to get -OOM between an LPOP and a SET).
#[test]
fn memory_is_checked_before_a_scripts_first_write_only() {
    let server = TestServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut con = server.raw();
    assert_eq!(con.cmd(&["RPUSH", "L", "a", "b", "c"]), i(3));
    let filler = "x".repeat(100_000);
    for n in 0..40 {
        assert_eq!(con.cmd(&["SET", &format!("fill{n}"), &filler]), ok());
    }
    assert_eq!(con.cmd(&["CONFIG", "SET", "maxmemory", "1mb"]), ok());
    assert!(con.cmd(&["SET", "x", "1"]).as_text().starts_with("OOM "));
    assert_eq!(
        con.cmd(&[
            "EVAL",
            "local v = redis.call('LPOP', 'L') redis.call('SET', 'b', v) return v",
            "0"
        ]),
        b("a")
    );
    assert_eq!(con.cmd(&["GET", "b"]), b("a"));
    let reply = con.cmd(&[
        "EVAL",
        "redis.call('SET', 'c', '1') redis.call('LPOP', 'L') return 1",
        "0",
    ]);
    assert!(reply.as_text().starts_with("OOM "), "{reply:?}");
    assert_eq!(con.cmd(&["LLEN", "L"]), i(2));
    assert_eq!(con.cmd(&["EXISTS", "c"]), i(0));
}

/// Runs `body` (with `keys`) as an EVAL on a new connection until `con`
/// is answered -BUSY; returns the script's connection.
fn start_busy_script(server: &TestServer, con: &mut Raw, body: &str, keys: &[&str]) -> Raw {
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
        ok()
    );
    let mut looping = server.raw();
    let count = keys.len().to_string();
    let mut args = vec!["EVAL", body, &count];
    args.extend_from_slice(keys);
    looping.send(&args);
    wait_until("the script to be reported busy", || {
        std::thread::sleep(Duration::from_millis(20));
        matches!(con.cmd(&["PING"]), Reply::Error(ref text) if text.starts_with("BUSY "))
    });
    looping
}
