package simcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	sim "github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

const (
	testToken   = "s3cret"
	testCluster = "demo"
)

// transport serves requests with the cloud's handler in-process. before,
// when set, runs first and may answer instead of the cloud.
type transport struct {
	handler http.Handler

	mu     sync.Mutex
	auth   []string
	before func(*http.Request) *http.Response
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.auth = append(t.auth, req.Header.Get("Authorization"))
	before := t.before
	t.mu.Unlock()
	if before != nil {
		if resp := before(req); resp != nil {
			return resp, nil
		}
	}
	rec := httptest.NewRecorder()
	t.handler.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, err // the cloud wrote nothing: the client gave up
	}
	return rec.Result(), nil
}

func (t *transport) setBefore(f func(*http.Request) *http.Response) {
	t.mu.Lock()
	t.before = f
	t.mu.Unlock()
}

func (t *transport) authHeaders() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.auth)
}

func response(status int, contentType, body string) *http.Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

type env struct {
	cloud *sim.Cloud
	tr    *transport
	host  *native.Host
	p     *Provider
	logs  *bytes.Buffer
	// creds is the Secret directory the host's auth reads the token from.
	creds string
}

// setToken writes the token Secret key, or removes it when value is "".
func (e *env) setToken(t *testing.T, value string) {
	t.Helper()
	path := filepath.Join(e.creds, "token")
	if value == "" {
		os.Remove(path)
		return
	}
	if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

var testInstances = []sim.Instance{
	{ID: "i-a", Name: "node-a", Zone: "sim-1a", Region: "sim-1", Type: "sim.large",
		Addresses: []sim.Address{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "node-a"}},
		Labels:    map[string]string{"simcloud.example/pool": "blue"}},
	{ID: "i-b", Name: "node-b", Zone: "sim-1b", Region: "sim-1", State: sim.StateStopped},
	{ID: "i-c", Name: "node-c", Zone: "sim-1c", Region: "sim-1"},
}

// newEnv starts a cloud with testInstances and a provider initialized with
// config (a default one when empty).
func newEnv(t *testing.T, config string) *env {
	t.Helper()
	cloud := sim.New(sim.Options{Token: testToken, Instances: testInstances, Seed: 1})
	tr := &transport{handler: cloud.Handler()}
	logs := &bytes.Buffer{}
	creds := t.TempDir()
	// The host applies the token, as it does for the module.
	auth, err := credentials.NewTransport("simcloud", credentials.Config{Dir: creds, Auth: []credentials.AuthConfig{
		{Name: "token", Origins: []string{"http://sim.test"}, Bearer: &credentials.BearerAuth{Key: "token"}},
	}}, tr)
	if err != nil {
		t.Fatal(err)
	}
	h := &native.Host{Transport: auth, Timeout: 2 * time.Second, Logger: log.New(logs, "", 0)}
	if config == "" {
		config = `{"endpoint": "http://sim.test", "tokenCredential": "token"}`
	}
	p := New(h)
	if err := p.Init(context.Background(), testCluster, []byte(config)); err != nil {
		t.Fatalf("Init: %v", err)
	}
	e := &env{cloud: cloud, tr: tr, host: h, p: p, logs: logs, creds: creds}
	e.setToken(t, testToken)
	return e
}

func (e *env) fault(t *testing.T, f sim.Fault) {
	t.Helper()
	if _, err := e.cloud.SetFault(f); err != nil {
		t.Fatalf("SetFault: %v", err)
	}
}

// retryDelay reports whether err is an sdk.RetryAfter error, and its delay.
func retryDelay(err error) (time.Duration, bool) {
	want := reflect.TypeOf(sdk.RetryAfter(0, ""))
	for e := err; e != nil; e = errors.Unwrap(e) {
		if reflect.TypeOf(e) == want {
			return time.Duration(reflect.ValueOf(e).Elem().FieldByName("After").Int()), true
		}
	}
	return 0, false
}

var ctx = context.Background()

// ---- Init ----

func TestInit(t *testing.T) {
	tests := []struct {
		name, config string
		wantErr      string
		endpoint     string
		credential   string
		timeout      time.Duration
	}{
		{name: "minimal", config: `{"endpoint":"http://127.0.0.1:8780"}`, endpoint: "http://127.0.0.1:8780", credential: "token"},
		{name: "full", config: `{"endpoint":"https://cloud.example/api/","tokenCredential":"sim-token","requestTimeout":"3s"}`,
			endpoint: "https://cloud.example/api", credential: "sim-token", timeout: 3 * time.Second},
		{name: "no auth", config: ` {"endpoint":"http://h", "tokenCredential": ""} `, endpoint: "http://h"},
		{name: "empty", config: ``, wantErr: "provider config is empty"},
		{name: "null", config: `null`, wantErr: "provider config is empty"},
		{name: "no endpoint", config: `{}`, wantErr: "is required"},
		{name: "bad scheme", config: `{"endpoint":"ftp://h"}`, wantErr: "http:// or https://"},
		{name: "no host", config: `{"endpoint":"http:///x"}`, wantErr: "has no host"},
		{name: "query", config: `{"endpoint":"http://h/?x=1"}`, wantErr: "query"},
		{name: "unknown field", config: `{"endpoint":"http://h","token":"x"}`, wantErr: `unknown field "token"`},
		{name: "not json", config: `endpoint: http://h`, wantErr: "parsing provider config"},
		{name: "trailing data", config: `{"endpoint":"http://h"} {}`, wantErr: "data after"},
		{name: "bad timeout", config: `{"endpoint":"http://h","requestTimeout":"soon"}`, wantErr: "requestTimeout"},
		{name: "negative timeout", config: `{"endpoint":"http://h","requestTimeout":"-1s"}`, wantErr: "requestTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(&native.Host{})
			err := p.Init(ctx, "c", []byte(tt.config))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Init error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Init: %v", err)
			}
			if p.api.BaseURL != tt.endpoint || p.api.Credential != tt.credential || p.api.Timeout != tt.timeout {
				t.Errorf("got endpoint %q credential %q timeout %v", p.api.BaseURL, p.api.Credential, p.api.Timeout)
			}
		})
	}
}

func TestUninitialized(t *testing.T) {
	p := New(&native.Host{})
	if ok, err := p.InstanceExists(ctx, &abi.Node{Name: "node-a"}); ok || err == nil || !strings.Contains(err.Error(), "not initialized") {
		t.Fatalf("InstanceExists before Init = %v, %v", ok, err)
	}
}

// ---- InstancesV2 ----

