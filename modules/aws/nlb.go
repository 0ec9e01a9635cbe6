package aws

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
)

// Network Load Balancers, what the official CCM makes for a Service
// annotated aws-load-balancer-type: nlb: an ELBv2 load balancer of type
// network under the Classic name, a listener per port forwarding to a
// target group of the Nodes' instances on the node port, named as the
// official CCM names it, and rules in the Nodes' security groups, found
// by their descriptions, that let the clients and the health checks
// reach the node ports. Either CCM adopts what the other made.

const (
	nlbVersion = "2015-12-01"
	// The descriptions of the rules made in the Nodes' groups, the
	// official CCM's: a rule for clients and one for health checks per
	// load balancer, and the ICMP rule for path MTU discovery that every
	// client source range of a group shares.
	nlbClientRule = "kubernetes.io/rule/nlb/client"
	nlbHealthRule = "kubernetes.io/rule/nlb/health"
	nlbMTURule    = "kubernetes.io/rule/nlb/mtu"
)

// nlbUnsupported are the annotations the module refuses on an NLB: those
// it refuses on a Classic ELB, those with which the official CCM builds
// something else on an NLB (addresses, target group attributes, managed
// security groups) and the Classic ones it ignores there, so that no
// Service asks for what it does not get.
var nlbUnsupported = slices.Concat(unsupportedAnnotations, []string{
	annotationPrefix + "eip-allocations", annotationPrefix + "private-ipv4-addresses", annotationPrefix + "target-group-attributes",
	annotationGroups, annotationExtraGroups, annotationIdleTimeout, annotationDraining, annotationDrainTimeout,
})

// isNLB reports a Service whose load balancer is an NLB.
func isNLB(svc *abi.Service) bool { return svc.Annotations[annotationType] == "nlb" }

// nlbHealthCheck is a target group's health check; Port is a number or
// "traffic-port", Path empty for TCP.
type nlbHealthCheck struct {
	Protocol, Port, Path string
	Interval, Timeout    int
	Healthy, Unhealthy   int
}

// nlbMapping is one Service port: a listener on Port forwarding to the
// node port.
type nlbMapping struct {
	Port, NodePort int
	Protocol       string // TCP or UDP, the listener's and the target group's
	HealthCheck    nlbHealthCheck
}

// nlbSpec is what a Service asks of its NLB.
type nlbSpec struct {
	name, uid, service  string
	namespace, svcName  string
	internal, crossZone bool
	mappings            []nlbMapping
	sourceRanges        []string
	tags                map[string]string // the annotated ones
}

// nlb is what the module reads of an NLB.
type nlb struct {
	ARN, Name, DNSName, Scheme, VpcID string
	Subnets                           []string
}

type targetGroup struct {
	ARN, Name, Protocol string
	Port                int
	HealthCheck         nlbHealthCheck
}

type nlbListener struct {
	ARN, Protocol, TargetGroupARN string
	Port                          int
}

func (p *Provider) nlbSpecOf(svc *abi.Service) (*nlbSpec, error) {
	a := svc.Annotations
	for _, name := range nlbUnsupported {
		if _, ok := a[name]; ok {
			return nil, errors.New("aws: annotation " + name + " is not supported on a network load balancer by this module; remove it or use the official CCM")
		}
	}
	if svc.LoadBalancerIP != "" {
		return nil, errors.New("aws: loadBalancerIP cannot be specified for an AWS NLB")
	}
	spec := &nlbSpec{name: p.GetLoadBalancerName(context.Background(), "", svc), uid: svc.UID, service: svc.Namespace + "/" + svc.Name,
		namespace: svc.Namespace, svcName: svc.Name, internal: a[annotationInternal] != "" && a[annotationInternal] != "false",
		tags: keyValues(a[annotationTags])}
	if s, ok := a[annotationCrossZone]; ok {
		var err error
		if spec.crossZone, err = strconv.ParseBool(s); err != nil {
			return nil, errors.New("aws: annotation " + annotationCrossZone + "=" + strconv.Quote(s) + " is not a boolean")
		}
	}
	hc, err := nlbHealthCheckOf(svc)
	if err != nil {
		return nil, err
	}
	for _, port := range svc.Ports {
		protocol := port.Protocol
		if protocol == "" {
			protocol = "TCP"
		}
		if protocol != "TCP" && protocol != "UDP" {
			return nil, errors.New("aws: protocol " + protocol + " of port " + strconv.Itoa(int(port.Port)) + " is not supported by a network load balancer")
		}
		if len(spec.mappings) > 0 && spec.mappings[0].Protocol != protocol {
			return nil, errors.New("aws: a network load balancer's ports must all be TCP or all UDP, as the official CCM requires")
		}
		if port.NodePort == 0 {
			continue
		}
		spec.mappings = append(spec.mappings, nlbMapping{Port: int(port.Port), NodePort: int(port.NodePort), Protocol: protocol, HealthCheck: hc})
	}
	if len(spec.mappings) == 0 {
		return nil, errors.New("aws: the Service has no port with a node port to balance")
	}
	spec.sourceRanges, err = sourceRanges(svc)
	return spec, err
}

