package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	routecontroller "k8s.io/cloud-provider/controllers/route"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/utils/ptr"
)

// testCloud is a small thread-safe cloud: instances by node name, load
// balancers and routes.
type testCloud struct {
	mu        sync.Mutex
	instances map[string]testInstance
	balancers map[string]*corev1.LoadBalancerStatus
	routes    map[string]cloudprovider.Route
}

type testInstance struct {
	providerID, instanceType, zone, region string
	addresses                              []corev1.NodeAddress
	shutdown                               bool
}

var (
	_ cloudprovider.Interface    = (*testCloud)(nil)
	_ cloudprovider.InstancesV2  = (*testCloud)(nil)
	_ cloudprovider.LoadBalancer = (*testCloud)(nil)
	_ cloudprovider.Routes       = (*testCloud)(nil)
)

func (c *testCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *testCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *testCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *testCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return c, true }
func (c *testCloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (c *testCloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (c *testCloud) Routes() (cloudprovider.Routes, bool)                              { return c, true }
func (c *testCloud) ProviderName() string                                              { return "test" }
func (c *testCloud) HasClusterID() bool                                                { return true }

// instance finds node's instance by provider ID, or by name before the node
// has one.
func (c *testCloud) instance(node *corev1.Node) (testInstance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, inst := range c.instances {
		if node.Spec.ProviderID == inst.providerID || (node.Spec.ProviderID == "" && node.Name == name) {
			return inst, true
		}
	}
	return testInstance{}, false
}

func (c *testCloud) InstanceExists(_ context.Context, node *corev1.Node) (bool, error) {
	_, ok := c.instance(node)
	return ok, nil
}

func (c *testCloud) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	inst, ok := c.instance(node)
	if !ok {
		return false, cloudprovider.InstanceNotFound
	}
	return inst.shutdown, nil
}

func (c *testCloud) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, ok := c.instance(node)
	if !ok {
		return nil, cloudprovider.InstanceNotFound
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    inst.providerID,
		InstanceType:  inst.instanceType,
		NodeAddresses: inst.addresses,
		Zone:          inst.zone,
		Region:        inst.region,
	}, nil
}

func (c *testCloud) GetLoadBalancer(_ context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.balancers[cloudprovider.DefaultLoadBalancerName(svc)]
	return st, ok, nil
}

func (c *testCloud) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

func (c *testCloud) EnsureLoadBalancer(_ context.Context, _ string, svc *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: lbIP}}}
	c.balancers[cloudprovider.DefaultLoadBalancerName(svc)] = st
	return st, nil
}

func (c *testCloud) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return nil
}

func (c *testCloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.balancers, cloudprovider.DefaultLoadBalancerName(svc))
	return nil
}

func (c *testCloud) ListRoutes(context.Context, string) ([]*cloudprovider.Route, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*cloudprovider.Route
	for _, r := range c.routes {
		out = append(out, &r)
	}
	return out, nil
}

func (c *testCloud) CreateRoute(_ context.Context, _ string, nameHint string, route *cloudprovider.Route) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := *route
	r.Name = nameHint
	c.routes[r.Name] = r
	return nil
}

func (c *testCloud) DeleteRoute(_ context.Context, _ string, route *cloudprovider.Route) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.routes, route.Name)
	return nil
}

func (c *testCloud) hasRoute(node, cidr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.routes {
		if string(r.TargetNode) == node && r.DestinationCIDR == cidr {
			return true
		}
	}
	return false
}

func (c *testCloud) hasBalancer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.balancers) > 0
}

const (
	lbIP      = "192.0.2.10"
	podCIDR   = "10.244.1.0/24"
	clusterID = "kubernetes"
)

