//! Server commands, INFO, CONFIG, COMMAND and process lifecycle against the
//! real server.

mod common;

use std::time::{Duration, Instant};

use common::{READY, Raw, Reply, TestServer, b, e, i, info_field, ok};

#[test]
fn info_sections_have_redis_fields() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "a", "1"]);
    r.cmd(&["SET", "b", "2", "EX", "100"]);
    r.cmd(&["GET", "a"]);
    r.cmd(&["GET", "zz"]);
    let info = r.cmd(&["INFO"]).as_text();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Keyspace",
    ] {
        assert!(info.contains(section), "missing {section}");
    }
    assert!(!info.contains("# Commandstats"));
    assert_eq!(info_field(&info, "tcp_port"), server.port.to_string());
    assert_eq!(info_field(&info, "role"), "master");
    assert_eq!(info_field(&info, "connected_clients"), "1");
    assert_eq!(info_field(&info, "keyspace_hits"), "1");
    assert_eq!(info_field(&info, "keyspace_misses"), "1");
    let db0 = info_field(&info, "db0");
    let avg_ttl: u64 = db0
        .strip_prefix("keys=2,expires=1,avg_ttl=")
        .unwrap_or_else(|| panic!("{db0}"))
        .parse()
        .unwrap();
    assert!((95_000..=100_000).contains(&avg_ttl), "{db0}");
    assert_eq!(info_field(&info, "loading"), "0");
    assert_eq!(info_field(&info, "rdb_changes_since_last_save"), "2");
    assert_eq!(info_field(&info, "process_id"), server.pid().to_string());
    let used: u64 = info_field(&info, "used_memory").parse().unwrap();
    let rss: u64 = info_field(&info, "used_memory_rss").parse().unwrap();
    assert!(
        used > 100_000 && rss > used / 2,
        "used_memory={used} rss={rss}"
    );
    // Memory grows with data.
    let value = "x".repeat(1000);
    for n in 0..5000 {
        r.send(&["SET", &format!("big:{n}"), &value]);
    }
    for _ in 0..5000 {
        r.read();
    }
    let after: u64 = info_field(&r.cmd(&["INFO", "memory"]).as_text(), "used_memory")
        .parse()
        .unwrap();
    assert!(after > used + 5_000_000, "used_memory {used} -> {after}");
    let stats = r.cmd(&["INFO", "commandstats"]).as_text();
    assert!(stats.starts_with("# Commandstats"));
    let get = info_field(&stats, "cmdstat_get");
    assert!(get.starts_with("calls=2,usec="), "{get}");
    assert!(get.ends_with("rejected_calls=0,failed_calls=0"), "{get}");
    let everything = r.cmd(&["INFO", "everything"]).as_text();
    assert!(everything.contains("# Commandstats") && everything.contains("# Keyspace"));
    let two = r.cmd(&["INFO", "server", "clients"]).as_text();
    assert!(two.contains("# Server") && two.contains("# Clients") && !two.contains("# Memory"));
}

