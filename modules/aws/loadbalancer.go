package aws

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws/internal/xmltree"
	"github.com/wasmccm/wasmccm/modules/sdk"
)

// Load balancers are Classic ELBs, what the official CCM makes for a
// Service of type LoadBalancer without the NLB annotation, under the same
// name, tags, listeners, health check and security groups, so that either
// CCM adopts the other's load balancers.

// The Service annotations the module reads, the official CCM's.
const (
	annotationPrefix        = "service.beta.kubernetes.io/aws-load-balancer-"
	annotationType          = annotationPrefix + "type"
	annotationInternal      = annotationPrefix + "internal"
	annotationTags          = annotationPrefix + "additional-resource-tags"
	annotationGroups        = annotationPrefix + "security-groups"
	annotationExtraGroups   = annotationPrefix + "extra-security-groups"
	annotationIdleTimeout   = annotationPrefix + "connection-idle-timeout"
	annotationCrossZone     = annotationPrefix + "cross-zone-load-balancing-enabled"
	annotationDraining      = annotationPrefix + "connection-draining-enabled"
	annotationDrainTimeout  = annotationPrefix + "connection-draining-timeout"
	annotationHCProtocol    = annotationPrefix + "healthcheck-protocol"
	annotationHCPort        = annotationPrefix + "healthcheck-port"
	annotationHCPath        = annotationPrefix + "healthcheck-path"
	annotationHCHealthy     = annotationPrefix + "healthcheck-healthy-threshold"
	annotationHCUnhealthy   = annotationPrefix + "healthcheck-unhealthy-threshold"
	annotationHCTimeout     = annotationPrefix + "healthcheck-timeout"
	annotationHCInterval    = annotationPrefix + "healthcheck-interval"
	annotationSourceRanges  = "service.beta.kubernetes.io/load-balancer-source-ranges"
	serviceNameTag          = "kubernetes.io/service-name"
	clusterTagPrefix        = "kubernetes.io/cluster/"
	healthCheckTrafficPort  = "traffic-port"
	localTrafficHealthzPath = "/healthz"
)

// unsupportedAnnotations change what the official CCM builds (TLS, proxy
// protocol, access logs, chosen subnets or Nodes). A Service carrying one
// is refused with an error, so that nothing is built that differs from
// what it asks for.
var unsupportedAnnotations = []string{
	annotationPrefix + "ssl-cert", annotationPrefix + "ssl-ports", annotationPrefix + "ssl-negotiation-policy",
	annotationPrefix + "backend-protocol", annotationPrefix + "proxy-protocol",
	annotationPrefix + "access-log-enabled", annotationPrefix + "access-log-emit-interval",
	annotationPrefix + "access-log-s3-bucket-name", annotationPrefix + "access-log-s3-bucket-prefix",
	annotationPrefix + "subnets", annotationPrefix + "target-node-labels",
}

// listener is a Classic ELB listener.
type listener struct {
	Protocol, InstanceProtocol string
	Port, InstancePort         int
}

type healthCheck struct {
	Target                                     string
	Interval, Timeout, Unhealthy, HealthyCount int
}

// attributes are the load balancer attributes the official CCM sets.
type attributes struct {
	CrossZone, AccessLog, Draining bool
	DrainingTimeout, IdleTimeout   int
}

// loadBalancer is what the provider reads of a Classic ELB.
type loadBalancer struct {
	Name, DNSName, Scheme, VpcID       string
	Listeners                          []listener
	Subnets, SecurityGroups, Instances []string
	HealthCheck                        healthCheck
}

// lbSpec is what a Service asks for.
type lbSpec struct {
	name         string
	uid          string
	service      string // namespace/name
	internal     bool
	listeners    []listener
	sourceRanges []string
	tags         map[string]string // from the additional-resource-tags annotation
	groups       []string          // from the security-groups annotation
	extraGroups  []string
	attributes   attributes
	drainTimeout bool // whether the draining timeout was annotated
	healthCheck  healthCheck
}

