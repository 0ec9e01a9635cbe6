#!/usr/bin/env bash
# The scale test (test/scale): a real kube-apiserver and etcd, the simulated
# cloud with 20 ms per request and a 100 req/s (burst 200) rate limit, N
# tainted Nodes created at once, then M LoadBalancer Services; the CCM runs
# the simcloud provider as a Go-built module, a TinyGo-built module and
# compiled in natively, and the figures are printed side by side.
#
#   hack/scale.sh                       N=1000 Nodes, M=200 Services
#   WASMCCM_SCALE_NODES=5000 hack/scale.sh
#   WASMCCM_SCALE_NODE_SYNCS=4 WASMCCM_SCALE_SERVICE_SYNCS=4 \
#   WASMCCM_SCALE_QPS=100 WASMCCM_SCALE_API_BURST=200 hack/scale.sh
#   WASMCCM_SCALE_STATUS_PERIOD=30s WASMCCM_SCALE_REFRESH_WINDOW=1m hack/scale.sh
#
# Every setting is documented in test/scale/scale_test.go. After the
# Services phase, each variant is watched keeping the Nodes current for a
# fixed window, WASMCCM_SCALE_REFRESH_WINDOW (default 6m: one pass of the
# node controller's 5-minute status refresh, WASMCCM_SCALE_STATUS_PERIOD,
# with a minute of margin), and that window's cloud requests by endpoint
# and CCM CPU are reported; the run fails on real errors only (the CCM
# exiting or logging an error, a Node no longer initialized), not on a
# request pattern. WASMCCM_SCALE_REFRESH=0 measures 30 s of idle instead.
# The window makes each variant take six minutes more than its phases. The
# results go to stdout and, as JSON with the date, the command and the
# machine, to $WASMCCM_SCALE_OUT (default bin/scale-<N>-<UTC date and time>.json,
# so that runs do not overwrite each other).
set -euo pipefail
cd "$(dirname "$0")/.."

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
# go test runs in the package's directory: a relative path would be
# resolved from test/scale, where bin/ does not exist.
case "$WASMCCM_SCALE_OUT" in
/*) ;;
*) WASMCCM_SCALE_OUT="$PWD/$WASMCCM_SCALE_OUT" ;;
esac
mkdir -p "$(dirname "$WASMCCM_SCALE_OUT")"
export WASMCCM_SCALE_OUT

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test ./test/scale -run '^TestScale$' -count=1 -v -timeout 6h
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results: $WASMCCM_SCALE_OUT"
