package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

// TestHcloudDifferential runs the same cluster twice, once with wasmccm and
// the hcloud module and once with the official hcloud-cloud-controller-
// manager binary named by WASMCCM_HCLOUD_CCM, each against a fresh fake
// Hetzner API, and prints what each left on the Nodes, the Services and in
// the cloud as a Markdown table. It is a one-off comparison (see
// modules/hcloud/README.md for how to build the official binary), skipped
// unless the variable is set.
func TestHcloudDifferential(t *testing.T) {
	differential(t, "WASMCCM_HCLOUD_CCM", "wasmccm + hcloud module", diffRun)
}

// differential runs the scenario run under wasmccm ("wasmccm") and under
// the official CCM binary named by the variable official ("official"),
// and logs the two outcomes side by side; it is skipped when the variable
// is not set.
func differential(t *testing.T, official, ours string, run func(t *testing.T, impl, binary string) map[string]string) {
	binary := os.Getenv(official)
	if binary == "" {
		t.Skip(official + " (the official CCM binary) is not set")
	}
	results := map[string]map[string]string{}
	for _, impl := range []string{"wasmccm", "official"} {
		t.Run(impl, func(t *testing.T) { results[impl] = run(t, impl, binary) })
	}
	t.Log("\n" + diffTable(ours, results))
}

// nodeOutcome records, under prefix, what a CCM made of Node n: its
// provider ID, addresses, taints, and the labels naming topology or
// instance type, or containing one of labelWords.
func nodeOutcome(out map[string]string, prefix string, n *v1.Node, labelWords ...string) {
	out[prefix+" providerID"] = n.Spec.ProviderID
	out[prefix+" addresses"] = compact(n.Status.Addresses)
	words := append([]string{"topology", "instance-type", "failure-domain"}, labelWords...)
	for k, v := range n.Labels {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(k, w) }) {
			out[prefix+" label "+k] = v
		}
	}
	var taints []string
	for _, tn := range n.Spec.Taints {
		taints = append(taints, tn.Key)
	}
	out[prefix+" taints"] = strings.Join(taints, ",")
}