// GetLoadBalancerName is the official CCM's name, Kubernetes' default: "a"
// and the Service UID without dashes, cut to ELB's 32 characters.
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *abi.Service) string {
	name := "a" + strings.ReplaceAll(svc.UID, "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// external reports a Service whose load balancer another controller
// makes (the AWS Load Balancer Controller), as the official CCM reads it.
func external(svc *abi.Service) bool {
	t := svc.Annotations[annotationType]
	return t == "external" || t == "nlb-ip"
}

// specOf reads the Service; an error names what cannot be served.
func (p *Provider) specOf(svc *abi.Service) (*lbSpec, error) {
	a := svc.Annotations
	if t := a[annotationType]; t != "" && t != "clb" {
		return nil, errors.New("aws: load balancer type " + strconv.Quote(t) + " is not supported by this module; it makes Classic ELBs and NLBs only")
	}
	for _, name := range unsupportedAnnotations {
		if _, ok := a[name]; ok {
			return nil, errors.New("aws: annotation " + name + " is not supported by this module; remove it or use the official CCM")
		}
	}
	if svc.LoadBalancerIP != "" {
		return nil, errors.New("aws: loadBalancerIP cannot be specified for an AWS ELB")
	}
	spec := &lbSpec{name: p.GetLoadBalancerName(context.Background(), "", svc), uid: svc.UID, service: svc.Namespace + "/" + svc.Name,
		internal: a[annotationInternal] != "" && a[annotationInternal] != "false",
		tags:     keyValues(a[annotationTags]), groups: commaList(a[annotationGroups]), extraGroups: commaList(a[annotationExtraGroups]),
		attributes: attributes{IdleTimeout: 60}}
	for _, port := range svc.Ports {
		if port.Protocol != "TCP" && port.Protocol != "" {
			return nil, errors.New("aws: protocol " + port.Protocol + " of port " + strconv.Itoa(int(port.Port)) + " is not supported by a Classic ELB")
		}
		if port.NodePort == 0 {
			continue
		}
		spec.listeners = append(spec.listeners, listener{Protocol: "TCP", InstanceProtocol: "TCP", Port: int(port.Port), InstancePort: int(port.NodePort)})
	}
	if len(spec.listeners) == 0 {
		return nil, errors.New("aws: the Service has no port with a node port to balance")
	}
	var err error
	if spec.sourceRanges, err = sourceRanges(svc); err != nil {
		return nil, err
	}
	at := &spec.attributes
	for _, b := range []struct {
		name string
		v    *bool
	}{{annotationCrossZone, &at.CrossZone}, {annotationDraining, &at.Draining}} {
		if s, ok := a[b.name]; ok {
			if *b.v, err = strconv.ParseBool(s); err != nil {
				return nil, errors.New("aws: annotation " + b.name + "=" + strconv.Quote(s) + " is not a boolean")
			}
		}
	}
	_, spec.drainTimeout = a[annotationDrainTimeout]
	if err := intAnnotations(a, []intAnnotation{{annotationIdleTimeout, &at.IdleTimeout}, {annotationDrainTimeout, &at.DrainingTimeout}}); err != nil {
		return nil, err
	}
	spec.healthCheck, err = healthCheckOf(svc, spec.listeners[0].InstancePort)
	return spec, err
}

type intAnnotation struct {
	name string
	v    *int
}

// intAnnotations reads the integer annotations that are set.
func intAnnotations(a map[string]string, list []intAnnotation) error {
	for _, n := range list {
		if s, ok := a[n.name]; ok {
			v, err := strconv.Atoi(s)
			if err != nil {
				return errors.New("aws: annotation " + n.name + "=" + strconv.Quote(s) + " is not an integer")
			}
			*n.v = v
		}
	}
	return nil
}

// healthCheckOf is the official CCM's health check: TCP to the first node
// port, or HTTP to kube-proxy's health check node port for a Service with
// externalTrafficPolicy Local, each overridable by annotation.
func healthCheckOf(svc *abi.Service, trafficPort int) (healthCheck, error) {
	a := svc.Annotations
	protocol, port, path := "TCP", trafficPort, ""
	if svc.ExternalTrafficPolicy == "Local" && svc.HealthCheckNodePort != 0 {
		protocol, port, path = "HTTP", int(svc.HealthCheckNodePort), localTrafficHealthzPath
		if a[annotationHCPort] == healthCheckTrafficPort {
			port = trafficPort
		}
	}
	if s, ok := a[annotationHCProtocol]; ok {
		protocol = strings.ToUpper(s)
	}
	if s, ok := a[annotationHCPort]; ok && s != healthCheckTrafficPort {
		v, err := strconv.Atoi(s)
		if err != nil {
			return healthCheck{}, errors.New("aws: annotation " + annotationHCPort + "=" + strconv.Quote(s) + " is neither a port nor \"traffic-port\"")
		}
		port = v
	}
	switch protocol {
	case "HTTP", "HTTPS":
		if path == "" {
			path = "/"
		}
		if s := a[annotationHCPath]; s != "" {
			path = s
		}
	default:
		path = ""
	}
	hc := healthCheck{Target: protocol + ":" + strconv.Itoa(port) + path, Interval: 10, Timeout: 5, Unhealthy: 6, HealthyCount: 2}
	err := intAnnotations(a, []intAnnotation{{annotationHCHealthy, &hc.HealthyCount}, {annotationHCUnhealthy, &hc.Unhealthy},
		{annotationHCTimeout, &hc.Timeout}, {annotationHCInterval, &hc.Interval}})
	return hc, err
}

// sourceRanges are the Service's loadBalancerSourceRanges, else its
// source-ranges annotation, else everyone.
func sourceRanges(svc *abi.Service) ([]string, error) {
	ranges := svc.LoadBalancerSourceRanges
	if len(ranges) == 0 {
		ranges = commaList(svc.Annotations[annotationSourceRanges])
	}
	if len(ranges) == 0 {
		return []string{"0.0.0.0/0"}, nil
	}
	out := make([]string, 0, len(ranges))
	for _, r := range ranges {
		r = strings.TrimSpace(r)
		if !validCIDR(r) {
			return nil, errors.New("aws: source range " + strconv.Quote(r) + " is not an IPv4 CIDR")
		}
		out = append(out, r)
	}
	return out, nil
}

// validCIDR checks an IPv4 CIDR: a dotted quad and a prefix length.
func validCIDR(s string) bool {
	addr, bits, ok := strings.Cut(s, "/")
	if n, err := strconv.Atoi(bits); !ok || err != nil || n < 0 || n > 32 {
		return false
	}
	parts := strings.Split(addr, ".")
	for _, part := range parts {
		if n, err := strconv.Atoi(part); err != nil || n < 0 || n > 255 || len(part) > 3 {
			return false
		}
	}
	return len(parts) == 4
}

func commaList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// keyValues reads "k1=v1,k2=v2,k3" as the official CCM does.
func keyValues(s string) map[string]string {
	out := map[string]string{}
	for _, part := range commaList(s) {
		k, v, _ := strings.Cut(part, "=")
		if k = strings.TrimSpace(k); k != "" {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// describeLoadBalancer returns the named load balancer, nil when the API
// answers LoadBalancerNotFound (its only proof of absence).
func (p *Provider) describeLoadBalancer(ctx context.Context, name string) (*loadBalancer, error) {
	result, err := p.elb.result(ctx, "describing load balancer "+name, "DescribeLoadBalancers", url.Values{"LoadBalancerNames.member.1": {name}})
	var e *apiError
	if errors.As(err, &e) && e.status == 400 && e.code == "LoadBalancerNotFound" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, d := range result.Items("LoadBalancerDescriptions") {
		if d.TextOf("LoadBalancerName") != name {
			continue
		}
		lb := &loadBalancer{Name: name, DNSName: d.TextOf("DNSName"), Scheme: d.TextOf("Scheme"), VpcID: d.TextOf("VPCId"),
			Subnets: texts(d.Items("Subnets")), SecurityGroups: texts(d.Items("SecurityGroups"))}
		for _, l := range d.Items("ListenerDescriptions") {
			l = l.Child("Listener")
			port, _ := strconv.Atoi(l.TextOf("LoadBalancerPort"))
			instancePort, _ := strconv.Atoi(l.TextOf("InstancePort"))
			lb.Listeners = append(lb.Listeners, listener{Protocol: strings.ToUpper(l.TextOf("Protocol")),
				InstanceProtocol: strings.ToUpper(l.TextOf("InstanceProtocol")), Port: port, InstancePort: instancePort})
		}
		for _, in := range d.Items("Instances") {
			lb.Instances = append(lb.Instances, in.TextOf("InstanceId"))
		}
		hc := d.Child("HealthCheck")
		lb.HealthCheck.Target = hc.TextOf("Target")
		lb.HealthCheck.Interval, _ = strconv.Atoi(hc.TextOf("Interval"))
		lb.HealthCheck.Timeout, _ = strconv.Atoi(hc.TextOf("Timeout"))
		lb.HealthCheck.Unhealthy, _ = strconv.Atoi(hc.TextOf("UnhealthyThreshold"))
		lb.HealthCheck.HealthyCount, _ = strconv.Atoi(hc.TextOf("HealthyThreshold"))
		return lb, nil
	}
	return nil, errors.New("aws: describing load balancer " + name + ": the answer does not describe it")
}

func texts(list []*xmltree.Element) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, e.Text)
	}
	return out
}

func status(lb *loadBalancer) *abi.LoadBalancerStatus {
	if lb.DNSName == "" {
		return &abi.LoadBalancerStatus{}
	}
	return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{Hostname: lb.DNSName}}}
}

