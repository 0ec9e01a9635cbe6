package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// hcloudModule is the main package of the Hetzner Cloud provider module.
const hcloudModule = "../../modules/hcloud/module"

// hcloudEnv is the CCM with the hcloud module against the fake Hetzner
// Cloud API, whose servers live in one private network.
type hcloudEnv struct {
	*env
	fake    *hcloudfake.Cloud
	network schema.Network
}

// TestHcloud runs the hcloud module built with TinyGo (standard Go when
// TinyGo is not installed and not required) through every controller.
func TestHcloud(t *testing.T) {
	tc := wasmbuild.Go
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		tc = wasmbuild.TinyGo
	} else if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
		t.Fatal(err)
	}
	fake := hcloudfake.New(hcloudfake.Options{Token: cloudToken, ActionPolls: 1})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	providerConfig := fmt.Sprintf("{endpoint: %q, tokenCredential: token, network: k8s, loadBalancers: {location: fsn1}}", srv.URL+"/v1")
	e := &hcloudEnv{env: startModule(t, hcloudModule, tc, srv.URL, providerConfig, nil), fake: fake, network: network}
	t.Run("NodeInitialization", e.testNodeInitialization)
	t.Run("NodeLifecycle", e.testNodeLifecycle)
	t.Run("LoadBalancer", e.testLoadBalancer)
	t.Run("Routes", e.testRoutes)
	t.Run("SlowActions", e.testSlowActions)
	t.Run("FaultsDeleteNothing", e.testFaults)
}

// addServerAndNode creates a server in the network and the Node its
// kubelet would register: named like the server, tainted uninitialized,
// without provider ID, Ready, with a pod CIDR.
func (e *hcloudEnv) addServerAndNode(name, location, podCIDR string) schema.Server {
	e.t.Helper()
	s, err := e.fake.AddServer(hcloudfake.Server{Name: name, Location: location, Type: "cpx21", Network: e.network.ID})
	if err != nil {
		e.t.Fatal(err)
	}
	e.registerNode(name, podCIDR)
	return s
}

func providerID(s schema.Server) string { return "hcloud://" + strconv.FormatInt(s.ID, 10) }

func (e *hcloudEnv) testNodeInitialization(t *testing.T) {
	s := e.addServerAndNode("hc-init", "nbg1", "10.244.1.0/24")
	node := e.waitInitialized(t, "hc-init")
	if node.Spec.ProviderID != providerID(s) {
		t.Errorf("providerID = %q, want %q", node.Spec.ProviderID, providerID(s))
	}
	for k, want := range map[string]string{
		v1.LabelInstanceTypeStable:           "cpx21",
		v1.LabelTopologyZone:                 "nbg1-dc3",
		v1.LabelTopologyRegion:               "nbg1",
		"instance.hetzner.cloud/provided-by": "cloud",
	} {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	want := []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "hc-init"},
		{Type: v1.NodeExternalIP, Address: s.PublicNet.IPv4.IP},
		{Type: v1.NodeInternalIP, Address: s.PrivateNet[0].IP},
	}
	eventually(t, 30*time.Second, "node addresses", func() (bool, error) {
		n, err := e.getNode("hc-init")
		if err != nil {
			return false, err
		}
		return slices.Equal(n.Status.Addresses, want), fmt.Errorf("addresses %v, want %v", n.Status.Addresses, want)
	})
}

func (e *hcloudEnv) testNodeLifecycle(t *testing.T) {
	s := e.addServerAndNode("hc-life", "fsn1", "10.244.2.0/24")
	e.waitInitialized(t, "hc-life")
	const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

	e.fake.SetServerStatus(s.ID, "off")
	e.setReady("hc-life", v1.ConditionFalse)
	eventually(t, 30*time.Second, "shutdown taint", func() (bool, error) {
		n, err := e.getNode("hc-life")
		return err == nil && hasTaint(n, shutdownTaint), err
	})
	e.fake.SetServerStatus(s.ID, "running")
	e.setReady("hc-life", v1.ConditionTrue)
	eventually(t, 30*time.Second, "shutdown taint removed", func() (bool, error) {
		n, err := e.getNode("hc-life")
		return err == nil && !hasTaint(n, shutdownTaint), err
	})

	e.setReady("hc-life", v1.ConditionFalse)
	e.fake.DeleteServer(s.ID)
	eventually(t, 30*time.Second, "node deleted with its server", func() (bool, error) {
		_, err := e.getNode("hc-life")
		return apierrors.IsNotFound(err), err
	})
}

