package awsfake

import (
	"cmp"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Elastic Load Balancing version 2 (2015-12-01), network load balancers
// only: load balancers, target groups of instances, listeners forwarding
// to one target group, attributes and tags.

// NetworkLoadBalancer is an ELBv2 load balancer of type network.
type NetworkLoadBalancer struct {
	ARN, Name, DNSName, Scheme, VpcID string
	// Subnets and Zones are parallel: one subnet per zone.
	Subnets, Zones []string
	SecurityGroups []string
	Tags           map[string]string
	Attributes     map[string]string
	Created        time.Time
}

// TargetGroup is an ELBv2 target group of instances.
type TargetGroup struct {
	ARN, Name, Protocol, VpcID, TargetType string
	Port                                   int
	HealthCheck                            TargetGroupHealthCheck
	Targets                                []Target
	Tags                                   map[string]string
}

// TargetGroupHealthCheck is a target group's health check. Port is a
// number or "traffic-port"; Path is empty for TCP.
type TargetGroupHealthCheck struct {
	Protocol, Port, Path                  string
	Interval, Timeout, Healthy, Unhealthy int
}

// Target is a registered instance and the port traffic goes to.
type Target struct {
	ID   string
	Port int
}

// NetworkListener is a listener of a network load balancer forwarding to
// one target group.
type NetworkListener struct {
	ARN, LoadBalancerARN, Protocol, TargetGroupARN string
	Port                                           int
	Tags                                           map[string]string
}

var elbv2Actions = map[string]func(*call) (any, *apiError){
	"CreateLoadBalancer":             (*call).v2CreateLoadBalancer,
	"DescribeLoadBalancers":          (*call).v2DescribeLoadBalancers,
	"DeleteLoadBalancer":             (*call).v2DeleteLoadBalancer,
	"DescribeLoadBalancerAttributes": (*call).v2DescribeAttributes,
	"ModifyLoadBalancerAttributes":   (*call).v2ModifyAttributes,
	"CreateTargetGroup":              (*call).v2CreateTargetGroup,
	"DescribeTargetGroups":           (*call).v2DescribeTargetGroups,
	"ModifyTargetGroup":              (*call).v2ModifyTargetGroup,
	"DeleteTargetGroup":              (*call).v2DeleteTargetGroup,
	"RegisterTargets":                (*call).v2RegisterTargets,
	"DeregisterTargets":              (*call).v2DeregisterTargets,
	"DescribeTargetHealth":           (*call).v2DescribeTargetHealth,
	"CreateListener":                 (*call).v2CreateListener,
	"DescribeListeners":              (*call).v2DescribeListeners,
	"ModifyListener":                 (*call).v2ModifyListener,
	"DeleteListener":                 (*call).v2DeleteListener,
	"AddTags":                        (*call).v2AddTags,
	"RemoveTags":                     (*call).v2RemoveTags,
	"DescribeTags":                   (*call).v2DescribeTags,
}

func (cl *call) v2(action string, result any) elbResponse {
	r := cl.elb(action, result)
	r.NS = elbv2NS
	return r
}

func (c *Cloud) arn(kind, name string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%d", kind, name, c.seq)
	c.seq++
	return fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:%s/%s/%016x", c.opts.Region, AccountID, kind, name, h.Sum64())
}

// v2Name checks an ELBv2 name: 1-32 letters, digits and hyphens, neither
// first nor last a hyphen, not starting "internal-".
func v2Name(name string) *apiError {
	if name == "" || len(name) > 32 || !lbNameRE.MatchString(name) || strings.HasPrefix(name, "internal-") {
		return validation("The name '%s' must have 1 to 32 characters, letters, digits and hyphens, and must not begin or end with a hyphen or begin with 'internal-'", name)
	}
	return nil
}

func v2LBNotFound() *apiError {
	return badRequest("LoadBalancerNotFound", "One or more load balancers not found")
}

func v2TGNotFound() *apiError {
	return badRequest("TargetGroupNotFound", "One or more target groups not found")
}

func (cl *call) v2LoadBalancer() (*NetworkLoadBalancer, *apiError) {
	return namedObject(cl, "LoadBalancerArn", cl.c.nlbs, v2LBNotFound)
}

func (cl *call) v2TargetGroup() (*TargetGroup, *apiError) {
	return namedObject(cl, "TargetGroupArn", cl.c.targetGroups, v2TGNotFound)
}

// namedObject is the object of objects whose ARN the request's required
// parameter param names.
func namedObject[T any](cl *call, param string, objects map[string]*T, notFound func() *apiError) (*T, *apiError) {
	arn, err := cl.required(param)
	if err != nil {
		return nil, validation("%s is required", param)
	}
	if o := objects[arn]; o != nil {
		return o, nil
	}
	return nil, notFound()
}

type xmlV2Tag struct{ Key, Value string }

func v2Tags(tags map[string]string) []xmlV2Tag {
	var out []xmlV2Tag
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlV2Tag{k, tags[k]})
	}
	return out
}

