#!/usr/bin/env bash
# Installs what a real node needs on this machine, next to the control plane
# of hack/install-e2e-deps.sh:
#
#   containerd and runc                 Debian packages
#   iproute2 (ip), util-linux (nsenter) Debian packages: each test Node runs
#                                       in a network namespace of its own
#   kubelet, kube-controller-manager,   built from the Go module proxy at the
#   kube-scheduler                      same version as kube-apiserver, cached in
#     ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/node/<version>/bin/
#
# Usage:
#   BIN=$(hack/install-node-deps.sh | tail -1)
#
# The last line of stdout is the bin directory; progress goes to stderr. When
# everything is installed the script only prints that line.
#
# Environment:
#   KUBE_VERSION   Kubernetes version to build (default
#                  WASMCCM_KUBE_VERSION of hack/lib.sh, as
#                  hack/install-e2e-deps.sh).
#   WASMCCM_CACHE  cache root (default $HOME/.cache/wasmccm).
#
# Why these choices:
# - containerd and runc come from Debian (containerd 1.6.20 on bookworm):
#   only the module proxy and apt are reachable, and containerd 2.x would be
#   a long module build. Debian's crun is not used: it fails on this
#   machine's hybrid cgroup v1/v2 layout, where runc works.
# - The Kubernetes components are built from k8s.io/kubernetes exactly as
#   kube-apiserver is (about 50 s each with a warm module cache), because
#   release binaries cannot be downloaded.
set -euo pipefail

# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBE_VERSION=$(wasmccm::kube_version)

components=(kubelet kube-controller-manager kube-scheduler)
cache_dir="$(wasmccm::cache_root)/node"
final="$cache_dir/$KUBE_VERSION"
bin="$final/bin"

wasmccm::apt_install containerd runc iproute2 util-linux

cached=true
for c in "${components[@]}"; do
  [[ -x "$bin/$c" ]] || cached=false
done
if $cached; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || wasmccm::die "go is required on PATH"

# build_into DIR builds the components into DIR/bin from a throwaway helper
# module in DIR/mod, which the caller removes.
build_into() {
  local out=$1 work=$1/mod
  mkdir -p "$work"
  local -a pkgs=()
  for c in "${components[@]}"; do
    pkgs+=("k8s.io/kubernetes/cmd/$c@$KUBE_VERSION")
  done
  (
    cd "$work"
    # As hack/install-e2e-deps.sh builds kube-apiserver: what they share
    # is compiled once.
    export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
    wasmccm::kube_helper_module node-deps "$KUBE_VERSION" "${pkgs[@]}"
    # One go command for all of them, so that each link overlaps the
    # compiles of the others.
    wasmccm::log "building ${components[*]} $KUBE_VERSION"
    go build -trimpath -ldflags="$(wasmccm::kube_ldflags "$KUBE_VERSION")" -o "$out/bin/" "${pkgs[@]%@*}"
  )
}

mkdir -p "$cache_dir"
# Staging lives next to the final directory so that publishing is a rename.
staging=$(mktemp -d "$cache_dir/.build-$KUBE_VERSION.XXXXXX")
wasmccm::remove_on_exit "$staging"

start=$SECONDS
build_into "$staging"
for c in "${components[@]}"; do
  "$staging/bin/$c" --version >&2
done
rm -rf "$staging/mod"
chmod 755 "$staging"

rm -rf "$final" # an incomplete entry, e.g. one binary deleted by hand
wasmccm::publish "$staging" "$final"
wasmccm::log "built in $((SECONDS - start))s into $bin"
echo "$bin"
