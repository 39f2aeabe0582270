//! Starting from a Redis operator's redis.conf: the directives Strata
//! accepts without using them (`config_accepted.rs`), `pidfile`,
//! `daemonize` and `tcp-backlog`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

/// Debian's `redis-server` package installs this file.
const DEBIAN_REDIS_CONF: &str = "/etc/redis/redis.conf";

/// Asserts CONFIG GET's value of each `(name, value)`.
fn assert_config(con: &mut Raw, expected: &[(&str, &str)]) {
    for (name, value) in expected {
        assert_eq!(
            con.cmd(&["CONFIG", "GET", name]),
            Reply::Array(vec![b(name), b(value)]),
            "{name}"
        );
    }
}

/// Debian's stock redis.conf starts Strata with only the overrides the
/// issue names (port, dir, daemonize, logfile) and the pidfile (the
/// stock one is the system's); every directive Strata has no use for is
/// logged once, CONFIG GET shows the file's values, and CONFIG SET
/// answers as Redis does.
#[test]
fn debian_redis_conf_starts_strata() {
    if !Path::new(DEBIAN_REDIS_CONF).exists() {
        // CI installs Debian's redis-server: there a missing file must
        // not pass silently.
        assert!(
            std::env::var_os("CI").is_none(),
            "{DEBIAN_REDIS_CONF} is missing, and CI installs redis-server"
        );
        eprintln!("skipped: {DEBIAN_REDIS_CONF} is missing (Debian's redis-server package)");
        return;
    }
    let dir = temp_dir();
    let pidfile = dir.join("strata.pid");
    let pidfile_arg = pidfile.display().to_string();
    let server = TestServer::spawn(
        dir.clone(),
        &[
            DEBIAN_REDIS_CONF,
            "--daemonize",
            "no",
            "--logfile",
            "",
            "--pidfile",
            &pidfile_arg,
            "--rdbcompression",
            "no",
        ],
        None,
        READY,
    );
    // Warnings only for what was changed from Redis' default and cannot
    // apply: the stock file's 34 directives at their defaults say nothing.
    let log = server.startup_log();
    let warnings: Vec<&String> = log
        .iter()
        .filter(|line| line.contains("is accepted for redis.conf compatibility"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("'rdbcompression no'"), "{warnings:?}");
    assert!(warnings[0].contains("no RDB file"), "{warnings:?}");
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "dbfilename"]),
        Reply::Array(vec![b("dbfilename"), b("dump.rdb")])
    );
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "hash-max-listpack-entries"]),
        Reply::Array(vec![b("hash-max-listpack-entries"), b("512")])
    );
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "tcp-backlog"]),
        Reply::Array(vec![b("tcp-backlog"), b("511")])
    );
    // Not in the file: Redis' default.
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "lfu-log-factor"]),
        Reply::Array(vec![b("lfu-log-factor"), b("10")])
    );
    assert_eq!(con.cmd(&["CONFIG", "SET", "rdbcompression", "no"]), ok());
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "rdbcompression"]),
        Reply::Array(vec![b("rdbcompression"), b("no")])
    );
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "daemonize", "yes"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"
        )
    );
    assert_eq!(
        con.cmd(&[
            "CONFIG",
            "SET",
            "dbfilename",
            "x.rdb",
            "rdbcompression",
            "maybe"
        ]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'rdbcompression') - argument must be 'yes' or 'no'"
        )
    );
    // All or nothing: the good half of that CONFIG SET did not apply.
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "dbfilename"]),
        Reply::Array(vec![b("dbfilename"), b("dump.rdb")])
    );
    // The pidfile holds the server's pid while it runs.
    let written = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(written.trim(), server.pid().to_string());
    con.send(&["SHUTDOWN"]);
    let _ = con.try_read();
    let _ = server.exited();
    assert!(!pidfile.exists(), "the pidfile is removed at exit");
}

