// Package awsfake is a stateful fake of the Amazon EC2 API (Query
// protocol, version 2016-11-15), the Classic Elastic Load Balancing API
// (version 2012-06-01) and Elastic Load Balancing version 2 for network
// load balancers (version 2015-12-01), for testing cloud controllers
// without an AWS account.
//
// It speaks the real wire format: form-encoded POST requests carrying
// Action and Version, XML responses in the services' namespaces, and the
// services' XML error bodies and codes (EC2's <Response><Errors>, ELB's
// <ErrorResponse>). Every request must be signed with AWS Signature
// Version 4 by the access key the fake knows; the signature is verified
// independently of any SDK. The tests drive it with the official
// aws-sdk-go-v2 EC2, ELB and ELBv2 clients.
//
// The APIs are served by one handler: a request is routed by its Version
// (2016-11-15 is EC2, 2012-06-01 is ELB, 2015-12-01 is ELBv2) and must be
// signed for that service ("ec2", or "elasticloadbalancing" for both load
// balancing APIs).
//
// Faults come from package faultinject. A fault selects an API action by
// its Route, "ec2:DescribeInstances",
// "elasticloadbalancing:CreateLoadBalancer" or "elbv2:CreateTargetGroup",
// the keys of Requests.
//
//	cloud := awsfake.New(awsfake.Options{})
//	srv := httptest.NewServer(cloud.Handler())
//	inst, _ := cloud.AddInstance(awsfake.Instance{Tags: map[string]string{"Name": "node-a"}})
package awsfake

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// Default credentials and account of a Cloud.
const (
	DefaultAccessKeyID     = "AKIDFAKEEXAMPLE0000"
	DefaultSecretAccessKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYFAKEKEY0000"
	DefaultRegion          = "us-east-1"
	AccountID              = "123456789012"
)

// Options configure a Cloud. The zero value is usable.
type Options struct {
	// AccessKeyID and SecretAccessKey are the only credentials accepted;
	// DefaultAccessKeyID and DefaultSecretAccessKey when empty.
	AccessKeyID, SecretAccessKey string
	// Region is the region requests must be signed for and the zones are
	// in; DefaultRegion when empty.
	Region string
	// HideNewInstances makes an instance added with AddInstance invisible
	// to the next N DescribeInstances requests, as EC2's eventual
	// consistency does right after RunInstances: asked for by ID it is
	// InvalidInstanceID.NotFound.
	HideNewInstances int
	// ForgetTerminatedAfter removes a terminated instance after it has
	// been described (as terminated) by N DescribeInstances requests; a
	// terminated instance is described forever when 0. EC2 keeps them
	// about an hour.
	ForgetTerminatedAfter int
	// PageSize pages the listings a request asks without MaxResults
	// (DescribeInstances, DescribeRouteTables, DescribeSubnets,
	// DescribeSecurityGroups) at PageSize items, as EC2 may; such a listing
	// is answered whole when 0. It is also DescribeLoadBalancers' default
	// PageSize (400 when 0).
	PageSize int
	// Now is the clock signatures' dates are checked against (±15
	// minutes, as AWS does); time.Now when nil.
	Now func() time.Time
}

// Instance is an EC2 instance. To add one, set what matters and leave
// the rest to AddInstance's defaults.
type Instance struct {
	ID string
	// Type is "t3.medium" by default.
	Type string
	// State is "running" by default; "stopped", "terminated", "pending",
	// "stopping" and "shutting-down" are the others.
	State string
	// Zone is the region's first zone by default; SubnetID the default
	// subnet of the zone, VpcID the subnet's VPC.
	Zone, SubnetID, VpcID string
	// PrivateIP is the next free address of the subnet by default;
	// PrivateDNSName is derived from it (ip-10-0-1-4.ec2.internal).
	PrivateIP, PrivateDNSName string
	// PublicIP is an address of 203.0.113.0/24 by default, none with
	// NoPublicIP; PublicDNSName is derived from it.
	PublicIP, PublicDNSName string
	NoPublicIP              bool
	// NoSourceDestCheck is source/destination checking turned off, as a
	// node routing pod traffic needs (ModifyInstanceAttribute).
	NoSourceDestCheck bool
	ImageID           string
	// SecurityGroups are group IDs; the VPC's default group by default.
	SecurityGroups []string
	Tags           map[string]string
	LaunchTime     time.Time

	// hiddenFor is how many more DescribeInstances requests do not see
	// it; describedTerminated how many saw it terminated.
	hiddenFor, describedTerminated int
}

