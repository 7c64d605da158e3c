"""Poll-round figures from samples of the daemon's /api/v1/clusters (benches/run.sh `rounds`).

Usage: rounds.py SAMPLES.jsonl CPU_BEFORE CPU_AFTER RSS_MB PEAK_MB DELAY
Each round's duration is the `last_poll_duration_ms` seen with its `polls_total`; the round
that was under way when sampling began is left out.
"""
import json
import sys

path, c0, c1, rss, hwm, delay = sys.argv[1:]
rounds = {}
for line in open(path):
    line = line.strip()
    if not line:
        continue
    doc = json.loads(line)
    clusters = doc["clusters"] if isinstance(doc, dict) and "clusters" in doc else doc
    c = clusters[0]
    rounds[c["polls_total"]] = c["last_poll_duration_ms"]
first = min(rounds)
d = sorted(v for k, v in rounds.items() if k != first)
if not d:
    sys.exit(f"{delay}: no complete round in the window")


def q(p):
    return d[min(len(d) - 1, int(p * len(d)))]


cpu = (float(c1) - float(c0)) / max(1, len(rounds) - 1)
print(
    f"{delay}: {len(d)} rounds, P50 {q(0.5) / 1000:.2f} s, P95 {q(0.95) / 1000:.2f} s, "
    f"max {d[-1] / 1000:.2f} s; {cpu:.2f} CPU s per round; RSS {rss} MB (peak {hwm})"
)
