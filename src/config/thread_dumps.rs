//! `[thread_dumps]`: whether, how often and how much the daemon looks at the thread of a
//! subtask that holds a checkpoint about to expire (`sources::threads`, docs/thread-dumps.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[thread_dumps]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThreadDumpsConfig {
    /// Whether the daemon looks at all.
    pub(crate) enabled: bool,
    /// At most one thread dump per TaskManager in this time (a full dump stops its JVM at a
    /// safepoint); flame-graph requests of a vertex share the bound.
    #[serde(with = "humantime_serde")]
    pub min_interval: Duration,
    /// A checkpoint in progress longer than this share of its timeout is about to expire: its
    /// pending subtask's thread is looked at.
    pub(crate) expiry_share: f64,
    /// Ask Flink's flame-graph sampler of the vertex first (when `rest.flamegraph.enabled` is on
    /// on the cluster; detected), else the TaskManager's thread dump.
    pub(crate) flame_graph: bool,
    /// Timeout of each request (the flame graph's first answer is "waiting": it is asked again
    /// within this too).
    #[serde(with = "humantime_serde")]
    pub(crate) timeout: Duration,
    /// Largest answer read; a bigger one is cut off, counted and dropped.
    pub(crate) max_response_bytes: u64,
}

impl Default for ThreadDumpsConfig {
    fn default() -> Self {
        ThreadDumpsConfig {
            enabled: true,
            min_interval: Duration::from_secs(600),
            expiry_share: 0.8,
            flame_graph: true,
            timeout: Duration::from_secs(15),
            max_response_bytes: 4 << 20,
        }
    }
}

impl ThreadDumpsConfig {
    /// What is wrong with it, one line per key.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(self.expiry_share > 0.0 && self.expiry_share < 1.0) {
            problems
                .push(format!("thread_dumps.expiry_share: {}: expected between 0 and 1", self.expiry_share));
        }
        if self.min_interval < Duration::from_secs(10) {
            problems.push("thread_dumps.min_interval: expected at least 10s".to_string());
        }
        if self.timeout.is_zero() {
            problems.push("thread_dumps.timeout: expected a positive duration".to_string());
        }
        if self.max_response_bytes < 4096 {
            problems.push("thread_dumps.max_response_bytes: expected at least 4096".to_string());
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_a_share_out_of_range_does_not() {
        assert!(ThreadDumpsConfig::default().problems().is_empty());
        let bad = ThreadDumpsConfig {
            expiry_share: 1.2,
            min_interval: Duration::from_secs(1),
            ..Default::default()
        };
        assert_eq!(bad.problems().len(), 2);
    }
}
