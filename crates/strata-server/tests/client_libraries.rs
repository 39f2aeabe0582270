//! Real client libraries, used unchanged, against the real server:
//! redis-py's transactional `pipeline()`, `transaction()` with WATCH,
//! `Lock` (EVALSHA), `register_script`, pub/sub and keyspace
//! notifications (`tests/clients/redis_py_smoke.py`). CI installs
//! Debian's python3-redis; elsewhere the test is skipped, saying so, when
//! no Python with redis-py is found.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// A Python interpreter that can `import redis`.
fn python_with_redis() -> Option<String> {
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find_map(|python| {
            let found = Command::new(python)
                .args(["-c", "import redis"])
                .status()
                .is_ok_and(|status| status.success());
            found.then(|| python.to_owned())
        })
}

#[test]
fn redis_py_pipelines_locks_scripts_and_pubsub() {
    let Some(python) = python_with_redis() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-py (python3-redis) is not installed, and CI must run the redis-py smoke test"
        );
        eprintln!("skipped: no python3 with redis-py (apt install python3-redis)");
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients/redis_py_smoke.py")
        .canonicalize()
        .unwrap();
    let server = TestServer::start_with(&["--threads", "2"]);
    let (code, output) = run_bounded(
        Command::new(&python)
            .arg(&script)
            .arg(server.port.to_string()),
    );
    assert_eq!(code, 0, "redis-py smoke test failed:\n{output}");
    let last = output.lines().last().unwrap_or_default();
    assert!(last.starts_with("ok "), "{output}");
    let checks: u32 = last[3..].trim().parse().unwrap();
    assert!(checks >= 18, "only {checks} checks ran:\n{output}");
}
