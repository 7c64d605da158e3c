//! `Memo`: a value worked out from a job's inputs, kept until a fingerprint of those inputs
//! changes, so that readers under the state's read lock (every scrape, rule round and API
//! answer) do not work it out again.

use parking_lot::Mutex;

/// The last value and the fingerprint of the inputs it was worked out from.
#[derive(Debug, Default)]
pub(crate) struct Memo<T>(Mutex<Option<(u64, T)>>);

impl<T: Clone> Memo<T> {
    /// The kept value when `fingerprint` is the one it was worked out from, else `compute()`'s
    /// (then kept). The lock is the job's own, held only for this: readers of other jobs never
    /// wait on it.
    pub(crate) fn get_or_compute(&self, fingerprint: u64, compute: impl FnOnce() -> T) -> T {
        // A panic while computing poisons nothing worth keeping: the next reader recomputes.
        let mut kept = self.0.lock();
        match &*kept {
            Some((f, value)) if *f == fingerprint => value.clone(),
            _ => {
                let value = compute();
                *kept = Some((fingerprint, value.clone()));
                value
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_per_fingerprint() {
        let memo: Memo<u32> = Memo::default();
        let mut runs = 0;
        for (fingerprint, want) in [(1, 10), (1, 10), (2, 20), (2, 20), (1, 10)] {
            let got = memo.get_or_compute(fingerprint, || {
                runs += 1;
                fingerprint as u32 * 10
            });
            assert_eq!(got, want);
        }
        assert_eq!(runs, 3, "1, then 2, then 1 again");
    }
}