type xmlNLB struct {
	LoadBalancerArn       string
	DNSName               string
	CanonicalHostedZoneId string
	CreatedTime           string
	LoadBalancerName      string
	Scheme                string
	VpcId                 string
	State                 struct{ Code string }
	Type                  string
	AvailabilityZones     []struct{ ZoneName, SubnetId string } `xml:"AvailabilityZones>member"`
	SecurityGroups        []string                              `xml:"SecurityGroups>member"`
	IpAddressType         string
}

func nlbXML(lb *NetworkLoadBalancer) xmlNLB {
	x := xmlNLB{LoadBalancerArn: lb.ARN, DNSName: lb.DNSName, CanonicalHostedZoneId: "Z26RNL4JYFTOTI",
		CreatedTime: lb.Created.Format("2006-01-02T15:04:05.000Z"), LoadBalancerName: lb.Name, Scheme: lb.Scheme,
		VpcId: lb.VpcID, Type: "network", SecurityGroups: lb.SecurityGroups, IpAddressType: "ipv4"}
	x.State.Code = "active"
	for i, s := range lb.Subnets {
		x.AvailabilityZones = append(x.AvailabilityZones, struct{ ZoneName, SubnetId string }{lb.Zones[i], s})
	}
	return x
}

func (cl *call) v2CreateLoadBalancer() (any, *apiError) {
	c := cl.c
	name := cl.get("Name")
	if err := v2Name(name); err != nil {
		return nil, err
	}
	if t := cmp.Or(cl.get("Type"), "application"); t != "network" {
		return nil, validation("Load balancer type '%s' is not supported by this fake; only 'network'", t)
	}
	scheme := cmp.Or(cl.get("Scheme"), "internet-facing")
	if scheme != "internet-facing" && scheme != "internal" {
		return nil, validation("Invalid scheme '%s'", scheme)
	}
	subnets := cl.list("Subnets")
	for _, p := range cl.structs("SubnetMappings") {
		if cl.get(p+"AllocationId") != "" || cl.get(p+"PrivateIPv4Address") != "" {
			return nil, validation("SubnetMappings with addresses are not supported by this fake")
		}
		subnets = append(subnets, cl.get(p+"SubnetId"))
	}
	if len(subnets) == 0 {
		return nil, validation("At least one subnet must be specified")
	}
	lb := &NetworkLoadBalancer{Name: name, Scheme: scheme, Tags: cl.tags("Tags"), Created: time.Now().UTC().Truncate(time.Millisecond),
		Attributes: map[string]string{"deletion_protection.enabled": "false", "load_balancing.cross_zone.enabled": "false",
			"access_logs.s3.enabled": "false", "access_logs.s3.bucket": "", "access_logs.s3.prefix": ""}}
	for _, id := range subnets {
		s := c.subnets[id]
		if s == nil {
			return nil, badRequest("SubnetNotFound", "The subnet ID '%s' is not valid", id)
		}
		if lb.VpcID != "" && s.VpcID != lb.VpcID {
			return nil, badRequest("InvalidSubnet", "Subnets must be in the same VPC")
		}
		if slices.Contains(lb.Zones, s.Zone) {
			return nil, badRequest("InvalidConfigurationRequest", "A load balancer cannot be attached to multiple subnets in the same Availability Zone")
		}
		lb.VpcID = s.VpcID
		lb.Subnets = append(lb.Subnets, id)
		lb.Zones = append(lb.Zones, s.Zone)
	}
	lb.SecurityGroups = cl.list("SecurityGroups")
	for _, g := range lb.SecurityGroups {
		if sg := c.securityGroups[g]; sg == nil || sg.VpcID != lb.VpcID {
			return nil, badRequest("InvalidSecurityGroup", "Security group '%s' does not exist", g)
		}
	}
	for _, have := range c.nlbs {
		if have.Name != name {
			continue
		}
		// Creating again with the same settings answers the existing
		// load balancer, as ELBv2 does.
		if have.Scheme == scheme && slices.Equal(have.Subnets, lb.Subnets) {
			return cl.v2("CreateLoadBalancer", loadBalancersResult("CreateLoadBalancer", []*NetworkLoadBalancer{have})), nil
		}
		return nil, badRequest("DuplicateLoadBalancerName", "A load balancer with the same name '%s' exists, but with different settings", name)
	}
	if len(lb.Tags) > 50 {
		return nil, badRequest("TooManyTags", "Too many tags")
	}
	lb.ARN = c.arn("loadbalancer/net", name)
	id := lb.ARN[strings.LastIndex(lb.ARN, "/")+1:]
	lb.DNSName = fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", name, id, c.opts.Region)
	c.nlbs[lb.ARN] = lb
	return cl.v2("CreateLoadBalancer", loadBalancersResult("CreateLoadBalancer", []*NetworkLoadBalancer{lb})), nil
}

