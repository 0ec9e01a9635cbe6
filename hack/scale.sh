#!/usr/bin/env bash
# The scale test (test/scale): a real kube-apiserver and etcd, the simulated
# cloud with 20 ms per request and a 100 req/s (burst 200) rate limit, N
# tainted Nodes created at once, then M LoadBalancer Services; the CCM runs
# the simcloud provider as a Go-built module, a TinyGo-built module and
# compiled in natively, and the figures are printed side by side.
#
#   hack/scale.sh                       N=1000 Nodes, M=200 Services
#   WASMCCM_SCALE_NODES=5000 hack/scale.sh   (make scale N=5000)
#   WASMCCM_SCALE_NODE_SYNCS=4 WASMCCM_SCALE_SERVICE_SYNCS=4 \
#   WASMCCM_SCALE_QPS=100 WASMCCM_SCALE_API_BURST=200 hack/scale.sh
#   WASMCCM_SCALE_STATUS_PERIOD=30s WASMCCM_SCALE_REFRESH_WINDOW=1m hack/scale.sh
#   WASMCCM_SCALE_PROFILE=bin/profiles hack/scale.sh   CPU profiles of each CCM
#
# Every setting is documented in test/scale/scale_test.go. After the
# Services phase, each variant is watched keeping the Nodes current for a
# fixed window, WASMCCM_SCALE_REFRESH_WINDOW (default 6m: one pass of the
# node controller's 5-minute status refresh, WASMCCM_SCALE_STATUS_PERIOD,
# with a minute of margin), and that window's cloud requests by endpoint
# and CCM CPU are reported; the window ends by time, and the run fails on
# real errors only (the CCM exiting or logging an error, a Node no longer
# initialized), not on a request pattern. WASMCCM_SCALE_REFRESH=0 measures
# 30 s of idle instead. The window makes each variant take six minutes more
# than its phases: at the defaults a run takes about half an hour.
#
# The tables go to stdout and, with the command, the revision, the machine
# and the load, to a dated result file, $WASMCCM_SCALE_RESULT (default
# docs/benchmarks/results/<UTC date>-scale-<N>-<revision>.md), for the benchmark docs
# to link; the raw figures go, as JSON, to $WASMCCM_SCALE_OUT (default
# bin/scale-<N>-<UTC date and time>.json, so that runs do not overwrite
# each other).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
source hack/lib.sh

# The command as given, with the settings the caller chose, for the record.
command=hack/scale.sh
for name in $(compgen -e | grep '^WASMCCM_SCALE_' | sort -r); do
	[ "$name" = WASMCCM_SCALE_COMMAND ] || command="$name=$(printf %q "${!name}") $command"
done
export WASMCCM_SCALE_COMMAND="$command"

export WASMCCM_SCALE=1 WASMCCM_E2E=1
export WASMCCM_SCALE_NODES="${WASMCCM_SCALE_NODES:-1000}"
export WASMCCM_SCALE_SERVICES="${WASMCCM_SCALE_SERVICES:-200}"
export WASMCCM_SCALE_REFRESH="${WASMCCM_SCALE_REFRESH:-1}"
mkdir -p bin
WASMCCM_SCALE_OUT="${WASMCCM_SCALE_OUT:-bin/scale-${WASMCCM_SCALE_NODES}-$(date -u +%Y%m%dT%H%M%SZ).json}"
result="${WASMCCM_SCALE_RESULT:-$(wasmccm::result_path "scale-$WASMCCM_SCALE_NODES")}"
tables="$(mktemp)"
wasmccm::remove_on_exit "$tables"
# go test runs in the package's directory: a relative path would be
# resolved from test/scale, where bin/ does not exist.
absolute() {
	case "$1" in
	/*) echo "$1" ;;
	*) echo "$PWD/$1" ;;
	esac
}
export WASMCCM_SCALE_OUT WASMCCM_SCALE_TABLES="$tables"
WASMCCM_SCALE_OUT="$(absolute "$WASMCCM_SCALE_OUT")"
if [[ -n "${WASMCCM_SCALE_PROFILE:-}" ]]; then
	WASMCCM_SCALE_PROFILE="$(absolute "$WASMCCM_SCALE_PROFILE")"
	export WASMCCM_SCALE_PROFILE
fi
mkdir -p "$(dirname "$WASMCCM_SCALE_OUT")"

revision="$(wasmccm::revision)"
before="$(wasmccm::load)"
echo "machine: $(wasmccm::machine)"
echo "load average before: $before"
go test ./test/scale -run '^TestScale$' -count=1 -v -timeout 6h
after="$(wasmccm::load)"
echo "load average after: $after"
mkdir -p "$(dirname "$result")"
{
	wasmccm::result_header "Scale test, $WASMCCM_SCALE_NODES Nodes" "$command" "$revision" "$before" "$after"
	cat "$tables"
} >"$result"
echo "results: $result, $WASMCCM_SCALE_OUT"
