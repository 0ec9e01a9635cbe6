#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that the end-to-end tests run
# (test/e2e/cluster) and caches them by Kubernetes version in
#
#   ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/k8s/<version>/bin/{kube-apiserver,etcd}
#
# for KUBE_VERSION and for each release of KUBE_SKEW_VERSIONS, the older
# API servers that the end-to-end skew job runs the manager against
# (WASMCCM_E2E_KUBE_VERSION=<version>, test/e2e/cluster).
#
# Usage:
#   BIN=$(hack/install-e2e-deps.sh | tail -1)
#   WASMCCM_E2E_BIN=$BIN go test ./test/e2e/...
#
# The last line of stdout is the bin directory of KUBE_VERSION; progress goes
# to stderr. When every binary is cached the script only prints that line.
#
# Environment:
#   KUBE_VERSION        Kubernetes version to build (default
#                       WASMCCM_KUBE_VERSION of hack/lib.sh, the release
#                       matching the k8s.io/* libraries in go.mod).
#   KUBE_SKEW_VERSIONS  older releases to build too, separated by spaces
#                       (default WASMCCM_KUBE_SKEW_VERSION of hack/lib.sh;
#                       empty builds none).
#   WASMCCM_CACHE       cache root (default $HOME/.cache/wasmccm).
#
# Why from source: only the Go module proxy is reachable from the machines
# this project builds on, so release tarballs cannot be downloaded. The
# binaries are built from k8s.io/kubernetes and go.etcd.io/etcd/server/v3
# modules instead; a cold build takes minutes on 2 cores
# (docs/benchmarks/notes/2026-11-28-kubernetes-1.37.md has the figures).
set -euo pipefail

# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBE_VERSION=$(wasmccm::kube_version)
read -r -a skew_versions <<<"${KUBE_SKEW_VERSIONS-$WASMCCM_KUBE_SKEW_VERSION}"
for v in "${skew_versions[@]}"; do
  wasmccm::kube_version "$v" >/dev/null
done

cache_dir="$(wasmccm::cache_root)/k8s"

# cached VERSION tells whether both binaries of VERSION are in the cache.
cached() {
  [[ -x "$cache_dir/$1/bin/kube-apiserver" && -x "$cache_dir/$1/bin/etcd" ]]
}

# etcd_version GOMOD prints the etcd server version to build: the one
# kubernetes is tested against (its go.mod, GOMOD), so the apiserver and
# etcd in the cache are a supported pair, or the repository's etcd API
# version where that is newer. The helper module requires the latter
# (wasmccm::resolve_shared), and an older etcd server does not build on a
# newer etcd API module: for an older release (KUBE_SKEW_VERSIONS) this
# is the etcd of the current one, the pair a cluster runs while its
# control plane is being upgraded.
etcd_version() {
  local kube repo
  kube=$(sed -n 's|^[[:space:]]*go\.etcd\.io/etcd/server/v3 \(v[^[:space:]]*\).*$|\1|p' "$1" | head -1)
  [[ -n "$kube" ]] || return 0
  repo=$(cd "$WASMCCM_REPO" && GOFLAGS= go list -m -f '{{.Version}}' go.etcd.io/etcd/api/v3) ||
    wasmccm::die "could not read the repository's go.etcd.io/etcd/api/v3 version"
  printf '%s\n' "$kube" "$repo" | sort -V | tail -1
}

# build_into VERSION DIR builds both binaries of VERSION into DIR/bin from a
# throwaway helper module in DIR/mod, which the caller removes.
build_into() {
  local version=$1 out=$2 work=$2/mod etcd
  mkdir -p "$work"

  wasmccm::log "resolving k8s.io/kubernetes@$version"
  etcd=$(etcd_version "$(wasmccm::module_dir "k8s.io/kubernetes@$version")/go.mod")
  [[ -n "$etcd" ]] || wasmccm::die "no go.etcd.io/etcd/server/v3 in the go.mod of k8s.io/kubernetes@$version"

  (
    cd "$work"
    # Static and without build paths, as the release builds them and as
    # make test builds the tests, so that what both compile is compiled
    # once (wasmccm::kube_helper_module).
    export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
    wasmccm::kube_helper_module e2e-deps "$version" \
      "k8s.io/kubernetes/cmd/kube-apiserver@$version" "go.etcd.io/etcd/server/v3@$etcd"

    # One go command, so that each link overlaps the other's compiles. The
    # version the linker flags stamp is Kubernetes'; etcd links none of the
    # packages they name, so it gets only -s -w from them. The module root
    # of go.etcd.io/etcd/server/v3 is etcd's main package, which go build
    # names server.
    wasmccm::log "building kube-apiserver $version and etcd $etcd (several minutes on a cold cache)"
    go build -trimpath -ldflags="$(wasmccm::kube_ldflags "$version")" -o "$out/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3
    mv "$out/bin/server" "$out/bin/etcd"
  )
}

# install_release VERSION builds and publishes VERSION's binaries unless cached.
install_release() {
  local version=$1 final=$cache_dir/$1 staging start=$SECONDS
  cached "$version" && return 0
  command -v go >/dev/null || wasmccm::die "go is required on PATH"
  mkdir -p "$cache_dir"
  # Staging lives next to the final directory so that publishing is a rename.
  staging=$(mktemp -d "$cache_dir/.build-$version.XXXXXX")
  wasmccm::remove_on_exit "$staging"
  build_into "$version" "$staging"
  "$staging/bin/kube-apiserver" --version >&2
  "$staging/bin/etcd" --version >&2
  rm -rf "$staging/mod"
  chmod 755 "$staging"
  rm -rf "$final" # an incomplete entry, e.g. one binary deleted by hand
  wasmccm::publish "$staging" "$final"
  wasmccm::log "built in $((SECONDS - start))s into $final/bin"
}

for v in "$KUBE_VERSION" "${skew_versions[@]}"; do
  install_release "$v"
done
echo "$cache_dir/$KUBE_VERSION/bin"
