//! Real client libraries, used unchanged, against the real server:
//! - redis-py's transactional `pipeline()`, `transaction()` with WATCH,
//!   `Lock` (EVALSHA), `register_script`, pub/sub and keyspace
//!   notifications (`tests/clients/redis_py_smoke.py`); CI installs
//!   Debian's python3-redis and the test fails under CI without it;
//! - go-redis (`TxPipelined`, `Watch`, `Script`, `FCall`, pub/sub;
//!   `tests/clients/go-redis`), ioredis (`multi()`, `watch()`,
//!   `defineCommand`, `fcall`, pub/sub; `tests/clients/ioredis`) and Jedis
//!   (`multi()`, `watch()`, EVALSHA, `fcall`, pub/sub, WATCH transfers
//!   from threads; `tests/clients/jedis`, which also holds a Lettuce
//!   stream consumer group over RESP3: two consumers, XACK, XPENDING,
//!   XCLAIM, XAUTOCLAIM, a blocked XREADGROUP), each built from its registry
//!   (the Go module proxy, npm, Maven Central) with the machine's Go, Node
//!   or Maven. CI installs Node.js, npm, a JDK and Maven from Debian, and
//!   the ioredis and Jedis tests fail under CI without them. The go-redis
//!   test is ignored by default: it needs Go 1.26, and Debian 12, CI's
//!   only source of packages, ships 1.19; run it with `--ignored` where a
//!   recent Go is installed;
//! - two job queues built on streams, as their users run them: BullMQ
//!   (Queue, Worker, QueueEvents over XREAD BLOCK, delayed, retried and
//!   scheduled jobs; `tests/clients/bullmq`, from npm) and RQ (enqueue,
//!   dependencies, scheduling, retries, a forking burst worker, results
//!   kept in a stream per job; `tests/clients/rq_smoke.py`, RQ from PyPI
//!   into a fresh virtualenv). Both fail under CI without Node.js or
//!   python3's venv.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// Skips a test whose toolchain is missing, saying so; under CI (which
/// installs it) that is a failure instead: a missing tool must never pass
/// silently there.
fn skip_without(tool: &str, hint: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} is not installed, and CI must run this test ({hint})"
    );
    eprintln!("skipped: no {tool} ({hint})");
}

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
fn redis_py_pipelines_locks_scripts_pubsub_and_acl_users() {
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
    assert!(checks >= 24, "only {checks} checks ran:\n{output}");
}

/// How long a client's build may take (the first one downloads it).
const BUILD_LIMIT: Duration = Duration::from_secs(600);
/// How long a smoke run may take.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Whether `program` runs (`args` being a harmless version query).
fn have(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `tests/clients/<name>` in the repository.
fn client_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients")
        .join(name)
        .canonicalize()
        .unwrap()
}

/// Copies the files `names` of `from` into a fresh directory (builds
/// happen there, never in the source tree).
fn copy_to_temp(from: &Path, names: &[&str]) -> PathBuf {
    let dir = temp_dir();
    for name in names {
        let target = dir.join(name);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(from.join(name), target).unwrap();
    }
    dir
}

/// Runs a built smoke client against a fresh server and checks that it
/// ended with `ok <n>` for at least `min_checks` checks.
fn run_smoke(what: &str, command: &mut Command, min_checks: u32) {
    let server = TestServer::start_with(&["--threads", "2"]);
    let (code, output) = common::run_within(command.arg(server.port.to_string()), RUN_LIMIT);
    assert_eq!(code, 0, "{what} smoke test failed:\n{output}");
    let last = output
        .lines()
        .rfind(|line| line.starts_with("ok "))
        .unwrap_or_default();
    let checks: u32 = last.get(3..).unwrap_or("0").trim().parse().unwrap_or(0);
    assert!(
        checks >= min_checks,
        "only {checks} {what} checks ran:\n{output}"
    );
}

