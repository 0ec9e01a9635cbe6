package sweep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/events"
)

const cluster = "test-cluster"

// fakeCloud is a module's cloud: load balancers by name, each with the
// Service UID (and cluster) it carries. name maps a Service to its load
// balancer name as the module would.
type fakeCloud struct {
	lbs     []abi.OwnedLoadBalancer
	module  any
	listErr error
	nameErr error
	name    func(svc *v1.Service) string
	// keep makes deletes succeed without removing anything.
	keep    bool
	lists   int
	deleted []string
}

func (f *fakeCloud) ListOwnedLoadBalancers(_ context.Context, clusterName string) ([]abi.OwnedLoadBalancer, any, error) {
	f.lists++
	if clusterName != cluster {
		return nil, nil, fmt.Errorf("asked for cluster %q", clusterName)
	}
	if f.listErr != nil {
		return nil, f.module, f.listErr
	}
	return slices.Clone(f.lbs), f.module, nil
}

func (f *fakeCloud) LoadBalancerNameOf(_ context.Context, _ string, svc *v1.Service) (string, error) {
	if f.nameErr != nil {
		return "", f.nameErr
	}
	if f.name != nil {
		return f.name(svc), nil
	}
	return defaultName(svc), nil
}

// defaultName is cloudprovider.DefaultLoadBalancerName's scheme.
func defaultName(svc *v1.Service) string {
	n := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	return n[:min(len(n), 32)]
}

func (f *fakeCloud) Name() string { return "fake" }

func (f *fakeCloud) DeleteOwnedLoadBalancer(_ context.Context, _ string, svc *v1.Service) error {
	f.deleted = append(f.deleted, string(svc.UID))
	if f.keep {
		return nil
	}
	f.lbs = slices.DeleteFunc(f.lbs, func(lb abi.OwnedLoadBalancer) bool { return lb.ServiceUID == string(svc.UID) })
	return nil
}

// add puts a load balancer named after uid in the cloud, as the module
// would have made it for that Service.
func (f *fakeCloud) add(uid string) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
	f.lbs = append(f.lbs, abi.OwnedLoadBalancer{Name: defaultName(svc), ClusterName: cluster, ServiceUID: uid, ServiceNamespace: "default", ServiceName: "svc-" + uid})
}

type fixture struct {
	cloud    *fakeCloud
	services cache.Indexer
	synced   bool
	events   *record.FakeRecorder
	s        *Sweeper
	now      time.Time
}

func newFixture(t *testing.T, cfg cloudconfig.OrphanSweep) *fixture {
	t.Helper()
	f := &fixture{cloud: &fakeCloud{module: "m1"}, services: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		synced: true, events: record.NewFakeRecorder(100), now: time.Unix(1_800_000_000, 0)}
	f.s = New(cfg, f.cloud, Scope{}, cluster, corelisters.NewServiceLister(f.services), func() bool { return f.synced }, f.events, nil)
	f.s.now = func() time.Time { return f.now }
	return f
}

func (f *fixture) service(name, uid string, mutate ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	for _, m := range mutate {
		m(svc)
	}
	f.services.Add(svc)
	return svc
}

func (f *fixture) sweep(t *testing.T, want string) {
	t.Helper()
	if got := f.s.Sweep(context.Background()); got != want {
		t.Fatalf("sweep result %q, want %q", got, want)
	}
}

func (f *fixture) wantDeleted(t *testing.T, uids ...string) {
	t.Helper()
	if !slices.Equal(f.cloud.deleted, uids) {
		t.Fatalf("deleted %v, want %v", f.cloud.deleted, uids)
	}
}

func (f *fixture) eventReasons() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

// TestOrphanDeletedAtTheSecondSweep: one sweep finds the orphan, the next
// deletes it, with an Event each time; a load balancer whose Service
// exists is never touched.
func TestOrphanDeletedAtTheSecondSweep(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.cloud.add("u-live")
	f.service("live", "u-live")
	f.sweep(t, resultOK)
	f.wantDeleted(t)
	if got := f.s.Pending(); len(got) != 1 || !strings.HasSuffix(got[0], "/u-gone") {
		t.Fatalf("pending %v", got)
	}
	f.sweep(t, resultOK)
	f.wantDeleted(t, "u-gone")
	f.sweep(t, resultOK)
	f.wantDeleted(t, "u-gone")
	if got := f.eventReasons(); !slices.Equal(got, []string{string(events.OrphanLoadBalancerFound), string(events.OrphanLoadBalancerDeleted)}) {
		t.Fatalf("events %v", got)
	}
}

