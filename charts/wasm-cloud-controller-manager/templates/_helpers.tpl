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
Checks a module source (.m, a `module` section of the values, found at
.at), failing the render with a clear message.
*/}}
{{- define "wasmccm.validateModule" -}}
{{- $m := .m -}}
{{- $at := .at -}}
{{- if not (has $m.source (list "configMap" "image" "registry")) -}}
{{- fail (printf "%s.source is %q; want configMap, image or registry" $at $m.source) -}}
{{- end -}}
{{- if and (ne $m.source "registry") (not $m.fileName) -}}
{{- fail (printf "%s.source %s needs %s.fileName" $at $m.source $at) -}}
{{- end -}}
{{- if and (eq $m.source "image") (not $m.image.reference) -}}
{{- fail (printf "%s.source image needs %s.image.reference" $at $at) -}}
{{- end -}}
{{- if eq $m.source "registry" -}}
{{- if not $m.registry.reference -}}
{{- fail (printf "%s.source registry needs %s.registry.reference" $at $at) -}}
{{- end -}}
{{- if and (not (contains "@sha256:" $m.registry.reference)) (not $m.registry.allowTags) -}}
{{- fail (printf "%s.registry.reference %q has no @sha256: digest; pin one, or set %s.registry.allowTags" $at $m.registry.reference $at) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The modules the chart deploys, as a JSON list (read it with fromJsonArray):
the one module of the top-level values when `modules` is empty, else every
entry of `modules`, checked and completed with the defaults the top-level
`module` and `credentials` have in values.yaml. Each carries the values of
its cloud-config (module, credentials, limits, http, orphanSweep,
providerConfig, nodes, loadBalancers) and what the templates derive from
them, so that the cloud-config, the volumes and the RBAC agree:
  name           "" for the one module
  at             where its values are ("" or "modules[N].")
  suffix         of its volume and object names ("" or "-NAME")
  paths          moduleDir, credentialsDir, imageCacheDir, registryDir
  configMap      the module ConfigMap's name
  secret         the credentials Secret's name
  defaultRecord  the last-known-good record the CCM uses unless one is named
*/}}
{{- define "wasmccm.instances" -}}
{{- $instances := list -}}
{{- if not .Values.modules -}}
{{- if .Values.routes.module -}}
{{- fail (printf "routes.module is %q, but modules is empty: with one module, routes.configure decides" .Values.routes.module) -}}
{{- end -}}
{{- $i := pick .Values "module" "credentials" "limits" "http" "orphanSweep" "providerConfig" -}}
{{- $_ := set $i "name" "" -}}
{{- $_ := set $i "at" "" -}}
{{- $_ := set $i "suffix" "" -}}
{{- $_ := set $i "paths" (dict "moduleDir" "/etc/wasmccm/module" "credentialsDir" "/etc/wasmccm/credentials" "imageCacheDir" "/var/lib/wasmccm/modules" "registryDir" "/etc/wasmccm/registry") -}}
{{- $_ := set $i "defaultRecord" "wasmccm-last-known-good" -}}
{{- $instances = append $instances $i -}}
{{- else -}}
{{- $keys := list "name" "module" "credentials" "limits" "http" "orphanSweep" "providerConfig" "nodes" "loadBalancers" -}}
{{- $names := dict -}}
{{- $classes := dict -}}
{{- $records := dict -}}
{{- $nodeDefaults := list -}}
{{- $lbDefaults := list -}}
{{- range $index, $raw := .Values.modules -}}
{{- $at := printf "modules[%d]" $index -}}
{{- if not (kindIs "map" $raw) -}}
{{- fail (printf "%s is not a map of a module's values" $at) -}}
{{- end -}}
{{- $item := deepCopy $raw -}}
{{- range $key, $value := $item -}}
{{- if not (has $key $keys) -}}
{{- fail (printf "%s: unknown key %q; want %s" $at $key (join ", " $keys)) -}}
{{- end -}}
{{- end -}}
{{- $name := toString (default "" $item.name) -}}
{{- /* Volume names are DNS labels too: "registry-auth-" leaves 49 characters. */ -}}
{{- if or (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name)) (gt (len $name) 49) -}}
{{- fail (printf "%s.name %q: want a DNS label (lower-case letters, digits, '-') of at most 49 characters" $at $name) -}}
{{- end -}}
{{- if hasKey $names $name -}}
{{- fail (printf "%s.name %q: the name is used twice" $at $name) -}}
{{- end -}}
{{- $_ := set $names $name true -}}
{{- $m := default (dict) $item.module -}}
{{- $_ := set $m "source" (default "configMap" $m.source) -}}
{{- $_ := set $m "reloadInterval" (default "10s" $m.reloadInterval) -}}
{{- $_ := set $m "configMap" (default (dict) $m.configMap) -}}
{{- $_ := set $m "image" (merge (default (dict) $m.image) (dict "reference" "" "pullPolicy" "IfNotPresent")) -}}
{{- $_ := set $m "registry" (merge (default (dict) $m.registry) (dict "reference" "" "allowTags" false "pullSecret" "" "cacheSizeLimit" "256Mi")) -}}
{{- $lkg := default (dict) $m.lastKnownGood -}}
{{- if not (hasKey $lkg "enabled") }}{{ $_ := set $lkg "enabled" true }}{{ end -}}
{{- $_ := set $lkg "name" (default (printf "wasmccm-last-known-good-%s" $name) $lkg.name) -}}
{{- $_ := set $m "lastKnownGood" $lkg -}}
{{- if $lkg.enabled -}}
{{- if hasKey $records $lkg.name -}}
{{- fail (printf "%s.module.lastKnownGood.name %q is %s's too" $at $lkg.name (get $records $lkg.name)) -}}
{{- end -}}
{{- $_ := set $records $lkg.name $name -}}
{{- end -}}
{{- if dig "nodes" "default" false $item }}{{ $nodeDefaults = append $nodeDefaults $name }}{{ end -}}
{{- if dig "loadBalancers" "default" false $item }}{{ $lbDefaults = append $lbDefaults $name }}{{ end -}}
{{- range $class := dig "loadBalancers" "classes" (list) $item -}}
{{- if hasKey $classes $class -}}
{{- fail (printf "%s.loadBalancers.classes: %q is served by %s too" $at $class (get $classes $class)) -}}
{{- end -}}
{{- $_ := set $classes $class $name -}}
{{- end -}}
{{- $i := pick $item "limits" "http" "orphanSweep" "providerConfig" "nodes" "loadBalancers" -}}
{{- $_ := set $i "name" $name -}}
{{- $_ := set $i "at" (printf "%s." $at) -}}
{{- $_ := set $i "suffix" (printf "-%s" $name) -}}
{{- $_ := set $i "module" $m -}}
{{- $_ := set $i "credentials" (merge (default (dict) $item.credentials) (dict "auth" (list) "readable" (list) "existingSecret" "" "values" (dict))) -}}
{{- $_ := set $i "paths" (dict "moduleDir" (printf "/etc/wasmccm/modules/%s" $name) "credentialsDir" (printf "/etc/wasmccm/credentials/%s" $name) "imageCacheDir" (printf "/var/lib/wasmccm/modules/%s" $name) "registryDir" (printf "/etc/wasmccm/registry/%s" $name)) -}}
{{- $_ := set $i "defaultRecord" (printf "wasmccm-last-known-good-%s" $name) -}}
{{- $instances = append $instances $i -}}
{{- end -}}
{{- if gt (len $nodeDefaults) 1 -}}
{{- fail (printf "nodes.default is set on %d modules (%s): at most one" (len $nodeDefaults) (join ", " $nodeDefaults)) -}}
{{- end -}}
{{- if gt (len $lbDefaults) 1 -}}
{{- fail (printf "loadBalancers.default is set on %d modules (%s): at most one" (len $lbDefaults) (join ", " $lbDefaults)) -}}
{{- end -}}
{{- if and .Values.routes.module (not (hasKey $names .Values.routes.module)) -}}
{{- fail (printf "routes.module: no module is named %q" .Values.routes.module) -}}
{{- end -}}
{{- end -}}
{{- range $instances -}}
{{- include "wasmccm.validateModule" (dict "m" .module "at" (printf "%smodule" .at)) -}}
{{- $_ := set . "configMap" (printf "wasm-provider-module%s" .suffix) -}}
{{- $_ := set . "secret" (default (printf "wasm-provider-credentials%s" .suffix) .credentials.existingSecret) -}}
{{- end -}}
{{- toJson $instances -}}
{{- end }}
