package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

func service(annotations map[string]string) *abi.Service {
	return &abi.Service{Namespace: "default", Name: "web", UID: "6c3b4a52-19d1-4a5e-9d0b-2f1e4c8a7b90", Annotations: annotations,
		Ports: []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}, {Name: "https", Protocol: "TCP", Port: 443, NodePort: 30443}}}
}

// nodes are the Nodes of the env's instances, and one without a provider
// ID (not yet initialized), which no load balancer gets.
func (e *env) nodes() []abi.Node {
	return []abi.Node{*e.byID("running"), *e.byID("stopped"), *e.byID("terminated"), {Name: "new-node"}}
}

func (e *env) loadBalancer(t *testing.T, name string) *awsfake.LoadBalancer {
	t.Helper()
	for _, lb := range e.cloud.LoadBalancers() {
		if lb.Name == name {
			return &lb
		}
	}
	return nil
}

// ensure makes the Service's load balancer for the env's Nodes and
// returns its name.
func (e *env) ensure(t *testing.T, svc *abi.Service) string {
	t.Helper()
	if _, err := e.p.EnsureLoadBalancer(context.Background(), cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	return e.p.GetLoadBalancerName(context.Background(), cluster, svc)
}

func (e *env) group(name string) *awsfake.SecurityGroup {
	for _, sg := range e.cloud.SecurityGroups() {
		if sg.Name == name {
			return &sg
		}
	}
	return nil
}

// writes counts the requests of actions that change something.
func writes(requests map[string]int) map[string]int {
	out := map[string]int{}
	for action, n := range requests {
		_, name, _ := strings.Cut(action, ":")
		if !strings.HasPrefix(name, "Describe") {
			out[action] = n
		}
	}
	return out
}

func delta(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range after {
		if d := n - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// TestLoadBalancerLifecycle: a Service's ELB as the official CCM makes
// it, kept in step with the Nodes, and deleted with everything made for
// it.
func TestLoadBalancerLifecycle(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	svc := service(nil)
	name := e.p.GetLoadBalancerName(ctx, cluster, svc)
	if name != "a6c3b4a5219d14a5e9d0b2f1e4c8a7b9" {
		t.Fatalf("name %q is not the official CCM's", name)
	}
	if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); exists || err != nil {
		t.Fatalf("before: exists=%v, %v", exists, err)
	}
	status, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes())
	if err != nil {
		t.Fatal(err)
	}
	lb := e.loadBalancer(t, name)
	if lb == nil {
		t.Fatal("no load balancer made")
	}
	if want := []abi.LoadBalancerIngress{{Hostname: lb.DNSName}}; !reflect.DeepEqual(status.Ingress, want) {
		t.Errorf("status %+v, want %+v", status.Ingress, want)
	}
	own := e.group("k8s-elb-" + name)
	if own == nil {
		t.Fatal("no security group k8s-elb-" + name)
	}
	var subnets []string
	for _, s := range e.cloud.Subnets() {
		subnets = append(subnets, s.ID)
	}
	running, stopped := e.instances["running"].ID, e.instances["stopped"].ID
	want := awsfake.LoadBalancer{Name: name, Scheme: "internet-facing",
		Listeners: []awsfake.Listener{{Protocol: "TCP", LoadBalancerPort: 80, InstanceProtocol: "TCP", InstancePort: 30080},
			{Protocol: "TCP", LoadBalancerPort: 443, InstanceProtocol: "TCP", InstancePort: 30443}},
		Subnets: subnets, SecurityGroups: []string{own.ID}, Instances: []string{running, stopped},
		HealthCheck: awsfake.HealthCheck{Target: "TCP:30080", Interval: 10, Timeout: 5, UnhealthyThreshold: 6, HealthyThreshold: 2},
		Tags: map[string]string{"kubernetes.io/service-name": "default/web", "kubernetes.io/cluster/c1": "owned",
			ServiceUIDTag: svc.UID}}
	slices.Sort(lb.Instances)
	got := awsfake.LoadBalancer{Name: lb.Name, Scheme: lb.Scheme, Listeners: lb.Listeners, Subnets: lb.Subnets,
		SecurityGroups: lb.SecurityGroups, Instances: lb.Instances, HealthCheck: lb.HealthCheck, Tags: lb.Tags}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("load balancer\n got %+v\nwant %+v", got, want)
	}
	if lb.Attributes.IdleTimeout != 60 || lb.Attributes.CrossZone || lb.Attributes.ConnectionDraining || lb.Attributes.AccessLogEnabled {
		t.Errorf("attributes %+v are not the official CCM's defaults", lb.Attributes)
	}
	wantRules := []awsfake.Permission{
		{Protocol: "tcp", FromPort: 80, ToPort: 80, CIDRs: []string{"0.0.0.0/0"}},
		{Protocol: "tcp", FromPort: 443, ToPort: 443, CIDRs: []string{"0.0.0.0/0"}},
		{Protocol: "icmp", FromPort: 3, ToPort: 4, CIDRs: []string{"0.0.0.0/0"}},
	}
	if !reflect.DeepEqual(own.Ingress, wantRules) || !maps.Equal(own.Tags, clusterTags) {
		t.Errorf("own group: ingress %+v tags %v; want %+v and %v", own.Ingress, own.Tags, wantRules, clusterTags)
	}
	nodeGroup := e.group("default")
	if !slices.ContainsFunc(nodeGroup.Ingress, func(p awsfake.Permission) bool {
		return p.Protocol == "-1" && slices.Equal(p.GroupIDs, []string{own.ID})
	}) {
		t.Errorf("the Nodes' group does not let the load balancer in: %+v", nodeGroup.Ingress)
	}
	if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); !exists || err != nil {
		t.Fatalf("after: exists=%v, %v", exists, err)
	}

	// In step: a second Ensure writes nothing.
	before := e.cloud.Requests()
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	asked := delta(before, e.cloud.Requests())
	if w := writes(asked); len(w) != 0 {
		t.Errorf("a second EnsureLoadBalancer wrote %v", w)
	}
	if n := asked["elasticloadbalancing:DescribeLoadBalancers"]; n != 1 {
		t.Errorf("a second EnsureLoadBalancer described the ELB %d times; nothing changed, so once", n)
	}

	// A Node leaves: its instance is deregistered.
	if err := e.p.UpdateLoadBalancer(ctx, cluster, svc, []abi.Node{*e.byID("running")}); err != nil {
		t.Fatal(err)
	}
	if lb := e.loadBalancer(t, name); !slices.Equal(lb.Instances, []string{running}) {
		t.Errorf("after the update the instances are %v, want [%s]", lb.Instances, running)
	}

	// Deleted with its group and the Nodes' rule; deleting again succeeds.
	for range 2 {
		if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
			t.Fatal(err)
		}
	}
	if e.loadBalancer(t, name) != nil || e.group("k8s-elb-"+name) != nil {
		t.Error("the load balancer or its group is left")
	}
	if g := e.group("default"); !reflect.DeepEqual(g.Ingress, []awsfake.Permission{{Protocol: "-1", GroupIDs: []string{g.ID}}}) {
		t.Errorf("the Nodes' group keeps %+v", g.Ingress)
	}
	if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); exists || err != nil {
		t.Fatalf("deleted: exists=%v, %v", exists, err)
	}
}

