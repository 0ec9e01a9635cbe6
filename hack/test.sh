#!/usr/bin/env bash
# Everything CI runs (make test), phase by phase, and how long each phase
# took, printed at the end whether the run passed or not: lint, chart,
# unit tests (the root module, then abi and the SDK, which are modules of
# their own), end-to-end tests and a short run of every fuzz target.
#
# End-to-end packages each start an API server; they run one at a time
# (-p 1) so that their timing stays honest on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
go=${GO:-go}

phases=()
current=""
started=$SECONDS
summary() {
  local rc=$?
  [[ -n "$current" ]] && phases+=("$current: failed after $((SECONDS - phase_start)) s")
  echo
  echo "make test, time by phase:"
  printf '  %s\n' "${phases[@]}"
  echo "  total: $((SECONDS - started)) s"
  return "$rc"
}
trap summary EXIT

phase() {
  current=$1
  shift
  phase_start=$SECONDS
  "$@"
  phases+=("$current: $((SECONDS - phase_start)) s")
  current=""
}

stdlib_modules() {
  local m
  for m in abi modules/sdk; do
    (cd "$m" && "$go" test -count=1 ./...)
  done
}

phase deps "$make" --no-print-directory deps
phase node-deps "$make" --no-print-directory node-deps
phase lint "$make" --no-print-directory lint
phase chart "$make" --no-print-directory chart
# shellcheck disable=SC2046 # one argument per package
phase unit env WASMCCM_REQUIRE_TINYGO=1 "$go" test -count=1 $("$go" list ./... | grep -v /test/)
phase unit-stdlib-modules stdlib_modules
phase e2e env WASMCCM_E2E=1 WASMCCM_REQUIRE_TINYGO=1 "$go" test -count=1 -p 1 -timeout 40m ./test/...
phase fuzz "$make" --no-print-directory fuzz
