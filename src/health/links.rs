//! The pages a finding points the reader to: Flink's documentation and the runbook's sections,
//! one place for every surface (`diagnose`, `scan-logs`, the headlines).

/// `url` under the configured runbook (`[alerting] runbook_base_url`) when it is a page of the
/// built-in one; any other page as it is. Every surface that prints a runbook link rebases it, as
/// the rules' `runbook_url` is.
pub(crate) fn rebased(url: &str, runbook_base_url: &str) -> String {
    match url.strip_prefix(crate::rules::builtin::RUNBOOK_BASE_URL) {
        Some(anchor) => format!("{}{anchor}", runbook_base_url.trim_end_matches(['#', '/'])),
        None => url.to_string(),
    }
}

/// A page: its title and address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Doc {
    /// As the text cites it.
    pub(crate) title: &'static str,
    /// Its address.
    pub(crate) url: &'static str,
}

/// Flink: how to read the checkpoint statistics.
pub(crate) const MONITORING: Doc = Doc {
    title: "Flink: Monitoring Checkpointing",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/checkpoint_monitoring/",
};
/// Flink: slow snapshots and large state.
pub(crate) const LARGE_STATE: Doc = Doc {
    title: "Flink: Tuning Checkpoints and Large State",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/large_state_tuning/",
};
/// Flink: barriers under backpressure, unaligned checkpoints.
pub(crate) const UNDER_BACKPRESSURE: Doc = Doc {
    title: "Flink: Checkpointing under backpressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/checkpointing_under_backpressure/",
};
/// Flink: finding the backpressure's source.
pub(crate) const BACK_PRESSURE: Doc = Doc {
    title: "Flink: Monitoring Back Pressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/back_pressure/",
};
/// Flink: the checkpointing options.
pub(crate) const CONFIGURATION: Doc = Doc {
    title: "Flink: Configuration, checkpointing options",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/config/#checkpointing",
};
/// The runbook: checkpoints that fail.
pub(crate) const RUNBOOK_FAILURES: Doc = Doc {
    title: "Runbook: FlinkCheckpointFailuresIncreasing",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointfailuresincreasing",
};
/// The runbook: the tolerable-failure budget.
pub(crate) const RUNBOOK_TOLERANCE: Doc = Doc {
    title: "Runbook: FlinkCheckpointToleranceNearlySpent",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointtolerancenearlyspent",
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The runbook's pages move with `runbook_base_url`, Flink's documentation does not; the
    /// built-in runbook pages are the rules' own (the same base and anchors).
    #[test]
    fn runbook_links_follow_the_configured_base_and_flinks_pages_stay() {
        let wiki = "https://wiki.example.com/flink/runbook";
        assert_eq!(
            rebased(RUNBOOK_FAILURES.url, wiki),
            "https://wiki.example.com/flink/runbook#flinkcheckpointfailuresincreasing"
        );
        assert_eq!(
            rebased(RUNBOOK_TOLERANCE.url, &format!("{wiki}/")),
            format!("{wiki}#flinkcheckpointtolerancenearlyspent")
        );
        assert_eq!(rebased(MONITORING.url, wiki), MONITORING.url);
        for doc in [RUNBOOK_FAILURES, RUNBOOK_TOLERANCE] {
            let name = doc.title.trim_start_matches("Runbook: ");
            assert_eq!(
                doc.url,
                crate::rules::builtin::runbook_url(crate::rules::builtin::RUNBOOK_BASE_URL, name)
            );
        }
    }
}
