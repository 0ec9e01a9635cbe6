#!/usr/bin/env bash
# Everything CI runs (make test), phase by phase, and how long each phase
# took, printed at the end whether the run passed or not, with, for a run
# that failed, each failed test and the first line it printed: gofmt and vet,
# chart, unit tests (the root module, then abi and the SDK, which are
# modules of their own), end-to-end tests, and beside them staticcheck and
# a short run of every fuzz target, and how busy the processors were in
# each. The phase times also go, with the command, the revision, the
# machine, its load and whether the caches were warm, to $TEST_RESULT
# (default bin/make-test.md; docs/benchmarks/results/<UTC date>-make-test.md
# records a run in the docs).
#
# The end-to-end tests (test/..., the full conformance runs of
# test/conformance among them) start their own API servers, clouds and CCMs
# on free loopback ports, test by test, and spend most of their time
# waiting for controllers; so they run side by side, E2E_PARALLEL jobs at
# a time (default 6): each package a job, and each top-level test of
# test/e2e, by far the longest package, a job of its own, plus the skew
# jobs: the tests of skew_tests again, against the API server of
# WASMCCM_KUBE_SKEW_VERSION (hack/lib.sh), one minor behind the libraries
# the manager is built on. Fuzzing and
# staticcheck, which need nothing the jobs build, run beside those jobs
# rather than before or after them, in the processor time their waiting
# leaves.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib.sh
source hack/lib.sh
make=${MAKE:-make}
go=${GO:-go}
e2e_parallel=${E2E_PARALLEL:-6}
# skew_tests run a second time against the older API server, each a job
# TEST@RELEASE. TestCCM is the one that drives every controller of the
# manager through the API server: Nodes initialized and deleted with their
# instances, a LoadBalancer provisioned, routes made; the rest would add
# minutes for little more of the API server's surface.
skew_tests=(TestCCM)
# The phase times go to bin/ unless TEST_RESULT names the file, e.g.
# docs/benchmarks/results/<date>-make-test.md to record a run in the docs.
result=${TEST_RESULT:-bin/make-test.md}

# Whether the run starts warm: the tool cache (TinyGo, the API server, the
# node binaries, built modules) and Go's build cache.
cache=$(wasmccm::cache_root)
caches_at_start="$cache $(du -sh "$cache" 2>/dev/null | cut -f1 || echo absent), Go build cache $(du -sh "$("$go" env GOCACHE)" 2>/dev/null | cut -f1 || echo absent)"
load_at_start=$(wasmccm::load)
revision=$(wasmccm::revision)

# Everything the run prints is also kept, for the summary to say which
# tests failed and why (hack/test-failures.awk).
run_log=$(mktemp)
exec > >(tee -a "$run_log") 2>&1
tee_pid=$!

phases=()
busy=()
e2e_jobs=""
current=""
beside_pid=""
started=$SECONDS
started_ticks=$(wasmccm::cpu_ticks)

# record NAME TIME TICKS adds a phase's line to the summary: its time and
# how busy the processors were since TICKS (wasmccm::cpu_ticks at its
# start).
record() {
  phases+=("$1: $2")
  busy+=("$(wasmccm::busy_since "$3")")
}

