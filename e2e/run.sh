#!/usr/bin/env bash
# e2e/run.sh -- end-to-end checks of checkpoint-sentinel against a live Flink cluster.
#
# Installs Flink (default 2.3.0) from PyPI into the e2e cache and starts it on loopback, starts a
# real Alertmanager and a real Prometheus (Debian packages) on loopback, runs the daemon (the
# binary from `cargo build`) polling Flink's REST API, tailing its log folder, pushing alerts to
# the Alertmanager and scraped by the Prometheus, then runs e2e/scenarios.py (healthy, expired,
# declined, backpressure, failover, prometheus; `checkpoint-sentinel diagnose` runs live in expired
# and backpressure). Everything it started is stopped again, also on failure.
#
# Usage: e2e/run.sh [VERSION]
# Env:   SENTINEL_BIN (default $CARGO_TARGET_DIR or target, then debug/checkpoint-sentinel), SENTINEL_E2E_SECONDS (35),
#        SENTINEL_E2E_ONLY ("healthy expired ..." to run some scenarios only),
#        SENTINEL_E2E_PORT_BASE (18000; Flink's ports are base+81..+130, see e2e/flink.sh),
#        SENTINEL_E2E_DAEMON_PORT (base+717), SENTINEL_E2E_AM_PORT (base+193),
#        SENTINEL_E2E_PROM_PORT (base+190). Every port follows the base, so two runs with bases
#        1000 apart share nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${1:-2.3.0}"
FLINK="$ROOT/e2e/flink.sh"
BIN="${SENTINEL_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/checkpoint-sentinel}"
WORK="$(mktemp -d)"
PORT_BASE="${SENTINEL_E2E_PORT_BASE:-18000}"
export SENTINEL_E2E_PORT_BASE="$PORT_BASE"   # flink.sh, also when scenarios.py calls it
DAEMON_PORT="${SENTINEL_E2E_DAEMON_PORT:-$((PORT_BASE + 717))}"
AM_PORT="${SENTINEL_E2E_AM_PORT:-$((PORT_BASE + 193))}"
PROM_PORT="${SENTINEL_E2E_PROM_PORT:-$((PORT_BASE + 190))}"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  # The daemon's pid (the store scenario restarts it).
  [ -f "$WORK/daemon.pid" ] && kill "$(cat "$WORK/daemon.pid")" 2>/dev/null || true
  "$FLINK" stop "$VERSION" >/dev/null 2>&1 || true
  echo "e2e work folder (daemon, alertmanager and prometheus logs): $WORK" >&2
}
trap cleanup EXIT

wait_http() { # URL SECONDS
  for _ in $(seq 1 "$2"); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 1; done
  echo "not answering: $1" >&2; return 1
}

[ -x "$BIN" ] || (cd "$ROOT" && cargo build)
"$FLINK" install "$VERSION"
"$FLINK" start "$VERSION" >/dev/null
REST="$("$FLINK" rest-url "$VERSION")"
LOG_DIR="$("$FLINK" log-dir "$VERSION")"

cat > "$WORK/alertmanager.yml" <<YAML
route:
  receiver: "null"
  group_wait: 0s
receivers:
  - name: "null"
YAML
prometheus-alertmanager --config.file="$WORK/alertmanager.yml" --storage.path="$WORK/am" \
  --web.listen-address="127.0.0.1:$AM_PORT" --cluster.listen-address= > "$WORK/alertmanager.log" 2>&1 &
PIDS+=($!)

cat > "$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
scrape_configs:
  - job_name: checkpoint-sentinel
    static_configs:
      - targets: ["127.0.0.1:$DAEMON_PORT"]
YAML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom" \
  --web.listen-address="127.0.0.1:$PROM_PORT" > "$WORK/prometheus.log" 2>&1 &
PIDS+=($!)