func loadBalancersResult(action string, lbs []*NetworkLoadBalancer) any {
	result := struct {
		XMLName       xml.Name
		LoadBalancers []xmlNLB `xml:"LoadBalancers>member"`
	}{XMLName: resultName(action)}
	for _, lb := range lbs {
		result.LoadBalancers = append(result.LoadBalancers, nlbXML(lb))
	}
	return result
}

// page cuts a listing at Marker and PageSize (1-400), as every ELBv2
// Describe does; the marker is the offset, encoded.
func page[T any](cl *call, list []T) ([]T, string, *apiError) {
	size, err := cl.intParam("PageSize", cmp.Or(cl.c.opts.PageSize, 400))
	if err != nil {
		return nil, "", err
	}
	if size < 1 || size > 400 {
		return nil, "", validation("PageSize must be between 1 and 400")
	}
	start := 0
	if m := cl.get("Marker"); m != "" {
		b, derr := base64.StdEncoding.DecodeString(m)
		n, aerr := strconv.Atoi(string(b))
		if derr != nil || aerr != nil || n < 0 || n > len(list) {
			return nil, "", validation("Invalid Marker")
		}
		start = n
	}
	end := min(start+size, len(list))
	next := ""
	if end < len(list) {
		next = base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return list[start:end], next, nil
}

// byARN orders a map's values by ARN, each kept when keep says so.
func byARN[V any](m map[string]*V, keep func(*V) bool) []*V {
	var out []*V
	for _, k := range sortedKeys(m) {
		if keep(m[k]) {
			out = append(out, m[k])
		}
	}
	return out
}

// v2DescribeLoadBalancers serves LoadBalancerArns or Names (every one must
// exist), else every load balancer, paged.
func (cl *call) v2DescribeLoadBalancers() (any, *apiError) {
	c := cl.c
	arns, names := cl.list("LoadBalancerArns"), cl.list("Names")
	if len(arns) > 0 && len(names) > 0 {
		return nil, validation("LoadBalancerArns and Names cannot be used together")
	}
	list := byARN(c.nlbs, func(lb *NetworkLoadBalancer) bool {
		return (len(arns) == 0 || slices.Contains(arns, lb.ARN)) && (len(names) == 0 || slices.Contains(names, lb.Name))
	})
	if n := len(arns) + len(names); n > 0 && len(list) < n {
		return nil, v2LBNotFound()
	}
	pg, next, err := page(cl, list)
	if err != nil {
		return nil, err
	}
	result := struct {
		XMLName       xml.Name
		LoadBalancers []xmlNLB `xml:"LoadBalancers>member"`
		NextMarker    string   `xml:",omitempty"`
	}{XMLName: resultName("DescribeLoadBalancers"), NextMarker: next}
	for _, lb := range pg {
		result.LoadBalancers = append(result.LoadBalancers, nlbXML(lb))
	}
	return cl.v2("DescribeLoadBalancers", result), nil
}

// v2DeleteLoadBalancer deletes the load balancer and its listeners; a
// load balancer that does not exist is deleted already, as ELBv2 answers.
func (cl *call) v2DeleteLoadBalancer() (any, *apiError) {
	c := cl.c
	arn, err := cl.required("LoadBalancerArn")
	if err != nil {
		return nil, validation("LoadBalancerArn is required")
	}
	if lb := c.nlbs[arn]; lb != nil && lb.Attributes["deletion_protection.enabled"] == "true" {
		return nil, badRequest("OperationNotPermitted", "Load balancer '%s' cannot be deleted because deletion protection is enabled", arn)
	}
	delete(c.nlbs, arn)
	for k, l := range c.listeners {
		if l.LoadBalancerARN == arn {
			delete(c.listeners, k)
		}
	}
	return cl.v2("DeleteLoadBalancer", nil), nil
}

func attributesResult(action string, attrs map[string]string) any {
	return struct {
		XMLName    xml.Name
		Attributes []xmlV2Tag `xml:"Attributes>member"`
	}{resultName(action), v2Tags(attrs)}
}

func (cl *call) v2DescribeAttributes() (any, *apiError) {
	lb, err := cl.v2LoadBalancer()
	if err != nil {
		return nil, err
	}
	return cl.v2("DescribeLoadBalancerAttributes", attributesResult("DescribeLoadBalancerAttributes", lb.Attributes)), nil
}

func (cl *call) v2ModifyAttributes() (any, *apiError) {
	lb, err := cl.v2LoadBalancer()
	if err != nil {
		return nil, err
	}
	attrs := cl.tags("Attributes")
	if len(attrs) == 0 {
		return nil, validation("Attributes is required")
	}
	for k, v := range attrs {
		if _, ok := lb.Attributes[k]; !ok {
			return nil, badRequest("InvalidConfigurationRequest", "Load balancer attribute key '%s' is not recognized", k)
		}
		if strings.HasSuffix(k, ".enabled") && v != "true" && v != "false" {
			return nil, badRequest("InvalidConfigurationRequest", "Load balancer attribute value '%s' of '%s' must be 'true' or 'false'", v, k)
		}
	}
	next := cloneTags(lb.Attributes)
	for k, v := range attrs {
		next[k] = v
	}
	if next["access_logs.s3.enabled"] == "true" && next["access_logs.s3.bucket"] == "" {
		return nil, badRequest("InvalidConfigurationRequest", "The value of 'access_logs.s3.bucket' cannot be empty when access logs are enabled")
	}
	lb.Attributes = next
	return cl.v2("ModifyLoadBalancerAttributes", attributesResult("ModifyLoadBalancerAttributes", lb.Attributes)), nil
}

// healthCheckParams reads the health check parameters, over have.
func (cl *call) healthCheckParams(have TargetGroupHealthCheck) (TargetGroupHealthCheck, *apiError) {
	hc := have
	hc.Protocol = strings.ToUpper(cmp.Or(cl.get("HealthCheckProtocol"), hc.Protocol))
	hc.Port = cmp.Or(cl.get("HealthCheckPort"), hc.Port)
	if _, ok := cl.form["HealthCheckPath"]; ok {
		hc.Path = cl.get("HealthCheckPath")
	}
	var err *apiError
	for _, f := range []struct {
		name     string
		v        *int
		min, max int
	}{{"HealthCheckIntervalSeconds", &hc.Interval, 5, 300}, {"HealthCheckTimeoutSeconds", &hc.Timeout, 2, 120},
		{"HealthyThresholdCount", &hc.Healthy, 2, 10}, {"UnhealthyThresholdCount", &hc.Unhealthy, 2, 10}} {
		if *f.v, err = cl.intParam(f.name, *f.v); err != nil {
			return hc, err
		}
		if *f.v < f.min || *f.v > f.max {
			return hc, validation("%s must be between %d and %d", f.name, f.min, f.max)
		}
	}
	switch hc.Protocol {
	case "TCP":
		if hc.Path != "" {
			return hc, validation("A health check path cannot be set for a TCP health check")
		}
	case "HTTP", "HTTPS":
		if hc.Path == "" {
			hc.Path = "/"
		}
		if !strings.HasPrefix(hc.Path, "/") {
			return hc, validation("Health check path must begin with '/'")
		}
	default:
		return hc, validation("Health check protocol '%s' is not supported for a network target group", hc.Protocol)
	}
	if hc.Port != "traffic-port" {
		if n, aerr := strconv.Atoi(hc.Port); aerr != nil || n < 1 || n > 65535 {
			return hc, validation("Health check port '%s' must be 'traffic-port' or 1-65535", hc.Port)
		}
	}
	return hc, nil
}

type xmlTargetGroup struct {
	TargetGroupArn             string
	TargetGroupName            string
	Protocol                   string
	Port                       int
	VpcId                      string
	HealthCheckProtocol        string
	HealthCheckPort            string
	HealthCheckEnabled         bool
	HealthCheckIntervalSeconds int
	HealthCheckTimeoutSeconds  int
	HealthyThresholdCount      int
	UnhealthyThresholdCount    int
	HealthCheckPath            string   `xml:",omitempty"`
	LoadBalancerArns           []string `xml:"LoadBalancerArns>member"`
	TargetType                 string
	IpAddressType              string
}

func (c *Cloud) targetGroupXML(tg *TargetGroup) xmlTargetGroup {
	hc := tg.HealthCheck
	x := xmlTargetGroup{TargetGroupArn: tg.ARN, TargetGroupName: tg.Name, Protocol: tg.Protocol, Port: tg.Port, VpcId: tg.VpcID,
		HealthCheckProtocol: hc.Protocol, HealthCheckPort: hc.Port, HealthCheckEnabled: true, HealthCheckIntervalSeconds: hc.Interval,
		HealthCheckTimeoutSeconds: hc.Timeout, HealthyThresholdCount: hc.Healthy, UnhealthyThresholdCount: hc.Unhealthy,
		HealthCheckPath: hc.Path, TargetType: tg.TargetType, IpAddressType: "ipv4"}
	x.LoadBalancerArns = c.targetGroupLoadBalancers(tg.ARN)
	return x
}

// targetGroupLoadBalancers are the load balancers whose listeners forward
// to the target group.
func (c *Cloud) targetGroupLoadBalancers(arn string) []string {
	var out []string
	for _, l := range byARN(c.listeners, func(l *NetworkListener) bool { return l.TargetGroupARN == arn }) {
		if !slices.Contains(out, l.LoadBalancerARN) {
			out = append(out, l.LoadBalancerARN)
		}
	}
	return out
}

func targetGroupsResult(action string, c *Cloud, tgs []*TargetGroup, next string) any {
	result := struct {
		XMLName      xml.Name
		TargetGroups []xmlTargetGroup `xml:"TargetGroups>member"`
		NextMarker   string           `xml:",omitempty"`
	}{XMLName: resultName(action), NextMarker: next}
	for _, tg := range tgs {
		result.TargetGroups = append(result.TargetGroups, c.targetGroupXML(tg))
	}
	return result
}

var nlbProtocols = []string{"TCP", "UDP", "TLS", "TCP_UDP"}

func (cl *call) v2CreateTargetGroup() (any, *apiError) {
	c := cl.c
	name := cl.get("Name")
	if err := v2Name(name); err != nil {
		return nil, err
	}
	tg := &TargetGroup{Name: name, Protocol: strings.ToUpper(cl.get("Protocol")), VpcID: cl.get("VpcId"),
		TargetType: cmp.Or(cl.get("TargetType"), "instance"), Tags: cl.tags("Tags")}
	if !slices.Contains(nlbProtocols, tg.Protocol) {
		return nil, validation("Protocol '%s' is not supported by this fake; one of %s", tg.Protocol, strings.Join(nlbProtocols, ", "))
	}
	if tg.TargetType != "instance" {
		return nil, validation("Target type '%s' is not supported by this fake; only 'instance'", tg.TargetType)
	}
	var err *apiError
	if tg.Port, err = cl.intParam("Port", 0); err != nil {
		return nil, err
	}
	if tg.Port < 1 || tg.Port > 65535 {
		return nil, validation("Port must be between 1 and 65535")
	}
	if c.vpcs[tg.VpcID] == nil {
		return nil, validation("The VPC ID '%s' is not found", tg.VpcID)
	}
	// The defaults of a TCP target group of a network load balancer.
	if tg.HealthCheck, err = cl.healthCheckParams(TargetGroupHealthCheck{Protocol: "TCP", Port: "traffic-port", Interval: 30,
		Timeout: 10, Healthy: 5, Unhealthy: 2}); err != nil {
		return nil, err
	}
	for _, have := range c.targetGroups {
		if have.Name != name {
			continue
		}
		// The same name and settings answer the existing group.
		if have.Protocol == tg.Protocol && have.Port == tg.Port && have.VpcID == tg.VpcID && have.HealthCheck == tg.HealthCheck {
			return cl.v2("CreateTargetGroup", targetGroupsResult("CreateTargetGroup", c, []*TargetGroup{have}, "")), nil
		}
		return nil, badRequest("DuplicateTargetGroupName", "A target group with the same name '%s' exists, but with different settings", name)
	}
	tg.ARN = c.arn("targetgroup", name)
	c.targetGroups[tg.ARN] = tg
	return cl.v2("CreateTargetGroup", targetGroupsResult("CreateTargetGroup", c, []*TargetGroup{tg}, "")), nil
}

// v2DescribeTargetGroups serves LoadBalancerArn (the groups its listeners
// forward to), TargetGroupArns or Names (every one must exist), else
// every group, paged.
func (cl *call) v2DescribeTargetGroups() (any, *apiError) {
	c := cl.c
	lbARN, arns, names := cl.get("LoadBalancerArn"), cl.list("TargetGroupArns"), cl.list("Names")
	if lbARN != "" && c.nlbs[lbARN] == nil {
		return nil, v2LBNotFound()
	}
	list := byARN(c.targetGroups, func(tg *TargetGroup) bool {
		return (lbARN == "" || slices.Contains(c.targetGroupLoadBalancers(tg.ARN), lbARN)) &&
			(len(arns) == 0 || slices.Contains(arns, tg.ARN)) && (len(names) == 0 || slices.Contains(names, tg.Name))
	})
	if n := len(arns) + len(names); n > 0 && len(list) < n {
		return nil, v2TGNotFound()
	}
	pg, next, err := page(cl, list)
	if err != nil {
		return nil, err
	}
	return cl.v2("DescribeTargetGroups", targetGroupsResult("DescribeTargetGroups", c, pg, next)), nil
}

func (cl *call) v2ModifyTargetGroup() (any, *apiError) {
	tg, err := cl.v2TargetGroup()
	if err != nil {
		return nil, err
	}
	hc, err := cl.healthCheckParams(tg.HealthCheck)
	if err != nil {
		return nil, err
	}
	tg.HealthCheck = hc
	return cl.v2("ModifyTargetGroup", targetGroupsResult("ModifyTargetGroup", cl.c, []*TargetGroup{tg}, "")), nil
}

// v2DeleteTargetGroup refuses a group a listener forwards to; a group that
// does not exist is deleted already.
func (cl *call) v2DeleteTargetGroup() (any, *apiError) {
	c := cl.c
	arn, err := cl.required("TargetGroupArn")
	if err != nil {
		return nil, validation("TargetGroupArn is required")
	}
	if len(c.targetGroupLoadBalancers(arn)) > 0 {
		return nil, badRequest("ResourceInUse", "Target group '%s' is currently in use by a listener or a rule", arn)
	}
	delete(c.targetGroups, arn)
	return cl.v2("DeleteTargetGroup", nil), nil
}

func (cl *call) targets(tg *TargetGroup) ([]Target, *apiError) {
	var out []Target
	for _, p := range cl.structs("Targets") {
		t := Target{ID: cl.get(p + "Id")}
		var err *apiError
		if t.Port, err = cl.intParam(p+"Port", tg.Port); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, validation("Targets is required")
	}
	return out, nil
}

func (cl *call) v2RegisterTargets() (any, *apiError) {
	tg, err := cl.v2TargetGroup()
	if err != nil {
		return nil, err
	}
	targets, err := cl.targets(tg)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		in := cl.c.instances[t.ID]
		if in == nil || in.State != "running" && in.State != "stopped" && in.State != "pending" {
			return nil, badRequest("InvalidTarget", "The following targets are not in a running state and cannot be registered: '%s'", t.ID)
		}
		if in.VpcID != tg.VpcID {
			return nil, badRequest("InvalidTarget", "The following targets are not in the target group VPC '%s': '%s'", tg.VpcID, t.ID)
		}
	}
	for _, t := range targets {
		if !slices.Contains(tg.Targets, t) {
			tg.Targets = append(tg.Targets, t)
		}
	}
	return cl.v2("RegisterTargets", nil), nil
}

