#!/usr/bin/env python3
""".ci/check-dashboards.py -- checks the Grafana dashboards in dashboards/ (stdlib + promtool).

For every dashboard:
  * a fixed, unique uid, a title, and the datasource template variable DS_PROMETHEUS
    (type datasource), which every panel and target uses as "${DS_PROMETHEUS}";
  * every panel (also inside rows) has a unique id and a gridPos inside the 24 columns, and no
    two panels overlap;
  * every target has a refId (unique in its panel) and a non-empty expr;
  * every expr parses as PromQL: Grafana's variables are substituted ($__rate_interval -> 5m,
    $__interval -> 1m, $__range -> 1h, any other $var -> .*), the expressions are written as
    recording rules and `promtool check rules` parses them;
  * every metric an expr (or a label_values() variable query) names is listed in the table of
    docs/metrics.md (a summary's _sum and _count count as listed), every label in a selector
    is one of that metric's labels (plus quantile for summaries), and every label in by(),
    without(), on() and ignoring() belongs to some metric of the expression;
  * the Helm chart ships each dashboard (helm/checkpoint-sentinel/files/dashboards/<name> is a
    symlink to it).
Prints one line per finding and exits 1 if there is any.

Usage: python3 .ci/check-dashboards.py [--promtool PATH] [--no-chart-links] [DASHBOARD.json ...]
(METRICS_DOC=FILE checks against another metrics table.)
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYWORDS = {"and", "or", "unless", "bool", "by", "without", "on", "ignoring", "group_left", "group_right",
            "offset", "inf", "nan", "start", "end"}
GRAFANA_VARS = [("${__rate_interval}", "5m"), ("$__rate_interval", "5m"), ("${__interval}", "1m"),
                ("$__interval", "1m"), ("${__range}", "1h"), ("$__range_s", "3600"), ("$__range", "1h")]
IDENT = r"[a-zA-Z_:][a-zA-Z0-9_:]*"

findings = []


def finding(where, msg):
    findings.append(f"{where}: {msg}")


def documented_metrics():
    """{metric name: (type, set of labels)} from the table in docs/metrics.md."""
    text = Path(os.environ.get("METRICS_DOC", ROOT / "docs" / "metrics.md")).read_text()
    table = text.split("<!-- BEGIN METRICS -->", 1)[-1].split("<!-- END METRICS -->", 1)[0]
    metrics = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        name, mtype = cells[0].strip("`"), cells[1]
        labels = set(re.findall(r"`(" + IDENT + r")`", cells[2]))
        metrics[name] = (mtype, labels | ({"quantile"} if mtype == "summary" else set()))
        if mtype in ("summary", "histogram"):
            metrics[name + "_sum"] = (mtype, labels)
            metrics[name + "_count"] = (mtype, labels)
        if mtype == "histogram":
            metrics[name + "_bucket"] = (mtype, labels | {"le"})
    if not metrics:
        finding("docs/metrics.md", "no metrics table found")
    return metrics


def substitute(expr):
    for var, val in GRAFANA_VARS:
        expr = expr.replace(var, val)
    # Any other variable (they stand in label matcher strings): a regex that matches anything.
    return re.sub(r"\$\{[^}]*\}|\$" + IDENT, ".*", expr)


def analyse(expr):
    """Metric names, {metric: labels in its selector}, and labels of grouping clauses."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)  # blank the strings
    selectors = []
    for m in re.finditer(r"(" + IDENT + r")?\s*\{([^}]*)\}", s):
        labels = set(re.findall(r"(" + IDENT + r")\s*(?:=~|!~|!=|=)", m.group(2)))
        selectors.append((m.group(1), labels))
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    grouping = set()
    for m in re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", s):
        grouping |= set(re.findall(IDENT, m.group(1)))
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w:.])(" + IDENT + r")(\s*\()?", s):
        if m.group(2) or m.group(1) in KEYWORDS:
            continue
        names.add(m.group(1))
    names |= {n for n, _ in selectors if n}
    return names, selectors, grouping


def check_metrics(where, expr, metrics):
    names, selectors, grouping = analyse(expr)
    for n in sorted(names):
        if n not in metrics:
            finding(where, f"metric {n} is not in docs/metrics.md")
    for n, labels in selectors:
        if not n or n not in metrics:
            continue
        for label in sorted(labels - metrics[n][1] - {"__name__"}):
            finding(where, f"label {label} is not a label of {n}")
    known = set().union(*(metrics[n][1] for n in names if n in metrics)) if names else set()
    for label in sorted(grouping - known - {"__name__"}):
        finding(where, f"grouping label {label} belongs to no metric of the expression")


def panels_of(panels):
    for p in panels:
        yield p
        yield from panels_of(p.get("panels", []))


def check_dashboard(path, metrics, uids):
    name = path.name
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        finding(name, f"not valid JSON: {e}")
        return []
    if not d.get("uid") or not isinstance(d.get("uid"), str):
        finding(name, "no fixed uid")
    elif d["uid"] in uids:
        finding(name, f"uid {d['uid']} also used by {uids[d['uid']]}")
    else:
        uids[d["uid"]] = name
    if not d.get("title"):
        finding(name, "no title")
    if d.get("id") not in (None,):
        finding(name, "has an id (provisioned dashboards must not; use uid)")
    variables = d.get("templating", {}).get("list", [])
    ds = [v for v in variables if v.get("name") == "DS_PROMETHEUS"]
    if not ds or ds[0].get("type") != "datasource" or ds[0].get("query") != "prometheus":
        finding(name, "no datasource variable DS_PROMETHEUS of type datasource (query prometheus)")
    for v in variables:
        if v.get("type") != "query":
            continue
        where = f"{name} variable {v.get('name')}"
        if v.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
            finding(where, "datasource is not ${DS_PROMETHEUS}")
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*(" + IDENT + r")\s*\)\s*", q, re.S)
        if not m:
            finding(where, f"query is not label_values(selector, label): {q!r}")
            continue
        selector, label = substitute(m.group(1)), m.group(2)
        check_metrics(where, selector, metrics)
        for n in analyse(selector)[0]:
            if n in metrics and label not in metrics[n][1]:
                finding(where, f"label {label} is not a label of {n}")

    rules = []
    ids = set()
    cells = {}
    for p in panels_of(d.get("panels", [])):
        pid = p.get("id")
        where = f"{name} panel {pid} {p.get('title')!r}"
        if not isinstance(pid, int):
            finding(where, "no integer id")
        elif pid in ids:
            finding(where, "duplicate panel id")
        ids.add(pid)
        g = p.get("gridPos", {})
        x, y, w, h = (g.get(k) for k in ("x", "y", "w", "h"))
        if not all(isinstance(v, int) for v in (x, y, w, h)):
            finding(where, f"gridPos incomplete: {g}")
        elif x < 0 or y < 0 or w < 1 or h < 1 or x + w > 24:
            finding(where, f"gridPos outside the 24 columns: {g}")
        else:
            for cx in range(x, x + w):
                for cy in range(y, y + h):
                    if (cx, cy) in cells:
                        finding(where, f"overlaps panel {cells[(cx, cy)]}")
                        break
                    cells[(cx, cy)] = pid
                else:
                    continue
                break
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
            finding(where, "panel datasource is not ${DS_PROMETHEUS}")
        targets = p.get("targets", [])
        if not targets and p.get("type") != "text":
            finding(where, "no targets")
        refs = set()
        for t in targets:
            ref, expr = t.get("refId"), t.get("expr")
            twhere = f"{where} target {ref}"
            if not ref:
                finding(twhere, "no refId")
            elif ref in refs:
                finding(twhere, "duplicate refId")
            refs.add(ref)
            if not isinstance(expr, str) or not expr.strip():
                finding(twhere, "no expr")
                continue
            if t.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
                finding(twhere, "target datasource is not ${DS_PROMETHEUS}")
            concrete = substitute(expr)
            check_metrics(twhere, concrete, metrics)
            record = re.sub(r"[^a-zA-Z0-9_]", "_", f"dashboard:{path.stem}:panel{pid}_{ref}")
            record = "dashboard:" + record[len("dashboard_"):]
            rules.append((record, concrete, twhere))
    return rules


