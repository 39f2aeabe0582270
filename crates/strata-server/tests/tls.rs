//! TLS on `tls-port` beside the plain port: certificates made by openssl
//! in the test, a rustls client pipelining big values, `redis-cli --tls`,
//! client certificates required / optional / not asked, and start-up
//! refusing settings it cannot honour.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;

/// A CA, a server certificate for localhost / 127.0.0.1 and a client
/// certificate, in `dir`; None (off CI) when openssl is missing.
fn make_certificates(dir: &Path) -> Option<()> {
    let run = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        match status {
            Ok(status) => {
                assert!(status.success(), "openssl {args:?}");
                Some(())
            }
            Err(_) if std::env::var_os("CI").is_none() => None,
            Err(e) => panic!("openssl must run under CI: {e}"),
        }
    };
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=Strata test CA",
    ])?;
    for who in ["server", "client"] {
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{who}.key"),
            "-out",
            &format!("{who}.csr"),
            "-subj",
            &format!("/CN={who}"),
        ])?;
        run(&[
            "x509",
            "-req",
            "-in",
            &format!("{who}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{who}.crt"),
            "-days",
            "2",
            "-extfile",
            &format!("{who}.ext"),
        ])?;
    }
    Some(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Tls {
    dir: PathBuf,
    server: TestServer,
    port: u16,
}

impl Tls {
    /// A server with TLS on a free port beside a plain one, `extra`
    /// settings added.
    fn start(extra: &[&str]) -> Option<Tls> {
        Self::start_with(extra, true)
    }

    /// The same; without `plain`, TLS only (`port 0`, as in Redis).
    fn start_with(extra: &[&str], plain: bool) -> Option<Tls> {
        let dir = temp_dir();
        make_certificates(&dir)?;
        let port = free_port();
        let file = |name: &str| dir.join(name).display().to_string();
        let (cert, key, ca) = (file("server.crt"), file("server.key"), file("ca.crt"));
        let port_text = port.to_string();
        // A plain port of its own: `port 0` beside `tls-port` is TLS only.
        let plain_port = if plain { free_port() } else { 0 }.to_string();
        let mut args = vec![
            "--port",
            &plain_port,
            "--tls-port",
            &port_text,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
        ];
        args.extend_from_slice(extra);
        let server = if plain {
            TestServer::start_with(&args)
        } else {
            let marker = "Ready to accept connections tls on ";
            TestServer::spawn(temp_dir(), &args, None, marker)
        };
        server.wait_for_log(&format!("Listening on tls 127.0.0.1:{port}"));
        Some(Tls { dir, server, port })
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// A rustls client, with the client certificate or without.
    fn connect(
        &self,
        with_certificate: bool,
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(self.file("ca.crt")).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = if with_certificate {
            let certs: Vec<_> = CertificateDer::pem_file_iter(self.file("client.crt"))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(self.file("client.key")).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        } else {
            builder.with_no_client_auth()
        };
        let name = ServerName::try_from("localhost").unwrap();
        let session = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let socket = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        socket.set_read_timeout(Some(TIMEOUT)).unwrap();
        rustls::StreamOwned::new(session, socket)
    }
}

/// Reads one RESP reply from `stream` (simple, error, integer or bulk).
fn read_reply(stream: &mut impl Read) -> std::io::Result<Reply> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        stream.read_exact(&mut byte)?;
        line.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    Ok(match line[0] {
        b'+' => Reply::Simple(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(text.parse().unwrap()),
        b'$' => {
            let len: i64 = text.parse().unwrap();
            if len < 0 {
                Reply::NullBulk
            } else {
                let mut data = vec![0u8; len as usize + 2];
                stream.read_exact(&mut data)?;
                data.truncate(len as usize);
                Reply::Bulk(data)
            }
        }
        other => panic!("unexpected reply type {}", other as char),
    })
}

#[test]
fn tls_serves_pipelines_of_big_values_beside_the_plain_port() {
    let Some(tls) = Tls::start(&[]) else {
        eprintln!("openssl not installed: TLS test skipped");
        return;
    };
    let mut stream = tls.connect(true);
    // 200 pipelined SETs of 100 KB each, then their GETs: more than the
    // session's own buffer, so output waits in the connection's.
    let value = |n: usize| format!("{n:06}").repeat(100_000 / 6).into_bytes();
    let mut request = Vec::new();
    for n in 0..200 {
        request.extend_from_slice(&Raw::encode(&[
            b"SET",
            format!("k{n}").as_bytes(),
            &value(n),
        ]));
    }
    for n in 0..200 {
        request.extend_from_slice(&Raw::encode(&[b"GET", format!("k{n}").as_bytes()]));
    }
    // The SETs' replies are small and the GETs are small requests, so
    // writing it all before reading cannot fill both directions' buffers.
    stream.write_all(&request).unwrap();
    stream.flush().unwrap();
    for _ in 0..200 {
        assert_eq!(read_reply(&mut stream).unwrap(), ok());
    }
    for n in 0..200 {
        assert_eq!(
            read_reply(&mut stream).unwrap(),
            Reply::Bulk(value(n)),
            "k{n}"
        );
    }
    // The plain port serves the same data.
    let mut plain = tls.server.raw();
    assert_eq!(plain.cmd(&["STRLEN", "k7"]), i(value(7).len() as i64));
    // Without a client certificate (tls-auth-clients yes by default) the
    // handshake fails.
    let mut anonymous = tls.connect(false);
    let refused = anonymous
        .write_all(&Raw::encode(&[b"PING"]))
        .and_then(|()| anonymous.flush())
        .and_then(|()| read_reply(&mut anonymous));
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(plain.cmd(&["PING"]), Reply::simple("PONG"));
}

#[test]
fn redis_cli_speaks_tls_and_client_certificates_can_be_optional() {
    let Some(tls) = Tls::start(&["--tls-auth-clients", "optional"]) else {
        eprintln!("openssl not installed: TLS test skipped");
        return;
    };
    let Ok(output) = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &tls.port.to_string(),
            "--tls",
            "--cacert",
            &tls.file("ca.crt"),
        ])
        .args([
            "--cert",
            &tls.file("client.crt"),
            "--key",
            &tls.file("client.key"),
        ])
        .args(["SET", "via", "redis-cli"])
        .output()
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-cli must run under CI"
        );
        eprintln!("redis-cli not installed: skipped");
        return;
    };
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "OK");
    // Optional: a client without a certificate is served too.
    let output = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &tls.port.to_string(),
            "--tls",
            "--cacert",
            &tls.file("ca.crt"),
        ])
        .args(["GET", "via"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "redis-cli");
    let mut stream = tls.connect(false);
    stream.write_all(&Raw::encode(&[b"PING"])).unwrap();
    assert_eq!(read_reply(&mut stream).unwrap(), Reply::simple("PONG"));
}

