//! The daemon's limit of open file descriptors: the soft limit raised to the hard one at start.
//!
//! Containers now start with a soft limit of 1,024 and a far higher hard limit (containerd and
//! Docker since 2023, systemd's default). The daemon's port alone holds up to
//! `[server] max_connections` connections (512 by default), beside the probe port's, the
//! JobManager requests of a round, the tailed logs and the store; at 1,024 an `accept` fails
//! with "too many open files" and the port stops below its cap (CI saw it stop at 472 of 512).
//! Go's runtime and the JVM raise the soft limit the same way; a process may raise it up to the
//! hard limit without privileges. A process-wide setting: `src/main.rs` makes it once, for `run`
//! and `demo`, beside the allocator's (`heap`).

/// Descriptors the daemon may hold at once, beyond its port's connections: the probe port's,
/// the JobManager requests in flight, tailed logs, the store and the runtime's own.
pub(crate) const HEADROOM: u64 = 512;

/// The soft limit before and after [`raise_to_hard_limit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit the process started with.
    pub(crate) before: u64,
    /// The soft limit now (the hard limit, or `before` when raising was refused).
    pub(crate) now: u64,
}

/// Raises the soft limit of open files to the hard limit and logs it; warns when even the hard
/// limit leaves a port of `max_connections` short of [`HEADROOM`] beside it. `None` where the
/// limit cannot be read (not Unix).
#[cfg(unix)]
pub fn raise_to_hard_limit(max_connections: usize) -> Option<OpenFilesLimit> {
    let (before, _hard) = rlimit::Resource::NOFILE.get().ok()?;
    // `increase_nofile_limit` caps the request at the hard limit (and at macOS's
    // `kern.maxfilesperproc`), and returns the soft limit it set.
    let now = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(before);
    let needed = max_connections as u64 + HEADROOM;
    if now < needed {
        tracing::warn!(
            soft_limit = now,
            needed,
            max_connections,
            "the limit of open files is below what the daemon's port needs at its cap: raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower server.max_connections"
        );
    } else if now != before {
        tracing::info!(from = before, to = now, "raised the soft limit of open files to the hard limit");
    }
    Some(OpenFilesLimit { before, now })
}

/// See the Unix version: elsewhere the limit is not read.
#[cfg(not(unix))]
pub(crate) fn raise_to_hard_limit(_max_connections: usize) -> Option<OpenFilesLimit> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let (_, hard) = rlimit::Resource::NOFILE.get().unwrap();
        let limit = raise_to_hard_limit(512).unwrap();
        assert_eq!(limit.now, hard);
        assert_eq!(rlimit::Resource::NOFILE.get().unwrap(), (hard, hard));
        assert!(limit.before <= limit.now);
    }
}
