//! Wire protocol, pipelining and limits against the real server: bad input
//! gets Redis' error and closes only that connection; slow readers are
//! bounded; the server keeps serving everyone else.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Raw, Reply, TestServer, b, e, ok};

fn assert_server_alive(server: &TestServer) {
    let mut r = server.raw();
    assert_eq!(r.cmd(&["PING"]), Reply::simple("PONG"));
}

#[test]
fn pipelined_batch_is_answered_in_order() {
    let server = TestServer::start();
    let mut r = server.raw();
    let mut batch = Vec::new();
    for n in 0..10_000 {
        batch.extend(Raw::encode(&[
            b"SET",
            format!("k{n}").as_bytes(),
            n.to_string().as_bytes(),
        ]));
        batch.extend(Raw::encode(&[b"GET", format!("k{n}").as_bytes()]));
        if n % 1000 == 0 {
            batch.extend(Raw::encode(&[b"NOSUCHCMD"]));
        }
    }
    r.send_raw(&batch);
    for n in 0..10_000 {
        assert_eq!(r.read(), Reply::simple("OK"));
        assert_eq!(r.read(), b(&n.to_string()));
        if n % 1000 == 0 {
            assert!(matches!(r.read(), Reply::Error(_)));
        }
    }
}

#[test]
fn inline_commands_like_telnet() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.send_raw(b"SET greeting \"hello world\"\r\nGET greeting\r\n\r\nPING\n");
    assert_eq!(r.read(), Reply::simple("OK"));
    assert_eq!(r.read(), b("hello world"));
    assert_eq!(r.read(), Reply::simple("PONG"));
    r.send_raw(b"SET x \"unbalanced\r\n");
    assert_eq!(
        r.read(),
        Reply::err("ERR Protocol error: unbalanced quotes in request")
    );
    assert!(r.is_closed());
}

#[test]
fn protocol_errors_close_only_that_connection() {
    let server = TestServer::start();
    let cases: &[(&[u8], &str)] = &[
        (b"*1\r\n$-5\r\n", "ERR Protocol error: invalid bulk length"),
        (
            b"*2\r\n$3\r\nGET\r\n$600000000\r\n",
            "ERR Protocol error: invalid bulk length",
        ),
        (
            b"*2147483648\r\n",
            "ERR Protocol error: invalid multibulk length",
        ),
        (b"*x\r\n", "ERR Protocol error: invalid multibulk length"),
        (
            b"*1\r\n+PING\r\n",
            "ERR Protocol error: expected '$', got '+'",
        ),
    ];
    let mut bystander = server.raw();
    bystander.cmd(&["SET", "safe", "yes"]);
    for (input, error) in cases {
        let mut r = server.raw();
        r.send_raw(input);
        assert_eq!(
            r.read(),
            Reply::err(error),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
        assert!(r.is_closed());
        assert_eq!(bystander.cmd(&["GET", "safe"]), b("yes"));
    }
    let mut r = server.raw();
    r.send_raw(&vec![b'a'; 70 * 1024]);
    assert_eq!(
        r.read(),
        Reply::err("ERR Protocol error: too big inline request")
    );
    assert!(r.is_closed());
    // proto-max-bulk-len is enforced as configured.
    assert_eq!(
        bystander.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
        Reply::simple("OK")
    );
    let mut r = server.raw();
    r.send_raw(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 2 << 20).as_bytes());
    assert_eq!(
        r.read(),
        Reply::err("ERR Protocol error: invalid bulk length")
    );
    assert_server_alive(&server);
}

#[test]
fn query_buffer_limit_closes_the_client() {
    let server = TestServer::start_with(&["--client-query-buffer-limit", "1mb"]);
    query_buffer_limit_closes_a_4_mb_command(&server);
}

#[test]
fn query_buffer_limit_set_at_runtime_closes_the_client() {
    let server = TestServer::start();
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "client-query-buffer-limit", "1mb"]),
        ok()
    );
    query_buffer_limit_closes_a_4_mb_command(&server);
    // Back at the default (1 GB), the same command goes through.
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "client-query-buffer-limit", "1gb"]),
        ok()
    );
    let big = "x".repeat(4 << 20);
    assert_eq!(admin.cmd(&["SET", "k", &big]), ok());
}

fn query_buffer_limit_closes_a_4_mb_command(server: &TestServer) {
    let mut r = server.raw();
    // A 4 MB bulk string (allowed by proto-max-bulk-len) outgrows the 1 MB
    // query buffer before it is complete.
    r.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4194304\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    let mut closed_by_server = false;
    for _ in 0..64 {
        if r.stream.write_all(&chunk).is_err() {
            closed_by_server = true;
            break;
        }
    }
    assert!(closed_by_server || r.is_closed());
    server.wait_for_log("max query buffer length");
    assert_server_alive(server);
}