// GetLoadBalancer reports the Service's ELB; it is absent only when the
// API says LoadBalancerNotFound.
func (p *Provider) GetLoadBalancer(ctx context.Context, _ string, svc *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	if external(svc) {
		return nil, false, nil
	}
	if isNLB(svc) {
		lb, err := p.describeNLB(ctx, p.GetLoadBalancerName(ctx, "", svc))
		if err != nil || lb == nil {
			return nil, false, err
		}
		return nlbStatus(lb), true, nil
	}
	lb, err := p.describeLoadBalancer(ctx, p.GetLoadBalancerName(ctx, "", svc))
	if err != nil || lb == nil {
		return nil, false, err
	}
	return status(lb), true, nil
}

// EnsureLoadBalancer makes or updates the Service's ELB in the official
// CCM's order: its security group and rules, the ELB (subnets, groups,
// listeners, tags), its attributes and health check, the Nodes' groups'
// ingress from it, and the Nodes' instances registered.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, _ string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	if external(svc) {
		return nil, sdk.ErrImplementedElsewhere
	}
	if isNLB(svc) {
		return p.ensureNLB(ctx, svc, nodes)
	}
	spec, err := p.specOf(svc)
	if err != nil {
		return nil, err
	}
	instances, err := p.nodeInstances(ctx, nodes)
	if err != nil {
		return nil, err
	}
	lb, err := p.describeLoadBalancer(ctx, spec.name)
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
	subnets, err := p.elbSubnets(ctx, vpc, spec.internal)
	if err != nil {
		return nil, err
	}
	groups, err := p.elbSecurityGroups(ctx, vpc, spec)
	if err != nil {
		return nil, err
	}
	if lb, err = p.syncLoadBalancer(ctx, lb, spec, subnets, groups); err != nil {
		return nil, err
	}
	if err := p.syncHealthCheck(ctx, lb, spec.healthCheck); err != nil {
		return nil, err
	}
	if err := p.syncInstanceGroups(ctx, lb, instances, false); err != nil {
		return nil, err
	}
	if err := p.syncInstances(ctx, lb, instances); err != nil {
		return nil, err
	}
	return status(lb), nil
}

