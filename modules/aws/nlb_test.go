package aws

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/faultinject"
)

func nlbService(annotations map[string]string) *abi.Service {
	a := map[string]string{annotationType: "nlb"}
	for k, v := range annotations {
		a[k] = v
	}
	return service(a)
}

func (e *env) nlb(t *testing.T, name string) *awsfake.NetworkLoadBalancer {
	t.Helper()
	for _, lb := range e.cloud.NetworkLoadBalancers() {
		if lb.Name == name {
			return &lb
		}
	}
	return nil
}

// listenerGroups maps each listener port of the NLB to its target group.
func (e *env) listenerGroups(t *testing.T, lb *awsfake.NetworkLoadBalancer) map[int]awsfake.TargetGroup {
	t.Helper()
	groups := map[string]awsfake.TargetGroup{}
	for _, tg := range e.cloud.TargetGroups() {
		groups[tg.ARN] = tg
	}
	out := map[int]awsfake.TargetGroup{}
	for _, l := range e.cloud.NetworkListeners() {
		if l.LoadBalancerARN == lb.ARN {
			out[l.Port] = groups[l.TargetGroupARN]
		}
	}
	return out
}

// nlbRules are the rules of every group described for an NLB, as
// "group proto from-to cidr description", sorted.
func (e *env) nlbRules() []string {
	var out []string
	for _, sg := range e.cloud.SecurityGroups() {
		for _, p := range sg.Ingress {
			if strings.HasPrefix(p.Description, "kubernetes.io/rule/nlb/") {
				out = append(out, fmt.Sprintf("%s %s %d-%d %s %s", sg.Name, p.Protocol, p.FromPort, p.ToPort, strings.Join(p.CIDRs, ","), p.Description))
			}
		}
	}
	slices.Sort(out)
	return out
}

// officialTargetGroupName is the official CCM's naming, written out from
// its documented scheme as the test's oracle.
func officialTargetGroupName(port, nodePort int, protocol, hcProtocol string, hcInterval int) string {
	h := sha1.New()
	for _, s := range []string{cluster, "default", "web", strconv.Itoa(port), strconv.Itoa(nodePort), protocol, "instance", hcProtocol, strconv.Itoa(hcInterval)} {
		h.Write([]byte(s))
	}
	return "k8s-default-web-" + hex.EncodeToString(h.Sum(nil))[:10]
}

