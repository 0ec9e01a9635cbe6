package aws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

const cluster = "c1"

var clusterTags = map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}

type env struct {
	cloud     *awsfake.Cloud
	p         *Provider
	instances map[string]awsfake.Instance
	table     awsfake.RouteTable
}

// newEnv starts a fake EC2 with the cluster's route table and instances
// running, stopped and terminated, and a provider signing with secret.
func newEnv(t testing.TB, secret string) *env {
	t.Helper()
	return newEnvWith(t, secret, awsfake.Options{})
}

func newEnvWith(t testing.TB, secret string, opts awsfake.Options) *env {
	t.Helper()
	cloud := awsfake.New(opts)
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	e := &env{cloud: cloud, instances: map[string]awsfake.Instance{}}
	var err error
	if e.table, err = cloud.AddRouteTable("", clusterTags); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"running", "stopped", "terminated"} {
		in, err := cloud.AddInstance(awsfake.Instance{Type: "m5.large", Tags: clusterTags})
		if err != nil {
			t.Fatal(err)
		}
		e.instances[state] = in // as it was while running: terminated loses its names
		if state != "running" {
			if err := cloud.SetInstanceState(in.ID, state); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.p = New(sigV4Host(t, srv.URL, secret))
	if err := e.p.Init(context.Background(), cluster, []byte(`{"region": "us-east-1", "clusterID": "c1", "ec2Endpoint": "`+srv.URL+`", "elbEndpoint": "`+srv.URL+`"}`)); err != nil {
		t.Fatal(err)
	}
	return e
}

// sigV4Host is a native host that signs requests naming the "aws"
// credential, as the wasm host does for the module.
func sigV4Host(t testing.TB, origin, secret string) *native.Host {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{"id": awsfake.DefaultAccessKeyID, "secret": secret} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	auth, err := credentials.NewTransport("aws", credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{{Name: "aws",
		Origins: []string{origin}, SigV4: &credentials.SigV4Auth{AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"}}}}, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	return &native.Host{Transport: auth}
}

// byID and byName are the two ways a Node names its instance.
func (e *env) byID(name string) *abi.Node {
	in := e.instances[name]
	return &abi.Node{Name: in.PrivateDNSName, ProviderID: "aws:///" + in.Zone + "/" + in.ID}
}

func (e *env) byName(name string) *abi.Node { return &abi.Node{Name: e.instances[name].PrivateDNSName} }

func TestInstanceMetadata(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	in := e.instances["running"]
	want := &abi.InstanceMetadata{
		ProviderID: "aws:///" + in.Zone + "/" + in.ID, InstanceType: "m5.large", Zone: in.Zone, Region: "us-east-1",
		NodeAddresses: []abi.NodeAddress{
			{Type: "InternalIP", Address: in.PrivateIP},
			{Type: "ExternalIP", Address: in.PublicIP},
			{Type: "InternalDNS", Address: in.PrivateDNSName},
			{Type: "Hostname", Address: in.PrivateDNSName},
			{Type: "ExternalDNS", Address: in.PublicDNSName},
		},
		AdditionalLabels: map[string]string{ZoneIDLabel: "use1-az1"},
	}
	for how, node := range map[string]*abi.Node{"by provider ID": e.byID("running"), "by name": e.byName("running")} {
		got, err := e.p.InstanceMetadata(context.Background(), node)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v\nwant %+v", how, got, err, want)
		}
	}
	// The zone IDs are asked once and shared; a Node that has the label
	// is not given it again.
	if n := e.cloud.Requests()["ec2:DescribeAvailabilityZones"]; n != 1 {
		t.Errorf("%d DescribeAvailabilityZones for two answers, want 1", n)
	}
	labelled := e.byID("running")
	labelled.Labels = map[string]string{ZoneIDLabel: "use1-az1"}
	if got, err := e.p.InstanceMetadata(context.Background(), labelled); err != nil || got.AdditionalLabels != nil {
		t.Errorf("labelled Node: %+v, %v", got, err)
	}
	if _, err := e.p.InstanceMetadata(context.Background(), &abi.Node{Name: "ip-10-9-9-9.ec2.internal"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("unknown Node: %v, want NotFound", err)
	}
}

// TestNewInstanceNotYetDescribed: right after launch EC2 may not describe
// an instance yet. Looked up by its name (a new Node has no provider ID),
// it is NotFound, an error, never gone; once described it is found.
func TestNewInstanceNotYetDescribed(t *testing.T) {
	e := newEnvWith(t, awsfake.DefaultSecretAccessKey, awsfake.Options{HideNewInstances: 2})
	ctx := context.Background()
	in, err := e.cloud.AddInstance(awsfake.Instance{Tags: clusterTags})
	if err != nil {
		t.Fatal(err)
	}
	node := &abi.Node{Name: in.PrivateDNSName}
	if exists, err := e.p.InstanceExists(ctx, node); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("hidden: InstanceExists = %v, %v; want a NotFound error", exists, err)
	}
	if _, err := e.p.InstanceMetadata(ctx, node); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("hidden: InstanceMetadata: %v, want NotFound", err)
	}
	if exists, err := e.p.InstanceExists(ctx, node); err != nil || !exists {
		t.Fatalf("described: InstanceExists = %v, %v", exists, err)
	}
}

// TestPagedListings: every listing follows NextToken to the end, so
// that an answer split in pages is read whole, and lookups, routes and
// load balancers come out as from one page.
func TestPagedListings(t *testing.T) {
	e := newEnvWith(t, awsfake.DefaultSecretAccessKey, awsfake.Options{PageSize: 1})
	ctx := context.Background()
	if exists, err := e.p.InstanceExists(ctx, e.byName("running")); err != nil || !exists {
		t.Fatalf("InstanceExists by name = %v, %v", exists, err)
	}
	r := &abi.Route{TargetNode: e.instances["running"].PrivateDNSName, DestinationCIDR: "10.244.1.0/24"}
	if err := e.p.CreateRoute(ctx, cluster, "", r); err != nil {
		t.Fatal(err)
	}
	if routes, err := e.p.ListRoutes(ctx, cluster); err != nil || len(routes) != 1 {
		t.Fatalf("ListRoutes = %+v, %v", routes, err)
	}
	before := e.cloud.Requests()
	svc := service(nil)
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	// The Nodes' three instances come one per page (the terminated one
	// left out), and so do the VPC's three subnets.
	lb := e.loadBalancer(t, e.p.GetLoadBalancerName(ctx, cluster, svc))
	if len(lb.Instances) != 2 || len(lb.Subnets) != 3 {
		t.Errorf("the load balancer got instances %v and subnets %v from paged listings", lb.Instances, lb.Subnets)
	}
	asked := delta(before, e.cloud.Requests())
	if asked["ec2:DescribeInstances"] != 3 || asked["ec2:DescribeSubnets"] != 3 {
		t.Errorf("requests %v: want 3 pages of instances and 3 of subnets", asked)
	}
}

// TestInstanceStates: a terminated instance or an ID the API does not
// know is gone, a stopped one shut down, by provider ID and by name; a
// name no instance has is NotFound (an error), as in the official CCM.
func TestInstanceStates(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	unknownID := &abi.Node{Name: "x", ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}
	unknownName := &abi.Node{Name: "ip-10-9-9-9.ec2.internal"}
	tests := []struct {
		name             string
		node             *abi.Node
		exists, shutdown bool
		// notFound: the answer is a NotFound error, which the host never
		// reads as gone.
		notFound bool
	}{
		{"running by ID", e.byID("running"), true, false, false},
		{"running by name", e.byName("running"), true, false, false},
		{"stopped by ID", e.byID("stopped"), true, true, false},
		{"stopped by name", e.byName("stopped"), true, true, false},
		{"terminated by ID", e.byID("terminated"), false, false, false},
		{"unknown ID", unknownID, false, false, false},
		{"unknown name", unknownName, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists, err := e.p.InstanceExists(context.Background(), tt.node)
			if tt.notFound {
				if !errors.Is(err, sdk.ErrNotFound) {
					t.Fatalf("InstanceExists = %v, %v; want a NotFound error", exists, err)
				}
				return
			}
			if err != nil || exists != tt.exists {
				t.Fatalf("InstanceExists = %v, %v; want %v", exists, err, tt.exists)
			}
			if !tt.exists {
				return
			}
			shutdown, err := e.p.InstanceShutdown(context.Background(), tt.node)
			if err != nil || shutdown != tt.shutdown {
				t.Fatalf("InstanceShutdown = %v, %v; want %v", shutdown, err, tt.shutdown)
			}
		})
	}
}

// TestNeverGoneOnDoubt: faults and refused signatures are errors, never
// "gone" or "shut down".
func TestNeverGoneOnDoubt(t *testing.T) {
	faults := map[string]faultinject.Fault{
		"500":       {Route: "ec2:DescribeInstances", Always: true, Status: 500},
		"503":       {Route: "ec2:DescribeInstances", Always: true, Status: 503},
		"throttled": {Route: "ec2:DescribeInstances", Always: true, Status: 429, RetryAfter: 2},
		"401":       {Route: "ec2:DescribeInstances", Always: true, Status: 401},
		"wrong key": {},
	}
	for name, f := range faults {
		t.Run(name, func(t *testing.T) {
			secret := awsfake.DefaultSecretAccessKey
			if name == "wrong key" {
				secret = "not-the-secret"
			}
			e := newEnv(t, secret)
			if f.Route != "" {
				if _, err := e.cloud.Faults.Add(f); err != nil {
					t.Fatal(err)
				}
			}
			for _, node := range []*abi.Node{e.byID("running"), e.byName("running"), e.byID("stopped")} {
				if exists, err := e.p.InstanceExists(context.Background(), node); err == nil {
					t.Errorf("InstanceExists(%s) = %v without an error", node.Name, exists)
				}
				if shutdown, err := e.p.InstanceShutdown(context.Background(), node); err == nil || shutdown {
					t.Errorf("InstanceShutdown(%s) = %v, %v", node.Name, shutdown, err)
				}
				if _, err := e.p.InstanceMetadata(context.Background(), node); err == nil || errors.Is(err, sdk.ErrNotFound) {
					t.Errorf("InstanceMetadata(%s): %v, want an error other than NotFound", node.Name, err)
				}
			}
		})
	}
}

// TestEmptyAnswerIsNotGone: a DescribeInstances by ID answered without
// the instance, and without InvalidInstanceID.NotFound, is an error: EC2
// never answers so for an instance that is gone, so the answer proves
// nothing and must delete no Node.
func TestEmptyAnswerIsNotGone(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	fake := e.cloud.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("Action=DescribeInstances")) {
			w.Header().Set("Content-Type", "text/xml")
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId><reservationSet/></DescribeInstancesResponse>`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := New(sigV4Host(t, srv.URL, awsfake.DefaultSecretAccessKey))
	if err := p.Init(context.Background(), cluster, []byte(`{"region": "us-east-1", "clusterID": "c1", "ec2Endpoint": "`+srv.URL+`", "elbEndpoint": "`+srv.URL+`"}`)); err != nil {
		t.Fatal(err)
	}
	for _, node := range []*abi.Node{e.byID("running"), e.byID("stopped")} {
		if exists, err := p.InstanceExists(context.Background(), node); err == nil {
			t.Errorf("InstanceExists(%s) = %v without an error", node.ProviderID, exists)
		}
		if shutdown, err := p.InstanceShutdown(context.Background(), node); err == nil || shutdown {
			t.Errorf("InstanceShutdown(%s) = %v, %v; want an error", node.ProviderID, shutdown, err)
		}
		if _, err := p.InstanceMetadata(context.Background(), node); err == nil || errors.Is(err, sdk.ErrNotFound) {
			t.Errorf("InstanceMetadata(%s): %v, want an error other than NotFound", node.ProviderID, err)
		}
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	running := e.instances["running"]
	r := &abi.Route{TargetNode: running.PrivateDNSName, DestinationCIDR: "10.244.1.0/24"}
	for range 2 { // the second create finds the route in place
		if err := e.p.CreateRoute(ctx, cluster, "hint", r); err != nil {
			t.Fatal(err)
		}
	}
	if in, _ := e.cloud.Instance(running.ID); !in.NoSourceDestCheck {
		t.Error("the source/destination check of the target is still on")
	}
	routes, err := e.p.ListRoutes(ctx, cluster)
	want := []abi.Route{{Name: cluster + "-10.244.1.0/24", TargetNode: running.PrivateDNSName, DestinationCIDR: "10.244.1.0/24"}}
	if err != nil || !reflect.DeepEqual(routes, want) {
		t.Fatalf("ListRoutes = %+v, %v; want %+v", routes, err, want)
	}
	// The route controller lists every few seconds: the instance's name is
	// known from then on, and not asked again.
	before := e.cloud.Requests()["ec2:DescribeInstances"]
	if again, err := e.p.ListRoutes(ctx, cluster); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("ListRoutes again = %+v, %v", again, err)
	}
	if n := e.cloud.Requests()["ec2:DescribeInstances"] - before; n != 0 {
		t.Errorf("listing the routes again asked DescribeInstances %d times", n)
	}
	if err := e.cloud.TerminateInstance(running.ID); err != nil {
		t.Fatal(err)
	}
	routes, err = e.p.ListRoutes(ctx, cluster)
	want = []abi.Route{{Name: cluster + "-10.244.1.0/24", DestinationCIDR: "10.244.1.0/24", Blackhole: true}}
	if err != nil || !reflect.DeepEqual(routes, want) {
		t.Fatalf("after termination: ListRoutes = %+v, %v; want %+v", routes, err, want)
	}
	for range 2 { // deleting a deleted route succeeds: the API says it is absent
		if err := e.p.DeleteRoute(ctx, cluster, &want[0]); err != nil {
			t.Fatal(err)
		}
	}
	if routes, err := e.p.ListRoutes(ctx, cluster); err != nil || len(routes) != 0 {
		t.Fatalf("after delete: %+v, %v", routes, err)
	}
	if _, err := e.cloud.Faults.Add(faultinject.Fault{Route: "ec2:DescribeRouteTables", Always: true, Status: 500}); err != nil {
		t.Fatal(err)
	}
	if routes, err := e.p.ListRoutes(ctx, cluster); err == nil {
		t.Fatalf("ListRoutes under a fault = %+v without an error", routes)
	}
}

func TestInitRejectsBadConfig(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"region": "us-east-1"}`, `{"region": "r", "clusterID": "c", "ec2Endpoint": "ftp://x"}`,
		`{"region": "r", "clusterID": "c", "requestTimeout": "-1s"}`, `{"region": "r", "clusterID": "c", "typo": 1}`} {
		if err := New(&native.Host{}).Init(context.Background(), cluster, []byte(cfg)); err == nil {
			t.Errorf("Init(%s) accepted", cfg)
		}
	}
}