// nlbHealthCheckOf is the official CCM's target group health check: TCP
// to the traffic port every 30 s, thresholds 3; for externalTrafficPolicy
// Local, HTTP to kube-proxy's health check node port every 10 s,
// thresholds 2; each overridable by annotation. The timeout annotation is
// read, as the official CCM reads it, and not sent: the API picks it.
func nlbHealthCheckOf(svc *abi.Service) (nlbHealthCheck, error) {
	a := svc.Annotations
	hc := nlbHealthCheck{Protocol: "TCP", Port: healthCheckTrafficPort, Interval: 30, Timeout: 10, Healthy: 3, Unhealthy: 3}
	if svc.ExternalTrafficPolicy == "Local" && svc.HealthCheckNodePort != 0 {
		hc = nlbHealthCheck{Protocol: "HTTP", Port: strconv.Itoa(int(svc.HealthCheckNodePort)), Path: localTrafficHealthzPath,
			Interval: 10, Timeout: 10, Healthy: 2, Unhealthy: 2}
	}
	if s, ok := a[annotationHCProtocol]; ok {
		hc.Protocol = strings.ToUpper(s)
	}
	switch hc.Protocol {
	case "HTTP", "HTTPS":
		if hc.Path == "" {
			hc.Path = "/"
		}
		if s, ok := a[annotationHCPath]; ok {
			hc.Path = s
		}
	case "TCP":
		hc.Path = ""
	default:
		return hc, errors.New("aws: annotation " + annotationHCProtocol + "=" + strconv.Quote(a[annotationHCProtocol]) + " is not TCP, HTTP or HTTPS")
	}
	if s, ok := a[annotationHCPort]; ok {
		hc.Port = s
	}
	if hc.Port != healthCheckTrafficPort {
		if n, err := strconv.Atoi(hc.Port); err != nil || n < 1 || n > 65535 {
			return hc, errors.New("aws: annotation " + annotationHCPort + "=" + strconv.Quote(hc.Port) + " is neither a port nor \"traffic-port\"")
		}
	}
	err := intAnnotations(a, []intAnnotation{{annotationHCInterval, &hc.Interval}, {annotationHCTimeout, &hc.Timeout},
		{annotationHCHealthy, &hc.Healthy}, {annotationHCUnhealthy, &hc.Unhealthy}})
	return hc, err
}

// targetGroupName is the official CCM's: k8s-<namespace:8>-<name:8>-<10
// hex digits of a SHA-1 of what a target group cannot change>, so that a
// change of any of those makes a new group.
func (p *Provider) targetGroupName(spec *nlbSpec, m nlbMapping) string {
	h := sha1.New()
	for _, s := range []string{p.cfg.ClusterID, spec.namespace, spec.svcName, strconv.Itoa(m.Port), strconv.Itoa(m.NodePort),
		m.Protocol, "instance", m.HealthCheck.Protocol, strconv.Itoa(m.HealthCheck.Interval)} {
		h.Write([]byte(s))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return "k8s-" + cut(alnum(spec.namespace), 8) + "-" + cut(alnum(spec.svcName), 8) + "-" + sum[:10]
}

func alnum(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func cut(s string, n int) string { return s[:min(n, len(s))] }

// describeNLB returns the named NLB, nil when the API answers
// LoadBalancerNotFound (its only proof of absence).
func (p *Provider) describeNLB(ctx context.Context, name string) (*nlb, error) {
	result, err := p.elbv2.result(ctx, "describing network load balancer "+name, "DescribeLoadBalancers", url.Values{"Names.member.1": {name}})
	var e *apiError
	if errors.As(err, &e) && e.status == 400 && e.code == "LoadBalancerNotFound" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, d := range result.Items("LoadBalancers") {
		if d.TextOf("LoadBalancerName") == name {
			return nlbOf(d), nil
		}
	}
	return nil, errors.New("aws: describing network load balancer " + name + ": the answer does not describe it")
}

func nlbOf(d *xmltree.Element) *nlb {
	lb := &nlb{ARN: d.TextOf("LoadBalancerArn"), Name: d.TextOf("LoadBalancerName"), DNSName: d.TextOf("DNSName"),
		Scheme: d.TextOf("Scheme"), VpcID: d.TextOf("VpcId")}
	for _, z := range d.Items("AvailabilityZones") {
		lb.Subnets = append(lb.Subnets, z.TextOf("SubnetId"))
	}
	return lb
}

func nlbStatus(lb *nlb) *abi.LoadBalancerStatus {
	if lb.DNSName == "" {
		return &abi.LoadBalancerStatus{}
	}
	return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{Hostname: lb.DNSName}}}
}

