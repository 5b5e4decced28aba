{{/*
Expand the name of the chart.
*/}}
{{- define "namesrv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name.
We truncate at 63 chars because some Kubernetes name fields are limited to this (by the DNS naming spec).
If release name contains chart name it will be used as a full name.
*/}}
{{- define "namesrv.fullname" -}}
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

{{/*
Name of a companion object: the full name cut so that "-<suffix>" still fits in 63 characters.
Usage: include "namesrv.suffixedName" (list . "headless")
*/}}
{{- define "namesrv.suffixedName" -}}
{{- $ctx := index . 0 }}
{{- $suffix := index . 1 }}
{{- $base := include "namesrv.fullname" $ctx | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "namesrv.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels
*/}}
{{- define "namesrv.labels" -}}
helm.sh/chart: {{ include "namesrv.chart" . }}
{{ include "namesrv.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: namesrv-fleet
{{- end }}

{{/*
Selector labels
*/}}
{{- define "namesrv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "namesrv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector labels of the workers. The component label keeps the Services, the PDB and the
NetworkPolicy off the dev Redis, CronJob and test pods, which share name and instance.
*/}}
{{- define "namesrv.workerSelectorLabels" -}}
{{ include "namesrv.selectorLabels" . }}
app.kubernetes.io/component: nameserver
{{- end }}

{{/*
Create the name of the service account to use
*/}}
{{- define "namesrv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "namesrv.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The worker image: the digest when given, else the tag, which defaults to the chart's appVersion.
*/}}
{{- define "namesrv.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "namesrv.headlessName" -}}
{{- include "namesrv.suffixedName" (list . "headless") }}
{{- end }}

{{- define "namesrv.devRedisName" -}}
{{- include "namesrv.suffixedName" (list . "redis") }}
{{- end }}

{{/*
The Service's DNS name, as brokers and clients in any namespace reach it.
*/}}
{{- define "namesrv.serviceFQDN" -}}
{{- printf "%s.%s.svc.%s" (include "namesrv.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{- define "namesrv.headlessFQDN" -}}
{{- printf "%s.%s.svc.%s" (include "namesrv.headlessName" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/*
namesrvAddr for brokers and clients: the Service and its remoting port.
*/}}
{{- define "namesrv.namesrvAddr" -}}
{{- printf "%s:%d" (include "namesrv.serviceFQDN" .) (int .Values.service.ports.remoting) }}
{{- end }}

{{/*
advertisedAddresses served at /rocketmq/nsaddr: the configured value, else the Service address.
*/}}
{{- define "namesrv.advertisedAddresses" -}}
{{- .Values.config.advertisedAddresses | default (include "namesrv.namesrvAddr" .) }}
{{- end }}

{{/*
ACL: the plain_acl.yml of acl.existingSecret, mounted read-only as a directory (not subPath), so
a change to the Secret reaches the running workers, which reload it.
*/}}
{{- define "namesrv.aclDir" -}}/etc/namesrv-acl{{- end }}

{{- define "namesrv.aclFile" -}}{{ include "namesrv.aclDir" . }}/plain_acl.yml{{- end }}

{{- define "namesrv.checkAcl" -}}
{{- if and .Values.config.aclEnable (not .Values.acl.existingSecret) (not .Values.config.aclFile) }}
{{- fail "namesrv: config.aclEnable needs the ACL file: set acl.existingSecret to a Secret holding plain_acl.yml" }}
{{- end }}
{{- if and .Values.acl.existingSecret .Values.config.aclFile }}
{{- fail "namesrv: set acl.existingSecret or config.aclFile, not both (the chart sets aclFile to the mounted Secret)" }}
{{- end }}
{{- end }}

{{/*
The worker's TOML configuration, from .Values.config (keys are config/default.toml's).
Scalars are written with toJson, whose strings, integers, floats and booleans are valid TOML.
*/}}
{{- define "namesrv.configToml" -}}
{{- include "namesrv.checkAcl" . }}
# namesrv-fleet configuration, rendered by the namesrv Helm chart from .Values.config.
# redisUrl is not set here: workers get it from the environment (NAMESRV_REDIS_URL).
{{- $tlsFiles := include "namesrv.tlsFiles" . | fromYaml }}
{{- range $key, $value := .Values.config }}
{{- if eq $key "advertisedAddresses" }}
{{ $key }} = {{ include "namesrv.advertisedAddresses" $ | toJson }}
{{- else if and (eq $key "aclEnable") $.Values.acl.existingSecret }}
{{ $key }} = true
{{- else if and (eq $key "aclFile") $.Values.acl.existingSecret }}
{{ $key }} = {{ include "namesrv.aclFile" $ | toJson }}
{{- else if hasKey $tlsFiles $key }}
{{ $key }} = {{ get $tlsFiles $key | toJson }}
{{- else if or (kindIs "map" $value) (kindIs "slice" $value) (kindIs "invalid" $value) }}
{{- fail (printf "namesrv: config.%s must be a string, number or boolean" $key) }}
{{- else }}
{{ $key }} = {{ toJson $value }}
{{- end }}
{{- end }}
{{- end }}

{{/*
TLS: where the Secret of tls.existingSecret is mounted, and the config keys that point into it
(a YAML map, empty when no Secret is set).
*/}}
{{- define "namesrv.tlsMountPath" -}}/etc/namesrv-tls{{- end }}

{{- define "namesrv.tlsFiles" -}}
{{- if .Values.tls.existingSecret }}
{{- $dir := include "namesrv.tlsMountPath" . }}
tlsCertFile: {{ printf "%s/%s" $dir .Values.tls.certKey | quote }}
tlsKeyFile: {{ printf "%s/%s" $dir .Values.tls.keyKey | quote }}
{{- if ne .Values.config.tlsClientAuth "none" }}
tlsClientCaFile: {{ printf "%s/%s" $dir .Values.tls.caKey | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Shutdown arithmetic. The grace period starts with the preStop hook, so it must cover
preStopSleepSeconds + the worker's drain (config.shutdownTimeoutSeconds) + 5 s to close.
*/}}
{{- define "namesrv.shutdownMarginSeconds" -}}5{{- end }}

{{- define "namesrv.minGracePeriodSeconds" -}}
{{- add (int .Values.preStopSleepSeconds) (int (ceil .Values.config.shutdownTimeoutSeconds)) (int (include "namesrv.shutdownMarginSeconds" .)) }}
{{- end }}

{{- define "namesrv.terminationGracePeriodSeconds" -}}
{{- $min := int (include "namesrv.minGracePeriodSeconds" .) }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- $min }}
{{- else if lt (int .Values.terminationGracePeriodSeconds) $min }}
{{- fail (printf "namesrv: terminationGracePeriodSeconds=%d is too short: preStopSleepSeconds (%d) + config.shutdownTimeoutSeconds (%v, rounded up) + %s s to close = %d. Raise it to at least %d, or leave it null to compute it." (int .Values.terminationGracePeriodSeconds) (int .Values.preStopSleepSeconds) .Values.config.shutdownTimeoutSeconds (include "namesrv.shutdownMarginSeconds" .) $min $min) }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/*
Checks that must hold before anything is rendered; every message says what to change.
*/}}
{{- define "namesrv.validate" -}}
{{- if and (ne .Values.config.tlsMode "disabled") (not .Values.tls.existingSecret) (not (and .Values.config.tlsCertFile .Values.config.tlsKeyFile)) }}
{{- fail (printf "namesrv: config.tlsMode=%s needs a certificate: set tls.existingSecret (a Secret with %s and %s, e.g. from cert-manager), or mount one with extraVolumes and set config.tlsCertFile and config.tlsKeyFile." .Values.config.tlsMode .Values.tls.certKey .Values.tls.keyKey) }}
{{- end }}
{{- if and .Values.tls.existingSecret (eq .Values.config.tlsMode "disabled") }}
{{- fail "namesrv: tls.existingSecret is set but config.tlsMode is disabled: set config.tlsMode to permissive (TLS and plain on the same ports, to migrate) or enforcing." }}
{{- end }}
{{- $redis := .Values.redis }}
{{- $sources := list }}
{{- if $redis.url }}{{ $sources = append $sources "redis.url" }}{{ end }}
{{- if $redis.existingSecret }}{{ $sources = append $sources "redis.existingSecret" }}{{ end }}
{{- if $redis.dev.enabled }}{{ $sources = append $sources "redis.dev.enabled" }}{{ end }}
{{- if eq (len $sources) 0 }}
{{- fail "namesrv: no Redis configured. Set redis.url (e.g. redis://redis-master.redis.svc:6379/0), or redis.existingSecret (a Secret holding the full URL, password included), or redis.dev.enabled=true for a throw-away trial Redis. Workers never start an embedded Redis on Kubernetes: every pod would be its own registry and brokers and clients would see partial routes." }}
{{- end }}
{{- if gt (len $sources) 1 }}
{{- fail (printf "namesrv: choose one Redis source, not %s." (join " and " $sources)) }}
{{- end }}
{{- if and $redis.dev.enabled (ne (int .Values.config.redisWriteReplicas) 0) }}
{{- fail "namesrv: config.redisWriteReplicas needs a Redis with replicas; redis.dev has none, so every write would fail. Set it to 0 for the dev Redis." }}
{{- end }}
{{- if $redis.url }}
{{- $u := urlParse $redis.url }}
{{- if or (contains ":" $u.userinfo) (regexMatch "(^|&)password=" $u.query) }}
{{- fail "namesrv: redis.url must not contain a password (values end up in the release history). Put the password in a Secret and set redis.passwordSecret.name, or put the whole URL in a Secret and set redis.existingSecret." }}
{{- end }}
{{- if and $redis.passwordSecret.name (not (regexMatch "^rediss?(\\+[a-z]+)?$" $u.scheme)) }}
{{- fail "namesrv: redis.passwordSecret needs a redis:// or rediss:// (or redis+<mode>://) URL in redis.url." }}
{{- end }}
{{- else if $redis.passwordSecret.name }}
{{- fail "namesrv: redis.passwordSecret is used with redis.url only; with redis.existingSecret the Secret holds the whole URL." }}
{{- end }}
{{- if eq (int .Values.config.httpPort) (int .Values.config.remotingPort) }}
{{- fail "namesrv: config.httpPort and config.remotingPort must differ." }}
{{- end }}
{{- if and (not (kindIs "invalid" .Values.pdb.minAvailable)) (not (kindIs "invalid" .Values.pdb.maxUnavailable)) }}
{{- fail "namesrv: set only one of pdb.minAvailable and pdb.maxUnavailable (set the other to null)." }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "namesrv: autoscaling.minReplicas must not exceed autoscaling.maxReplicas." }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not .Values.autoscaling.targetCPUUtilizationPercentage) (not .Values.autoscaling.targetMemoryUtilizationPercentage) }}
{{- fail "namesrv: autoscaling needs autoscaling.targetCPUUtilizationPercentage or autoscaling.targetMemoryUtilizationPercentage." }}
{{- end }}
{{- if .Values.eventsExport.enabled }}
{{- if and (not .Values.eventsExport.existingClaim) (not (contains "://" .Values.eventsExport.out)) }}
{{- fail "namesrv: eventsExport needs a destination that outlives the job: set eventsExport.existingClaim (a PersistentVolumeClaim, mounted at /export) or set eventsExport.out to an object-store URL." }}
{{- end }}
{{- end }}
{{- $_ := include "namesrv.terminationGracePeriodSeconds" . }}
{{- end }}

{{/*
The Redis URL in the container environment: NAMESRV_REDIS_URL, never from the ConfigMap.
*/}}
{{- define "namesrv.redisEnv" -}}
{{- $redis := .Values.redis }}
{{- if $redis.existingSecret }}
- name: NAMESRV_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $redis.existingSecret | quote }}
      key: {{ $redis.existingSecretKey | quote }}
{{- else if $redis.dev.enabled }}
- name: NAMESRV_REDIS_URL
  value: {{ printf "redis://%s:6379/0" (include "namesrv.devRedisName" .) | quote }}
{{- else if $redis.passwordSecret.name }}
{{- $u := urlParse $redis.url }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $redis.passwordSecret.name | quote }}
      key: {{ $redis.passwordSecret.key | quote }}
- name: NAMESRV_REDIS_URL
  value: {{ printf "%s://%s:$(REDIS_PASSWORD)@%s%s%s" $u.scheme $u.userinfo $u.host $u.path (ternary (printf "?%s" $u.query) "" (ne $u.query "")) | quote }}
{{- else }}
- name: NAMESRV_REDIS_URL
  value: {{ $redis.url | quote }}
{{- end }}
{{- end }}

{{/*
HTTP probe from its values (the enabled flag dropped); HTTPS when config.tlsMode is enforcing
(the kubelet does not verify the certificate). Usage: include "namesrv.httpProbe" (list $probeValues "/path" $tlsMode)
*/}}
{{- define "namesrv.httpProbe" -}}
{{- $probe := index . 0 }}
httpGet:
  path: {{ index . 1 }}
  port: http
  {{- if eq (index . 2) "enforcing" }}
  scheme: HTTPS
  {{- end }}
{{- toYaml (omit $probe "enabled") | nindent 0 }}
{{- end }}
