{{/*
Labels of every object: the two examples/deploy uses, plus Helm's.
*/}}
{{- define "wasmccm.labels" -}}
app.kubernetes.io/name: wasm-cloud-controller-manager
app.kubernetes.io/component: {{ .component | default "cloud-controller-manager" }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/*
Where the module volume is mounted in the container.
*/}}
{{- define "wasmccm.moduleDir" -}}/etc/wasmccm/module{{- end }}

{{/*
Checks the module source settings, failing the render with a clear message.
*/}}
{{- define "wasmccm.validateModule" -}}
{{- $m := .Values.module -}}
{{- if not (has $m.source (list "configMap" "image" "registry")) -}}
{{- fail (printf "module.source is %q; want configMap, image or registry" $m.source) -}}
{{- end -}}
{{- if and (eq $m.source "image") (not $m.image.reference) -}}
{{- fail "module.source image needs module.image.reference" -}}
{{- end -}}
{{- if eq $m.source "registry" -}}
{{- if not $m.registry.reference -}}
{{- fail "module.source registry needs module.registry.reference" -}}
{{- end -}}
{{- if and (not (contains "@sha256:" $m.registry.reference)) (not $m.registry.allowTags) -}}
{{- fail (printf "module.registry.reference %q has no @sha256: digest; pin one, or set module.registry.allowTags" $m.registry.reference) -}}
{{- end -}}
{{- end -}}
{{- end }}
