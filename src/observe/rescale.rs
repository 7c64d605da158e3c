//! Rescales: a job's parallelism changed, from Flink 2.3's rescale history or from a restart
//! that came back with another parallelism.

use crate::time::Timestamp;

/// Where the daemon learned of a rescale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RescaleSource {
    /// Flink's rescale history (`/jobs/:id/rescales/history`, 2.3+, on when
    /// `web.adaptive-scheduler.rescale-history.size` > 0).
    RescaleHistory,
    /// The job's vertices came back from a restart with another parallelism (`/jobs/:id`).
    ParallelismChange,
}

impl RescaleSource {
    /// The API's word for it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RescaleSource::RescaleHistory => "rescale_history",
            RescaleSource::ParallelismChange => "parallelism_change",
        }
    }
}

/// One vertex's parallelism before and after a rescale.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VertexRescale {
    /// The operator chain's name.
    pub vertex: String,
    /// Its parallelism before, when known.
    pub before: Option<u32>,
    /// Its parallelism after, when known.
    pub after: Option<u32>,
}

/// One rescale of a job.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rescale {
    /// Flink's `rescaleUuid` (and attempt) from the history; `None` when inferred.
    pub id: Option<String>,
    /// Where the daemon learned of it.
    pub source: RescaleSource,
    /// When it was asked for (the history's start; `None` when inferred).
    pub started_at: Option<Timestamp>,
    /// When the old execution stopped: the adaptive scheduler entered `Restarting` (history),
    /// or the job last entered RESTARTING or CREATED (inferred). Checkpoints triggered before
    /// it belong to the old parallelism.
    pub restarted_at: Option<Timestamp>,
    /// When it ended (the history's end), or when the daemon saw the new parallelism.
    pub at: Timestamp,
    /// Flink's `triggerCause` (`UPDATE_REQUIREMENT`, `NEW_RESOURCE_AVAILABLE`,
    /// `RECOVERABLE_FAILOVER`); `None` when inferred.
    pub cause: Option<String>,
    /// Flink's `terminalState` (`COMPLETED`, `FAILED`); `None` when inferred (it completed).
    pub outcome: Option<String>,
    /// The vertices whose parallelism changed.
    pub vertices: Vec<VertexRescale>,
}

impl Rescale {
    /// "stateful-map 2 → 1, source 2 → 1" (at most three vertices, then "and N more").
    pub(crate) fn parallelism_words(&self) -> String {
        let num = |p: Option<u32>| p.map_or("?".to_string(), |p| p.to_string());
        let mut words: Vec<String> = self
            .vertices
            .iter()
            .take(3)
            .map(|v| format!("{} {} → {}", v.vertex, num(v.before), num(v.after)))
            .collect();
        if self.vertices.len() > 3 {
            words.push(format!("and {} more", self.vertices.len() - 3));
        }
        if words.is_empty() { "no vertex changed".to_string() } else { words.join(", ") }
    }
}

/// The vertices whose parallelism differs between `before` and `after` (by vertex id, with
/// the name `after` gives); empty when either is empty (a graph not known yet).
pub(crate) fn changed_vertices(
    before: &[(String, String, u32)],
    after: &[(String, String, u32)],
) -> Vec<VertexRescale> {
    if before.is_empty() || after.is_empty() {
        return Vec::new();
    }
    after
        .iter()
        .filter_map(|(id, name, p)| {
            let old = before.iter().find(|(i, ..)| i == id)?.2;
            (old != *p).then(|| VertexRescale { vertex: name.clone(), before: Some(old), after: Some(*p) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(id: &str, p: u32) -> (String, String, u32) {
        (id.to_string(), format!("op-{id}"), p)
    }

    #[test]
    fn only_vertices_whose_parallelism_changed_count() {
        let changed = changed_vertices(&[v("a", 2), v("b", 2)], &[v("a", 1), v("b", 2), v("c", 4)]);
        assert_eq!(changed, vec![VertexRescale { vertex: "op-a".into(), before: Some(2), after: Some(1) }]);
        assert!(changed_vertices(&[], &[v("a", 1)]).is_empty());
        assert!(changed_vertices(&[v("a", 1)], &[v("a", 1)]).is_empty());
    }

    #[test]
    fn words_name_at_most_three_vertices() {
        let r = Rescale {
            id: None,
            source: RescaleSource::ParallelismChange,
            started_at: None,
            restarted_at: None,
            at: Timestamp(1),
            cause: None,
            outcome: None,
            vertices: (0..5)
                .map(|i| VertexRescale { vertex: format!("v{i}"), before: Some(2), after: None })
                .collect(),
        };
        assert_eq!(r.parallelism_words(), "v0 2 → ?, v1 2 → ?, v2 2 → ?, and 2 more");
    }
}
