//! Pub/sub against the real server: channels, patterns and shard
//! channels, RESP2's subscribed mode and RESP3 pushes, PUBSUB's
//! introspection, fan-out to many subscribers on several threads, and a
//! subscriber that does not read being disconnected at its output limit
//! while the server and other subscribers carry on.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::*;

fn message(kind: &str, parts: &[&str]) -> Reply {
    let mut items = vec![b(kind)];
    items.extend(parts.iter().map(|p| b(p)));
    Reply::Array(items)
}

fn confirmation(word: &str, name: &str, count: i64) -> Reply {
    Reply::Array(vec![b(word), b(name), i(count)])
}

#[test]
fn channels_and_patterns_deliver_in_order() {
    let server = TestServer::start();
    let mut sub = server.raw();
    let mut publisher = server.raw();
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "news", "sport"]),
        confirmation("subscribe", "news", 1)
    );
    assert_eq!(sub.read(), confirmation("subscribe", "sport", 2));
    assert_eq!(
        sub.cmd(&["PSUBSCRIBE", "n*"]),
        confirmation("psubscribe", "n*", 3)
    );
    assert_eq!(publisher.cmd(&["PUBLISH", "news", "hello"]), i(2));
    assert_eq!(publisher.cmd(&["PUBLISH", "sport", "goal"]), i(1));
    assert_eq!(publisher.cmd(&["PUBLISH", "nothing", "x"]), i(1));
    assert_eq!(publisher.cmd(&["PUBLISH", "other", "x"]), i(0));
    assert_eq!(sub.read(), message("message", &["news", "hello"]));
    assert_eq!(sub.read(), message("pmessage", &["n*", "news", "hello"]));
    assert_eq!(sub.read(), message("message", &["sport", "goal"]));
    assert_eq!(sub.read(), message("pmessage", &["n*", "nothing", "x"]));
    // Subscribed mode: only (un)subscribing, PING, QUIT and RESET.
    assert_eq!(
        sub.cmd(&["GET", "k"]),
        e(
            "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        )
    );
    assert_eq!(sub.cmd(&["PING"]), message("pong", &[""]));
    // Introspection from another client.
    let mut channels = publisher.cmd(&["PUBSUB", "CHANNELS"]).as_array().to_vec();
    channels.sort_by_key(Reply::as_text);
    assert_eq!(channels, vec![b("news"), b("sport")]);
    assert_eq!(
        publisher.cmd(&["PUBSUB", "NUMSUB", "news", "none"]),
        Reply::Array(vec![b("news"), i(1), b("none"), i(0)])
    );
    assert_eq!(publisher.cmd(&["PUBSUB", "NUMPAT"]), i(1));
    let list = publisher.cmd(&["CLIENT", "LIST"]).as_text();
    assert!(
        list.contains("flags=P") && list.contains("sub=2 psub=1"),
        "{list}"
    );
    // UNSUBSCRIBE without arguments leaves every channel.
    sub.send(&["UNSUBSCRIBE"]);
    let mut left = [sub.read(), sub.read()];
    left.sort_by_key(|r| r.as_array()[1].as_text());
    assert_eq!(left[0].as_array()[1], b("news"));
    assert_eq!(
        sub.cmd(&["PUNSUBSCRIBE"]),
        confirmation("punsubscribe", "n*", 0)
    );
    assert_eq!(
        sub.cmd(&["UNSUBSCRIBE"]),
        Reply::Array(vec![b("unsubscribe"), Reply::NullBulk, i(0)])
    );
    assert_eq!(sub.cmd(&["GET", "k"]), Reply::NullBulk, "back to normal");
    assert_eq!(publisher.cmd(&["PUBLISH", "news", "x"]), i(0));
}

