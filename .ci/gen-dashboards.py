#!/usr/bin/env python3
""".ci/gen-dashboards.py -- generates the Grafana dashboards in dashboards/ (stdlib only).

The dashboards are plain provisionable JSON (datasource as the template variable DS_PROMETHEUS,
fixed uids); this script is their source, so panel ids and grid positions stay consistent.
Edit the panels below, then run:

    python3 .ci/gen-dashboards.py          # rewrite dashboards/*.json
    python3 .ci/gen-dashboards.py --check  # exit 1 if dashboards/*.json differ from this script

A panel whose metrics are not (yet) listed in docs/metrics.md is left out, and the script says
which ones; .ci/check-dashboards.py checks the result (PromQL via promtool, metric names).
METRICS_DOC=FILE reads another metrics table and --out DIR writes elsewhere (to try panels of
metrics not documented yet).
"""

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "dashboards"
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

# Label matchers of the template variables.
SEL = 'cluster=~"$cluster", job_name=~"$job"'  # overview: many clusters and jobs
JSEL = 'cluster="$cluster", job_name="$job"'  # drill-down: one job
JIDSEL = 'cluster="$cluster", job_id="$job_id"'  # drill-down, for metrics without job_name


LABELS = {}  # metric -> its labels, from docs/metrics.md


def documented_metrics():
    text = Path(os.environ.get("METRICS_DOC", ROOT / "docs" / "metrics.md")).read_text()
    names = set()
    for m in re.finditer(r"^\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \| (\w+) \| ([^|]*)\|", text, re.M):
        names.add(m.group(1))
        LABELS[m.group(1)] = set(re.findall(r"`(\w+)`", m.group(3)))
        if m.group(2) in ("summary", "histogram"):
            names.update({m.group(1) + "_sum", m.group(1) + "_count"})
        if m.group(2) == "histogram":
            names.add(m.group(1) + "_bucket")
    return names


def msel(metric, **values):
    """A selector of `metric` with those of the matchers (label=value) the metric has, for metrics
    whose labels are still being settled (the reference model's)."""
    have = LABELS.get(metric, set())
    # A value starting with "~" is a regex match (=~).
    matchers = ", ".join(f'{k}=~"{v[1:]}"' if v.startswith("~") else f'{k}="{v}"' for k, v in values.items() if k in have)
    return f"{metric}{{{matchers}}}"


def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto", "range": not instant,
         "instant": instant}
    if fmt:
        t["format"] = fmt
    return t


