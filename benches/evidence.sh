#!/usr/bin/env bash
# The cost of the evidence rounds (issue 27): the daemon's CPU with `[evidence]` on and off, and
# the evidence requests per round it makes to the JobManager, for 1 and 1,000 simulated jobs
# (demo --no-daemon serves the metrics endpoints). Prints one table for docs/performance.md.
#
#   benches/evidence.sh
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default /tmp/sentinel-evidence),
# SECONDS_MEASURED (default 60, after a 40 s warm-up), PORT_BASE (default 18300),
# JOB_COUNTS (default "1 1000"), BIN (default the release build), SKIP_BUILD (set: no build).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${WORK:-/tmp/sentinel-evidence}
MEASURED=${SECONDS_MEASURED:-60}
PORT_BASE=${PORT_BASE:-18300}
JOB_COUNTS=${JOB_COUNTS:-1 1000}
BIN=${BIN:-$TARGET/release/checkpoint-sentinel}
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

[ -n "${SKIP_BUILD:-}" ] || (cd "$ROOT" && cargo build --release --quiet)

cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
wait_http() { for _ in $(seq 1 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.2; done; return 1; }
counter() { curl -fs "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m) == 1 {s += $NF} END {print s + 0}'; }

echo "| jobs | evidence | daemon CPU | evidence requests per round (made / cut) | failed |"
echo "| --- | --- | --- | --- | --- |"
port=$PORT_BASE
for jobs in $JOB_COUNTS; do
  for evidence in false true; do
    dir=$WORK/$jobs-$evidence
    rm -rf "$dir" && mkdir -p "$dir"
    flink=$port daemon=$((port + 1))
    port=$((port + 2))
    "$BIN" demo --no-daemon --jobs "$jobs" --interval-scale 30 --flink-listen "127.0.0.1:$flink" \
      --log-file "$dir/log/jm.log" >"$dir/sim.out" 2>&1 &
    sim=$!
    PIDS+=("$sim")
    wait_http "http://127.0.0.1:$flink/overview"
    printf '[server]\nlisten = "127.0.0.1:%s"\n[state]\ndir = "%s/state"\n[[clusters]]\nname = "perf"\nurl = "http://127.0.0.1:%s"\npoll_interval = "10s"\n[evidence]\nenabled = %s\n' \
      "$daemon" "$dir" "$flink" "$evidence" >"$dir/sentinel.toml"
    "$BIN" run --config "$dir/sentinel.toml" >"$dir/daemon.out" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_http "http://127.0.0.1:$daemon/readyz"
    sleep 40
    c0=$(cpu_seconds "$pid")
    m0=$(counter "$daemon" 'checkpoint_sentinel_evidence_requests_total{cluster="perf",outcome="made"}')
    x0=$(counter "$daemon" 'checkpoint_sentinel_evidence_requests_total{cluster="perf",outcome="cut"}')
    f0=$(counter "$daemon" 'checkpoint_sentinel_evidence_requests_total{cluster="perf",outcome="failed"}')
    sleep "$MEASURED"
    c1=$(cpu_seconds "$pid")
    m1=$(counter "$daemon" 'checkpoint_sentinel_evidence_requests_total{cluster="perf",outcome="made"}')
    x1=$(counter "$daemon" 'checkpoint_sentinel_evidence_requests_total{cluster="perf",outcome="cut"}')
    f1=$(counter "$daemon" 'checkpoint_sentinel_evidence_requests_total{cluster="perf",outcome="failed"}')
    curl -fs "http://127.0.0.1:$daemon/metrics" >"$dir/metrics.prom"
    kill "$pid" "$sim" 2>/dev/null || true
    wait "$pid" "$sim" 2>/dev/null || true
    rounds=$((MEASURED / 10))
    awk -v j="$jobs" -v e="$evidence" -v a="$c0" -v b="$c1" -v s="$MEASURED" -v m="$((m1 - m0))" \
      -v x="$((x1 - x0))" -v f="$((f1 - f0))" -v r="$rounds" \
      'BEGIN {printf "| %s | %s | %.2f %% | %.1f / %.1f | %d |\n", j, e, 100 * (b - a) / s, m / r, x / r, f}'
  done
done
