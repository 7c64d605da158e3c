#!/usr/bin/env bash
# e2e/ui_check.sh -- the status page in headless Chromium against the demo cluster.
#
# Starts `checkpoint-sentinel demo` on a free loopback port, waits until every demo job has
# checkpoints, dumps the DOM of `/` (jobs table) and of a job page (`/#/jobs/demo/<id>`, the
# backpressured and the expiring job) with Chromium's --dump-dom, checks that job names, health,
# the phase names, the timeline, the shadow's explanation sentence, the chart of P95 per phase
# over time (one polyline per phase, at desktop and narrow width) and log events are there, and
# takes the screenshots docs/status-page.png and docs/status-page-job.png. Stops the demo again,
# also on failure.
#
# Usage: e2e/ui_check.sh
# Env:   SENTINEL_BIN (default $CARGO_TARGET_DIR or target, /debug/checkpoint-sentinel),
#        CHROMIUM (default chromium), UI_CHECK_PORT (default 19818), UI_CHECK_WAIT (seconds, 25)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SENTINEL_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/checkpoint-sentinel}"
CHROMIUM="${CHROMIUM:-chromium}"
PORT="${UI_CHECK_PORT:-19818}"
WAIT="${UI_CHECK_WAIT:-25}"
WORK="$(mktemp -d)"
BASE="http://127.0.0.1:$PORT"
DEMO_PID=""

cleanup() {
  if [ -n "$DEMO_PID" ]; then kill "$DEMO_PID" 2>/dev/null || true; wait "$DEMO_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "ui_check: FAIL: $*" >&2; exit 1; }

command -v "$CHROMIUM" >/dev/null || fail "$CHROMIUM not found (apt-get install -y --no-install-recommends chromium)"
[ -x "$BIN" ] || fail "$BIN not found: cargo build first"

"$BIN" demo --listen "127.0.0.1:$PORT" >"$WORK/demo.out" 2>"$WORK/demo.err" &
DEMO_PID=$!

# Wait for every job to have a finished checkpoint and the expiring one an expiry.
deadline=$((SECONDS + 60))
until curl -fsS "$BASE/api/v1/jobs" -o "$WORK/jobs.json" 2>/dev/null \
  && python3 - "$WORK/jobs.json" 2>/dev/null <<'EOF'
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
assert len(jobs) == 5 and all(j["last_checkpoint"] for j in jobs)
EOF
do
  [ $SECONDS -lt $deadline ] || { cat "$WORK/demo.err" >&2; fail "the demo jobs did not checkpoint within 60 s"; }
  sleep 1
done
# Let the windows fill: the expiring job expires every third checkpoint, the shadow needs a few.
sleep "$WAIT"
curl -fsS "$BASE/api/v1/jobs" -o "$WORK/jobs.json"
job_id() { python3 -c "import json,sys; print([j['job_id'] for j in json.load(open('$WORK/jobs.json'))['jobs'] if '$1' in j['name']][0])"; }
BP="$(job_id backpressured)"
EXP="$(job_id expiring)"

chrome() {
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --user-data-dir="$WORK/profile-$RANDOM" --virtual-time-budget=4000 "$@" 2>>"$WORK/chromium.err"
}

check() { # FILE NEEDLE...
  local file="$1"; shift
  for needle in "$@"; do
    grep -qF -- "$needle" "$file" || fail "'$needle' not in the DOM of $file ($(wc -c <"$file") bytes)"
  done
}

# The first view without a virtual-time budget: the jobs table comes with the page (its data is
# embedded at request time), not after a fetch, so a plain headless dump already shows it.
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$WORK/profile-nobudget" --dump-dom "$BASE/" >"$WORK/index-nobudget.html" 2>>"$WORK/chromium.err"
check "$WORK/index-nobudget.html" 'id="jobs"' demo-healthy-0 demo-failing-4
grep -qF 'Loading…' "$WORK/index-nobudget.html" && fail "the page without a time budget still says Loading…"
echo "ui_check: jobs table drawn without a virtual-time budget"

# The API is read before and after the DOM: the demo's failing job fails over every few seconds,
# and the sentence of its answer changes with it ("N of the last N failed" / "RESTARTING").
curl -fsS "$BASE/api/v1/jobs" -o "$WORK/jobs-before.json"
chrome --dump-dom "$BASE/" >"$WORK/index.html"
check "$WORK/index.html" 'id="jobs"' demo-healthy-0 demo-backpressured-1 demo-expiring-2 demo-minpause-3 \
  demo-failing-4 'P95 per phase' 'title="P95 alignment"' 'title="P95 start delay"' 'title="P95 sync"' 'title="P95 async"' \
  'class="badge ok"' 'class="badge critical"' 'id="headlines"'
# Each row's badge agrees with the alert states: a job with a pending or firing alert is never
# shown "ok" (the backpressured job: alignment at 69 % of its interval, its alerts pending at
# first), and one whose only alerts are pending shows "pending" with them listed.
curl -fsS "$BASE/api/v1/jobs" -o "$WORK/jobs-now.json"
python3 - "$WORK/index.html" "$WORK/jobs-now.json" "$WORK/jobs-before.json" <<'EOF' || fail "health badges of the jobs table"
import json, re, sys
dom, jobs = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))["jobs"]
rows = dict(re.findall(r'<tr class="job" data-href="#/jobs/demo/(\w+)" data-health="(\w+)">', dom))
assert len(rows) == 5, f"rows: {rows}"
for j in jobs:
    shown = rows[j["job_id"]]
    pending, firing = j["pending_alerts"], len(j["firing_alerts"])
    assert shown in ("critical", "warning", "pending", "unknown", "ok"), shown
    assert not (shown == "ok" and (pending or firing)), f"{j['name']}: ok with {pending} pending, {firing} firing"
    if pending and not firing and shown not in ("critical", "warning"):
        assert shown == "pending" and "(pending)</span>" in dom, f"{j['name']}: {shown}"
    print(f"ui_check: {j['name']}: {shown} ({pending} pending, {firing} firing)")
