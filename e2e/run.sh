#!/usr/bin/env bash
# e2e/run.sh -- end-to-end check of checkpoint-sentinel against a live Flink cluster.
#
# Installs Flink (default 2.3.0) from PyPI into the e2e cache, starts it on loopback, starts the
# daemon (the binary from `cargo build`), submits the `healthy` scenario job, and lets
# e2e/check_live.py compare the daemon's /metrics with Flink's own REST answers. Cleans up
# everything it started, also on failure.
#
# Usage: e2e/run.sh [VERSION]        (env: SENTINEL_BIN, default target/debug/checkpoint-sentinel)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${1:-2.3.0}"
FLINK="$ROOT/e2e/flink.sh"
BIN="${SENTINEL_BIN:-$ROOT/target/debug/checkpoint-sentinel}"
WORK="$(mktemp -d)"
PORT=19717
DAEMON_PID=""
JOB=""

cleanup() {
  [ -n "$JOB" ] && "$FLINK" cancel "$VERSION" "$JOB" >/dev/null 2>&1 || true
  [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null || true
  "$FLINK" stop "$VERSION" >/dev/null 2>&1 || true
  echo "daemon log: $WORK/daemon.log" >&2
}
trap cleanup EXIT

[ -x "$BIN" ] || (cd "$ROOT" && cargo build)
"$FLINK" install "$VERSION"
"$FLINK" start "$VERSION" >/dev/null
REST="$("$FLINK" rest-url "$VERSION")"

cat > "$WORK/sentinel.toml" <<TOML
[server]
listen = "127.0.0.1:$PORT"
[[clusters]]
name = "e2e"
url = "$REST"
poll_interval = "1s"
[state]
dir = "$WORK/state"
TOML
"$BIN" run --config "$WORK/sentinel.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!

JOB="$("$FLINK" submit "$VERSION" healthy)"
python3 "$ROOT/e2e/check_live.py" --flink "$REST" --daemon "http://127.0.0.1:$PORT" --job "$JOB" --seconds "${SENTINEL_E2E_SECONDS:-40}"
curl -s "http://127.0.0.1:$PORT/metrics" > "$WORK/metrics.prom"
if command -v promtool >/dev/null; then
  promtool check metrics < "$WORK/metrics.prom"
  echo "promtool check metrics: clean"
fi
