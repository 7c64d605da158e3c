//! What the daemon knows of a cluster's evidence: short rings of samples per operator, per
//! culprit subtask and per TaskManager, the state skew of each job's latest checkpoint, and the
//! evidence kept beside a checkpoint (`CheckpointEvidence`). Pure: time is an argument.

use std::collections::{BTreeMap, VecDeque};

use crate::observe::{EvidenceRound, FinishedCheckpoint, Load, OperatorLoad, TaskManagerSample};
use crate::time::Timestamp;

/// Samples kept per ring: 80 s at the 10 s minimum interval, so the GC share of the last
/// minute always has a sample a minute old.
pub(crate) const SAMPLES_KEPT: usize = 8;
/// Operators (job, operator chain) with a ring, per cluster; more are cut (counted).
pub(crate) const MAX_OPERATORS: usize = 2_048;
/// Single subtasks (culprits) with a ring, per cluster.
pub(crate) const MAX_SUBTASKS: usize = 256;
/// TaskManagers with a ring, per cluster.
pub(crate) const MAX_TASKMANAGERS: usize = 512;
/// A ring not refreshed for this long is dropped (its job, TaskManager or culprit is gone).
pub(crate) const STALE_AFTER_MS: i64 = 5 * 60_000;
/// The GC share is over (about) this window: "the last minute".
pub(crate) const GC_WINDOW_MS: i64 = 60_000;
/// Below this much state per subtask (median and max alike) skew is not worth a word.
pub(crate) const MEANINGFUL_STATE_BYTES: u64 = 1 << 20;

/// The TaskManager id the REST API takes, from a location `id (address)` (as the poller
/// places subtasks).
pub(crate) fn taskmanager_id(location: &str) -> &str {
    location.split(" (").next().unwrap_or(location)
}

/// A value and when it was sampled.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<T> {
    /// When its round answered.
    pub(crate) at: Timestamp,
    /// The value.
    pub value: T,
}

/// A bounded ring of samples, oldest first ([`SAMPLES_KEPT`]).
pub(crate) type Ring<T> = VecDeque<Sample<T>>;

/// The state size of one operator's subtasks in one checkpoint: max over median.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StateSkew {
    /// The operator chain.
    pub(crate) operator: String,
    /// The subtask with the most state (0-based).
    pub hot_subtask: u32,
    /// Its state, bytes.
    pub max_bytes: u64,
    /// The median subtask's state, bytes.
    pub median_bytes: u64,
    /// Subtasks with a known size.
    pub subtasks: u32,
    /// `max_bytes / median_bytes` (the median at least 1 byte).
    pub ratio: f64,
}

/// The skew of a job's latest completed checkpoint with per-subtask sizes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JobSkew {
    /// The checkpoint it was read from.
    pub(crate) checkpoint_id: u64,
    /// Per operator with more than one subtask.
    pub(crate) operators: Vec<StateSkew>,
}

/// The evidence of one cluster.
#[derive(Clone, Debug, Default)]
pub struct ClusterEvidence {
    /// Per (job id, operator chain): Flink's max and average over its subtasks.
    pub(crate) operators: BTreeMap<(String, String), Ring<OperatorLoad>>,
    /// Per (job id, operator chain, subtask): the culprit subtasks' own load.
    pub(crate) subtasks: BTreeMap<(String, String, u32), Ring<Load>>,
    /// Per TaskManager id.
    pub taskmanagers: BTreeMap<String, Ring<TaskManagerSample>>,
    /// Per job id: its latest checkpoint's state skew.
    pub(crate) skew: BTreeMap<String, JobSkew>,
    /// Evidence rounds, requests made, requests cut by the budget, failed requests.
    pub(crate) rounds: u64,
    /// See `rounds`.
    pub(crate) requests: u64,
    /// See `rounds`.
    pub(crate) requests_cut: u64,
    /// See `rounds`.
    pub(crate) errors: u64,
    /// Series not kept because a map was at its cap.
    pub(crate) series_cut: u64,
    /// When the last round answered.
    pub(crate) last_round: Option<Timestamp>,
}

fn push<K: Ord + Clone, T>(
    map: &mut BTreeMap<K, Ring<T>>,
    key: &K,
    cap: usize,
    at: Timestamp,
    value: T,
) -> bool {
    if !map.contains_key(key) && map.len() >= cap {
        return false;
    }
    let ring = map.entry(key.clone()).or_default();
    ring.push_back(Sample { at, value });
    while ring.len() > SAMPLES_KEPT {
        ring.pop_front();
    }
    true
}

