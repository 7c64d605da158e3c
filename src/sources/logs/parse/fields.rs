//! The fields of a recognised line: a task name split into the operator and its 0-based
//! subtask, and an event's fields made uniform across Flink versions (`refine`).

use crate::observe::{LogEvent, LogKind};

/// The 0-based subtask index of a task name like `Map -> Sink (3/8)#0`.
pub fn subtask_of(task: &str) -> Option<u32> {
    split_task(task).1
}

/// `Map -> Sink (3/8)#0` → (`Map -> Sink`, Some(2)): the operator's name and the 0-based
/// subtask index (Flink's `(k/n)` counts from 1; `#0` is the attempt number and is dropped).
/// A name without `(k/n)` comes back whole.
pub fn split_task(task: &str) -> (&str, Option<u32>) {
    let task = task.trim_end();
    let without_attempt = match task.rfind(")#") {
        Some(i) if task[i + 2..].bytes().all(|b| b.is_ascii_digit()) => &task[..=i],
        _ => task,
    };
    let parsed = (|| {
        let inner = without_attempt.strip_suffix(')')?;
        let open = inner.rfind('(')?;
        let (index, parallelism) = inner[open + 1..].split_once('/')?;
        parallelism.parse::<u32>().ok()?;
        let index = index.parse::<u32>().ok()?.checked_sub(1)?;
        Some((inner[..open].trim_end(), index))
    })();
    match parsed {
        Some((name, index)) if !name.is_empty() => (name, Some(index)),
        _ => (task, None),
    }
}

/// Kind-specific clean-ups after the captures are in.
pub(super) fn refine(event: &mut LogEvent) {
    if let Some(task) = &event.task {
        // `stateful-map (1/2)#0`: Flink counts subtasks from 1 in names, from 0 in REST; `#0`
        // is the attempt number, not a subtask. The task keeps the operator's name alone and
        // the subtask its 0-based index, as the REST API numbers it.
        let (name, subtask) = split_task(task);
        if event.subtask.is_none() {
            event.subtask = subtask;
        }
        if subtask.is_some() {
            event.task = Some(name.to_string());
        }
    }
    if event.kind == LogKind::TriggerFailed
        && let Some((_, why)) = event.reason.as_deref().and_then(|r| r.split_once("Failure reason: "))
    {
        event.reason = Some(why.trim_end_matches('.').to_string() + ".");
    }
}
