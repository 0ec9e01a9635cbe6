package assembly

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// hybrid is a Cloud of two real modules: simcloud against an in-process
// simulated cloud, serving the Nodes labelled cloud=sim and the Services
// without class, and the host's test provider, serving the Nodes named
// test-* and the class example.com/test.
type hybrid struct {
	c     *Cloud
	cloud *simcloud.Cloud
	nodes map[string]*v1.Node
	// instances is c's: routed, or the sole simcloud module's (newSingle).
	instances cloudprovider.InstancesV2
	close     func()
}

func newHybrid(t testing.TB, simPrefix string) *hybrid { return newCloud(t, simPrefix, false) }

// newSingle is the same simcloud module with its one-module cloud-config:
// what a CCM of one module runs, the benchmarks' baseline.
func newSingle(t testing.TB) *hybrid { return newCloud(t, "simcloud://", true) }

// loadBalancers maps each module to the provider its service controller
// runs over.
func loadBalancers(c *Cloud) map[string]cloudprovider.Interface {
	out := map[string]cloudprovider.Interface{}
	for _, s := range c.LoadBalancerServers() {
		out[s.Module] = s.Cloud
	}
	return out
}

// hybridConfig starts the simulated cloud and writes the modules' files,
// returning the cloud-config of both modules.
func hybridConfig(t testing.TB, simPrefix string) (*cloudconfig.File, *simcloud.Cloud) {
	t.Helper()
	sim, dir, cloud := simFields(t)
	text := fmt.Sprintf(`
routes: sim
modules:
- name: sim
  nodes: {providerIDPrefix: %[3]q, selector: {matchLabels: {cloud: sim}}}
  loadBalancers: {default: true}
%[4]s- name: test
  module: {path: %[1]s/test.wasm, compilationCacheDir: %[2]s}
  limits: {poolSize: 2, callTimeout: 1s}
  nodes: {providerIDPrefix: "test://", namePattern: "test-*"}
  loadBalancers: {classes: [example.com/test]}
`, dir, lifecycletest.CompilationCache(), simPrefix, indent(sim))
	lifecycletest.WriteFile(t, filepath.Join(dir, "test.wasm"), lifecycletest.Guest(t, "testprovider"))
	return mustParse(t, text), cloud
}

// indent indents every line of text by two spaces, as an entry's fields.
func indent(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
	}
	return b.String()
}

// soleConfig is the simcloud module of hybridConfig as a one-module
// cloud-config.
func soleConfig(t testing.TB) (*cloudconfig.File, *simcloud.Cloud) {
	t.Helper()
	sim, _, cloud := simFields(t)
	return mustParse(t, sim), cloud
}

// simFields starts the simulated cloud, writes the simcloud module into
// dir, and returns its Config's fields, a line each.
func simFields(t testing.TB) (fields, dir string, cloud *simcloud.Cloud) {
	t.Helper()
	cloud, grants := lifecycletest.Simcloud(t)
	simWasm, _ := lifecycletest.SimcloudModule(t, "simcloud")
	dir = t.TempDir()
	lifecycletest.WriteFile(t, filepath.Join(dir, "sim.wasm"), simWasm)
	fields = fmt.Sprintf(`module: {path: %[1]s/sim.wasm, compilationCacheDir: %[2]s}
limits: {poolSize: 2}
http: {allowedOrigins: [%[3]q]}
credentials: {dir: %[4]s, auth: [{name: token, origins: [%[3]q], bearer: {key: token}}]}
providerConfig: %[5]s
`, dir, lifecycletest.CompilationCache(), grants.Origin, grants.Credentials.Dir, grants.ProviderConfig)
	return fields, dir, cloud
}