// nodeServerIDs returns the server IDs of the cluster's Nodes.
func (e *hcloudEnv) nodeServerIDs() []int64 {
	nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []int64
	for _, n := range nodes.Items {
		if id, ok := strings.CutPrefix(n.Spec.ProviderID, "hcloud://"); ok {
			v, _ := strconv.ParseInt(id, 10, 64)
			ids = append(ids, v)
		}
	}
	slices.Sort(ids)
	return ids
}

// loadBalancer returns the fake's load balancer of the Service UID.
func (e *hcloudEnv) loadBalancer(uid string) (schema.LoadBalancer, bool) {
	for _, lb := range e.fake.LoadBalancers() {
		if lb.Labels["hcloud-ccm/service-uid"] == uid {
			return lb, true
		}
	}
	return schema.LoadBalancer{}, false
}

func (e *hcloudEnv) testLoadBalancer(t *testing.T) {
	ctx := context.Background()
	e.addServerAndNode("hc-lb-a", "fsn1", "10.244.3.0/24")
	e.addServerAndNode("hc-lb-b", "nbg1", "10.244.4.0/24")
	e.waitInitialized(t, "hc-lb-a")
	e.waitInitialized(t, "hc-lb-b")

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
			"load-balancer.hetzner.cloud/location":              "nbg1",
			"load-balancer.hetzner.cloud/type":                  "lb21",
			"load-balancer.hetzner.cloud/algorithm-type":        "least_connections",
			"load-balancer.hetzner.cloud/use-private-ip":        "true",
			"load-balancer.hetzner.cloud/health-check-interval": "5s",
		}},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	}
	svc, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ingress []v1.LoadBalancerIngress
	eventually(t, 60*time.Second, "load balancer ingress", func() (bool, error) {
		s, err := e.client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ingress = s.Status.LoadBalancer.Ingress
		return len(ingress) > 0, nil
	})
	lb, ok := e.loadBalancer(string(svc.UID))
	if !ok {
		t.Fatal("no load balancer carries the Service's UID label")
	}
	lbName := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if lb.Name != lbName[:32] || lb.Location.Name != "nbg1" || lb.LoadBalancerType.Name != "lb21" || lb.Algorithm.Type != "least_connections" ||
		len(lb.PrivateNet) != 1 || lb.PrivateNet[0].Network != e.network.ID {
		t.Fatalf("load balancer %+v", lb)
	}
	if len(lb.Services) != 1 || lb.Services[0].ListenPort != 80 || lb.Services[0].DestinationPort != int(svc.Spec.Ports[0].NodePort) ||
		lb.Services[0].Protocol != "tcp" || lb.Services[0].HealthCheck.Interval != 5 {
		t.Fatalf("load balancer services %+v", lb.Services)
	}
	wantIngress := []string{lb.PublicNet.IPv4.IP, lb.PublicNet.IPv6.IP, lb.PrivateNet[0].IP}
	var gotIngress []string
	for _, in := range ingress {
		gotIngress = append(gotIngress, in.IP)
	}
	if !slices.Equal(gotIngress, wantIngress) {
		t.Fatalf("ingress %v, want %v", gotIngress, wantIngress)
	}

	targetsMatchNodes := func() (bool, error) {
		lb, _ := e.loadBalancer(string(svc.UID))
		var got []int64
		for _, tg := range lb.Targets {
			if !tg.UsePrivateIP {
				return false, fmt.Errorf("target %d does not use its private IP", tg.Server.ID)
			}
			got = append(got, tg.Server.ID)
		}
		slices.Sort(got)
		want := e.nodeServerIDs()
		return slices.Equal(got, want), fmt.Errorf("targets %v, nodes' servers %v", got, want)
	}
	e.checkTargetsFollowNodesThenDelete(t, func() string { e.addServerAndNode("hc-lb-c", "hel1", "10.244.5.0/24"); return "hc-lb-c" },
		targetsMatchNodes, func() bool { _, ok := e.loadBalancer(string(svc.UID)); return ok })
	if n := e.fake.Requests()["POST /v1/load_balancers"]; n != 1 {
		t.Fatalf("%d load balancers created for one Service", n)
	}
}

