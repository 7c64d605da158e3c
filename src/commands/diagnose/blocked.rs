//! `diagnose`'s look at the blocked thread: for the first pending subtask of a checkpoint in
//! progress (in the job's vertex order), its TaskManager's thread dump, once, reduced to the
//! subtask's task thread; and the report's line about it (docs/thread-dumps.md).

use std::time::Duration;

use crate::observe::ThreadSample;
use crate::sources::flink::client::FlinkClient;
use crate::sources::flink::threads;
use crate::time::Timestamp;

use super::report::{JobData, JobReport};

/// How long the one dump may take.
const TIMEOUT: Duration = Duration::from_secs(15);

/// The largest dump read (as the daemon's default `[thread_dumps] max_response_bytes`).
const MAX_BYTES: u64 = 4 << 20;

/// The stack of the first pending subtask of the oldest checkpoint in progress, when one is
/// pending and its TaskManager is known; `None` otherwise or when the dump fails.
pub(crate) async fn fetch(client: &FlinkClient, data: &JobData) -> Option<ThreadSample> {
    let (&checkpoint_id, per_vertex) = data.pending.iter().find(|(_, v)| !v.is_empty())?;
    let vertices = &data.details.as_ref()?.vertices;
    // The most upstream vertex with a pending subtask: those downstream wait for its barrier.
    let (vertex, subtask) = vertices.iter().find_map(|v| {
        let (_, subtasks) = per_vertex.iter().find(|(id, _)| *id == v.id)?;
        Some((v, *subtasks.first()?))
    })?;
    let taskmanager = data.locations.get(&(vertex.id.clone(), subtask))?.taskmanager_id.clone()?;
    let dump =
        tokio::time::timeout(TIMEOUT, client.thread_dump(&taskmanager, MAX_BYTES)).await.ok()?.ok()??;
    let operator = vertex.name.clone().unwrap_or_else(|| vertex.id.clone());
    threads::task_thread_sample(
        &dump,
        checkpoint_id,
        &operator,
        subtask,
        vertex.parallelism,
        &taskmanager,
        Timestamp::now(),
    )
}

/// The report's line: `Checkpoint 7, stateful-map #0: blocked in: …`.
pub(crate) fn line(sample: &ThreadSample) -> String {
    format!("Checkpoint {}, {} #{}: {}", sample.checkpoint_id, sample.operator, sample.subtask, sample.text())
}

/// The text output's part: the line under its own heading, when there is one.
pub(crate) fn text(j: &JobReport) -> Option<String> {
    j.blocked_thread.as_ref().map(|l| format!("The thread holding it up:\n  {l}"))
}
