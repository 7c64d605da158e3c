#!/usr/bin/env python3
"""e2e/scenarios.py -- checkpoint-sentinel against a live Flink cluster, scenario by scenario.

Run by e2e/run.sh, which starts Flink, Alertmanager, Prometheus and the daemon. For each scenario
this script submits the job with e2e/flink.sh, polls Flink's own REST API every second as its
independent ground truth, and asserts on the daemon's /metrics, Alertmanager's API and
Prometheus' API, and runs `checkpoint-sentinel diagnose` against Flink itself:

  healthy   flink_checkpoints_total == Flink's counts; exported P95 == nearest-rank P95 of the
            distinct completed checkpoints (within HDR precision, 1 %)
  expired   the same counts; expired checkpoints seen in REST (failure_message) and in the logs
            (flink_checkpoint_log_events_total{kind="expired"}) in equal number; the alert for
            failing checkpoints reaches Alertmanager, and resolves once the job is gone
            `checkpoint-sentinel diagnose` run live while checkpoints still expire: unhealthy
            (exit 1), failure class timeout
  declined  declined checkpoints seen in REST and in the logs in equal number, with the task
            that declined (from scan-logs on the same log files)
  backpressure  skewed backpressure makes the alignment long: the same counts; the exported
            alignment P95 (job and stateful-map) equals the nearest-rank P95 of Flink's per-subtask
            alignments (within HDR precision); every checkpoint's longest alignment and slowest
            subtask in the JSON API equal Flink's subtask details; `diagnose` run live: at risk
            (exit 3), failure class blocking, names the hot subtask and its TaskManager
  failover  killing the TaskManager shows up as a restore (flink_checkpoint_restores_total and
            a log event of kind "restore"); the daemon's restore time (API, metric, job page in
            headless Chromium) equals Flink's restore_timestamp to the last subtask's RUNNING
            timestamp (/subtasktimes), and the restore is counted once
  restore_savepoint  a job cancelled with a savepoint and submitted from it: its start is a
            restore from="savepoint", timed as in failover, naming the savepoint, no downtime
  store     every checkpoint in the store exactly once across two kill -9 restarts of the
            daemon, none unobserved; the job page's 24 h range in headless Chromium draws every
            stored checkpoint (more than the 32 of the in-memory window the recent view draws)
  traces    Flink restarted with its Slf4j trace reporter and web.checkpoints.history 10; a second
            daemon polling every 15 s (over ten 1 s checkpoints between polls) counts every
            checkpoint exactly once from the spans and the polls together: its counts equal
            Flink's, checkpoint_sentinel_checkpoints_observed_total by source adds up to them,
            none unobserved, the store holds each id once, end-to-end durations equal Flink's
  backlog   the fast source reports backlog (FLIP-309) for its first 40 s, interval during backlog
            10 s, then 2.5 s: Flink's history shows both spacings; no alert of the job at any
            second; the shadow explains the 10 s triggers (backlog_interval), none unexplained, and
            its schedule says "backlog interval in force" while it holds (1.19+)
  manual_trigger  FULL and CONFIGURED manual triggers by REST between periodic checkpoints, an
            INCREMENTAL one Flink refuses (FLINK-33723) and a savepoint: no alert at any second;
            each manual checkpoint is put down to a manual trigger, none unexplained (1.19+)
  incident  two TaskManagers, five parallelism-1 jobs, the TaskManager with most of them paused
            (SIGSTOP) 20 s: one incident names it with exactly its jobs, within one poll round of
            Flink's first expiry; the job elsewhere stays out and healthy; it ends after SIGCONT (2.x)
  recovery_checkpoint  unaligned checkpoints with checkpointing during recovery on (FLIP-547): the
            job fails once, its restored stateful-map stays INITIALIZING 3 s and replays its in-flight
            data slowly; Flink's account printed; the daemon's restore time ends at the last subtask
            RUNNING (Flink's timestamps), not at the first checkpoint after it; no alert at any
            second; the shadow explains the first checkpoint after the restore (2.3+)
  rescale   Flink restarted with the adaptive scheduler; PUT /jobs/:id/resource-requirements takes
            the job from parallelism 2 to 1: no alert at any second; the API lists the rescale from
            Flink's history with the checkpoint that gated it (the one restored), the shadow puts the
            first checkpoint after it down to the rescale, the page draws it (2.3+)
  prometheus  a real Prometheus scraped the daemon and answers for flink_checkpoints_total
  blocked   a blocking-map subtask holds its task thread (Thread.sleep in
            sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread) past the 10 s checkpoint timeout;
            Flink's own thread dump shows the frame while the checkpoint is pending on that subtask;
            the daemon names the frame in the FlinkCheckpointBlockedByUserCode alert at
            Alertmanager, in the checkpoints' blocked_thread in the API and in `diagnose`
  gc        stateful-map keeps ~80 % of the TaskManager heap reachable and replaces 300 MiB/s of it:
            Flink's GC counters show the TaskManager spending most of its time in GC and the
            checkpoints expire; the daemon's failed or slow checkpoints carry evidence.text with
            the GC share (a percent, 25 % or more), and flink_taskmanager_gc_time_ratio is exported
  skew      90 % of the distinct keys hash to stateful-map subtask 0 of 4: Flink's per-subtask
            state sizes are skewed (max/median well above 3, max on #0); the daemon exports
            flink_checkpoint_state_skew_ratio{operator="stateful-map"} near Flink's ratio and names
            "stateful-map #0" in the API and in a skew alert at Alertmanager

After each scenario's job is cancelled (healthy, expired, declined, backpressure): no alert of
the job stays pending or firing, nothing stays in progress, and the daemon's counts equal
Flink's final counts (the poller polls an ended job until its counts settle). On healthy, no
alert of the job became pending or firing at any second of the run (built-in rules).

Each scenario applies to the Flink versions it declares (`@since`: traces needs 1.19, whose
Slf4j trace reporter emits checkpoint spans; savepoint 1.17, as 1.13.6 lists no failed
savepoint in its history); out of range it is skipped with a printed reason.

Prints one line per assertion with the numbers; exits non-zero if any failed. Stdlib only.
"""
import argparse
import glob
import html
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

RESULTS = []


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def get_json(url):
    return json.loads(get(url))


def check(name, ok, detail):
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)


def samples(metrics, name, **labels):
    out = []
    for line in metrics.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, value = line.rsplit(" ", 1)
        metric, _, rest = series.partition("{")
        if metric != name:
            continue
        pairs = {}
        for part in rest.rstrip("}").replace('",', '"\x00').split("\x00"):
            if part:
                k, v = part.split("=", 1)
                pairs[k] = v.strip('"')
        if all(pairs.get(k) == v for k, v in labels.items()):
            out.append(float(value))
    return out


def one(metrics, name, **labels):
    s = samples(metrics, name, **labels)
    return s[0] if s else None


def nearest_rank(values, q):
    s = sorted(values)
    return s[min(max(math.ceil(q * len(s)), 1), len(s)) - 1]


class Env:
    def __init__(self, a):
        self.a = a
        self.submitted = []

    def flink(self, *args):
        done = subprocess.run([self.a.flink_sh, *args], capture_output=True, text=True)
        if done.returncode != 0:
            # flink.sh says why on stderr; without it a failure reads only "exit status 1".
            raise RuntimeError(f"flink.sh {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-600:]}")
        out = done.stdout.strip()
        if args[0] == "submit":
            self.submitted.append(out)
        return out

    def cancel_leftovers(self):
        """Cancels jobs a failed scenario left running, so the next one has its slots."""
        for job in self.submitted:
            state = get_json(f"{self.a.rest}/jobs/{job}").get("state")
            if state not in ("CANCELED", "FAILED", "FINISHED"):
                subprocess.run([self.a.flink_sh, "cancel", self.a.version, job], capture_output=True)
        self.submitted.clear()

    def metrics(self):
        return get(f"{self.a.daemon}/metrics")

    def daemon_job(self, job):
        return get_json(f"{self.a.daemon}/api/v1/jobs/{self.a.cluster}/{job}")

    def checkpoints(self, job):
        # Right after submission Flink answers 500 until the job's checkpoint statistics exist.
        for attempt in range(30):
            try:
                return get_json(f"{self.a.rest}/jobs/{job}/checkpoints")
            except Exception:
                if attempt == 29:
                    raise
                time.sleep(1)


def job_alerts(env, job):
    """The daemon's pending and firing alerts of `job`, as the API answers them."""
    active = get_json(f"{env.a.daemon}/api/v1/alerts").get("active", [])
    return [a for a in active if a["labels"].get("job_id") == job]


def active_alerts(env, job):
    """The daemon's pending and firing alerts of `job`: [(alertname, state)]."""
    return [(a["labels"]["alertname"], a["state"]) for a in job_alerts(env, job)]


def watch(env, job, seconds, alerts=None, described=None):
    """Polls Flink for `seconds`; returns {id: history entry} of every finished checkpoint seen.
    With `alerts` (a set), adds the job's active alerts at every second to it; with `described`
    (a dict), keeps each alert's first description, so a failure can show its numbers."""
    seen = {}
    end = time.time() + seconds
    while time.time() < end:
        for h in env.checkpoints(job).get("history", []):
            if h.get("status") in ("COMPLETED", "FAILED"):
                seen.setdefault(h["id"], h)
        if alerts is not None or described is not None:
            for a in job_alerts(env, job):
                if alerts is not None:
                    alerts.add((a["labels"]["alertname"], a["state"]))
                if described is not None:
                    described.setdefault(a["labels"]["alertname"], a.get("annotations", {}).get("description", ""))
        time.sleep(1)
    return seen


def unexplained_deviations(env, job):
    """The shadow's unexplained trigger deviations of `job` and its counts by kind, as the API shows them."""
    try:
        shadow = env.daemon_job(job).get("shadow", {})
    except Exception as e:  # the evidence is for a failure message: never fail on it
        return f"(the job's API answer failed: {e})"
    devs = [f"#{d['checkpoint_id']} {d['kind']}: {d['sentence']}"
            for d in shadow.get("deviations", []) if not d.get("explained")]
    return f"unexplained deviations {devs or 'none'}; counts {shadow.get('deviation_counts')}"


def wait_ended(env, job):
    """Waits (up to 15 s) until Flink answers that the job ended; returns its last state."""
    state = None
    for _ in range(30):
        state = get_json(f"{env.a.rest}/jobs/{job}").get("state")
        if state in ("CANCELED", "FAILED", "FINISHED"):
            break
        time.sleep(0.5)
    return state


def cancel_and_check(env, scenario, job):
    """Cancels the job; then no alert of it may stay active, nothing in progress, and the daemon's
    counts must equal Flink's final counts (the cancel fails the checkpoint in progress, and
    Flink's REST shows that a second or two later)."""
    env.flink("cancel", env.a.version, job)
    cancelled_at = time.time()
    state = wait_ended(env, job)
    final, m, alerts, in_progress, got = None, None, None, None, None
    for _ in range(30):
        time.sleep(1)
        final = env.checkpoints(job)["counts"]
        m = env.metrics()
        alerts = active_alerts(env, job)
        in_progress = one(m, "flink_checkpoints_in_progress", job_id=job)
        got = {s: one(m, "flink_checkpoints_total", job_id=job, status=s) for s in ("completed", "failed")}
        if (not alerts and not in_progress and final.get("in_progress", 0) == 0
                and got["completed"] == final["completed"] and got["failed"] == final["failed"]):
            break
    check(f"{scenario}: after the cancel nothing is active and the counts are Flink's final ones",
          not alerts and not in_progress and got["completed"] == final["completed"] and got["failed"] == final["failed"],
          f"{time.time() - cancelled_at:.0f} s after the cancel ({state}): active alerts {alerts or 'none'}, "
          f"flink_checkpoints_in_progress {in_progress}, daemon completed={got['completed']} failed={got['failed']}; "
          f"Flink {json.dumps(final)}")


def settle(env, job, seen):
    """Waits for a quiet moment where the daemon's counts equal Flink's; returns (metrics, counts)."""
    for _ in range(40):
        before = env.checkpoints(job)
        time.sleep(2.5)
        m = env.metrics()
        after = env.checkpoints(job)
        for h in after.get("history", []):
            if h.get("status") in ("COMPLETED", "FAILED"):
                seen.setdefault(h["id"], h)
        if before["counts"] != after["counts"]:
            continue
        c = after["counts"]
        got = {s: one(m, "flink_checkpoints_total", job_id=job, status=s) for s in ("completed", "failed")}
        if got["completed"] == c["completed"] and got["failed"] == c["failed"]:
            return m, c
    return env.metrics(), env.checkpoints(job)["counts"]


def counts_match(name, m, c, job):
    got = {s: one(m, "flink_checkpoints_total", job_id=job, status=s) for s in ("completed", "failed")}
    check(f"{name}: flink_checkpoints_total equals Flink's counts",
          got["completed"] == c["completed"] and got["failed"] == c["failed"],
          f"daemon completed={got['completed']:.0f} failed={got['failed']:.0f}; Flink {json.dumps(c)}")


def flink_summary_p95(env, job):
    """Flink's own summary P95 of the end-to-end duration; 'none' where its summaries carry no
    percentiles (1.13 has min, max and avg only)."""
    summary = env.checkpoints(job).get("summary", {}).get("end_to_end_duration", {})
    return summary.get("p95", "none: this version's summary has no percentiles")


def version_tuple(version):
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def since(first, needs):
    """Declares the first Flink version a scenario applies to, and what it needs from it."""
    def mark(scenario):
        scenario.since = (first, needs)
        return scenario
    return mark


def out_of_range(scenario, version):
    """Why `scenario` does not apply to Flink `version`, or None when it does."""
    first, needs = getattr(scenario, "since", ((0,), ""))
    if version_tuple(version) < first:
        return f"needs Flink >= {'.'.join(map(str, first))} ({needs}); this is {version}"
    return None