/// Values that ask for what Strata cannot do stop start-up with the
/// reason, instead of running without it; other bad values get Redis'
/// error; aliases set the directive they stand for.
#[test]
fn unsafe_or_bad_values_stop_start_up() {
    for (args, expected) in [
        (
            ["--tls-port", "6380"],
            "tls-port needs tls-cert-file and tls-key-file",
        ),
        (
            ["--replicaof", "10.0.0.1"],
            "replicaof needs the primary's host and port",
        ),
        (
            ["--cluster-node-timeout", "-1"],
            "argument must be between 0 and 9223372036854775807 inclusive",
        ),
        (
            ["--aclfile", "/etc/redis/users.acl"],
            "Error loading ACLs, opening file '/etc/redis/users.acl'",
        ),
        (
            ["--rdbcompression", "maybe"],
            "argument must be 'yes' or 'no'",
        ),
        (
            ["--repl-diskless-load", "never"],
            "argument(s) must be one of the following: disabled, on-empty-db, swapdb",
        ),
        (
            ["--active-expire-effort", "11"],
            "argument must be between 1 and 10 inclusive",
        ),
    ] {
        let dir = temp_dir();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"));
        command
            .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
            .arg(dir.join("data"))
            .args(args);
        let (code, output) = run_bounded(&mut command);
        assert_ne!(code, 0, "{args:?} started");
        assert!(output.contains(expected), "{args:?}: {output}");
    }
    let server = TestServer::start_with(&["--slave-read-only", "no", "--maxmemory-clients", "10%"]);
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "replica-read-only"]),
        Reply::Array(vec![b("replica-read-only"), b("no")])
    );
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "maxmemory-clients"]),
        Reply::Array(vec![b("maxmemory-clients"), b("10%")])
    );
}

