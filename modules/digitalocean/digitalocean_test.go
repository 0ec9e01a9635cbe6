package digitalocean

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/digitalocean/godo"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

const token = "do-s3cret"

type env struct {
	cloud    *dofake.Cloud
	p        *Provider
	droplets map[string]godo.Droplet
}

// newEnv starts a fake API with droplets a (fra1), b (ams3, no public
// IPv4) and c (fra1, off), and a provider configured with cfg (JSON
// fields without the endpoint, which is added). wrap, when set, wraps the
// fake's handler.
func newEnv(t *testing.T, cfg string, opts dofake.Options, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	opts.Token = token
	cloud := dofake.New(opts)
	handler := cloud.Handler()
	if wrap != nil {
		handler = wrap(handler)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	e := &env{cloud: cloud, droplets: map[string]godo.Droplet{}}
	for _, d := range []dofake.Droplet{{Name: "a"}, {Name: "b", Region: "ams3", Size: "s-1vcpu-1gb", NoPublicIPv4: true}, {Name: "c", Status: "off"}} {
		got, err := cloud.AddDroplet(d)
		if err != nil {
			t.Fatal(err)
		}
		e.droplets[d.Name] = got
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := credentials.NewTransport("digitalocean", credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{
		{Name: "token", Origins: []string{srv.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
	}}, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	e.p = New(&native.Host{Transport: auth})
	if err := e.p.Init(context.Background(), "test", []byte(`{"endpoint": "`+srv.URL+`", "region": "fra1"`+cfg+`}`)); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) node(name string) *abi.Node {
	return &abi.Node{Name: name, ProviderID: "digitalocean://" + strconv.Itoa(e.droplets[name].ID)}
}

func ip(d godo.Droplet, f func(*godo.Droplet) (string, error)) string {
	v, _ := f(&d)
	return v
}

func outcome(err error) abi.Status { return sdk.OutcomeOf(err).Status }

// TestInstanceMetadata: the official CCM's provider ID, type, region and
// addresses, found by provider ID or, without one, by the droplet's name
// or any of its addresses.
func TestInstanceMetadata(t *testing.T) {
	e := newEnv(t, "", dofake.Options{}, nil)
	a, b := e.droplets["a"], e.droplets["b"]
	wantA := &abi.InstanceMetadata{ProviderID: e.node("a").ProviderID, InstanceType: "s-2vcpu-4gb", Region: "fra1",
		NodeAddresses: []abi.NodeAddress{{Type: "Hostname", Address: "a"}, {Type: "InternalIP", Address: ip(a, (*godo.Droplet).PrivateIPv4)},
			{Type: "ExternalIP", Address: ip(a, (*godo.Droplet).PublicIPv4)}, {Type: "ExternalIP", Address: ip(a, (*godo.Droplet).PublicIPv6)}}}
	tests := []struct {
		name string
		node *abi.Node
		want *abi.InstanceMetadata
	}{
		{"by provider ID", e.node("a"), wantA},
		{"by name", &abi.Node{Name: "a"}, wantA},
		{"by private IPv4", &abi.Node{Name: ip(a, (*godo.Droplet).PrivateIPv4)}, wantA},
		{"by public IPv4", &abi.Node{Name: ip(a, (*godo.Droplet).PublicIPv4)}, wantA},
		{"by public IPv6", &abi.Node{Name: ip(a, (*godo.Droplet).PublicIPv6)}, wantA},
		{"without public IPv4", e.node("b"), &abi.InstanceMetadata{ProviderID: e.node("b").ProviderID, InstanceType: "s-1vcpu-1gb", Region: "ams3",
			NodeAddresses: []abi.NodeAddress{{Type: "Hostname", Address: "b"}, {Type: "InternalIP", Address: ip(b, (*godo.Droplet).PrivateIPv4)},
				{Type: "ExternalIP", Address: ip(b, (*godo.Droplet).PublicIPv6)}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.p.InstanceMetadata(context.Background(), tc.node)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
	shut, err := e.p.InstanceShutdown(context.Background(), e.node("c"))
	if err != nil || !shut {
		t.Fatalf("droplet c is off: %v %v", shut, err)
	}
}

// TestSnapshot: lookups are served from one listing; a droplet created
// since is read directly; a droplet missing from the listing is gone only
// on the API's own 404.
func TestSnapshot(t *testing.T) {
	e := newEnv(t, "", dofake.Options{}, nil)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c", "a"} {
		if ok, err := e.p.InstanceExists(ctx, e.node(n)); !ok || err != nil {
			t.Fatalf("%s: %v %v", n, ok, err)
		}
	}
	if r := e.cloud.Requests(); r["GET /v2/droplets"] != 1 || r["GET /v2/droplets/{id}"] != 0 {
		t.Fatalf("requests %v, want one listing", r)
	}
	d, _ := e.cloud.AddDroplet(dofake.Droplet{Name: "new"})
	e.droplets["new"] = d
	if ok, err := e.p.InstanceExists(ctx, e.node("new")); !ok || err != nil {
		t.Fatalf("new droplet: %v %v", ok, err)
	}
	gone := &abi.Node{Name: "gone", ProviderID: "digitalocean://4242"}
	if ok, err := e.p.InstanceExists(ctx, gone); ok || err != nil {
		t.Fatalf("missing droplet: %v %v", ok, err)
	}
	if _, err := e.p.InstanceMetadata(ctx, gone); outcome(err) != abi.StatusNotFound {
		t.Fatalf("metadata of a missing droplet: %v", err)
	}
	if r := e.cloud.Requests(); r["GET /v2/droplets/{id}"] != 3 {
		t.Fatalf("requests %v, want three direct reads", r)
	}
}

// TestNeverGoneOnDoubt: no answer but the API's own not_found makes a
// droplet gone; a 429 is RetryAfter; another cloud's provider ID is an
// error.
func TestNeverGoneOnDoubt(t *testing.T) {
	proxy404 := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Proxy-404") == "" && r.URL.Path == "/v2/droplets/4242" {
				http.Error(w, "404 page not found", http.StatusNotFound)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	tests := []struct {
		name   string
		fault  *faultinject.Fault
		node   *abi.Node
		status abi.Status
	}{
		{"500", &faultinject.Fault{Status: 500, Always: true}, nil, abi.StatusError},
		{"401", &faultinject.Fault{Status: 401, Always: true}, nil, abi.StatusError},
		{"429", &faultinject.Fault{Status: 429, RetryAfter: 5, Always: true}, nil, abi.StatusRetryAfter},
		{"404 of a proxy", nil, &abi.Node{Name: "x", ProviderID: "digitalocean://4242"}, abi.StatusError},
		{"another cloud's provider ID", nil, &abi.Node{Name: "x", ProviderID: "hcloud://1"}, abi.StatusError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, `, "dropletCacheMaxAge": "off"`, dofake.Options{}, proxy404)
			node := tc.node
			if node == nil {
				node = e.node("a")
			}
			if tc.fault != nil {
				if _, err := e.cloud.Faults.Add(*tc.fault); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range []*abi.Node{node, {Name: node.Name}} {
				if tc.fault == nil && n.ProviderID == "" {
					continue
				}
				ok, err := e.p.InstanceExists(context.Background(), n)
				if ok || outcome(err) != tc.status {
					t.Errorf("InstanceExists(%+v) = %v, %v; want status %v", n, ok, err, tc.status)
				}
				if shut, err := e.p.InstanceShutdown(context.Background(), n); shut || err == nil {
					t.Errorf("InstanceShutdown(%+v) = %v, %v; want an error", n, shut, err)
				}
			}
		})
	}
}

// lbService is a Service with an HTTP port and an HTTPS one.
func lbService(annotations map[string]string) *abi.Service {
	return &abi.Service{Namespace: "default", Name: "web", UID: "9f8e7d6c-0000-4000-8000-000000000001", Annotations: annotations,
		Ports: []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}, {Name: "https", Protocol: "TCP", Port: 443, NodePort: 30443}}}
}

func (e *env) lbNodes(names ...string) []abi.Node {
	var out []abi.Node
	for _, n := range names {
		node := *e.node(n)
		d := e.droplets[n]
		node.Addresses = []abi.NodeAddress{{Type: "InternalIP", Address: ip(d, (*godo.Droplet).PrivateIPv4)}}
		if v4 := ip(d, (*godo.Droplet).PublicIPv4); v4 != "" {
			node.Addresses = append(node.Addresses, abi.NodeAddress{Type: "ExternalIP", Address: v4})
		}
		out = append(out, node)
	}
	return out
}

func writes(cloud *dofake.Cloud) map[string]int {
	out := map[string]int{}
	for k, v := range cloud.Requests() {
		if k[:3] != "GET" {
			out[k] = v
		}
	}
	return out
}

// TestLoadBalancer: the annotations become the official CCM's request;
// a second Ensure writes nothing; a changed Service and Nodes one update;
// the lister names only this cluster's; deletion deletes.
func TestLoadBalancer(t *testing.T) {
	e := newEnv(t, `, "clusterID": "c1", "defaultLoadBalancerType": "REGIONAL"`, dofake.Options{}, nil)
	ctx := context.Background()
	svc := lbService(map[string]string{
		annProtocol: "http", annTLSPorts: "443", annCertificateID: "cert-1", annRedirectHTTPToHTTPS: "true",
		annStickyType: "cookies", annStickyCookieName: "s", annStickyCookieTTL: "300", annSizeUnit: "3",
		annHCOverride: "true", annHCPath: "/ready", annHCInterval: "10", annProxyProtocol: "true",
	})
	st, err := e.p.EnsureLoadBalancer(ctx, "prod", svc, e.lbNodes("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	lbs := e.cloud.LoadBalancers()
	if len(lbs) != 1 || len(st.Ingress) != 2 || st.Ingress[0].IP != lbs[0].IP || st.Ingress[1].IP != lbs[0].IPv6 {
		t.Fatalf("status %+v for %+v", st, lbs)
	}
	lb := lbs[0]
	wantRules := []godo.ForwardingRule{{EntryProtocol: "http", EntryPort: 80, TargetProtocol: "http", TargetPort: 30080},
		{EntryProtocol: "https", EntryPort: 443, TargetProtocol: "http", TargetPort: 30443, CertificateID: "cert-1"}}
	wantHC := godo.HealthCheck{Protocol: "http", Port: 30080, Path: "/ready", CheckIntervalSeconds: 10, ResponseTimeoutSeconds: 5, HealthyThreshold: 5, UnhealthyThreshold: 3}
	if lb.Name != defaultName(svc) || lb.Type != "REGIONAL" || lb.NetworkStack != "DUALSTACK" || lb.SizeUnit != 3 || !lb.RedirectHttpToHttps || !lb.EnableProxyProtocol ||
		!reflect.DeepEqual(lb.ForwardingRules, wantRules) || !reflect.DeepEqual(*lb.HealthCheck, wantHC) ||
		*lb.StickySessions != (godo.StickySessions{Type: "cookies", CookieName: "s", CookieTtlSeconds: 300}) ||
		!slices.Equal(lb.DropletIDs, []int{e.droplets["a"].ID, e.droplets["b"].ID}) ||
		!slices.Equal(lb.Tags, []string{"wasmccm:service-uid:" + svc.UID, "wasmccm:cluster:prod", "k8s:c1"}) {
		t.Fatalf("load balancer %+v", lb)
	}

	before := writes(e.cloud)
	if _, err := e.p.EnsureLoadBalancer(ctx, "prod", svc, e.lbNodes("a", "b")); err != nil {
		t.Fatal(err)
	}
	if got, exists, err := e.p.GetLoadBalancer(ctx, "prod", svc); !exists || err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("GetLoadBalancer %+v %v %v", got, exists, err)
	}
	if after := writes(e.cloud); !reflect.DeepEqual(before, after) {
		t.Fatalf("a second Ensure wrote: %v, then %v", before, after)
	}

	svc.Annotations[annStickyType] = "none"
	if err := e.p.UpdateLoadBalancer(ctx, "prod", svc, e.lbNodes("a")); err != nil {
		t.Fatal(err)
	}
	lb = e.cloud.LoadBalancers()[0]
	if w := writes(e.cloud); w["PUT /v2/load_balancers/{id}"] != 1 || w["POST /v2/load_balancers"] != 1 ||
		lb.StickySessions.Type != "none" || !slices.Equal(lb.DropletIDs, []int{e.droplets["a"].ID}) {
		t.Fatalf("after the update: %v, %+v", w, lb)
	}

	if _, err := e.cloud.AddLoadBalancer("by-hand", nil); err != nil {
		t.Fatal(err)
	}
	other := lbService(nil)
	other.UID, other.Name = "1a2b3c4d-0000-4000-8000-000000000002", "other"
	if _, err := e.p.EnsureLoadBalancer(ctx, "staging", other, e.lbNodes("a")); err != nil {
		t.Fatal(err)
	}
	owned, err := e.p.ListLoadBalancers(ctx, "prod")
	if err != nil || !reflect.DeepEqual(owned, []abi.OwnedLoadBalancer{{Name: lb.Name, ID: lb.ID, ClusterName: "prod", ServiceUID: svc.UID}}) {
		t.Fatalf("ListLoadBalancers: %+v %v", owned, err)
	}
	if _, err := e.p.ListLoadBalancers(ctx, "prod/eu"); err == nil {
		t.Fatal("a cluster name that cannot be a tag was listed")
	}

	if err := e.p.EnsureLoadBalancerDeleted(ctx, "prod", svc); err != nil {
		t.Fatal(err)
	}
	if err := e.p.EnsureLoadBalancerDeleted(ctx, "prod", svc); err != nil {
		t.Fatal(err)
	}
	if n := len(e.cloud.LoadBalancers()); n != 2 {
		t.Fatalf("%d load balancers left, want by-hand and staging's", n)
	}
}

// TestLoadBalancerAdopted: a load balancer of the official CCM, found by
// its name, gets this cluster's tags through the tags API (creating the
// tags first, as the official CCM does), and is not created again.
func TestLoadBalancerAdopted(t *testing.T) {
	e := newEnv(t, "", dofake.Options{}, nil)
	ctx := context.Background()
	svc := lbService(nil)
	if _, err := e.cloud.AddLoadBalancer(defaultName(svc), []string{"k8s:c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.EnsureLoadBalancer(ctx, "prod", svc, e.lbNodes("a")); err != nil {
		t.Fatal(err)
	}
	lbs := e.cloud.LoadBalancers()
	w := writes(e.cloud)
	if len(lbs) != 1 || !slices.Equal(lbs[0].Tags, []string{"k8s:c1", "wasmccm:service-uid:" + svc.UID, "wasmccm:cluster:prod"}) ||
		w["POST /v2/load_balancers"] != 0 || w["POST /v2/tags"] != 2 || w["PUT /v2/load_balancers/{id}"] != 1 {
		t.Fatalf("adopted %+v with %v", lbs, w)
	}
	if lbs[0].Type != "REGIONAL" || lbs[0].ForwardingRules[0].TargetPort != 30080 || lbs[0].HealthCheck.Port != kubeProxyHealthPort {
		t.Fatalf("the load balancer keeps its REGIONAL type and gets a REGIONAL one's rules: %+v", lbs[0])
	}
	// A new one gets the default type, REGIONAL_NETWORK, which forwards
	// each port as it is.
	other := lbService(nil)
	other.UID = "1a2b3c4d-0000-4000-8000-000000000002"
	if _, err := e.p.EnsureLoadBalancer(ctx, "prod", other, e.lbNodes("a")); err != nil {
		t.Fatal(err)
	}
	if lb := e.cloud.LoadBalancers()[1]; lb.Type != "REGIONAL_NETWORK" || lb.ForwardingRules[0].TargetPort != 80 {
		t.Fatalf("new load balancer %+v", lb)
	}
	// A same-named load balancer that another Service's UID tag claims
	// is not taken.
	third := lbService(nil)
	third.UID = "5e6f7a8b-0000-4000-8000-000000000003"
	if _, err := e.cloud.AddLoadBalancer(defaultName(third), []string{"wasmccm:service-uid:someone-else"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.EnsureLoadBalancer(ctx, "prod", third, e.lbNodes("a")); err != nil {
		t.Fatal(err)
	}
	if lbs := e.cloud.LoadBalancers(); len(lbs) != 4 || !slices.Equal(lbs[2].Tags, []string{"wasmccm:service-uid:someone-else"}) {
		t.Fatalf("load balancers %+v", lbs)
	}
}

// TestLoadBalancerBeingCreated: a new load balancer answers RetryAfter
// until the API says it is active (after the create and two reads),
// without a second create.
func TestLoadBalancerBeingCreated(t *testing.T) {
	e := newEnv(t, "", dofake.Options{ActivateAfterReads: 2}, nil)
	ctx := context.Background()
	svc := lbService(nil)
	for range 3 {
		if _, err := e.p.EnsureLoadBalancer(ctx, "prod", svc, e.lbNodes("a")); outcome(err) != abi.StatusRetryAfter {
			t.Fatalf("Ensure of a new load balancer: %v", err)
		}
	}
	st, err := e.p.EnsureLoadBalancer(ctx, "prod", svc, e.lbNodes("a"))
	if err != nil || len(st.Ingress) == 0 || writes(e.cloud)["POST /v2/load_balancers"] != 1 {
		t.Fatalf("once active: %+v %v, %v", st, err, writes(e.cloud))
	}
}

// TestLoadBalancerRefused: malformed or unsupported annotations, and
// Nodes that cannot serve the load balancer, are errors before any write.
func TestLoadBalancerRefused(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		nodes       []string
	}{
		{"malformed boolean", map[string]string{annProxyProtocol: "maybe"}, []string{"a"}},
		{"size slug and unit", map[string]string{annSizeSlug: "lb-small", annSizeUnit: "2"}, []string{"a"}},
		{"https without certificate", map[string]string{annType: "REGIONAL", annTLSPorts: "443"}, []string{"a"}},
		{"certificate by name", map[string]string{annPrefix + "certificate-name": "web"}, []string{"a"}},
		{"cookies without a name", map[string]string{annStickyType: "cookies", annStickyCookieTTL: "10"}, []string{"a"}},
		{"no Node with a public IPv4", nil, []string{"b"}},
		{"dual stack with IPv4-only Nodes", map[string]string{annNetworkStack: "DUALSTACK"}, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "", dofake.Options{}, nil)
			nodes := e.lbNodes(tc.nodes...)
			if tc.name == "dual stack with IPv4-only Nodes" {
				nodes[0].Addresses = nodes[0].Addresses[:2] // no IPv6 on the Node
			}
			if _, err := e.p.EnsureLoadBalancer(context.Background(), "prod", lbService(tc.annotations), nodes); err == nil {
				t.Fatal("no error")
			}
			if w := writes(e.cloud); len(w) != 0 {
				t.Fatalf("wrote %v", w)
			}
		})
	}
}