#[test]
fn output_buffer_hard_limit_disconnects_a_client_that_never_reads() {
    let server = TestServer::start_with(&["--client-output-buffer-limit", "normal 1mb 0 0"]);
    output_hard_limit_disconnects_a_client_that_never_reads(&server);
}

#[test]
fn output_buffer_limit_set_at_runtime_disconnects_a_client_that_never_reads() {
    let server = TestServer::start();
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0"
        ]),
        ok()
    );
    output_hard_limit_disconnects_a_client_that_never_reads(&server);
}

fn output_hard_limit_disconnects_a_client_that_never_reads(server: &TestServer) {
    let mut setup = server.raw();
    setup.cmd(&["SET", "big", &"v".repeat(100_000)]);
    let mut reader_that_never_reads = server.raw();
    let get = Raw::encode(&[b"GET", b"big"]);
    let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * 1000).collect();
    // 1000 × 100 KB of replies: far more than socket buffers hold.
    let _ = reader_that_never_reads.stream.write_all(&batch);
    let line = server.wait_for_log("closed for overcoming of output buffer limits");
    assert!(line.contains("addr=127.0.0.1:"), "{line}");
    assert_server_alive(server);
    assert_eq!(setup.cmd(&["STRLEN", "big"]), Reply::Int(100_000));
}

#[test]
fn client_that_never_reads_cannot_grow_server_memory() {
    // Redis' default: no limit for normal clients. Strata then stops reading
    // from such a client instead of buffering its replies.
    let server = TestServer::start();
    let mut setup = server.raw();
    setup.cmd(&["SET", "big", &"v".repeat(1_000_000)]);
    let used_before = used_memory(&mut setup);
    let mut stalled = server.raw();
    let get = Raw::encode(&[b"GET", b"big"]);
    let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * 2000).collect();
    stalled
        .stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    // 2000 × 1 MB of replies requested; the write may block once the server
    // stops reading, which is the point.
    let _ = stalled.stream.write_all(&batch);
    // The server has run some of the GETs, then stopped: the count no longer
    // moves while the client still has not read a byte.
    common::wait_until("the first GETs", || get_calls(&mut setup) > 0);
    let stopped_at = wait_until_stable(|| get_calls(&mut setup));
    // What a stalled connection may hold: the 1 MiB pause threshold, the
    // reply that crossed it and what the kernel's socket buffers took.
    assert!(
        stopped_at < 64,
        "the server ran {stopped_at} of 2000 GETs for a client that reads nothing"
    );
    let peak = info_number(&mut setup, "used_memory_peak");
    assert!(
        peak < used_before + 64 * 1024 * 1024,
        "used_memory peaked at {peak} (from {used_before})"
    );
    assert_server_alive(&server);
    // The stalled client gets every reply it asked for once it reads.
    let expected = format!("${}\r\n", 1_000_000);
    let mut first = vec![0u8; expected.len()];
    std::io::Read::read_exact(&mut stalled.stream, &mut first).unwrap();
    assert_eq!(first, expected.as_bytes());
}

/// How many GETs the server has run so far.
fn get_calls(r: &mut Raw) -> u64 {
    let info = r.cmd(&["INFO", "commandstats"]).as_text();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

/// Polls `read` until it returns the same value for 500 ms in a row (with a
/// deadline) and returns that value.
fn wait_until_stable(mut read: impl FnMut() -> u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = read();
    let mut since = Instant::now();
    loop {
        assert!(Instant::now() < deadline, "{last} never settled");
        std::thread::sleep(Duration::from_millis(50));
        let now = read();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_millis(500) {
            return last;
        }
    }
}

fn used_memory(r: &mut Raw) -> u64 {
    info_number(r, "used_memory")
}

fn info_number(r: &mut Raw, name: &str) -> u64 {
    let info = r.cmd(&["INFO", "memory"]).as_text();
    common::info_field(&info, name).parse().unwrap()
}

#[test]
fn maxclients_rejects_extra_connections() {
    let server = TestServer::start_with(&["--maxclients", "2"]);
    let mut first = server.raw();
    let mut second = server.raw();
    first.cmd(&["PING"]);
    second.cmd(&["PING"]);
    let mut third = server.raw();
    assert_eq!(
        third.read(),
        Reply::err("ERR max number of clients reached")
    );
    assert!(third.is_closed());
    let info = first.cmd(&["INFO", "stats"]).as_text();
    assert!(info.contains("rejected_connections:1"), "{info}");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let server = TestServer::start_with(&["--timeout", "1"]);
    let mut idle = server.raw();
    // The idle clock starts when the reply goes out, not when the request
    // came in: a command that takes half the timeout (as a slow CI machine
    // makes even PING) must not shorten the client's idle second.
    assert_eq!(idle.cmd(&["DEBUG", "SLEEP", "0.5"]), Reply::simple("OK"));
    let started = Instant::now();
    assert!(idle.is_closed());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "closed after {:?}",
        started.elapsed()
    );
}