/// `daemonize yes`: the started process returns at once and the server
/// runs on detached, its pid in the pidfile and its log in `logfile`.
#[test]
fn daemonize_detaches_and_writes_the_pidfile() {
    let dir = temp_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("strata.pid");
    let logfile = dir.join("strata.log");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"));
    command
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--threads",
            "1",
            "--daemonize",
            "yes",
        ])
        .arg("--dir")
        .arg(dir.join("data"))
        .arg("--pidfile")
        .arg(&pidfile)
        .arg("--logfile")
        .arg(&logfile);
    let (code, _) = run_bounded(&mut command);
    assert_eq!(code, 0, "the launching process exits at once");
    let deadline = Instant::now() + TIMEOUT;
    let port = loop {
        let log = std::fs::read_to_string(&logfile).unwrap_or_default();
        if let Some(rest) = log.split(READY).nth(1) {
            let address = rest.split_whitespace().next().unwrap();
            break address.rsplit(':').next().unwrap().parse::<u16>().unwrap();
        }
        assert!(Instant::now() < deadline, "no readiness in {log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut con = Raw::connect(port);
    assert_eq!(con.cmd(&["SET", "k", "v"]), ok());
    let info = con.cmd(&["INFO", "server"]).as_text();
    assert!(info.contains(&format!("process_id:{pid}")), "{info}");
    con.send(&["SHUTDOWN", "NOSAVE"]);
    let _ = con.try_read();
    wait_until("the daemon to exit and remove its pidfile", || {
        std::thread::sleep(Duration::from_millis(20));
        !pidfile.exists()
    });
}

/// The documented `strata.conf` at the repository's root starts the
/// server as it is (the harness only moves port and dir), uses no
/// accepted-only directive, and its values are the defaults it claims.
#[test]
fn the_shipped_strata_conf_starts_with_its_documented_defaults() {
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../../strata.conf");
    let server = TestServer::start_with(&[conf]);
    let mut con = server.raw();
    assert_config(
        &mut con,
        &[
            ("slowlog-max-len", "128"),
            ("appendfsync", "everysec"),
            ("maxmemory-policy", "noeviction"),
            ("busy-reply-threshold", "5000"),
            ("tcp-backlog", "511"),
            ("save", "3600 1 300 100 60 10000"),
        ],
    );
    let log = server.startup_log();
    assert!(log.iter().any(|line| line.contains("starting")), "{log:?}");
    assert!(
        !log.iter()
            .any(|line| line.contains("is accepted for redis.conf compatibility")),
        "strata.conf sets an option Strata does not use"
    );
}

/// CONFIG REWRITE writes the running configuration back to the file:
/// comments, blank lines and order kept, each directive's line updated in
/// place (a repeated `save` folded into one), the others that differ from
/// their defaults appended; a server started from the result runs with
/// the same values. Without a file it answers Redis' error.
#[test]
fn config_rewrite_round_trip() {
    let dir = temp_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("strata.conf");
    std::fs::write(
        &conf,
        "# my settings\n\
         hz 10\n\
         \n\
         # snapshots\n\
         save 900 1\n\
         save 300 10\n\
         rdbcompression yes\n\
         logfile \"\"\n\
         zset-max-ziplist-entries 100\n\
         # the end\n",
    )
    .unwrap();
    let conf_arg = conf.display().to_string();
    let server = TestServer::start_with(&[&conf_arg]);
    let mut con = server.raw();
    for (name, value) in [
        ("hz", "20"),
        ("save", "60 5"),
        ("rdbcompression", "no"),
        ("slowlog-max-len", "64"),
        ("maxmemory-clients", "5%"),
        ("zset-max-listpack-entries", "200"),
        ("hash-max-listpack-entries", "300"),
    ] {
        assert_eq!(con.cmd(&["CONFIG", "SET", name, value]), ok(), "{name}");
    }
    assert_eq!(con.cmd(&["CONFIG", "REWRITE"]), ok());
    let text = std::fs::read_to_string(&conf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..9],
        [
            "# my settings",
            "hz 20",
            "",
            "# snapshots",
            "save 60 5",
            "rdbcompression no",
            "logfile \"\"",
            "zset-max-ziplist-entries 200",
            "# the end",
        ],
        "{text}"
    );
    // A setting with an old `ziplist` alias is written once, under the
    // name the file used, or under its own name when the file had none
    // (it used to be written under both, even when nobody set it).
    for setting in ["zset-max-", "hash-max-"] {
        let count = lines
            .iter()
            .filter(|l| l.starts_with(setting) && l.contains("-entries"))
            .count();
        assert_eq!(count, 1, "{setting}: {text}");
    }
    let generated = &lines[lines
        .iter()
        .position(|l| *l == "# Generated by CONFIG REWRITE")
        .unwrap()..];
    assert!(generated.contains(&"slowlog-max-len 64"), "{text}");
    assert!(generated.contains(&"maxmemory-clients 5%"), "{text}");
    assert!(
        generated.contains(&"hash-max-listpack-entries 300"),
        "{text}"
    );
    assert!(!text.contains("save 300 10"), "{text}");
    // A second rewrite changes nothing.
    assert_eq!(con.cmd(&["CONFIG", "REWRITE"]), ok());
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), text);
    drop(con);
    drop(server);
    // The rewritten file starts a server with those values.
    let again = TestServer::start_with(&[&conf_arg]);
    let mut con = again.raw();
    assert_config(
        &mut con,
        &[
            ("hz", "20"),
            ("save", "60 5"),
            ("rdbcompression", "no"),
            ("slowlog-max-len", "64"),
        ],
    );
    let without_file = TestServer::start();
    assert_eq!(
        without_file.raw().cmd(&["CONFIG", "REWRITE"]),
        e("ERR The server is running without a config file")
    );
}

