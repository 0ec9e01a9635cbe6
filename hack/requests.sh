#!/usr/bin/env bash
# The request-count benchmark (test/scale TestRequests, engine in
# test/scale/requests): the Hetzner Cloud API requests per hour, by
# endpoint, of wasmccm with the TinyGo-built hcloud module against the fake
# API (examples/hcloudfake), on a real kube-apiserver with N Ready Nodes,
# a network with one route per Node and the CCM's default controller
# periods, measured over a steady-state window after every Node is
# initialized and routed. Not a timed test.
#
#   hack/requests.sh                           N = 60, 1000, 5000; 6-minute window
#   WASMCCM_REQUESTS_NODES=60,1000 hack/requests.sh
#   WASMCCM_HCLOUD_CCM=/path/to/hcloud-cloud-controller-manager hack/requests.sh
#                                              the official CCM too, same scenario
#   WASMCCM_REQUESTS_WINDOW=11m hack/requests.sh
#   WASMCCM_REQUESTS_CLOUD=digitalocean WASMCCM_DO_CCM=$(hack/build-do-ccm.sh | tail -1) hack/requests.sh
#                                              DigitalOcean instead: the digitalocean module and
#                                              the official CCM against examples/dofake, no routes
#   WASMCCM_REQUESTS_NODES=5000 WASMCCM_REQUESTS_POD_CIDRS=initialized hack/requests.sh
#                                              pod CIDRs only once every Node is initialized
#   WASMCCM_REQUESTS_NODES=1000 WASMCCM_REQUESTS_SERVICES=200 WASMCCM_REQUESTS_RATE_LIMIT=3600 \
#   WASMCCM_REQUESTS_ROUTES=off WASMCCM_REQUESTS_WINDOW=0 hack/requests.sh
#                                              the rate-limited setup: Nodes initialized and
#                                              200 load balancers under Hetzner's default
#                                              quota, which the fake enforces with 429s
#
# Every setting is documented in test/scale/requests_test.go. Each run
# takes its setup (about a minute at 60 Nodes, several at 5,000) plus the
# window. The tables go to stdout and, as JSON, to $WASMCCM_REQUESTS_OUT
# (default bin/requests.json).
set -euo pipefail
cd "$(dirname "$0")/.."

export WASMCCM_REQUESTS=1 WASMCCM_E2E=1
mkdir -p bin
WASMCCM_REQUESTS_OUT="${WASMCCM_REQUESTS_OUT:-bin/requests.json}"
# go test runs in the package's directory: make the path absolute.
case "$WASMCCM_REQUESTS_OUT" in
/*) ;;
*) WASMCCM_REQUESTS_OUT="$PWD/$WASMCCM_REQUESTS_OUT" ;;
esac
mkdir -p "$(dirname "$WASMCCM_REQUESTS_OUT")"
export WASMCCM_REQUESTS_OUT

echo "revision: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)'), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(go version)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test ./test/scale -run '^TestRequests$' -count=1 -v -timeout 6h
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results: $WASMCCM_REQUESTS_OUT"