// UpdateLoadBalancer keeps the ELB's instances and the Nodes' ingress in
// step with the Nodes.
func (p *Provider) UpdateLoadBalancer(ctx context.Context, _ string, svc *abi.Service, nodes []abi.Node) error {
	if external(svc) {
		return sdk.ErrImplementedElsewhere
	}
	if isNLB(svc) {
		// As the official CCM: the whole NLB brought in step.
		name := p.GetLoadBalancerName(ctx, "", svc)
		lb, err := p.describeNLB(ctx, name)
		if err == nil && lb == nil {
			err = errors.New("aws: network load balancer " + name + " not found")
		}
		if err == nil {
			_, err = p.ensureNLB(ctx, svc, nodes)
		}
		return err
	}
	instances, err := p.nodeInstances(ctx, nodes)
	if err != nil {
		return err
	}
	name := p.GetLoadBalancerName(ctx, "", svc)
	lb, err := p.describeLoadBalancer(ctx, name)
	if err != nil {
		return err
	}
	if lb == nil {
		return errors.New("aws: load balancer " + name + " not found")
	}
	if err := p.syncInstances(ctx, lb, instances); err != nil {
		return err
	}
	return p.syncInstanceGroups(ctx, lb, instances, false)
}

// EnsureLoadBalancerDeleted removes whatever was made for the Service,
// whichever type its annotation now asks for (it may have changed, and
// the orphan sweep knows none): the Classic ELB with what was made for it,
// then the NLB with its target groups and rules (deleteNLB).
func (p *Provider) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *abi.Service) error {
	if external(svc) {
		return nil
	}
	if err := p.deleteClassic(ctx, svc); err != nil {
		return err
	}
	return p.deleteNLB(ctx, svc)
}

