//! Blocking list commands against the real server: FIFO among waiters,
//! sub-second timeouts, wake-ups from pushes on other connections and
//! threads, keys deleted, replaced or given another type while clients
//! wait, waiting clients that disconnect or are killed, CLIENT UNBLOCK,
//! SWAPDB, and a served pop surviving `kill -9` like any other change.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redis::Commands;

fn blocked(con: &mut redis::Connection) -> u64 {
    info_u64(con, "clients", "blocked_clients")
}

/// Sends `args` on a new raw connection and waits until the server counts
/// one more blocked client.
fn block_on(server: &TestServer, con: &mut redis::Connection, args: &[&str]) -> Raw {
    let before = blocked(con);
    let mut raw = server.raw();
    raw.send(args);
    wait_until("the client to block", || blocked(con) > before);
    raw
}

fn pair(key: &str, element: &str) -> Reply {
    Reply::Array(vec![b(key), b(element)])
}

#[test]
fn waiters_are_served_first_come_first_served() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut first = block_on(&server, &mut con, &["BLPOP", "q", "0"]);
    let mut second = block_on(&server, &mut con, &["BLPOP", "other", "q", "0"]);
    let mut third = block_on(&server, &mut con, &["BRPOP", "q", "0"]);
    // One push of three elements serves the three in the order they came.
    let _: () = con.rpush("q", &["a", "b", "c"]).unwrap();
    assert_eq!(first.read(), pair("q", "a"));
    assert_eq!(second.read(), pair("q", "b"));
    assert_eq!(third.read(), pair("q", "c"));
    assert_eq!(blocked(&mut con), 0);
    let exists: bool = con.exists("q").unwrap();
    assert!(!exists, "the emptied list is deleted");
    // The client goes on as usual after being served.
    assert_eq!(first.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn timeouts_answer_null_after_the_time_given() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let started = Instant::now();
    assert_eq!(raw.cmd(&["BLPOP", "none", "0.2"]), Reply::NullArray);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(
        raw.cmd(&["BLMOVE", "none", "d", "LEFT", "RIGHT", "0.05"]),
        Reply::NullBulk
    );
    assert_eq!(
        raw.cmd(&["BRPOPLPUSH", "none", "d", "0.05"]),
        Reply::NullBulk
    );
    assert_eq!(
        raw.cmd(&["BLMPOP", "0.05", "2", "a", "b", "LEFT"]),
        Reply::NullArray
    );
    raw.cmd(&["HELLO", "3"]);
    assert_eq!(raw.cmd(&["BRPOP", "none", "0.05"]), Reply::Null);
    // Bad timeouts are errors at once, with Redis 7.4's texts (7.0
    // called one too large to convert negative).
    assert_eq!(
        raw.cmd(&["BLPOP", "none", "-1"]),
        e("ERR timeout is negative")
    );
    assert_eq!(
        raw.cmd(&["BLPOP", "none", "soon"]),
        e("ERR timeout is not a float or out of range")
    );
    assert_eq!(
        raw.cmd(&["BLPOP", "none", "0x7FFFFFFFFFFFFF"]),
        e("ERR timeout is out of range")
    );
}