def promtool_check(rules, promtool):
    """Writes the expressions as recording rules and lets promtool parse them."""
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "dashboard-queries.rules.yml"
        lines = ["groups:", "  - name: dashboard-queries", "    rules:"]
        for record, expr, _ in rules:
            lines.append(f"      - record: {record}")
            lines.append("        expr: " + json.dumps(expr))  # a JSON string is a YAML string
        f.write_text("\n".join(lines) + "\n")
        r = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0:
            for line in out.splitlines():
                m = re.search(r"rule (\d+)", line)
                if m and int(m.group(1)) - 1 < len(rules):
                    finding(rules[int(m.group(1)) - 1][2], f"promtool: {line.strip()}")
                elif line.strip() and not line.startswith("Checking ") and line.strip() != "FAILED:":
                    finding("promtool", line.strip())
        return r.returncode == 0, out


def main(argv):
    promtool = "promtool"
    if "--promtool" in argv:
        i = argv.index("--promtool")
        promtool = argv[i + 1]
        del argv[i:i + 2]
    chart_links = "--no-chart-links" not in argv
    argv = [a for a in argv if a != "--no-chart-links"]
    paths = [Path(a) for a in argv] or sorted((ROOT / "dashboards").glob("*.json"))
    if not paths:
        finding("dashboards/", "no dashboards")
    metrics = documented_metrics()
    uids = {}
    rules = []
    for p in paths:
        rules += check_dashboard(p, metrics, uids)
        link = ROOT / "helm" / "checkpoint-sentinel" / "files" / "dashboards" / p.name
        if chart_links and (not link.is_symlink() or link.resolve() != p.resolve()):
            finding(p.name, f"{link.relative_to(ROOT)} is not a symlink to it (the chart would not ship it)")
    ok, out = promtool_check(rules, promtool)
    print(f"promtool check rules on {len(rules)} dashboard queries: {out.splitlines()[-1] if out else ''}")
    for f in findings:
        print(f"FINDING {f}")
    print(f"dashboards: {len(paths)} checked, {len(rules)} queries, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
