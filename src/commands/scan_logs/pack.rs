//! Packing: a unit's events as the aggregate reads them, their text in one string, handed from
//! a scanning thread to the one that folds them in.

use super::aggregate::BorrowedEvent;

/// A unit's events as the aggregate reads them, their text in one string: what a scanning
/// thread hands over when events are not kept. Each `LogEvent` is dropped on the thread that
/// made it (its eight or so strings freed where they were allocated; with glibc's malloc, frees
/// from another thread contend for the arena's lock), and one string and one vector cross over.
#[derive(Default)]
pub(super) struct PackedEvents {
    text: String,
    events: Vec<PackedEvent>,
}

/// A piece of [`PackedEvents::text`]: (start, end); `NONE` is `None`.
type Piece = (u32, u32);
const NONE: Piece = (u32::MAX, 0);

struct PackedEvent {
    kind: Piece,
    logged_at: Piece,
    job_id: Piece,
    task: Piece,
    taskmanager: Piece,
    reason: Piece,
    detail: Piece,
    cause: Option<(&'static str, Piece, Piece)>,
    checkpoint_id: Option<u64>,
    duration_ms: Option<u64>,
    subtask: Option<u32>,
    consecutive_failures: Option<u32>,
}

impl PackedEvents {
    fn piece(&mut self, s: Option<&str>) -> Piece {
        let Some(s) = s else { return NONE };
        let start = self.text.len();
        self.text.push_str(s);
        // A unit is at most a file range read in one pass; offsets past 4 GiB of event text
        // (never reached: a unit is 16 MiB) would only garble this unit's names, not panic.
        (start as u32, self.text.len() as u32)
    }

    pub(super) fn push(&mut self, e: &BorrowedEvent<'_>) {
        let event = PackedEvent {
            kind: self.piece(Some(e.kind)),
            logged_at: self.piece(e.logged_at),
            job_id: self.piece(e.job_id),
            task: self.piece(e.task),
            taskmanager: self.piece(e.taskmanager),
            reason: self.piece(e.reason),
            detail: self.piece(e.detail),
            cause: e.root_cause.map(|(category, exception, message)| {
                (category, self.piece(Some(exception)), self.piece(Some(message)))
            }),
            checkpoint_id: e.checkpoint_id,
            duration_ms: e.duration_ms,
            subtask: e.subtask,
            consecutive_failures: e.consecutive_failures,
        };
        self.events.push(event);
    }

    fn get(&self, (start, end): Piece) -> Option<&str> {
        (start != u32::MAX).then(|| self.text.get(start as usize..end as usize).unwrap_or_default())
    }

    pub(super) fn views(&self) -> impl Iterator<Item = BorrowedEvent<'_>> {
        self.events.iter().map(|e| BorrowedEvent {
            kind: self.get(e.kind).unwrap_or_default(),
            logged_at: self.get(e.logged_at),
            job_id: self.get(e.job_id),
            checkpoint_id: e.checkpoint_id,
            task: self.get(e.task),
            subtask: e.subtask,
            taskmanager: self.get(e.taskmanager),
            duration_ms: e.duration_ms,
            consecutive_failures: e.consecutive_failures,
            reason: self.get(e.reason),
            detail: self.get(e.detail),
            root_cause: e.cause.map(|(category, exception, message)| {
                (category, self.get(exception).unwrap_or_default(), self.get(message).unwrap_or_default())
            }),
        })
    }
}
