package host

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestToolHooks checks what wasmccm test and call -trace rely on: Wrap sees
// every request the module makes and can answer in the cloud's place, the
// allowlist still refuses before the wrapper, and Log receives the
// module's log lines.
func TestToolHooks(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
		logs []string
	)
	f := newFixture(t, wasmbuild.Go, func(c *Config) {
		c.HTTP.Wrap = func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.Path)
				mu.Unlock()
				if strings.HasSuffix(r.URL.Path, "/injected") {
					return &http.Response{StatusCode: 503, Header: http.Header{"X-Status": {"injected"}},
						Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
				}
				return next.RoundTrip(r)
			})
		}
		c.Log = func(level abi.LogLevel, msg string) {
			mu.Lock()
			logs = append(logs, msg)
			mu.Unlock()
		}
	})
	ctx := context.Background()
	var meta abi.InstanceMetadata
	if err := f.mod.Call(ctx, abi.ExportInstanceMetadata, &abi.Node{Name: "node-a"}, &meta); err != nil || meta.InstanceType != "m5.large" {
		t.Fatalf("through the wrapper: %+v %v", meta, err)
	}
	if err := f.mod.Call(ctx, abi.ExportInstanceMetadata, &abi.Node{Name: "injected"}, &meta); err == nil || !strings.Contains(err.Error(), "cloud answered injected") {
		t.Fatalf("injected answer: %v", err)
	}
	if err := f.mod.Call(ctx, abi.ExportInstanceMetadata, &abi.Node{Name: "denied-host"}, &meta); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("denied destination: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GET /instances/node-a", "GET /instances/injected"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("the wrapper saw %q, want %q (a denied request never reaches it)", seen, want)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "metadata for node-a") {
		t.Errorf("Log got %q", logs)
	}
}
