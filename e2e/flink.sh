#!/usr/bin/env bash
# e2e/flink.sh -- a real Apache Flink cluster on loopback for checkpoint-sentinel's end-to-end tests.
#
# Flink is assembled from two PyPI packages only (no Maven Central, no Apache mirrors):
#   apache-flink-libraries==VERSION  jars: lib/ opt/ plugins/ bin/bash-java-utils.jar
#   apache-flink==VERSION            the distribution's bin/*.sh scripts and conf/
# Both archives are only unpacked (nothing is pip-installed) into
#   ${SENTINEL_E2E_CACHE:-$HOME/.cache/checkpoint-sentinel-e2e}/flink-VERSION
# and run with the machine's Java 17 as 1 JobManager + 1 TaskManager, every listener on
# 127.0.0.1 with ports pinned from SENTINEL_E2E_PORT_BASE (default 18000):
#   REST = base+81, JM RPC = base+123, blob = base+124, TM RPC = base+125, TM data = base+126,
#   metrics query service = base+127..base+130.
#
# Usage: e2e/flink.sh COMMAND [VERSION] [ARGS...]     (VERSION defaults to 2.3.0)
#   install   [VERSION]                     download + unpack Flink (no-op when already there)
#   start     [VERSION]                     write loopback config, start JM + TM, wait for the TM
#   stop      [VERSION]                     stop the JM/TM started by `start` (pid files; TERM, then KILL)
#   build-job [VERSION]                     javac e2e/job/ScenarioJob.java into a jar in the cache
#   submit    VERSION SCENARIO [JOB ARGS]   upload + run the job via REST, print the job id
#   cancel    VERSION JOBID                 cancel a job, wait until it is CANCELED
#   tm-pid    [VERSION]                     print the TaskManager's PID (failover tests kill it)
#   start-tm  [VERSION]                     start one more TaskManager (a free data port), wait until
#                                           it registers, print its PID (the incident scenario)
#   log-dir   [VERSION]                     print the JM/TM log directory
#   rest-url  [VERSION]                     print the REST base URL
#   scenarios                               list the scenarios and their job args
# Progress goes to stderr; stdout carries only the answer (job id, pid, path, URL).
#
# Environment: SENTINEL_E2E_CACHE, SENTINEL_E2E_PORT_BASE (18000), SENTINEL_E2E_SLOTS (4),
#   SENTINEL_E2E_EXTRA_CONF (extra config lines for `start`),
#   SENTINEL_E2E_CP_HISTORY (web.checkpoints.history, 20),
#   SENTINEL_E2E_SAVEPOINT_PATH (submit: start the job from this savepoint),
#   SENTINEL_E2E_JM_MEM (1g), SENTINEL_E2E_TM_MEM (1536m), PYTHON (python3).
# Tested with Flink 2.3.0 and 1.20.5 on Debian 12, OpenJDK 17; see e2e/README.md.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEFAULT_VERSION=2.3.0
CACHE="${SENTINEL_E2E_CACHE:-$HOME/.cache/checkpoint-sentinel-e2e}"
PORT_BASE="${SENTINEL_E2E_PORT_BASE:-18000}"
SLOTS="${SENTINEL_E2E_SLOTS:-4}"
JM_MEM="${SENTINEL_E2E_JM_MEM:-1g}"
TM_MEM="${SENTINEL_E2E_TM_MEM:-1536m}"
PYTHON="${PYTHON:-python3}"
REST="http://127.0.0.1:$((PORT_BASE + 81))"
JOB_SRC="$E2E_DIR/job/ScenarioJob.java"
JOB_CLASS="sentinel.e2e.ScenarioJob"
INSTALLED_MARKER=".sentinel-e2e-installed"