// Vpc, Subnet, RouteTable, SecurityGroup and LoadBalancer are the other
// resources of the fake.
type Vpc struct {
	ID, CIDR string
	Default  bool
	Tags     map[string]string
}

type Subnet struct {
	ID, VpcID, Zone, CIDR string
	Default               bool
	Tags                  map[string]string
}

type RouteTable struct {
	ID, VpcID string
	Main      bool
	Routes    []Route
	Tags      map[string]string
	// Subnets are the IDs of the subnets explicitly associated.
	Subnets []string
}

// Route is a route of a route table. A route to an instance that is
// terminated reads "blackhole".
type Route struct {
	DestinationCIDR string
	// GatewayID is "local" for the VPC's own route.
	GatewayID, InstanceID, NetworkInterfaceID string
	// Origin is "CreateRouteTable" or "CreateRoute".
	Origin string
}

type SecurityGroup struct {
	ID, Name, Description, VpcID string
	Ingress, Egress              []Permission
	Tags                         map[string]string
}

// Permission is one rule: a protocol ("tcp", "udp", "icmp" or "-1" for
// all), a port range and its sources. Description is a CIDR source's
// (EC2 keeps one per address range).
type Permission struct {
	Protocol         string
	FromPort, ToPort int
	CIDRs            []string
	GroupIDs         []string
	Description      string
}

type LoadBalancer struct {
	Name, DNSName, Scheme, VpcID string
	Listeners                    []Listener
	Zones, Subnets               []string
	SecurityGroups               []string
	Instances                    []string
	HealthCheck                  HealthCheck
	Tags                         map[string]string
	Attributes                   LoadBalancerAttributes
	Created                      time.Time
}

type Listener struct {
	Protocol         string
	LoadBalancerPort int
	InstanceProtocol string
	InstancePort     int
	SSLCertificateID string
}

type HealthCheck struct {
	Target                                                  string
	Interval, Timeout, UnhealthyThreshold, HealthyThreshold int
}

type LoadBalancerAttributes struct {
	CrossZone                 bool
	AccessLogEnabled          bool
	AccessLogInterval         int
	AccessLogBucket           string
	AccessLogPrefix           string
	ConnectionDraining        bool
	ConnectionDrainingTimeout int
	IdleTimeout               int
	Additional                map[string]string
}

// Cloud is the fake APIs' state. Its methods are safe for concurrent use.
type Cloud struct {
	opts Options
	// Faults are applied to every request, after its action is known.
	Faults faultinject.Set

	mu             sync.Mutex
	seq            int
	instances      map[string]*Instance
	order          []string // instance IDs in launch order
	vpcs           map[string]*Vpc
	subnets        map[string]*Subnet
	routeTables    map[string]*RouteTable
	securityGroups map[string]*SecurityGroup
	loadBalancers  map[string]*LoadBalancer
	nlbs           map[string]*NetworkLoadBalancer // by ARN
	targetGroups   map[string]*TargetGroup         // by ARN
	listeners      map[string]*NetworkListener     // by ARN
	requests       map[string]int
	authFailures   int
}

