package assembly

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/sweep"
)

// listingModule is a module's side of the sweep: it lists the load
// balancers it is given, each named after its Service UID, and records
// what it is asked to delete.
type listingModule struct {
	name    string
	lbs     []abi.OwnedLoadBalancer
	deleted []string
}

func (m *listingModule) Name() string { return m.name }

func (m *listingModule) ListOwnedLoadBalancers(context.Context, string) ([]abi.OwnedLoadBalancer, any, error) {
	return slices.Clone(m.lbs), m, nil
}

func (m *listingModule) LoadBalancerNameOf(_ context.Context, _ string, svc *v1.Service) (string, error) {
	return "lb-" + string(svc.UID), nil
}

func (m *listingModule) DeleteOwnedLoadBalancer(_ context.Context, _ string, svc *v1.Service) error {
	m.deleted = append(m.deleted, string(svc.UID))
	m.lbs = slices.DeleteFunc(m.lbs, func(lb abi.OwnedLoadBalancer) bool { return lb.ServiceUID == string(svc.UID) })
	return nil
}

// TestSweepDeletesWhatNoServiceWants runs each module's orphan sweep with
// its Routing.Keeps over modules that list load balancers of every kind:
// a module's load balancer goes when its Service is gone, no longer of
// type LoadBalancer (its class lost across a restart, or its cleanup
// another module's), or of a class no module serves; it stays while its
// Service wants a load balancer from any module here (modules sharing a
// cloud account list each other's), while the module's own service
// controller is to clean it up, and when it is another cluster's.
func TestSweepDeletesWhatNoServiceWants(t *testing.T) {
	r := NewRouting(mustParse(t, twoClouds))
	lb, clusterIP := v1.ServiceTypeLoadBalancer, v1.ServiceTypeClusterIP
	services := []*v1.Service{
		service("default", "", lb),
		service("test", "example.com/test", lb),
		service("appliance", "example.com/appliance", lb),
		// Switched to ClusterIP while no CCM ran: the API server cleared
		// its class, the default module's controller took its finalizer.
		service("switched", "", clusterIP),
		// The same with its finalizer still on: the default module's
		// controller cleans up after it.
		service("switched-finalizer", "", clusterIP, lbFinalizer),
		deleting(service("test-deleting", "example.com/test", lb, lbFinalizer)),
		service("unserved-class", "example.com/other", lb),
	}
	// Switched to ClusterIP while this process ran: it remembers the class.
	remembered := service("remembered", "example.com/test", lb, lbFinalizer)
	r.ServiceModule(remembered)
	remembered = service("remembered", "", clusterIP, lbFinalizer)
	services = append(services, remembered)

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, svc := range services {
		indexer.Add(svc)
	}
	owned := func(uids ...string) []abi.OwnedLoadBalancer {
		var out []abi.OwnedLoadBalancer
		for _, uid := range uids {
			out = append(out, abi.OwnedLoadBalancer{Name: "lb-" + uid, ClusterName: "demo", ServiceUID: uid, ServiceNamespace: "default", ServiceName: "svc-" + uid})
		}
		return out
	}
	for _, tc := range []struct {
		module      string
		listed      []abi.OwnedLoadBalancer
		wantDeleted []string
	}{
		{"test", owned("test", "gone", "switched", "switched-finalizer", "test-deleting", "remembered", "unserved-class"),
			[]string{"gone", "switched", "switched-finalizer", "unserved-class"}},
		// Sharing test's account: test's load balancers are listed too.
		{"appliance", owned("appliance", "test", "default", "remembered", "test-deleting"),
			[]string{"remembered", "test-deleting"}},
		{"sim", append(owned("default", "switched-finalizer"),
			abi.OwnedLoadBalancer{Name: "lb-x", ClusterName: "another", ServiceUID: "gone-elsewhere"}), nil},
	} {
		t.Run(tc.module, func(t *testing.T) {
			m := &listingModule{name: tc.module, lbs: tc.listed}
			events := record.NewFakeRecorder(100)
			s := sweep.New(cloudconfig.OrphanSweep{}, m, sweep.Scope{Module: tc.module, Keeps: r.Keeps(tc.module)}, "demo",
				corelisters.NewServiceLister(indexer), func() bool { return true }, events, nil)
			for range 3 {
				s.Sweep(context.Background())
			}
			slices.Sort(m.deleted)
			if !slices.Equal(m.deleted, tc.wantDeleted) {
				t.Fatalf("deleted %v, want %v", m.deleted, tc.wantDeleted)
			}
			for len(events.Events) > 0 {
				if e := <-events.Events; !strings.Contains(e, "module "+tc.module+": ") {
					t.Errorf("Event %q does not name module %s", e, tc.module)
				}
			}
		})
	}
}

