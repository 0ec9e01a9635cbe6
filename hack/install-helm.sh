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
# Why this version and this way: the default is the Helm release built on
# the Kubernetes libraries of the repository's minor version (k8s.io/*
# v0.37: v3.22.0 requires v0.37.0, which wasmccm::helper_module raises to
# the repository's patch release). It is built as the Kubernetes components are
# (wasmccm::helper_module, CGO_ENABLED=0, -trimpath), so the client-go and
# apimachinery packages it shares with them and with the tests are
# compiled once: a Helm on newer libraries would compile them again, and
# one built without -trimpath even the standard library. The linker flags
# are those of Helm's Makefile for a tagged release.
#
# Environment:
#   HELM_VERSION  Helm release to build (default v3.22.0).
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

version=${HELM_VERSION:-v3.22.0}
[[ "$version" =~ ^v3\.[0-9]+\.[0-9]+$ ]] ||
  wasmccm::die "HELM_VERSION must look like v3.22.0, got '$version'"
bin_dir="$(wasmccm::cache_root)/bin"
helm="$bin_dir/helm-$version"

if [[ ! -x "$helm" ]]; then
  command -v go >/dev/null || wasmccm::die "go is required on PATH"
  mkdir -p "$bin_dir"
  staging=$(mktemp -d "$bin_dir/.helm-XXXXXX")
  wasmccm::remove_on_exit "$staging"
  mkdir "$staging/mod"
  (
    cd "$staging/mod"
    export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
    wasmccm::helper_module helm "helm.sh/helm/v3/cmd/helm@$version"
    # The Kubernetes version Helm lints and renders against by default,
    # from its client-go, as its Makefile derives it.
    client_go=$(go list -m -f '{{.Version}}' k8s.io/client-go)
    kube_minor=${client_go#v0.}
    kube_minor=${kube_minor%%.*}
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
    for pkg in pkg/lint/rules pkg/chartutil; do
      ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$kube_minor"
    done
    wasmccm::log "building helm $version from the Go module proxy"
    go build -trimpath -ldflags="$ldflags" -o "$staging/helm" helm.sh/helm/v3/cmd/helm
  ) >&2
  mv "$staging/helm" "$helm"
  wasmccm::log "installed $helm"
fi
"$helm" version --short >&2
echo "$helm"
