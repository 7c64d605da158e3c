{{/*
_helpers.tpl -- named templates shared by the chart: names and labels, the config.toml built
from values (with Secret references turned into env vars or files), and the daemon's container
and pod volumes, used by the Deployment, the StatefulSet and (as a printed snippet) sidecar mode.
*/}}

{{- define "checkpoint-sentinel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "checkpoint-sentinel.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "checkpoint-sentinel.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "checkpoint-sentinel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "checkpoint-sentinel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "checkpoint-sentinel.labels" -}}
helm.sh/chart: {{ include "checkpoint-sentinel.chart" . }}
{{ include "checkpoint-sentinel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: checkpoint-sentinel
{{- end }}

{{- define "checkpoint-sentinel.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "checkpoint-sentinel.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "true" when the daemon watches the Kubernetes API (deployment mode, discovery on). */}}
{{- define "checkpoint-sentinel.kubernetesDiscovery" -}}
{{- $k := dig "discovery" "kubernetes" dict (default dict .Values.config) }}
{{- if and (eq .Values.mode "deployment") (dig "enabled" false $k) }}true{{ end }}
{{- end }}

{{/* Whether the pod gets its service account's token: needed by Kubernetes discovery. */}}
{{- define "checkpoint-sentinel.automountToken" -}}
{{- or .Values.serviceAccount.automountServiceAccountToken (eq (include "checkpoint-sentinel.kubernetesDiscovery" .) "true") }}
{{- end }}

{{- define "checkpoint-sentinel.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "checkpoint-sentinel.configMapName" -}}
{{- include "checkpoint-sentinel.fullname" . }}-config
{{- end }}

{{/* The clusters the daemon watches: config.clusters, or in sidecar mode the one JobManager. */}}
{{- define "checkpoint-sentinel.clusters" -}}
{{- if eq .Values.mode "sidecar" }}
{{- $c := deepCopy (default dict .Values.sidecar.cluster) }}
{{- $_ := set $c "name" (default .Release.Name .Values.sidecar.clusterName) }}
{{- $_ := set $c "url" .Values.sidecar.flinkRestUrl }}
{{- list $c | toJson }}
{{- else }}
{{- .Values.config.clusters | toJson }}
{{- end }}
{{- end }}

{{/* Upper-case env-var-safe form of a cluster name. */}}
{{- define "checkpoint-sentinel.envSafe" -}}
{{- regexReplaceAll "[^A-Z0-9]" (upper .) "_" }}
{{- end }}

{{/*
Every { secret: { name, key } } in the clusters, as a JSON list of
{cluster, field, name, key, env, path, kind}. kind "file" for ca_file (and for everything when
credentials.from is file), else "env".
*/}}
{{- define "checkpoint-sentinel.secretRefs" -}}
{{- $root := . }}
{{- $refs := list }}
{{- range $c := include "checkpoint-sentinel.clusters" $root | fromJsonArray }}
{{- $cands := list }}
{{- if and (kindIs "map" $c.basic_auth) (kindIs "map" ($c.basic_auth).password) }}
{{- $cands = append $cands (dict "field" "password" "v" $c.basic_auth.password "forceFile" false) }}
{{- end }}
{{- if kindIs "map" $c.bearer_token }}
{{- $cands = append $cands (dict "field" "bearer_token" "v" $c.bearer_token "forceFile" false) }}
{{- end }}
{{- if kindIs "map" $c.ca_file }}
{{- $cands = append $cands (dict "field" "ca_file" "v" $c.ca_file "forceFile" true) }}
{{- end }}
{{- range $cand := $cands }}
{{- if hasKey $cand.v "secret" }}
{{- $kind := ternary "file" $root.Values.credentials.from $cand.forceFile }}
{{- $safe := include "checkpoint-sentinel.envSafe" $c.name }}
{{- $refs = append $refs (dict
      "cluster" $c.name "field" $cand.field
      "name" $cand.v.secret.name "key" $cand.v.secret.key "kind" $kind
      "env" (printf "CS_%s_%s" $safe (upper $cand.field))
      "file" (printf "%s/%s" $c.name $cand.field)
      "path" (printf "/run/secrets/checkpoint-sentinel/%s/%s" $c.name $cand.field)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $refs | toJson }}
{{- end }}

{{/* The value config.toml gets for a secret reference: { env = … } or { file = … } / a path. */}}
{{- define "checkpoint-sentinel.secretValue" -}}
{{- $ref := .ref }}
{{- if eq $ref.field "ca_file" }}
{{- $ref.path | toJson }}
{{- else if eq $ref.kind "file" }}
{{- dict "file" $ref.path | toJson }}
{{- else }}
{{- dict "env" $ref.env | toJson }}
{{- end }}
{{- end }}

{{/*
Helm reads numbers from values as floats; TOML needs integers where the daemon expects them.
Turns every whole float in a map (recursively, also inside lists of maps) into an int64.
*/}}
{{- define "checkpoint-sentinel.intify" -}}
{{- $m := . }}
{{- range $k, $v := $m }}
{{- if and (kindIs "float64" $v) (eq (float64 (int64 $v)) $v) }}
{{- $_ := set $m $k (int64 $v) }}
{{- else if kindIs "map" $v }}
{{- include "checkpoint-sentinel.intify" $v }}
{{- else if kindIs "slice" $v }}
{{- range $e := $v }}{{ if kindIs "map" $e }}{{ include "checkpoint-sentinel.intify" $e }}{{ end }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Where the TLS Secret is mounted: the whole Secret, so that a renewal reaches the pod. */}}
{{- define "checkpoint-sentinel.tlsDir" -}}
/run/secrets/checkpoint-sentinel-tls
{{- end }}

{{/* A probe from values: to the probe port when there is one (plain HTTP), else switched to
HTTPS when the daemon serves TLS (kubelet does not verify the certificate). */}}
{{- define "checkpoint-sentinel.probe" -}}
{{- $probe := deepCopy .probe }}
{{- if and .probePort (kindIs "map" $probe.httpGet) }}
{{- $_ := set $probe.httpGet "port" "probes" }}
{{- else if and .tls (kindIs "map" $probe.httpGet) }}
{{- $_ := set $probe.httpGet "scheme" "HTTPS" }}
{{- end }}
{{- toYaml $probe }}
{{- end }}

{{/* config.toml, as a TOML document. */}}
{{- define "checkpoint-sentinel.configToml" -}}
{{- $root := . }}
{{- $refs := include "checkpoint-sentinel.secretRefs" $root | fromJsonArray }}
{{- $clusters := list }}
{{- range $c := include "checkpoint-sentinel.clusters" $root | fromJsonArray }}
{{- $c := deepCopy $c }}
{{- range $ref := $refs }}
{{- if eq $ref.cluster $c.name }}
{{- $val := include "checkpoint-sentinel.secretValue" (dict "ref" $ref) | fromJson }}
{{- if eq $ref.field "password" }}
{{- $_ := set $c.basic_auth "password" $val }}
{{- else if eq $ref.field "ca_file" }}
{{- $_ := set $c "ca_file" $ref.path }}
{{- else }}
{{- $_ := set $c $ref.field $val }}
{{- end }}
{{- end }}
{{- end }}
{{- $clusters = append $clusters $c }}
{{- end }}
{{- $cfg := deepCopy (default dict .Values.config.extra) }}
{{- $server := dict "listen" (printf "0.0.0.0:%d" (int .Values.port)) }}
{{- if .Values.probePort }}
{{- $_ := set $server "probe_listen" (printf "0.0.0.0:%d" (int .Values.probePort)) }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- if not .Values.tls.secretName }}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret with tls.crt and tls.key)" }}
{{- end }}
{{- $dir := include "checkpoint-sentinel.tlsDir" . }}
{{- $_ := set $server "tls_cert_file" (printf "%s/tls.crt" $dir) }}
{{- $_ := set $server "tls_key_file" (printf "%s/tls.key" $dir) }}
{{- if .Values.tls.clientCa.secretName }}
{{- $_ := set $server "tls_client_ca_file" (printf "%s/client-ca.crt" $dir) }}
{{- end }}
{{- end }}
{{- $_ := set $cfg "server" $server }}
{{- $_ := set $cfg "clusters" $clusters }}
{{- $_ := set $cfg "stats" (deepCopy (default dict .Values.config.stats)) }}
{{- $state := deepCopy (default dict .Values.config.state) }}
{{- $_ := set $state "dir" "/var/lib/checkpoint-sentinel" }}
{{- $_ := set $cfg "state" $state }}
{{- if eq .Values.mode "sidecar" }}
{{- $logs := .Values.sidecar.logs }}
{{- if $logs }}
{{- $l := deepCopy $logs }}
{{- $_ := set $l "cluster" (default .Release.Name .Values.sidecar.clusterName) }}
{{- $_ := set $cfg "logs" (list $l) }}
{{- end }}
{{- else if .Values.config.logs }}
{{- $_ := set $cfg "logs" (deepCopy .Values.config.logs) }}
{{- end }}
{{- if .Values.config.discovery }}
{{- if and (eq .Values.mode "sidecar") (dig "kubernetes" "enabled" false .Values.config.discovery) }}
{{- fail "config.discovery.kubernetes needs mode: deployment (a sidecar watches its own JobManager)" }}
{{- end }}
{{- $_ := set $cfg "discovery" (deepCopy .Values.config.discovery) }}
{{- end }}
{{- include "checkpoint-sentinel.intify" $cfg }}
{{- toToml $cfg }}
{{- end }}

{{/* The daemon's container (a list item body, indent it). */}}
{{- define "checkpoint-sentinel.container" -}}
{{- $refs := include "checkpoint-sentinel.secretRefs" . | fromJsonArray -}}
name: checkpoint-sentinel
image: {{ include "checkpoint-sentinel.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args: ["run", "--config", "/etc/checkpoint-sentinel/config.toml"]
ports:
  - name: sentinel
    containerPort: {{ .Values.port }}
    protocol: TCP
  {{- if .Values.probePort }}
  - name: probes
    containerPort: {{ .Values.probePort }}
    protocol: TCP
  {{- end }}
env:
  - name: SENTINEL_LOG_FORMAT
    value: json
  {{- if and (eq .Values.mode "deployment") .Values.sharding.enabled }}
  # Sharding (docs/deployment.md): this pod owns the clusters whose name hashes to its index.
  - name: SENTINEL_SHARD_INDEX
    valueFrom:
      fieldRef:
        fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
  - name: SENTINEL_SHARD_COUNT
    value: {{ .Values.sharding.shards | quote }}
  {{- end }}
  {{- range $ref := $refs }}
  {{- if eq $ref.kind "env" }}
  - name: {{ $ref.env }}
    valueFrom:
      secretKeyRef:
        name: {{ $ref.name }}
        key: {{ $ref.key }}
  {{- end }}
  {{- end }}
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
livenessProbe:
  {{- include "checkpoint-sentinel.probe" (dict "probe" .Values.livenessProbe "tls" .Values.tls.enabled "probePort" .Values.probePort) | nindent 2 }}
{{- if eq .Values.mode "deployment" }}
{{- /* Not in sidecar mode: the sidecar's readiness would gate the Flink pod's. */}}
readinessProbe:
  {{- include "checkpoint-sentinel.probe" (dict "probe" .Values.readinessProbe "tls" .Values.tls.enabled "probePort" .Values.probePort) | nindent 2 }}
{{- end }}
resources:
  {{- toYaml .Values.resources | nindent 2 }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
volumeMounts:
  - name: checkpoint-sentinel-config
    mountPath: /etc/checkpoint-sentinel
    readOnly: true
  - name: checkpoint-sentinel-state
    mountPath: /var/lib/checkpoint-sentinel
  {{- if $refs | toJson | contains "\"kind\":\"file\"" }}
  - name: checkpoint-sentinel-credentials
    mountPath: /run/secrets/checkpoint-sentinel
    readOnly: true
  {{- end }}
  {{- if .Values.tls.enabled }}
  - name: checkpoint-sentinel-tls
    mountPath: {{ include "checkpoint-sentinel.tlsDir" . }}
    readOnly: true
  {{- end }}
  {{- if eq .Values.mode "sidecar" }}
  - name: {{ .Values.sidecar.logVolumeName }}
    mountPath: {{ .Values.sidecar.logMountPath }}
    readOnly: true
  {{- end }}
  {{- with .Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/* The pod volumes the container mounts, except the state volume (a list, indent it). */}}
{{- define "checkpoint-sentinel.volumes" -}}
{{- $refs := include "checkpoint-sentinel.secretRefs" . | fromJsonArray -}}
- name: checkpoint-sentinel-config
  configMap:
    name: {{ include "checkpoint-sentinel.configMapName" . }}
{{- if $refs | toJson | contains "\"kind\":\"file\"" }}
- name: checkpoint-sentinel-credentials
  projected:
    defaultMode: 0440
    sources:
      {{- range $ref := $refs }}
      {{- if eq $ref.kind "file" }}
      - secret:
          name: {{ $ref.name }}
          items:
            - key: {{ $ref.key }}
              path: {{ $ref.file }}
      {{- end }}
      {{- end }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- /* A projected volume without subPath: kubelet swaps its files when the Secret changes. */}}
- name: checkpoint-sentinel-tls
  projected:
    defaultMode: 0440
    sources:
      - secret:
          name: {{ .Values.tls.secretName }}
          items:
            - key: tls.crt
              path: tls.crt
            - key: tls.key
              path: tls.key
      {{- with .Values.tls.clientCa.secretName }}
      - secret:
          name: {{ . }}
          items:
            - key: {{ $.Values.tls.clientCa.key }}
              path: client-ca.crt
      {{- end }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pod spec fields shared by the Deployment and the StatefulSet (indent 6). */}}
{{- define "checkpoint-sentinel.podSpecCommon" -}}
serviceAccountName: {{ include "checkpoint-sentinel.serviceAccountName" . }}
automountServiceAccountToken: {{ include "checkpoint-sentinel.automountToken" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - {{ include "checkpoint-sentinel.container" . | indent 4 | trim }}
{{- end }}

{{/*
Sidecar mode: the containers and volumes to add to the Flink JobManager pod spec (printed by
NOTES.txt; .ci/validate-deploy.sh wraps it in a Pod and validates it). The Flink container must
mount the log volume at sidecar.logMountPath too.
*/}}
{{- define "checkpoint-sentinel.sidecarSnippet" -}}
containers:
  - {{ include "checkpoint-sentinel.container" . | indent 4 | trim }}
volumes:
  {{- include "checkpoint-sentinel.volumes" . | nindent 2 }}
  - name: checkpoint-sentinel-state
    emptyDir: {}
  - name: {{ .Values.sidecar.logVolumeName }}
    emptyDir: {}
{{- end }}