// TestLostClassDeletedByItsModule: a Service of a class switched to
// ClusterIP while no CCM ran reaches the default module's controller
// (the class is gone); the module that listed a load balancer for it
// deletes its own, and only then is it reported gone.
func TestLostClassDeletedByItsModule(t *testing.T) {
	simCloud, simGrants := lifecycletest.Simcloud(t)
	otherCloud, otherGrants := lifecycletest.Simcloud(t)
	wasm, _ := lifecycletest.SimcloudModule(t, "simcloud")
	dir := t.TempDir()
	lifecycletest.WriteFile(t, filepath.Join(dir, "sim.wasm"), wasm)
	module := func(name, serves string, g lifecycletest.Grants) string {
		return fmt.Sprintf(`- name: %[1]s
  module: {path: %[2]s/sim.wasm, compilationCacheDir: %[3]s}
  limits: {poolSize: 1}
  loadBalancers: %[4]s
  http: {allowedOrigins: [%[5]q]}
  credentials: {dir: %[6]s, auth: [{name: token, origins: [%[5]q], bearer: {key: token}}]}
  providerConfig: %[7]s
`, name, dir, lifecycletest.CompilationCache(), serves, g.Origin, g.Credentials.Dir, g.ProviderConfig)
	}
	cfg := mustParse(t, "clusterName: demo\nmodules:\n"+module("sim", "{default: true}", simGrants)+module("other", "{classes: [example.com/other], targets: all}", otherGrants))
	c, err := Start(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	ctx := context.Background()
	lbs := loadBalancers(c)
	otherLB, _ := lbs["other"].LoadBalancer()
	defaultLB, _ := lbs["sim"].LoadBalancer()

	// Made by module other, as its controller sees the Service: without
	// its class.
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("1f0c7a4e-0000-4000-8000-000000000001")},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
	if _, err := otherLB.EnsureLoadBalancer(ctx, "demo", svc, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(otherCloud.LoadBalancers()); n != 1 {
		t.Fatalf("module other's cloud has %d load balancers, want 1", n)
	}
	switched := svc.DeepCopy()
	switched.Spec.Type = v1.ServiceTypeClusterIP
	switched.Finalizers = []string{lbFinalizer}
	if !c.routing.ClassLost(switched) || c.routing.ServiceModule(switched) != "sim" {
		t.Fatal("the switched Service is not the default module's with its class lost")
	}

	_, exists, err := defaultLB.GetLoadBalancer(ctx, "demo", switched)
	if err != nil || !exists {
		t.Fatalf("the default module's controller is told exists=%v, %v; want the other module's load balancer found", exists, err)
	}
	if err := defaultLB.EnsureLoadBalancerDeleted(ctx, "demo", switched); err != nil {
		t.Fatal(err)
	}
	if n := len(otherCloud.LoadBalancers()); n != 0 {
		t.Fatalf("module other's cloud still has %d load balancers", n)
	}
	if _, exists, err := defaultLB.GetLoadBalancer(ctx, "demo", switched); err != nil || exists {
		t.Fatalf("after the delete: exists=%v, %v", exists, err)
	}
	if n := len(simCloud.LoadBalancers()); n != 0 {
		t.Fatalf("the default module's cloud has %d load balancers", n)
	}
}