summary() {
  local rc=$? i
  [[ -n "$current" ]] && record "$current" "failed after $((SECONDS - phase_start)) s" "$phase_ticks"
  if [[ -n "$beside_pid" ]]; then
    kill -- "-$beside_pid" 2>/dev/null || kill "$beside_pid" 2>/dev/null || true
    # What it printed so far may explain the failure, or show one of its
    # own: a fuzz target's failing input is in it.
    print_beside "stopped; its output so far"
    record "$beside_name" "stopped after $((SECONDS - beside_start)) s" "$beside_ticks"
  fi
  record total "$((SECONDS - started)) s" "$started_ticks"
  echo
  echo "make test, time by phase (and how busy the processors were):"
  for i in "${!phases[@]}"; do
    echo "  ${phases[i]} (${busy[i]} %)"
  done
  local failures=""
  if ((rc != 0)); then
    failures=$(awk -f hack/test-failures.awk "$run_log")
    echo "failed tests, and the first line each printed:"
    echo "${failures:-  none found: see the output of the phase that failed}"
  fi
  mkdir -p "$(dirname "$result")"
  {
    wasmccm::result_header "make test" "E2E_PARALLEL=$e2e_parallel hack/test.sh" "$revision" "$load_at_start" "$(wasmccm::load)"
    echo "Caches at the start: $caches_at_start."
    echo "Outcome: $([[ $rc == 0 ]] && echo passed || echo "failed (exit $rc)")."
    echo
    echo "| phase | seconds | processors busy (%) |"
    echo "|---|---:|---:|"
    local time
    for i in "${!phases[@]}"; do
      time=${phases[i]#*: }
      echo "| ${phases[i]%%: *} | ${time% s} | ${busy[i]} |"
    done
    if [[ -n "$e2e_jobs" ]]; then
      echo
      echo "End-to-end jobs, $e2e_parallel at a time, longest first:"
      echo
      echo "| job | seconds |"
      echo "|---|---:|"
      awk '{ print "| " $2 " | " $1 " |" }' <<<"$e2e_jobs"
    fi
    if [[ -n "$failures" ]]; then
      echo
      echo "Failed tests, and the first line each printed:"
      echo
      echo '```'
      echo "$failures"
      echo '```'
    fi
  } >"$result"
  echo "results: $result"
  # The summary is the last thing printed: let tee write it out before
  # make sees the script end.
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null || true
  rm -f "$run_log"
  return "$rc"
}
trap summary EXIT

phase() {
  current=$1
  shift
  phase_start=$SECONDS
  phase_ticks=$(wasmccm::cpu_ticks)
  "$@"
  record "$current" "$((SECONDS - phase_start)) s" "$phase_ticks"
  current=""
}

# beside starts a phase in the background, in a process group of its own
# (so that a failed run stops all of it), its output kept for
# join_beside to print. One at a time.
beside() {
  beside_name=$1
  shift
  beside_start=$SECONDS
  beside_ticks=$(wasmccm::cpu_ticks)
  beside_log=$(mktemp)
  set -m
  "$@" >"$beside_log" 2>&1 &
  beside_pid=$!
  set +m
}

# print_beside NOTE prints what the phase beside started has printed, under
# a heading with NOTE, and removes it.
print_beside() {
  echo "== $beside_name ($1)"
  cat "$beside_log"
  rm -f "$beside_log"
}

# join_beside waits for the phase beside started, prints its output and
# records its time; it fails when that phase failed.
join_beside() {
  local rc=0
  wait "$beside_pid" || rc=$?
  beside_pid=""
  print_beside "run beside the end-to-end jobs"
  if ((rc != 0)); then
    record "$beside_name" "failed after $((SECONDS - beside_start)) s" "$beside_ticks"
    return "$rc"
  fi
  record "$beside_name (beside e2e)" "$((SECONDS - beside_start)) s" "$beside_ticks"
}

stdlib_modules() {
  local m
  for m in abi modules/sdk; do
    (cd "$m" && "$go" test -count=1 ./...)
  done
}

# recorded_durations prints the end-to-end job times of the newest run
# recorded in docs/benchmarks/results (by the time in its heading), a
# "seconds job" line each.
recorded_durations() {
  local f newest
  newest=$(for f in $(grep -l '^End-to-end jobs' docs/benchmarks/results/*-make-test*.md); do
    echo "$(head -1 "$f") $f"
  done | LC_ALL=C sort | tail -1)
  newest=${newest##* }
  [[ -z "$newest" ]] || sed -n 's/^| \([^ |]*\) | \([0-9][0-9]*\) |$/\2 \1/p' "$newest"
}

# e2e runs the end-to-end tests as jobs, e2e_parallel at a time: each
# package of test/... with tests but test/e2e a job, and each top-level
# test of test/e2e a job, a process of its own. Every test binary and the
# manager binary are built first, the test binaries by one go command,
# which compiles what they share once (with one go test per job, jobs
# started together each compiled it: minutes on a cold cache). Jobs start
# longest first, by the durations of the last run (kept in the cache) or,
# on a machine that has none, of the newest run recorded in
# docs/benchmarks/results (a job not timed yet counts as longest), so that
# no long job starts last; their output follows, in list order. Once the
# binaries are built, fuzzing and staticcheck start beside the jobs, to use
# the processor time they leave idle while they wait for controllers.
e2e() {
  export WASMCCM_E2E=1 WASMCCM_REQUIRE_TINYGO=1 GO="$go"
  local dir job order rc=0 durations="$cache/e2e-durations"
  dir=$(mktemp -d)
  "$go" test -c -o "$dir/bin/" ./test/...
  "$go" build -o "$dir/wasm-cloud-controller-manager" ./cmd/wasm-cloud-controller-manager
  beside "fuzz, staticcheck" "$make" --no-print-directory -j2 --output-sync=target fuzz staticcheck
  {
    "$go" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./test/... |
      sed -e "s|^$PWD/|./|" -e '\|^\./test/e2e$|d'
    sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$/\1/p' test/e2e/*_test.go
    printf "%s@$WASMCCM_KUBE_SKEW_VERSION\n" "${skew_tests[@]}"
  } >"$dir/jobs"
  order=$durations
  if [[ ! -s $order ]]; then
    order=$dir/recorded
    recorded_durations >"$order"
  fi
  awk -v durations="$order" '
    BEGIN { while ((getline line <durations) > 0) { split(line, f, " "); seconds[f[2]] = f[1] } }
    { print ($1 in seconds ? seconds[$1] : 1e9), $1 }' "$dir/jobs" | sort -k1,1nr | cut -d' ' -f2 >"$dir/queue"
  # shellcheck disable=SC2016 # expanded by the inner shell
  WASMCCM_E2E_CCM="$dir/wasm-cloud-controller-manager" xargs -P "$e2e_parallel" -I{} bash -c '
    log="$1/$(tr / _ <<<"${0#./}").log" start=$SECONDS
    case $0 in
    Test*@*) (cd test/e2e && WASMCCM_E2E_KUBE_VERSION=${0#*@} exec "$1/bin/e2e.test" -test.count=1 -test.timeout=40m -test.run="^${0%@*}\$") ;;
    Test*) (cd test/e2e && exec "$1/bin/e2e.test" -test.count=1 -test.timeout=40m -test.run="^$0\$") ;;
    *) (cd "$0" && exec "$1/bin/${0##*/}.test" -test.count=1 -test.timeout=40m) ;;
    esac >"$log" 2>&1
    rc=$?
    echo "$((SECONDS - start)) $0" >>"$1/durations"
    exit "$rc"' {} "$dir" <"$dir/queue" || rc=$?
  while read -r job; do
    echo "== $job"
    cat "$dir/$(tr / _ <<<"${job#./}").log"
  done <"$dir/jobs"
  e2e_jobs=$(sort -k1,1nr "$dir/durations")
  mkdir -p "$cache" && cp "$dir/durations" "$durations"
  rm -rf "$dir"
  return "$rc"
}

phase deps "$make" --no-print-directory -j2 --output-sync=target deps
phase node-deps "$make" --no-print-directory node-deps
# From here on every go command builds as the manager image and the
# Kubernetes components are built (CGO_ENABLED=0, -trimpath; TinyGo, which
# needs cgo, is built by now): one compilation of a package then serves
# the components, vet, the tests and the image suite. Binaries are linked
# without DWARF (-ldflags=-w), which no test reads and which takes a good
# part of each of the many links; a command with -ldflags of its own, such
# as the image's, keeps them.
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath -ldflags=-w"
phase vet "$make" --no-print-directory vet
# The vet phase ran go vet's whole default suite over every package, so go
# test's own vet run, a subset of it, would repeat it package by package
# (more than a minute of processor time on a cold cache).
export GOFLAGS="$GOFLAGS -vet=off"
phase chart "$make" --no-print-directory chart
# shellcheck disable=SC2046 # one argument per package
phase unit env WASMCCM_REQUIRE_TINYGO=1 "$go" test -count=1 $("$go" list ./... | grep -v /test/)
phase unit-stdlib-modules stdlib_modules
phase e2e e2e
join_beside