func TestInstances(t *testing.T) {
	e := newEnv(t, "")
	tests := []struct {
		name     string
		node     abi.Node
		exists   bool
		shutdown bool
		meta     *abi.InstanceMetadata
		wantErr  string // for all three methods
	}{
		{name: "by provider ID", node: abi.Node{Name: "node-a", ProviderID: "simcloud://i-a"}, exists: true,
			meta: &abi.InstanceMetadata{ProviderID: "simcloud://i-a", InstanceType: "sim.large", Zone: "sim-1a", Region: "sim-1",
				NodeAddresses:    []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "node-a"}},
				AdditionalLabels: map[string]string{"simcloud.example/pool": "blue"}}},
		{name: "by name", node: abi.Node{Name: "node-a"}, exists: true,
			meta: &abi.InstanceMetadata{ProviderID: "simcloud://i-a", InstanceType: "sim.large", Zone: "sim-1a", Region: "sim-1",
				NodeAddresses:    []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "node-a"}},
				AdditionalLabels: map[string]string{"simcloud.example/pool": "blue"}}},
		{name: "stopped", node: abi.Node{Name: "node-b", ProviderID: "simcloud://i-b"}, exists: true, shutdown: true,
			meta: &abi.InstanceMetadata{ProviderID: "simcloud://i-b", InstanceType: sim.DefaultInstanceType, Zone: "sim-1b", Region: "sim-1",
				NodeAddresses: []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.2"}, {Type: "Hostname", Address: "node-b"}}}},
		{name: "provider ID wins over name", node: abi.Node{Name: "node-a", ProviderID: "simcloud://i-c"}, exists: true,
			meta: &abi.InstanceMetadata{ProviderID: "simcloud://i-c", InstanceType: sim.DefaultInstanceType, Zone: "sim-1c", Region: "sim-1",
				NodeAddresses: []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.3"}, {Type: "Hostname", Address: "node-c"}}}},
		{name: "terminated provider ID", node: abi.Node{Name: "node-a", ProviderID: "simcloud://i-gone"}, exists: false, wantErr: "does not exist"},
		{name: "unknown name", node: abi.Node{Name: "node-z"}, exists: false, wantErr: "does not exist"},
		{name: "foreign provider ID", node: abi.Node{Name: "node-a", ProviderID: "aws:///us-east-1a/i-1"}, wantErr: "not a simcloud one"},
		{name: "malformed provider ID", node: abi.Node{Name: "node-a", ProviderID: "simcloud://i/../x"}, wantErr: "malformed"},
		{name: "no name", node: abi.Node{}, wantErr: "neither a name nor a provider ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists, err := e.p.InstanceExists(ctx, &tt.node)
			switch {
			case tt.exists:
				if err != nil || !exists {
					t.Errorf("InstanceExists = %v, %v; want true", exists, err)
				}
			case tt.meta == nil && tt.wantErr == "does not exist":
				if err != nil || exists {
					t.Errorf("InstanceExists = %v, %v; want false, nil", exists, err)
				}
			default:
				if err == nil || exists || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("InstanceExists = %v, %v; want an error containing %q", exists, err, tt.wantErr)
				}
			}

			shutdown, err := e.p.InstanceShutdown(ctx, &tt.node)
			if tt.meta != nil {
				if err != nil || shutdown != tt.shutdown {
					t.Errorf("InstanceShutdown = %v, %v; want %v", shutdown, err, tt.shutdown)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("InstanceShutdown error = %v; want one containing %q", err, tt.wantErr)
			} else if (tt.wantErr == "does not exist") != errors.Is(err, sdk.ErrNotFound) {
				t.Errorf("InstanceShutdown error %v: errors.Is(ErrNotFound) = %v", err, errors.Is(err, sdk.ErrNotFound))
			}

			meta, err := e.p.InstanceMetadata(ctx, &tt.node)
			if tt.meta != nil {
				if err != nil || !reflect.DeepEqual(meta, tt.meta) {
					t.Errorf("InstanceMetadata = %+v, %v\nwant %+v", meta, err, tt.meta)
				}
			} else if err == nil || meta != nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("InstanceMetadata = %+v, %v; want an error containing %q", meta, err, tt.wantErr)
			} else if (tt.wantErr == "does not exist") != errors.Is(err, sdk.ErrNotFound) {
				t.Errorf("InstanceMetadata error %v: errors.Is(ErrNotFound) = %v", err, errors.Is(err, sdk.ErrNotFound))
			}
		})
	}
}

