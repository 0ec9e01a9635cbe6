package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// awsModule is the main package of the Amazon EC2 provider module.
const awsModule = "../../modules/aws/module"

// awsClusterTags mark the e2e cluster's resources in the fake.
var awsClusterTags = map[string]string{"kubernetes.io/cluster/e2e": "owned"}

// awsEnv is the CCM with the aws module against the fake EC2 API.
type awsEnv struct {
	*env
	fake *awsfake.Cloud
	// routeTable is the ID of the cluster's route table.
	routeTable string
}

// withSigV4 replaces the harness's bearer token with the AWS fake's key
// pair, signed by the host for origin.
func withSigV4(origin string) func(string) string {
	return func(config string) string {
		return strings.Replace(config, fmt.Sprintf("auth: [{name: token, origins: [%q], bearer: {key: token}}]", origin),
			fmt.Sprintf("auth: [{name: aws, origins: [%q], sigv4: {accessKeyIDKey: aws-access-key-id, secretAccessKeyKey: aws-secret-access-key}}]", origin), 1)
	}
}

// TestAWS runs the aws module built with TinyGo (standard Go when TinyGo
// is not installed and not required) through the node and route
// controllers, every request signed by the host.
func TestAWS(t *testing.T) {
	tc := wasmbuild.Go
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		tc = wasmbuild.TinyGo
	} else if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
		t.Fatal(err)
	}
	fake := awsfake.New(awsfake.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	table, err := fake.AddRouteTable("", awsClusterTags)
	if err != nil {
		t.Fatal(err)
	}
	providerConfig := fmt.Sprintf("{region: us-east-1, clusterID: e2e, ec2Endpoint: %q, elbEndpoint: %q}", srv.URL, srv.URL)
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	withSweep := func(c string) string { return withSigV4(srv.URL)(c) + "orphanSweep: {period: 2s}\n" }
	e := &awsEnv{env: startModule(t, awsModule, tc, srv.URL, providerConfig, withSweep), fake: fake, routeTable: table.ID}
	t.Run("NodeInitialization", e.testNodeInitialization)
	t.Run("NodeLifecycle", e.testNodeLifecycle)
	t.Run("Routes", e.testRoutes)
	t.Run("LoadBalancer", e.testLoadBalancer)
	t.Run("NLB", e.testNLB)
	t.Run("FaultsDeleteNothing", e.testFaults)
	// Last: it restarts the CCM for the rest of the subtest only.
	t.Run("OrphanSweep", e.testOrphanSweep)
	if n := fake.AuthFailures(); n != 0 {
		t.Errorf("the fake refused %d signatures", n)
	}
}

// addInstanceAndNode launches an instance of the cluster and registers the
// Node its kubelet would: named after its private DNS name, tainted
// uninitialized, without provider ID, Ready.
func (e *awsEnv) addInstanceAndNode(podCIDR string) awsfake.Instance {
	e.t.Helper()
	in, err := e.fake.AddInstance(awsfake.Instance{Type: "m5.large", Tags: awsClusterTags})
	if err != nil {
		e.t.Fatal(err)
	}
	e.registerNode(in.PrivateDNSName, podCIDR)
	return in
}

func (e *awsEnv) testNodeInitialization(t *testing.T) {
	in := e.addInstanceAndNode("10.244.1.0/24")
	node := e.waitInitialized(t, in.PrivateDNSName)
	if want := "aws:///" + in.Zone + "/" + in.ID; node.Spec.ProviderID != want {
		t.Errorf("provider ID %q, want %q", node.Spec.ProviderID, want)
	}
	for label, want := range map[string]string{
		v1.LabelInstanceTypeStable: "m5.large", v1.LabelTopologyZone: in.Zone, v1.LabelTopologyRegion: "us-east-1",
	} {
		if got := node.Labels[label]; got != want {
			t.Errorf("label %s = %q, want %q", label, got, want)
		}
	}
	want := []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: in.PrivateIP}, {Type: v1.NodeExternalIP, Address: in.PublicIP},
		{Type: v1.NodeInternalDNS, Address: in.PrivateDNSName}, {Type: v1.NodeHostName, Address: in.PrivateDNSName},
		{Type: v1.NodeExternalDNS, Address: in.PublicDNSName},
	}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(want) {
		t.Errorf("addresses %v, want %v", node.Status.Addresses, want)
	}
}

func (e *awsEnv) testNodeLifecycle(t *testing.T) {
	in := e.addInstanceAndNode("10.244.2.0/24")
	name := in.PrivateDNSName
	e.waitInitialized(t, name)
	const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"
	if err := e.fake.StopInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	e.setReady(name, v1.ConditionFalse)
	eventually(t, 30*time.Second, "shutdown taint", func() (bool, error) {
		n, err := e.getNode(name)
		return err == nil && hasTaint(n, shutdownTaint), err
	})
	if err := e.fake.TerminateInstance(in.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Node deleted with its terminated instance", func() (bool, error) {
		_, err := e.getNode(name)
		return apierrors.IsNotFound(err), nil
	})
}

