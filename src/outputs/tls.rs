//! HTTPS for the daemon's own listener: `[server]`'s PEM files read into a rustls config, a
//! listener for `axum::serve` that completes handshakes off the accept loop, and reloading.
//!
//! rustls with the aws-lc-rs provider, the one reqwest already compiles, so there is no second
//! crypto library. Being an `axum::serve::Listener` keeps axum's graceful shutdown unchanged.
//! The configuration sits behind a `watch` channel: each handshake takes the newest one, so a
//! rotated certificate is served from the next connection on.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::ServerConfig;
use crate::counters::{ListenerStats, TLS_HANDSHAKE_ERRORS};

/// A client that has not finished its handshake by then is dropped, so a stalled or half-open
/// connection holds a task and a socket for no longer than this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections past their handshake that axum has not picked up yet.
const ACCEPTED_BACKLOG: usize = 64;

/// The first byte of every TLS connection: the record type of a handshake.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// What a plain-HTTP client gets on the HTTPS port, instead of a reset it cannot explain.
const PLAIN_HTTP_ANSWER: &str = "this port serves HTTPS only: use an https:// URL\n";

/// The listener's TLS configuration, built from the files `[server]` names.
#[derive(Clone)]
pub(crate) struct Loaded {
    /// What each handshake uses.
    pub(crate) config: Arc<rustls::ServerConfig>,
    /// The contents of the files it was built from, to tell whether a reload changed anything.
    files: Vec<Vec<u8>>,
}

/// Reads and checks `tls_cert_file`, `tls_key_file` and `tls_client_ca_file`: `None` when TLS
/// is off, otherwise the configuration, or every problem naming its key, file and what was
/// expected.
pub(crate) fn load(server: &ServerConfig) -> Result<Option<Loaded>, Vec<String>> {
    let Some((cert_path, key_path)) = server.tls_files().map_err(|p| vec![p])? else { return Ok(None) };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut problems = Vec::new();
    let mut files = Vec::new();
    let mut read = |key: &str, path: &Path| match std::fs::read(path) {
        Ok(bytes) => {
            files.push(bytes.clone());
            Some(bytes)
        }
        Err(e) => {
            problems.push(format!("server.{key}: {}: cannot read: {e}", path.display()));
            None
        }
    };
    let cert_pem = read("tls_cert_file", cert_path);
    let key_pem = read("tls_key_file", key_path);
    let ca_pem = server.tls_client_ca_file.as_deref().map(|p| (p, read("tls_client_ca_file", p)));

    let chain = cert_pem
        .and_then(|pem| certificates(&pem, "tls_cert_file", cert_path).map_err(|p| problems.push(p)).ok());
    let key =
        key_pem.and_then(|pem| private_key(&pem, key_path, &provider).map_err(|p| problems.push(p)).ok());
    let certified = match (chain, key) {
        (Some(chain), Some(key)) => {
            let certified = CertifiedKey::new(chain, key);
            match certified.keys_match() {
                // A key type that cannot tell its public key is checked by the first handshake.
                Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
                    Some(certified)
                }
                Err(rustls::Error::InconsistentKeys(_)) => {
                    problems.push(format!(
                        "server.tls_key_file: {}: expected the private key of the certificate in server.tls_cert_file ({}), but it does not match it",
                        key_path.display(),
                        cert_path.display()
                    ));
                    None
                }
                Err(e) => {
                    problems.push(format!(
                        "server.tls_cert_file: {}: expected an X.509 certificate: {e}",
                        cert_path.display()
                    ));
                    None
                }
            }
        }
        _ => None,
    };
    let client_verifier = match ca_pem {
        None => None,
        Some((path, pem)) => {
            pem.and_then(|pem| client_verifier(&pem, path, &provider).map_err(|p| problems.push(p)).ok())
        }
    };
    let Some(certified) = certified.filter(|_| problems.is_empty()) else { return Err(problems) };

    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| vec![format!("server.tls_cert_file: cannot set up TLS: {e}")])?;
    let builder = match client_verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    // The router speaks HTTP/1.1 only (axum's `http1` feature).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Loaded { config: Arc::new(config), files }))
}

/// The PEM labels in a file, for saying what it holds instead of what was expected.
fn labels_in(pem: &[u8]) -> String {
    let text = String::from_utf8_lossy(pem);
    let labels: Vec<&str> =
        text.lines().filter_map(|l| l.trim().strip_prefix("-----BEGIN ")?.strip_suffix("-----")).collect();
    if labels.is_empty() { "no PEM block".to_string() } else { format!("only {}", labels.join(", ")) }
}

fn certificates(pem: &[u8], key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("server.{key}: {}: expected PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "server.{key}: {}: expected PEM certificates (-----BEGIN CERTIFICATE-----), found {}",
            path.display(),
            labels_in(pem)
        ));
    }
    Ok(certs)
}