// TestInstanceExistsNeverFalseOnFailure is the rule that protects Nodes:
// whatever goes wrong, InstanceExists answers with an error, never false.
func TestInstanceExistsNeverFalseOnFailure(t *testing.T) {
	tests := []struct {
		name   string
		config string
		setup  func(t *testing.T, e *env)
		ctx    func() (context.Context, context.CancelFunc)
		want   []string      // substrings of the error
		retry  time.Duration // > 0: want sdk.RetryAfter with this delay
	}{
		{name: "500", setup: func(t *testing.T, e *env) {
			e.fault(t, sim.Fault{Name: "boom", PathPrefix: "/v1/instances", ErrorRate: 1, Status: 500})
		}, want: []string{"cloud answered 500", `injected fault "boom"`}},
		{name: "503 without Retry-After", setup: func(t *testing.T, e *env) {
			e.fault(t, sim.Fault{Name: "down", PathPrefix: "/v1/instances", ErrorRate: 1})
		}, want: []string{"cloud answered 503"}},
		{name: "503 with Retry-After", setup: func(t *testing.T, e *env) {
			e.fault(t, sim.Fault{Name: "down", PathPrefix: "/v1/instances", ErrorRate: 1, Status: 503, RetryAfter: 7})
		}, want: []string{"cloud answered 503"}, retry: 7 * time.Second},
		{name: "429", setup: func(t *testing.T, e *env) {
			e.fault(t, sim.Fault{Name: "throttle", PathPrefix: "/v1/instances", ErrorRate: 1, Status: 429, RetryAfter: 3})
		}, want: []string{"cloud answered 429"}, retry: 3 * time.Second},
		{name: "rate limit", setup: func(t *testing.T, e *env) {
			if _, err := e.cloud.SetGlobal(sim.Global{RateLimit: 0.001, Burst: 1}); err != nil {
				t.Fatal(err)
			}
			e.p.InstanceExists(ctx, &abi.Node{Name: "node-c"}) // takes the only token
			e.p.instances.Invalidate()                         // so that the next call asks the cloud
		}, want: []string{"cloud answered 429", "rate limit"}, retry: time.Hour},
		{name: "request timeout", config: `{"endpoint":"http://sim.test","requestTimeout":"30ms"}`, setup: func(t *testing.T, e *env) {
			e.fault(t, sim.Fault{PathPrefix: "/v1/instances", Latency: 5 * time.Second})
		}, want: []string{"no response"}},
		{name: "context deadline", setup: func(t *testing.T, e *env) {
			e.fault(t, sim.Fault{PathPrefix: "/v1/instances", Latency: 5 * time.Second})
		}, ctx: func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 30*time.Millisecond) },
			want: []string{"no response"}},
		{name: "context cancelled", ctx: func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, cancel
		}, want: []string{"context canceled"}},
		{name: "transport error", setup: func(t *testing.T, e *env) {
			e.host.Transport = roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") })
		}, want: []string{"no response", "connection refused"}},
		{name: "wrong token", setup: func(t *testing.T, e *env) {
			e.setToken(t, "stale")
		}, want: []string{"cloud answered 401", `check the credential "token"`}},
		{name: "credential missing", setup: func(t *testing.T, e *env) {
			e.setToken(t, "")
		}, want: []string{"no response", `credential "token": key "token" is not in the credentials directory`}},
		{name: "404 from a proxy", setup: func(t *testing.T, e *env) {
			e.tr.setBefore(func(*http.Request) *http.Response { return response(404, "text/html", "<h1>Not Found</h1>") })
		}, want: []string{"cloud answered 404"}},
		{name: "JSON 404 without an error field", setup: func(t *testing.T, e *env) {
			e.tr.setBefore(func(*http.Request) *http.Response { return response(404, "application/json", `{"message":"nope"}`) })
		}, want: []string{"cloud answered 404"}},
		{name: "endpoint with a wrong path", config: `{"endpoint":"http://sim.test/wrong"}`,
			want: []string{"cloud answered 404"}},
		{name: "unknown API route", setup: func(t *testing.T, e *env) {
			e.tr.setBefore(func(*http.Request) *http.Response {
				return response(404, "application/json", `{"error":"no such endpoint: GET /v1/instances/x"}`)
			})
		}, want: []string{"cloud answered 404", "no such endpoint"}},
		{name: "undecodable 200", setup: func(t *testing.T, e *env) {
			e.tr.setBefore(func(*http.Request) *http.Response { return response(200, "application/json", `{"id":`) })
		}, want: []string{"decoding the cloud's 200 response"}},
		{name: "null list", setup: func(t *testing.T, e *env) {
			e.tr.setBefore(func(r *http.Request) *http.Response {
				if r.URL.Path == "/v1/instances" {
					return response(200, "application/json", "null")
				}
				return response(200, "application/json", `{}`)
			})
		}, want: []string{"GET /v1/instances"}},
	}
	nodes := map[string]abi.Node{
		"existing by id":   {Name: "node-a", ProviderID: "simcloud://i-a"},
		"existing by name": {Name: "node-a"},
		"gone by id":       {Name: "node-x", ProviderID: "simcloud://i-x"},
		"gone by name":     {Name: "node-x"},
	}
	for _, tt := range tests {
		for nodeCase, node := range nodes {
			t.Run(tt.name+"/"+nodeCase, func(t *testing.T) {
				e := newEnv(t, tt.config)
				if tt.setup != nil {
					tt.setup(t, e)
				}
				c := ctx
				if tt.ctx != nil {
					var cancel context.CancelFunc
					c, cancel = tt.ctx()
					defer cancel()
				}
				exists, err := e.p.InstanceExists(c, &node)
				if err == nil {
					t.Fatalf("InstanceExists = %v, nil; want an error", exists)
				}
				if exists {
					t.Errorf("InstanceExists answered true with error %v", err)
				}
				for _, s := range tt.want {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				if tt.name == "null list" && node.ProviderID != "" {
					return // the by-ID path got a 200 with a mismatching body
				}
				d, isRetry := retryDelay(err)
				if isRetry != (tt.retry > 0) || (tt.retry > 0 && tt.retry != time.Hour && d != tt.retry) {
					t.Errorf("retry = %v, %v; want %v", d, isRetry, tt.retry)
				}
				if errors.Is(err, sdk.ErrNotFound) {
					t.Errorf("error %v matches ErrNotFound", err)
				}
			})
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTokenReadAtEveryCall(t *testing.T) {
	e := newEnv(t, "")
	node := &abi.Node{Name: "node-a", ProviderID: "simcloud://i-a"}
	steps := []struct {
		token string
		ok    bool
	}{
		{testToken, true},
		{"rotated-away", false},
		{testToken + "\n", true}, // Secret files often end in a newline
		{testToken, true},
	}
	for i, s := range steps {
		e.setToken(t, s.token)
		e.p.instances.Invalidate() // every step asks the cloud
		exists, err := e.p.InstanceExists(ctx, node)
		if s.ok != (err == nil) || exists != s.ok {
			t.Fatalf("step %d (token %q): InstanceExists = %v, %v", i, s.token, exists, err)
		}
	}
	want := []string{"Bearer " + testToken, "Bearer rotated-away", "Bearer " + testToken, "Bearer " + testToken}
	if got := e.tr.authHeaders(); !slices.Equal(got, want) {
		t.Errorf("Authorization headers = %q, want %q", got, want)
	}
}

func TestNoAuth(t *testing.T) {
	e := newEnv(t, `{"endpoint":"http://sim.test","tokenCredential":""}`)
	e.tr.handler = sim.New(sim.Options{Instances: testInstances}).Handler()
	if ok, err := e.p.InstanceExists(ctx, &abi.Node{Name: "node-a"}); !ok || err != nil {
		t.Fatalf("InstanceExists = %v, %v", ok, err)
	}
	if got := e.tr.authHeaders(); len(got) != 1 || got[0] != "" {
		t.Errorf("Authorization headers = %q, want none", got)
	}
}

func TestDebugLog(t *testing.T) {
	e := newEnv(t, "")
	e.p.InstanceExists(ctx, &abi.Node{Name: "node-a", ProviderID: "simcloud://i-a"})
	if !strings.Contains(e.logs.String(), "GET /v1/instances -> 200 in ") {
		t.Errorf("log lacks the request line:\n%s", e.logs)
	}
	if strings.Contains(e.logs.String(), testToken) {
		t.Errorf("log contains the token:\n%s", e.logs)
	}
}

// ---- Zones ----

func TestZones(t *testing.T) {
	e := newEnv(t, "")
	if _, err := e.p.GetZone(ctx); !errors.Is(err, sdk.ErrNotImplemented) {
		t.Errorf("GetZone error = %v, want ErrNotImplemented", err)
	}
	tests := []struct {
		name       string
		get        func() (abi.Zone, error)
		want       abi.Zone
		notFound   bool
		errContain string
	}{
		{name: "by provider ID", get: func() (abi.Zone, error) { return e.p.GetZoneByProviderID(ctx, "simcloud://i-b") },
			want: abi.Zone{FailureDomain: "sim-1b", Region: "sim-1"}},
		{name: "by node name", get: func() (abi.Zone, error) { return e.p.GetZoneByNodeName(ctx, "node-c") },
			want: abi.Zone{FailureDomain: "sim-1c", Region: "sim-1"}},
		{name: "unknown provider ID", get: func() (abi.Zone, error) { return e.p.GetZoneByProviderID(ctx, "simcloud://i-x") }, notFound: true},
		{name: "unknown node name", get: func() (abi.Zone, error) { return e.p.GetZoneByNodeName(ctx, "node-x") }, notFound: true},
		{name: "foreign provider ID", get: func() (abi.Zone, error) { return e.p.GetZoneByProviderID(ctx, "gce://p/z/n") }, errContain: "not a simcloud one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z, err := tt.get()
			switch {
			case tt.notFound:
				if !errors.Is(err, sdk.ErrNotFound) {
					t.Errorf("error = %v, want ErrNotFound", err)
				}
			case tt.errContain != "":
				if err == nil || errors.Is(err, sdk.ErrNotFound) || !strings.Contains(err.Error(), tt.errContain) {
					t.Errorf("error = %v, want one containing %q", err, tt.errContain)
				}
			default:
				if err != nil || z != tt.want {
					t.Errorf("zone = %+v, %v; want %+v", z, err, tt.want)
				}
			}
		})
	}
}

// ---- LoadBalancer ----

func service(uid string) *abi.Service {
	return &abi.Service{Namespace: "default", Name: "web", UID: uid,
		Ports: []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}}}
}

