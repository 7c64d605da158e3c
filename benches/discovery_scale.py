"""1,000 discovered single-job clusters: the daemon's CPU and RSS, and the time from a change of
a discovery file to the new cluster's first poll.

Usage: discovery_scale.py BIN WORKDIR [--clusters 1000] [--port-base 18200] [--seconds 60]
                          [--format json|yaml] [--replicas 1]

One simulator with one job (`demo --no-daemon --jobs 1`) stands in for every JobManager: the
file lists it 1,000 times under different `cluster` labels, so the daemon runs 1,000 pollers
(one task, client and state each) exactly as for 1,000 clusters; only the far side is shared.
Then, five times, a file with one more cluster is written, and the time until
/api/v1/clusters shows it polled with its job (its series exist from that poll) is taken.

With --replicas N, N daemons run as the Helm StatefulSet's replicas (SENTINEL_SHARD_INDEX and
SENTINEL_SHARD_COUNT): each reads the whole file and polls the clusters it owns; CPU and RSS are
given per replica, and a new cluster's time is until the replica that owns it polled it.
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
p.add_argument("--format", choices=["json", "yaml"], default="json")
p.add_argument("--replicas", type=int, default=1)
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
        if a.format == "json":
            json.dump(groups, f)
        else:  # block style, as a deploy pipeline writes it
            for n in names:
                f.write(f"- targets:\n    - 127.0.0.1:{sim_port}\n  labels:\n    cluster: {n}\n")
    os.rename(tmp, path)  # as a ConfigMap update or a careful writer does


def clusters_of(port):
    return json.loads(get(f"http://127.0.0.1:{port}/api/v1/clusters"))["clusters"]


sd = os.path.join(a.work, "sd")
os.makedirs(sd, exist_ok=True)
for f in os.listdir(sd):
    os.remove(os.path.join(sd, f))
ext = "json" if a.format == "json" else "yml"
names = [f"c{i:04d}" for i in range(a.clusters)]
write_targets(os.path.join(sd, f"clusters.{ext}"), names)
ports = [daemon_port + r for r in range(a.replicas)]
configs = []
for r, port in enumerate(ports):
    config = os.path.join(a.work, f"sentinel-{r}.toml")
    with open(config, "w") as f:
        f.write(
            f'[server]\nlisten = "127.0.0.1:{port}"\n[state]\ndir = "{a.work}/state-{r}"\n'
            f'[discovery]\nfiles = ["{sd}/*.{ext}"]\nmax_clusters = {a.clusters + 10}\n'
            f'[discovery.defaults]\npoll_interval = "10s"\n'
        )
    configs.append(config)
procs = []
try:
    sim = subprocess.Popen(
        [a.bin, "demo", "--no-daemon", "--jobs", "1", "--interval-scale", "30",
         "--flink-listen", f"127.0.0.1:{sim_port}", "--log-file", f"{a.work}/log/jm.log"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(sim)
    wait(f"http://127.0.0.1:{sim_port}/overview")
    daemons = []
    for r, config in enumerate(configs):
        env = dict(os.environ)
        if a.replicas > 1:
            env.update(SENTINEL_SHARD_INDEX=str(r), SENTINEL_SHARD_COUNT=str(a.replicas))
        d = subprocess.Popen([a.bin, "run", "--config", config], env=env,
                             stdout=open(f"{a.work}/daemon-{r}.out", "w"), stderr=subprocess.STDOUT)
        procs.append(d)
        daemons.append(d)
    for port in ports:
        wait(f"http://127.0.0.1:{port}/readyz")
    time.sleep(30)  # warm-up: every cluster's first round
    c0 = [cpu(d.pid) for d in daemons]
    time.sleep(a.seconds)
    c1 = [cpu(d.pid) for d in daemons]
    owned_total = 0
    for r, (d, port) in enumerate(zip(daemons, ports)):
        clusters = clusters_of(port)
        polled = sum(1 for c in clusters if c["polls_total"] > 0 and c["jobs"] > 0)
        owned_total += len(clusters)
        who = f"replica {r}/{a.replicas}: " if a.replicas > 1 else ""
        print(f"{who}{len(clusters)} of {a.clusters} discovered clusters ({polled} polled with their job, "
              f"{a.format} file), each polled every 10 s: "
              f"CPU {100 * (c1[r] - c0[r]) / a.seconds:.2f} % of a core over {a.seconds} s, "
              f"RSS {rss(d.pid):.1f} MB (peak {rss(d.pid, 'VmHWM'):.1f} MB)")
    if owned_total != a.clusters:
        sys.exit(f"the replicas poll {owned_total} clusters, not {a.clusters}")
    took = []
    for k in range(5):
        new = f"new{k}"
        names.append(new)
        start = time.monotonic()
        write_targets(os.path.join(sd, f"clusters.{ext}"), names)
        while True:
            found = [c for port in ports for c in clusters_of(port) if c["name"] == new]
            if any(c["polls_total"] > 0 and c["jobs"] > 0 for c in found):
                break
            if time.monotonic() - start > 60:
                sys.exit(f"{new} not polled within 60 s")
            time.sleep(0.02)
        took.append(time.monotonic() - start)
        if len(found) != 1:
            sys.exit(f"{new} polled by {len(found)} replicas")
        time.sleep(2)
    took.sort()
    print("file change -> new cluster's first poll: " + ", ".join(f"{t * 1000:.0f} ms" for t in took)
          + f" (median {took[2] * 1000:.0f} ms)")
finally:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait()