bp = next(j for j in jobs if "backpressured" in j["name"])
assert rows[bp["job_id"]] != "ok", f"backpressured job shown ok: {bp['health_reasons']}"
# Worst first: the rows in the API's order, no ok job above one that is not, the critical one on top.
order = re.findall(r'<tr class="job" data-href="#/jobs/demo/(\w+)"', dom)
assert order == [j["job_id"] for j in jobs], f"rows {order} not in the API's order"
rank = ["critical", "warning", "pending", "unknown", "ok"]
assert [rank.index(rows[i]) for i in order] == sorted(rank.index(rows[i]) for i in order), [rows[i] for i in order]
assert rows[order[0]] == "critical", f"first row {rows[order[0]]}"
# The expiring job's row shows its expiries beside its last checkpoint, whatever that was.
exp = next(j for j in jobs if "expiring" in j["name"])
row = dom.split(f'data-href="#/jobs/demo/{exp["job_id"]}"')[1].split("</tr>")[0]
assert exp["recent_outcomes"]["expired"] > 0 and re.search(r'class="fails">\d+ expired', row), row
# The headline above the table names the worst job and what is wrong with it.
head = dom.split('id="headlines"')[1].split("<h2>")[0]
# (The DOM and the API were read a poll apart: compare the sentence without its numbers, with
# the API's answer from before the DOM or from after it.)
digits = lambda t: re.sub(r"\d+(\.\d+)?", "N", t.replace("&amp;", "&"))
worsts = [jobs[0], json.load(open(sys.argv[3]))["jobs"][0]]
assert any(w["name"] in head and digits(w["answer"]["what"]) in digits(head) for w in worsts), head
print(f"ui_check: rows worst first: {[rows[i] for i in order]}; headline: {head.split('</p>')[0].split('>')[-1]}")
EOF
echo "ui_check: jobs table ok"

chrome --dump-dom "$BASE/#/jobs/demo/$BP" >"$WORK/job-bp.html"
check "$WORK/job-bp.html" 'id="jobname">demo-backpressured-1' 'aria-label="checkpoint timeline"' \
  'start delay' 'alignment' 'sync' 'async' 'id="explanation">checkpoints every' 'stateful-map' \
  'Slowest subtask in the window' 'P95 per phase' 'expected next' 'id="answer"'
echo "ui_check: backpressured job page ok"

# The chart of P95 per phase over time: in the SVG, one polyline per phase with at least two
# samples from the API plus the current value drawn on to now, and the API's series behind it.
p95_chart() { # DOM-FILE JOB-ID MAX-WIDTH
  curl -fsS "$BASE/api/v1/jobs/demo/$2" -o "$WORK/detail.json"
  python3 - "$1" "$WORK/detail.json" "$3" <<'EOF' || fail "P95-over-time chart of $2 in $1"
import json, re, sys
dom, detail, max_width = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), float(sys.argv[3])
phases = ["end_to_end", "start_delay", "alignment", "sync", "async"]
history = detail["p95_history"]
assert len(history) >= 2, f"the API has {len(history)} P95 samples"
assert all(p["p95_ms"][k] is not None for p in history for k in phases), "a phase without P95"
m = re.search(r'<svg viewBox="0 0 ([\d.]+) [\d.]+" id="p95time"[^>]*>(.*?)</svg>', dom, re.S)
assert m, "no svg#p95time"
assert float(m.group(1)) <= max_width, f"chart {m.group(1)} px wide, expected at most {max_width}"
lines = re.findall(r'<polyline data-phase="(\w+)" points="([^"]*)"', m.group(2))
assert sorted(k for k, _ in lines) == sorted(phases), f"polylines: {[k for k, _ in lines]}"
points = {k: len(p.split()) for k, p in lines}
assert all(n >= 3 for n in points.values()), points
ticks = re.findall(r'>(\d+(?:\.\d+)? m?s)</text>', m.group(2))
assert len(ticks) >= 2 and ">now</text>" in m.group(2), f"axis labels: {ticks}"
legend = re.search(r'id="p95time-legend">(.*?)</div>', dom, re.S)
assert legend and all(l in legend.group(1) for l in ["total", "start delay", "alignment", "sync", "async"])
print(f"{len(lines)} polylines, {min(points.values())}-{max(points.values())} points each, "
      f"{len(history)} API samples, {m.group(1)} px wide")
