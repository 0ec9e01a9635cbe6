package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// Labels the hcloud module puts on its load balancers.
const (
	hcloudServiceUIDLabel = "hcloud-ccm/service-uid"
	hcloudClusterLabel    = "wasmccm.io/cluster"
)

// TestOrphanSweep reproduces the leaked load balancer race with the hcloud
// module: a leader killed while creating a load balancer, whose Service is
// deleted (finalizer and all) before the create lands. The late create is
// made directly in the fake cloud, labelled as the module labels it. The
// sweep (period 2s) deletes it through the module. Throughout, it leaves
// alone a load balancer whose Service exists, one adopted by a Service
// recreated under the same name (hcloud names it by annotation, so the
// recreated Service resolves to the old load balancer, which carries the
// old UID until the adoption relabels it; the relabel is made to fail for
// three sweeps), a second cluster's, and one labelled by the official CCM
// (no cluster label).
func TestOrphanSweep(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	tc := wasmbuild.Go
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		tc = wasmbuild.TinyGo
	}
	fake := hcloudfake.New(hcloudfake.Options{Token: cloudToken, ActionPolls: 1})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	providerConfig := fmt.Sprintf("{endpoint: %q, tokenCredential: token, network: k8s, callTimeout: 8s, loadBalancers: {location: fsn1}}", srv.URL+"/v1")
	withSweep := func(c string) string { return c + "orphanSweep: {period: 2s}\n" }
	e := &hcloudEnv{env: startModule(t, hcloudModule, tc, srv.URL, providerConfig, withSweep), fake: fake, network: network}
	ctx := context.Background()
	e.addServerAndNode("orphan-node", "fsn1", "10.244.90.0/24")
	e.waitInitialized(t, "orphan-node")

	waitIngress := func(name string) {
		eventually(t, 60*time.Second, "load balancer of Service "+name, func() (bool, error) {
			s, err := e.client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(s.Status.LoadBalancer.Ingress) > 0, err
		})
	}
	lbService := func(name string, annotations map[string]string) *v1.Service {
		svc, err := e.client.CoreV1().Services("default").Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
				Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	addLB := func(name string, labels map[string]string) schema.LoadBalancer {
		lb, err := fake.AddLoadBalancer(name, "fsn1", labels)
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}

	exists := func(id int64) (schema.LoadBalancer, bool) {
		for _, lb := range fake.LoadBalancers() {
			if lb.ID == id {
				return lb, true
			}
		}
		return schema.LoadBalancer{}, false
	}

	// A Service with its load balancer.
	live := lbService("live", nil)
	waitIngress("live")
	liveLB, ok := e.loadBalancer(string(live.UID))
	if !ok {
		t.Fatal("no load balancer for Service live")
	}

	// A Service recreated under the same name: the old load balancer,
	// named by annotation, still carries the old UID when the new Service
	// appears, and keeps it while the relabelling fails (the API refuses
	// updates with 429 for three sweeps): only the name check protects it
	// then.
	adopted := addLB("keep-me", map[string]string{hcloudServiceUIDLabel: "00000000-0000-4000-8000-0000000000aa", hcloudClusterLabel: "e2e"})
	time.Sleep(3 * time.Second) // a sweep finds it orphaned first
	if _, err := fake.Faults.Add(faultinject.Fault{Name: "no-relabel", Method: "PUT", PathPrefix: "/v1/load_balancers/", Status: 429, RetryAfter: 1, Always: true}); err != nil {
		t.Fatal(err)
	}
	web := lbService("web", map[string]string{"load-balancer.hetzner.cloud/name": "keep-me"})
	time.Sleep(6 * time.Second)
	if lb, ok := exists(adopted.ID); !ok || lb.Labels[hcloudServiceUIDLabel] == string(web.UID) {
		t.Fatalf("while the relabel fails: load balancer present %v, labels %v", ok, lb.Labels)
	}
	if spared := metricValue(e.ccm.metrics(t, e.dir), "wasmccm_orphan_sweep_deletions_total", `result="spared"`); spared == 0 {
		t.Error("no sweep spared the load balancer the recreated Service resolves to by name")
	}
	fake.Faults.Remove("no-relabel")
	waitIngress("web")

	// Another cluster's, and one of the official CCM's (no cluster label),
	// with UIDs no Service here has.
	other := addLB("other-cluster", map[string]string{hcloudServiceUIDLabel: "00000000-0000-4000-8000-0000000000bb", hcloudClusterLabel: "other"})
	official := addLB("official-ccm", map[string]string{hcloudServiceUIDLabel: "00000000-0000-4000-8000-0000000000cc"})

	// The race: the Service is gone, finalizer and all, when the dead
	// leader's create lands.
	gone, err := e.client.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "default"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Services("default").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lateName := ("a" + strings.ReplaceAll(string(gone.UID), "-", ""))[:32]
	late := addLB(lateName, map[string]string{hcloudServiceUIDLabel: string(gone.UID), hcloudClusterLabel: "e2e"})
	start := time.Now()
	eventually(t, 30*time.Second, "the orphaned load balancer deleted", func() (bool, error) {
		_, ok := exists(late.ID)
		return !ok, nil
	})
	t.Logf("orphan deleted %s after the late create (period 2s: deleted at the second sweep that lists it)", time.Since(start).Round(100*time.Millisecond))
	e.waitEvent(t, "Pod", "OrphanLoadBalancerDeleted", lateName, string(gone.UID))

	// More sweeps, then everything else is still there.
	time.Sleep(5 * time.Second)
	for what, id := range map[string]int64{"live Service's": liveLB.ID, "adopted": adopted.ID, "other cluster's": other.ID, "official CCM's": official.ID} {
		if _, ok := exists(id); !ok {
			t.Errorf("the sweep deleted the %s load balancer", what)
		}
	}
	if lb, _ := exists(adopted.ID); lb.Labels[hcloudServiceUIDLabel] != string(web.UID) {
		t.Errorf("the adopted load balancer is labelled %v, want the recreated Service's UID %s", lb.Labels, web.UID)
	}
	m := e.ccm.metrics(t, e.dir)
	t.Logf("sweeps %v, deletions %v (spared %v), ignored %v, listed %v",
		metricValue(m, "wasmccm_orphan_sweep_runs_total", `result="ok"`), metricValue(m, "wasmccm_orphan_sweep_deletions_total", `result="deleted"`),
		metricValue(m, "wasmccm_orphan_sweep_deletions_total", `result="spared"`), metricValue(m, "wasmccm_orphan_sweep_ignored_total"),
		metricValue(m, "wasmccm_orphan_sweep_load_balancers"))
	if n := metricValue(m, "wasmccm_orphan_sweep_deletions_total", `result="deleted"`); n != 1 {
		t.Errorf("wasmccm_orphan_sweep_deletions_total{result=deleted} = %v, want 1", n)
	}
	if os.Getenv("WASMCCM_E2E_VERBOSE") != "" {
		t.Log(e.ccm.logTail(40))
	}
}
