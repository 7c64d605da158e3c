#!/usr/bin/env python3
"""Latency from a log line to Alertmanager (issue 10): p50/p99/max over N lines.

Starts a real Alertmanager (Debian's prometheus-alertmanager), the demo simulator with N jobs
(a Flink-shaped REST API), and the daemon tailing a log file with one rule of `for` 0:
`increase(log.expired, 10m) >= 1`. Then, one job at a time, appends a real Flink 2.x
"Checkpoint N of job J expired before completing." line with its stack trace (as the
JobManager writes it, in one write) and polls Alertmanager's /api/v2/alerts every 5 ms until
the alert for that job is there. Each job alerts once, so every line is a new alert.

    benches/log_to_alertmanager.py BIN WORKDIR [--lines 100] [--port-base 19740]

Prints one line per sample and a summary line `latency: p50 … p99 … max …` (milliseconds).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

STACK = (
    "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n"
    "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator$CheckpointCanceller.run"
    "(CheckpointCoordinator.java:2220) [flink-dist-2.3.0.jar:2.3.0]\n"
    "\tat java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:515) [?:?]\n"
    "\tat java.lang.Thread.run(Thread.java:840) [?:?]\n"
)


def get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_http(url, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        try:
            get(url)
            return
        except Exception:
            time.sleep(0.2)
    raise SystemExit(f"no answer from {url}")


def quantile(sorted_values, q):
    # Nearest rank, as the daemon's own summaries.
    rank = max(1, -(-len(sorted_values) * q // 1))
    return sorted_values[int(rank) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--lines", type=int, default=100)
    ap.add_argument("--port-base", type=int, default=19740)
    args = ap.parse_args()

    am_bin = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if not am_bin:
        raise SystemExit("needs prometheus-alertmanager (apt-get install prometheus-alertmanager)")
    flink_port, daemon_port, am_port = args.port_base, args.port_base + 1, args.port_base + 2
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/log")
    procs = []

    def start(cmd, name):
        out = open(f"{work}/{name}.out", "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p

    try:
        with open(f"{work}/am.yml", "w") as f:
            f.write("route:\n  receiver: none\nreceivers:\n  - name: none\n")
        start([am_bin, f"--config.file={work}/am.yml", f"--storage.path={work}/am",
               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="], "alertmanager")
        start([args.bin, "demo", "--no-daemon", "--jobs", str(args.lines), "--interval-scale", "30",
               "--flink-listen", f"127.0.0.1:{flink_port}",
               "--log-file", f"{work}/sim/flink-demo-standalonesession-0.log"], "simulator")
        wait_http(f"http://127.0.0.1:{am_port}/-/ready")
        wait_http(f"http://127.0.0.1:{flink_port}/overview")
        jobs = [j["jid"] for j in json.loads(get(f"http://127.0.0.1:{flink_port}/jobs/overview"))["jobs"]]
        log = f"{work}/log/flink-jobmanager.log"
        open(log, "w").close()
        with open(f"{work}/sentinel.toml", "w") as f:
            f.write(f"""
[server]
listen = "127.0.0.1:{daemon_port}"
[state]
dir = "{work}/state"
[[clusters]]
name = "latency"
url = "http://127.0.0.1:{flink_port}"
poll_interval = "10s"
[[logs]]
cluster = "latency"
paths = ["{log}"]
[alerting]
alertmanagers = ["http://127.0.0.1:{am_port}"]
default_rules = false
[[rules]]
name = "LogLineProbe"
expr = "increase(log.expired, 10m) >= 1"
for = "0s"
severity = "info"
class = "failure"
summary = "{{{{ job_name }}}} logged an expired checkpoint"
description = "probe"
runbook_url = "https://example.invalid/probe"
""")
        start([args.bin, "run", "--config", f"{work}/sentinel.toml"], "daemon")
        wait_http(f"http://127.0.0.1:{daemon_port}/readyz")
        # Every job known from REST and one evaluation round done, as in a running deployment.
        time.sleep(20)

        alerts_url = f"http://127.0.0.1:{am_port}/api/v2/alerts?filter=alertname%3D%22LogLineProbe%22"
        samples = []
        for i, job in enumerate(jobs[: args.lines]):
            time.sleep(random.uniform(0.05, 0.3))
            stamp = time.strftime("%Y-%m-%d %H:%M:%S") + ",%03d" % (time.time() % 1 * 1000)
            line = (f"{stamp} INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
                    f"Checkpoint {i + 1} of job {job} expired before completing.\n")
            t0 = time.monotonic()
            with open(log, "a") as f:
                f.write(line + STACK)
            while True:
                alerts = json.loads(get(alerts_url))
                if any(a["labels"].get("job_id") == job for a in alerts):
                    break
                if time.monotonic() - t0 > 10:
                    raise SystemExit(f"line {i}: no alert for job {job} after 10 s")
                time.sleep(0.005)
            ms = (time.monotonic() - t0) * 1000
            samples.append(ms)
            print(f"line {i + 1:3d} job {job[:8]}…: {ms:.0f} ms", flush=True)
        s = sorted(samples)
        print(f"latency: n {len(s)} p50 {quantile(s, 0.5):.0f} ms p99 {quantile(s, 0.99):.0f} ms "
              f"max {s[-1]:.0f} ms")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
