{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "assetscan-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "assetscan-operator.fullname" -}}
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

{{- define "assetscan-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource of the operator. */}}
{{- define "assetscan-operator.labels" -}}
helm.sh/chart: {{ include "assetscan-operator.chart" . }}
{{ include "assetscan-operator.selectorLabels" . }}
{{ include "assetscan-operator.releaseLabels" . }}
{{- end }}

{{/* What every resource of the release carries besides its selector labels. */}}
{{- define "assetscan-operator.releaseLabels" -}}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: assetscan
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the operator's pods (immutable once installed). */}}
{{- define "assetscan-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "assetscan-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "assetscan-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "assetscan-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "assetscan-operator.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Where the ConfigMap is mounted, and the file the operator reads. */}}
{{- define "assetscan-operator.configDir" -}}/etc/assetscan-operator{{- end }}
{{- define "assetscan-operator.configPath" -}}{{ include "assetscan-operator.configDir" . }}/config.yaml{{- end }}

{{/*
config.lock.ttl in whole seconds, rounded up (the operator's default: 30s).
Durations are <integer><unit>, unit ms, s, m, h or d.
*/}}
{{/*
Whole seconds (rounded up) of a configuration duration: (dict "name" <key>
"value" <duration or empty> "default" <duration>).
*/}}
{{- define "assetscan-operator.durationSeconds" -}}
{{- $d := .default }}
{{- with .value }}{{ $d = toString . | trim }}{{ end }}
{{- if not (regexMatch "^[0-9]+(ms|s|m|h|d)$" $d) }}
{{- fail (printf "%s %q is not a duration like 500ms, 30s, 2m" .name $d) }}
{{- end }}
{{- $n := regexFind "^[0-9]+" $d | int64 }}
{{- $unit := regexFind "[a-z]+$" $d }}
{{- if eq $unit "ms" }}{{ div (add $n 999) 1000 }}
{{- else if eq $unit "s" }}{{ $n }}
{{- else if eq $unit "m" }}{{ mul $n 60 }}
{{- else if eq $unit "h" }}{{ mul $n 3600 }}
{{- else }}{{ mul $n 86400 }}
{{- end }}
{{- end }}

{{/* Where the Redis TLS Secrets are mounted (outside the ConfigMap's mount). */}}
{{- define "assetscan-operator.redisTlsDir" -}}/etc/assetscan-redis{{- end }}

{{/*
REDIS_URL for Sentinel: redis+sentinel://<host>,<host>/<masterName>[/<db>],
rediss+sentinel:// with TLS.
*/}}
{{- define "assetscan-operator.sentinelUrl" -}}
{{- $sentinel := .Values.redis.sentinel }}
{{- if not $sentinel.hosts }}
{{- fail "redis.sentinel.enabled needs redis.sentinel.hosts: the sentinels, as host:port" }}
{{- end }}
{{- $scheme := ternary "rediss+sentinel" "redis+sentinel" .Values.redis.tls.enabled }}
{{- printf "%s://%s/%s" $scheme (join "," $sentinel.hosts) $sentinel.masterName }}
{{- with $sentinel.db }}/{{ . }}{{ end }}
{{- end }}

{{/* Refuses Redis TLS values that cannot work together. */}}
{{- define "assetscan-operator.checkRedisTls" -}}
{{- $tls := .Values.redis.tls }}
{{- if and (not $tls.enabled) (or $tls.caSecret.name $tls.clientCertSecret) }}
{{- fail "redis.tls.caSecret / redis.tls.clientCertSecret need redis.tls.enabled: true" }}
{{- end }}
{{- if and $tls.enabled (not .Values.redis.sentinel.enabled) (not .Values.redis.existingSecret) .Values.redis.url (not (hasPrefix "rediss://" .Values.redis.url)) }}
{{- fail (printf "redis.tls.enabled needs a rediss:// redis.url, not %q" .Values.redis.url) }}
{{- end }}
{{- end }}

{{/*
Refuses a Redis the operator would reach without a password, unless
redis.allowUnauthenticated says so: whoever can write to that Redis can hold
every asset's lock and forge notifications. A password counts when it comes
from redis.password.existingSecret, from a URL Secret (redis.existingSecret,
whose content the chart cannot see), or from the userinfo of redis.url or
config.redis.url.
*/}}
{{- define "assetscan-operator.checkRedisAuth" -}}
{{- $r := .Values.redis }}
{{- $withPassword := "^[a-z+:]+//[^/@]*:[^/@]+@" }}
{{- $configUrl := "" }}
{{- if .Values.config.redis }}{{- $configUrl = .Values.config.redis.url | default "" }}{{- end }}
{{- $hasPassword := or $r.password.existingSecret $r.existingSecret (regexMatch $withPassword ($r.url | default "")) (regexMatch $withPassword $configUrl) }}
{{- if and (not $hasPassword) (not $r.allowUnauthenticated) }}
{{- fail "Redis without a password: set redis.password.existingSecret (docs/redis.md), or redis.allowUnauthenticated: true to run without one (the operator then warns and sets assetscan_redis_insecure)" }}
{{- end }}
{{- end }}

{{/* The pod template, shared by the Deployment and the StatefulSet. */}}
{{/*
The metrics port's scheme: https unless metrics.secure is off.
*/}}
{{- define "assetscan-operator.metricsScheme" -}}
{{- ternary "https" "http" .Values.metrics.secure -}}
{{- end }}

{{- define "assetscan-operator.podTemplate" -}}
{{- $lock := .Values.config.lock | default dict }}
{{- $ttl := include "assetscan-operator.durationSeconds" (dict "name" "config.lock.ttl" "value" $lock.ttl "default" "30s") | int64 }}
{{- $grace := .Values.terminationGracePeriodSeconds | int64 }}
{{- if lt $grace $ttl }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least config.lock.ttl (%ds): a stopping pod needs the time to stop its runs and release their locks" $grace $ttl) }}
{{- end }}
{{- $notify := (.Values.config.steps | default dict).notify | default dict }}
{{- $delivery := include "assetscan-operator.durationSeconds" (dict "name" "config.steps.notify.timeout" "value" $notify.timeout "default" "10s") | int64 }}
{{- if lt $grace (add $delivery 5) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least config.steps.notify.timeout (%ds) + 5s: a stopping pod finishes the delivery it has in flight and records it before it exits" $grace $delivery) }}
{{- end }}
{{- if and (not .Values.redis.sentinel.enabled) (not .Values.redis.existingSecret) (not .Values.redis.url) (not (and .Values.config.redis .Values.config.redis.url)) }}
{{- fail "no Redis: set redis.url, redis.existingSecret, redis.sentinel or config.redis.url" }}
{{- end }}
{{- include "assetscan-operator.checkRedisTls" . }}
{{- include "assetscan-operator.checkRedisAuth" . }}
{{- $redisTls := .Values.redis.tls }}
metadata:
  labels:
    {{- include "assetscan-operator.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "assetscan-operator.serviceAccountName" . }}
  # The operator talks to the Kubernetes API with its ServiceAccount token.
  automountServiceAccountToken: true
  enableServiceLinks: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  terminationGracePeriodSeconds: {{ $grace }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: operator
      image: {{ include "assetscan-operator.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["run"]
      env:
        - name: ASSETSCAN_CONFIG
          value: {{ include "assetscan-operator.configPath" . | quote }}
        - name: METRICS_ADDR
          value: {{ printf "0.0.0.0:%d" (.Values.metrics.port | int) | quote }}
        {{- if not .Values.metrics.secure }}
        - name: METRICS_PLAIN_HTTP
          value: "true"
        {{- else if .Values.metrics.tls.secretName }}
        - name: METRICS_TLS_CERT_FILE
          value: /etc/assetscan/metrics-tls/tls.crt
        - name: METRICS_TLS_KEY_FILE
          value: /etc/assetscan/metrics-tls/tls.key
        {{- end }}
        - name: ASSETSCAN_CONCURRENCY
          value: {{ .Values.concurrency | int | quote }}
        - name: LOG_FORMAT
          value: {{ .Values.logFormat | quote }}
        {{- with .Values.logLevel }}
        - name: RUST_LOG
          value: {{ . | quote }}
        {{- end }}
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- with .Values.watchNamespace }}
        - name: WATCH_NAMESPACE
          value: {{ . | quote }}
        {{- end }}
        {{- if .Values.sharding.enabled }}
        - name: ASSETSCAN_SHARD_COUNT
          value: {{ .Values.replicas | int | quote }}
        - name: ASSETSCAN_SHARD_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
        {{- end }}
        {{- if .Values.redis.sentinel.enabled }}
        - name: REDIS_URL
          value: {{ include "assetscan-operator.sentinelUrl" . | quote }}
        {{- else if .Values.redis.existingSecret }}
        - name: REDIS_URL
          valueFrom:
            secretKeyRef:
              name: {{ .Values.redis.existingSecret }}
              key: {{ .Values.redis.existingSecretKey }}
        {{- else if .Values.redis.url }}
        - name: REDIS_URL
          value: {{ .Values.redis.url | quote }}
        {{- end }}
        {{- with .Values.redis.username }}
        - name: REDIS_USERNAME
          value: {{ . | quote }}
        {{- end }}
        {{- with .Values.redis.password.existingSecret }}
        - name: REDIS_PASSWORD
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $.Values.redis.password.key }}
        {{- end }}
        {{- if .Values.redis.sentinel.enabled }}
        {{- with .Values.redis.sentinel.username }}
        - name: REDIS_SENTINEL_USERNAME
          value: {{ . | quote }}
        {{- end }}
        {{- with .Values.redis.sentinel.password.existingSecret }}
        - name: REDIS_SENTINEL_PASSWORD
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $.Values.redis.sentinel.password.key }}
        {{- end }}
        {{- end }}
        {{- if $redisTls.caSecret.name }}
        - name: REDIS_CA_FILE
          value: {{ printf "%s/ca/%s" (include "assetscan-operator.redisTlsDir" .) $redisTls.caSecret.key | quote }}
        {{- end }}
        {{- if $redisTls.clientCertSecret }}
        - name: REDIS_CERT_FILE
          value: {{ printf "%s/client/tls.crt" (include "assetscan-operator.redisTlsDir" .) | quote }}
        - name: REDIS_KEY_FILE
          value: {{ printf "%s/client/tls.key" (include "assetscan-operator.redisTlsDir" .) | quote }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      ports:
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
      startupProbe:
        httpGet:
          path: /healthz
          port: metrics
          scheme: {{ include "assetscan-operator.metricsScheme" . | upper }}
        {{- toYaml .Values.probes.startup | nindent 8 }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
          scheme: {{ include "assetscan-operator.metricsScheme" . | upper }}
        {{- toYaml .Values.probes.liveness | nindent 8 }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: metrics
          scheme: {{ include "assetscan-operator.metricsScheme" . | upper }}
        {{- toYaml .Values.probes.readiness | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: {{ include "assetscan-operator.configDir" . }}
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- if $redisTls.caSecret.name }}
        - name: redis-ca
          mountPath: {{ include "assetscan-operator.redisTlsDir" . }}/ca
          readOnly: true
        {{- end }}
        {{- if and .Values.metrics.secure .Values.metrics.tls.secretName }}
        - name: metrics-tls
          mountPath: /etc/assetscan/metrics-tls
          readOnly: true
        {{- end }}
        {{- if $redisTls.clientCertSecret }}
        - name: redis-client-cert
          mountPath: {{ include "assetscan-operator.redisTlsDir" . }}/client
          readOnly: true
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "assetscan-operator.fullname" . }}-config
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
    {{- if $redisTls.caSecret.name }}
    - name: redis-ca
      secret:
        secretName: {{ $redisTls.caSecret.name }}
        items:
          - {key: {{ $redisTls.caSecret.key }}, path: {{ $redisTls.caSecret.key }}}
        defaultMode: 0440
    {{- end }}
    {{- if and .Values.metrics.secure .Values.metrics.tls.secretName }}
    - name: metrics-tls
      secret:
        secretName: {{ .Values.metrics.tls.secretName }}
        items:
          - {key: tls.crt, path: tls.crt}
          - {key: tls.key, path: tls.key}
        defaultMode: 0440
    {{- end }}
    {{- if $redisTls.clientCertSecret }}
    - name: redis-client-cert
      secret:
        secretName: {{ $redisTls.clientCertSecret }}
        items:
          - {key: tls.crt, path: tls.crt}
          - {key: tls.key, path: tls.key}
        defaultMode: 0440
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- range . }}
    {{- $constraint := deepCopy . }}
    {{- if not (hasKey $constraint "labelSelector") }}
    {{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "assetscan-operator.selectorLabels" $ | fromYaml)) }}
    {{- end }}
    - {{ toYaml $constraint | nindent 6 | trim }}
    {{- end }}
  {{- end }}
{{- end }}

{{/*
One NetworkPolicy egress rule from {to, ports}: every port with each of
`protocols`. An empty `to` means any destination, empty `ports` any port.
*/}}
{{- define "assetscan-operator.egressRule" -}}
{{- $rule := dict }}
{{- with .rule.to }}{{ $_ := set $rule "to" . }}{{ end }}
{{- $ports := list }}
{{- range $port := .rule.ports }}
{{- range $protocol := $.protocols }}
{{- $ports = append $ports (dict "port" $port "protocol" $protocol) }}
{{- end }}
{{- end }}
{{- with $ports }}{{ $_ := set $rule "ports" . }}{{ end -}}
- {{ toYaml $rule | nindent 2 | trim }}
{{- end }}

{{/* Labels of the `helm test` pod (not the operator's selector labels). */}}
{{- define "assetscan-operator.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "assetscan-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end }}

{{/* An alert's labels: its severity, then prometheusRule.alertLabels. */}}
{{- define "assetscan-operator.alertLabels" -}}
severity: {{ .severity }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Non-empty when a channel of config.channelAccess has a namespaceSelector.
*/}}
{{- define "assetscan-operator.namespaceSelectors" -}}
{{- range $channel, $access := (.Values.config.channelAccess | default dict) }}
{{- if $access.namespaceSelector }}{{ $channel }} {{ end }}
{{- end }}
{{- end }}

{{/*
Non-empty when the operator watches NotificationChannels: config.teamChannels.enabled,
true unless set to false.
*/}}
{{- define "assetscan-operator.teamChannels" -}}
{{- $enabled := true }}
{{- with .Values.config.teamChannels }}
{{- if hasKey . "enabled" }}{{- $enabled = .enabled }}{{- end }}
{{- end }}
{{- if $enabled }}true{{- end }}
{{- end }}
