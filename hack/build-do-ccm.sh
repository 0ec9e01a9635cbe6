#!/usr/bin/env bash
# Builds the official digitalocean-cloud-controller-manager, for the
# differential and request-count comparisons of modules/digitalocean
# (test/e2e/digitalocean_diff_test.go), and prints the binary's path.
# The source is a git repository (a clone, or a bare mirror) whose HEAD is
# built offline from its vendor directory; the binary is cached per commit
# under $WASMCCM_CACHE/bin, so it is built once.
#
#   hack/build-do-ccm.sh [REPO]
#       REPO defaults to $WASMCCM_DO_CCM_SRC, else
#       /work/.mirror/digitalocean+digitalocean-cloud-controller-manager/repo
#   WASMCCM_DO_CCM=$(hack/build-do-ccm.sh | tail -1) go test ./test/e2e -run TestDigitalOceanDifferential ...
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh

repo=${1:-${WASMCCM_DO_CCM_SRC:-/work/.mirror/digitalocean+digitalocean-cloud-controller-manager/repo}}
[[ -d "$repo" ]] || wasmccm::die "no repository at $repo (pass one, or set WASMCCM_DO_CCM_SRC)"
commit=$(git -C "$repo" rev-parse HEAD)
bin="$(wasmccm::cache_root)/bin"
out="$bin/digitalocean-cloud-controller-manager-${commit:0:12}"
if [[ -x "$out" ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$bin"
src=$(mktemp -d "$bin/.do-ccm-src.XXXXXX")
wasmccm::remove_on_exit "$src"
wasmccm::log "building digitalocean-cloud-controller-manager at ${commit:0:12} (vendored, offline)"
git -C "$repo" archive "$commit" | tar -x -C "$src"
# As its Makefile builds it, without a container.
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local \
  go build -buildvcs=false -trimpath -ldflags "-s -w -X github.com/digitalocean/digitalocean-cloud-controller-manager/cloud-controller-manager/do.version=${commit:0:12}" -o "$src/ccm" \
  ./cloud-controller-manager/cmd/digitalocean-cloud-controller-manager)
mv "$src/ccm" "$out"
echo "$out"
