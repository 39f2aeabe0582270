//! `kill -9` under mixed collection writes: four connections pipeline
//! set, sorted set, list and HyperLogLog changes (SPOP and ZPOPMIN among
//! them, whose effect the server chooses) and keep going until the kill;
//! after the restart each key holds exactly what its acknowledged changes
//! made, plus some prefix of the changes the kill cut (sent, never
//! answered). A checkpoint (BGSAVE, checked to succeed) falls in the
//! middle. A build that replied before writing the log fails this.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// One writer's outcome: its key, what its acknowledged replies say the
/// key holds, and the commands it sent whose replies never came (the kill
/// cut them: each may or may not have been applied, in order).
struct Outcome {
    key: String,
    acked: Acked,
    unacked: Vec<Vec<String>>,
}

/// Reads a reply; `None` once the connection is gone (the server was
/// killed).
fn read_or_gone(raw: &mut Raw) -> Option<Reply> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| raw.read())).ok()
}

/// Pipelines set, sorted set, list or HyperLogLog changes (by `kind`) on
/// one key until the server goes away, recording what each acknowledged
/// reply says.
fn writer(port: u16, kind: usize, count: Arc<AtomicU64>) -> Outcome {
    let key = format!("k{kind}");
    let mut raw = Raw::connect(port);
    let mut set = BTreeSet::new();
    let mut zset: BTreeMap<String, i64> = BTreeMap::new();
    let mut list = VecDeque::new();
    let mut hll = 0u64;
    let mut n = 0u64;
    let unacked = 'batches: loop {
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
            sent.push(args);
        }
        if kind == 3 {
            sent.push(vec!["PFCOUNT".into(), key.clone()]);
        }
        for args in &sent {
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            wire.extend(Raw::encode(&refs));
        }
        if std::io::Write::write_all(&mut raw.stream, &wire).is_err() {
            break 'batches Vec::new();
        }
        for (at, args) in sent.iter().enumerate() {
            let Some(reply) = read_or_gone(&mut raw) else {
                break 'batches sent[at..].to_vec();
            };
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
                ("PFCOUNT", Reply::Int(estimate)) => hll = estimate as u64,
                (command, other) => panic!("unexpected reply to {command}: {other:?}"),
            }
            count.fetch_add(1, Ordering::Relaxed);
        }
    };
    let acked = match kind {
        0 => Acked::Set(set),
        1 => Acked::ZSet(zset),
        2 => Acked::List(list),
        _ => Acked::Hll(hll),
    };
    Outcome {
        key,
        acked,
        unacked,
    }
}

/// Whether `got` is what the acknowledged set becomes after some prefix
/// of the unacknowledged commands. An SPOP's member is the server's
/// choice: every member it may have taken is tried (one `got` lacks, or
/// one a later SADD of the prefix puts back).
fn set_matches(acked: &BTreeSet<String>, unacked: &[Vec<String>], got: &BTreeSet<String>) -> bool {
    fn from(state: &mut BTreeSet<String>, unacked: &[Vec<String>], got: &BTreeSet<String>) -> bool {
        if state == got {
            return true;
        }
        let Some((args, rest)) = unacked.split_first() else {
            return false;
        };
        match args[0].as_str() {
            "SADD" | "SREM" => {
                let mut next = state.clone();
                match args[0].as_str() {
                    "SADD" => next.insert(args[2].clone()),
                    _ => next.remove(&args[2]),
                };
                from(&mut next, rest, got)
            }
            _ if state.is_empty() => from(state, rest, got),
            _ => {
                let added_later = |m: &String| rest.iter().any(|a| a[0] == "SADD" && &a[2] == m);
                let candidates: Vec<String> = state
                    .iter()
                    .filter(|m| !got.contains(*m) || added_later(m))
                    .cloned()
                    .collect();
                candidates.into_iter().any(|taken| {
                    let mut next = state.clone();
                    next.remove(&taken);
                    from(&mut next, rest, got)
                })
            }
        }
    }
    from(&mut acked.clone(), unacked, got)
}