func (cl *call) v2DeregisterTargets() (any, *apiError) {
	tg, err := cl.v2TargetGroup()
	if err != nil {
		return nil, err
	}
	targets, err := cl.targets(tg)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if !slices.Contains(tg.Targets, t) {
			return nil, badRequest("InvalidTarget", "The following targets are not registered in target group: '%s'", t.ID)
		}
	}
	tg.Targets = slices.DeleteFunc(tg.Targets, func(t Target) bool { return slices.Contains(targets, t) })
	return cl.v2("DeregisterTargets", nil), nil
}

// v2DescribeTargetHealth describes every registered target: healthy when
// its instance runs and a load balancer uses the group, unused when none
// does, unhealthy otherwise.
func (cl *call) v2DescribeTargetHealth() (any, *apiError) {
	tg, err := cl.v2TargetGroup()
	if err != nil {
		return nil, err
	}
	type xmlTarget struct {
		ID   string `xml:"Id"`
		Port int
	}
	type desc struct {
		Target          xmlTarget
		HealthCheckPort string
		TargetHealth    struct {
			State       string
			Reason      string `xml:",omitempty"`
			Description string `xml:",omitempty"`
		}
	}
	result := struct {
		XMLName                  xml.Name
		TargetHealthDescriptions []desc `xml:"TargetHealthDescriptions>member"`
	}{XMLName: resultName("DescribeTargetHealth")}
	used := len(cl.c.targetGroupLoadBalancers(tg.ARN)) > 0
	for _, t := range tg.Targets {
		d := desc{Target: xmlTarget(t), HealthCheckPort: tg.HealthCheck.Port}
		if d.HealthCheckPort == "traffic-port" {
			d.HealthCheckPort = strconv.Itoa(t.Port)
		}
		switch in := cl.c.instances[t.ID]; {
		case !used:
			d.TargetHealth.State, d.TargetHealth.Reason = "unused", "Target.NotInUse"
		case in == nil || in.State != "running":
			d.TargetHealth.State, d.TargetHealth.Reason = "unused", "Target.InvalidState"
		default:
			d.TargetHealth.State = "healthy"
		}
		result.TargetHealthDescriptions = append(result.TargetHealthDescriptions, d)
	}
	return cl.v2("DescribeTargetHealth", result), nil
}

