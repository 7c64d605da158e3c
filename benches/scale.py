#!/usr/bin/env python3
"""Scale runs of issue 31: the demo's simulator with N jobs and a daemon polling it, sampled each
SAMPLE seconds for RSS, CPU, open fds, poll rounds and the store's size; at the end /metrics is
scraped with and without gzip. Writes samples.csv and result.json into WORK and prints a table.

    benches/scale.py --jobs 10000 --minutes 10                 # the 10,000-job run
    benches/scale.py --jobs 2000 --minutes 60 --interval-scale 1 --store   # the compressed day
    benches/scale.py --jobs 2000 --minutes 5 --heaptrack --bin target/profiling/checkpoint-sentinel
                                                               # a heap profile (benches/heap_by_part.py)

The simulator's `--interval-scale` multiplies the demo's intervals (1: the demo's pace, one
checkpoint every 2-4 s per job, so an hour holds about a day of checkpoints at 60 s intervals;
30: 60 s intervals). Everything the daemon reads is local; `--rest-delay` adds a network
round trip to every REST answer.
"""
import argparse
import csv
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get(url, headers=None, timeout=60):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read(), {k.lower(): v for k, v in r.headers.items()}


def wait_http(url, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        try:
            get(url, timeout=2)
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"not answering: {url}")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def dir_bytes(path):
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--sample", type=float, default=60, help="seconds between samples")
    ap.add_argument("--interval-scale", type=int, default=30)
    ap.add_argument("--rest-delay", default="5ms")
    ap.add_argument("--poll-interval", default="10s")
    ap.add_argument("--large-estate", action="store_true",
                    help='profile = "large-estate": [metrics] operators = false, quantiles = [0.5, 0.95]; '
                         "[state] recent_checkpoints = 8, p95_history_points = 30")
    ap.add_argument("--max-concurrent-requests", type=int, default=0, help="[[clusters]] setting; 0: the default")
    ap.add_argument("--store", action="store_true", help="keep the checkpoint store on ([store] enabled)")
    ap.add_argument("--store-max-records", type=int, default=250000)
    ap.add_argument("--max-jobs", type=int, default=0, help="[[clusters]] max_jobs; 0: the default")
    ap.add_argument("--stats-window", default="", help="[stats] window (e.g. 2m for a compressed day); empty: the default")
    ap.add_argument("--recent-checkpoints", type=int, default=0,
                    help="[state] recent_checkpoints; 0: the default (32), or 8 with --large-estate")
    ap.add_argument("--persist-interval", default="", help="[state] persist_interval; empty: the default")
    ap.add_argument("--heaptrack", action="store_true", help="run the daemon under heaptrack (a build without jemalloc: `cargo build --profile profiling --no-default-features`)")
    ap.add_argument("--bin", default=os.environ.get("SENTINEL_BIN", os.path.join(ROOT, "target/release/checkpoint-sentinel")))
    ap.add_argument("--sim-bin", default=None, help="the simulator's binary (default: --bin)")
    ap.add_argument("--work", default=os.environ.get("WORK", "/tmp/sentinel-scale"))
    ap.add_argument("--port-base", type=int, default=int(os.environ.get("PORT_BASE", "18400")))
    a = ap.parse_args()

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(f"{a.work}/log")
    flink_port, daemon_port = a.port_base, a.port_base + 1
    sim = subprocess.Popen(
        [a.sim_bin or a.bin, "demo", "--no-daemon", "--jobs", str(a.jobs), "--interval-scale", str(a.interval_scale),
         "--rest-delay", a.rest_delay, "--flink-listen", f"127.0.0.1:{flink_port}", "--log-file", f"{a.work}/log/jm.log"],
        stdout=open(f"{a.work}/sim.out", "w"), stderr=subprocess.STDOUT)
    wait_http(f"http://127.0.0.1:{flink_port}/overview", 120)
    config = [
        *(['profile = "large-estate"'] if a.large_estate else []),
        "[server]", f'listen = "127.0.0.1:{daemon_port}"',
        "[state]", f'dir = "{a.work}/state"',
        *([f'persist_interval = "{a.persist_interval}"'] if a.persist_interval else []),
        *([f"recent_checkpoints = {a.recent_checkpoints}"] if a.recent_checkpoints else []),
        "[store]", f"enabled = {'true' if a.store else 'false'}", f"max_records = {a.store_max_records}",
    ]
    if a.stats_window:
        config += ["[stats]", f'window = "{a.stats_window}"']
    config += ["[[clusters]]", 'name = "perf"', f'url = "http://127.0.0.1:{flink_port}"',
               f'poll_interval = "{a.poll_interval}"']
    if a.max_jobs:
        config.append(f"max_jobs = {a.max_jobs}")
    if a.max_concurrent_requests:
        config.append(f"max_concurrent_requests = {a.max_concurrent_requests}")
    config += ["[[logs]]", 'cluster = "perf"', f'paths = ["{a.work}/log/*.log"]']
    with open(f"{a.work}/sentinel.toml", "w") as f:
        f.write("\n".join(config) + "\n")
    cmd = [a.bin, "run", "--config", f"{a.work}/sentinel.toml"]
    if a.heaptrack:
        cmd = ["heaptrack", "-o", f"{a.work}/heaptrack"] + cmd
    daemon = subprocess.Popen(cmd, stdout=open(f"{a.work}/daemon.out", "w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{daemon_port}"
    wait_http(base + "/healthz", 120)
    started = time.time()
    pid = daemon.pid
    if a.heaptrack:  # the daemon is heaptrack's child
        for _ in range(100):  # heaptrack starts the daemon after its own setup
            found = subprocess.run(["pgrep", "-P", str(daemon.pid), "-f", "checkpoint-sentinel"],
                                   capture_output=True, text=True).stdout.split()
            if found:
                pid = int(found[0])
                break
            time.sleep(0.1)

    rounds = {}  # polls_total -> last_poll_duration_ms
    first_round_s = None

    def poll_rounds():
        try:
            doc = json.loads(get(base + "/api/v1/clusters", timeout=10)[0])
        except Exception:
            return None
        clusters = doc["clusters"] if isinstance(doc, dict) and "clusters" in doc else doc
        c = clusters[0]
        if c.get("polls_total") and c.get("last_poll_duration_ms") is not None:
            rounds[c["polls_total"]] = c["last_poll_duration_ms"]
        return c

    t0 = time.time()
    c0 = cpu_seconds(pid)
    sim_c0 = cpu_seconds(sim.pid)
    rows = []
    last_cpu, last_t = c0, t0
    next_sample = t0
    end = t0 + a.minutes * 60
    while True:
        now = time.time()
        poll_rounds()
        if first_round_s is None and rounds:
            first_round_s = round(now - started, 1)
        if now >= next_sample:
            cpu = cpu_seconds(pid)
            watched = None
            try:
                for line in get(base + "/metrics", timeout=120)[0].decode().splitlines():
                    if line.startswith("checkpoint_sentinel_watched_jobs"):
                        watched = float(line.split()[-1])
            except Exception:
                pass
            recent = [v for k, v in sorted(rounds.items())[-30:]]
            row = {
                "minute": round((now - t0) / 60, 2),
                "rss_mb": round(status_kb(pid, "VmRSS") / 1024, 1),
                "cpu_pct": round(100 * (cpu - last_cpu) / max(1e-9, now - last_t), 1) if rows else None,
                "open_fds": open_fds(pid),
                "store_mb": round(dir_bytes(f"{a.work}/state") / 2**20, 1),
                "rounds": len(rounds),
                "round_p50_s": (quantile(recent, 0.5) or 0) / 1000,
                "round_p95_s": (quantile(recent, 0.95) or 0) / 1000,
                "watched_jobs": watched,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            last_cpu, last_t = cpu, now
            next_sample += a.sample
        if now >= end or daemon.poll() is not None:
            break
        time.sleep(min(2.0, max(0.1, next_sample - time.time())))

    c1 = cpu_seconds(pid)
    sim_c1 = cpu_seconds(sim.pid)
    elapsed = time.time() - t0
    scrape = {}
    for name, headers in (("plain", {}), ("gzip", {"Accept-Encoding": "gzip"})):
        times, size = [], 0
        for _ in range(5):
            s = time.time()
            body, h = get(base + "/metrics", headers, timeout=120)
            times.append(time.time() - s)
            size = len(body)
            if name == "gzip":
                assert h.get("content-encoding") == "gzip", h
                series = sum(1 for line in gzip.decompress(body).splitlines() if line and not line.startswith(b"#"))
                scrape["series"] = series
        scrape[name] = {"bytes": size, "median_s": round(sorted(times)[2], 3), "max_s": round(max(times), 3)}
    durations = [v for k, v in sorted(rounds.items())][1:]  # the first round meets every job anew
    result = {
        "jobs": a.jobs, "minutes": round(elapsed / 60, 1), "interval_scale": a.interval_scale,
        "rest_delay": a.rest_delay, "poll_interval": a.poll_interval, "metrics": "large-estate" if a.large_estate else "default", "recent_checkpoints": a.recent_checkpoints or (8 if a.large_estate else 32),
        "persist_interval": a.persist_interval or "5s",
        "max_concurrent_requests": a.max_concurrent_requests or "chosen per round",
        "store": a.store, "stats_window": a.stats_window or "1h", "daemon_cpu_pct": round(100 * (c1 - c0) / elapsed, 1),
        "simulator_cpu_pct": round(100 * (sim_c1 - sim_c0) / elapsed, 1),
        "rss_mb_first": rows[0]["rss_mb"], "rss_mb_last": rows[-1]["rss_mb"],
        "peak_rss_mb": round(status_kb(pid, "VmHWM") / 1024, 1),
        "rounds": len(durations), "round_p50_s": (quantile(durations, 0.5) or 0) / 1000,
        "round_p95_s": (quantile(durations, 0.95) or 0) / 1000, "scrape": scrape,
        "watched_jobs": rows[-1]["watched_jobs"], "first_round_s": first_round_s,
    }
    with open(f"{a.work}/result.json", "w") as f:
        json.dump(result, f, indent=1)
    with open(f"{a.work}/samples.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(json.dumps(result, indent=1))
    # Under heaptrack, SIGKILL the daemon itself: what it still held then shows as "leaked",
    # which is its live heap at the end of the run.
    os.kill(pid, signal.SIGKILL if a.heaptrack else signal.SIGTERM)
    try:
        daemon.wait(timeout=120)
    except subprocess.TimeoutExpired:
        daemon.kill()
    sim.kill()


if __name__ == "__main__":
    main()