impl ClusterEvidence {
    /// Takes one round in.
    pub fn apply(&mut self, round: &EvidenceRound) {
        let at = round.at;
        self.rounds += 1;
        self.requests += u64::from(round.requests);
        self.requests_cut += u64::from(round.requests_cut);
        self.errors += u64::from(round.errors);
        self.last_round = Some(at);
        let mut cut = 0;
        for op in &round.operators {
            let key = (op.job_id.clone(), op.operator.clone());
            cut += u64::from(!push(&mut self.operators, &key, MAX_OPERATORS, at, op.clone()));
        }
        for st in &round.subtasks {
            let key = (st.job_id.clone(), st.operator.clone(), st.subtask);
            cut += u64::from(!push(&mut self.subtasks, &key, MAX_SUBTASKS, at, st.load));
        }
        for tm in &round.taskmanagers {
            cut += u64::from(!push(&mut self.taskmanagers, &tm.id, MAX_TASKMANAGERS, at, tm.clone()));
        }
        self.series_cut += cut;
    }

    /// Notes the state skew of the newest completed checkpoint among `finished` that has
    /// per-subtask sizes (older ones than the one kept change nothing).
    pub(crate) fn observe_checkpoints(&mut self, job_id: &str, finished: &[FinishedCheckpoint]) {
        let newest = finished
            .iter()
            .filter(|cp| cp.status == crate::observe::CheckpointStatus::Completed)
            .filter(|cp| cp.operators.iter().any(|o| o.subtasks.iter().any(|s| s.state_size_bytes.is_some())))
            .max_by_key(|cp| cp.id);
        let Some(cp) = newest else { return };
        if self.skew.get(job_id).is_some_and(|s| s.checkpoint_id >= cp.id) {
            return;
        }
        let operators = cp
            .operators
            .iter()
            .filter_map(|o| skew_of(&o.name, o.subtasks.iter().map(|s| (s.index, s.state_size_bytes))))
            .collect();
        self.skew.insert(job_id.to_string(), JobSkew { checkpoint_id: cp.id, operators });
    }

    /// Drops rings not refreshed since [`STALE_AFTER_MS`] before `now`, and the skew of jobs
    /// `known` says are gone.
    pub(crate) fn expire(&mut self, now: Timestamp, known: impl Fn(&str) -> bool) {
        fn fresh<T>(ring: &Ring<T>, now: Timestamp) -> bool {
            ring.back().is_some_and(|s| now.millis() - s.at.millis() <= STALE_AFTER_MS)
        }
        self.operators.retain(|_, r| fresh(r, now));
        self.subtasks.retain(|_, r| fresh(r, now));
        self.taskmanagers.retain(|_, r| fresh(r, now));
        self.skew.retain(|job, _| known(job));
    }

    /// The GC share of `taskmanager` over about the last minute before `at`: time in GC over
    /// wall time between the newest sample at or before `at` and the oldest one at most
    /// [`GC_WINDOW_MS`] (plus a tenth) earlier; with the collector that took most of it.
    /// `None` with fewer than two samples, or when the counters went down (a restarted JVM).
    pub fn gc_share(&self, taskmanager: &str, at: Timestamp) -> Option<GcShare> {
        let ring = self.taskmanagers.get(taskmanager)?;
        let last = ring.iter().rev().find(|s| s.at.millis() <= at.millis())?;
        let first = ring.iter().find(|s| {
            s.at.millis() < last.at.millis() && last.at.millis() - s.at.millis() <= GC_WINDOW_MS * 11 / 10
        });
        let Some(first) = first else { return flinks_rate(last) };
        let wall = (last.at.millis() - first.at.millis()) as f64;
        let mut total = 0.0;
        let mut dominant: Option<(&str, f64)> = None;
        for c in &last.value.collectors {
            let before = first.value.collectors.iter().find(|b| b.name == c.name)?;
            let spent = c.time_ms?.checked_sub(before.time_ms?)? as f64;
            total += spent;
            if spent > 0.0 && dominant.is_none_or(|(_, d)| spent > d) {
                dominant = Some((&c.name, spent));
            }
        }
        (!last.value.collectors.is_empty()).then(|| GcShare {
            ratio: (total / wall).clamp(0.0, 1.0),
            window_ms: wall as u64,
            collector: dominant.map(|(n, _)| n.to_string()),
            at: last.at,
        })
    }
}