#[test]
fn shard_channels_and_resp3_pushes() {
    let server = TestServer::start();
    let mut sub = server.raw();
    let mut publisher = server.raw();
    assert!(matches!(sub.cmd(&["HELLO", "3"]), Reply::Map(_)));
    assert_eq!(
        sub.cmd(&["SSUBSCRIBE", "orders"]),
        Reply::Push(vec![b("ssubscribe"), b("orders"), i(1)])
    );
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "news"]),
        Reply::Push(vec![b("subscribe"), b("news"), i(1)])
    );
    // RESP3 clients run ordinary commands while subscribed.
    assert_eq!(sub.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(publisher.cmd(&["SPUBLISH", "orders", "o1"]), i(1));
    assert_eq!(
        publisher.cmd(&["PUBLISH", "orders", "o1"]),
        i(0),
        "shard channels are apart"
    );
    assert_eq!(
        sub.read(),
        Reply::Push(vec![b("smessage"), b("orders"), b("o1")])
    );
    assert_eq!(
        publisher.cmd(&["PUBSUB", "SHARDCHANNELS"]),
        Reply::Array(vec![b("orders")])
    );
    assert_eq!(
        publisher.cmd(&["PUBSUB", "SHARDNUMSUB", "orders"]),
        Reply::Array(vec![b("orders"), i(1)])
    );
    // RESET leaves every subscription.
    assert_eq!(sub.cmd(&["RESET"]), Reply::simple("RESET"));
    assert_eq!(publisher.cmd(&["SPUBLISH", "orders", "o2"]), i(0));
    assert_eq!(publisher.cmd(&["PUBLISH", "news", "n"]), i(0));
}

#[test]
fn fan_out_reaches_every_subscriber_and_disconnects_drop_them() {
    const SUBSCRIBERS: usize = 50;
    const MESSAGES: usize = 200;
    let server = TestServer::start();
    let mut subscribers: Vec<Raw> = (0..SUBSCRIBERS)
        .map(|_| {
            let mut raw = server.raw();
            assert_eq!(
                raw.cmd(&["SUBSCRIBE", "c"]),
                confirmation("subscribe", "c", 1)
            );
            raw
        })
        .collect();
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            let mut raw = server.raw();
            std::thread::spawn(move || {
                for n in 0..MESSAGES / 2 {
                    let payload = format!("{p}:{n}");
                    assert_eq!(raw.cmd(&["PUBLISH", "c", &payload]), i(SUBSCRIBERS as i64));
                }
            })
        })
        .collect();
    for publisher in publishers {
        publisher.join().unwrap();
    }
    for sub in &mut subscribers {
        let mut next = [0usize; 2];
        for _ in 0..MESSAGES {
            let reply = sub.read();
            let payload = reply.as_array()[2].as_text();
            let (p, n) = payload.split_once(':').unwrap();
            let p: usize = p.parse().unwrap();
            assert_eq!(n.parse::<usize>().unwrap(), next[p], "per publisher order");
            next[p] += 1;
        }
    }
    drop(subscribers);
    let mut con = server.raw();
    wait_until("the closed subscribers to be forgotten", || {
        con.cmd(&["PUBSUB", "NUMSUB", "c"]) == Reply::Array(vec![b("c"), i(0)])
    });
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected_at_its_limit() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 256kb 0 0"
        ]),
        ok()
    );
    let mut slow = server.raw();
    assert_eq!(
        slow.cmd(&["SUBSCRIBE", "c"]),
        confirmation("subscribe", "c", 1)
    );
    let mut healthy = server.raw();
    assert_eq!(
        healthy.cmd(&["SUBSCRIBE", "c"]),
        confirmation("subscribe", "c", 1)
    );
    let payload = "x".repeat(10_000);
    let started = Instant::now();
    // The slow one never reads; the healthy one does.
    loop {
        let received = con.cmd(&["PUBLISH", "c", &payload]).as_int();
        let reply = healthy.read();
        assert_eq!(reply.as_array()[2].as_text().len(), payload.len());
        if received == 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never disconnected"
        );
    }
    // The slow subscriber's connection is closed by the server.
    slow.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = Vec::new();
    let _ = slow.stream.read_to_end(&mut sink);
    assert!(
        sink.len() < 64 << 20,
        "bounded: {} bytes were sent",
        sink.len()
    );
    assert_eq!(
        con.cmd(&["PUBSUB", "NUMSUB", "c"]),
        Reply::Array(vec![b("c"), i(1)])
    );
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
}
