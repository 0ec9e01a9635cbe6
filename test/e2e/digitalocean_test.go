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

	"github.com/digitalocean/godo"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmccm/wasmccm/examples/dofake"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// doModule is the main package of the DigitalOcean provider module.
const doModule = "../../modules/digitalocean/module"

// doEnv is the CCM with the digitalocean module against the fake
// DigitalOcean API.
type doEnv struct {
	*env
	fake  *dofake.Cloud
	nodes int // Nodes registered so far
}

// TestDigitalOcean runs the digitalocean module built with TinyGo
// (standard Go when TinyGo is not installed and not required) through the
// node and service controllers. DigitalOcean has no routes.
func TestDigitalOcean(t *testing.T) {
	tc := wasmbuild.Go
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		tc = wasmbuild.TinyGo
	} else if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
		t.Fatal(err)
	}
	e := startDO(t, tc)
	t.Run("NodeInitialization", e.testNodeInitialization)
	t.Run("NodeLifecycle", e.testNodeLifecycle)
	t.Run("LoadBalancerAndFaults", e.testLoadBalancerAndFaults)
}

// TestDigitalOceanGo runs the standard-Go build of the module: nodes are
// initialized and a load balancer provisioned, as with TinyGo.
func TestDigitalOceanGo(t *testing.T) {
	e := startDO(t, wasmbuild.Go)
	e.testNodeInitialization(t)
	svc := e.createDOService(t, "web", nil)
	e.waitIngress(t, svc.Name, 60*time.Second)
}

// startDO serves a fresh fake API and starts the CCM with the module built
// by tc, configured for region fra1 and a cluster ID, with a droplet
// snapshot at most 2 s old so that lookups reach the API (and its faults)
// within seconds.
func startDO(t *testing.T, tc wasmbuild.Toolchain) *doEnv {
	fake := dofake.New(dofake.Options{Token: cloudToken})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	providerConfig := fmt.Sprintf("{endpoint: %q, tokenCredential: token, region: fra1, clusterID: %s, dropletCacheMaxAge: 2s}", srv.URL, doClusterID)
	return &doEnv{env: startModule(t, doModule, tc, srv.URL, providerConfig, nil), fake: fake}
}

// doClusterID is the cluster ID both CCMs are given (DO_CLUSTER_ID).
const doClusterID = "6f1e0c2a-0000-4000-8000-000000000000"

