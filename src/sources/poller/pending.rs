//! Pending subtasks named from the REST API: once a checkpoint has been in progress for
//! `pending_subtask_after` of its timeout, each subtask that has not acknowledged it becomes an
//! event (`barrier_missing`, `snapshot_slow` or `subtask_pending`, source `rest`).

use std::collections::{HashMap, HashSet};

use super::Poller;
use super::cache::JobCache;
use super::phase::{PendingPhase, pending_phase};
use crate::observe::{EventSeverity, LogEvent, LogKind};
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;

impl Poller {
    /// Names the subtasks that hold an in-progress checkpoint up: once a checkpoint has been
    /// pending for `pending_subtask_after` of its timeout, its details are fetched (once) and every
    /// subtask that has not acknowledged becomes a `barrier_missing` event with source `rest`.
    pub(super) async fn pending_subtasks(
        &self,
        cache: &mut JobCache,
        job_id: &str,
        stats: &dto::CheckpointingStatistics,
        timeout_ms: u64,
        now: Timestamp,
    ) -> Vec<LogEvent> {
        let threshold = (timeout_ms as f64 * self.config.pending_subtask_after) as u64;
        let due: Vec<(u64, Timestamp)> = convert::in_progress(&stats.history)
            .into_iter()
            .filter(|cp| now.since(cp.triggered_at) >= threshold && cp.num_acknowledged < cp.num_subtasks)
            .filter(|cp| !cache.reported_pending.contains(&cp.id))
            .map(|cp| (cp.id, cp.triggered_at))
            .take(self.config.max_history_per_poll)
            .collect();
        let mut events = Vec::new();
        let topology = cache.topology.clone();
        let known = cache.vertex_names.clone();
        for (id, triggered_at) in due {
            let vertices = match self.checkpoint_vertices(job_id, id, &known).await {
                Ok(v) => v,
                Err(e) => {
                    self.log_error(&e);
                    continue;
                }
            };
            let waited = now.since(triggered_at);
            let done: HashSet<&str> = vertices
                .iter()
                .filter(|(_, d)| d.subtasks.iter().all(|st| st.is_completed()))
                .map(|(vid, _)| vid.as_str())
                .collect();
            let mut pending_by_vertex = Vec::new();
            let mut undecided = false;
            for (vid, details) in &vertices {
                let pending: Vec<u32> =
                    details.subtasks.iter().filter(|st| !st.is_completed()).map(|st| st.index).collect();
                if pending.is_empty() {
                    continue;
                }
                let phase =
                    topology.as_ref().map_or(PendingPhase::Barriers, |t| pending_phase(t, vid, &done));
                // Waiting behind an upstream subtask that is itself pending: that one is named.
                if phase == PendingPhase::BehindUpstream {
                    continue;
                }
                // Flink's checkpoint statistics lag the acknowledgements (a cache of a few
                // seconds): a consumer still shown pending may have acknowledged. Look again at
                // the next poll, until 3/4 of the timeout.
                if phase == PendingPhase::Barriers
                    && topology.is_some()
                    && (waited as f64) < 0.75 * timeout_ms as f64
                {
                    undecided = true;
                    continue;
                }
                pending_by_vertex.push((vid.clone(), pending, phase));
            }
            if undecided {
                continue;
            }
            let mut hosts: HashMap<String, Vec<dto::VertexSubtask>> = HashMap::new();
            for (vid, pending, phase) in pending_by_vertex {
                if !hosts.contains_key(&vid) {
                    let subtasks =
                        self.fetch(self.client.vertex(job_id, &vid)).await.ok().flatten().map(|v| v.subtasks);
                    hosts.insert(vid.clone(), subtasks.unwrap_or_default());
                }
                let name = cache.vertex_names.get(&vid).cloned().unwrap_or_else(|| vid.clone());
                for index in pending {
                    let tm =
                        hosts[&vid].iter().find(|s| s.subtask == index).and_then(convert::taskmanager_of);
                    let (kind, message) = match phase {
                        PendingPhase::Snapshot => (
                            LogKind::SnapshotSlow,
                            format!(
                                "{name} (subtask {index}) has not acknowledged checkpoint {id} after {waited} ms (timeout {timeout_ms} ms) although every subtask downstream of it has: it passed the barrier on and is in its synchronous or asynchronous snapshot, not waiting for barriers"
                            ),
                        ),
                        PendingPhase::Unknown => (
                            LogKind::SubtaskPending,
                            format!(
                                "{name} (subtask {index}) has not acknowledged checkpoint {id} after {waited} ms (timeout {timeout_ms} ms); its inputs sent their barriers, and with no subtask downstream of it nothing tells whether it is still aligning or in its snapshot"
                            ),
                        ),
                        _ => (
                            LogKind::BarrierMissing,
                            format!(
                                "{name} (subtask {index}) has not acknowledged checkpoint {id} after {waited} ms (timeout {timeout_ms} ms), and the subtasks downstream of it are still waiting for its barrier"
                            ),
                        ),
                    };
                    let mut event = LogEvent::new(kind, EventSeverity::Warning, message);
                    event.cluster = self.config.name.clone();
                    event.source = "rest";
                    event.job_id = Some(job_id.to_string());
                    event.checkpoint_id = Some(id);
                    event.task = Some(name.clone());
                    event.subtask = Some(index);
                    event.taskmanager = tm;
                    event.duration_ms = Some(waited);
                    event.detail = Some(vid.clone());
                    events.push(event);
                }
            }
            cache.reported_pending.insert(id);
            while cache.reported_pending.len() > 64 {
                cache.reported_pending.pop_first();
            }
        }
        events
    }
}
