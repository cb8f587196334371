{{/*
Names, labels and the image, in the prometheus-community charts' way: nameOverride and
fullnameOverride, the release name as a prefix unless it already contains the chart's name, selector
labels name + instance.
*/}}
{{- define "sockpressure-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sockpressure-exporter.fullname" -}}
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

{{- define "sockpressure-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "sockpressure-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sockpressure-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sockpressure-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "sockpressure-exporter.selectorLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "sockpressure-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sockpressure-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The tag defaults to the chart's appVersion: one version for binary, chart and image. */}}
{{- define "sockpressure-exporter.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s/%s:%s@%s" .Values.image.registry .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s/%s:%s" .Values.image.registry .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* HTTPS on the agent's port when tls.enabled (probes, ServiceMonitor). */}}
{{- define "sockpressure-exporter.scheme" -}}
{{- ternary "HTTPS" "HTTP" .Values.tls.enabled }}
{{- end }}