// testControllers runs the four upstream controllers, as the CCM wires
// them, with the ServiceAccount's credentials against a test cloud, and
// checks that each one's writes land. Any request RBAC refuses fails the
// test through sa.assertNoForbidden.
func testControllers(ctx context.Context, t *testing.T, admin kubernetes.Interface, sa *saClient) {
	const ns = "e2e-controllers"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cloud := &testCloud{
		instances: map[string]testInstance{
			"node-new": {providerID: "test://i-new", instanceType: "test.small", zone: "zone-a", region: "region-1",
				addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
			"node-off": {providerID: "test://i-off", shutdown: true,
				addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}},
		},
		balancers: map[string]*corev1.LoadBalancerStatus{},
		routes:    map[string]cloudprovider.Route{},
	}

	// node-new: registered by a kubelet with --cloud-provider=external,
	// Ready, with a pod CIDR. node-off and node-gone: NotReady; the first is
	// shut down in the cloud, the second no longer exists there.
	nodes := []struct {
		node  corev1.Node
		ready corev1.ConditionStatus
	}{
		{corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-new"},
			Spec: corev1.NodeSpec{
				PodCIDR: podCIDR, PodCIDRs: []string{podCIDR},
				Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			},
		}, corev1.ConditionTrue},
		{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-off"}, Spec: corev1.NodeSpec{ProviderID: "test://i-off"}}, corev1.ConditionFalse},
		{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-gone"}, Spec: corev1.NodeSpec{ProviderID: "test://i-gone"}}, corev1.ConditionFalse},
	}
	for _, n := range nodes {
		created, err := admin.CoreV1().Nodes().Create(ctx, &n.node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: n.ready, Reason: "Test",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Wired as k8s.io/cloud-provider/app does, with short periods.
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	factory := informers.NewSharedInformerFactory(sa.client, 0)
	defer func() {
		stop()
		running.Wait()
		factory.Shutdown()
	}()
	nodeInformer, serviceInformer := factory.Core().V1().Nodes(), factory.Core().V1().Services()
	metrics := controllersmetrics.NewControllerManagerMetrics("e2e")
	_, cidr, _ := net.ParseCIDR("10.244.0.0/16")

	nodeCtrl, err := nodecontroller.NewCloudNodeController(nodeInformer, sa.client, cloud, time.Second, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	lifecycleCtrl, err := nodelifecycle.NewCloudNodeLifecycleController(nodeInformer, sa.client, cloud, 200*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	serviceCtrl, err := servicecontroller.New(cloud, sa.client, serviceInformer, nodeInformer, clusterID, utilfeature.DefaultFeatureGate)
	if err != nil {
		t.Fatal(err)
	}
	routeCtrl, err := routecontroller.New(cloud, sa.client, nodeInformer, clusterID, []*net.IPNet{cidr})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []func(){
		func() { nodeCtrl.RunWithContext(runCtx, metrics) },
		func() { lifecycleCtrl.Run(runCtx, metrics) },
		func() { serviceCtrl.Run(runCtx, 1, metrics) },
		func() { routeCtrl.Run(runCtx, 200*time.Millisecond, metrics) },
	} {
		running.Go(run)
	}
	factory.Start(runCtx.Done())

	node := func(name string) func(context.Context) (*corev1.Node, error) {
		return func(ctx context.Context) (*corev1.Node, error) {
			return admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
	}
	service := func(ctx context.Context) (*corev1.Service, error) {
		return admin.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	}
	checks := []struct {
		name string
		done func(context.Context) error
	}{
		{"cloud-node initialises node-new", func(ctx context.Context) error {
			n, err := node("node-new")(ctx)
			if err != nil {
				return err
			}
			switch {
			case n.Spec.ProviderID != "test://i-new":
				return fmt.Errorf("providerID %q", n.Spec.ProviderID)
			case slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }):
				return errors.New("still tainted uninitialized")
			case n.Labels[corev1.LabelInstanceTypeStable] != "test.small" || n.Labels[corev1.LabelTopologyZone] != "zone-a" ||
				n.Labels[corev1.LabelTopologyRegion] != "region-1":
				return fmt.Errorf("labels %v", n.Labels)
			case !slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}):
				return fmt.Errorf("addresses %v", n.Status.Addresses)
			}
			return nil
		}},
		{"node-route creates the route and clears NetworkUnavailable", func(ctx context.Context) error {
			if !cloud.hasRoute("node-new", podCIDR) {
				return errors.New("no route in the cloud")
			}
			n, err := node("node-new")(ctx)
			if err != nil {
				return err
			}
			_, cond := nodeutil.GetNodeCondition(&n.Status, corev1.NodeNetworkUnavailable)
			if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != "RouteCreated" {
				return fmt.Errorf("NetworkUnavailable condition %+v", cond)
			}
			return nil
		}},
		{"cloud-node-lifecycle taints the shut-down node", func(ctx context.Context) error {
			n, err := node("node-off")(ctx)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintNodeShutdown }) {
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
			return nil
		}},
		{"cloud-node-lifecycle deletes the vanished node", func(ctx context.Context) error {
			_, err := node("node-gone")(ctx)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		}},
		{"service-lb adds the finalizer and the ingress", func(ctx context.Context) error {
			s, err := service(ctx)
			if err != nil {
				return err
			}
			if !servicehelpers.HasLBFinalizer(s) {
				return fmt.Errorf("finalizers %v", s.Finalizers)
			}
			if len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IP != lbIP {
				return fmt.Errorf("status %+v", s.Status.LoadBalancer)
			}
			return nil
		}},
		{"events are recorded", func(ctx context.Context) error {
			for _, want := range []struct{ ns, component, reason string }{
				{ns, "service-controller", "EnsuredLoadBalancer"},
				{metav1.NamespaceDefault, "cloud-node-lifecycle-controller", "DeletingNode"},
			} {
				list, err := admin.CoreV1().Events(want.ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
					return e.Source.Component == want.component && e.Reason == want.reason
				}) {
					return fmt.Errorf("no %s event from %s in %s", want.reason, want.component, want.ns)
				}
			}
			return nil
		}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { eventually(ctx, t, c.done) })
	}

	t.Run("service-lb deletes the load balancer and releases the Service", func(t *testing.T) {
		if err := admin.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, func(ctx context.Context) error {
			_, err := service(ctx)
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("Service still there (%v)", err)
			}
			if cloud.hasBalancer() {
				return errors.New("load balancer still in the cloud")
			}
			return nil
		})
	})
}

