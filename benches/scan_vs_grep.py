#!/usr/bin/env python3
"""CI's guard on scan-logs' speed (issue 42): scan-logs against grep on the same real-log
corpus, in the same job, and a non-zero exit when scan-logs falls below MIN_RATIO x grep.

It builds the binary (cargo --profile PROFILE, unless BIN is given), builds the corpus from
every captured Flink JobManager and TaskManager log (benches/log-corpus.py, deterministic), then
runs, interleaved so that a noisy moment hurts all three alike, RUNS times each:

    grep -c -E 'expired before completing|Decline checkpoint|Did not receive barrier' CORPUS
    checkpoint-sentinel scan-logs CORPUS                 (text report)
    checkpoint-sentinel scan-logs --format json CORPUS   (JSON report)

Output goes to a file (GNU grep stops at the first match when its output is /dev/null). The
ratio is grep's minimum wall time over scan-logs' minimum: minima, so that one slow run on a
shared machine does not fail the check; both reports must reach MIN_RATIO.

    benches/scan_vs_grep.py                          # PROFILE=release RUNS=5 CORPUS_MB=300 MIN_RATIO=1.0
    BIN=/path/to/checkpoint-sentinel benches/scan_vs_grep.py   # an existing build (e.g. an older one)

Environment: PROFILE (cargo profile, default release), BIN, RUNS (default 5), CORPUS_MB
(default 300), MIN_RATIO (default 1.0), CARGO_TARGET_DIR.
"""

import os
import resource
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
PROFILE = os.environ.get("PROFILE", "release")
RUNS = int(os.environ.get("RUNS", "5"))
CORPUS_MB = int(os.environ.get("CORPUS_MB", "300"))
MIN_RATIO = float(os.environ.get("MIN_RATIO", "1.0"))
FAILURE_NEEDLES = "expired before completing|Decline checkpoint|Did not receive barrier"


def build():
    if os.environ.get("BIN"):
        return os.environ["BIN"]
    t0 = time.monotonic()
    subprocess.run(["cargo", "build", "--quiet", "--profile", PROFILE, "--bin", "checkpoint-sentinel"], cwd=ROOT, check=True)
    print(f"cargo build --profile {PROFILE}: {time.monotonic() - t0:.0f} s", flush=True)
    return os.path.join(TARGET, PROFILE, "checkpoint-sentinel")


def corpus():
    work = os.path.join(TARGET, "log-corpus")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"flink-real-{CORPUS_MB}m.log")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "benches", "log-corpus.py"), path, "--mb", str(CORPUS_MB)], check=True)
    return path, work


def timed(argv, out_path, ok_codes):
    """Wall seconds and CPU seconds (user + system) of one run, output to a file."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        rc = subprocess.run(argv, stdout=out, stderr=subprocess.DEVNULL).returncode
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc not in ok_codes:
        sys.exit(f"scan_vs_grep: {' '.join(argv)} exited {rc}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    binary = build()
    path, work = corpus()
    size = os.path.getsize(path)
    commands = {
        "grep": (["grep", "-c", "-E", FAILURE_NEEDLES, path], {0, 1}),
        # scan-logs exits 1 when the logs show failed checkpoints (these do).
        "scan-logs text": ([binary, "scan-logs", path], {0, 1}),
        "scan-logs json": ([binary, "scan-logs", "--format", "json", path], {0, 1}),
    }
    load = os.getloadavg()[0]
    walls = {name: [] for name in commands}
    cpus = {name: [] for name in commands}
    for run in range(RUNS + 1):  # the first round warms the page cache and is not counted
        for name, (argv, ok) in commands.items():
            wall, cpu = timed(argv, os.path.join(work, "out-" + name.replace(" ", "-")), ok)
            if run > 0:
                walls[name].append(wall)
                cpus[name].append(cpu)
    print(f"corpus {path}: {size} bytes; {RUNS} runs each, interleaved; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| command | min s | median s | CPU s (min) | MB/s (min) | grep's min / its min |")
    print("|---|---|---|---|---|---|")
    grep_min = min(walls["grep"])
    ratios = {}
    for name in commands:
        w = sorted(walls[name])
        ratios[name] = grep_min / w[0]
        print(f"| {name} | {w[0]:.3f} | {w[len(w) // 2]:.3f} | {min(cpus[name]):.3f} | {size / w[0] / 1e6:.0f} | {ratios[name]:.2f}x |")
    failed = [n for n in ("scan-logs text", "scan-logs json") if ratios[n] < MIN_RATIO]
    if failed:
        print(f"FAIL: {', '.join(failed)} below {MIN_RATIO:.2f}x grep (docs/performance.md, issue 42)")
        sys.exit(1)
    print(f"ok: scan-logs text {ratios['scan-logs text']:.2f}x, json {ratios['scan-logs json']:.2f}x grep (at least {MIN_RATIO:.2f}x)")


if __name__ == "__main__":
    main()