cat > "$WORK/sentinel.toml" <<TOML
[server]
listen = "127.0.0.1:$DAEMON_PORT"
[[clusters]]
name = "e2e"
url = "$REST"
poll_interval = "1s"
[[logs]]
cluster = "e2e"
paths = ["$LOG_DIR/flink-*-standalonesession-*.log", "$LOG_DIR/flink-*-taskexecutor-*.log"]
[state]
dir = "$WORK/state"
persist_interval = "1s"
[storage]
# The storage scenarios list every 10 s (the default minute would outlast them).
interval = "10s"
[thread_dumps]
# The blocked scenario needs two looks at the held thread; at the default of one dump per
# TaskManager in 10 minutes the second would come after the scenario ends.
min_interval = "10s"
[alerting]
alertmanagers = ["http://127.0.0.1:$AM_PORT"]
evaluation_interval = "1s"
resend_interval = "5s"
[[rules]]
name = "FlinkCheckpointFailing"
expr = "increase(checkpoints.failed, 20s) - increase(checkpoints.trigger_failed, 20s) > 0"
for = "0s"
severity = "warning"
class = "failure"
summary = "Checkpoints of {{ job_name }} are failing"
description = "{{ value }} checkpoints of {{ job_name }} on {{ cluster }} failed in the last 20 s (triggers that failed before a checkpoint id, as while the job deploys, left out)"
runbook_url = "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointfailuresincreasing"
# The built-in FlinkCheckpointStateSkew waits 30 minutes for 100 MB of state; the skew scenario
# has 2.7 MB for a minute, so the same series at a scale it reaches.
[[rules]]
name = "E2EStateSkew"
expr = "state_skew > 4 and state_skew_max_size > 1MB"
for = "0s"
severity = "warning"
class = "blocking"
summary = "State of {{ job_name }} is skewed onto one subtask"
description = "Operator {{ skew_operator }} of {{ job_name }} holds {{ state_skew_max_size | bytes }} on subtask #{{ state_skew_hot_subtask }}, {{ value }} times its median subtask's state."
runbook_url = "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointstateskew"
# FlinkCheckpointStorageLeaking waits an hour for 100 MB of orphans, FlinkCheckpointMetadataNearFrameSize
# ten minutes for half of the 10 MiB frame size; the storage scenarios reach these in a minute.
[[rules]]
name = "E2ECheckpointStorageLeaking"
expr = "storage_orphaned_bytes > 1KB"
for = "0s"
severity = "warning"
class = "failure"
summary = "The checkpoint storage of {{ job_name }} holds what no checkpoint needs"
description = "The checkpoint directory of {{ job_name }} on {{ cluster }} holds {{ storage_orphaned_bytes | bytes }} in {{ storage_orphaned_folders }} chk-N folder(s) no retained or in-progress checkpoint holds."
runbook_url = "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointstorageleaking"
[[rules]]
name = "E2ECheckpointMetadataGrowth"
expr = "metadata_bytes > 512KiB"
for = "0s"
severity = "warning"
class = "timeout"
summary = "The checkpoint _metadata of {{ job_name }} is {{ value | bytes }}"
description = "The newest checkpoint of {{ job_name }} on {{ cluster }} wrote a _metadata of {{ metadata_bytes | bytes }} (frame size {{ frame_size | bytes }})."
runbook_url = "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointmetadatanearframesize"
TOML
"$BIN" check-config "$WORK/sentinel.toml" > /dev/null
"$BIN" run --config "$WORK/sentinel.toml" > "$WORK/daemon.log" 2>&1 &
echo $! > "$WORK/daemon.pid"
# The store scenario kills it (-9) on purpose: no "Killed" job notice from this shell.
disown

wait_http "http://127.0.0.1:$DAEMON_PORT/readyz" 30
wait_http "http://127.0.0.1:$AM_PORT/-/ready" 30
wait_http "http://127.0.0.1:$PROM_PORT/-/ready" 30

# shellcheck disable=SC2086
python3 "$ROOT/e2e/scenarios.py" --version "$VERSION" --rest "$REST" --flink-sh "$FLINK" --bin "$BIN" \
  --daemon "http://127.0.0.1:$DAEMON_PORT" --alertmanager "http://127.0.0.1:$AM_PORT" \
  --prometheus "http://127.0.0.1:$PROM_PORT" --seconds "${SENTINEL_E2E_SECONDS:-35}" \
  --daemon-config "$WORK/sentinel.toml" --daemon-pid-file "$WORK/daemon.pid" \
  --store-seconds "${SENTINEL_E2E_STORE_SECONDS:-60}" \
  ${SENTINEL_E2E_ONLY:+--only $SENTINEL_E2E_ONLY}

curl -fsS "http://127.0.0.1:$DAEMON_PORT/metrics" > "$WORK/metrics.prom"
promtool check metrics < "$WORK/metrics.prom"
echo "promtool check metrics on the live /metrics: clean"