def healthy(env):
    job = env.flink("submit", env.a.version, "healthy")
    alerts, described = set(), {}
    seen = watch(env, job, env.a.seconds, alerts, described)
    m, c = settle(env, job, seen)
    alerts.update(active_alerts(env, job))
    # The advisor's info alert is about the job's configuration, not its checkpoints: the e2e job
    # runs with 100 tolerable failures and no retention, a real risk it must name (issue 29).
    config_risk = {a for a in alerts if a[0] == "FlinkCheckpointConfigRisk"}
    unexpected = alerts - config_risk
    evidence = ""
    if unexpected:
        texts = {n: described.get(n, "") for n, _ in unexpected}
        evidence = f"; their descriptions {texts}; {unexplained_deviations(env, job)}"
    check("healthy: no alert of the job pending or firing at any second", not unexpected,
          f"sampled every second for {env.a.seconds} s: {sorted(unexpected) or 'none'}"
          f" (besides the configuration's: {sorted(config_risk) or 'none'}){evidence}")
    counts_match("healthy", m, c, job)
    durations = [h["end_to_end_duration"] for h in seen.values() if h["status"] == "COMPLETED" and not h.get("is_savepoint")]
    count = one(m, "flink_checkpoint_duration_seconds_count", job_id=job)
    p95 = one(m, "flink_checkpoint_duration_seconds", job_id=job, quantile="0.95")
    want = nearest_rank(durations, 0.95) / 1000.0
    check("healthy: every completed checkpoint recorded once", count == len(durations),
          f"summary count {count:.0f}, distinct completed seen by this script {len(durations)}")
    check("healthy: P95 equals the nearest-rank P95 of Flink's history", abs(p95 - want) <= want * 0.01 + 1e-9,
          f"exported {p95:.3f} s, nearest-rank {want:.3f} s of {len(durations)} checkpoints "
          f"(Flink's own summary p95 {flink_summary_p95(env, job) if c else None})")
    cancel_and_check(env, "healthy", job)


def failing(env, scenario, kind, message):
    job = env.flink("submit", env.a.version, scenario)
    seen = watch(env, job, env.a.seconds)
    m, c = settle(env, job, seen)
    counts_match(scenario, m, c, job)
    # Checkpoints keep failing while we look: compare at a moment where both sides agree on
    # the ids Flink still lists (the history keeps the last 10).
    for _ in range(20):
        for h in env.checkpoints(job).get("history", []):
            if h.get("status") in ("COMPLETED", "FAILED"):
                seen.setdefault(h["id"], h)
        rest = sorted(i for i, h in seen.items() if h["status"] == "FAILED" and h.get("failure_message") == message)
        time.sleep(1.5)  # the tailer polls files every second
        logs = one(env.metrics(), "flink_checkpoint_log_events_total", job_id=job, kind=kind, source="log") or 0
        if rest and logs == len(rest):
            break
    check(f"{scenario}: {kind} seen in REST and in the logs", len(rest) > 0 and logs == len(rest),
          f"REST failure_message {message!r} for ids {rest}; log events kind={kind}: {logs:.0f}")
    return job, rest


def alert_in_alertmanager(env, job, name, want_active):
    q = urllib.parse.quote(f'alertname="{name}"')
    for _ in range(60):
        alerts = get_json(f"{env.a.alertmanager}/api/v2/alerts?filter={q}")
        mine = [a for a in alerts if a["labels"].get("job_id") == job and a["status"]["state"] == "active"]
        if bool(mine) == want_active:
            return mine
        time.sleep(1)
    return None


def expired(env):
    job, _ = failing(env, "expired", "expired", "Checkpoint expired before completing.")
    fired = alert_in_alertmanager(env, job, "FlinkCheckpointFailing", True)
    check("expired: the failing-checkpoints alert reaches Alertmanager", bool(fired),
          f"{fired[0]['labels']['alertname']} for job {job}, summary: {fired[0]['annotations']['summary']!r}" if fired else "not found")
    diagnose_expired(env, job)
    cancel_and_check(env, "expired", job)
    resolved = alert_in_alertmanager(env, job, "FlinkCheckpointFailing", False)
    check("expired: the alert resolves once the job no longer fails", resolved is not None,
          "no active alert for the job in Alertmanager after cancel" if resolved is not None else "still active")


def declined(env):
    job, rest = failing(env, "declined", "declined", "Asynchronous task checkpoint failed.")
    log_dir = env.flink("log-dir", env.a.version)
    jm = [os.path.join(log_dir, f) for f in os.listdir(log_dir) if "standalonesession" in f and f.endswith(".log")]
    run = subprocess.run([env.a.bin, "scan-logs", "--format", "json", *jm], capture_output=True, text=True)
    # scan-logs exits 1 when it found failed checkpoints (as here), 2 or 3 when it could not read.
    if run.returncode not in (0, 1):
        raise subprocess.CalledProcessError(run.returncode, run.args, run.stdout, run.stderr)
    scan = json.loads(run.stdout)
    tasks = set()
    for cp in scan.get("checkpoints", []):
        if cp.get("job_id") == job:
            for e in cp.get("events", []):
                if e.get("kind") == "declined" and e.get("task"):
                    tasks.add(e["task"])
    # The task is the operator's name (as Flink's vertex names show it), or a vertex id where
    # the log gives nothing better.
    names = {v["id"]: v["name"] for v in get_json(f"{env.a.rest}/jobs/{job}")["vertices"]}
    def vertex_of(t):
        return names.get(t.split("_")[0]) or next((n for n in names.values() if t in n), None)
    named = sorted(f"{t} (vertex '{vertex_of(t)}')" for t in tasks)
    check("declined: the log names the task that declined",
          bool(tasks) and all(vertex_of(t) for t in tasks), f"declining task(s): {named[:2]}")
    cancel_and_check(env, "declined", job)


def run_diagnose(env, job, config=None):
    """`checkpoint-sentinel diagnose` against Flink's REST, as text and as JSON; prints the text
    indented (it goes into the CI log). Returns (text exit code, text, JSON exit code, report).
    With `config`, the daemon's file (its cluster and its rules) instead of --url."""
    where = ["--config", config] if config else ["--url", env.a.rest]
    cmd = [env.a.bin, "diagnose", *where, "--job", job]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    as_json = subprocess.run(cmd + ["--format", "json"], capture_output=True, text=True, timeout=120)
    print(f"    $ checkpoint-sentinel diagnose {' '.join(where)} --job {job}    (exit {text.returncode})")
    for line in (text.stdout + text.stderr).rstrip().splitlines():
        print(f"    {line}".rstrip())
    report = json.loads(as_json.stdout) if as_json.returncode != 2 and as_json.stdout.strip() else {}
    return text.returncode, text.stdout, as_json.returncode, (report.get("jobs") or [{}])[0]


def diagnose_expired(env, job):
    code, text, json_code, report = run_diagnose(env, job)
    classes = [c["class"] for c in report.get("classes", [])]
    check("expired: diagnose run live says unhealthy, class timeout",
          code == 1 and json_code == 1 and report.get("verdict") == "unhealthy"
          and classes[:1] == ["timeout"] and "Failure class: timeout" in text,
          f"exit {code} (text) / {json_code} (json), verdict {report.get('verdict')}, classes {classes}, "
          f"{len(report.get('failures', []))} failure(s) listed")


def subtask_details(env, job, vertices, cid, cache):
    """Flink's own per-subtask statistics of checkpoint `cid`: {vertex name: [subtask]} (cached:
    a finished checkpoint's details do not change)."""
    if cid not in cache:
        cache[cid] = {v["name"]: get_json(f"{env.a.rest}/jobs/{job}/checkpoints/details/{cid}/subtasks/{v['id']}")["subtasks"]
                      for v in vertices}
    return cache[cid]


def alignment_of(st):
    return (st.get("alignment") or {}).get("duration")


def backpressure(env):
    job = env.flink("submit", env.a.version, "backpressure")
    seen = watch(env, job, env.a.seconds)
    m, c = settle(env, job, seen)
    counts_match("backpressure", m, c, job)
    vertices = get_json(f"{env.a.rest}/jobs/{job}")["vertices"]
    tm_of = {(v["name"], st["subtask"]): st.get("taskmanager-id")
             for v in vertices for st in get_json(f"{env.a.rest}/jobs/{job}/vertices/{v['id']}")["subtasks"]}
    details = {}

    # One consistent view of the daemon: /metrics, the JSON API, /metrics again with the same
    # alignment count, and every completed checkpoint of the API in the summary.
    for _ in range(20):
        m = env.metrics()
        api = env.daemon_job(job)
        again = env.metrics()
        count = one(m, "flink_checkpoint_alignment_duration_seconds_count", job_id=job)
        completed = [cp for cp in api["checkpoints"] if cp["outcome"] == "completed" and cp["kind"] != "savepoint"]
        if count == one(again, "flink_checkpoint_alignment_duration_seconds_count", job_id=job) == len(completed) and completed:
            break
        time.sleep(1)
    ids = [cp["id"] for cp in completed]
    flink = {cid: subtask_details(env, job, vertices, cid, details) for cid in ids}

    # Flink's truth per checkpoint: the longest alignment of any subtask, and the subtask that
    # took longest end to end (it acknowledged last; ties are all right).
    longest = {cid: max(alignment_of(st) or 0 for sts in d.values() for st in sts) for cid, d in flink.items()}
    differ = [(cp["id"], (cp["phases_ms"] or {}).get("alignment"), longest[cp["id"]]) for cp in completed
              if (cp["phases_ms"] or {}).get("alignment") != longest[cp["id"]]]
    check("backpressure: every checkpoint's longest alignment equals Flink's subtask details",
          not differ and len(ids) > 0,
          f"{len(ids)} checkpoints {ids[0] if ids else '-'}..{ids[-1] if ids else '-'}, "
          f"longest alignment per checkpoint {min(longest.values(), default=0)}..{max(longest.values(), default=0)} ms; "
          f"differing (id, daemon, Flink): {differ}")

    p95 = one(m, "flink_checkpoint_alignment_duration_seconds", job_id=job, quantile="0.95")
    want = nearest_rank(list(longest.values()), 0.95) / 1000.0 if longest else float("nan")
    e2e = one(m, "flink_checkpoint_duration_seconds", job_id=job, quantile="0.95")
    snap = max(one(m, f"flink_checkpoint_{p}_duration_seconds", job_id=job, quantile="0.95") or 0 for p in ("sync", "async"))
    # HDR keeps two significant figures: exact below 256 ms, else the bucket's top, at most 1 % above.
    check("backpressure: alignment is the slow phase; its P95 equals the nearest-rank P95 of Flink's per-checkpoint longest",
          p95 is not None and p95 > 0 and abs(p95 - want) <= want * 0.01 + 1e-9 and p95 > snap,
          f"exported {p95} s, nearest-rank {want:.3f} s over {len(longest)} checkpoints (within HDR precision, 1 %); "
          f"end-to-end P95 {e2e} s, sync/async P95 at most {snap} s")

    values = [alignment_of(st) for d in flink.values() for st in d.get("stateful-map", []) if alignment_of(st) is not None]
    op_p95 = one(m, "flink_operator_checkpoint_alignment_duration_seconds", job_id=job, operator="stateful-map", quantile="0.95")
    op_count = one(m, "flink_operator_checkpoint_alignment_duration_seconds_count", job_id=job, operator="stateful-map")
    op_want = nearest_rank(values, 0.95) / 1000.0 if values else float("nan")
    check("backpressure: stateful-map's alignment P95 equals the nearest-rank P95 of its subtasks' alignments",
          op_p95 is not None and op_count == len(values) and abs(op_p95 - op_want) <= op_want * 0.01 + 1e-9,
          f"exported {op_p95} s over {op_count or 0:.0f} subtask values, nearest-rank {op_want:.3f} s over {len(values)} (within 1 %)")

    wrong = []
    for cp in completed:
        d = flink[cp["id"]]
        slowest = max(st["end_to_end_duration"] for sts in d.values() for st in sts)
        tied = {(name, st["index"]) for name, sts in d.items() for st in sts if st["end_to_end_duration"] == slowest}
        s = cp["slowest_subtask"] or {}
        # The daemon words it "taskmanager-id (endpoint)" from the same /vertices endpoint.
        tm = (s.get("taskmanager") or "").split(" ")[0]
        if (s.get("operator"), s.get("subtask")) not in tied or s.get("end_to_end_ms") != slowest \
                or tm != tm_of.get((s.get("operator"), s.get("subtask"))):
            wrong.append((cp["id"], s, sorted(tied), slowest))
    last = completed[-1]["slowest_subtask"] if completed else {}
    where = tm_of.get((last.get("operator"), last.get("subtask"))) if last else None
    check("backpressure: the daemon's slowest subtask is Flink's slowest, for every checkpoint",
          not wrong and len(completed) > 0,
          f"checkpoint {completed[-1]['id'] if completed else '-'}: {last.get('operator')} #{last.get('subtask')} "
          f"{last.get('end_to_end_ms')} ms, on TaskManager {where} (Flink's /vertices; daemon's taskmanager "
          f"{last.get('taskmanager')}); " + (f"{len(wrong)} mismatch(es), e.g. {wrong[0]}" if wrong else "no mismatch"))

    code, text, json_code, report = run_diagnose(env, job)
    classes = [c["class"] for c in report.get("classes", [])]
    # Flink's hottest subtask over the checkpoints diagnose looked at in detail (its newest 10
    # finished ones): the longest alignment of an acknowledged subtask.
    looked = [r["id"] for r in report.get("recent", []) if r["status"] != "IN_PROGRESS"][:10]
    hot = max(((alignment_of(st) or 0, name, st["index"])
               for cid in looked for name, sts in subtask_details(env, job, vertices, cid, details).items()
               for st in sts if st.get("status") == "completed"),
              default=(0, None, None))
    top = (report.get("top_alignment") or [{}])[0]
    named = (top.get("operator"), top.get("subtask"), top.get("value_ms"), (top.get("location") or {}).get("taskmanager_id"))
    check("backpressure: diagnose run live says at risk, class blocking, and names the hot subtask",
          code == 3 and json_code == 3 and report.get("verdict") == "at_risk" and classes[:1] == ["blocking"]
          and hot[1] == "stateful-map" and named == (hot[1], hot[2], hot[0], tm_of.get((hot[1], hot[2])))
          and f"Top alignment:\n  stateful-map #{hot[2]}: " in text and "Failure class: blocking" in text,
          f"exit {code} (text) / {json_code} (json), verdict {report.get('verdict')}, classes {classes}; "
          f"top alignment {named[0]} #{named[1]} {named[2]} ms on {named[3]}; Flink's longest alignment over "
          f"checkpoints {looked[-1] if looked else '-'}..{looked[0] if looked else '-'}: {hot[1]} #{hot[2]} {hot[0]} ms "
          f"on {tm_of.get((hot[1], hot[2]))}")
    cancel_and_check(env, "backpressure", job)


# ---------------------------------------------------------------- evidence from the TaskManagers
BLOCKING_FRAME = "sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread"
BLOCKING_METHOD = "holdTheThread"

# The lowest Flink version each evidence scenario applies to (and why); older versions are skipped.
APPLIES_FROM = {
    # /taskmanagers/:tm/thread-dump and the vertex flame graph (1.13+); the job compiles for 1.14+
    "blocked": (1, 14),
    # Status.JVM.GarbageCollector.* and /taskmanagers/metrics exist in every version; the job: 1.14+
    "gc": (1, 14),
    # per-subtask state sizes in /checkpoints/details/:id/subtasks/:vid; the job: 1.14+
    "skew": (1, 14),
}