// TestLoadBalancerAnnotations: the supported annotations shape the ELB
// as the official CCM's do; the unsupported ones are refused before
// anything is made.
func TestLoadBalancerAnnotations(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	svc := service(map[string]string{
		annotationInternal: "true", annotationTags: "team=web, cost=42", annotationIdleTimeout: "120",
		annotationCrossZone: "true", annotationDraining: "true", annotationDrainTimeout: "30",
		annotationHCHealthy: "3", annotationHCInterval: "20",
	})
	svc.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	name := e.p.GetLoadBalancerName(ctx, cluster, svc)
	lb := e.loadBalancer(t, name)
	if lb.Scheme != "internal" || lb.Tags["team"] != "web" || lb.Tags["cost"] != "42" {
		t.Errorf("scheme %q tags %v", lb.Scheme, lb.Tags)
	}
	if a := lb.Attributes; a.IdleTimeout != 120 || !a.CrossZone || !a.ConnectionDraining || a.ConnectionDrainingTimeout != 30 {
		t.Errorf("attributes %+v", a)
	}
	if hc := lb.HealthCheck; hc.HealthyThreshold != 3 || hc.Interval != 20 || hc.Target != "TCP:30080" {
		t.Errorf("health check %+v", hc)
	}
	own := e.group("k8s-elb-" + name)
	for _, p := range own.Ingress {
		if !slices.Equal(p.CIDRs, []string{"192.0.2.0/24"}) {
			t.Errorf("rule %+v is open beyond the source range", p)
		}
	}
	if own.Tags["team"] != "web" {
		t.Errorf("the group lacks the additional tags: %v", own.Tags)
	}

	// Local traffic: kube-proxy's health check node port.
	local := service(nil)
	local.UID = "0d7e1c2b-0000-4000-8000-000000000001"
	local.ExternalTrafficPolicy, local.HealthCheckNodePort = "Local", 32000
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, local, e.nodes()); err != nil {
		t.Fatal(err)
	}
	if hc := e.loadBalancer(t, e.p.GetLoadBalancerName(ctx, cluster, local)).HealthCheck; hc.Target != "HTTP:32000/healthz" {
		t.Errorf("Local traffic health check %+v", hc)
	}

	before := len(e.cloud.LoadBalancers())
	for _, refused := range []map[string]string{
		{annotationPrefix + "ssl-cert": "arn:aws:acm:us-east-1:123456789012:certificate/x"},
		{annotationPrefix + "proxy-protocol": "*"},
		{annotationType: "alb"},
		{annotationIdleTimeout: "soon"},
	} {
		bad := service(refused)
		bad.UID = "0d7e1c2b-0000-4000-8000-000000000002"
		if _, err := e.p.EnsureLoadBalancer(ctx, cluster, bad, e.nodes()); err == nil {
			t.Errorf("annotations %v accepted", refused)
		}
	}
	udp := service(nil)
	udp.UID = "0d7e1c2b-0000-4000-8000-000000000003"
	udp.Ports[0].Protocol = "UDP"
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, udp, e.nodes()); err == nil {
		t.Error("a UDP port was accepted by a Classic ELB")
	}
	if after := len(e.cloud.LoadBalancers()); after != before {
		t.Errorf("refused Services made %d load balancers", after-before)
	}
	ext := service(map[string]string{annotationType: "external"})
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, ext, e.nodes()); !errors.Is(err, sdk.ErrImplementedElsewhere) {
		t.Errorf("type external: %v, want ImplementedElsewhere", err)
	}
}

