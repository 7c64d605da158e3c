#!/usr/bin/python3
"""Plots a run of benches/scale.py (its samples.csv) as one PNG of four panels: RSS, CPU,
open file descriptors with the store's size on disk, and the poll round's P50 and P95.
Needs matplotlib (Debian: python3-matplotlib, hence /usr/bin/python3).

    benches/plot_scale.py WORK/samples.csv docs/soak.png "title"
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

path, out = sys.argv[1], sys.argv[2]
title = sys.argv[3] if len(sys.argv) > 3 else ""
rows = list(csv.DictReader(open(path)))


def col(name):
    return [float(r[name]) if r[name] not in ("", "None") else float("nan") for r in rows]


minute = col("minute")
fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
axes[0].plot(minute, col("rss_mb"), color="tab:blue")
axes[0].set_ylabel("RSS (MB)")
axes[0].set_ylim(bottom=0)
axes[1].plot(minute, col("cpu_pct"), color="tab:red")
axes[1].set_ylabel("CPU (% of a core)")
axes[1].set_ylim(bottom=0)
axes[2].plot(minute, col("open_fds"), color="tab:green", label="open fds")
axes[2].set_ylabel("open fds")
axes[2].set_ylim(bottom=0)
store = axes[2].twinx()
store.plot(minute, col("store_mb"), color="tab:purple", label="state dir (MB)")
store.set_ylabel("state dir on disk (MB)")
store.set_ylim(bottom=0)
axes[2].legend(loc="upper left")
store.legend(loc="lower right")
axes[3].plot(minute, col("round_p50_s"), label="P50")
axes[3].plot(minute, col("round_p95_s"), label="P95")
axes[3].set_ylabel("poll round (s)")
axes[3].set_xlabel("minutes")
axes[3].set_ylim(bottom=0)
axes[3].legend(loc="upper left")
for ax in axes:
    ax.grid(alpha=0.3)
fig.suptitle(title)
fig.tight_layout()
fig.savefig(out, dpi=80)
print(out)