// eventually polls done until it succeeds, failing t with its last error
// after 30 seconds.
func eventually(ctx context.Context, t testing.TB, done func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = done(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%v (last: %v)", err, last)
	}
}

// testLeaderElection runs leader election for the CCM's Lease as the CCM
// does (resourcelock.NewFromKubeconfig, events on the Lease), until the
// lease has been both acquired and renewed, then releases it.
func testLeaderElection(ctx context.Context, t *testing.T, admin kubernetes.Interface, sa *saClient) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: sa.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "e2e-leader-election"})

	const identity = "e2e-candidate"
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, systemNamespace, leaseName,
		resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: recorder}, sa.config, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	leading := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderelection.RunOrDie(runCtx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   4 * time.Second,
			RenewDeadline:   2 * time.Second,
			RetryPeriod:     250 * time.Millisecond,
			ReleaseOnCancel: true,
			Name:            leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(leading) },
				OnStoppedLeading: func() {},
			},
		})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("never became leader")
	}

	lease := func(ctx context.Context) (*coordinationv1.Lease, error) {
		return admin.CoordinationV1().Leases(systemNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	}
	first, err := lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(first.Spec.HolderIdentity, ""); got != identity {
		t.Fatalf("Lease held by %q, want %q", got, identity)
	}
	eventually(ctx, t, func(ctx context.Context) error {
		l, err := lease(ctx)
		if err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			return errors.New("Lease not renewed")
		}
		return nil
	})
	eventually(ctx, t, func(ctx context.Context) error {
		list, err := admin.CoreV1().Events(systemNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == leaseName
		}) {
			return errors.New("no LeaderElection event on the Lease")
		}
		return nil
	})

	stop()
	<-done
	released, err := lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(released.Spec.HolderIdentity, ""); got != "" {
		t.Errorf("Lease still held by %q after release", got)
	}
}