// New returns a cloud with a default VPC (10.0.0.0/16), a default subnet
// in each of three zones (10.0.1.0/24, 10.0.2.0/24, 10.0.3.0/24), the
// VPC's main route table (with a route to its internet gateway) and its
// default security group.
func New(opts Options) *Cloud {
	if opts.AccessKeyID == "" {
		opts.AccessKeyID = DefaultAccessKeyID
	}
	if opts.SecretAccessKey == "" {
		opts.SecretAccessKey = DefaultSecretAccessKey
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cloud{opts: opts}
	c.Reset()
	return c
}

// Reset returns the cloud to New's state and clears faults and counters.
func (c *Cloud) Reset() {
	c.Faults.Clear()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = 0
	c.instances = map[string]*Instance{}
	c.order = nil
	c.vpcs = map[string]*Vpc{}
	c.subnets = map[string]*Subnet{}
	c.routeTables = map[string]*RouteTable{}
	c.securityGroups = map[string]*SecurityGroup{}
	c.loadBalancers = map[string]*LoadBalancer{}
	c.nlbs = map[string]*NetworkLoadBalancer{}
	c.targetGroups = map[string]*TargetGroup{}
	c.listeners = map[string]*NetworkListener{}
	c.requests = map[string]int{}
	c.authFailures = 0
	vpc := &Vpc{ID: c.id("vpc"), CIDR: "10.0.0.0/16", Default: true, Tags: map[string]string{}}
	c.vpcs[vpc.ID] = vpc
	for i, z := range c.zones() {
		s := &Subnet{ID: c.id("subnet"), VpcID: vpc.ID, Zone: z, CIDR: fmt.Sprintf("10.0.%d.0/24", i+1), Default: true, Tags: map[string]string{}}
		c.subnets[s.ID] = s
	}
	rt := &RouteTable{ID: c.id("rtb"), VpcID: vpc.ID, Main: true, Tags: map[string]string{},
		Routes: []Route{{DestinationCIDR: vpc.CIDR, GatewayID: "local", Origin: "CreateRouteTable"}}}
	c.routeTables[rt.ID] = rt
	sg := &SecurityGroup{ID: c.id("sg"), Name: "default", Description: "default VPC security group", VpcID: vpc.ID, Tags: map[string]string{}}
	sg.Ingress = []Permission{{Protocol: "-1", GroupIDs: []string{sg.ID}}}
	sg.Egress = []Permission{{Protocol: "-1", CIDRs: []string{"0.0.0.0/0"}}}
	c.securityGroups[sg.ID] = sg
	// As in a default VPC, the main table routes everything else to the
	// VPC's internet gateway, so its subnets are public.
	rt.Routes = append(rt.Routes, Route{DestinationCIDR: "0.0.0.0/0", GatewayID: c.id("igw"), Origin: "CreateRoute"})
}

// Region returns the region the cloud is in.
func (c *Cloud) Region() string { return c.opts.Region }

// zones are the region's availability zones.
func (c *Cloud) zones() []string {
	return []string{c.opts.Region + "a", c.opts.Region + "b", c.opts.Region + "c"}
}

// id returns a new resource ID of the given prefix with 17 hex digits,
// the long form EC2 uses.
func (c *Cloud) id(prefix string) string {
	c.seq++
	return fmt.Sprintf("%s-%017x", prefix, 0xfa4e000+c.seq)
}

// AddInstance adds an instance as launching it in the console would,
// filling in the defaults Instance documents, and returns it.
func (c *Cloud) AddInstance(in Instance) (Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in.ID == "" {
		in.ID = c.id("i")
	} else if !validID(in.ID, "i") {
		return Instance{}, fmt.Errorf("malformed instance ID %q", in.ID)
	}
	if c.instances[in.ID] != nil {
		return Instance{}, fmt.Errorf("instance %s exists", in.ID)
	}
	in.Type = cmp.Or(in.Type, "t3.medium")
	in.State = cmp.Or(in.State, "running")
	if _, ok := stateCodes[in.State]; !ok {
		return Instance{}, fmt.Errorf("unknown instance state %q", in.State)
	}
	in.Zone = cmp.Or(in.Zone, c.zones()[0])
	var subnet *Subnet
	if in.SubnetID == "" {
		for _, s := range c.sortedSubnets() {
			if s.Default && s.Zone == in.Zone {
				subnet = s
				break
			}
		}
		if subnet == nil {
			return Instance{}, fmt.Errorf("no default subnet in zone %q", in.Zone)
		}
		in.SubnetID = subnet.ID
	} else if subnet = c.subnets[in.SubnetID]; subnet == nil {
		return Instance{}, fmt.Errorf("no subnet %q", in.SubnetID)
	}
	in.Zone, in.VpcID = subnet.Zone, subnet.VpcID
	if in.PrivateIP == "" {
		ip, err := c.freeIP(subnet)
		if err != nil {
			return Instance{}, err
		}
		in.PrivateIP = ip
	}
	in.PrivateDNSName = cmp.Or(in.PrivateDNSName, c.privateDNS(in.PrivateIP))
	if !in.NoPublicIP && in.PublicIP == "" {
		in.PublicIP = c.freePublicIP()
	}
	if in.PublicIP != "" {
		in.PublicDNSName = cmp.Or(in.PublicDNSName, c.publicDNS(in.PublicIP))
	}
	in.ImageID = cmp.Or(in.ImageID, "ami-0fa4e00000000cafe")
	if in.SecurityGroups == nil {
		for _, sg := range c.securityGroups {
			if sg.VpcID == in.VpcID && sg.Name == "default" {
				in.SecurityGroups = []string{sg.ID}
			}
		}
	}
	in.Tags = maps.Clone(in.Tags)
	if in.Tags == nil {
		in.Tags = map[string]string{}
	}
	if in.LaunchTime.IsZero() {
		in.LaunchTime = time.Now().UTC().Truncate(time.Second)
	}
	in.hiddenFor = c.opts.HideNewInstances
	in.describedTerminated = 0
	if in.State == "terminated" {
		in.PublicIP, in.PublicDNSName = "", ""
	}
	stored := in
	c.instances[in.ID] = &stored
	c.order = append(c.order, in.ID)
	return cloneInstance(&stored), nil
}

func (c *Cloud) privateDNS(ip string) string {
	name := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if c.opts.Region == "us-east-1" {
		return name + ".ec2.internal"
	}
	return name + "." + c.opts.Region + ".compute.internal"
}

func (c *Cloud) publicDNS(ip string) string {
	name := "ec2-" + strings.ReplaceAll(ip, ".", "-")
	if c.opts.Region == "us-east-1" {
		return name + ".compute-1.amazonaws.com"
	}
	return name + "." + c.opts.Region + ".compute.amazonaws.com"
}

// freeIP returns the lowest address of the subnet no instance uses,
// skipping the five AWS reserves.
func (c *Cloud) freeIP(s *Subnet) (string, error) {
	prefix, err := netip.ParsePrefix(s.CIDR)
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, in := range c.instances {
		used[in.PrivateIP] = true
	}
	ip := prefix.Masked().Addr()
	for range 4 {
		ip = ip.Next()
	}
	for ; prefix.Contains(ip); ip = ip.Next() {
		if !used[ip.String()] {
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("subnet %s is full", s.ID)
}

// freePublicIP returns the lowest address of 203.0.113.0/24, then
// 198.51.100.0/24, that no instance holds.
func (c *Cloud) freePublicIP() string {
	used := map[string]bool{}
	for _, in := range c.instances {
		used[in.PublicIP] = true
	}
	for _, net := range []string{"203.0.113.", "198.51.100."} {
		for i := 1; i < 255; i++ {
			if ip := net + strconv.Itoa(i); !used[ip] {
				return ip
			}
		}
	}
	return ""
}

// SetInstanceState changes an instance's state as the console would:
// "stopped" drops its public address, "terminated" its addresses and DNS
// names, from its load balancers and its routes' targets too (they read
// blackhole); "running" gives a stopped instance a new public address.
func (c *Cloud) SetInstanceState(id, state string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.instances[id]
	if in == nil {
		return fmt.Errorf("no instance %q", id)
	}
	if _, ok := stateCodes[state]; !ok {
		return fmt.Errorf("unknown instance state %q", state)
	}
	if in.State == "terminated" {
		return fmt.Errorf("instance %s is terminated", id)
	}
	in.State = state
	switch state {
	case "stopped", "stopping":
		in.PublicIP, in.PublicDNSName = "", ""
	case "terminated", "shutting-down":
		in.PublicIP, in.PublicDNSName = "", ""
		if state == "terminated" {
			in.PrivateDNSName, in.PrivateIP = "", ""
			for _, lb := range c.loadBalancers {
				lb.Instances = slices.DeleteFunc(lb.Instances, func(i string) bool { return i == id })
			}
			for _, tg := range c.targetGroups {
				tg.Targets = slices.DeleteFunc(tg.Targets, func(t Target) bool { return t.ID == id })
			}
		}
	case "running":
		if in.PublicIP == "" {
			in.PublicIP = c.freePublicIP()
			in.PublicDNSName = c.publicDNS(in.PublicIP)
		}
	}
	return nil
}

// TerminateInstance, StopInstance and StartInstance are SetInstanceState
// with "terminated", "stopped" and "running".
func (c *Cloud) TerminateInstance(id string) error { return c.SetInstanceState(id, "terminated") }
func (c *Cloud) StopInstance(id string) error      { return c.SetInstanceState(id, "stopped") }
func (c *Cloud) StartInstance(id string) error     { return c.SetInstanceState(id, "running") }

// RemoveInstance forgets an instance at once, as EC2 does an hour after
// termination.
func (c *Cloud) RemoveInstance(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.instances[id] == nil {
		return false
	}
	c.removeInstance(id)
	return true
}

func (c *Cloud) removeInstance(id string) {
	delete(c.instances, id)
	c.order = slices.DeleteFunc(c.order, func(i string) bool { return i == id })
}

// Instance returns an instance as the cloud holds it, hidden or not.
func (c *Cloud) Instance(id string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.instances[id]; in != nil {
		return cloneInstance(in), true
	}
	return Instance{}, false
}

// Instances returns every instance in launch order.
func (c *Cloud) Instances() []Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Instance, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, cloneInstance(c.instances[id]))
	}
	return out
}

