package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

// The clouds of the hybrid cluster take different tokens, each in its
// module's own credentials directory: a module given the other's would
// be answered 401.
const (
	simToken    = "sim-e2e-token"
	hcloudToken = "hcloud-e2e-token"
)

const (
	// simNodeLabel routes a Node without provider ID to module sim, as the
	// kubelet's --node-labels would set it.
	simNodeLabel = "wasmccm.io/cloud"
	hcloudClass  = "example.com/hcloud"
	// rogueClass is served by module rogue: the hcloud module pointed at
	// the simulated cloud's API, which its allowlist does not hold.
	rogueClass = "example.com/rogue"
)

// hybridEnv is one CCM serving three modules: sim (the simulated cloud's
// Nodes with the label wasmccm.io/cloud=sim, Services without a class),
// hcloud (the fake Hetzner Cloud's Nodes named hc-*, class
// example.com/hcloud) and rogue (class example.com/rogue only). Its env
// is module sim's: env.dir holds sim's module file, which swapModuleData
// replaces.
type hybridEnv struct {
	*env
	hc *hcloudEnv
	// flags start the CCM again (restart).
	flags []string
}

// TestHybrid runs one CCM serving two clouds' Nodes and load balancer
// classes on the real apiserver: each Node and Service goes to its own
// module, a Node no rule matches and a class no module serves are left
// alone, a module cannot reach another's cloud, a bad update of one module
// deletes nothing of either, and every module's metrics carry its name.
func TestHybrid(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	h := startHybrid(t)
	t.Run("Nodes", h.testNodes)
	t.Run("UnroutedNode", h.testUnroutedNode)
	t.Run("Services", h.testServices)
	t.Run("CredentialsIsolation", h.testCredentialsIsolation)
	t.Run("BadUpdateOfOneModule", h.testBadUpdate)
	t.Run("MetricsPerModule", h.testMetrics)
}

// startHybrid starts the cluster, both fake clouds and the CCM with the
// cloud-config of several modules.
func startHybrid(t *testing.T) *hybridEnv { return startHybridWith(t, nil, threeModules) }

// hybridSetup is what a hybrid cloud-config is written from: the modules'
// files, the clouds' URLs and the credentials directories.
type hybridSetup struct {
	simModule, hcModule, compilationCache string
	simURL, hcURL                         string
	simCreds, hcCreds                     string
}