// addDropletAndNode creates a droplet and the Node its kubelet would
// register: named like the droplet, tainted uninitialized, without
// provider ID, Ready, with the next pod CIDR.
func (e *doEnv) addDropletAndNode(name, region string) godo.Droplet {
	e.t.Helper()
	d, err := e.fake.AddDroplet(dofake.Droplet{Name: name, Region: region, Size: "s-4vcpu-8gb"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.nodes++
	e.registerNode(name, fmt.Sprintf("10.244.%d.0/24", e.nodes))
	return d
}

func dropletProviderID(d godo.Droplet) string { return "digitalocean://" + strconv.Itoa(d.ID) }

func (e *doEnv) testNodeInitialization(t *testing.T) {
	d := e.addDropletAndNode("do-init", "ams3")
	node := e.waitInitialized(t, "do-init")
	if node.Spec.ProviderID != dropletProviderID(d) {
		t.Errorf("providerID = %q, want %q", node.Spec.ProviderID, dropletProviderID(d))
	}
	for k, want := range map[string]string{
		v1.LabelInstanceTypeStable: "s-4vcpu-8gb",
		v1.LabelTopologyRegion:     "ams3",
		v1.LabelTopologyZone:       "",
	} {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	private, _ := d.PrivateIPv4()
	public, _ := d.PublicIPv4()
	public6, _ := d.PublicIPv6()
	want := []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "do-init"},
		{Type: v1.NodeInternalIP, Address: private},
		{Type: v1.NodeExternalIP, Address: public},
		{Type: v1.NodeExternalIP, Address: public6},
	}
	eventually(t, 30*time.Second, "node addresses", func() (bool, error) {
		n, err := e.getNode("do-init")
		if err != nil {
			return false, err
		}
		return slices.Equal(n.Status.Addresses, want), fmt.Errorf("addresses %v, want %v", n.Status.Addresses, want)
	})
}

func (e *doEnv) testNodeLifecycle(t *testing.T) {
	d := e.addDropletAndNode("do-life", "fra1")
	e.waitInitialized(t, "do-life")
	const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

	e.fake.SetDropletStatus(d.ID, "off")
	e.setReady("do-life", v1.ConditionFalse)
	eventually(t, 30*time.Second, "shutdown taint", func() (bool, error) {
		n, err := e.getNode("do-life")
		return err == nil && hasTaint(n, shutdownTaint), err
	})
	e.fake.SetDropletStatus(d.ID, "active")
	e.setReady("do-life", v1.ConditionTrue)
	eventually(t, 30*time.Second, "shutdown taint removed", func() (bool, error) {
		n, err := e.getNode("do-life")
		return err == nil && !hasTaint(n, shutdownTaint), err
	})

	e.setReady("do-life", v1.ConditionFalse)
	e.fake.DeleteDroplet(d.ID)
	eventually(t, 30*time.Second, "node deleted with its droplet", func() (bool, error) {
		_, err := e.getNode("do-life")
		return apierrors.IsNotFound(err), err
	})
}

// createDOService creates a Service of type LoadBalancer with one TCP
// port.
func (e *doEnv) createDOService(t *testing.T, name string, annotations map[string]string) *v1.Service {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
	svc, err := e.client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// loadBalancer returns the fake's load balancer tagged with the Service
// UID.
func (e *doEnv) loadBalancer(uid string) (godo.LoadBalancer, bool) {
	for _, lb := range e.fake.LoadBalancers() {
		if slices.Contains(lb.Tags, "wasmccm:service-uid:"+uid) {
			return lb, true
		}
	}
	return godo.LoadBalancer{}, false
}

// nodeDropletIDs returns the droplet IDs of the cluster's Nodes.
func (e *doEnv) nodeDropletIDs() []int {
	nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []int
	for _, n := range nodes.Items {
		if id, ok := strings.CutPrefix(n.Spec.ProviderID, "digitalocean://"); ok {
			v, _ := strconv.Atoi(id)
			ids = append(ids, v)
		}
	}
	slices.Sort(ids)
	return ids
}

// testLoadBalancerAndFaults provisions two load balancers at once (each
// is "new" at first, and the module asks again 15 s later): "web" follows
// the Nodes and is deleted with its Service, "kept" lives through every
// kind of API failure.
func (e *doEnv) testLoadBalancerAndFaults(t *testing.T) {
	e.addDropletAndNode("do-lb-a", "fra1")
	e.addDropletAndNode("do-lb-b", "fra1")
	e.waitInitialized(t, "do-lb-a")
	e.waitInitialized(t, "do-lb-b")
	web := e.createDOService(t, "web", map[string]string{
		"service.beta.kubernetes.io/do-loadbalancer-type":                               "REGIONAL",
		"service.beta.kubernetes.io/do-loadbalancer-protocol":                           "http",
		"service.beta.kubernetes.io/do-loadbalancer-healthcheck-path":                   "/ready",
		"service.beta.kubernetes.io/do-loadbalancer-healthcheck-protocol":               "http",
		"service.beta.kubernetes.io/do-loadbalancer-override-health-check":              "true",
		"service.beta.kubernetes.io/do-loadbalancer-enable-backend-keepalive":           "true",
		"service.beta.kubernetes.io/do-loadbalancer-http-idle-timeout-seconds":          "120",
		"service.beta.kubernetes.io/do-loadbalancer-healthcheck-check-interval-seconds": "5",
	})
	kept := e.createDOService(t, "kept", nil)
	ip := e.waitIngress(t, "web", 60*time.Second)
	e.waitIngress(t, "kept", 60*time.Second)

	lb, ok := e.loadBalancer(string(web.UID))
	if !ok {
		t.Fatal("no load balancer carries the Service's UID tag")
	}
	if lb.Name != lbName(web) || lb.Status != "active" || lb.IP != ip || lb.Region.Slug != "fra1" || lb.Type != "REGIONAL" ||
		!lb.EnableBackendKeepalive || lb.HTTPIdleTimeoutSeconds == nil || *lb.HTTPIdleTimeoutSeconds != 120 {
		t.Fatalf("load balancer %+v (ingress %s)", lb, ip)
	}
	if len(lb.ForwardingRules) != 1 || lb.ForwardingRules[0].EntryPort != 80 || lb.ForwardingRules[0].EntryProtocol != "http" ||
		lb.ForwardingRules[0].TargetPort != int(web.Spec.Ports[0].NodePort) || lb.ForwardingRules[0].TargetProtocol != "http" {
		t.Fatalf("forwarding rules %+v", lb.ForwardingRules)
	}
	if hc := lb.HealthCheck; hc == nil || hc.Protocol != "http" || hc.Path != "/ready" || hc.Port != int(web.Spec.Ports[0].NodePort) || hc.CheckIntervalSeconds != 5 {
		t.Fatalf("health check %+v", lb.HealthCheck)
	}
	for _, tag := range []string{"k8s:" + doClusterID, "wasmccm:cluster:e2e"} {
		if !slices.Contains(lb.Tags, tag) {
			t.Fatalf("tags %v lack %s", lb.Tags, tag)
		}
	}
	targetsMatchNodes := func() (bool, error) {
		lb, _ := e.loadBalancer(string(web.UID))
		got := slices.Sorted(slices.Values(lb.DropletIDs))
		want := e.nodeDropletIDs()
		return slices.Equal(got, want), fmt.Errorf("targets %v, nodes' droplets %v", got, want)
	}
	e.checkTargetsFollowNodesThenDelete(t, func() string { return e.joinLoadBalancers(t, "do-lb-c") }, targetsMatchNodes, func() bool { _, ok := e.loadBalancer(string(web.UID)); return ok })
	e.testFaults(t, kept)
	if n := e.fake.Requests()["POST /v2/load_balancers"]; n != 2 {
		t.Fatalf("%d load balancers created for two Services", n)
	}
}

// joinLoadBalancers adds a droplet and its Node excluded from load
// balancers until the Node is initialized with its addresses. Both CCMs
// pick a load balancer's droplets among the Nodes by their addresses
// (which network can reach them), while the service controller updates
// load balancers when a Node's provider ID is set, before the node
// controller writes its addresses, and not when they are written: the
// exclusion's end is the Node change that brings it in.
func (e *doEnv) joinLoadBalancers(t *testing.T, name string) string {
	t.Helper()
	const exclude = "node.kubernetes.io/exclude-from-external-load-balancers"
	e.addDropletAndNode(name, "fra1")
	ctx := context.Background()
	patch := func(labels string) {
		_, err := e.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"` + exclude + `":""}`)
	eventually(t, 30*time.Second, name+" initialized with addresses", func() (bool, error) {
		n, err := e.getNode(name)
		return err == nil && n.Spec.ProviderID != "" && len(n.Status.Addresses) > 0, err
	})
	patch(`{"` + exclude + `":null}`)
	return name
}

// testFaults makes every API request fail in each way a real API fails
// while a Node is NotReady (so its droplet is looked up every second) and
// the Service's load balancer exists: nothing may be deleted.
func (e *doEnv) testFaults(t *testing.T, svc *v1.Service) {
	ctx := context.Background()
	e.addDropletAndNode("do-fault", "fra1")
	e.waitInitialized(t, "do-fault")
	// Past the droplet snapshot's age, so lookups reach the API; the
	// Node's change makes the service controller update the load balancer.
	duringEachOutage(t, &e.fake.Faults, 5*time.Second, func() { e.setReady("do-fault", v1.ConditionFalse) }, func(outage string) {
		if _, err := e.getNode("do-fault"); err != nil {
			t.Fatalf("after fault %s: node: %v", outage, err)
		}
		if _, ok := e.loadBalancer(string(svc.UID)); !ok {
			t.Fatalf("after fault %s: the load balancer was deleted", outage)
		}
		s, err := e.getService(svc.Name)
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			t.Fatalf("after fault %s: service %v, %v", outage, s.Status, err)
		}
	})
	// The API is back: the load balancer is deleted with its Service.
	e.setReady("do-fault", v1.ConditionTrue)
	if err := e.client.CoreV1().Services("default").Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "load balancer deleted once the API is back", func() (bool, error) {
		_, exists := e.loadBalancer(string(svc.UID))
		return !exists, nil
	})
}