// AddRouteTable adds a route table to a VPC (the default VPC when vpcID
// is empty) with its local route and the given tags.
func (c *Cloud) AddRouteTable(vpcID string, tags map[string]string) (RouteTable, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vpc := c.defaultVpc()
	if vpcID != "" {
		vpc = c.vpcs[vpcID]
	}
	if vpc == nil {
		return RouteTable{}, fmt.Errorf("no VPC %q", vpcID)
	}
	rt := &RouteTable{ID: c.id("rtb"), VpcID: vpc.ID, Tags: cloneTags(tags),
		Routes: []Route{{DestinationCIDR: vpc.CIDR, GatewayID: "local", Origin: "CreateRouteTable"}}}
	c.routeTables[rt.ID] = rt
	return cloneRouteTable(rt), nil
}

// RouteTable returns a route table.
func (c *Cloud) RouteTable(id string) (RouteTable, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rt := c.routeTables[id]; rt != nil {
		return cloneRouteTable(rt), true
	}
	return RouteTable{}, false
}

// DefaultVpc returns the default VPC; Subnets every subnet by ID.
func (c *Cloud) DefaultVpc() Vpc {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := *c.defaultVpc()
	v.Tags = cloneTags(v.Tags)
	return v
}

func (c *Cloud) Subnets() []Subnet {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Subnet
	for _, s := range c.sortedSubnets() {
		cp := *s
		cp.Tags = cloneTags(s.Tags)
		out = append(out, cp)
	}
	return out
}

