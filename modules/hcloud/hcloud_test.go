package hcloud

import (
	"context"
	"errors"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

const token = "s3cret"

type env struct {
	cloud   *hcloudfake.Cloud
	p       *Provider
	network schema.Network
	servers map[string]schema.Server
}

// newEnv starts a fake API with a network and servers a (fsn1), b (nbg1)
// and c (hel1, off), and a provider configured with cfg (JSON without the
// endpoint, which is added).
func newEnv(t *testing.T, cfg string, opts hcloudfake.Options) *env {
	t.Helper()
	opts.Token = token
	cloud := hcloudfake.New(opts)
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	n, err := cloud.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cloud: cloud, network: n, servers: map[string]schema.Server{}}
	for _, s := range []hcloudfake.Server{
		{Name: "a", Location: "fsn1", Network: n.ID},
		{Name: "b", Location: "nbg1", Type: "cax11", Network: n.ID},
		{Name: "c", Location: "hel1", Status: "off", Network: n.ID},
	} {
		got, err := cloud.AddServer(s)
		if err != nil {
			t.Fatal(err)
		}
		e.servers[s.Name] = got
	}
	e.p = New(authHost(t, srv.URL, "token", token))
	if cfg == "" {
		cfg = "{}"
	}
	cfg = `{"endpoint": "` + srv.URL + `/v1", ` + strings.TrimPrefix(strings.TrimSpace(cfg), "{")
	cfg = strings.Replace(cfg, ", }", "}", 1)
	if err := e.p.Init(context.Background(), "test", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	return e
}

// authHost is a native host that applies the credential name, holding
// value, to requests to origin, as the wasm host does for the module.
func authHost(t *testing.T, origin, name, value string) *native.Host {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := credentials.NewTransport("hcloud", credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
		{Name: name, Origins: []string{origin}, Bearer: &credentials.BearerAuth{Key: name}},
	}}, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	return &native.Host{Transport: auth}
}

func (e *env) node(name string) *abi.Node {
	return &abi.Node{Name: name, ProviderID: "hcloud://" + strconv.FormatInt(e.servers[name].ID, 10)}
}

func outcome(err error) abi.Status { return sdk.OutcomeOf(err).Status }