func (e *awsEnv) testRoutes(t *testing.T) {
	in := e.addInstanceAndNode("10.244.3.0/24")
	e.waitInitialized(t, in.PrivateDNSName)
	eventually(t, 60*time.Second, "route to the Node's instance", func() (bool, error) {
		return e.routeTarget("10.244.3.0/24") == in.ID, nil
	})
	if got, _ := e.fake.Instance(in.ID); !got.NoSourceDestCheck {
		t.Error("the routed instance still checks source and destination")
	}
}

// testLoadBalancer: a Service's Classic ELB, with the official CCM's
// name, listeners and health check, its hostname on the Service, its
// instances following the Nodes, and everything made for it deleted with
// the Service.
func (e *awsEnv) testLoadBalancer(t *testing.T) {
	in := e.addInstanceAndNode("10.244.4.0/24")
	e.waitInitialized(t, in.PrivateDNSName)
	svc := e.createLBService(t, "web")
	name := ("a" + strings.ReplaceAll(string(svc.UID), "-", ""))[:32]
	var hostname string
	eventually(t, 60*time.Second, "load balancer hostname", func() (bool, error) {
		s, err := e.getService("web")
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		hostname = s.Status.LoadBalancer.Ingress[0].Hostname
		svc = s
		return true, nil
	})
	lb, ok := e.loadBalancer(name)
	if !ok {
		t.Fatalf("no load balancer %s", name)
	}
	nodePort := int(svc.Spec.Ports[0].NodePort)
	if hostname != lb.DNSName || len(lb.Listeners) != 1 || lb.Listeners[0] != (awsfake.Listener{Protocol: "TCP", LoadBalancerPort: 80, InstanceProtocol: "TCP", InstancePort: nodePort}) ||
		lb.HealthCheck.Target != fmt.Sprintf("TCP:%d", nodePort) || lb.Tags["kubernetes.io/service-name"] != "default/web" || lb.Tags["kubernetes.io/cluster/e2e"] != "owned" {
		t.Fatalf("load balancer %+v, Service hostname %q", lb, hostname)
	}
	targetsMatchNodes := func() (bool, error) {
		lb, _ := e.loadBalancer(name)
		got := slices.Sorted(slices.Values(lb.Instances))
		want := e.nodeInstanceIDs()
		return slices.Equal(got, want), fmt.Errorf("instances %v, nodes' instances %v", got, want)
	}
	e.checkTargetsFollowNodesThenDelete(t, func() string { return e.addInstanceAndNode("10.244.5.0/24").PrivateDNSName },
		targetsMatchNodes, func() bool {
			_, lbLeft := e.loadBalancer(name)
			return lbLeft || e.groupExists("k8s-elb-"+name)
		})
	if n := e.fake.Requests()["elasticloadbalancing:CreateLoadBalancer"]; n != 1 {
		t.Fatalf("%d load balancers created for one Service", n)
	}
}

