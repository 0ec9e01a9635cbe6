package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/conformance"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// traceHostCalls makes cfg report, on w, every log line of the module as
// it comes and, when print is called, every HTTP request it made, with
// the secrets redacted.
func traceHostCalls(cfg *host.Config, secrets []string, w io.Writer) (print func()) {
	ic := conformance.NewInterceptor(secrets)
	cfg.HTTP.Wrap = ic.Wrap
	var mu sync.Mutex
	cfg.Log = func(level abi.LogLevel, msg string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "trace: log %s: %s\n", level, conformance.Redact(msg, secrets))
	}
	return func() {
		for _, ex := range ic.Since(0) {
			fmt.Fprintf(w, "trace: http %s\n", ex)
		}
	}
}
