//! `unixsocket` / `unixsocketperm`: the server listens on a unix socket
//! beside TCP; clients (the `redis` crate, redis-cli) use it; the file
//! gets its mode, replaces a stale one, and is removed at shutdown.

mod common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use common::*;

#[test]
fn clients_use_the_unix_socket_beside_tcp() {
    let dir = temp_dir();
    let path = dir.join("strata.sock");
    // A stale file where the socket goes is replaced, as Redis does.
    std::fs::write(&path, b"stale").unwrap();
    let path_text = path.display().to_string();
    let server = TestServer::start_with(&["--unixsocket", &path_text, "--unixsocketperm", "700"]);
    server.wait_for_log("Listening on unix socket");
    let metadata = std::fs::metadata(&path).unwrap();
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o700);

    let client = redis::Client::open(format!("redis+unix://{path_text}")).unwrap();
    let mut con = client.get_connection_with_timeout(TIMEOUT).unwrap();
    let () = redis::cmd("SET")
        .arg("k")
        .arg("via unix")
        .query(&mut con)
        .unwrap();
    let mut tcp = server.raw();
    assert_eq!(
        tcp.cmd(&["GET", "k"]),
        b("via unix"),
        "one dataset for both"
    );
    let list: String = redis::cmd("CLIENT").arg("INFO").query(&mut con).unwrap();
    assert!(
        list.contains(&format!("addr={path_text}:0 laddr={path_text} ")),
        "{list}"
    );
    // A unix-socket client is local: `enable-debug-command local` lets it in.
    let () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        tcp.cmd(&["CONFIG", "GET", "unixsocketperm"]).as_array(),
        &[b("unixsocketperm"), b("700")]
    );
    assert_eq!(
        tcp.cmd(&["CONFIG", "SET", "unixsocket", "/tmp/other.sock"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'unixsocket') - can't set immutable config"
        )
    );
    tcp.send(&["SHUTDOWN", "NOSAVE"]);
    let mut server = server;
    assert!(server.wait_exit().success());
    assert!(!path.exists(), "the socket file is removed at shutdown");
}