// diffTable prints the two runs' outcomes side by side as Markdown, one
// row per field either has.
func diffTable(ours string, results map[string]map[string]string) string {
	keys := map[string]bool{}
	for _, r := range results {
		for k := range r {
			keys[k] = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| field | %s | official CCM | same |\n| --- | --- | --- | --- |\n", ours)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		w, o := results["wasmccm"][k], results["official"][k]
		same := "yes"
		if w != o {
			same = "**no**"
		}
		fmt.Fprintf(&b, "| %s | `%s` | `%s` | %s |\n", k, w, o, same)
	}
	return b.String()
}

// diffRun sets up the scenario under one implementation and returns its
// observable outcome, flattened to field -> value.
func diffRun(t *testing.T, impl, official string) map[string]string {
	fake := hcloudfake.New(hcloudfake.Options{Token: cloudToken, ActionPolls: 1})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	var e *hcloudEnv
	if impl == "wasmccm" {
		tc := wasmbuild.Go
		if _, err := wasmbuild.TinyGoPath(); err == nil {
			tc = wasmbuild.TinyGo
		}
		providerConfig := fmt.Sprintf("{endpoint: %q, tokenCredential: token, network: k8s, loadBalancers: {location: fsn1}}", srv.URL+"/v1")
		e = &hcloudEnv{env: startModule(t, hcloudModule, tc, srv.URL, providerConfig, nil), fake: fake, network: network}
	} else {
		// Configured through its environment, as its documentation says.
		e = &hcloudEnv{env: startOfficial(t, official, srv.URL, map[string]string{
			"HCLOUD_TOKEN": cloudToken, "HCLOUD_ENDPOINT": srv.URL + "/v1", "HCLOUD_NETWORK": "k8s",
			"HCLOUD_LOAD_BALANCERS_LOCATION": "fsn1", "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK": "true", "HCLOUD_METRICS_ENABLED": "false",
		}, "--cloud-provider=hcloud", "--allow-untagged-cloud=true"), fake: fake, network: network}
	}

	ctx := context.Background()
	e.addServerAndNode("d-a", "fsn1", "10.244.1.0/24")
	e.addServerAndNode("d-b", "nbg1", "10.244.2.0/24")
	e.waitInitialized(t, "d-a")
	e.waitInitialized(t, "d-b")
	services := []*v1.Service{
		diffService("web", 80, 30080, map[string]string{
			"load-balancer.hetzner.cloud/name":                  "diff-web",
			"load-balancer.hetzner.cloud/location":              "nbg1",
			"load-balancer.hetzner.cloud/type":                  "lb21",
			"load-balancer.hetzner.cloud/algorithm-type":        "least_connections",
			"load-balancer.hetzner.cloud/use-private-ip":        "true",
			"load-balancer.hetzner.cloud/health-check-interval": "5s",
			"load-balancer.hetzner.cloud/health-check-retries":  "2",
			"load-balancer.hetzner.cloud/uses-proxyprotocol":    "true",
		}),
		diffService("plain", 443, 30443, map[string]string{"load-balancer.hetzner.cloud/name": "diff-plain"}),
		diffService("private", 8443, 30843, map[string]string{
			"load-balancer.hetzner.cloud/name":                   "diff-private",
			"load-balancer.hetzner.cloud/disable-public-network": "true",
			"load-balancer.hetzner.cloud/network-zone":           "eu-central",
			"load-balancer.hetzner.cloud/location":               "",
		}),
	}
	for _, svc := range services {
		if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]string{}
	ingress := map[string][]v1.LoadBalancerIngress{}
	for _, svc := range services {
		eventually(t, 90*time.Second, "ingress of "+svc.Name, func() (bool, error) {
			s, err := e.client.CoreV1().Services("default").Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ingress[svc.Name] = s.Status.LoadBalancer.Ingress
			return len(s.Status.LoadBalancer.Ingress) > 0, nil
		})
	}
	eventually(t, 60*time.Second, "routes", func() (bool, error) {
		n, _ := e.fake.Network(network.ID)
		return len(n.Routes) == 2, fmt.Errorf("routes %v", n.Routes)
	})
	// Let the controllers settle: a second sync must change nothing.
	time.Sleep(5 * time.Second)

	for _, name := range []string{"d-a", "d-b"} {
		n, err := e.getNode(name)
		if err != nil {
			t.Fatal(err)
		}
		nodeOutcome(out, "node "+name, n, "hetzner")
	}
	// The fake numbers public IPs after its ID sequence, which the two
	// implementations advance differently (actions take IDs too): public
	// addresses are compared as the load balancer's, not as numbers.
	var names []string
	for _, lb := range e.fake.LoadBalancers() {
		names = append(names, "<"+lb.Name+" ipv4>", lb.PublicNet.IPv4.IP, "<"+lb.Name+" ipv6>", lb.PublicNet.IPv6.IP)
	}
	symbolic := strings.NewReplacer(reverse(names)...)
	for name, in := range ingress {
		out["service "+name+" ingress"] = symbolic.Replace(compact(in))
	}
	for _, lb := range e.fake.LoadBalancers() {
		p := "load balancer " + lb.Name + " "
		out[p+"type"] = lb.LoadBalancerType.Name
		out[p+"location"] = lb.Location.Name
		out[p+"algorithm"] = lb.Algorithm.Type
		out[p+"public interface"] = fmt.Sprint(lb.PublicNet.Enabled)
		out[p+"private net"] = compact(lb.PrivateNet)
		out[p+"services"] = compact(lb.Services)
		var targets []string
		for _, tg := range lb.Targets {
			targets = append(targets, fmt.Sprintf("server %d private=%v", tg.Server.ID, tg.UsePrivateIP))
		}
		slices.Sort(targets)
		out[p+"targets"] = strings.Join(targets, "; ")
		var labels []string
		for k := range lb.Labels {
			labels = append(labels, k)
		}
		slices.Sort(labels)
		out[p+"label keys"] = strings.Join(labels, ",")
	}
	n, _ := e.fake.Network(network.ID)
	// The route controller creates routes concurrently: compare them as a set.
	slices.SortFunc(n.Routes, func(a, b schema.NetworkRoute) int { return strings.Compare(a.Destination, b.Destination) })
	out["network routes"] = compact(n.Routes)
	requests := e.fake.Requests()
	writes := 0
	for k, v := range requests {
		if !strings.HasPrefix(k, "GET ") {
			writes += v
		}
	}
	out["API writes (POST/PUT/DELETE), total"] = fmt.Sprint(writes)
	return out
}

func diffService(name string, port, nodePort int32, ann map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "p", Port: port, NodePort: nodePort, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
}

// reverse swaps each (symbol, value) pair into (value, symbol), as
// strings.NewReplacer takes old, new.
func reverse(pairs []string) []string {
	out := make([]string, 0, len(pairs))
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, pairs[i+1], pairs[i])
	}
	return out
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// startOfficial starts a cluster and an official CCM binary with the
// controller flags and its own, its cloud configured through environ.
func startOfficial(t *testing.T, binary, cloudURL string, environ map[string]string, flags ...string) *env {
	c := cluster.StartForTest(t)
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, client: client, cloudURL: cloudURL, dir: t.TempDir()}
	kubeconfig := filepath.Join(e.dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	for k, v := range environ {
		t.Setenv(k, v)
	}
	e.ccm = startCCMBinary(t, binary, e.dir, "official-ccm", controllerFlags(kubeconfig, flags...))
	return e
}