#[test]
fn large_values_across_many_reads() {
    let server = TestServer::start();
    let mut r = server.raw();
    let value: Vec<u8> = (0..20_000_000u32).map(|n| (n % 251) as u8).collect();
    assert_eq!(r.cmd_bytes(&[b"SET", b"huge", &value]), Reply::simple("OK"));
    assert_eq!(r.cmd(&["GET", "huge"]), Reply::Bulk(value));
}

#[test]
fn announced_huge_bulks_do_not_reserve_memory() {
    let server = TestServer::start();
    let mut probe = server.raw();
    let before = used_memory(&mut probe);
    // 20 clients each announce a 500 MB value and send only its start.
    let mut clients: Vec<Raw> = (0..20).map(|_| server.raw()).collect();
    for client in &mut clients {
        client.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$500000000\r\nabc");
    }
    // The server has read every one of those starts: CLIENT LIST shows 20
    // clients holding a partial command.
    common::wait_until("20 partial commands in CLIENT LIST", || {
        let list = probe.cmd(&["CLIENT", "LIST"]).as_text();
        list.lines()
            .filter(|line| !line.contains("qbuf=0 ") && line.contains("cmd=NULL"))
            .count()
            == 20
    });
    let after = used_memory(&mut probe);
    let peak = info_number(&mut probe, "used_memory_peak");
    assert!(
        after < before + 32 * 1024 * 1024 && peak < before + 32 * 1024 * 1024,
        "used_memory grew from {before} to {after} (peak {peak})"
    );
    assert_server_alive(&server);
}

#[test]
fn output_buffer_soft_limit_disconnects_after_its_seconds() {
    // No hard limit; 256 KB soft limit for 1 second.
    let server = TestServer::start_with(&["--client-output-buffer-limit", "normal 0 256kb 1"]);
    let mut setup = server.raw();
    setup.cmd(&["SET", "big", &"v".repeat(100_000)]);
    let mut slow = server.raw();
    let get = Raw::encode(&[b"GET", b"big"]);
    let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * 1000).collect();
    let started = std::time::Instant::now();
    let _ = slow.stream.write_all(&batch);
    let line = server.wait_for_log("closed for overcoming of output buffer limits");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "closed after {:?}, before the soft seconds",
        started.elapsed()
    );
    assert!(line.contains("addr=127.0.0.1:"), "{line}");
    assert_server_alive(&server);
}

/// Redis 7.0.15 takes any argument count up to INT_MAX; a client that must
/// still authenticate gets at most 10 arguments of at most 16 KiB.
#[test]
fn argument_counts_and_sizes_as_redis_7_allows_them() {
    let server = TestServer::start();
    let mut r = server.raw();
    let mut wire = b"*2000000\r\n$4\r\nPING\r\n".to_vec();
    for _ in 1..2_000_000 {
        wire.extend_from_slice(b"$1\r\nx\r\n");
    }
    r.send_raw(&wire);
    assert_eq!(
        r.read(),
        e("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(r.cmd(&["PING"]), Reply::simple("PONG"));
    assert_eq!(r.cmd(&["CONFIG", "SET", "requirepass", "pw"]), ok());
    let mut stranger = server.raw();
    stranger.send_raw(b"*11\r\n");
    assert_eq!(
        stranger.read(),
        e("ERR Protocol error: unauthenticated multibulk length")
    );
    assert!(stranger.is_closed());
    let mut stranger = server.raw();
    stranger.send_raw(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n");
    assert_eq!(
        stranger.read(),
        e("ERR Protocol error: unauthenticated bulk length")
    );
    assert!(stranger.is_closed());
    let mut friend = server.raw();
    assert_eq!(friend.cmd(&["AUTH", "pw"]), ok());
    friend.send_raw(b"*11\r\n$4\r\nECHO\r\n");
    for _ in 1..11 {
        friend.send_raw(b"$1\r\nx\r\n");
    }
    assert_eq!(
        friend.read(),
        e("ERR wrong number of arguments for 'echo' command")
    );
}