#[test]
#[ignore = "needs Go 1.26 (tests/clients/go-redis/go.mod); Debian 12, CI's package source, has 1.19"]
fn go_redis_tx_pipelined_watch_scripts_and_functions() {
    if !have("go", &["version"]) {
        skip_without("Go toolchain", "install Go 1.26 or later");
        return;
    }
    let source = client_dir("go-redis");
    let bin = temp_dir().join("go-redis-smoke");
    let (code, output) = common::run_within(
        Command::new("go")
            .args(["build", "-mod=readonly", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(&source),
        BUILD_LIMIT,
    );
    assert_eq!(code, 0, "go build failed:\n{output}");
    run_smoke("go-redis", &mut Command::new(&bin), 13);
    let _ = std::fs::remove_dir_all(bin.parent().unwrap());
}

#[test]
fn ioredis_multi_watch_define_command_and_functions() {
    if !have("node", &["--version"]) || !have("npm", &["--version"]) {
        skip_without("Node.js with npm", "apt install nodejs npm");
        return;
    }
    let dir = copy_to_temp(
        &client_dir("ioredis"),
        &["package.json", "package-lock.json", "smoke.js"],
    );
    let (code, output) = common::run_within(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir),
        BUILD_LIMIT,
    );
    assert_eq!(code, 0, "npm ci failed:\n{output}");
    run_smoke(
        "ioredis",
        Command::new("node").arg(dir.join("smoke.js")),
        14,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn jedis_multi_watch_scripts_and_functions_and_a_lettuce_consumer_group() {
    if !have("mvn", &["-v"]) || !have("java", &["-version"]) {
        skip_without("Java with Maven", "apt install default-jdk-headless maven");
        return;
    }
    let dir = copy_to_temp(
        &client_dir("jedis"),
        &[
            "pom.xml",
            "src/main/java/Smoke.java",
            "src/main/java/LettuceStreams.java",
        ],
    );
    let classpath_file = dir.join("classpath.txt");
    let (code, output) = common::run_within(
        Command::new("mvn")
            .args(["-q", "-B", "compile", "dependency:build-classpath"])
            .arg(format!("-Dmdep.outputFile={}", classpath_file.display()))
            .current_dir(&dir),
        BUILD_LIMIT,
    );
    assert_eq!(code, 0, "mvn failed:\n{output}");
    let classpath = std::fs::read_to_string(&classpath_file).unwrap();
    let classpath = format!(
        "{}:{}",
        dir.join("target/classes").display(),
        classpath.trim()
    );
    run_smoke(
        "Jedis",
        Command::new("java").arg("-cp").arg(&classpath).arg("Smoke"),
        14,
    );
    // Lettuce (RESP3): a stream consumer group, from the same project.
    run_smoke(
        "Lettuce streams",
        Command::new("java")
            .arg("-cp")
            .arg(&classpath)
            .arg("LettuceStreams"),
        15,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bullmq_queue_worker_events_delays_retries_and_schedulers() {
    if !have("node", &["--version"]) || !have("npm", &["--version"]) {
        skip_without("Node.js with npm", "apt install nodejs npm");
        return;
    }
    let dir = copy_to_temp(
        &client_dir("bullmq"),
        &["package.json", "package-lock.json", "smoke.js"],
    );
    let (code, output) = common::run_within(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir),
        BUILD_LIMIT,
    );
    assert_eq!(code, 0, "npm ci failed:\n{output}");
    run_smoke("BullMQ", Command::new("node").arg(dir.join("smoke.js")), 27);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rq_jobs_dependencies_schedules_retries_and_results() {
    if !have("python3", &["-c", "import venv, ensurepip"]) {
        skip_without("python3 with venv", "apt install python3-venv");
        return;
    }
    let dir = copy_to_temp(&client_dir(""), &["rq_smoke.py", "rq_smoke_jobs.py"]);
    let venv = dir.join("venv");
    let (code, output) = common::run_within(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        BUILD_LIMIT,
    );
    assert_eq!(code, 0, "python3 -m venv failed:\n{output}");
    let (code, output) = common::run_within(
        Command::new(venv.join("bin/pip")).args(["install", "--quiet", "rq==2.12.0"]),
        BUILD_LIMIT,
    );
    assert_eq!(code, 0, "pip install rq failed:\n{output}");
    run_smoke(
        "RQ",
        Command::new(venv.join("bin/python"))
            .arg(dir.join("rq_smoke.py"))
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        40,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sidekiq_jobs_retries_schedules_stats_and_no_eviction_warning() {
    if !have("ruby", &["-e", "require 'sidekiq'"]) {
        skip_without("Sidekiq", "apt install ruby-sidekiq");
        return;
    }
    let dir = copy_to_temp(
        &client_dir(""),
        &["sidekiq_smoke.rb", "sidekiq_smoke_jobs.rb"],
    );
    run_smoke(
        "Sidekiq",
        Command::new("ruby")
            .arg(dir.join("sidekiq_smoke.rb"))
            .current_dir(&dir)
            .env("SIDEKIQ_SMOKE_DIR", &dir),
        20,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