func TestNLBLifecycle(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	svc := nlbService(nil)
	if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); exists || err != nil {
		t.Fatalf("before: exists=%v, %v", exists, err)
	}
	status, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes())
	if err != nil {
		t.Fatal(err)
	}
	name := e.p.GetLoadBalancerName(ctx, cluster, svc)
	lb := e.nlb(t, name)
	if lb == nil {
		t.Fatal("no network load balancer made")
	}
	// A load balancer just made has no listener or group to read.
	if r := e.cloud.Requests(); r["elbv2:DescribeListeners"]+r["elbv2:DescribeTargetGroups"]+r["elbv2:DescribeTargetHealth"] != 0 {
		t.Errorf("creating read what it had just made: %v", r)
	}
	if len(e.cloud.LoadBalancers()) != 0 {
		t.Fatal("a Classic ELB was made for an NLB Service")
	}
	var subnets []string
	for _, s := range e.cloud.Subnets() {
		subnets = append(subnets, s.ID)
	}
	if lb.Scheme != "internet-facing" || !slices.Equal(lb.Subnets, subnets) || len(lb.SecurityGroups) != 0 ||
		!reflect.DeepEqual(lb.Tags, map[string]string{"kubernetes.io/service-name": "default/web", "kubernetes.io/cluster/c1": "owned", ServiceUIDTag: svc.UID}) {
		t.Errorf("load balancer %+v", lb)
	}
	if want := []abi.LoadBalancerIngress{{Hostname: lb.DNSName}}; !reflect.DeepEqual(status.Ingress, want) {
		t.Errorf("status %+v, want %+v", status.Ingress, want)
	}
	if lb.Attributes["load_balancing.cross_zone.enabled"] != "false" {
		t.Errorf("attributes %v", lb.Attributes)
	}
	running, stopped := e.instances["running"].ID, e.instances["stopped"].ID
	groups := e.listenerGroups(t, lb)
	for port, nodePort := range map[int]int{80: 30080, 443: 30443} {
		tg := groups[port]
		want := awsfake.TargetGroup{ARN: tg.ARN, Name: officialTargetGroupName(port, nodePort, "TCP", "TCP", 30), Protocol: "TCP", VpcID: lb.VpcID,
			TargetType: "instance", Port: nodePort,
			HealthCheck: awsfake.TargetGroupHealthCheck{Protocol: "TCP", Port: "traffic-port", Interval: 30, Timeout: 10, Healthy: 3, Unhealthy: 3},
			Targets:     []awsfake.Target{{ID: running, Port: nodePort}, {ID: stopped, Port: nodePort}}, Tags: lb.Tags}
		if !reflect.DeepEqual(tg, want) {
			t.Errorf("listener %d's group\n%+v, want\n%+v", port, tg, want)
		}
	}
	// Everyone may reach the node ports over TCP, so no health rule.
	wantRules := []string{
		"default icmp 3-4 0.0.0.0/0 kubernetes.io/rule/nlb/mtu",
		"default tcp 30080-30080 0.0.0.0/0 kubernetes.io/rule/nlb/client=" + name,
		"default tcp 30443-30443 0.0.0.0/0 kubernetes.io/rule/nlb/client=" + name,
	}
	if got := e.nlbRules(); !slices.Equal(got, wantRules) {
		t.Errorf("rules\n%v, want\n%v", got, wantRules)
	}

	// Again: nothing changes.
	before := e.cloud.Requests()
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	if w := writes(delta(before, e.cloud.Requests())); len(w) != 0 {
		t.Errorf("an Ensure of an NLB in step wrote %v", w)
	}

	// A new node port for 80, 443 gone, a source range: a new group for
	// 80, the old one deleted, 443's listener and group deleted, the rules
	// following.
	svc.Ports = []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30081}}
	svc.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, svc, e.nodes()); err != nil {
		t.Fatal(err)
	}
	groups = e.listenerGroups(t, lb)
	if len(groups) != 1 || groups[80].Port != 30081 || groups[80].Name != officialTargetGroupName(80, 30081, "TCP", "TCP", 30) {
		t.Errorf("listeners after the change: %+v", groups)
	}
	if n := len(e.cloud.TargetGroups()); n != 1 {
		t.Errorf("%d target groups after the change, want 1: the replaced ones leaked", n)
	}
	wantRules = []string{
		"default icmp 3-4 192.0.2.0/24 kubernetes.io/rule/nlb/mtu",
		"default tcp 30081-30081 10.0.1.0/24 kubernetes.io/rule/nlb/health=" + name,
		"default tcp 30081-30081 10.0.2.0/24 kubernetes.io/rule/nlb/health=" + name,
		"default tcp 30081-30081 10.0.3.0/24 kubernetes.io/rule/nlb/health=" + name,
		"default tcp 30081-30081 192.0.2.0/24 kubernetes.io/rule/nlb/client=" + name,
	}
	if got := e.nlbRules(); !slices.Equal(got, wantRules) {
		t.Errorf("rules after the change\n%v, want\n%v", got, wantRules)
	}

	// A Node leaves: its instance is deregistered.
	if err := e.p.UpdateLoadBalancer(ctx, cluster, svc, []abi.Node{*e.byID("running")}); err != nil {
		t.Fatal(err)
	}
	if tg := e.listenerGroups(t, lb)[80]; !slices.Equal(tg.Targets, []awsfake.Target{{ID: running, Port: 30081}}) {
		t.Errorf("targets after a Node left: %+v", tg.Targets)
	}

	// Deleted: the NLB, its groups and its rules; the Nodes' group as it
	// was.
	if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	if len(e.cloud.NetworkLoadBalancers())+len(e.cloud.TargetGroups())+len(e.cloud.NetworkListeners()) != 0 || len(e.nlbRules()) != 0 {
		t.Errorf("left behind: %+v %+v %v", e.cloud.NetworkLoadBalancers(), e.cloud.TargetGroups(), e.nlbRules())
	}
	if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); exists || err != nil {
		t.Errorf("after: exists=%v, %v", exists, err)
	}
	if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Errorf("deleting again: %v", err)
	}
}