// targetGroupsOf lists target groups, every page.
func (p *Provider) targetGroupsOf(ctx context.Context, what string, params url.Values) ([]targetGroup, error) {
	var out []targetGroup
	err := p.elbv2.each(ctx, what, "DescribeTargetGroups", params, func(page *xmltree.Element) {
		for _, g := range page.Child("DescribeTargetGroupsResult").Items("TargetGroups") {
			out = append(out, targetGroupOf(g))
		}
	})
	return out, err
}

func targetGroupOf(g *xmltree.Element) targetGroup {
	tg := targetGroup{ARN: g.TextOf("TargetGroupArn"), Name: g.TextOf("TargetGroupName"), Protocol: g.TextOf("Protocol"),
		HealthCheck: nlbHealthCheck{Protocol: g.TextOf("HealthCheckProtocol"), Port: g.TextOf("HealthCheckPort"), Path: g.TextOf("HealthCheckPath")}}
	tg.Port, _ = strconv.Atoi(g.TextOf("Port"))
	hc := &tg.HealthCheck
	hc.Interval, _ = strconv.Atoi(g.TextOf("HealthCheckIntervalSeconds"))
	hc.Timeout, _ = strconv.Atoi(g.TextOf("HealthCheckTimeoutSeconds"))
	hc.Healthy, _ = strconv.Atoi(g.TextOf("HealthyThresholdCount"))
	hc.Unhealthy, _ = strconv.Atoi(g.TextOf("UnhealthyThresholdCount"))
	if hc.Protocol == "TCP" {
		hc.Path = ""
	}
	return tg
}

func (p *Provider) listenersOf(ctx context.Context, lb *nlb) ([]nlbListener, error) {
	var out []nlbListener
	err := p.elbv2.each(ctx, "listing the listeners of network load balancer "+lb.Name, "DescribeListeners",
		url.Values{"LoadBalancerArn": {lb.ARN}}, func(page *xmltree.Element) {
			for _, l := range page.Child("DescribeListenersResult").Items("Listeners") {
				one := nlbListener{ARN: l.TextOf("ListenerArn"), Protocol: l.TextOf("Protocol")}
				one.Port, _ = strconv.Atoi(l.TextOf("Port"))
				if actions := l.Items("DefaultActions"); len(actions) > 0 {
					one.TargetGroupARN = actions[0].TextOf("TargetGroupArn")
				}
				out = append(out, one)
			}
		})
	return out, err
}

// nlbTags are the tags of the NLB and of each of its target groups and
// listeners: the official CCM's, and the Service's UID.
func (p *Provider) nlbTags(spec *nlbSpec) map[string]string {
	tags := map[string]string{}
	for k, v := range spec.tags {
		tags[k] = v
	}
	tags[serviceNameTag] = spec.service
	tags[p.clusterTag] = "owned"
	tags[ServiceUIDTag] = spec.uid
	return tags
}

