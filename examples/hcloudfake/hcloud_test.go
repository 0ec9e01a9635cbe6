package hcloudfake_test

import (
	"context"
	"net"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
)

// The fake is driven with the official hcloud-go client: whatever it
// decodes, paginates and polls the way it does against the real API.

func newClient(t *testing.T, opts hcloudfake.Options) (*hcloudfake.Cloud, *hcloud.Client) {
	t.Helper()
	opts.Token = "secret"
	cloud := hcloudfake.New(opts)
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	client := hcloud.NewClient(hcloud.WithEndpoint(srv.URL+"/v1"), hcloud.WithToken("secret"),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 2}))
	return cloud, client
}

func TestServers(t *testing.T) {
	cloud, client := newClient(t, hcloudfake.Options{ActionPolls: 2})
	ctx := context.Background()
	network, _, err := client.Network.Create(ctx, hcloud.NetworkCreateOpts{Name: "k8s", IPRange: mustCIDR(t, "10.0.0.0/16"),
		Subnets: []hcloud.NetworkSubnet{{Type: hcloud.NetworkSubnetTypeCloud, IPRange: mustCIDR(t, "10.0.0.0/16"), NetworkZone: hcloud.NetworkZoneEUCentral}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		role := map[bool]string{true: "control-plane", false: "worker"}[i == 0]
		res, _, err := client.Server.Create(ctx, hcloud.ServerCreateOpts{Name: "node-" + strconv.Itoa(i), ServerType: &hcloud.ServerType{Name: "cpx21"},
			Location: &hcloud.Location{Name: "nbg1"}, Image: &hcloud.Image{Name: "ubuntu-24.04"}, Labels: map[string]string{"role": role},
			Networks: []*hcloud.Network{network}})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Action.WaitFor(ctx, res.Action); err != nil {
			t.Fatal(err)
		}
	}

	all, err := client.Server.AllWithOpts(ctx, hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{PerPage: 7}})
	if err != nil || len(all) != 30 {
		t.Fatalf("paginated list: %d servers, %v; want 30", len(all), err)
	}
	workers, err := client.Server.AllWithOpts(ctx, hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "role=worker"}})
	if err != nil || len(workers) != 29 {
		t.Fatalf("label_selector role=worker: %d servers, %v; want 29", len(workers), err)
	}

	s, _, err := client.Server.GetByName(ctx, "node-3")
	if err != nil || s == nil {
		t.Fatalf("GetByName: %v, %v", s, err)
	}
	if s.ServerType.Name != "cpx21" || s.Location.Name != "nbg1" || s.Status != hcloud.ServerStatusRunning ||
		s.PublicNet.IPv4.IP == nil || s.PublicNet.IPv6.Network == nil || len(s.PrivateNet) != 1 ||
		s.PrivateNet[0].Network.ID != network.ID || s.PrivateNet[0].IP.String() != "10.0.0.5" {
		t.Fatalf("server as hcloud-go decodes it: %+v", s)
	}
	if got, _, err := client.Server.GetByID(ctx, s.ID); err != nil || got.Name != "node-3" {
		t.Fatalf("GetByID: %v, %v", got, err)
	}
	if got, _, err := client.Server.GetByName(ctx, "nope"); err != nil || got != nil {
		t.Fatalf("GetByName of a missing server: %v, %v; want nil, nil", got, err)
	}
	if got, _, err := client.Server.GetByID(ctx, 999999); err != nil || got != nil {
		t.Fatalf("GetByID of a missing server: %v, %v; want nil, nil (hcloud-go reads not_found)", got, err)
	}

	res, _, err := client.Server.DeleteWithResult(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Action.WaitFor(ctx, res.Action); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := client.Server.GetByName(ctx, "node-3"); got != nil {
		t.Fatal("deleted server still found")
	}
	if len(cloud.Servers()) != 29 {
		t.Fatalf("cloud holds %d servers after a delete, want 29", len(cloud.Servers()))
	}
	if _, _, err := client.Server.DeleteWithResult(ctx, s); !hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
		t.Fatalf("second delete: %v, want not_found", err)
	}
}