/// The sorted set after each prefix of the unacknowledged commands.
fn zset_prefixes(
    acked: &BTreeMap<String, i64>,
    unacked: &[Vec<String>],
) -> Vec<BTreeMap<String, i64>> {
    let mut state = acked.clone();
    let mut states = vec![state.clone()];
    for args in unacked {
        match args[0].as_str() {
            "ZADD" => {
                state.insert(args[3].clone(), args[2].parse().unwrap());
            }
            "ZINCRBY" => {
                *state.entry(args[3].clone()).or_insert(0) += 3;
            }
            _ => {
                // ZPOPMIN: the lowest score, then the lowest member.
                let lowest = state
                    .iter()
                    .min_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)))
                    .map(|(m, _)| m.clone());
                if let Some(member) = lowest {
                    state.remove(&member);
                }
            }
        }
        states.push(state.clone());
    }
    states
}

/// The list after each prefix of the unacknowledged commands.
fn list_prefixes(acked: &VecDeque<String>, unacked: &[Vec<String>]) -> Vec<VecDeque<String>> {
    let mut state = acked.clone();
    let mut states = vec![state.clone()];
    for args in unacked {
        match args[0].as_str() {
            "LPUSH" => state.push_front(args[2].clone()),
            _ => {
                state.pop_back();
            }
        }
        states.push(state.clone());
    }
    states
}

#[test]
fn kill9_under_mixed_collection_writes_loses_no_acknowledged_change() {
    let server = TestServer::start_with(&["--appendfsync", "everysec"]);
    let count = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4)
        .map(|kind| {
            let (port, count) = (server.port, count.clone());
            std::thread::spawn(move || writer(port, kind, count))
        })
        .collect();
    // A checkpoint in the middle, so recovery reads one and the log after.
    wait_until("4 000 acknowledged changes", || {
        count.load(Ordering::Relaxed) >= 4_000
    });
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["BGSAVE"]),
        Reply::simple("Background saving started")
    );
    wait_until("the checkpoint to finish", || {
        let info = con.cmd(&["INFO", "persistence"]).as_text();
        info_field(&info, "rdb_bgsave_in_progress") == "0"
    });
    let info = con.cmd(&["INFO", "persistence"]).as_text();
    assert_eq!(info_field(&info, "rdb_last_bgsave_status"), "ok");
    wait_until("12 000 acknowledged changes", || {
        count.load(Ordering::Relaxed) >= 12_000
    });
    // The kill comes while every writer has a batch in flight: what it
    // cut may or may not be there; what was acknowledged must be.
    let dir = server.kill9();
    let outcomes: Vec<Outcome> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    for Outcome {
        key,
        acked,
        unacked,
    } in outcomes
    {
        match acked {
            Acked::Set(want) => {
                let got: BTreeSet<String> = con.smembers(&key).unwrap();
                assert!(
                    set_matches(&want, &unacked, &got),
                    "{key}: {got:?} vs {want:?} and the unacknowledged commands {unacked:?}"
                );
            }
            Acked::ZSet(want) => {
                let got: Vec<(String, i64)> = con.zrange_withscores(&key, 0, -1).unwrap();
                let got: BTreeMap<String, i64> = got.into_iter().collect();
                let states = zset_prefixes(&want, &unacked);
                assert!(
                    states.contains(&got),
                    "{key}: {} members recovered, {} acknowledged, {} unacknowledged commands",
                    got.len(),
                    want.len(),
                    unacked.len()
                );
            }
            Acked::List(want) => {
                let got: VecDeque<String> =
                    con.lrange::<_, Vec<String>>(&key, 0, -1).unwrap().into();
                let states = list_prefixes(&want, &unacked);
                assert!(
                    states.contains(&got),
                    "{key}: {} elements recovered, {} acknowledged, {} unacknowledged commands",
                    got.len(),
                    want.len(),
                    unacked.len()
                );
            }
            Acked::Hll(want) => {
                // Registers only grow: unacknowledged PFADDs may add.
                let got: u64 = con.pfcount(&key).unwrap();
                assert!(got >= want, "{key}: {got} < {want}");
            }
        }
    }
}