#[test]
fn config_get_set_resetstat() {
    let server = TestServer::start();
    let mut r = server.raw();
    let reply = r.cmd(&["CONFIG", "GET", "maxclients"]);
    assert_eq!(reply, Reply::Array(vec![b("maxclients"), b("10000")]));
    let many = r.cmd(&["CONFIG", "GET", "*buffer*"]).as_array().to_vec();
    let names: Vec<String> = many.iter().step_by(2).map(|n| n.as_text()).collect();
    assert_eq!(
        names,
        vec!["client-output-buffer-limit", "client-query-buffer-limit"]
    );
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "client-output-buffer-limit"])
            .as_array()[1],
        b("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
    );
    assert_reply!(
        r,
        ["CONFIG", "GET", "port", "databases"],
        Reply::Array(vec![
            b("port"),
            b(&server.port.to_string()),
            b("databases"),
            b("16")
        ])
    );
    assert_reply!(
        r,
        ["CONFIG", "SET", "maxclients", "500", "timeout", "30"],
        ok()
    );
    assert_reply!(
        r,
        ["CONFIG", "GET", "timeout"],
        Reply::Array(vec![b("timeout"), b("30")])
    );
    assert_reply!(r, ["CONFIG", "SET", "proto-max-bulk-len", "2mb"], ok());
    assert_reply!(
        r,
        ["CONFIG", "GET", "proto-max-bulk-len"],
        Reply::Array(vec![b("proto-max-bulk-len"), b("2097152")])
    );
    assert_reply!(
        r,
        ["CONFIG", "SET", "nosuch", "1"],
        e("ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    );
    assert_reply!(
        r,
        ["CONFIG", "SET", "maxclients", "abc"],
        e(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"
        )
    );
    assert_reply!(
        r,
        ["CONFIG", "SET", "databases", "8"],
        e(
            "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
        )
    );
    // An immutable setting set to the value it has is a no-op (Redis'
    // test suite sets `supervised no` and the like on servers that have
    // it); any other value is refused.
    assert_reply!(r, ["CONFIG", "SET", "databases", "16"], ok());
    assert_reply!(
        r,
        ["CONFIG", "SET", "protected-mode", "maybe"],
        e(
            "ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'"
        )
    );
    assert_reply!(
        r,
        ["CONFIG", "SET", "timeout", "5", "timeout", "6"],
        e("ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter")
    );
    // Atomic: a failing pair leaves the others unchanged.
    assert_reply!(r, ["CONFIG", "SET", "timeout", "7", "maxclients", "x"], Reply::Error("ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer".into()));
    assert_reply!(
        r,
        ["CONFIG", "GET", "timeout"],
        Reply::Array(vec![b("timeout"), b("30")])
    );
    assert_reply!(
        r,
        ["CONFIG", "SET", "timeout"],
        e("ERR wrong number of arguments for 'config|set' command")
    );
    r.cmd(&["GET", "x"]);
    assert_reply!(r, ["CONFIG", "RESETSTAT"], ok());
    let stats = r.cmd(&["INFO", "commandstats"]).as_text();
    assert!(!stats.contains("cmdstat_get"), "{stats}");
}

#[test]
fn dbsize_flush_swapdb_time() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["MSET", "a", "1", "b", "2"]);
    r.cmd(&["SELECT", "1"]);
    r.cmd(&["SET", "c", "3"]);
    assert_reply!(r, ["DBSIZE"], i(1));
    assert_reply!(r, ["SWAPDB", "0", "1"], ok());
    assert_reply!(r, ["DBSIZE"], i(2));
    assert_reply!(r, ["GET", "a"], b("1"));
    assert_reply!(r, ["SWAPDB", "0", "16"], e("ERR DB index is out of range"));
    assert_reply!(r, ["SWAPDB", "x", "1"], e("ERR invalid first DB index"));
    assert_reply!(r, ["SWAPDB", "0", "y"], e("ERR invalid second DB index"));
    assert_reply!(r, ["FLUSHDB"], ok());
    assert_reply!(r, ["DBSIZE"], i(0));
    r.cmd(&["SELECT", "0"]);
    assert_reply!(r, ["DBSIZE"], i(1));
    assert_reply!(r, ["FLUSHDB", "BOGUS"], e("ERR syntax error"));
    assert_reply!(r, ["FLUSHALL", "ASYNC"], ok());
    assert_reply!(r, ["DBSIZE"], i(0));
    r.cmd(&["SET", "x", "1"]);
    assert_reply!(r, ["FLUSHALL", "SYNC"], ok());
    assert_reply!(r, ["DBSIZE"], i(0));
    let time = r.cmd(&["TIME"]);
    let parts = time.as_array();
    let secs: u64 = parts[0].as_text().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2);
    assert!(parts[1].as_text().parse::<u64>().unwrap() < 1_000_000);
}