const uid1 = "3f9c2e1b-7d84-4c0e-9a1b-2c3d4e5f6a7b"

func nodes(names ...string) []abi.Node {
	var out []abi.Node
	for _, n := range names {
		node := abi.Node{Name: n}
		if id, ok := strings.CutPrefix(n, "id:"); ok {
			node = abi.Node{Name: "node-" + strings.TrimPrefix(id, "i-"), ProviderID: ProviderIDPrefix + id}
		}
		out = append(out, node)
	}
	return out
}

func wantStatus(t *testing.T, status *abi.LoadBalancerStatus, ip string) {
	t.Helper()
	want := &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{IP: ip, IPMode: "VIP"}}}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("status = %+v, want %+v", status, want)
	}
}

func TestLoadBalancerName(t *testing.T) {
	p := New(&native.Host{})
	tests := []struct{ uid, want string }{
		{uid1, "a3f9c2e1b7d844c0e9a1b2c3d4e5f6a7"},
		{"abc", "aabc"},
	}
	for _, tt := range tests {
		svc := service(tt.uid)
		if got := p.GetLoadBalancerName(ctx, "any", svc); got != tt.want {
			t.Errorf("GetLoadBalancerName(%q) = %q, want %q", tt.uid, got, tt.want)
		}
		svc.Name, svc.Namespace = "renamed", "elsewhere"
		if got := p.GetLoadBalancerName(ctx, "other", svc); got != tt.want {
			t.Errorf("name depends on more than the UID: %q", got)
		}
	}
}

func TestLoadBalancerLifecycle(t *testing.T) {
	e := newEnv(t, "")
	svc := service(uid1)
	name := e.p.GetLoadBalancerName(ctx, testCluster, svc)

	if st, ok, err := e.p.GetLoadBalancer(ctx, testCluster, svc); st != nil || ok || err != nil {
		t.Fatalf("GetLoadBalancer before create = %v, %v, %v", st, ok, err)
	}

	// Create: by provider ID, by name, and nodes that cannot be targets.
	all := append(nodes("id:i-a", "node-c", "node-ghost"), abi.Node{Name: "foreign", ProviderID: "kind://docker/x"})
	st, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, all)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	wantStatus(t, st, "203.0.113.10")
	lb, ok := e.cloud.LoadBalancer(name)
	if !ok {
		t.Fatalf("no load balancer %q in the cloud: %+v", name, e.cloud.LoadBalancers())
	}
	want := sim.LoadBalancer{ID: lb.ID, Name: name, IP: "203.0.113.10",
		Ports:   []sim.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}},
		Targets: []string{"i-a", "i-c"},
		Tags:    map[string]string{TagCluster: testCluster, TagService: "default/web", TagServiceUID: uid1}}
	if !reflect.DeepEqual(lb, want) {
		t.Errorf("load balancer = %+v\nwant %+v", lb, want)
	}

	// Ensure again, unchanged: no write.
	if st, err = e.p.EnsureLoadBalancer(ctx, testCluster, svc, all); err != nil {
		t.Fatalf("second EnsureLoadBalancer: %v", err)
	}
	wantStatus(t, st, "203.0.113.10")
	if c := e.cloud.Counters(); c.LoadBalancersCreated != 1 || c.LoadBalancersUpdated != 0 {
		t.Errorf("created %d updated %d, want 1 and 0", c.LoadBalancersCreated, c.LoadBalancersUpdated)
	}

	st, ok, err = e.p.GetLoadBalancer(ctx, testCluster, svc)
	if err != nil || !ok {
		t.Fatalf("GetLoadBalancer = %v, %v, %v", st, ok, err)
	}
	wantStatus(t, st, "203.0.113.10")

	// UpdateLoadBalancer replaces the targets.
	if err := e.p.UpdateLoadBalancer(ctx, testCluster, svc, nodes("id:i-b")); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if lb, _ := e.cloud.LoadBalancer(name); !slices.Equal(lb.Targets, []string{"i-b"}) {
		t.Errorf("targets after update = %v, want [i-b]", lb.Targets)
	}

	// Service changes: ports, Local traffic policy, source ranges.
	svc.Ports = append(svc.Ports, abi.ServicePort{Protocol: "UDP", Port: 53, NodePort: 30053})
	svc.HealthCheckNodePort = 32000
	svc.LoadBalancerSourceRanges = []string{"10.0.0.0/8", " 192.168.0.0/16 "}
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-b", "id:i-a", "id:i-b")); err != nil {
		t.Fatalf("EnsureLoadBalancer after a change: %v", err)
	}
	lb, _ = e.cloud.LoadBalancer(name)
	want = sim.LoadBalancer{ID: lb.ID, Name: name, IP: "203.0.113.10",
		Ports:        []sim.Port{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}, {Protocol: "UDP", Port: 53, NodePort: 30053}},
		Targets:      []string{"i-a", "i-b"},
		HealthCheck:  &sim.HealthCheck{NodePort: 32000, Path: "/healthz"},
		SourceRanges: []string{"10.0.0.0/8", "192.168.0.0/16"},
		Tags:         map[string]string{TagCluster: testCluster, TagService: "default/web", TagServiceUID: uid1}}
	if !reflect.DeepEqual(lb, want) {
		t.Errorf("load balancer = %+v\nwant %+v", lb, want)
	}
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a", "id:i-b")); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if c := e.cloud.Counters(); c.LoadBalancersCreated != 1 || c.LoadBalancersUpdated != 2 {
		t.Errorf("created %d updated %d, want 1 and 2", c.LoadBalancersCreated, c.LoadBalancersUpdated)
	}

	// Delete, twice.
	for i := 0; i < 2; i++ {
		if err := e.p.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
			t.Fatalf("EnsureLoadBalancerDeleted #%d: %v", i+1, err)
		}
	}
	if c := e.cloud.Counters(); c.LoadBalancersDeleted != 1 || len(e.cloud.LoadBalancers()) != 0 {
		t.Errorf("deleted %d, remaining %v", c.LoadBalancersDeleted, e.cloud.LoadBalancers())
	}
	if st, ok, err := e.p.GetLoadBalancer(ctx, testCluster, svc); st != nil || ok || err != nil {
		t.Fatalf("GetLoadBalancer after delete = %v, %v, %v", st, ok, err)
	}
	if err := e.p.UpdateLoadBalancer(ctx, testCluster, svc, nodes("id:i-a")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("UpdateLoadBalancer of a deleted load balancer: %v", err)
	}
}