type xmlNetworkListener struct {
	ListenerArn     string
	LoadBalancerArn string
	Port            int
	Protocol        string
	DefaultActions  []struct{ Type, TargetGroupArn string } `xml:"DefaultActions>member"`
}

func listenerXML(l *NetworkListener) xmlNetworkListener {
	return xmlNetworkListener{ListenerArn: l.ARN, LoadBalancerArn: l.LoadBalancerARN, Port: l.Port, Protocol: l.Protocol,
		DefaultActions: []struct{ Type, TargetGroupArn string }{{"forward", l.TargetGroupARN}}}
}

func listenersResult(action string, ls []*NetworkListener, next string) any {
	result := struct {
		XMLName    xml.Name
		Listeners  []xmlNetworkListener `xml:"Listeners>member"`
		NextMarker string               `xml:",omitempty"`
	}{XMLName: resultName(action), NextMarker: next}
	for _, l := range ls {
		result.Listeners = append(result.Listeners, listenerXML(l))
	}
	return result
}

// listenerParams reads Port, Protocol and one forward default action onto
// l, and checks the target group: in the VPC, of the listener's protocol
// and used by no other load balancer.
func (cl *call) listenerParams(l *NetworkListener) *apiError {
	c := cl.c
	var err *apiError
	if l.Port, err = cl.intParam("Port", l.Port); err != nil {
		return err
	}
	if l.Port < 1 || l.Port > 65535 {
		return validation("Port must be between 1 and 65535")
	}
	l.Protocol = strings.ToUpper(cmp.Or(cl.get("Protocol"), l.Protocol))
	if !slices.Contains(nlbProtocols, l.Protocol) {
		return validation("Protocol '%s' is not supported by a network load balancer", l.Protocol)
	}
	if l.Protocol == "TLS" {
		return validation("TLS listeners are not supported by this fake")
	}
	if actions := cl.structs("DefaultActions"); len(actions) > 0 {
		if len(actions) != 1 || cl.get(actions[0]+"Type") != "forward" || cl.get(actions[0]+"TargetGroupArn") == "" {
			return validation("A network load balancer listener takes one forward action with a TargetGroupArn")
		}
		l.TargetGroupARN = cl.get(actions[0] + "TargetGroupArn")
	}
	tg := c.targetGroups[l.TargetGroupARN]
	if tg == nil {
		return v2TGNotFound()
	}
	lb := c.nlbs[l.LoadBalancerARN]
	if tg.VpcID != lb.VpcID {
		return validation("Target group '%s' is not in the load balancer's VPC", tg.ARN)
	}
	if tg.Protocol != l.Protocol {
		return badRequest("IncompatibleProtocols", "The listener protocol '%s' is not compatible with target group protocol '%s'", l.Protocol, tg.Protocol)
	}
	for _, other := range c.targetGroupLoadBalancers(tg.ARN) {
		if other != lb.ARN {
			return badRequest("TargetGroupAssociationLimit", "The target group '%s' is already associated with another load balancer", tg.ARN)
		}
	}
	for _, have := range c.listeners {
		if have.LoadBalancerARN == lb.ARN && have.Port == l.Port && have.ARN != l.ARN {
			return badRequest("DuplicateListener", "A listener already exists on this port for this load balancer")
		}
	}
	return nil
}

