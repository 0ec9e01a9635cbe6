// Package hcloudfake is a stateful fake of the Hetzner Cloud API v1, for
// testing cloud controllers (the wasmccm hcloud module and the official
// hcloud-cloud-controller-manager) without a Hetzner account.
//
// It serves the endpoints those controllers use: servers, load balancers
// and their actions, networks and their route actions, actions, locations,
// server types and load balancer types. Every response body is built from
// the types of github.com/hetznercloud/hcloud-go/v2/hcloud/schema, so the
// wire format is the real API's, not one designed with a client in mind;
// the tests drive it with the real hcloud-go client.
//
// Like the real API it paginates lists (page, per_page, meta.pagination),
// filters by name and label_selector, reports errors as
// {"error":{"code":...,"message":...}} with the API's error codes, keeps a
// token bucket per project and reports it in RateLimit-Limit/-Remaining/
// -Reset headers (refusing with 429 rate_limit_exceeded when it is empty,
// if Options.EnforceRateLimit), refuses targets and services
// beyond a load balancer type's limits (and a change to a type they do not
// fit), and answers writes with actions that are "running" until polled
// (Options.ActionPolls times).
// Faults (latency, 5xx, 429 with Retry-After, 401) come from package
// faultinject.
//
//	cloud := hcloudfake.New(hcloudfake.Options{Token: "secret"})
//	srv := httptest.NewServer(cloud.Handler())
//	net := cloud.AddNetwork("k8s", "10.0.0.0/16")
//	cloud.AddServer(hcloudfake.Server{Name: "node-a", Network: net.ID})
package hcloudfake