#[test]
fn start_up_refuses_tls_settings_it_cannot_honour() {
    let dir = temp_dir();
    if make_certificates(&dir).is_none() {
        eprintln!("openssl not installed: skipped");
        return;
    }
    let file = |name: &str| dir.join(name).display().to_string();
    let port = free_port().to_string();
    let (cert, key, ca) = (file("server.crt"), file("server.key"), file("ca.crt"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--tls-cert-file", &cert, "--tls-key-file", &key],
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified",
        ),
        (
            vec![
                "--tls-cert-file",
                "/nonexistent.crt",
                "--tls-key-file",
                &key,
                "--tls-auth-clients",
                "no",
            ],
            "Failed to load certificate",
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &ca,
                "--tls-auth-clients",
                "no",
            ],
            "private key",
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-auth-clients",
                "no",
                "--tls-protocols",
                "TLSv1.1",
            ],
            "only TLSv1.2 and TLSv1.3",
        ),
        (
            vec![
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-auth-clients",
                "no",
                "--tls-ciphersuites",
                "TLS_NOPE",
            ],
            "names no cipher suite",
        ),
    ];
    for (settings, reason) in cases {
        let mut args = vec!["--tls-port", port.as_str()];
        args.extend(settings);
        let (status, lines) = TestServer::run_to_exit(&temp_dir(), &args);
        assert!(!status.success(), "{args:?} started");
        assert!(
            lines.iter().any(|l| l.contains(reason)),
            "{reason} not in {lines:?}"
        );
    }
}

/// CONFIG SET of the certificate files rotates them for new connections;
/// files that do not load are refused with Redis' error and the running
/// configuration stays.
#[test]
fn certificates_rotate_with_config_set() {
    let Some(tls) = Tls::start(&[]) else {
        eprintln!("openssl not installed: TLS test skipped");
        return;
    };
    let subject_of_server = |tls: &Tls| -> Vec<u8> {
        let mut stream = tls.connect(true);
        stream.write_all(&Raw::encode(&[b"PING"])).unwrap();
        assert_eq!(read_reply(&mut stream).unwrap(), Reply::simple("PONG"));
        stream.conn.peer_certificates().unwrap()[0].to_vec()
    };
    let first = subject_of_server(&tls);
    // A second server certificate from the same CA.
    let run = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&tls.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{args:?}");
    };
    run(&[
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "next.key", "-out", "next.csr", "-subj",
        "/CN=next",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "next.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "next.crt",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    let mut plain = tls.server.raw();
    assert_eq!(
        plain.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent.crt"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
        )
    );
    assert_eq!(
        plain.cmd(&["CONFIG", "GET", "tls-cert-file"]).as_array()[1],
        b(&tls.file("server.crt")),
        "the refused value was not kept"
    );
    assert_eq!(subject_of_server(&tls), first, "still served");
    assert_eq!(
        plain.cmd(&[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &tls.file("next.crt"),
            "tls-key-file",
            &tls.file("next.key"),
        ]),
        ok()
    );
    let second = subject_of_server(&tls);
    assert_ne!(second, first, "new connections get the new certificate");
    assert_eq!(
        plain.cmd(&["CONFIG", "SET", "tls-port", "1"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'tls-port') - can't set immutable config"
        )
    );
}

/// `port 0` beside `tls-port` serves TLS only, as in Redis: no plain
/// listener is opened at all.
#[test]
fn port_zero_beside_tls_port_is_tls_only() {
    let Some(tls) = Tls::start_with(&[], false) else {
        eprintln!("openssl not installed: TLS test skipped");
        return;
    };
    let mut stream = tls.connect(true);
    stream
        .write_all(&Raw::encode(&[b"INFO", b"server"]))
        .unwrap();
    stream.flush().unwrap();
    let info = read_reply(&mut stream).unwrap().as_text();
    assert!(info.contains("\r\ntcp_port:0\r\n"), "{info}");
    let log = tls.server.startup_log();
    assert!(
        !log.iter().any(|l| l.contains("Listening on tcp")),
        "a plain listener was opened: {log:?}"
    );
}
