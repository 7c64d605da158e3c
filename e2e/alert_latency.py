#!/usr/bin/env python3
"""e2e/alert_latency.py -- who pages first about failing checkpoints, on a live Flink (issue 22).

Starts a real Flink (e2e/flink.sh, default 1.20.5) with Flink's own Prometheus reporter, a real
Prometheus (15 s scrape and evaluation) with the one-line rule a Flink user would write,
`increase(flink_jobmanager_job_numberOfFailedCheckpoints[1m]) > 0`, plus this repository's
alerts/flink-checkpoints.rules.yml over the daemon's /metrics, and the daemon itself (product
defaults: 5 s REST poll, 15 s rule tick, JobManager and TaskManager logs tailed). Both send to
one real Alertmanager. Then it runs five `expired` jobs (every third checkpoint sleeps past its
4 s timeout) and one `healthy` job beside them, and watches:

* Alertmanager's /api/v2/alerts every 50 ms: when each alert (by who sent it, its name and its
  job) first arrives, and each firing episode (a new startsAt) -- flaps are episodes after the
  first;
* Flink's /jobs/:id/checkpoints every second: each expired checkpoint's trigger and failure
  time (the ground truth, in the JobManager's clock, the same host's);
* the daemon's /metrics every 200 ms: when flink_checkpoint_failures_seen_total counted each
  expiry.

At the end it cancels the healthy job (its in-progress checkpoint fails with "Checkpoint
Coordinator is suspending.") and watches 10 s more. It prints the latency table: per job, the
first alert about failing checkpoints after the first expiry for each setup; the early warning's
lead before the expiry; per expiry, when the daemon knew; flaps; and every alert on the healthy
job.

Flink's reporter has no bind-address option (it listens on every interface), so by default the
whole run happens in a private network namespace (`unshare -n`) that has only a loopback
interface; --no-netns runs on the host instead.

    SENTINEL_E2E_PORT_BASE=40000 e2e/alert_latency.py [--version 1.20.5] [--jobs 5] [--seconds 100]

Ports follow the base as in e2e/run.sh: Flink base+81.., the reporters base+140..+149,
Prometheus base+190, Alertmanager base+193, the daemon base+717.
"""

import argparse
import calendar
import json
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
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLINK = os.path.join(ROOT, "e2e", "flink.sh")
REPORTER_RULE = "FlinkReporterCheckpointFailed"


def get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def get_json(url, timeout=2.0):
    return json.loads(get(url, timeout))