def applies(scenario, version):
    want = APPLIES_FROM.get(scenario)
    have = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    return want is None or have >= want


def vertex_named(env, job, name):
    for _ in range(30):
        vs = get_json(f"{env.a.rest}/jobs/{job}").get("vertices", [])
        v = next((v for v in vs if v["name"] == name), None)
        if v and v.get("status") == "RUNNING":
            return v
        time.sleep(1)
    raise RuntimeError(f"vertex {name} of job {job} not running after 30 s")


def taskmanager_of(env, job, vertex, index):
    for st in get_json(f"{env.a.rest}/jobs/{job}/vertices/{vertex['id']}")["subtasks"]:
        if st["subtask"] == index:
            return st.get("taskmanager-id")
    return None


def pending_on(env, job, vertex, index):
    """The id of the checkpoint in progress whose subtask `index` of `vertex` has not acknowledged, or None."""
    for h in env.checkpoints(job).get("history", []):
        if h.get("status") != "IN_PROGRESS":
            continue
        try:
            sts = get_json(f"{env.a.rest}/jobs/{job}/checkpoints/details/{h['id']}/subtasks/{vertex['id']}")["subtasks"]
        except Exception:
            continue
        if any(st["index"] == index and st.get("status") != "completed" for st in sts):
            return h["id"]
    return None


def flink_thread(env, tm, thread_prefix):
    """Flink's own thread dump of TaskManager `tm`: (stack text of the first thread whose name starts
    with thread_prefix, milliseconds the dump took)."""
    started = time.time()
    dump = get_json(f"{env.a.rest}/taskmanagers/{urllib.parse.quote(tm, safe='')}/thread-dump")
    took = (time.time() - started) * 1000
    for t in dump.get("threadInfos", []):
        if t.get("threadName", "").startswith(thread_prefix):
            return t.get("stringifiedThreadInfo", ""), took
    return "", took


def first_user_frame(stack):
    for line in stack.splitlines():
        line = line.strip()
        if line.startswith("at "):
            frame = line[3:].split("/")[-1]
            if not frame.startswith(("java.", "jdk.", "sun.", "org.apache.flink.")):
                return frame
    return None


def alert_matching(env, job, predicate, seconds):
    """Waits up to `seconds` for an active alert of `job` at Alertmanager that satisfies predicate."""
    end = time.time() + seconds
    seen = []
    while time.time() < end:
        alerts = get_json(f"{env.a.alertmanager}/api/v2/alerts")
        seen = [a for a in alerts if a["labels"].get("job_id") == job and a["status"]["state"] == "active"]
        hit = next((a for a in seen if predicate(a)), None)
        if hit:
            return hit, seen
        time.sleep(1)
    return None, seen


def blocked(env):
    job = env.flink("submit", env.a.version, "blocked")
    vertex = vertex_named(env, job, "blocking-map")
    tm = taskmanager_of(env, job, vertex, 0)
    # Flink's truth: a checkpoint pending on blocking-map #0 while its thread sits in holdTheThread.
    truth, cid, took = None, None, None
    end = time.time() + 90
    while time.time() < end and not truth:
        cid = pending_on(env, job, vertex, 0)
        if cid is not None:
            stack, took = flink_thread(env, tm, f"blocking-map (1/{vertex['parallelism']})")
            if first_user_frame(stack) and BLOCKING_FRAME in first_user_frame(stack):
                truth = stack
        if not truth:
            time.sleep(1)
    frame = first_user_frame(truth or "")
    check("blocked: Flink's thread dump shows blocking-map #0 held in the job's frame while a checkpoint waits on it",
          truth is not None,
          f"checkpoint {cid} pending on blocking-map #0 on {tm}; first frame outside Flink and the JDK: {frame}; "
          f"the dump took {took or 0:.0f} ms" if truth else "not seen within 90 s")
    if truth:
        # diagnose looks when a checkpoint is pending; give it one well on its way to the timeout
        trig = next((h.get("trigger_timestamp") for h in env.checkpoints(job).get("history", []) if h["id"] == cid), None)
        if trig:
            time.sleep(max(0.0, 5 - (time.time() * 1000 - trig) / 1000))
        diag_code, text, _, report = run_diagnose(env, job)
        check("blocked: diagnose run live names the blocking method", BLOCKING_METHOD in text,
              f"exit {diag_code}; " + next((l.strip() for l in text.splitlines() if BLOCKING_METHOD in l),
                                           "no line names " + BLOCKING_METHOD))
    hit, seen = alert_matching(env, job, lambda a: a["labels"].get("alertname") == "FlinkCheckpointBlockedByUserCode"
                               and "BlockingMap" in a["annotations"].get("description", "")
                               and BLOCKING_METHOD in a["annotations"].get("description", ""), 120)
    check("blocked: FlinkCheckpointBlockedByUserCode at Alertmanager names the blocking class and method", hit is not None,
          f"description: {hit['annotations'].get('description')!r}" if hit else
          f"active alerts of the job: {sorted({a['labels'].get('alertname') for a in seen}) or 'none'}")
    api = env.daemon_job(job)
    named = [cp for cp in api.get("checkpoints", []) if BLOCKING_METHOD in json.dumps(cp.get("blocked_thread"))]
    check("blocked: the API's checkpoints carry blocked_thread naming the frame", bool(named),
          f"checkpoint {named[-1].get('id')}: blocked_thread {json.dumps(named[-1].get('blocked_thread'))[:300]}" if named
          else f"{len(api.get('checkpoints', []))} checkpoints, none with blocked_thread naming {BLOCKING_METHOD}")
    cancel_and_check(env, "blocked", job)


def gc_share(env, tm, seconds):
    """Flink's own GC share of TaskManager `tm` over `seconds`: (share 0..1, heap used, heap max)
    from the Status.JVM.GarbageCollector.<collector>.Time counters (ms)."""
    def read():
        q = urllib.parse.quote(tm, safe="")
        names = [m["id"] for m in get_json(f"{env.a.rest}/taskmanagers/{q}/metrics")
                 if re.match(r"Status\.JVM\.GarbageCollector\.[^.]+\.Time$", m["id"]) and ".All." not in m["id"]]
        names += ["Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.Heap.Max"]
        vals = {m["id"]: float(m["value"]) for m in
                get_json(f"{env.a.rest}/taskmanagers/{q}/metrics?get=" + ",".join(names))}
        gc = sum(v for k, v in vals.items() if k.endswith(".Time"))
        return time.time(), gc, vals.get("Status.JVM.Memory.Heap.Used"), vals.get("Status.JVM.Memory.Heap.Max")
    t0, gc0, _, _ = read()
    time.sleep(seconds)
    t1, gc1, used, mx = read()
    return (gc1 - gc0) / 1000 / (t1 - t0), used, mx


def gc(env):
    job = env.flink("submit", env.a.version, "gc")
    vertex = vertex_named(env, job, "stateful-map")
    tm = taskmanager_of(env, job, vertex, 0)
    time.sleep(10)  # the retained set builds up, then Flink's metric fetcher (10 s) catches up
    # Over the daemon's own window (the last minute), ending when the daemon is scraped below:
    # Flink's values are up to 10 s stale at either end, so a shorter window reads over 100 %.
    share, used, mx = gc_share(env, tm, 60)
    ratios = samples(env.metrics(), "flink_taskmanager_gc_time_ratio")
    seen = watch(env, job, 10)
    timeout_ms = get_json(f"{env.a.rest}/jobs/{job}/checkpoints/config").get("timeout", 0)
    # Slow as the daemon means it: at least half the timeout (evidence is kept for those and failures).
    failed = sorted(i for i, h in seen.items() if h["status"] == "FAILED"
                    or (h.get("end_to_end_duration") or 0) >= timeout_ms / 2)
    check("gc: Flink's counters show the TaskManager mostly in GC and checkpoints failing or slow",
          share >= 0.3 and bool(failed),
          f"{tm}: GC {share * 100:.0f} % of 60 s, heap {used / 2**20:.0f} of {mx / 2**20:.0f} MiB; "
          f"failed or slow (>= {timeout_ms / 2000:.1f} s) checkpoints seen: {failed}")
    check("gc: flink_taskmanager_gc_time_ratio is exported, near Flink's share",
          bool(ratios) and abs(max(ratios) - min(share, 1.0)) <= 0.3,
          f"exported {ratios}, Flink's GC share over the same 60 s {share:.2f}")
    with_gc = []
    for _ in range(30):
        api = env.daemon_job(job)
        bad = [cp for cp in api.get("checkpoints", [])
               if cp.get("outcome") != "completed" or (cp.get("elapsed_ms") or 0) >= timeout_ms / 2]
        with_gc = [cp for cp in bad if re.search(r"GC", ((cp.get("evidence") or {}).get("text") or ""))
                   and re.search(r"\d+(\.\d+)? ?%", (cp.get("evidence") or {}).get("text") or "")]
        if with_gc:
            break
        time.sleep(2)
    text = (with_gc[-1].get("evidence") or {}).get("text", "") if with_gc else ""
    pct = [float(x) for x in re.findall(r"GC (\d+(?:\.\d+)?) ?%", text)]
    # The evidence's GC share is of the minute before that checkpoint, Flink's above of a later
    # 30 s: they need not agree closely, but the evidence must show the pressure (25 %: the
    # threshold of FlinkTaskManagerGcPressure).
    check("gc: failed or slow checkpoints carry the GC share of their culprit's TaskManager",
          bool(with_gc) and bool(pct) and pct[0] >= 25,
          f"checkpoint {with_gc[-1].get('id')}: {text!r}; Flink's GC share {share * 100:.0f} %" if with_gc
          else "no failed/slow checkpoint with evidence.text naming GC and a percent")
    cancel_and_check(env, "gc", job)


def skew_mentions(api):
    """Every part of the daemon's job document about skew: the values of keys naming skew, and the
    strings mentioning it, each as JSON text."""
    out = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if "skew" in k.lower():
                    out.append(json.dumps(v))
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and "skew" in node.lower().replace("sentinel-e2e-skew", ""):  # not the job's name
            out.append(node)
    walk(api)
    return out


def skew(env):
    job = env.flink("submit", env.a.version, "skew")
    vertex = vertex_named(env, job, "stateful-map")
    watch(env, job, env.a.seconds)
    cps = env.checkpoints(job)
    done = [h for h in cps.get("history", []) if h.get("status") == "COMPLETED"]
    sizes = []
    if done:
        sts = get_json(f"{env.a.rest}/jobs/{job}/checkpoints/details/{done[0]['id']}/subtasks/{vertex['id']}")["subtasks"]
        sizes = [st.get("state_size") or 0 for st in sorted(sts, key=lambda st: st["index"])]
    median = statistics.median(sizes) if sizes else 0
    flink_ratio = max(sizes) / median if median else 0
    check("skew: Flink's per-subtask state sizes of stateful-map are skewed onto #0",
          flink_ratio > 3 and sizes.index(max(sizes)) == 0,
          f"checkpoint {done[0]['id'] if done else '-'}: state sizes {sizes}, max/median {flink_ratio:.1f}")
    m = env.metrics()
    ratio = one(m, "flink_checkpoint_state_skew_ratio", job_id=job, operator="stateful-map")
    check("skew: flink_checkpoint_state_skew_ratio{operator=stateful-map} is above 3 and near Flink's",
          ratio is not None and ratio > 3 and 0.5 <= ratio / flink_ratio <= 2,
          f"exported {ratio}, Flink's max/median {flink_ratio:.1f}")
    said = skew_mentions(env.daemon_job(job))
    named = [t for t in said if "stateful-map #0" in t or re.search(r'"stateful-map".*"(hot_)?subtask": 0\b', t)]
    check("skew: the API names the hot subtask", bool(named),
          named[0][:300] if named else f"what the job's API says about skew: {said[:3] or 'nothing'}")
    hit, seen = alert_matching(env, job, lambda a: "skew" in a["labels"].get("alertname", "").lower()
                               and "#0" in json.dumps(a["annotations"]), 30)
    check("skew: a skew alert at Alertmanager names the hot subtask", hit is not None,
          f"{hit['labels']['alertname']}: {hit['annotations'].get('description')!r}" if hit else
          f"active alerts of the job: {sorted({a['labels'].get('alertname') for a in seen}) or 'none'}")
    cancel_and_check(env, "skew", job)


def failover(env):
    job = env.flink("submit", env.a.version, "healthy")
    watch(env, job, 15)
    before = {t["id"] for t in get_json(f"{env.a.rest}/taskmanagers")["taskmanagers"]}
    tm = env.flink("tm-pid", env.a.version)
    subprocess.run(["kill", "-9", tm], check=True)
    # `start` keeps a TaskManager it finds alive: wait until the killed one is gone (on a loaded
    # machine a JVM takes a while to die), or no new TaskManager is started and the job waits
    # for slots for ever.
    wait_gone(int(tm))
    env.flink("start", env.a.version)
    # `start` counts the killed TaskManager too until the JobManager's heartbeat drops it: wait
    # for the new one to register, or the scenarios after this one find no slots.
    for _ in range(90):
        if {t["id"] for t in get_json(f"{env.a.rest}/taskmanagers")["taskmanagers"]} - before:
            break
        time.sleep(1)
    restored = None
    for _ in range(60):
        c = env.checkpoints(job)["counts"]
        m = env.metrics()
        restored = one(m, "flink_checkpoint_restores_total", job_id=job)
        if c.get("restored", 0) >= 1 and restored and restored >= 1:
            break
        time.sleep(1)
    events = one(env.metrics(), "flink_checkpoint_log_events_total", job_id=job, kind="restored", source="log") or 0
    check("failover: killing the TaskManager shows up as a restore", bool(restored) and restored >= 1 and events >= 1,
          f"Flink counts.restored={c.get('restored')}, flink_checkpoint_restores_total={restored}, log restore events={events:.0f}")
    restore_time(env, job)
    env.flink("cancel", env.a.version, job)


def flink_restore(env, job):
    """Flink's own account of the job's latest restore: (restore_timestamp, checkpoint id, when the
    last subtask entered RUNNING or None while one is not RUNNING, that subtask, the job's RESTARTING
    time), from /checkpoints, /jobs/<id> and every vertex's /subtasktimes."""
    r = (env.checkpoints(job).get("latest") or {}).get("restored") or {}
    details = get_json(f"{env.a.rest}/jobs/{job}")
    last, running = None, True
    for v in details["vertices"]:
        for st in get_json(f"{env.a.rest}/jobs/{job}/vertices/{v['id']}/subtasktimes")["subtasks"]:
            ts = st["timestamps"]
            current = max(ts, key=lambda k: ts[k])
            running &= current in ("RUNNING", "FINISHED") and ts.get("RUNNING", 0) > 0
            if last is None or ts.get("RUNNING", 0) > last[0]:
                last = (ts.get("RUNNING", 0), v["name"], st["subtask"])
    end = last if running and last and last[0] >= r.get("restore_timestamp", 0) else None
    return r.get("restore_timestamp"), r.get("id"), end, details["timestamps"].get("RESTARTING", 0)


