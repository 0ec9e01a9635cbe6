#!/usr/bin/env bash
# Builds Helm from its Go module and caches the binary as
#
#   ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/bin/helm-<version>
#
# Usage:
#   HELM=$(hack/install-helm.sh | tail -1)
#   "$HELM" lint charts/wasm-cloud-controller-manager
#
# The last line of stdout is the path of the binary; progress goes to stderr.
# Helm's release binaries live on get.helm.sh, which the machines this
# project builds on cannot reach; the Go module proxy serves the same source.
# With the binary cached the script builds nothing.
#
# Environment:
#   HELM_VERSION  Helm release to build (default v3.22.0).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

version=${HELM_VERSION:-v3.22.0}
bin_dir="$(wasmccm::cache_root)/bin"
helm="$bin_dir/helm-$version"

if [[ ! -x "$helm" ]]; then
  mkdir -p "$bin_dir"
  staging=$(mktemp -d "$bin_dir/.helm-XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  wasmccm::log "building helm $version from the Go module proxy"
  # Outside any module, so that the caller's go.mod stays untouched.
  (cd / && GOWORK=off GOBIN="$staging" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$version") >&2
  mv "$staging/helm" "$helm"
  wasmccm::log "installed $helm"
fi
"$helm" version --short >&2
echo "$helm"