log() { echo "[flink.sh $(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now_ms() { date +%s%3N; }
since() { local ms=$(( $(now_ms) - $1 )); printf '%d.%03ds' $((ms / 1000)) $((ms % 1000)); }
flink_home() { echo "$CACHE/flink-$1"; }
job_jar() { echo "$CACHE/jobs/scenario-job-$1.jar"; }
# curl against the local REST endpoint only
rest() { curl -sS --max-time 30 "$@"; }
# json_get FIELD: read JSON on stdin, print top-level FIELD ("" when missing or not JSON)
json_get() { "$PYTHON" -c 'import sys,json
try: print(json.load(sys.stdin).get(sys.argv[1], ""))
except Exception: print("")' "$1"; }

require_installed() {
  [ -f "$(flink_home "$1")/$INSTALLED_MARKER" ] || die "Flink $1 is not installed (run: $0 install $1)"
}

# Print the pid of a live Flink process recorded in one of the distribution's pid files
# (flink-<user>-standalonesession.pid / flink-<user>-taskexecutor.pid in <flinkhome>/run).
live_pid_of() {
  local fh="$1" daemon="$2" pf pid
  for pf in "$fh"/run/*-"$daemon".pid; do
    [ -f "$pf" ] || continue
    while read -r pid; do
      [ -n "$pid" ] || continue
      if kill -0 "$pid" 2>/dev/null && grep -qa "org.apache.flink" "/proc/$pid/cmdline" 2>/dev/null; then
        echo "$pid"; return 0
      fi
    done < "$pf"
  done
  return 1
}

# ---------------------------------------------------------------- install
download_packages() {
  local v="$1" dl="$2" py
  mkdir -p "$dl/libs" "$dl/pyflink"
  log "pip download apache-flink-libraries==$v (jars; wheel for 2.x, sdist for 1.x)"
  "$PYTHON" -m pip download --quiet --no-deps -d "$dl/libs" "apache-flink-libraries==$v" >&2
  log "pip download apache-flink==$v (only for its bin/ and conf/)"
  for py in 3.11 3.10 3.9 3.8; do
    if "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$py" \
         --platform manylinux2014_x86_64 -d "$dl/pyflink" "apache-flink==$v" >/dev/null 2>&1; then
      return 0
    fi
  done
  "$PYTHON" -m pip download --quiet --no-deps --no-binary=:all: -d "$dl/pyflink" "apache-flink==$v" >&2
}

# Unpack pyflink/{bin,conf,lib,opt,plugins} (wheel) or deps/{...} (sdist) into one FLINK_HOME.
unpack_packages() {
  local dest="$1"; shift
  "$PYTHON" - "$dest" "$@" <<'PY'
import os, sys, glob, zipfile, tarfile, re
dest = sys.argv[1]
pat = re.compile(r'(?:^|/)(?:pyflink|deps)/(bin|conf|lib|opt|plugins)/(.+)$')
def members(path):
    if path.endswith(('.whl', '.zip')):
        z = zipfile.ZipFile(path)
        for i in z.infolist():
            if not i.filename.endswith('/'):
                yield i.filename, (lambda i=i: z.read(i))
    else:
        t = tarfile.open(path)
        for m in t.getmembers():
            if m.isfile():
                yield m.name, (lambda m=m: t.extractfile(m).read())
n = 0
for d in sys.argv[2:]:
    for arch in sorted(glob.glob(os.path.join(d, '*'))):
        for name, read in members(arch):
            m = pat.search(name)
            if not m:
                continue
            p = os.path.join(dest, m.group(1), m.group(2))
            if os.path.exists(p) and m.group(1) not in ('bin', 'conf'):
                continue
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, 'wb') as f:
                f.write(read())
            n += 1
print(f"unpacked {n} files into {dest}", file=sys.stderr)
PY
}

cmd_install() {
  local v="${1:-$DEFAULT_VERSION}" fh dl tmp f t0
  fh="$(flink_home "$v")"
  if [ -f "$fh/$INSTALLED_MARKER" ]; then log "Flink $v already installed in $fh"; return 0; fi
  t0=$(now_ms)
  dl="$CACHE/downloads/$v"
  download_packages "$v" "$dl"
  tmp="$fh.partial.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  unpack_packages "$tmp" "$dl/libs" "$dl/pyflink"
  chmod +x "$tmp"/bin/* 2>/dev/null || true
  for f in lib/flink-dist bin/config.sh bin/jobmanager.sh bin/taskmanager.sh bin/flink-daemon.sh; do
    ls "$tmp"/$f* >/dev/null 2>&1 || { rm -rf "$tmp"; die "$f missing after unpacking Flink $v"; }
  done
  cp -r "$tmp/conf" "$tmp/conf.dist"     # the shipped config, kept for reference and for its Java 17 opts
  date -u +%FT%TZ > "$tmp/$INSTALLED_MARKER"
  rm -rf "$fh"; mv "$tmp" "$fh"
  log "installed Flink $v into $fh in $(since "$t0")"
}

# ---------------------------------------------------------------- start / stop
# The --add-opens/--add-exports list Java 17 needs; 1.19+/2.x ship it in conf/config.yaml.
java17_opts() {
  local fh="$1" opts
  opts=$(grep -hE '^\s*(env\.java\.opts\.)?all:\s*--add' "$fh"/conf.dist/*.yaml 2>/dev/null | head -1 \
         | sed -E 's/^\s*(env\.java\.opts\.)?all:\s*//' || true)
  if [ -z "$opts" ]; then
    opts="--add-exports=java.base/sun.net.util=ALL-UNNAMED --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED"
  fi
  echo "$opts"
}

# Flat keys are valid both in the standard-YAML config.yaml (1.19+/2.x) and in flink-conf.yaml (<= 1.18).
# taskmanager.rpc.port is 0 (Flink's default: a free port each start). A fixed port let the
# TaskManager that failover starts after a kill -9 come back at the killed one's address, where
# the JobManager's Pekko kept a quarantined association: it never registered (NoResourceAvailable).
write_loopback_config() {
  local v="$1" fh="$2" b="$PORT_BASE" conf
  if [ -f "$fh/conf.dist/config.yaml" ]; then conf="$fh/conf/config.yaml"; rm -f "$fh/conf/flink-conf.yaml"
  else conf="$fh/conf/flink-conf.yaml"; rm -f "$fh/conf/config.yaml"; fi
  cat > "$conf" <<YAML
# generated by checkpoint-sentinel e2e/flink.sh for Flink $v -- every listener on 127.0.0.1
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $((b + 123))
jobmanager.bind-host: 127.0.0.1
jobmanager.memory.process.size: $JM_MEM
jobmanager.execution.failover-strategy: region
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
taskmanager.rpc.port: 0
taskmanager.data.port: $((b + 126))
taskmanager.memory.process.size: $TM_MEM
taskmanager.numberOfTaskSlots: $SLOTS
parallelism.default: 1
blob.server.port: $((b + 124))
metrics.internal.query-service.port: $((b + 127))-$((b + 130))
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $((b + 81))
web.checkpoints.history: ${SENTINEL_E2E_CP_HISTORY:-20}
io.tmp.dirs: $fh/tmp
state.checkpoints.dir: file://$fh/checkpoints
execution.checkpointing.dir: file://$fh/checkpoints
state.savepoints.dir: file://$fh/savepoints
execution.checkpointing.savepoint-dir: file://$fh/savepoints
env.log.dir: $fh/log
env.pid.dir: $fh/run
env.java.opts.all: $(java17_opts "$fh")
YAML
  # Flink <= 1.16 reads only env.java.opts
  [ -f "$fh/conf.dist/config.yaml" ] || echo "env.java.opts: $(java17_opts "$fh")" >> "$conf"
  # Extra flat keys, one per line (e2e/alert_latency.py: Flink's Prometheus reporter).
  if [ -n "${SENTINEL_E2E_EXTRA_CONF:-}" ]; then printf '%s\n' "$SENTINEL_E2E_EXTRA_CONF" >> "$conf"; fi
}

overview_field() { rest --max-time 2 "$REST/overview" 2>/dev/null | json_get "$1" 2>/dev/null || true; }

wait_for_taskmanager() {
  local v="$1" fh="$2" i tms slots
  for i in $(seq 1 180); do
    tms=$(overview_field taskmanagers); slots=$(overview_field slots-total)
    if [ "${tms:-0}" -ge 1 ] 2>/dev/null && [ "${slots:-0}" -ge 1 ] 2>/dev/null; then
      log "Flink $v: $tms TaskManager(s), $slots slots"
      return 0
    fi
    live_pid_of "$fh" standalonesession >/dev/null || die "JobManager died; see $fh/log"
    live_pid_of "$fh" taskexecutor >/dev/null || die "TaskManager died; see $fh/log"
    sleep 0.5
  done
  die "no TaskManager registered within 90 s; see $fh/log"
}

cmd_start() {
  local v="${1:-$DEFAULT_VERSION}" fh t0 jm tm
  require_installed "$v"
  fh="$(flink_home "$v")"
  jm=$(live_pid_of "$fh" standalonesession || true)
  tm=$(live_pid_of "$fh" taskexecutor || true)
  if [ -z "$jm" ] && curl -s --max-time 2 "$REST/overview" >/dev/null 2>&1; then
    die "something else already answers on $REST (another version? use SENTINEL_E2E_PORT_BASE)"
  fi
  mkdir -p "$fh/log" "$fh/run" "$fh/checkpoints" "$fh/savepoints" "$fh/tmp"
  export USER="${USER:-$(id -un)}"   # config.sh puts $USER into log and pid file names
  export FLINK_CONF_DIR="$fh/conf" FLINK_LOG_DIR="$fh/log" FLINK_PID_DIR="$fh/run"
  t0=$(now_ms)
  if [ -z "$jm" ]; then
    write_loopback_config "$v" "$fh"
    # drop stale pids of processes that are gone (flink-daemon.sh appends to these files)
    rm -f "$fh"/run/*.pid
    "$fh/bin/jobmanager.sh" start >&2
  else
    log "JobManager already running (pid $jm)"
  fi
  if [ -z "$tm" ]; then
    rm -f "$fh"/run/*-taskexecutor.pid
    "$fh/bin/taskmanager.sh" start >&2     # also brings a killed TaskManager back
  else
    log "TaskManager already running (pid $tm)"
  fi
  wait_for_taskmanager "$v" "$fh"
  log "Flink $v up in $(since "$t0"): JM pid $(live_pid_of "$fh" standalonesession), TM pid $(live_pid_of "$fh" taskexecutor)"
  echo "rest_url=$REST"
  echo "log_dir=$fh/log"
}

stop_pid() {
  local pid="$1" what="$2" i
  log "stopping $what (pid $pid): SIGTERM"
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  log "$what (pid $pid) still alive after 15 s: SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
}

cmd_stop() {
  local v="${1:-$DEFAULT_VERSION}" fh pid daemon tries
  fh="$(flink_home "$v")"
  for daemon in taskexecutor standalonesession; do   # TM first, so it does not reconnect-loop
    tries=0
    while pid=$(live_pid_of "$fh" "$daemon"); do
      tries=$((tries + 1)); [ "$tries" -le 5 ] || die "could not stop $daemon pid $pid"
      stop_pid "$pid" "Flink $v $daemon"
    done
    rm -f "$fh"/run/*-"$daemon".pid
  done
  log "Flink $v stopped"
}

# ---------------------------------------------------------------- job
cmd_build_job() {
  local v="${1:-$DEFAULT_VERSION}" fh jar classes t0
  require_installed "$v"
  fh="$(flink_home "$v")"; jar="$(job_jar "$v")"; classes="$CACHE/jobs/classes-$v"
  t0=$(now_ms)
  rm -rf "$classes"; mkdir -p "$classes"
  javac -nowarn -Xlint:none --release 11 -cp "$fh/lib/*" -d "$classes" "$JOB_SRC" 2>&1 | grep -v '^Note:' >&2 || true
  [ -f "$classes/${JOB_CLASS//.//}.class" ] || die "javac failed for $JOB_SRC against Flink $v"
  jar --create --file "$jar.tmp" --main-class "$JOB_CLASS" -C "$classes" .
  mv "$jar.tmp" "$jar"
  log "built $jar in $(since "$t0")"
}

# Job args per scenario (parsed by ScenarioJob; later args override earlier ones).
scenario_args() {
  case "$1" in
    healthy)      echo "--interval-ms 2500 --rate 500" ;;
    expired)      echo "--interval-ms 3000 --timeout-ms 4000 --snapshot-sleep-ms 6000 --snapshot-sleep-every 3 --tolerable 1000" ;;
    declined)     echo "--interval-ms 3000 --snapshot-decline-every 3 --tolerable 1000" ;;
    backpressure) echo "--interval-ms 5000 --timeout-ms 60000 --rate 0 --slow-rate 20 --skew 0.5 --proc-micros 150 --hot-proc-micros 600 --payload-bytes 64" ;;
    unaligned)    echo "--interval-ms 5000 --timeout-ms 60000 --rate 0 --slow-rate 20 --skew 0.5 --proc-micros 150 --hot-proc-micros 600 --payload-bytes 64 --unaligned true" ;;
    minpause)     echo "--interval-ms 2000 --min-pause-ms 5000" ;;
    # Issue 41: the fast source reports backlog (FLIP-309) for its first minute, checkpoints every
    # 10 s meanwhile, then every 2.5 s; manual triggers by REST between periodic ones.
    backlog)      echo "--interval-ms 2500 --interval-during-backlog-ms 10000 --backlog-s 40" ;;
    manual-trigger) echo "--interval-ms 5000" ;;
    # The adaptive scheduler rescales it (PUT /jobs/:id/resource-requirements) from 2 to 1.
    rescale)      echo "--interval-ms 2000" ;;
    failover)     echo "--interval-ms 3000 --fail-after-s 35 --restart-delay-ms 3000" ;;
    # FLIP-547 (2.3): unaligned checkpoints under backpressure (stateful-map 1 ms a record) carry
    # in-flight data; checkpointing during recovery on; stateful-map fails once after 8 s, its
    # restored attempt stays INITIALIZING 3 s (a sleep in initializeState), then replays its first
    # 300 records (the in-flight data) at 20 ms each while checkpoints go on.
    recovery-checkpoint) echo "--interval-ms 1000 --rate 0 --proc-micros 1000 --unaligned true --during-recovery true --fail-after-s 8 --fail-after-complete true --restart-delay-ms 1000 --restored-init-sleep-ms 3000 --restored-slow-ms 20 --restored-slow-records 300" ;;
    tolerable-exceeded) echo "--interval-ms 2000 --snapshot-decline-every 1 --tolerable 2 --restart-attempts 2 --restart-delay-ms 2000" ;;
    # Evidence from the TaskManagers (issue 27): a task thread held by user code past the checkpoint
    # timeout; a TaskManager heap kept ~80 % full with old objects dying in it; keyed state skewed
    # onto stateful-map subtask 0 of 4; RocksDB with its native metrics on.
    blocked)      echo "--interval-ms 3000 --timeout-ms 10000 --tolerable 1000 --block-ms 40000 --block-after-s 8 --block-pause-ms 8000" ;;
    gc)           echo "--interval-ms 3000 --timeout-ms 3000 --tolerable 1000 --gc-retain-pct 80 --gc-churn-mb 300 --payload-bytes 1024" ;;
    skew)         echo "--interval-ms 3000 --parallelism 4 --skew-keys 0.9 --payload-bytes 512" ;;
    # The checkpoint storage (issue 40): a job whose checkpoints are kept on cancellation, and a
    # union list state that grows 16 KiB per checkpoint and subtask, inlined into _metadata.
    storage)      echo "--interval-ms 2000 --retain-on-cancel true" ;;
    metadata-growth) echo "--interval-ms 1500 --union-grow-bytes 16384 --inline-threshold 1mb" ;;
    rocksdb)      echo "--interval-ms 3000 --state-backend rocksdb --incremental true --rocksdb-metrics true --max-keys 200000 --payload-bytes 512 --rate 2000" ;;
    *) return 1 ;;
  esac
}
SCENARIOS="healthy expired declined backpressure unaligned minpause backlog manual-trigger rescale failover recovery-checkpoint tolerable-exceeded blocked gc skew rocksdb storage metadata-growth"

cmd_scenarios() {
  local s
  for s in $SCENARIOS; do printf '%-20s %s\n' "$s" "$(scenario_args "$s")"; done
}

cmd_submit() {
  local v="${1:?usage: flink.sh submit VERSION SCENARIO [JOB ARGS...]}" sc="${2:?usage: flink.sh submit VERSION SCENARIO [JOB ARGS...]}"
  shift 2
  local args jar up jarid body run jid t0
  args="$(scenario_args "$sc")" || die "unknown scenario '$sc' (known: $SCENARIOS)"
  args="--job-name sentinel-e2e-$sc $args $*"
  require_installed "$v"
  jar="$(job_jar "$v")"
  { [ -f "$jar" ] && [ "$jar" -nt "$JOB_SRC" ]; } || cmd_build_job "$v"
  curl -sf --max-time 5 "$REST/overview" >/dev/null || die "no Flink REST on $REST (run: $0 start $v)"
  t0=$(now_ms)
  up=$(rest --max-time 120 -X POST -H "Expect:" -F "jarfile=@$jar" "$REST/jars/upload")
  jarid=$(echo "$up" | "$PYTHON" -c 'import sys,json,os; print(os.path.basename(json.load(sys.stdin)["filename"]))') \
    || die "jar upload failed: $up"
  # SENTINEL_E2E_SAVEPOINT_PATH: start the job from that savepoint (or retained checkpoint).
  body=$("$PYTHON" -c 'import json,sys; b={"entryClass": sys.argv[1], "programArgsList": sys.argv[2].split()}; b.update({"savepointPath": sys.argv[3]} if sys.argv[3] else {}); print(json.dumps(b))' "$JOB_CLASS" "$args" "${SENTINEL_E2E_SAVEPOINT_PATH:-}")
  run=$(rest --max-time 120 -X POST -H 'Content-Type: application/json' -d "$body" "$REST/jars/$jarid/run")
  rest -X DELETE "$REST/jars/$jarid" >/dev/null 2>&1 || true
  jid=$(echo "$run" | json_get jobid)
  [ -n "$jid" ] || die "job submission failed: $run"
  log "scenario $sc on Flink $v: job $jid submitted in $(since "$t0"); args: $args"
  echo "$jid"
}

cmd_cancel() {
  local v="${1:?usage: flink.sh cancel VERSION JOBID}" jid="${2:?usage: flink.sh cancel VERSION JOBID}" st="" i
  # A TaskManager deep in GC (the gc scenario) can take well over 30 s to cancel its tasks, and
  # the JobManager may answer the first PATCH slowly: the request is repeated every 15 s and the
  # wait is 120 s. A job already terminal needs no cancel.
  for i in $(seq 1 240); do
    st=$(rest "$REST/jobs/$jid" 2>/dev/null | json_get state)
    case "$st" in CANCELED|FAILED|FINISHED) log "job $jid: $st"; return 0 ;; esac
    if [ $((i % 30)) -eq 1 ]; then
      rest -X PATCH "$REST/jobs/$jid?mode=cancel" >/dev/null 2>&1 || log "cancel request for $jid failed (state ${st:-?}); retrying"
    fi
    sleep 0.5
  done
  die "job $jid not terminal 120 s after the cancel (state ${st:-?})"
}

cmd_tm_pid() {
  local v="${1:-$DEFAULT_VERSION}"
  live_pid_of "$(flink_home "$v")" taskexecutor || die "no running TaskManager for Flink $v"
}

# One more TaskManager beside the running ones: the same configuration but a free data port (the
# first one's is pinned to base+126). It registers with the JobManager before this returns; its
# PID is printed. `stop` stops it with the others (the pid file lists every instance).
cmd_start_tm() {
  local v="${1:-$DEFAULT_VERSION}" fh before i tms pid
  require_installed "$v"
  fh="$(flink_home "$v")"
  live_pid_of "$fh" standalonesession >/dev/null || die "no JobManager of Flink $v: run start first"
  before=$(overview_field taskmanagers)
  export USER="${USER:-$(id -un)}"
  export FLINK_CONF_DIR="$fh/conf" FLINK_LOG_DIR="$fh/log" FLINK_PID_DIR="$fh/run"
  "$fh/bin/taskmanager.sh" start -D taskmanager.data.port=0 >&2
  pid=$(tail -n 1 "$fh"/run/*-taskexecutor.pid)
  for i in $(seq 1 180); do
    tms=$(overview_field taskmanagers)
    if [ "${tms:-0}" -gt "${before:-0}" ] 2>/dev/null; then
      log "Flink $v: $tms TaskManager(s); the new one is pid $pid"
      echo "$pid"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || die "the new TaskManager (pid $pid) died; see $fh/log"
    sleep 0.5
  done
  die "the new TaskManager did not register within 90 s; see $fh/log"
}

cmd_log_dir() { local v="${1:-$DEFAULT_VERSION}"; echo "$(flink_home "$v")/log"; }
cmd_rest_url() { echo "$REST"; }

usage() { sed -n '/^# Usage:/,/^# Progress/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

main() {
  local cmd="${1:-}"; [ $# -gt 0 ] && shift
  case "$cmd" in
    install)   cmd_install "$@" ;;
    start)     cmd_start "$@" ;;
    stop)      cmd_stop "$@" ;;
    build-job) cmd_build_job "$@" ;;
    submit)    cmd_submit "$@" ;;
    cancel)    cmd_cancel "$@" ;;
    tm-pid)    cmd_tm_pid "$@" ;;
    start-tm)  cmd_start_tm "$@" ;;
    log-dir)   cmd_log_dir "$@" ;;
    rest-url)  cmd_rest_url "$@" ;;
    scenarios) cmd_scenarios ;;
    *) usage ;;
  esac
}

main "$@"