/// With one sample only: Flink's own `TimeMsPerSecond` of each collector (1.19+, a rate over
/// the last minute), when it reports them.
fn flinks_rate(last: &Sample<TaskManagerSample>) -> Option<GcShare> {
    let rates: Vec<(&str, f64)> = last
        .value
        .collectors
        .iter()
        .map(|c| Some((c.name.as_str(), c.time_ms_per_second?)))
        .collect::<Option<_>>()?;
    let total: f64 = rates.iter().map(|(_, r)| r).sum();
    let dominant = rates.iter().filter(|(_, r)| *r > 0.0).max_by(|a, b| a.1.total_cmp(&b.1));
    (!rates.is_empty()).then(|| GcShare {
        ratio: (total / 1000.0).clamp(0.0, 1.0),
        window_ms: GC_WINDOW_MS as u64,
        collector: dominant.map(|(n, _)| n.to_string()),
        at: last.at,
    })
}

/// The share of wall time a TaskManager spent in GC.
#[derive(Clone, Debug, PartialEq)]
pub struct GcShare {
    /// 0–1.
    pub ratio: f64,
    /// Over this much wall time, ms.
    pub window_ms: u64,
    /// The collector that spent most of it.
    pub collector: Option<String>,
    /// The newest sample it rests on.
    pub(crate) at: Timestamp,
}

/// The skew of one operator from its subtasks' (index, state size): `None` with fewer than two
/// known sizes or a max below [`MEANINGFUL_STATE_BYTES`].
pub fn skew_of(operator: &str, sizes: impl Iterator<Item = (u32, Option<u64>)>) -> Option<StateSkew> {
    let mut known: Vec<(u32, u64)> = sizes.filter_map(|(i, s)| Some((i, s?))).collect();
    if known.len() < 2 {
        return None;
    }
    known.sort_by_key(|&(i, s)| (s, std::cmp::Reverse(i)));
    let (hot_subtask, max_bytes) = *known.last()?;
    let n = known.len();
    let median_bytes = if n % 2 == 1 { known[n / 2].1 } else { (known[n / 2 - 1].1 + known[n / 2].1) / 2 };
    (max_bytes >= MEANINGFUL_STATE_BYTES).then(|| StateSkew {
        operator: operator.to_string(),
        hot_subtask,
        max_bytes,
        median_bytes,
        subtasks: n as u32,
        ratio: max_bytes as f64 / median_bytes.max(1) as f64,
    })
}

