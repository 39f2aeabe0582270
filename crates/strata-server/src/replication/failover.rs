//! FAILOVER: a planned switch of roles with no acknowledged write lost.
//!
//! As in Redis: the primary pauses clients' writes, waits until the target
//! replica acknowledged the whole stream (asking it with GETACK), then
//! follows it, its PSYNC carrying `FAILOVER`; the target, told so, becomes
//! a primary first (REPLICAOF NO ONE keeps the history as its second ID)
//! and answers `+CONTINUE`, so the old primary goes on as its replica
//! without a copy. The pause ends then. Without FORCE, a timeout before
//! the replica caught up aborts the switch and the writes resume here.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

pub use super::state::{IN_PROGRESS, NO_FAILOVER, WAITING_FOR_SYNC, state_name};
use crate::commands::Node;
use crate::util::now_ms;
use crate::{log_notice, log_warning};

/// What FAILOVER asked for.
pub struct Request {
    pub host: String,
    pub port: u16,
    pub timeout: Option<Duration>,
    pub force: bool,
}

/// A planned cluster failover or the end of a slot move
/// (`super::migration`), on the primary: clients' writes wait until
/// `until_ms`; once every shard lock was free (each write begun before
/// the pause has committed) and the stream holds the last change, its
/// offset.
pub fn hold_writes(server: &Node, until_ms: u64) -> Result<u64, String> {
    server.client_pause(until_ms, true, crate::util::now_ms());
    // A command that checked the pause just before it began has run
    // once the gate is empty (`crate::write_gate`).
    if !server
        .write_gate
        .wait_idle(std::time::Duration::from_secs(1))
    {
        server.client_unpause();
        return Err("a command that may write did not end within 1 s".into());
    }
    drop(server.keyspace.lock_all());
    let last = server.keyspace.next_change_seq().saturating_sub(1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        if let Some(offset) = server.replication.backlog.offset_holding(last) {
            return Ok(offset);
        }
        if std::time::Instant::now() >= deadline {
            server.client_unpause();
            return Err("the replication stream did not take the last writes in time".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Runs the switch on a thread of its own; FAILOVER has answered OK.
pub fn start(server: Arc<Node>, request: Request) {
    let spawned = std::thread::Builder::new()
        .name("strata-failover".into())
        .spawn(move || {
            let replication = &server.replication;
            let outcome = run(&server, &request);
            if let Err(why) = &outcome {
                log_warning!(
                    "FAILOVER to {}:{} aborted: {why}",
                    request.host,
                    request.port
                );
            }
            server.client_unpause();
            replication.failover_state.store(NO_FAILOVER, Relaxed);
            replication.failover_abort.store(false, Relaxed);
        });
    if let Err(e) = spawned {
        log_warning!("could not start FAILOVER: {e}");
    }
}

fn run(server: &Arc<Node>, request: &Request) -> Result<(), String> {
    let replication = &server.replication;
    // Writes wait from now on (reads go on), for as long as it takes.
    server.client_pause(u64::MAX, true, now_ms());
    let started = Instant::now();
    log_notice!("FAILOVER requested to {}:{}", request.host, request.port);
    loop {
        if replication.failover_abort.load(Relaxed) {
            return Err("FAILOVER ABORT".into());
        }
        let target = replication.replicas().into_iter().find(|r| {
            r.ip == request.host && r.listening_port.load(Relaxed) == u64::from(request.port)
        });
        let Some(target) = target else {
            return Err("the target replica disconnected".into());
        };
        // Every change committed (writes are paused: no more come) is in
        // the stream up to `holding`; the GETACKs asked for after it are
        // not changes.
        let last = server.keyspace.next_change_seq().saturating_sub(1);
        let holding = replication.backlog.offset_holding(last);
        if holding.is_some_and(|offset| target.acked.load(Relaxed) >= offset) {
            break;
        }
        if request
            .timeout
            .is_some_and(|limit| started.elapsed() >= limit)
        {
            if request.force {
                log_notice!("FAILOVER timeout reached: going on (FORCE)");
                break;
            }
            return Err("the replica did not catch up within the timeout".into());
        }
        replication.request_acks(last);
        std::thread::sleep(Duration::from_millis(10));
    }
    replication.failover_state.store(IN_PROGRESS, Relaxed);
    replication.drop_replicas_after_sending();
    let link = replication.follow(request.host.clone(), request.port);
    link.failover.store(true, Relaxed);
    super::link::start(
        server.clone(),
        request.host.clone(),
        request.port,
        link.clone(),
    );
    // The pause lasts until the new primary took over (or gave up).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !link.up.load(Relaxed) && Instant::now() < deadline && !link.stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    log_notice!(
        "FAILOVER: now a replica of {}:{}",
        request.host,
        request.port
    );
    Ok(())
}
