#!/usr/bin/env python3
"""e2e/check_live.py -- compare checkpoint-sentinel's /metrics with a live Flink job.

While the daemon polls the cluster, this script polls the same job's /checkpoints once a second
itself and collects every distinct completed checkpoint (its own ground truth, independent of the
daemon). At the end it requires:
  * flink_checkpoints_total{status=completed|failed} == Flink's counts (same moment, retried
    until both sides agree on a quiet point between checkpoints);
  * flink_checkpoint_duration_seconds{quantile="0.95"} == the nearest-rank P95 of the distinct
    completed checkpoints' end_to_end_duration, within HDR precision (1 %), when the daemon saw
    the job from its first checkpoint on.
It prints the daemon's lines and Flink's own summary for the record. Stdlib only.

Usage: check_live.py --flink URL --daemon URL --job JOBID [--seconds N] [--cluster NAME]
"""
import argparse
import json
import math
import sys
import time
import urllib.request


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def flink_checkpoints(flink, job):
    return json.loads(get(f"{flink}/jobs/{job}/checkpoints"))


def samples(metrics, name, **labels):
    """Values of the samples called `name` whose labels include `labels`."""
    out = []
    for line in metrics.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, value = line.rsplit(" ", 1)
        metric, _, rest = series.partition("{")
        if metric != name:
            continue
        pairs = dict(p.split("=", 1) for p in rest.rstrip("}").replace('",', '"\x00').split("\x00") if p)
        pairs = {k: v.strip('"') for k, v in pairs.items()}
        if all(pairs.get(k) == v for k, v in labels.items()):
            out.append((line, float(value)))
    return out


def nearest_rank(values, q):
    s = sorted(values)
    rank = min(max(math.ceil(q * len(s)), 1), len(s))
    return s[rank - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flink", required=True)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--cluster", default="e2e")
    ap.add_argument("--seconds", type=int, default=40)
    a = ap.parse_args()

    completed = {}
    deadline = time.time() + a.seconds
    while time.time() < deadline:
        stats = flink_checkpoints(a.flink, a.job)
        for h in stats.get("history", []):
            if h.get("status") == "COMPLETED" and not h.get("is_savepoint"):
                completed.setdefault(h["id"], h["end_to_end_duration"])
        time.sleep(1)

    ok = True
    for attempt in range(30):
        stats = flink_checkpoints(a.flink, a.job)
        time.sleep(2.5)  # two daemon polls
        metrics = get(f"{a.daemon}/metrics")
        again = flink_checkpoints(a.flink, a.job)
        if stats["counts"] != again["counts"]:
            continue  # a checkpoint finished meanwhile; try again
        for h in again.get("history", []):
            if h.get("status") == "COMPLETED" and not h.get("is_savepoint"):
                completed.setdefault(h["id"], h["end_to_end_duration"])
        totals = {s: samples(metrics, "flink_checkpoints_total", cluster=a.cluster, job_id=a.job, status=s)
                  for s in ("completed", "failed")}
        if all(t and t[0][1] == again["counts"][s] for s, t in totals.items()):
            break
    else:
        print("FAIL: flink_checkpoints_total never matched Flink's counts", file=sys.stderr)
        ok = False

    print("Flink counts:  ", json.dumps(again["counts"]))
    print("Flink summary: end_to_end_duration", json.dumps(again["summary"]["end_to_end_duration"]))
    for s, t in totals.items():
        for line, _ in t:
            print("daemon:        ", line)
    p95_lines = samples(metrics, "flink_checkpoint_duration_seconds", cluster=a.cluster, job_id=a.job, quantile="0.95")
    count = samples(metrics, "flink_checkpoint_duration_seconds_count", cluster=a.cluster, job_id=a.job)
    for line, _ in p95_lines + count:
        print("daemon:        ", line)
    for name in ("flink_checkpoint_alignment_duration_seconds", "flink_checkpoint_start_delay_seconds",
                 "flink_checkpoint_sync_duration_seconds", "flink_checkpoint_async_duration_seconds"):
        for line, _ in samples(metrics, name, cluster=a.cluster, job_id=a.job, quantile="0.95"):
            print("daemon:        ", line)

    durations = list(completed.values())
    # The daemon records checkpoints it sees; it started before the job, so it saw them all.
    if count and count[0][1] == len(durations) and durations:
        want = nearest_rank(durations, 0.95) / 1000.0
        got = p95_lines[0][1]
        print(f"nearest-rank P95 of {len(durations)} distinct completed checkpoints: {want:.3f} s; exported {got:.3f} s")
        if abs(got - want) > want * 0.01 + 1e-9:
            print("FAIL: P95 differs", file=sys.stderr)
            ok = False
    else:
        print(f"FAIL: daemon recorded {count[0][1] if count else None} checkpoints, this script saw {len(durations)}",
              file=sys.stderr)
        ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
