{{- /* The objects' name: fullnameOverride, else nameOverride, else polycrate-operator.
The app.kubernetes.io/name label stays polycrate-operator: the operator finds its
own Pods by it (its own K8s app's pod counts). */ -}}
{{- define "pco.name" -}}
{{- .Values.fullnameOverride | default .Values.nameOverride | default "polycrate-operator" | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "pco.labels" -}}
app.kubernetes.io/name: polycrate-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pco.selector" -}}
app.kubernetes.io/name: polycrate-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pco.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "pco.tokenSecret" -}}
{{ .Values.apiSync.existingSecret | default "polycrate-api-creds" }}
{{- end -}}
