package host

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// seriesOf counts the series of a metric family that belong to module.
func seriesOf(t *testing.T, family, module string) int {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "module" && l.GetValue() == module {
					n++
				}
			}
		}
	}
	return n
}

// TestHTTPFloodIsBounded: a module making requests to ever new host names
// that are not allowed leaves the host with a fixed number of metric
// series and no heap to show for them. Before labels were taken from the
// allowlist, 500,000 such requests made 500,000 series and 353 MiB of heap.
func TestHTTPFloodIsBounded(t *testing.T) {
	// 50,000 keeps the test at seconds; WASMCCM_HTTP_FLOOD=500000 runs the
	// figure of the report above.
	requests := 50_000
	if n, err := strconv.Atoi(os.Getenv("WASMCCM_HTTP_FLOOD")); err == nil {
		requests = n
	}
	tcs := toolchains(t)
	f := newFixture(t, tcs[len(tcs)-1], nil) // TinyGo when present: 4x the requests per second
	call := func(name string) {
		t.Helper()
		if err := f.mod.Call(context.Background(), abi.ExportInstanceMetadata, &abi.Node{Name: name}, new(abi.InstanceMetadata)); err != nil {
			t.Fatal(err)
		}
	}
	call("http-flood-10") // warm up: instance, metric series, allowed origin
	before := heapAlloc()
	call("http-flood-" + strconv.Itoa(requests))
	grown := int64(heapAlloc()) - int64(before)
	series := seriesOf(t, "wasmccm_host_http_requests_total", f.mod.Name())
	t.Logf("%d denied requests to distinct hosts: %d series, heap %+d KiB", requests, series, grown>>10)
	// The allowed origin with code 200, and denied.
	if series != 2 {
		t.Errorf("wasmccm_host_http_requests_total has %d series for the module, want 2", series)
	}
	if grown > 4<<20 {
		t.Errorf("heap grew by %d KiB over %d requests", grown>>10, requests)
	}
}

func TestLogFloodIsRateLimited(t *testing.T) {
	f := newFixture(t, wasmbuild.Go, nil)
	before, _ := testutil.GetCounterMetricValue(logDropped.WithLabelValues(f.mod.Name()))
	start := time.Now()
	f.mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "log-flood"}, new(abi.Bool))
	after, _ := testutil.GetCounterMetricValue(logDropped.WithLabelValues(f.mod.Name()))
	if dropped := after - before; dropped < 9000 {
		t.Fatalf("dropped %v of 10000 flood lines", dropped)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("flooding call took %s", elapsed)
	}
}