#[test]
fn memory_usage() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "small", "x"]);
    r.cmd(&["SET", "large", &"y".repeat(10_000)]);
    let small = r.cmd(&["MEMORY", "USAGE", "small"]).as_int();
    let large = r
        .cmd(&["MEMORY", "USAGE", "large", "SAMPLES", "5"])
        .as_int();
    assert!(
        small > 0 && large > 10_000 && large < 11_000,
        "small={small} large={large}"
    );
    assert_reply!(r, ["MEMORY", "USAGE", "missing"], Reply::NullBulk);
    assert_reply!(
        r,
        ["MEMORY", "USAGE", "small", "SAMPLES"],
        e("ERR syntax error")
    );
}

#[test]
fn command_introspection() {
    let server = TestServer::start();
    let mut r = server.raw();
    let count = r.cmd(&["COMMAND", "COUNT"]).as_int();
    assert!(count >= 65, "{count}");
    assert_eq!(r.cmd(&["COMMAND"]).as_array().len() as i64, count);
    let info = r.cmd(&["COMMAND", "INFO", "get", "nosuch", "client|kill"]);
    let entries = info.as_array();
    let get = entries[0].as_array();
    assert_eq!(get[0], b("get"));
    assert_eq!(get[1], i(2));
    assert_eq!(
        get[2],
        Reply::Array(vec![Reply::simple("readonly"), Reply::simple("fast")])
    );
    assert_eq!(&get[3..6], &[i(1), i(1), i(1)]);
    assert_eq!(
        get[6],
        Reply::Array(vec![
            Reply::simple("@read"),
            Reply::simple("@string"),
            Reply::simple("@fast")
        ])
    );
    // An unknown name: a null bulk (`$-1`), as redis-server 7.0.15 answers.
    assert_eq!(entries[1], Reply::NullBulk);
    assert_eq!(entries[2].as_array()[0], b("client|kill"));
    let docs = r.cmd(&["COMMAND", "DOCS", "set"]).as_array().to_vec();
    assert_eq!(docs[0], b("set"));
    let fields = docs[1].as_array();
    assert_eq!(fields[0], b("summary"));
    assert_eq!(fields[4], b("group"));
    assert_eq!(fields[5], b("string"));
    let list: Vec<String> = r
        .cmd(&["COMMAND", "LIST"])
        .as_array()
        .iter()
        .map(|n| n.as_text())
        .collect();
    assert!(list.contains(&"bitfield_ro".to_owned()) && list.contains(&"config|set".to_owned()));
    let strings = r
        .cmd(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "bitmap"])
        .as_array()
        .len();
    assert_eq!(strings, 7);
    let pattern: Vec<String> = r
        .cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "get*"])
        .as_array()
        .iter()
        .map(|n| n.as_text())
        .collect();
    assert!(pattern.iter().all(|n| n.starts_with("get")) && pattern.len() >= 6);
    assert_reply!(
        r,
        ["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
        Reply::Array(vec![b("a"), b("b")])
    );
    assert_reply!(
        r,
        ["COMMAND", "GETKEYS", "BITOP", "AND", "d", "s1", "s2"],
        Reply::Array(vec![b("d"), b("s1"), b("s2")])
    );
    assert_reply!(
        r,
        ["COMMAND", "GETKEYS", "PING", "x"],
        e("ERR The command has no key arguments")
    );
    // As redis-server 7.0.15: COMMAND GETKEYS needs 4 arguments itself;
    // then the named command's own arity is checked.
    assert_reply!(
        r,
        ["COMMAND", "GETKEYS", "GET"],
        e("ERR wrong number of arguments for 'command|getkeys' command")
    );
    assert_reply!(
        r,
        ["COMMAND", "GETKEYS", "SET", "a"],
        e("ERR Invalid number of arguments specified for command")
    );
    assert_reply!(
        r,
        ["COMMAND", "GETKEYS", "NOPE", "x"],
        e("ERR Invalid command specified")
    );
}

