//! How many requests the poller keeps in flight to one JobManager (pure, time an argument): as
//! many as a round needs to fit in half the poll interval at the measured answer time and
//! requests per job, within a cap of [`PER_REST_THREAD`] per REST handler thread of the
//! JobManager (`rest.server.numThreads`, Flink's default 4), unless `max_concurrent_requests`
//! fixes it. docs/performance.md, "Requests in flight".

use std::time::Duration;

/// Flink's default `rest.server.numThreads` (`RestOptions.SERVER_NUM_THREADS`: "The number of
/// threads for the asynchronous processing of requests", default 4), when the JobManager's
/// `/jobmanager/config` does not say.
pub(crate) const FLINK_REST_THREADS: usize = 4;

/// Requests in flight per REST handler thread at most. A handler thread answers most of the
/// poller's requests from the JobManager's caches in well under a millisecond, while a request
/// spends milliseconds on the network: at 5 ms a round trip, one thread keeps up with about
/// eight waiting clients before requests queue in front of it. 4 threads: 32 in flight.
pub(crate) const PER_REST_THREAD: usize = 8;

/// Never fewer than this many (or the cap, when it is lower): a small cluster's round is short
/// anyway, and a first round asks each job several questions.
pub(crate) const MIN_IN_FLIGHT: usize = 4;

/// The share of the poll interval a round's requests aim to fill, leaving the rest for the
/// daemon's own work in the round and for answers slower than measured.
pub(crate) const ROUND_SHARE: f64 = 0.5;

/// The answer time assumed before one is measured (a JobManager in another pod or zone).
pub(crate) const ASSUMED_ANSWER: Duration = Duration::from_millis(5);

/// Requests per watched job assumed before a round has measured them (a job's checkpoints and
/// the details of a new one).
pub(crate) const ASSUMED_REQUESTS_PER_JOB: f64 = 2.0;

/// What the choice is made from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Demand {
    /// Jobs watched this round.
    pub(crate) jobs: usize,
    /// Requests per job in the last round (`None`: none measured yet).
    pub(crate) requests_per_job: Option<f64>,
    /// The mean answer time of the last round's requests (`None`: none measured yet).
    pub(crate) answer: Option<Duration>,
    /// The poll interval.
    pub(crate) interval: Duration,
    /// The JobManager's `rest.server.numThreads` (`None`: not known, Flink's default assumed).
    pub(crate) rest_threads: Option<usize>,
}

/// The requests in flight for `demand`; `fixed` (`max_concurrent_requests`) overrides it.
pub(crate) fn requests_in_flight(demand: &Demand, fixed: Option<usize>) -> usize {
    if let Some(n) = fixed {
        return n.max(1);
    }
    let cap = demand.rest_threads.unwrap_or(FLINK_REST_THREADS).max(1).saturating_mul(PER_REST_THREAD);
    let per_job = demand.requests_per_job.unwrap_or(ASSUMED_REQUESTS_PER_JOB).max(1.0);
    let answer = demand.answer.unwrap_or(ASSUMED_ANSWER).as_secs_f64();
    let budget = demand.interval.as_secs_f64() * ROUND_SHARE;
    let work = demand.jobs as f64 * per_job * answer;
    let needed = if budget > 0.0 { (work / budget).ceil() } else { f64::INFINITY };
    let needed = if needed.is_finite() { needed as usize } else { usize::MAX };
    needed.clamp(MIN_IN_FLIGHT.min(cap), cap)
}

#[cfg(test)]
/// How long a round's requests take at `in_flight` (the model the choice inverts): the
/// requests of `demand` at its answer time, `in_flight` at a time.
pub(crate) fn round_estimate(demand: &Demand, in_flight: usize) -> Duration {
    let per_job = demand.requests_per_job.unwrap_or(ASSUMED_REQUESTS_PER_JOB).max(1.0);
    let answer = demand.answer.unwrap_or(ASSUMED_ANSWER).as_secs_f64();
    let requests = (demand.jobs as f64 * per_job).ceil();
    Duration::from_secs_f64((requests / in_flight.max(1) as f64).ceil() * answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(jobs: usize, answer_ms: u64, interval_s: u64) -> Demand {
        Demand {
            jobs,
            requests_per_job: Some(2.0),
            answer: Some(Duration::from_millis(answer_ms)),
            interval: Duration::from_secs(interval_s),
            rest_threads: None,
        }
    }

    #[test]
    fn the_defaults_keep_the_round_under_the_interval_from_1_to_10000_jobs_at_5_ms() {
        for interval in [5, 10] {
            for jobs in [1, 10, 100, 1_000, 2_000, 5_000, 10_000] {
                let d = demand(jobs, 5, interval);
                let n = requests_in_flight(&d, None);
                let round = round_estimate(&d, n);
                assert!(
                    round < Duration::from_secs(interval),
                    "{jobs} jobs every {interval} s: {n} in flight, a round of {round:?}"
                );
                assert!((MIN_IN_FLIGHT..=FLINK_REST_THREADS * PER_REST_THREAD).contains(&n), "{n}");
            }
        }
    }

    #[test]
    fn the_choice_grows_with_the_jobs_and_the_answer_time() {
        // The figures docs/performance.md records (10 s interval, 2 requests a job, 5 ms).
        let at = |jobs, ms| requests_in_flight(&demand(jobs, ms, 10), None);
        assert_eq!((at(10, 5), at(1_000, 5), at(10_000, 5)), (4, 4, 20));
        assert!(at(10_000, 5) < at(10_000, 7));
        // Slow answers cannot be made up by more than the JobManager's threads allow.
        assert_eq!(at(10_000, 50), 32);
        assert_eq!(at(0, 5), MIN_IN_FLIGHT);
    }

    #[test]
    fn the_cap_follows_the_rest_threads_and_an_explicit_setting_wins() {
        let mut d = demand(10_000, 50, 10);
        d.rest_threads = Some(16);
        assert_eq!(requests_in_flight(&d, None), 128);
        d.rest_threads = Some(1);
        assert_eq!(requests_in_flight(&d, None), 8);
        d.rest_threads = Some(0);
        assert_eq!(requests_in_flight(&d, None), 8, "a nonsense 0 counts as one thread");
        assert_eq!(requests_in_flight(&d, Some(3)), 3);
        assert_eq!(requests_in_flight(&demand(1, 5, 10), Some(64)), 64);
    }

    #[test]
    fn before_any_measurement_it_assumes_5_ms_and_two_requests_a_job() {
        let d = Demand {
            jobs: 10_000,
            requests_per_job: None,
            answer: None,
            interval: Duration::from_secs(10),
            rest_threads: None,
        };
        assert_eq!(requests_in_flight(&d, None), 20);
        let zero = Demand { interval: Duration::ZERO, ..d };
        assert_eq!(requests_in_flight(&zero, None), 32);
    }
}