func TestNLBAnnotations(t *testing.T) {
	e := newEnv(t, awsfake.DefaultSecretAccessKey)
	ctx := context.Background()
	svc := nlbService(map[string]string{annotationInternal: "true", annotationTags: "team=web", annotationCrossZone: "true",
		annotationHCProtocol: "http", annotationHCPath: "/ready", annotationHCPort: "8080", annotationHCInterval: "10",
		annotationHCHealthy: "4", annotationHCUnhealthy: "5"})
	name := e.ensure(t, svc)
	lb := e.nlb(t, name)
	if lb.Scheme != "internal" || lb.Tags["team"] != "web" || lb.Attributes["load_balancing.cross_zone.enabled"] != "true" {
		t.Errorf("load balancer %+v", lb)
	}
	tg := e.listenerGroups(t, lb)[80]
	if want := (awsfake.TargetGroupHealthCheck{Protocol: "HTTP", Port: "8080", Path: "/ready", Interval: 10, Timeout: 10, Healthy: 4, Unhealthy: 5}); tg.HealthCheck != want ||
		tg.Name != officialTargetGroupName(80, 30080, "TCP", "HTTP", 10) || tg.Tags["team"] != "web" {
		t.Errorf("target group %+v", tg)
	}
	// The health check port differs from the node ports: health rules.
	if got := e.nlbRules(); !slices.Contains(got, "default tcp 8080-8080 10.0.1.0/24 kubernetes.io/rule/nlb/health="+name) {
		t.Errorf("rules %v lack the health check port's", got)
	}
	// A changed threshold is changed in place.
	svc.Annotations[annotationHCHealthy] = "2"
	before := e.cloud.Requests()
	e.ensure(t, svc)
	if w := writes(delta(before, e.cloud.Requests())); !reflect.DeepEqual(w, map[string]int{"elbv2:ModifyTargetGroup": 2}) {
		t.Errorf("changing a threshold wrote %v", w)
	}

	// Local traffic: HTTP to kube-proxy's health check node port.
	local := nlbService(nil)
	local.Name, local.UID = "local", "0d7e1c2b-0000-4000-8000-000000000011"
	local.ExternalTrafficPolicy, local.HealthCheckNodePort = "Local", 32000
	lb = e.nlb(t, e.ensure(t, local))
	if hc := e.listenerGroups(t, lb)[80].HealthCheck; hc != (awsfake.TargetGroupHealthCheck{Protocol: "HTTP", Port: "32000", Path: "/healthz", Interval: 10, Timeout: 10, Healthy: 2, Unhealthy: 2}) {
		t.Errorf("Local traffic health check %+v", hc)
	}

	before = e.cloud.Requests()
	for _, refused := range []map[string]string{
		{annotationPrefix + "ssl-cert": "arn:aws:acm:us-east-1:123456789012:certificate/x"},
		{annotationPrefix + "eip-allocations": "eipalloc-1,eipalloc-2"},
		{annotationPrefix + "target-group-attributes": "preserve_client_ip.enabled=false"},
		{annotationGroups: "sg-0123"},
		{annotationIdleTimeout: "120"},
		{annotationHCProtocol: "ssl"},
		{annotationHCPort: "none"},
		{annotationCrossZone: "maybe"},
	} {
		bad := nlbService(refused)
		bad.UID = "0d7e1c2b-0000-4000-8000-000000000012"
		if _, err := e.p.EnsureLoadBalancer(ctx, cluster, bad, e.nodes()); err == nil {
			t.Errorf("annotations %v accepted", refused)
		}
	}
	mixed := nlbService(nil)
	mixed.UID = "0d7e1c2b-0000-4000-8000-000000000013"
	mixed.Ports[1].Protocol = "UDP"
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, mixed, e.nodes()); err == nil {
		t.Error("mixed TCP and UDP ports were accepted")
	}
	if w := writes(delta(before, e.cloud.Requests())); len(w) != 0 {
		t.Errorf("refused Services wrote %v", w)
	}

	// UDP: UDP groups and client rules, TCP health rules.
	udp := nlbService(nil)
	udp.Name, udp.UID = "dns", "0d7e1c2b-0000-4000-8000-000000000014"
	udp.Ports = []abi.ServicePort{{Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053}}
	udpName := e.ensure(t, udp)
	if tg := e.listenerGroups(t, e.nlb(t, udpName))[53]; tg.Protocol != "UDP" || tg.HealthCheck.Protocol != "TCP" {
		t.Errorf("UDP group %+v", tg)
	}
	if got := e.nlbRules(); !slices.Contains(got, "default udp 30053-30053 0.0.0.0/0 kubernetes.io/rule/nlb/client="+udpName) ||
		!slices.Contains(got, "default tcp 30053-30053 10.0.1.0/24 kubernetes.io/rule/nlb/health="+udpName) {
		t.Errorf("UDP rules %v", got)
	}
}

