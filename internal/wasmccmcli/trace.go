package wasmccmcli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/conformance"
	"github.com/wasmccm/wasmccm/runtime/host"
)

// callRecorder records the module's HTTP requests through the suite's
// interceptor, credentials redacted, so that call can tell what each call
// cost and, when tracing, show each request and log line.
type callRecorder struct {
	ic    *conformance.Interceptor
	trace bool
	w     io.Writer
}

// recordCalls makes cfg's HTTP go through a new recorder; with trace, cfg
// also reports every log line of the module on w as it comes.
func recordCalls(cfg *host.Config, secrets []string, trace bool, w io.Writer) *callRecorder {
	r := &callRecorder{ic: conformance.NewInterceptor(secrets), trace: trace, w: w}
	cfg.HTTP.Wrap = r.ic.Wrap
	if trace {
		var mu sync.Mutex
		cfg.Log = func(level abi.LogLevel, msg string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "trace: log %s: %s\n", level, r.ic.Redact(msg))
		}
	}
	return r
}

// mark returns the position of the next request, for report.
func (r *callRecorder) mark() int { return r.ic.Mark() }

// report prints, on one line, what the call named by call cost: the
// requests made since mark and the time it took; with trace, each request
// (with a query API's Action) and its body, credentials redacted, before
// it.
func (r *callRecorder) report(call string, mark int, took time.Duration) {
	requests := r.ic.Since(mark)
	if r.trace {
		for _, ex := range requests {
			// A query API's requests differ only in their bodies.
			fmt.Fprintf(r.w, "trace: http %s\n", ex)
			if ex.RequestBody != "" {
				fmt.Fprintf(r.w, "trace:   request body: %s\n", ex.RequestBody)
			}
		}
	}
	noun := "requests"
	if len(requests) == 1 {
		noun = "request"
	}
	fmt.Fprintf(r.w, "%s: %d %s, %s\n", call, len(requests), noun, took.Round(time.Microsecond))
}