// deleteClassic removes the ELB, the Nodes' ingress from it and the
// security groups made for it, with every rule that lets them in
// elsewhere. A group the API still finds in use (ELB releases its
// interfaces a little after the ELB is deleted) makes the call fail with
// a retry delay: the next call, finding the ELB gone, deletes the group by
// its name, so nothing is left behind.
func (p *Provider) deleteClassic(ctx context.Context, svc *abi.Service) error {
	name := p.GetLoadBalancerName(ctx, "", svc)
	lb, err := p.describeLoadBalancer(ctx, name)
	if err != nil {
		return err
	}
	keep := map[string]bool{p.cfg.ELBSecurityGroup: true}
	for _, g := range append(commaList(svc.Annotations[annotationGroups]), commaList(svc.Annotations[annotationExtraGroups])...) {
		keep[g] = true
	}
	var owned []string
	if lb != nil {
		tagged, err := p.describeGroups(ctx, "reading load balancer "+name+"'s security groups", anyOf("group-id", lb.SecurityGroups))
		if err != nil {
			return err
		}
		for _, g := range tagged {
			if _, ours := g.Tags[p.clusterTag]; ours && !keep[g.ID] {
				owned = append(owned, g.ID)
			}
		}
		if err := p.syncInstanceGroups(ctx, lb, nil, len(owned) > 0); err != nil {
			return err
		}
		if _, err := p.elb.result(ctx, "deleting load balancer "+name, "DeleteLoadBalancer", url.Values{"LoadBalancerName": {name}}); err != nil {
			return err
		}
	}
	// The group made for the ELB, found by its name: after an earlier call
	// that deleted the ELB but not the group, or when annotated groups
	// replaced it on the ELB.
	named, err := p.groupsNamed(ctx, elbGroupName(name))
	if err != nil {
		return err
	}
	for _, id := range named {
		if !keep[id] && !slices.Contains(owned, id) {
			owned = append(owned, id)
		}
	}
	for _, id := range owned {
		if err := p.revokeReferences(ctx, id); err != nil {
			return err
		}
		if err := p.deleteGroup(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// syncLoadBalancer creates the ELB or brings an existing one's subnets,
// security groups, listeners, tags and attributes to the spec, and
// returns it as the API describes it: described again only when the
// description changed (tags and attributes are not part of it).
func (p *Provider) syncLoadBalancer(ctx context.Context, lb *loadBalancer, spec *lbSpec, subnets, groups []string) (*loadBalancer, error) {
	name := spec.name
	what := "load balancer " + name
	changed := lb == nil
	if lb == nil {
		params := url.Values{"LoadBalancerName": {name}}
		if spec.internal {
			params.Set("Scheme", "internal")
		}
		setListeners(params, spec.listeners)
		list(params, "Subnets.member", subnets)
		list(params, "SecurityGroups.member", groups)
		tags := map[string]string{serviceNameTag: spec.service, p.clusterTag: "owned", ServiceUIDTag: spec.uid}
		for k, v := range spec.tags {
			tags[k] = v
		}
		setTags(params, "Tags.member", tags)
		p.logf(abi.LogInfo, "creating "+what+" for Service "+spec.service)
		if _, err := p.elb.result(ctx, "creating "+what, "CreateLoadBalancer", params); err != nil {
			return nil, err
		}
	} else {
		add, remove := diff(subnets, lb.Subnets)
		changed = len(add)+len(remove) > 0
		if len(remove) > 0 {
			if _, err := p.elb.result(ctx, "detaching "+what+" from subnets", "DetachLoadBalancerFromSubnets",
				list(url.Values{"LoadBalancerName": {name}}, "Subnets.member", remove)); err != nil {
				return nil, err
			}
		}
		if len(add) > 0 {
			if _, err := p.elb.result(ctx, "attaching "+what+" to subnets", "AttachLoadBalancerToSubnets",
				list(url.Values{"LoadBalancerName": {name}}, "Subnets.member", add)); err != nil {
				return nil, err
			}
		}
		if add, remove := diff(groups, lb.SecurityGroups); len(add)+len(remove) > 0 {
			changed = true
			if _, err := p.elb.result(ctx, "applying security groups to "+what, "ApplySecurityGroupsToLoadBalancer",
				list(url.Values{"LoadBalancerName": {name}}, "SecurityGroups.member", groups)); err != nil {
				return nil, err
			}
		}
		listenersChanged, err := p.syncListeners(ctx, lb, spec.listeners)
		if err != nil {
			return nil, err
		}
		changed = changed || listenersChanged
		if len(spec.tags) > 0 {
			params := url.Values{"LoadBalancerNames.member.1": {name}}
			setTags(params, "Tags.member", spec.tags)
			if _, err := p.elb.result(ctx, "tagging "+what, "AddTags", params); err != nil {
				return nil, err
			}
		}
	}
	if err := p.syncAttributes(ctx, name, spec); err != nil {
		return nil, err
	}
	if !changed {
		return lb, nil
	}
	lb, err := p.describeLoadBalancer(ctx, name)
	if err == nil && lb == nil {
		err = errors.New("aws: " + what + " is not described after it was made (eventual consistency); tried again later")
	}
	return lb, err
}

func setListeners(params url.Values, listeners []listener) {
	for i, l := range listeners {
		prefix := "Listeners.member." + strconv.Itoa(i+1) + "."
		params.Set(prefix+"Protocol", strings.ToLower(l.Protocol))
		params.Set(prefix+"LoadBalancerPort", strconv.Itoa(l.Port))
		params.Set(prefix+"InstanceProtocol", strings.ToLower(l.InstanceProtocol))
		params.Set(prefix+"InstancePort", strconv.Itoa(l.InstancePort))
	}
}

// setTags writes tags in key order, so that requests are reproducible.
func setTags(params url.Values, prefix string, tags map[string]string) {
	for i, k := range slices.Sorted(maps.Keys(tags)) {
		n := prefix + "." + strconv.Itoa(i+1) + "."
		params.Set(n+"Key", k)
		params.Set(n+"Value", tags[k])
	}
}

// diff returns what want has that have lacks, and what have has that
// want lacks, each sorted.
func diff(want, have []string) (add, remove []string) {
	for _, x := range want {
		if !slices.Contains(have, x) && !slices.Contains(add, x) {
			add = append(add, x)
		}
	}
	for _, x := range have {
		if !slices.Contains(want, x) && !slices.Contains(remove, x) {
			remove = append(remove, x)
		}
	}
	slices.Sort(add)
	slices.Sort(remove)
	return add, remove
}

// syncListeners deletes the listeners the spec does not have (by port)
// and creates the ones the ELB lacks, and reports whether it did.
func (p *Provider) syncListeners(ctx context.Context, lb *loadBalancer, want []listener) (changed bool, err error) {
	var add []listener
	var remove []string
	for _, l := range lb.Listeners {
		if !slices.Contains(want, l) {
			remove = append(remove, strconv.Itoa(l.Port))
		}
	}
	for _, w := range want {
		if !slices.Contains(lb.Listeners, w) {
			add = append(add, w)
		}
	}
	if len(remove) > 0 {
		if _, err := p.elb.result(ctx, "deleting listeners of load balancer "+lb.Name, "DeleteLoadBalancerListeners",
			list(url.Values{"LoadBalancerName": {lb.Name}}, "LoadBalancerPorts.member", remove)); err != nil {
			return false, err
		}
	}
	if len(add) > 0 {
		params := url.Values{"LoadBalancerName": {lb.Name}}
		setListeners(params, add)
		if _, err := p.elb.result(ctx, "creating listeners of load balancer "+lb.Name, "CreateLoadBalancerListeners", params); err != nil {
			return false, err
		}
	}
	return len(add)+len(remove) > 0, nil
}

// syncAttributes sets the attributes the official CCM sets when they
// differ from the ELB's.
func (p *Provider) syncAttributes(ctx context.Context, name string, spec *lbSpec) error {
	result, err := p.elb.result(ctx, "reading load balancer "+name+"'s attributes", "DescribeLoadBalancerAttributes", url.Values{"LoadBalancerName": {name}})
	if err != nil {
		return err
	}
	a := result.Child("LoadBalancerAttributes")
	var have attributes
	have.CrossZone = a.Child("CrossZoneLoadBalancing").TextOf("Enabled") == "true"
	have.AccessLog = a.Child("AccessLog").TextOf("Enabled") == "true"
	have.Draining = a.Child("ConnectionDraining").TextOf("Enabled") == "true"
	have.DrainingTimeout, _ = strconv.Atoi(a.Child("ConnectionDraining").TextOf("Timeout"))
	have.IdleTimeout, _ = strconv.Atoi(a.Child("ConnectionSettings").TextOf("IdleTimeout"))
	want := spec.attributes
	if !spec.drainTimeout {
		want.DrainingTimeout = have.DrainingTimeout
	}
	if have == want {
		return nil
	}
	params := url.Values{"LoadBalancerName": {name},
		"LoadBalancerAttributes.CrossZoneLoadBalancing.Enabled": {strconv.FormatBool(want.CrossZone)},
		"LoadBalancerAttributes.AccessLog.Enabled":              {strconv.FormatBool(want.AccessLog)},
		"LoadBalancerAttributes.ConnectionDraining.Enabled":     {strconv.FormatBool(want.Draining)},
		"LoadBalancerAttributes.ConnectionSettings.IdleTimeout": {strconv.Itoa(want.IdleTimeout)}}
	if spec.drainTimeout {
		params.Set("LoadBalancerAttributes.ConnectionDraining.Timeout", strconv.Itoa(want.DrainingTimeout))
	}
	_, err = p.elb.result(ctx, "setting load balancer "+name+"'s attributes", "ModifyLoadBalancerAttributes", params)
	return err
}

func (p *Provider) syncHealthCheck(ctx context.Context, lb *loadBalancer, want healthCheck) error {
	if lb.HealthCheck == want {
		return nil
	}
	_, err := p.elb.result(ctx, "configuring load balancer "+lb.Name+"'s health check", "ConfigureHealthCheck", url.Values{
		"LoadBalancerName": {lb.Name}, "HealthCheck.Target": {want.Target}, "HealthCheck.Interval": {strconv.Itoa(want.Interval)},
		"HealthCheck.Timeout": {strconv.Itoa(want.Timeout)}, "HealthCheck.UnhealthyThreshold": {strconv.Itoa(want.Unhealthy)},
		"HealthCheck.HealthyThreshold": {strconv.Itoa(want.HealthyCount)}})
	return err
}

// vpcOf is the VPC load balancer name goes in: the one it is in already
// (existing), else the provider config's, else the first Node's.
func (p *Provider) vpcOf(name, existing string, instances []instance) (string, error) {
	vpc := existing
	if vpc == "" {
		vpc = p.cfg.VpcID
	}
	for i := 0; vpc == "" && i < len(instances); i++ {
		vpc = instances[i].VpcID
	}
	if vpc == "" {
		return "", errors.New("aws: no VPC to put load balancer " + name + " in: set vpcID in the provider config, or wait for Nodes with instances")
	}
	return vpc, nil
}

// nodeInstances describes the Nodes' instances by their provider IDs, as
// one filtered listing (a filter, unlike a list of IDs, does not fail on
// an ID the API does not know). Nodes without a provider ID, or whose
// instance is missing or terminated, are left out, as the official CCM
// leaves them out.
func (p *Provider) nodeInstances(ctx context.Context, nodes []abi.Node) ([]instance, error) {
	var ids []string
	for _, node := range nodes {
		if node.ProviderID == "" {
			continue
		}
		id, err := instanceID(node.ProviderID)
		if err != nil {
			p.logf(abi.LogWarning, "Node "+node.Name+" is left out of load balancers: "+err.Error())
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	all, err := p.describeInstances(ctx, "describing the Nodes' instances", anyOf("instance-id", ids))
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, in := range all {
		if in.State != "terminated" {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// syncInstances registers the instances the ELB lacks and deregisters
// the ones that are no longer Nodes.
func (p *Provider) syncInstances(ctx context.Context, lb *loadBalancer, instances []instance) error {
	want := make([]string, 0, len(instances))
	for _, in := range instances {
		want = append(want, in.ID)
	}
	add, remove := diff(want, lb.Instances)
	if len(add) > 0 {
		if _, err := p.elb.result(ctx, "registering instances with load balancer "+lb.Name, "RegisterInstancesWithLoadBalancer",
			instanceList(lb.Name, add)); err != nil {
			return err
		}
	}
	if len(remove) > 0 {
		if _, err := p.elb.result(ctx, "deregistering instances from load balancer "+lb.Name, "DeregisterInstancesFromLoadBalancer",
			instanceList(lb.Name, remove)); err != nil {
			return err
		}
	}
	return nil
}

func instanceList(name string, ids []string) url.Values {
	params := url.Values{"LoadBalancerName": {name}}
	for i, id := range ids {
		params.Set("Instances.member."+strconv.Itoa(i+1)+".InstanceId", id)
	}
	return params
}

// elbSubnets picks one subnet per zone of the VPC, as the official CCM
// does: subnets tagged for this cluster or for no cluster; public ones
// (routed to an internet gateway) for an internet-facing ELB; in a zone
// with several, the one with the role tag, then the one with the cluster
// tag, then the lowest ID. Zones are in name order.
func (p *Provider) elbSubnets(ctx context.Context, vpc string, internal bool) ([]string, error) {
	type subnet struct {
		ID, Zone string
		Tags     map[string]string
	}
	var subnets []subnet
	err := p.ec2.each(ctx, "listing the VPC's subnets", "DescribeSubnets", filters(url.Values{}, "vpc-id", vpc), func(page *xmltree.Element) {
		for _, s := range page.Items("subnetSet") {
			subnets = append(subnets, subnet{ID: s.TextOf("subnetId"), Zone: s.TextOf("availabilityZone"), Tags: tagsOf(s)})
		}
	})
	if err != nil {
		return nil, err
	}
	public, err := p.publicSubnets(ctx, vpc)
	if err != nil {
		return nil, err
	}
	roleTag := "kubernetes.io/role/elb"
	if internal {
		roleTag = "kubernetes.io/role/internal-elb"
	}
	better := func(a, b subnet) bool {
		_, aRole := a.Tags[roleTag]
		_, bRole := b.Tags[roleTag]
		if aRole != bRole {
			return aRole
		}
		_, aCluster := a.Tags[p.clusterTag]
		_, bCluster := b.Tags[p.clusterTag]
		if aCluster != bCluster {
			return aCluster
		}
		return a.ID < b.ID
	}
	byZone := map[string]subnet{}
	for _, s := range subnets {
		if s.ID == "" || s.Zone == "" || !p.mayUse(s.Tags) || !internal && !public(s.ID) {
			continue
		}
		if have, ok := byZone[s.Zone]; !ok || better(s, have) {
			byZone[s.Zone] = s
		}
	}
	zones := make([]string, 0, len(byZone))
	for z := range byZone {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	ids := make([]string, 0, len(zones))
	for _, z := range zones {
		ids = append(ids, byZone[z].ID)
	}
	if len(ids) == 0 {
		kind := "public "
		if internal {
			kind = ""
		}
		return nil, errors.New("aws: VPC " + vpc + " has no " + kind + "subnet tagged for cluster " + p.cfg.ClusterID + " or for no cluster to put a load balancer in")
	}
	return ids, nil
}

// mayUse reports a resource tagged for this cluster or for none.
func (p *Provider) mayUse(tags map[string]string) bool {
	if _, ok := tags[p.clusterTag]; ok {
		return true
	}
	for k := range tags {
		if strings.HasPrefix(k, clusterTagPrefix) {
			return false
		}
	}
	return true
}

// publicSubnets returns a test for subnets routed to an internet gateway
// by their route table, or by the VPC's main table when they have none.
func (p *Provider) publicSubnets(ctx context.Context, vpc string) (func(subnet string) bool, error) {
	explicit := map[string]bool{} // subnet → its table has an internet gateway
	mainPublic := false
	err := p.ec2.each(ctx, "listing the VPC's route tables", "DescribeRouteTables", filters(url.Values{}, "vpc-id", vpc), func(page *xmltree.Element) {
		for _, t := range page.Items("routeTableSet") {
			gateway := false
			for _, r := range t.Items("routeSet") {
				gateway = gateway || strings.HasPrefix(r.TextOf("gatewayId"), "igw")
			}
			for _, a := range t.Items("associationSet") {
				if a.TextOf("main") == "true" {
					mainPublic = gateway
				} else if s := a.TextOf("subnetId"); s != "" {
					explicit[s] = gateway
				}
			}
		}
	})
	return func(subnet string) bool {
		if gateway, ok := explicit[subnet]; ok {
			return gateway
		}
		return mainPublic
	}, err
}

func tagsOf(e *xmltree.Element) map[string]string {
	tags := map[string]string{}
	for _, t := range e.Items("tagSet") {
		tags[t.TextOf("key")] = t.TextOf("value")
	}
	return tags
}