func (cl *call) v2CreateListener() (any, *apiError) {
	lb, err := cl.v2LoadBalancer()
	if err != nil {
		return nil, err
	}
	l := &NetworkListener{LoadBalancerARN: lb.ARN, Tags: cl.tags("Tags")}
	if len(cl.structs("DefaultActions")) == 0 {
		return nil, validation("DefaultActions is required")
	}
	if err := cl.listenerParams(l); err != nil {
		return nil, err
	}
	l.ARN = cl.c.arn("listener/net/"+lb.Name, lb.ARN[strings.LastIndex(lb.ARN, "/")+1:])
	cl.c.listeners[l.ARN] = l
	return cl.v2("CreateListener", listenersResult("CreateListener", []*NetworkListener{l}, "")), nil
}

// v2DescribeListeners serves LoadBalancerArn or ListenerArns (every one
// must exist), paged.
func (cl *call) v2DescribeListeners() (any, *apiError) {
	c := cl.c
	lbARN, arns := cl.get("LoadBalancerArn"), cl.list("ListenerArns")
	if (lbARN == "") == (len(arns) == 0) {
		return nil, validation("Exactly one of LoadBalancerArn and ListenerArns must be given")
	}
	if lbARN != "" && c.nlbs[lbARN] == nil {
		return nil, v2LBNotFound()
	}
	list := byARN(c.listeners, func(l *NetworkListener) bool {
		return (lbARN == "" || l.LoadBalancerARN == lbARN) && (len(arns) == 0 || slices.Contains(arns, l.ARN))
	})
	if len(arns) > len(list) {
		return nil, badRequest("ListenerNotFound", "One or more listeners not found")
	}
	pg, next, err := page(cl, list)
	if err != nil {
		return nil, err
	}
	return cl.v2("DescribeListeners", listenersResult("DescribeListeners", pg, next)), nil
}

