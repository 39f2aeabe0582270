//! `kill -9` under mixed collection writes: four connections pipeline
//! set, sorted set, list and HyperLogLog changes (SPOP and ZPOPMIN among
//! them, whose effect the server chooses); every change acknowledged
//! before the kill is there after the restart, exactly.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use redis::Commands;

/// What one writer's acknowledged replies say its key now holds.
#[derive(Debug)]
enum Acked {
    Set(BTreeSet<String>),
    ZSet(BTreeMap<String, i64>),
    List(VecDeque<String>),
    Hll(u64),
}

fn writer(port: u16, kind: usize, stop: Arc<AtomicBool>, count: Arc<AtomicU64>) -> (String, Acked) {
    let key = format!("k{kind}");
    let mut raw = Raw::connect(port);
    let mut set = BTreeSet::new();
    let mut zset: BTreeMap<String, i64> = BTreeMap::new();
    let mut list = VecDeque::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut wire = Vec::new();
        let mut sent = Vec::new();
        for _ in 0..20 {
            n += 1;
            let member = format!("m{}", n % 50);
            let args: Vec<String> = match (kind, n % 4) {
                (0, 3) => vec!["SPOP".into(), key.clone()],
                (0, 2) => vec!["SREM".into(), key.clone(), member.clone()],
                (0, _) => vec!["SADD".into(), key.clone(), member.clone()],
                (1, 3) => vec!["ZPOPMIN".into(), key.clone()],
                (1, 2) => vec!["ZINCRBY".into(), key.clone(), "3".into(), member.clone()],
                (1, _) => vec![
                    "ZADD".into(),
                    key.clone(),
                    (n % 7).to_string(),
                    member.clone(),
                ],
                (2, 3) => vec!["RPOP".into(), key.clone()],
                (2, _) => vec!["LPUSH".into(), key.clone(), format!("e{n}")],
                _ => vec!["PFADD".into(), key.clone(), format!("e{n}")],
            };
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            wire.extend(Raw::encode(&refs));
            sent.push(args);
        }
        if std::io::Write::write_all(&mut raw.stream, &wire).is_err() {
            break;
        }
        for args in sent {
            let reply = raw.read();
            match (args[0].as_str(), reply) {
                ("SADD", Reply::Int(_)) => {
                    set.insert(args[2].clone());
                }
                ("SREM", Reply::Int(_)) => {
                    set.remove(&args[2]);
                }
                ("SPOP", Reply::Bulk(member)) => {
                    assert!(set.remove(&String::from_utf8(member).unwrap()));
                }
                ("SPOP", Reply::NullBulk) => assert!(set.is_empty()),
                ("ZADD", Reply::Int(_)) => {
                    zset.insert(args[3].clone(), args[2].parse().unwrap());
                }
                ("ZINCRBY", Reply::Bulk(score)) => {
                    let score: i64 = String::from_utf8(score).unwrap().parse().unwrap();
                    zset.insert(args[3].clone(), score);
                }
                ("ZPOPMIN", Reply::Array(popped)) => {
                    if let [member, _] = &popped[..] {
                        let member = member.as_text();
                        assert!(zset.remove(&member).is_some());
                    } else {
                        assert!(zset.is_empty());
                    }
                }
                ("LPUSH", Reply::Int(_)) => list.push_front(args[2].clone()),
                ("RPOP", Reply::Bulk(element)) => {
                    assert_eq!(list.pop_back().map(String::into_bytes), Some(element));
                }
                ("RPOP", Reply::NullBulk) => assert!(list.is_empty()),
                ("PFADD", Reply::Int(_)) => {}
                (command, other) => panic!("unexpected reply to {command}: {other:?}"),
            }
            count.fetch_add(1, Ordering::Relaxed);
        }
    }
    let acked = match kind {
        0 => Acked::Set(set),
        1 => Acked::ZSet(zset),
        2 => Acked::List(list),
        _ => {
            let estimate: u64 = match raw.cmd(&["PFCOUNT", &key]) {
                Reply::Int(n) => n as u64,
                other => panic!("{other:?}"),
            };
            Acked::Hll(estimate)
        }
    };
    (key, acked)
}

#[test]
fn kill9_under_mixed_collection_writes_loses_no_acknowledged_change() {
    let server = TestServer::start_with(&["--appendfsync", "everysec"]);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4)
        .map(|kind| {
            let (port, stop, count) = (server.port, stop.clone(), count.clone());
            std::thread::spawn(move || writer(port, kind, stop, count))
        })
        .collect();
    // A checkpoint in the middle, so recovery reads one and the log after.
    wait_until("4 000 acknowledged changes", || {
        count.load(Ordering::Relaxed) >= 4_000
    });
    let mut con = server.client();
    let _: () = redis::cmd("BGSAVE").query(&mut con).unwrap_or(());
    wait_until("12 000 acknowledged changes", || {
        count.load(Ordering::Relaxed) >= 12_000
    });
    // The writers stop after a whole batch, so every change they made was
    // acknowledged; the kill comes with the last writes unsynced.
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<(String, Acked)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    for (key, acked) in acked {
        match acked {
            Acked::Set(want) => {
                let got: BTreeSet<String> = con.smembers(&key).unwrap();
                assert_eq!(got, want, "{key}");
            }
            Acked::ZSet(want) => {
                let got: Vec<(String, i64)> = con.zrange_withscores(&key, 0, -1).unwrap();
                let got: BTreeMap<String, i64> = got.into_iter().collect();
                assert_eq!(got, want, "{key}");
            }
            Acked::List(want) => {
                let got: Vec<String> = con.lrange(&key, 0, -1).unwrap();
                assert_eq!(got, Vec::from(want), "{key}");
            }
            Acked::Hll(want) => {
                let got: u64 = con.pfcount(&key).unwrap();
                assert_eq!(got, want, "{key}");
            }
        }
    }
}