// startHybridWith starts the cluster, the simulated cloud and the Hetzner
// fake (its handler wrapped by hcWrap when set), and the CCM with the
// cloud-config config writes.
func startHybridWith(t *testing.T, hcWrap func(http.Handler) http.Handler, config func(hybridSetup) string) *hybridEnv {
	tcs := moduleToolchains(t)
	tc := tcs[len(tcs)-1] // TinyGo when present, as TestHcloud

	sim := simcloud.New(simcloud.Options{Token: simToken})
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	fake := hcloudfake.New(hcloudfake.Options{Token: hcloudToken, ActionPolls: 1})
	hcHandler := fake.Handler()
	if hcWrap != nil {
		hcHandler = hcWrap(hcHandler)
	}
	hcSrv := httptest.NewServer(hcHandler)
	t.Cleanup(hcSrv.Close)
	network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}

	c := cluster.StartForTest(t)
	// The test's own writes and watches come in bursts (a Node is three
	// requests); client-go's default 5 requests per second would add its
	// waits to what the tests time.
	restConfig := rest.CopyConfig(c.Config)
	restConfig.QPS, restConfig.Burst = 100, 200
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{t: t, client: client, cloud: sim, cloudURL: simSrv.URL, dir: dir}
	hc := &hcloudEnv{env: &env{t: t, client: client, cloudURL: hcSrv.URL, dir: filepath.Join(dir, "hcloud")}, fake: fake, network: network}
	simModule := e.mountModule(simcloudModule, tc)
	hcModule := hc.mountModule(hcloudModule, tc)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	simCreds := writeCredentials(t, filepath.Join(dir, "credentials-sim"), simToken)
	hcCreds := writeCredentials(t, filepath.Join(dir, "credentials-hcloud"), hcloudToken)

	setup := hybridSetup{simModule: simModule, hcModule: hcModule, compilationCache: filepath.Join(wasmbuild.CacheDir(), "compilation"),
		simURL: simSrv.URL, hcURL: hcSrv.URL, simCreds: simCreds, hcCreds: hcCreds}
	configPath := filepath.Join(dir, "cloud-config.yaml")
	if err := os.WriteFile(configPath, []byte(config(setup)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Routes belong to one module; neither cloud can route the other's
	// pod CIDRs, so this cluster has none.
	flags := controllerFlags(kubeconfig,
		"--cloud-provider=wasm",
		"--cloud-config="+configPath,
		"--configure-cloud-routes=false",
		"--node-status-update-frequency=5s",
		"--concurrent-service-syncs=2",
	)
	e.ccm = startCCM(t, dir, "ccm", flags)
	hc.ccm = e.ccm
	return &hybridEnv{env: e, hc: hc, flags: flags}
}

// threeModules is TestHybrid's cloud-config. Each module's limits, http
// and credentials are its own; rogue holds hcloud's token and allowlist,
// and an endpoint outside it.
func threeModules(s hybridSetup) string {
	return fmt.Sprintf(`clusterName: e2e
modules:
- name: sim
  nodes:
    providerIDPrefix: "simcloud://"
    selector: {matchLabels: {%[1]s: sim}}
  loadBalancers: {default: true}
  module:
    path: %[2]s
    compilationCacheDir: %[3]s
    reloadInterval: 1s
    rollout: {shadow: {duration: 3s, calls: 10}, rollback: {window: 2s}}
  limits: {poolSize: 2, callTimeout: 10s, memoryLimitMiB: 64}
  http: {allowedOrigins: [%[4]q], timeout: 5s}
  credentials: {dir: %[5]s, auth: [{name: token, origins: [%[4]q], bearer: {key: token}}]}
  providerConfig: {endpoint: %[4]q, tokenCredential: token}
- name: hcloud
  nodes: {providerIDPrefix: "hcloud://", namePattern: "hc-*"}
  loadBalancers: {classes: [%[6]s]}
  module: {path: %[7]s, compilationCacheDir: %[3]s, reloadInterval: 1s, rollout: {rollback: {window: 2s}}}
  limits: {poolSize: 2, callTimeout: 10s, memoryLimitMiB: 64}
  http: {allowedOrigins: [%[8]q], timeout: 5s}
  credentials: {dir: %[9]s, auth: [{name: token, origins: [%[8]q], bearer: {key: token}}]}
  providerConfig: {endpoint: "%[8]s/v1", tokenCredential: token, network: k8s, callTimeout: 8s, loadBalancers: {location: fsn1}}
- name: rogue
  loadBalancers: {classes: [%[10]s]}
  module: {path: %[7]s, compilationCacheDir: %[3]s}
  limits: {poolSize: 1, callTimeout: 10s, memoryLimitMiB: 64}
  http: {allowedOrigins: [%[8]q], timeout: 5s}
  credentials: {dir: %[9]s, auth: [{name: token, origins: [%[8]q], bearer: {key: token}}]}
  providerConfig: {endpoint: "%[4]s/v1", tokenCredential: token, network: k8s, callTimeout: 8s, loadBalancers: {location: fsn1}}
`, simNodeLabel, s.simModule, s.compilationCache, s.simURL, s.simCreds,
		hcloudClass, s.hcModule, s.hcURL, s.hcCreds, rogueClass)
}

// writeCredentials writes a module's credentials directory holding its
// cloud's token.
func writeCredentials(t *testing.T, dir, token string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// addSimNode creates a simulated cloud instance and its Node, labelled for
// module sim.
func (h *hybridEnv) addSimNode(name, podCIDR string) simcloud.Instance {
	h.t.Helper()
	inst := h.addInstance(name, "sim-1a")
	h.registerLabelledNode(name, podCIDR, map[string]string{simNodeLabel: "sim"})
	return inst
}

func (h *hybridEnv) testNodes(t *testing.T) {
	inst := h.addSimNode("sim-a", "10.244.1.0/24")
	server := h.hc.addServerAndNode("hc-a", "nbg1", "10.244.2.0/24")

	sim := h.waitInitialized(t, "sim-a")
	if sim.Spec.ProviderID != "simcloud://"+inst.ID || sim.Labels[v1.LabelInstanceTypeStable] != "sim.medium" || sim.Labels[v1.LabelTopologyZone] != "sim-1a" {
		t.Errorf("Node sim-a: provider ID %q, labels %v; want simcloud://%s, sim.medium in sim-1a", sim.Spec.ProviderID, sim.Labels, inst.ID)
	}
	hc := h.waitInitialized(t, "hc-a")
	if hc.Spec.ProviderID != providerID(server) || hc.Labels[v1.LabelInstanceTypeStable] != "cpx21" || hc.Labels["instance.hetzner.cloud/provided-by"] != "cloud" {
		t.Errorf("Node hc-a: provider ID %q, labels %v; want %s, cpx21 from the cloud", hc.Spec.ProviderID, hc.Labels, providerID(server))
	}
	t.Logf("sim-a initialized by module sim as %s, hc-a by module hcloud as %s", sim.Spec.ProviderID, hc.Spec.ProviderID)
}

// testUnroutedNode registers a Node that no rule matches, and marks it
// NotReady so that the lifecycle controller asks about it every second: it
// keeps its taint, gets a NodeNotRouted Event and is never deleted.
func (h *hybridEnv) testUnroutedNode(t *testing.T) {
	h.registerNode("bare-metal-1", "10.244.3.0/24")
	h.setReady("bare-metal-1", v1.ConditionFalse)
	eventually(t, 30*time.Second, "NodeNotRouted Event on bare-metal-1", func() (bool, error) {
		for _, ev := range h.events(t, podNamespace, "Node", "NodeNotRouted") {
			if ev.InvolvedObject.Name == "bare-metal-1" {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(3 * time.Second) // more lifecycle periods
	node, err := h.getNode("bare-metal-1")
	if err != nil {
		t.Fatalf("the unrouted Node: %v", err)
	}
	if node.Spec.ProviderID != "" || !hasTaint(node, uninitializedTaint.Key) {
		t.Fatalf("the unrouted Node was changed: provider ID %q, taints %v", node.Spec.ProviderID, node.Spec.Taints)
	}
}

// waitServed waits for the Service's ingress and finalizer.
func (h *hybridEnv) waitServed(t *testing.T, name string) *v1.Service {
	t.Helper()
	var svc *v1.Service
	eventually(t, 60*time.Second, "load balancer of Service "+name, func() (bool, error) {
		s, err := h.getService(name)
		if err != nil {
			return false, err
		}
		svc = s
		return len(s.Status.LoadBalancer.Ingress) > 0 && slices.Contains(s.Finalizers, "service.kubernetes.io/load-balancer-cleanup"), nil
	})
	return svc
}

// simLoadBalancer returns the simulated cloud's load balancer of the
// Service UID.
func (h *hybridEnv) simLoadBalancer(uid string) (simcloud.LoadBalancer, bool) {
	name := "a" + strings.ReplaceAll(uid, "-", "")
	return h.cloud.LoadBalancer(name[:min(len(name), 32)])
}

// testServices routes a Service without class to sim, one of class
// example.com/hcloud to hcloud, each load balancer targeting its own
// cloud's Nodes only, and leaves alone a Service of a class no module
// serves.
func (h *hybridEnv) testServices(t *testing.T) {
	h.waitInitialized(t, "sim-a")
	h.waitInitialized(t, "hc-a")
	const hcCreate = "POST /v1/load_balancers"

	plain := h.createClassLBService(t, "plain", "")
	h.waitServed(t, "plain")
	simLB, ok := h.simLoadBalancer(string(plain.UID))
	if !ok {
		t.Fatal("Service plain has ingress but no load balancer in the simulated cloud")
	}
	if n := h.cloud.Counters().LoadBalancersCreated; n != 1 {
		t.Fatalf("%d load balancers created in the simulated cloud for one Service", n)
	}
	if n := h.hc.fake.Requests()[hcCreate]; n != 0 {
		t.Fatalf("the Hetzner fake got %d load balancer creates for a Service without class", n)
	}

	hetzner := h.createClassLBService(t, "hetzner", hcloudClass)
	h.waitServed(t, "hetzner")
	hcLB, ok := h.hc.loadBalancer(string(hetzner.UID))
	if !ok {
		t.Fatal("Service hetzner has ingress but no load balancer in the Hetzner fake")
	}
	if n := h.hc.fake.Requests()[hcCreate]; n != 1 {
		t.Fatalf("%d load balancers created in the Hetzner fake for one Service", n)
	}
	if n := h.cloud.Counters().LoadBalancersCreated; n != 1 {
		t.Fatalf("the simulated cloud got %d load balancer creates for two Services, one of class %s", n, hcloudClass)
	}

	// Each load balancer targets its own cloud's Nodes, never the other's
	// nor the unrouted one.
	eventually(t, 30*time.Second, "each load balancer targeting its own cloud's Nodes", func() (bool, error) {
		simLB, _ = h.simLoadBalancer(string(plain.UID))
		hcLB, _ = h.hc.loadBalancer(string(hetzner.UID))
		var hcTargets []int64
		for _, tg := range hcLB.Targets {
			hcTargets = append(hcTargets, tg.Server.ID)
		}
		slices.Sort(hcTargets)
		simTargets := slices.Sorted(slices.Values(simLB.Targets))
		ok := slices.Equal(simTargets, h.nodeInstanceIDs()) && slices.Equal(hcTargets, h.hc.nodeServerIDs())
		return ok, fmt.Errorf("simulated cloud targets %v (its Nodes %v), Hetzner targets %v (its Nodes %v)",
			simTargets, h.nodeInstanceIDs(), hcTargets, h.hc.nodeServerIDs())
	})

	// A class served elsewhere: no module acts on it.
	h.createClassLBService(t, "elsewhere", "example.com/other")
	time.Sleep(3 * time.Second)
	s, err := h.getService("elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Status.LoadBalancer.Ingress) > 0 || len(s.Finalizers) > 0 {
		t.Fatalf("Service of a class no module serves: status %v, finalizers %v", s.Status.LoadBalancer, s.Finalizers)
	}
	if sim, hc := h.cloud.Counters().LoadBalancersCreated, h.hc.fake.Requests()[hcCreate]; sim != 1 || hc != 1 {
		t.Fatalf("load balancers created: %d in the simulated cloud, %d in the Hetzner fake; want 1 each", sim, hc)
	}
	t.Logf("Service plain: %s in the simulated cloud (targets %v); Service hetzner: %s in the Hetzner fake (%d targets); Service elsewhere: untouched",
		simLB.IP, simLB.Targets, hcLB.PublicNet.IPv4.IP, len(hcLB.Targets))
}

// testCredentialsIsolation serves a Service of class example.com/rogue by
// module rogue, the hcloud module whose endpoint is the simulated cloud's
// API: the host refuses every request to that origin, which is not in
// rogue's allowlist, so neither sim's token nor any request of rogue
// reaches the simulated cloud. Both clouds took only their own tokens.
func (h *hybridEnv) testCredentialsIsolation(t *testing.T) {
	before := h.cloud.Counters()
	h.createClassLBService(t, "rogue", rogueClass)
	eventually(t, 30*time.Second, "module rogue's requests to the simulated cloud refused", func() (bool, error) {
		m := h.ccm.metrics(t, h.dir)
		return metricValue(m, "wasmccm_host_http_requests_total", `module="rogue"`, `host="denied"`) > 0, nil
	})
	m := h.ccm.metrics(t, h.dir)
	if n := metricValue(m, "wasmccm_host_http_requests_total", `module="rogue"`, `host="`+h.cloudURL+`"`); n != 0 {
		t.Fatalf("module rogue made %v requests to the simulated cloud", n)
	}
	if n := metricValue(m, "wasmccm_host_http_requests_total", `module="hcloud"`, `host="`+h.cloudURL+`"`); n != 0 {
		t.Fatalf("module hcloud made %v requests to the simulated cloud", n)
	}
	after := h.cloud.Counters()
	if after.LoadBalancersCreated != before.LoadBalancersCreated || after.Statuses[401] != 0 {
		t.Fatalf("the simulated cloud: %d load balancers created during rogue's attempts, %d requests without its token",
			after.LoadBalancersCreated-before.LoadBalancersCreated, after.Statuses[401])
	}
	s, err := h.getService("rogue")
	if err != nil || len(s.Status.LoadBalancer.Ingress) > 0 {
		t.Fatalf("Service rogue: %v, %v", s.Status.LoadBalancer, err)
	}
	t.Logf("module rogue: %v requests refused by the host (not in its allowlist), 0 reached the simulated cloud; 0 requests without a cloud's own token",
		metricValue(m, "wasmccm_host_http_requests_total", `module="rogue"`, `host="denied"`))
}

// testBadUpdate replaces module sim's file with one answering every
// instance gone, while Nodes of both clouds are NotReady (so the lifecycle
// controller asks about them every second) and both load balancers exist:
// the rollout rejects it in shadow, no Node and no load balancer of either
// module is deleted, and both clouds' new Nodes keep being initialized.
func (h *hybridEnv) testBadUpdate(t *testing.T) {
	simNodes := []string{"sim-down-0", "sim-down-1"}
	for i, name := range simNodes {
		h.addSimNode(name, fmt.Sprintf("10.244.%d.0/24", 10+i))
	}
	h.hc.addServerAndNode("hc-down-0", "fsn1", "10.244.12.0/24")
	all := append(slices.Clone(simNodes), "hc-down-0", "sim-a", "hc-a", "bare-metal-1")
	for _, name := range all[:3] {
		h.waitInitialized(t, name)
		h.setReady(name, v1.ConditionFalse)
	}
	simDeleted := h.cloud.Counters().LoadBalancersDeleted
	hcDeleted := h.hc.fake.Requests()["DELETE /v1/load_balancers/{id}"]

	allGone, digest := testModule(t, "allgone")
	h.swapModuleData(t, allGone)
	ev := h.waitEvent(t, "Pod", "ModuleRejected", "module sim: ", digest)
	time.Sleep(3 * time.Second) // more lifecycle periods, had it been told
	if left := h.existing(t, all); len(left) != len(all) {
		t.Fatalf("after a bad update of module sim, Nodes %v of %v are left", left, all)
	}
	if n := h.cloud.Counters().LoadBalancersDeleted - simDeleted; n != 0 {
		t.Fatalf("%d load balancers deleted in the simulated cloud", n)
	}
	if n := h.hc.fake.Requests()["DELETE /v1/load_balancers/{id}"] - hcDeleted; n != 0 {
		t.Fatalf("%d load balancers deleted in the Hetzner fake", n)
	}
	for _, name := range []string{"plain", "hetzner"} {
		if s, err := h.getService(name); err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			t.Fatalf("Service %s after the bad update: %v, %v", name, s.Status.LoadBalancer, err)
		}
	}
	// Both modules keep serving: hcloud was never touched, sim runs its
	// previous module.
	h.hc.addServerAndNode("hc-after", "hel1", "10.244.13.0/24")
	h.addSimNode("sim-after", "10.244.14.0/24")
	h.waitInitialized(t, "hc-after")
	h.waitInitialized(t, "sim-after")
	m := h.ccm.metrics(t, h.dir)
	if n := metricValue(m, "wasmccm_module_reloads_total", `module="sim"`, `result="loaded"`); n != 0 {
		t.Fatalf("the all-gone module was put in service (%v loads)", n)
	}
	// Each module that served its rollback window has a last-known-good
	// record of its own; sim's is not the rejected module.
	for _, module := range []string{"sim", "hcloud"} {
		cm, err := h.client.CoreV1().ConfigMaps(podNamespace).Get(context.Background(), "wasmccm-last-known-good-"+module, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("last-known-good record of module %s: %v", module, err)
		}
		if got := cm.Data["sha256"]; got == "" || got == digest {
			t.Fatalf("last-known-good record of module %s: sha256 %q (the rejected module is %s)", module, got, digest)
		}
	}
	t.Logf("bad update of module sim: rejected in shadow, 0 of %d Nodes and 0 load balancers of either module deleted, both modules initialized a new Node; event: %s",
		len(all), ev.Message)
}

// testMetrics finds each module's series under its name.
func (h *hybridEnv) testMetrics(t *testing.T) {
	m := h.ccm.metrics(t, h.dir)
	for _, module := range []string{"sim", "hcloud", "rogue"} {
		label := `module="` + module + `"`
		calls := metricValue(m, "wasmccm_module_calls_total", label)
		if calls == 0 {
			t.Errorf("no wasmccm_module_calls_total series with %s", label)
		}
		t.Logf("module %s: %v calls, %v requests to its cloud, %v refused", module, calls,
			metricValue(m, "wasmccm_host_http_requests_total", label)-metricValue(m, "wasmccm_host_http_requests_total", label, `host="denied"`),
			metricValue(m, "wasmccm_host_http_requests_total", label, `host="denied"`))
	}
	if n := metricValue(m, "wasmccm_host_http_requests_total", `module="sim"`, `host="`+h.cloudURL+`"`); n == 0 {
		t.Error("no request of module sim to the simulated cloud counted")
	}
	if n := metricValue(m, "wasmccm_host_http_requests_total", `module="hcloud"`, `host="`+h.hc.cloudURL+`"`); n == 0 {
		t.Error("no request of module hcloud to the Hetzner fake counted")
	}
}
