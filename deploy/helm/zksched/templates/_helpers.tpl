{{/* The release's name for its objects: the release name, with the chart's name unless it holds it. */}}
{{- define "zksched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "zksched.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels every pod of the release carries; the metrics Service selects them. */}}
{{- define "zksched.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "zksched.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret holding each credential: the user's existing one or the chart's. */}}
{{- define "zksched.dbSecret" -}}{{ .Values.db.existingSecret | default (include "zksched.fullname" .) }}{{- end -}}
{{- define "zksched.apiSecret" -}}{{ .Values.api.existingSecret | default (include "zksched.fullname" .) }}{{- end -}}
{{- define "zksched.zkSecret" -}}{{ .Values.registry.auth.existingSecret | default (include "zksched.fullname" .) }}{{- end -}}

{{/* Where the ZooKeeper credential is mounted, registry.auth-file. */}}
{{- define "zksched.zkAuthFile" -}}/etc/zksched/secrets/zk-auth{{- end -}}

{{/* The names the masters' Service is reached by, for api.allowed-hosts. */}}
{{- define "zksched.masterHosts" -}}
{{- $svc := printf "%s-master" (include "zksched.fullname" .) -}}
{{- $hosts := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- concat $hosts .Values.api.allowedHosts | toJson -}}
{{- end -}}

{{/*
The config file of a node (zksched.yaml): what the chart sets for the role, with
.Values.config merged over it. Called with (dict "root" $ "role" "master") or
(dict "root" $ "role" "worker" "pool" POOL), POOL a worker pool merged over .Values.worker.
*/}}
{{- define "zksched.config" -}}
{{- $v := .root.Values -}}
{{- range $key := list "port" "slots" "groups" "shutdown-timeout" "kill-grace" -}}
{{- if hasKey ($v.config.worker | default dict) $key -}}
{{- fail (printf "config.worker.%s: set it with the chart's worker values (worker.port, slots, shutdownTimeoutSeconds, killGraceSeconds; a pool's groups), which also set the pods' ports and grace period" $key) -}}
{{- end -}}
{{- end -}}
{{- if hasKey ($v.config.master | default dict) "port" -}}
{{- fail "config.master.port: set master.port, which also sets the pods' and the Service's ports" -}}
{{- end -}}
{{- $registry := dict "servers" $v.registry.servers "root" $v.registry.root -}}
{{- if $v.registry.auth.enabled -}}
{{- $_ := set $registry "auth-file" (include "zksched.zkAuthFile" .root) -}}
{{- end -}}
{{- $c := dict "registry" $registry "log" (dict "format" "json") -}}
{{- if eq .role "master" -}}
{{- $_ := set $c "master" (dict "port" (int $v.master.port)) -}}
{{- $_ := set $c "api" (dict "allowed-hosts" (include "zksched.masterHosts" .root | fromJsonArray)) -}}
{{- else -}}
{{- $p := .pool -}}
{{- $_ := set $c "worker" (dict "port" (int $p.port) "slots" (int $p.slots) "groups" $p.groups "shutdown-timeout" (printf "%ds" (int $p.shutdownTimeoutSeconds)) "kill-grace" (printf "%ds" (int $p.killGraceSeconds))) -}}
{{- end -}}
{{- toYaml (mergeOverwrite $c (deepCopy $v.config)) -}}
{{- end -}}

{{/* The worker pools that are set (a pool set to null is removed), each merged over .Values.worker. */}}
{{- define "zksched.workerPools" -}}
{{- $pools := dict -}}
{{- range $name, $pool := .Values.workerPools -}}
{{- if $pool -}}
{{- $_ := set $pools $name (mergeOverwrite (deepCopy $.Values.worker) (deepCopy $pool)) -}}
{{- end -}}
{{- end -}}
{{- toJson $pools -}}
{{- end -}}

{{/* The environment of every node: its address (node.host, part of its identity) and the DSN. */}}
{{- define "zksched.nodeEnv" -}}
- name: ZKSCHED_NODE_HOST
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: ZKSCHED_DB_DSN
  valueFrom:
    secretKeyRef:
      name: {{ include "zksched.dbSecret" . }}
      key: {{ .Values.db.existingSecretKey }}
{{- end -}}

{{/* The probes of a node on its HTTP port (named http). */}}
{{- define "zksched.probes" -}}
{{- $p := .Values.probes -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.startupFailureThreshold }}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.livenessFailureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.readinessFailureThreshold }}
{{- end -}}

{{/* The volumes of a node: the config file, the ZooKeeper credential and a writable /tmp. */}}
{{- define "zksched.volumes" -}}
- name: config
  configMap:
    name: {{ include "zksched.fullname" . }}
- name: tmp
  emptyDir: {}
{{- if .Values.registry.auth.enabled }}
- name: zk-auth
  secret:
    secretName: {{ include "zksched.zkSecret" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.registry.auth.existingSecretKey }}
        path: zk-auth
{{- end }}
{{- end -}}

{{- define "zksched.volumeMounts" -}}
- name: config
  mountPath: /etc/zksched/config
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.registry.auth.enabled }}
- name: zk-auth
  mountPath: /etc/zksched/secrets
  readOnly: true
{{- end }}
{{- end -}}