def restore_time(env, job, scenario="failover", source="checkpoint"):
    """The daemon's restore time (restore_timestamp until the last subtask RUNNING) equals Flink's
    own timestamps, and the metrics and the job page say the same."""
    view, flink = {}, (None, None, None, 0)
    for _ in range(60):
        try:
            flink = flink_restore(env, job)
            view = env.daemon_job(job).get("latest_restore") or {}
        except urllib.error.HTTPError as e:  # a job just submitted: not known everywhere yet
            print(f"    (not yet: {e.filename}: {e})", flush=True)
            time.sleep(1)
            continue
        if flink[2] and view.get("status") == "measured" and view.get("at_ms") == flink[0]:
            break
        time.sleep(1)
    at, cid, end, restarting = flink
    want = end[0] - at if end else None
    m = env.metrics()
    gauge = one(m, "flink_job_last_restore_duration_seconds", job_id=job)
    counted = one(m, "flink_job_restores_total", job_id=job, **{"from": source})
    check(f"{scenario}: the restore is timed from Flink's restore_timestamp to the last subtask RUNNING",
          want is not None and view.get("duration_ms") == want and view.get("checkpoint_id") == cid
          and gauge is not None and abs(gauge - want / 1000) < 0.0005 and counted == 1,
          f"Flink: restored checkpoint {cid} at {at}, last subtask RUNNING at {end and end[0]} "
          f"({end and end[1]} #{end and end[2]}) = {want} ms, "
          f"{f'RESTARTING at {restarting} (down {end and end[0] - restarting} ms)' if restarting else 'never RESTARTING'}; daemon: {view.get('duration_ms')} ms from checkpoint "
          f"{view.get('checkpoint_id')}, downtime {view.get('downtime_ms')} ms, last {view.get('last_subtask')}; "
          f"flink_job_last_restore_duration_seconds {gauge}, flink_job_restores_total{{from={source}}} {counted}")
    print(f"    measured restore time: {view.get('duration_ms')} ms ({view.get('text')})", flush=True)
    dom = page(env, f"#/jobs/{env.a.cluster}/{job}")
    line = re.search(r'<p class="small" id="restore">(.*?)</p>', dom, re.S)
    text = html.unescape(re.sub(r"<[^>]+>", "", line.group(1))) if line else ""
    check(f"{scenario}: the job page shows the restore with the daemon's numbers",
          bool(line) and (view.get("text") or "?") in text,
          f"page: {text[:200]!r}")


def restore_savepoint(env):
    """A job cancelled with a savepoint and submitted again from it: the new job's start is a
    restore from a savepoint, counted once (from="savepoint") and timed against Flink's own
    timestamps; no downtime (it never was RESTARTING)."""
    job = env.flink("submit", env.a.version, "healthy")
    watch(env, job, 10)
    trigger = post_json(f"{env.a.rest}/jobs/{job}/savepoints", {"cancel-job": True})["request-id"]
    location = None
    r = {}
    for _ in range(60):
        try:
            r = get_json(f"{env.a.rest}/jobs/{job}/savepoints/{trigger}")
        except urllib.error.HTTPError as e:
            print(f"    (savepoint status not yet: {e})", flush=True)
            time.sleep(1)
            continue
        if r.get("status", {}).get("id") == "COMPLETED":
            location = (r.get("operation") or {}).get("location")
            break
        time.sleep(1)
    if not location:
        raise RuntimeError(f"the savepoint of {job} did not complete: {r}")
    os.environ["SENTINEL_E2E_SAVEPOINT_PATH"] = location
    try:
        again = env.flink("submit", env.a.version, "healthy")
    finally:
        del os.environ["SENTINEL_E2E_SAVEPOINT_PATH"]
    restore_time(env, again, "restore_savepoint", "savepoint")
    view = env.daemon_job(again).get("latest_restore") or {}
    check("restore_savepoint: the restore names the savepoint it started from, without downtime",
          view.get("is_savepoint") is True and view.get("external_path") == location and view.get("downtime_ms") is None,
          f"savepoint {location}; daemon: is_savepoint {view.get('is_savepoint')}, external_path "
          f"{view.get('external_path')}, downtime_ms {view.get('downtime_ms')}")
    env.flink("cancel", env.a.version, again)


def page(env, fragment):
    """The DOM of the status page at `fragment`, rendered by headless Chromium (as e2e/ui_check.sh)."""
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [os.environ.get("CHROMIUM", "chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=8000", "--dump-dom", f"{env.a.daemon}/{fragment}"],
            capture_output=True, text=True, timeout=120)
    # The rendered DOM only: the page's own script holds the same markup as templates.
    return re.sub(r"<script\b.*?</script>", "", out.stdout, flags=re.S)


def timeline_bars(dom):
    """The checkpoints the page's timeline draws (one <g><title>#id … per bar) and its history note."""
    svg = re.search(r'aria-label="checkpoint timeline">(.*?)</svg>', dom, re.S)
    ids = [int(i) for i in re.findall(r"<g><title>#(\d+) ", svg.group(1))] if svg else []
    note = re.search(r'id="history-note">(.*?)</p>', dom, re.S)
    return ids, (html.unescape(note.group(1)) if note else None)


def wait_gone(pid, seconds=60):
    """Waits until process `pid` is gone or a zombie."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):
            return
        time.sleep(0.05)


def restart_daemon(env):
    """kill -9 of the daemon run.sh started (or of the last restart), then the same command again."""
    pid = int(open(env.a.daemon_pid_file).read())
    os.kill(pid, signal.SIGKILL)
    # Wait until every thread is gone or a zombie (run.sh's shell reaps the process only at the
    # end). The main thread turns zombie first; a thread inside an fsync lives on until the
    # write returns, holding the port and the store's lock (up to 60 s on a busy disk).
    def alive_threads():
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            return 0
        alive = 0
        for t in tasks:
            try:
                if open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive += 1
            except (FileNotFoundError, ProcessLookupError):
                pass
        return alive
    for _ in range(1200):
        if alive_threads() == 0:
            break
        time.sleep(0.05)
    log = open(os.path.join(os.path.dirname(env.a.daemon_config), "daemon.log"), "a")
    p = subprocess.Popen([env.a.bin, "run", "--config", env.a.daemon_config], stdout=log, stderr=log,
                         start_new_session=True)
    with open(env.a.daemon_pid_file, "w") as f:
        f.write(str(p.pid))
    for _ in range(60):
        try:
            get(f"{env.a.daemon}/readyz", timeout=2)
            return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("the restarted daemon does not answer /readyz")


def store(env):
    """Many checkpoints with Flink's history of 10, the daemon killed (-9) and restarted twice:
    the checkpoint store holds every checkpoint Flink finished exactly once."""
    # A checkpoint a second: a restart loses none as long as the daemon is back, and polled,
    # before web.checkpoints.history checkpoints went by since its last state write
    # (persist_interval 1 s in run.sh's config; with 5 s and 500 ms checkpoints, two went by).
    job = env.flink("submit", env.a.version, "healthy", "--interval-ms", "1000")
    seen = {}
    total = max(60, env.a.store_seconds)
    for part in range(3):
        seen.update(watch(env, job, total / 3))
        if part < 2:
            restart_daemon(env)
    env.flink("cancel", env.a.version, job)
    # Longer than Flink's REST cache (3 s): its first answers after the cancel are the snapshot
    # from before it, without the checkpoints that completed just before the cancel (seen live:
    # 210 listed at 1 s, 212 in the end).
    seen.update(watch(env, job, 5))
    want = sorted(seen)
    got = []
    for _ in range(30):
        r = get_json(f"{env.a.daemon}/api/v1/jobs/{env.a.cluster}/{job}/checkpoints?limit=10000")
        got = [c["id"] for c in r["checkpoints"]]
        if len(got) >= len(want):
            break
        time.sleep(1)
    dupes = len(got) - len(set(got))
    check("store: every checkpoint Flink finished is in the store exactly once across two kill -9 restarts",
          sorted(got) == want and dupes == 0,
          f"Flink finished {len(want)} (ids {want[:1]}..{want[-1:]}), the store returned {len(got)} "
          f"({dupes} duplicates, missing {sorted(set(want) - set(got))[:10]}, extra {sorted(set(got) - set(want))[:10]})")
    m = env.metrics()
    unobserved = {s: one(m, "checkpoint_sentinel_checkpoints_unobserved_total", job_id=job, status=s) or 0
                  for s in ("completed", "failed")}
    # Flink counts a trigger that failed before the checkpoint existed (at job start: "not all
    # required tasks are currently running") as failed without a history entry: no source has it.
    counts = env.checkpoints(job)["counts"]
    without_history = counts["failed"] - sum(1 for h in seen.values() if h["status"] == "FAILED")
    check("store: no checkpoint went by unobserved during the restarts",
          unobserved["completed"] == 0 and unobserved["failed"] == without_history,
          f"checkpoint_sentinel_checkpoints_unobserved_total {unobserved}; Flink counted {without_history} "
          f"failed checkpoint(s) that never had a history entry")
    # The page, in headless Chromium after the restarts: the 24 h range draws the store's records,
    # every one the API returned, far beyond Flink's history and the in-memory window; the
    # default (recent) view draws only the in-memory window (its bound is the negative control:
    # a page that drew that window for the 24 h range fails the first check).
    recent_ids, recent_note = timeline_bars(page(env, f"#/jobs/{env.a.cluster}/{job}"))
    day_ids, day_note = timeline_bars(page(env, f"#/jobs/{env.a.cluster}/{job}/24h"))
    stored = sorted(c["id"] for c in get_json(
        f"{env.a.daemon}/api/v1/jobs/{env.a.cluster}/{job}/checkpoints?limit=10000")["checkpoints"])
    check("store: the job page's 24 h timeline shows the stored history, beyond the in-memory window",
          sorted(day_ids) == stored and len(day_ids) > 32 >= len(recent_ids)
          and day_note is not None and day_note.startswith(f"{len(stored)} checkpoints"),
          f"24 h view: {len(day_ids)} bars (ids {sorted(day_ids)[:1]}..{sorted(day_ids)[-1:]}), note {day_note!r}; "
          f"the store returned {len(stored)}; recent view: {len(recent_ids)} bars, note {recent_note!r}")


def post_json(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode())


@since((1, 17), "a savepoint that fails at its trigger is in Flink's checkpoint history on 1.17.2; "
                "1.13.6 lists none, so there is nothing to count")
def savepoint(env):
    """One savepoint triggered through REST completes, one to a directory that cannot be written
    fails: counted apart from the checkpoints, timed, and FlinkSavepointFailed reaches Alertmanager."""
    job = env.flink("submit", env.a.version, "healthy")
    watch(env, job, 8)
    post_json(f"{env.a.rest}/jobs/{job}/savepoints", {"cancel-job": False})  # state.savepoints.dir
    time.sleep(4)
    post_json(f"{env.a.rest}/jobs/{job}/savepoints", {"target-directory": "file:///proc/1/forbidden", "cancel-job": False})
    flink = {}
    got = {}
    for _ in range(40):
        c = env.checkpoints(job)
        flink = {s: sorted(h["id"] for h in c.get("history", []) if h.get("is_savepoint") and h.get("status") == s)
                 for s in ("COMPLETED", "FAILED")}
        m = env.metrics()
        got = {s: one(m, "flink_savepoints_total", job_id=job, status=s) for s in ("completed", "failed")}
        if flink["COMPLETED"] and flink["FAILED"] and got["completed"] == 1 and got["failed"] == 1:
            break
        time.sleep(1)
    check("savepoint: one completed and one failed savepoint counted apart from the checkpoints",
          len(flink["COMPLETED"]) == 1 and len(flink["FAILED"]) == 1 and got == {"completed": 1, "failed": 1},
          f"Flink's history: completed savepoints {flink.get('COMPLETED')}, failed {flink.get('FAILED')}; "
          f"flink_savepoints_total {got}")
    latest = (c.get("latest") or {}).get("savepoint") or {}
    last = one(m, "flink_savepoint_last_completed_timestamp_seconds", job_id=job)
    want = latest.get("latest_ack_timestamp", 0) / 1000.0
    check("savepoint: the last completed savepoint's time is Flink's", last is not None and abs(last - want) < 0.002,
          f"flink_savepoint_last_completed_timestamp_seconds {last}, Flink latest.savepoint.latest_ack_timestamp {want}")
    fired = alert_in_alertmanager(env, job, "FlinkSavepointFailed", True)
    check("savepoint: FlinkSavepointFailed reaches Alertmanager", bool(fired),
          f"{fired[0]['annotations']['description']!r}" if fired else "not found")
    for _ in range(20):  # the store is written with the state, every persist_interval
        stored = get_json(f"{env.a.daemon}/api/v1/jobs/{env.a.cluster}/{job}/checkpoints?outcome=failed_any")
        kinds = [(c["id"], c["kind"]) for c in stored["checkpoints"]]
        if any(k == "savepoint" for _, k in kinds):
            break
        time.sleep(0.5)
    check("savepoint: the failed savepoint is in the checkpoint store with its reason",
          any(k == "savepoint" and i in flink["FAILED"] for i, k in kinds),
          f"failed records {kinds}; {[c['failure_message'] for c in stored['checkpoints']][:2]}")
    env.flink("cancel", env.a.version, job)


def trigger_gaps(seen):
    """(id, ms since the previous checkpoint's trigger) over Flink's history as seen, in id order."""
    entries = sorted((h["id"], h["trigger_timestamp"]) for h in seen.values() if not h.get("is_savepoint"))
    return [(i, t - p) for (_, p), (i, t) in zip(entries, entries[1:])]


def watch_quietly(env, job, seconds, sample=None):
    """Polls Flink's history and the daemon's alerts of `job` every second for `seconds`; returns
    (finished checkpoints by id, alerts seen but the configuration's, their descriptions). With
    `sample`, calls it with the daemon's job answer every second too."""
    seen, alerts, described = {}, set(), {}
    end = time.time() + seconds
    while time.time() < end:
        for h in env.checkpoints(job).get("history", []):
            if h.get("status") in ("COMPLETED", "FAILED"):
                seen.setdefault(h["id"], h)
        for a in job_alerts(env, job):
            name = a["labels"]["alertname"]
            if name != "FlinkCheckpointConfigRisk":  # the advisor's, about the configuration (see healthy)
                alerts.add((name, a["state"]))
                described.setdefault(name, a.get("annotations", {}).get("description", ""))
        if sample is not None:
            try:
                sample(env.daemon_job(job))
            except Exception:  # the job may not be known to the daemon yet
                pass
        time.sleep(1)
    return seen, alerts, described


# 40 s of backlog give 3-4 gaps of 10 s; the 25 s after it 6-10 of 2.5 s (CI time: was 60 + 35 s).
BACKLOG_S, BACKLOG_INTERVAL_MS, INTERVAL_MS, AFTER_BACKLOG_S = 40, 10_000, 2_500, 25


@since((1, 19), "sources report backlog (SplitEnumeratorContext#setIsProcessingBacklog) from 1.19 (FLIP-309)")
def backlog(env):
    """The fast source reports backlog for its first 40 s with an interval during backlog of 10 s
    (a job parameter), then catches up (2.5 s): Flink's own history shows both spacings; no alert of
    the job at any second; the shadow explains the 10 s triggers (deviation kind backlog_interval,
    none unexplained), its schedule says "backlog interval in force" while it holds, and the page."""
    job = env.flink("submit", env.a.version, "backlog")
    in_force, schedules = [], set()
    # The job page in headless Chromium 25 s in, while the backlog holds (beside the sampling).
    dom = []
    shot = threading.Timer(25, lambda: dom.append(page(env, f"#/jobs/{env.a.cluster}/{job}")))
    shot.start()

    def sample(api):
        ex = api.get("shadow", {}).get("explanation", {})
        if ex.get("backlog_in_force"):
            in_force.append(ex.get("schedule"))
        if ex.get("schedule"):
            schedules.add(ex["schedule"])

    seen, alerts, described = watch_quietly(env, job, BACKLOG_S + AFTER_BACKLOG_S, sample)
    gaps = trigger_gaps(seen)
    long_gaps = [(i, g) for i, g in gaps if abs(g - BACKLOG_INTERVAL_MS) <= 600]
    short_gaps = [(i, g) for i, g in gaps if abs(g - INTERVAL_MS) <= 200]
    check("backlog: Flink spaced checkpoints by the backlog interval, then by the interval",
          len(long_gaps) >= 3 and len(short_gaps) >= 5,
          f"Flink's trigger gaps (id, ms): 10 s ones {long_gaps}; 2.5 s ones: {len(short_gaps)} of {len(gaps)}")
    evidence = f"; descriptions {described}; {unexplained_deviations(env, job)}" if alerts else ""
    check("backlog: no alert of the job pending or firing at any second", not alerts,
          f"sampled every second for {BACKLOG_S + AFTER_BACKLOG_S} s: {sorted(alerts) or 'none'}{evidence}")
    shadow = env.daemon_job(job).get("shadow", {})
    devs = shadow.get("deviations", [])
    explained = [d for d in devs if d["kind"] == "backlog_interval"]
    unexplained = [d for d in devs if not d.get("explained")]
    check("backlog: the shadow puts the 10 s triggers down to the backlog interval, none unexplained",
          len(explained) >= min(3, len(long_gaps)) and not unexplained,
          f"backlog_interval deviations at {[d['checkpoint_id'] for d in explained]}; unexplained "
          f"{[d['sentence'] for d in unexplained] or 'none'}; counts {shadow.get('deviation_counts')}")
    check("backlog: the schedule said 'backlog interval in force' while it held",
          bool(in_force) and all("backlog interval in force" in (s or "") for s in in_force),
          f"{len(in_force)} seconds in force; e.g. {in_force[:1]}")
    shot.join()
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom[0])) if dom else ""
    line = re.search(r"Backlog interval[^.]*", text)
    check("backlog: the job page said 'backlog interval in force' while it held",
          "backlog interval in force" in text and line is not None and "in force" in line.group(0),
          f"page at 25 s: {line.group(0).strip() if line else 'no backlog line'}; schedule "
          f"{re.search(r'checkpoints every [^;(]*', text).group(0) if 'checkpoints every' in text else None!r}")
    print(f"    explanation while in backlog: {in_force[0] if in_force else None}", flush=True)
    print(f"    a deviation: {explained[0]['sentence'] if explained else None}", flush=True)
    print(f"    explanation now: {shadow.get('explanation', {}).get('schedule')}", flush=True)
    cancel_and_check(env, "backlog", job)


