//! TLS on `tls-port`, beside the plain port, with rustls (ring provider).
//!
//! Settings are Redis' (`tls-cert-file`, `tls-key-file`,
//! `tls-ca-cert-file`/`-dir`, `tls-auth-clients`, `tls-protocols`,
//! `tls-ciphers`, `tls-ciphersuites`, `tls-prefer-server-ciphers`,
//! `tls-session-caching`, `tls-session-cache-size`). A problem with them
//! (a missing file, a key that does not match, no CA while clients must
//! authenticate) stops start-up with the reason, as in Redis; CONFIG SET
//! builds a new configuration for new connections (`Server::tls`), or
//! refuses the change and keeps the old one.
//!
//! Differences, because rustls is not OpenSSL:
//! - TLS 1.2 and 1.3 only (`tls-protocols` naming only TLSv1 or TLSv1.1
//!   is refused);
//! - `tls-ciphers` (TLS 1.2) and `tls-ciphersuites` (TLS 1.3) take
//!   OpenSSL's names of the suites rustls has; keywords and suites it
//!   lacks are skipped with a warning, and a list naming none of them is
//!   refused;
//! - an encrypted private key (`tls-key-file-pass`) is refused: decrypt
//!   it first;
//! - `tls-port` cannot change at runtime, and the plain port stays open.
//!
//! A connection on the TLS port runs the same loop as a plain one
//! (`connection.rs`): it feeds the socket's bytes through the
//! [`rustls::ServerConnection`] and writes its records back.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};

use crate::log_warning;

/// Whether clients must present a certificate (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    No,
    Yes,
    Optional,
}

impl ClientAuth {
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::No => "no",
            ClientAuth::Yes => "yes",
            ClientAuth::Optional => "optional",
        }
    }

    pub fn parse(text: &str) -> Option<ClientAuth> {
        match text.to_ascii_lowercase().as_str() {
            "no" => Some(ClientAuth::No),
            "yes" => Some(ClientAuth::Yes),
            "optional" => Some(ClientAuth::Optional),
            _ => None,
        }
    }
}

/// The `tls-*` settings, with Redis' defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsSettings {
    pub port: u16,
    pub cert_file: String,
    pub key_file: String,
    pub key_file_pass: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: ClientAuth,
    pub protocols: String,
    pub ciphers: String,
    pub ciphersuites: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: usize,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            port: 0,
            cert_file: String::new(),
            key_file: String::new(),
            key_file_pass: String::new(),
            ca_cert_file: String::new(),
            ca_cert_dir: String::new(),
            auth_clients: ClientAuth::Yes,
            protocols: String::new(),
            ciphers: String::new(),
            ciphersuites: String::new(),
            prefer_server_ciphers: false,
            session_caching: true,
            session_cache_size: 20 * 1024,
        }
    }
}

/// OpenSSL's names of the TLS 1.2 suites rustls has, and rustls' names.
const TLS12_NAMES: &[(&str, &str)] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

fn suite_name(suite: &SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite())
}

