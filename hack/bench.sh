#!/usr/bin/env bash
# Benchmarks (test/bench): every export of the simcloud provider run
# natively, as a Go-built module and as a TinyGo-built module, with the
# cloud's API answered in-process; the ABI's own cost; compile, start-up
# and instantiation; pool throughput; the guest's work part by part. The
# raw `go test -bench` output goes to $BENCH_OUT (default bin/bench.txt),
# then test/bench/report prints it as tables, which also go, with the
# command, the revision and the machine, to a dated result file,
# $BENCH_RESULT (default docs/benchmarks/results/<UTC date>-bench-<revision>.md),
# for BENCHMARKS.md to link; the guest memory figures of runtime/host's
# BenchmarkGuestMemory go to bin/bench-memory.txt.
#
#   hack/bench.sh                      all benchmarks, 5 runs each
#   COUNT=10 BENCH='Call|ABI' hack/bench.sh
#   hack/bench.sh -report bin/bench.txt    tables from an earlier run
#
# TinyGo variants are skipped when TinyGo is not installed
# (hack/install-tinygo.sh). Results vary with the machine's load: the load
# average is printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
source hack/lib.sh

if [[ "${1:-}" == "-report" ]]; then
  exec go run ./test/bench/report "${2:-bin/bench.txt}"
fi

COUNT="${COUNT:-5}"
BENCH="${BENCH:-.}"
BENCHTIME="${BENCHTIME:-1s}"
mkdir -p bin
out="${BENCH_OUT:-bin/bench.txt}"

revision="$(wasmccm::revision)"
before="$(wasmccm::load)"
echo "machine: $(wasmccm::machine)"
echo "load average before: $before"
status=0
go test ./test/bench -run '^$' -bench "$BENCH" -benchmem -count="$COUNT" -benchtime="$BENCHTIME" -timeout 3h | tee "$out" || status=$?
# Guest memory (runtime/host): four instances grown to their 128 MiB cap
# by eight callers, then recycled; peak and settled RSS of the process, so
# each allocator runs alone in its own process.
if [[ "$BENCH" == "." || "$BENCH" == *GuestMemory* ]]; then
  : >"${out%.txt}-memory.txt"
  for allocator in mmap go-heap; do
    go test ./runtime/host -run '^$' -bench "^BenchmarkGuestMemory\$/^allocator=$allocator\$" -benchtime=1x -count=1 |
      grep '^Benchmark' | tee -a "${out%.txt}-memory.txt" || status=$?
  done
fi
after="$(wasmccm::load)"
echo "load average after: $after"
echo
result="${BENCH_RESULT:-$(wasmccm::result_path bench)}"
mkdir -p "$(dirname "$result")"
{
  wasmccm::result_header "Micro-benchmarks" "COUNT=$COUNT BENCH='$BENCH' BENCHTIME=$BENCHTIME hack/bench.sh" "$revision" "$before" "$after"
  go run ./test/bench/report "$out"
} | tee "$result"
echo "results: $result"
exit "$status"
