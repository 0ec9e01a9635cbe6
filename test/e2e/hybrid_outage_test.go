package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// outageSweepPeriod is the orphan sweep's period in TestHybridOutage.
const outageSweepPeriod = 5 * time.Second

// hangSwitch makes a cloud's API hang: while on, every request is held
// until its client gives up, as an API that accepts connections and never
// answers.
type hangSwitch struct{ on atomic.Bool }

func (h *hangSwitch) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.on.Load() {
			<-r.Context().Done()
			return
		}
		next.ServeHTTP(w, r)
	})
}

// outageModules is two clouds with the default limits (callTimeout 30s,
// http.timeout 10s) and the orphan sweep on: sim serves the Nodes
// labelled wasmccm.io/cloud=sim and the Services without class, hcloud
// the Nodes named hc-* and the class example.com/hcloud. hcloud keeps no
// last-known-good, so that without its file it cannot start.
func outageModules(s hybridSetup) string {
	return fmt.Sprintf(`clusterName: e2e
modules:
- name: sim
  nodes:
    providerIDPrefix: "simcloud://"
    selector: {matchLabels: {%[1]s: sim}}
  loadBalancers: {default: true}
  module: {path: %[2]s, compilationCacheDir: %[3]s}
  http: {allowedOrigins: [%[4]q]}
  credentials: {dir: %[5]s, auth: [{name: token, origins: [%[4]q], bearer: {key: token}}]}
  providerConfig: {endpoint: %[4]q, tokenCredential: token}
  orphanSweep: {period: %[10]s}
- name: hcloud
  nodes: {providerIDPrefix: "hcloud://", namePattern: "hc-*"}
  loadBalancers: {classes: [%[6]s]}
  module: {path: %[7]s, compilationCacheDir: %[3]s, lastKnownGood: {disabled: true}}
  http: {allowedOrigins: [%[8]q]}
  credentials: {dir: %[9]s, auth: [{name: token, origins: [%[8]q], bearer: {key: token}}]}
  providerConfig: {endpoint: "%[8]s/v1", tokenCredential: token, network: k8s, loadBalancers: {location: fsn1}}
  orphanSweep: {period: %[10]s}
`, simNodeLabel, s.simModule, s.compilationCache, s.simURL, s.simCreds,
		hcloudClass, s.hcModule, s.hcURL, s.hcCreds, outageSweepPeriod)
}

// TestHybridOutage runs two clouds in one CCM with the default limits and
// makes one of them hang: the other's Nodes initialize within a second of
// the time they take with both clouds healthy, and no Node of the hung
// cloud is deleted. Then, with the CCM stopped, a Service of the hung
// cloud's class is switched to ClusterIP: after the restart its load
// balancer is deleted within the sweep period.
func TestHybridOutage(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	hang := &hangSwitch{}
	h := startHybridWith(t, hang.wrap, outageModules)

	h.hc.addServerAndNode("hc-a", "nbg1", "10.244.100.0/24")
	h.waitInitialized(t, "hc-a")
	web := h.createClassLBService(t, "web-hc", hcloudClass)
	h.waitServed(t, "web-hc")
	if _, ok := h.hc.loadBalancer(string(web.UID)); !ok {
		t.Fatal("Service web-hc has no load balancer in the Hetzner fake")
	}

	// One Node every nodeGap in both phases, so that some arrive after the
	// hung cloud's first calls timed out and were retried.
	const nodes, nodeGap = 4, 4 * time.Second
	healthy := h.simNodeTimes(t, "sim-healthy", 120, nodes, nodeGap)

	// The Hetzner API hangs. hcloud's controllers get new Nodes to
	// initialize, an initialized one to refresh and a NotReady one to
	// check, every call held to the end of its timeout.
	hang.on.Store(true)
	outage := time.Now()
	for i := range 3 {
		h.hc.addServerAndNode(fmt.Sprintf("hc-hung-%d", i), "nbg1", fmt.Sprintf("10.244.%d.0/24", 110+i))
	}
	h.setReady("hc-a", v1.ConditionFalse)
	hung := h.simNodeTimes(t, "sim-hung", 130, nodes, nodeGap)
	t.Logf("Node initialization of module sim, one Node every %v, both clouds healthy: %v (median %v)", nodeGap, healthy, median(healthy))
	t.Logf("Node initialization of module sim, one Node every %v from the start of the outage, the Hetzner API hanging: %v (median %v)", nodeGap, hung, median(hung))
	if d := median(hung) - median(healthy); d > time.Second {
		t.Errorf("the healthy module's Nodes took %v longer (median) with the other cloud hanging; want within 1s", d)
	}
	for i, d := range hung {
		if d > slices.Max(healthy)+time.Second {
			t.Errorf("sim-hung-%d took %v, more than 1s above the slowest healthy Node (%v)", i, d, slices.Max(healthy))
		}
	}
	// Past both default timeouts: the hung cloud's Node calls have failed
	// at least once each.
	time.Sleep(time.Until(outage.Add(35 * time.Second)))
	for _, name := range []string{"hc-a", "hc-hung-0", "hc-hung-1", "hc-hung-2"} {
		n, err := h.getNode(name)
		if err != nil {
			t.Fatalf("Node %s of the hung cloud: %v", name, err)
		}
		if name != "hc-a" && !hasTaint(n, uninitializedTaint.Key) {
			t.Errorf("Node %s was initialized while its cloud hung", name)
		}
	}

	// The cloud answers again: its own Nodes catch up.
	hang.on.Store(false)
	h.setReady("hc-a", v1.ConditionTrue)
	for i := range 3 {
		h.waitInitialized(t, fmt.Sprintf("hc-hung-%d", i))
	}

	t.Run("ClassServiceSwitchedWhileDown", func(t *testing.T) { h.testSwitchedWhileDown(t, web) })
	t.Run("ModuleThatCannotStart", h.testModuleCannotStart)
}