#[test]
fn a_job_queue_on_brpop_delivers_every_job_once() {
    let server = TestServer::start_with(&["--threads", "2"]);
    const JOBS: usize = 300;
    const WORKERS: usize = 4;
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let mut con = server.client();
            std::thread::spawn(move || {
                let mut done = Vec::new();
                loop {
                    let (_, job): (String, String) = redis::cmd("BRPOP")
                        .arg("jobs")
                        .arg(10)
                        .query(&mut con)
                        .expect("a job before the timeout");
                    if job == "stop" {
                        return done;
                    }
                    done.push(job);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let mut con = server.client();
            std::thread::spawn(move || {
                for n in 0..JOBS / 2 {
                    let _: () = con.lpush("jobs", format!("job-{p}-{n}")).unwrap();
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    let mut con = server.client();
    for _ in 0..WORKERS {
        let _: () = con.lpush("jobs", "stop").unwrap();
    }
    let mut all: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    all.sort();
    let mut expected: Vec<String> = (0..2)
        .flat_map(|p| (0..JOBS / 2).map(move |n| format!("job-{p}-{n}")))
        .collect();
    expected.sort();
    assert_eq!(all, expected);
    assert_eq!(blocked(&mut con), 0);
}

#[test]
fn a_key_of_another_type_or_deleted_keeps_the_client_waiting() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut waiter = block_on(&server, &mut con, &["BLPOP", "k", "0"]);
    let _: () = con.set("k", "a string").unwrap();
    let _: () = con.del("k").unwrap();
    let _: () = con.hset("k", "f", "v").unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(blocked(&mut con), 1, "still waiting");
    // A list moved into place by RENAME wakes it.
    let _: () = con.rpush("elsewhere", "moved").unwrap();
    let _: () = con.rename("elsewhere", "k").unwrap();
    assert_eq!(waiter.read(), pair("k", "moved"));
}

#[test]
fn a_wrong_destination_type_is_an_error_and_the_source_keeps_its_element() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.set("dst", "string").unwrap();
    let mut waiter = block_on(
        &server,
        &mut con,
        &["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"],
    );
    let _: () = con.rpush("src", "x").unwrap();
    assert_eq!(
        waiter.read(),
        e("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(con.lrange::<_, Vec<String>>("src", 0, -1).unwrap(), ["x"]);
    // And a good destination receives it.
    let mut mover = block_on(
        &server,
        &mut con,
        &["BLMOVE", "empty", "list", "RIGHT", "LEFT", "0"],
    );
    let _: () = con.rpush("empty", "y").unwrap();
    assert_eq!(mover.read(), b("y"));
    assert_eq!(con.lrange::<_, Vec<String>>("list", 0, -1).unwrap(), ["y"]);
}

#[test]
fn a_waiter_that_leaves_takes_nothing_with_it() {
    let server = TestServer::start();
    let mut con = server.client();
    let gone = block_on(&server, &mut con, &["BLPOP", "q", "0"]);
    drop(gone);
    wait_until("the hangup to be noticed", || blocked(&mut con) == 0);
    let mut killed = block_on(&server, &mut con, &["BRPOP", "q", "0"]);
    let id = {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
        let line = list.lines().find(|l| l.contains("flags=b")).unwrap();
        line.split(' ').next().unwrap()["id=".len()..].to_owned()
    };
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut con)
        .unwrap();
    assert!(killed.is_closed());
    assert_eq!(blocked(&mut con), 0);
    let _: () = con.rpush("q", "kept").unwrap();
    assert_eq!(con.llen::<_, usize>("q").unwrap(), 1);
}

#[test]
fn client_unblock_answers_as_a_timeout_or_an_error() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut waiter = block_on(&server, &mut con, &["BLPOP", "q", "0"]);
    let id = |con: &mut redis::Connection| -> i64 {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
        let line = list.lines().find(|l| l.contains("flags=b")).unwrap();
        line.split(' ').next().unwrap()["id=".len()..]
            .parse()
            .unwrap()
    };
    let target = id(&mut con);
    let unblock = |con: &mut redis::Connection, how: &str| -> i64 {
        redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(target)
            .arg(how)
            .query(con)
            .unwrap()
    };
    assert_eq!(unblock(&mut con, "TIMEOUT"), 1);
    assert_eq!(waiter.read(), Reply::NullArray);
    assert_eq!(unblock(&mut con, "TIMEOUT"), 0, "not blocked any more");
    waiter.send(&["BLPOP", "q", "0"]);
    wait_until("the client to block", || blocked(&mut con) == 1);
    assert_eq!(unblock(&mut con, "ERROR"), 1);
    assert_eq!(
        waiter.read(),
        e("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    );
    let bad: redis::RedisResult<i64> = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(target)
        .arg("LATER")
        .query(&mut con);
    assert!(bad.unwrap_err().to_string().contains("TIMEOUT or ERROR"));
}

#[test]
fn swapdb_wakes_a_client_waiting_on_the_other_database() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut waiter = block_on(&server, &mut con, &["BLPOP", "k", "0"]);
    let _: () = redis::cmd("SELECT").arg(1).query(&mut con).unwrap();
    let _: () = con.rpush("k", "from-db1").unwrap();
    let _: () = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut con).unwrap();
    assert_eq!(waiter.read(), pair("k", "from-db1"));
}

#[test]
fn a_served_pop_is_durable() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut waiter = block_on(
        &server,
        &mut con,
        &["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "2"],
    );
    let _: () = con.rpush("q", &["a", "b", "c"]).unwrap();
    assert_eq!(
        waiter.read(),
        Reply::Array(vec![b("q"), Reply::Array(vec![b("a"), b("b")])])
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    assert_eq!(con.lrange::<_, Vec<String>>("q", 0, -1).unwrap(), ["c"]);
}

#[test]
fn a_blocking_command_after_a_cold_read_in_a_pipeline_keeps_reply_order() {
    let server = TestServer::start_with(&["--maxmemory", "4mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    fill(&mut con, 3000, 1, 4000);
    let cold = (0..3000u64)
        .find(|&i| on_disk(&mut con, &key(i)))
        .expect("a value on disk");
    // The GET parks the pipeline until its value is read; the BLPOP after
    // it then blocks, and the PING waits behind it.
    let mut raw = server.raw();
    let wire = [
        Raw::encode(&[b"GET", key(cold).as_bytes()]),
        Raw::encode(&[b"BLPOP", b"q", b"0"]),
        Raw::encode(&[b"PING"]),
    ]
    .concat();
    raw.send_raw(&wire);
    assert_eq!(raw.read(), Reply::Bulk(value(cold, 1, 4000)));
    wait_until("the client to block", || blocked(&mut con) == 1);
    let _: () = con.rpush("q", "x").unwrap();
    assert_eq!(raw.read(), pair("q", "x"));
    assert_eq!(raw.read(), Reply::Simple("PONG".into()));
}

#[test]
fn clients_a_command_woke_are_served_before_it_answers() {
    // As in Redis: once the push has its reply, the BLMOVE it woke has
    // moved the element, and the BLMOVE that move woke has moved it on
    // (Redis' "Linked LMOVEs"); a push of two elements serves both of
    // its waiters before it answers.
    let server = TestServer::start();
    let mut con = server.client();
    for round in 0..20 {
        let _: () = redis::cmd("DEL")
            .arg(&["l1{t}", "l2{t}", "l3{t}", "q{t}"])
            .query(&mut con)
            .unwrap();
        let mut first = block_on(
            &server,
            &mut con,
            &["BLMOVE", "l1{t}", "l2{t}", "LEFT", "RIGHT", "0"],
        );
        let mut second = block_on(
            &server,
            &mut con,
            &["BLMOVE", "l2{t}", "l3{t}", "RIGHT", "LEFT", "0"],
        );
        let _: () = con.rpush("l1{t}", "foo").unwrap();
        let l1: Vec<String> = con.lrange("l1{t}", 0, -1).unwrap();
        let l2: Vec<String> = con.lrange("l2{t}", 0, -1).unwrap();
        let l3: Vec<String> = con.lrange("l3{t}", 0, -1).unwrap();
        assert_eq!(
            (l1, l2, l3),
            (vec![], vec![], vec!["foo".to_string()]),
            "round {round}"
        );
        assert_eq!(first.read(), b("foo"));
        assert_eq!(second.read(), b("foo"));

        let mut a = block_on(&server, &mut con, &["BLPOP", "q{t}", "0"]);
        let mut c = block_on(&server, &mut con, &["BLPOP", "q{t}", "0"]);
        let _: () = con.rpush("q{t}", &["x", "y"]).unwrap();
        let left: i64 = con.llen("q{t}").unwrap();
        assert_eq!(
            left, 0,
            "round {round}: both waiters popped before the push answered"
        );
        assert_eq!(a.read(), pair("q{t}", "x"));
        assert_eq!(c.read(), pair("q{t}", "y"));
    }
}

#[test]
fn a_pipelined_push_serves_the_waiting_client_before_the_next_command() {
    // Redis' "Unblock fairness is kept while pipelining": LPUSH then
    // BLPOP in one pipeline serve the client that was waiting, and the
    // BLPOP waits.
    let server = TestServer::start();
    let mut con = server.client();
    let mut waiting = block_on(&server, &mut con, &["BLPOP", "q", "0"]);
    let mut pipeline = server.raw();
    let mut bytes = Raw::encode(&[b"LPUSH", b"q", b"1"]);
    bytes.extend(Raw::encode(&[b"BLPOP", b"q", b"0"]));
    pipeline.send_raw(&bytes);
    assert_eq!(waiting.read(), pair("q", "1"));
    assert_eq!(pipeline.read(), i(1));
    wait_until("the pipelined BLPOP to wait", || blocked(&mut con) == 1);
    let _: () = con.lpush("q", "2").unwrap();
    assert_eq!(pipeline.read(), pair("q", "2"));
}

#[test]
fn a_client_woken_for_one_key_leaves_another_keys_elements_to_its_first_waiter() {
    // Redis' "Unblock fairness is kept during nested unblock": one EXEC
    // pushes to l1 and l2; the BRPOPLPUSH on l1 moves its element to l3,
    // which wakes the BLMPOP on l2 and l3. That BLMPOP blocked on l2
    // after the BLPOP did, so l2's element is the BLPOP's and the
    // BLMPOP takes l3's, whichever of the two runs first.
    let server = TestServer::start();
    let mut con = server.client();
    for round in 0..20 {
        let _: () = redis::cmd("DEL")
            .arg(&["l1{t}", "l2{t}", "l3{t}"])
            .query(&mut con)
            .unwrap();
        let mut mover = block_on(&server, &mut con, &["BRPOPLPUSH", "l1{t}", "l3{t}", "0"]);
        let mut first = block_on(&server, &mut con, &["BLPOP", "l2{t}", "0"]);
        let mut second = block_on(
            &server,
            &mut con,
            &["BLMPOP", "0", "2", "l2{t}", "l3{t}", "LEFT", "COUNT", "1"],
        );
        let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
        let _: () = redis::cmd("LPUSH")
            .arg("l1{t}")
            .arg("1")
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("LPUSH")
            .arg("l2{t}")
            .arg("2")
            .query(&mut con)
            .unwrap();
        let _: redis::Value = redis::cmd("EXEC").query(&mut con).unwrap();
        assert_eq!(mover.read(), b("1"), "round {round}");
        assert_eq!(first.read(), pair("l2{t}", "2"), "round {round}");
        assert_eq!(
            second.read(),
            Reply::Array(vec![b("l3{t}"), Reply::Array(vec![b("1")])]),
            "round {round}"
        );
        assert_eq!(blocked(&mut con), 0, "round {round}");
    }
}

#[test]
fn a_blocking_command_shows_in_the_slow_log_once_served() {
    // Redis' "SLOWLOG - blocking command is reported only after
    // unblocked": not when it blocks, nor when a wake-up finds nothing,
    // and once when it is served.
    let server = TestServer::start();
    let mut con = server.client();
    config_set(&mut con, "slowlog-log-slower-than", "0");
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut con).unwrap();
    let blpops = |con: &mut redis::Connection| {
        let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(100)
            .query(con)
            .unwrap();
        format!("{entries:?}").matches("BLPOP").count()
    };
    let mut waiting = block_on(&server, &mut con, &["BLPOP", "q", "0"]);
    let _: () = con.set("q", "a string wakes it, and it waits on").unwrap();
    let _: () = con.del("q").unwrap();
    assert_eq!(blpops(&mut con), 0);
    let _: () = con.lpush("q", "1").unwrap();
    assert_eq!(waiting.read(), pair("q", "1"));
    assert_eq!(blpops(&mut con), 1);
}
