//! Outputs: what the daemon serves and sends, all read from `State` (and the rules' alerts).
//!
//! - [`export`] — the Prometheus exposition of `State`.
//! - [`api`] — the JSON API under `/api/v1/` as pure views of the state.
//! - [`http`] — the HTTP routes (`/metrics`, health, API, status page in `ui/`).
//! - [`listener`] — bounds on the daemon's listener: connection cap, header and idle timeouts.
//! - [`access`] — optional authentication of the HTTP endpoints.
//! - [`tls`] — HTTPS for the daemon's own listener.
//! - [`alerting`] — the Alertmanager client.
//! - [`advice_cache`] — the advice endpoint's cache and its one-at-a-time computation.

pub(crate) mod access;
pub(crate) mod advice_cache;
pub mod alerting;
pub mod answer;
pub mod api;
pub mod export;
pub mod http;
pub mod listener;
pub(crate) mod tls;
