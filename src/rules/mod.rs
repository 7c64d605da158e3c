//! Rules: conditions over what the daemon knows, and the alert state machine they drive.
//!
//! Pure: `Evaluator::evaluate(&State, now)` reads the state (`evaluate_with` also the daemon's
//! own facts, `DaemonFacts`), keeps the little history that `increase()` and `ago()` need, and
//! moves each alert through inactive → pending → firing → resolved. Sending to Alertmanager is
//! `alerting`'s job.

pub mod alert;
pub mod builtin;
pub(crate) mod context;
pub(crate) mod expr;
pub(crate) mod incidents;
pub(crate) mod labels;
pub mod render;
pub mod series;
pub(crate) mod subjects;
pub(crate) mod text;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::state::State;
use crate::time::Timestamp;
pub use alert::{Alert, AlertState, AlertsView};
use context::{EvalContext, SeriesHistory, Subject};
use expr::Condition;
pub(crate) use labels::Labels;
pub use render::{format_bytes, format_duration, render};
pub(crate) use series::Scope;
pub(crate) use subjects::DaemonFacts;
use subjects::{
    ClusterView, DaemonView, IncidentView, JobView, TaskManagerView, evaluated_jobs, taskmanagers,
};
pub(crate) use text::Text;

/// How many resolved alerts are remembered for the API and status page.
pub(crate) const HISTORY: usize = 256;

/// An alert's severity (its `severity` label), as the monitoring-mixins guideline has it. Unrelated
/// to a log event's `observe::EventSeverity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertSeverity {
    /// Wake someone up.
    Critical,
    /// Look at it today.
    Warning,
    /// For the record.
    Info,
}

/// The failure classes the alerts and `diagnose` share: blocking, timeout, failure; and
/// `advice`, the other lane: an alert of that class is about a job's configuration, not its
/// health, and never makes a job or a cluster "not ok" (`health::job_health`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Barriers do not get through: backpressure, skew, alignment.
    Blocking,
    /// The snapshot is too slow: state size, storage.
    Timeout,
    /// Checkpoints or the job fail.
    Failure,
    /// Configuration advice: a risk to act on by day, not a failure now.
    Advice,
}

impl AlertSeverity {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertSeverity::Critical => "critical",
            AlertSeverity::Warning => "warning",
            AlertSeverity::Info => "info",
        }
    }
}

impl Class {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Blocking => "blocking",
            Class::Timeout => "timeout",
            Class::Failure => "failure",
            Class::Advice => "advice",
        }
    }
}

/// A rule as written in the config (`[[rules]]`) or in the built-in pack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// The alert name, e.g. `FlinkCheckpointDurationHigh`.
    pub name: String,
    /// The condition, evaluated per job, cluster or TaskManager as `scope` says (see
    /// `rules::expr`, and `rules::series` for the series of each scope).
    pub expr: String,
    /// What the rule is evaluated for: `job` (the default), `cluster` or `taskmanager`.
    #[serde(default, skip_serializing_if = "Scope::is_job")]
    pub scope: Scope,
    /// How long the condition must hold before the alert fires.
    #[serde(rename = "for", with = "humantime_serde", default)]
    pub for_: Duration,
    /// How long a firing alert keeps firing after its condition stopped holding (Prometheus'
    /// `keep_firing_for`): one alert across a run of short episodes instead of one per episode.
    /// The alert still ends at once when its job ends or its rule goes.
    #[serde(with = "humantime_serde", default)]
    pub keep_firing_for: Duration,
    /// Severity label.
    pub severity: AlertSeverity,
    /// Failure class label.
    pub class: Class,
    /// Extra labels.
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    /// One-line summary; `{{ … }}` placeholders are filled in (see `render`).
    pub(crate) summary: String,
    /// Longer description, with placeholders.
    pub(crate) description: String,
    /// Where the runbook section is.
    pub runbook_url: String,
}

/// A rule ready to evaluate.
#[derive(Clone, Debug)]
pub struct Rule {
    /// What was written.
    pub(crate) spec: RuleSpec,
    condition: Condition,
}

impl Rule {
    /// Parses the rule's condition; the error names the problem and the column.
    pub fn new(spec: RuleSpec) -> Result<Rule, expr::ParseError> {
        let scope = spec.scope;
        let condition = Condition::parse(&spec.expr, &|name| series::is_known(scope, name))?;
        Ok(Rule { spec, condition })
    }

    /// The parsed condition.
    pub(crate) fn condition(&self) -> &Condition {
        &self.condition
    }
}

/// An alert's identity: its labels without `job_name` (a renamed job keeps its alerts).
type Identity = Box<[(Text, Text)]>;

/// What a rule is evaluated for: its scope, cluster, and the job id or TaskManager id (empty
/// for a cluster).
type Entity = (Scope, String, String);

/// Evaluates rules over the state and keeps the alerts.
pub struct Evaluator {
    rules: Vec<Rule>,
    /// Per scope, the `increase()`/`ago()` windows of its rules, derived once per rule set.
    windows: HashMap<Scope, Vec<context::RingSpec>>,
    histories: HashMap<Entity, SeriesHistory>,
    alerts: Alerts,
    /// The incidents of the latest evaluation (`incidents::incidents`), computed once a round.
    incidents: Arc<Vec<incidents::Incident>>,
}

/// The alerts: active ones by identity, and the recently resolved.
#[derive(Default)]
struct Alerts {
    active: BTreeMap<Identity, ActiveAlert>,
    history: VecDeque<Alert>,
    /// The evaluation under way (counted from 1), to tell the alerts that held in it.
    round: u64,
    /// The label names and values, annotation names and runbook URLs of the alerts, each
    /// held once (pruned after every evaluation).
    texts: text::Interner,
}

/// An active alert, and when its condition last held.
struct ActiveAlert {
    /// Shared with the readers' view and the delivery (cloned only when it changes while
    /// they hold it): at 10,000 jobs each round copied ~20,000 alerts three times (issue 31).
    alert: Arc<Alert>,
    /// The evaluation in which its condition last held, and when.
    held_in_round: u64,
    last_held: Timestamp,
}

/// What one evaluation saw: the alerts whose condition held and what was evaluated.
#[derive(Default)]
struct Round {
    evaluated: HashSet<Entity>,
}

impl Evaluator {
    /// An evaluator for `rules`.
    pub fn new(rules: Vec<Rule>) -> Self {
        let windows = windows_of(&rules);
        Evaluator {
            rules,
            windows,
            histories: HashMap::new(),
            alerts: Alerts::default(),
            incidents: Arc::default(),
        }
    }

    /// The rules.
    pub(crate) fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Replaces the rules (config reload); alerts of rules that are gone resolve.
    pub(crate) fn set_rules(&mut self, rules: Vec<Rule>) {
        self.windows = windows_of(&rules);
        self.rules = rules;
    }

    /// Pending and firing alerts.
    pub fn active(&self) -> impl Iterator<Item = &Alert> {
        self.alerts.active.values().map(|a| &*a.alert)
    }

    /// Pending and firing alerts, shared: cloning one copies a pointer.
    pub(crate) fn active_shared(&self) -> impl Iterator<Item = &Arc<Alert>> {
        self.alerts.active.values().map(|a| &a.alert)
    }

    /// The incidents of the latest evaluation, shared.
    pub(crate) fn incidents(&self) -> Arc<Vec<incidents::Incident>> {
        Arc::clone(&self.incidents)
    }

    /// Recently resolved alerts, oldest first.
    pub(crate) fn resolved(&self) -> impl Iterator<Item = &Alert> {
        self.alerts.history.iter()
    }

    /// Evaluates every rule for every job, cluster or TaskManager of its scope at `now`, and
    /// the daemon's rules over a daemon without a store whose state file is written.
    /// Returns the alerts that resolved in this evaluation (they must still be sent once with
    /// their end time).
    pub fn evaluate(&mut self, state: &State, now: Timestamp) -> Vec<Alert> {
        self.evaluate_with(state, &DaemonFacts::default(), now)
    }