// testOrphanSweep: a Service stuck deleting (its load balancer cannot be
// deleted) whose finalizer an administrator removes leaves its load
// balancer behind: a Classic ELB with its security group, an NLB with its
// target groups and the Nodes' rules for it. After a restart, the host's
// orphan sweep deletes them through the module, and leaves a live
// Service's of each kind alone.
func (e *awsEnv) testOrphanSweep(t *testing.T) {
	ctx := context.Background()
	in := e.addInstanceAndNode("10.244.6.0/24")
	e.waitInitialized(t, in.PrivateDNSName)
	kept, leaked := e.createLBService(t, "kept"), e.createLBService(t, "leaked")
	nlbKept, nlbLeaked := e.createNLBService(t, "nlb-kept"), e.createNLBService(t, "nlb-leaked")
	for _, name := range []string{"kept", "leaked", "nlb-kept", "nlb-leaked"} {
		eventually(t, 60*time.Second, "load balancer of "+name, func() (bool, error) {
			s, err := e.getService(name)
			return err == nil && len(s.Status.LoadBalancer.Ingress) > 0, err
		})
	}
	var faults []string
	for _, route := range []string{"elasticloadbalancing:DeleteLoadBalancer", "elbv2:DeleteLoadBalancer"} {
		fault, err := e.fake.Faults.Add(faultinject.Fault{Route: route, Always: true, Status: 500})
		if err != nil {
			t.Fatal(err)
		}
		faults = append(faults, fault.Name)
	}
	for _, name := range []string{"leaked", "nlb-leaked"} {
		if err := e.client.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "failed deletions", func() (bool, error) {
		r := e.fake.Requests()
		return r["elasticloadbalancing:DeleteLoadBalancer"] > 0 && r["elbv2:DeleteLoadBalancer"] > 0, nil
	})
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	for _, name := range []string{"leaked", "nlb-leaked"} {
		if _, err := e.client.CoreV1().Services("default").Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "Service "+name+" gone", func() (bool, error) {
			_, err := e.getService(name)
			return apierrors.IsNotFound(err), nil
		})
	}
	if _, ok := e.loadBalancer(lbName(leaked)); !ok {
		t.Fatal("the leaked Service's ELB is already gone: nothing left for the sweep")
	}
	if _, ok := e.nlb(lbName(nlbLeaked)); !ok || len(e.nlbRules(lbName(nlbLeaked))) == 0 {
		t.Fatal("the leaked Service's NLB or rules are already gone: nothing left for the sweep")
	}
	// The service controller would go on retrying the deletion from its
	// cache; a restarted CCM (a new Pod) has no memory of the Service, so
	// only the sweep can find the load balancers.
	e.restartCCM(t, "ccm-after-leak")
	for _, f := range faults {
		e.fake.Faults.Remove(f)
	}
	eventually(t, 60*time.Second, "the sweep deleting the leaked ELB, NLB and what was made for them", func() (bool, error) {
		_, elbLeft := e.loadBalancer(lbName(leaked))
		_, nlbLeft := e.nlb(lbName(nlbLeaked))
		return !elbLeft && !e.groupExists("k8s-elb-"+lbName(leaked)) &&
			!nlbLeft && len(e.targetGroupsOf(nlbLeaked)) == 0 && len(e.nlbRules(lbName(nlbLeaked))) == 0, nil
	})
	// The fake counts the deletion before the CCM has its answer and logs
	// it: wait for the line rather than read the log once.
	eventually(t, 10*time.Second, "the CCM log saying the sweep deleted the load balancers", func() (bool, error) {
		return e.ccm.logContains("orphan sweep: deleted load balancer no Service wants"), nil
	})
	if _, ok := e.loadBalancer(lbName(kept)); !ok {
		t.Error("the sweep deleted a live Service's ELB")
	}
	e.waitNLB(t, nlbKept)
}

func (e *awsEnv) loadBalancer(name string) (awsfake.LoadBalancer, bool) {
	for _, lb := range e.fake.LoadBalancers() {
		if lb.Name == name {
			return lb, true
		}
	}
	return awsfake.LoadBalancer{}, false
}

func (e *awsEnv) groupExists(name string) bool {
	for _, sg := range e.fake.SecurityGroups() {
		if sg.Name == name {
			return true
		}
	}
	return false
}

// nodeInstanceIDs are the running instances of the Nodes, sorted.
func (e *awsEnv) nodeInstanceIDs() []string {
	nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes.Items {
		id := n.Spec.ProviderID[strings.LastIndexByte(n.Spec.ProviderID, '/')+1:]
		if in, ok := e.fake.Instance(id); ok && in.State != "terminated" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// routeTarget is the instance the cluster's route table sends cidr to.
func (e *awsEnv) routeTarget(cidr string) string {
	rt, _ := e.fake.RouteTable(e.routeTable)
	for _, r := range rt.Routes {
		if r.DestinationCIDR == cidr {
			return r.InstanceID
		}
	}
	return ""
}

// testFaults: with DescribeInstances failing, NotReady Nodes whose
// instances run stay, and so do their routes.
func (e *awsEnv) testFaults(t *testing.T) {
	var names []string
	for i := range 3 {
		in := e.addInstanceAndNode(fmt.Sprintf("10.244.%d.0/24", 10+i))
		e.waitInitialized(t, in.PrivateDNSName)
		names = append(names, in.PrivateDNSName)
	}
	for _, f := range []faultinject.Fault{
		{Name: "describe-500", Route: "ec2:DescribeInstances", Always: true, Status: 500},
		{Name: "describe-throttled", Route: "ec2:DescribeInstances", Always: true, Status: 429, RetryAfter: 1},
		{Name: "auth", Route: "ec2:DescribeInstances", Always: true, Status: 401},
	} {
		if _, err := e.fake.Faults.Add(f); err != nil {
			t.Fatal(err)
		}
		before := e.fake.Requests()["ec2:DescribeInstances"]
		for _, name := range names {
			e.setReady(name, v1.ConditionFalse)
		}
		time.Sleep(8 * time.Second) // eight node-monitor periods
		// The lifecycle controller asked about the NotReady Nodes, so every
		// answer came under the fault.
		if asked := e.fake.Requests()["ec2:DescribeInstances"] - before; asked < len(names) {
			t.Fatalf("%s: %d DescribeInstances under the fault, want at least one per NotReady Node", f.Name, asked)
		}
		for _, name := range names {
			if _, err := e.getNode(name); err != nil {
				t.Fatalf("%s: Node %s: %v", f.Name, name, err)
			}
		}
		e.fake.Faults.Remove(f.Name)
	}
}