// TestNothingBeforeTheInformerSynced: the module is not even asked.
func TestNothingBeforeTheInformerSynced(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.synced = false
	for range 3 {
		f.sweep(t, resultNotSynced)
	}
	if f.cloud.lists != 0 {
		t.Fatalf("listed %d times before the informer synced", f.cloud.lists)
	}
	f.synced = true
	f.sweep(t, resultOK)
	f.wantDeleted(t)
}

// TestAnyServiceWithTheUIDProtects: a Service of any type, or being
// deleted, keeps its load balancer from the sweep.
func TestAnyServiceWithTheUIDProtects(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-clusterip")
	f.cloud.add("u-deleting")
	f.service("was-lb", "u-clusterip", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP })
	now := metav1.Now()
	f.service("deleting", "u-deleting", func(s *v1.Service) {
		s.DeletionTimestamp = &now
		s.Finalizers = []string{loadBalancerCleanupFinalizer}
	})
	for range 4 {
		f.sweep(t, resultOK)
	}
	f.wantDeleted(t)
}

// TestRecreatedServiceKeepsAnAdoptedLoadBalancer: a Service deleted and
// recreated under the same name gets a new UID. A module that names load
// balancers by annotation resolves the new Service to the old load
// balancer (which still carries the old UID until it is relabelled): the
// sweep keeps it. With names from the UID, the old one is a real orphan
// and goes.
func TestRecreatedServiceKeepsAnAdoptedLoadBalancer(t *testing.T) {
	t.Run("named by annotation", func(t *testing.T) {
		f := newFixture(t, cloudconfig.OrphanSweep{})
		f.cloud.lbs = []abi.OwnedLoadBalancer{{Name: "web-lb", ClusterName: cluster, ServiceUID: "u-old", ServiceNamespace: "default", ServiceName: "web"}}
		f.cloud.name = func(svc *v1.Service) string {
			if n := svc.Annotations["lb-name"]; n != "" {
				return n
			}
			return defaultName(svc)
		}
		f.service("web", "u-new", func(s *v1.Service) { s.Annotations = map[string]string{"lb-name": "web-lb"} })
		for range 4 {
			f.sweep(t, resultOK)
		}
		f.wantDeleted(t)
		if len(f.s.Pending()) != 0 {
			t.Fatalf("pending %v", f.s.Pending())
		}
	})
	t.Run("named by UID", func(t *testing.T) {
		f := newFixture(t, cloudconfig.OrphanSweep{})
		f.cloud.add("u-old")
		f.cloud.lbs[0].ServiceName = "web"
		f.cloud.add("u-new")
		f.cloud.lbs[1].ServiceName = "web"
		f.service("web", "u-new")
		f.sweep(t, resultOK)
		f.sweep(t, resultOK)
		f.wantDeleted(t, "u-old")
	})
	t.Run("Service type changed but its finalizer is still there", func(t *testing.T) {
		f := newFixture(t, cloudconfig.OrphanSweep{})
		f.cloud.lbs = []abi.OwnedLoadBalancer{{Name: "web-lb", ServiceUID: "u-old"}}
		f.cloud.name = func(*v1.Service) string { return "web-lb" }
		f.service("web", "u-new", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Finalizers = []string{loadBalancerCleanupFinalizer}
		})
		for range 3 {
			f.sweep(t, resultOK)
		}
		f.wantDeleted(t)
	})
}

// TestAnotherClustersLoadBalancersIgnored: an entry naming another
// cluster is never a candidate, even when the module lists it.
func TestAnotherClustersLoadBalancersIgnored(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-other")
	f.cloud.lbs[0].ClusterName = "another-cluster"
	f.cloud.lbs = append(f.cloud.lbs, abi.OwnedLoadBalancer{Name: "", ServiceUID: "u-noname"}, abi.OwnedLoadBalancer{Name: "x"})
	for range 4 {
		f.sweep(t, resultOK)
	}
	f.wantDeleted(t)
}

// TestAFailedListingBreaksTheChain: sweeps agree only when consecutive.
func TestAFailedListingBreaksTheChain(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.sweep(t, resultOK)
	f.cloud.listErr = errors.New("cloud unavailable")
	f.sweep(t, resultListFailed)
	f.cloud.listErr = nil
	f.sweep(t, resultOK)
	f.wantDeleted(t)
	f.sweep(t, resultOK)
	f.wantDeleted(t, "u-gone")
}

// TestANewModuleConfirmsNothing: a module replaced between two sweeps
// (hot reload, rollback) must find the orphan twice itself.
func TestANewModuleConfirmsNothing(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.sweep(t, resultOK)
	f.cloud.module = "m2"
	f.sweep(t, resultOK)
	f.wantDeleted(t)
	f.sweep(t, resultOK)
	f.wantDeleted(t, "u-gone")
}

