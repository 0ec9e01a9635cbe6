#!/usr/bin/env bash
# Installs what a real node needs on this machine, next to the control plane
# of hack/install-e2e-deps.sh:
#
#   containerd, ctr,                    built from the Go module proxy, cached in
#   containerd-shim-runc-v2               ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/node/containerd-<version>/bin/
#   runc                                built from the Go module proxy, cached in
#                                         .../node/runc-<version>/bin/
#   iproute2 (ip), util-linux (nsenter) Debian packages: each test Node runs
#                                       in a network namespace of its own
#   kubelet, kube-controller-manager,   built from the Go module proxy at the
#   kube-scheduler                      same version as kube-apiserver, cached in
#                                         .../node/<version>/bin/
#
# Usage:
#   BIN=$(hack/install-node-deps.sh | tail -1)
#
# The last line of stdout is the Kubernetes bin directory; progress goes to
# stderr. When everything is installed the script only prints that line.
#
# Environment:
#   KUBE_VERSION   Kubernetes version to build (default
#                  WASMCCM_KUBE_VERSION of hack/lib.sh, as
#                  hack/install-e2e-deps.sh).
#   CONTAINERD_VERSION, RUNC_VERSION
#                  containerd and runc releases to build (default v2.4.2
#                  and v1.5.3, which package cluster of test/e2e runs).
#   WASMCCM_CACHE  cache root (default $HOME/.cache/wasmccm).
#
# Why these choices:
# - containerd 2 rather than Debian's 1.6: image volumes (a module mounted
#   from an OCI image) need containerd 2.1 or later. Only the module proxy
#   and apt are reachable, so it is built from its module, as upstream's
#   Makefile builds a release (no cgo; the btrfs snapshotter, which needs
#   it, is not used), and cached.
# - runc from its module too, with cgo (its nsenter is C) and seccomp, as a
#   release has it: the manager's Pod asks for the RuntimeDefault seccomp
#   profile, which a runc without seccomp refuses. libpathrs, a Rust
#   library, is left out; runc then uses its Go implementation. crun is not
#   used: Debian's fails on this machine's hybrid cgroup v1/v2 layout.
# - The Kubernetes components are built from k8s.io/kubernetes exactly as
#   kube-apiserver is (about 50 s each with a warm module cache), because
#   release binaries cannot be downloaded.
set -euo pipefail

# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBE_VERSION=$(wasmccm::kube_version)

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.3}
for v in "$CONTAINERD_VERSION" "$RUNC_VERSION"; do
  [[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    wasmccm::die "CONTAINERD_VERSION and RUNC_VERSION must look like v2.4.2, got '$v'"
done
cache_dir="$(wasmccm::cache_root)/node"

# gcc, pkg-config and libseccomp's headers for runc's cgo.
wasmccm::apt_install iproute2 util-linux gcc pkg-config libseccomp-dev

# cached_build NAME DIR BUILD PROGRAM... runs BUILD STAGING unless DIR/bin
# holds every PROGRAM already. BUILD, run in STAGING/mod (for its throwaway
# helper module), puts them into STAGING/bin; STAGING is then published as
# DIR.
cached_build() {
  local name=$1 final=$2 build=$3 p missing=false
  shift 3
  for p in "$@"; do
    [[ -x "$final/bin/$p" ]] || missing=true
  done
  $missing || return 0
  command -v go >/dev/null || wasmccm::die "go is required on PATH"
  mkdir -p "$cache_dir"
  # Staging lives next to the final directory so that publishing is a
  # rename.
  local staging start=$SECONDS
  staging=$(mktemp -d "$cache_dir/.build-$name.XXXXXX")
  wasmccm::remove_on_exit "$staging"
  mkdir "$staging/mod"
  (cd "$staging/mod" && "$build" "$staging")
  rm -rf "$staging/mod"
  chmod 755 "$staging"
  rm -rf "$final" # an incomplete entry, e.g. one binary deleted by hand
  wasmccm::publish "$staging" "$final"
  wasmccm::log "built $name in $((SECONDS - start))s into $final/bin"
}

# build_containerd STAGING builds containerd, ctr and the runc shim as
# upstream's Makefile builds a release, but with one go command and without
# the shim's no_grpc tag, so that what they share is compiled once.
build_containerd() {
  local pkg=github.com/containerd/containerd/v2 c
  local -a pkgs=()
  for c in containerd ctr containerd-shim-runc-v2; do
    pkgs+=("$pkg/cmd/$c@$CONTAINERD_VERSION")
  done
  # Built as the tests are (CGO_ENABLED=0, -trimpath): the packages of
  # the modules containerd and the repository require at one version are
  # compiled once (containerd 2.4.2 requires newer k8s.io, gRPC and
  # OpenTelemetry modules, which it keeps).
  export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
  wasmccm::helper_module containerd "${pkgs[@]}"
  wasmccm::log "building containerd $CONTAINERD_VERSION"
  go build -trimpath -tags urfave_cli_no_docs \
    -ldflags="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg" \
    -o "$1/bin/" "${pkgs[@]%@*}"
  "$1/bin/containerd" --version >&2
  "$1/bin/ctr" --version >&2
}

# build_runc STAGING builds runc (see above for the tags).
build_runc() {
  export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1
  wasmccm::helper_module runc "github.com/opencontainers/runc@$RUNC_VERSION"
  wasmccm::log "building runc $RUNC_VERSION"
  go build -trimpath -tags "seccomp urfave_cli_no_docs" -ldflags="-s -w" \
    -o "$1/bin/runc" github.com/opencontainers/runc
  "$1/bin/runc" --version >&2
}

components=(kubelet kube-controller-manager kube-scheduler)

# build_kube STAGING builds the Kubernetes components.
build_kube() {
  local c
  local -a pkgs=()
  for c in "${components[@]}"; do
    pkgs+=("k8s.io/kubernetes/cmd/$c@$KUBE_VERSION")
  done
  # As hack/install-e2e-deps.sh builds kube-apiserver: what they share is
  # compiled once.
  export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
  wasmccm::kube_helper_module node-deps "$KUBE_VERSION" "${pkgs[@]}"
  # One go command for all of them, so that each link overlaps the
  # compiles of the others.
  wasmccm::log "building ${components[*]} $KUBE_VERSION"
  go build -trimpath -ldflags="$(wasmccm::kube_ldflags "$KUBE_VERSION")" -o "$1/bin/" "${pkgs[@]%@*}"
  for c in "${components[@]}"; do
    "$1/bin/$c" --version >&2
  done
}

cached_build containerd "$cache_dir/containerd-$CONTAINERD_VERSION" build_containerd containerd ctr containerd-shim-runc-v2
cached_build runc "$cache_dir/runc-$RUNC_VERSION" build_runc runc
cached_build kube "$cache_dir/$KUBE_VERSION" build_kube "${components[@]}"
echo "$cache_dir/$KUBE_VERSION/bin"