import (
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// Options configure a Cloud. The zero value is usable: no auth, actions
// finish at their first poll.
type Options struct {
	// Token, when set, is the bearer token every request must carry.
	Token string
	// ActionPolls is how many times an action is read as "running" before
	// it reads "success"; it makes clients exercise action polling.
	ActionPolls int
	// RateLimit is the size of the project's token bucket, in requests
	// per hour (3600 like the real API when 0): the bucket holds
	// RateLimit tokens, each request spends one and one comes back every
	// hour/RateLimit (a second at the default). Responses carry
	// RateLimit-Limit, RateLimit-Remaining (tokens left) and
	// RateLimit-Reset (the Unix second at which the bucket is full).
	RateLimit int
	// EnforceRateLimit refuses a request that finds the bucket empty with
	// 429 rate_limit_exceeded, as the real API does. When false (the zero
	// value, which callers sending many requests rely on) such a request is
	// served anyway and the headers report 0 remaining.
	EnforceRateLimit bool
	// Now is the clock the bucket refills by; time.Now when nil. Tests set
	// it to step through refills.
	Now func() time.Time
}

// Cloud is the fake API's state. Its methods are safe for concurrent use.
type Cloud struct {
	opts Options
	// Faults are applied to every /v1 request.
	Faults faultinject.Set

	mu            sync.Mutex
	seq           int64
	servers       map[int64]*schema.Server
	loadBalancers map[int64]*schema.LoadBalancer
	networks      map[int64]*schema.Network
	actions       map[int64]*action
	// full is when the token bucket is full again: each spent token
	// moves it one refill interval later.
	full      time.Time
	throttled int
	requests  map[string]int
}

// action is an action and the polls it still answers "running".
type action struct {
	schema.Action
	pollsLeft int
}

// New returns an empty cloud with the locations, server types and load
// balancer types of the real API's public catalogue.
func New(opts Options) *Cloud {
	if opts.RateLimit <= 0 {
		opts.RateLimit = 3600
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cloud{opts: opts}
	c.Reset()
	return c
}

// Reset removes every server, load balancer, network, action and fault,
// refills the rate limit and zeroes the request and throttle counts.
func (c *Cloud) Reset() {
	c.Faults.Clear()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = 0
	c.servers = map[int64]*schema.Server{}
	c.loadBalancers = map[int64]*schema.LoadBalancer{}
	c.networks = map[int64]*schema.Network{}
	c.actions = map[int64]*action{}
	c.full = time.Time{}
	c.throttled = 0
	c.requests = map[string]int{}
}

// Locations, server types and load balancer types of the catalogue.
var (
	Locations = []schema.Location{
		{ID: 1, Name: "fsn1", Description: "Falkenstein DC Park 1", Country: "DE", City: "Falkenstein", NetworkZone: "eu-central"},
		{ID: 2, Name: "nbg1", Description: "Nuremberg DC Park 1", Country: "DE", City: "Nuremberg", NetworkZone: "eu-central"},
		{ID: 3, Name: "hel1", Description: "Helsinki DC Park 1", Country: "FI", City: "Helsinki", NetworkZone: "eu-central"},
		{ID: 4, Name: "ash", Description: "Ashburn, VA", Country: "US", City: "Ashburn, VA", NetworkZone: "us-east"},
	}
	ServerTypes = []schema.ServerType{
		{ID: 22, Name: "cpx11", Description: "CPX 11", Cores: 2, Memory: 2, Disk: 40, StorageType: "local", CPUType: "shared", Architecture: "x86"},
		{ID: 23, Name: "cpx21", Description: "CPX 21", Cores: 3, Memory: 4, Disk: 80, StorageType: "local", CPUType: "shared", Architecture: "x86"},
		{ID: 45, Name: "cax11", Description: "CAX11", Cores: 2, Memory: 4, Disk: 40, StorageType: "local", CPUType: "shared", Architecture: "arm"},
	}
	LoadBalancerTypes = []schema.LoadBalancerType{
		{ID: 1, Name: "lb11", Description: "LB11", MaxConnections: 10000, MaxServices: 5, MaxTargets: 25, MaxAssignedCertificates: 10},
		{ID: 2, Name: "lb21", Description: "LB21", MaxConnections: 20000, MaxServices: 15, MaxTargets: 75, MaxAssignedCertificates: 25},
		{ID: 3, Name: "lb31", Description: "LB31", MaxConnections: 40000, MaxServices: 30, MaxTargets: 150, MaxAssignedCertificates: 50},
	}
)

func findByName[T any](list []T, name string, nameOf func(*T) string) (T, bool) {
	for i := range list {
		if nameOf(&list[i]) == name {
			return list[i], true
		}
	}
	var zero T
	return zero, false
}

func location(name string) (schema.Location, bool) {
	return findByName(Locations, name, func(l *schema.Location) string { return l.Name })
}

func serverType(name string) (schema.ServerType, bool) {
	return findByName(ServerTypes, name, func(t *schema.ServerType) string { return t.Name })
}

func loadBalancerType(idOrName schema.IDOrName) (schema.LoadBalancerType, bool) {
	for _, t := range LoadBalancerTypes {
		if t.ID == idOrName.ID || (idOrName.Name != "" && t.Name == idOrName.Name) {
			return t, true
		}
	}
	return schema.LoadBalancerType{}, false
}

// SetActionPolls changes how many polls new actions answer "running";
// actions already started keep theirs.
func (c *Cloud) SetActionPolls(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.ActionPolls = n
}

// Server describes a server to add with AddServer.
type Server struct {
	Name string
	// Type is a server type name; "cpx11" when empty.
	Type string
	// Location is a location name; "fsn1" when empty.
	Location string
	// Status is "running" when empty; "off" reads as shut down.
	Status string
	Labels map[string]string
	// Network, when not 0, attaches the server to that network with the
	// next free address of its range.
	Network int64
	// NoIPv4 and NoIPv6 leave out a public address.
	NoIPv4, NoIPv6 bool
}

// AddServer creates a server as the console would, and returns it.
func (c *Cloud) AddServer(s Server) (schema.Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	srv, err := c.addServerLocked(s)
	if err != nil {
		return schema.Server{}, err
	}
	return clone(srv), nil
}

func (c *Cloud) addServerLocked(s Server) (*schema.Server, *apiError) {
	if s.Name == "" {
		return nil, invalidInput("name", "server name is required")
	}
	for _, other := range c.servers {
		if other.Name == s.Name {
			return nil, &apiError{409, "uniqueness_error", "server name is already used"}
		}
	}
	typ, ok := serverType(defaultString(s.Type, "cpx11"))
	if !ok {
		return nil, invalidInput("server_type", "server type "+strconv.Quote(s.Type)+" not found")
	}
	loc, ok := location(defaultString(s.Location, "fsn1"))
	if !ok {
		return nil, invalidInput("location", "location "+strconv.Quote(s.Location)+" not found")
	}
	id := c.nextID()
	srv := &schema.Server{
		ID: id, Name: s.Name, Status: defaultString(s.Status, "running"), Created: time.Now().UTC().Truncate(time.Second),
		ServerType: typ, Location: loc, Labels: s.Labels, IncludedTraffic: 21990232555520,
		PrivateNet: []schema.ServerPrivateNet{}, Volumes: []int64{}, LoadBalancers: []int64{},
		PublicNet: schema.ServerPublicNet{FloatingIPs: []int64{}, Firewalls: []schema.ServerFirewall{}},
	}
	if srv.Labels == nil {
		srv.Labels = map[string]string{}
	}
	if !s.NoIPv4 {
		srv.PublicNet.IPv4 = schema.ServerPublicNetIPv4{ID: id, IP: "198.51.100." + strconv.FormatInt(id%250+1, 10),
			DNSPtr: "static." + strconv.FormatInt(id, 10) + ".example.com"}
	}
	if !s.NoIPv6 {
		srv.PublicNet.IPv6 = schema.ServerPublicNetIPv6{ID: id, IP: "2001:db8:" + strconv.FormatInt(id, 16) + "::/64",
			DNSPtr: []schema.ServerPublicNetIPv6DNSPtr{}}
	}
	if s.Network != 0 {
		n := c.networks[s.Network]
		if n == nil {
			return nil, invalidInput("networks", "network "+strconv.FormatInt(s.Network, 10)+" not found")
		}
		ip, err := c.freeIPLocked(n)
		if err != nil {
			return nil, err
		}
		srv.PrivateNet = append(srv.PrivateNet, schema.ServerPrivateNet{Network: n.ID, IP: ip, AliasIPs: []string{},
			MACAddress: "86:00:00:00:00:" + strconv.FormatInt(id%100, 10)})
		n.Servers = append(n.Servers, id)
	}
	c.servers[id] = srv
	return srv, nil
}

// DeleteServer removes a server, as deleting it in the console would.
func (c *Cloud) DeleteServer(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteServerLocked(id)
}

func (c *Cloud) deleteServerLocked(id int64) bool {
	if c.servers[id] == nil {
		return false
	}
	delete(c.servers, id)
	for _, n := range c.networks {
		n.Servers = slices.DeleteFunc(n.Servers, func(s int64) bool { return s == id })
	}
	for _, lb := range c.loadBalancers {
		lb.Targets = slices.DeleteFunc(lb.Targets, func(t schema.LoadBalancerTarget) bool {
			return t.Server != nil && t.Server.ID == id
		})
	}
	return true
}

// SetServerStatus sets a server's status, e.g. "off".
func (c *Cloud) SetServerStatus(id int64, status string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.servers[id]; s != nil {
		s.Status = status
		return true
	}
	return false
}

// AddNetwork creates a network with one cloud subnet spanning ipRange in
// the eu-central network zone.
func (c *Cloud) AddNetwork(name, ipRange string) (schema.Network, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.addNetworkLocked(schema.NetworkCreateRequest{Name: name, IPRange: ipRange,
		Subnets: []schema.NetworkSubnet{{Type: "cloud", IPRange: ipRange, NetworkZone: "eu-central"}}})
	if err != nil {
		return schema.Network{}, err
	}
	return clone(n), nil
}

func (c *Cloud) addNetworkLocked(req schema.NetworkCreateRequest) (*schema.Network, *apiError) {
	if req.Name == "" {
		return nil, invalidInput("name", "network name is required")
	}
	if _, err := netip.ParsePrefix(req.IPRange); err != nil {
		return nil, invalidInput("ip_range", "ip_range is not a CIDR")
	}
	n := &schema.Network{ID: c.nextID(), Name: req.Name, Created: time.Now().UTC().Truncate(time.Second), IPRange: req.IPRange,
		Subnets: req.Subnets, Routes: req.Routes, Servers: []int64{}, LoadBalancers: []int64{}, Labels: map[string]string{}}
	if n.Subnets == nil {
		n.Subnets = []schema.NetworkSubnet{}
	}
	if n.Routes == nil {
		n.Routes = []schema.NetworkRoute{}
	}
	if req.Labels != nil {
		n.Labels = *req.Labels
	}
	c.networks[n.ID] = n
	return n, nil
}

// LoadBalancers returns every load balancer, ordered by ID.
func (c *Cloud) LoadBalancers() []schema.LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedClones(c.loadBalancers)
}

// Servers returns every server, ordered by ID.
func (c *Cloud) Servers() []schema.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sortedClones(c.servers)
}

