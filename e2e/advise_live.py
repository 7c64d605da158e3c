#!/usr/bin/env python3
"""The advisor's promise, live: for minpause, expired and backpressure, take the recommendation
`advise --replay` makes on the captured scenario, resubmit the scenario job to a real Flink with
it, and compare what Flink then does (spacing, expiries per hour, alignment, read by `advise
--url` on the live job) with what the model predicted. Prints the Markdown table of
docs/advice.md.

Usage: SENTINEL_E2E_PORT_BASE=25000 e2e/advise_live.py [VERSION] (default 1.20.5)."""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VERSION = sys.argv[1] if len(sys.argv) > 1 else "1.20.5"
BIN = os.environ.get("SENTINEL_BIN", os.path.join(ROOT, "target/debug/checkpoint-sentinel"))
RUN_S = int(os.environ.get("SENTINEL_ADVISE_SECONDS", "90"))
CASES = {"minpause": "min_pause_binds", "expired": "timeout_tight", "backpressure": "alignment_share_high"}
# A recommended key and how the scenario job takes it.
ARGS = {
    "execution.checkpointing.min-pause": "--min-pause-ms",
    "execution.checkpointing.timeout": "--timeout-ms",
    "execution.checkpointing.interval": "--interval-ms",
    "execution.checkpointing.unaligned": "--unaligned",
    "execution.checkpointing.unaligned.enabled": "--unaligned",
    "execution.checkpointing.aligned-checkpoint-timeout": "--aligned-timeout-ms",
}


def ms(value):
    if value.endswith("ms"):
        return value[:-2]
    if value.endswith("s") and value[:-1].isdigit():
        return str(int(value[:-1]) * 1000)
    return value


def flink(*args):
    return subprocess.run([os.path.join(HERE, "flink.sh"), *args], check=True, capture_output=True, text=True).stdout.strip()


def advise(*args):
    out = subprocess.run([BIN, "advise", "--format", "json", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["jobs"][0]


def fmt_ms(v):
    return "–" if v is None else (f"{v} ms" if v < 1000 else f"{v / 1000:.2f} s")


def main():
    flink("install", VERSION)
    flink("start", VERSION)
    url = flink("rest-url", VERSION)
    rows = []
    try:
        for scenario, finding in CASES.items():
            fixture = os.path.join(ROOT, "tests/fixtures", f"flink-{VERSION}", scenario)
            f = next(x for x in advise("--replay", fixture)["findings"] if x["id"] == finding)
            want = f["predicted"]["recommended"]
            extra = []
            for key, value in f["recommendation"]["set"].items():
                extra += [ARGS[key], ms(value)]
            job = flink("submit", VERSION, scenario, *extra)
            time.sleep(RUN_S)
            live = advise("--url", url, "--job", job)
            flink("cancel", VERSION, job)
            obs = live["observed"]
            span_h = max(obs["span_ms"], 1) / 3_600_000
            rows.append((scenario, f["recommendation"]["set"], want, obs, obs["expired"] / span_h))
    finally:
        flink("stop", VERSION)
    print(f"Flink {VERSION}, {RUN_S} s per job:\n")
    print("| scenario | set | spacing predicted | spacing live | expiries/h predicted | expiries/h live | alignment predicted | alignment live |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario, keys, want, obs, exp_h in rows:
        keys = ", ".join(f"`{k}: {v}`" for k, v in keys.items())
        print(f"| {scenario} | {keys} | {fmt_ms(want['spacing_ms'])} | {fmt_ms(obs['spacing_ms'])} | "
              f"{want['expiries_per_hour']:.1f} | {exp_h:.1f} | {fmt_ms(want['alignment_ms'])} | {fmt_ms(obs['alignment_p50_ms'])} |")


if __name__ == "__main__":
    main()
