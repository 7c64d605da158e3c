//! Why the daemon could not start (`StartError`), apart so that every part of the daemon can
//! name it without importing `mod.rs` back.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// `SENTINEL_SHARD_INDEX`/`SENTINEL_SHARD_COUNT` make no sense, or a secret cannot be read.
    #[error("{0}")]
    Shard(String),
    /// A cluster's client cannot be built (unreadable secret or CA file).
    #[error(transparent)]
    Client(#[from] crate::sources::flink::client::ClientBuildError),
    /// The listener's TLS files are missing, not PEM, or the key does not match the certificate.
    #[error("{}", .0.join("; "))]
    Tls(Vec<String>),
    /// Another daemon uses the state directory (or its lock file cannot be made).
    #[error("state.dir {dir}: {message}")]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        message: String,
    },
}