    /// [`Evaluator::evaluate`], the daemon-scope rules reading `facts`.
    pub(crate) fn evaluate_with(&mut self, state: &State, facts: &DaemonFacts, now: Timestamp) -> Vec<Alert> {
        let mut round = Round::default();
        self.alerts.round += 1;
        self.incidents = Arc::new(incidents::incidents(state, now));
        let incidents = Arc::clone(&self.incidents);
        self.evaluate_incidents(&incidents, now, &mut round);
        // A job's alerts carry the id of the (largest) incident it is in: `incident`, for
        // Alertmanager to group or inhibit them (docs/alerting.md); not part of their identity.
        let mut incident_of: HashMap<(&str, &str), &str> = HashMap::new();
        for i in incidents.iter() {
            for m in &i.members {
                incident_of.entry((m.cluster.as_str(), m.job_id.as_str())).or_insert(i.id.as_str());
            }
        }
        if self.windows.contains_key(&Scope::Daemon) {
            let subject = Subject::Daemon(DaemonView { facts });
            let entity = (Scope::Daemon, String::new(), String::new());
            self.evaluate_subject(entity, subject, &[], &Detail::default(), now, &mut round);
        }
        for (cluster_name, cluster) in state.clusters() {
            if self.windows.contains_key(&Scope::Cluster) {
                let subject = Subject::Cluster(ClusterView { cluster, now });
                let entity = (Scope::Cluster, cluster_name.clone(), String::new());
                let labels = [("cluster", cluster_name.as_str())];
                self.evaluate_subject(entity, subject, &labels, &Detail::default(), now, &mut round);
            }
            if self.windows.contains_key(&Scope::TaskManager) {
                for (id, figures) in &taskmanagers(cluster) {
                    let subject = Subject::TaskManager(TaskManagerView { figures });
                    let entity = (Scope::TaskManager, cluster_name.clone(), id.clone());
                    let labels = [("cluster", cluster_name.as_str()), ("taskmanager", id.as_str())];
                    self.evaluate_subject(entity, subject, &labels, &Detail::default(), now, &mut round);
                }
            }
            if !self.windows.contains_key(&Scope::Job) {
                continue;
            }
            for (job_id, job) in evaluated_jobs(cluster) {
                let evidence = Some(&cluster.evidence);
                let subject = Subject::Job(JobView { job, job_id, logs: Some(&cluster.logs), evidence, now });
                let entity = (Scope::Job, cluster_name.clone(), job_id.clone());
                let mut labels = vec![
                    ("cluster", cluster_name.as_str()),
                    ("job_id", job_id.as_str()),
                    ("job_name", &job.name),
                ];
                if let Some(id) = incident_of.get(&(cluster_name.as_str(), job_id.as_str())) {
                    labels.push(("incident", id));
                }
                let detail = Detail::blocked_thread(job, now);
                self.evaluate_subject(entity, subject, &labels, &detail, now, &mut round);
            }
        }
        let resolved = self.end_alerts(now, &round);
        self.histories.retain(|(scope, cluster, id), _| match scope {
            Scope::Job => {
                state.clusters().get(cluster).is_some_and(|c| c.jobs.get(id).is_some_and(|j| j.listed))
            }
            Scope::Cluster => state.clusters().contains_key(cluster),
            Scope::TaskManager => round.evaluated.contains(&(*scope, cluster.clone(), id.clone())),
            Scope::Daemon => true,
            Scope::Incident => round.evaluated.contains(&(*scope, cluster.clone(), id.clone())),
        });
        resolved
    }

    /// Evaluates the incident rules for each incident: labelled `incident`, `incident_cause`,
    /// `incident_value` and `cluster` (its jobs' one cluster; left out when they span several).
    fn evaluate_incidents(&mut self, incidents: &[incidents::Incident], now: Timestamp, round: &mut Round) {
        if !self.windows.contains_key(&Scope::Incident) {
            return;
        }
        for incident in incidents {
            let first = incident.members.first().map_or("", |m| m.cluster.as_str());
            let cluster = if incident.members.iter().all(|m| m.cluster == first) { first } else { "" };
            let entity = (Scope::Incident, cluster.to_string(), incident.id.clone());
            let mut labels = vec![
                ("incident", incident.id.as_str()),
                ("incident_cause", incident.cause.kind.as_str()),
                ("incident_value", incident.cause.value.as_str()),
            ];
            if !cluster.is_empty() {
                labels.push(("cluster", cluster));
            }
            let subject = Subject::Incident(IncidentView { incident });
            self.evaluate_subject(entity, subject, &labels, &Detail::default(), now, round);
        }
    }

