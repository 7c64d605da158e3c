//! Logging through `tracing`, as human-readable text or as JSON lines.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The format of log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// Installs the global subscriber. The filter comes from `SENTINEL_LOG` (default `info`),
/// in `tracing`'s `EnvFilter` syntax, e.g. `checkpoint_sentinel=debug`. Colour codes are
/// written only when standard error is a terminal: a log file or a container's log stays
/// plain text.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("SENTINEL_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// The daemon's version (`Cargo.toml`).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit it was built from, "unknown" without git at build time (see `build.rs`).
pub(crate) const REVISION: &str = env!("SENTINEL_GIT_REVISION");
/// The version of the compiler that built it.
pub(crate) const RUSTC_VERSION: &str = env!("SENTINEL_RUSTC_VERSION");