// TestLoadBalancerNeverGoneOnDoubt: a failing API is an error, never
// "absent" (which would make the controller create it again, or forget
// it); a failed Ensure makes no load balancer half-way that a later one
// cannot finish.
func TestLoadBalancerNeverGoneOnDoubt(t *testing.T) {
	for _, status := range []int{500, 503, 401} {
		e := newEnv(t, awsfake.DefaultSecretAccessKey)
		ctx := context.Background()
		svc := service(nil)
		if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
			t.Fatal(err)
		}
		fault, err := e.cloud.Faults.Add(faultinject.Fault{Route: "elasticloadbalancing:DescribeLoadBalancers", Always: true, Status: status})
		if err != nil {
			t.Fatal(err)
		}
		if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); err == nil {
			t.Errorf("%d: GetLoadBalancer = exists %v without an error", status, exists)
		}
		if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err == nil {
			t.Errorf("%d: EnsureLoadBalancerDeleted succeeded without knowing", status)
		}
		if len(e.cloud.LoadBalancers()) != 1 {
			t.Errorf("%d: the load balancer was deleted", status)
		}
		e.cloud.Faults.Remove(fault.Name)
		if _, err := e.cloud.Faults.Add(faultinject.Fault{Route: "elasticloadbalancing:RegisterInstancesWithLoadBalancer", Always: true, Status: status}); err != nil {
			t.Fatal(err)
		}
		other := service(nil)
		other.UID = "0d7e1c2b-0000-4000-8000-000000000004"
		if _, err := e.p.EnsureLoadBalancer(ctx, cluster, other, e.nodes()); err == nil {
			t.Errorf("%d: EnsureLoadBalancer succeeded without registering the instances", status)
		}
		e.cloud.Faults.Clear()
		if _, err := e.p.EnsureLoadBalancer(ctx, cluster, other, e.nodes()); err != nil {
			t.Errorf("%d: the retry did not finish the load balancer: %v", status, err)
		}
	}
}

// TestLoadBalancerGroupInUse: a group the API still finds in use is not
// given up: the deletion fails with a retry delay, and the next one
// deletes the group by its name although the ELB is gone.
func TestLoadBalancerGroupInUse(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	svc := service(nil)
	name := e.ensure(t, svc)
	own := e.group("k8s-elb-" + name)
	// An instance in the group holds it, as ELB's interfaces do for a
	// while after the ELB is deleted.
	holder, err := e.cloud.AddInstance(awsfake.Instance{SecurityGroups: []string{own.ID}})
	if err != nil {
		t.Fatal(err)
	}
	err = e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc)
	if delay := sdk.OutcomeOf(err).RetryAfter; err == nil || delay != dependencyDelay {
		t.Fatalf("deletion with the group in use: %v (delay %v), want a retry after %v", err, delay, dependencyDelay)
	}
	if e.loadBalancer(t, name) != nil || e.group("k8s-elb-"+name) == nil {
		t.Fatal("want the ELB deleted and its group kept for now")
	}
	if err := e.cloud.TerminateInstance(holder.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	if e.group("k8s-elb-"+name) != nil {
		t.Error("the group was left behind")
	}
}