@since((1, 19), "manual triggers by REST came with 1.17 (FLINK-27101), the INCREMENTAL refusal with 1.19 (FLINK-33723)")
def trigger_times(env, job):
    """(id, kind, trigger ms after the first listed) of Flink's history: the evidence when the
    shadow puts a checkpoint down to something else than the scenario made."""
    history = sorted(env.checkpoints(job).get("history", []), key=lambda h: h["id"])
    first = min((h["trigger_timestamp"] for h in history), default=0)
    return [(h["id"], "savepoint" if h.get("is_savepoint") else h.get("checkpoint_type"),
             h["trigger_timestamp"] - first) for h in history]


def manual_trigger(env):
    """Full manual triggers by REST between periodic checkpoints (interval 5 s), an incremental one
    that Flink refuses, and a savepoint: no alert of the job at any second; the shadow puts each
    manual checkpoint down to a manual trigger (explained) and none is unexplained."""
    job = env.flink("submit", env.a.version, "manual-trigger")
    seen, alerts, described = watch_quietly(env, job, 8)
    manual, refused = {}, None

    def mid_interval():
        """Waits until 1.8 s after a periodic tick: between two periodic ones. The ticks are on
        Flink's grid (its timer fires every 5 s, never early), so the phase most of the listed
        triggers share places the next one, however late the history shows the latest trigger.
        (Waiting for 1.8 s after the latest listed trigger missed that window when the history
        lagged, and then posted at once: once 12 ms before a tick, whose periodic checkpoint
        queued behind the manual one, and the two could not be told apart.)"""
        interval = 5000
        history = [h for h in env.checkpoints(job).get("history", []) if not h.get("is_savepoint")]
        phases = [h["trigger_timestamp"] % interval for h in history]
        if not phases:
            time.sleep(1.8)
            return
        phase = max(phases, key=lambda p: sum(1 for q in phases
                                              if min(abs(p - q), interval - abs(p - q)) <= 100))
        now_ms = int(time.time() * 1000)
        target = now_ms - now_ms % interval + phase + 1800
        while target < now_ms + 300:
            target += interval
        time.sleep((target - now_ms) / 1000.0)

    for kind in ("FULL", "INCREMENTAL", "FULL", "CONFIGURED", "SAVEPOINT"):
        mid_interval()
        if kind == "SAVEPOINT":
            post_json(f"{env.a.rest}/jobs/{job}/savepoints", {"cancel-job": False})
        else:
            try:
                request = post_json(f"{env.a.rest}/jobs/{job}/checkpoints", {"checkpointType": kind})
                manual[request["request-id"]] = kind
            except urllib.error.HTTPError as e:
                refused = (kind, e.code, e.read().decode(errors="replace"))
        more, a, d = watch_quietly(env, job, 4)
        seen.update(more)
        alerts |= a
        described.update(d)
    ids = {}
    for request, kind in manual.items():
        status = get_json(f"{env.a.rest}/jobs/{job}/checkpoints/{request}")
        ids[(status.get("operation") or {}).get("checkpointId")] = kind
    check("manual-trigger: Flink refused the INCREMENTAL manual trigger (FLINK-33723) and took the others",
          refused is not None and refused[0] == "INCREMENTAL" and "FLINK-33723" in refused[2] and len(ids) == 3
          and None not in ids,
          f"refused {refused[:2] if refused else None} ({'names FLINK-33723' if refused and 'FLINK-33723' in refused[2] else 'no FLINK-33723'}); "
          f"manual checkpoints by request: {ids}")
    # Three periodic checkpoints after the savepoint (CI time: was 35 s).
    more, a, d = watch_quietly(env, job, 15)
    seen.update(more)
    alerts |= a
    described.update(d)
    evidence = f"; descriptions {described}; {unexplained_deviations(env, job)}" if alerts else ""
    check("manual-trigger: no alert of the job pending or firing at any second", not alerts,
          f"sampled every second for {8 + 5 * 4 + 15} s and more: {sorted(alerts) or 'none'}{evidence}")
    shadow = env.daemon_job(job).get("shadow", {})
    devs = shadow.get("deviations", [])
    put_down = {d["checkpoint_id"]: d["kind"] for d in devs if d["checkpoint_id"] in ids}
    unexplained = [d for d in devs if not d.get("explained")]
    check("manual-trigger: each manual checkpoint is put down to a manual trigger, none unexplained",
          all(put_down.get(i) == "manual_trigger" for i in ids) and not unexplained,
          f"manual {sorted(ids)} -> {put_down}; unexplained {[d['sentence'] for d in unexplained] or 'none'}; "
          f"counts {shadow.get('deviation_counts')}"
          + ("" if all(put_down.get(i) == "manual_trigger" for i in ids)
             else f"; every deviation: {[(d['checkpoint_id'], d['kind'], d['sentence']) for d in devs]}"
                  f"; Flink's triggers: {trigger_times(env, job)}"))
    sentence = next((d["sentence"] for d in devs if d["kind"] == "manual_trigger"), None)
    print(f"    a manual trigger: {sentence}", flush=True)
    print(f"    explanation: {shadow.get('explanation', {}).get('schedule')}", flush=True)
    cancel_and_check(env, "manual-trigger", job)


TRACE_REPORTER = ("traces.reporter.slf4j.factory.class: "
                  "org.apache.flink.traces.slf4j.Slf4jTraceReporterFactory")


@since((1, 19), "the Slf4j trace reporter and its checkpoint spans came with 1.19")
def traces(env):
    """Flink's checkpoint spans (its Slf4j trace reporter, read from the JobManager log) as the
    second source: Flink restarted with the reporter and web.checkpoints.history 10, a second
    daemon polling every 15 s (more than ten 1 s checkpoints between two polls) still counts every
    checkpoint exactly once (Flink's counts, the store) and none as unobserved."""
    a = env.a
    flink_env = dict(os.environ, SENTINEL_E2E_EXTRA_CONF=TRACE_REPORTER, SENTINEL_E2E_CP_HISTORY="10")
    subprocess.run([a.flink_sh, "stop", a.version], check=True, capture_output=True)
    subprocess.run([a.flink_sh, "start", a.version], check=True, capture_output=True, env=flink_env)
    log_dir = env.flink("log-dir", a.version)
    work = os.path.join(os.path.dirname(a.daemon_config), "traces")
    os.makedirs(work, exist_ok=True)
    port = int(a.daemon.rsplit(":", 1)[1]) + 2
    daemon = f"http://127.0.0.1:{port}"
    config = os.path.join(work, "sentinel.toml")
    with open(config, "w") as f:
        f.write(f"""[server]
listen = "127.0.0.1:{port}"
[[clusters]]
name = "traces"
url = "{a.rest}"
poll_interval = "15s"
[[logs]]
cluster = "traces"
paths = ["{log_dir}/flink-*-standalonesession-*.log"]
[state]
dir = "{work}/state"
persist_interval = "1s"
""")
    log = open(os.path.join(work, "daemon.log"), "a")
    proc = subprocess.Popen([a.bin, "run", "--config", config], stdout=log, stderr=log, start_new_session=True)
    try:
        for _ in range(60):
            try:
                get(f"{daemon}/readyz", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        job = env.flink("submit", a.version, "healthy", "--interval-ms", "1000", "--parallelism", "1")
        seen = watch(env, job, max(40, a.seconds))
        env.flink("cancel", a.version, job)
        wait_ended(env, job)
        # The ended job's last poll comes within 15 s, its counts settle over 4 s more. Flink's
        # own answer is re-read each time: its REST caches checkpoint statistics for a few
        # seconds (rest.cache.checkpoint-statistics.timeout), so the first answer after the
        # cancel can predate the last checkpoint (whose span said COMPLETED).
        got, m, final = {}, "", {}
        for _ in range(40):
            stats = env.checkpoints(job)
            final = stats["counts"]
            for h in stats.get("history", []):
                if h.get("status") in ("COMPLETED", "FAILED"):
                    seen.setdefault(h["id"], h)
            m = get(f"{daemon}/metrics")
            got = {s: one(m, "flink_checkpoints_total", job_id=job, status=s) for s in ("completed", "failed")}
            if got["completed"] == final["completed"] and got["failed"] == final["failed"] \
                    and final.get("in_progress", 0) == 0:
                break
            time.sleep(1)
        polls = one(m, "checkpoint_sentinel_polls_total", cluster="traces")
        check("traces: a poll every 15 s with Flink's history of 10 and a checkpoint a second",
              final["completed"] >= 30,
              f"Flink completed {final['completed']} checkpoints in {max(40, a.seconds)} s; "
              f"the daemon polled {polls:.0f} times")
        check("traces: flink_checkpoints_total equals Flink's final counts",
              got.get("completed") == final["completed"] and got.get("failed") == final["failed"],
              f"daemon {got}; Flink {json.dumps(final)}")
        by = {(src, s): one(m, "checkpoint_sentinel_checkpoints_observed_total", job_id=job, source=src, status=s) or 0
              for src in ("rest", "trace") for s in ("completed", "failed")}
        unobserved = {s: one(m, "checkpoint_sentinel_checkpoints_unobserved_total", job_id=job, status=s) or 0
                      for s in ("completed", "failed")}
        failed_in_history = sum(1 for h in seen.values() if h["status"] == "FAILED")
        without_history = final["failed"] - failed_in_history
        check("traces: every checkpoint counted exactly once, none unobserved",
              by[("rest", "completed")] + by[("trace", "completed")] == final["completed"]
              and unobserved["completed"] == 0 and by[("trace", "completed")] > 0
              and unobserved["failed"] == without_history,
              f"completed by trace {by[('trace', 'completed')]:.0f} + by rest {by[('rest', 'completed')]:.0f} "
              f"= Flink {final['completed']}; failed by trace {by[('trace', 'failed')]:.0f} + rest "
              f"{by[('rest', 'failed')]:.0f}; checkpoint_sentinel_checkpoints_unobserved_total {unobserved} "
              f"(Flink counted {without_history} failed trigger(s) without a history entry)")
        r = get_json(f"{daemon}/api/v1/jobs/traces/{job}/checkpoints?limit=10000")
        ids = [c["id"] for c in r["checkpoints"]]
        want = list(range(1, final["completed"] + failed_in_history + 1))
        dupes = len(ids) - len(set(ids))
        check("traces: the store holds every checkpoint once",
              sorted(ids) == want and dupes == 0,
              f"the store returned {len(ids)} ({dupes} duplicates, missing {sorted(set(want) - set(ids))[:10]}, "
              f"extra {sorted(set(ids) - set(want))[:10]}); Flink's ids 1..{len(want)}")
        # The polls filled in what the spans lack for the ones Flink still had: the slowest
        # subtask exists only in Flink's per-subtask details.
        filled = sum(1 for c in r["checkpoints"] if c.get("slowest_subtask"))
        check("traces: the polls filled in the details of the checkpoints still in Flink's history",
              filled >= 10,
              f"{filled} of {len(ids)} stored checkpoints have the slowest subtask (from REST), "
              f"{sum(1 for c in r['checkpoints'] if c.get('phases_ms'))} their phases")
        # What the spans said agrees with Flink's own history for the ones it still has.
        api = {c["id"]: c for c in r["checkpoints"]}
        compared = [(i, h["end_to_end_duration"], api.get(i, {}).get("end_to_end_ms")) for i, h in seen.items()
                    if h["status"] == "COMPLETED"]
        off = [c for c in compared if c[1] != c[2]]
        check("traces: each checkpoint's end-to-end duration is Flink's",
              compared and not off, f"{len(compared)} compared with Flink's history, differing: {off[:5]}")
    finally:
        proc.kill()
        proc.wait()


def prometheus(env):
    q = urllib.parse.quote("count(last_over_time(flink_checkpoints_total[15m]))")
    value = None
    for _ in range(60):
        r = get_json(f"{env.a.prometheus}/api/v1/query?query={q}")
        if r["data"]["result"]:
            value = r["data"]["result"][0]["value"][1]
            break
        time.sleep(1)
    targets = get_json(f"{env.a.prometheus}/api/v1/targets")["data"]["activeTargets"]
    health = "; ".join(f"{t['health']} {t['lastError']}".strip() for t in targets)
    check("prometheus: a real Prometheus scraped the daemon", value is not None and float(value) > 0,
          f"count(last_over_time(flink_checkpoints_total[15m])) = {value}; target: {health}")


# --- The checkpoint storage (issue 40) ------------------------------------------------------------

def checkpoint_base(env, job):
    """The base checkpoint directory as Flink names it (`file:/…/checkpoints`) and as a local path,
    from the job's newest completed checkpoint's external_path."""
    for _ in range(60):
        path = ((env.checkpoints(job).get("latest") or {}).get("completed") or {}).get("external_path")
        if path:
            base = path.rsplit("/", 2)[0]
            return base, "/" + base.split(":", 1)[1].lstrip("/")
        time.sleep(1)
    raise RuntimeError(f"job {job}: no completed checkpoint with an external path in 60 s")


def tree_bytes(path):
    """Bytes and files under `path`."""
    total, files = 0, 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(root, n))
                files += 1
            except OSError:
                pass  # a checkpoint Flink deleted while we walked
    return total, files