fn private_key(
    pem: &[u8],
    path: &Path,
    provider: &CryptoProvider,
) -> Result<Arc<dyn rustls::sign::SigningKey>, String> {
    let der = PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "server.tls_key_file: {}: expected a PEM private key (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY), found {}",
            path.display(),
            labels_in(pem)
        ),
        e => format!("server.tls_key_file: {}: expected a PEM private key: {e}", path.display()),
    })?;
    provider.key_provider.load_private_key(der).map_err(|e| {
        format!("server.tls_key_file: {}: expected an RSA, ECDSA or Ed25519 private key: {e}", path.display())
    })
}

fn client_verifier(
    pem: &[u8],
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(pem, "tls_client_ca_file", path)? {
        roots.add(cert).map_err(|e| {
            format!("server.tls_client_ca_file: {}: expected CA certificates: {e}", path.display())
        })?;
    }
    // Requests without a certificate still reach the router: the probes must get through, and
    // `access` refuses everything else (a handshake-level refusal would also lock out kubelet).
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("server.tls_client_ca_file: {}: {e}", path.display()))
}

/// Hands the listener a new configuration when the files changed.
pub(crate) struct Reloader {
    current: Loaded,
    sender: watch::Sender<Arc<rustls::ServerConfig>>,
}

impl Reloader {
    /// Re-reads the files `server` names. A changed, valid set is served from the next
    /// connection on; an invalid one (a key written before its certificate, say) is logged and
    /// the running certificate stays.
    pub(crate) fn reload(&mut self, server: &ServerConfig) {
        match load(server) {
            Ok(Some(new)) if new.files != self.current.files => {
                self.sender.send_replace(new.config.clone());
                self.current = new;
                tracing::info!("TLS certificate reloaded");
            }
            Ok(_) => {}
            Err(problems) => tracing::error!(
                "TLS files not reloaded, the running certificate stays: {}",
                problems.join("; ")
            ),
        }
    }
}

/// A TLS listener for `axum::serve`. A task accepts TCP connections and runs each handshake in
/// a task of its own, so a slow or silent client never holds up the others.
pub(crate) struct TlsListener {
    local_addr: SocketAddr,
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    accept_task: JoinHandle<()>,
}

impl TlsListener {
    /// Serves TLS on `tcp` with `loaded`, at most `max_connections` handshakes at once; the
    /// `Reloader` swaps the configuration later. Failed handshakes are counted in `stats`.
    pub(crate) fn new(
        tcp: TcpListener,
        loaded: Loaded,
        stats: Arc<ListenerStats>,
        max_connections: usize,
    ) -> io::Result<(TlsListener, Reloader)> {
        let local_addr = tcp.local_addr()?;
        let (sender, configs) = watch::channel(loaded.config.clone());
        let (accepted_tx, accepted) = mpsc::channel(ACCEPTED_BACKLOG);
        stats.tls_serving.store(true, Ordering::Relaxed);
        let accept_task = tokio::spawn(accept_loop(tcp, configs, accepted_tx, stats, max_connections));
        Ok((TlsListener { local_addr, accepted, accept_task }, Reloader { current: loaded, sender }))
    }
}

impl Drop for TlsListener {
    /// axum drops the listener when a graceful shutdown begins: the port closes with it.
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(connection) => connection,
            // The accept task holds the sender for as long as this listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

async fn accept_loop(
    tcp: TcpListener,
    configs: watch::Receiver<Arc<rustls::ServerConfig>>,
    accepted: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    stats: Arc<ListenerStats>,
    max_connections: usize,
) {
    // Handshakes in progress, and handshaken connections waiting for the listener to take them,
    // at most as many as the listener serves (`[server] max_connections`).
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
    loop {
        let permit = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
        let (stream, peer) = match tcp.accept().await {
            Ok(connection) => connection,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors and the like: retrying at once would spin.
                tracing::error!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let acceptor = TlsAcceptor::from(configs.borrow().clone());
        let accepted = accepted.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let reason = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(acceptor, stream)).await {
                Ok(Ok(tls)) => {
                    let _ = accepted.send((tls, peer)).await;
                    return;
                }
                Ok(Err(Refused::PlainHttp)) => {
                    tracing::debug!(%peer, "plain HTTP on the HTTPS port");
                    "plain_http"
                }
                // Scanners and clients that do not trust the certificate end here: not worth a
                // warning each, but counted, and visible with SENTINEL_LOG=debug.
                Ok(Err(Refused::Failed(e))) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    "failed"
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    "timeout"
                }
            };
            if let Some(i) = TLS_HANDSHAKE_ERRORS.iter().position(|r| *r == reason) {
                stats.tls_handshake_errors[i].fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// Why a connection did not become a TLS stream.
enum Refused {
    /// A plain `http://` request, answered with a 400.
    PlainHttp,
    /// The handshake itself failed.
    Failed(io::Error),
}

async fn handshake(acceptor: TlsAcceptor, mut tcp: TcpStream) -> Result<TlsStream<TcpStream>, Refused> {
    let mut first = [0u8; 1];
    let peeked = tcp.peek(&mut first).await.map_err(Refused::Failed)?;
    if peeked == 1 && first[0] != TLS_HANDSHAKE_RECORD && first[0].is_ascii_uppercase() {
        answer_plain_http(&mut tcp).await;
        return Err(Refused::PlainHttp);
    }
    acceptor.accept(tcp).await.map_err(Refused::Failed)
}

/// Answers an `http://` request with a 400 that says why, as Go's and nginx's servers do.
async fn answer_plain_http(tcp: &mut TcpStream) {
    // Read the request first: closing a socket with unread input resets the connection, and
    // the client would see the reset instead of the answer.
    let mut request = [0u8; 8192];
    let _ = tcp.read(&mut request).await;
    let response = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PLAIN_HTTP_ANSWER}",
        PLAIN_HTTP_ANSWER.len()
    );
    let _ = tcp.write_all(response.as_bytes()).await;
    let _ = tcp.shutdown().await;
}

/// Who is on the other end of a TLS connection (axum's `ConnectInfo`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TlsPeer {
    /// Whether the client presented a certificate. rustls accepts one only if it chains to
    /// `tls_client_ca_file`, so this means "verified"; without a client CA it is never asked for.
    pub(crate) client_certificate: bool,
}

