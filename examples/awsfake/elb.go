package awsfake

import (
	"cmp"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var elbActions = map[string]func(*call) (any, *apiError){
	"CreateLoadBalancer":                  (*call).createLoadBalancer,
	"DescribeLoadBalancers":               (*call).describeLoadBalancers,
	"DeleteLoadBalancer":                  (*call).deleteLoadBalancer,
	"RegisterInstancesWithLoadBalancer":   (*call).registerInstances,
	"DeregisterInstancesFromLoadBalancer": (*call).deregisterInstances,
	"ConfigureHealthCheck":                (*call).configureHealthCheck,
	"AddTags":                             (*call).addTags,
	"RemoveTags":                          (*call).removeTags,
	"DescribeTags":                        (*call).describeTags,
	"CreateLoadBalancerListeners":         (*call).createListeners,
	"DeleteLoadBalancerListeners":         (*call).deleteListeners,
	"ModifyLoadBalancerAttributes":        (*call).modifyAttributes,
	"DescribeLoadBalancerAttributes":      (*call).describeAttributes,
	"ApplySecurityGroupsToLoadBalancer":   (*call).applySecurityGroups,
	"AttachLoadBalancerToSubnets":         (*call).attachSubnets,
	"DetachLoadBalancerFromSubnets":       (*call).detachSubnets,
}

// elbResponse wraps an action's result as awsQuery does: <XResponse><XResult>
// with result's fields, then <ResponseMetadata><RequestId>.
type elbResponse struct {
	XMLName   xml.Name
	NS        string `xml:"xmlns,attr"`
	Result    any
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// resultName names a result element; every result type has an XMLName
// field set from it.
func resultName(action string) xml.Name { return xml.Name{Local: action + "Result"} }

func (cl *call) elb(action string, result any) elbResponse {
	if result == nil {
		result = struct{ XMLName xml.Name }{resultName(action)}
	}
	return elbResponse{XMLName: xml.Name{Local: action + "Response"}, NS: elbNS, Result: result, RequestID: cl.requestID}
}

func validation(format string, args ...any) *apiError {
	return badRequest("ValidationError", format, args...)
}

// lbNameRE is the Classic ELB rule: letters, digits and hyphens, neither
// first nor last a hyphen; 32 characters at most.
var lbNameRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`)

func (cl *call) lbName() (string, *apiError) {
	name, err := cl.required("LoadBalancerName")
	if err != nil {
		return "", validation("LoadBalancerName is required")
	}
	if len(name) > 32 {
		return "", validation("1 validation error detected: Value '%s' at 'loadBalancerName' failed to satisfy constraint: Member must have length less than or equal to 32", name)
	}
	return name, nil
}

// lookup finds a load balancer by the request's LoadBalancerName.
func (cl *call) lookup() (*LoadBalancer, *apiError) {
	name, err := cl.lbName()
	if err != nil {
		return nil, err
	}
	lb := cl.c.loadBalancers[name]
	if lb == nil {
		return nil, notFoundLB(name)
	}
	return lb, nil
}

func notFoundLB(name string) *apiError {
	return badRequest("LoadBalancerNotFound", "There is no ACTIVE Load Balancer named '%s'", name)
}

func (cl *call) listeners() ([]Listener, *apiError) {
	var out []Listener
	for _, p := range cl.structs("Listeners") {
		l := Listener{Protocol: strings.ToUpper(cl.get(p + "Protocol")), InstanceProtocol: strings.ToUpper(cl.get(p + "InstanceProtocol")),
			SSLCertificateID: cl.get(p + "SSLCertificateId")}
		var err *apiError
		if l.LoadBalancerPort, err = cl.intParam(p+"LoadBalancerPort", 0); err != nil {
			return nil, err
		}
		if l.InstancePort, err = cl.intParam(p+"InstancePort", 0); err != nil {
			return nil, err
		}
		if l.InstanceProtocol == "" {
			l.InstanceProtocol = l.Protocol
			if l.Protocol == "HTTPS" {
				l.InstanceProtocol = "HTTP"
			} else if l.Protocol == "SSL" {
				l.InstanceProtocol = "TCP"
			}
		}
		for _, proto := range []string{l.Protocol, l.InstanceProtocol} {
			if !slices.Contains([]string{"HTTP", "HTTPS", "TCP", "SSL"}, proto) {
				return nil, validation("Invalid protocol %q: must be one of HTTP, HTTPS, TCP, SSL", proto)
			}
		}
		if l.LoadBalancerPort < 1 || l.LoadBalancerPort > 65535 || l.InstancePort < 1 || l.InstancePort > 65535 {
			return nil, validation("Invalid port: LoadBalancerPort and InstancePort must be 1-65535")
		}
		if (l.Protocol == "HTTPS" || l.Protocol == "SSL") && l.SSLCertificateID == "" {
			return nil, validation("SSLCertificateId is required for an %s listener", l.Protocol)
		}
		out = append(out, l)
	}
	return out, nil
}

func (cl *call) createLoadBalancer() (any, *apiError) {
	c := cl.c
	name, err := cl.lbName()
	if err != nil {
		return nil, err
	}
	if !lbNameRE.MatchString(name) {
		return nil, validation("LoadBalancerName '%s' must contain only alphanumeric characters or hyphens, and must not begin or end with a hyphen", name)
	}
	listeners, err := cl.listeners()
	if err != nil {
		return nil, err
	}
	if len(listeners) == 0 {
		return nil, validation("Listeners is required")
	}
	scheme := cmp.Or(cl.get("Scheme"), "internet-facing")
	if scheme != "internet-facing" && scheme != "internal" {
		return nil, badRequest("InvalidScheme", "Invalid scheme %q", scheme)
	}
	if have := c.loadBalancers[name]; have != nil {
		// Creating again with the same listeners and scheme answers the
		// existing load balancer, as ELB does.
		if have.Scheme == scheme && slices.Equal(have.Listeners, listeners) {
			return cl.elb("CreateLoadBalancer", struct {
				XMLName xml.Name
				DNSName string
			}{resultName("CreateLoadBalancer"), have.DNSName}), nil
		}
		return nil, badRequest("DuplicateLoadBalancerName", "Load Balancer named '%s' already exists and it is configured with different parameters.", name)
	}
	lb := &LoadBalancer{Name: name, Scheme: scheme, Listeners: listeners, Tags: cl.tags("Tags"),
		Created: time.Now().UTC().Truncate(time.Millisecond)}
	subnets, zones := cl.list("Subnets"), cl.list("AvailabilityZones")
	switch {
	case len(subnets) > 0:
		for _, id := range subnets {
			s := c.subnets[id]
			if s == nil {
				return nil, badRequest("SubnetNotFound", "One or more subnets were not found: %s", id)
			}
			if lb.VpcID != "" && s.VpcID != lb.VpcID {
				return nil, badRequest("InvalidConfigurationRequest", "Subnets must be in the same VPC")
			}
			if slices.Contains(lb.Zones, s.Zone) {
				return nil, badRequest("InvalidConfigurationRequest", "Only one subnet per Availability Zone is allowed")
			}
			lb.VpcID = s.VpcID
			lb.Subnets = append(lb.Subnets, id)
			lb.Zones = append(lb.Zones, s.Zone)
		}
	case len(zones) > 0:
		for _, z := range zones {
			if !slices.Contains(c.zones(), z) {
				return nil, validation("Invalid Availability Zone: %s", z)
			}
			for _, s := range c.sortedSubnets() {
				if s.Default && s.Zone == z {
					lb.Subnets = append(lb.Subnets, s.ID)
					lb.VpcID = s.VpcID
				}
			}
			lb.Zones = append(lb.Zones, z)
		}
	default:
		return nil, validation("Either AvailabilityZones or SubnetIds must be specified")
	}
	lb.SecurityGroups = cl.list("SecurityGroups")
	for _, g := range lb.SecurityGroups {
		if sg := c.securityGroups[g]; sg == nil || sg.VpcID != lb.VpcID {
			return nil, badRequest("InvalidSecurityGroup", "One or more security groups are invalid: %s", g)
		}
	}
	if len(lb.SecurityGroups) == 0 {
		for _, sg := range c.securityGroups {
			if sg.VpcID == lb.VpcID && sg.Name == "default" {
				lb.SecurityGroups = []string{sg.ID}
			}
		}
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	lb.DNSName = fmt.Sprintf("%s-%d.%s.elb.amazonaws.com", name, h.Sum32()%2000000000, c.opts.Region)
	if scheme == "internal" {
		lb.DNSName = "internal-" + lb.DNSName
	}
	lb.HealthCheck = HealthCheck{Target: "TCP:" + strconv.Itoa(listeners[0].InstancePort), Interval: 30, Timeout: 5,
		UnhealthyThreshold: 2, HealthyThreshold: 10}
	lb.Attributes = LoadBalancerAttributes{ConnectionDrainingTimeout: 300, IdleTimeout: 60}
	c.loadBalancers[name] = lb
	return cl.elb("CreateLoadBalancer", struct {
		XMLName xml.Name
		DNSName string
	}{resultName("CreateLoadBalancer"), lb.DNSName}), nil
}

type (
	xmlListener struct {
		Protocol         string
		LoadBalancerPort int
		InstanceProtocol string
		InstancePort     int
		SSLCertificateID string `xml:"SSLCertificateId,omitempty"`
	}
	xmlHealthCheck struct {
		Target             string
		Interval           int
		Timeout            int
		UnhealthyThreshold int
		HealthyThreshold   int
	}
	xmlInstanceRef struct {
		InstanceID string `xml:"InstanceId"`
	}
	xmlLoadBalancer struct {
		LoadBalancerName          string
		DNSName                   string
		CanonicalHostedZoneName   string `xml:",omitempty"`
		CanonicalHostedZoneNameID string
		ListenerDescriptions      []struct {
			Listener    xmlListener
			PolicyNames struct{}
		} `xml:"ListenerDescriptions>member"`
		Policies struct {
			AppCookieStickinessPolicies struct{}
			LBCookieStickinessPolicies  struct{}
			OtherPolicies               struct{}
		}
		BackendServerDescriptions struct{}
		AvailabilityZones         []string         `xml:"AvailabilityZones>member"`
		Subnets                   []string         `xml:"Subnets>member"`
		VPCID                     string           `xml:"VPCId,omitempty"`
		Instances                 []xmlInstanceRef `xml:"Instances>member"`
		HealthCheck               xmlHealthCheck
		SourceSecurityGroup       struct {
			OwnerAlias string
			GroupName  string
		}
		SecurityGroups []string `xml:"SecurityGroups>member"`
		CreatedTime    string
		Scheme         string
	}
)

func (c *Cloud) loadBalancerXML(lb *LoadBalancer) xmlLoadBalancer {
	x := xmlLoadBalancer{LoadBalancerName: lb.Name, DNSName: lb.DNSName, CanonicalHostedZoneNameID: "Z35SXDOTRQ7X7K",
		AvailabilityZones: lb.Zones, Subnets: lb.Subnets, VPCID: lb.VpcID, SecurityGroups: lb.SecurityGroups,
		CreatedTime: lb.Created.Format("2006-01-02T15:04:05.000Z"), Scheme: lb.Scheme,
		HealthCheck: xmlHealthCheck(lb.HealthCheck)}
	if lb.Scheme == "internet-facing" {
		x.CanonicalHostedZoneName = lb.DNSName
	}
	for _, l := range lb.Listeners {
		x.ListenerDescriptions = append(x.ListenerDescriptions, struct {
			Listener    xmlListener
			PolicyNames struct{}
		}{Listener: xmlListener(l)})
	}
	for _, i := range lb.Instances {
		x.Instances = append(x.Instances, xmlInstanceRef{i})
	}
	x.SourceSecurityGroup.OwnerAlias = AccountID
	if len(lb.SecurityGroups) > 0 {
		if sg := c.securityGroups[lb.SecurityGroups[0]]; sg != nil {
			x.SourceSecurityGroup.GroupName = sg.Name
		}
	}
	return x
}

// describeLoadBalancers serves DescribeLoadBalancers: LoadBalancerNames
// (every one must exist), PageSize (1-400) and Marker.
func (cl *call) describeLoadBalancers() (any, *apiError) {
	c := cl.c
	names := cl.list("LoadBalancerNames")
	for _, n := range names {
		if c.loadBalancers[n] == nil {
			return nil, notFoundLB(n)
		}
	}
	size, err := cl.intParam("PageSize", cmp.Or(c.opts.PageSize, 400))
	if err != nil {
		return nil, err
	}
	if size < 1 || size > 400 {
		return nil, validation("PageSize must be between 1 and 400")
	}
	var list []*LoadBalancer
	for _, n := range sortedKeys(c.loadBalancers) {
		if len(names) == 0 || slices.Contains(names, n) {
			list = append(list, c.loadBalancers[n])
		}
	}
	start := 0
	if m := cl.get("Marker"); m != "" {
		b, derr := base64.StdEncoding.DecodeString(m)
		n, aerr := strconv.Atoi(string(b))
		if derr != nil || aerr != nil || n < 0 || n > len(list) {
			return nil, validation("Invalid Marker")
		}
		start = n
	}
	end := min(start+size, len(list))
	result := struct {
		XMLName                  xml.Name
		LoadBalancerDescriptions []xmlLoadBalancer `xml:"LoadBalancerDescriptions>member"`
		NextMarker               string            `xml:",omitempty"`
	}{XMLName: resultName("DescribeLoadBalancers")}
	for _, lb := range list[start:end] {
		result.LoadBalancerDescriptions = append(result.LoadBalancerDescriptions, c.loadBalancerXML(lb))
	}
	if end < len(list) {
		result.NextMarker = base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	return cl.elb("DescribeLoadBalancers", result), nil
}

// deleteLoadBalancer succeeds for a name that does not exist, as ELB's does.
func (cl *call) deleteLoadBalancer() (any, *apiError) {
	name, err := cl.lbName()
	if err != nil {
		return nil, err
	}
	delete(cl.c.loadBalancers, name)
	return cl.elb("DeleteLoadBalancer", nil), nil
}

func (cl *call) instanceList() ([]string, *apiError) {
	var ids []string
	for _, p := range cl.structs("Instances") {
		ids = append(ids, cl.get(p+"InstanceId"))
	}
	if len(ids) == 0 {
		return nil, validation("Instances is required")
	}
	return ids, nil
}

func (cl *call) instancesResult(action string, lb *LoadBalancer) elbResponse {
	result := struct {
		XMLName   xml.Name
		Instances []xmlInstanceRef `xml:"Instances>member"`
	}{XMLName: resultName(action)}
	for _, i := range lb.Instances {
		result.Instances = append(result.Instances, xmlInstanceRef{i})
	}
	return cl.elb(action, result)
}

func (cl *call) registerInstances() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	ids, err := cl.instanceList()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		in := cl.c.instances[id]
		if in == nil || in.State == "terminated" {
			return nil, badRequest("InvalidInstance", "The following instances are not valid or are not in a valid state: %s", id)
		}
		if in.VpcID != lb.VpcID {
			return nil, badRequest("InvalidInstance", "Instance %s is not in the same VPC as the load balancer", id)
		}
	}
	for _, id := range ids {
		if !slices.Contains(lb.Instances, id) {
			lb.Instances = append(lb.Instances, id)
		}
	}
	return cl.instancesResult("RegisterInstancesWithLoadBalancer", lb), nil
}

func (cl *call) deregisterInstances() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	ids, err := cl.instanceList()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.Contains(lb.Instances, id) {
			return nil, badRequest("InvalidInstance", "The specified EC2 Instance %s is not registered with the load balancer", id)
		}
	}
	lb.Instances = slices.DeleteFunc(lb.Instances, func(i string) bool { return slices.Contains(ids, i) })
	return cl.instancesResult("DeregisterInstancesFromLoadBalancer", lb), nil
}

var healthTargetRE = regexp.MustCompile(`^(TCP|SSL|HTTP|HTTPS):([0-9]+)(/.*)?$`)

func (cl *call) configureHealthCheck() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	var hc HealthCheck
	hc.Target = cl.get("HealthCheck.Target")
	m := healthTargetRE.FindStringSubmatch(hc.Target)
	if m == nil || (m[1] == "TCP" || m[1] == "SSL") && m[3] != "" || (m[1] == "HTTP" || m[1] == "HTTPS") && m[3] == "" {
		return nil, validation("Invalid health check target %q: must be TCP:port, SSL:port, HTTP:port/path or HTTPS:port/path", hc.Target)
	}
	for _, f := range []struct {
		name     string
		v        *int
		min, max int
	}{{"Interval", &hc.Interval, 5, 300}, {"Timeout", &hc.Timeout, 2, 60}, {"UnhealthyThreshold", &hc.UnhealthyThreshold, 2, 10},
		{"HealthyThreshold", &hc.HealthyThreshold, 2, 10}} {
		v, err := cl.intParam("HealthCheck."+f.name, -1)
		if err != nil {
			return nil, err
		}
		if v < f.min || v > f.max {
			return nil, validation("HealthCheck.%s must be between %d and %d", f.name, f.min, f.max)
		}
		*f.v = v
	}
	if hc.Timeout >= hc.Interval {
		return nil, validation("HealthCheck Timeout must be less than Interval")
	}
	lb.HealthCheck = hc
	return cl.elb("ConfigureHealthCheck", struct {
		XMLName     xml.Name
		HealthCheck xmlHealthCheck
	}{resultName("ConfigureHealthCheck"), xmlHealthCheck(hc)}), nil
}

// tagTargets finds every load balancer of LoadBalancerNames (one to 20).
func (cl *call) tagTargets() ([]*LoadBalancer, *apiError) {
	names := cl.list("LoadBalancerNames")
	if len(names) == 0 || len(names) > 20 {
		return nil, validation("LoadBalancerNames must hold 1 to 20 names")
	}
	var out []*LoadBalancer
	for _, n := range names {
		lb := cl.c.loadBalancers[n]
		if lb == nil {
			return nil, notFoundLB(n)
		}
		out = append(out, lb)
	}
	return out, nil
}

func (cl *call) addTags() (any, *apiError) {
	lbs, err := cl.tagTargets()
	if err != nil {
		return nil, err
	}
	tags := cl.tags("Tags")
	if len(tags) == 0 {
		return nil, validation("Tags is required")
	}
	for _, lb := range lbs {
		for k, v := range tags {
			lb.Tags[k] = v
		}
		if len(lb.Tags) > 50 {
			return nil, badRequest("TooManyTags", "Load balancer %s would have more than 50 tags", lb.Name)
		}
	}
	return cl.elb("AddTags", nil), nil
}

func (cl *call) removeTags() (any, *apiError) {
	lbs, err := cl.tagTargets()
	if err != nil {
		return nil, err
	}
	for _, p := range cl.structs("Tags") {
		for _, lb := range lbs {
			delete(lb.Tags, cl.get(p+"Key"))
		}
	}
	return cl.elb("RemoveTags", nil), nil
}

func (cl *call) describeTags() (any, *apiError) {
	lbs, err := cl.tagTargets()
	if err != nil {
		return nil, err
	}
	type tag struct{ Key, Value string }
	type desc struct {
		LoadBalancerName string
		Tags             []tag `xml:"Tags>member"`
	}
	result := struct {
		XMLName         xml.Name
		TagDescriptions []desc `xml:"TagDescriptions>member"`
	}{XMLName: resultName("DescribeTags")}
	for _, lb := range lbs {
		d := desc{LoadBalancerName: lb.Name}
		for _, k := range sortedKeys(lb.Tags) {
			d.Tags = append(d.Tags, tag{k, lb.Tags[k]})
		}
		result.TagDescriptions = append(result.TagDescriptions, d)
	}
	return cl.elb("DescribeTags", result), nil
}

func (cl *call) createListeners() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	listeners, err := cl.listeners()
	if err != nil {
		return nil, err
	}
	if len(listeners) == 0 {
		return nil, validation("Listeners is required")
	}
	for _, l := range listeners {
		for _, have := range lb.Listeners {
			if have.LoadBalancerPort == l.LoadBalancerPort && have != l {
				return nil, badRequest("DuplicateListener", "A listener already exists for %s with LoadBalancerPort %d, but with a different InstancePort, Protocol, or SSLCertificateId", lb.Name, l.LoadBalancerPort)
			}
		}
	}
	for _, l := range listeners {
		if !slices.Contains(lb.Listeners, l) {
			lb.Listeners = append(lb.Listeners, l)
		}
	}
	return cl.elb("CreateLoadBalancerListeners", nil), nil
}

func (cl *call) deleteListeners() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, p := range cl.list("LoadBalancerPorts") {
		n, aerr := strconv.Atoi(p)
		if aerr != nil {
			return nil, validation("Invalid port %q", p)
		}
		ports = append(ports, n)
	}
	lb.Listeners = slices.DeleteFunc(lb.Listeners, func(l Listener) bool { return slices.Contains(ports, l.LoadBalancerPort) })
	return cl.elb("DeleteLoadBalancerListeners", nil), nil
}

type xmlAttributes struct {
	CrossZoneLoadBalancing struct{ Enabled bool }
	AccessLog              struct {
		Enabled        bool
		S3BucketName   string `xml:",omitempty"`
		EmitInterval   int    `xml:",omitempty"`
		S3BucketPrefix string `xml:",omitempty"`
	}
	ConnectionDraining struct {
		Enabled bool
		Timeout int
	}
	ConnectionSettings   struct{ IdleTimeout int }
	AdditionalAttributes []struct{ Key, Value string } `xml:"AdditionalAttributes>member"`
}

func attributesXML(a LoadBalancerAttributes) xmlAttributes {
	var x xmlAttributes
	x.CrossZoneLoadBalancing.Enabled = a.CrossZone
	x.AccessLog.Enabled, x.AccessLog.S3BucketName, x.AccessLog.EmitInterval, x.AccessLog.S3BucketPrefix =
		a.AccessLogEnabled, a.AccessLogBucket, a.AccessLogInterval, a.AccessLogPrefix
	x.ConnectionDraining.Enabled, x.ConnectionDraining.Timeout = a.ConnectionDraining, a.ConnectionDrainingTimeout
	x.ConnectionSettings.IdleTimeout = a.IdleTimeout
	for _, k := range sortedKeys(a.Additional) {
		x.AdditionalAttributes = append(x.AdditionalAttributes, struct{ Key, Value string }{k, a.Additional[k]})
	}
	return x
}

func (cl *call) boolParam(name string, v *bool) *apiError {
	switch s := cl.get(name); s {
	case "":
	case "true":
		*v = true
	case "false":
		*v = false
	default:
		return validation("Invalid boolean %q for %s", s, name)
	}
	return nil
}

func (cl *call) modifyAttributes() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	a := lb.Attributes
	const p = "LoadBalancerAttributes."
	for _, b := range []struct {
		name string
		v    *bool
	}{{p + "CrossZoneLoadBalancing.Enabled", &a.CrossZone}, {p + "AccessLog.Enabled", &a.AccessLogEnabled},
		{p + "ConnectionDraining.Enabled", &a.ConnectionDraining}} {
		if err := cl.boolParam(b.name, b.v); err != nil {
			return nil, err
		}
	}
	if a.AccessLogInterval, err = cl.intParam(p+"AccessLog.EmitInterval", a.AccessLogInterval); err != nil {
		return nil, err
	}
	a.AccessLogBucket = cmp.Or(cl.get(p+"AccessLog.S3BucketName"), a.AccessLogBucket)
	a.AccessLogPrefix = cmp.Or(cl.get(p+"AccessLog.S3BucketPrefix"), a.AccessLogPrefix)
	if a.ConnectionDrainingTimeout, err = cl.intParam(p+"ConnectionDraining.Timeout", a.ConnectionDrainingTimeout); err != nil {
		return nil, err
	}
	if a.IdleTimeout, err = cl.intParam(p+"ConnectionSettings.IdleTimeout", a.IdleTimeout); err != nil {
		return nil, err
	}
	if a.IdleTimeout < 1 || a.IdleTimeout > 4000 {
		return nil, validation("IdleTimeout must be between 1 and 4000")
	}
	if a.ConnectionDrainingTimeout < 1 || a.ConnectionDrainingTimeout > 3600 {
		return nil, validation("ConnectionDraining Timeout must be between 1 and 3600")
	}
	if a.AccessLogEnabled && a.AccessLogBucket == "" {
		return nil, validation("AccessLog S3BucketName is required when access logs are enabled")
	}
	for _, s := range cl.structs(p + "AdditionalAttributes") {
		if a.Additional == nil {
			a.Additional = map[string]string{}
		}
		a.Additional = cloneTags(a.Additional)
		a.Additional[cl.get(s+"Key")] = cl.get(s + "Value")
	}
	lb.Attributes = a
	return cl.elb("ModifyLoadBalancerAttributes", struct {
		XMLName                xml.Name
		LoadBalancerName       string
		LoadBalancerAttributes xmlAttributes
	}{resultName("ModifyLoadBalancerAttributes"), lb.Name, attributesXML(a)}), nil
}

func (cl *call) describeAttributes() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	return cl.elb("DescribeLoadBalancerAttributes", struct {
		XMLName                xml.Name
		LoadBalancerAttributes xmlAttributes
	}{resultName("DescribeLoadBalancerAttributes"), attributesXML(lb.Attributes)}), nil
}

func (cl *call) applySecurityGroups() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	groups := cl.list("SecurityGroups")
	if len(groups) == 0 {
		return nil, validation("SecurityGroups is required")
	}
	for _, g := range groups {
		if sg := cl.c.securityGroups[g]; sg == nil || sg.VpcID != lb.VpcID {
			return nil, badRequest("InvalidSecurityGroup", "One or more security groups are invalid: %s", g)
		}
	}
	lb.SecurityGroups = groups
	return cl.elb("ApplySecurityGroupsToLoadBalancer", struct {
		XMLName        xml.Name
		SecurityGroups []string `xml:"SecurityGroups>member"`
	}{resultName("ApplySecurityGroupsToLoadBalancer"), groups}), nil
}

func (cl *call) subnetsResult(action string, lb *LoadBalancer) elbResponse {
	return cl.elb(action, struct {
		XMLName xml.Name
		Subnets []string `xml:"Subnets>member"`
	}{resultName(action), lb.Subnets})
}

// attachSubnets adds subnets (one per zone, in the load balancer's VPC)
// and their zones.
func (cl *call) attachSubnets() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	ids := cl.list("Subnets")
	if len(ids) == 0 {
		return nil, validation("Subnets is required")
	}
	for _, id := range ids {
		s := cl.c.subnets[id]
		if s == nil {
			return nil, badRequest("SubnetNotFound", "One or more subnets were not found: %s", id)
		}
		if s.VpcID != lb.VpcID {
			return nil, badRequest("InvalidConfigurationRequest", "Subnet %s is not in the load balancer's VPC", id)
		}
		if slices.Contains(lb.Subnets, id) {
			continue
		}
		if slices.Contains(lb.Zones, s.Zone) {
			return nil, badRequest("InvalidConfigurationRequest", "Only one subnet per Availability Zone is allowed")
		}
		lb.Subnets = append(lb.Subnets, id)
		lb.Zones = append(lb.Zones, s.Zone)
	}
	return cl.subnetsResult("AttachLoadBalancerToSubnets", lb), nil
}

// detachSubnets removes subnets and their zones; the last one stays.
func (cl *call) detachSubnets() (any, *apiError) {
	lb, err := cl.lookup()
	if err != nil {
		return nil, err
	}
	ids := cl.list("Subnets")
	keep := slices.DeleteFunc(slices.Clone(lb.Subnets), func(s string) bool { return slices.Contains(ids, s) })
	if len(keep) == 0 {
		return nil, badRequest("InvalidConfigurationRequest", "A load balancer must keep at least one subnet")
	}
	lb.Subnets = keep
	lb.Zones = nil
	for _, id := range keep {
		lb.Zones = append(lb.Zones, cl.c.subnets[id].Zone)
	}
	return cl.subnetsResult("DetachLoadBalancerFromSubnets", lb), nil
}
