// Package bench measures the cost of running a provider as a WebAssembly
// module against running the same provider code natively.
//
// Every benchmark is in bench_test.go and runs with
//
//	go test ./test/bench -run '^$' -bench . -benchmem
//
// hack/bench.sh runs them several times and prints the tables of
// BENCHMARKS.md with the program in ./report.
//
// The simulated cloud's HTTP API is answered in-process: the host's
// HTTP.Transport (and the native Host's Transport) is a RoundTripper that
// calls the cloud's handler directly, so no socket, TLS or kernel time is
// counted and what remains is the provider, the ABI and the cloud's handler.
//
// Variants:
//
//   - native: modules/simcloud called directly with an sdk/native Host;
//   - wasm-go: the same code as modules/simcloud/module built with standard
//     Go (GOOS=wasip1), called through runtime/host;
//   - wasm-tinygo: the same module built with TinyGo (skipped when TinyGo is
//     not installed).
//
// Every benchmark reports, besides ns/op and the allocations of -benchmem,
// the median and 99th percentile of the per-iteration latencies (p50-ns,
// p99-ns), recorded one by one.
package bench