// twoServersInANetwork is a fake cloud, its official client, and servers a
// and b in network k8s.
func twoServersInANetwork(t *testing.T) (*hcloudfake.Cloud, *hcloud.Client, schema.Network, schema.Server, schema.Server) {
	t.Helper()
	cloud, client := newClient(t, hcloudfake.Options{ActionPolls: 1})
	network, err := cloud.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cloud.AddServer(hcloudfake.Server{Name: "a", Network: network.ID})
	b, _ := cloud.AddServer(hcloudfake.Server{Name: "b", Network: network.ID})
	return cloud, client, network, a, b
}

func TestLoadBalancerLifecycle(t *testing.T) {
	cloud, client, network, a, b := twoServersInANetwork(t)
	ctx := context.Background()

	res, _, err := client.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{
		Name: "svc", LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1"},
		Labels: map[string]string{"hcloud-ccm/service-uid": "uid-1"}, Network: &hcloud.Network{ID: network.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, client, res.Action)
	lb := res.LoadBalancer
	if _, _, err := client.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{Name: "svc",
		LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1"}}); !hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		t.Fatalf("duplicate name: %v, want uniqueness_error", err)
	}

	steps := []func() (*hcloud.Action, *hcloud.Response, error){
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.AddService(ctx, lb, hcloud.LoadBalancerAddServiceOpts{Protocol: hcloud.LoadBalancerServiceProtocolTCP,
				ListenPort: hcloud.Ptr(80), DestinationPort: hcloud.Ptr(30080),
				HealthCheck: &hcloud.LoadBalancerAddServiceOptsHealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolTCP, Port: hcloud.Ptr(30080),
					Interval: hcloud.Ptr(15 * time.Second), Timeout: hcloud.Ptr(10 * time.Second), Retries: hcloud.Ptr(3)}})
		},
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.UpdateService(ctx, lb, 80, hcloud.LoadBalancerUpdateServiceOpts{DestinationPort: hcloud.Ptr(30081)})
		},
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: a.ID}, UsePrivateIP: hcloud.Ptr(true)})
		},
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: b.ID}})
		},
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.RemoveServerTarget(ctx, lb, &hcloud.Server{ID: b.ID})
		},
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.ChangeAlgorithm(ctx, lb, hcloud.LoadBalancerChangeAlgorithmOpts{Type: hcloud.LoadBalancerAlgorithmTypeLeastConnections})
		},
		func() (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.ChangeType(ctx, lb, hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb21"}})
		},
	}
	for i, step := range steps {
		action, resp, err := step()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if resp.Header.Get("RateLimit-Limit") != "3600" || resp.Header.Get("RateLimit-Remaining") == "" {
			t.Fatalf("step %d: RateLimit headers missing: %v", i, resp.Header)
		}
		waitAll(t, client, action)
	}
	_, _, err = client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: a.ID}})
	if !hcloud.IsError(err, hcloud.ErrorCodeTargetAlreadyDefined) {
		t.Fatalf("adding a target twice: %v, want target_already_defined", err)
	}

	got, _, err := client.LoadBalancer.GetByName(ctx, "svc")
	if err != nil || got == nil {
		t.Fatalf("GetByName: %v %v", got, err)
	}
	if len(got.Services) != 1 || got.Services[0].DestinationPort != 30081 || got.Services[0].HealthCheck.Interval != 15*time.Second ||
		len(got.Targets) != 1 || got.Targets[0].Server.Server.ID != a.ID || !got.Targets[0].UsePrivateIP ||
		got.Algorithm.Type != hcloud.LoadBalancerAlgorithmTypeLeastConnections || got.LoadBalancerType.Name != "lb21" ||
		len(got.PrivateNet) != 1 || got.PrivateNet[0].IP.String() != "10.0.0.4" || got.PublicNet.IPv4.IP == nil {
		t.Fatalf("load balancer as hcloud-go decodes it: %+v", got)
	}
	byLabel, err := client.LoadBalancer.AllWithOpts(ctx, hcloud.LoadBalancerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "hcloud-ccm/service-uid=uid-1"}})
	if err != nil || len(byLabel) != 1 {
		t.Fatalf("label selector: %d, %v", len(byLabel), err)
	}

	if _, err := client.LoadBalancer.Delete(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if len(cloud.LoadBalancers()) != 0 {
		t.Fatal("load balancer not deleted")
	}
	if got, _, err := client.LoadBalancer.GetByID(ctx, lb.ID); err != nil || got != nil {
		t.Fatalf("GetByID after delete: %v %v", got, err)
	}
}

