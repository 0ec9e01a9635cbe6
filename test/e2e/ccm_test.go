package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wasmccm/wasmccm/examples/simcloud"
)

// TestCCM drives every controller through the module, once per toolchain
// the module is built with.
func TestCCM(t *testing.T) {
	for _, tc := range moduleToolchains(t) {
		t.Run(string(tc), func(t *testing.T) {
			e := setup(t, tc, simcloud.Options{}, nil)
			t.Run("NodeInitialization", e.testNodeInitialization)
			t.Run("NodeLifecycle", e.testNodeLifecycle)
			t.Run("LoadBalancer", e.testLoadBalancer)
			t.Run("Routes", e.testRoutes)
		})
	}
}

func (e *env) getNode(name string) (*v1.Node, error) {
	return e.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
}

func (e *env) waitInitialized(t *testing.T, name string) *v1.Node {
	t.Helper()
	var node *v1.Node
	eventually(t, 60*time.Second, "node "+name+" initialized", func() (bool, error) {
		n, err := e.getNode(name)
		if err != nil {
			return false, err
		}
		node = n
		return n.Spec.ProviderID != "" && !hasTaint(n, uninitializedTaint.Key), nil
	})
	return node
}

func (e *env) testNodeInitialization(t *testing.T) {
	inst := e.addInstanceAndNode("init-a", "sim-1b", "10.244.1.0/24")
	node := e.waitInitialized(t, "init-a")

	if node.Spec.ProviderID != "simcloud://"+inst.ID {
		t.Errorf("providerID = %q, want simcloud://%s", node.Spec.ProviderID, inst.ID)
	}
	wantLabels := map[string]string{
		v1.LabelInstanceTypeStable: "sim.medium",
		v1.LabelTopologyZone:       "sim-1b",
		v1.LabelTopologyRegion:     "sim-1",
		"simcloud.example/pool":    "default",
	}
	for k, want := range wantLabels {
		if got := node.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := node.Labels["kubernetes.io/forbidden"]; ok {
		t.Error("an additional label in the kubernetes.io namespace was applied")
	}
	eventually(t, 30*time.Second, "node addresses", func() (bool, error) {
		n, err := e.getNode("init-a")
		if err != nil {
			return false, err
		}
		want := []v1.NodeAddress{{Type: "InternalIP", Address: inst.Addresses[0].Address}, {Type: "ExternalIP", Address: inst.Addresses[1].Address}, {Type: "Hostname", Address: "init-a"}}
		for _, a := range want {
			if !slices.Contains(n.Status.Addresses, a) {
				return false, fmt.Errorf("addresses %v lack %v", n.Status.Addresses, a)
			}
		}
		return true, nil
	})
}

func (e *env) testNodeLifecycle(t *testing.T) {
	inst := e.addInstanceAndNode("life-a", "sim-1a", "10.244.2.0/24")
	e.waitInitialized(t, "life-a")
	const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

	if err := e.cloud.SetInstanceState(inst.ID, "stopped"); err != nil {
		t.Fatal(err)
	}
	e.setReady("life-a", v1.ConditionFalse)
	eventually(t, 30*time.Second, "shutdown taint", func() (bool, error) {
		n, err := e.getNode("life-a")
		return err == nil && hasTaint(n, shutdownTaint), err
	})

	if err := e.cloud.SetInstanceState(inst.ID, "running"); err != nil {
		t.Fatal(err)
	}
	e.setReady("life-a", v1.ConditionTrue)
	eventually(t, 30*time.Second, "shutdown taint removed", func() (bool, error) {
		n, err := e.getNode("life-a")
		return err == nil && !hasTaint(n, shutdownTaint), err
	})

	e.setReady("life-a", v1.ConditionFalse)
	if err := e.cloud.DeleteInstance(inst.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "node deleted with its instance", func() (bool, error) {
		_, err := e.getNode("life-a")
		return apierrors.IsNotFound(err), err
	})
}

func (e *env) testLoadBalancer(t *testing.T) {
	ctx := context.Background()
	e.addInstanceAndNode("lb-a", "sim-1a", "10.244.3.0/24")
	e.addInstanceAndNode("lb-b", "sim-1b", "10.244.4.0/24")
	e.waitInitialized(t, "lb-a")
	e.waitInitialized(t, "lb-b")
	created := e.cloud.Counters().LoadBalancersCreated

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
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
	var ip string
	eventually(t, 60*time.Second, "load balancer ingress", func() (bool, error) {
		s, err := e.client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return slices.Contains(s.Finalizers, "service.kubernetes.io/load-balancer-cleanup"), nil
	})
	lbName := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(lbName) > 32 {
		lbName = lbName[:32]
	}
	lb, ok := e.cloud.LoadBalancer(lbName)
	if !ok || lb.IP != ip || len(lb.Ports) != 1 || lb.Ports[0].NodePort != int(svc.Spec.Ports[0].NodePort) {
		t.Fatalf("cloud load balancer %q = %+v (found %v), service ingress %s", lbName, lb, ok, ip)
	}
	// The targets must follow the cluster's Nodes, whatever earlier
	// subtests left behind.
	targetsMatchNodes := func() (bool, error) {
		lb, _ := e.cloud.LoadBalancer(lbName)
		want := e.nodeInstanceIDs()
		got := slices.Sorted(slices.Values(lb.Targets))
		return slices.Equal(got, want), fmt.Errorf("targets %v, nodes' instances %v", got, want)
	}
	e.checkTargetsFollowNodesThenDelete(t, func() string { e.addInstanceAndNode("lb-c", "sim-1c", "10.244.5.0/24"); return "lb-c" },
		targetsMatchNodes, func() bool { _, ok := e.cloud.LoadBalancer(lbName); return ok })
	if got := e.cloud.Counters().LoadBalancersCreated - created; got != 1 {
		t.Fatalf("%d load balancers created for one Service", got)
	}
}

// nodeInstanceIDs returns the sorted instance IDs of the cluster's Nodes.
func (e *env) nodeInstanceIDs() []string {
	nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes.Items {
		if id, ok := strings.CutPrefix(n.Spec.ProviderID, "simcloud://"); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (e *env) testRoutes(t *testing.T) {
	ctx := context.Background()
	e.addInstanceAndNode("route-a", "sim-1a", "10.244.6.0/24")
	e.waitInitialized(t, "route-a")
	routeTo := func(cidr string) (simcloud.Route, bool) {
		for _, r := range e.cloud.Routes() {
			if r.DestinationCIDR == cidr {
				return r, true
			}
		}
		return simcloud.Route{}, false
	}
	eventually(t, 60*time.Second, "route for route-a", func() (bool, error) {
		r, ok := routeTo("10.244.6.0/24")
		return ok && r.TargetName == "route-a", nil
	})
	if err := e.client.CoreV1().Nodes().Delete(ctx, "route-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "route removed with the node", func() (bool, error) {
		_, ok := routeTo("10.244.6.0/24")
		return !ok, nil
	})
}

// checkTargetsFollowNodesThenDelete checks that the load balancer of the
// Service default/web targets the cluster's Nodes while a Node (made by
// join, which returns its name) joins and leaves, then deletes the Service and waits
// for its load balancer to be gone.
func (e *env) checkTargetsFollowNodesThenDelete(t *testing.T, join func() (joiner string), targetsMatchNodes func() (bool, error), lbExists func() bool) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 30*time.Second, "targets = nodes", targetsMatchNodes)
	joiner := join()
	e.waitInitialized(t, joiner)
	eventually(t, 60*time.Second, "targets follow a joining node", targetsMatchNodes)
	if err := e.client.CoreV1().Nodes().Delete(ctx, joiner, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "targets follow a leaving node", targetsMatchNodes)

	if err := e.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "service and load balancer gone", func() (bool, error) {
		_, err := e.client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && !lbExists(), err
	})
}
