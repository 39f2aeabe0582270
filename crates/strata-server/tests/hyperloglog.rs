//! HyperLogLog against redis-server: the same elements give the same
//! estimates to the last digit, through the sparse and the dense
//! encodings; HLL bytes move both ways (GET from one, SET into the other)
//! and keep counting; the error stays within Redis' bounds; an HLL
//! survives kill -9 with its TTL.

mod common;

use common::*;
use redis::Commands;

fn pfadd_all(con: &mut redis::Connection, key: &str, from: u64, to: u64) {
    for chunk in (from..to).collect::<Vec<_>>().chunks(1000) {
        let elements: Vec<String> = chunk.iter().map(|i| format!("element:{i}")).collect();
        let _: () = redis::cmd("PFADD")
            .arg(key)
            .arg(elements)
            .query(con)
            .unwrap();
    }
}

#[test]
fn estimates_and_bytes_are_redis_own() {
    let Some(redis) = RedisServer::start_unless_missing("the HyperLogLog comparison") else {
        return;
    };
    let server = TestServer::start();
    let mut ours = server.client();
    let mut theirs = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut added = 0;
    // 200 000 elements: past the sparse limit, so dense at the end.
    for size in [10u64, 100, 1_000, 5_000, 50_000, 200_000] {
        for con in [&mut ours, &mut theirs] {
            pfadd_all(con, "hll", added, size);
        }
        added = size;
        let (a, b): (u64, u64) = (ours.pfcount("hll").unwrap(), theirs.pfcount("hll").unwrap());
        assert_eq!(a, b, "estimate of {size} elements");
        let error = (a as f64 - size as f64).abs() / size as f64;
        assert!(error < 0.0081 * 3.0, "{a} for {size}");
    }
    // Dense now: our bytes count the same in Redis, and Redis' in ours.
    let bytes: Vec<u8> = ours.get("hll").unwrap();
    assert_eq!(bytes[4], 0, "dense");
    let _: () = theirs.set("from-strata", &bytes).unwrap();
    let theirs_count: u64 = theirs.pfcount("from-strata").unwrap();
    let ours_count: u64 = ours.pfcount("hll").unwrap();
    assert_eq!(theirs_count, ours_count);
    let _: () = theirs.pfadd("small", &["a", "b", "c"]).unwrap();
    let _: () = theirs.pfadd("from-strata", "one more").unwrap();
    for key in ["small", "from-strata"] {
        let bytes: Vec<u8> = theirs.get(key).unwrap();
        let _: () = ours.set(key, &bytes).unwrap();
        let (a, b): (u64, u64) = (ours.pfcount(key).unwrap(), theirs.pfcount(key).unwrap());
        assert_eq!(a, b, "{key}");
    }
    // Merges agree too.
    for con in [&mut ours, &mut theirs] {
        let _: () = redis::cmd("PFMERGE")
            .arg("merged")
            .arg("small")
            .arg("hll")
            .query(con)
            .unwrap();
    }
    let (a, b): (u64, u64) = (
        ours.pfcount("merged").unwrap(),
        theirs.pfcount("merged").unwrap(),
    );
    assert_eq!(a, b);
    let (a, b): (u64, u64) = (
        ours.pfcount(&["small", "hll"]).unwrap(),
        theirs.pfcount(&["small", "hll"]).unwrap(),
    );
    assert_eq!(a, b);
}

#[test]
fn an_hll_survives_kill9_with_its_ttl() {
    let server = TestServer::start();
    let mut con = server.client();
    pfadd_all(&mut con, "visitors", 0, 3000);
    let _: () = con.expire("visitors", 1000).unwrap();
    pfadd_all(&mut con, "visitors", 3000, 4000);
    let before: u64 = con.pfcount("visitors").unwrap();
    let ttl: i64 = con.ttl("visitors").unwrap();
    assert!(ttl > 900, "PFADD kept the TTL: {ttl}");
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    let after: u64 = con.pfcount("visitors").unwrap();
    assert_eq!(after, before);
    let ttl: i64 = con.ttl("visitors").unwrap();
    assert!(ttl > 900, "{ttl}");
}

/// A dense HLL written with SET whose registers exceed 51, the longest
/// run a hash can give: PFCOUNT panicked (the connection dropped, and in
/// a transaction the writes before it were committed). Redis counts such
/// a value, leaving those registers out of the estimate; so does Strata,
/// to the same number.
#[test]
fn registers_past_the_longest_run_are_counted_as_redis_counts_them() {
    let mut forged = b"HYLL\0\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    forged.extend(std::iter::repeat_n(0xffu8, 12288));
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(con.cmd_bytes(&[b"SET", b"h", &forged]), ok());
    let ours = con.cmd(&["PFCOUNT", "h"]);
    assert!(matches!(ours, Reply::Int(_)), "{ours:?}");
    assert_eq!(con.cmd(&["PFMERGE", "m", "h"]), ok());
    assert_eq!(con.cmd(&["PFCOUNT", "m"]), ours);
    // Inside a transaction: all of it runs.
    assert_eq!(con.cmd(&["MULTI"]), ok());
    for command in [
        &["SET", "before", "1"][..],
        &["PFCOUNT", "h"],
        &["SET", "after", "1"],
    ] {
        assert_eq!(con.cmd(command), Reply::simple("QUEUED"));
    }
    assert_eq!(
        con.cmd(&["EXEC"]),
        Reply::Array(vec![ok(), ours.clone(), ok()])
    );
    if let Some(redis) = RedisServer::start_unless_missing("the forged HLL comparison") {
        let mut theirs = Raw::connect(redis.port);
        assert_eq!(theirs.cmd_bytes(&[b"SET", b"h", &forged]), ok());
        assert_eq!(theirs.cmd(&["PFCOUNT", "h"]), ours);
    }
}

/// `hll-sparse-max-bytes` bounds the whole string, header included, as in
/// Redis (its unit/hyperloglog checks STRLEN against it): a sparse HLL
/// is never longer, and the first update past it makes it dense. (Strata
/// counted only the bytes after the 16-byte header, so an HLL of up to
/// max + 16 bytes stayed sparse.)
#[test]
fn the_sparse_limit_counts_the_whole_string() {
    let server = TestServer::start();
    let mut con = server.client();
    for max in [100u64, 500, 3000] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("hll-sparse-max-bytes")
            .arg(max)
            .query(&mut con)
            .unwrap();
        let _: () = con.del("hll").unwrap();
        let mut next = 0;
        loop {
            pfadd_all(&mut con, "hll", next, next + 10);
            next += 10;
            let bytes: Vec<u8> = con.get("hll").unwrap();
            let sparse = bytes[4] == 1;
            if bytes.len() as u64 <= max {
                assert!(sparse, "{} bytes under {max} went dense", bytes.len());
            } else {
                assert!(!sparse, "{} bytes past {max} stayed sparse", bytes.len());
                break;
            }
            assert!(next < 100_000, "never left sparse under {max}");
        }
    }
}