// A load balancer type's limits hold as in the real API: a target or
// service beyond the type's maximum is resource_limit_exceeded (403), a
// change to a type the load balancer does not fit is
// invalid_load_balancer_type (422), and a refused request changes nothing.
func TestLoadBalancerTypeLimits(t *testing.T) {
	cloud, client := newClient(t, hcloudfake.Options{})
	ctx := context.Background()
	lb11, _, err := client.LoadBalancerType.GetByName(ctx, "lb11")
	if err != nil || lb11 == nil || lb11.MaxTargets < 1 || lb11.MaxServices < 1 {
		t.Fatalf("type lb11: %+v, %v", lb11, err)
	}
	var servers []*hcloud.Server
	for i := range lb11.MaxTargets + 1 {
		s, err := cloud.AddServer(hcloudfake.Server{Name: "s-" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, &hcloud.Server{ID: s.ID})
	}
	addService := func(lb *hcloud.LoadBalancer, i int) (*hcloud.Action, *hcloud.Response, error) {
		return client.LoadBalancer.AddService(ctx, lb, hcloud.LoadBalancerAddServiceOpts{Protocol: hcloud.LoadBalancerServiceProtocolTCP,
			ListenPort: hcloud.Ptr(1000 + i), DestinationPort: hcloud.Ptr(30000 + i)})
	}
	toLB11 := func(lb *hcloud.LoadBalancer) (*hcloud.Action, *hcloud.Response, error) {
		return client.LoadBalancer.ChangeType(ctx, lb, hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: lb11})
	}
	tests := []struct {
		name              string
		typ               string
		targets, services int // added before step
		step              func(lb *hcloud.LoadBalancer) (*hcloud.Action, *hcloud.Response, error)
		code              hcloud.ErrorCode // "" when step succeeds
		status            int
		wantType          string
	}{
		{"target beyond max_targets", "lb11", lb11.MaxTargets, 0, func(lb *hcloud.LoadBalancer) (*hcloud.Action, *hcloud.Response, error) {
			return client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: servers[lb11.MaxTargets]})
		}, hcloud.ErrorCodeResourceLimitExceeded, 403, "lb11"},
		{"service beyond max_services", "lb11", 0, lb11.MaxServices, func(lb *hcloud.LoadBalancer) (*hcloud.Action, *hcloud.Response, error) {
			return addService(lb, lb11.MaxServices)
		}, hcloud.ErrorCodeResourceLimitExceeded, 403, "lb11"},
		{"change_type to fewer targets than it has", "lb21", lb11.MaxTargets + 1, 0, toLB11, hcloud.ErrorCodeInvalidLoadBalancerType, 422, "lb21"},
		{"change_type to fewer services than it has", "lb21", 0, lb11.MaxServices + 1, toLB11, hcloud.ErrorCodeInvalidLoadBalancerType, 422, "lb21"},
		{"change_type to a type it fills exactly", "lb21", lb11.MaxTargets, lb11.MaxServices, toLB11, "", 201, "lb11"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _, err := client.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{Name: "limits-" + strconv.Itoa(i),
				LoadBalancerType: &hcloud.LoadBalancerType{Name: tt.typ}, Location: &hcloud.Location{Name: "fsn1"}})
			if err != nil {
				t.Fatal(err)
			}
			lb := res.LoadBalancer
			for _, s := range servers[:tt.targets] {
				action, _, err := client.LoadBalancer.AddServerTarget(ctx, lb, hcloud.LoadBalancerAddServerTargetOpts{Server: s})
				if err != nil {
					t.Fatal(err)
				}
				waitAll(t, client, action)
			}
			for i := range tt.services {
				action, _, err := addService(lb, i)
				if err != nil {
					t.Fatal(err)
				}
				waitAll(t, client, action)
			}
			action, resp, err := tt.step(lb)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("step: %v", err)
				}
				waitAll(t, client, action)
			} else if !hcloud.IsError(err, tt.code) {
				t.Fatalf("step: %v, want %s", err, tt.code)
			}
			if resp == nil || resp.StatusCode != tt.status {
				t.Fatalf("step answered %v, want status %d", resp, tt.status)
			}
			got, _, err := client.LoadBalancer.GetByID(ctx, lb.ID)
			if err != nil || got == nil {
				t.Fatalf("GetByID: %v %v", got, err)
			}
			if len(got.Targets) != tt.targets || len(got.Services) != tt.services || got.LoadBalancerType.Name != tt.wantType {
				t.Fatalf("after the step: %d targets, %d services, type %s; want %d, %d, %s",
					len(got.Targets), len(got.Services), got.LoadBalancerType.Name, tt.targets, tt.services, tt.wantType)
			}
		})
	}

	// A create asking for more targets than its type allows is refused
	// whole: no load balancer, and none in the network it was to join.
	network, err := cloud.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	opts := hcloud.LoadBalancerCreateOpts{Name: "too-many", LoadBalancerType: lb11, Location: &hcloud.Location{Name: "fsn1"},
		Network: &hcloud.Network{ID: network.ID}}
	for _, s := range servers {
		opts.Targets = append(opts.Targets, hcloud.LoadBalancerCreateOptsTarget{Type: hcloud.LoadBalancerTargetTypeServer,
			Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: s}})
	}
	_, resp, err := client.LoadBalancer.Create(ctx, opts)
	if !hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("create with %d targets on lb11: %v, want resource_limit_exceeded (403)", len(opts.Targets), err)
	}
	if got, _, err := client.LoadBalancer.GetByName(ctx, "too-many"); err != nil || got != nil {
		t.Fatalf("refused create left load balancer %v (%v)", got, err)
	}
	if n, _ := cloud.Network(network.ID); len(n.LoadBalancers) != 0 {
		t.Fatalf("refused create left load balancers %v in the network", n.LoadBalancers)
	}
}

