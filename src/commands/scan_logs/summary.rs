//! The answer first of a scan: per job whose checkpoints failed one [`Headline`] (what went
//! wrong with the failovers and the root cause, where, the class, what to do), and the
//! alignment the DEBUG barrier lines show, summarised.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::health::headline::{self, Headline, HeadlineClass, Severity};
use crate::time::human_ms;

use super::aggregate::{Alignment, Timeline};
use super::report::ScanReport;

/// Checkpoints listed one by one in the alignment section (the JSON has them all).
const ALIGNMENT_ROWS: usize = 10;

/// What the logs say about one job's checkpoints.
#[derive(Default)]
struct JobCounts {
    seen: usize,
    by_outcome: BTreeMap<&'static str, usize>,
}

impl JobCounts {
    fn failed(&self) -> usize {
        ["expired", "declined", "failed"].iter().map(|o| self.by_outcome.get(o).copied().unwrap_or(0)).sum()
    }
}

impl ScanReport {
    /// Whether the logs show checkpoints that failed (not those a stopping job aborted) or a
    /// failover: `scan-logs` then exits 1, as `diagnose` does for an unhealthy job.
    pub fn found_failures(&self) -> bool {
        !self.headlines().is_empty()
    }

    /// Per job whose checkpoints failed (or that failed over), worst first.
    pub(crate) fn headlines(&self) -> Vec<Headline> {
        let a = &self.aggregate;
        let timelines = a.timelines();
        let mut jobs: BTreeMap<&str, JobCounts> = BTreeMap::new();
        for t in &timelines {
            let j = jobs.entry(t.job_id).or_default();
            j.seen += 1;
            *j.by_outcome.entry(t.outcome).or_insert(0) += 1;
        }
        let failovers: u64 = a.failovers.values().sum();
        // The lines that say the job failed over name no job: the one whose checkpoints failed most.
        let failing_most =
            jobs.iter().filter(|(_, j)| j.failed() > 0).max_by_key(|(_, j)| j.failed()).map(|(id, _)| *id);
        let mut out = Vec::new();
        for (job, counts) in &jobs {
            let failed_over = failovers > 0 && failing_most == Some(*job);
            if counts.failed() == 0 && !failed_over {
                continue;
            }
            out.push(self.job_headline(job, counts, failed_over, &timelines));
        }
        if failovers > 0 && failing_most.is_none() {
            out.push(self.job_headline("", &JobCounts::default(), true, &timelines));
        }
        headline::order(out)
    }