def wait_metric(url, name, pred, seconds, **labels):
    """The first value of `name{labels}` at `url` for which pred holds, polling every second."""
    value = None
    end = time.time() + seconds
    while time.time() < end:
        try:
            value = one(get(f"{url}/metrics"), name, **labels)
        except Exception:  # not up yet
            value = None
        if value is not None and pred(value):
            return value
        time.sleep(1)
    return value


def print_answer(env, daemon, cluster, job, label):
    """The answer the page renders for the job (the API's, verbatim) and the page's own text."""
    api = get_json(f"{daemon}/api/v1/jobs/{cluster}/{job}")
    answer = api.get("answer") or {}
    print(f"    {label} page answer: what: {answer.get('what')}")
    print(f"    {label} page answer: next: {answer.get('next_step')}")
    dom = page(PageEnv(env, daemon), f"#/jobs/{cluster}/{job}")
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    found = re.search(r"([^.]*checkpoint storage:[^\n]*?)(Where:|Next:)", text)
    if found:
        print(f"    {label} page: {' '.join(found.group(1).split())}")
    return answer, text


class PageEnv:
    """`page` reads env.a.daemon: the same, at another daemon."""
    def __init__(self, env, daemon):
        self.a = argparse.Namespace(**{**vars(env.a), "daemon": daemon})


def storage_orphans(env):
    """A cancelled job whose checkpoints are kept (RETAIN_ON_CANCELLATION) leaves its folder; a
    running job gets a chk-N folder no checkpoint holds (the files an expired checkpoint leaves
    when Flink cannot discard them, written two hours ago). The daemon's listing must count the
    orphan's exact bytes, name the cancelled job's folder with its exact bytes, fire the e2e
    leaking rule, and diagnose and the page must name the storage."""
    gone = env.flink("submit", env.a.version, "storage")
    base, local = checkpoint_base(env, gone)
    watch(env, gone, 6)
    env.flink("cancel", env.a.version, gone)
    gone_bytes, gone_files = tree_bytes(os.path.join(local, gone))
    check("storage-orphans: the cancelled job's folder is kept (RETAIN_ON_CANCELLATION)", gone_files > 0,
          f"{gone_files} files, {gone_bytes} bytes under {local}/{gone}")
    job = env.flink("submit", env.a.version, "storage")
    checkpoint_base(env, job)
    leftover = os.path.join(local, job, "chk-1")
    os.makedirs(leftover, exist_ok=True)
    want = 0
    for i, size in enumerate((7000, 3100)):
        f = os.path.join(leftover, f"e2e-leftover-{i}")
        with open(f, "wb") as out:
            out.write(os.urandom(size))
        want += size
        os.utime(f, (time.time() - 7200, time.time() - 7200))
    try:
        got = wait_metric(env.a.daemon, "flink_checkpoint_storage_orphaned_bytes", lambda v: v == want, 60, job_id=job)
        check("storage-orphans: orphaned bytes equal the leftover folder's", got == want,
              f"flink_checkpoint_storage_orphaned_bytes {got}, the leftover chk-1 holds {want} bytes")
        m = env.metrics()
        folders = one(m, "flink_checkpoint_storage_orphaned_folders", job_id=job)
        complete = one(m, "flink_checkpoint_storage_complete_folders", job_id=job)
        retained = one(m, "flink_checkpoint_num_retained", job_id=job)
        check("storage-orphans: one orphan, complete folders within num-retained (+1 being replaced)",
              folders == 1 and retained == 1 and complete is not None and 1 <= complete <= 2,
              f"orphaned folders {folders}, complete folders {complete}, num_retained {retained}")
        abandoned = wait_metric(env.a.daemon, "flink_checkpoint_storage_abandoned_bytes", lambda v: v >= gone_bytes, 60,
                                base=base)
        check("storage-orphans: the cancelled job's folder counted under its base directory",
              abandoned is not None and abandoned >= gone_bytes,
              f"flink_checkpoint_storage_abandoned_bytes{{base={base}}} {abandoned}, the cancelled job's folder {gone_bytes}")
        fired, _ = alert_matching(env, job, lambda a: a["labels"]["alertname"] == "E2ECheckpointStorageLeaking", 30)
        check("storage-orphans: the leaking rule reaches Alertmanager", fired is not None,
              f"{fired['annotations'].get('summary') if fired else 'no alert'}")
        code, text, _, report = run_diagnose(env, job, env.a.daemon_config)
        # One look lists at most max_requests_per_round (20) folders: after a whole e2e run the
        # base holds every earlier scenario's job folder, and the look may not reach the
        # cancelled one (the daemon does, over its rounds: the check above).
        crowded = len([d for d in os.listdir(local) if os.path.isdir(os.path.join(local, d))]) >= 20
        check("storage-orphans: diagnose names the orphan and the cancelled job's folder",
              "orphan chk-1:" in text and (crowded or (gone in text and "CANCELED" in text)),
              f"exit {code}; storage lines {report.get('storage')}"
              + (" (the base holds 20 folders or more: the cancelled one not required of one look)" if crowded else ""))
        check("storage-orphans: diagnose's verdict (the daemon's rules) names the checkpoint storage",
              code != 0 and "checkpoint storage:" in text, f"exit {code}, verdict {report.get('verdict')}")
        answer, page_text = print_answer(env, env.a.daemon, env.a.cluster, job, "storage-orphans")
        check("storage-orphans: the page's answer names the checkpoint storage",
              "checkpoint storage:" in (answer.get("what") or "") and "checkpoint storage:" in page_text,
              f"what: {answer.get('what')}")
    finally:
        env.flink("cancel", env.a.version, job)
        shutil.rmtree(leftover, ignore_errors=True)


def s3_put_tree(endpoint, bucket, prefix, local):
    """Copies `local` into bucket/prefix through `endpoint` (moto's boto3); returns (bytes, objects)."""
    code = (
        "import boto3,os,sys\n"
        "s3=boto3.client('s3',endpoint_url=sys.argv[1],aws_access_key_id='e2e',aws_secret_access_key='e2e',region_name='us-east-1')\n"
        "s3.create_bucket(Bucket=sys.argv[2])\n"
        "n=b=0\n"
        "for root,_,names in os.walk(sys.argv[4]):\n"
        "  for f in names:\n"
        "    p=os.path.join(root,f); data=open(p,'rb').read()\n"
        "    s3.put_object(Bucket=sys.argv[2],Key=sys.argv[3]+'/'+os.path.relpath(p,sys.argv[4]),Body=data); n+=1; b+=len(data)\n"
        "print(b,n)\n")
    out = subprocess.run([MOTO_PYTHON, "-c", code, endpoint, bucket, prefix, local], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"copy into S3 failed: {out.stderr[-400:]}")
    b, n = out.stdout.split()
    return int(b), int(n)


MOTO_PYTHON = None


def moto_venv():
    """A venv with moto's server (`pip install 'moto[server]'`, from PyPI) in the e2e cache."""
    global MOTO_PYTHON
    cache = os.environ.get("SENTINEL_E2E_CACHE", os.path.expanduser("~/.cache/checkpoint-sentinel-e2e"))
    venv = os.path.join(cache, "moto-venv")
    if not os.path.exists(os.path.join(venv, "bin", "moto_server")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "moto[server]"], check=True, timeout=600)
    MOTO_PYTHON = os.path.join(venv, "bin", "python")
    return venv


def storage_s3(env):
    """A live job's checkpoint folder copied into an S3-compatible server (moto's, from PyPI)
    behind a proxy that answers every third request 503 SlowDown; a second daemon maps the
    job's Flink path onto s3://… (`storage_paths`) and reads it through object_store's S3
    client. Its listing must equal what was copied, its throttled count must equal the 503s the
    proxy sent, FlinkCheckpointStorageThrottled must fire, and diagnose and the page must name
    the storage."""
    a = env.a
    venv = moto_venv()
    ports = int(a.daemon.rsplit(":", 1)[1])
    moto_port, proxy_port, daemon_port = ports + 10, ports + 11, ports + 4
    work = os.path.join(os.path.dirname(a.daemon_config), "storage-s3")
    os.makedirs(work, exist_ok=True)
    stats = os.path.join(work, "proxy-stats")
    procs = []
    job = env.flink("submit", a.version, "storage")
    try:
        log = open(os.path.join(work, "moto.log"), "a")
        procs.append(subprocess.Popen([os.path.join(venv, "bin", "moto_server"), "-p", str(moto_port)], stdout=log,
                                      stderr=log, start_new_session=True))
        procs.append(subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "s3_throttle_proxy.py"),
                                       str(proxy_port), str(moto_port), "3", stats], stdout=log, stderr=log,
                                      start_new_session=True))
        for _ in range(60):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{moto_port}/", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        base, local = checkpoint_base(env, job)
        watch(env, job, 4)
        # A stable copy: the newest complete checkpoint folder and shared/, taken while Flink goes on.
        snapshot = os.path.join(work, "layout", job)
        shutil.rmtree(os.path.join(work, "layout"), ignore_errors=True)
        for root, _, names in os.walk(os.path.join(local, job)):
            for n in names:
                src = os.path.join(root, n)
                dst = os.path.join(snapshot, os.path.relpath(src, os.path.join(local, job)))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                try:
                    shutil.copy2(src, dst)
                except OSError:
                    pass  # a checkpoint Flink subsumed while we copied
        want_bytes, want_objects = s3_put_tree(f"http://127.0.0.1:{moto_port}", "e2e-checkpoints",
                                               f"checkpoints/{job}", snapshot)
        config = os.path.join(work, "sentinel.toml")
        with open(config, "w") as f:
            f.write(f"""[server]
listen = "127.0.0.1:{daemon_port}"
[[clusters]]
name = "s3"
url = "{a.rest}"
poll_interval = "2s"
storage_paths = [{{ flink = "{base}", local = "s3://e2e-checkpoints/checkpoints" }}]
[state]
dir = "{work}/state"
[storage]
interval = "10s"
[alerting]
evaluation_interval = "1s"
""")
        s3_env = {**os.environ, "AWS_ENDPOINT": f"http://127.0.0.1:{proxy_port}", "AWS_ALLOW_HTTP": "true",
                  "AWS_ACCESS_KEY_ID": "e2e", "AWS_SECRET_ACCESS_KEY": "e2e", "AWS_REGION": "us-east-1"}
        dlog = open(os.path.join(work, "daemon.log"), "a")
        procs.append(subprocess.Popen([a.bin, "run", "--config", config], stdout=dlog, stderr=dlog, env=s3_env,
                                      start_new_session=True))
        daemon = f"http://127.0.0.1:{daemon_port}"
        for _ in range(120):
            try:
                get(f"{daemon}/readyz", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        got = wait_metric(daemon, "flink_checkpoint_storage_bytes", lambda v: v == want_bytes, 90, job_id=job)
        objects = one(get(f"{daemon}/metrics"), "flink_checkpoint_storage_objects", job_id=job)
        check("storage-s3: the S3 listing equals the copied layout", got == want_bytes and objects == want_objects,
              f"flink_checkpoint_storage_bytes {got} / objects {objects}; copied {want_bytes} bytes in {want_objects} objects")
        throttled = wait_metric(daemon, "flink_checkpoint_storage_throttled_total", lambda v: v >= 1, 60, job_id=job)
        m = get(f"{daemon}/metrics")
        errors = one(m, "checkpoint_sentinel_storage_errors_total", cluster="s3", kind="throttled")
        made = one(m, "checkpoint_sentinel_storage_requests_total", cluster="s3", outcome="made")
        proxied, slowed = 0, 0
        if os.path.exists(stats):
            with open(stats) as f:
                proxied, slowed = (int(x) for x in f.read().split())
        # Every 503 is counted once as throttled: a retry inside the object store would turn one
        # into a success and leave the daemon's count below the proxy's. (`made` also counts the
        # local listings of jobs from earlier scenarios, whose savepoint paths are not mapped.)
        check("storage-s3: every 503 SlowDown the proxy sent is a throttled listing, none retried",
              errors == slowed and throttled is not None and throttled >= 1,
              f"daemon: {errors} throttled of {made} requests, job {throttled}; proxy: {slowed} 503 of {proxied}")
        fired = None
        end = time.time() + 30
        while time.time() < end and not fired:
            fired = next((x for x in get_json(f"{daemon}/api/v1/alerts").get("active", [])
                          if x["labels"].get("job_id") == job and x["labels"]["alertname"] == "FlinkCheckpointStorageThrottled"),
                         None)
            time.sleep(1)
        check("storage-s3: FlinkCheckpointStorageThrottled fires", fired is not None,
              f"{fired['state'] + ': ' + fired['annotations'].get('summary', '') if fired else 'no alert'}")
        cmd = [a.bin, "diagnose", "--config", config, "--job", job]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=s3_env)
        print(f"    $ checkpoint-sentinel diagnose --config {config} --job {job}    (exit {out.returncode})")
        for line in (out.stdout + out.stderr).rstrip().splitlines():
            print(f"    {line}".rstrip())
        check("storage-s3: diagnose reads the job's folder on S3",
              re.search(rf"\(read at s3://e2e-checkpoints/checkpoints/{job}\): [0-9.]+ KiB in {want_objects} objects",
                        " ".join(out.stdout.split())) is not None,
              "the Storage section names the S3 path it read")
        answer, page_text = print_answer(env, daemon, "s3", job, "storage-s3")
        check("storage-s3: the page's answer names the throttling storage",
              "503 SlowDown" in (answer.get("what") or "") and "checkpoint storage:" in page_text,
              f"what: {answer.get('what')}")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except OSError:
                pass
        env.flink("cancel", a.version, job)