// SecurityGroups returns every security group by ID.
func (c *Cloud) SecurityGroups() []SecurityGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SecurityGroup
	for _, id := range sortedKeys(c.securityGroups) {
		out = append(out, cloneSecurityGroup(c.securityGroups[id]))
	}
	return out
}

// LoadBalancers returns every load balancer by name.
func (c *Cloud) LoadBalancers() []LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []LoadBalancer
	for _, name := range sortedKeys(c.loadBalancers) {
		out = append(out, cloneLoadBalancer(c.loadBalancers[name]))
	}
	return out
}

// NetworkLoadBalancers, TargetGroups and NetworkListeners return every
// ELBv2 resource by ARN.
func (c *Cloud) NetworkLoadBalancers() []NetworkLoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []NetworkLoadBalancer
	for _, lb := range byARN(c.nlbs, func(*NetworkLoadBalancer) bool { return true }) {
		cp := *lb
		cp.Subnets, cp.Zones, cp.SecurityGroups = slices.Clone(lb.Subnets), slices.Clone(lb.Zones), slices.Clone(lb.SecurityGroups)
		cp.Tags, cp.Attributes = cloneTags(lb.Tags), cloneTags(lb.Attributes)
		out = append(out, cp)
	}
	return out
}

func (c *Cloud) TargetGroups() []TargetGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []TargetGroup
	for _, tg := range byARN(c.targetGroups, func(*TargetGroup) bool { return true }) {
		cp := *tg
		cp.Targets, cp.Tags = slices.Clone(tg.Targets), cloneTags(tg.Tags)
		out = append(out, cp)
	}
	return out
}