func newCloud(t testing.TB, simPrefix string, single bool) *hybrid {
	t.Helper()
	cfg, cloud := hybridConfig(t, simPrefix)
	if single {
		cfg, cloud = soleConfig(t)
	}
	h := &hybrid{cloud: cloud, nodes: map[string]*v1.Node{}}
	c, err := Start(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	h.instances, _ = c.InstancesV2()
	h.close = func() { c.Close(context.Background()) }
	t.Cleanup(h.close)

	client := fake.NewClientset()
	add := func(n *v1.Node) {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.nodes[n.Name] = n
	}
	if _, err := cloud.AddInstance(simcloud.Instance{Name: "sim-a", Zone: "sim-1a", Region: "sim-1", State: "running"}); err != nil {
		t.Fatal(err)
	}
	add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-a", UID: "uid-sim-a", Labels: map[string]string{"cloud": "sim"}}})
	add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "test-a", UID: "uid-test-a"}})
	add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "test-b", UID: "uid-test-b"}, Spec: v1.NodeSpec{ProviderID: "test://test-b"}})
	for _, name := range []string{"loop", "trap", "oom"} {
		add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: v1.NodeSpec{ProviderID: "test://" + name}})
	}
	add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray", UID: "uid-stray"}})
	add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", UID: "uid-elsewhere"}, Spec: v1.NodeSpec{ProviderID: "other://x"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return h
}

// TestNodesGoToTheirModule runs the Node calls of the upstream
// controllers over two modules: each Node is answered by its own module,
// and a Node no module serves gets an error, never an answer.
func TestNodesGoToTheirModule(t *testing.T) {
	h := newHybrid(t, "simcloud://")
	ctx := context.Background()
	instances, _ := h.c.InstancesV2()

	meta, err := instances.InstanceMetadata(ctx, h.nodes["sim-a"])
	if err != nil || !strings.HasPrefix(meta.ProviderID, "simcloud://") || meta.Zone != "sim-1a" {
		t.Fatalf("sim-a: %+v, %v; want simcloud's answer", meta, err)
	}
	for _, name := range []string{"test-a", "test-b"} {
		if exists, err := instances.InstanceExists(ctx, h.nodes[name]); err != nil || !exists {
			t.Fatalf("%s: exists %v, %v; want the test provider's true", name, exists, err)
		}
	}
	if shutdown, err := instances.InstanceShutdown(ctx, h.nodes["sim-a"]); err != nil || shutdown {
		t.Fatalf("sim-a: shutdown %v, %v", shutdown, err)
	}
	for _, name := range []string{"stray", "elsewhere"} {
		exists, err := instances.InstanceExists(ctx, h.nodes[name])
		if !errors.Is(err, errNotRouted) || exists {
			t.Fatalf("%s: exists %v, %v; want errNotRouted", name, exists, err)
		}
		if _, err := instances.InstanceShutdown(ctx, h.nodes[name]); !errors.Is(err, errNotRouted) {
			t.Fatalf("%s: shutdown error %v, want errNotRouted", name, err)
		}
		if _, err := instances.InstanceMetadata(ctx, h.nodes[name]); !errors.Is(err, errNotRouted) {
			t.Fatalf("%s: metadata error %v, want errNotRouted", name, err)
		}
	}
	if counted := h.cloud.Counters().Requests; len(counted) == 0 {
		t.Fatal("the simulated cloud had no request: simcloud did not answer sim-a")
	}

	// Each module's calls are counted under its own name.
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "wasmccm_module_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "module" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	if !seen["sim"] || !seen["test"] {
		t.Fatalf("wasmccm_module_calls_total has modules %v, want sim and test", seen)
	}
}

// TestAnswerOutsideThePrefixIsRefused: a module cannot give a Node a
// provider ID that would move it to another module.
func TestAnswerOutsideThePrefixIsRefused(t *testing.T) {
	h := newHybrid(t, "simcloud://eu-")
	instances, _ := h.c.InstancesV2()
	meta, err := instances.InstanceMetadata(context.Background(), h.nodes["sim-a"])
	if err == nil || !strings.Contains(err.Error(), "outside its nodes.providerIDPrefix") {
		t.Fatalf("metadata %+v, error %v; want the answer refused", meta, err)
	}
}

