package assembly

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"
	cloudnodecontroller "k8s.io/cloud-provider/controllers/node"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/wasmccm/wasmccm/examples/simcloud"
)

// TestNodeViews: each module's Node controllers list, get and hear of its
// own Nodes only; a Node without a provider ID reaches exactly one module
// by the rules, none when no rule matches; a Node whose labels move it
// arrives at its new module as added and leaves the old one as deleted.
func TestNodeViews(t *testing.T) {
	cfg, _ := hybridConfig(t, "simcloud://")
	c, err := Start(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	servers := c.NodeServers(factory.Core().V1().Nodes())
	if got := []string{servers[0].Module, servers[1].Module}; len(servers) != 2 || !slices.Equal(got, []string{"sim", "test"}) {
		t.Fatalf("Node servers %v, want sim and test", servers)
	}

	var mu sync.Mutex
	heard := map[string][]string{} // module: "add name", "delete name"
	for _, s := range servers {
		note := func(what string) func(any) {
			return func(obj any) {
				mu.Lock()
				defer mu.Unlock()
				heard[s.Module] = append(heard[s.Module], what+" "+obj.(*v1.Node).Name)
			}
		}
		if _, err := s.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note("add"), DeleteFunc: note("delete")}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, n := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "sim-a", Labels: map[string]string{"cloud": "sim"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sim-b"}, Spec: v1.NodeSpec{ProviderID: "simcloud://b"}},
		// The name pattern is the test module's, the provider ID sim's.
		{ObjectMeta: metav1.ObjectMeta{Name: "test-sim"}, Spec: v1.NodeSpec{ProviderID: "simcloud://c"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "test-a"}},
		// Both modules' rules match: the first in the cloud-config's order.
		{ObjectMeta: metav1.ObjectMeta{Name: "test-both", Labels: map[string]string{"cloud": "sim"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "stray"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Spec: v1.NodeSpec{ProviderID: "other://x"}},
	} {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	want := map[string][]string{
		"sim":  {"sim-a", "sim-b", "test-both", "test-sim"},
		"test": {"test-a"},
	}
	for _, s := range servers {
		if !s.Nodes.Informer().HasSynced() {
			t.Fatalf("%s: the view has not synced", s.Module)
		}
		nodes, err := s.Nodes.Lister().List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, want[s.Module]) {
			t.Errorf("%s lists %v, want %v", s.Module, names, want[s.Module])
		}
		for _, name := range []string{"sim-a", "test-a", "stray", "elsewhere"} {
			_, err := s.Nodes.Lister().Get(name)
			if own := slices.Contains(want[s.Module], name); own != (err == nil) || (!own && !apierrors.IsNotFound(err)) {
				t.Errorf("%s gets %s: %v; its own: %v", s.Module, name, err, own)
			}
		}
	}

	// test-both loses the label sim's rule matches: the test module's
	// name pattern now serves it.
	moved, _ := client.CoreV1().Nodes().Get(ctx, "test-both", metav1.GetOptions{})
	moved.Labels = nil
	if _, err := client.CoreV1().Nodes().Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantHeard := map[string][]string{
		"sim":  {"add sim-a", "add sim-b", "add test-both", "add test-sim", "delete test-both"},
		"test": {"add test-a", "add test-both"},
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := map[string][]string{}
		for m, h := range heard {
			got[m] = slices.Sorted(slices.Values(h))
		}
		mu.Unlock()
		if equalHeard(got, wantHeard) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the handlers heard %v, want %v", got, wantHeard)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func equalHeard(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestModuleInstancesReachOneModule: a module's Node controllers reach
// its module only, even for a Node that has moved to another since the
// view showed it.
func TestModuleInstancesReachOneModule(t *testing.T) {
	h := newHybrid(t, "simcloud://")
	servers := h.c.NodeServers(informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes())
	ctx := context.Background()
	for _, s := range servers {
		instances, ok := s.Cloud.InstancesV2()
		if !ok {
			t.Fatalf("%s: no InstancesV2", s.Module)
		}
		if _, ok := s.Cloud.Instances(); ok {
			t.Fatalf("%s: Instances offered, which would bypass the module's guards", s.Module)
		}
		for _, name := range []string{"sim-a", "test-b"} {
			_, err := instances.InstanceExists(ctx, h.nodes[name])
			own := strings.HasPrefix(name, s.Module)
			if own != (err == nil) {
				t.Errorf("%s's InstanceExists(%s): %v; its own: %v", s.Module, name, err, own)
			}
		}
	}
}

// TestHungModuleHoldsOnlyItsOwnNodes runs upstream's cloud-node
// controller, one worker each, per module: while the test module's call
// about Node loop runs to its 1 s timeout, a new Node of module sim is
// initialized at once. One controller over every Node would have kept it
// waiting behind loop.
func TestHungModuleHoldsOnlyItsOwnNodes(t *testing.T) {
	cfg, cloud := hybridConfig(t, "simcloud://")
	c, err := Start(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := cloud.AddInstance(simcloud.Instance{Name: "sim-new", Zone: "sim-1a", Region: "sim-1", State: "running"}); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	metrics := controllersmetrics.NewControllerManagerMetrics("test")
	for _, s := range c.NodeServers(factory.Core().V1().Nodes()) {
		cnc, err := cloudnodecontroller.NewCloudNodeController(s.Nodes, client, s.Cloud, time.Hour, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		go cnc.RunWithContext(ctx, metrics)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	uninitialized := []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	create := func(n *v1.Node) {
		n.Spec.Taints = uninitialized
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "loop"}, Spec: v1.NodeSpec{ProviderID: "test://loop"}})
	time.Sleep(100 * time.Millisecond) // the test module's worker is in the loop
	start := time.Now()
	create(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-new", Labels: map[string]string{"cloud": "sim"}}})
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, "sim-new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Spec.ProviderID != "" && len(n.Spec.Taints) == 0 {
			break
		}
		// The test module's call timeout is 1 s; a sim Node queued
		// behind loop would take 0.9 s at least.
		if took := time.Since(start); took > 600*time.Millisecond {
			t.Fatalf("sim-new still uninitialized after %v beside a hung module: provider ID %q, taints %v", took, n.Spec.ProviderID, n.Spec.Taints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("sim-new initialized in %v while module test hung on loop", time.Since(start))
}
