//! `maxmemory-clients`: clients holding the most buffer memory are closed
//! when all clients together hold more than the limit; CLIENT NO-EVICT
//! exempts a client.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{Reply, TestServer, b, e, info_u64, ok};

/// Sends the start of a SET whose value is `size` bytes, all but its
/// last byte, so the server holds it unparsed.
fn send_partial_set(raw: &mut common::Raw, size: usize) {
    let mut bytes = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${size}\r\n").into_bytes();
    bytes.extend(std::iter::repeat_n(b'v', size - 1));
    raw.stream.write_all(&bytes).unwrap();
}

#[test]
fn the_largest_clients_are_evicted_and_no_evict_ones_kept() {
    let server = TestServer::start();
    let mut admin = server.raw();
    assert_reply!(admin, ["CONFIG", "SET", "maxmemory-clients", "1mb"], ok());
    assert_reply!(
        admin,
        ["CONFIG", "GET", "maxmemory-clients"],
        Reply::Array(vec![b("maxmemory-clients"), b("1048576")])
    );
    assert_reply!(admin, ["SET", "kept", "1"], ok());
    // A client with a 2 MB argument on its way in goes.
    let mut big = server.raw();
    assert_reply!(big, ["CLIENT", "SETNAME", "big"], ok());
    send_partial_set(&mut big, 2_000_000);
    assert!(big.closed_within(Duration::from_secs(5)));
    common::wait_until("the eviction is counted", || {
        info_u64(&mut server.client(), "stats", "evicted_clients") == 1
    });
    // The same with CLIENT NO-EVICT on stays, and so do small clients.
    let mut exempt = server.raw();
    assert_reply!(exempt, ["CLIENT", "NO-EVICT", "on"], ok());
    send_partial_set(&mut exempt, 2_000_000);
    assert!(!exempt.closed_within(Duration::from_millis(300)));
    exempt.stream.write_all(b"v\r\n").unwrap();
    assert_eq!(exempt.read(), ok());
    assert_reply!(admin, ["GET", "kept"], b("1"));
    assert_eq!(
        info_u64(&mut server.client(), "stats", "evicted_clients"),
        1
    );
    // A transaction's queue counts too.
    let mut queuing = server.raw();
    assert_reply!(queuing, ["MULTI"], ok());
    let value = "x".repeat(300_000);
    let mut closed = false;
    for _ in 0..5 {
        queuing.send(&["SET", "q", &value]);
        if queuing.closed_within(Duration::from_millis(200)) {
            closed = true;
            break;
        }
    }
    assert!(closed, "a 1.5 MB transaction queue was kept");
    assert_reply!(admin, ["EXISTS", "q"], common::i(0));
}

#[test]
fn a_percentage_of_maxmemory_and_bad_values() {
    let server = TestServer::start();
    let mut admin = server.raw();
    assert_reply!(admin, ["CONFIG", "SET", "maxmemory-clients", "10%"], ok());
    assert_reply!(
        admin,
        ["CONFIG", "GET", "maxmemory-clients"],
        Reply::Array(vec![b("maxmemory-clients"), b("10%")])
    );
    // Without maxmemory, a percentage is no limit.
    let mut big = server.raw();
    send_partial_set(&mut big, 2_000_000);
    assert!(!big.closed_within(Duration::from_millis(300)));
    assert_reply!(admin, ["CONFIG", "SET", "maxmemory", "10mb"], ok());
    // 10 % of 10 MB is 1 MB: the client holding 2 MB goes at its next turn.
    big.stream.write_all(b"v").unwrap();
    assert!(big.closed_within(Duration::from_secs(5)));
    assert_reply!(
        admin,
        ["CONFIG", "SET", "maxmemory-clients", "101%"],
        e(
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100"
        )
    );
}
