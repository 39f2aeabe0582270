//! SLOWLOG: what is logged, how entries look, the limits and the
//! directives, through a real client.

mod common;

use common::*;

/// Entries of SLOWLOG GET: (id, duration µs, args, name).
fn entries(con: &mut Raw, count: &str) -> Vec<(i64, i64, Vec<String>, String)> {
    con.cmd(&["SLOWLOG", "GET", count])
        .as_array()
        .iter()
        .map(|entry| {
            let fields = entry.as_array();
            assert_eq!(fields.len(), 6);
            let args = fields[3].as_array().iter().map(Reply::as_text).collect();
            (
                fields[0].as_int(),
                fields[2].as_int(),
                args,
                fields[5].as_text(),
            )
        })
        .collect()
}

#[test]
fn slowlog_records_slow_commands_newest_first() {
    let server = TestServer::start();
    let mut con = server.raw();
    // The default threshold (10 ms): a quick command is not logged, a
    // script that spins for 30 ms is, and not the commands it calls.
    assert_eq!(con.cmd(&["SET", "k", "v"]), ok());
    let spin = "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] \
                local now = start while now - start < 30000 do \
                local u = redis.call('TIME') now = u[1] * 1000000 + u[2] end return 1";
    assert_eq!(con.cmd(&["EVAL", spin, "0"]), Reply::Int(1));
    let logged = entries(&mut con, "-1");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0].2[0], "EVAL");
    assert!(logged[0].1 >= 30_000, "{logged:?}");
    // Threshold 0: everything, with the client's name; long commands cut.
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        ok()
    );
    assert_eq!(con.cmd(&["CLIENT", "SETNAME", "reporter"]), ok());
    let mut push = vec!["RPUSH".to_string(), "list".to_string()];
    push.extend((0..38).map(|i| i.to_string()));
    push.push("x".repeat(300));
    let push: Vec<&str> = push.iter().map(String::as_str).collect();
    assert_eq!(con.cmd(&push), Reply::Int(39));
    assert!(matches!(con.cmd(&["AUTH", "secret"]), Reply::Error(_)));
    let logged = entries(&mut con, "3");
    assert_eq!(logged.len(), 3);
    assert_eq!(logged[0].2, ["AUTH", "(redacted)"]);
    let rpush = &logged[1];
    assert_eq!(rpush.2.len(), 32);
    assert_eq!(rpush.2[31], "... (10 more arguments)");
    assert_eq!(rpush.3, "reporter");
    assert_eq!(logged[2].2, ["CLIENT", "SETNAME", "reporter"]);
    assert!(logged[0].0 > logged[1].0 && logged[1].0 > logged[2].0);
    // SLOWLOG GET's default count is 10.
    for _ in 0..12 {
        con.cmd(&["PING"]);
    }
    assert_eq!(entries(&mut con, "10").len(), 10);
    assert_eq!(con.cmd(&["SLOWLOG", "GET"]).as_array().len(), 10);
    // The length limit, shrinking at once; RESET; -1 turns logging off.
    assert_eq!(con.cmd(&["CONFIG", "SET", "slowlog-max-len", "3"]), ok());
    assert_eq!(con.cmd(&["SLOWLOG", "LEN"]), Reply::Int(3));
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        ok()
    );
    assert_eq!(con.cmd(&["SLOWLOG", "RESET"]), ok());
    con.cmd(&["PING"]);
    assert_eq!(con.cmd(&["SLOWLOG", "LEN"]), Reply::Int(0));
    for bad in ["-2", "x"] {
        assert_eq!(
            con.cmd(&["SLOWLOG", "GET", bad]),
            e("ERR count should be greater than or equal to -1")
        );
    }
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-2"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument must be between -1 and 9223372036854775807 inclusive"
        )
    );
}
