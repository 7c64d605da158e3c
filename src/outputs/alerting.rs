//! The Alertmanager client: pushes firing and resolved alerts with the v2 API.
//!
//! Alertmanager expects clients to re-send active alerts periodically and to send `endsAt` when
//! they resolve. Every round sends the full set of firing alerts plus the resolved ones a given
//! Alertmanager has not acknowledged yet, so an outage loses nothing still relevant: once it is
//! back, the next round carries the current truth. Failures back off per Alertmanager.

use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

use crate::config::Credentials;
pub(crate) use crate::counters::TargetStats;
use crate::outbound::Authorize;
use crate::rules::{Alert, AlertState, Labels};
use crate::time::Timestamp;

/// Resolved alerts kept for an unreachable Alertmanager at most this long (it has expired
/// them by then anyway, through the `endsAt` of the last firing send).
const KEEP_RESOLVED: Duration = Duration::from_secs(3600);

/// At most this many undelivered resolved alerts per Alertmanager.
const MAX_UNDELIVERED: usize = 10_000;

/// One alert in Alertmanager's v2 `POST /api/v2/alerts` body.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct PostableAlert {
    /// Identity.
    pub(crate) labels: Labels,
    /// summary, description, runbook_url.
    pub(crate) annotations: Labels,
    /// RFC 3339.
    #[serde(rename = "startsAt")]
    pub(crate) starts_at: String,
    /// RFC 3339: in the future while firing, the resolve time once resolved.
    #[serde(rename = "endsAt")]
    pub(crate) ends_at: String,
    /// A link back to the daemon.
    #[serde(rename = "generatorURL")]
    pub(crate) generator_url: String,
}