class Board:
    """Lays panels out left to right in rows of 24 columns."""

    def __init__(self, available):
        self.available = available
        self.panels = []
        self.left_out = []
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def row(self, title):
        self.newline()
        self.panels.append({"id": self.next_id, "type": "row", "title": title, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.next_id += 1
        self.y += 1

    def newline(self):
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0

    def add(self, ptype, title, targets, w, h, needs=(), description="", unit=None, **extra):
        missing = [m for m in needs if m not in self.available]
        if missing:
            self.left_out.append((title, missing))
            return
        if self.x + w > 24:
            self.newline()
        refs = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for t in targets:
            t["refId"] = next(refs)
        panel = {"id": self.next_id, "type": ptype, "title": title, "description": description,
                 "datasource": DS, "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y}, "targets": targets}
        fc = {"defaults": {}, "overrides": extra.pop("overrides", [])}
        if unit:
            fc["defaults"]["unit"] = unit
        if "thresholds" in extra:
            fc["defaults"]["thresholds"] = {"mode": "absolute", "steps": extra.pop("thresholds")}
        if "custom" in extra:
            fc["defaults"]["custom"] = extra.pop("custom")
        if "decimals" in extra:
            fc["defaults"]["decimals"] = extra.pop("decimals")
        if "mappings" in extra:
            fc["defaults"]["mappings"] = extra.pop("mappings")
        panel["fieldConfig"] = fc
        panel.update(extra)
        self.panels.append(panel)
        self.next_id += 1
        self.x += w
        self.row_h = max(self.row_h, h)


def steps(*pairs):
    out = [{"color": pairs[0], "value": None}]
    for i in range(1, len(pairs), 2):
        out.append({"color": pairs[i + 1], "value": pairs[i]})
    return out


def ts_opts(stack=False, bars=False):
    custom = {"drawStyle": "bars" if bars else "line", "lineWidth": 1, "fillOpacity": 60 if bars else 10,
              "showPoints": "never", "spanNulls": True}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {"custom": custom, "options": {"legend": {"displayMode": "table", "placement": "right",
                                                     "calcs": ["lastNotNull", "max"]},
                                          "tooltip": {"mode": "multi", "sort": "desc"}}}


def var_ds():
    return {"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []}


def var_query(name, label, query, multi, include_all, hide=0):
    v = {"name": name, "label": label, "type": "query", "datasource": DS,
         "query": {"query": query, "refId": f"{name}-variable"}, "definition": query,
         "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all, "hide": hide,
         "current": {}, "options": [], "regex": ""}
    if include_all:
        v["allValue"] = ".*"
    return v


def dashboard(uid, title, description, panels, variables, links, tags):
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["flink", "checkpoints", "checkpoint-sentinel"] + tags,
        "editable": True,
        "graphTooltip": 1,
        "timezone": "",
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "links": links,
        "templating": {"list": variables},
        "panels": panels,
    }


PHASES = [
    ("flink_checkpoint_duration_seconds", "end-to-end"),
    ("flink_checkpoint_start_delay_seconds", "start delay"),
    ("flink_checkpoint_alignment_duration_seconds", "alignment"),
    ("flink_checkpoint_sync_duration_seconds", "sync"),
    ("flink_checkpoint_async_duration_seconds", "async"),
]
OP_PHASES = [
    ("flink_operator_checkpoint_duration_seconds", "ack (end-to-end)"),
    ("flink_operator_checkpoint_start_delay_seconds", "start delay"),
    ("flink_operator_checkpoint_alignment_duration_seconds", "alignment"),
    ("flink_operator_checkpoint_sync_duration_seconds", "sync"),
    ("flink_operator_checkpoint_async_duration_seconds", "async"),
]

# The share of the progress window (max(interval, timeout) x (tolerable failures + 2), the Flink
# Kubernetes operator's and FlinkCheckpointNoProgress's window) used since the last completed
# checkpoint: 1 means the alert fires / the operator would restart the job.
def budget_expr(sel):
    return (f"(time() - max by (cluster, job_name) (flink_checkpoint_last_completed_timestamp_seconds{{{sel}}}))\n"
            f"/ on (cluster, job_name) (\n"
            f"  max by (cluster, job_name) (flink_checkpoint_interval_seconds{{{sel}}} >= flink_checkpoint_timeout_seconds{{{sel}}}"
            f" or flink_checkpoint_timeout_seconds{{{sel}}})\n"
            f"  * on (cluster, job_name) max by (cluster, job_name) (flink_checkpoint_tolerable_failures{{{sel}}} + 2)\n)")


def overview(avail):
    b = Board(avail)
    b.row("Health")
    b.add("stat", "Flink clusters reachable", [target("sum(checkpoint_sentinel_flink_up{cluster=~\"$cluster\"})", instant=True),
                                                 target("count(checkpoint_sentinel_flink_up{cluster=~\"$cluster\"})", instant=True)],
          4, 4, needs=["checkpoint_sentinel_flink_up"], description="Clusters whose JobManager answered the last poll, of all configured.",
          options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name", "colorMode": "none"},
          overrides=[{"matcher": {"id": "byFrameRefID", "options": "A"}, "properties": [{"id": "displayName", "value": "up"}]},
                     {"matcher": {"id": "byFrameRefID", "options": "B"}, "properties": [{"id": "displayName", "value": "configured"}]}])
    b.add("stat", "Watched jobs", [target("sum(checkpoint_sentinel_watched_jobs{cluster=~\"$cluster\"})", instant=True)],
          3, 4, needs=["checkpoint_sentinel_watched_jobs"], options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "none"})
    b.add("stat", "Jobs past half their progress budget", [target(f"count(({budget_expr(SEL)}) > 0.5) or vector(0)", instant=True)],
          4, 4, needs=["flink_checkpoint_last_completed_timestamp_seconds", "flink_checkpoint_tolerable_failures"],
          description="Jobs whose time since the last completed checkpoint exceeds half of max(interval, timeout) x (tolerable failures + 2).",
          thresholds=steps("green", 1, "orange"), options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"})
    b.add("stat", "Failed checkpoints (time range)", [target(f"sum(increase(flink_checkpoints_total{{{SEL}, status=\"failed\"}}[$__range])) or vector(0)", instant=True)],
          4, 4, needs=["flink_checkpoints_total"], decimals=0, thresholds=steps("green", 1, "orange"),
          options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"})
    b.add("stat", "Firing alerts", [target("sum(checkpoint_sentinel_alerts{state=\"firing\"}) or vector(0)", instant=True)],
          4, 4, needs=["checkpoint_sentinel_alerts"], description="Alerts the daemon's own rules evaluate as firing.",
          thresholds=steps("green", 1, "red"), options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"})
    b.add("stat", "Deviations from the model (time range)", [target("sum(increase(" + msel("flink_checkpoint_deviations_total", cluster="~$cluster", job_name="~$job", explained="false") + "[$__range])) or vector(0)", instant=True)],
          5, 4, needs=["flink_checkpoint_deviations_total"], decimals=0,
          description="Checkpoint timings the reference model of Flink's coordinator did not predict, and could not explain.",
          thresholds=steps("green", 1, "orange"), options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"})

    b.row("Jobs")
    table_targets = [target(f"max by (cluster, job_name) ({m}{{{SEL}, quantile=\"0.95\"}})", instant=True, fmt="table") for m, _ in PHASES]
    table_targets += [
        target(f"time() - max by (cluster, job_name) (flink_checkpoint_last_completed_timestamp_seconds{{{SEL}}})", instant=True, fmt="table"),
        target(budget_expr(SEL), instant=True, fmt="table"),
        target(f"sum by (cluster, job_name) (increase(flink_checkpoints_total{{{SEL}, status=\"failed\"}}[$__range]))", instant=True, fmt="table"),
        target(f"max by (cluster, job_name) (flink_checkpoints_in_progress{{{SEL}}})", instant=True, fmt="table"),
    ]
    names = ["P95 end-to-end", "P95 start delay", "P95 alignment", "P95 sync", "P95 async",
             "since last completed", "progress budget used", "failed (range)", "in progress"]
    if "flink_checkpoint_consecutive_failures" in avail:
        table_targets.append(target(f"max by (cluster, job_name) (flink_checkpoint_consecutive_failures{{{SEL}}})", instant=True, fmt="table"))
        names.append("failures in a row")
    rename = {f"Value #{chr(65 + i)}": n for i, n in enumerate(names)}
    b.add("table", "Checkpoint health per job", table_targets, 24, 9,
          needs=[m for m, _ in PHASES] + ["flink_checkpoint_last_completed_timestamp_seconds", "flink_checkpoints_total", "flink_checkpoints_in_progress"],
          description="One row per job. P95s over the daemon's sliding window (stats.window). Progress budget: time since the last "
                      "completed checkpoint over max(interval, timeout) x (tolerable failures + 2); 100 % is when FlinkCheckpointNoProgress fires.",
          unit="s",
          transformations=[{"id": "merge", "options": {}},
                           {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": rename}}],
          overrides=[{"matcher": {"id": "byName", "options": "progress budget used"},
                      "properties": [{"id": "unit", "value": "percentunit"},
                                     {"id": "thresholds", "value": {"mode": "absolute", "steps": steps("green", 0.5, "orange", 1, "red")}},
                                     {"id": "custom.cellOptions", "value": {"type": "color-background"}}]},
                     {"matcher": {"id": "byName", "options": "failed (range)"}, "properties": [{"id": "unit", "value": "none"}, {"id": "decimals", "value": 0}]},
                     {"matcher": {"id": "byName", "options": "in progress"}, "properties": [{"id": "unit", "value": "none"}]},
                     {"matcher": {"id": "byName", "options": "failures in a row"},
                      "properties": [{"id": "unit", "value": "none"},
                                     {"id": "thresholds", "value": {"mode": "absolute", "steps": steps("green", 1, "orange")}},
                                     {"id": "custom.cellOptions", "value": {"type": "color-text"}}]},
                     {"matcher": {"id": "byName", "options": "job_name"},
                      "properties": [{"id": "links", "value": [{"title": "Drill down",
                                                                "url": "/d/cs-flink-checkpoint-job?var-DS_PROMETHEUS=${DS_PROMETHEUS}&var-cluster=${__data.fields.cluster}&var-job=${__value.raw}&${__url_time_range}"}]}]}],
          options={"showHeader": True, "sortBy": [{"displayName": "progress budget used", "desc": True}]})

    b.row("Latency and failures")
    b.add("timeseries", "P95 end-to-end checkpoint duration",
          [target(f"max by (cluster, job_name) (flink_checkpoint_duration_seconds{{{SEL}, quantile=\"0.95\"}})", "{{cluster}} / {{job_name}}")],
          12, 8, needs=["flink_checkpoint_duration_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "Time since last completed checkpoint",
          [target(f"time() - max by (cluster, job_name) (flink_checkpoint_last_completed_timestamp_seconds{{{SEL}}})", "{{cluster}} / {{job_name}}")],
          12, 8, needs=["flink_checkpoint_last_completed_timestamp_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "Failed checkpoints",
          [target(f"sum by (cluster, job_name) (increase(flink_checkpoints_total{{{SEL}, status=\"failed\"}}[$__rate_interval]))", "{{cluster}} / {{job_name}}")],
          12, 8, needs=["flink_checkpoints_total"], unit="none", **ts_opts(stack=True, bars=True))
    b.add("timeseries", "Worst P95 per phase (all selected jobs)",
          [target(f"max({m}{{{SEL}, quantile=\"0.95\"}})", label) for m, label in PHASES],
          12, 8, needs=[m for m, _ in PHASES], unit="s",
          description="For each phase the highest P95 of any selected job: which phase dominates.", **ts_opts())
    b.add("timeseries", "Oldest checkpoint in progress, share of its timeout",
          [target(f"max by (cluster, job_name) (flink_checkpoint_oldest_in_progress_age_seconds{{{SEL}}})\n"
                  f"/ on (cluster, job_name) max by (cluster, job_name) (flink_checkpoint_timeout_seconds{{{SEL}}})", "{{cluster}} / {{job_name}}")],
          12, 8, needs=["flink_checkpoint_oldest_in_progress_age_seconds", "flink_checkpoint_timeout_seconds"], unit="percentunit",
          description="1 = the checkpoint expires now (FlinkCheckpointAboutToExpire fires at 0.8).",
          thresholds=steps("green", 0.8, "red"), **ts_opts())
    b.add("timeseries", "Alerts by state",
          [target("sum by (alertname, severity, state) (checkpoint_sentinel_alerts)", "{{alertname}} ({{severity}}, {{state}})")],
          12, 8, needs=["checkpoint_sentinel_alerts"], unit="none", **ts_opts(stack=True))
    b.add("timeseries", "Deviations from the model",
          [target("sum by (kind, explained) (increase(" + msel("flink_checkpoint_deviations_total", cluster="~$cluster", job_name="~$job") + "[$__rate_interval]))", "{{kind}} (explained={{explained}})")],
          12, 8, needs=["flink_checkpoint_deviations_total"], unit="none", **ts_opts(stack=True, bars=True))

    b.row("checkpoint-sentinel itself")
    b.add("state-timeline", "Flink REST reachable",
          [target("max by (cluster) (checkpoint_sentinel_flink_up{cluster=~\"$cluster\"})", "{{cluster}}")],
          12, 6, needs=["checkpoint_sentinel_flink_up"],
          mappings=[{"type": "value", "options": {"0": {"text": "down", "color": "red"}, "1": {"text": "up", "color": "green"}}}],
          thresholds=steps("red", 1, "green"))
    b.add("timeseries", "Poll errors by kind",
          [target("sum by (cluster, kind) (increase(checkpoint_sentinel_poll_errors_total{cluster=~\"$cluster\"}[$__rate_interval]))", "{{cluster}} {{kind}}")],
          12, 6, needs=["checkpoint_sentinel_poll_errors_total"], unit="none", **ts_opts(stack=True, bars=True))
    b.add("timeseries", "Poll round duration P95",
          [target("max by (cluster) (checkpoint_sentinel_poll_duration_seconds{cluster=~\"$cluster\", quantile=\"0.95\"})", "{{cluster}}")],
          8, 6, needs=["checkpoint_sentinel_poll_duration_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "Time since last successful poll",
          [target("time() - max by (cluster) (checkpoint_sentinel_last_successful_poll_timestamp_seconds{cluster=~\"$cluster\"})", "{{cluster}}")],
          8, 6, needs=["checkpoint_sentinel_last_successful_poll_timestamp_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "State persistence",
          [target("time() - max(checkpoint_sentinel_state_last_persisted_timestamp_seconds)", "since last write"),
           target("sum(increase(checkpoint_sentinel_state_persist_errors_total[$__rate_interval]))", "write errors")],
          8, 6, needs=["checkpoint_sentinel_state_last_persisted_timestamp_seconds", "checkpoint_sentinel_state_persist_errors_total"],
          unit="s", overrides=[{"matcher": {"id": "byName", "options": "write errors"}, "properties": [{"id": "unit", "value": "none"}]}],
          **ts_opts())
    b.add("timeseries", "Log tailer: lines read and lag",
          [target("sum by (cluster) (rate(checkpoint_sentinel_log_lines_total{cluster=~\"$cluster\"}[$__rate_interval]))", "{{cluster}} lines/s"),
           target("max by (cluster) (checkpoint_sentinel_log_lag_bytes{cluster=~\"$cluster\"})", "{{cluster}} lag")],
          12, 6, needs=["checkpoint_sentinel_log_lines_total", "checkpoint_sentinel_log_lag_bytes"], unit="none",
          overrides=[{"matcher": {"id": "byRegexp", "options": ".* lag"}, "properties": [{"id": "unit", "value": "bytes"}]}], **ts_opts())
    b.add("timeseries", "Log tailer: errors, rotations, oversize lines",
          [target("sum by (cluster) (increase(checkpoint_sentinel_log_errors_total{cluster=~\"$cluster\"}[$__rate_interval]))", "{{cluster}} errors"),
           target("sum by (cluster) (increase(checkpoint_sentinel_log_rotations_total{cluster=~\"$cluster\"}[$__rate_interval]))", "{{cluster}} rotations"),
           target("sum by (cluster) (increase(checkpoint_sentinel_log_oversize_lines_total{cluster=~\"$cluster\"}[$__rate_interval]))", "{{cluster}} oversize lines")],
          12, 6, needs=["checkpoint_sentinel_log_errors_total", "checkpoint_sentinel_log_rotations_total", "checkpoint_sentinel_log_oversize_lines_total"],
          unit="none", **ts_opts(bars=True))
    b.add("timeseries", "Alertmanager delivery",
          [target("sum by (alertmanager) (increase(checkpoint_sentinel_alertmanager_sends_total[$__rate_interval]))", "{{alertmanager}} sent"),
           target("sum by (alertmanager) (increase(checkpoint_sentinel_alertmanager_errors_total[$__rate_interval]))", "{{alertmanager}} errors"),
           target("max by (alertmanager) (checkpoint_sentinel_alertmanager_queued_alerts)", "{{alertmanager}} queued")],
          24, 6, needs=["checkpoint_sentinel_alertmanager_sends_total", "checkpoint_sentinel_alertmanager_errors_total",
                        "checkpoint_sentinel_alertmanager_queued_alerts"], unit="none",
          description="Pushes of the daemon's own alerts to Alertmanager: successful posts, failed posts (retried), resolved alerts waiting.",
          **ts_opts())
    b.newline()

    variables = [var_ds(),
                 var_query("cluster", "Cluster", "label_values(checkpoint_sentinel_flink_up, cluster)", True, True),
                 var_query("job", "Job", "label_values(flink_job_info{cluster=~\"$cluster\"}, job_name)", True, True)]
    links = [{"title": "Job drill-down", "type": "link", "url": "/d/cs-flink-checkpoint-job", "icon": "dashboard",
              "includeVars": True, "keepTime": True, "targetBlank": False, "tags": [], "asDropdown": False, "tooltip": ""}]
    return dashboard("cs-flink-checkpoints", "Flink checkpoints: overview",
                     "All Flink clusters and jobs watched by checkpoint-sentinel: health, P95 latency per phase, failures, "
                     "time since the last completed checkpoint, and the daemon's own health.",
                     b.panels, variables, links, ["overview"]), b.left_out


def job(avail):
    b = Board(avail)
    b.row("Job")
    b.add("stat", "State", [target(f"max by (state) (flink_job_info{{{JSEL}}})", "{{state}}", instant=True)],
          4, 4, needs=["flink_job_info"], options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "name", "colorMode": "none"})
    b.add("stat", "P95 end-to-end", [target(f"max(flink_checkpoint_duration_seconds{{{JSEL}, quantile=\"0.95\"}})", instant=True)],
          4, 4, needs=["flink_checkpoint_duration_seconds"], unit="s", options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "none"})
    b.add("stat", "Since last completed", [target(f"time() - max(flink_checkpoint_last_completed_timestamp_seconds{{{JSEL}}})", instant=True)],
          4, 4, needs=["flink_checkpoint_last_completed_timestamp_seconds"], unit="s", options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "none"})
    b.add("stat", "Configuration",
          [target(f"max(flink_checkpoint_interval_seconds{{{JSEL}}})", "interval", instant=True),
           target(f"max(flink_checkpoint_timeout_seconds{{{JSEL}}})", "timeout", instant=True),
           target(f"max(flink_checkpoint_min_pause_seconds{{{JSEL}}})", "min pause", instant=True)],
          6, 4, needs=["flink_checkpoint_interval_seconds", "flink_checkpoint_timeout_seconds", "flink_checkpoint_min_pause_seconds"],
          unit="s", options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name", "colorMode": "none"})
    b.add("stat", "Concurrency and tolerance",
          [target(f"max(flink_checkpoint_max_concurrent{{{JSEL}}})", "max concurrent", instant=True),
           target(f"max(flink_checkpoint_tolerable_failures{{{JSEL}}})", "tolerable failures", instant=True)],
          6, 4, needs=["flink_checkpoint_max_concurrent", "flink_checkpoint_tolerable_failures"], unit="none",
          options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name", "colorMode": "none"})

    b.row("Phases")
    b.add("timeseries", "P95 per phase (slowest subtask of each checkpoint)",
          [target(f"max({m}{{{JSEL}, quantile=\"0.95\"}})", label) for m, label in PHASES]
          + [target(f"max(flink_checkpoint_timeout_seconds{{{JSEL}}})", "timeout")],
          16, 9, needs=[m for m, _ in PHASES] + ["flink_checkpoint_timeout_seconds"], unit="s",
          description="Start delay or alignment dominating: barriers are held up (backpressure, skew). Async dominating: slow upload "
                      "or large state. Sync dominating: slow snapshotState. See docs/runbook.md.",
          overrides=[{"matcher": {"id": "byName", "options": "timeout"},
                      "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}, {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}],
          **ts_opts())
    b.add("timeseries", "End-to-end P50 / P95 / P99",
          [target(f"max(flink_checkpoint_duration_seconds{{{JSEL}, quantile=\"{q}\"}})", f"P{q[2:]}") for q in ("0.5", "0.95", "0.99")],
          8, 9, needs=["flink_checkpoint_duration_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "Checkpoints by final status",
          [target(f"sum by (status) (increase(flink_checkpoints_total{{{JSEL}}}[$__rate_interval]))", "{{status}}")],
          8, 8, needs=["flink_checkpoints_total"], unit="none",
          overrides=[{"matcher": {"id": "byName", "options": "failed"}, "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}],
          **ts_opts(stack=True, bars=True))
    b.add("timeseries", "In progress and oldest age",
          [target(f"max(flink_checkpoints_in_progress{{{JSEL}}})", "in progress"),
           target(f"max(flink_checkpoint_oldest_in_progress_age_seconds{{{JSEL}}})", "oldest age"),
           target(f"max(flink_checkpoint_timeout_seconds{{{JSEL}}})", "timeout")],
          8, 8, needs=["flink_checkpoints_in_progress", "flink_checkpoint_oldest_in_progress_age_seconds", "flink_checkpoint_timeout_seconds"],
          unit="s", overrides=[{"matcher": {"id": "byName", "options": "in progress"}, "properties": [{"id": "unit", "value": "none"}, {"id": "custom.axisPlacement", "value": "right"}]}],
          **ts_opts())
    b.add("timeseries", "Checkpoint size (median)",
          [target(f"max(flink_checkpoint_checkpointed_size_bytes{{{JSEL}, quantile=\"0.5\"}})", "checkpointed"),
           target(f"max(flink_checkpoint_full_size_bytes{{{JSEL}, quantile=\"0.5\"}})", "full state"),
           target(f"max(flink_checkpoint_persisted_data_bytes{{{JSEL}, quantile=\"0.5\"}})", "persisted in-flight")],
          8, 8, needs=["flink_checkpoint_checkpointed_size_bytes", "flink_checkpoint_full_size_bytes", "flink_checkpoint_persisted_data_bytes"],
          unit="bytes", **ts_opts())

    b.row("Operators")
    op_targets = [target(f"max by (operator) ({m}{{{JSEL}, quantile=\"0.95\"}})", instant=True, fmt="table") for m, _ in OP_PHASES]
    rename = {f"Value #{chr(65 + i)}": f"P95 {label}" for i, (_, label) in enumerate(OP_PHASES)}
    b.add("table", "Slowest operators (P95 over every subtask)", op_targets, 12, 9, needs=[m for m, _ in OP_PHASES], unit="s",
          transformations=[{"id": "merge", "options": {}},
                           {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": rename}}],
          options={"showHeader": True, "sortBy": [{"displayName": "P95 ack (end-to-end)", "desc": True}]},
          custom={"cellOptions": {"type": "color-text"}})
    b.add("timeseries", "Top 5 operators by P95 acknowledgement time",
          [target(f"topk(5, max by (operator) (flink_operator_checkpoint_duration_seconds{{{JSEL}, quantile=\"0.95\"}}))", "{{operator}}")],
          12, 9, needs=["flink_operator_checkpoint_duration_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "Top 5 operators by P95 alignment",
          [target(f"topk(5, max by (operator) (flink_operator_checkpoint_alignment_duration_seconds{{{JSEL}, quantile=\"0.95\"}}))", "{{operator}}")],
          12, 8, needs=["flink_operator_checkpoint_alignment_duration_seconds"], unit="s", **ts_opts())
    b.add("timeseries", "Top 5 operators by P95 start delay",
          [target(f"topk(5, max by (operator) (flink_operator_checkpoint_start_delay_seconds{{{JSEL}, quantile=\"0.95\"}}))", "{{operator}}")],
          12, 8, needs=["flink_operator_checkpoint_start_delay_seconds"], unit="s", **ts_opts())

    b.row("Logs")
    b.add("timeseries", "Log events by kind",
          [target(f"sum by (kind) (increase(flink_checkpoint_log_events_total{{{JIDSEL}}}[$__rate_interval]))", "{{kind}}")],
          12, 8, needs=["flink_checkpoint_log_events_total"], unit="none",
          description="Checkpoint events from the JobManager/TaskManager logs (source log) or synthesised from REST (source rest).",
          **ts_opts(stack=True, bars=True))
    b.add("bargauge", "Failure root causes on the cluster (time range)",
          [target("sort_desc(sum by (cause) (increase(flink_checkpoint_log_root_causes_total{cluster=\"$cluster\"}[$__range])))", "{{cause}}", instant=True)],
          12, 8, needs=["flink_checkpoint_log_root_causes_total"], unit="none", decimals=0,
          description="The deepest \"Caused by:\" of failed checkpoints' stack traces, classified. Per cluster: the metric has no job label.",
          options={"orientation": "horizontal", "displayMode": "basic", "reduceOptions": {"calcs": ["lastNotNull"]}, "showUnfilled": True})

    b.row("Reference model and failure budget")
    b.add("timeseries", "Checkpoint interval: expected vs observed",
          [target("max(" + msel("flink_checkpoint_expected_interval_seconds", cluster="$cluster", job_name="$job", job_id="$job_id") + ")", "expected (model)"),
           target("max(" + msel("flink_checkpoint_observed_interval_seconds", cluster="$cluster", job_name="$job", job_id="$job_id") + ")", "observed"),
           target(f"max(flink_checkpoint_interval_seconds{{{JSEL}}})", "configured")],
          8, 8, needs=["flink_checkpoint_expected_interval_seconds", "flink_checkpoint_observed_interval_seconds", "flink_checkpoint_interval_seconds"],
          unit="s", description="What Flink's coordinator (the reference model) should do given interval, min pause and durations, against what it did.",
          **ts_opts())
    b.add("timeseries", "Trigger time vs the model",
          [target(f"max({msel('flink_checkpoint_trigger_deviation_seconds', cluster='$cluster', job_name='$job', job_id='$job_id')[:-1]}, quantile=\"{q}\"}})", f"P{q[2:]}")
           for q in ("0.5", "0.95")],
          8, 8, needs=["flink_checkpoint_trigger_deviation_seconds"], unit="s",
          description="Per checkpoint, |observed - expected| trigger time, the expectation being the coordinator model's.",
          **ts_opts())
    b.add("timeseries", "Deviations from the model",
          [target("sum by (kind, explained) (increase(" + msel("flink_checkpoint_deviations_total", cluster="$cluster", job_name="$job", job_id="$job_id") + "[$__rate_interval]))", "{{kind}} (explained={{explained}})")],
          8, 8, needs=["flink_checkpoint_deviations_total"], unit="none", **ts_opts(stack=True, bars=True))
    b.add("gauge", "Progress budget used",
          [target(budget_expr(JSEL), instant=True)],
          6, 8,
          needs=["flink_checkpoint_last_completed_timestamp_seconds", "flink_checkpoint_tolerable_failures", "flink_checkpoint_interval_seconds"],
          unit="percentunit", thresholds=steps("green", 0.5, "orange", 1, "red"),
          description="Time since the last completed checkpoint over max(interval, timeout) x (tolerable failures + 2): the window after "
                      "which FlinkCheckpointNoProgress fires and the Flink Kubernetes operator restarts the job.",
          options={"reduceOptions": {"calcs": ["lastNotNull"]}, "showThresholdMarkers": True}, min=0, max=1.2)
    if "flink_checkpoint_consecutive_failures" in avail:
        b.add("gauge", "Tolerable failures used",
              [target(f"max(flink_checkpoint_consecutive_failures{{{JSEL}}})\n/ (max(flink_checkpoint_tolerable_failures{{{JSEL}}}) + 1)", instant=True)],
              6, 8, needs=["flink_checkpoint_consecutive_failures", "flink_checkpoint_tolerable_failures"],
              unit="percentunit", thresholds=steps("green", 0.5, "orange", 1, "red"),
              description="Failed checkpoints since the last completed one over (tolerable failures + 1): at 100 % Flink fails the job over.",
              options={"reduceOptions": {"calcs": ["lastNotNull"]}, "showThresholdMarkers": True}, min=0, max=1)
        b.add("timeseries", "Consecutive failed checkpoints vs tolerable",
              [target(f"max(flink_checkpoint_consecutive_failures{{{JSEL}}})", "failures in a row"),
               target(f"max(flink_checkpoint_tolerable_failures{{{JSEL}}})", "tolerable failures")],
              12, 8, needs=["flink_checkpoint_consecutive_failures", "flink_checkpoint_tolerable_failures"], unit="none",
              description="Flink fails the job when the failures in a row exceed the tolerable failures "
                          "(execution.checkpointing.tolerable-failed-checkpoints).",
              overrides=[{"matcher": {"id": "byName", "options": "tolerable failures"},
                          "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}, {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}],
              **ts_opts())
    else:
        b.add("timeseries", "Failures in a row (since the last completed checkpoint)",
              [target(f"max(flink_checkpoint_last_failed_timestamp_seconds{{{JSEL}}}) > bool max(flink_checkpoint_last_completed_timestamp_seconds{{{JSEL}}})", "last outcome failed"),
               target(f"max(flink_checkpoint_tolerable_failures{{{JSEL}}})", "tolerable failures")],
              12, 8, needs=["flink_checkpoint_last_failed_timestamp_seconds", "flink_checkpoint_tolerable_failures"], unit="none",
              description="1 while the latest finished checkpoint failed (the failure counter Flink compares with the tolerable failures is running).",
              **ts_opts())
    b.newline()

    variables = [var_ds(),
                 var_query("cluster", "Cluster", "label_values(checkpoint_sentinel_flink_up, cluster)", False, False),
                 var_query("job", "Job", "label_values(flink_job_info{cluster=\"$cluster\"}, job_name)", False, False),
                 var_query("job_id", "Job id", "label_values(flink_job_info{cluster=\"$cluster\", job_name=\"$job\"}, job_id)", False, False, hide=0)]
    links = [{"title": "Overview", "type": "link", "url": "/d/cs-flink-checkpoints", "icon": "dashboard",
              "includeVars": False, "keepTime": True, "targetBlank": False, "tags": [], "asDropdown": False, "tooltip": ""}]
    return dashboard("cs-flink-checkpoint-job", "Flink checkpoints: job drill-down",
                     "One Flink job: phase P95s over time, slowest operators, checkpoint events and root causes from the logs, "
                     "the reference model's expected vs observed interval, and the tolerable-failure budget.",
                     b.panels, variables, links, ["job"]), b.left_out


def main():
    avail = documented_metrics()
    check = "--check" in sys.argv[1:]
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else OUT
    rc = 0
    for name, build in (("flink-checkpoints-overview.json", overview), ("flink-checkpoints-job.json", job)):
        board, left_out = build(avail)
        text = json.dumps(board, indent=2, ensure_ascii=False) + "\n"
        path = out / name
        for title, missing in left_out:
            print(f"{name}: left out panel {title!r}: not in docs/metrics.md: {', '.join(missing)}", file=sys.stderr)
        if check:
            if not path.exists() or path.read_text() != text:
                print(f"{path.relative_to(ROOT)} differs from .ci/gen-dashboards.py (run it)", file=sys.stderr)
                rc = 1
        else:
            out.mkdir(exist_ok=True)
            path.write_text(text)
            print(f"wrote {path} ({len(board['panels'])} panels)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