#[test]
fn debug_sleep_pauses_every_connection() {
    let server = TestServer::start();
    let mut sleeper = server.raw();
    let mut other = server.raw();
    let sent = Instant::now();
    sleeper.send(&["DEBUG", "SLEEP", "1"]);
    // PINGs until one waits for the pause (the DEBUG may reach the server
    // after the first few); it is answered only when the second is over.
    let deadline = sent + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no PING waited for DEBUG SLEEP");
        let started = Instant::now();
        assert_reply!(other, ["PING"], Reply::simple("PONG"));
        if started.elapsed() >= Duration::from_millis(300) {
            break;
        }
    }
    assert!(
        sent.elapsed() >= Duration::from_millis(950),
        "PING answered during DEBUG SLEEP after {:?}",
        sent.elapsed()
    );
    assert_eq!(sleeper.read(), ok());
}

#[test]
fn shutdown_command_exits_cleanly() {
    let mut server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["SHUTDOWN", "ABORT"], e("ERR No shutdown in progress."));
    assert_reply!(r, ["SHUTDOWN", "LATER"], e("ERR syntax error"));
    r.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(r.is_closed());
    assert!(server.wait_exit().success());
}

#[test]
fn sigterm_exits_cleanly() {
    let mut server = TestServer::start();
    server.client();
    // SAFETY: sending a signal to our own child process.
    unsafe { libc_kill(server.pid() as i32, 15) };
    server.wait_for_log("Received SIGTERM");
    assert!(server.wait_exit().success());
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

#[test]
fn config_file_and_logfile_work_like_redis_conf() {
    let dir = std::env::temp_dir().join(format!(
        "strata-conf-test-{}-{}",
        std::process::id(),
        line!()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("strata.log");
    let conf = dir.join("strata.conf");
    std::fs::write(
        &conf,
        format!(
            "# a redis.conf-style file\nport 0\nbind 127.0.0.1\ndir \"{}\"\nlogfile {}\nloglevel verbose\nrequirepass \"pass word\"\nthreads 1\n",
            dir.join("data").display(),
            log.display()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .arg(&conf)
        .arg("--maxclients")
        .arg("77")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + common::TIMEOUT;
    let port: u16 = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("Ready to accept connections tcp on ").nth(1) {
            break rest
                .lines()
                .next()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no readiness line in the log file"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("threads=1") && text.contains(&format!("pid={}", child.id())),
        "{text}"
    );
    let mut r = common::Raw::connect(port);
    assert_reply!(r, ["PING"], e("NOAUTH Authentication required."));
    assert_reply!(r, ["AUTH", "pass word"], ok());
    assert_reply!(
        r,
        ["CONFIG", "GET", "maxclients"],
        Reply::Array(vec![b("maxclients"), b("77")])
    );
    assert_reply!(
        r,
        ["CONFIG", "GET", "logfile"],
        Reply::Array(vec![b("logfile"), b(&log.display().to_string())])
    );
    assert!(dir.join("data").is_dir(), "dir is created");
    let info = r.cmd(&["INFO", "server"]).as_text();
    assert!(
        info.contains(&format!(
            "config_file:{}",
            std::fs::canonicalize(&conf).unwrap().display()
        )),
        "{info}"
    );
    r.send(&["SHUTDOWN"]);
    assert!(r.is_closed());
    assert!(common::wait_bounded(&mut child).success());
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("ready to exit")
    );
    // A bad directive stops start-up with redis-server's message.
    std::fs::write(&conf, "port 0\nno-such-option yes\n").unwrap();
    let (status, stderr) = common::run_bounded(
        std::process::Command::new(env!("CARGO_BIN_EXE_strata-server")).arg(&conf),
    );
    assert_ne!(status, 0);
    assert!(
        stderr.contains("FATAL CONFIG FILE ERROR")
            && stderr.contains("at line 2")
            && stderr.contains("no-such-option"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errorstats_count_errors_by_code() {
    let server = TestServer::start_with(&["--requirepass", "pw"]);
    let mut r = server.raw();
    r.cmd(&["GET", "k"]);
    r.cmd(&["AUTH", "wrong"]);
    r.cmd(&["AUTH", "pw"]);
    r.cmd(&["NOSUCH"]);
    r.cmd(&["INCR", "k", "extra"]);
    let info = r.cmd(&["INFO", "errorstats"]).as_text();
    assert_eq!(info_field(&info, "errorstat_NOAUTH"), "count=1");
    assert_eq!(info_field(&info, "errorstat_WRONGPASS"), "count=1");
    assert_eq!(info_field(&info, "errorstat_ERR"), "count=2");
    let stats = r.cmd(&["INFO", "stats"]).as_text();
    assert_eq!(info_field(&stats, "total_error_replies"), "4");
}

#[test]
fn sigint_exits_cleanly() {
    let mut server = TestServer::start();
    // SAFETY: sending a signal to our own child process.
    unsafe { libc_kill(server.pid() as i32, 2) };
    server.wait_for_log("Received SIGINT");
    assert!(server.wait_exit().success());
}

/// CONFIG SET maxclients and timeout change what the server does, not only
/// what CONFIG GET says.
#[test]
fn config_set_maxclients_and_timeout_take_effect() {
    let server = TestServer::start();
    let mut admin = server.raw();
    let mut second = server.raw();
    assert_eq!(second.cmd(&["PING"]), Reply::simple("PONG"));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "2"]), ok());
    let mut third = server.raw();
    assert_eq!(
        third.try_read(),
        Some(Reply::err("ERR max number of clients reached"))
    );
    assert!(third.is_closed());
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "10000"]), ok());
    let mut fourth = server.raw();
    assert_eq!(fourth.cmd(&["PING"]), Reply::simple("PONG"));
    // An idle client is closed once `timeout` seconds pass; one that keeps
    // talking is not.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]), ok());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(10);
    // Until the idle client is closed, the talking one keeps pinging.
    while !second.closed_within(Duration::from_millis(200)) {
        assert_eq!(admin.cmd(&["PING"]), Reply::simple("PONG"));
        assert!(Instant::now() < deadline, "the idle client was not closed");
    }
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "closed after {:?}, before its second",
        started.elapsed()
    );
    assert_eq!(admin.cmd(&["PING"]), Reply::simple("PONG"));
}

