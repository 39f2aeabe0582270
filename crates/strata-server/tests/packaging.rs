//! The files that run Strata as a service and in a container:
//! `packaging/strata.service` passes `systemd-analyze verify` and its
//! command line starts the server; the `Dockerfile` builds and its image
//! answers, where a Docker engine runs (skipped otherwise, saying so).

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn available(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[test]
fn the_systemd_unit_verifies_and_its_command_line_starts_the_server() {
    let unit = std::fs::read_to_string(Path::new(ROOT).join("packaging/strata.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(words[0], "/usr/local/bin/strata-server");
    assert_eq!(words[1], "/etc/strata/strata.conf");
    // CONFIG REWRITE writes a file beside the config: ProtectSystem=full
    // alone would make /etc/strata read-only to it.
    assert!(
        unit.lines().any(|l| l == "ReadWritePaths=/etc/strata"),
        "{unit}"
    );
    // The unit's arguments, with the binary, config and directory moved
    // to this build and a temporary directory.
    let dir = temp_dir();
    let conf = format!("{ROOT}/strata.conf");
    let mut args: Vec<String> = vec![conf.clone()];
    let mut rest = words[2..].iter();
    while let Some(word) = rest.next() {
        args.push(word.to_string());
        if *word == "--dir" {
            rest.next();
            args.push(dir.join("data").display().to_string());
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = TestServer::spawn(dir.clone(), &args, None, READY);
    assert_eq!(server.raw().cmd(&["PING"]), Reply::simple("PONG"));
    if !available("systemd-analyze", &["--version"]) {
        // CI installs systemd: there a missing tool must not pass silently.
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is not installed, and CI must check the unit"
        );
        eprintln!("skipped the unit check: systemd-analyze is not installed");
        return;
    }
    let checked = temp_dir();
    std::fs::create_dir_all(&checked).unwrap();
    let copy = checked.join("strata.service");
    let binary = env!("CARGO_BIN_EXE_strata-server");
    std::fs::write(&copy, unit.replace("/usr/local/bin/strata-server", binary)).unwrap();
    let (code, output) = run_bounded(Command::new("systemd-analyze").arg("verify").arg(&copy));
    assert_eq!(code, 0, "systemd-analyze verify: {output}");
}

#[test]
#[ignore = "needs a Docker engine, which neither CI nor this project's machines run; run with --ignored where `docker info` answers"]
fn the_docker_image_builds_and_answers() {
    assert!(
        available("docker", &["info"]),
        "no Docker engine answers here (`docker info` fails)"
    );
    let tag = format!("strata-test-{}", std::process::id());
    // A build compiles the workspace: minutes, not TIMEOUT's seconds. Its
    // output goes to a file (a pipe nobody reads would stall it).
    let log_dir = temp_dir();
    std::fs::create_dir_all(&log_dir).unwrap();
    let log_path = log_dir.join("docker-build.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut build = Command::new("docker")
        .args(["build", "-t", &tag, ROOT])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1800);
    let status = loop {
        if let Some(status) = build.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = build.kill();
            panic!("docker build did not finish in 30 minutes");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(status.success(), "docker build: {output}");
    let (code, output) = run_bounded(Command::new("docker").args([
        "run",
        "--rm",
        "--entrypoint",
        "strata-server",
        &tag,
        "--version",
    ]));
    let _ = Command::new("docker").args(["rmi", "-f", &tag]).status();
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("Strata server"), "{output}");
}

/// The Dockerfile's HEALTHCHECK command, run by bash outside Docker on
/// the port it names moved to a test server's: it passes while the server
/// answers PING and fails once the server is gone (and with a password
/// set, as its comment says).
#[test]
fn the_docker_healthcheck_passes_only_while_the_server_answers() {
    let dockerfile = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    let json = dockerfile
        .lines()
        .find_map(|line| line.trim().strip_prefix("CMD [\"bash\""))
        .map(|rest| format!("[\"bash\"{rest}"))
        .expect("a HEALTHCHECK CMD run by bash");
    let command: Vec<String> = serde_json::from_str(&json).unwrap();
    assert_eq!(command[..2], ["bash", "-c"]);
    assert!(command[2].contains("/6379"), "{}", command[2]);
    let server = TestServer::start();
    let check = |port: u16| {
        let script = command[2].replace("/6379", &format!("/{port}"));
        run_bounded(Command::new("bash").arg("-c").arg(script)).0
    };
    assert_eq!(check(server.port), 0, "healthy while it answers");
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["CONFIG", "SET", "requirepass", "pw"]), ok());
    assert_ne!(check(server.port), 0, "PING answers -NOAUTH");
    let port = server.port;
    drop(raw);
    drop(server);
    assert_ne!(check(port), 0, "unhealthy once the server is gone");
}

/// `supervised systemd`: readiness and stopping go to $NOTIFY_SOCKET in
/// sd_notify's protocol (what a `Type=notify` unit waits for).
#[test]
fn supervised_systemd_notifies_readiness_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = temp_dir();
    let socket_path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--supervised",
            "systemd",
            "--dir",
        ])
        .arg(dir.join("data"))
        .env("NOTIFY_SOCKET", &socket_path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    while !received.iter().any(|m: &String| m.contains("READY=1")) {
        let n = socket
            .recv(&mut buffer)
            .expect("a notification before the timeout");
        received.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
    }
    assert!(received[0].starts_with("STATUS=Loading"), "{received:?}");
    assert!(
        received
            .last()
            .unwrap()
            .contains("STATUS=Ready to accept connections")
    );
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = socket
        .recv(&mut buffer)
        .expect("STOPPING before the timeout");
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("STOPPING=1"));
    let status = wait_bounded(&mut child);
    assert!(status.success(), "{status}");
}
