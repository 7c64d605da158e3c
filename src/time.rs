//! Time as a value: epoch milliseconds, the unit Flink reports, passed into the pure core.

use std::fmt;

/// A point in time in milliseconds since the Unix epoch (UTC), as Flink reports timestamps.
///
/// The pure core never reads a clock: the daemon reads it once per step and passes the value
/// in, and the simulator fabricates it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// Seconds since the epoch, as Prometheus wants timestamps in metric values.
    pub fn seconds(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Milliseconds from `earlier` to `self`, never negative.
    pub fn since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0).max(0) as u64
    }

    /// The timestamp `ms` milliseconds later.
    pub fn plus_millis(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }

    /// Reads the system clock. Only the I/O edges (daemon, sources) call this.
    pub fn now() -> Timestamp {
        let since_epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Timestamp(since_epoch.as_millis() as i64)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}