    /// Evaluates the rules of `subject`'s scope for it; `labels` name it (`cluster`, `job_id`, …).
    fn evaluate_subject(
        &mut self,
        entity: Entity,
        subject: Subject<'_>,
        labels: &[(&str, &str)],
        detail: &Detail,
        now: Timestamp,
        round: &mut Round,
    ) {
        let scope = entity.0;
        round.evaluated.insert(entity.clone());
        let history = self.histories.entry(entity).or_default();
        history.sample(&subject, now, &self.windows[&scope]);
        let ctx = EvalContext::new(subject, history, now);
        // The texts (the evidence beside a checkpoint, a cluster's riskiest jobs) only for a
        // subject that a rule holds for: most hold for none, and a round has 10,000 jobs.
        let mut texts: Option<Vec<(&'static str, String)>> = None;
        for rule in self.rules.iter().filter(|r| r.spec.scope == scope) {
            let outcome = rule.condition().eval(&ctx);
            // Most rules hold for no job: labels only for those that do.
            if outcome.holds {
                let none = Detail::default();
                let detail = if detail.read_by(rule) { detail } else { &none };
                let texts = texts.get_or_insert_with(|| match ctx.subject() {
                    Subject::Job(view) => view.texts(),
                    Subject::Cluster(view) => view.texts(),
                    Subject::Incident(view) => view.texts(),
                    _ => Vec::new(),
                });
                self.alerts.hold(rule, (labels, detail, texts), outcome.value, &ctx, now);
            }
        }
    }

    /// Alerts whose condition no longer holds (or whose subject or rule is gone) end here:
    /// pending ones silently, firing ones as resolved, which are returned.
    fn end_alerts(&mut self, now: Timestamp, round: &Round) -> Vec<Alert> {
        let ended: Vec<Identity> = self
            .alerts
            .active
            .iter()
            .filter(|(_, active)| {
                active.held_in_round != self.alerts.round && !self.keeps_firing(active, now, &round.evaluated)
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut resolved = Vec::new();
        for identity in ended {
            if let Some(mut alert) = self
                .alerts
                .active
                .remove(&identity)
                .map(|a| Arc::unwrap_or_clone(a.alert))
                .filter(|a| a.state == AlertState::Firing)
            {
                alert.state = AlertState::Resolved;
                alert.resolved_at = Some(now);
                resolved.push(alert.clone());
                self.alerts.history.push_back(alert);
                while self.alerts.history.len() > HISTORY {
                    self.alerts.history.pop_front();
                }
            }
        }
        self.alerts.texts.prune();
        resolved
    }

    /// Whether a firing alert whose condition no longer holds is within its rule's
    /// `keep_firing_for`, its subject still evaluated and its rule still there.
    fn keeps_firing(&self, active: &ActiveAlert, now: Timestamp, evaluated: &HashSet<Entity>) -> bool {
        let alert = &active.alert;
        if alert.state != AlertState::Firing {
            return false;
        }
        let Some(rule) = self.rules.iter().find(|r| r.spec.name == alert.name()) else { return false };
        let keep = rule.spec.keep_firing_for.as_millis() as u64;
        let label = |name: &str| alert.labels.get(name).map(|t| t.to_string()).unwrap_or_default();
        let scope = rule.spec.scope;
        let id = match scope {
            Scope::Job => label("job_id"),
            Scope::Cluster | Scope::Daemon => String::new(),
            Scope::TaskManager => label("taskmanager"),
            Scope::Incident => label("incident"),
        };
        keep > 0 && evaluated.contains(&(scope, label("cluster"), id)) && now.since(active.last_held) < keep
    }
}

/// A subject's labels, and the texts it gives descriptions (`{{ evidence }}`).
type SubjectNames<'a> = (&'a [(&'a str, &'a str)], &'a Detail, &'a [(&'a str, String)]);

impl Alerts {
    /// `rule` holds for the subject its labels name (with the [`Detail`] of the series it
    /// reads, and the texts the subject gives descriptions): its alert becomes pending, or
    /// stays active with fresh annotations and value, and fires once it held for the rule's `for`.
    fn hold(
        &mut self,
        rule: &Rule,
        (subject_labels, detail, texts): SubjectNames<'_>,
        value: Option<f64>,
        ctx: &EvalContext<'_>,
        now: Timestamp,
    ) {
        // Borrowed first: most rounds change nothing, and an unchanged alert is neither copied
        // nor rebuilt (20,000 alerts a round at 10,000 jobs, issue 31).
        let mut labels: BTreeMap<&str, &str> = BTreeMap::new();
        labels.insert("alertname", &rule.spec.name);
        labels.insert("severity", rule.spec.severity.as_str());
        labels.insert("class", rule.spec.class.as_str());
        for (k, v) in subject_labels {
            labels.insert(k, v);
        }
        for (k, v) in &detail.labels {
            labels.insert(k, v);
        }
        for (k, v) in &rule.spec.labels {
            labels.entry(k).or_insert(v);
        }
        // A job's `incident` label comes and goes with the incident: the alert stays the same.
        let identity = if rule.spec.scope == Scope::Job && labels.contains_key("incident") {
            let mut own = labels.clone();
            own.remove("incident");
            identity(&own, &mut self.texts)
        } else {
            identity(&labels, &mut self.texts)
        };
        // The detail's and the subject's texts (the evidence beside its checkpoints) fill
        // placeholders without becoming labels (they change: an alert keeps its identity).
        let mut named = labels.clone();
        for (k, v) in detail.texts.iter().map(|(k, v)| (*k, v)).chain(texts.iter().map(|(k, v)| (*k, v))) {
            named.entry(k).or_insert(v);
        }
        let summary = render(&rule.spec.summary, &named, value, ctx);
        let description = render(&rule.spec.description, &named, value, ctx);
        let for_ms = rule.spec.for_.as_millis() as u64;
        let round = self.round;
        let active = self.active.entry(identity).or_insert_with(|| ActiveAlert {
            alert: Arc::new(Alert {
                labels: Labels::default(),
                annotations: Labels::default(),
                state: AlertState::Pending,
                active_since: now,
                fired_at: None,
                resolved_at: None,
                value,
            }),
            held_in_round: round,
            last_held: now,
        });
        active.held_in_round = round;
        active.last_held = now;
        let fires =
            active.alert.state == AlertState::Pending && now.since(active.alert.active_since) >= for_ms;
        let annotation = |name: &str| active.alert.annotations.get(name).map(Text::as_str);
        // Unchanged, it stays shared with the readers' copy: no clone.
        let changed = fires
            || !active
                .alert
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .eq(labels.iter().map(|(k, v)| (*k, *v)))
            || annotation("summary") != Some(summary.as_str())
            || annotation("description") != Some(description.as_str())
            || annotation("runbook_url") != Some(rule.spec.runbook_url.as_str())
            || active.alert.value.map(f64::to_bits) != value.map(f64::to_bits);
        if changed {
            let texts = &mut self.texts;
            let labels = labels.iter().map(|(k, v)| (texts.get(k), texts.get(v))).collect();
            let annotations = Labels::from([
                (texts.get("summary"), Text::from(summary)),
                (texts.get("description"), Text::from(description)),
                (texts.get("runbook_url"), texts.get(&rule.spec.runbook_url)),
            ]);
            let alert = Arc::make_mut(&mut active.alert);
            alert.labels = labels;
            alert.annotations = annotations;
            alert.value = value;
            if fires {
                alert.state = AlertState::Firing;
                alert.fired_at = Some(now);
            }
        }
    }
}

/// What an alert of a job says beyond the job when its rule reads a series about one subtask
/// ([`DETAIL_SERIES`]): labels (bounded: one subtask per job at a time) and texts for its
/// annotations.
#[derive(Debug, Default)]
struct Detail {
    labels: Vec<(&'static str, String)>,
    texts: Vec<(&'static str, String)>,
}

/// The series whose rules name the subtask behind them.
const DETAIL_SERIES: &[&str] = &["blocked_by_user_code"];

impl Detail {
    /// The subtask whose thread sits in the user's code (`state::threads`): `operator`,
    /// `subtask`, `taskmanager` labels; `frame` (`class.method`), `frame_at` (with its file and
    /// line), `thread`, `samples` and `checkpoint` texts.
    fn blocked_thread(job: &crate::state::JobState, now: Timestamp) -> Detail {
        let Some(b) = job.blocked_thread(now) else { return Detail::default() };
        let s = b.sample;
        Detail {
            labels: vec![
                ("operator", s.operator.clone()),
                ("subtask", s.subtask.to_string()),
                ("taskmanager", s.taskmanager.clone()),
            ],
            texts: vec![
                ("frame", b.frame()),
                ("frame_at", s.user().map(|f| f.text()).unwrap_or_default()),
                ("thread", s.thread.clone().unwrap_or_else(|| "the task thread".to_string())),
                ("samples", b.consecutive.to_string()),
                ("checkpoint", s.checkpoint_id.to_string()),
            ],
        }
    }

    fn read_by(&self, rule: &Rule) -> bool {
        !self.labels.is_empty()
            && rule.condition().series().iter().any(|s| DETAIL_SERIES.contains(&s.as_str()))
    }
}

fn identity(labels: &BTreeMap<&str, &str>, texts: &mut text::Interner) -> Identity {
    labels.iter().filter(|(k, _)| **k != "job_name").map(|(k, v)| (texts.get(k), texts.get(v))).collect()
}

/// Per scope that has rules, the series of their `increase()` and `ago()` calls and the windows
/// over which they read each.
fn windows_of(rules: &[Rule]) -> HashMap<Scope, Vec<context::RingSpec>> {
    let mut windows: HashMap<Scope, Vec<(String, f64)>> = HashMap::new();
    for rule in rules {
        windows.entry(rule.spec.scope).or_default().extend(rule.condition().windows());
    }
    windows.into_iter().map(|(scope, pairs)| (scope, context::RingSpec::of_windows(&pairs))).collect()
}

/// The steps, in 1/20ths of the timeout, at which the age of a checkpoint in progress wakes
/// the rules: 50 %, 55 %, … 95 %.
const AGE_STEPS: std::ops::Range<u64> = 10..20;

/// The next instant after `now` at which the age of a checkpoint in progress crosses a 5 %
/// step of its job's timeout from 50 % on, for the daemon to evaluate the rules then: a rule
/// such as `in_progress_age > 0.8 * timeout` fires within a few milliseconds of the crossing
/// (plus the round gap) instead of at the next evaluation tick, which on a 4 s timeout would
/// mostly come after the expiry. `None` when nothing is in progress.
pub(crate) fn next_age_wake(state: &State, now: Timestamp) -> Option<Timestamp> {
    let mut next: Option<Timestamp> = None;
    for cluster in state.clusters().values() {
        for job in cluster.jobs.values().filter(|j| j.listed) {
            let Some(timeout) = job.settings.as_ref().and_then(|s| s.timeout_ms) else { continue };
            for (_, at) in job.live_in_progress(now) {
                let crossing =
                    AGE_STEPS.map(|k| at.plus_millis((timeout * k / 20) as i64 + 1)).find(|t| *t > now);
                if let Some(t) = crossing {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{
        CheckpointCounts, CheckpointSettings, FinishedCheckpoint, JobKey, JobPoll, Observation,
    };
    use crate::rules::builtin;
    use crate::stats::WindowSpec;

    fn spec(expr: &str, for_s: u64) -> RuleSpec {
        RuleSpec {
            name: "TestAlert".into(),
            scope: Scope::Job,
            expr: expr.into(),
            for_: Duration::from_secs(for_s),
            keep_firing_for: Duration::ZERO,
            severity: AlertSeverity::Warning,
            class: Class::Failure,
            labels: BTreeMap::from([("team".to_string(), "data".to_string())]),
            summary: "{{ job_name }} failed {{ value }} times".into(),
            description: "timeout {{ timeout | duration }}, p95 {{ duration.p95 | duration }}".into(),
            runbook_url: "https://example.invalid/runbook#testalert".into(),
        }
    }

    /// A poll of job `j` ("orders") at `at` with Flink's counts and the finished checkpoints.
    fn job_poll(
        at: i64,
        (completed, failed): (u64, u64),
        settings: Option<CheckpointSettings>,
        finished: Vec<FinishedCheckpoint>,
    ) -> Observation {
        Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "orders".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(at),
            counts: CheckpointCounts { completed, failed, in_progress: 0, restored: 0 },
            settings,
            in_progress: Vec::new(),
            finished,
            latest_restore: None,
            deferred: Default::default(),
        })
    }

    fn poll(state: &mut State, at: i64, completed: u64, failed: u64) {
        let finished = (1..=completed)
            .map(|id| FinishedCheckpoint::completed(id, Timestamp(0), 45).acknowledged(1, 1))
            .collect();
        let settings = Some(CheckpointSettings { timeout_ms: Some(60_000), ..Default::default() });
        state.apply(&job_poll(at, (completed, failed), settings, finished), Timestamp(at));
    }

    #[test]
    fn a_day_of_windowed_history_stays_bounded_and_reads_its_windows() {
        // One poll every 10 s for a day and an hour: a checkpoint per round, a failure a minute.
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(vec![
            Rule::new(RuleSpec { name: "Recent".into(), ..spec("increase(checkpoints.failed, 10m) > 5", 0) })
                .unwrap(),
            Rule::new(RuleSpec { name: "DayAgo".into(), ..spec("ago(checkpoints.completed, 1d) >= 0", 0) })
                .unwrap(),
        ]);
        let day_ms = 86_400_000;
        let value_of =
            |ev: &Evaluator, name: &str| ev.active().find(|a| a.name() == name).and_then(|a| a.value);
        for round in 0..=(day_ms + 3_600_000) / 10_000 {
            let at = round * 10_000;
            let (completed, failed) = (round as u64 + 1, round as u64 / 6);
            let finished =
                vec![FinishedCheckpoint::completed(completed, Timestamp(at), 45).acknowledged(1, 1)];
            state.apply(&job_poll(at, (completed, failed), None, finished), Timestamp(at));
            ev.evaluate(&state, Timestamp(at));
            let held: usize = ev.histories.values().map(SeriesHistory::samples_held).sum();
            assert!(held <= 2 * (context::SAMPLES_PER_WINDOW as usize + 3), "{held} samples at {at}");
            if at >= 3_600_000 {
                // 60 failures an hour: 10 in 10 minutes, give or take a sample's spacing (10 s).
                let recent = value_of(&ev, "Recent").expect("Recent holds");
                assert!((9.0..=11.0).contains(&recent), "increase over 10m {recent} at {at}");
            }
            let day_ago = value_of(&ev, "DayAgo");
            if at < day_ms {
                assert_eq!(day_ago, None, "no answer before the history is a day old ({at})");
            } else {
                // The count a day ago, off by at most the ring's spacing (24 min, 144 rounds).
                let then = ((at - day_ms) / 10_000 + 1) as f64;
                let read = day_ago.expect("a day of history answers");
                assert!(read <= then && then - read <= 145.0, "ago 1d {read}, a day ago {then}, at {at}");
            }
        }
    }

    #[test]
    fn an_unchanged_alert_stays_shared_with_its_readers_and_a_change_copies_it() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(vec![Rule::new(spec("checkpoints.completed >= 1", 0)).unwrap()]);
        poll(&mut state, 0, 1, 0);
        ev.evaluate(&state, Timestamp(0));
        let read: Vec<Arc<Alert>> = ev.active_shared().cloned().collect();
        ev.evaluate(&state, Timestamp(10_000));
        assert!(Arc::ptr_eq(&read[0], ev.active_shared().next().unwrap()), "not copied while unchanged");
        poll(&mut state, 20_000, 2, 0);
        ev.evaluate(&state, Timestamp(20_000));
        let now = ev.active_shared().next().unwrap();
        assert!(!Arc::ptr_eq(&read[0], now));
        assert_eq!((read[0].value, now.value), (Some(1.0), Some(2.0)), "the reader's copy is as it was");
        assert_eq!(now.annotations["summary"], "orders failed 2 times");
        // Rebuilt, it takes its texts from the evaluator's interner: one allocation for the
        // label names and values and the runbook URL that both copies carry.
        for (name, value) in &now.labels {
            let (old_name, old_value) = read[0].labels.get_key_value(name.as_str()).unwrap();
            assert!(std::ptr::eq(name.as_str(), old_name.as_str()), "{name} copied");
            assert!(std::ptr::eq(value.as_str(), old_value.as_str()), "{name}={value} copied");
        }
        let url = |a: &Alert| a.annotations["runbook_url"].as_str().as_ptr();
        assert_eq!(url(now), url(&read[0]));
    }

    #[test]
    fn pending_then_firing_then_resolved() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev =
            Evaluator::new(vec![Rule::new(spec("increase(checkpoints.failed, 1m) > 0", 30)).unwrap()]);
        poll(&mut state, 0, 1, 0);
        assert!(ev.evaluate(&state, Timestamp(0)).is_empty());
        assert_eq!(ev.active().count(), 0);

        poll(&mut state, 10_000, 1, 2);
        ev.evaluate(&state, Timestamp(10_000));
        let alert = ev.active().next().unwrap();
        assert_eq!(alert.state, AlertState::Pending);
        assert_eq!(alert.annotations["summary"], "orders failed 2 times");
        assert_eq!(alert.annotations["description"], "timeout 1m 0s, p95 45ms");
        assert_eq!(alert.labels["team"], "data");

        ev.evaluate(&state, Timestamp(45_000));
        let alert = ev.active().next().unwrap();
        assert_eq!((alert.state, alert.fired_at), (AlertState::Firing, Some(Timestamp(45_000))));
        assert_eq!(ev.active().count(), 1, "one alert per label set");

        // A minute later no failure is recent any more: the alert resolves once.
        let resolved = ev.evaluate(&state, Timestamp(75_000));
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].state, AlertState::Resolved);
        assert_eq!(resolved[0].resolved_at, Some(Timestamp(75_000)));
        assert_eq!(ev.active().count(), 0);
        assert!(ev.evaluate(&state, Timestamp(80_000)).is_empty());
        assert_eq!(ev.resolved().count(), 1);
    }

    #[test]
    fn log_series_count_the_jobs_own_events_of_that_kind_from_every_source() {
        use crate::observe::{EventSeverity, LogEvent};
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        poll(&mut state, 0, 1, 0);
        let event = |job: &str, kind: &str, source: &'static str| {
            let mut e = LogEvent::new(kind.into(), EventSeverity::Warning, String::new());
            (e.cluster, e.job_id, e.source) = ("c".into(), Some(job.into()), source);
            e
        };
        let mut events = vec![event("j", "expired", "log"), event("j", "expired", "rest")];
        events.extend((0..5).map(|_| event("k", "expired", "log")));
        events.extend((0..4).map(|_| event("j", "declined", "log")));
        events.extend((0..3).map(|_| event("", "expired", "log")));
        events.push(event("i", "expired", "log"));
        state.apply(&Observation::LogEvents(events), Timestamp(1_000));
        let mut ev = Evaluator::new(vec![
            Rule::new(RuleSpec { name: "Expired".into(), ..spec("log.expired == 2", 0) }).unwrap(),
            Rule::new(RuleSpec { name: "Declined".into(), ..spec("log.declined == 4", 0) }).unwrap(),
        ]);
        ev.evaluate(&state, Timestamp(2_000));
        let firing: Vec<_> = ev.active().map(|a| a.name().to_string()).collect();
        assert_eq!(firing, ["Declined", "Expired"]);
    }

    /// Cluster `c` lists no job any more: its jobs are gone.
    fn no_jobs_listed() -> Observation {
        Observation::ClusterPolled(crate::observe::ClusterPoll {
            cluster: "c".into(),
            duration_ms: 1,
            flink_version: None,
            jobs: Some(Vec::new()),
            errors: Vec::new(),
            reachable: true,
        })
    }

    #[test]
    fn a_pending_alert_that_clears_never_fires() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(vec![Rule::new(spec("checkpoints.failed > 0", 60)).unwrap()]);
        poll(&mut state, 0, 1, 1);
        ev.evaluate(&state, Timestamp(0));
        assert_eq!(ev.active().next().unwrap().state, AlertState::Pending);
        // A new JobMaster counting from zero does not lower our counter, so use a job that
        // disappears instead: its alerts end without firing.
        state.apply(&no_jobs_listed(), Timestamp(1));
        assert!(ev.evaluate(&state, Timestamp(2)).is_empty());
        assert_eq!(ev.active().count(), 0);
        assert_eq!(ev.resolved().count(), 0);
    }

    /// A poll of job `j` whose history is `finished` (ids 1..), tolerable `tolerable`.
    fn poll_failures(state: &mut State, tolerable: u32, failed: u64, at: i64) {
        let finished: Vec<FinishedCheckpoint> = (1..=failed)
            .map(|id| {
                FinishedCheckpoint::completed(id, Timestamp(at - 1_000 * (failed - id + 1) as i64), 100)
                    .failed("Checkpoint was declined.")
            })
            .collect();
        let obs = Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "orders".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(at),
            counts: CheckpointCounts { completed: 0, failed, in_progress: 0, restored: 0 },
            settings: Some(CheckpointSettings {
                interval_ms: Some(1_000),
                timeout_ms: Some(60_000),
                tolerable_failures: Some(tolerable),
                ..Default::default()
            }),
            in_progress: Vec::new(),
            finished,
            latest_restore: None,
            deferred: Default::default(),
        });
        state.apply(&obs, Timestamp(at));
    }

    /// Flink's default of 0 tolerable failures: the first declined checkpoint failed the job.
    /// The page says it was exceeded, never "about to exceed"; at tolerable 2, two counted
    /// failures are "about to", the third is exceeded.
    #[test]
    fn the_tolerance_alerts_say_exceeded_once_flink_failed_the_job_and_about_to_only_before() {
        let rules = || {
            vec![builtin("FlinkCheckpointToleranceNearlySpent"), builtin("FlinkCheckpointToleranceExceeded")]
        };
        let names = |ev: &Evaluator| ev.active().map(|a| a.name().to_string()).collect::<Vec<_>>();

        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(rules());
        poll_failures(&mut state, 0, 1, 10_000);
        ev.evaluate(&state, Timestamp(10_000));
        assert_eq!(names(&ev), ["FlinkCheckpointToleranceExceeded"]);
        let text = &ev.active().next().unwrap().annotations["description"];
        assert!(text.contains("exceeded its tolerable-failed-checkpoints of 0 900ms ago"), "{text}");
        assert!(text.contains("it stands at 0 now"), "{text}");

        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(rules());
        poll_failures(&mut state, 2, 2, 10_000);
        let job = &state.clusters()["c"].jobs["j"];
        assert_eq!((job.counted_failures(), job.tolerance.exceeded()), (Some(2), 0));
        ev.evaluate(&state, Timestamp(10_000));
        assert_eq!(names(&ev), ["FlinkCheckpointToleranceNearlySpent"]);
        let alert = ev.active().next().unwrap();
        assert!(alert.annotations["summary"].contains("(2 of 2 spent)"), "{:?}", alert.annotations);
        assert!(alert.annotations["description"].contains("'(2 consecutive failed attempts so far)'"));
        poll_failures(&mut state, 2, 3, 11_000);
        ev.evaluate(&state, Timestamp(11_000));
        assert_eq!(names(&ev), ["FlinkCheckpointToleranceExceeded"]);
    }

    fn builtin(name: &str) -> Rule {
        Rule::new(builtin::rules().into_iter().find(|r| r.name == name).unwrap()).unwrap()
    }

    /// The e2e `expired` job: interval 3 s, timeout 4 s; checkpoint `id` triggered at `at`
    /// (the JobManager logs it then) and seen in progress by a poll 1.5 s later (Flink's REST
    /// answer lags the trigger).
    fn poll_in_progress(state: &mut State, id: u64, at: i64) {
        use crate::observe::{EventSeverity, LogEvent};
        let line = format!(
            "Triggering checkpoint {id} (type=CheckpointType{{name='Checkpoint'}}) @ {at} for job j."
        );
        let mut e = LogEvent::new("triggered".into(), EventSeverity::Info, line);
        (e.cluster, e.job_id, e.checkpoint_id) = ("c".into(), Some("j".into()), Some(id));
        state.apply(&Observation::LogEvents(vec![e]), Timestamp(at));
        poll_only(state, id, at, 1_500);
    }

    /// A poll `after` ms past the trigger that shows checkpoint `id` in progress.
    fn poll_only(state: &mut State, id: u64, at: i64, after: i64) {
        let obs = Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "orders".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(at + after),
            counts: CheckpointCounts { completed: 1, failed: 0, in_progress: 1, restored: 0 },
            settings: Some(CheckpointSettings {
                interval_ms: Some(3_000),
                timeout_ms: Some(4_000),
                ..Default::default()
            }),
            in_progress: vec![crate::observe::InProgressCheckpoint {
                id,
                triggered_at: Timestamp(at),
                num_subtasks: 6,
                num_acknowledged: 5,
            }],
            finished: Vec::new(),
            latest_restore: None,
            deferred: Default::default(),
        });
        state.apply(&obs, Timestamp(at + after));
    }

    fn expired_line(state: &mut State, id: u64, at: i64) {
        use crate::observe::{EventSeverity, LogEvent};
        let mut e = LogEvent::new("expired".into(), EventSeverity::Warning, String::new());
        (e.cluster, e.job_id, e.checkpoint_id) = ("c".into(), Some("j".into()), Some(id));
        state.apply(&Observation::LogEvents(vec![e]), Timestamp(at));
    }

    #[test]
    fn about_to_expire_fires_before_the_expiry_never_after_and_holds_while_checkpoints_keep_expiring() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(vec![builtin("FlinkCheckpointAboutToExpire")]);
        let firing = |ev: &Evaluator| ev.active().filter(|a| a.state == AlertState::Firing).count();
        poll_in_progress(&mut state, 3, 100_000);
        // The daemon wakes the rules when the age crosses 80 % of the timeout.
        let wakes: Vec<i64> =
            std::iter::successors(next_age_wake(&state, Timestamp(101_500)), |t| next_age_wake(&state, *t))
                .map(|t| t.millis())
                .collect();
        assert!(wakes.contains(&103_201), "{wakes:?}");
        assert_eq!(wakes.last(), Some(&103_801), "no wake at or past the timeout: {wakes:?}");
        ev.evaluate(&state, Timestamp(103_100));
        assert_eq!(firing(&ev), 0, "79 % of the timeout");
        ev.evaluate(&state, Timestamp(103_201));
        assert_eq!(firing(&ev), 1, "past 80 %, before the expiry");
        assert!((ev.active().next().unwrap().value.unwrap() - 3.201).abs() < 1e-9);

        // The expiry: its line wakes the rules while the last poll still shows checkpoint 3 in
        // progress. A job that has not seen that alert fire must not get it now.
        let mut late = Evaluator::new(vec![builtin("FlinkCheckpointAboutToExpire")]);
        expired_line(&mut state, 3, 104_001);
        late.evaluate(&state, Timestamp(104_002));
        assert_eq!(late.active().count(), 0, "nothing fires after the checkpoint expired");
        // Without the line, the timeout alone ends it (the stale poll does not count).
        let mut stale = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        poll_only(&mut stale, 3, 100_000, 2_500);
        let mut late = Evaluator::new(vec![builtin("FlinkCheckpointAboutToExpire")]);
        late.evaluate(&stale, Timestamp(104_150));
        assert_eq!(late.active().count(), 0, "4.15 s on a 4 s timeout is after the expiry");

        // The first alert is held across the next checkpoints, one of three expiring.
        let mut resolved = Vec::new();
        for (n, at) in (0..10).map(|n| (n, 104_000 + n * 3_000)) {
            let id = 4 + n as u64;
            poll_in_progress(&mut state, id, at);
            for t in (at + 1_500..at + 3_000).step_by(250) {
                resolved.extend(ev.evaluate(&state, Timestamp(t)));
                assert_eq!(firing(&ev), 1, "held at {t}");
            }
        }
        assert!(resolved.is_empty());
        // Five quiet minutes after the last near-expiry, it resolves, once.
        let last_near = 103_201;
        let quiet_from = 134_000;
        poll_in_progress(&mut state, 99, quiet_from);
        expired_line(&mut state, 99, quiet_from + 100);
        assert_eq!(ev.evaluate(&state, Timestamp(last_near + 299_000)).len(), 0);
        assert_eq!(ev.evaluate(&state, Timestamp(last_near + 300_000)).len(), 1);
        assert_eq!(ev.active().count(), 0);
    }

    #[test]
    fn without_the_log_a_poll_must_have_seen_the_checkpoint_at_half_its_timeout() {
        let rule = || Evaluator::new(vec![builtin("FlinkCheckpointAboutToExpire")]);
        // Seen at 1.5 s of 4 s, then no news: it may well have completed since.
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        poll_only(&mut state, 3, 100_000, 1_500);
        let mut ev = rule();
        ev.evaluate(&state, Timestamp(103_300));
        assert_eq!(ev.active().count(), 0);
        // Seen still running at 2.5 s: at 3.3 s it is about to expire.
        poll_only(&mut state, 3, 100_000, 2_500);
        ev.evaluate(&state, Timestamp(103_300));
        assert_eq!(ev.active().count(), 1);
    }

    #[test]
    fn a_held_alert_ends_with_its_job() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(vec![builtin("FlinkCheckpointAboutToExpire")]);
        poll_in_progress(&mut state, 3, 100_000);
        ev.evaluate(&state, Timestamp(103_300));
        assert_eq!(ev.active().count(), 1);
        state.apply(&no_jobs_listed(), Timestamp(103_400));
        assert_eq!(ev.evaluate(&state, Timestamp(103_500)).len(), 1, "resolved at once, not held");
    }

    #[test]
    fn the_first_failure_line_fires_the_failed_alert_in_the_same_round() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let mut ev = Evaluator::new(vec![builtin("FlinkCheckpointFailed")]);
        poll_in_progress(&mut state, 3, 100_000);
        ev.evaluate(&state, Timestamp(102_000));
        assert_eq!(ev.active().count(), 0);
        expired_line(&mut state, 3, 104_001);
        ev.evaluate(&state, Timestamp(104_002));
        let alert = ev.active().next().expect("fires on the line, before any poll confirms it");
        assert_eq!((alert.state, alert.labels["severity"].as_str()), (AlertState::Firing, "info"));
        assert_eq!(alert.annotations["summary"], "A checkpoint of orders failed");
        // Checkpoints keep failing every 9 s: one alert, no flapping.
        for n in 1..20u64 {
            let at = 104_001 + n as i64 * 9_000;
            expired_line(&mut state, 3 + 3 * n, at);
            assert!(ev.evaluate(&state, Timestamp(at + 1)).is_empty());
            assert_eq!(ev.active().count(), 1);
        }
    }

    #[test]
    fn a_description_states_the_number_of_each_clause_not_only_the_first_comparison() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let rule = RuleSpec {
            description: "{{ increase(checkpoints.failed, 1m) }} failed in a minute, {{ checkpoints.completed }} completed"
                .into(),
            ..spec("increase(checkpoints.failed, 1m) > 0 or checkpoints.completed > 2", 0)
        };
        let mut ev = Evaluator::new(vec![Rule::new(rule).unwrap()]);
        poll(&mut state, 0, 3, 0);
        ev.evaluate(&state, Timestamp(0));
        let alert = ev.active().next().unwrap();
        // The alert holds through its second clause: its value (the first comparison) is 0, and
        // the description says so beside the number that made it hold.
        assert_eq!(alert.value, Some(0.0));
        assert_eq!(alert.annotations["description"], "0 failed in a minute, 3 completed");
    }

    #[test]
    fn a_first_checkpoint_that_never_completes_is_not_silence() {
        use crate::observe::InProgressCheckpoint;
        // interval 10 s, timeout 60 s, tolerable 100: every checkpoint expires at its timeout.
        let settings = CheckpointSettings {
            interval_ms: Some(10_000),
            timeout_ms: Some(60_000),
            tolerable_failures: Some(100),
            max_concurrent: 1,
            ..Default::default()
        };
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let rules = builtin::rules().into_iter().map(|s| Rule::new(s).unwrap()).collect();
        let mut ev = Evaluator::new(rules);
        let mut fired: BTreeMap<String, i64> = BTreeMap::new();
        for k in 0..=200i64 {
            let at = k * 2_000;
            // Checkpoint n is triggered at 10 s + (n − 1) × 70 s and expires 60 s later.
            let trigger = |n: i64| 10_000 + (n - 1) * 70_000;
            let expired: Vec<FinishedCheckpoint> = (1..)
                .take_while(|&n| trigger(n) + 60_000 <= at)
                .map(|n| {
                    FinishedCheckpoint::completed(n as u64, Timestamp(trigger(n)), 60_000)
                        .failed("Checkpoint expired before completing.")
                        .acknowledged(1, 2)
                })
                .collect();
            let next = expired.len() as i64 + 1;
            let in_progress: Vec<InProgressCheckpoint> = (trigger(next) <= at)
                .then(|| InProgressCheckpoint {
                    id: next as u64,
                    triggered_at: Timestamp(trigger(next)),
                    num_subtasks: 2,
                    num_acknowledged: 1,
                })
                .into_iter()
                .collect();
            let obs = Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "c".into(), job_id: "j".into() },
                job_name: "orders".into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(at),
                counts: CheckpointCounts {
                    completed: 0,
                    failed: expired.len() as u64,
                    in_progress: in_progress.len() as u64,
                    restored: 0,
                },
                settings: Some(settings.clone()),
                in_progress,
                finished: expired,
                latest_restore: None,
                deferred: Default::default(),
            });
            state.apply(&obs, Timestamp(at));
            ev.evaluate(&state, Timestamp(at));
            for a in ev.active().filter(|a| a.state == AlertState::Firing) {
                fired.entry(a.name().to_string()).or_insert(at);
                if a.name() == "FlinkCheckpointNeverCompleted" {
                    let text = &a.annotations["description"];
                    assert!(
                        text.contains(&format!(
                            "entered RUNNING {} ago",
                            format_duration(at as f64 / 1000.0)
                        )),
                        "{text}"
                    );
                }
            }
        }
        // Running since the first poll at 0 s; the window is max(2 x 60 s, 5 min) = 5 min.
        assert_eq!(fired.get("FlinkCheckpointNeverCompleted"), Some(&302_000), "{fired:?}");
        // The third expiry (at 210 s) is three failures in a row over more than two intervals.
        assert_eq!(fired.get("FlinkCheckpointFailureStreak"), Some(&210_000), "{fired:?}");
        assert!(!fired.contains_key("FlinkCheckpointToleranceNearlySpent"), "tolerable 100: {fired:?}");
    }

    /// 40 jobs that share a risky default (100 tolerable failures) and one that does not: one
    /// `FlinkCheckpointConfigRisk` for the cluster, its value the count, its description the
    /// first five by name and how many more; class `advice`, no job label; and none before its
    /// ten minutes.
    #[test]
    fn configuration_risk_is_one_alert_per_cluster_with_the_count() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let rules = builtin::rules()
            .into_iter()
            .filter(|s| s.name == "FlinkCheckpointConfigRisk")
            .map(|s| Rule::new(s).unwrap())
            .collect();
        let mut ev = Evaluator::new(rules);
        let poll_all = |state: &mut State, at: i64| {
            for k in 0..41 {
                let settings = CheckpointSettings {
                    interval_ms: Some(10_000),
                    timeout_ms: Some(60_000),
                    tolerable_failures: Some(if k == 40 { 3 } else { 100 }),
                    max_concurrent: 1,
                    ..Default::default()
                };
                state.apply(
                    &Observation::JobPolled(JobPoll {
                        key: JobKey { cluster: "c".into(), job_id: format!("j{k:02}") },
                        job_name: format!("job-{k:02}"),
                        job_state: "RUNNING".into(),
                        polled_at: Timestamp(at),
                        counts: CheckpointCounts::default(),
                        settings: Some(settings),
                        in_progress: Vec::new(),
                        finished: Vec::new(),
                        latest_restore: None,
                        deferred: Default::default(),
                    }),
                    Timestamp(at),
                );
            }
        };
        poll_all(&mut state, 0);
        ev.evaluate(&state, Timestamp(0));
        assert_eq!(ev.active().map(|a| a.state).collect::<Vec<_>>(), [AlertState::Pending]);
        poll_all(&mut state, 600_000);
        ev.evaluate(&state, Timestamp(600_000));
        let alerts: Vec<&Alert> = ev.active().collect();
        assert_eq!(alerts.len(), 1, "one alert for 40 risky jobs");
        let a = alerts[0];
        assert_eq!((a.state, a.value), (AlertState::Firing, Some(40.0)));
        assert_eq!(a.labels["class"], "advice");
        assert_eq!(a.labels["cluster"], "c");
        assert!(a.labels.get("job_id").is_none());
        assert_eq!(
            a.annotations["summary"],
            "40 jobs on c have a checkpoint configuration that risks data or a stuck job"
        );
        let description = a.annotations["description"].as_str();
        assert!(
            description.starts_with("40 of the 41 watched jobs on c show")
                && description
                    .contains("the most at risk: job-00, job-01, job-02, job-03, job-04 and 35 more."),
            "{description}"
        );
    }

    #[test]
    fn named_jobs_read_as_a_list() {
        use crate::time::some_of;
        assert_eq!(some_of(&["a"], 5, "none"), "a");
        assert_eq!(some_of(&["a", "b", "c"], 5, "none"), "a, b and c");
        assert_eq!(some_of(&["a", "b", "c", "d", "e", "f"], 5, "none"), "a, b, c, d, e and 1 more");
        assert_eq!(some_of::<&str>(&[], 5, "none"), "none");
    }

    fn scoped(scope: Scope, expr: &str, summary: &str) -> Rule {
        Rule::new(RuleSpec {
            name: "Scoped".into(),
            scope,
            summary: summary.into(),
            description: String::new(),
            ..spec(expr, 0)
        })
        .unwrap()
    }

    /// A poll round of cluster `c` that keeps its job list, with `errors`.
    fn round(errors: Vec<&'static str>) -> Observation {
        Observation::ClusterPolled(crate::observe::ClusterPoll {
            cluster: "c".into(),
            duration_ms: 1,
            flink_version: None,
            jobs: None,
            reachable: errors.is_empty(),
            errors,
        })
    }

    #[test]
    fn a_cluster_rule_fires_once_per_cluster_with_the_cluster_label_and_resolves() {
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        poll(&mut state, 0, 1, 0);
        state.apply(&round(Vec::new()), Timestamp(0));
        let rule = scoped(
            Scope::Cluster,
            "reachable == 0 and increase(poll_errors, 5m) >= 2",
            "{{ cluster }} unreachable, {{ increase(poll_errors, 5m) }} errors, {{ jobs }} job(s)",
        );
        let mut ev = Evaluator::new(vec![rule]);
        ev.evaluate(&state, Timestamp(0));
        state.apply(&round(vec!["connect"]), Timestamp(10_000));
        ev.evaluate(&state, Timestamp(10_000));
        assert_eq!(ev.active().count(), 0, "one error is not two");
        state.apply(&round(vec!["timeout"]), Timestamp(20_000));
        ev.evaluate(&state, Timestamp(20_000));
        let alerts: Vec<&Alert> = ev.active().collect();
        assert_eq!(alerts.len(), 1, "one alert for the cluster, not one per job");
        let labels: Vec<(&str, &str)> =
            alerts[0].labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            labels,
            [
                ("alertname", "Scoped"),
                ("class", "failure"),
                ("cluster", "c"),
                ("severity", "warning"),
                ("team", "data")
            ]
        );
        assert_eq!(alerts[0].state, AlertState::Firing);
        assert_eq!(alerts[0].annotations["summary"], "c unreachable, 2 errors, 1 job(s)");
        state.apply(&round(Vec::new()), Timestamp(30_000));
        let resolved = ev.evaluate(&state, Timestamp(30_000));
        assert_eq!(resolved.len(), 1, "it resolves through the same path as a job's alert");
        assert_eq!(ev.active().count(), 0);
    }

    #[test]
    fn a_rule_reads_only_the_series_of_its_scope() {
        let rule = |scope: Scope, expr: &str| Rule::new(RuleSpec { scope, ..spec(expr, 0) });
        let error = rule(Scope::Cluster, "duration.p95 > 1s").unwrap_err().to_string();
        assert!(error.contains("unknown series `duration.p95`"), "{error}");
        assert!(rule(Scope::Job, "reachable == 0").is_err());
        assert!(rule(Scope::TaskManager, "poll_errors > 0").is_err());
        assert!(rule(Scope::TaskManager, "slowest_subtasks > 0 and jobs >= 1").is_ok());
    }

    #[test]
    fn a_taskmanager_rule_fires_for_the_taskmanager_of_the_slowest_subtasks() {
        use crate::observe::{JobLoadReport, JobTopology, SubtaskCheckpoint, TopologyVertex, VertexLoad};
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let subtask = |index, end_to_end_ms| SubtaskCheckpoint {
            index,
            acknowledged: true,
            end_to_end_ms: Some(end_to_end_ms),
            ..Default::default()
        };
        // Two checkpoints, each held up longest by subtask 1 of stateful-map.
        let finished = (1..=2)
            .map(|id| {
                FinishedCheckpoint::completed(id, Timestamp(0), 900).acknowledged(2, 2).operator(
                    "v",
                    "stateful-map",
                    vec![subtask(0, 40), subtask(1, 900)],
                )
            })
            .collect();
        let obs = Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "orders".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(1_000),
            counts: CheckpointCounts { completed: 2, failed: 0, in_progress: 0, restored: 0 },
            settings: Some(CheckpointSettings { timeout_ms: Some(60_000), ..Default::default() }),
            in_progress: Vec::new(),
            finished,
            latest_restore: None,
            deferred: Default::default(),
        });
        state.apply(&obs, Timestamp(1_000));
        let rule = scoped(
            Scope::TaskManager,
            "slowest_subtasks >= 2",
            "{{ taskmanager }} on {{ cluster }} ran the slowest subtask of {{ value }} checkpoints ({{ subtasks }} subtask(s) of {{ jobs }} job(s))",
        );
        let mut ev = Evaluator::new(vec![rule]);
        ev.evaluate(&state, Timestamp(1_000));
        assert_eq!(ev.active().count(), 0, "no TaskManager is known before a load fetch placed the subtasks");
        let load = JobLoadReport {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            measured_at: Timestamp(2_000),
            topology: Some(std::sync::Arc::new(JobTopology {
                vertices: vec![TopologyVertex {
                    id: "v".into(),
                    name: "stateful-map".into(),
                    parallelism: 2,
                }],
                edges: Vec::new(),
            })),
            vertices: vec![VertexLoad {
                vertex_id: "v".into(),
                subtasks: Vec::new(),
                taskmanagers: vec![Some("tm-a (h:1)".into()), Some("tm-b (h:2)".into())],
            }],
        };
        state.apply(&Observation::JobLoad(load), Timestamp(2_000));
        ev.evaluate(&state, Timestamp(2_000));
        let alerts: Vec<&Alert> = ev.active().collect();
        assert_eq!(alerts.len(), 1, "tm-a ran no slowest subtask");
        assert_eq!(alerts[0].labels["taskmanager"], "tm-b (h:2)");
        assert_eq!(alerts[0].labels["cluster"], "c");
        assert!(!alerts[0].labels.contains_key("job_id"));
        assert_eq!(
            alerts[0].annotations["summary"],
            "tm-b (h:2) on c ran the slowest subtask of 2 checkpoints (1 subtask(s) of 1 job(s))"
        );
        // The job ends: its subtasks no longer place anything, and the alert resolves.
        state.apply(&no_jobs_listed(), Timestamp(3_000));
        assert_eq!(ev.evaluate(&state, Timestamp(3_000)).len(), 1);
        assert_eq!(ev.active().count(), 0);
    }

    /// Jobs `a` and `b` on tm-7 fail, `c` on tm-1 completes: one incident, one alert for it
    /// labelled with its cause, and the failing jobs' own alerts labelled `incident` without
    /// becoming other alerts (a pending one keeps its start); once they recover it resolves.
    #[test]
    fn an_incident_fires_one_alert_naming_its_cause_and_labels_its_jobs_alerts() {
        use crate::observe::{JobLoadReport, VertexLoad};
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let poll = |state: &mut State, id: &str, at: i64, failed: bool| {
            let mut finished = vec![FinishedCheckpoint::completed(1, Timestamp(1_764_899_995_000), 45)];
            let recovering = at > 1_764_900_000_000;
            if recovering {
                finished.push(FinishedCheckpoint::completed(3, Timestamp(at - 2_000), 45));
            } else if failed {
                finished.push(
                    FinishedCheckpoint::completed(2, Timestamp(1_764_899_998_000), 1_000)
                        .failed("Checkpoint expired before completing."),
                );
            } else {
                finished.push(FinishedCheckpoint::completed(2, Timestamp(1_764_899_998_000), 45));
            }
            let (completed, failed_n) = if recovering {
                (2, 1)
            } else if failed {
                (1, 1)
            } else {
                (2, 0)
            };
            state.apply(
                &Observation::JobPolled(JobPoll {
                    key: JobKey { cluster: "c".into(), job_id: id.into() },
                    job_name: format!("job-{id}"),
                    job_state: "RUNNING".into(),
                    polled_at: Timestamp(at),
                    counts: CheckpointCounts { completed, failed: failed_n, in_progress: 0, restored: 0 },
                    settings: Some(CheckpointSettings { timeout_ms: Some(60_000), ..Default::default() }),
                    in_progress: Vec::new(),
                    finished,
                    latest_restore: None,
                    deferred: Default::default(),
                }),
                Timestamp(at),
            );
        };
        let place = |state: &mut State, id: &str, tm: &str| {
            let load = JobLoadReport {
                key: JobKey { cluster: "c".into(), job_id: id.into() },
                measured_at: Timestamp(1_000),
                topology: Some(std::sync::Arc::new(crate::observe::JobTopology {
                    vertices: vec![crate::observe::TopologyVertex {
                        id: "v".into(),
                        name: "Source: orders".into(),
                        parallelism: 1,
                    }],
                    edges: Vec::new(),
                })),
                vertices: vec![VertexLoad {
                    vertex_id: "v".into(),
                    subtasks: Vec::new(),
                    taskmanagers: vec![Some(tm.into())],
                }],
            };
            state.apply(&Observation::JobLoad(load), Timestamp(1_000));
        };
        let t = 1_764_900_000_000;
        state.apply(
            &Observation::ClusterPolled(crate::observe::ClusterPoll {
                cluster: "c".into(),
                duration_ms: 1,
                flink_version: None,
                jobs: None,
                errors: Vec::new(),
                reachable: true,
            }),
            Timestamp(t),
        );
        for (id, tm, failed) in [
            ("a", "tm-7 (10.0.3.12:6122)", true),
            ("b", "tm-7 (10.0.3.12:6122)", true),
            ("c", "tm-1 (10.0.3.1:6122)", false),
        ] {
            poll(&mut state, id, t, failed);
            place(&mut state, id, tm);
        }
        let incident_rule =
            builtin::compiled().iter().find(|r| r.spec.name == "FlinkCheckpointIncident").cloned();
        let job_rule =
            Rule::new(RuleSpec { name: "Failing".into(), ..spec("checkpoints.failed > 0", 300) }).unwrap();
        let mut ev = Evaluator::new(vec![incident_rule.unwrap(), job_rule]);
        ev.evaluate(&state, Timestamp(t));
        let incidents = ev.incidents();
        assert_eq!(incidents.len(), 1, "{incidents:#?}");
        assert_eq!(
            incidents[0].text,
            "2 jobs: checkpoints expire since 01:59 UTC, all with subtasks on TaskManager tm-7 \
             (10.0.3.12:6122); the 1 job without it is healthy"
        );
        let id = incidents[0].id.clone();
        let job_alerts: Vec<&Alert> = ev.active().filter(|a| a.name() == "Failing").collect();
        assert_eq!(job_alerts.len(), 2);
        assert!(job_alerts.iter().all(|a| a.labels["incident"] == id.as_str()), "{job_alerts:#?}");
        let pending_since = job_alerts[0].active_since;
        ev.evaluate(&state, Timestamp(t + 61_000));
        let incident: Vec<&Alert> = ev.active().filter(|a| a.name() == "FlinkCheckpointIncident").collect();
        assert_eq!(incident.len(), 1);
        let a = incident[0];
        assert_eq!(a.state, AlertState::Firing);
        assert_eq!(
            (
                a.labels["incident"].as_str(),
                a.labels["incident_cause"].as_str(),
                a.labels["incident_value"].as_str()
            ),
            (id.as_str(), "taskmanager", "tm-7 (10.0.3.12:6122)")
        );
        assert_eq!(a.labels["cluster"], "c");
        assert!(a.annotations["description"].starts_with(&incidents[0].text), "{:?}", a.annotations);
        assert!(a.annotations["description"].contains("Jobs: job-a, job-b."), "{:?}", a.annotations);
        assert_eq!(
            a.annotations["summary"],
            "2 Flink jobs in trouble at once, all sharing taskmanager tm-7 (10.0.3.12:6122)"
        );
        // Both jobs recover: the incident ends, its alert resolves, and the jobs' alerts
        // (still failing by this rule's counter) lose the label but stay the same alerts.
        poll(&mut state, "a", t + 120_000, true);
        poll(&mut state, "b", t + 120_000, true);
        let resolved = ev.evaluate(&state, Timestamp(t + 120_000));
        assert!(ev.incidents().is_empty(), "{:#?}", ev.incidents());
        assert!(resolved.iter().any(|r| r.name() == "FlinkCheckpointIncident"), "{resolved:#?}");
        let job_alerts: Vec<&Alert> = ev.active().filter(|a| a.name() == "Failing").collect();
        assert_eq!(job_alerts.len(), 2);
        assert!(
            job_alerts.iter().all(|a| !a.labels.contains_key("incident") && a.active_since == pending_since)
        );
    }

    #[test]
    fn the_builtin_store_alert_fires_30_seconds_after_the_store_fails_and_resolves_when_it_heals() {
        let rule = builtin::compiled().iter().find(|r| r.spec.name == "CheckpointSentinelStoreFailing");
        let mut ev = Evaluator::new(vec![rule.unwrap().clone()]);
        let state = State::new(WindowSpec { window_ms: 60_000, slots: 6 });
        let healthy =
            DaemonFacts { store_failing: Some(false), store_waiting_records: Some(0), ..Default::default() };
        let failing =
            DaemonFacts { store_failing: Some(true), store_waiting_records: Some(40), ..healthy.clone() };
        ev.evaluate_with(&state, &healthy, Timestamp(0));
        assert_eq!(ev.active().count(), 0);
        ev.evaluate(&state, Timestamp(5_000));
        assert_eq!(ev.active().count(), 0, "without a store there is nothing to fail");
        ev.evaluate_with(&state, &failing, Timestamp(15_000));
        assert_eq!(ev.active().next().map(|a| a.state), Some(AlertState::Pending));
        ev.evaluate_with(&state, &failing, Timestamp(45_000));
        let alert = ev.active().next().unwrap();
        assert_eq!((alert.state, alert.fired_at), (AlertState::Firing, Some(Timestamp(45_000))));
        let labels: Vec<&str> = alert.labels.keys().map(Text::as_str).collect();
        assert_eq!(labels, ["alertname", "class", "severity"], "one alert per daemon");
        assert!(alert.annotations["description"].contains("; 40 records wait in its outbox"));
        assert!(alert.annotations["description"].contains("(0 so far)"));
        let resolved = ev.evaluate_with(&state, &healthy, Timestamp(60_000));
        assert_eq!(resolved.len(), 1);
        assert_eq!(ev.active().count(), 0);
    }

    #[test]
    fn user_code_in_the_same_frame_twice_fires_naming_the_subtask_and_the_frame() {
        use crate::observe::{Frame, SampleSource, ThreadReport, ThreadSample};
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        poll(&mut state, 1_000, 1, 0);
        let sample = |at: i64, id: u64| {
            let frame = |class: &str, method: &str, line: Option<u32>| Frame {
                class: class.into(),
                method: method.into(),
                file: line.map(|_| "ScenarioJob.java".to_string()),
                line,
            };
            Observation::ThreadSampled(ThreadReport {
                key: JobKey { cluster: "c".into(), job_id: "j".into() },
                sample: ThreadSample {
                    checkpoint_id: id,
                    operator: "Map".into(),
                    subtask: 0,
                    taskmanager: "tm-1".into(),
                    thread: Some("Map (1/2)#0".into()),
                    taken_at: Timestamp(at),
                    state: None,
                    frames: vec![
                        frame("java.lang.Thread", "sleep", None),
                        frame("sentinel.e2e.ScenarioJob$BlockingMap", "map", Some(87)),
                    ],
                    user_frame: Some(1),
                    stopped_early: false,
                    source: SampleSource::ThreadDump,
                    hits: None,
                },
            })
        };
        let mut ev = Evaluator::new(vec![builtin("FlinkCheckpointBlockedByUserCode")]);
        state.apply(&sample(10_000, 2), Timestamp(10_000));
        ev.evaluate(&state, Timestamp(10_000));
        assert_eq!(ev.active().count(), 0, "one sample is not a verdict");
        state.apply(&sample(20_000, 3), Timestamp(20_000));
        ev.evaluate(&state, Timestamp(20_000));
        let alert = ev.active().next().expect("two samples in the same frame");
        assert_eq!(alert.state, AlertState::Firing);
        let label = |k: &str| alert.labels.get(k).map(Text::as_str);
        assert_eq!(
            (label("operator"), label("subtask"), label("taskmanager"), label("frame")),
            (Some("Map"), Some("0"), Some("tm-1"), None)
        );
        let description = &alert.annotations["description"];
        assert!(
            description.contains("sat in sentinel.e2e.ScenarioJob$BlockingMap.map in 2 samples"),
            "{description}"
        );
        assert!(
            description.contains(
                "(sentinel.e2e.ScenarioJob$BlockingMap.map(ScenarioJob.java:87), thread Map (1/2)#0)"
            ),
            "{description}"
        );
        // No sample since for longer than the verdict holds (state::threads tests the other end:
        // a checkpoint completing).
        let later = 20_000 + crate::state::threads::VERDICT_HOLD_MS as i64 + 1;
        assert_eq!(ev.evaluate(&state, Timestamp(later)).len(), 1);
    }
}