/// RFC 3339 with milliseconds, UTC.
pub(crate) fn rfc3339(at: Timestamp) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(at.millis().max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

/// The body for a set of alerts: firing ones end `valid_for` from `now` unless re-sent.
pub(crate) fn payload(
    alerts: &[Alert],
    now: Timestamp,
    valid_for: Duration,
    generator_url: &str,
) -> Vec<PostableAlert> {
    alerts
        .iter()
        .map(|a| {
            let ends = match a.state {
                AlertState::Resolved => a.resolved_at.unwrap_or(now),
                _ => now.plus_millis(valid_for.as_millis() as i64),
            };
            PostableAlert {
                labels: a.labels.clone(),
                annotations: a.annotations.clone(),
                starts_at: rfc3339(a.fired_at.unwrap_or(a.active_since)),
                ends_at: rfc3339(ends),
                generator_url: generator_url.to_string(),
            }
        })
        .collect()
}

/// A post under way: how many undelivered resolved alerts it carries, and its outcome.
type InFlight = tokio::task::JoinHandle<(usize, usize, Result<(), String>)>;

struct Target {
    url: String,
    /// The post under way, if any: each Alertmanager has its own, so one that hangs (up to the
    /// timeout) holds up neither the others nor the rule rounds.
    in_flight: Option<InFlight>,
    undelivered: Vec<Alert>,
    failures: u32,
    next_attempt: Option<Timestamp>,
    last_sent: Option<Timestamp>,
    sent_total: u64,
    errors_total: u64,
}

/// Sends alerts to every configured Alertmanager.
pub(crate) struct Notifier {
    http: reqwest::Client,
    credentials: Credentials,
    targets: Vec<Target>,
    resend_every: Duration,
    generator_url: String,
    last_firing: (usize, u64),
}

impl Notifier {
    /// A notifier for `urls` (Alertmanager base URLs); every post is bounded by `timeout`.
    /// Fails only if no HTTP client can be built (the TLS backend failed to start): a client
    /// without the timeout would let one hanging Alertmanager hold delivery forever.
    pub(crate) fn new(
        urls: &[String],
        timeout: Duration,
        resend_every: Duration,
        generator_url: String,
    ) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        let targets = urls
            .iter()
            .map(|u| Target {
                url: u.trim_end_matches('/').to_string(),
                in_flight: None,
                undelivered: Vec::new(),
                failures: 0,
                next_attempt: None,
                last_sent: None,
                sent_total: 0,
                errors_total: 0,
            })
            .collect();
        Ok(Notifier {
            http,
            credentials: Credentials::None,
            targets,
            resend_every,
            generator_url,
            last_firing: (0, 0),
        })
    }

    /// Sends `credentials` with every post.
    pub(crate) fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Delivery counters per Alertmanager.
    pub(crate) fn stats(&self) -> Vec<TargetStats> {
        self.targets
            .iter()
            .map(|t| TargetStats {
                url: crate::config::redact_url(&t.url),
                sent_total: t.sent_total,
                errors_total: t.errors_total,
                queued: t.undelivered.len(),
            })
            .collect()
    }

    /// One round: queue `resolved`, and post to each Alertmanager that is due (the firing set
    /// changed, something resolved, or `resend_every` passed), unless it is backing off. `now`
    /// is the only time the round reads: resends and back-off are measured from it.
    pub(crate) async fn round<A: std::borrow::Borrow<Alert>>(
        &mut self,
        firing: &[A],
        resolved: Vec<Alert>,
        now: Timestamp,
    ) {
        // A hash of the firing set's label sets, not a copy of them (20,000 at 10,000 jobs).
        let firing_ids = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            for alert in firing {
                alert.borrow().labels.hash(&mut hasher);
            }
            (firing.len(), hasher.finish())
        };
        let changed = firing_ids != self.last_firing;
        self.last_firing = firing_ids;
        // Alertmanager keeps a firing alert until endsAt: four resend periods survive three
        // lost sends, as Prometheus does.
        let valid_for = self.resend_every * 4;
        for target in &mut self.targets {
            // The outcome of the post that finished since the last round, if any.
            if target.in_flight.as_ref().is_some_and(|h| h.is_finished())
                && let Some(handle) = target.in_flight.take()
                && let Ok((alerts, resolved_sent, outcome)) = handle.await
            {
                target.finished(alerts, resolved_sent, outcome, now, self.resend_every);
            }
            target.undelivered.extend(resolved.iter().cloned());
            let horizon = now.millis() - KEEP_RESOLVED.as_millis() as i64;
            target.undelivered.retain(|a| a.resolved_at.is_some_and(|t| t.millis() > horizon));
            if target.undelivered.len() > MAX_UNDELIVERED {
                let excess = target.undelivered.len() - MAX_UNDELIVERED;
                target.undelivered.drain(..excess);
            }
            let due = changed
                || !target.undelivered.is_empty()
                || target.last_sent.is_none_or(|t| now.since(t) >= self.resend_every.as_millis() as u64);
            let backing_off = target.next_attempt.is_some_and(|t| now < t);
            if !due
                || backing_off
                || target.in_flight.is_some()
                || (firing.is_empty()
                    && target.undelivered.is_empty()
                    && target.last_sent.is_some()
                    && !changed)
            {
                continue;
            }
            let mut alerts: Vec<Alert> = firing.iter().map(|a| a.borrow().clone()).collect();
            alerts.extend(target.undelivered.iter().cloned());
            if alerts.is_empty() {
                target.last_sent = Some(now);
                continue;
            }
            let body = payload(&alerts, now, valid_for, &self.generator_url);
            let url = format!("{}/api/v2/alerts", target.url);
            let request = self.http.post(&url).authorize(&self.credentials).json(&body);
            let (count, resolved_sent) = (alerts.len(), target.undelivered.len());
            // Each post in a task of its own, bounded by the client's timeout.
            target.in_flight = Some(tokio::spawn(async move {
                let outcome = match request.send().await {
                    Ok(r) if r.status().is_success() => Ok(()),
                    Ok(r) => Err(format!("HTTP {}", r.status())),
                    Err(e) => Err(e.without_url().to_string()),
                };
                (count, resolved_sent, outcome)
            }));
        }
    }
}