    fn job_headline(
        &self,
        job: &str,
        c: &JobCounts,
        failed_over: bool,
        timelines: &[Timeline<'_>],
    ) -> Headline {
        let a = &self.aggregate;
        let mut what = Vec::new();
        if failed_over {
            what.push(self.failover_sentence());
        }
        let mut counts = None;
        if c.seen > 0 {
            let outcomes: Vec<String> = ["declined", "expired", "failed", "stopped"]
                .iter()
                .filter_map(|o| c.by_outcome.get(o).map(|n| format!("{n} {o}")))
                .collect();
            counts = Some(format!(
                "{} of {} checkpoints did not complete ({})",
                c.failed(),
                c.seen,
                outcomes.join(", ")
            ));
        }
        // The causes this job's own lines carry (checkpoint ids repeat across jobs), symptoms
        // (expired, declined, a stopping job) left out: no root cause worth a headline.
        let causes = timelines
            .iter()
            .filter(|t| t.job_id == job)
            .filter_map(|t| {
                t.events
                    .iter()
                    .filter_map(|e| e.cause.checked_sub(1).and_then(|i| a.cause_ids.get(i as usize)))
                    .find(|c| !crate::sources::logs::parse::SYMPTOM_CATEGORIES.contains(&c.category))
                    .copied()
            })
            .fold(BTreeMap::new(), |mut m: BTreeMap<_, usize>, c| {
                *m.entry(c).or_default() += 1;
                m
            });
        if let Some((cause, n)) = causes.iter().max_by_key(|(_, n)| **n) {
            let text = super::text::exception_text(a.str(cause.exception), a.str(cause.message));
            what.push(format!("root cause in {n} checkpoint(s) ({}): {text}", cause.category));
        }
        what.extend(counts);
        let where_ = self.top_holder();
        let class = if failed_over {
            HeadlineClass::Failover
        } else if c.by_outcome.get("expired").copied().unwrap_or(0) * 2 > c.failed() {
            HeadlineClass::Timeout
        } else {
            HeadlineClass::Failure
        };
        let (next_step, doc) = headline::next_step(Some(class), where_.as_deref());
        Headline {
            severity: if failed_over { Severity::Critical } else { Severity::Warning },
            job: if job.is_empty() { "a job the lines do not name".into() } else { format!("job {job}") },
            what: what.join("; "),
            where_,
            class: Some(class),
            next_step,
            doc_url: Some(doc.url.to_string()),
        }
    }

    /// "the job failed over 3 times (…)": the tolerable-failure lines and the restores.
    fn failover_sentence(&self) -> String {
        let a = &self.aggregate;
        let n: u64 = a.failovers.values().sum();
        let reason = a.failovers.iter().max_by_key(|(_, n)| **n).and_then(|(r, _)| a.str(*r));
        let restored = self.kind_counts().get("restored").copied().unwrap_or(0);
        let times = if n == 1 { "once".to_string() } else { format!("{n} times") };
        let latest = reason.map(|r| format!(", the latest: {}", r.trim_end_matches('.'))).unwrap_or_default();
        let restores = match restored {
            0 => String::new(),
            n => format!(", restored from a checkpoint {n} time(s)"),
        };
        format!(
            "the job failed over {times}: more checkpoints failed in a row than tolerable-failed-checkpoints \
             allows{latest}{restores}"
        )
    }

    /// The subtask that held up or failed the most checkpoints, with its TaskManager.
    fn top_holder(&self) -> Option<String> {
        let a = &self.aggregate;
        let rows = self.blocking_rows();
        let (task, subtask, b) =
            rows.into_iter().filter(|(t, _, _)| *t != "?").max_by_key(|(_, _, b)| b.count)?;
        Some(super::text::who(Some(task), subtask, a.str(b.taskmanager)))
    }

    /// The headlines, at most three lines each.
    pub(super) fn write_headlines(&self, out: &mut String) {
        let headlines = self.headlines();
        if headlines.is_empty() {
            let _ = writeln!(out, "No checkpoint failed and no failover in these logs.");
        }
        out.push_str(&headline::render_all(&headlines));
    }

    /// The alignment from DEBUG barrier lines: the longest, and per checkpoint the subtask that
    /// waited longest and the channel it waited for.
    pub(super) fn write_alignment(&self, out: &mut String) {
        let all = self.aggregate.alignments();
        if all.is_empty() {
            return;
        }
        let mut worst: BTreeMap<u64, &Alignment<'_>> = BTreeMap::new();
        for al in &all {
            if worst.get(&al.checkpoint_id).is_none_or(|w| al.ms > w.ms) {
                worst.insert(al.checkpoint_id, al);
            }
        }
        let longest = worst.values().max_by_key(|a| a.ms).copied();
        let mut by_subtask: BTreeMap<String, usize> = BTreeMap::new();
        for w in worst.values() {
            *by_subtask.entry(super::text::who(Some(w.task), w.subtask, None)).or_default() += 1;
        }
        let _ = writeln!(out, "\nAlignment (first to last barrier of a subtask, from DEBUG barrier lines):");
        if let Some(l) = longest {
            let (most, n) =
                by_subtask.iter().max_by_key(|(_, n)| **n).map_or(("?", 0), |(s, n)| (s.as_str(), *n));
            let _ = writeln!(
                out,
                "  {} checkpoint(s) with barriers on several channels; the longest alignment {} ({} in \
                 checkpoint {}); {most} aligned longest in {n} of them",
                worst.len(),
                human_ms(l.ms),
                super::text::who(Some(l.task), l.subtask, None),
                l.checkpoint_id
            );
        }
        for w in worst.values().rev().take(ALIGNMENT_ROWS) {
            let _ = writeln!(
                out,
                "  checkpoint {}: {} aligned {} over {} channel(s), the last barrier from {}",
                w.checkpoint_id,
                super::text::who(Some(w.task), w.subtask, None),
                human_ms(w.ms),
                w.channels,
                w.last_channel
            );
        }
        if worst.len() > ALIGNMENT_ROWS {
            let _ = writeln!(out, "  … and {} older checkpoint(s)", worst.len() - ALIGNMENT_ROWS);
        }
    }

    /// The alignments for the JSON report.
    pub(super) fn alignment_json(&self) -> Vec<serde_json::Value> {
        self.aggregate
            .alignments()
            .into_iter()
            .map(|a| {
                serde_json::json!({"task": a.task, "subtask": a.subtask, "checkpoint_id": a.checkpoint_id,
                    "alignment_ms": a.ms, "last_channel": a.last_channel, "channels": a.channels})
            })
            .collect()
    }
}