// ensureNLB makes or updates the Service's NLB as the official CCM does:
// the load balancer, a listener and target group per port, its
// attributes, then the Nodes' groups' rules.
func (p *Provider) ensureNLB(ctx context.Context, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	spec, err := p.nlbSpecOf(svc)
	if err != nil {
		return nil, err
	}
	instances, err := p.nodeInstances(ctx, nodes)
	if err != nil {
		return nil, err
	}
	lb, err := p.describeNLB(ctx, spec.name)
	if err != nil {
		return nil, err
	}
	existing := ""
	if lb != nil {
		existing = lb.VpcID
	}
	vpc, err := p.vpcOf(spec.name, existing, instances)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(instances))
	for _, in := range instances {
		ids = append(ids, in.ID)
	}
	tags := p.nlbTags(spec)
	created := lb == nil
	if created {
		subnets, err := p.elbSubnets(ctx, vpc, spec.internal)
		if err != nil {
			return nil, err
		}
		params := url.Values{"Name": {spec.name}, "Type": {"network"}}
		if spec.internal {
			params.Set("Scheme", "internal")
		}
		for i, s := range subnets {
			params.Set("SubnetMappings.member."+strconv.Itoa(i+1)+".SubnetId", s)
		}
		setTags(params, "Tags.member", tags)
		p.logf(abi.LogInfo, "creating network load balancer "+spec.name+" for Service "+spec.service)
		result, err := p.elbv2.result(ctx, "creating network load balancer "+spec.name, "CreateLoadBalancer", params)
		if err != nil {
			return nil, err
		}
		made := result.Items("LoadBalancers")
		if len(made) != 1 {
			return nil, errors.New("aws: creating network load balancer " + spec.name + ": the answer describes " + strconv.Itoa(len(made)) + " load balancers")
		}
		lb = nlbOf(made[0])
	}
	if err := p.syncNLBListeners(ctx, lb, spec, ids, tags, created); err != nil {
		return nil, err
	}
	if err := p.syncNLBAttributes(ctx, lb, spec.crossZone); err != nil {
		return nil, err
	}
	if err := p.syncNLBRules(ctx, lb, spec, instances); err != nil {
		return nil, err
	}
	return nlbStatus(lb), nil
}