// A load balancer created with its network, services and targets in the
// create request, as the real API takes them, has them all with every
// setting, and update_service changes HTTP and health check settings.
func TestLoadBalancerCreateWithServicesAndTargets(t *testing.T) {
	_, client, network, a, b := twoServersInANetwork(t)
	ctx := context.Background()
	res, _, err := client.LoadBalancer.Create(ctx, hcloud.LoadBalancerCreateOpts{
		Name: "svc", LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1"},
		Network: &hcloud.Network{ID: network.ID},
		Services: []hcloud.LoadBalancerCreateOptsService{
			{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: hcloud.Ptr(443), DestinationPort: hcloud.Ptr(30443), Proxyprotocol: hcloud.Ptr(true)},
			{Protocol: hcloud.LoadBalancerServiceProtocolHTTP, ListenPort: hcloud.Ptr(80), DestinationPort: hcloud.Ptr(30080),
				HTTP: &hcloud.LoadBalancerCreateOptsServiceHTTP{CookieName: hcloud.Ptr("TRACK"), CookieLifetime: hcloud.Ptr(time.Minute), StickySessions: hcloud.Ptr(true)},
				HealthCheck: &hcloud.LoadBalancerCreateOptsServiceHealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolHTTP, Port: hcloud.Ptr(30080),
					Interval: hcloud.Ptr(5 * time.Second), HTTP: &hcloud.LoadBalancerCreateOptsServiceHealthCheckHTTP{Path: hcloud.Ptr("/healthz"), StatusCodes: []string{"200"}}}},
		},
		Targets: []hcloud.LoadBalancerCreateOptsTarget{
			{Type: hcloud.LoadBalancerTargetTypeServer, Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: a.ID}}, UsePrivateIP: hcloud.Ptr(true)},
			{Type: hcloud.LoadBalancerTargetTypeServer, Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: b.ID}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, client, res.Action)
	got, _, err := client.LoadBalancer.GetByID(ctx, res.LoadBalancer.ID)
	if err != nil || got == nil {
		t.Fatalf("GetByID: %v %v", got, err)
	}
	if len(got.Services) != 2 || len(got.Targets) != 2 || len(got.PrivateNet) != 1 {
		t.Fatalf("created with %d services, %d targets, %d networks; want 2, 2, 1", len(got.Services), len(got.Targets), len(got.PrivateNet))
	}
	tcp, web := got.Services[0], got.Services[1]
	if tcp.ListenPort != 443 || tcp.DestinationPort != 30443 || !tcp.Proxyprotocol || tcp.HTTP.CookieName != "" {
		t.Fatalf("tcp service as hcloud-go decodes it: %+v", tcp)
	}
	if web.ListenPort != 80 || web.DestinationPort != 30080 || web.HTTP.CookieName != "TRACK" || web.HTTP.CookieLifetime != time.Minute ||
		!web.HTTP.StickySessions || web.HealthCheck.Interval != 5*time.Second || web.HealthCheck.Timeout != 10*time.Second ||
		web.HealthCheck.HTTP == nil || web.HealthCheck.HTTP.Path != "/healthz" || len(web.HealthCheck.HTTP.StatusCodes) != 1 {
		t.Fatalf("http service as hcloud-go decodes it: %+v, health check %+v", web, web.HealthCheck)
	}
	if got.Targets[0].Server.Server.ID != a.ID || !got.Targets[0].UsePrivateIP || got.Targets[1].Server.Server.ID != b.ID || got.Targets[1].UsePrivateIP {
		t.Fatalf("targets as hcloud-go decodes them: %+v", got.Targets)
	}

	action, _, err := client.LoadBalancer.UpdateService(ctx, got, 80, hcloud.LoadBalancerUpdateServiceOpts{
		HTTP:        &hcloud.LoadBalancerUpdateServiceOptsHTTP{CookieName: hcloud.Ptr("OTHER")},
		HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{HTTP: &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{TLS: hcloud.Ptr(true)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, client, action)
	if got, _, err = client.LoadBalancer.GetByID(ctx, got.ID); err != nil {
		t.Fatal(err)
	}
	if web := got.Services[1]; web.HTTP.CookieName != "OTHER" || !web.HTTP.StickySessions || !web.HealthCheck.HTTP.TLS || web.HealthCheck.HTTP.Path != "/healthz" {
		t.Fatalf("http service after update_service: %+v, health check %+v", web, web.HealthCheck.HTTP)
	}
}

func TestRoutes(t *testing.T) {
	cloud, client := newClient(t, hcloudfake.Options{})
	ctx := context.Background()
	network, _ := cloud.AddNetwork("k8s", "10.0.0.0/8")
	n := &hcloud.Network{ID: network.ID}
	route := hcloud.NetworkRoute{Destination: mustCIDR(t, "10.244.1.0/24"), Gateway: mustIP(t, "10.0.0.2")}
	action, _, err := client.Network.AddRoute(ctx, n, hcloud.NetworkAddRouteOpts{Route: route})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, client, action)
	if _, _, err := client.Network.AddRoute(ctx, n, hcloud.NetworkAddRouteOpts{Route: route}); !hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		t.Fatalf("duplicate route: %v", err)
	}
	got, _, err := client.Network.GetByID(ctx, network.ID)
	if err != nil || len(got.Routes) != 1 || got.Routes[0].Gateway.String() != "10.0.0.2" {
		t.Fatalf("network: %+v %v", got, err)
	}
	action, _, err = client.Network.DeleteRoute(ctx, n, hcloud.NetworkDeleteRouteOpts{Route: route})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, client, action)
	if got, _ := cloud.Network(network.ID); len(got.Routes) != 0 {
		t.Fatalf("routes after delete: %v", got.Routes)
	}
}