func (c *Cloud) NetworkListeners() []NetworkListener {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []NetworkListener
	for _, l := range byARN(c.listeners, func(*NetworkListener) bool { return true }) {
		cp := *l
		cp.Tags = cloneTags(l.Tags)
		out = append(out, cp)
	}
	return out
}

// Requests returns how many requests each action received, keyed
// "ec2:DescribeInstances", "elasticloadbalancing:CreateLoadBalancer" or
// "elbv2:CreateTargetGroup",
// faults and refused signatures included. A request whose action cannot
// be read counts under "unknown".
func (c *Cloud) Requests() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.requests)
}

// AuthFailures counts the requests refused for their signature.
func (c *Cloud) AuthFailures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authFailures
}

func (c *Cloud) defaultVpc() *Vpc {
	for _, v := range c.vpcs {
		if v.Default {
			return v
		}
	}
	return nil
}

func (c *Cloud) sortedSubnets() []*Subnet {
	var out []*Subnet
	for _, id := range sortedKeys(c.subnets) {
		out = append(out, c.subnets[id])
	}
	return out
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func cloneTags(t map[string]string) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return maps.Clone(t)
}

func cloneInstance(in *Instance) Instance {
	out := *in
	out.Tags = cloneTags(in.Tags)
	out.SecurityGroups = slices.Clone(in.SecurityGroups)
	return out
}

func cloneRouteTable(rt *RouteTable) RouteTable {
	out := *rt
	out.Routes = slices.Clone(rt.Routes)
	out.Tags = cloneTags(rt.Tags)
	out.Subnets = slices.Clone(rt.Subnets)
	return out
}

func clonePermissions(ps []Permission) []Permission {
	out := make([]Permission, len(ps))
	for i, p := range ps {
		out[i] = p
		out[i].CIDRs = slices.Clone(p.CIDRs)
		out[i].GroupIDs = slices.Clone(p.GroupIDs)
	}
	return out
}

func cloneSecurityGroup(sg *SecurityGroup) SecurityGroup {
	out := *sg
	out.Ingress = clonePermissions(sg.Ingress)
	out.Egress = clonePermissions(sg.Egress)
	out.Tags = cloneTags(sg.Tags)
	return out
}

func cloneLoadBalancer(lb *LoadBalancer) LoadBalancer {
	out := *lb
	out.Listeners = slices.Clone(lb.Listeners)
	out.Zones = slices.Clone(lb.Zones)
	out.Subnets = slices.Clone(lb.Subnets)
	out.SecurityGroups = slices.Clone(lb.SecurityGroups)
	out.Instances = slices.Clone(lb.Instances)
	out.Tags = cloneTags(lb.Tags)
	out.Attributes.Additional = maps.Clone(lb.Attributes.Additional)
	return out
}

// validID reports whether id is prefix-<8 or 17 hex digits>, the forms
// EC2 accepts.
func validID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	if !ok || (len(rest) != 8 && len(rest) != 17) {
		return false
	}
	for _, r := range rest {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