/// The suites `list` (OpenSSL names, `:`-separated) names among those of
/// the TLS version `tls13`; `None` when the list is empty (keep all).
fn chosen_suites(
    list: &str,
    all: &[SupportedCipherSuite],
    tls13: bool,
    directive: &str,
) -> Result<Option<Vec<SupportedCipherSuite>>, String> {
    if list.trim().is_empty() {
        return Ok(None);
    }
    let mut chosen = Vec::new();
    for name in list.split(':').map(str::trim).filter(|n| !n.is_empty()) {
        let rustls_name = if tls13 {
            // OpenSSL: TLS_AES_128_GCM_SHA256; rustls: TLS13_AES_128_GCM_SHA256.
            name.strip_prefix("TLS_")
                .map(|rest| format!("TLS13_{rest}"))
        } else {
            TLS12_NAMES
                .iter()
                .find(|(openssl, _)| openssl.eq_ignore_ascii_case(name))
                .map(|(_, ours)| ours.to_string())
        };
        let found = rustls_name.and_then(|wanted| {
            all.iter()
                .find(|s| suite_name(s).eq_ignore_ascii_case(&wanted))
                .copied()
        });
        match found {
            Some(suite) => chosen.push(suite),
            None => log_warning!("{directive}: '{name}' is not a suite Strata's TLS has; skipped"),
        }
    }
    if chosen.is_empty() {
        return Err(format!(
            "{directive} names no cipher suite Strata's TLS has"
        ));
    }
    Ok(Some(chosen))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("Failed to load certificate: {}: {e}", path.display()))?
        .collect();
    let certs =
        certs.map_err(|e| format!("Failed to load certificate: {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {}: no certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}

/// The roots clients' certificates must chain to.
fn client_roots(settings: &TlsSettings) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let mut files = Vec::new();
    if !settings.ca_cert_file.is_empty() {
        files.push(std::path::PathBuf::from(&settings.ca_cert_file));
    }
    if !settings.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&settings.ca_cert_dir).map_err(|e| {
            format!(
                "Failed to configure CA certificate(s) directory: {}: {e}",
                settings.ca_cert_dir
            )
        })?;
        for entry in dir.flatten() {
            let path = entry.path();
            if path.is_file() {
                files.push(path);
            }
        }
    }
    for file in files {
        for cert in read_certs(&file)? {
            roots
                .add(cert)
                .map_err(|e| format!("Bad CA certificate in {}: {e}", file.display()))?;
        }
    }
    Ok(roots)
}

/// The server's TLS configuration, or why it cannot be made.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    if settings.cert_file.is_empty() || settings.key_file.is_empty() {
        return Err("tls-port needs tls-cert-file and tls-key-file".into());
    }
    if !settings.key_file_pass.is_empty() {
        return Err("tls-key-file-pass: encrypted private keys are not supported; decrypt the key (openssl pkey -in key.pem -out plain.pem)".into());
    }
    let base = rustls::crypto::ring::default_provider();
    let mut suites: Vec<SupportedCipherSuite> = Vec::new();
    let tls13_all: Vec<_> = base
        .cipher_suites
        .iter()
        .filter(|s| s.tls13().is_some())
        .copied()
        .collect();
    let tls12_all: Vec<_> = base
        .cipher_suites
        .iter()
        .filter(|s| s.tls13().is_none())
        .copied()
        .collect();
    suites.extend(
        chosen_suites(&settings.ciphersuites, &tls13_all, true, "tls-ciphersuites")?
            .unwrap_or(tls13_all),
    );
    suites.extend(
        chosen_suites(&settings.ciphers, &tls12_all, false, "tls-ciphers")?.unwrap_or(tls12_all),
    );
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..base
    });
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    let protocols = settings.protocols.to_ascii_lowercase();
    let words: Vec<&str> = protocols.split_whitespace().collect();
    if words.is_empty() || words.contains(&"tlsv1.3") {
        versions.push(&rustls::version::TLS13);
    }
    if words.is_empty() || words.contains(&"tlsv1.2") {
        versions.push(&rustls::version::TLS12);
    }
    if versions.is_empty() {
        return Err(format!(
            "tls-protocols '{}': Strata's TLS has only TLSv1.2 and TLSv1.3",
            settings.protocols
        ));
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS configuration: {e}"))?;
    let builder = match settings.auth_clients {
        ClientAuth::No => builder.with_no_client_auth(),
        auth => {
            if settings.ca_cert_file.is_empty() && settings.ca_cert_dir.is_empty() {
                return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(
                Arc::new(client_roots(settings)?),
                provider,
            );
            let verifier = if auth == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("TLS client verification: {e}"))?,
            )
        }
    };
    let certs = read_certs(Path::new(&settings.cert_file))?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file)
        .map_err(|e| format!("Failed to load private key: {}: {e}", settings.key_file))?;
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("Failed to load certificate and key: {e}"))?;
    config.ignore_client_order = settings.prefer_server_ciphers;
    config.session_storage = if settings.session_caching && settings.session_cache_size > 0 {
        ServerSessionMemoryCache::new(settings.session_cache_size)
    } else {
        Arc::new(NoServerSessionStorage {})
    };
    Ok(Arc::new(config))
}