// TestLoadBalancersGetTheirModulesNodes: a module's load balancers target
// its own Nodes only, and only modules that serve load balancers get a
// service controller.
func TestLoadBalancersGetTheirModulesNodes(t *testing.T) {
	h := newHybrid(t, "simcloud://")
	lbs := loadBalancers(h.c)
	if len(lbs) != 2 || lbs["sim"] == nil || lbs["test"] == nil {
		t.Fatalf("load balancer modules %v, want sim and test", lbs)
	}
	if _, ok := h.c.LoadBalancer(); ok {
		t.Fatal("the Cloud offers a load balancer to the upstream controller, which would serve every module's Services")
	}
	lb, _ := lbs["test"].LoadBalancer()
	svc := service("1", "", v1.ServiceTypeLoadBalancer)
	var all []*v1.Node
	for _, n := range h.nodes {
		all = append(all, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, all)
	if err != nil {
		t.Fatal(err)
	}
	// The test provider answers 192.0.2.<number of target Nodes>: its
	// own are test-a, test-b, loop, trap and oom.
	if got := status.Ingress[0].IP; got != "192.0.2.5" {
		t.Fatalf("the test module's load balancer got ingress %s, want 192.0.2.5 (its 5 Nodes of %d)", got, len(all))
	}
}

// TestHostileModuleLeavesTheOtherAlone: while one module spins in every
// instance of its pool, traps and runs out of memory, the other answers
// its Nodes as fast as ever, since nothing is shared between them.
func TestHostileModuleLeavesTheOtherAlone(t *testing.T) {
	h := newHybrid(t, "simcloud://")
	instances, _ := h.c.InstancesV2()
	ctx := context.Background()
	if _, err := instances.InstanceMetadata(ctx, h.nodes["sim-a"]); err != nil {
		t.Fatal(err)
	}
	hostile := make(chan error, 4)
	for _, name := range []string{"loop", "loop", "trap", "oom"} {
		go func() {
			_, err := instances.InstanceExists(ctx, h.nodes[name])
			hostile <- err
		}()
	}
	time.Sleep(200 * time.Millisecond) // the loops hold the test module's pool
	for range 20 {
		start := time.Now()
		meta, err := instances.InstanceMetadata(ctx, h.nodes["sim-a"])
		if err != nil || !strings.HasPrefix(meta.ProviderID, "simcloud://") {
			t.Fatalf("sim-a beside a hostile module: %+v, %v", meta, err)
		}
		// Far below the hostile module's 1 s call timeout: no waiting on it.
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Fatalf("sim-a took %v beside a hostile module", took)
		}
	}
	for range 4 {
		if err := <-hostile; err == nil {
			t.Fatal("a hostile call succeeded")
		}
	}
}

// TestRoutesAreTheNamedModules: the route controller gets the routes
// module's Routes, and none without one.
func TestRoutesAreTheNamedModules(t *testing.T) {
	h := newHybrid(t, "simcloud://")
	routes, ok := h.c.Routes()
	if !ok {
		t.Fatal("no Routes with routes: sim")
	}
	if _, err := routes.ListRoutes(context.Background(), "kubernetes"); err != nil {
		t.Fatalf("simcloud's ListRoutes: %v", err)
	}
	if _, ok := (&Cloud{}).Routes(); ok {
		t.Fatal("Routes offered without a routes module")
	}
}

// TestSoleModule: a one-module cloud-config is served by its module as
// upstream runs a provider: unrouted, over every Node and every Service,
// with the module's own interfaces.
func TestSoleModule(t *testing.T) {
	h := newSingle(t)
	ctx := context.Background()
	// Routed, a Node without labels or provider ID would be no module's.
	if _, err := h.instances.InstanceMetadata(ctx, h.nodes["sim-a"]); err != nil {
		t.Fatalf("InstanceMetadata of a Node no rule names: %v", err)
	}
	if _, ok := h.c.Zones(); !ok {
		t.Error("the sole module's Zones are not offered")
	}
	if _, ok := h.c.Routes(); !ok {
		t.Error("the sole module's Routes are not offered")
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	nodes := factory.Core().V1().Nodes()
	servers := h.c.NodeServers(nodes)
	if len(servers) != 1 || servers[0].Module != "" || servers[0].Nodes != nodes {
		t.Fatalf("Node servers %+v, want one over the shared Node informer itself", servers)
	}
	lbs := h.c.LoadBalancerServers()
	if len(lbs) != 1 || lbs[0].Module != "" || lbs[0].View != nil {
		t.Fatalf("load balancer servers %+v, want one over every Service", lbs)
	}
	var served []Served
	h.c.EachStarted(func(m Served) { served = append(served, m) })
	if len(served) != 1 || served[0].Name != "" || served[0].Keeps != nil {
		t.Fatalf("modules %+v, want the one unnamed module, whose sweep any Service keeps from", served)
	}
}