// testModuleCannotStart restarts the CCM with the hcloud module's file
// gone: sim serves its new Node, hcloud's new Node waits with a
// ModuleStartFailed Event on the CCM's Pod, and once the file is back the
// retried start initializes it.
func (h *hybridEnv) testModuleCannotStart(t *testing.T) {
	h.ccm.stop()
	// The module's directory as the kubelet mounts a ConfigMap: the file
	// is reached through "..data".
	data := filepath.Join(h.hc.dir, "module", "..data")
	if err := os.Rename(data, data+".away"); err != nil {
		t.Fatal(err)
	}
	h.ccm = startCCM(t, h.dir, "ccm-without-hcloud", h.flags)
	h.hc.addServerAndNode("hc-late", "nbg1", "10.244.140.0/24")
	took := h.simNodeTimes(t, "sim-alone", 141, 1, 0)
	t.Logf("module sim's Node initialized in %v while module hcloud could not start", took[0])
	eventually(t, 30*time.Second, "a ModuleStartFailed Event naming module hcloud", func() (bool, error) {
		for _, ev := range h.events(t, podNamespace, "Pod", "ModuleStartFailed") {
			if strings.HasPrefix(ev.Message, "module hcloud: ") {
				return true, nil
			}
		}
		return false, nil
	})
	if n, err := h.getNode("hc-late"); err != nil || !hasTaint(n, uninitializedTaint.Key) {
		t.Fatalf("hc-late while its module could not start: %v, %v; want it waiting", n, err)
	}
	if err := os.Rename(data+".away", data); err != nil {
		t.Fatal(err)
	}
	h.waitInitialized(t, "hc-late")
}

// simNodeTimes registers n Nodes of module sim, every gap, with pod CIDRs
// 10.244.cidr.0/24 onwards, and returns how long each took to initialize
// from its registration, as a watch saw it.
func (h *hybridEnv) simNodeTimes(t *testing.T, prefix string, cidr, n int, gap time.Duration) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := range n {
		if i > 0 {
			time.Sleep(gap)
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		h.addInstance(name, "sim-1a")
		// A watch, not polling: the test client's own request rate limit
		// would otherwise add its waits to the figures.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		w, err := h.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		start := time.Now()
		h.registerLabelledNode(name, fmt.Sprintf("10.244.%d.0/24", cidr+i), map[string]string{simNodeLabel: "sim"})
		initialized := false
		for ev := range w.ResultChan() {
			if node, ok := ev.Object.(*v1.Node); ok && node.Spec.ProviderID != "" && !hasTaint(node, uninitializedTaint.Key) {
				initialized = true
				break
			}
		}
		took := time.Since(start)
		w.Stop()
		cancel()
		if !initialized {
			t.Fatalf("Node %s not initialized after 90s", name)
		}
		out = append(out, took.Round(10*time.Millisecond))
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

// testSwitchedWhileDown stops the CCM, switches the class Service to
// ClusterIP (the API server clears its class), and starts the CCM again:
// the load balancer the hcloud module made goes within the sweep period,
// the Service's finalizer with it, and no DeletedLoadBalancer is reported
// before it is gone.
func (h *hybridEnv) testSwitchedWhileDown(t *testing.T, web *v1.Service) {
	ctx := context.Background()
	h.ccm.stop()
	svc, err := h.getService(web.Name)
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type = v1.ServiceTypeClusterIP
	if svc, err = h.client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.LoadBalancerClass != nil {
		t.Fatalf("the API server kept class %q on a ClusterIP Service", *svc.Spec.LoadBalancerClass)
	}
	h.ccm = startCCM(t, h.dir, "ccm-restarted", h.flags)
	restarted := time.Now()
	var lbGone time.Duration
	eventually(t, outageSweepPeriod, "the load balancer and the finalizer of web-hc gone", func() (bool, error) {
		s, err := h.getService(web.Name)
		if err != nil {
			return false, err
		}
		_, exists := h.hc.loadBalancer(string(web.UID))
		if !exists && lbGone == 0 {
			lbGone = time.Since(restarted)
		}
		if len(s.Finalizers) == 0 && exists {
			t.Fatal("the finalizer of web-hc was removed while the hcloud module's load balancer still exists")
		}
		return !exists && len(s.Finalizers) == 0, nil
	})
	took := lbGone
	t.Logf("the load balancer of a class Service switched to ClusterIP while the CCM was down went %v after the restart", took.Round(10*time.Millisecond))
}
