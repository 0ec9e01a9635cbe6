package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/events"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/modulefile"
)

func TestRateLimitsConfig(t *testing.T) {
	const allowed = "module: {path: x}\nhttp:\n  allowedOrigins: [\"https://api.hetzner.cloud\", \"http://127.0.0.1:8780\"]\n"
	cases := []struct {
		name, yaml, wantErr string
	}{
		{"per hour and per second", allowed + "  rateLimits:\n  - {origin: \"https://api.hetzner.cloud\", perHour: 3600, burst: 100}\n  - {origin: \"http://127.0.0.1:8780/\", perSecond: 5}\n", ""},
		{"origin not allowed", allowed + "  rateLimits: [{origin: \"https://api.other.cloud\", perHour: 3600}]\n", "http: rateLimits[0]: origin https://api.other.cloud:443 is not in http.allowedOrigins"},
		{"no rate", allowed + "  rateLimits: [{origin: \"https://api.hetzner.cloud\", burst: 5}]\n", "set exactly one of perHour and perSecond"},
		{"both rates", allowed + "  rateLimits: [{origin: \"https://api.hetzner.cloud\", perHour: 3600, perSecond: 1}]\n", "set exactly one of perHour and perSecond"},
		{"fractional rate", allowed + "  rateLimits: [{origin: \"https://api.hetzner.cloud\", perSecond: 0.5}]\n", "cannot unmarshal number 0.5"},
		{"origin twice", allowed + "  rateLimits: [{origin: \"https://api.hetzner.cloud\", perHour: 1}, {origin: \"https://API.hetzner.cloud:443\", perHour: 2}]\n", "is listed twice"},
		{"unknown field", allowed + "  rateLimits: [{origin: \"https://api.hetzner.cloud\", perMinute: 60}]\n", `unknown field "perMinute"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(strings.NewReader(tc.yaml))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.HTTP.RateLimits) != 2 || cfg.HTTP.RateLimits[0].PerHour != 3600 || cfg.HTTP.RateLimits[0].Burst != 100 {
					t.Fatalf("rateLimits = %+v", cfg.HTTP.RateLimits)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	// A bad origin list is reported as such, not again by the rate limits.
	_, err := parseConfig(strings.NewReader("module: {path: x}\nhttp: {allowedOrigins: [\"https://a/p\"], rateLimits: [{origin: \"https://a\", perHour: 1}]}\n"))
	if err == nil || !strings.Contains(err.Error(), "only scheme://host[:port]") || strings.Contains(err.Error(), "rateLimits") {
		t.Fatalf("err = %v, want the bad origin reported, by http.allowedOrigins only", err)
	}
}

// TestThrottledCallIsRetryError runs the simcloud module, whose SDK rest
// client maps a 429 with Retry-After to sdk.RetryAfter, under a budget of
// one request an hour. The first call spends it on the instance listing;
// asked about a Node the listing lacks, the module asks the cloud, and the
// host answers that request itself: the controllers get api.RetryError,
// never "gone", the cloud sees one request, and the Pod one Event. A
// module loaded later, as a reload loads it, spends the same budget: in
// shadow its call's answer is withheld, promoted it gets RetryAfter.
func TestThrottledCallIsRetryError(t *testing.T) {
	cloud := simcloud.New(simcloud.Options{Token: "t"})
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		cloud.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	creds := t.TempDir()
	lifecycletest.WriteFile(t, filepath.Join(creds, "token"), []byte("t"))
	if _, err := cloud.AddInstance(simcloud.Instance{Name: "node-0", Zone: "sim-1a", Region: "sim-1", State: "running"}); err != nil {
		t.Fatal(err)
	}
	wasm, _ := lifecycletest.SimcloudModule(t, "simcloud")
	c := newCloud(t, wasm, func(cfg *cloudconfig.Config) {
		cfg.HTTP.AllowedOrigins = []string{srv.URL}
		cfg.HTTP.RateLimits = []cloudconfig.RateLimit{{Origin: srv.URL, PerHour: 1}}
		cfg.Credentials = credentials.Config{Dir: creds, Auth: []credentials.AuthConfig{{Name: "token", Origins: []string{srv.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}}
		cfg.ProviderConfig = []byte(fmt.Sprintf(`{"endpoint":%q,"tokenCredential":"token"}`, srv.URL))
	})
	recorder := record.NewFakeRecorder(10)
	c.events = &moduleEvents{started: true, recorder: recorder, pod: &v1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "ccm"}}

	i, _ := c.InstancesV2()
	if exists, err := i.InstanceExists(context.Background(), node("node-0")); !exists || err != nil {
		t.Fatalf("first call: %v, %v", exists, err)
	}
	for _, name := range []string{"node-1", "node-1"} { // twice: one Event a minute
		exists, err := i.InstanceExists(context.Background(), node(name))
		var retry *api.RetryError
		if !errors.As(err, &retry) || retry.RetryAfter() < 59*time.Minute || exists || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Fatalf("throttled call: %v, %v (%T); want an api.RetryError of about an hour", exists, err, err)
		}
	}

	// The module a reload would put in service shares the budget: the
	// lifecycle loads it in shadow with the provider's grants.
	reloaded, err := c.instantiate(context.Background(), modulefile.File{Wasm: wasm}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer reloaded.Close(context.Background())
	var exists abi.Bool
	if err := reloaded.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "node-1"}, &exists); !errors.Is(err, host.ErrShadowThrottled) {
		t.Fatalf("reloaded module in shadow: %v, want ErrShadowThrottled", err)
	}
	reloaded.(*host.Module).SetShadow(false)
	var status *host.StatusError
	if err := reloaded.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "node-1"}, &exists); !errors.As(err, &status) || status.Status != abi.StatusRetryAfter {
		t.Fatalf("reloaded module promoted: %v, want RetryAfter", err)
	}

	if n := sent.Load(); n != 1 {
		t.Fatalf("the cloud got %d requests, want 1", n)
	}
	if got := len(recorder.Events); got != 1 {
		t.Fatalf("%d Events, want 1 (at most one per origin a minute)", got)
	}
	if e := <-recorder.Events; !strings.HasPrefix(e, "Warning "+string(events.CloudRateLimited)+" ") || !strings.Contains(e, srv.URL) {
		t.Fatalf("Event %q", e)
	}
}