def metadata_growth(env):
    """A union list state that grows 16 KiB per checkpoint and subtask, inlined into _metadata:
    the daemon's flink_checkpoint_metadata_bytes must be a size the _metadata file had on disk,
    the e2e rule (_metadata over 512 KiB) must fire, and diagnose and the page must name the
    storage with the growth per checkpoint. Flink 1.x reads the inline threshold
    (`state.storage.fs.memory-threshold`) from the cluster's configuration only, not the job's:
    there Flink is restarted with it (and stays so for the scenarios after, as traces does)."""
    a = env.a
    if version_tuple(a.version) < (2, 0):
        extra = "\n".join(x for x in (os.environ.get("SENTINEL_E2E_EXTRA_CONF"), "state.storage.fs.memory-threshold: 1mb") if x)
        subprocess.run([a.flink_sh, "stop", a.version], check=True, capture_output=True)
        subprocess.run([a.flink_sh, "start", a.version], check=True, capture_output=True,
                       env=dict(os.environ, SENTINEL_E2E_EXTRA_CONF=extra))
    job = env.flink("submit", env.a.version, "metadata-growth")
    try:
        _, local = checkpoint_base(env, job)
        sizes = set()
        fired = None
        end = time.time() + 120
        while time.time() < end and not fired:
            for d in glob.glob(os.path.join(local, job, "chk-*", "_metadata")):
                try:
                    sizes.add(os.path.getsize(d))
                except OSError:
                    pass
            fired = next((x for x in job_alerts(env, job) if x["labels"]["alertname"] == "E2ECheckpointMetadataGrowth"
                          and x["state"] == "firing"), None)
            time.sleep(0.5)
        value = one(env.metrics(), "flink_checkpoint_metadata_bytes", job_id=job)
        check("storage metadata-growth: the e2e rule fires once _metadata passes 512 KiB", fired is not None,
              f"flink_checkpoint_metadata_bytes {value}; sizes seen on disk up to {max(sizes) if sizes else None}")
        check("storage metadata-growth: the exported size is one the _metadata file had", value in sizes,
              f"exported {value}; {len(sizes)} sizes seen on disk")
        time.sleep(25)  # three storage rounds (10 s) of distinct checkpoints: the growth per checkpoint
        code, text, _, report = run_diagnose(env, job, env.a.daemon_config)
        check("storage metadata-growth: diagnose prints the _metadata against the frame size",
              "_metadata of checkpoint" in text and "frame size" in text, f"storage lines {report.get('storage')}")
        answer, page_text = print_answer(env, env.a.daemon, env.a.cluster, job, "metadata-growth")
        check("storage metadata-growth: the page's answer names the growing _metadata",
              "_metadata" in (answer.get("what") or "") and "growing" in (answer.get("what") or ""),
              f"what: {answer.get('what')}")
    finally:
        env.flink("cancel", env.a.version, job)


INCIDENT_JOBS, INCIDENT_TIMEOUT_MS, INCIDENT_PAUSE_S = 5, 6_000, 20


def job_taskmanagers(env, job):
    """The TaskManager ids that run a subtask of `job` (Flink's REST, once every subtask is placed)."""
    for _ in range(30):
        tms, placed = set(), True
        for v in get_json(f"{env.a.rest}/jobs/{job}").get("vertices", []):
            for st in get_json(f"{env.a.rest}/jobs/{job}/vertices/{v['id']}")["subtasks"]:
                placed &= bool(st.get("taskmanager-id")) and st.get("status") == "RUNNING"
                tms.add(st.get("taskmanager-id"))
        if placed and tms:
            return tms
        time.sleep(1)
    raise RuntimeError(f"job {job}: subtasks not all RUNNING and placed after 30 s")


def secs(at, since):
    """`at - since` as "1.2 s", or "never" when `at` is None."""
    return "never" if at is None or since is None else f"{at - since:.1f} s"


def incidents(env):
    return get_json(f"{env.a.daemon}/api/v1/incidents?members=true").get("incidents", [])


@since((2, 0), "any version has two TaskManagers and SIGSTOP; it runs on the 2.x line only, for CI's time")
def incident(env):
    """Two TaskManagers and five parallelism-1 jobs (Flink fills one TaskManager's 4 slots first);
    the TaskManager with the most jobs paused (SIGSTOP) for 20 s while their checkpoints expire
    (timeout 6 s): the daemon names one incident whose cause is that TaskManager and whose members
    are exactly its jobs, within one poll round of Flink showing the first expiry; the job on the
    other TaskManager stays out of it; the incident ends once the TaskManager runs again."""
    v = env.a.version
    base = int(env.a.rest.rsplit(":", 1)[1]) - 81
    first_pid = int(env.flink("tm-pid", v))
    second_pid = int(env.flink("start-tm", v))
    paused = None
    try:
        jobs = [env.flink("submit", v, "healthy", "--parallelism", "1", "--interval-ms", "1000",
                          "--timeout-ms", str(INCIDENT_TIMEOUT_MS), "--job-name", f"sentinel-e2e-incident-{i}")
                for i in range(INCIDENT_JOBS)]
        on = {job: job_taskmanagers(env, job) for job in jobs}
        tms = get_json(f"{env.a.rest}/taskmanagers")["taskmanagers"]
        pid_of = {t["id"]: (first_pid if t["dataPort"] == base + 126 else second_pid) for t in tms}
        tm = max(pid_of, key=lambda t: sum(t in ts for ts in on.values()))
        members = {job for job, ts in on.items() if tm in ts}
        others = set(jobs) - members
        print(f"    {len(members)} jobs on {tm} (pid {pid_of[tm]}), {len(others)} elsewhere", flush=True)
        # Every job checkpoints and the daemon knows it, and nothing is an incident yet.
        for _ in range(60):
            ready = all(env.checkpoints(j)["counts"].get("completed", 0) >= 3 for j in jobs)
            known = all(j in {x["job_id"] for x in get_json(f"{env.a.daemon}/api/v1/jobs").get("jobs", [])} for j in jobs)
            if ready and known:
                break
            time.sleep(1)
        before = incidents(env)
        check("incident: none before the pause", not before, f"{[i['text'] for i in before] or 'none'}")

        paused = pid_of[tm]
        os.kill(paused, signal.SIGSTOP)
        t0, first_expiry, named, seen = time.time(), None, None, None
        failed0 = {j: env.checkpoints(j)["counts"].get("failed", 0) for j in members}
        while time.time() - t0 < INCIDENT_PAUSE_S:
            if first_expiry is None and any(env.checkpoints(j)["counts"].get("failed", 0) > failed0[j] for j in members):
                first_expiry = time.time()
            found = [i for i in incidents(env) if i["cause"]["kind"] == "taskmanager" and tm in i["cause"]["value"]]
            if found and named is None:
                named, seen = time.time(), found[0]
            if named and first_expiry and time.time() - named > 3:
                break
            time.sleep(0.5)
        got = {m["job_id"] for m in (seen or {}).get("members", [])}
        lag = None if named is None or first_expiry is None else named - first_expiry
        check("incident: one incident names the paused TaskManager, with exactly its jobs",
              seen is not None and got == members and not (got & others),
              f"{seen['text'] if seen else 'no incident'}; members {len(got)} of the {len(members)} jobs on {tm}, "
              f"jobs elsewhere in it: {sorted(got & others) or 'none'}")
        check("incident: named within one poll round of Flink showing the first expired checkpoint",
              lag is not None and lag <= 2.5,
              f"named {secs(named, t0)} after the pause, Flink's first expiry {secs(first_expiry, t0)} after "
              f"it: {secs(named, first_expiry)} apart (the daemon polls every 1 s, its rules every 1 s)")
        healthy = [env.daemon_job(j).get("health") for j in others]
        check("incident: the job on the other TaskManager stays out of it and healthy",
              bool(others) and all(h == "ok" for h in healthy),
              f"{len(others)} job(s): health {healthy}; healthy_without {seen.get('healthy_without') if seen else None}")
        # `diagnose` of the whole cluster (one look at every job) opens with the same incident:
        # a one-shot look at any moment of the pause, so a second look if the first missed it.
        # With the default 10 s per request a look took 40.8 s while a TaskManager was paused (its
        # requests to it time out, one after another): 3 s here (loopback), so that the pause
        # stays well under Flink's 50 s heartbeat timeout.
        first, looks = "", []
        for _ in range(2):
            started = time.time()
            out = subprocess.run([env.a.bin, "diagnose", "--url", env.a.rest, "--timeout", "3s"],
                                 capture_output=True, text=True, timeout=120).stdout
            looks.append(round(time.time() - started, 1))
            # Its first line after the title with the lines that continue it (indented: it wraps).
            lines = out.splitlines()[1:]
            cont = next((k for k, line in enumerate(lines[1:], 1) if not line.startswith("    ")), len(lines))
            first = " ".join(" ".join(lines[:cont]).split())
            if f"all with subtasks on TaskManager {tm}" in first or time.time() - t0 > INCIDENT_PAUSE_S:
                break
        check("incident: diagnose's first line after its title names the incident",
              f"all with subtasks on TaskManager {tm}" in first,
              f"{first!r} (looks of {looks} s); the API: {seen['text'] if seen else None!r}")
        still = [i["text"] for i in incidents(env) if i["id"] == (seen or {}).get("id")]
        print(f"    {time.time() - t0:.1f} s after the pause, before SIGCONT: {still or 'no incident'}", flush=True)
        os.kill(paused, signal.SIGCONT)
        paused, t1, ended = None, time.time(), None
        while time.time() - t1 < 60:
            if not [i for i in incidents(env) if i["id"] == (seen or {}).get("id")]:
                ended = time.time() - t1
                break
            time.sleep(1)
        check("incident: it ends once the TaskManager runs again", seen is not None and ended is not None,
              f"ended {secs(ended, 0)} after SIGCONT")
        for job in jobs:
            env.flink("cancel", v, job)
    finally:
        if paused:
            os.kill(paused, signal.SIGCONT)
        # The second TaskManager goes (SIGTERM: it deregisters), so later scenarios see one.
        os.kill(second_pid, signal.SIGTERM)
        wait_gone(second_pid)
        for _ in range(60):
            if len(get_json(f"{env.a.rest}/taskmanagers")["taskmanagers"]) <= 1:
                break
            time.sleep(1)


def flink_restore_account(env, job):
    """Flink's own account of the job's latest restore, for recovery_checkpoint: the restore time,
    every subtask's INITIALIZING and RUNNING (ms after it), and each checkpoint triggered from a
    second before it on with its trigger and last acknowledgement (ms after it)."""
    c = env.checkpoints(job)
    at = ((c.get("latest") or {}).get("restored") or {}).get("restore_timestamp")
    subtasks = []
    for v in get_json(f"{env.a.rest}/jobs/{job}")["vertices"]:
        for st in get_json(f"{env.a.rest}/jobs/{job}/vertices/{v['id']}/subtasktimes")["subtasks"]:
            ts = st["timestamps"]
            subtasks.append((v["name"], st["subtask"], ts.get("INITIALIZING", 0), ts.get("RUNNING", 0)))
    after = sorted((h for h in c.get("history", []) if at and h["trigger_timestamp"] >= at - 1_000),
                   key=lambda h: h["id"])
    return at, subtasks, after, c["counts"]


@since((2, 3), "checkpointing during recovery (FLIP-547: execution.checkpointing.during-recovery.enabled with "
               "execution.checkpointing.unaligned.recover-output-on-downstream.enabled) came with 2.3; it runs "
               "on one version, for CI's time")
