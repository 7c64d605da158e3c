//! The persister: the checkpoint store, then the state file, written when the state changed
//! ("Persistence order" in ARCHITECTURE.md).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::app::AppState;
use crate::state::persist;
use crate::time::Timestamp;

/// `last_generation` (or records wait for the store); returns the generation written.
///
/// Exactly-once across a `kill -9`: the snapshot and the batch for the store are taken under
/// one lock, so the batch holds exactly the records of the checkpoints the snapshot marks
/// counted that are not in the store yet. When the store takes the batch, the snapshot is
/// written without them; when it does not (a full disk, a read-only file, a store in
/// back-off), the snapshot holds them and the outbox gets them back. Either way the
/// state file is written: it never waits on a failing store, and every checkpoint it counts is
/// in the store or in it. A restart restores that section into the outbox; writing a record the
/// store already has is the same key, one record.
pub async fn persist_if_changed(app: &Arc<AppState>, dir: &Path, last_generation: u64) -> u64 {
    let generation = app.generation.load(Ordering::Acquire);
    let store = app.store.get().cloned();
    let waiting = store.is_some() && !app.state.read().outbox().is_empty();
    if generation == last_generation && !waiting {
        return last_generation;
    }
    // The batch is taken out first (moved, not copied), so the snapshot under the lock copies
    // no waiting record: with 50,000 waiting that copy was most of the lock's hold. The batch
    // joins the snapshot only if the store does not take it (below, outside the lock).
    let (mut snapshot, records, restores) = {
        let mut state = app.state.write();
        log_dropped(&state.take_dropped_ranges());
        let (records, restores) = match store {
            Some(_) => state.take_store_batch(),
            None => (Vec::new(), Vec::new()),
        };
        (persist::snapshot(&state), records, restores)
    };
    let dir = dir.to_path_buf();
    let done = tokio::task::spawn_blocking(move || {
        let stored = match &store {
            Some(store) if !(records.is_empty() && restores.is_empty()) => {
                match store.write_all(&records, &restores, Timestamp::now()) {
                    Ok(written) => Some(Ok(written)),
                    Err(e) => {
                        snapshot.hold_for_store(records.clone(), restores.clone());
                        Some(Err((e, records, restores)))
                    }
                }
            }
            _ => None,
        };
        let state = persist::write_snapshot(&dir, &snapshot);
        (stored, state)
    })
    .await;
    let Ok((stored, state)) = done else {
        tracing::error!("cannot persist state: the writer panicked");
        app.persisted(Err("the writer panicked".to_string()));
        return last_generation;
    };
    note_store(app, stored);
    match state {
        Ok(()) => {
            app.persisted(Ok(Timestamp::now()));
            generation
        }
        Err(e) => {
            tracing::error!("cannot persist state: {e}");
            app.persisted(Err(e.to_string()));
            last_generation
        }
    }
}

/// A batch written, or refused with the records to put back.
type StoreOutcome = Result<
    crate::state::store::Written,
    (
        crate::state::store::StoreError,
        Vec<crate::state::outbox::Outboxed>,
        Vec<crate::state::outbox::OutboxedRestore>,
    ),
>;

/// What the store did with a batch: counted, or the batch back into the outbox (the state
/// snapshot written beside it holds it too).
fn note_store(app: &AppState, stored: Option<StoreOutcome>) {
    match stored {
        None => {}
        Some(Ok(w)) => {
            app.store_stats.records.store(w.records, Ordering::Relaxed);
            app.store_stats.pruned.fetch_add(w.pruned, Ordering::Relaxed);
        }
        Some(Err((e, records, restores))) => {
            let waiting = records.len() + restores.len();
            tracing::error!(
                waiting,
                "cannot write the checkpoint store; the records wait in the outbox and in the state file: {e}"
            );
            app.store_stats.errors.fetch_add(1, Ordering::Relaxed);
            let mut state = app.state.write();
            state.return_store_batch(records, restores);
        }
    }
}

/// One line per job whose records the full outbox dropped, naming the checkpoint ids.
fn log_dropped(dropped: &[crate::state::outbox::DroppedRange]) {
    for job in dropped {
        tracing::error!(
            cluster = %job.cluster,
            job_id = %job.job_id,
            "job {}: checkpoints {} dropped: the checkpoint store kept failing and its outbox is full",
            job.job_id,
            job.describe()
        );
    }
}