func TestLoadBalancerSourceRangesAnnotation(t *testing.T) {
	e := newEnv(t, "")
	svc := service(uid1)
	svc.Annotations = map[string]string{sourceRangesAnnotation: "10.1.0.0/16, 10.2.0.0/16"}
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a")); err != nil {
		t.Fatal(err)
	}
	lb, _ := e.cloud.LoadBalancer(e.p.GetLoadBalancerName(ctx, testCluster, svc))
	if !slices.Equal(lb.SourceRanges, []string{"10.1.0.0/16", "10.2.0.0/16"}) {
		t.Errorf("source ranges = %v", lb.SourceRanges)
	}
}

// TestEnsureLoadBalancerLostCreate: the create took effect but its response
// was lost. The next Ensure must find the load balancer, not create another.
func TestEnsureLoadBalancerLostCreate(t *testing.T) {
	e := newEnv(t, "")
	e.fault(t, sim.Fault{Route: "POST /v1/loadbalancers", FailNext: 1, Status: 502, AfterCommit: true})
	svc := service(uid1)
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a")); err == nil || !strings.Contains(err.Error(), "cloud answered 502") {
		t.Fatalf("EnsureLoadBalancer with a lost response: %v", err)
	}
	st, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a"))
	if err != nil {
		t.Fatalf("EnsureLoadBalancer retry: %v", err)
	}
	wantStatus(t, st, "203.0.113.10")
	if c := e.cloud.Counters(); c.LoadBalancersCreated != 1 || len(e.cloud.LoadBalancers()) != 1 {
		t.Errorf("created %d, load balancers %v", c.LoadBalancersCreated, e.cloud.LoadBalancers())
	}
}

// TestEnsureLoadBalancerCreateConflict: the load balancer appears between
// the GET and the POST (a concurrent or earlier create). The 409 turns into
// an update of that load balancer.
func TestEnsureLoadBalancerCreateConflict(t *testing.T) {
	e := newEnv(t, "")
	svc := service(uid1)
	name := e.p.GetLoadBalancerName(ctx, testCluster, svc)
	var once sync.Once
	e.tr.setBefore(func(r *http.Request) *http.Response {
		if r.Method == "POST" && r.URL.Path == "/v1/loadbalancers" {
			once.Do(func() {
				if _, err := e.cloud.CreateLoadBalancer(sim.LoadBalancer{Name: name,
					Ports: []sim.Port{{Protocol: "TCP", Port: 8080, NodePort: 31000}}}); err != nil {
					t.Errorf("CreateLoadBalancer: %v", err)
				}
			})
		}
		return nil
	})
	st, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a", "id:i-c"))
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	wantStatus(t, st, "203.0.113.10")
	lbs := e.cloud.LoadBalancers()
	if len(lbs) != 1 || !slices.Equal(lbs[0].Targets, []string{"i-a", "i-c"}) || lbs[0].Ports[0].Port != 80 {
		t.Errorf("load balancers = %+v", lbs)
	}
	c := e.cloud.Counters()
	if c.Status("POST /v1/loadbalancers", 409) != 1 || c.Status("PUT /v1/loadbalancers/{name}", 200) != 1 {
		t.Errorf("endpoint statuses = %v", c.EndpointStatuses)
	}
}

func TestEnsureLoadBalancerIP(t *testing.T) {
	e := newEnv(t, "")
	svc := service(uid1)
	svc.LoadBalancerIP = "203.0.113.50"
	st, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a"))
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	wantStatus(t, st, "203.0.113.50")

	// Another Service asking for the same IP: the 409 is reported.
	other := service("0000aaaa-0000-0000-0000-000000000000")
	other.LoadBalancerIP = "203.0.113.50"
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, other, nodes("id:i-a")); err == nil ||
		!strings.Contains(err.Error(), "cloud answered 409") || !strings.Contains(err.Error(), "in use") {
		t.Errorf("EnsureLoadBalancer with a taken IP: %v", err)
	}
	if n := len(e.cloud.LoadBalancers()); n != 1 {
		t.Errorf("%d load balancers, want 1", n)
	}

	// The IP of an existing load balancer cannot change.
	svc.LoadBalancerIP = "203.0.113.51"
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a")); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("EnsureLoadBalancer with a new IP: %v", err)
	}
}

func TestEnsureLoadBalancerRejectsUnsupportedServices(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*abi.Service)
		want   string
	}{
		{"SCTP", func(s *abi.Service) { s.Ports[0].Protocol = "SCTP" }, "only TCP and UDP"},
		{"no node port", func(s *abi.Service) { s.Ports[0].NodePort = 0 }, "allocateLoadBalancerNodePorts"},
		{"no ports", func(s *abi.Service) { s.Ports = nil }, "has no ports"},
		{"no UID", func(s *abi.Service) { s.UID = "" }, "no UID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "")
			svc := service(uid1)
			tt.mutate(svc)
			if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a")); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("EnsureLoadBalancer error = %v, want one containing %q", err, tt.want)
			}
			if n := len(e.tr.authHeaders()); n != 0 {
				t.Errorf("%d requests sent for an invalid Service", n)
			}
		})
	}
}