func (cl *call) listener() (*NetworkListener, *apiError) {
	l := cl.c.listeners[cl.get("ListenerArn")]
	if l == nil {
		return nil, badRequest("ListenerNotFound", "One or more listeners not found")
	}
	return l, nil
}

func (cl *call) v2ModifyListener() (any, *apiError) {
	l, err := cl.listener()
	if err != nil {
		return nil, err
	}
	next := *l
	if err := cl.listenerParams(&next); err != nil {
		return nil, err
	}
	*l = next
	return cl.v2("ModifyListener", listenersResult("ModifyListener", []*NetworkListener{l}, "")), nil
}

func (cl *call) v2DeleteListener() (any, *apiError) {
	l, err := cl.listener()
	if err != nil {
		return nil, err
	}
	delete(cl.c.listeners, l.ARN)
	return cl.v2("DeleteListener", nil), nil
}

// taggable finds the tags of every resource of ResourceArns (one to 20):
// load balancers, target groups and listeners.
func (cl *call) taggable() ([]string, []map[string]string, *apiError) {
	arns := cl.list("ResourceArns")
	if len(arns) == 0 || len(arns) > 20 {
		return nil, nil, validation("ResourceArns must hold 1 to 20 ARNs")
	}
	var out []map[string]string
	for _, arn := range arns {
		switch {
		case cl.c.nlbs[arn] != nil:
			out = append(out, cl.c.nlbs[arn].Tags)
		case cl.c.targetGroups[arn] != nil:
			out = append(out, cl.c.targetGroups[arn].Tags)
		case cl.c.listeners[arn] != nil:
			out = append(out, cl.c.listeners[arn].Tags)
		case strings.Contains(arn, ":targetgroup/"):
			return nil, nil, v2TGNotFound()
		case strings.Contains(arn, ":listener/"):
			return nil, nil, badRequest("ListenerNotFound", "One or more listeners not found")
		default:
			return nil, nil, v2LBNotFound()
		}
	}
	return arns, out, nil
}

