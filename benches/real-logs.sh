#!/usr/bin/env bash
# scan-logs on real Flink logs (issue 20): builds a corpus from every captured JobManager and
# TaskManager log of the fixtures (all versions, DEBUG captures included), repeated to at least
# CORPUS_MB, and times, side by side in one hyperfine run on the same file:
#   checkpoint-sentinel scan-logs (text and JSON report), grep -c -E with the failure needles,
#   grep -c -E with every needle scan-logs looks for, rg -c with each of the two.
# Output goes to a pipe (hyperfine --output=pipe): GNU grep stops at the first match when its
# output is /dev/null. The corpus is written under target/ and never committed.
#
#   benches/real-logs.sh                       # CORPUS_MB=300 RUNS=5
#   CALLGRIND=1 benches/real-logs.sh           # also instruction counts (valgrind) on a 30 MB cut
#   BEFORE=/path/to/older/checkpoint-sentinel benches/real-logs.sh   # also an older build
#
# Needs: hyperfine, GNU grep, ripgrep (apt-get install -y hyperfine ripgrep), python3.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
CORPUS_MB=${CORPUS_MB:-300}
RUNS=${RUNS:-5}
WORK=$TARGET/real-logs
BIN=$TARGET/release/checkpoint-sentinel
mkdir -p "$WORK"
CORPUS=$WORK/flink-real-${CORPUS_MB}m.log

(cd "$ROOT" && cargo build --release --quiet)

if [ ! -s "$CORPUS" ]; then
  # Every captured log once, in a stable order (a file with no trailing newline gets one).
  mapfile -t LOGS < <(
    ls -1 "$ROOT"/tests/fixtures/flink-*/*/logs/* "$ROOT"/../shared/fixtures/flink-*/*/logs/* 2>/dev/null | sort
  )
  [ "${#LOGS[@]}" -gt 0 ] || { echo "no fixture logs found" >&2; exit 1; }
  ONCE=$WORK/once.log
  : >"$ONCE"
  for f in "${LOGS[@]}"; do
    [ -f "$f" ] || continue
    cat "$f" >>"$ONCE"
    [ -z "$(tail -c1 "$f")" ] || echo >>"$ONCE"
  done
  : >"$CORPUS.tmp"
  while [ "$(stat -c %s "$CORPUS.tmp")" -lt $((CORPUS_MB * 1048576)) ]; do
    cat "$ONCE" >>"$CORPUS.tmp"
  done
  mv "$CORPUS.tmp" "$CORPUS"
  echo "corpus: ${#LOGS[@]} logs, $(stat -c %s "$ONCE") bytes once, $(stat -c %s "$CORPUS") bytes in $CORPUS" >&2
fi

# The needles scan-logs looks for (src/sources/logs/parse.rs BUILTINS, 16 distinct), and the failure ones.
ALL='Triggering checkpoint |Completed checkpoint |expired before completing|Decline checkpoint |Failed to trigger or complete checkpoint|Failed to trigger checkpoint for job|Triggering Checkpoint |Received late message for now expired|before completing current checkpoint|to executing it exceeded threshold|asynchronous part of checkpoint|Could not complete snapshot |Restoring job |Received barrier from channel|Did not receive barrier from|Exceeded checkpoint tolerable failure threshold'
FAIL='expired before completing|Decline checkpoint |Failed to trigger or complete checkpoint|Exceeded checkpoint tolerable failure threshold'

size=$(stat -c %s "$CORPUS")
lines=$(wc -l <"$CORPUS")
echo "corpus $CORPUS: $size bytes, $lines lines" >&2
echo "lines with a failure needle: $(grep -c -E "$FAIL" "$CORPUS"), with any needle: $(grep -c -E "$ALL" "$CORPUS")" >&2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

hyperfine -N --warmup 1 --runs "$RUNS" --output=pipe --export-json "$WORK/hyperfine.json" \
  -n grep-failures "grep -c -E '$FAIL' $CORPUS" \
  -n grep-all "grep -c -E '$ALL' $CORPUS" \
  -n rg-failures "rg -c '$FAIL' $CORPUS" \
  -n rg-all "rg -c '$ALL' $CORPUS" \
  -n scan-logs-text "$BIN scan-logs $CORPUS" \
  -n scan-logs-json "$BIN scan-logs --format json $CORPUS" \
  ${BEFORE:+-n scan-logs-before "$BEFORE scan-logs $CORPUS"} | tee "$WORK/hyperfine.txt" >&2
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# One table: min and mean wall time, CPU time, MB/s on the minimum, and how many times faster
# scan-logs (text) is, on the minima and on the means.
python3 - "$WORK/hyperfine.json" "$size" <<'EOF'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
size = int(sys.argv[2])
scan = res["scan-logs-text"]
print("| command | min s | mean ± σ s | user + sys s (mean) | MB/s (min) | scan-logs (text) is … faster: min / mean |")
print("|---|---|---|---|---|---|")
for name, r in res.items():
    print(f"| {name} | {r['min']:.3f} | {r['mean']:.3f} ± {r['stddev']:.3f} | {r['user']:.3f} + {r['system']:.3f} "
          f"| {size / r['min'] / 1e6:.0f} | {r['min'] / scan['min']:.2f}× / {r['mean'] / scan['mean']:.2f}× |")
EOF

if [ "${CALLGRIND:-0}" = 1 ]; then
  # Instruction counts do not depend on what else runs on the machine. Output to a file: GNU
  # grep stops at the first match when its output is /dev/null.
  CUT=$WORK/cut-30m.log
  head -c $((30 * 1048576)) "$CORPUS" >"$CUT"
  ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >"$WORK/ir.out" | awk '/Collected/ {print $4}'; }
  echo "callgrind instructions on 30 MiB: grep-failures $(ir grep -c -E "$FAIL" "$CUT")," \
    "grep-all $(ir grep -c -E "$ALL" "$CUT"), rg-failures $(ir rg -j1 -c "$FAIL" "$CUT")," \
    "scan-logs $(ir "$BIN" scan-logs "$CUT")${BEFORE:+, scan-logs before $(ir "$BEFORE" scan-logs "$CUT")}"
fi