// TestListLoadBalancers: the cluster's ELBs that carry a Service UID are
// listed across pages; another cluster's, an official CCM's (no UID tag)
// and one whose name is not its UID's are not; a failing page or tag read
// fails the listing rather than shortening it.
func TestListLoadBalancers(t *testing.T) {
	e := newEnvWith(t, awsfake.DefaultSecretAccessKey, awsfake.Options{PageSize: 7})
	ctx := context.Background()
	var want []abi.OwnedLoadBalancer
	for i := range 25 { // four pages of DescribeLoadBalancers, two DescribeTags batches
		svc := service(nil)
		svc.Name = fmt.Sprintf("web-%d", i)
		svc.UID = fmt.Sprintf("0d7e1c2b-0000-4000-8000-%011d0", i) // the last digit is not in the name
		if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
			t.Fatal(err)
		}
		name := e.p.GetLoadBalancerName(ctx, cluster, svc)
		want = append(want, abi.OwnedLoadBalancer{Name: name, ID: name, ServiceUID: svc.UID, ServiceNamespace: "default", ServiceName: svc.Name})
	}
	other := New(e.p.host)
	cfg := fmt.Sprintf(`{"region": "us-east-1", "clusterID": "other", "ec2Endpoint": %q, "elbEndpoint": %q}`, e.p.ec2.endpoint, e.p.elb.endpoint)
	if err := other.Init(ctx, "other", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	foreign := service(nil)
	foreign.UID = "0d7e1c2b-0000-4000-8000-ffffffffffff"
	if _, err := other.EnsureLoadBalancer(ctx, "other", foreign, e.nodes()); err != nil {
		t.Fatal(err)
	}
	before := e.cloud.Requests()
	got, err := e.p.ListLoadBalancers(ctx, cluster)
	if asked := delta(before, e.cloud.Requests()); asked["elasticloadbalancing:DescribeLoadBalancers"] != 4 || asked["elasticloadbalancing:DescribeTags"] != 2 {
		t.Errorf("requests %v: want 4 pages of load balancers and 2 batches of tags", asked)
	}
	slices.SortFunc(got, func(a, b abi.OwnedLoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(want, func(a, b abi.OwnedLoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListLoadBalancers = %d, %v; want the cluster's %d", len(got), err, len(want))
	}
	if theirs, err := other.ListLoadBalancers(ctx, "other"); err != nil || len(theirs) != 1 || theirs[0].ServiceUID != foreign.UID {
		t.Errorf("the other cluster lists %+v, %v", theirs, err)
	}
	for _, route := range []string{"elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeTags"} {
		fault, err := e.cloud.Faults.Add(faultinject.Fault{Route: route, Always: true, Status: 503})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.p.ListLoadBalancers(ctx, cluster); err == nil {
			t.Errorf("%s failing: listed %d without an error", route, len(got))
		}
		e.cloud.Faults.Remove(fault.Name)
	}
}

// TestReplacedGroupDeletedWithTheService: when the security-groups
// annotation replaces the ELB's own group, that group (and the Nodes'
// rule for it) is deleted with the Service, not left behind.
func TestReplacedGroupDeletedWithTheService(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	svc := service(nil)
	name := e.ensure(t, svc)
	own, nodes := e.group("k8s-elb-"+name), e.group("default")
	svc.Annotations = map[string]string{annotationGroups: nodes.ID}
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	if lb := e.loadBalancer(t, name); !slices.Equal(lb.SecurityGroups, []string{nodes.ID}) {
		t.Fatalf("the annotated group did not replace the own one: %v", lb.SecurityGroups)
	}
	if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	if e.group("k8s-elb-"+name) != nil {
		t.Error("the replaced group was left behind")
	}
	for _, p := range e.group("default").Ingress {
		if slices.Contains(p.GroupIDs, own.ID) {
			t.Errorf("the Nodes' group still lets the deleted group in: %+v", p)
		}
	}
	if e.group("default") == nil {
		t.Error("the annotated group was deleted")
	}
}