// TestNLBNeverGoneOnDoubt: a failing API is an error, never "absent"; a
// deletion that cannot list what it must delete deletes nothing; an
// Ensure that failed half-way leaves nothing a deletion misses.
func TestNLBNeverGoneOnDoubt(t *testing.T) {
	for _, status := range []int{500, 503, 401} {
		e := newEnv(t, awsfake.DefaultSecretAccessKey)
		ctx := context.Background()
		svc := nlbService(nil)
		e.ensure(t, svc)
		for _, route := range []string{"elbv2:DescribeLoadBalancers", "elbv2:DescribeTargetGroups"} {
			fault, err := e.cloud.Faults.Add(faultinject.Fault{Route: route, Always: true, Status: status})
			if err != nil {
				t.Fatal(err)
			}
			if route == "elbv2:DescribeLoadBalancers" {
				if _, exists, err := e.p.GetLoadBalancer(ctx, cluster, svc); err == nil {
					t.Errorf("%d: GetLoadBalancer = exists %v without an error", status, exists)
				}
			}
			if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err == nil {
				t.Errorf("%d %s: EnsureLoadBalancerDeleted succeeded without knowing", status, route)
			}
			if len(e.cloud.NetworkLoadBalancers()) != 1 || len(e.cloud.TargetGroups()) != 2 {
				t.Errorf("%d %s: deleted on doubt", status, route)
			}
			e.cloud.Faults.Remove(fault.Name)
		}

		// Lost answers and failures half-way through a new NLB.
		other := nlbService(nil)
		other.UID = "0d7e1c2b-0000-4000-8000-000000000015"
		for _, f := range []faultinject.Fault{
			{Route: "elbv2:CreateListener", FailNext: 1, Status: status},
			{Route: "elbv2:CreateTargetGroup", FailNext: 1, Status: status, AfterCommit: true},
			{Route: "elbv2:RegisterTargets", FailNext: 1, Status: status},
		} {
			if _, err := e.cloud.Faults.Add(f); err != nil {
				t.Fatal(err)
			}
			if _, err := e.p.EnsureLoadBalancer(ctx, cluster, other, e.nodes()); err == nil {
				t.Errorf("%d %s: EnsureLoadBalancer succeeded through a failure", status, f.Route)
			}
			e.cloud.Faults.Clear()
		}
		// The Service is deleted before any Ensure finished: nothing of it
		// is left, the groups no listener took included.
		if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, other); err != nil {
			t.Fatal(err)
		}
		for _, tg := range e.cloud.TargetGroups() {
			if tg.Tags[ServiceUIDTag] == other.UID {
				t.Errorf("%d: target group %s leaked", status, tg.Name)
			}
		}
		if e.nlb(t, e.p.GetLoadBalancerName(ctx, cluster, other)) != nil {
			t.Errorf("%d: the NLB is left", status)
		}

		// A deletion whose DeleteLoadBalancer answer is lost is finished
		// by the next.
		if _, err := e.cloud.Faults.Add(faultinject.Fault{Route: "elbv2:DeleteLoadBalancer", FailNext: 1, Status: status, AfterCommit: true}); err != nil {
			t.Fatal(err)
		}
		if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err == nil {
			t.Errorf("%d: a lost DeleteLoadBalancer answer read as success", status)
		}
		if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
			t.Fatal(err)
		}
		if n := len(e.cloud.TargetGroups()) + len(e.cloud.NetworkLoadBalancers()) + len(e.nlbRules()); n != 0 {
			t.Errorf("%d: left behind %+v %v", status, e.cloud.TargetGroups(), e.nlbRules())
		}
	}
}