type BoundedTls = crate::outputs::listener::Bounded<TlsListener>;

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, BoundedTls>> for TlsPeer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, BoundedTls>) -> Self {
        let presented = stream.io().get_ref().get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty());
        TlsPeer { client_certificate: presented }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A self-signed certificate for 127.0.0.1 and its key, as PEM.
    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn server(dir: &Path, cert: Option<&str>, key: Option<&str>) -> ServerConfig {
        let write = |name: &str, text: Option<&str>| {
            text.map(|t| {
                let path = dir.join(name);
                std::fs::write(&path, t).unwrap();
                path
            })
        };
        ServerConfig {
            tls_cert_file: write("tls.crt", cert),
            tls_key_file: write("tls.key", key),
            ..ServerConfig::default()
        }
    }

    fn problems(server: &ServerConfig) -> String {
        match load(server) {
            Ok(_) => "no problem".to_string(),
            Err(problems) => problems.join("\n"),
        }
    }

    #[test]
    fn a_matching_pair_loads_and_no_files_mean_no_tls() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let loaded = load(&server(dir.path(), Some(&cert), Some(&key))).unwrap().unwrap();
        assert_eq!(loaded.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(load(&ServerConfig::default()).unwrap().is_none());
    }

    #[test]
    fn each_problem_names_the_key_the_file_and_what_was_expected() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let (_, other_key) = self_signed();

        let mut missing = server(dir.path(), Some(&cert), None);
        missing.tls_key_file = Some(PathBuf::from("/nonexistent/tls.key"));
        let p = problems(&missing);
        assert!(p.starts_with("server.tls_key_file: /nonexistent/tls.key: cannot read"), "{p}");

        let p = problems(&server(dir.path(), Some(&cert), Some("not a key\n")));
        assert!(p.contains("server.tls_key_file") && p.contains("expected a PEM private key"), "{p}");
        assert!(p.contains("found no PEM block"), "{p}");

        // The two files swapped: say what each one holds.
        let p = problems(&server(dir.path(), Some(&key), Some(&cert)));
        assert!(p.contains("server.tls_cert_file") && p.contains("found only PRIVATE KEY"), "{p}");
        assert!(p.contains("server.tls_key_file") && p.contains("found only CERTIFICATE"), "{p}");

        let p = problems(&server(dir.path(), Some(&cert), Some(&other_key)));
        assert!(p.contains("server.tls_key_file") && p.contains("does not match"), "{p}");
        assert!(p.contains(&dir.path().join("tls.crt").display().to_string()), "{p}");

        let p = problems(&server(dir.path(), Some(&cert), None));
        assert!(p.contains("server.tls_key_file: expected the private key"), "{p}");
        let client_ca_only =
            ServerConfig { tls_client_ca_file: Some(dir.path().join("tls.crt")), ..ServerConfig::default() };
        assert!(problems(&client_ca_only).contains("server.tls_client_ca_file: expected tls_cert_file"));
    }

    #[test]
    fn a_reload_swaps_the_configuration_only_for_a_valid_change() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let first = server(dir.path(), Some(&cert), Some(&key));
        let loaded = load(&first).unwrap().unwrap();
        let (sender, configs) = watch::channel(loaded.config.clone());
        let mut reloader = Reloader { current: loaded, sender };

        reloader.reload(&first);
        assert!(!configs.has_changed().unwrap(), "unchanged files, no swap");
        // A new key before its certificate: refused, the running pair stays.
        let (new_cert, new_key) = self_signed();
        std::fs::write(dir.path().join("tls.key"), &new_key).unwrap();
        reloader.reload(&first);
        assert!(!configs.has_changed().unwrap(), "a mismatched pair is not served");
        std::fs::write(dir.path().join("tls.crt"), &new_cert).unwrap();
        reloader.reload(&first);
        assert!(configs.has_changed().unwrap(), "the rotated pair is served");
    }
}
