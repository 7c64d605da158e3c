#!/usr/bin/env python3
"""Summarise a capture folder written by e2e/capture_evidence.py as Markdown (for MANIFEST.md):
what the job did (checkpoint outcomes), the evidence the scenario is about (the blocked frame in
the thread dump, the GC share of the TaskManager, the per-subtask state sizes) and what each
REST endpoint answered (status, bytes, milliseconds).

Usage: e2e/capture_summary.py SCENARIO_DIR...     (prints Markdown on stdout)
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def endpoint(path):
    p = path.split("?")[0]
    p = re.sub(r"/jobs/[0-9a-f]{32}", "/jobs/:jid", p)
    p = re.sub(r"/vertices/[0-9a-f]{32}", "/vertices/:vid", p)
    p = re.sub(r"/subtasks/[0-9a-f]{32}", "/subtasks/:vid", p)
    p = re.sub(r"/subtasks/\d+", "/subtasks/:i", p)
    p = re.sub(r"/details/\d+", "/details/:cid", p)
    p = re.sub(r"/taskmanagers/[^/]+-[0-9a-f]{6}", "/taskmanagers/:tm", p)
    q = path.split("?")[1] if "?" in path else ""
    extra = []
    if "get=" in q:
        extra.append("get")
    if "agg=" in q:
        extra.append("agg")
    m = re.search(r"type=(\w+)", q)
    if m:
        extra.append("type=" + m.group(1))
    if "subtaskindex" in q:
        extra.append("subtaskindex")
    return p + ("?" + "&".join(extra) if extra else "")


def metric_map(doc):
    if isinstance(doc, list):
        return {m["id"]: m for m in doc if isinstance(m, dict) and "id" in m}
    return {}


def gc_share(d):
    """The TaskManager's GC time (sum over collectors, ms) at each poll: (first, last, the polls where
    it had moved: Flink's metric fetcher refreshes every ~10 s, so polls repeat values)."""
    rows = []
    for f in sorted(glob.glob(os.path.join(d, "poll", "*-tm-metrics*.json"))):
        m = metric_map(load(f))
        gc = [float(v["value"]) for k, v in m.items() if re.match(r"Status\.JVM\.GarbageCollector\.[^.]+\.Time$", k)
              and not k.endswith(".All.Time")]
        if gc:
            rows.append((f, sum(gc), m))
    if len(rows) < 2:
        return None
    first, last = rows[0], rows[-1]
    changed = [r for r in rows if r[1] != first[1]]
    return first, last, changed


def summarize(d):
    sc = load(os.path.join(d, "scenario.json")) or {}
    out = [f"### {sc.get('scenario', os.path.basename(d))}", ""]
    out.append(f"- job args: `{sc.get('job_args', '')}`")
    out.append(f"- job `{sc.get('job_id')}`, vertices: " + ", ".join(
        f"{v['name']} (p={v['parallelism']})" for v in sc.get("vertices", [])))
    dur = (sc.get("captured_until_ms", 0) - sc.get("submitted_ms", 0)) / 1000
    out.append(f"- captured for {dur:.0f} s, {sc.get('polls')} polls every {sc.get('poll_s')} s")
    cps = load(os.path.join(d, "rest", "checkpoints.json")) or {}
    hist = cps.get("history", [])
    out.append(f"- final checkpoint counts: `{json.dumps(cps.get('counts'))}`")
    out.append("- history (id status end_to_end_ms state_size): " + "; ".join(
        f"{h['id']} {h['status']} {h.get('end_to_end_duration')} {h.get('state_size')}" for h in reversed(hist)))
    fails = sorted({h.get("failure_message") for h in hist if h.get("failure_message")})
    if fails:
        out.append("- failure messages: " + "; ".join(f"`{m}`" for m in fails))
    for t in sc.get("thread_dumps", []):
        doc = load(os.path.join(d, t["file"])) or {}
        infos = doc.get("threadInfos", [])
        blocked = [i for i in infos if "holdTheThread" in i.get("stringifiedThreadInfo", "")]
        line = f"- {t['file']} at t={t['t_s']} s: HTTP {t['status']}, {t['bytes']} bytes, {t['ms']} ms, {len(infos)} threads"
        if blocked:
            st = blocked[0]["stringifiedThreadInfo"].splitlines()
            frames = [s.strip() for s in st if s.strip().startswith("at ")]
            line += (f"; thread `{blocked[0]['threadName']}` ({st[0].split()[-1]}), {len(frames)} frames, "
                     f"top: `{frames[0]}` / `{frames[1]}`")
        out.append(line)
    for f in sorted(glob.glob(os.path.join(d, "flamegraph-*.json"))):
        doc = load(f) or {}
        data = doc.get("data") or {}
        out.append(f"- {os.path.basename(f)}: {os.path.getsize(f)} bytes, "
                   f"root samples {data.get('value', 'none')}, keys {sorted(doc)}")
    g = gc_share(d)
    if g:
        first, last, changed = g
        out.append(f"- TaskManager GC time (sum of collectors) at the polls: " + ", ".join(
            f"{r[1]:.0f}" for r in [first] + changed) + " ms")
        heap_used = last[2].get("Status.JVM.Memory.Heap.Used", {}).get("value")
        heap_max = last[2].get("Status.JVM.Memory.Heap.Max", {}).get("value")
        out.append(f"- last heap used/max: {heap_used} / {heap_max} bytes; CPU load "
                   f"{last[2].get('Status.JVM.CPU.Load', {}).get('value')}")
    # per-subtask state sizes of the latest completed checkpoint, for every vertex
    done = [h for h in hist if h.get("status") == "COMPLETED"]
    if done:
        cid = done[0]["id"]
        for f in sorted(glob.glob(os.path.join(d, "rest", "checkpoint-details", f"checkpoint-{cid}-subtasks-*.json"))):
            doc = load(f) or {}
            sizes = [s.get("state_size", s.get("checkpointed_size")) for s in doc.get("subtasks", [])]
            sizes = [x for x in sizes if isinstance(x, (int, float))]
            if sizes and max(sizes) > 0:
                med = statistics.median(sizes)
                ratio = f"{max(sizes) / med:.1f}" if med else "inf"
                out.append(f"- checkpoint {cid} {os.path.basename(f).split('-subtasks-')[1][:-5]} subtask state sizes "
                           f"{sizes}: max/median {ratio}, max on #{sizes.index(max(sizes))}")
    # endpoints
    rows = {}
    try:
        with open(os.path.join(d, "index.tsv")) as f:
            next(f)
            for line in f:
                _, path, status, size, ms = line.rstrip("\n").split("\t")
                e = endpoint(path)
                r = rows.setdefault(e, {"n": 0, "status": set(), "bytes": [], "ms": []})
                r["n"] += 1
                r["status"].add(status)
                r["bytes"].append(int(size))
                r["ms"].append(float(ms))
    except OSError:
        pass
    out += ["", "| endpoint | requests | HTTP | bytes (max) | ms (median / max) |", "| --- | --- | --- | --- | --- |"]
    for e, r in sorted(rows.items()):
        out.append(f"| `{e}` | {r['n']} | {','.join(sorted(r['status']))} | {max(r['bytes'])} | "
                   f"{statistics.median(r['ms']):.1f} / {max(r['ms']):.1f} |")
    out.append("")
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("\n".join(summarize(d) for d in sys.argv[1:]))


if __name__ == "__main__":
    main()
