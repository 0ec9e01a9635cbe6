#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that the end-to-end tests run
# (test/e2e/cluster) and caches them by Kubernetes version in
#
#   ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/k8s/<version>/bin/{kube-apiserver,etcd}
#
# Usage:
#   BIN=$(hack/install-e2e-deps.sh | tail -1)
#   WASMCCM_E2E_BIN=$BIN go test ./test/e2e/...
#
# The last line of stdout is the bin directory; progress goes to stderr. When
# both binaries are cached the script only prints that line.
#
# Environment:
#   KUBE_VERSION   Kubernetes version to build (default v1.36.3, the release
#                  matching the k8s.io/* v0.36.3 libraries in go.mod).
#   WASMCCM_CACHE  cache root (default $HOME/.cache/wasmccm).
#
# Why from source: only the Go module proxy is reachable from the machines
# this project builds on, so release tarballs cannot be downloaded. The
# binaries are built from k8s.io/kubernetes and go.etcd.io/etcd/server/v3
# modules instead; a cold build takes about 4 minutes on 2 cores.
set -euo pipefail

# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
[[ "$KUBE_VERSION" =~ ^v1\.[0-9]+\.[0-9]+$ ]] ||
  wasmccm::die "KUBE_VERSION must look like v1.36.3, got '$KUBE_VERSION'"

cache_dir="$(wasmccm::cache_root)/k8s"
final="$cache_dir/$KUBE_VERSION"
bin="$final/bin"

if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || wasmccm::die "go is required on PATH"

# etcd_version GOMOD prints the etcd server version kubernetes is tested
# against, so the apiserver and etcd in the cache are a supported pair.
etcd_version() {
  sed -n 's|^[[:space:]]*go\.etcd\.io/etcd/server/v3 \(v[^[:space:]]*\).*$|\1|p' "$1" | head -1
}

# build_into DIR builds both binaries into DIR/bin from a throwaway helper
# module in DIR/mod, which the caller removes.
build_into() {
  local out=$1 work=$1/mod etcd
  mkdir -p "$work"

  wasmccm::log "resolving k8s.io/kubernetes@$KUBE_VERSION"
  etcd=$(etcd_version "$(wasmccm::module_dir "k8s.io/kubernetes@$KUBE_VERSION")/go.mod")
  [[ -n "$etcd" ]] || wasmccm::die "no go.etcd.io/etcd/server/v3 in the go.mod of k8s.io/kubernetes@$KUBE_VERSION"

  (
    cd "$work"
    # Static and without build paths, as the release builds them and as
    # make test builds the tests, so that what both compile is compiled
    # once (wasmccm::kube_helper_module).
    export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
    wasmccm::kube_helper_module e2e-deps "$KUBE_VERSION" \
      "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" "go.etcd.io/etcd/server/v3@$etcd"

    # One go command, so that each link overlaps the other's compiles. The
    # version the linker flags stamp is Kubernetes'; etcd links none of the
    # packages they name, so it gets only -s -w from them. The module root
    # of go.etcd.io/etcd/server/v3 is etcd's main package, which go build
    # names server.
    wasmccm::log "building kube-apiserver $KUBE_VERSION and etcd $etcd (several minutes on a cold cache)"
    go build -trimpath -ldflags="$(wasmccm::kube_ldflags "$KUBE_VERSION")" -o "$out/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3
    mv "$out/bin/server" "$out/bin/etcd"
  )
}

mkdir -p "$cache_dir"
# Staging lives next to the final directory so that publishing is a rename.
staging=$(mktemp -d "$cache_dir/.build-$KUBE_VERSION.XXXXXX")
wasmccm::remove_on_exit "$staging"

start=$SECONDS
build_into "$staging"
"$staging/bin/kube-apiserver" --version >&2
"$staging/bin/etcd" --version >&2
rm -rf "$staging/mod"
chmod 755 "$staging"

rm -rf "$final" # an incomplete entry, e.g. one binary deleted by hand
wasmccm::publish "$staging" "$final"
wasmccm::log "built in $((SECONDS - start))s into $bin"
echo "$bin"
