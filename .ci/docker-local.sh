#!/usr/bin/env bash
# .ci/docker-local.sh -- build the container image from a host-built binary and run it for real,
# on a machine where no image can be pulled (see docs/deployment.md, "How to build the image
# here").
#
# What it does, each command echoed with "+":
#   1. installs Debian's docker.io and debootstrap if missing;
#   2. starts a private dockerd (no iptables, no bridge, vfs storage, its own socket and dirs
#      under $WORK) -- it does not touch a dockerd that may already run on the machine;
#   3. makes the base image local/debian:bookworm-minbase with debootstrap + docker import
#      (the rootfs tarball is cached in $WORK);
#   4. builds the Dockerfile's `runtime-base` target, then Dockerfile.prebuilt on it with BINARY,
#      in a minimal build context;
#   5. starts `checkpoint-sentinel demo` on the host (a simulated Flink REST API + JobManager
#      log), runs the image against it with --network=host, a read-only root filesystem, all
#      capabilities dropped, the config and the demo's log directory mounted, and curls
#      /healthz, /readyz and /metrics from the container;
#   6. stops everything it started (container, demo, dockerd) and unmounts what dockerd left.
#
# Usage: .ci/docker-local.sh [BINARY]
#   BINARY  release binary, default $CARGO_TARGET_DIR/release/checkpoint-sentinel
#           (CARGO_TARGET_DIR defaults to target). Build it with: cargo build --release
# Environment: WORK (scratch dir, default /var/tmp/checkpoint-sentinel-docker), PORT (the
# container's listen port on the host network, default 9717), IMAGE (tag, default
# checkpoint-sentinel:dev), KEEP_DOCKER_DATA=1 keeps the images after the run.
# Needs root. Not part of .ci/run: it takes ~2 minutes and ~1 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

BINARY=${1:-${CARGO_TARGET_DIR:-target}/release/checkpoint-sentinel}
WORK=${WORK:-/var/tmp/checkpoint-sentinel-docker}
PORT=${PORT:-9717}
IMAGE=${IMAGE:-checkpoint-sentinel:dev}
BASE_IMAGE=local/debian:bookworm-minbase
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SOCK=$WORK/docker.sock
export DOCKER_HOST=unix://$SOCK
export DOCKER_BUILDKIT=0          # the legacy builder: Debian's engine has no buildx here
DOCKER=/usr/bin/docker            # Debian's client, same version as its engine

step() { echo; echo "=== $*"; }
run() { echo "+ $*"; "$@"; }

[ -x "$BINARY" ] || { echo "no executable $BINARY: build it first (cargo build --release)" >&2; exit 2; }
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "port $PORT is in use; choose another with PORT=..." >&2; exit 2
fi

step "1. tools"
need=()
[ -x /usr/sbin/dockerd ] && [ -x "$DOCKER" ] || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
run "$DOCKER" --version

DEMO_PID=
cleanup() {
  set +e
  step "6. clean up"
  [ -S "$SOCK" ] && "$DOCKER" rm -f sentinel-demo >/dev/null 2>&1
  [ -S "$SOCK" ] && "$DOCKER" volume rm sentinel-state >/dev/null 2>&1
  if [ -n "$DEMO_PID" ]; then
    echo "+ kill -INT $DEMO_PID  # demo"; kill -INT "$DEMO_PID"; wait "$DEMO_PID" 2>/dev/null
    # The demo's temp folder (simulated JobManager log and the demo daemon's state).
    case "${log_dir:-}" in */checkpoint-sentinel-demo-"$DEMO_PID"-*/log) rm -rf "$(dirname "$log_dir")";; esac
  fi
  if [ -f "$WORK/docker.pid" ]; then
    local pid; pid=$(cat "$WORK/docker.pid")
    echo "+ kill $pid  # dockerd"; kill "$pid" 2>/dev/null
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
  # dockerd leaves its network namespace (and, after a crash, layers) mounted under $WORK.
  grep -o " $WORK/[^ ]*" /proc/mounts | sort -r | while read -r m; do run umount "$m"; done
  if [ "${KEEP_DOCKER_DATA:-0}" != 1 ]; then rm -rf "$WORK/data" "$WORK/exec" "$WORK/context"; fi
  echo "mounts left under $WORK: $(grep -c " $WORK/" /proc/mounts)"
}
trap cleanup EXIT

step "2. private dockerd"
mkdir -p "$WORK"
run /usr/sbin/dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs \
  --data-root="$WORK/data" --exec-root="$WORK/exec" -H "$DOCKER_HOST" \
  --pidfile="$WORK/docker.pid" >"$WORK/dockerd.log" 2>&1 &
for _ in $(seq 1 60); do "$DOCKER" version >/dev/null 2>&1 && break; sleep 1; done
run "$DOCKER" version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}'

step "3. base image $BASE_IMAGE (debootstrap + docker import)"
if [ ! -s "$WORK/bookworm-minbase.tar" ]; then
  rm -rf "$WORK/rootfs"
  run debootstrap --variant=minbase --include=ca-certificates bookworm "$WORK/rootfs" "$MIRROR" \
    >"$WORK/debootstrap.log"
  run tar -C "$WORK/rootfs" -cf "$WORK/bookworm-minbase.tar" .
  rm -rf "$WORK/rootfs"
fi
run "$DOCKER" import "$WORK/bookworm-minbase.tar" "$BASE_IMAGE"