func TestInstanceMetadata(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		node func(e *env) *abi.Node
		want func(e *env) *abi.InstanceMetadata
	}{
		{
			name: "by provider ID, ipv4 without network",
			node: func(e *env) *abi.Node { return e.node("a") },
			want: func(e *env) *abi.InstanceMetadata {
				return &abi.InstanceMetadata{ProviderID: e.node("a").ProviderID, InstanceType: "cpx11", Zone: "fsn1-dc14", Region: "fsn1",
					NodeAddresses:    []abi.NodeAddress{{Type: "Hostname", Address: "a"}, {Type: "ExternalIP", Address: e.servers["a"].PublicNet.IPv4.IP}},
					AdditionalLabels: map[string]string{ProvidedByLabel: "cloud"}}
			},
		},
		{
			name: "by name, dualstack with network by name",
			cfg:  `{"network": "k8s", "addressFamily": "dualstack"}`,
			node: func(e *env) *abi.Node { return &abi.Node{Name: "b"} },
			want: func(e *env) *abi.InstanceMetadata {
				s := e.servers["b"]
				v6 := strings.TrimSuffix(s.PublicNet.IPv6.IP, "/64") + "1"
				return &abi.InstanceMetadata{ProviderID: e.node("b").ProviderID, InstanceType: "cax11", Zone: "nbg1-dc3", Region: "nbg1",
					NodeAddresses: []abi.NodeAddress{{Type: "Hostname", Address: "b"}, {Type: "ExternalIP", Address: s.PublicNet.IPv4.IP},
						{Type: "ExternalIP", Address: v6}, {Type: "InternalIP", Address: s.PrivateNet[0].IP}},
					AdditionalLabels: map[string]string{ProvidedByLabel: "cloud"}}
			},
		},
		{
			name: "ipv6 only, network by ID, zone label off",
			cfg:  `{"network": "NETWORK_ID", "addressFamily": "ipv6", "zoneLabel": false}`,
			node: func(e *env) *abi.Node { return e.node("c") },
			want: func(e *env) *abi.InstanceMetadata {
				s := e.servers["c"]
				return &abi.InstanceMetadata{ProviderID: e.node("c").ProviderID, InstanceType: "cpx11", Region: "hel1",
					NodeAddresses: []abi.NodeAddress{{Type: "Hostname", Address: "c"},
						{Type: "ExternalIP", Address: strings.TrimSuffix(s.PublicNet.IPv6.IP, "/64") + "1"}, {Type: "InternalIP", Address: s.PrivateNet[0].IP}},
					AdditionalLabels: map[string]string{ProvidedByLabel: "cloud"}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "", hcloudfake.Options{})
			if tt.cfg != "" {
				e = newEnvWithNetworkID(t, tt.cfg)
			}
			got, err := e.p.InstanceMetadata(context.Background(), tt.node(e))
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(e); !reflect.DeepEqual(got, want) {
				t.Fatalf("metadata\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// newEnvWithNetworkID substitutes the network's ID for NETWORK_ID in cfg,
// which needs the network to exist first.
func newEnvWithNetworkID(t *testing.T, cfg string) *env {
	e := newEnv(t, "", hcloudfake.Options{})
	cfg = strings.ReplaceAll(cfg, "NETWORK_ID", strconv.FormatInt(e.network.ID, 10))
	endpoint := e.p.api.BaseURL
	if err := e.p.Init(context.Background(), "test", []byte(`{"endpoint": "`+endpoint+`", `+strings.TrimPrefix(cfg, "{"))); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestInstanceExistsAndShutdown(t *testing.T) {
	e := newEnv(t, "", hcloudfake.Options{})
	ctx := context.Background()
	for name, wantOff := range map[string]bool{"a": false, "c": true} {
		if off, err := e.p.InstanceShutdown(ctx, e.node(name)); err != nil || off != wantOff {
			t.Errorf("InstanceShutdown(%s) = %v, %v; want %v", name, off, err, wantOff)
		}
	}
	a := e.node("a")
	if ok, err := e.p.InstanceExists(ctx, a); !ok || err != nil {
		t.Fatalf("InstanceExists before delete: %v %v", ok, err)
	}
	e.cloud.DeleteServer(e.servers["a"].ID)
	e.p.servers.Invalidate() // as when the snapshot is past its max age
	for _, node := range []*abi.Node{a, {Name: "a"}} {
		if ok, err := e.p.InstanceExists(ctx, node); ok || err != nil {
			t.Fatalf("InstanceExists(%+v) after delete: %v %v; want false, nil", node, ok, err)
		}
	}
	if _, err := e.p.InstanceMetadata(ctx, a); outcome(err) != abi.StatusNotFound {
		t.Fatalf("InstanceMetadata after delete: %v, want not found", err)
	}
}

// Only the API's own not_found may say a server is gone: every failure
// must be an error, and throttling a RetryAfter.
func TestFailuresNeverSayGone(t *testing.T) {
	tests := []struct {
		name   string
		fault  faultinject.Fault
		status abi.Status
	}{
		{"server error", faultinject.Fault{Status: 500, Always: true}, abi.StatusError},
		{"unavailable with Retry-After", faultinject.Fault{Status: 503, Always: true, RetryAfter: 3}, abi.StatusRetryAfter},
		{"throttled", faultinject.Fault{Status: 429, Always: true, RetryAfter: 2}, abi.StatusRetryAfter},
		{"unauthorized", faultinject.Fault{Status: 401, Always: true}, abi.StatusError},
		{"locked", faultinject.Fault{Status: 423, Always: true}, abi.StatusRetryAfter},
		{"conflict", faultinject.Fault{Status: 409, Always: true}, abi.StatusRetryAfter},
		{"timeout", faultinject.Fault{Latency: 2 * time.Second}, abi.StatusError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, `{"requestTimeout": "300ms"}`, hcloudfake.Options{})
			tt.fault.Name = "f"
			if _, err := e.cloud.Faults.Add(tt.fault); err != nil {
				t.Fatal(err)
			}
			for _, node := range []*abi.Node{e.node("a"), {Name: "a"}} {
				ok, err := e.p.InstanceExists(context.Background(), node)
				if err == nil || ok || outcome(err) != tt.status {
					t.Fatalf("InstanceExists(%+v) = %v, %v (status %v); want an error of status %v", node, ok, err, outcome(err), tt.status)
				}
			}
		})
	}
	// A 404 that is not the API's not_found (a proxy, a wrong path) proves
	// nothing.
	e := newEnv(t, "", hcloudfake.Options{})
	e.p.api.BaseURL += "/wrong"
	if ok, err := e.p.InstanceExists(context.Background(), e.node("a")); err == nil || ok {
		t.Fatalf("InstanceExists through a wrong path = %v, %v; want an error", ok, err)
	}
	robot := &abi.Node{Name: "r", ProviderID: "hrobot://7"}
	if ok, err := e.p.InstanceExists(context.Background(), robot); err == nil || ok {
		t.Fatalf("InstanceExists of a Robot server = %v, %v; want an error", ok, err)
	}
}

func testService(uid string, ann map[string]string, ports ...abi.ServicePort) *abi.Service {
	return &abi.Service{Namespace: "default", Name: "web", UID: uid, Annotations: ann, Ports: ports}
}

func TestLoadBalancerLifecycle(t *testing.T) {
	e := newEnv(t, `{"network": "k8s", "loadBalancers": {"location": "nbg1"}}`, hcloudfake.Options{ActionPolls: 2})
	ctx := context.Background()
	svc := testService("1b4c1a7e-0000-4000-8000-000000000001", map[string]string{
		annType: "lb21", annAlgorithmType: "least_connections", annUsePrivateIP: "true",
		annHCInterval: "5s", annHCRetries: "2", annIPv6Disabled: "true",
	}, abi.ServicePort{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}, abi.ServicePort{Name: "https", Protocol: "TCP", Port: 443, NodePort: 30443})
	nodes := []abi.Node{*e.node("a"), *e.node("b")}

	st, err := e.p.EnsureLoadBalancer(ctx, "test", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	lbs := e.cloud.LoadBalancers()
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers, want 1", len(lbs))
	}
	lb := lbs[0]
	if lb.Name != "a1b4c1a7e000040008000000000000001"[:32] || lb.Labels[ServiceUIDLabel] != svc.UID || lb.LoadBalancerType.Name != "lb21" ||
		lb.Algorithm.Type != "least_connections" || lb.Location.Name != "nbg1" || len(lb.PrivateNet) != 1 {
		t.Fatalf("load balancer %+v", lb)
	}
	if len(lb.Services) != 2 || lb.Services[0].DestinationPort != 30080 || lb.Services[0].HealthCheck.Interval != 5 ||
		lb.Services[0].HealthCheck.Retries != 2 || lb.Services[0].HealthCheck.Port != 30080 {
		t.Fatalf("services %+v", lb.Services)
	}
	if got := targetIDs(lb); !reflect.DeepEqual(got, map[int64]bool{e.servers["a"].ID: true, e.servers["b"].ID: true}) {
		t.Fatalf("targets %v", got)
	}
	for _, tg := range lb.Targets {
		if !tg.UsePrivateIP {
			t.Fatalf("target %+v does not use the private IP", tg)
		}
	}
	want := &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{IP: lb.PublicNet.IPv4.IP, IPMode: "VIP"}, {IP: lb.PrivateNet[0].IP, IPMode: "VIP"}}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	if got, ok, err := e.p.GetLoadBalancer(ctx, "test", svc); err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("GetLoadBalancer = %+v %v %v", got, ok, err)
	}

	// b leaves, c joins, port 443 goes: one target swapped, one service gone.
	svc.Ports = svc.Ports[:1]
	if err := e.p.UpdateLoadBalancer(ctx, "test", svc, []abi.Node{*e.node("a"), *e.node("c")}); err != nil {
		t.Fatal(err)
	}
	lb = e.cloud.LoadBalancers()[0]
	if got := targetIDs(lb); !reflect.DeepEqual(got, map[int64]bool{e.servers["a"].ID: true, e.servers["c"].ID: true}) {
		t.Fatalf("targets after update %v", got)
	}
	if len(lb.Services) != 1 || lb.Services[0].ListenPort != 80 {
		t.Fatalf("services after update %+v", lb.Services)
	}

	if err := e.p.EnsureLoadBalancerDeleted(ctx, "test", svc); err != nil {
		t.Fatal(err)
	}
	if n := len(e.cloud.LoadBalancers()); n != 0 {
		t.Fatalf("%d load balancers after delete", n)
	}
	if err := e.p.EnsureLoadBalancerDeleted(ctx, "test", svc); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, ok, err := e.p.GetLoadBalancer(ctx, "test", svc); ok || err != nil {
		t.Fatalf("GetLoadBalancer after delete: %v %v", ok, err)
	}
}

func targetIDs(lb schema.LoadBalancer) map[int64]bool {
	out := map[int64]bool{}
	for _, t := range lb.Targets {
		out[t.Server.ID] = true
	}
	return out
}

func TestLoadBalancerBadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		ann  map[string]string
		want string
	}{
		{"no location", "", nil, "neither"},
		{"unsupported annotation", `{"loadBalancers": {"location": "fsn1"}}`, map[string]string{annPrefix + "node-selector": "role=lb"}, "not supported"},
		{"bad boolean", `{"loadBalancers": {"location": "fsn1"}}`, map[string]string{annDisablePublicNetwork: "maybe"}, "not a boolean"},
		{"bad algorithm", `{"loadBalancers": {"location": "fsn1"}}`, map[string]string{annAlgorithmType: "random"}, "round_robin"},
		{"bad duration", `{"loadBalancers": {"location": "fsn1"}}`, map[string]string{annHCInterval: "5"}, "duration"},
		{"private IPs without network", `{"loadBalancers": {"location": "fsn1"}}`, map[string]string{annUsePrivateIP: "true"}, "needs a network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg, hcloudfake.Options{})
			svc := testService("uid-1", tt.ann, abi.ServicePort{Protocol: "TCP", Port: 80, NodePort: 30080})
			_, err := e.p.EnsureLoadBalancer(context.Background(), "test", svc, []abi.Node{*e.node("a")})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// A call with a deadline, the host's, waits on a slow action until
// shortly before it, however short callTimeout is, and answers RetryAfter
// before it.
func TestSlowActionWaitsForTheCallsDeadline(t *testing.T) {
	const callTimeout, deadline = 200 * time.Millisecond, 1500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	e := newEnv(t, `{"callTimeout": "200ms", "loadBalancers": {"location": "fsn1"}}`, hcloudfake.Options{ActionPolls: 1000})
	svc := testService("uid-deadline", nil, abi.ServicePort{Protocol: "TCP", Port: 80, NodePort: 30080})
	start := time.Now()
	_, err := e.p.EnsureLoadBalancer(ctx, "test", svc, nil)
	took := time.Since(start)
	if outcome(err) != abi.StatusRetryAfter || ctx.Err() != nil {
		t.Fatalf("EnsureLoadBalancer with a slow action: %v (status %v) after %s; want RetryAfter before the %s deadline", err, outcome(err), took, deadline)
	}
	if took < 2*callTimeout {
		t.Fatalf("the call stopped waiting after %s, by callTimeout (%s), not by its %s deadline", took, callTimeout, deadline)
	}
}

// An action that outlives the call's deadline, or the configured call
// timeout inside a module that is told no deadline, is a RetryAfter, not a
// failure, and the next call finds the load balancer instead of making a
// second one.
func TestSlowActionRetriesLater(t *testing.T) {
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	tests := []struct {
		name string
		cfg  string
		ctx  context.Context
	}{
		{"context deadline", `{"loadBalancers": {"location": "fsn1"}}`, short},
		{"callTimeout", `{"callTimeout": "500ms", "loadBalancers": {"location": "fsn1"}}`, context.Background()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg, hcloudfake.Options{ActionPolls: 1000})
			svc := testService("uid-slow", nil, abi.ServicePort{Protocol: "TCP", Port: 80, NodePort: 30080})
			start := time.Now()
			_, err := e.p.EnsureLoadBalancer(tt.ctx, "test", svc, nil)
			if outcome(err) != abi.StatusRetryAfter || time.Since(start) > 2*time.Second {
				t.Fatalf("EnsureLoadBalancer with a slow action: %v (status %v) after %s, want RetryAfter within the timeout", err, outcome(err), time.Since(start))
			}
			lb, err := e.p.byServiceUID(context.Background(), svc)
			if err != nil || lb == nil {
				t.Fatalf("load balancer after the slow create: %v %v", lb, err)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, `{"network": "k8s"}`, hcloudfake.Options{ActionPolls: 1})
	ctx := context.Background()
	// More servers than one page holds, so that ListRoutes paginates.
	for i := range 60 {
		if _, err := e.cloud.AddServer(hcloudfake.Server{Name: "extra-" + strconv.Itoa(i), Network: e.network.ID}); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := e.p.serverByName(ctx, "extra-59", 0)
	ipOf := func(name string) string {
		s, err := e.p.serverByName(ctx, name, 0)
		if err != nil || s == nil {
			t.Fatalf("server %s: %v", name, err)
		}
		return s.PrivateNet[0].IP
	}
	route := func(node, cidr string) *abi.Route {
		return &abi.Route{TargetNode: node, DestinationCIDR: cidr, TargetNodeAddresses: []abi.NodeAddress{{Type: "InternalIP", Address: ipOf(node)}}}
	}
	for _, r := range []*abi.Route{route("a", "10.244.0.0/24"), route("extra-59", "10.244.1.0/24")} {
		if err := e.p.CreateRoute(ctx, "test", "", r); err != nil {
			t.Fatal(err)
		}
	}
	// The pod CIDR moves to b: the route is replaced.
	if err := e.p.CreateRoute(ctx, "test", "", route("b", "10.244.0.0/24")); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.ListRoutes(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := []abi.Route{
		{Name: last.PrivateNet[0].IP + "-10.244.1.0/24", TargetNode: "extra-59", DestinationCIDR: "10.244.1.0/24"},
		{Name: ipOf("b") + "-10.244.0.0/24", TargetNode: "b", DestinationCIDR: "10.244.0.0/24"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("routes\n got %+v\nwant %+v", got, want)
	}
	// A route whose server is gone is a blackhole, once the server
	// snapshot is newer than the delete (until then it still names the
	// server, which deletes nothing).
	e.cloud.DeleteServer(last.ID)
	if got, _ := e.p.ListRoutes(ctx, "test"); len(got) != 2 || got[0].Blackhole {
		t.Fatalf("routes from a snapshot older than the delete %+v", got)
	}
	e.p.servers.Invalidate()
	if got, _ := e.p.ListRoutes(ctx, "test"); len(got) != 2 || !got[0].Blackhole || got[0].TargetNode != "" {
		t.Fatalf("routes after a server delete %+v", got)
	}
	// Refused before any request: the route controller retries it at
	// every reconcile until the Node is initialized.
	bad := route("a", "10.244.2.0/24")
	bad.TargetNodeAddresses = []abi.NodeAddress{{Type: "InternalIP", Address: "192.0.2.1"}}
	before := e.cloud.Requests()
	if err := e.p.CreateRoute(ctx, "test", "", bad); err == nil {
		t.Fatal("a route through an address the node does not have was created")
	}
	if after := e.cloud.Requests(); !maps.Equal(before, after) {
		t.Errorf("a refused route made requests: before %v, after %v", before, after)
	}
	for _, r := range want {
		if err := e.p.DeleteRoute(ctx, "test", &r); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := e.cloud.Network(e.network.ID); len(n.Routes) != 0 {
		t.Fatalf("routes left: %v", n.Routes)
	}
}

func TestInitRejectsBadConfig(t *testing.T) {
	for _, cfg := range []string{`{"addressFamily": "ipv5"}`, `{"endpoint": "ftp://x"}`, `{"unknown": 1}`, `{"requestTimeout": "soon"}`, `{"callTimeout": "-1s"}`,
		`{"loadBalancers": {"algorithmType": "fastest"}}`} {
		p := New(&native.Host{})
		if err := p.Init(context.Background(), "c", []byte(cfg)); err == nil {
			t.Errorf("Init(%s) accepted a bad config", cfg)
		}
	}
	if err := New(&native.Host{}).Init(context.Background(), "c", nil); err != nil {
		t.Errorf("Init without config: %v", err)
	}
}

// The provider never sends a request without the token, which the host
// applies from the credential the provider names.
func TestTokenFromCredential(t *testing.T) {
	cloud := hcloudfake.New(hcloudfake.Options{Token: token})
	srv := httptest.NewServer(cloud.Handler())
	defer srv.Close()
	p := New(authHost(t, srv.URL, "hcloud", "wrong"))
	if err := p.Init(context.Background(), "c", []byte(`{"endpoint": "`+srv.URL+`/v1", "tokenCredential": "hcloud"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := p.InstanceExists(context.Background(), &abi.Node{Name: "x"})
	if err == nil || !strings.Contains(err.Error(), "401") || errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("with a wrong token: %v", err)
	}
	if resp, _ := http.Get(srv.URL + "/v1/servers"); resp.StatusCode != 401 {
		t.Fatalf("the fake accepted a request without token: %d", resp.StatusCode)
	}
}

// Nodes beyond the type's max_targets are left out as the official CCM
// leaves them: targets in place stay, the others are added in Node order
// up to the limit, and the call succeeds with a warning naming how many
// Nodes were not added, so the controller does not retry it in a loop.
func TestLoadBalancerMaxTargets(t *testing.T) {
	limit := func(typ string) int {
		for _, lt := range hcloudfake.LoadBalancerTypes {
			if lt.Name == typ {
				return lt.MaxTargets
			}
		}
		t.Fatalf("no load balancer type %s", typ)
		return 0
	}
	max := limit(defaultType)
	n := max + 5
	span := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name string
		// first are the Nodes (indexes) of EnsureLoadBalancer, then those
		// of an UpdateLoadBalancer after it, if any, with the type
		// annotation thenType if set.
		first, then []int
		thenType    string
		// meddle makes the servers of these Nodes targets at the
		// provider's first add_target, as another client could between
		// its read and its write.
		meddle []int
		want   []int // the Nodes whose servers are targets in the end
	}{
		{name: "more Nodes than the type takes", first: span(0, n), want: span(0, max)},
		{name: "targets in place stay", first: span(5, n), then: span(0, n), want: span(5, n)},
		{name: "a Node that leaves frees its place", first: span(0, n), then: span(1, n), want: span(1, max+1)},
		{name: "a larger type takes them all", first: span(0, n), then: span(0, n), thenType: "lb21", want: span(0, n)},
		{name: "filled by another client meanwhile", first: span(0, n), meddle: span(n-max, n), want: span(n-max, n)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, `{"loadBalancers": {"location": "fsn1"}}`, hcloudfake.Options{})
			var logs strings.Builder
			e.p.host.(*native.Host).Logger = log.New(&logs, "", 0)
			var servers []int64
			for i := range n {
				s, err := e.cloud.AddServer(hcloudfake.Server{Name: "node-" + strconv.Itoa(i)})
				if err != nil {
					t.Fatal(err)
				}
				servers = append(servers, s.ID)
			}
			nodes := func(idx []int) []abi.Node {
				var out []abi.Node
				for _, i := range idx {
					out = append(out, abi.Node{Name: "node-" + strconv.Itoa(i), ProviderID: "hcloud://" + strconv.FormatInt(servers[i], 10)})
				}
				return out
			}
			targetActions, meddled := 0, false
			proxy(t, e, func(r *http.Request, fake http.Handler) {
				add := strings.HasSuffix(r.URL.Path, "/actions/add_target")
				if r.Method != "POST" || !add && !strings.HasSuffix(r.URL.Path, "/actions/remove_target") {
					return
				}
				targetActions++
				if !add || tt.meddle == nil || meddled {
					return
				}
				meddled = true
				for _, i := range tt.meddle {
					req := httptest.NewRequest("POST", r.URL.Path, strings.NewReader(`{"type": "server", "server": {"id": `+strconv.FormatInt(servers[i], 10)+`}}`))
					rec := httptest.NewRecorder()
					fake.ServeHTTP(rec, req)
					if rec.Code != http.StatusCreated {
						t.Errorf("meddling add_target of server %d: %d %s", servers[i], rec.Code, rec.Body)
					}
				}
			})
			ctx := context.Background()
			svc := testService("uid-max", map[string]string{}, abi.ServicePort{Protocol: "TCP", Port: 80, NodePort: 30080})
			if _, err := e.p.EnsureLoadBalancer(ctx, "test", svc, nodes(tt.first)); err != nil {
				t.Fatalf("EnsureLoadBalancer with %d Nodes: %v", len(tt.first), err)
			}
			last := tt.first
			if tt.then != nil {
				if tt.thenType != "" {
					svc.Annotations[annType] = tt.thenType
				}
				if err := e.p.UpdateLoadBalancer(ctx, "test", svc, nodes(tt.then)); err != nil {
					t.Fatalf("UpdateLoadBalancer with %d Nodes: %v", len(tt.then), err)
				}
				last = tt.then
			}

			// Once settled, the same call still succeeds, and tries no
			// target the API would refuse.
			logs.Reset()
			before := targetActions
			if err := e.p.UpdateLoadBalancer(ctx, "test", svc, nodes(last)); err != nil {
				t.Fatalf("repeated UpdateLoadBalancer: %v", err)
			}
			if got := targetActions - before; got != 0 {
				t.Fatalf("repeated UpdateLoadBalancer sent %d target actions, want none", got)
			}
			lb := e.cloud.LoadBalancers()[0]
			if len(lb.Targets) > limit(lb.LoadBalancerType.Name) {
				t.Fatalf("%d targets on %s, more than its max_targets %d", len(lb.Targets), lb.LoadBalancerType.Name, limit(lb.LoadBalancerType.Name))
			}
			want := map[int64]bool{}
			for _, i := range tt.want {
				want[servers[i]] = true
			}
			if got := targetIDs(lb); !reflect.DeepEqual(got, want) {
				t.Fatalf("%d targets %v, want the servers of Nodes %v", len(got), got, tt.want)
			}
			notAdded := strconv.Itoa(len(last)-len(tt.want)) + " Nodes not added"
			if warned := strings.Contains(logs.String(), notAdded); warned != (len(last) > len(tt.want)) {
				t.Fatalf("log %q; want a warning with %q only when Nodes are left out", logs.String(), notAdded)
			}
		})
	}
}

// proxy puts a proxy in front of the fake, which hands each request to
// before, with the fake's handler, before the fake answers it.
func proxy(t *testing.T, e *env, before func(r *http.Request, fake http.Handler)) {
	fake := e.cloud.Handler()
	authenticated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		fake.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before(r, authenticated)
		authenticated.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	// The proxy authenticates: the provider's credential is bound to the
	// fake's own origin.
	e.p.api.BaseURL, e.p.api.Credential = srv.URL+"/v1", ""
}

// The official CCM does not check max_services: a Service with more ports
// than the type allows fails with the API's refusal, here as there.
func TestLoadBalancerMaxServices(t *testing.T) {
	e := newEnv(t, `{"loadBalancers": {"location": "fsn1"}}`, hcloudfake.Options{})
	max := 0
	for _, lt := range hcloudfake.LoadBalancerTypes {
		if lt.Name == defaultType {
			max = lt.MaxServices
		}
	}
	var ports []abi.ServicePort
	for i := range max + 1 {
		ports = append(ports, abi.ServicePort{Protocol: "TCP", Port: int32(1000 + i), NodePort: int32(30000 + i)})
	}
	_, err := e.p.EnsureLoadBalancer(context.Background(), "test", testService("uid-ports", nil, ports...), []abi.Node{*e.node("a")})
	if err == nil || outcome(err) != abi.StatusError || !strings.Contains(err.Error(), "resource_limit_exceeded") {
		t.Fatalf("EnsureLoadBalancer with %d ports on %s: %v (status %v); want the API's resource_limit_exceeded", len(ports), defaultType, err, outcome(err))
	}
	if lb := e.cloud.LoadBalancers()[0]; len(lb.Services) != max {
		t.Fatalf("%d services, want %s's max_services %d", len(lb.Services), defaultType, max)
	}
}

// TestListLoadBalancers: the listing selects this cluster's load balancers
// by label at the API, over every page, leaves out another cluster's and
// unlabelled ones, and is an error when a page fails or the pages fall
// short of the announced total, never a shorter list.
func TestListLoadBalancers(t *testing.T) {
	e := newEnv(t, `{"loadBalancers": {"location": "fsn1"}}`, hcloudfake.Options{})
	ctx := context.Background()
	svc := testService("0c0c0c0c-0000-4000-8000-000000000001", nil, abi.ServicePort{Protocol: "TCP", Port: 80, NodePort: 30080})
	if _, err := e.p.EnsureLoadBalancer(ctx, "test", svc, []abi.Node{*e.node("a")}); err != nil {
		t.Fatal(err)
	}
	var want []abi.OwnedLoadBalancer
	for _, lb := range e.cloud.LoadBalancers() {
		if lb.Labels[ClusterLabel] != "test" {
			t.Fatalf("a created load balancer is labelled %v, want %s=test", lb.Labels, ClusterLabel)
		}
		want = append(want, abi.OwnedLoadBalancer{Name: lb.Name, ID: strconv.FormatInt(lb.ID, 10), ClusterName: "test", ServiceUID: svc.UID})
	}
	// More than a page of this cluster's, and others the selector excludes.
	for i := range 60 {
		lb, err := e.cloud.AddLoadBalancer("late-"+strconv.Itoa(i), "fsn1", map[string]string{ServiceUIDLabel: "u-" + strconv.Itoa(i), ClusterLabel: "test"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, abi.OwnedLoadBalancer{Name: lb.Name, ID: strconv.FormatInt(lb.ID, 10), ClusterName: "test", ServiceUID: "u-" + strconv.Itoa(i)})
	}
	for name, labels := range map[string]map[string]string{
		"other-cluster": {ServiceUIDLabel: "u-x", ClusterLabel: "other"},
		"official-ccm":  {ServiceUIDLabel: "u-y"},
		"by-hand":       {ClusterLabel: "test"},
	} {
		if _, err := e.cloud.AddLoadBalancer(name, "fsn1", labels); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.p.ListLoadBalancers(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListLoadBalancers = %d entries %+v\nwant %d %+v", len(got), got, len(want), want)
	}
	if _, err := e.p.ListLoadBalancers(ctx, "not a label value!"); err == nil {
		t.Error("a cluster name that cannot be a label value listed load balancers")
	}

	// The second page fails; then the pages announce one entry more.
	var failPage2, lie atomic.Bool
	failPage2.Store(true)
	fake := e.cloud.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
		if r.URL.Path == "/v1/load_balancers" && failPage2.Load() && r.URL.Query().Get("page") == "2" {
			http.Error(w, `{"error":{"code":"server_error","message":"boom"}}`, 500)
			return
		}
		rec := httptest.NewRecorder()
		fake.ServeHTTP(rec, r)
		body := rec.Body.String()
		if lie.Load() {
			body = strings.Replace(body, `"total_entries":61`, `"total_entries":62`, 1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	// The server authenticates: the provider's credential is bound to the
	// fake's own origin.
	e.p.api.BaseURL, e.p.api.Credential = srv.URL+"/v1", ""
	if got, err := e.p.ListLoadBalancers(ctx, "test"); err == nil {
		t.Errorf("a listing whose second page failed = %d entries, nil; want an error", len(got))
	}
	failPage2.Store(false)
	lie.Store(true)
	if got, err := e.p.ListLoadBalancers(ctx, "test"); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("a listing short of its announced total = %d entries, %v; want an error", len(got), err)
	}
}