// Network returns a network.
func (c *Cloud) Network(id int64) (schema.Network, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.networks[id]; n != nil {
		return clone(n), true
	}
	return schema.Network{}, false
}

// Requests returns how many /v1 requests each "METHOD /path pattern"
// received, faults and rejections included.
func (c *Cloud) Requests() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.requests))
	for k, v := range c.requests {
		out[k] = v
	}
	return out
}

// Throttled returns how many /v1 requests were refused with 429
// rate_limit_exceeded because the token bucket was empty (not counting
// injected faults).
func (c *Cloud) Throttled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttled
}

// spend takes a token from the bucket at now, if one is left, and returns
// the tokens remaining and when the bucket is full again. Tokens are
// whole: the bucket holds limit·interval of credit, and c.full-now of it
// is spent. Callers hold c.mu.
func (c *Cloud) spend(now time.Time) (ok bool, remaining int, reset time.Time) {
	limit := time.Duration(c.opts.RateLimit)
	interval := max(time.Hour/limit, 1)
	if c.full.Before(now) {
		c.full = now
	}
	spent := c.full.Sub(now)
	if ok = spent+interval <= limit*interval; ok {
		c.full = c.full.Add(interval)
		spent += interval
	}
	return ok, int((limit*interval - spent) / interval), c.full
}

