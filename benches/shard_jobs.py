"""One session cluster of 1,000 jobs shared out between replicas (`shard_jobs = true`): each
replica's share of the jobs, its poll-round P50/P95, CPU and RSS, against one replica alone.

Usage: shard_jobs.py BIN WORKDIR [--replicas 3] [--jobs 1000] [--delay 5ms] [--port-base 18400]
                     [--seconds 90]

The simulator (`demo --no-daemon --jobs N --rest-delay D`) is the session cluster; the replicas
run as the Helm StatefulSet's pods do (SENTINEL_SHARD_INDEX, SENTINEL_SHARD_COUNT), polling it
every 10 s. After a 30 s warm-up, each replica's /api/v1/clusters is sampled every 0.5 s over
--seconds: a round's duration is `last_poll_duration_ms` at its `polls_total`.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

p = argparse.ArgumentParser()
p.add_argument("bin")
p.add_argument("work")
p.add_argument("--replicas", type=int, default=3)
p.add_argument("--jobs", type=int, default=1000)
p.add_argument("--delay", default="5ms")
p.add_argument("--port-base", type=int, default=18400)
p.add_argument("--seconds", type=int, default=90)
a = p.parse_args()
os.makedirs(a.work, exist_ok=True)
hz = os.sysconf("SC_CLK_TCK")
sim_port = a.port_base
ports = [a.port_base + 1 + r for r in range(a.replicas)]


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def wait(url):
    for _ in range(300):
        try:
            get(url)
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"{url} never answered")


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz


def rss(pid, key="VmRSS"):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024


procs = []
try:
    sim = subprocess.Popen(
        [a.bin, "demo", "--no-daemon", "--jobs", str(a.jobs), "--interval-scale", "30",
         "--rest-delay", a.delay, "--flink-listen", f"127.0.0.1:{sim_port}",
         "--log-file", f"{a.work}/log/jm.log"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(sim)
    wait(f"http://127.0.0.1:{sim_port}/overview")
    daemons = []
    for r, port in enumerate(ports):
        config = os.path.join(a.work, f"sentinel-{r}.toml")
        with open(config, "w") as f:
            f.write(
                f'[server]\nlisten = "127.0.0.1:{port}"\n[state]\ndir = "{a.work}/state-{r}"\n'
                f'[[clusters]]\nname = "session"\nurl = "http://127.0.0.1:{sim_port}"\n'
                f'poll_interval = "10s"\nshard_jobs = true\n'
            )
        env = dict(os.environ)
        if a.replicas > 1:
            env.update(SENTINEL_SHARD_INDEX=str(r), SENTINEL_SHARD_COUNT=str(a.replicas))
        d = subprocess.Popen([a.bin, "run", "--config", config], env=env,
                             stdout=open(f"{a.work}/daemon-{r}.out", "w"), stderr=subprocess.STDOUT)
        procs.append(d)
        daemons.append(d)
    for port in ports:
        wait(f"http://127.0.0.1:{port}/readyz")
    time.sleep(30)  # warm-up: every job's first sight
    c0 = [cpu(d.pid) for d in daemons]
    rounds = [dict() for _ in daemons]
    jobs = [0] * len(daemons)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        for r, port in enumerate(ports):
            c = json.loads(get(f"http://127.0.0.1:{port}/api/v1/clusters"))["clusters"][0]
            rounds[r][c["polls_total"]] = c["last_poll_duration_ms"]
            jobs[r] = c["jobs"]
        time.sleep(0.5)
    c1 = [cpu(d.pid) for d in daemons]
    for r, d in enumerate(daemons):
        first = min(rounds[r])
        ds = sorted(v for k, v in rounds[r].items() if k != first)
        q = lambda p: ds[min(len(ds) - 1, int(p * len(ds)))] / 1000 if ds else float("nan")
        per_round = (c1[r] - c0[r]) / max(1, len(rounds[r]) - 1)
        print(f"replica {r}/{a.replicas}: {jobs[r]} of {a.jobs} jobs (+{a.delay} per request), "
              f"{len(ds)} rounds, P50 {q(0.5):.2f} s, P95 {q(0.95):.2f} s; "
              f"CPU {100 * (c1[r] - c0[r]) / a.seconds:.2f} % of a core ({per_round:.2f} CPU s per round); "
              f"RSS {rss(d.pid):.1f} MB (peak {rss(d.pid, 'VmHWM'):.1f} MB)")
    if sum(jobs) != a.jobs:
        sys.exit(f"the replicas watch {sum(jobs)} jobs, not {a.jobs}")
finally:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait()
