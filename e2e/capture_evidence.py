#!/usr/bin/env python3
"""Capture what Flink's REST API answers about a running scenario job: the TaskManager evidence
(metrics, backpressure, thread dumps, flame graphs) beside the checkpoint statistics, as fixtures.

Usage: e2e/capture_evidence.py VERSION SCENARIO OUTDIR [--seconds 60] [--poll-s 5]

Submits SCENARIO (see `e2e/flink.sh scenarios`) to the running cluster of VERSION through
e2e/flink.sh (so SENTINEL_E2E_PORT_BASE / SENTINEL_E2E_CACHE apply), polls it for --seconds,
takes a final snapshot, cancels the job and cuts the JM/TM log lines written meanwhile.
Only talks to the local REST endpoint. Stdlib only. Files hold Flink's bytes as they came, except
a response over 400 kB (its longest lists halved until it fits, marked "capture_trimmed") and a
non-200 answer ({"http_status", "path", "body"}).

OUTDIR layout:
  scenario.json                      version, job id, job args, time span, thread-dump timings
  index.tsv                          every request: t_ms path status bytes ms (bytes before trimming)
  poll/NNN-checkpoints.json          /jobs/:jid/checkpoints every --poll-s seconds
  poll/NNN-checkpoint-<id>[-subtasks-<vertex>].json   details of IN_PROGRESS checkpoints
  poll/NNN-<vertex>-subtasks-metrics.json             ?get=<evidence metrics>&agg=min,max,avg,sum
  poll/NNN-<vertex>-subtask-<i>-metrics.json          ?get=<evidence metrics> per subtask
  poll/NNN-taskmanagers-metrics.json                  /taskmanagers/metrics?get=...&agg=...
  poll/NNN-tm-metrics.json                            /taskmanagers/:tm/metrics?get=<Status.*>
  thread-dump-NNN.json               /taskmanagers/:tm/thread-dump (scenario `blocked`: two, while held)
  flamegraph-<vertex>-<type>[-subtask-0].json         on_cpu | off_cpu | full (when enabled)
  rest/...                           overview, job, configs, checkpoints + details of the checkpoints
                                     that failed or are in progress, and the first/latest/slowest completed,
                                     metric lists and values, backpressure, taskmanagers
  logs/flink-<user>-{standalonesession,taskexecutor}-0-<host>.log   the bytes written while the job ran
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

E2E = os.path.dirname(os.path.abspath(__file__))
FLINK_SH = os.path.join(E2E, "flink.sh")

# Metric names the daemon reads as evidence (issue 27); whatever the version lacks is simply absent.
SUBTASK_METRICS = re.compile(
    r"^(busyTimeMsPerSecond|idleTimeMsPerSecond|backPressuredTimeMsPerSecond|"
    r"(hard|soft)BackPressuredTimeMsPerSecond|accumulateBusyTimeMs|accumulateIdleTimeMs|"
    r"accumulateBackPressuredTimeMs|isBackPressured|"
    r"buffers\.(inPoolUsage|outPoolUsage|inputFloatingBuffersUsage|inputExclusiveBuffersUsage|"
    r"inputQueueLength|outputQueueLength|inputQueueSize|outputQueueSize)|"
    r"numRecordsInPerSecond|numRecordsOutPerSecond|numBytesInPerSecond|numBytesOutPerSecond|"
    r"checkpointStartDelayNanos|checkpointAlignmentTime|mailboxLatencyMs|mailboxMailsPerSecond|"
    r"Shuffle\.Netty\..*(Usage|QueueLength)|.*rocksdb[._].*)$")
TM_METRICS = re.compile(
    r"^Status\.(JVM\.(GarbageCollector\..*|Memory\.(Heap|NonHeap|Metaspace|Direct|Mapped)\..*|"
    r"CPU\..*|Threads\..*|ClassLoader\..*)|Flink\.Memory\.Managed\..*|Shuffle\.Netty\..*|"
    r"Network\..*)$")
TM_AGG_METRICS = [
    "Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.Heap.Max", "Status.JVM.CPU.Load",
    "Status.JVM.GarbageCollector.G1_Young_Generation.Time",
    "Status.JVM.GarbageCollector.G1_Old_Generation.Time",
    "Status.JVM.GarbageCollector.G1_Young_Generation.Count",
    "Status.JVM.GarbageCollector.G1_Old_Generation.Count",
    "Status.JVM.GarbageCollector.All.Time", "Status.JVM.GarbageCollector.All.Count",
    "Status.Flink.Memory.Managed.Used", "Status.Flink.Memory.Managed.Total",
    "Status.Shuffle.Netty.AvailableMemorySegments", "Status.Shuffle.Netty.TotalMemorySegments",
]
MAX_GET = 40          # metric names per ?get= request
MAX_BYTES = 400_000   # larger responses are trimmed (lists cut) before they are written
MAX_INPROGRESS = 6    # IN_PROGRESS checkpoint detail captures per run
TARGET_VERTEX = {"blocked": "blocking-map", "gc": "stateful-map", "skew": "stateful-map", "rocksdb": "stateful-map"}


def flink(*args):
    return subprocess.run([FLINK_SH, *args], check=True, capture_output=True, text=True).stdout.strip()


class Capture:
    def __init__(self, version, scenario, out):
        self.version, self.scenario, self.out = version, scenario, out
        self.rest = flink("rest-url", version)
        self.log_dir = flink("log-dir", version)
        self.t0 = time.time()
        os.makedirs(out, exist_ok=True)
        self.index = open(os.path.join(out, "index.tsv"), "w")
        self.index.write("t_ms\tpath\tstatus\tbytes\tms\n")
        self.timings = {}

    def get(self, path, timeout=30):
        """GET path; returns (status, parsed JSON or None, bytes, ms); the raw body in self.raw."""
        start = time.time()
        try:
            with urllib.request.urlopen(self.rest + path, timeout=timeout) as r:
                body, status = r.read(), r.status
        except urllib.error.HTTPError as e:
            body, status = e.read(), e.code
        except Exception as e:  # noqa: BLE001 -- a capture keeps going
            body, status = json.dumps({"capture_error": str(e)}).encode(), 0
        ms = (time.time() - start) * 1000
        self.raw = body
        self.index.write(f"{int((start - self.t0) * 1000)}\t{path}\t{status}\t{len(body)}\t{ms:.1f}\n")
        self.index.flush()
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = {"non_json_body": body[:2000].decode("utf-8", "replace")}
        return status, data, len(body), ms

    def save(self, name, path, timeout=30):
        status, data, size, ms = self.get(path, timeout)
        p = os.path.join(self.out, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if status == 200 and size <= MAX_BYTES:
            with open(p, "wb") as f:  # Flink's bytes as they came
                f.write(self.raw)
            return status, data, size, ms
        doc = trim(data, MAX_BYTES) if size > MAX_BYTES else data
        if status != 200:
            doc = {"http_status": status, "path": path, "body": doc}
        with open(p, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        return status, data, size, ms


def trim(data, limit):
    """Cut the longest lists (and long strings) until the JSON fits; mark what was cut."""
    def size(d):
        return len(json.dumps(d))
    if data is None or size(data) <= limit:
        return data
    data = json.loads(json.dumps(data))
    for _ in range(64):
        if size(data) <= limit:
            break
        longest = [None, None, 0]

        def walk(node):
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
            for k, v in items:
                if isinstance(v, list) and len(v) > longest[2]:
                    longest[:] = [node, k, len(v)]
                if isinstance(v, (dict, list)):
                    walk(v)
        walk(data)
        parent, key, n = longest
        if parent is None or n < 2:
            break
        keep = max(1, n // 2)
        parent[key] = parent[key][:keep] + [{"capture_trimmed": f"{n - keep} of {n} entries cut"}]
    return data


def pick_details(history):
    """Checkpoint ids whose details are worth keeping: up to 6 not COMPLETED, the first, the
    latest and the slowest completed ones (every one would make the fixtures too big)."""
    done = [h for h in history if h.get("status") == "COMPLETED"]
    ids = [h["id"] for h in history if h.get("status") != "COMPLETED"][:6]
    if done:
        ids += [done[0]["id"], done[-1]["id"], max(done, key=lambda h: h.get("end_to_end_duration") or 0)["id"]]
    return sorted(set(ids))


def names(metric_list):
    return [m["id"] for m in (metric_list or []) if isinstance(m, dict) and "id" in m]


def chunks(xs, n):
    return [xs[i:i + n] for i in range(0, len(xs), n)] or [[]]


def q(names_, agg=False):
    s = "?get=" + urllib.parse.quote(",".join(names_), safe=",")
    return s + ("&agg=min,max,avg,sum" if agg else "")


def log_sizes(log_dir):
    out = {}
    for f in os.listdir(log_dir):
        if f.endswith(".log"):
            kind = "jobmanager" if "standalonesession" in f else "taskmanager" if "taskexecutor" in f else None
            if kind:
                out[kind] = (os.path.join(log_dir, f), os.path.getsize(os.path.join(log_dir, f)))
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    version, scenario, out = args[:3]
    opts = dict(zip(args[3::2], args[4::2]))
    seconds = float(opts.get("--seconds", 60))
    poll_s = float(opts.get("--poll-s", 5))
    c = Capture(version, scenario, out)
    logs_before = log_sizes(c.log_dir)
    job_args = flink("scenarios").splitlines()
    job_args = next((l.split(None, 1)[1] for l in job_args if l.split()[0] == scenario), "")
    jid = flink("submit", version, scenario)
    submitted = time.time()
    print(f"[capture] {version} {scenario}: job {jid}", file=sys.stderr)

    # wait until every task runs, so vertices and TaskManagers are known
    vertices, tms = [], []
    for _ in range(60):
        _, job, _, _ = c.get(f"/jobs/{jid}")
        vertices = [(v["id"], v["name"], v["parallelism"]) for v in (job or {}).get("vertices", [])]
        if vertices and all(v.get("status") == "RUNNING" for v in job["vertices"]):
            break
        time.sleep(0.5)
    _, tml, _, _ = c.get("/taskmanagers")
    tms = [t["id"] for t in (tml or {}).get("taskmanagers", [])]
    tm = tms[0]
    short = {vid: re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:40] for vid, name, _ in vertices}
    target = next((vid for vid, name, _ in vertices if TARGET_VERTEX.get(scenario, "stateful-map") in name),
                  vertices[-1][0])

    # metric names available per vertex (they appear once the metric fetcher ran: up to ~10 s)
    sub_names, tm_names, tm_agg = {}, [], []
    for _ in range(30):
        for vid, _, _ in vertices:
            _, lst, _, _ = c.get(f"/jobs/{jid}/vertices/{vid}/subtasks/metrics")
            sub_names[vid] = [n for n in names(lst) if SUBTASK_METRICS.match(n)]
        _, lst, _, _ = c.get(f"/taskmanagers/{tm}/metrics")
        tm_names = [n for n in names(lst) if TM_METRICS.match(n)]
        # Flink 1.14 answers [] to an aggregated ?get= naming one metric it does not have
        tm_agg = [n for n in TM_AGG_METRICS if n in names(lst)]
        if tm_names and all(sub_names.values()):
            break
        time.sleep(1)

    dumps, flame_at, inprogress_seen = [], None, 0
    dump_times = {"blocked": [22, 32]}.get(scenario, [30])
    flame_trigger = 15
    n = 0
    while time.time() - submitted < seconds:
        t = time.time() - submitted
        tag = f"poll/{n:03d}"
        _, cps, _, _ = c.save(f"{tag}-checkpoints.json", f"/jobs/{jid}/checkpoints")
        for cp in (cps or {}).get("history", []):
            if cp.get("status") == "IN_PROGRESS" and inprogress_seen < MAX_INPROGRESS:
                inprogress_seen += 1
                cid = cp["id"]
                c.save(f"{tag}-checkpoint-{cid}.json", f"/jobs/{jid}/checkpoints/details/{cid}")
                for vid, _, _ in vertices:
                    c.save(f"{tag}-checkpoint-{cid}-subtasks-{short[vid]}.json",
                           f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}")
        for vid, _, par in vertices:
            for part, ns in enumerate(chunks(sub_names.get(vid, []), MAX_GET)):
                sfx = f"-{part}" if part else ""
                c.save(f"{tag}-{short[vid]}-subtasks-metrics{sfx}.json",
                       f"/jobs/{jid}/vertices/{vid}/subtasks/metrics" + q(ns, agg=True))
            if vid == target:
                for i in range(par):
                    c.save(f"{tag}-{short[vid]}-subtask-{i}-metrics.json",
                           f"/jobs/{jid}/vertices/{vid}/subtasks/{i}/metrics" + q(sub_names.get(vid, [])[:MAX_GET]))
        c.save(f"{tag}-taskmanagers-metrics.json",
               "/taskmanagers/metrics" + q(tm_agg, agg=True) + "&taskmanagers=" + urllib.parse.quote(tm))
        for part, ns in enumerate(chunks(tm_names, MAX_GET)):
            sfx = f"-{part}" if part else ""
            c.save(f"{tag}-tm-metrics{sfx}.json", f"/taskmanagers/{tm}/metrics" + q(ns))
        if dump_times and t >= dump_times[0]:
            dump_times.pop(0)
            name = f"thread-dump-{len(dumps):03d}.json"
            status, _, size, ms = c.save(name, f"/taskmanagers/{tm}/thread-dump", timeout=60)
            dumps.append({"file": name, "t_s": round(t, 1), "status": status, "bytes": size, "ms": round(ms, 1)})
            print(f"[capture] thread dump {name}: {status}, {size} bytes, {ms:.0f} ms", file=sys.stderr)
        if flame_at is None and t >= flame_trigger:
            flame_at = t
            c.save(f"flamegraph-{short[target]}-trigger.json", f"/jobs/{jid}/vertices/{target}/flamegraph?type=full")
        n += 1
        time.sleep(max(0.0, poll_s - (time.time() - submitted - t)))

    # flame graphs (sampled since the trigger) and backpressure, while the job still runs
    flames = {}
    if flame_at is not None:
        for typ in ("full", "on_cpu", "off_cpu"):
            st, data, size, ms = c.save(f"flamegraph-{short[target]}-{typ}.json",
                                        f"/jobs/{jid}/vertices/{target}/flamegraph?type={typ}")
            flames[typ] = {"status": st, "bytes": size, "has_data": bool((data or {}).get("data"))}
        c.save(f"flamegraph-{short[target]}-full-subtask-0.json",
               f"/jobs/{jid}/vertices/{target}/flamegraph?type=full&subtaskindex=0")
    f = "rest/"
    for vid, _, par in vertices:
        c.save(f"{f}backpressure-{short[vid]}.json", f"/jobs/{jid}/vertices/{vid}/backpressure")
    time.sleep(2)
    for vid, _, par in vertices:
        c.save(f"{f}backpressure-{short[vid]}-again.json", f"/jobs/{jid}/vertices/{vid}/backpressure")
        c.save(f"{f}vertex-{short[vid]}.json", f"/jobs/{jid}/vertices/{vid}")
        c.save(f"{f}vertex-{short[vid]}-subtasks-metrics-list.json", f"/jobs/{jid}/vertices/{vid}/subtasks/metrics")
        c.save(f"{f}vertex-{short[vid]}-metrics-list.json", f"/jobs/{jid}/vertices/{vid}/metrics")
        c.save(f"{f}vertex-{short[vid]}-subtask-0-metrics-list.json", f"/jobs/{jid}/vertices/{vid}/subtasks/0/metrics")
        c.save(f"{f}vertex-{short[vid]}-subtasktimes.json", f"/jobs/{jid}/vertices/{vid}/subtasktimes")
    for name, path in [
        ("overview", "/overview"), ("config", "/config"), ("jobmanager-config", "/jobmanager/config"),
        ("taskmanagers", "/taskmanagers"), ("taskmanager", f"/taskmanagers/{tm}"),
        ("taskmanager-metrics-list", f"/taskmanagers/{tm}/metrics"),
        ("taskmanagers-metrics-list", "/taskmanagers/metrics"),
        ("jobmanager-metrics-list", "/jobmanager/metrics"),
        ("job", f"/jobs/{jid}"), ("job-config", f"/jobs/{jid}/config"),
        ("checkpoints-config", f"/jobs/{jid}/checkpoints/config"), ("checkpoints", f"/jobs/{jid}/checkpoints"),
        ("exceptions", f"/jobs/{jid}/exceptions"),
    ]:
        c.save(f"{f}{name}.json", path)
    _, cps, _, _ = c.get(f"/jobs/{jid}/checkpoints")
    for cid in pick_details((cps or {}).get("history", [])):
        c.save(f"{f}checkpoint-details/checkpoint-{cid}.json", f"/jobs/{jid}/checkpoints/details/{cid}")
        for vid, _, _ in vertices:
            c.save(f"{f}checkpoint-details/checkpoint-{cid}-subtasks-{short[vid]}.json",
                   f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}")
    ended = time.time()
    flink("cancel", version, jid)
    time.sleep(1)
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    for kind, (path, before) in logs_before.items():  # Flink's own file names (the log tests key on them)
        with open(path, "rb") as src, open(os.path.join(out, "logs", os.path.basename(path)), "wb") as dst:
            src.seek(before)
            dst.write(src.read(4_000_000))
    with open(os.path.join(out, "scenario.json"), "w") as fh:
        json.dump({"version": version, "scenario": scenario, "job_id": jid, "job_args": job_args,
                   "rest": c.rest, "taskmanager": tm,
                   "vertices": [{"id": v, "name": nm, "parallelism": p} for v, nm, p in vertices],
                   "target_vertex": target, "submitted_ms": int(submitted * 1000),
                   "captured_until_ms": int(ended * 1000), "polls": n, "poll_s": poll_s,
                   "thread_dumps": dumps, "flamegraph": flames}, fh, indent=1)
        fh.write("\n")
    print(f"[capture] {version} {scenario}: done, {n} polls, into {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
