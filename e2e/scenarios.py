#!/usr/bin/env python3
"""e2e/scenarios.py -- checkpoint-sentinel against a live Flink cluster, scenario by scenario.

Run by e2e/run.sh, which starts Flink, Alertmanager, Prometheus and the daemon. For each scenario
this script submits the job with e2e/flink.sh, polls Flink's own REST API every second as its
independent ground truth, and asserts on the daemon's /metrics, Alertmanager's API and
Prometheus' API:

  healthy   flink_checkpoints_total == Flink's counts; exported P95 == nearest-rank P95 of the
            distinct completed checkpoints (within HDR precision, 1 %)
  expired   the same counts; expired checkpoints seen in REST (failure_message) and in the logs
            (flink_checkpoint_log_events_total{kind="expired"}) in equal number; the alert for
            failing checkpoints reaches Alertmanager, and resolves once the job is gone
  declined  declined checkpoints seen in REST and in the logs in equal number, with the task
            that declined (from scan-logs on the same log files)
  failover  killing the TaskManager shows up as a restore (flink_checkpoint_restores_total and
            a log event of kind "restore")
  prometheus  a real Prometheus scraped the daemon and answers for flink_checkpoints_total

Prints one line per assertion with the numbers; exits non-zero if any failed. Stdlib only.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
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
        out = subprocess.run([self.a.flink_sh, *args], check=True, capture_output=True, text=True).stdout.strip()
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

    def checkpoints(self, job):
        # Right after submission Flink answers 500 until the job's checkpoint statistics exist.
        for attempt in range(30):
            try:
                return get_json(f"{self.a.rest}/jobs/{job}/checkpoints")
            except Exception:
                if attempt == 29:
                    raise
                time.sleep(1)


def watch(env, job, seconds):
    """Polls Flink for `seconds`; returns {id: history entry} of every finished checkpoint seen."""
    seen = {}
    end = time.time() + seconds
    while time.time() < end:
        for h in env.checkpoints(job).get("history", []):
            if h.get("status") in ("COMPLETED", "FAILED"):
                seen.setdefault(h["id"], h)
        time.sleep(1)
    return seen


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


def healthy(env):
    job = env.flink("submit", env.a.version, "healthy")
    seen = watch(env, job, env.a.seconds)
    m, c = settle(env, job, seen)
    counts_match("healthy", m, c, job)
    durations = [h["end_to_end_duration"] for h in seen.values() if h["status"] == "COMPLETED" and not h.get("is_savepoint")]
    count = one(m, "flink_checkpoint_duration_seconds_count", job_id=job)
    p95 = one(m, "flink_checkpoint_duration_seconds", job_id=job, quantile="0.95")
    want = nearest_rank(durations, 0.95) / 1000.0
    check("healthy: every completed checkpoint recorded once", count == len(durations),
          f"summary count {count:.0f}, distinct completed seen by this script {len(durations)}")
    check("healthy: P95 equals the nearest-rank P95 of Flink's history", abs(p95 - want) <= want * 0.01 + 1e-9,
          f"exported {p95:.3f} s, nearest-rank {want:.3f} s of {len(durations)} checkpoints "
          f"(Flink's own summary p95 {c and env.checkpoints(job)['summary']['end_to_end_duration']['p95']})")
    env.flink("cancel", env.a.version, job)


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
    env.flink("cancel", env.a.version, job)
    resolved = alert_in_alertmanager(env, job, "FlinkCheckpointFailing", False)
    check("expired: the alert resolves once the job no longer fails", resolved is not None,
          "no active alert for the job in Alertmanager after cancel" if resolved is not None else "still active")


def declined(env):
    job, rest = failing(env, "declined", "declined", "Asynchronous task checkpoint failed.")
    log_dir = env.flink("log-dir", env.a.version)
    jm = [os.path.join(log_dir, f) for f in os.listdir(log_dir) if "standalonesession" in f and f.endswith(".log")]
    scan = json.loads(subprocess.run([env.a.bin, "scan-logs", "--format", "json", *jm], check=True,
                                     capture_output=True, text=True).stdout)
    tasks = set()
    for cp in scan.get("checkpoints", []):
        if cp.get("job_id") == job:
            for e in cp.get("events", []):
                if e.get("kind") == "declined" and e.get("task"):
                    tasks.add(e["task"])
    names = {v["id"]: v["name"] for v in get_json(f"{env.a.rest}/jobs/{job}")["vertices"]}
    named = sorted(f"{t} ({names.get(t.split('_')[0], names.get(t, '?'))})" for t in tasks)
    check("declined: the log names the task that declined", bool(tasks), f"declining task(s): {named[:2]}")
    env.flink("cancel", env.a.version, job)


def failover(env):
    job = env.flink("submit", env.a.version, "healthy")
    watch(env, job, 15)
    tm = env.flink("tm-pid", env.a.version)
    subprocess.run(["kill", "-9", tm], check=True)
    env.flink("start", env.a.version)
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
    env.flink("cancel", env.a.version, job)


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


def main():
    ap = argparse.ArgumentParser()
    for flag in ("rest", "daemon", "alertmanager", "prometheus", "flink-sh", "bin", "version"):
        ap.add_argument(f"--{flag}", required=True)
    ap.add_argument("--seconds", type=int, default=35)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    env = Env(a)
    for scenario in (healthy, expired, declined, failover, prometheus):
        if a.only and scenario.__name__ not in a.only:
            continue
        print(f"--- {scenario.__name__} (Flink {a.version})", flush=True)
        try:
            scenario(env)
        except Exception as e:  # a broken scenario is a failed assertion, and the others still run
            check(scenario.__name__, False, f"{type(e).__name__}: {e}")
        env.cancel_leftovers()
    passed = sum(RESULTS)
    print(f"{passed} passed, {len(RESULTS) - passed} failed")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