/// The evidence beside one checkpoint: its culprit subtask and that subtask's TaskManager at
/// that moment, in one sentence with the numbers it rests on (`state::evidence_at` makes it).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CheckpointEvidence {
    /// One sentence, e.g. "stateful-map #0 on tm-2: busy 100 %, backpressured 0 %, …".
    pub text: String,
    /// Why, as far as the evidence says: `blocking` (backpressure or skew), `timeout`
    /// (snapshot or GC), `failure` (an exception); `None` when it says nothing.
    pub class: Option<String>,
    /// The evidence the class rests on: `backpressure`, `input_buffers`, `skew`, `gc`,
    /// `snapshot`, `exception`.
    pub used: Vec<String>,
    /// Why the evidence is thin (samples missing or older than the checkpoint), else `None`.
    pub thin: Option<String>,
    /// The culprit subtask: operator chain, index (0-based), TaskManager.
    pub(crate) operator: String,
    /// See `operator`.
    pub(crate) subtask: u32,
    /// See `operator`.
    pub(crate) taskmanager: Option<String>,
    /// When the subtask's and the TaskManager's samples were taken; `sampled_at_ms` in the API
    /// like every other time (a record written before that name still reads).
    #[serde(rename = "sampled_at_ms", alias = "sampled_at")]
    pub(crate) sampled_at: Option<Timestamp>,
    /// The subtask's busy, backpressured and idle shares, input and output buffer usage, 0–1.
    pub(crate) busy: Option<f64>,
    /// See `busy`.
    pub(crate) backpressured: Option<f64>,
    /// See `busy`.
    pub(crate) idle: Option<f64>,
    /// See `busy`.
    pub(crate) input_pool_usage: Option<f64>,
    /// See `busy`.
    pub(crate) output_pool_usage: Option<f64>,
    /// Whether the subtask's numbers are its own (`false`: its operator's maxima over subtasks).
    pub own_subtask: bool,
    /// The TaskManager's GC share of the last minute (0–1) and its main collector.
    pub gc_ratio: Option<f64>,
    /// See `gc_ratio`.
    pub(crate) gc_collector: Option<String>,
    /// Its heap used and max, bytes, and CPU load (0–1).
    pub(crate) heap_used_bytes: Option<f64>,
    /// See `heap_used_bytes`.
    pub(crate) heap_max_bytes: Option<f64>,
    /// See `heap_used_bytes`.
    pub(crate) cpu_load: Option<f64>,
    /// The operator's state skew (max/median) and whether the culprit is its hot subtask.
    pub(crate) state_skew: Option<f64>,
    /// See `state_skew`.
    pub(crate) hot_subtask: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{CollectorCounters, SubtaskEvidence};

    fn tm(id: &str, gc_ms: u64) -> TaskManagerSample {
        let collector = |name: &str, t| CollectorCounters {
            name: name.into(),
            count: Some(1),
            time_ms: Some(t),
            ..Default::default()
        };
        TaskManagerSample {
            id: id.into(),
            collectors: vec![collector("G1_Young_Generation", 100), collector("G1_Old_Generation", gc_ms)],
            ..Default::default()
        }
    }

    fn round(at: i64, taskmanagers: Vec<TaskManagerSample>) -> EvidenceRound {
        EvidenceRound { cluster: "c".into(), at: Timestamp(at), taskmanagers, ..Default::default() }
    }

    #[test]
    fn rings_keep_their_newest_samples_and_caps_count_what_they_cut() {
        let mut e = ClusterEvidence::default();
        for i in 0..20 {
            e.apply(&round(i * 10_000, vec![tm("a", 0)]));
        }
        assert_eq!(e.taskmanagers["a"].len(), SAMPLES_KEPT);
        assert_eq!(e.taskmanagers["a"].front().unwrap().at, Timestamp((20 - SAMPLES_KEPT as i64) * 10_000));
        let many: Vec<TaskManagerSample> =
            (0..MAX_TASKMANAGERS + 3).map(|i| tm(&format!("tm-{i}"), 0)).collect();
        e.apply(&round(300_000, many));
        assert_eq!(e.taskmanagers.len(), MAX_TASKMANAGERS);
        assert_eq!(e.series_cut, 4, "a was there already: 3 + 1 new ones over the cap");
        let subtasks = (0..MAX_SUBTASKS as u32 + 1)
            .map(|i| SubtaskEvidence {
                job_id: "j".into(),
                operator: "op".into(),
                subtask: i,
                load: Load::default(),
            })
            .collect();
        e.apply(&EvidenceRound {
            cluster: "c".into(),
            at: Timestamp(300_000),
            subtasks,
            ..Default::default()
        });
        assert_eq!(e.subtasks.len(), MAX_SUBTASKS);
        assert_eq!(e.series_cut, 5);
    }

    #[test]
    fn the_gc_share_is_over_about_a_minute_and_none_after_a_jvm_restart() {
        let mut e = ClusterEvidence::default();
        // 30 s of GC in 60 s (old), then a restarted JVM whose counters went down.
        for (at, gc) in [(0, 1_000), (30_000, 16_000), (60_000, 31_000)] {
            e.apply(&round(at, vec![tm("a", gc)]));
        }
        let share = e.gc_share("a", Timestamp(60_000)).unwrap();
        assert_eq!((share.ratio, share.window_ms), (0.5, 60_000));
        assert_eq!(share.collector.as_deref(), Some("G1_Old_Generation"));
        // At 30 s only the first 30 s count.
        assert_eq!(e.gc_share("a", Timestamp(45_000)).unwrap().ratio, 0.5);
        // Samples older than the window plus a tenth are not used.
        e.apply(&round(130_000, vec![tm("a", 31_000)]));
        assert_eq!(e.gc_share("a", Timestamp(130_000)), None, "the previous sample is 70 s old");
        e.apply(&round(140_000, vec![tm("a", 10)]));
        assert_eq!(e.gc_share("a", Timestamp(140_000)), None, "counters went down: a new JVM");
        assert_eq!(e.gc_share("nobody", Timestamp(140_000)), None);
    }

    #[test]
    fn rings_of_gone_subjects_expire_and_skew_needs_two_sizes_and_a_mebibyte() {
        let mut e = ClusterEvidence::default();
        e.apply(&round(0, vec![tm("a", 0)]));
        e.apply(&round(STALE_AFTER_MS, vec![tm("b", 0)]));
        e.expire(Timestamp(STALE_AFTER_MS + 1), |_| true);
        assert_eq!(e.taskmanagers.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(skew_of("op", [(0, Some(5 << 20))].into_iter()), None, "one size");
        assert_eq!(skew_of("op", [(0, Some(1000)), (1, Some(10))].into_iter()), None, "under 1 MiB");
        let s = skew_of(
            "op",
            [(0, Some(1 << 20)), (1, Some(4 << 20)), (2, None), (3, Some(1 << 20))].into_iter(),
        )
        .unwrap();
        assert_eq!((s.hot_subtask, s.subtasks, s.ratio), (1, 3, 4.0));
    }
}