def recovery_checkpoint(env):
    """A job with unaligned checkpoints and checkpointing during recovery on (FLIP-547) fails once;
    its restored stateful-map stays INITIALIZING 3 s, then replays its in-flight data slowly while
    checkpoints go on. Flink's account is printed (subtask states, checkpoints around the restore,
    the triggers the JobManager refused, when the replay ended); the daemon's restore time must end
    at the last subtask RUNNING (Flink's timestamps), not at the first checkpoint completed after
    the restore; no alert of the job at any second; the shadow explains the first checkpoint after
    the restore (the restart), none unexplained.

    Seen on 2.3.0 (2026-12-05): Flink refuses to trigger while a task is INITIALIZING ("Checkpoint
    triggering task stateful-map (1/2) ... is not being executed at the moment"), so no checkpoint
    completes before the last subtask RUNNING; with the keys on, a restored task goes RUNNING once
    its in-flight data is read and filtered, not consumed, and checkpoints complete while it still
    replays that data (without them it stayed INITIALIZING through the replay: RUNNING at +7.8 s
    instead of +3.2 s)."""
    a = env.a
    job = env.flink("submit", a.version, "recovery-checkpoint")
    seen, alerts, described = {}, set(), {}
    account = None
    for _ in range(45):  # the failure comes ~8 s after the first record, the restore ~4 s later
        more, al, d = watch_quietly(env, job, 1)
        seen.update(more)
        alerts |= al
        described.update(d)
        at, subtasks, after, counts = flink_restore_account(env, job)
        last_running = max((r for *_, r in subtasks), default=0)
        if at and all(r >= at for *_, r in subtasks) and any(
                h["status"] == "COMPLETED" and h["latest_ack_timestamp"] > last_running for h in after):
            account = (at, subtasks, after, counts, last_running)
            break
    more, al, d = watch_quietly(env, job, 5)  # the replay goes on: checkpoints during it, polled
    seen.update(more)
    alerts |= al
    described.update(d)
    if account is None:
        check("recovery_checkpoint: Flink restored the job", False,
              f"no restore with every subtask RUNNING and a checkpoint after it in 45 s: {flink_restore_account(env, job)}")
        return
    at, subtasks, _, counts, last_running = account
    _, _, after, counts_now = flink_restore_account(env, job)
    print(f"    Flink restored checkpoint {(env.checkpoints(job)['latest']['restored'] or {}).get('id')} at {at}; "
          f"subtasks (ms after it):", flush=True)
    for name, i, init, running in subtasks:
        print(f"      {name} #{i}: INITIALIZING +{init - at}, RUNNING +{running - at}", flush=True)
    for h in after:
        ack = h["latest_ack_timestamp"] - at if h.get("latest_ack_timestamp", 0) > 0 else None
        print(f"      checkpoint {h['id']} {h['status']} {h.get('checkpoint_type')}: triggered +{h['trigger_timestamp'] - at}, "
              f"last ack {f'+{ack}' if ack is not None else '-'}, persisted in-flight {h.get('persisted_data')} B", flush=True)
    completed = [h for h in after if h["status"] == "COMPLETED" and h["trigger_timestamp"] >= at]
    during = [h for h in completed if h["latest_ack_timestamp"] < last_running]
    first = completed[0] if completed else None
    print(f"    checkpoints completed before the last subtask RUNNING (+{last_running - at}): "
          f"{[h['id'] for h in during] or 'none'}; Flink's failed count (trigger failures included) "
          f"{counts['failed']} then {counts_now['failed']}", flush=True)
    logs = env.flink("log-dir", a.version)
    refused, replayed = [], []
    for path in glob.glob(os.path.join(logs, "*standalonesession*.log")):
        with open(path, errors="replace") as f:
            refused += [line.strip() for line in f if job in line and "is not being executed at the moment" in line]
    # The job logs when a restored stateful-map subtask has replayed its first (slow) records.
    for path in glob.glob(os.path.join(logs, "*taskexecutor*.log")):
        with open(path, errors="replace") as f:
            replayed += [int(m.group(1)) for m in re.finditer(r"replayed its first \d+ records at epoch ms (\d+)", f.read())
                         if int(m.group(1)) >= at]
    replay_end = max(replayed, default=None)
    while_replaying = [h["id"] for h in completed if replay_end and last_running <= h["latest_ack_timestamp"] < replay_end]
    print(f"    the JobManager refused {len(refused)} trigger(s) of this job while a task was not RUNNING; the last: "
          f"{refused[-1][:260] if refused else '-'}", flush=True)
    print(f"    the restored stateful-map subtasks replayed their first records (in-flight data, 20 ms each) until "
          f"+{replay_end - at if replay_end else '?'} ms; checkpoints completed meanwhile, every subtask RUNNING: "
          f"{while_replaying or 'none'}", flush=True)
    check("recovery_checkpoint: Flink restored the job with checkpointing during recovery, a checkpoint completed after it",
          first is not None,
          f"first checkpoint after the restore {first and first['id']} completed at +{first and first['latest_ack_timestamp'] - at} ms, "
          f"last subtask RUNNING at +{last_running - at} ms; completed while a subtask was still INITIALIZING: "
          f"{[h['id'] for h in during] or 'none (Flink 2.3.0 triggers only once every task runs)'}; "
          f"while the in-flight data still replayed (subtasks RUNNING): {while_replaying or 'none'}")
    # The restore time: Flink's restore_timestamp to the last subtask RUNNING (as failover), never
    # the first checkpoint completed after the restore.
    restore_time(env, job, "recovery_checkpoint")
    view = env.daemon_job(job)
    restore = view.get("latest_restore") or {}
    first_ms = first["latest_ack_timestamp"] - at if first else None
    check("recovery_checkpoint: the restore time ends at the last subtask RUNNING, not at the first completed checkpoint",
          restore.get("duration_ms") == last_running - at,
          f"daemon {restore.get('duration_ms')} ms; Flink: last subtask RUNNING +{last_running - at} ms, "
          f"first checkpoint after the restore ({first and first['id']}) completed +{first_ms} ms")
    evidence = f"; descriptions {described}; {unexplained_deviations(env, job)}" if alerts else ""
    check("recovery_checkpoint: no alert of the job pending or firing at any second", not alerts,
          f"sampled every second: {sorted(alerts) or 'none'}{evidence}")
    shadow = view.get("shadow", {})
    devs = shadow.get("deviations", [])
    unexplained = [d for d in devs if not d.get("explained")]
    mine = [d for d in devs if first and d["checkpoint_id"] == first["id"]]
    gap = dict(trigger_gaps(seen)).get(first["id"]) if first else None
    check("recovery_checkpoint: the shadow explains the first checkpoint after the restore, none unexplained",
          first is not None and not unexplained and (
              (mine and mine[0]["explained"]) or (gap is not None and abs(gap - 1_000) <= 100)),
          f"checkpoint {first and first['id']} came {gap} ms after the one before; its deviation: "
          f"{[(d['kind'], d['sentence']) for d in mine] or 'none (on the grid)'}; unexplained "
          f"{[d['sentence'] for d in unexplained] or 'none'}; counts {shadow.get('deviation_counts')}")
    print(f"    the explanation: {mine[0]['kind']}: {mine[0]['sentence']}" if mine else "    the explanation: none needed", flush=True)
    print(f"    the restore: {restore.get('text')}", flush=True)
    print(f"    health: {view.get('health')} {view.get('health_reasons')}", flush=True)
    cancel_and_check(env, "recovery_checkpoint", job)


ADAPTIVE = "\n".join((
    "jobmanager.scheduler: adaptive",
    # No cooldown after the job started, and a requirement change acts within a second.
    "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling: 0s",
    "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout: 1s",
    "web.adaptive-scheduler.rescale-history.size: 10",
))


def put_json(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


@since((2, 3), "the rescale history (/jobs/:id/rescales/*) came with 2.3; the scenario restarts Flink "
               "with the adaptive scheduler (~25 s), so it runs on one version; restarts with a changed "
               "parallelism on 1.x are unit-tested (resource-requirements: 1.18+, FLIP-291)")
def rescale(env):
    """The adaptive scheduler rescales the job from 2 to 1 after PUT /jobs/:id/resource-requirements
    (it waits for a completed checkpoint, FLIP-461): no alert of the job at any second; the daemon's
    API lists the rescale from Flink's history with the checkpoint that gated it (the one the new
    parallelism restored); the shadow puts the first checkpoint after it down to the rescale, none
    unexplained; the job page draws it on the checkpoint timeline. Flink stays adaptive for the
    scenarios after it (prometheus only)."""
    a = env.a
    extra = "\n".join(x for x in (os.environ.get("SENTINEL_E2E_EXTRA_CONF"), ADAPTIVE) if x)
    subprocess.run([a.flink_sh, "stop", a.version], check=True, capture_output=True)
    subprocess.run([a.flink_sh, "start", a.version], check=True, capture_output=True,
                   env=dict(os.environ, SENTINEL_E2E_EXTRA_CONF=extra))
    job = env.flink("submit", a.version, "rescale")
    seen, alerts, described = watch_quietly(env, job, 6)
    requirements = get_json(f"{a.rest}/jobs/{job}/resource-requirements")
    put_json(f"{a.rest}/jobs/{job}/resource-requirements",
             {v: {"parallelism": {"lowerBound": 1, "upperBound": 1}} for v in requirements})
    asked = time.time()
    parallelism = []
    for _ in range(30):
        more, al, d = watch_quietly(env, job, 1)
        seen.update(more)
        alerts |= al
        described.update(d)
        parallelism = [v.get("parallelism") for v in get_json(f"{a.rest}/jobs/{job}").get("vertices", [])]
        if parallelism and all(p == 1 for p in parallelism):
            break
    rescaled_in = time.time() - asked
    more, al, d = watch_quietly(env, job, 10)  # the first checkpoints of the new parallelism, polled
    seen.update(more)
    alerts |= al
    described.update(d)
    history = get_json(f"{a.rest}/jobs/{job}/rescales/history")
    flink = next((h for h in history if h.get("triggerCause") == "UPDATE_REQUIREMENT"), None)
    restored = (env.checkpoints(job).get("latest") or {}).get("restored") or {}
    check("rescale: Flink rescaled the job from 2 to 1 after the requirement change and restored a checkpoint",
          flink is not None and flink.get("terminalState") == "COMPLETED" and parallelism
          and all(p == 1 for p in parallelism) and restored.get("id") is not None,
          f"parallelism {parallelism} {rescaled_in:.1f} s after the PUT; history {[(h.get('triggerCause'), h.get('terminalState')) for h in history]}; "
          f"restored checkpoint {restored.get('id')}")
    evidence = f"; descriptions {described}; {unexplained_deviations(env, job)}" if alerts else ""
    check("rescale: no alert of the job pending or firing at any second", not alerts,
          f"sampled every second: {sorted(alerts) or 'none'}{evidence}")
    api = env.daemon_job(job)
    ours = [r for r in api.get("rescales", []) if r.get("cause") == "UPDATE_REQUIREMENT"]
    r = ours[0] if ours else {}
    check("rescale: the API lists Flink's rescale with the checkpoint that gated it (the one restored)",
          len(ours) == 1 and r.get("source") == "rescale_history" and r.get("gated_by_checkpoint") == restored.get("id")
          and r.get("vertices") and all(v.get("before") == 2 and v.get("after") == 1 for v in r["vertices"]),
          f"daemon: {api.get('rescales')}; Flink restored {restored.get('id')}")
    shadow = api.get("shadow", {})
    devs = shadow.get("deviations", [])
    first_after = min((int(i) for i, h in seen.items() if h.get("trigger_timestamp", 0) >= (flink or {}).get("endTimestampInMillis", 1 << 62) - 1_000
                       and int(i) > int(restored.get("id") or 0)), default=None)
    gap = dict(trigger_gaps(seen)).get(first_after)
    put_down = [d for d in devs if d["kind"] == "rescale"]
    unexplained = [d for d in devs if not d.get("explained")]
    on_grid = gap is not None and abs(gap - 2_000) <= 100
    check("rescale: the shadow puts the first checkpoint after the rescale down to it, none unexplained",
          not unexplained and ((put_down and put_down[0]["checkpoint_id"] == first_after) or (on_grid and not put_down)),
          f"first checkpoint after it {first_after} ({gap} ms after the one before); rescale deviations "
          f"{[d['checkpoint_id'] for d in put_down]}; unexplained {[d['sentence'] for d in unexplained] or 'none'}; "
          f"counts {shadow.get('deviation_counts')}")
    dom = page(env, f"#/jobs/{a.cluster}/{job}")
    svg = re.search(r'aria-label="checkpoint timeline">(.*?)</svg>', dom, re.S)
    line = re.search(r'id="rescales">(.*?)</p>', dom, re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", line.group(1))) if line else ""
    check("rescale: the job page draws the rescale on the checkpoint timeline and says which checkpoint gated it",
          svg is not None and 'class="rescale"' in svg.group(1) and f"gated by checkpoint {restored.get('id')}" in text,
          f"timeline marker: {bool(svg and 'class=' + chr(34) + 'rescale' + chr(34) in svg.group(1))}; line: {' '.join(text.split())!r}")
    # Flink's job status metrics, read with the job's load under 2.x's names (issue 41). The
    # JobManager serves them from a store its fetcher refreshes every 10 s, and the daemon reads
    # them every round for 15 s after a restore: the two agree within a few seconds.
    for _ in range(15):
        m = env.metrics()
        restarts = samples(m, "flink_job_restarts", job_id=job, flink_metric="numRestarts")
        running = samples(m, "flink_job_status_time_seconds", job_id=job, status="running", flink_metric="runningTime")
        others = samples(m, "flink_job_restarts", job_id=job) + samples(m, "flink_job_status_time_seconds", job_id=job, status="running")
        flink_metrics = get_json(f"{a.rest}/jobs/{job}/metrics?get=numRestarts,runningTime")
        if [str(int(x)) for x in restarts] == [f["value"] for f in flink_metrics if f["id"] == "numRestarts"]:
            break
        time.sleep(1)
    check("rescale: /metrics exports Flink's numRestarts (read again after the restore) and runningTime under their 2.x names",
          len(restarts) == 1 and len(running) == 1 and len(others) == 2
          and [str(int(x)) for x in restarts] == [f["value"] for f in flink_metrics if f["id"] == "numRestarts"],
          f"daemon: numRestarts {restarts}, runningTime {running} s (read with the job's load); Flink now: {flink_metrics}")
    print(f"    the rescale: {r.get('text')}", flush=True)
    print(f"    the deviation: {put_down[0]['sentence'] if put_down else None}", flush=True)
    print(f"    explanation now: {shadow.get('explanation', {}).get('schedule')}", flush=True)
    cancel_and_check(env, "rescale", job)


def main():
    ap = argparse.ArgumentParser()
    for flag in ("rest", "daemon", "alertmanager", "prometheus", "flink-sh", "bin", "version"):
        ap.add_argument(f"--{flag}", required=True)
    ap.add_argument("--seconds", type=int, default=35)
    ap.add_argument("--daemon-config", help="the daemon's config (the store scenario restarts it)")
    ap.add_argument("--daemon-pid-file", help="where run.sh keeps the daemon's pid")
    ap.add_argument("--store-seconds", type=int, default=60, help="how long the store scenario's job runs (60 s: 20 checkpoints between restarts, twice the history of 10)")
    ap.add_argument("--cluster", default="e2e", help="the cluster's name in the daemon's config (run.sh: e2e)")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    env = Env(a)
    for scenario in (healthy, expired, declined, backpressure, failover, restore_savepoint, store, savepoint, traces,
                     backlog, manual_trigger, blocked, gc, skew, storage_orphans, storage_s3, metadata_growth,
                     incident, recovery_checkpoint, rescale, prometheus):
        if a.only and scenario.__name__ not in a.only:
            continue
        if not applies(scenario.__name__, a.version):
            print(f"--- {scenario.__name__}: skipped on Flink {a.version} (applies from "
                  f"{'.'.join(map(str, APPLIES_FROM[scenario.__name__]))})", flush=True)
            continue
        print(f"--- {scenario.__name__} (Flink {a.version})", flush=True)
        skip = out_of_range(scenario, a.version)
        if skip:
            print(f"SKIP  {scenario.__name__}: {skip}", flush=True)
            continue
        started = time.time()
        try:
            scenario(env)
        except Exception as e:  # a broken scenario is a failed assertion, and the others still run
            check(scenario.__name__, False, f"{type(e).__name__}: {e}")
        env.cancel_leftovers()
        print(f"    ({scenario.__name__}: {time.time() - started:.0f} s)", flush=True)
    passed = sum(RESULTS)
    print(f"{passed} passed, {len(RESULTS) - passed} failed")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
