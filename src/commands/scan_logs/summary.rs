//! The answer first of a scan: per job whose checkpoints failed one [`Headline`] (what went
//! wrong with the failovers and the root cause, where, the class, what to do), and the
//! alignment the DEBUG barrier lines show, summarised.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::health::headline::{self, Headline, HeadlineClass, Severity};
use crate::time::human_ms;

use super::aggregate::{Alignment, Failovers, Timeline};
use super::report::ScanReport;

/// Checkpoints listed one by one in the alignment section (the JSON has them all).
const ALIGNMENT_ROWS: usize = 10;
/// Checkpoint ids named in the headline of lines that name no job.
const MAX_IDS_NAMED: usize = 5;

/// The file name of a path (the headline names a log, not where it was copied to).
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

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

    /// Per job whose checkpoints failed (or that failed over), worst first. A failover line
    /// names no job: it counts for the job an earlier line of its file named last.
    pub(crate) fn headlines(&self) -> Vec<Headline> {
        let a = &self.aggregate;
        let timelines = a.timelines();
        let mut jobs: BTreeMap<&str, JobCounts> = BTreeMap::new();
        for t in &timelines {
            let j = jobs.entry(t.job_id).or_default();
            j.seen += 1;
            *j.by_outcome.entry(t.outcome).or_insert(0) += 1;
        }
        for job in a.failovers_by_job.keys() {
            jobs.entry(a.str(*job).unwrap_or_default()).or_default();
        }
        let mut out = Vec::new();
        for (job, counts) in &jobs {
            let failovers = a.failovers_by_job.get(&a.sym_of(job)).filter(|_| !job.is_empty());
            let failovers = if job.is_empty() { a.failovers_by_job.get(&0) } else { failovers };
            if counts.failed() == 0 && failovers.is_none() {
                continue;
            }
            out.push(self.job_headline(job, counts, failovers, &timelines));
        }
        headline::order(out)
    }

    fn job_headline(
        &self,
        job: &str,
        c: &JobCounts,
        failovers: Option<&Failovers>,
        timelines: &[Timeline<'_>],
    ) -> Headline {
        let a = &self.aggregate;
        let mut what = Vec::new();
        if let Some(f) = failovers {
            what.push(self.failover_sentence(job, f));
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
        let dropped = self.dropped_acks(job, timelines);
        if let Some(sentence) = &dropped {
            what.push(sentence.clone());
        }
        if let Some((cause, n)) = causes
            .iter()
            .filter(|(c, _)| dropped.is_none() || c.category != "oversized_ack")
            .max_by_key(|(_, n)| **n)
        {
            let text = super::text::exception_text(a.str(cause.exception), a.str(cause.message));
            what.push(format!("root cause in {n} checkpoint(s) ({}): {text}", cause.category));
        }
        what.extend(counts);
        let where_ = self.top_holder();
        let failed_over = failovers.is_some();
        let class = if failed_over {
            HeadlineClass::Failover
        } else if c.by_outcome.get("expired").copied().unwrap_or(0) * 2 > c.failed() {
            HeadlineClass::Timeout
        } else {
            HeadlineClass::Failure
        };
        let (mut next_step, doc) = headline::next_step(Some(class), where_.as_deref());
        if dropped.is_some() {
            next_step = crate::state::ack_drops::NEXT_STEP.to_string();
        }
        Headline {
            severity: if failed_over { Severity::Critical } else { Severity::Warning },
            job: self.job_label(job, failovers, timelines),
            what: what.join("; "),
            where_,
            class: Some(class),
            next_step,
            doc_url: Some(doc.url.to_string()),
        }
    }

    /// "the acknowledgement of checkpoints 12, 13 was dropped as oversized: …": the job's checkpoints
    /// that did not complete with an oversized payload attached (`Aggregate::attach_drops`), with
    /// the largest payload and the frame size the lines give.
    fn dropped_acks(&self, job: &str, timelines: &[Timeline<'_>]) -> Option<String> {
        let a = &self.aggregate;
        let mut ids = Vec::new();
        let mut sizes: Option<(u64, u64)> = None;
        let mut all_expired = true;
        for t in timelines.iter().filter(|t| t.job_id == job && t.outcome != "completed") {
            let found = t.events.iter().filter(|e| a.kind(e) == "oversized_payload").find_map(|e| {
                let cause = e.cause.checked_sub(1).and_then(|i| a.cause_ids.get(i as usize))?;
                crate::state::ack_drops::oversized_sizes(a.str(cause.message)?)
            });
            if let Some((payload, frame)) = found {
                ids.push(t.id.to_string());
                all_expired &= t.outcome == "expired";
                sizes = Some(sizes.map_or((payload, frame), |(p, f)| (p.max(payload), f.max(frame))));
            }
        }
        let (payload, frame) = sizes?;
        let (which, up_to, verb) = match ids.len() {
            1 => (format!("the acknowledgement of checkpoint {} was", ids[0]), "", "it"),
            _ => {
                let ids = crate::time::some_of(&ids, MAX_IDS_NAMED, "");
                (format!("acknowledgements of checkpoints {ids} were"), "up to ", "they")
            }
        };
        // Before FLINK-39738 the checkpoint waits for the lost acknowledgement until it expires;
        // from it on the task's ask times out and the task declines.
        let then = if all_expired {
            format!("so {verb} could only expire")
        } else {
            "so the task's ask for it timed out and it was declined (FLINK-39738)".to_string()
        };
        Some(format!(
            "{which} dropped as oversized (a TaskManager's Pekko line): {up_to}{} encoded over the {} \
             frame size (pekko.framesize), {then}",
            crate::time::bytes(payload as f64),
            crate::time::bytes(frame as f64)
        ))
    }

    /// "job flink-lab (b9a74d…)" or "job b9a74d…"; for lines that name no job, what they do
    /// say: the files they are in and the checkpoints around them.
    fn job_label(&self, job: &str, failovers: Option<&Failovers>, timelines: &[Timeline<'_>]) -> String {
        let a = &self.aggregate;
        if !job.is_empty() {
            return match a.job_names.get(job) {
                Some(name) => format!("job {name} ({job})"),
                None => format!("job {job}"),
            };
        }
        let mut files: BTreeSet<&str> = BTreeSet::new();
        let mut ids: BTreeSet<u64> = BTreeSet::new();
        if let Some(f) = failovers {
            files.extend(f.files.iter().filter_map(|s| a.str(*s)).map(base_name));
            ids.extend(f.checkpoints.iter().copied());
        }
        for t in timelines.iter().filter(|t| t.job_id.is_empty()) {
            ids.insert(t.id);
            files.extend(t.events.iter().filter_map(|e| a.str(e.file)).map(base_name));
        }
        let files: Vec<&str> = files.into_iter().collect();
        let ids: Vec<String> = ids.iter().take(MAX_IDS_NAMED).map(u64::to_string).collect();
        let around = match ids.len() {
            0 => String::new(),
            1 => format!("; checkpoint {}", ids[0]),
            n if n == MAX_IDS_NAMED => format!("; checkpoints {}, …", ids.join(", ")),
            _ => format!("; checkpoints {}", ids.join(", ")),
        };
        format!(
            "the job in {} (its lines there name no job id{around})",
            crate::time::some_of(&files, 3, "these logs")
        )
    }

    /// "the job failed over 3 times (…)": its tolerable-failure lines and its restores.
    fn failover_sentence(&self, job: &str, f: &Failovers) -> String {
        let a = &self.aggregate;
        let n = f.count;
        let reason = f.reasons.iter().max_by_key(|(_, n)| **n).and_then(|(r, _)| a.str(*r));
        let restored = a.restores_by_job.get(&a.sym_of(job)).copied().unwrap_or(0);
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::commands::scan_logs::scan_paths_streaming;
    use crate::sources::logs::parse::Patterns;

    fn fixture(version: &str, scenario: &str) -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/flink-{version}/{scenario}/logs"));
        let mut logs: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
        logs.sort();
        logs
    }

    fn labels(paths: &[PathBuf]) -> Vec<(String, String)> {
        let report = scan_paths_streaming(paths, &Patterns::builtin(), 1 << 20).unwrap();
        report.headlines().into_iter().map(|h| (h.job, h.what)).collect()
    }

    /// The failover lines ("Exceeded checkpoint tolerable failure threshold") name no job: the
    /// job is the one the line before names, called by the name its state lines give it.
    #[test]
    fn a_failover_is_the_job_the_lines_before_it_name() {
        for (version, id) in
            [("1.20.5", "b9a74d3ab14fea531101d9859adb486b"), ("2.3.0", "d1e20171b832580d0230ba98fd0f5760")]
        {
            let got = labels(&fixture(version, "tolerable-exceeded"));
            assert_eq!(got.len(), 1, "{version}: {got:?}");
            assert_eq!(got[0].0, format!("job flink-lab-tolerable-exceeded ({id})"), "{version}");
            assert!(got[0].1.starts_with("the job failed over 3 times"), "{version}: {}", got[0].1);
        }
    }

    /// A JobManager log that begins at a failover (no earlier line names the job): its headline
    /// names the log and what it says, never "a job the lines do not name"; the later
    /// failovers count for the job the lines before them name.
    #[test]
    fn a_failover_no_line_before_names_is_told_by_its_log() {
        let jm = fixture("1.20.5", "tolerable-exceeded")
            .into_iter()
            .find(|p| p.to_string_lossy().contains("standalonesession"))
            .unwrap();
        let text = std::fs::read_to_string(jm).unwrap();
        let from = text.find("Trying to recover from a global failure").unwrap();
        let from = text[..from].rfind('\n').map_or(0, |i| i + 1);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("flink-root-standalonesession-0-vm.log");
        std::fs::write(&log, &text[from..]).unwrap();
        let got = labels(&[log]);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "job flink-lab-tolerable-exceeded (b9a74d3ab14fea531101d9859adb486b)");
        assert!(got[0].1.starts_with("the job failed over 2 times"), "{}", got[0].1);
        assert_eq!(
            got[1].0,
            "the job in flink-root-standalonesession-0-vm.log (its lines there name no job id)"
        );
        assert!(got[1].1.starts_with("the job failed over once"), "{}", got[1].1);
        assert!(got.iter().all(|(job, _)| !job.contains("do not name")), "{got:?}");
    }

    /// TaskManager lines whose checkpoint ids several jobs share: the headline names the logs
    /// and the checkpoints.
    #[test]
    fn lines_of_no_one_job_are_told_by_their_logs_and_checkpoints() {
        let mut logs = fixture("1.17.2", "declined-e2e");
        logs.extend(fixture("1.20.5", "declined"));
        let got = labels(&logs);
        let unnamed: Vec<&(String, String)> =
            got.iter().filter(|(job, _)| !job.starts_with("job ")).collect();
        assert!(!unnamed.is_empty(), "{got:?}");
        for (job, _) in unnamed {
            assert!(
                job.starts_with(
                    "the job in flink-root-taskexecutor-0-vm.log (its lines there name no job id; checkpoint"
                ),
                "{job}"
            );
        }
    }

    /// Issue 40: a throttled storage, a missing bucket and an acknowledgement Pekko dropped,
    /// each the root cause of the checkpoint whose asynchronous part it failed.
    #[test]
    fn storage_and_acknowledgement_causes_attach_to_their_checkpoints() {
        let log = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/written/storage-causes/logs/flink-root-taskexecutor-0-vm.log");
        let report = scan_paths_streaming(&[log], &Patterns::builtin(), 1 << 20).unwrap();
        let a = &report.aggregate;
        let category = |id| a.cause_of(id).map(|c| c.category);
        assert_eq!(category(7), Some("storage_throttled"));
        assert_eq!(category(8), Some("storage_error"));
        assert_eq!(category(9), Some("oversized_ack"));
        let text = report.to_text();
        for line in ["  oversized_ack          1", "  storage_error          1", "  storage_throttled      1"]
        {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    /// Issue 40: Pekko's "Discarding oversized payload" names no checkpoint. Its recipient
    /// (`jobmanager_4`) is the job the TaskManager registered there; the checkpoint in progress
    /// on that job at the line's time is the one it hurt (job keyed-job's checkpoint 30 was in
    /// progress too): its expiry says the acknowledgement was dropped, with both sizes.
    #[test]
    fn an_oversized_payload_is_the_cause_of_the_checkpoint_in_progress_on_its_job() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/written/oversized-ack/logs");
        let mut logs: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
        logs.sort();
        let report = scan_paths_streaming(&logs, &Patterns::builtin(), 1 << 20).unwrap();
        let a = &report.aggregate;
        assert_eq!(a.cause_of(12).map(|c| c.category), Some("oversized_ack"));
        assert_eq!(a.cause_of(13).map(|c| c.category), Some("oversized_ack"));
        assert_eq!(a.cause_of(30), None, "the other job's checkpoint in progress is not hurt");
        let timelines = a.timelines();
        let of = |id| timelines.iter().find(|t| t.id == id).unwrap();
        assert_eq!(of(12).job_id, "e5977598408a0b50e1eb3e122b7bd082");
        let kinds: Vec<&str> = of(12).events.iter().map(|e| a.kind(e)).collect();
        assert_eq!(kinds, ["triggered", "oversized_payload", "expired", "failed"]);
        let headlines = report.headlines();
        assert_eq!(headlines.len(), 1);
        let h = &headlines[0];
        assert_eq!(h.job, "job union-state-job (e5977598408a0b50e1eb3e122b7bd082)");
        assert!(
            h.what.starts_with(
                "acknowledgements of checkpoints 12 and 13 were dropped as oversized (a TaskManager's Pekko line): \
                 up to 15 MiB encoded over the 10 MiB frame size (pekko.framesize), so they could only expire"
            ),
            "{}",
            h.what
        );
        assert!(h.next_step.contains("raise pekko.framesize"), "{}", h.next_step);
        // Without the registration lines two jobs had a checkpoint in progress, and the other
        // job's completed (its acknowledgements arrived): the same attachment.
        let tm = std::fs::read_to_string(&logs[1]).unwrap();
        let unregistered: String =
            tm.lines().filter(|l| !l.contains("Successful registration")).map(|l| format!("{l}\n")).collect();
        let copy = std::env::temp_dir().join(format!("oversized-ack-{}.log", std::process::id()));
        std::fs::write(&copy, unregistered).unwrap();
        let report =
            scan_paths_streaming(&[logs[0].clone(), copy.clone()], &Patterns::builtin(), 1 << 20).unwrap();
        std::fs::remove_file(&copy).unwrap();
        assert_eq!(report.aggregate.cause_of(12).map(|c| c.category), Some("oversized_ack"));
        assert_eq!(report.aggregate.cause_of(30), None);
    }
}