def wait_http(url, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        try:
            get(url)
            return
        except Exception:
            time.sleep(0.25)
    raise SystemExit(f"no answer from {url}")


def iso_ms(text):
    """Alertmanager's RFC 3339 time -> epoch ms."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text)
    base = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    frac = float(m.group(2) or 0)
    tz = m.group(3)
    offset = 0 if tz == "Z" else (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60) * (1 if tz[0] == "+" else -1)
    return int((base + frac - offset) * 1000)


class Watch:
    """What the pollers saw, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.alerts = {}  # (via, alertname, job_id) -> {startsAt_ms: [first_seen_ms, last_seen_ms]}
        self.checkpoints = {}  # job_id -> {id: (trigger_ms, failure_ms or None, message)}
        self.counted = {}  # job_id -> [(seen_ms, failures_seen)]
        self.completed = {}  # job_id -> {id: (trigger_ms, ack_ms)}
        self.stop = threading.Event()


def watch_alertmanager(w, am):
    while not w.stop.is_set():
        now = int(time.time() * 1000)
        try:
            alerts = get_json(f"{am}/api/v2/alerts")
        except Exception:
            alerts = []
        with w.lock:
            for a in alerts:
                labels = a["labels"]
                if iso_ms(a["endsAt"]) <= now:
                    continue
                key = (labels.get("via", "daemon"), labels["alertname"], labels.get("job_id", ""))
                episodes = w.alerts.setdefault(key, {})
                seen = episodes.setdefault(iso_ms(a["startsAt"]), [now, now])
                seen[1] = now
        time.sleep(0.05)


def watch_flink(w, rest, jobs):
    while not w.stop.is_set():
        for job in jobs:
            try:
                stats = get_json(f"{rest}/jobs/{job}/checkpoints")
            except Exception:
                continue
            with w.lock:
                known = w.checkpoints.setdefault(job, {})
                for c in stats.get("history", []):
                    known[c["id"]] = (
                        c.get("trigger_timestamp"),
                        c.get("failure_timestamp") if c.get("status") == "FAILED" else None,
                        c.get("failure_message") or "",
                    )
                    if c.get("status") == "COMPLETED":
                        w.completed.setdefault(job, {})[c["id"]] = (
                            c.get("trigger_timestamp"), c.get("latest_ack_timestamp"))
        time.sleep(1.0)


def watch_daemon(w, daemon):
    pattern = re.compile(r'^flink_checkpoint_failures_seen_total\{[^}]*job_id="([0-9a-f]+)"[^}]*\} (\S+)', re.M)
    while not w.stop.is_set():
        try:
            text = get(f"{daemon}/metrics").decode()
        except Exception:
            text = ""
        now = int(time.time() * 1000)
        with w.lock:
            for job, value in pattern.findall(text):
                series = w.counted.setdefault(job, [])
                if not series or series[-1][1] != float(value):
                    series.append((now, float(value)))
        time.sleep(0.2)


def first_seen(w, via, name, job):
    episodes = w.alerts.get((via, name, job), {})
    return min((s[0] for s in episodes.values()), default=None)


def episodes_of(w, via, name, job):
    return sorted(w.alerts.get((via, name, job), {}).items())


def fmt_s(ms):
    return "never" if ms is None else f"{ms / 1000:.2f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="1.20.5")
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=100)
    ap.add_argument("--bin", default=os.environ.get("SENTINEL_BIN", os.path.join(ROOT, "target/debug/checkpoint-sentinel")))
    ap.add_argument("--no-netns", action="store_true")
    args = ap.parse_args()

    if not args.no_netns and os.environ.get("SENTINEL_NETNS") != "1":
        env = dict(os.environ, SENTINEL_NETNS="1")
        os.execvpe("unshare", ["unshare", "-n", sys.executable, *sys.argv], env)
    if os.environ.get("SENTINEL_NETNS") == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

    base = int(os.environ.get("SENTINEL_E2E_PORT_BASE", "18000"))
    os.environ["SENTINEL_E2E_PORT_BASE"] = str(base)
    rest = f"http://127.0.0.1:{base + 81}"
    am_port, prom_port, daemon_port = base + 193, base + 190, base + 717
    am, prom, daemon = (f"http://127.0.0.1:{p}" for p in (am_port, prom_port, daemon_port))
    reporter_ports = list(range(base + 140, base + 150))
    work = tempfile.mkdtemp(prefix="alert-latency-")
    procs = []

    def cleanup():
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run([FLINK, "stop", args.version], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"work folder (daemon, prometheus, alertmanager logs): {work}", file=sys.stderr)

    try:
        run(args, work, procs, rest, am, prom, daemon, am_port, prom_port, daemon_port, reporter_ports)
    finally:
        cleanup()