/// CONFIG REWRITE writes repeated directives and values as Redis 7 does:
/// `client-output-buffer-limit` one line per class in the file's lines
/// (it used to fold the three into one, with `slave` and bytes), sizes in
/// Redis' units (`maxmemory 100mb`, not 104857600), text quoted
/// (`appendfilename "appendonly.aof"`); a class changed at runtime and
/// not in the file is appended; nothing else is added.
#[test]
fn config_rewrite_writes_lines_as_redis_does() {
    let dir = temp_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("strata.conf");
    std::fs::write(
        &conf,
        "client-output-buffer-limit normal 0 0 0\n\
         client-output-buffer-limit replica 256mb 64mb 60\n\
         maxmemory 100mb\n\
         appendfilename \"appendonly.aof\"\n\
         auto-aof-rewrite-min-size 65536\n",
    )
    .unwrap();
    let conf_arg = conf.display().to_string();
    let server = TestServer::start_with(&[&conf_arg]);
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 64mb 16mb 90"
        ]),
        ok()
    );
    assert_eq!(con.cmd(&["CONFIG", "REWRITE"]), ok());
    let text = std::fs::read_to_string(&conf).unwrap();
    let (file, generated) = text
        .split_once("\n# Generated by CONFIG REWRITE\n")
        .unwrap();
    assert_eq!(
        file,
        "client-output-buffer-limit normal 0 0 0\n\
         client-output-buffer-limit replica 256mb 64mb 60\n\
         maxmemory 100mb\n\
         appendfilename \"appendonly.aof\"\n\
         auto-aof-rewrite-min-size 64kb\n"
    );
    // The test server's own command-line settings (port, dir, ...) are
    // running values too, written as Redis writes them.
    let generated: Vec<&str> = generated.lines().collect();
    assert!(
        generated.contains(&"client-output-buffer-limit pubsub 64mb 16mb 90"),
        "{text}"
    );
    assert!(generated.iter().any(|l| l.starts_with("dir \"")), "{text}");
    assert_eq!(
        text.matches("client-output-buffer-limit").count(),
        3,
        "{text}"
    );
    assert_eq!(con.cmd(&["CONFIG", "REWRITE"]), ok());
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), text);
    drop(con);
    drop(server);
    let again = TestServer::start_with(&[&conf_arg]);
    assert_config(
        &mut again.raw(),
        &[
            (
                "client-output-buffer-limit",
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 67108864 16777216 90",
            ),
            ("maxmemory", "104857600"),
            ("auto-aof-rewrite-min-size", "65536"),
        ],
    );
}

/// `rename-command`: the command answers to its new name only (an empty
/// name disables it), from clients and scripts; renaming a command that
/// does not exist stops start-up.
#[test]
fn rename_command_renames_and_disables() {
    let server = TestServer::start_with(&[
        "--rename-command",
        "FLUSHALL",
        "",
        "--rename-command",
        "config",
        "cfg-7f3a",
    ]);
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SET", "k", "v"]), ok());
    assert!(
        matches!(con.cmd(&["FLUSHALL"]), Reply::Error(ref text) if text.starts_with("ERR unknown command 'FLUSHALL'"))
    );
    assert!(
        matches!(con.cmd(&["CONFIG", "GET", "hz"]), Reply::Error(ref text) if text.starts_with("ERR unknown command 'CONFIG'"))
    );
    assert_eq!(
        con.cmd(&["cfg-7f3a", "GET", "hz"]),
        Reply::Array(vec![b("hz"), b("10")])
    );
    assert_eq!(
        con.cmd(&["EVAL", "return redis.pcall('FLUSHALL')", "0"]),
        e("ERR Unknown Redis command called from script")
    );
    assert_eq!(con.cmd(&["GET", "k"]), b("v"));
    let dir = temp_dir();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"));
    command
        .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(dir.join("data"))
        .args(["--rename-command", "nosuchcommand", "x"]);
    let (code, output) = run_bounded(&mut command);
    assert_ne!(code, 0);
    assert!(
        output.contains("No such command 'nosuchcommand' in rename-command"),
        "{output}"
    );
}

/// `--help` lists every option with its default, whether CONFIG SET may
/// change it, and what it does (for accepted ones, why it has no effect).
#[test]
fn help_lists_every_option_with_its_meaning() {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"));
    command.arg("--help");
    let (code, output) = run_bounded(&mut command);
    assert_eq!(code, 0, "{output}");
    let lines: Vec<&str> = output.lines().collect();
    let meaning_of = |option: &str| {
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("--{option} ")))
            .unwrap_or_else(|| panic!("--{option} missing: {output}"));
        lines[at + 1].trim().to_owned()
    };
    assert!(meaning_of("requirepass").contains("password of the default user"));
    assert!(meaning_of("maxmemory-policy").contains("tiered"));
    assert!(meaning_of("rdbcompression").contains("no RDB file"));
    assert!(output.contains("user <name> <rules...>"), "{output}");
    // Every option line is followed by a non-empty meaning line.
    for (at, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("--") {
            let next = lines.get(at + 1).map_or("", |l| l.trim());
            assert!(!next.is_empty() && !next.starts_with("--"), "{line}");
        }
    }
}