// TestAnOrphanThatLeavesIsForgotten: deleted by someone else in between,
// then back (another late create): it must be seen twice again.
func TestAnOrphanThatLeavesIsForgotten(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.sweep(t, resultOK)
	lbs := f.cloud.lbs
	f.cloud.lbs = nil
	f.sweep(t, resultOK)
	f.cloud.lbs = lbs
	f.sweep(t, resultOK)
	f.wantDeleted(t)
}

// TestNoNameNoDeletion: when a Service's load balancer name cannot be
// had, nothing is deleted.
func TestNoNameNoDeletion(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.service("live", "u-live")
	f.cloud.nameErr = errors.New("trap")
	for range 3 {
		f.sweep(t, resultNameFailed)
	}
	f.wantDeleted(t)
}

// TestUnsupportedModule: a module without the export is asked nothing
// else.
func TestUnsupportedModule(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.add("u-gone")
	f.cloud.listErr = ErrUnsupported
	f.sweep(t, resultUnsupported)
	f.sweep(t, resultUnsupported)
	f.cloud.listErr = cloudprovider.NotImplemented
	f.sweep(t, resultUnsupported)
	f.wantDeleted(t)
}

// TestDeletionBudget: at most MaxDeletionsPerHour in a sliding hour; the
// rest wait with an Event and go when the hour has slid.
func TestDeletionBudget(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{MaxDeletionsPerHour: 2})
	for i := range 5 {
		f.cloud.add(fmt.Sprintf("u-%d", i))
	}
	f.sweep(t, resultOK)
	f.sweep(t, resultOK)
	if len(f.cloud.deleted) != 2 {
		t.Fatalf("deleted %v in one hour, want 2", f.cloud.deleted)
	}
	f.now = f.now.Add(30 * time.Minute)
	f.sweep(t, resultOK)
	if len(f.cloud.deleted) != 2 {
		t.Fatalf("deleted %v within the hour, want 2", f.cloud.deleted)
	}
	f.now = f.now.Add(31 * time.Minute)
	f.sweep(t, resultOK)
	if len(f.cloud.deleted) != 4 {
		t.Fatalf("deleted %v after the hour, want 4", f.cloud.deleted)
	}
	reasons := f.eventReasons()
	if n := strings.Count(strings.Join(reasons, " "), string(events.OrphanLoadBalancerDeferred)); n != 3+3+1 {
		t.Errorf("%d deferrals in %v, want 7", n, reasons)
	}
}

// TestDryRun reports and deletes nothing.
func TestDryRun(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{DryRun: true})
	f.cloud.add("u-gone")
	for range 3 {
		f.sweep(t, resultOK)
	}
	f.wantDeleted(t)
}

// TestADeleteThatRemovesNothingIsNotRepeated: a module whose delete
// succeeds without removing the load balancer gets one try and a Warning.
func TestADeleteThatRemovesNothingIsNotRepeated(t *testing.T) {
	f := newFixture(t, cloudconfig.OrphanSweep{})
	f.cloud.keep = true
	f.cloud.add("u-gone")
	for range 5 {
		f.sweep(t, resultOK)
	}
	f.wantDeleted(t, "u-gone")
	if got := f.eventReasons(); !slices.Contains(got, string(events.OrphanLoadBalancerNotRemoved)) {
		t.Fatalf("events %v, want %s", got, events.OrphanLoadBalancerNotRemoved)
	}
}

func TestRefusal(t *testing.T) {
	for _, tt := range []struct {
		cfg     cloudconfig.OrphanSweep
		cluster string
		refused bool
	}{
		{cloudconfig.OrphanSweep{}, "prod-eu", false},
		{cloudconfig.OrphanSweep{}, cloudconfig.DefaultClusterName, true},
		{cloudconfig.OrphanSweep{AllowDefaultClusterName: true}, cloudconfig.DefaultClusterName, false},
		{cloudconfig.OrphanSweep{Disabled: true}, "prod-eu", true},
		{cloudconfig.OrphanSweep{}, "", true},
	} {
		if got := Refusal(tt.cfg, tt.cluster) != ""; got != tt.refused {
			t.Errorf("Refusal(%+v, %q) = %q", tt.cfg, tt.cluster, Refusal(tt.cfg, tt.cluster))
		}
	}
	if err := (cloudconfig.OrphanSweep{Period: cloudconfig.Duration{Duration: time.Second / 2}}).Validate(); err == nil {
		t.Error("a 500ms period was accepted")
	}
	if err := (cloudconfig.OrphanSweep{MaxDeletionsPerHour: -1}).Validate(); err == nil {
		t.Error("a negative budget was accepted")
	}
}
