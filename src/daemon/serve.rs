//! The HTTP(S) servers: the main port (API, `/metrics`, the page) behind the configured access,
//! and the probe port.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::StartError;
use crate::app::AppState;
use crate::outputs::http::{HttpState, router};
use crate::outputs::listener::{Bounded, PROBE_MAX_CONNECTIONS, PROBE_TIMEOUTS, Timeouts};
use crate::outputs::tls::{TlsListener, TlsPeer};

/// The listener on `listen` and the address it got (the port, when `listen` asks for any).
pub(super) async fn bind(listen: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), StartError> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| StartError::Listen { addr: listen, source })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen { addr: listen, source })?;
    Ok((listener, addr))
}

/// Serves the HTTP API on the first listener, over TLS when `tls` is given, behind the
/// configured access, and the probes alone on the second (the probe port), until `shutdown`;
/// the server task (both servers), the TLS reloader (with TLS) and the scheme.
pub(super) fn serve(
    (listener, probe_listener): (tokio::net::TcpListener, Option<tokio::net::TcpListener>),
    tls: Option<crate::outputs::tls::Loaded>,
    server: &crate::config::ServerConfig,
    app: &Arc<AppState>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(JoinHandle<()>, Option<crate::outputs::tls::Reloader>, &'static str), StartError> {
    let access = server.access().map_err(StartError::Shard)?;
    let handlers = HttpState::new(app.clone());
    let probes = probe_listener.map(|l| serve_probes(l, handlers.clone(), shutdown.clone()));
    let http =
        crate::outputs::access::protect(&access, server.tls_client_ca_file.is_some(), router(handlers));
    let graceful = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (main, reloader) = match tls {
        Some(loaded) => {
            let (listener, reloader) =
                TlsListener::new(listener, loaded, app.listener.clone(), server.max_connections)
                    .map_err(|source| StartError::Listen { addr: server.listen, source })?;
            let listener =
                Bounded::new(listener, app.listener.clone(), server.max_connections, Timeouts::default());
            let serve = axum::serve(listener, http.into_make_service_with_connect_info::<TlsPeer>())
                .with_graceful_shutdown(graceful);
            (spawn_server(serve, scheme), Some(reloader))
        }
        None => {
            let listener =
                Bounded::new(listener, app.listener.clone(), server.max_connections, Timeouts::default());
            (spawn_server(axum::serve(listener, http).with_graceful_shutdown(graceful), scheme), None)
        }
    };
    let both = tokio::spawn(async move {
        let _ = main.await;
        if let Some(probes) = probes {
            let _ = probes.await;
        }
    });
    Ok((both, reloader, scheme))
}

/// Serves /healthz and /readyz alone on the probe port (`[server] probe_listen`): plain HTTP,
/// no credentials (as on the main port), on connection slots of its own with short timeouts,
/// so that a kubelet's probe is answered while the main port is at its cap. Its connections
/// are counted apart (not exported: `checkpoint_sentinel_http_connections` is the main port's).
fn serve_probes(
    listener: tokio::net::TcpListener,
    handlers: HttpState,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let stats = Arc::new(crate::outputs::listener::ListenerStats::default());
    let listener = Bounded::new(listener, stats, PROBE_MAX_CONNECTIONS, PROBE_TIMEOUTS);
    let graceful = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let probes = crate::outputs::http::probe_router(handlers);
    spawn_server(axum::serve(listener, probes).with_graceful_shutdown(graceful), "probe")
}

/// Runs the HTTP(S) server until its graceful shutdown; a failure is logged.
fn spawn_server<S>(serve: S, scheme: &'static str) -> JoinHandle<()>
where
    S: std::future::IntoFuture<Output = std::io::Result<()>> + Send + 'static,
    S::IntoFuture: Send,
{
    tokio::spawn(async move {
        if let Err(e) = serve.await {
            tracing::error!("{scheme} server failed: {e}");
        }
    })
}