// TestLoadBalancerTargetsPerList: the targets read from a Node list are
// read once for as long as the calls pass the same list (a foreign
// provider ID is reported once, not per load balancer), each load
// balancer gets them, a new list is read again, and an instance gone
// since is still left out of the same list's next load balancer.
func TestLoadBalancerTargetsPerList(t *testing.T) {
	e := newEnv(t, "")
	const uid2, uid3 = "4b0d3f2c-8e95-4d1f-0b2c-3d4e5f6a7b8c", "5c1e4a3d-9fa6-4e2a-1c3d-4e5f6a7b8c9d"
	list := append(nodes("id:i-a", "id:i-c"), abi.Node{Name: "foreign", ProviderID: "kind://docker/x"})
	targets := func(uid string) []string {
		lb, _ := e.cloud.LoadBalancer(e.p.GetLoadBalancerName(ctx, testCluster, service(uid)))
		return lb.Targets
	}
	for _, uid := range []string{uid1, uid2} {
		if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, service(uid), list); err != nil {
			t.Fatal(err)
		}
		if got := targets(uid); !slices.Equal(got, []string{"i-a", "i-c"}) {
			t.Fatalf("targets of %s = %v, want [i-a i-c]", uid, got)
		}
	}
	if n := strings.Count(e.logs.String(), `leaving out node "foreign"`); n != 1 {
		t.Fatalf("the foreign Node reported %d times over two load balancers of one list, want once:\n%s", n, e.logs)
	}
	if err := e.p.UpdateLoadBalancer(ctx, testCluster, service(uid1), slices.Clone(list)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(e.logs.String(), `leaving out node "foreign"`); n != 2 {
		t.Fatalf("the foreign Node reported %d times after a new list, want twice", n)
	}
	if err := e.cloud.DeleteInstance("i-c"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, service(uid3), list); err != nil {
		t.Fatal(err)
	}
	if got := targets(uid3); !slices.Equal(got, []string{"i-a"}) {
		t.Fatalf("targets after i-c was terminated = %v, want [i-a]", got)
	}
}

// TestTargetsEncodedOncePerList: the targets' JSON is kept with the Node
// list they came from, and only with it.
func TestTargetsEncodedOncePerList(t *testing.T) {
	e := newEnv(t, "")
	var kept nodeTargets
	ids, _ := kept.of(e.p, nodes("id:i-b", "id:i-a"))
	first := kept.encodeTargets(ids)
	if string(first) != `["i-a","i-b"]` {
		t.Fatalf("targets encode as %s", first)
	}
	if again := kept.encodeTargets(ids); &again[0] != &first[0] {
		t.Error("the same list's targets were encoded again")
	}
	if other := kept.encodeTargets(slices.Clone(ids)); &other[0] == &first[0] || string(other) != string(first) {
		t.Errorf("a copy of the targets encodes as %s, from the kept encoding: %v", other, &other[0] == &first[0])
	}
	ids, _ = kept.of(e.p, nodes("id:i-c"))
	if got := kept.encodeTargets(ids); string(got) != `["i-c"]` {
		t.Errorf("a new list's targets encode as %s", got)
	}
}

// TestLoadBalancerTerminatedTarget: a Node whose instance is gone but which
// Kubernetes has not deleted yet must not block its load balancers.
func TestLoadBalancerTerminatedTarget(t *testing.T) {
	e := newEnv(t, "")
	svc := service(uid1)
	if err := e.cloud.DeleteInstance("i-c"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a", "id:i-c")); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	name := e.p.GetLoadBalancerName(ctx, testCluster, svc)
	if lb, _ := e.cloud.LoadBalancer(name); !slices.Equal(lb.Targets, []string{"i-a"}) {
		t.Errorf("targets = %v, want [i-a]", lb.Targets)
	}
	if err := e.p.UpdateLoadBalancer(ctx, testCluster, svc, nodes("id:i-b", "id:i-c")); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if lb, _ := e.cloud.LoadBalancer(name); !slices.Equal(lb.Targets, []string{"i-b"}) {
		t.Errorf("targets = %v, want [i-b]", lb.Targets)
	}
	// A 400 for another reason is reported as is.
	svc.LoadBalancerSourceRanges = []string{"not-a-cidr"}
	if err := e.p.UpdateLoadBalancer(ctx, testCluster, svc, nodes("id:i-b")); err == nil || !strings.Contains(err.Error(), "cloud answered 400") {
		t.Errorf("UpdateLoadBalancer with a bad source range: %v", err)
	}
}

func TestLoadBalancerFailures(t *testing.T) {
	tests := []struct {
		name  string
		fault sim.Fault
		call  func(e *env, svc *abi.Service) error
		want  string
		retry bool
	}{
		{"get 500", sim.Fault{Route: "GET /v1/loadbalancers/{name}", ErrorRate: 1, Status: 500},
			func(e *env, svc *abi.Service) error {
				_, ok, err := e.p.GetLoadBalancer(ctx, testCluster, svc)
				if ok {
					return errors.New("exists")
				}
				return err
			}, "GET /v1/loadbalancers/a3f9c2e1b7d844c0e9a1b2c3d4e5f6a7: cloud answered 500", false},
		{"ensure throttled", sim.Fault{PathPrefix: "/v1/loadbalancers", ErrorRate: 1, Status: 429, RetryAfter: 2},
			func(e *env, svc *abi.Service) error {
				_, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a"))
				return err
			}, "ensuring load balancer", true},
		{"create 503", sim.Fault{Route: "POST /v1/loadbalancers", ErrorRate: 1, Status: 503},
			func(e *env, _ *abi.Service) error {
				_, err := e.p.EnsureLoadBalancer(ctx, testCluster, service("0000aaaa-0000-0000-0000-000000000000"), nodes("id:i-a"))
				return err
			}, "POST /v1/loadbalancers: cloud answered 503", false},
		{"update 503 with Retry-After", sim.Fault{Route: "PUT /v1/loadbalancers/{name}", ErrorRate: 1, Status: 503, RetryAfter: 4},
			func(e *env, svc *abi.Service) error {
				return e.p.UpdateLoadBalancer(ctx, testCluster, svc, nodes("id:i-a"))
			},
			"updating load balancer", true},
		{"delete 500", sim.Fault{Route: "DELETE /v1/loadbalancers/{name}", ErrorRate: 1, Status: 500},
			func(e *env, svc *abi.Service) error { return e.p.EnsureLoadBalancerDeleted(ctx, testCluster, svc) },
			"deleting load balancer", false},
		{"list instances 500", sim.Fault{Route: "GET /v1/instances", ErrorRate: 1, Status: 500},
			func(e *env, svc *abi.Service) error {
				_, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("node-a"))
				return err
			}, "listing instances", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "")
			svc := service(uid1)
			if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-b")); err != nil {
				t.Fatal(err)
			}
			e.fault(t, tt.fault)
			err := tt.call(e, svc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if _, retry := retryDelay(err); retry != tt.retry {
				t.Errorf("retry = %v, want %v (error %v)", retry, tt.retry, err)
			}
			if n := len(e.cloud.LoadBalancers()); n != 1 {
				t.Errorf("%d load balancers after a failure, want 1", n)
			}
		})
	}
}

