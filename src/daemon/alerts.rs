//! The rule loop and the delivery: rule rounds over the state (on a tick, on events, when an
//! in-progress checkpoint's age crosses a step), the alerts published, and sent on by a task of
//! their own.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::app::AppState;
use crate::config::{Config, Credentials};
use crate::time::Timestamp;

/// Evaluates the rules every `evaluation_interval`, publishes the alerts for metrics and the
/// API, and delivers them to the Alertmanagers. Picks up rule changes from reloads.
pub(super) async fn alert_loop(
    app: Arc<AppState>,
    mut config: watch::Receiver<Config>,
    mut shutdown: watch::Receiver<bool>,
    generator_url: String,
) {
    let build = |c: &Config| {
        let rules = c.effective_rules();
        let notifier = crate::outputs::alerting::Notifier::new(
            &c.alerting.alertmanagers,
            c.alerting.timeout,
            c.alerting.resend_interval,
            format!(
                "{}/",
                c.alerting.external_url.as_deref().unwrap_or(&generator_url).trim_end_matches('/')
            ),
        );
        let credentials = Credentials::resolve(
            c.alerting.basic_auth.as_ref(),
            c.alerting.bearer_token.as_ref(),
            "alerting.",
        )
        .unwrap_or_else(|e| {
            tracing::error!("{e}; sending without credentials");
            Credentials::None
        });
        let notifier = notifier
            .map_err(|e| tracing::error!("cannot build the Alertmanager client: {e}; alerts are not sent"))
            .ok()
            .map(|n| n.with_credentials(credentials));
        (rules, notifier, c.alerting.evaluation_interval, c.alerting.clone())
    };
    let (rules, notifier, mut every, mut alerting) = build(&config.borrow());
    let mut evaluator = crate::rules::Evaluator::new(rules);
    // Delivery runs in a task of its own: rule rounds never wait for an Alertmanager.
    let (deliver, deliveries) = mpsc::unbounded_channel();
    let delivery = tokio::spawn(deliver_loop(app.clone(), deliveries, notifier));
    let _abort_delivery = AbortOnDrop(delivery);
    let mut tick = tokio::time::interval(every);
    let mut last_round = tokio::time::Instant::now();
    // The least gap between two rounds woken by events: EVENT_ROUND_GAP, or more when a round
    // is expensive (a round is a walk over every job), so that event-driven rounds take at most
    // 1/ROUND_DUTY_DIVISOR of a core. With 10 jobs a round takes well under a millisecond and
    // the gap stays 250 ms; at 10,000 jobs with 20,000 active alerts a round took ~200 ms, and
    // four a second kept a core busy (issue 31).
    let mut event_gap = EVENT_ROUND_GAP;
    loop {
        // When the age of a checkpoint in progress crosses the next step of its timeout: the
        // early warning is evaluated then, not at the next tick (rules::next_age_wake).
        let walk_started = std::time::Instant::now();
        let age_wake = {
            let now = Timestamp::now();
            let state = app.state.read();
            crate::rules::next_age_wake(&state, now)
                .map(|at| tokio::time::Instant::now() + Duration::from_millis(at.since(now)))
        };
        // The walk over every job above, again at most 1/ROUND_DUTY_DIVISOR of a core.
        let age_wake_gap = AGE_WAKE_GAP.max(walk_started.elapsed() * ROUND_DUTY_DIVISOR);
        let far = tokio::time::Instant::now() + Duration::from_secs(3600);
        tokio::select! {
            changed = shutdown.changed() => if changed.is_err() || *shutdown.borrow() { return },
            changed = config.changed() => {
                if changed.is_err() {
                    return;
                }
                let (rules, new_notifier, new_every, new_alerting) = build(&config.borrow_and_update());
                evaluator.set_rules(rules);
                // A new notifier only when delivery changed: it holds undelivered alerts.
                if new_alerting != alerting {
                    let _ = deliver.send(Delivery::Replace(new_notifier));
                    alerting = new_alerting;
                }
                if new_every != every {
                    every = new_every;
                    tick = tokio::time::interval(every);
                }
            }
            _ = tick.tick() => {
                let Some(done) = round(&app, evaluator, &deliver, &mut event_gap).await else { return };
                (evaluator, last_round) = done;
            }
            () = tokio::time::sleep_until(age_wake.unwrap_or(far).max(last_round + event_gap)) => {
                let Some(done) = round(&app, evaluator, &deliver, &mut event_gap).await else { return };
                (evaluator, last_round) = done;
            }
            // Only to compute `age_wake` again with the new checkpoint in it; with many jobs
            // polls come often, so at most every AGE_WAKE_GAP (a walk over every job each time).
            () = app.checkpoint_started.notified() => {
                tokio::time::sleep(age_wake_gap).await;
            }
            () = app.log_events_arrived.notified() => {
                // A burst of failures across many jobs wakes this often: one round per gap.
                tokio::time::sleep_until(last_round + event_gap).await;
                let Some(done) = round(&app, evaluator, &deliver, &mut event_gap).await else { return };
                (evaluator, last_round) = done;
            }
        }
    }
}

