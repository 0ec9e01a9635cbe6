package simcloud

import (
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestAuth(t *testing.T) {
	e := newTestEnv(t, Options{AdminToken: "adm"})
	open := newTestEnv(t, Options{Token: "x"})
	noAuth := New(Options{})

	tests := []struct {
		name   string
		env    *testEnv
		method string
		path   string
		auth   string
		want   int
	}{
		{"v1 no header", e, "GET", "/v1/zones", "", 401},
		{"v1 wrong token", e, "GET", "/v1/zones", "Bearer nope", 401},
		{"v1 basic scheme", e, "GET", "/v1/zones", "Basic " + testToken, 401},
		{"v1 token without scheme", e, "GET", "/v1/zones", testToken, 401},
		{"v1 admin token", e, "GET", "/v1/zones", "Bearer adm", 401},
		{"v1 ok", e, "GET", "/v1/zones", "Bearer " + testToken, 200},
		{"v1 scheme case-insensitive", e, "GET", "/v1/zones", "bearer " + testToken, 200},
		{"v1 unknown endpoint needs auth", e, "GET", "/v1/nope", "", 401},
		{"v1 unknown endpoint", e, "GET", "/v1/nope", "Bearer " + testToken, 404},
		{"admin no header", e, "GET", "/admin/counters", "", 401},
		{"admin v1 token", e, "GET", "/admin/counters", "Bearer " + testToken, 401},
		{"admin ok", e, "GET", "/admin/counters", "Bearer adm", 200},
		{"admin unknown endpoint", e, "GET", "/admin/nope", "Bearer adm", 404},
		{"admin open by default", open, "GET", "/admin/counters", "", 200},
		{"healthz needs nothing", e, "GET", "/healthz", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.env.request(tt.method, tt.path, tt.auth, nil)
			expectStatus(t, r, tt.want)
			if tt.want >= 400 {
				r.errMsg(t)
			}
			if tt.want == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("empty token disables auth", func(t *testing.T) {
		srv := httptest.NewServer(noAuth.Handler())
		defer srv.Close()
		env := &testEnv{t: t, cloud: noAuth, srv: srv}
		expectStatus(t, env.request("GET", "/v1/zones", "", nil), 200)
	})
}

func TestInstancesAPI(t *testing.T) {
	e := newTestEnv(t, Options{Instances: []Instance{
		{Name: "node-a", Zone: "sim-1b", Labels: map[string]string{"k": "v"},
			Addresses: []Address{{Type: AddressInternalIP, Address: "172.18.0.2"}, {Type: AddressHostname, Address: "node-a"}}},
		{Name: "node-b", State: StateStopped},
	}})
	a := Instance{ID: "i-0001", Name: "node-a", Zone: "sim-1b", Region: "sim-1", Type: DefaultInstanceType, State: StateRunning,
		Addresses: []Address{{Type: AddressInternalIP, Address: "172.18.0.2"}, {Type: AddressHostname, Address: "node-a"}},
		Labels:    map[string]string{"k": "v"}}
	b := Instance{ID: "i-0002", Name: "node-b", Zone: "sim-1a", Region: "sim-1", Type: DefaultInstanceType, State: StateStopped,
		Addresses: []Address{{Type: AddressInternalIP, Address: "10.0.0.2"}, {Type: AddressHostname, Address: "node-b"}}}

	list := []struct {
		query string
		want  []Instance
	}{
		{"", []Instance{a, b}},
		{"?name=node-b", []Instance{b}},
		{"?name=missing", []Instance{}},
		{"?providerID=simcloud://i-0001", []Instance{a}},
		{"?providerID=simcloud://i-0009", []Instance{}},
		{"?providerID=aws:///i-0001", []Instance{}},
		{"?providerID=simcloud://", []Instance{}},
		{"?name=node-a&providerID=simcloud://i-0002", []Instance{}},
	}
	for _, tt := range list {
		t.Run("list"+tt.query, func(t *testing.T) {
			r := e.api("GET", "/v1/instances"+tt.query, nil)
			expectStatus(t, r, 200)
			var got []Instance
			r.decode(t, &got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	t.Run("empty list is []", func(t *testing.T) {
		r := e.api("GET", "/v1/instances?name=none", nil)
		if strings.TrimSpace(string(r.body)) != "[]" {
			t.Fatalf("body %q", r.body)
		}
	})
	t.Run("get", func(t *testing.T) {
		r := e.api("GET", "/v1/instances/i-0001", nil)
		expectStatus(t, r, 200)
		var got Instance
		r.decode(t, &got)
		if !reflect.DeepEqual(got, a) {
			t.Fatalf("got %+v", got)
		}
		if a.ProviderID() != "simcloud://i-0001" {
			t.Fatal(a.ProviderID())
		}
	})
	t.Run("get missing", func(t *testing.T) {
		r := e.api("GET", "/v1/instances/i-0404", nil)
		expectStatus(t, r, 404)
		if msg := r.errMsg(t); !strings.Contains(msg, "i-0404") {
			t.Fatal(msg)
		}
	})
}

func TestZones(t *testing.T) {
	e := newTestEnv(t, Options{Zones: []Zone{{Zone: "z2", Region: "r1"}, {Zone: "z1", Region: "r1"}}})
	if _, err := e.cloud.AddInstance(Instance{Name: "n", Zone: "far-1a", Region: "far"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.AddInstance(Instance{Name: "m", Zone: "z1"}); err != nil {
		t.Fatal(err)
	}
	r := e.api("GET", "/v1/zones", nil)
	expectStatus(t, r, 200)
	var got []Zone
	r.decode(t, &got)
	want := []Zone{{"far-1a", "far"}, {"z1", "r1"}, {"z2", "r1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if in, _ := e.cloud.Instance("i-0002"); in.Region != "r1" {
		t.Fatalf("region of zone z1 not defaulted: %+v", in)
	}
}

func TestLoadBalancerLifecycle(t *testing.T) {
	e := newTestEnv(t, Options{})
	n1, n2 := e.mustInstance("n1"), e.mustInstance("n2")

	in := lbBody("a1b2", n2.ID, n1.ID)
	in.HealthCheck = &HealthCheck{NodePort: 32000, Path: "/healthz"}
	in.SourceRanges = []string{"10.0.0.0/8"}
	in.Tags = map[string]string{"cluster": "c1"}
	r := e.api("POST", "/v1/loadbalancers", in)
	expectStatus(t, r, 201)
	var created LoadBalancer
	r.decode(t, &created)
	want := in
	want.ID, want.IP, want.Targets = "lb-0001", "203.0.113.10", []string{n1.ID, n2.ID}
	if !reflect.DeepEqual(created, want) {
		t.Fatalf("created %+v\nwant %+v", created, want)
	}

	r = e.api("POST", "/v1/loadbalancers", lbBody("a1b2"))
	expectStatus(t, r, 409)
	r.errMsg(t)

	r = e.api("GET", "/v1/loadbalancers/a1b2", nil)
	expectStatus(t, r, 200)
	var got LoadBalancer
	r.decode(t, &got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("get %+v", got)
	}

	// PUT replaces the mutable fields; a body echoing id/name/ip is fine.
	upd := got
	upd.Ports = append(upd.Ports, Port{Protocol: ProtocolUDP, Port: 53, NodePort: 30053})
	upd.Targets = []string{n1.ID}
	upd.HealthCheck, upd.SourceRanges, upd.Tags = nil, nil, nil
	r = e.api("PUT", "/v1/loadbalancers/a1b2", upd)
	expectStatus(t, r, 200)
	got = LoadBalancer{}
	r.decode(t, &got)
	if !reflect.DeepEqual(got, upd) {
		t.Fatalf("updated %+v\nwant %+v", got, upd)
	}
	if !strings.Contains(string(r.body), `"targets":["i-0001"]`) || strings.Contains(string(r.body), "healthCheck") {
		t.Fatalf("body %s", r.body)
	}
	// Minimal PUT body: name and ip may be omitted.
	r = e.api("PUT", "/v1/loadbalancers/a1b2", LoadBalancer{Ports: upd.Ports})
	expectStatus(t, r, 200)
	got = LoadBalancer{}
	r.decode(t, &got)
	if got.IP != "203.0.113.10" || got.ID != "lb-0001" || len(got.Targets) != 0 {
		t.Fatalf("got %+v", got)
	}
	if !strings.Contains(string(r.body), `"targets":[]`) {
		t.Fatalf("empty targets not []: %s", r.body)
	}

	for _, tt := range []struct {
		name string
		path string
		body any
		want int
	}{
		{"missing", "/v1/loadbalancers/nope", lbBody(""), 404},
		{"rename", "/v1/loadbalancers/a1b2", lbBody("other"), 400},
		{"change ip", "/v1/loadbalancers/a1b2", LoadBalancer{IP: "203.0.113.99", Ports: upd.Ports}, 400},
		{"invalid", "/v1/loadbalancers/a1b2", LoadBalancer{}, 400},
	} {
		t.Run("put "+tt.name, func(t *testing.T) {
			r := e.api("PUT", tt.path, tt.body)
			expectStatus(t, r, tt.want)
			r.errMsg(t)
		})
	}

	r = e.api("GET", "/v1/loadbalancers", nil)
	var list []LoadBalancer
	r.decode(t, &list)
	if len(list) != 1 || list[0].Name != "a1b2" {
		t.Fatalf("list %+v", list)
	}

	r = e.api("DELETE", "/v1/loadbalancers/a1b2", nil)
	expectStatus(t, r, 204)
	if len(r.body) != 0 {
		t.Fatalf("204 with body %q", r.body)
	}
	expectStatus(t, e.api("DELETE", "/v1/loadbalancers/a1b2", nil), 404)
	expectStatus(t, e.api("GET", "/v1/loadbalancers/a1b2", nil), 404)
	r = e.api("GET", "/v1/loadbalancers", nil)
	if strings.TrimSpace(string(r.body)) != "[]" {
		t.Fatalf("body %q", r.body)
	}

	c := e.cloud.Counters()
	if c.LoadBalancersCreated != 1 || c.LoadBalancersUpdated != 2 || c.LoadBalancersDeleted != 1 {
		t.Fatalf("counters %+v", c)
	}
	if c.Status("POST /v1/loadbalancers", 409) != 1 || c.Status("DELETE /v1/loadbalancers/{name}", 404) != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestLoadBalancerValidation(t *testing.T) {
	e := newTestEnv(t, Options{})
	n := e.mustInstance("n1")
	tcp := func(port, nodePort int) Port { return Port{Protocol: ProtocolTCP, Port: port, NodePort: nodePort} }
	mod := func(f func(*LoadBalancer)) LoadBalancer {
		lb := lbBody("lb1", n.ID)
		f(&lb)
		return lb
	}
	tests := []struct {
		name string
		body any
		want string // substring of the error
	}{
		{"empty name", mod(func(l *LoadBalancer) { l.Name = "" }), "name"},
		{"slash in name", mod(func(l *LoadBalancer) { l.Name = "a/b" }), "name"},
		{"dot name", mod(func(l *LoadBalancer) { l.Name = ".." }), "name"},
		{"long name", mod(func(l *LoadBalancer) { l.Name = strings.Repeat("a", 129) }), "name"},
		{"no ports", mod(func(l *LoadBalancer) { l.Ports = nil }), "port"},
		{"sctp", mod(func(l *LoadBalancer) { l.Ports[0].Protocol = "SCTP" }), "protocol"},
		{"lowercase tcp", mod(func(l *LoadBalancer) { l.Ports[0].Protocol = "tcp" }), "protocol"},
		{"port 0", mod(func(l *LoadBalancer) { l.Ports = []Port{tcp(0, 30000)} }), "1-65535"},
		{"nodePort 0", mod(func(l *LoadBalancer) { l.Ports = []Port{tcp(80, 0)} }), "1-65535"},
		{"port too big", mod(func(l *LoadBalancer) { l.Ports = []Port{tcp(70000, 30000)} }), "1-65535"},
		{"duplicate port", mod(func(l *LoadBalancer) { l.Ports = []Port{tcp(80, 30000), tcp(80, 30001)} }), "duplicate port"},
		{"unknown target", mod(func(l *LoadBalancer) { l.Targets = []string{"n1"} }), "unknown target"},
		{"duplicate target", mod(func(l *LoadBalancer) { l.Targets = []string{n.ID, n.ID} }), "duplicate target"},
		{"health nodePort", mod(func(l *LoadBalancer) { l.HealthCheck = &HealthCheck{Path: "/"} }), "healthCheck"},
		{"health path", mod(func(l *LoadBalancer) { l.HealthCheck = &HealthCheck{NodePort: 1, Path: "x"} }), "healthCheck"},
		{"source range", mod(func(l *LoadBalancer) { l.SourceRanges = []string{"10.0.0.1"} }), "source range"},
		{"ip outside pool", mod(func(l *LoadBalancer) { l.IP = "10.0.0.1" }), "pool"},
		{"ip below pool start", mod(func(l *LoadBalancer) { l.IP = "203.0.113.9" }), "pool"},
		{"ip garbage", mod(func(l *LoadBalancer) { l.IP = "x" }), "pool"},
		{"unknown field", `{"name":"lb1","ports":[{"protocol":"TCP","port":80,"nodePort":30000}],"target":["i-0001"]}`, "unknown field"},
		{"trailing data", `{"name":"lb1","ports":[{"protocol":"TCP","port":80,"nodePort":30000}]} {}`, "after"},
		{"not json", `name=lb1`, "invalid JSON"},
		{"empty body", ``, "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.api("POST", "/v1/loadbalancers", tt.body)
			expectStatus(t, r, 400)
			if msg := r.errMsg(t); !strings.Contains(msg, tt.want) {
				t.Fatalf("error %q does not mention %q", msg, tt.want)
			}
		})
	}
	if n := len(e.cloud.LoadBalancers()); n != 0 {
		t.Fatalf("%d load balancers created by invalid requests", n)
	}
	if _, err := e.cloud.CreateLoadBalancer(LoadBalancer{Name: "x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Go API error %v, want ErrInvalid", err)
	}
}

func TestRoutes(t *testing.T) {
	e := newTestEnv(t, Options{})
	a, b := e.mustInstance("node-a"), e.mustInstance("node-b")

	r := e.api("POST", "/v1/routes", Route{Name: "c1-a", DestinationCIDR: "10.244.0.0/24", TargetInstance: a.ID})
	expectStatus(t, r, 201)
	var got Route
	r.decode(t, &got)
	wantA := Route{ID: "r-0001", Name: "c1-a", DestinationCIDR: "10.244.0.0/24", TargetInstance: a.ID, TargetName: "node-a"}
	if got != wantA {
		t.Fatalf("got %+v", got)
	}
	r = e.api("POST", "/v1/routes", Route{Name: "c1-b", DestinationCIDR: "fd00:1::/64", TargetName: "node-b"})
	expectStatus(t, r, 201)
	r.decode(t, &got)
	wantB := Route{ID: "r-0002", Name: "c1-b", DestinationCIDR: "fd00:1::/64", TargetInstance: b.ID, TargetName: "node-b"}
	if got != wantB {
		t.Fatalf("got %+v", got)
	}

	for _, tt := range []struct {
		name string
		body any
		want int
	}{
		{"duplicate name", Route{Name: "c1-a", DestinationCIDR: "10.244.9.0/24", TargetInstance: b.ID}, 409},
		{"duplicate destination", Route{Name: "c1-x", DestinationCIDR: "10.244.0.0/24", TargetInstance: b.ID}, 409},
		{"duplicate destination other spelling", Route{Name: "c1-x", DestinationCIDR: "fd00:1:0::/64", TargetInstance: a.ID}, 409},
		{"bad name", Route{Name: "a b", DestinationCIDR: "10.244.9.0/24", TargetInstance: b.ID}, 400},
		{"bad cidr", Route{Name: "c1-x", DestinationCIDR: "10.244.9.0", TargetInstance: b.ID}, 400},
		{"host bits set", Route{Name: "c1-x", DestinationCIDR: "10.244.9.1/24", TargetInstance: b.ID}, 400},
		{"no target", Route{Name: "c1-x", DestinationCIDR: "10.244.9.0/24"}, 400},
		{"unknown target", Route{Name: "c1-x", DestinationCIDR: "10.244.9.0/24", TargetInstance: "i-0404"}, 400},
		{"unknown target name", Route{Name: "c1-x", DestinationCIDR: "10.244.9.0/24", TargetName: "ghost"}, 400},
		{"target mismatch", Route{Name: "c1-x", DestinationCIDR: "10.244.9.0/24", TargetInstance: a.ID, TargetName: "node-b"}, 400},
		{"unknown field", `{"name":"c1-x","destinationCIDR":"10.244.9.0/24","target":"i-0001"}`, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.api("POST", "/v1/routes", tt.body)
			expectStatus(t, r, tt.want)
			r.errMsg(t)
		})
	}

	r = e.api("GET", "/v1/routes/c1-b", nil)
	expectStatus(t, r, 200)
	r.decode(t, &got)
	if got != wantB {
		t.Fatalf("got %+v", got)
	}
	expectStatus(t, e.api("GET", "/v1/routes/nope", nil), 404)

	// Deleting the target instance turns the route into a blackhole.
	if err := e.cloud.DeleteInstance(a.ID); err != nil {
		t.Fatal(err)
	}
	r = e.api("GET", "/v1/routes", nil)
	var list []Route
	r.decode(t, &list)
	wantA.TargetName, wantA.Blackhole = "", true
	if !reflect.DeepEqual(list, []Route{wantA, wantB}) {
		t.Fatalf("list %+v", list)
	}
	if !strings.Contains(string(r.body), `"blackhole":true`) {
		t.Fatalf("body %s", r.body)
	}

	expectStatus(t, e.api("DELETE", "/v1/routes/c1-a", nil), 204)
	expectStatus(t, e.api("DELETE", "/v1/routes/c1-a", nil), 404)
	if routes := e.cloud.Routes(); len(routes) != 1 || routes[0].Name != "c1-b" {
		t.Fatalf("routes %+v", routes)
	}
	c := e.cloud.Counters()
	if c.RoutesCreated != 2 || c.RoutesDeleted != 1 || c.Status("POST /v1/routes", 409) != 3 {
		t.Fatalf("counters %+v", c)
	}
}

func TestAdminInstances(t *testing.T) {
	e := newTestEnv(t, Options{Instances: []Instance{{Name: "seed"}}})

	r := e.admin("POST", "/admin/instances", Instance{Name: "n1", Labels: map[string]string{"pool": "a"}})
	expectStatus(t, r, 201)
	var n1 Instance
	r.decode(t, &n1)
	if n1.ID != "i-0002" || n1.State != StateRunning || n1.Zone != "sim-1a" || n1.Labels["pool"] != "a" || len(n1.Addresses) != 2 {
		t.Fatalf("n1 %+v", n1)
	}
	r = e.admin("POST", "/admin/instances", Instance{ID: "custom-1", Name: "n2", State: StateStopped, Type: "big"})
	expectStatus(t, r, 201)

	for _, tt := range []struct {
		name   string
		method string
		path   string
		body   any
		want   int
	}{
		{"duplicate id", "POST", "/admin/instances", Instance{ID: "custom-1", Name: "other"}, 409},
		{"duplicate name", "POST", "/admin/instances", Instance{Name: "n1"}, 409},
		{"no name", "POST", "/admin/instances", Instance{}, 400},
		{"bad state", "POST", "/admin/instances", Instance{Name: "x", State: "paused"}, 400},
		{"bad address type", "POST", "/admin/instances", Instance{Name: "x", Addresses: []Address{{Type: "IP", Address: "1.2.3.4"}}}, 400},
		{"bad id", "POST", "/admin/instances", Instance{ID: "a/b", Name: "x"}, 400},
		{"stop missing", "POST", "/admin/instances/i-0404/stop", nil, 404},
		{"delete missing", "DELETE", "/admin/instances/i-0404", nil, 404},
		{"update missing", "PUT", "/admin/instances/i-0404", Instance{Name: "x"}, 404},
		{"update id mismatch", "PUT", "/admin/instances/i-0002", Instance{ID: "i-0001", Name: "x"}, 400},
		{"update to taken name", "PUT", "/admin/instances/i-0002", Instance{Name: "seed"}, 409},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.admin(tt.method, tt.path, tt.body)
			expectStatus(t, r, tt.want)
			r.errMsg(t)
		})
	}

	r = e.admin("POST", "/admin/instances/i-0002/stop", nil)
	expectStatus(t, r, 200)
	var got Instance
	r.decode(t, &got)
	if got.State != StateStopped {
		t.Fatalf("got %+v", got)
	}
	r = e.api("GET", "/v1/instances/i-0002", nil)
	r.decode(t, &got)
	if got.State != StateStopped {
		t.Fatalf("v1 sees %+v", got)
	}
	expectStatus(t, e.admin("POST", "/admin/instances/i-0002/start", nil), 200)
	if in, _ := e.cloud.Instance("i-0002"); in.State != StateRunning {
		t.Fatalf("%+v", in)
	}
	if err := e.cloud.SetInstanceState("i-0002", "gone"); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}

	r = e.admin("PUT", "/admin/instances/i-0002", Instance{Name: "n1-renamed", Zone: "sim-1c",
		Addresses: []Address{{Type: AddressExternalIP, Address: "198.51.100.7"}}})
	expectStatus(t, r, 200)
	got = Instance{}
	r.decode(t, &got)
	if got.ID != "i-0002" || got.Name != "n1-renamed" || got.Zone != "sim-1c" || got.Labels != nil || len(got.Addresses) != 1 {
		t.Fatalf("updated %+v", got)
	}

	// Deleting an instance removes it from load balancer targets.
	if _, err := e.cloud.CreateLoadBalancer(lbBody("lb", "i-0001", "i-0002")); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, e.admin("DELETE", "/admin/instances/i-0002", nil), 204)
	if lb, _ := e.cloud.LoadBalancer("lb"); !reflect.DeepEqual(lb.Targets, []string{"i-0001"}) {
		t.Fatalf("targets %v", lb.Targets)
	}
	expectStatus(t, e.api("GET", "/v1/instances/i-0002", nil), 404)

	r = e.admin("GET", "/admin/instances", nil)
	var list []Instance
	r.decode(t, &list)
	if len(list) != 2 || list[0].ID != "custom-1" || list[1].ID != "i-0001" {
		t.Fatalf("list %+v", list)
	}

	r = e.admin("GET", "/admin/state", nil)
	expectStatus(t, r, 200)
	var st State
	r.decode(t, &st)
	if len(st.Instances) != 2 || len(st.LoadBalancers) != 1 || st.Routes == nil || len(st.Zones) != 3 {
		t.Fatalf("state %+v", st)
	}

	// Reset brings back the preloaded instances only, with fresh IDs.
	expectStatus(t, e.admin("POST", "/admin/reset", nil), 204)
	st = e.cloud.State()
	if len(st.Instances) != 1 || st.Instances[0].ID != "i-0001" || st.Instances[0].Name != "seed" || len(st.LoadBalancers) != 0 {
		t.Fatalf("after reset %+v", st)
	}
	if in, _ := e.cloud.AddInstance(Instance{Name: "again"}); in.ID != "i-0002" {
		t.Fatalf("sequence not reset: %s", in.ID)
	}
}

func TestNewOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"bad pool", Options{IPPool: mustPrefix("10.0.0.1/24")}, false},
		{"start outside pool", Options{IPPool: mustPrefix("10.0.0.0/24"), IPPoolStart: mustAddr("10.0.1.1")}, false},
		{"bad zone", Options{Zones: []Zone{{Zone: "z"}}}, false},
		{"duplicate instances", Options{Instances: []Instance{{Name: "a"}, {Name: "a"}}}, false},
		{"bad global", Options{Global: Global{RateLimit: -1}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v", err)
			}
			defer func() {
				if p := recover(); (p == nil) != tt.ok {
					t.Fatalf("New panic = %v", p)
				}
			}()
			New(tt.opts)
		})
	}
}
