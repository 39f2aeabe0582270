//! strata-bench's open loop against a server that answers at once, in a
//! test binary of its own: cargo runs test binaries one after another, so
//! no other test competes for this machine's two cores while it measures
//! latencies of a tenth of a millisecond.

mod common;

use common::bench;

/// A server that answers every request at once (`+OK`), one thread per
/// connection: what is left of a latency against it is the load
/// generator's own.
fn instant_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                stream.set_nodelay(true).unwrap();
                let mut parser = strata_resp::RequestParser::new();
                let limits = strata_resp::Limits::default();
                let mut input = bytes::BytesMut::new();
                let mut chunk = [0u8; 64 * 1024];
                loop {
                    let read = match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(read) => read,
                    };
                    input.extend_from_slice(&chunk[..read]);
                    let mut replies = Vec::new();
                    while let Ok(Some(_)) = parser.next(&mut input, &limits) {
                        replies.extend_from_slice(b"+OK\r\n");
                    }
                    if stream.write_all(&replies).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// The open loop sends within microseconds of each request's due time
/// (issue 13): at a low rate, where nothing queues, its median latency
/// is the closed loop's, within 0.05 ms. With tokio's millisecond timer
/// on the send path it was about 0.6 ms more.
/// The best closed-loop p50 above which the machine is too busy to judge
/// timing of a few hundredths of a millisecond.
const QUIET_CLOSED_LOOP_P50_MS: f64 = 0.15;

#[test]
fn open_loop_at_a_low_rate_measures_what_the_closed_loop_does() {
    let port = instant_server();
    let p50_ms = |args: &[&str]| {
        let mut all = vec!["-t", "1", "-c", "1", "--ratio=1:0", "--key-maximum=100"];
        all.extend_from_slice(args);
        let totals = bench(port, &all).totals();
        assert_eq!(totals.errors, 0);
        totals.latency.value_at_quantile(0.5) as f64 / 1000.0
    };
    // Closed and open runs alternate, so both see the same neighbours,
    // and each side keeps its best run (a busy machine can only make a run
    // slower); up to eight pairs, stopping once the best runs agree.
    let (mut closed, mut open) = (f64::MAX, f64::MAX);
    for _ in 0..8 {
        closed = closed.min(p50_ms(&["--requests=2000"]));
        open = open.min(p50_ms(&["--rate=2000", "--test-time=1"]));
        if open - closed <= 0.05 {
            break;
        }
    }
    // Sub-0.05 ms timing can only be judged on a quiet machine: when even
    // the best closed-loop run is slow (this debug build answers in
    // 0.06–0.10 ms on an idle one), neighbours decide when any sleeping
    // thread runs, whatever its timer. Said, not silently passed.
    if open - closed > 0.05 && closed > QUIET_CLOSED_LOOP_P50_MS {
        eprintln!(
            "machine too busy to judge the open loop's precision (closed-loop p50 {closed:.3} ms, open {open:.3} ms): not asserted"
        );
        return;
    }
    // The other way a machine can be too busy: a closed loop never lets
    // its CPU idle, but the open loop sleeps between sends, and on a
    // virtual machine with busy neighbours an idle virtual CPU can take
    // milliseconds to run again (seen here: closed loop 0.05–0.10 ms, open
    // loop 2.0 ms in every one of eight runs, for a quarter of a minute).
    // No timer can do better than the machine wakes a plain sleeping
    // thread, so that is measured too.
    let wake = wake_lateness_ms();
    if open - closed > 0.05 && wake > 0.05 {
        eprintln!(
            "this machine wakes sleeping threads {wake:.3} ms late (median): the open loop's precision (p50 {open:.3} ms against closed-loop {closed:.3} ms) cannot be judged here: not asserted"
        );
        return;
    }
    assert!(
        open - closed <= 0.05,
        "open-loop p50 {open:.3} ms against closed-loop {closed:.3} ms"
    );
}

/// Median lateness, in milliseconds, of a plain thread sleeping 0.4 ms
/// (with the same 1 ns timer slack the pacer asks for): how late the
/// machine itself wakes a sleeping thread.
fn wake_lateness_ms() -> f64 {
    std::thread::spawn(|| {
        // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's
        // timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        let asked = std::time::Duration::from_micros(400);
        let mut late: Vec<f64> = (0..200)
            .map(|_| {
                let started = std::time::Instant::now();
                std::thread::sleep(asked);
                (started.elapsed() - asked).as_secs_f64() * 1000.0
            })
            .collect();
        late.sort_by(f64::total_cmp);
        late[late.len() / 2]
    })
    .join()
    .unwrap()
}