// syncNLBListeners brings the listeners and their target groups to the
// spec. A listener on a wanted port whose group cannot serve the mapping
// (another node port, protocol, health check protocol or interval, which
// a group cannot change) is pointed at a new group and the old group is
// deleted; a listener on a port no longer wanted is deleted with its
// group. A load balancer just created has neither to read.
func (p *Provider) syncNLBListeners(ctx context.Context, lb *nlb, spec *nlbSpec, instances []string, tags map[string]string, created bool) error {
	var listeners []nlbListener
	var groups []targetGroup
	if !created {
		var err error
		if listeners, err = p.listenersOf(ctx, lb); err != nil {
			return err
		}
		groups, err = p.targetGroupsOf(ctx, "listing the target groups of network load balancer "+lb.Name, url.Values{"LoadBalancerArn": {lb.ARN}})
		if err != nil {
			return err
		}
	}
	for _, m := range spec.mappings {
		i := slices.IndexFunc(listeners, func(l nlbListener) bool { return l.Port == m.Port && l.Protocol == m.Protocol })
		if i < 0 {
			tg, err := p.ensureTargetGroup(ctx, lb, spec, m, nil, instances, tags)
			if err != nil {
				return err
			}
			params := url.Values{"LoadBalancerArn": {lb.ARN}, "Port": {strconv.Itoa(m.Port)}, "Protocol": {m.Protocol},
				"DefaultActions.member.1.Type": {"forward"}, "DefaultActions.member.1.TargetGroupArn": {tg.ARN}}
			setTags(params, "Tags.member", tags)
			if _, err := p.elbv2.result(ctx, "creating listener "+strconv.Itoa(m.Port)+" of network load balancer "+lb.Name, "CreateListener", params); err != nil {
				return err
			}
			continue
		}
		l := listeners[i]
		var have *targetGroup
		if j := slices.IndexFunc(groups, func(g targetGroup) bool { return g.ARN == l.TargetGroupARN }); j >= 0 {
			have = &groups[j]
		}
		if have != nil && have.Port == m.NodePort && have.Protocol == m.Protocol && have.HealthCheck.Protocol == m.HealthCheck.Protocol &&
			have.HealthCheck.Interval == m.HealthCheck.Interval {
			if _, err := p.ensureTargetGroup(ctx, lb, spec, m, have, instances, tags); err != nil {
				return err
			}
			continue
		}
		tg, err := p.ensureTargetGroup(ctx, lb, spec, m, nil, instances, tags)
		if err != nil {
			return err
		}
		if _, err := p.elbv2.result(ctx, "pointing listener "+strconv.Itoa(m.Port)+" of network load balancer "+lb.Name+" at target group "+tg.Name,
			"ModifyListener", url.Values{"ListenerArn": {l.ARN}, "Port": {strconv.Itoa(m.Port)}, "Protocol": {m.Protocol},
				"DefaultActions.member.1.Type": {"forward"}, "DefaultActions.member.1.TargetGroupArn": {tg.ARN}}); err != nil {
			return err
		}
		if l.TargetGroupARN != "" && l.TargetGroupARN != tg.ARN {
			if err := p.deleteTargetGroup(ctx, l.TargetGroupARN); err != nil {
				return err
			}
		}
	}
	for _, l := range listeners {
		if slices.ContainsFunc(spec.mappings, func(m nlbMapping) bool { return l.Port == m.Port && l.Protocol == m.Protocol }) {
			continue
		}
		if _, err := p.elbv2.result(ctx, "deleting listener "+strconv.Itoa(l.Port)+" of network load balancer "+lb.Name,
			"DeleteListener", url.Values{"ListenerArn": {l.ARN}}); err != nil {
			return err
		}
		if l.TargetGroupARN != "" {
			if err := p.deleteTargetGroup(ctx, l.TargetGroupARN); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureTargetGroup makes the mapping's group when have is nil (the API
// answers an existing group of the same name and settings, so a retry
// after a lost answer finds the first), and brings its health check and
// targets to the spec.
func (p *Provider) ensureTargetGroup(ctx context.Context, lb *nlb, spec *nlbSpec, m nlbMapping, have *targetGroup, instances []string, tags map[string]string) (*targetGroup, error) {
	hc := m.HealthCheck
	if have == nil {
		name := p.targetGroupName(spec, m)
		params := url.Values{"Name": {name}, "Protocol": {m.Protocol}, "Port": {strconv.Itoa(m.NodePort)}, "VpcId": {lb.VpcID},
			"TargetType": {"instance"}, "HealthCheckProtocol": {hc.Protocol}, "HealthCheckPort": {hc.Port},
			"HealthCheckIntervalSeconds": {strconv.Itoa(hc.Interval)}, "HealthyThresholdCount": {strconv.Itoa(hc.Healthy)},
			"UnhealthyThresholdCount": {strconv.Itoa(hc.Unhealthy)}}
		if hc.Protocol != "TCP" {
			params.Set("HealthCheckPath", hc.Path)
		}
		setTags(params, "Tags.member", tags)
		result, err := p.elbv2.result(ctx, "creating target group "+name, "CreateTargetGroup", params)
		if err != nil {
			return nil, err
		}
		created := result.Items("TargetGroups")
		if len(created) != 1 {
			return nil, errors.New("aws: creating target group " + name + ": the answer describes " + strconv.Itoa(len(created)) + " groups")
		}
		tg := targetGroupOf(created[0])
		// A new group's targets are registered without asking which it
		// has, as the official CCM does; one the API answered from an
		// earlier try keeps any extra target until the next update.
		return &tg, p.changeTargets(ctx, &tg, m.NodePort, instances, nil)
	}
	// The health check fields a group can change.
	params := url.Values{"TargetGroupArn": {have.ARN}}
	if have.HealthCheck.Port != hc.Port {
		params.Set("HealthCheckPort", hc.Port)
	}
	if have.HealthCheck.Healthy != hc.Healthy || have.HealthCheck.Unhealthy != hc.Unhealthy {
		params.Set("HealthyThresholdCount", strconv.Itoa(hc.Healthy))
		params.Set("UnhealthyThresholdCount", strconv.Itoa(hc.Unhealthy))
	}
	if hc.Protocol != "TCP" && have.HealthCheck.Path != hc.Path {
		params.Set("HealthCheckPath", hc.Path)
	}
	if len(params) > 1 {
		if _, err := p.elbv2.result(ctx, "changing the health check of target group "+have.Name, "ModifyTargetGroup", params); err != nil {
			return nil, err
		}
	}
	health, err := p.elbv2.result(ctx, "reading the targets of target group "+have.Name, "DescribeTargetHealth", url.Values{"TargetGroupArn": {have.ARN}})
	if err != nil {
		return nil, err
	}
	var registered []target
	for _, d := range health.Items("TargetHealthDescriptions") {
		if d.Child("TargetHealth").TextOf("Reason") != "Target.DeregistrationInProgress" {
			port, _ := strconv.Atoi(d.Child("Target").TextOf("Port"))
			registered = append(registered, target{d.Child("Target").TextOf("Id"), port})
		}
	}
	return have, p.changeTargets(ctx, have, m.NodePort, instances, registered)
}

type target struct {
	ID   string
	Port int
}

// changeTargets deregisters the registered targets that are not the
// instances on port, then registers the instances the group lacks,
// deregistering first as the official CCM does, so that a group at its
// limit can take replacements.
func (p *Provider) changeTargets(ctx context.Context, tg *targetGroup, port int, instances []string, registered []target) error {
	var add, remove []target
	for _, id := range instances {
		if t := (target{id, port}); !slices.Contains(registered, t) {
			add = append(add, t)
		}
	}
	for _, t := range registered {
		if t.Port != port || !slices.Contains(instances, t.ID) {
			remove = append(remove, t)
		}
	}
	for _, change := range []struct {
		action  string
		targets []target
	}{{"DeregisterTargets", remove}, {"RegisterTargets", add}} {
		if len(change.targets) == 0 {
			continue
		}
		params := url.Values{"TargetGroupArn": {tg.ARN}}
		for i, t := range change.targets {
			n := "Targets.member." + strconv.Itoa(i+1) + "."
			params.Set(n+"Id", t.ID)
			params.Set(n+"Port", strconv.Itoa(t.Port))
		}
		if _, err := p.elbv2.result(ctx, change.action+" of target group "+tg.Name, change.action, params); err != nil {
			return err
		}
	}
	return nil
}

// deleteTargetGroup deletes a group; one the API no longer knows is
// deleted.
func (p *Provider) deleteTargetGroup(ctx context.Context, arn string) error {
	_, err := p.elbv2.result(ctx, "deleting target group "+arn, "DeleteTargetGroup", url.Values{"TargetGroupArn": {arn}})
	var e *apiError
	if errors.As(err, &e) && e.status == 400 && e.code == "TargetGroupNotFound" {
		return nil
	}
	return err
}

// syncNLBAttributes sets cross-zone load balancing, and access logs off,
// when they differ, as the official CCM does.
func (p *Provider) syncNLBAttributes(ctx context.Context, lb *nlb, crossZone bool) error {
	result, err := p.elbv2.result(ctx, "reading network load balancer "+lb.Name+"'s attributes", "DescribeLoadBalancerAttributes",
		url.Values{"LoadBalancerArn": {lb.ARN}})
	if err != nil {
		return err
	}
	have := map[string]string{}
	for _, a := range result.Items("Attributes") {
		have[a.TextOf("Key")] = a.TextOf("Value")
	}
	params := url.Values{"LoadBalancerArn": {lb.ARN}}
	n := 0
	for _, a := range [][2]string{{"load_balancing.cross_zone.enabled", strconv.FormatBool(crossZone)}, {"access_logs.s3.enabled", "false"}} {
		if have[a[0]] != a[1] {
			n++
			params.Set("Attributes.member."+strconv.Itoa(n)+".Key", a[0])
			params.Set("Attributes.member."+strconv.Itoa(n)+".Value", a[1])
		}
	}
	if n == 0 {
		return nil
	}
	_, err = p.elbv2.result(ctx, "setting network load balancer "+lb.Name+"'s attributes", "ModifyLoadBalancerAttributes", params)
	return err
}

// syncNLBRules brings the rules of the Nodes' groups for this NLB to the
// spec, as the official CCM does: in each instance's group (the one
// tagged for the cluster, or its only one), the client rule (the node
// ports from the source ranges) and, unless the client rule already lets
// everyone in on the same ports over TCP, the health rule (the health
// check ports from the NLB's subnets); out of the cluster's other groups.
// With spec nil (a deletion), every group of the account loses this NLB's
// rules: a deletion must not leave rules in a group not tagged for the
// cluster, such as an instance's only group.
func (p *Provider) syncNLBRules(ctx context.Context, lb *nlb, spec *nlbSpec, instances []instance) error {
	var groups []securityGroup
	var err error
	if spec == nil {
		groups, err = p.describeGroups(ctx, "listing the security groups", url.Values{})
	} else {
		groups, err = p.describeGroups(ctx, "listing the cluster's security groups", filters(url.Values{}, "tag-key", p.clusterTag))
	}
	if err != nil {
		return err
	}
	tagged := map[string]bool{}
	for _, g := range groups {
		tagged[g.ID] = true
	}
	want, err := p.instanceGroups(instances, tagged)
	if err != nil {
		return err
	}
	var missing []string
	for id := range want {
		if !tagged[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		more, err := p.describeGroups(ctx, "reading the Nodes' security groups", anyOf("group-id", missing))
		if err != nil {
			return err
		}
		groups = append(groups, more...)
	}
	var client, health []rule
	if spec != nil && len(instances) > 0 {
		subnetCIDRs, err := p.subnetCIDRs(ctx, lb.Subnets)
		if err != nil {
			return err
		}
		protocol := strings.ToLower(spec.mappings[0].Protocol)
		var clientPorts, healthPorts []int
		for _, m := range spec.mappings {
			clientPorts = append(clientPorts, m.NodePort)
			hp := m.NodePort
			if m.HealthCheck.Port != healthCheckTrafficPort {
				hp, _ = strconv.Atoi(m.HealthCheck.Port)
			}
			if !slices.Contains(healthPorts, hp) {
				healthPorts = append(healthPorts, hp)
			}
		}
		slices.Sort(clientPorts)
		slices.Sort(healthPorts)
		for _, port := range clientPorts {
			for _, cidr := range spec.sourceRanges {
				client = append(client, rule{Protocol: protocol, From: port, To: port, CIDR: cidr, Description: nlbClientRule + "=" + lb.Name})
			}
		}
		if !slices.Equal(spec.sourceRanges, []string{"0.0.0.0/0"}) || protocol != "tcp" || !slices.Equal(clientPorts, healthPorts) {
			for _, port := range healthPorts {
				for _, cidr := range subnetCIDRs {
					health = append(health, rule{Protocol: "tcp", From: port, To: port, CIDR: cidr, Description: nlbHealthRule + "=" + lb.Name})
				}
			}
		}
	}
	for _, g := range groups {
		var c, h []rule
		if want[g.ID] {
			c, h = client, health
		}
		if err := p.setDescribedIngress(ctx, &g, nlbHealthRule+"="+lb.Name, h); err != nil {
			return err
		}
		if err := p.setDescribedIngress(ctx, &g, nlbClientRule+"="+lb.Name, c); err != nil {
			return err
		}
		// ICMP fragmentation-needed from every client range of any NLB
		// the group lets in, for path MTU discovery.
		var mtu []rule
		for _, r := range g.Ingress {
			if strings.HasPrefix(r.Description, nlbClientRule+"=") && r.CIDR != "" {
				m := rule{Protocol: "icmp", From: 3, To: 4, CIDR: r.CIDR, Description: nlbMTURule}
				if !slices.Contains(mtu, m) {
					mtu = append(mtu, m)
				}
			}
		}
		if err := p.setDescribedIngress(ctx, &g, nlbMTURule, mtu); err != nil {
			return err
		}
	}
	return nil
}

// setDescribedIngress brings the group's rules described so to want,
// leaving every other rule alone, and keeps g.Ingress in step.
func (p *Provider) setDescribedIngress(ctx context.Context, g *securityGroup, description string, want []rule) error {
	var add, remove []rule
	for _, r := range want {
		if !slices.Contains(g.Ingress, r) && !slices.Contains(add, r) {
			add = append(add, r)
		}
	}
	for _, r := range g.Ingress {
		if r.Description == description && !slices.Contains(want, r) {
			remove = append(remove, r)
		}
	}
	if err := p.changeIngress(ctx, "RevokeSecurityGroupIngress", g.ID, remove); err != nil {
		return err
	}
	if err := p.changeIngress(ctx, "AuthorizeSecurityGroupIngress", g.ID, add); err != nil {
		return err
	}
	g.Ingress = slices.DeleteFunc(g.Ingress, func(r rule) bool { return slices.Contains(remove, r) })
	g.Ingress = append(g.Ingress, add...)
	return nil
}

func (p *Provider) subnetCIDRs(ctx context.Context, subnets []string) ([]string, error) {
	var out []string
	if len(subnets) == 0 {
		return nil, errors.New("aws: the network load balancer is in no subnet")
	}
	err := p.ec2.each(ctx, "reading the load balancer's subnets", "DescribeSubnets", anyOf("subnet-id", subnets), func(page *xmltree.Element) {
		for _, s := range page.Items("subnetSet") {
			out = append(out, s.TextOf("cidrBlock"))
		}
	})
	slices.Sort(out)
	return out, err
}

// deleteNLB removes the Service's NLB, its target groups (those its
// listeners use, and any other tagged with the Service's UID: one made by
// an Ensure that failed before its listener) and the rules of every group
// for it. Each step runs whether or not the NLB is still there, so that a
// deletion that failed half-way is finished by the next.
func (p *Provider) deleteNLB(ctx context.Context, svc *abi.Service) error {
	name := p.GetLoadBalancerName(ctx, "", svc)
	lb, err := p.describeNLB(ctx, name)
	if err != nil {
		return err
	}
	var arns []string
	if lb != nil {
		groups, err := p.targetGroupsOf(ctx, "listing the target groups of network load balancer "+name, url.Values{"LoadBalancerArn": {lb.ARN}})
		if err != nil {
			return err
		}
		for _, g := range groups {
			arns = append(arns, g.ARN)
		}
		p.logf(abi.LogInfo, "deleting network load balancer "+name)
		if _, err := p.elbv2.result(ctx, "deleting network load balancer "+name, "DeleteLoadBalancer", url.Values{"LoadBalancerArn": {lb.ARN}}); err != nil {
			return err
		}
	}
	left, err := p.ownedTargetGroups(ctx, svc.UID)
	if err != nil {
		return err
	}
	for _, g := range left {
		if !slices.Contains(arns, g.ARN) {
			arns = append(arns, g.ARN)
		}
	}
	for _, arn := range arns {
		if err := p.deleteTargetGroup(ctx, arn); err != nil {
			return err
		}
	}
	return p.syncNLBRules(ctx, &nlb{Name: name}, nil, nil)
}

// ownedTarget is a target group of this cluster tagged with a Service UID.
type ownedTarget struct {
	ARN, UID, Service string
}

// ownedTargetGroups lists the cluster's target groups tagged with a
// Service UID, that UID's only when uid is not empty: every page of
// DescribeTargetGroups, then their tags 20 at a time. Any failure fails
// the listing.
func (p *Provider) ownedTargetGroups(ctx context.Context, uid string) ([]ownedTarget, error) {
	all, err := p.targetGroupsOf(ctx, "listing the target groups", url.Values{})
	if err != nil {
		return nil, err
	}
	var arns []string
	for _, g := range all {
		// The official name starts k8s-; other groups are none of ours.
		if strings.HasPrefix(g.Name, "k8s-") {
			arns = append(arns, g.ARN)
		}
	}
	var out []ownedTarget
	err = p.eachTagged(ctx, "reading the target groups' tags", arns, func(arn string, tags map[string]string) {
		if _, ours := tags[p.clusterTag]; ours && tags[ServiceUIDTag] != "" && (uid == "" || tags[ServiceUIDTag] == uid) {
			out = append(out, ownedTarget{ARN: arn, UID: tags[ServiceUIDTag], Service: tags[serviceNameTag]})
		}
	})
	return out, err
}

// eachTagged reads the ELBv2 tags of arns, 20 at a time, and hands each
// resource's to visit. An answer that leaves one out fails.
func (p *Provider) eachTagged(ctx context.Context, what string, arns []string, visit func(arn string, tags map[string]string)) error {
	for start := 0; start < len(arns); start += tagsPerRequest {
		batch := arns[start:min(start+tagsPerRequest, len(arns))]
		result, err := p.elbv2.result(ctx, what, "DescribeTags", list(url.Values{}, "ResourceArns.member", batch))
		if err != nil {
			return err
		}
		described := 0
		for _, d := range result.Items("TagDescriptions") {
			described++
			tags := map[string]string{}
			for _, t := range d.Items("Tags") {
				tags[t.TextOf("Key")] = t.TextOf("Value")
			}
			visit(d.TextOf("ResourceArn"), tags)
		}
		if described != len(batch) {
			return errors.New("aws: " + what + ": asked for " + strconv.Itoa(len(batch)) + ", the answer describes " + strconv.Itoa(described))
		}
	}
	return nil
}