impl Target {
    fn finished(
        &mut self,
        alerts: usize,
        resolved_sent: usize,
        outcome: Result<(), String>,
        now: Timestamp,
        resend_every: Duration,
    ) {
        match outcome {
            Ok(()) => {
                // The resolved alerts that post carried (more may have been queued since).
                self.undelivered.drain(..resolved_sent.min(self.undelivered.len()));
                self.failures = 0;
                self.next_attempt = None;
                self.last_sent = Some(now);
                self.sent_total += 1;
            }
            Err(why) => {
                self.failures += 1;
                self.errors_total += 1;
                let backoff = Duration::from_secs(1 << self.failures.min(5)).min(resend_every);
                self.next_attempt = Some(now.plus_millis(backoff.as_millis() as i64));
                let alertmanager = crate::config::redact_url(&self.url);
                tracing::warn!(%alertmanager, alerts, retry_in = ?backoff, "cannot send alerts: {why}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(Timestamp(1_795_964_459_544)), "2026-11-29T15:00:59.544Z");
    }

    #[test]
    fn firing_alerts_end_in_the_future_and_resolved_ones_when_they_resolved() {
        let mut alert = Alert {
            labels: Labels::from([("alertname".into(), "X".into())]),
            annotations: Labels::default(),
            state: AlertState::Firing,
            active_since: Timestamp(1_000),
            fired_at: Some(Timestamp(2_000)),
            resolved_at: None,
            value: Some(1.0),
        };
        let body =
            payload(std::slice::from_ref(&alert), Timestamp(10_000), Duration::from_secs(120), "http://d/");
        assert_eq!(body[0].starts_at, rfc3339(Timestamp(2_000)));
        assert_eq!(body[0].ends_at, rfc3339(Timestamp(130_000)));
        alert.state = AlertState::Resolved;
        alert.resolved_at = Some(Timestamp(9_000));
        let body = payload(&[alert], Timestamp(10_000), Duration::from_secs(120), "http://d/");
        assert_eq!(body[0].ends_at, rfc3339(Timestamp(9_000)));
        let json = serde_json::to_value(&body).unwrap();
        assert!(json[0].get("generatorURL").is_some() && json[0].get("startsAt").is_some());
    }

    #[tokio::test]
    async fn back_off_and_resend_follow_the_time_given() {
        // Nothing listens on port 9 of the loopback: every post fails at once.
        let mut n = Notifier::new(
            &["http://127.0.0.1:9".to_string()],
            Duration::from_secs(1),
            Duration::from_secs(60),
            "http://d/".to_string(),
        )
        .unwrap();
        let alert = Alert {
            labels: Labels::from([("alertname".into(), "X".into())]),
            annotations: Labels::default(),
            state: AlertState::Firing,
            active_since: Timestamp(0),
            fired_at: Some(Timestamp(0)),
            resolved_at: None,
            value: Some(1.0),
        };
        let firing = std::slice::from_ref(&alert);
        n.round(firing, Vec::new(), Timestamp(0)).await;
        while !n.targets[0].in_flight.as_ref().expect("posted at once").is_finished() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The failure is taken at 1 s: back off 2 s from then, whatever the clock says.
        n.round(firing, Vec::new(), Timestamp(1_000)).await;
        assert_eq!(n.targets[0].errors_total, 1);
        assert_eq!(n.targets[0].next_attempt, Some(Timestamp(3_000)));
        assert!(n.targets[0].in_flight.is_none(), "backing off");
        n.round(firing, Vec::new(), Timestamp(2_999)).await;
        assert!(n.targets[0].in_flight.is_none(), "still backing off");
        n.round(firing, Vec::new(), Timestamp(3_000)).await;
        assert!(n.targets[0].in_flight.is_some(), "due again at the time given");
    }
}