func (e *hcloudEnv) testRoutes(t *testing.T) {
	ctx := context.Background()
	s := e.addServerAndNode("hc-route", "fsn1", "10.244.6.0/24")
	e.waitInitialized(t, "hc-route")
	routeTo := func(cidr string) (schema.NetworkRoute, bool) {
		n, _ := e.fake.Network(e.network.ID)
		for _, r := range n.Routes {
			if r.Destination == cidr {
				return r, true
			}
		}
		return schema.NetworkRoute{}, false
	}
	eventually(t, 60*time.Second, "route via the node's private IP", func() (bool, error) {
		r, ok := routeTo("10.244.6.0/24")
		return ok && r.Gateway == s.PrivateNet[0].IP, fmt.Errorf("route %+v (found %v)", r, ok)
	})
	if err := e.client.CoreV1().Nodes().Delete(ctx, "hc-route", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "route removed with the node", func() (bool, error) {
		_, ok := routeTo("10.244.6.0/24")
		return !ok, nil
	})
}

// testSlowActions keeps actions running longer than the CCM's call
// timeout: the module, told the call's deadline by the host, answers
// RetryAfter before it instead of being stopped there, and once the cloud
// is fast again the Service gets its one load balancer.
func (e *hcloudEnv) testSlowActions(t *testing.T) {
	ctx := context.Background()
	creates := e.fake.Requests()["POST /v1/load_balancers"]
	e.fake.SetActionPolls(1 << 20)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "default"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "slow"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
	if _, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the module to answer RetryAfter for a running action", func() (bool, error) {
		log, err := os.ReadFile(e.ccm.logPath)
		return strings.Contains(string(log), "is still running"), err
	})
	e.fake.SetActionPolls(1)
	eventually(t, 60*time.Second, "ingress once actions finish", func() (bool, error) {
		s, err := e.client.CoreV1().Services("default").Get(ctx, "slow", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) > 0, err
	})
	if n := e.fake.Requests()["POST /v1/load_balancers"] - creates; n != 1 {
		t.Fatalf("%d load balancers created for one Service", n)
	}
	if err := e.client.CoreV1().Services("default").Delete(ctx, "slow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// testFaults makes every API request fail in each way a real API fails
// while a Node is NotReady (so its existence is checked every second) and
// a load balancer exists: nothing may be deleted.
func (e *hcloudEnv) testFaults(t *testing.T) {
	ctx := context.Background()
	e.addServerAndNode("hc-fault", "fsn1", "10.244.7.0/24")
	e.waitInitialized(t, "hc-fault")
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "kept"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
	svc, err := e.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "load balancer provisioned", func() (bool, error) {
		s, err := e.client.CoreV1().Services("default").Get(ctx, "kept", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) > 0, err
	})
	e.setReady("hc-fault", v1.ConditionFalse)

	// Ten node-monitor periods, and a Node change that makes the service
	// controller update the load balancer.
	duringEachOutage(t, &e.fake.Faults, 10*time.Second, func() { e.setReady("hc-fault", v1.ConditionFalse) }, func(outage string) {
		if _, err := e.getNode("hc-fault"); err != nil {
			t.Fatalf("after fault %s: node: %v", outage, err)
		}
		if _, ok := e.loadBalancer(string(svc.UID)); !ok {
			t.Fatalf("after fault %s: the load balancer was deleted", outage)
		}
		s, err := e.client.CoreV1().Services("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			t.Fatalf("after fault %s: service %v, %v", outage, s.Status, err)
		}
	})
	// The API is back: the Node and the load balancer still work.
	e.setReady("hc-fault", v1.ConditionTrue)
	if err := e.client.CoreV1().Services("default").Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "load balancer deleted once the API is back", func() (bool, error) {
		_, exists := e.loadBalancer(string(svc.UID))
		return !exists, nil
	})
}
