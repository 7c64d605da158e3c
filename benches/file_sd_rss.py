"""The daemon's RSS while it re-reads a large file_sd file (issue 30: a 6.3 MB file re-read
every 5 s took RSS from 39 to 587 MB, and 563 MB stayed after the file shrank).

Usage: file_sd_rss.py BIN WORKDIR [--mib 16] [--seconds 60] [--mode unchanged|rewritten]
                      [--max-clusters 100]

Writes a JSON file_sd file of about --mib MiB (one target a group, each with a `cluster` label
and two more labels, every target 127.0.0.1:1 so that the polled ones fail at once), starts BIN
with `[discovery] files` on it, `max_file_bytes` above its size and `refresh_interval = "5s"`,
and samples VmRSS every second for --seconds. --mode rewritten gives the file a new
modification time every 5 s (the content is the same), so that a daemon that reads only
changed files reads it every time too. Then the file is replaced by a one-target file and RSS is
sampled 20 s more. Prints the RSS at start, the peak, the median of the window and the end.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("bin")
p.add_argument("work")
p.add_argument("--mib", type=float, default=16)
p.add_argument("--seconds", type=int, default=60)
p.add_argument("--mode", choices=["unchanged", "rewritten"], default="unchanged")
p.add_argument("--max-clusters", type=int, default=100)
a = p.parse_args()
os.makedirs(a.work, exist_ok=True)
sd = os.path.join(a.work, "targets.json")
state = os.path.join(a.work, "state")
os.makedirs(state, exist_ok=True)

groups = []
size = 2
i = 0
while size < a.mib * 1024 * 1024 - 200:
    g = {"targets": ["127.0.0.1:1"], "labels": {"cluster": f"c{i:07d}", "team": f"team-{i % 97}", "env": "prod"}}
    text = json.dumps(g)
    groups.append(text)
    size += len(text) + 1
    i += 1
body = "[" + ",".join(groups) + "]"
with open(sd, "w") as f:
    f.write(body)
print(f"{sd}: {len(body)} bytes, {i} targets")

config = os.path.join(a.work, "sentinel.toml")
with open(config, "w") as f:
    f.write(
        f"""[server]
listen = "127.0.0.1:0"
[state]
dir = "{state}"
[[clusters]]
name = "static"
url = "http://127.0.0.1:1"
poll_interval = "60s"
[discovery]
files = ["{sd}"]
refresh_interval = "5s"
max_clusters = {a.max_clusters}
max_file_bytes = {len(body) + 1024}
[discovery.defaults]
poll_interval = "60s"
"""
    )


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


env = dict(os.environ, SENTINEL_LOG="warn")
proc = subprocess.Popen([a.bin, "run", "--config", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
try:
    time.sleep(1)
    start = rss(proc.pid)
    samples = []
    t0 = time.time()
    last_touch = t0
    while time.time() - t0 < a.seconds:
        time.sleep(1)
        if proc.poll() is not None:
            sys.exit(f"the daemon exited with {proc.returncode}")
        if a.mode == "rewritten" and time.time() - last_touch >= 5:
            os.utime(sd)
            last_touch = time.time()
        samples.append(rss(proc.pid))
    with open(sd + ".tmp", "w") as f:
        f.write('[{"targets": ["127.0.0.1:1"], "labels": {"cluster": "one"}}]')
    os.rename(sd + ".tmp", sd)
    after = []
    for _ in range(20):
        time.sleep(1)
        after.append(rss(proc.pid))
    print(
        f"mode {a.mode}: RSS at 1 s {start:.1f} MB; over {a.seconds} s peak {max(samples):.1f} MB, "
        f"median {statistics.median(samples):.1f} MB, end {samples[-1]:.1f} MB; "
        f"20 s after the file shrank to one target {after[-1]:.1f} MB"
    )
finally:
    proc.terminate()
    proc.wait()