func TestFaultsAndErrors(t *testing.T) {
	cloud, client := newClient(t, hcloudfake.Options{})
	ctx := context.Background()
	tests := []struct {
		name  string
		fault faultinject.Fault
		code  hcloud.ErrorCode
	}{
		{"unauthorized", faultinject.Fault{Status: 401, Always: true}, hcloud.ErrorCodeUnauthorized},
		{"throttled", faultinject.Fault{Status: 429, Always: true, RetryAfter: 7}, hcloud.ErrorCodeRateLimitExceeded},
		{"server error", faultinject.Fault{Status: 500, Always: true}, hcloud.ErrorCodeServerError},
		{"unavailable", faultinject.Fault{Status: 503, Always: true}, hcloud.ErrorCodeServiceError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fault.Name, tt.fault.PathPrefix = tt.name, "/v1/servers"
			if _, err := cloud.Faults.Add(tt.fault); err != nil {
				t.Fatal(err)
			}
			defer cloud.Faults.Remove(tt.name)
			_, resp, err := client.Server.GetByName(ctx, "x")
			if !hcloud.IsError(err, tt.code) {
				t.Fatalf("error %v, want code %s", err, tt.code)
			}
			if tt.fault.RetryAfter > 0 && resp.Header.Get("Retry-After") != strconv.Itoa(tt.fault.RetryAfter) {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		})
	}
	// hcloud-go retries rate_limit_exceeded: one 429 is then invisible.
	if _, err := cloud.Faults.Add(faultinject.Fault{Name: "once", PathPrefix: "/v1/servers", Status: 429, FailNext: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Server.GetByName(ctx, "x"); err != nil {
		t.Fatalf("after one 429 the retry should succeed: %v", err)
	}
	// Latency longer than the caller's deadline is a timeout.
	_, _ = cloud.Faults.Add(faultinject.Fault{Name: "slow", PathPrefix: "/v1/servers", Latency: time.Second})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := client.Server.GetByName(short, "x"); err == nil {
		t.Fatal("a request slower than the deadline succeeded")
	}
	if _, err := cloud.Faults.Add(faultinject.Fault{Name: "bad", Status: 302}); err == nil {
		t.Fatal("a fault with status 302 was accepted")
	}
}

func waitAll(t *testing.T, client *hcloud.Client, actions ...*hcloud.Action) {
	t.Helper()
	if err := client.Action.WaitFor(context.Background(), actions...); err != nil {
		t.Fatal(err)
	}
}

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustIP(t *testing.T, s string) net.IP {
	t.Helper()
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("bad IP %q", s)
	}
	return ip
}

// TestRateLimit: the token bucket empties, an empty bucket answers 429
// rate_limit_exceeded, and tokens come back one per hour/limit.
func TestRateLimit(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0) // a whole second, so Reset is exact
	var now atomic.Int64
	now.Store(t0.UnixNano())
	advance := func(d time.Duration) { now.Add(int64(d)) }
	// 3 requests per hour: a token every 20 minutes.
	cloud, client := newClient(t, hcloudfake.Options{RateLimit: 3, EnforceRateLimit: true,
		Now: func() time.Time { return time.Unix(0, now.Load()) }})
	ctx := context.Background()
	get := func(wantRemaining int, wantReset time.Time) {
		t.Helper()
		_, resp, err := client.Location.List(ctx, hcloud.LocationListOpts{})
		if err != nil {
			t.Fatalf("request with %d tokens left: %v", wantRemaining+1, err)
		}
		h := resp.Header
		if h.Get("RateLimit-Limit") != "3" || h.Get("RateLimit-Remaining") != strconv.Itoa(wantRemaining) ||
			h.Get("RateLimit-Reset") != strconv.FormatInt(wantReset.Unix(), 10) {
			t.Fatalf("headers %v, want remaining %d, reset %d", h, wantRemaining, wantReset.Unix())
		}
	}
	refused := func() {
		t.Helper()
		before := cloud.Throttled()
		_, resp, err := client.Location.List(ctx, hcloud.LocationListOpts{})
		if !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
			t.Fatalf("request on an empty bucket: %v, want %s", err, hcloud.ErrorCodeRateLimitExceeded)
		}
		if resp == nil || resp.StatusCode != 429 || resp.Header.Get("RateLimit-Remaining") != "0" {
			t.Fatalf("refusal %+v", resp)
		}
		if reset, _ := strconv.ParseInt(resp.Header.Get("RateLimit-Reset"), 10, 64); reset <= time.Unix(0, now.Load()).Unix() {
			t.Fatalf("RateLimit-Reset %d is not in the future", reset)
		}
		if cloud.Throttled() <= before {
			t.Fatalf("Throttled() = %d, did not count the refusal", cloud.Throttled())
		}
	}
	tok := 20 * time.Minute
	get(2, t0.Add(tok))
	get(1, t0.Add(2*tok))
	get(0, t0.Add(3*tok))
	refused()
	// One token back after 20 minutes, and only one.
	advance(tok)
	get(0, t0.Add(4*tok))
	refused()
	// Half a token is no token.
	advance(tok / 2)
	refused()
	// After an hour the bucket is full again.
	advance(time.Hour)
	at := time.Unix(0, now.Load())
	get(2, at.Add(tok))
	get(1, at.Add(2*tok))

	// Not enforced (the default), an empty bucket still serves and reports
	// 0 remaining.
	cloud, client = newClient(t, hcloudfake.Options{RateLimit: 1})
	for i := range 3 {
		_, resp, err := client.Location.List(ctx, hcloud.LocationListOpts{})
		if err != nil {
			t.Fatalf("unenforced request %d: %v", i, err)
		}
		if resp.Header.Get("RateLimit-Remaining") != "0" {
			t.Fatalf("unenforced request %d: remaining %q", i, resp.Header.Get("RateLimit-Remaining"))
		}
	}
	if cloud.Throttled() != 0 {
		t.Fatalf("Throttled() = %d without enforcement", cloud.Throttled())
	}
}