// TestListNetworkLoadBalancers: the cluster's NLBs with a Service UID are
// listed across pages, and so are target groups of a Service whose NLB
// is gone or never came, under the name its UID gives; another
// cluster's, and an NLB without the UID tag (the official CCM's), are
// not; a failing page or tag read fails the listing. The sweep's
// deletion of an entry leaves nothing listed.
func TestListNetworkLoadBalancers(t *testing.T) {
	e := newEnvWith(t, awsfake.DefaultSecretAccessKey, awsfake.Options{PageSize: 7})
	ctx := context.Background()
	var want []abi.OwnedLoadBalancer
	for i := range 22 { // four pages of NLBs, two batches of their tags
		svc := nlbService(nil)
		svc.Name = fmt.Sprintf("web-%d", i)
		svc.UID = fmt.Sprintf("0d7e1c2b-0000-4000-8000-%011d0", i)
		svc.Ports = svc.Ports[:1]
		name := e.ensure(t, svc)
		want = append(want, abi.OwnedLoadBalancer{Name: name, ID: e.nlb(t, name).ARN, ServiceUID: svc.UID, ServiceNamespace: "default", ServiceName: svc.Name})
	}
	// An Ensure that failed before its listener: a target group alone.
	alone := nlbService(nil)
	alone.Name, alone.UID = "alone", "0d7e1c2b-0000-4000-8000-0000000000a0"
	if _, err := e.cloud.Faults.Add(faultinject.Fault{Route: "elbv2:CreateListener", Always: true, Status: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.EnsureLoadBalancer(ctx, cluster, alone, e.nodes()); err == nil {
		t.Fatal("the Ensure succeeded without its listener")
	}
	e.cloud.Faults.Clear()
	aloneName := e.p.GetLoadBalancerName(ctx, cluster, alone)
	if lb := e.nlb(t, aloneName); lb != nil {
		// Its NLB is deleted out of band: only the group is left.
		if _, err := e.p.elbv2.result(ctx, "test", "DeleteLoadBalancer", url.Values{"LoadBalancerArn": {lb.ARN}}); err != nil {
			t.Fatal(err)
		}
	}
	var aloneGroup string
	for _, tg := range e.cloud.TargetGroups() {
		if tg.Tags[ServiceUIDTag] == alone.UID {
			aloneGroup = tg.ARN
		}
	}
	want = append(want, abi.OwnedLoadBalancer{Name: aloneName, ID: aloneGroup, ServiceUID: alone.UID, ServiceNamespace: "default", ServiceName: "alone"})

	// Another cluster's NLB, and one without the UID tag.
	other := New(e.p.host)
	cfg := fmt.Sprintf(`{"region": "us-east-1", "clusterID": "other", "ec2Endpoint": %q, "elbEndpoint": %q}`, e.p.ec2.endpoint, e.p.elb.endpoint)
	if err := other.Init(ctx, "other", []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	foreign := nlbService(nil)
	foreign.Name, foreign.UID = "foreign", "0d7e1c2b-0000-4000-8000-ffffffffffff"
	if _, err := other.EnsureLoadBalancer(ctx, "other", foreign, e.nodes()); err != nil {
		t.Fatal(err)
	}
	official := nlbService(nil)
	official.Name, official.UID = "official", "0d7e1c2b-0000-4000-8000-0000000000b0"
	lb := e.nlb(t, e.ensure(t, official))
	var arns []string
	for _, tg := range e.cloud.TargetGroups() {
		if tg.Tags[ServiceUIDTag] == official.UID {
			arns = append(arns, tg.ARN)
		}
	}
	if _, err := e.p.elbv2.result(ctx, "test", "RemoveTags", list(url.Values{"TagKeys.member.1": {ServiceUIDTag}}, "ResourceArns.member", append(arns, lb.ARN))); err != nil {
		t.Fatal(err)
	}

	got, err := e.p.ListLoadBalancers(ctx, cluster)
	slices.SortFunc(got, func(a, b abi.OwnedLoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(want, func(a, b abi.OwnedLoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListLoadBalancers = %d %v; want the cluster's %d", len(got), err, len(want))
	}
	if theirs, err := other.ListLoadBalancers(ctx, "other"); err != nil || len(theirs) != 1 || theirs[0].ServiceUID != foreign.UID {
		t.Errorf("the other cluster lists %+v, %v", theirs, err)
	}
	for _, route := range []string{"elbv2:DescribeLoadBalancers", "elbv2:DescribeTags", "elbv2:DescribeTargetGroups"} {
		fault, err := e.cloud.Faults.Add(faultinject.Fault{Route: route, Always: true, Status: 503})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.p.ListLoadBalancers(ctx, cluster); err == nil {
			t.Errorf("%s failing: listed %d without an error", route, len(got))
		}
		e.cloud.Faults.Remove(fault.Name)
	}

	// The sweep deletes an entry with a Service of its UID and name only.
	if err := e.p.EnsureLoadBalancerDeleted(ctx, cluster, &abi.Service{Namespace: "default", Name: "alone", UID: alone.UID}); err != nil {
		t.Fatal(err)
	}
	after, err := e.p.ListLoadBalancers(ctx, cluster)
	if err != nil || slices.ContainsFunc(after, func(lb abi.OwnedLoadBalancer) bool { return lb.ServiceUID == alone.UID }) || len(after) != len(want)-1 {
		t.Errorf("after the sweep's deletion: %d listed, %v", len(after), err)
	}
}
