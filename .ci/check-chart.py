#!/usr/bin/env python3
""".ci/check-chart.py -- checks one `helm template` rendering of helm/checkpoint-sentinel beyond
what kubernetes-validate can see (run by .ci/validate-deploy.sh, once per test values file).

  * mode: deployment renders exactly one workload (Deployment, or StatefulSet with
    SENTINEL_SHARD_INDEX/SENTINEL_SHARD_COUNT when sharded); sidecar renders none;
  * the daemon's container: non-root, read-only root FS, no privilege escalation, all
    capabilities dropped, /healthz liveness and /readyz readiness probes, resources;
  * config.toml in the ConfigMap parses as TOML, and `checkpoint-sentinel check-config` accepts
    it when a binary is given (--binary; the TLS files it names are replaced by a throwaway
    certificate made with the openssl CLI, since the daemon reads them at load);
  * the probes on the probe port (`probes`, plain HTTP) unless probePort is 0;
  * with tls.enabled: HTTPS probes (with probePort 0), the TLS Secret mounted where config.toml's [server]
    tls_* keys point, appProtocol https on the Service, scheme https on the ServiceMonitor;
    without it: none of that;
  * the PrometheusRule's groups equal alerts/flink-checkpoints.rules.yml (after taking out the
    values' additionalRuleLabels) and pass `promtool check rules`;
  * each dashboard ConfigMap has the Grafana sidecar label and holds dashboards/<name> exactly;
  * writes the prometheus-operator objects (ServiceMonitor, PrometheusRule) as JSON lines to
    --crds FILE for .ci/validate-crds.mjs.
Prints one line per finding and exits 1 if there is any. Needs PyYAML (kubernetes-validate
brings it) and Python 3.11 (tomllib).

Usage: check-chart.py RENDERED.yaml VALUES.yaml [--binary PATH] [--crds OUT.jsonl]
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TLS_DIR = "/run/secrets/checkpoint-sentinel-tls"
findings = []


def finding(msg):
    findings.append(msg)


def throwaway_certificate(directory):
    """tls.crt, tls.key and client-ca.crt in `directory` (a self-signed pair that is its own CA),
    for check-config to read in place of the mounted Secret. False without the openssl CLI."""
    crt, key = directory / "tls.crt", directory / "tls.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-days", "1", "-subj", "/CN=check-chart", "-keyout", str(key), "-out", str(crt)],
                       check=True, capture_output=True)
    except (FileNotFoundError, subprocess.CalledProcessError):
        return False
    (directory / "client-ca.crt").write_bytes(crt.read_bytes())
    return True


def stand_in_secrets(text, directory):
    """check-config checks that secret files exist and are not empty and that secret environment
    variables are set, as `run` does in the pod: stand-ins for the mounted Secret files (written
    to `directory`, their paths put in the text) and for the variables the pod gets from Secrets.
    Returns the new text and the variables."""
    env = {name: "check-chart-stand-in" for name in re.findall(r'\benv\s*=\s*"([^"]+)"', text)}

    def stand_in(m):
        path = directory / ("secret-" + re.sub(r"[^A-Za-z0-9_.-]", "_", m.group(2)))
        path.write_text("check-chart-stand-in\n")
        return f'{m.group(1)}{path}{m.group(3)}'

    return re.sub(r'(\bfile\s*=\s*")([^"]+)(")', stand_in, text), env


KINDS = {"services": "", "flinkdeployments": "flink.apache.org", "flinksessionjobs": "flink.apache.org"}


def check_rbac(docs, values, mode, workloads):
    """Kubernetes discovery's RBAC: rendered only when config.discovery.kubernetes.enabled (in
    deployment mode); exactly list and watch on exactly the kinds watched, in each namespace
    configured (Role) or cluster-wide without namespaces (ClusterRole), bound to the pod's
    service account, whose token is then mounted; without discovery no RBAC object at all and
    no token."""
    k = ((values.get("config") or {}).get("discovery") or {}).get("kubernetes") or {}
    on = mode == "deployment" and k.get("enabled", False)
    rbac = [d for d in docs if d["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    sa_automount = [d.get("automountServiceAccountToken") for d in docs if d["kind"] == "ServiceAccount"]
    pod_automount = [w["spec"]["template"]["spec"].get("automountServiceAccountToken") for w in workloads]
    sa_names = [w["spec"]["template"]["spec"].get("serviceAccountName") for w in workloads]
    if not on:
        if rbac:
            finding(f"RBAC without Kubernetes discovery: {[(d['kind'], d['metadata']['name']) for d in rbac]}")
        if (values.get("serviceAccount") or {}).get("automountServiceAccountToken") is not True \
                and True in sa_automount + pod_automount:
            finding("the service account token is mounted without Kubernetes discovery")
        return
    kinds = k.get("kinds") or list(KINDS)
    want_rules = {(KINDS[kind], kind) for kind in kinds}
    namespaces = k.get("namespaces") or []
    role, binding = ("Role", "RoleBinding") if namespaces else ("ClusterRole", "ClusterRoleBinding")
    roles = [d for d in rbac if d["kind"] == role]
    bindings = [d for d in rbac if d["kind"] == binding]
    others = [d["kind"] for d in rbac if d["kind"] not in (role, binding)]
    if others:
        finding(f"Kubernetes discovery {'with' if namespaces else 'without'} namespaces renders {others} too")
    where = sorted(d["metadata"].get("namespace", "") for d in roles)
    if where != sorted(namespaces or [""]):
        finding(f"{role}s in {where}, expected {sorted(namespaces) or 'cluster-wide'}")
    for r in roles:
        got = set()
        for rule in r.get("rules", []):
            if sorted(rule.get("verbs", [])) != ["list", "watch"]:
                finding(f"{role} {r['metadata'].get('namespace', '')}: verbs {rule.get('verbs')}, expected list and watch only")
            if rule.get("resourceNames") or rule.get("nonResourceURLs"):
                finding(f"{role}: unexpected resourceNames/nonResourceURLs {rule}")
            got |= {(g, res) for g in rule.get("apiGroups", []) for res in rule.get("resources", [])}
        if got != want_rules:
            finding(f"{role} {r['metadata'].get('namespace', '')}: resources {sorted(got)}, expected {sorted(want_rules)}")
    if sorted(d["metadata"].get("namespace", "") for d in bindings) != where:
        finding(f"{binding}s do not match the {role}s")
    role_names = {(d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in roles}
    for b in bindings:
        ref = b["roleRef"]
        if ref.get("kind") != role or (b["metadata"].get("namespace", ""), ref.get("name")) not in role_names:
            finding(f"{binding} {b['metadata']['name']}: roleRef {ref} is not the {role}")
        subjects = [(s.get("kind"), s.get("name")) for s in b.get("subjects", [])]
        if subjects != [("ServiceAccount", n) for n in sa_names]:
            finding(f"{binding}: subjects {subjects}, expected the pod's service account {sa_names}")
    if pod_automount != [True] * len(workloads) or False in sa_automount:
        finding("Kubernetes discovery but the service account token is not mounted")


def main(argv):
    args = dict(zip(argv[2::2], argv[3::2]))
    rendered, values_file = Path(argv[0]), Path(argv[1])
    docs = [d for d in yaml.safe_load_all(rendered.read_text()) if d]
    values = yaml.safe_load(values_file.read_text()) or {}
    mode = values.get("mode", "deployment")
    sharded = values.get("sharding", {}).get("enabled", False)
    tls = (values.get("tls") or {}).get("enabled", False)
    # The chart's default (values.yaml) unless the test values say otherwise; 0 is off.
    probe_port = values.get("probePort", 9718)
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)

    # Workloads.
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Pod", "Job")]
    if mode == "sidecar":
        if workloads:
            finding(f"sidecar mode renders workloads: {[w['kind'] for w in workloads]}")
    else:
        want = "StatefulSet" if sharded else "Deployment"
        if [w["kind"] for w in workloads] != [want]:
            finding(f"deployment mode (sharding {sharded}) should render one {want}, got {[w['kind'] for w in workloads]}")
    for w in workloads:
        spec = w["spec"]["template"]["spec"]
        psc = spec.get("securityContext", {})
        if not psc.get("runAsNonRoot"):
            finding(f"{w['kind']}: pod securityContext.runAsNonRoot is not true")
        for c in spec["containers"]:
            where = f"{w['kind']} container {c['name']}"
            sc = c.get("securityContext", {})
            for key, want in (("runAsNonRoot", True), ("readOnlyRootFilesystem", True), ("allowPrivilegeEscalation", False)):
                if sc.get(key) is not want:
                    finding(f"{where}: securityContext.{key} is not {want}")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                finding(f"{where}: capabilities do not drop ALL")
            if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz":
                finding(f"{where}: liveness probe is not GET /healthz")
            if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
                finding(f"{where}: readiness probe is not GET /readyz")
            if not c.get("resources", {}).get("requests"):
                finding(f"{where}: no resource requests")
            env = {e["name"] for e in c.get("env", [])}
            if sharded and not {"SENTINEL_SHARD_INDEX", "SENTINEL_SHARD_COUNT"} <= env:
                finding(f"{where}: sharded but no SENTINEL_SHARD_INDEX/SENTINEL_SHARD_COUNT")
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            for path in ("/etc/checkpoint-sentinel", "/var/lib/checkpoint-sentinel"):
                if path not in mounts:
                    finding(f"{where}: nothing mounted at {path}")
            ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
            if probe_port and ports.get("probes") != probe_port:
                finding(f"{where}: no container port `probes` {probe_port} (probePort)")
            for probe in ("livenessProbe", "readinessProbe"):
                get = c.get(probe, {}).get("httpGet", {})
                scheme = get.get("scheme", "HTTP")
                # The probe port serves plain HTTP whatever the main port does.
                want = "HTTPS" if tls and not probe_port else "HTTP"
                if get and scheme != want:
                    finding(f"{where}: {probe} scheme {scheme} with tls.enabled {tls}, probePort {probe_port}")
                if get and get.get("port") != ("probes" if probe_port else "sentinel"):
                    finding(f"{where}: {probe} on port {get.get('port')} with probePort {probe_port}")
            if tls and TLS_DIR not in mounts:
                finding(f"{where}: tls.enabled but nothing mounted at {TLS_DIR}")
        if tls:
            secrets = [src["secret"]["name"] for v in spec.get("volumes", [])
                       for src in v.get("projected", {}).get("sources", []) if "secret" in src]
            if values["tls"].get("secretName") not in secrets:
                finding(f"{w['kind']}: tls.secretName {values['tls'].get('secretName')} is not in a volume")
    for svc in by_kind.get("Service", []):
        protocols = [p.get("appProtocol") for p in svc["spec"]["ports"]]
        if protocols != [("https" if tls else None)]:
            finding(f"Service: appProtocol {protocols} with tls.enabled {tls}")
    for sm in by_kind.get("ServiceMonitor", []):
        schemes = [e.get("scheme", "http") for e in sm["spec"]["endpoints"]]
        if schemes != [("https" if tls else "http")]:
            finding(f"ServiceMonitor: scheme {schemes} with tls.enabled {tls}")

    check_rbac(docs, values, mode, workloads)

    # config.toml.
    configs = [d for d in by_kind.get("ConfigMap", []) if "config.toml" in d.get("data", {})]
    if len(configs) != 1:
        finding(f"expected one ConfigMap with config.toml, got {len(configs)}")
    for cm in configs:
        text = cm["data"]["config.toml"]
        try:
            cfg = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            finding(f"config.toml is not TOML: {e}")
            cfg = {}
        if not cfg.get("clusters") and not cfg.get("discovery", {}).get("kubernetes", {}).get("enabled"):
            finding("config.toml has no [[clusters]] (and no Kubernetes discovery)")
        server = cfg.get("server", {})
        tls_files = {k: v for k, v in server.items() if k.startswith("tls_")}
        if tls and not {"tls_cert_file", "tls_key_file"} <= set(tls_files):
            finding(f"tls.enabled but config.toml [server] has only {sorted(tls_files)}")
        if not tls and tls_files:
            finding(f"tls not enabled but config.toml [server] has {sorted(tls_files)}")
        for key, path in tls_files.items():
            if not path.startswith(TLS_DIR + "/"):
                finding(f"config.toml server.{key} = {path} is not under the TLS mount {TLS_DIR}")
        if args.get("--binary"):
            with tempfile.TemporaryDirectory() as tmp:
                if tls_files:
                    if not throwaway_certificate(Path(tmp)):
                        print("check-chart: no openssl CLI, config.toml with TLS checked as TOML only")
                        continue
                    text = text.replace(TLS_DIR + "/", tmp + "/")
                text, env = stand_in_secrets(text, Path(tmp))
                config_file = Path(tmp) / "config.toml"
                config_file.write_text(text)
                r = subprocess.run([args["--binary"], "check-config", str(config_file)], capture_output=True,
                                   text=True, env={**os.environ, **env})
            if r.returncode != 0:
                finding(f"checkpoint-sentinel check-config refuses config.toml: {r.stderr.strip() or r.stdout.strip()}")

    # PrometheusRule: the alerts file, unchanged.
    alerts = yaml.safe_load((ROOT / "alerts" / "flink-checkpoints.rules.yml").read_text())
    extra = (values.get("prometheusRule") or {}).get("additionalRuleLabels") or {}
    for pr in by_kind.get("PrometheusRule", []):
        groups = json.loads(json.dumps(pr["spec"]["groups"]))
        if extra and [len(g["rules"]) for g in groups] == [len(g["rules"]) for g in alerts["groups"]]:
            # Each rule carries the extra labels, its own winning; take them out again.
            for g, og in zip(groups, alerts["groups"]):
                for r, o in zip(g["rules"], og["rules"]):
                    own = o.get("labels") or {}
                    if r.get("labels") != {**extra, **own}:
                        finding(f"PrometheusRule {r.get('alert') or r.get('record')}: labels {r.get('labels')} "
                                f"are not {own} plus additionalRuleLabels {extra}")
                    if own:
                        r["labels"] = own
                    else:
                        r.pop("labels", None)
        if groups != alerts["groups"]:
            finding("PrometheusRule groups differ from alerts/flink-checkpoints.rules.yml")
        with tempfile.NamedTemporaryFile("w", suffix=".rules.yml", delete=False) as f:
            yaml.safe_dump({"groups": pr["spec"]["groups"]}, f)
        r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
        os.unlink(f.name)
        if r.returncode != 0:
            finding(f"promtool check rules on the PrometheusRule: {(r.stdout + r.stderr).strip()}")
    if (values.get("prometheusRule") or {}).get("enabled") and not by_kind.get("PrometheusRule"):
        finding("prometheusRule.enabled but no PrometheusRule rendered")

    # Dashboards.
    dash_cms = [d for d in by_kind.get("ConfigMap", []) if any(k.endswith(".json") for k in d.get("data", {}))]
    want_dash = sorted(p.name for p in (ROOT / "dashboards").glob("*.json"))
    if (values.get("dashboards") or {}).get("enabled", True):
        got = sorted(k for d in dash_cms for k in d["data"])
        if got != want_dash:
            finding(f"dashboard ConfigMaps hold {got}, dashboards/ has {want_dash}")
    for d in dash_cms:
        if d["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
            finding(f"ConfigMap {d['metadata']['name']}: no grafana_dashboard: \"1\" label")
        for k, v in d["data"].items():
            if json.loads(v) != json.loads((ROOT / "dashboards" / k).read_text()):
                finding(f"ConfigMap {d['metadata']['name']}: {k} differs from dashboards/{k}")

    if args.get("--crds"):
        with open(args["--crds"], "w") as f:
            for d in docs:
                if d["apiVersion"].startswith("monitoring.coreos.com/"):
                    f.write(json.dumps(d) + "\n")

    for m in findings:
        print(f"FINDING {rendered.name}: {m}")
    print(f"check-chart {rendered.name}: {len(docs)} objects ({', '.join(sorted(by_kind))}), {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