func (c *Cloud) nextID() int64 {
	c.seq++
	return c.seq
}

// freeIPLocked returns the lowest address of n's range used by no server
// or load balancer, skipping the network and gateway addresses.
func (c *Cloud) freeIPLocked(n *schema.Network) (string, *apiError) {
	prefix, err := netip.ParsePrefix(n.IPRange)
	if err != nil {
		return "", &apiError{500, "server_error", "network has a bad ip_range"}
	}
	used := map[string]bool{}
	for _, s := range c.servers {
		for _, p := range s.PrivateNet {
			used[p.IP] = true
		}
	}
	for _, lb := range c.loadBalancers {
		for _, p := range lb.PrivateNet {
			used[p.IP] = true
		}
	}
	ip := prefix.Masked().Addr().Next().Next()
	for ; prefix.Contains(ip); ip = ip.Next() {
		if !used[ip.String()] {
			return ip.String(), nil
		}
	}
	return "", &apiError{422, "ip_range_exhausted", "no free address in network"}
}

// newActionLocked records an action on resources. It is "running" for the
// configured number of polls, then "success".
func (c *Cloud) newActionLocked(command string, resources ...schema.ActionResourceReference) schema.Action {
	a := &action{pollsLeft: c.opts.ActionPolls}
	a.Action = schema.Action{ID: c.nextID(), Command: command, Started: time.Now().UTC().Truncate(time.Second),
		Resources: resources}
	if resources == nil {
		a.Resources = []schema.ActionResourceReference{}
	}
	a.settle()
	c.actions[a.ID] = a
	return a.Action
}

// poll returns the action as a reader sees it now, counting the read.
func (a *action) poll() schema.Action {
	if a.pollsLeft > 0 {
		a.pollsLeft--
	}
	a.settle()
	return a.Action
}

func (a *action) settle() {
	if a.pollsLeft > 0 {
		a.Status, a.Progress, a.Finished = "running", 50, nil
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	a.Status, a.Progress, a.Finished = "success", 100, &now
}

func defaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
