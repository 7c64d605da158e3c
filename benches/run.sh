#!/usr/bin/env bash
# Side-by-side and whole-process measurements of the budgets in docs/performance.md (issue 10).
# Prints one table. Needs: python3, hyperfine (apt-get install -y hyperfine), curl, GNU grep,
# prometheus-alertmanager (latency).
#
#   benches/run.sh                  # everything
#   ONLY=scan benches/run.sh        # one part: scan | poll | sidecar | latency | rounds | scrapes
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default /tmp/sentinel-perf),
# LOG_MB (default 512), POLL_SECONDS (default 60, the CPU sampling window),
# ROUND_SECONDS (default 120, the window of `rounds`), DELAYS (default "5ms 0ms", the delays
# `rounds` adds to every REST answer), PORT_BASE (default 18100, the ports of `rounds`),
# SCRAPES (default 1000, the concurrent scrapes of `scrapes`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=${WORK:-/tmp/sentinel-perf}
LOG_MB=${LOG_MB:-512}
POLL_SECONDS=${POLL_SECONDS:-60}
ONLY=${ONLY:-all}
ROUND_SECONDS=${ROUND_SECONDS:-120}
DELAYS=${DELAYS:-5ms 0ms}
PORT_BASE=${PORT_BASE:-18100}
SCRAPES=${SCRAPES:-1000}
BIN=$TARGET/release/checkpoint-sentinel
mkdir -p "$WORK"
ROWS=()
row() { ROWS+=("$(printf '| %s | %s | %s | %s |' "$1" "$2" "$3" "$4")"); }
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

(cd "$ROOT" && cargo build --release --quiet)

