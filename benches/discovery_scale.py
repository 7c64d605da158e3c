"""1,000 discovered single-job clusters: the daemon's CPU and RSS, and the time from a change of
a discovery file to the new cluster's first poll.

Usage: discovery_scale.py BIN WORKDIR [--clusters 1000] [--port-base 18200] [--seconds 60]

One simulator with one job (`demo --no-daemon --jobs 1`) stands in for every JobManager: the
file lists it 1,000 times under different `cluster` labels, so the daemon runs 1,000 pollers
(one task, client and state each) exactly as for 1,000 clusters; only the far side is shared.
Then, five times, a file with one more cluster is written, and the time until
/api/v1/clusters shows it polled with its job (its series exist from that poll) is taken.
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
p.add_argument("--clusters", type=int, default=1000)
p.add_argument("--port-base", type=int, default=18200)
p.add_argument("--seconds", type=int, default=60)
a = p.parse_args()
os.makedirs(a.work, exist_ok=True)
sim_port, daemon_port = a.port_base, a.port_base + 1
hz = os.sysconf("SC_CLK_TCK")


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def wait(url):
    for _ in range(200):
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


def write_targets(path, names):
    groups = [{"targets": [f"127.0.0.1:{sim_port}"], "labels": {"cluster": n}} for n in names]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(groups, f)
    os.rename(tmp, path)  # as a ConfigMap update or a careful writer does


sd = os.path.join(a.work, "sd")
os.makedirs(sd, exist_ok=True)
for f in os.listdir(sd):
    os.remove(os.path.join(sd, f))
names = [f"c{i:04d}" for i in range(a.clusters)]
write_targets(os.path.join(sd, "clusters.json"), names)
config = os.path.join(a.work, "sentinel.toml")
with open(config, "w") as f:
    f.write(
        f'[server]\nlisten = "127.0.0.1:{daemon_port}"\n[state]\ndir = "{a.work}/state"\n'
        f'[discovery]\nfiles = ["{sd}/*.json"]\nmax_clusters = {a.clusters + 10}\n'
        f'[discovery.defaults]\npoll_interval = "10s"\n'
    )
procs = []
try:
    sim = subprocess.Popen(
        [a.bin, "demo", "--no-daemon", "--jobs", "1", "--interval-scale", "30",
         "--flink-listen", f"127.0.0.1:{sim_port}", "--log-file", f"{a.work}/log/jm.log"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(sim)
    wait(f"http://127.0.0.1:{sim_port}/overview")
    daemon = subprocess.Popen([a.bin, "run", "--config", config],
                              stdout=open(f"{a.work}/daemon.out", "w"), stderr=subprocess.STDOUT)
    procs.append(daemon)
    wait(f"http://127.0.0.1:{daemon_port}/readyz")
    time.sleep(30)  # warm-up: every cluster's first round
    c0 = cpu(daemon.pid)
    time.sleep(a.seconds)
    c1 = cpu(daemon.pid)
    clusters = json.loads(get(f"http://127.0.0.1:{daemon_port}/api/v1/clusters"))["clusters"]
    polled = sum(1 for c in clusters if c["polls_total"] > 0 and c["jobs"] > 0)
    print(f"{a.clusters} discovered clusters ({polled} polled with their job), each polled every 10 s: "
          f"CPU {100 * (c1 - c0) / a.seconds:.2f} % of a core over {a.seconds} s, "
          f"RSS {rss(daemon.pid):.1f} MB (peak {rss(daemon.pid, 'VmHWM'):.1f} MB)")
    took = []
    for k in range(5):
        new = f"new{k}"
        names.append(new)
        start = time.monotonic()
        write_targets(os.path.join(sd, "clusters.json"), names)
        while True:
            clusters = json.loads(get(f"http://127.0.0.1:{daemon_port}/api/v1/clusters"))["clusters"]
            c = next((c for c in clusters if c["name"] == new), None)
            if c and c["polls_total"] > 0 and c["jobs"] > 0:
                break
            if time.monotonic() - start > 60:
                sys.exit(f"{new} not polled within 60 s")
            time.sleep(0.02)
        took.append(time.monotonic() - start)
        time.sleep(2)
    took.sort()
    print("file change -> new cluster's first poll: " + ", ".join(f"{t * 1000:.0f} ms" for t in took)
          + f" (median {took[2] * 1000:.0f} ms)")
finally:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait()