/// One of this machine's IPv4 addresses that is not loopback: a client
/// connecting to it is, for the server, a peer from another host.
fn non_loopback_ipv4() -> Option<std::net::Ipv4Addr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` walks the list getifaddrs returned.
        let entry = unsafe { &*at };
        if !entry.ifa_addr.is_null()
            // SAFETY: ifa_addr is non-null and points to a sockaddr.
            && i32::from(unsafe { (*entry.ifa_addr).sa_family }) == libc::AF_INET
        {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let v4 = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            if !ip.is_loopback() && !ip.is_unspecified() {
                found = Some(ip);
                break;
            }
        }
        at = entry.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    found
}

#[test]
fn protected_mode_denies_non_loopback_peers_until_a_password_or_no() {
    // The peer is this machine's own non-loopback address, which the server
    // cannot tell from another host's. Every CI machine has one (it
    // downloads crates); a machine without any network cannot run this.
    let Some(ip) = non_loopback_ipv4() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no non-loopback IPv4 address to test protected mode from"
        );
        eprintln!("no non-loopback IPv4 address: protected mode not tested");
        return;
    };
    let server = TestServer::start_with(&["--bind", "0.0.0.0"]);
    let external = || {
        let stream = std::net::TcpStream::connect((ip, server.port)).unwrap();
        stream.set_read_timeout(Some(common::TIMEOUT)).unwrap();
        stream
    };
    // Redis 7.0.15's reply, word for word, then the connection closes.
    let mut denied = Vec::new();
    std::io::Read::read_to_end(&mut external(), &mut denied).unwrap();
    assert_eq!(
        String::from_utf8(denied).unwrap(),
        "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"
    );
    let mut local = server.raw();
    assert_eq!(local.cmd(&["PING"]), Reply::simple("PONG"));
    let stats = local.cmd(&["INFO", "stats"]).as_text();
    assert_eq!(info_field(&stats, "rejected_connections"), "1");
    // With a password, the external client is let in and must AUTH.
    assert_eq!(local.cmd(&["CONFIG", "SET", "requirepass", "secret"]), ok());
    let mut with_password = Raw::from_stream(external());
    assert_eq!(
        with_password.cmd(&["PING"]),
        e("NOAUTH Authentication required.")
    );
    assert_eq!(with_password.cmd(&["AUTH", "secret"]), ok());
    assert_eq!(with_password.cmd(&["PING"]), Reply::simple("PONG"));
    // Without a password but with protected mode off, it is let in too.
    assert_eq!(local.cmd(&["AUTH", "secret"]), ok());
    assert_eq!(local.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    assert_eq!(local.cmd(&["CONFIG", "SET", "protected-mode", "no"]), ok());
    let mut open = Raw::from_stream(external());
    assert_eq!(open.cmd(&["PING"]), Reply::simple("PONG"));
}

/// How many times `expired_keys` grew while a fresh key with a 1 ms TTL
/// was written every 50 ms for `window`: the active-expiry cron's ticks
/// (nothing reads those keys, so nothing else expires them).
fn expiry_ticks_seen(r: &mut Raw, window: Duration) -> usize {
    let expired = |r: &mut Raw| -> u64 {
        let stats = r.cmd(&["INFO", "stats"]).as_text();
        info_field(&stats, "expired_keys").parse().unwrap()
    };
    let started = Instant::now();
    let mut last = expired(r);
    let mut ticks = 0;
    let mut n = 0;
    while started.elapsed() < window {
        n += 1;
        assert_eq!(r.cmd(&["SET", &format!("t{n}"), "v", "PX", "1"]), ok());
        std::thread::sleep(Duration::from_millis(50));
        let now = expired(r);
        if now > last {
            ticks += 1;
            last = now;
        }
    }
    ticks
}

#[test]
fn config_set_hz_changes_how_often_the_cron_runs() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_eq!(r.cmd(&["CONFIG", "SET", "hz", "100"]), ok());
    let fast = expiry_ticks_seen(&mut r, Duration::from_millis(1500));
    assert_eq!(r.cmd(&["CONFIG", "SET", "hz", "1"]), ok());
    // The cron may be inside its last 10 ms sleep: from its next tick on,
    // it sleeps a second.
    std::thread::sleep(Duration::from_millis(20));
    let slow = expiry_ticks_seen(&mut r, Duration::from_millis(1500));
    assert!(
        fast >= 10 && slow <= 3,
        "expiry ticks in 1.5 s: {fast} at hz 100, {slow} at hz 1"
    );
    let info = r.cmd(&["INFO", "server"]).as_text();
    assert_eq!(info_field(&info, "hz"), "1");
}

#[test]
fn cluster_keyslot_answers_as_the_cluster_specification() {
    let server = TestServer::start();
    let mut r = server.raw();
    // Values from the Redis Cluster specification and redis-cli's
    // CLUSTER KEYSLOT on a cluster node.
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "123456789"]), i(12739));
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "foo"]), i(12182));
    assert_eq!(
        r.cmd(&["CLUSTER", "KEYSLOT", "{user1000}.following"]),
        i(3443)
    );
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "user1000"]), i(3443));
    // The examples of Redis' CLUSTER KEYSLOT documentation.
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "somekey"]), i(11058));
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "foo{hash_tag}"]), i(2515));
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "bar{hash_tag}"]), i(2515));
    assert_eq!(r.cmd(&["CLUSTER", "KEYSLOT", "{foo}mykey"]), i(12182));
    assert_eq!(
        r.cmd(&["CLUSTER", "INFO"]),
        e("ERR This instance has cluster support disabled")
    );
}

#[test]
fn proto_max_bulk_len_stops_where_a_log_record_ends() {
    // Strata's documented difference: a key and a value of that size must
    // fit one log record (32-bit length), so the maximum is 2 GiB - 21.
    let server = TestServer::start();
    let mut r = server.raw();
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "3gb"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 2147483627 inclusive"
        )
    );
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "2147483627"]),
        ok()
    );
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]),
        Reply::Array(vec![b("proto-max-bulk-len"), b("2147483627")])
    );
}

/// WAIT and WAITAOF with no replicas (Strata has none yet), as Redis 7.4
/// answers them: WAIT 0 at once, or after its timeout when it asks for
/// replicas; WAITAOF's local count is 1 once the log is synced, 0 with
/// `appendonly no`, which a logging server may be set to at runtime
/// (its log goes on) and back; a server started as a cache may not turn
/// the log on. In a script neither waits.
#[test]
fn wait_waitaof_and_appendonly_at_runtime() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_eq!(r.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(r.cmd(&["WAIT", "0", "0"]), i(0));
    let started = std::time::Instant::now();
    assert_eq!(r.cmd(&["WAIT", "1", "100"]), i(0));
    // Deadlines are whole milliseconds of the wall clock, as in Redis: a
    // command that arrives late in a millisecond waits up to one less
    // (CI once measured just under 100 ms here).
    assert!(started.elapsed() >= std::time::Duration::from_millis(99));
    assert_eq!(r.cmd(&["WAIT", "1", "-1"]), e("ERR timeout is negative"));
    assert_eq!(
        r.cmd(&["WAITAOF", "1", "0", "0"]),
        Reply::Array(vec![i(1), i(0)])
    );
    assert_eq!(
        r.cmd(&["WAITAOF", "2", "0", "0"]),
        e("ERR value is out of range, value must between 0 and 1")
    );
    assert_eq!(
        r.cmd(&["WAITAOF", "0", "-1", "0"]),
        e("ERR value is out of range, must be positive")
    );
    assert_eq!(
        r.cmd(&["EVAL", "return redis.pcall('wait', '1', '0')", "0"]),
        i(0)
    );
    assert_eq!(r.cmd(&["CONFIG", "SET", "appendonly", "no"]), ok());
    assert_eq!(
        r.cmd(&["EVAL", "return redis.pcall('waitaof', '0', '1', '0')", "0"]),
        Reply::Array(vec![i(0), i(0)])
    );
    assert_eq!(
        r.cmd(&["WAITAOF", "1", "0", "0"]),
        e("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.")
    );
    assert_eq!(r.cmd(&["CONFIG", "SET", "appendonly", "yes"]), ok());
    // The log went on meanwhile: a write made under `no` survives kill -9.
    assert_eq!(r.cmd(&["CONFIG", "SET", "appendonly", "no"]), ok());
    assert_eq!(r.cmd(&["SET", "under-no", "1"]), ok());
    assert_eq!(r.cmd(&["CONFIG", "SET", "appendonly", "yes"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    assert_eq!(r.cmd(&["GET", "under-no"]), b("1"));

    let cache = TestServer::start_with(&["--appendonly", "no"]);
    let mut c = cache.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'appendonly') - Strata starts its log only at start-up: restart with appendonly yes"
        )
    );
}

/// As Redis 7.4 counts them: a FLUSHALL or FLUSHDB outside MULTI counts
/// its keys as lazily freed objects (Redis runs it as a blocking ASYNC
/// flush), ASYNC too; one inside MULTI does not.
#[test]
fn flushes_count_their_keys_as_lazily_freed_as_redis_7_4_does() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let freed =
        |raw: &mut Raw| info_field(&raw.cmd(&["INFO", "memory"]).as_text(), "lazyfreed_objects");
    for n in 0..10 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), "v"]), ok());
    }
    assert_eq!(raw.cmd(&["FLUSHALL"]), ok());
    assert_eq!(freed(&mut raw), "10");
    assert_eq!(raw.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(raw.cmd(&["SET", "x", "1"]), ok());
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["FLUSHDB"]), Reply::simple("QUEUED"));
    assert_eq!(raw.cmd(&["EXEC"]), Reply::Array(vec![ok()]));
    assert_eq!(freed(&mut raw), "0");
    assert_eq!(raw.cmd(&["MSET", "a", "1", "b", "2"]), ok());
    assert_eq!(raw.cmd(&["FLUSHDB", "ASYNC"]), ok());
    common::wait_until("the ASYNC flush counted", || freed(&mut raw) == "2");
}