# CPU seconds (user+system) of a process, from /proc/<pid>/stat.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
rss_mb() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
hwm_mb() { awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
wait_http() { for _ in $(seq 1 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.2; done; return 1; }

# Starts the simulator (demo --no-daemon) and a daemon polling it every 10 s; measures the
# daemon's CPU over POLL_SECONDS after one warm-up minute, its RSS, and /metrics render time.
measure_daemon() {
  local jobs=$1 flink_port=$2 daemon_port=$3 name=$4
  local dir=$WORK/$name
  rm -rf "$dir" && mkdir -p "$dir"
  "$BIN" demo --no-daemon --jobs "$jobs" --interval-scale 30 --flink-listen "127.0.0.1:$flink_port" \
    --log-file "$dir/log/flink-demo-standalonesession-0.log" >"$dir/sim.out" 2>&1 &
  local sim=$!
  PIDS+=("$sim")
  wait_http "http://127.0.0.1:$flink_port/overview"
  cat >"$dir/sentinel.toml" <<EOF
[server]
listen = "127.0.0.1:$daemon_port"
[state]
dir = "$dir/state"
[[clusters]]
name = "perf"
url = "http://127.0.0.1:$flink_port"
poll_interval = "10s"
[[logs]]
cluster = "perf"
paths = ["$dir/log/*.log"]
EOF
  "$BIN" run --config "$dir/sentinel.toml" >"$dir/daemon.out" 2>&1 &
  local daemon=$!
  PIDS+=("$daemon")
  wait_http "http://127.0.0.1:$daemon_port/readyz"
  sleep 60 # warm-up: first sight of every job (configs, histories)
  local c0 c1
  c0=$(cpu_seconds "$daemon")
  sleep "$POLL_SECONDS"
  c1=$(cpu_seconds "$daemon")
  local cpu
  cpu=$(awk -v a="$c0" -v b="$c1" -v s="$POLL_SECONDS" 'BEGIN {printf "%.2f", 100 * (b - a) / s}')
  local per_job
  per_job=$(awk -v a="$c0" -v b="$c1" -v s="$POLL_SECONDS" -v j="$jobs" 'BEGIN {printf "%.0f", 1e6 * (b - a) / (s / 10) / j}')
  local rss_before
  rss_before=$(rss_mb "$daemon")
  local watched
  watched=$(curl -fs "http://127.0.0.1:$daemon_port/metrics" | awk '/^checkpoint_sentinel_watched_jobs/ {print $2}')
  # /metrics: median of 21 scrapes, as curl sees it (render + encode + transfer).
  local times
  times=$(for _ in $(seq 1 21); do curl -fs -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$daemon_port/metrics"; done | sort -n)
  local median
  median=$(echo "$times" | awk '{a[NR]=$1} END {printf "%.1f", 1000 * a[int((NR + 1) / 2)]}')
  local body
  body=$(curl -fs "http://127.0.0.1:$daemon_port/metrics" | wc -c)
  eval "${name}_cpu=$cpu ${name}_rss=$(rss_mb "$daemon") ${name}_rss_before=$rss_before ${name}_hwm=$(hwm_mb "$daemon") ${name}_per_job=$per_job ${name}_metrics_ms=$median ${name}_body=$body ${name}_watched=${watched:-?}"
  kill "$daemon" "$sim" 2>/dev/null || true
  wait "$daemon" "$sim" 2>/dev/null || true
}

# Starts the simulated cluster (demo --no-daemon with the given extra arguments) and a daemon
# polling it every 10 s, both into DIR, and waits until both answer; sets SIM and DAEMON.
start_sim_and_daemon() {
  local dir=$1 flink_port=$2 daemon_port=$3
  shift 3
  "$BIN" demo --no-daemon "$@" --interval-scale 30 --flink-listen "127.0.0.1:$flink_port" \
    --log-file "$dir/log/jm.log" >"$dir/sim.out" 2>&1 &
  SIM=$!
  PIDS+=("$SIM")
  wait_http "http://127.0.0.1:$flink_port/overview"
  printf '[server]\nlisten = "127.0.0.1:%s"\n[state]\ndir = "%s/state"\n[[clusters]]\nname = "perf"\nurl = "http://127.0.0.1:%s"\npoll_interval = "10s"\n' \
    "$daemon_port" "$dir" "$flink_port" >"$dir/sentinel.toml"
  "$BIN" run --config "$dir/sentinel.toml" >"$dir/daemon.out" 2>&1 &
  DAEMON=$!
  PIDS+=("$DAEMON")
  wait_http "http://127.0.0.1:$daemon_port/readyz"
}

# Poll rounds of 1,000 simulated jobs behind a network delay ($1, added by the simulator before
# every REST answer): the simulator and a daemon polling it every 10 s (no log tailing); after
# a 30 s warm-up (first sight of every job), the duration of every round over ROUND_SECONDS
# (from /api/v1/clusters, sampled every 0.5 s), the daemon's CPU per round, and its RSS.
measure_rounds() {
  local delay=$1 flink_port=$2 daemon_port=$3
  local dir=$WORK/rounds-$delay
  rm -rf "$dir" && mkdir -p "$dir"
  start_sim_and_daemon "$dir" "$flink_port" "$daemon_port" --jobs 1000 --rest-delay "$delay"
  local sim=$SIM daemon=$DAEMON
  sleep 30
  local c0 c1 end
  c0=$(cpu_seconds "$daemon")
  end=$((SECONDS + ROUND_SECONDS))
  while [ "$SECONDS" -lt "$end" ]; do
    curl -fs "http://127.0.0.1:$daemon_port/api/v1/clusters" >>"$dir/samples.jsonl" && echo >>"$dir/samples.jsonl"
    sleep 0.5
  done
  c1=$(cpu_seconds "$daemon")
  local rss hwm
  rss=$(rss_mb "$daemon")
  hwm=$(hwm_mb "$daemon")
  kill "$daemon" "$sim" 2>/dev/null || true
  wait "$daemon" "$sim" 2>/dev/null || true
  python3 "$ROOT/benches/rounds.py" "$dir/samples.jsonl" "$c0" "$c1" "$rss" "$hwm" "$delay" | tee "$dir/result.txt"
}

# SCRAPES concurrent /metrics scrapes of a daemon watching 10 simulated jobs (issue 15's
# budget, moved here from tests/hostile.rs, which keeps only that every scrape is answered).
measure_scrapes() {
  local flink_port=$1 daemon_port=$2
  local dir=$WORK/scrapes
  rm -rf "$dir" && mkdir -p "$dir"
  start_sim_and_daemon "$dir" "$flink_port" "$daemon_port" --jobs 10
  local sim=$SIM daemon=$DAEMON
  for _ in $(seq 1 100); do
    [ "$(curl -fs "http://127.0.0.1:$daemon_port/metrics" | grep -c '^flink_checkpoints_total{')" -ge 20 ] && break
    sleep 0.2
  done
  python3 "$ROOT/benches/scrapes.py" "127.0.0.1:$daemon_port" "$SCRAPES" | tee "$dir/result.txt"
  kill "$daemon" "$sim" 2>/dev/null || true
  wait "$daemon" "$sim" 2>/dev/null || true
}

if [ "$ONLY" = all ] || [ "$ONLY" = scan ]; then
  LOG=$WORK/flink-${LOG_MB}m.log
  [ -s "$LOG" ] || python3 "$ROOT/benches/gen-flink-log.py" "$LOG" "$LOG_MB"
  # The needles scan-logs looks for (src/sources/logs/parse.rs BUILTINS), and the failure ones only.
  ALL='Triggering checkpoint |Completed checkpoint |expired before completing|Decline checkpoint |Failed to trigger or complete checkpoint|Failed to trigger checkpoint for job|Triggering Checkpoint |Received late message for now expired|before completing current checkpoint|to executing it exceeded threshold|asynchronous part of checkpoint|Could not complete snapshot |Restoring job |Received barrier from channel|Did not receive barrier from|Exceeded checkpoint tolerable failure threshold'
  FAIL='expired before completing|Decline checkpoint |Failed to trigger or complete checkpoint|Exceeded checkpoint tolerable failure threshold'
  hyperfine -N --warmup 1 --runs 5 --output=pipe --export-json "$WORK/scan.json" \
    -n grep-all "grep -c -E '$ALL' $LOG" \
    -n grep-failures "grep -c -E '$FAIL' $LOG" \
    -n scan-logs "$BIN scan-logs --format json $LOG" >"$WORK/hyperfine.txt"
  read -r g_all g_fail scan < <(python3 - "$WORK/scan.json" <<'EOF'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
print(r["grep-all"], r["grep-failures"], r["scan-logs"])
EOF
)
  size=$(stat -L -c %s "$LOG")
  rss=$(python3 - "$BIN" "$LOG" <<'EOF'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "scan-logs", "--format", "json", sys.argv[2]], stdout=subprocess.DEVNULL, check=True)
print("%.1f" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
EOF
)
  mbps() { awk -v b="$size" -v t="$1" 'BEGIN {printf "%.0f", b / t / 1e6}'; }
  ratio=$(awk -v g="$g_fail" -v s="$scan" 'BEGIN {printf "%.2f", g / s}')
  ratio_all=$(awk -v g="$g_all" -v s="$scan" 'BEGIN {printf "%.2f", g / s}')
  row "scan-logs vs grep -c -E (failure needles), $((size / 1048576)) MiB" "≥ 1.5×" \
    "${ratio}× ($(mbps "$scan") vs $(mbps "$g_fail") MB/s)" "hyperfine -N --output=pipe"
  row "scan-logs vs grep -c -E (all 16 needles)" "≥ 1.5×" "${ratio_all}× (grep $(mbps "$g_all") MB/s)" "same run"
  row "scan-logs peak RSS" "bounded" "${rss} MB" "getrusage maxrss"
fi

if [ "$ONLY" = all ] || [ "$ONLY" = poll ]; then
  measure_daemon 1000 18081 19717 big
  row "daemon CPU, 1,000 jobs polled every 10 s" "< 10 % of a core" "${big_cpu} % (${big_per_job} µs CPU per job per poll)" "/proc/pid/stat over ${POLL_SECONDS} s"
  row "daemon RSS, 1,000 jobs (watched: ${big_watched})" "< 100 MB" "${big_rss_before} MB before the first scrape, ${big_rss} MB after 23 scrapes (peak ${big_hwm})" "/proc/pid/status"
  row "/metrics scrape, 1,000 jobs (${big_body} bytes)" "< 50 ms" "${big_metrics_ms} ms median of 21" "curl time_total"
fi

if [ "$ONLY" = all ] || [ "$ONLY" = sidecar ]; then
  measure_daemon 10 18082 19718 small
  row "idle sidecar CPU, 10 jobs" "< 1 %" "${small_cpu} %" "/proc/pid/stat over ${POLL_SECONDS} s"
  row "idle sidecar RSS, 10 jobs" "< 20 MB" "${small_rss} MB (peak ${small_hwm})" "/proc/pid/status"
fi

if [ "$ONLY" = all ] || [ "$ONLY" = rounds ]; then
  i=0
  for delay in $DELAYS; do
    measure_rounds "$delay" $((PORT_BASE + 2 * i)) $((PORT_BASE + 2 * i + 1))
    row "poll round, 1,000 jobs, +$delay per request" "P50 < 2 s at 5 ms" "$(cut -d: -f2- "$WORK/rounds-$delay/result.txt")" "/api/v1/clusters every 0.5 s over ${ROUND_SECONDS} s"
    i=$((i + 1))
  done
fi

if [ "$ONLY" = all ] || [ "$ONLY" = scrapes ]; then
  measure_scrapes 18083 19719
  row "$SCRAPES concurrent /metrics scrapes, 10 jobs" "P50 < 8 s" "$(cut -d: -f2- "$WORK/scrapes/result.txt")" "benches/scrapes.py"
fi

if [ "$ONLY" = all ] || [ "$ONLY" = latency ]; then
  python3 "$ROOT/benches/log_to_alertmanager.py" "$BIN" "$WORK/latency" --lines 100 | tee "$WORK/latency.out" | tail -1
  lat=$(tail -1 "$WORK/latency.out")
  row "log line → Alertmanager, 100 lines, rule \`for\` 0" "p99 < 1 s" "${lat#latency: }" "benches/log_to_alertmanager.py"
fi

echo
echo "machine: $(nproc) cores, $(awk '/model name/ {$1=$2=$3=""; print; exit}' /proc/cpuinfo | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| budget | target | measured | how |"
echo "|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
