//! Redis Sentinel (redis-server 7.0 in sentinel mode, unchanged) manages
//! a Strata primary with two Strata replicas: it discovers them and the
//! other Sentinels, and when the primary is killed it promotes a replica,
//! points the other at it, and a client that asks Sentinel for the
//! primary keeps writing.

mod common;

use std::time::{Duration, Instant};

use common::*;

const DOWN_AFTER_MS: u64 = 1_000;

struct Sentinel {
    port: u16,
    child: std::process::Child,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        reap(&mut self.child);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_sentinel(primary_port: u16) -> Sentinel {
    let dir = temp_dir();
    let port = free_port();
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\n\
             sentinel monitor mymaster 127.0.0.1 {primary_port} 2\n\
             sentinel down-after-milliseconds mymaster {DOWN_AFTER_MS}\n\
             sentinel failover-timeout mymaster 5000\n\
             sentinel parallel-syncs mymaster 1\n",
            dir.display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (sentinel mode) must be installed");
    let sentinel = Sentinel { port, child };
    wait_until("the sentinel to answer", || sentinel.connection().is_some());
    sentinel
}

impl Sentinel {
    fn connection(&self) -> Option<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(2))
            .ok()
    }

    fn primary_port(&self) -> Option<u16> {
        let mut con = self.connection()?;
        let addr: Vec<String> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg("mymaster")
            .query(&mut con)
            .ok()?;
        addr.get(1)?.parse().ok()
    }

    fn count(&self, what: &str) -> usize {
        let Some(mut con) = self.connection() else {
            return 0;
        };
        let list: Vec<redis::Value> = redis::cmd("SENTINEL")
            .arg(what)
            .arg("mymaster")
            .query(&mut con)
            .unwrap_or_default();
        list.len()
    }
}

/// Writes through whatever Sentinel names as the primary, as a
/// Sentinel-aware client does: on an error it asks again.
fn write_through(sentinel: &Sentinel, key: &str) -> bool {
    let Some(port) = sentinel.primary_port() else {
        return false;
    };
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return false;
    };
    let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return false;
    };
    redis::cmd("SET")
        .arg(key)
        .arg(1)
        .query::<()>(&mut con)
        .is_ok()
}

#[test]
fn sentinel_fails_over_from_a_killed_strata_primary() {
    let primary = TestServer::start();
    let replicas = [TestServer::start(), TestServer::start()];
    for replica in &replicas {
        let mut con = replica.client();
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary.port)
            .query(&mut con)
            .unwrap();
    }
    let sentinels: Vec<Sentinel> = (0..3).map(|_| start_sentinel(primary.port)).collect();
    wait_until(
        "Sentinel to find both replicas and the other Sentinels",
        || sentinels[0].count("REPLICAS") == 2 && sentinels[0].count("SENTINELS") == 2,
    );
    for n in 0..100 {
        assert!(write_through(&sentinels[0], &format!("before:{n}")));
    }
    // Replication is asynchronous: what the replicas acknowledged (WAIT)
    // is what a failover keeps.
    let acked: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(5_000)
        .query(&mut primary.client())
        .unwrap();
    assert_eq!(acked, 2);
    let old = primary.port;
    let killed = Instant::now();
    primary.kill9();
    let promoted = loop {
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no failover within 30 s"
        );
        match sentinels[0].primary_port() {
            Some(port) if port != old => break port,
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let took = killed.elapsed();
    eprintln!(
        "failover: a new primary named {took:?} after kill -9 (down-after {DOWN_AFTER_MS} ms)"
    );
    let (new_primary, other) = if replicas[0].port == promoted {
        (&replicas[0], &replicas[1])
    } else {
        (&replicas[1], &replicas[0])
    };
    let mut p = new_primary.client();
    let role: redis::Value = redis::cmd("ROLE").query(&mut p).unwrap();
    assert!(format!("{role:?}").contains("master"), "{role:?}");
    wait_until("the client to write through Sentinel again", || {
        write_through(&sentinels[0], "after")
    });
    // (Sentinel's reconfiguration ends with CLIENT KILL TYPE normal, as
    // for Redis: each check opens its own connection.)
    wait_until("the other replica to follow the new primary", || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut other.client())
            .unwrap_or_default();
        info.contains(&format!("master_port:{promoted}")) && info.contains("master_link_status:up")
    });
    wait_until(
        "the write after the failover to reach the other replica",
        || {
            redis::cmd("EXISTS")
                .arg("after")
                .query::<i64>(&mut other.client())
                .is_ok_and(|n| n == 1)
        },
    );
    let mut p = new_primary.client();
    for n in 0..100 {
        let exists: i64 = redis::cmd("EXISTS")
            .arg(format!("before:{n}"))
            .query(&mut p)
            .unwrap();
        assert_eq!(exists, 1, "before:{n} lost in the failover");
    }
    // The other replica continued the promoted one's history: no copy.
    let stats: String = redis::cmd("INFO").arg("stats").query(&mut p).unwrap();
    assert_eq!(info_field(&stats, "sync_full"), "0", "{stats}");
    assert_eq!(info_field(&stats, "sync_partial_ok"), "1", "{stats}");
}
