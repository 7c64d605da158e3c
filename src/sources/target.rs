//! A discovered cluster, as file discovery (`discovery`) and Kubernetes discovery
//! (`kubernetes`) both give it: its name and its REST URL. Apart from both so that
//! `kubernetes` does not import `discovery`, which starts it (no cycle between the files).

/// A discovered target: (name, url).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Target {
    /// The cluster name (from a file: the `cluster` label, else the target made a valid name;
    /// from Kubernetes: `<namespace>.<cluster-id>`).
    pub(crate) name: String,
    /// The JobManager's REST base URL.
    pub(crate) url: String,
}