EOF
}
chart="$(p95_chart "$WORK/job-bp.html" "$BP" 1200)" || exit 1
echo "ui_check: P95 over time, backpressured job: $chart"
# Headless Chromium's narrowest window is 500 px: the chart must fit it, not overflow.
chrome --window-size=500,900 --dump-dom "$BASE/#/jobs/demo/$BP" >"$WORK/job-bp-narrow.html"
chart="$(p95_chart "$WORK/job-bp-narrow.html" "$BP" 500)" || exit 1
echo "ui_check: P95 over time, 500 px window: $chart"

chrome --dump-dom "$BASE/#/jobs/demo/$EXP" >"$WORK/job-exp.html"
check "$WORK/job-exp.html" 'id="jobname">demo-expiring-2' 'class="out-expired"' '>exp</text>' \
  'id="events"' 'Checkpoint expired before completing' 'triggers were moved by the' 'id="p95time"' \
  'id="answer"' 'never acknowledged checkpoint' 'Next:'
# The answer first: what is wrong and where, then the alerts, the checkpoints, the charts, and
# the shadow model's why last; the window's slowest subtask is the one that never acknowledged.
curl -fsS "$BASE/api/v1/jobs/demo/$EXP" -o "$WORK/exp-detail.json"
python3 - "$WORK/job-exp.html" "$WORK/exp-detail.json" <<'EOF' || fail "the expiring job's page does not open with the answer"
import json, re, sys
dom, answer = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))["answer"]
# The answer panel says what the API says (read a poll apart: compared without the numbers).
digits = lambda t: re.sub(r"\d+(\.\d+)?", "N", t.replace("&amp;", "&"))
what = re.search(r'id="answer"[^>]*><p class="what">([^<]*)<', dom)
assert what and digits(what.group(1).strip()) == digits(answer["what"]), (what and what.group(1), answer["what"])
assert "never acknowledged checkpoint" in answer["where"] and answer["class"] == "timeout", answer
marks = ['id="answer"', '<h3>Alerts</h3>', '<h3>Checkpoints</h3>', '<h3>P95 per phase</h3>', '<h3>Why the checkpoints come when they do</h3>']
at = [dom.find(m) for m in marks]
assert all(i >= 0 for i in at) and at == sorted(at), list(zip(marks, at))
slowest = re.search(r'id="slowest">Slowest subtask in the window: <b>([^<]*)</b>', dom)
assert slowest and "never acknowledged checkpoint" in slowest.group(1) and "(expired after" in slowest.group(1), slowest
print(f"ui_check: expiring job: answer, alerts, checkpoints, charts, why; slowest: {slowest.group(1)}")
EOF
echo "ui_check: expiring job page ok (the answer first, expired checkpoints marked, log events with root causes)"

mkdir -p "$ROOT/docs"
chrome --window-size=1280,720 --screenshot="$ROOT/docs/status-page.png" "$BASE/" >/dev/null
chrome --window-size=1280,1700 --screenshot="$ROOT/docs/status-page-job.png" "$BASE/#/jobs/demo/$EXP" >/dev/null
[ -s "$ROOT/docs/status-page.png" ] && [ -s "$ROOT/docs/status-page-job.png" ] || fail "no screenshots"
echo "ui_check: screenshots docs/status-page.png docs/status-page-job.png"

# The other endpoints keep working beside the page.
curl -fsS "$BASE/metrics" -o "$WORK/metrics" && grep -q '^flink_checkpoints_total{' "$WORK/metrics" || fail "/metrics"
curl -fsS "$BASE/healthz" >/dev/null || fail "/healthz"
curl -fsS "$BASE/api/v1/alerts" -o "$WORK/alerts" && grep -q '"active"' "$WORK/alerts" || fail "/api/v1/alerts"
# One contract: times as epoch ms under `…_at_ms`; the deprecated names are gone.
curl -fsS "$BASE/api/v1/jobs/demo/$EXP" -o "$WORK/exp.json"
for gone in '"active_since":' '"fired_at":' '"resolved_at":' '"expected_next_trigger":'; do
  ! grep -qF "$gone" "$WORK/alerts" "$WORK/exp.json" || fail "$gone is still served"
done
echo "ui_check: ok"
