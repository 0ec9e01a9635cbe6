#!/usr/bin/env bash
# The local demo: installs what it needs (cached after the first run), builds
# the binaries, then runs examples/demo, which starts etcd, kube-apiserver,
# the simulated cloud and the CCM with the simcloud module, registers tainted
# Nodes and a LoadBalancer Service, and prints the result.
#
#   hack/demo.sh            run, print, stop
#   hack/demo.sh -keep      leave everything running until Ctrl-C
#   hack/demo.sh -toolchain go   use the standard-Go-built module
#   hack/demo.sh -provider hcloud   the Hetzner Cloud module against a fake Hetzner API
#   hack/demo.sh -provider aws      the Amazon EC2 module against a fake EC2 and ELB API
#   hack/demo.sh -provider digitalocean   the DigitalOcean module against a fake DigitalOcean API
#   hack/demo.sh -provider hybrid   the simcloud and Hetzner Cloud modules in one CCM, each serving its own cloud (make demo-hybrid)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh

# TinyGo's install is mostly Debian downloads: it overlaps the apiserver's
# build, which is what a cold demo waits for.
hack/install-tinygo.sh >/dev/null &
tinygo=$!
hack/install-e2e-deps.sh >/dev/null
wait "$tinygo"
wasmccm::log "building wasm-cloud-controller-manager and simcloud"
go build -o bin/ ./cmd/wasm-cloud-controller-manager ./cmd/simcloud
exec go run ./examples/demo -bin bin "$@"
