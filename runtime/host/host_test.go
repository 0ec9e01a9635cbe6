package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// toolchains are the compilers every guest module is built with. TinyGo is
// skipped when absent unless WASMCCM_REQUIRE_TINYGO is set, as it is in CI.
func toolchains(t testing.TB) []wasmbuild.Toolchain {
	tcs := []wasmbuild.Toolchain{wasmbuild.Go}
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		tcs = append(tcs, wasmbuild.TinyGo)
	} else if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
		t.Fatal(err)
	} else {
		t.Log("TinyGo guests skipped: ", err)
	}
	return tcs
}

func guestWasm(t testing.TB, name string, tc wasmbuild.Toolchain) []byte {
	t.Helper()
	path, err := wasmbuild.Build(filepath.Join("testdata", "guests", name), tc)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// fakeCloud answers the testprovider's metadata requests and checks its
// bearer token.
func fakeCloud(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.Header().Set("X-Status", "unauthorized")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, "http://forbidden.example/", http.StatusFound)
		case r.URL.Path == "/instances/huge-response":
			w.Header().Set("X-Zone", "zone-b")
			w.Write([]byte(strings.Repeat("x", 2<<20)))
		case r.URL.Path == "/instances/huge-announced-response":
			// The length announced, which the host sizes its buffer by.
			w.Header().Set("Content-Length", strconv.Itoa(2<<20))
			w.Write([]byte(strings.Repeat("x", 2<<20)))
		case strings.HasPrefix(r.URL.Path, "/instances/"):
			w.Header().Set("X-Zone", "zone-b")
			w.Write([]byte("m5.large"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type fixture struct {
	mod   *Module
	cloud *httptest.Server
}

func newFixture(t testing.TB, tc wasmbuild.Toolchain, mutate func(*Config)) *fixture {
	t.Helper()
	cloud := fakeCloud(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name:        "testprovider-" + string(tc),
		ClusterName: "kubernetes",
		// Compiled once per content and wazero version, not once per test:
		// most tests here start the same guest.
		CompilationCacheDir: filepath.Join(wasmbuild.CacheDir(), "compilation"),
		ProviderConfig:      []byte(cloud.URL),
		PoolSize:            2,
		CallTimeout:         5 * time.Second,
		HTTP:                egress.Config{AllowedOrigins: []string{cloud.URL}, MaxResponseBytes: 1 << 20},
		Credentials: credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
			{Name: "token", Origins: []string{cloud.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
			{Name: "absent", Origins: []string{cloud.URL}, Bearer: &credentials.BearerAuth{Key: "absent"}},
		}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	mod, err := New(context.Background(), guestWasm(t, "testprovider", tc), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	return &fixture{mod: mod, cloud: cloud}
}

func TestEveryExport(t *testing.T) {
	node := abi.Node{Name: "node-a", Labels: map[string]string{"team": "x"}, Addresses: []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}}}
	svc := abi.Service{Namespace: "default", Name: "web", Annotations: map[string]string{"exists": "true"},
		Status: abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{IP: "192.0.2.7"}}}}
	route := abi.Route{TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"}
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, func(c *Config) { c.PoolSize = 1 }) // routes live in one instance
			if got := f.mod.Info().Capabilities; len(got) != len(abi.Capabilities) {
				t.Fatalf("capabilities = %v, want all", got)
			}
			str := func(s string) *abi.String { v := abi.String(s); return &v }
			cases := []struct {
				export string
				in     abi.Message
				out    abi.Message
				want   abi.Message
			}{
				{abi.ExportInstanceExists, &node, new(abi.Bool), ptr(abi.Bool(true))},
				{abi.ExportInstanceExists, &abi.Node{Name: "missing"}, new(abi.Bool), ptr(abi.Bool(false))},
				{abi.ExportInstanceShutdown, &abi.Node{Labels: map[string]string{"shutdown": "true"}}, new(abi.Bool), ptr(abi.Bool(true))},
				{abi.ExportInstanceMetadata, &node, &abi.InstanceMetadata{}, &abi.InstanceMetadata{
					ProviderID: "test://node-a", InstanceType: "m5.large", Zone: "zone-b", Region: "region-1",
					NodeAddresses: node.Addresses, AdditionalLabels: node.Labels}},
				{abi.ExportNodeAddresses, str("n1"), &abi.NodeAddresses{}, &abi.NodeAddresses{{Type: "Hostname", Address: "n1"}}},
				{abi.ExportNodeAddressesByProviderID, str("test://10.1.1.1"), &abi.NodeAddresses{}, &abi.NodeAddresses{{Type: "InternalIP", Address: "10.1.1.1"}}},
				{abi.ExportInstanceID, str("n1"), new(abi.String), str("id-n1")},
				{abi.ExportInstanceType, str("n1"), new(abi.String), str("type-n1")},
				{abi.ExportInstanceTypeByProviderID, str("p"), new(abi.String), str("type-p")},
				{abi.ExportInstanceExistsByProviderID, str("test://missing"), new(abi.Bool), ptr(abi.Bool(false))},
				{abi.ExportInstanceShutdownByProviderID, str("test://stopped"), new(abi.Bool), ptr(abi.Bool(true))},
				{abi.ExportCurrentNodeName, str("host-1"), new(abi.String), str("host-1")},
				{abi.ExportGetLoadBalancer, &abi.LoadBalancerRequest{Service: svc}, &abi.GetLoadBalancerResult{},
					&abi.GetLoadBalancerResult{Status: svc.Status, Exists: true}},
				{abi.ExportGetLoadBalancerName, &abi.LoadBalancerRequest{ClusterName: "c", Service: svc}, new(abi.String), str("c-default-web")},
				{abi.ExportEnsureLoadBalancer, &abi.LoadBalancerRequest{Service: svc, Nodes: []abi.Node{node, node}}, &abi.LoadBalancerStatus{},
					&abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{IP: "192.0.2.2", IPMode: "VIP"}}}},
				{abi.ExportUpdateLoadBalancer, &abi.LoadBalancerRequest{Service: svc, Nodes: []abi.Node{node}}, nil, nil},
				{abi.ExportEnsureLoadBalancerDeleted, &abi.LoadBalancerRequest{Service: svc}, nil, nil},
				{abi.ExportCreateRoute, &abi.RouteRequest{NameHint: "uid-1", Route: route}, nil, nil},
				{abi.ExportListRoutes, &abi.RouteRequest{}, &abi.Routes{}, &abi.Routes{{Name: "uid-1", TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"}}},
				{abi.ExportDeleteRoute, &abi.RouteRequest{Route: abi.Route{Name: "uid-1"}}, nil, nil},
				{abi.ExportListRoutes, &abi.RouteRequest{}, &abi.Routes{}, new(abi.Routes)},
				{abi.ExportGetZone, &abi.Empty{}, &abi.Zone{}, &abi.Zone{FailureDomain: "zone-a", Region: "region-1"}},
				{abi.ExportGetZoneByProviderID, str("p1"), &abi.Zone{}, &abi.Zone{FailureDomain: "zone-of-p1", Region: "region-1"}},
				{abi.ExportGetZoneByNodeName, str("n1"), &abi.Zone{}, &abi.Zone{FailureDomain: "zone-of-n1", Region: "region-1"}},
				{abi.ExportListClusters, &abi.Empty{}, &abi.Strings{}, &abi.Strings{"kubernetes"}},
				{abi.ExportClusterMaster, str("c1"), new(abi.String), str("master.c1")},
			}
			for _, c := range cases {
				if err := f.mod.Call(context.Background(), c.export, c.in, c.out); err != nil {
					t.Fatalf("%s: %v", c.export, err)
				}
				if c.want != nil && !reflect.DeepEqual(c.out, c.want) {
					t.Fatalf("%s = %#v, want %#v", c.export, c.out, c.want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestStatuses checks that each status a guest can answer reaches the
// caller as a StatusError carrying it, and that failures are never
// mistaken for answers.
func TestStatuses(t *testing.T) {
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, nil)
			cases := []struct {
				node       string
				export     string
				wantStatus abi.Status
				wantMsg    string
				wantRetry  time.Duration
			}{
				{"notfound", abi.ExportInstanceExists, abi.StatusNotFound, "not found", 0},
				{"retry", abi.ExportInstanceExists, abi.StatusRetryAfter, "rate limited", 3 * time.Second},
				{"error", abi.ExportInstanceExists, abi.StatusError, "cloud said no", 0},
				{"denied-host", abi.ExportInstanceMetadata, abi.StatusError, "not in the module's allowed origins", 0},
				{"cred-not-granted", abi.ExportInstanceMetadata, abi.StatusError, `credential "other" is not in credentials.auth`, 0},
				{"cred-missing", abi.ExportInstanceMetadata, abi.StatusError, `credential "absent": key "absent" is not in the credentials directory`, 0},
				{"huge-response", abi.ExportInstanceMetadata, abi.StatusError, "response body exceeds", 0},
				{"huge-announced-response", abi.ExportInstanceMetadata, abi.StatusError, "response body exceeds", 0},
			}
			for _, c := range cases {
				err := f.mod.Call(context.Background(), c.export, &abi.Node{Name: c.node}, new(abi.InstanceMetadata))
				var status *StatusError
				if !errors.As(err, &status) {
					t.Fatalf("%s: err = %v, want a StatusError", c.node, err)
				}
				if status.Status != c.wantStatus || !strings.Contains(status.Message, c.wantMsg) || status.RetryAfter != c.wantRetry {
					t.Fatalf("%s: got %+v, want %v %q %v", c.node, status.Outcome, c.wantStatus, c.wantMsg, c.wantRetry)
				}
			}
		})
	}
}

// TestFailuresReplaceInstance covers guests that give no answer: each call
// fails with the right reason within its deadline, and the module keeps
// serving.
func TestFailuresReplaceInstance(t *testing.T) {
	for _, tc := range toolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			f := newFixture(t, tc, func(c *Config) {
				c.CallTimeout = 500 * time.Millisecond
				c.MemoryLimitPages = 1024 // 64 MiB
			})
			cases := []struct {
				node, export string
				reasons      []string
			}{
				{"trap", abi.ExportInstanceExists, []string{ReasonTrap}},
				{"loop", abi.ExportInstanceExists, []string{ReasonTimeout}},
				// Growing to the cap traps; a TinyGo module built with its
				// collector may instead still be scanning when the deadline
				// passes.
				{"oom", abi.ExportInstanceExists, []string{ReasonTrap, ReasonTimeout}},
				{"big", abi.ExportInstanceMetadata, []string{ReasonABIViolation}},
			}
			for _, c := range cases {
				start := time.Now()
				err := f.mod.Call(context.Background(), c.export, &abi.Node{Name: c.node}, new(abi.InstanceMetadata))
				var failure *FailureError
				if !errors.As(err, &failure) || !slices.Contains(c.reasons, failure.Reason) {
					t.Fatalf("%s: err = %v, want a FailureError with reason in %v", c.node, err, c.reasons)
				}
				if elapsed := time.Since(start); elapsed > 3*time.Second {
					t.Fatalf("%s: took %s, past the deadline", c.node, elapsed)
				}
				var exists abi.Bool
				if err := f.mod.Call(context.Background(), abi.ExportInstanceExists, &abi.Node{Name: "ok"}, &exists); err != nil || !exists {
					t.Fatalf("after %s: module no longer serves: %v", c.node, err)
				}
			}
		})
	}
}