// TestListLoadBalancers: the listing names this cluster's load balancers
// with their Service, leaves out another cluster's and untagged ones, and
// a failed listing is an error, never an empty list.
func TestListLoadBalancers(t *testing.T) {
	e := newEnv(t, "")
	svc := service(uid1)
	if _, err := e.p.EnsureLoadBalancer(ctx, testCluster, svc, nodes("id:i-a")); err != nil {
		t.Fatal(err)
	}
	for _, lb := range []sim.LoadBalancer{
		{Name: "other-cluster", Ports: []sim.Port{{Protocol: "TCP", Port: 80, NodePort: 30080}}, Tags: map[string]string{TagCluster: "other", TagServiceUID: "u-other", TagService: "default/web"}},
		{Name: "by-hand", Ports: []sim.Port{{Protocol: "TCP", Port: 80, NodePort: 30080}}, Tags: map[string]string{TagCluster: testCluster}},
	} {
		if _, err := e.cloud.CreateLoadBalancer(lb); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.p.ListLoadBalancers(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []abi.OwnedLoadBalancer{{Name: e.p.GetLoadBalancerName(ctx, testCluster, svc), ClusterName: testCluster,
		ServiceUID: uid1, ServiceNamespace: "default", ServiceName: "web"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListLoadBalancers = %+v\nwant %+v", got, want)
	}
	e.fault(t, sim.Fault{Route: "GET /v1/loadbalancers", ErrorRate: 1, Status: 500})
	if got, err := e.p.ListLoadBalancers(ctx, testCluster); err == nil {
		t.Fatalf("ListLoadBalancers with the cloud failing = %v, nil; want an error", got)
	}
}

// ---- Routes ----

const nodeUID = "6b1d7e0c-2f1a-4f55-9f0e-1c2d3e4f5a6b"

func TestRoutes(t *testing.T) {
	e := newEnv(t, "")
	rt := &abi.Route{TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"}
	name := testCluster + "-" + nodeUID

	if err := e.p.CreateRoute(ctx, testCluster, nodeUID, rt); err != nil {
		t.Fatalf("CreateRoute: %v", err)
	}
	if r, ok := e.cloud.Route(name); !ok || r.TargetInstance != "i-a" || r.DestinationCIDR != "10.244.1.0/24" {
		t.Fatalf("cloud route %q = %+v, %v", name, r, ok)
	}
	// Creating it again (a retry) succeeds without a second route.
	if err := e.p.CreateRoute(ctx, testCluster, nodeUID, rt); err != nil {
		t.Fatalf("CreateRoute again: %v", err)
	}
	if c := e.cloud.Counters(); c.RoutesCreated != 1 || c.Status("POST /v1/routes", 409) != 1 {
		t.Errorf("routes created %d, statuses %v", c.RoutesCreated, c.EndpointStatuses)
	}

	// Conflicts that are not the same route are errors.
	conflicts := []struct {
		hint string
		rt   abi.Route
		want string
	}{
		{nodeUID, abi.Route{TargetNode: "node-c", DestinationCIDR: "10.244.1.0/24"}, `to "node-a"`},
		{nodeUID, abi.Route{TargetNode: "node-a", DestinationCIDR: "10.244.9.0/24"}, "exists for 10.244.1.0/24"},
		{"other-uid", abi.Route{TargetNode: "node-c", DestinationCIDR: "10.244.1.0/24"}, "already exists for destination"},
		{"uid-x", abi.Route{TargetNode: "node-x", DestinationCIDR: "10.244.7.0/24"}, "cloud answered 400"},
		{"uid-y", abi.Route{TargetNode: "node-a", DestinationCIDR: "10.244.7.1/24"}, "cloud answered 400"},
		{"", abi.Route{TargetNode: "node-a", DestinationCIDR: "10.244.7.0/24"}, "name hint"},
		{"uid-z", abi.Route{DestinationCIDR: "10.244.7.0/24"}, "needs a target node"},
	}
	for _, c := range conflicts {
		if err := e.p.CreateRoute(ctx, testCluster, c.hint, &c.rt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CreateRoute(%q, %+v) error = %v, want one containing %q", c.hint, c.rt, err, c.want)
		}
	}

	// A lost create response, then the retry.
	e.fault(t, sim.Fault{Route: "POST /v1/routes", FailNext: 1, AfterCommit: true})
	rt2 := &abi.Route{TargetNode: "node-c", DestinationCIDR: "10.244.2.0/24"}
	if err := e.p.CreateRoute(ctx, testCluster, "uid-c", rt2); err == nil || !strings.Contains(err.Error(), "cloud answered 503") {
		t.Fatalf("CreateRoute with a lost response: %v", err)
	}
	if err := e.p.CreateRoute(ctx, testCluster, "uid-c", rt2); err != nil {
		t.Fatalf("CreateRoute retry: %v", err)
	}

	// Another cluster's route is not listed.
	if _, err := e.cloud.CreateRoute(sim.Route{Name: "other-" + nodeUID, DestinationCIDR: "10.9.0.0/24", TargetName: "node-b"}); err != nil {
		t.Fatal(err)
	}
	// A route whose instance was terminated is a blackhole.
	if err := e.cloud.DeleteInstance("i-c"); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.ListRoutes(ctx, testCluster)
	if err != nil {
		t.Fatalf("ListRoutes: %v", err)
	}
	want := []abi.Route{
		{Name: name, TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"},
		{Name: "demo-uid-c", DestinationCIDR: "10.244.2.0/24", Blackhole: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListRoutes = %+v\nwant %+v", got, want)
	}

	// Delete, twice.
	for i := 0; i < 2; i++ {
		for _, r := range want {
			if err := e.p.DeleteRoute(ctx, testCluster, &r); err != nil {
				t.Fatalf("DeleteRoute(%s) #%d: %v", r.Name, i+1, err)
			}
		}
	}
	if got, err := e.p.ListRoutes(ctx, testCluster); err != nil || len(got) != 0 {
		t.Errorf("ListRoutes after delete = %+v, %v", got, err)
	}
	if rs := e.cloud.Routes(); len(rs) != 1 || rs[0].Name != "other-"+nodeUID {
		t.Errorf("cloud routes = %+v, want only the other cluster's", rs)
	}
}

func TestRouteFailures(t *testing.T) {
	tests := []struct {
		name  string
		fault sim.Fault
		call  func(p *Provider) error
		want  string
		retry bool
	}{
		{"list throttled", sim.Fault{PathPrefix: "/v1/routes", ErrorRate: 1, Status: 429},
			func(p *Provider) error { _, err := p.ListRoutes(ctx, testCluster); return err }, "listing routes", true},
		{"create 500", sim.Fault{Route: "POST /v1/routes", ErrorRate: 1, Status: 500},
			func(p *Provider) error {
				return p.CreateRoute(ctx, testCluster, "u1", &abi.Route{TargetNode: "node-a", DestinationCIDR: "10.244.5.0/24"})
			}, "creating route demo-u1", false},
		{"delete 503", sim.Fault{Route: "DELETE /v1/routes/{name}", ErrorRate: 1, Status: 503, RetryAfter: 1},
			func(p *Provider) error {
				return p.DeleteRoute(ctx, testCluster, &abi.Route{Name: "demo-u1", DestinationCIDR: "10.244.5.0/24"})
			}, "deleting route demo-u1", true},
		{"delete without name", sim.Fault{},
			func(p *Provider) error { return p.DeleteRoute(ctx, testCluster, &abi.Route{}) }, "has no name", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "")
			e.fault(t, tt.fault)
			err := tt.call(e.p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if _, retry := retryDelay(err); retry != tt.retry {
				t.Errorf("retry = %v, want %v (error %v)", retry, tt.retry, err)
			}
		})
	}
}

func TestRoutePrefix(t *testing.T) {
	tests := []struct{ cluster, want string }{
		{"demo", "demo-"},
		{"kubernetes", "kubernetes-"},
		{"", ""},
		{"my cluster/1", "my-cluster-1-"},
		{"-_x", "x-"},
		{"__", ""},
		{strings.Repeat("c", 100), strings.Repeat("c", maxClusterPrefix) + "-"},
	}
	for _, tt := range tests {
		if got := routePrefix(tt.cluster); got != tt.want {
			t.Errorf("routePrefix(%q) = %q, want %q", tt.cluster, got, tt.want)
		}
	}
}

// ---- helpers ----

func TestJSONWriter(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "nl\n\r\t\x01\x1f", "ünïcödé ☃", "bad\xffutf8", "<&>",
		"exactly8", "seven77\"", "0123456789abcdef\\x", "i-0001 and a longer\tone ☃ after",
		"0123456789abcdef01234567", "0123456789abcdef0123456\"", "0123456789abcdef\x01", "0123456789abcdef01234567\n"} {
		var w jsonWriter
		w.str(s)
		var back string
		if err := json.Unmarshal(w.b, &back); err != nil {
			t.Errorf("str(%q) = %s: %v", s, w.b, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("str(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
	lb := &loadBalancer{Name: "n", IP: "1.2.3.4", Ports: []lbPort{{Protocol: "TCP", Port: 1, NodePort: 2}},
		Targets: []string{"i-1", "i-2"}, Tags: map[string]string{"b": "2", "a": "1"}}
	targets := new(nodeTargets).encodeTargets(lb.Targets)
	if got, want := string(lb.body(nil, true, targets)), `{"name":"n","ip":"1.2.3.4","ports":[{"protocol":"TCP","port":1,"nodePort":2}],"targets":["i-1","i-2"],"tags":{"a":"1","b":"2"}}`; got != want {
		t.Errorf("body = %s\nwant %s", got, want)
	}
	if got := string(lb.body(nil, false, targets)); strings.Contains(got, "ip") {
		t.Errorf("PUT body has an ip: %s", got)
	}
}

func TestSameSpec(t *testing.T) {
	base := func() *loadBalancer {
		return &loadBalancer{Name: "n", IP: "1.2.3.4",
			Ports:   []lbPort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}},
			Targets: []string{"i-a", "i-b"}, HealthCheck: &healthCheck{NodePort: 32000, Path: "/healthz"},
			SourceRanges: []string{"10.0.0.0/8"}, Tags: map[string]string{TagService: "d/w"}}
	}
	tests := []struct {
		name   string
		mutate func(have *loadBalancer)
		same   bool
	}{
		{"identical", func(*loadBalancer) {}, true},
		{"targets in another order", func(h *loadBalancer) { h.Targets = []string{"i-b", "i-a"} }, true},
		{"source ranges removed", func(h *loadBalancer) { h.SourceRanges = nil }, false},
		{"other target", func(h *loadBalancer) { h.Targets = []string{"i-a", "i-c"} }, false},
		{"fewer targets", func(h *loadBalancer) { h.Targets = h.Targets[:1] }, false},
		{"a target twice, as many", func(h *loadBalancer) { h.Targets = []string{"i-a", "i-a"} }, false},
		{"port name", func(h *loadBalancer) { h.Ports[0].Name = "" }, false},
		{"node port", func(h *loadBalancer) { h.Ports[0].NodePort = 30081 }, false},
		{"no health check", func(h *loadBalancer) { h.HealthCheck = nil }, false},
		{"health check port", func(h *loadBalancer) { h.HealthCheck.NodePort = 1 }, false},
		{"tag value", func(h *loadBalancer) { h.Tags[TagService] = "x/y" }, false},
		{"extra tag", func(h *loadBalancer) { h.Tags["extra"] = "1" }, false},
		{"IP is not spec", func(h *loadBalancer) { h.IP = "5.6.7.8" }, true},
	}
	for _, tt := range tests {
		have := base()
		tt.mutate(have)
		if got := sameSpec(have, base()); got != tt.same {
			t.Errorf("%s: sameSpec = %v, want %v", tt.name, got, tt.same)
		}
	}
	// The cloud omits empty source ranges; the Service may have an empty list.
	have, want := base(), base()
	have.SourceRanges, want.SourceRanges = nil, []string{}
	if !sameSpec(have, want) {
		t.Error("nil and empty source ranges differ")
	}
}

// TestInstanceSnapshot: lookups of many Nodes share one listing; an
// instance the listing lacks is asked for, and only the cloud's answer to
// that makes it gone.
func TestInstanceSnapshot(t *testing.T) {
	e := newEnv(t, "")
	requests := func() int { return len(e.tr.authHeaders()) }
	for _, n := range []abi.Node{{Name: "node-a"}, {Name: "node-b", ProviderID: "simcloud://i-b"}, {Name: "node-c"}} {
		if ok, err := e.p.InstanceExists(ctx, &n); !ok || err != nil {
			t.Fatalf("%s: %v, %v", n.Name, ok, err)
		}
	}
	if got := requests(); got != 1 {
		t.Errorf("three lookups made %d requests, want 1 listing", got)
	}
	if err := e.cloud.DeleteInstance("i-c"); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.p.InstanceExists(ctx, &abi.Node{Name: "node-c", ProviderID: "simcloud://i-c"}); !ok || err != nil {
		t.Errorf("from a listing older than the delete: %v, %v; want true (nothing deleted on a stale answer)", ok, err)
	}
	e.p.instances.Invalidate()
	if ok, err := e.p.InstanceExists(ctx, &abi.Node{Name: "node-c", ProviderID: "simcloud://i-c"}); ok || err != nil {
		t.Errorf("deleted: %v, %v; want false", ok, err)
	}
	if got := requests(); got != 3 {
		t.Errorf("%d requests, want 3: the listings and the direct read that confirmed the delete", got)
	}
}