/// One rule round (`evaluate`) on a blocking thread, so that a round over 10,000 jobs holds no
/// runtime worker; `gap` becomes the least gap before the next round woken by events. Gives the
/// evaluator back with the round's end, `None` when the runtime is shutting down.
async fn round(
    app: &Arc<AppState>,
    mut evaluator: crate::rules::Evaluator,
    deliver: &mpsc::UnboundedSender<Delivery>,
    gap: &mut Duration,
) -> Option<(crate::rules::Evaluator, tokio::time::Instant)> {
    let started = std::time::Instant::now();
    let (app, deliver) = (app.clone(), deliver.clone());
    let done = tokio::task::spawn_blocking(move || {
        evaluate(&app, &mut evaluator, &deliver);
        evaluator
    })
    .await;
    let evaluator = match done {
        Ok(evaluator) => evaluator,
        // A panicking round ends the rule loop, as it did when the round ran on this task.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => return None,
    };
    *gap = EVENT_ROUND_GAP.max(started.elapsed() * ROUND_DUTY_DIVISOR).min(MAX_EVENT_ROUND_GAP);
    Some((evaluator, tokio::time::Instant::now()))
}

/// Least time between two recomputations of the next early-warning instant.
const AGE_WAKE_GAP: Duration = Duration::from_millis(50);

/// Least time between two rule rounds woken by log events (each is a round over every job).
const EVENT_ROUND_GAP: Duration = Duration::from_millis(250);

/// Event-driven rule rounds take at most this fraction of a core: the gap after a round is at
/// least this many times the round's duration.
const ROUND_DUTY_DIVISOR: u32 = 10;

/// However long rounds take, one woken by events comes within this (the early warning's
/// latency at the largest estates).
const MAX_EVENT_ROUND_GAP: Duration = Duration::from_secs(5);

/// What the rule rounds hand to the delivery task.
enum Delivery {
    /// What fires now and what resolved since the last round, at `now`.
    Round(Vec<Arc<crate::rules::Alert>>, Vec<crate::rules::Alert>, Timestamp),
    /// The Alertmanagers changed (reload).
    Replace(Option<crate::outputs::alerting::Notifier>),
}

/// Aborts a task when dropped (the delivery task ends with the rule loop).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Delivers rounds to the Alertmanagers (all at once, each post bounded by
/// `alerting.timeout`). Rounds that arrive while a delivery is under way are merged: the
/// newest firing set, every resolved alert.
async fn deliver_loop(
    app: Arc<AppState>,
    mut rounds: mpsc::UnboundedReceiver<Delivery>,
    mut notifier: Option<crate::outputs::alerting::Notifier>,
) {
    while let Some(first) = rounds.recv().await {
        let mut pending: Option<(Vec<Arc<crate::rules::Alert>>, Vec<crate::rules::Alert>, Timestamp)> = None;
        let mut next = Some(first);
        while let Some(message) = next.take().or_else(|| rounds.try_recv().ok()) {
            match message {
                Delivery::Replace(n) => notifier = n,
                Delivery::Round(firing, resolved, now) => {
                    let mut all_resolved = pending.take().map(|(_, r, _)| r).unwrap_or_default();
                    all_resolved.extend(resolved);
                    pending = Some((firing, all_resolved, now));
                }
            }
        }
        if let (Some(n), Some((firing, resolved, now))) = (notifier.as_mut(), pending) {
            n.round(&firing, resolved, now).await;
            *app.alertmanagers.write() = n.stats();
        }
    }
}

/// One round of the rules over the current state; what fires and resolves goes to delivery.
fn evaluate(
    app: &AppState,
    evaluator: &mut crate::rules::Evaluator,
    deliver: &mpsc::UnboundedSender<Delivery>,
) {
    let now = Timestamp::now();
    let resolved = {
        let state = app.state.read();
        evaluator.evaluate_with(&state, &app.daemon_facts(&state), now)
    };
    // Shared, not copied: an alert is cloned only when the evaluator changes it while the view
    // or the delivery still holds it.
    let active: Vec<Arc<crate::rules::Alert>> = evaluator.active_shared().cloned().collect();
    let firing: Vec<Arc<crate::rules::Alert>> =
        active.iter().filter(|a| a.state == crate::rules::AlertState::Firing).cloned().collect();
    {
        let mut view = app.alerts.write();
        view.rules =
            evaluator.rules().iter().map(|r| (r.spec.name.clone(), r.spec.severity.as_str())).collect();
        view.set_active(active);
        view.resolved = evaluator.resolved().cloned().collect();
        view.incidents = evaluator.incidents();
    }
    let _ = deliver.send(Delivery::Round(firing, resolved, now));
}