step "4. build $IMAGE (runtime-base, then Dockerfile.prebuilt) from $BINARY"
ctx=$WORK/context
rm -rf "$ctx"; mkdir -p "$ctx/config" "$ctx/target/release"
cp "$REPO/Dockerfile" "$REPO/Dockerfile.prebuilt" "$REPO/.dockerignore" "$ctx/"
cp "$REPO/config/checkpoint-sentinel.toml" "$ctx/config/"
cp "$BINARY" "$ctx/target/release/checkpoint-sentinel"
run "$DOCKER" build --network=host --target runtime-base --build-arg RUNTIME_BASE="$BASE_IMAGE" \
  -t "$IMAGE-base" "$ctx"
run "$DOCKER" build --network=host -f "$ctx/Dockerfile.prebuilt" --build-arg BASE="$IMAGE-base" \
  -t "$IMAGE" "$ctx"
run "$DOCKER" image ls "$IMAGE"
run "$DOCKER" image inspect "$IMAGE" \
  --format 'user={{.Config.User}} entrypoint={{json .Config.Entrypoint}} cmd={{json .Config.Cmd}} ports={{json .Config.ExposedPorts}} volumes={{json .Config.Volumes}}'

step "5. run against a simulated Flink (checkpoint-sentinel demo on the host)"
"$BINARY" demo --listen 127.0.0.1:0 --jobs 5 >"$WORK/demo.out" 2>"$WORK/demo.err" &
DEMO_PID=$!
echo "+ $BINARY demo --listen 127.0.0.1:0 --jobs 5 &   # pid $DEMO_PID"
for _ in $(seq 1 30); do grep -q '^jobs:' "$WORK/demo.out" && break; sleep 1; done
cat "$WORK/demo.out"
flink_url=$(sed -n 's/^simulated Flink REST API: *//p' "$WORK/demo.out")
log_dir=$(dirname "$(sed -n 's/^JobManager log: *//p' "$WORK/demo.out")")
[ -n "$flink_url" ] || { echo "demo did not start" >&2; cat "$WORK/demo.err" >&2; exit 1; }

mkdir -p "$WORK/config"
cat >"$WORK/config/config.toml" <<EOF
# checkpoint-sentinel in a container, watching the demo's simulated Flink.
[[clusters]]
name = "demo"
url = "$flink_url"
poll_interval = "1s"

[[logs]]
cluster = "demo"
paths = ["/opt/flink/log/*.log"]
start_at = "beginning"
EOF
chmod 0755 "$WORK/config"; chmod 0644 "$WORK/config/config.toml"
run cat "$WORK/config/config.toml"

run "$DOCKER" run -d --name sentinel-demo --network=host --read-only --cap-drop=ALL \
  --security-opt=no-new-privileges \
  -e SENTINEL_SERVER__LISTEN="127.0.0.1:$PORT" \
  -v "$WORK/config:/etc/checkpoint-sentinel:ro" \
  -v "$log_dir:/opt/flink/log:ro" \
  -v sentinel-state:/var/lib/checkpoint-sentinel \
  "$IMAGE"

ready=0
for _ in $(seq 1 30); do
  if curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 1
done
[ "$ready" = 1 ] || { "$DOCKER" logs sentinel-demo; echo "container never became ready" >&2; exit 1; }
sleep 8   # a few simulated checkpoints
run "$DOCKER" exec sentinel-demo id
run "$DOCKER" exec sentinel-demo ls -l /var/lib/checkpoint-sentinel
run curl -sS -w ' (HTTP %{http_code})\n' "http://127.0.0.1:$PORT/healthz"
run curl -sS -w ' (HTTP %{http_code})\n' "http://127.0.0.1:$PORT/readyz"
echo "+ curl -sS http://127.0.0.1:$PORT/metrics > $WORK/metrics.txt"
curl -fsS "http://127.0.0.1:$PORT/metrics" >"$WORK/metrics.txt"
echo "$(grep -vc '^#' "$WORK/metrics.txt") samples, $(grep -c '^# TYPE' "$WORK/metrics.txt") families; a selection:"
grep -E '^(checkpoint_sentinel_build_info|checkpoint_sentinel_flink_up|checkpoint_sentinel_watched_jobs|checkpoint_sentinel_log_files_watched|flink_checkpoints_total|flink_checkpoint_duration_seconds\{.*quantile="0.95"|flink_checkpoint_log_events_total)' \
  "$WORK/metrics.txt" | head -n 24
run promtool check metrics <"$WORK/metrics.txt" || true
echo "+ docker logs sentinel-demo | head -n 5"
"$DOCKER" logs sentinel-demo 2>&1 | head -n 5
echo "waiting for the HEALTHCHECK (first probe after 30 s) ..."
for _ in $(seq 1 50); do
  h=$("$DOCKER" inspect --format '{{.State.Health.Status}}' sentinel-demo)
  [ "$h" = starting ] || break; sleep 1
done
run "$DOCKER" inspect --format 'health={{.State.Health.Status}} restarts={{.RestartCount}} readonly_rootfs={{.HostConfig.ReadonlyRootfs}} capdrop={{json .HostConfig.CapDrop}}' sentinel-demo
[ "$h" = healthy ] || { echo "HEALTHCHECK says $h" >&2; exit 1; }
echo "docker-local: image built and served /metrics"