func (cl *call) v2AddTags() (any, *apiError) {
	_, all, err := cl.taggable()
	if err != nil {
		return nil, err
	}
	tags := cl.tags("Tags")
	if len(tags) == 0 {
		return nil, validation("Tags is required")
	}
	for _, have := range all {
		n := len(have)
		for k := range tags {
			if _, ok := have[k]; !ok {
				n++
			}
		}
		if n > 50 {
			return nil, badRequest("TooManyTags", "A resource would have more than 50 tags")
		}
	}
	for _, have := range all {
		for k, v := range tags {
			have[k] = v
		}
	}
	return cl.v2("AddTags", nil), nil
}

func (cl *call) v2RemoveTags() (any, *apiError) {
	_, all, err := cl.taggable()
	if err != nil {
		return nil, err
	}
	for _, have := range all {
		for _, k := range cl.list("TagKeys") {
			delete(have, k)
		}
	}
	return cl.v2("RemoveTags", nil), nil
}

func (cl *call) v2DescribeTags() (any, *apiError) {
	arns, all, err := cl.taggable()
	if err != nil {
		return nil, err
	}
	type desc struct {
		ResourceArn string
		Tags        []xmlV2Tag `xml:"Tags>member"`
	}
	result := struct {
		XMLName         xml.Name
		TagDescriptions []desc `xml:"TagDescriptions>member"`
	}{XMLName: resultName("DescribeTags")}
	for i, arn := range arns {
		result.TagDescriptions = append(result.TagDescriptions, desc{arn, v2Tags(all[i])})
	}
	return cl.v2("DescribeTags", result), nil
}