def run(args, work, procs, rest, am, prom, daemon, am_port, prom_port, daemon_port, reporter_ports):
    if not os.path.exists(args.bin):
        subprocess.run(["cargo", "build"], cwd=ROOT, check=True)
    env = dict(os.environ)
    env.setdefault("SENTINEL_E2E_SLOTS", str(2 * (args.jobs + 1)))
    env.setdefault("SENTINEL_E2E_TM_MEM", "2048m")
    env["SENTINEL_E2E_EXTRA_CONF"] = "\n".join(
        [
            "metrics.reporter.prom.factory.class: org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
            f"metrics.reporter.prom.port: {reporter_ports[0]}-{reporter_ports[-1]}",
        ]
    )
    subprocess.run([FLINK, "install", args.version], check=True, env=env)
    subprocess.run([FLINK, "start", args.version], check=True, env=env, stdout=subprocess.DEVNULL)
    log_dir = subprocess.run([FLINK, "log-dir", args.version], check=True, env=env, capture_output=True, text=True).stdout.strip()

    with open(f"{work}/alertmanager.yml", "w") as f:
        f.write('route:\n  receiver: "null"\n  group_wait: 0s\nreceivers:\n  - name: "null"\n')
    procs.append(subprocess.Popen(
        ["prometheus-alertmanager", f"--config.file={work}/alertmanager.yml", f"--storage.path={work}/am",
         f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
        stdout=open(f"{work}/alertmanager.log", "w"), stderr=subprocess.STDOUT))

    with open(f"{work}/reporter.rules.yml", "w") as f:
        f.write(f"""groups:
  - name: flink-reporter
    rules:
      - alert: {REPORTER_RULE}
        expr: increase(flink_jobmanager_job_numberOfFailedCheckpoints[1m]) > 0
        for: 0m
        labels:
          severity: warning
""")
    targets = ", ".join(f'"127.0.0.1:{p}"' for p in reporter_ports)
    with open(f"{work}/prometheus.yml", "w") as f:
        f.write(f"""global:
  scrape_interval: 15s
  evaluation_interval: 15s
  external_labels:
    via: prometheus
rule_files:
  - {work}/reporter.rules.yml
  - {ROOT}/alerts/flink-checkpoints.rules.yml
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:{am_port}"]
scrape_configs:
  - job_name: flink
    static_configs:
      - targets: [{targets}]
  - job_name: checkpoint-sentinel
    static_configs:
      - targets: ["127.0.0.1:{daemon_port}"]
""")
    procs.append(subprocess.Popen(
        ["prometheus", f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/prom",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=open(f"{work}/prometheus.log", "w"), stderr=subprocess.STDOUT))

    with open(f"{work}/sentinel.toml", "w") as f:
        f.write(f"""[server]
listen = "127.0.0.1:{daemon_port}"
[[clusters]]
name = "bench"
url = "{rest}"
[[logs]]
cluster = "bench"
paths = ["{log_dir}/flink-*-standalonesession-*.log", "{log_dir}/flink-*-taskexecutor-*.log"]
[state]
dir = "{work}/state"
[alerting]
alertmanagers = ["{am}"]
""")
    subprocess.run([args.bin, "check-config", f"{work}/sentinel.toml"], check=True, stdout=subprocess.DEVNULL)
    procs.append(subprocess.Popen([args.bin, "run", "--config", f"{work}/sentinel.toml"],
                                  stdout=open(f"{work}/daemon.log", "w"), stderr=subprocess.STDOUT))
    for url in (f"{daemon}/readyz", f"{am}/-/ready", f"{prom}/-/ready"):
        wait_http(url)

    def submit(scenario):
        out = subprocess.run([FLINK, "submit", args.version, scenario], check=True, env=env,
                             capture_output=True, text=True)
        return out.stdout.strip()

    healthy = submit("healthy")
    expired = [submit("expired") for _ in range(args.jobs)]
    jobs = [healthy, *expired]
    print(f"jobs: healthy {healthy}; expired {' '.join(expired)}", file=sys.stderr)

    w = Watch()
    threads = [threading.Thread(target=watch_alertmanager, args=(w, am), daemon=True),
               threading.Thread(target=watch_flink, args=(w, rest, jobs), daemon=True),
               threading.Thread(target=watch_daemon, args=(w, daemon), daemon=True)]
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    cancel_at = int(time.time() * 1000)
    subprocess.run([FLINK, "cancel", args.version, healthy], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(10)
    w.stop.set()
    for t in threads:
        t.join(5)
    report(w, healthy, expired, cancel_at, args)


def report(w, healthy, expired, cancel_at, args):
    rows = []  # (label, [per-job text])
    expiries = {}
    for job in expired:
        cps = w.checkpoints.get(job, {})
        expiries[job] = sorted(
            (cid, t, f) for cid, (t, f, msg) in cps.items() if f is not None and "expired" in msg.lower()
        )

    def latency_row(label, via, name, nth=0):
        cells, values = [], []
        for job in expired:
            exp = expiries[job]
            seen = first_seen(w, via, name, job)
            if len(exp) <= nth or seen is None:
                cells.append("never" if len(exp) > nth else "n/a")
                continue
            values.append(seen - exp[nth][2])
            cells.append(fmt_s(values[-1]))
        rows.append((label, cells, values))

    latency_row("Flink reporter + Prometheus (15 s), increase(flink_jobmanager_job_numberOfFailedCheckpoints[1m]) > 0",
                "prometheus", REPORTER_RULE)
    latency_row("checkpoint-sentinel FlinkCheckpointFailed (info; first log line)", "daemon", "FlinkCheckpointFailed")
    latency_row("alerts/ FlinkCheckpointFailed in Prometheus (15 s) over the daemon's /metrics",
                "prometheus", "FlinkCheckpointFailed")
    latency_row("checkpoint-sentinel FlinkCheckpointExpiredBurst (warning; after the 3rd expiry)",
                "daemon", "FlinkCheckpointExpiredBurst", nth=2)

    print(f"\n## First alert about failing checkpoints after the first expiry (Flink {args.version}, "
          f"{len(expired)} expired jobs + 1 healthy, {args.seconds} s; daemon at its defaults: "
          f"REST poll 5 s, rule tick 15 s, logs tailed)\n")
    print("| setup | " + " | ".join(f"job {i + 1}" for i in range(len(expired))) + " | median |")
    print("|---|" + "---|" * (len(expired) + 1))
    for label, cells, values in rows:
        median = fmt_s(statistics.median(values)) if values else "n/a"
        print(f"| {label} | " + " | ".join(cells) + f" | {median} |")

    print("\n## Early warning: FlinkCheckpointAboutToExpire first arrival, relative to the first expiry "
          "(negative = before it; the expiring checkpoint's age then)\n")
    print("| setup | " + " | ".join(f"job {i + 1}" for i in range(len(expired))) + " |")
    print("|---|" + "---|" * len(expired))
    for via, label in (("daemon", "checkpoint-sentinel"), ("prometheus", "alerts/ in Prometheus (15 s)")):
        cells = []
        for job in expired:
            exp = expiries[job]
            seen = first_seen(w, via, "FlinkCheckpointAboutToExpire", job)
            if not exp or seen is None:
                cells.append("never")
                continue
            _, trigger, failure = exp[0]
            cells.append(f"{(seen - failure) / 1000:+.2f} s (age {(seen - trigger) / 1000:.2f} s)")
        print(f"| {label} | " + " | ".join(cells) + " |")

    print("\n## Per expiry: when the daemon counted it (flink_checkpoint_failures_seen_total), "
          "and whether its early warning was firing at the expiry\n")
    print("| job | expiry | checkpoint | counted after | warning active at expiry |")
    print("|---|---|---|---|---|")
    for i, job in enumerate(expired):
        counted = w.counted.get(job, [])
        base = next((v for t, v in counted if expiries[job] and t < expiries[job][0][2]), 0.0)
        warn = episodes_of(w, "daemon", "FlinkCheckpointAboutToExpire", job)
        for k, (cid, trigger, failure) in enumerate(expiries[job]):
            at = next((t for t, v in counted if v >= base + k + 1), None)
            active = any(s[0] <= failure <= s[1] + 100 for _, s in warn)
            late = at - failure if at is not None else None
            print(f"| {i + 1} | {k + 1} | {cid} | {fmt_s(late)} | {'yes' if active else 'no'} |")

    print("\n## Each early-warning episode of the daemon: which checkpoint it started on\n")
    print("| job | episode start | checkpoint in progress then | its age | its end |")
    print("|---|---|---|---|---|")
    for i, job in enumerate(expired):
        spans = [(cid, t, f, "expired") for cid, t, f in expiries[job]]
        spans += [(cid, t, a, "completed") for cid, (t, a) in w.completed.get(job, {}).items() if t and a]
        for _, (seen, _) in episodes_of(w, "daemon", "FlinkCheckpointAboutToExpire", job):
            live = [(cid, seen - t, end, how) for cid, t, end, how in spans if t <= seen < end]
            if not live:
                print(f"| {i + 1} | {seen} | none (a stale or late warning) | | |")
            for cid, age, end, how in live:
                print(f"| {i + 1} | {seen} | {cid} | {age / 1000:.2f} s | {how} {(end - seen) / 1000:.2f} s later |")

    print("\n## Firing episodes per alert (flaps = episodes - 1)\n")
    print("| sent by | alert | job | episodes | flaps |")
    print("|---|---|---|---|---|")
    names = {job: f"expired {i + 1}" for i, job in enumerate(expired)}
    names[healthy] = "healthy"
    for (via, name, job), episodes in sorted(w.alerts.items()):
        print(f"| {via} | {name} | {names.get(job, job or '-')} | {len(episodes)} | {len(episodes) - 1} |")

    print("\n## Alerts on the healthy job (running beside them, cancelled at the end)\n")
    healthy_alerts = [(k, e) for k, e in w.alerts.items() if k[2] == healthy]
    if not healthy_alerts:
        print("none, before or after the cancel")
    for (via, name, _), episodes in healthy_alerts:
        for starts, (seen, last) in episodes.items():
            when = "after the cancel" if seen >= cancel_at else "before the cancel"
            print(f"- {via} {name}: first seen {when} ({(seen - cancel_at) / 1000:+.1f} s from it)")
    n_exp = [len(expiries[j]) for j in expired]
    print(f"\nexpirations seen per job: {n_exp}")


if __name__ == "__main__":
    main()
