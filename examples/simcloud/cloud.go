package simcloud

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// DefaultZones are used when Options.Zones is empty.
var DefaultZones = []Zone{
	{Zone: "sim-1a", Region: "sim-1"},
	{Zone: "sim-1b", Region: "sim-1"},
	{Zone: "sim-1c", Region: "sim-1"},
}

// DefaultInstanceType is given to instances created without a type.
const DefaultInstanceType = "sim.small"

// Options configure a Cloud. The zero value is usable: no auth, default
// pool and zones, no faults.
type Options struct {
	// Token is the bearer token required on /v1. Empty disables /v1 auth,
	// which is only meant for tests.
	Token string
	// AdminToken, when set, is the bearer token required on /admin.
	AdminToken string

	// IPPool is the prefix load balancer IPs come from; DefaultIPPool
	// when zero.
	IPPool netip.Prefix
	// IPPoolStart is the first address handed out; the pool base + 10
	// when zero (base + 1 in pools smaller than that).
	IPPoolStart netip.Addr

	// Zones are reported by GET /v1/zones (together with the zones of
	// existing instances); DefaultZones when empty.
	Zones []Zone
	// Instances are created by New and again by Reset.
	Instances []Instance

	// Seed seeds the RNG behind Fault.ErrorRate; runs with the same seed
	// and the same request sequence inject the same failures.
	Seed uint64
	// Global is the initial global latency and rate limit.
	Global Global

	// Logger, when set, gets one line per HTTP request.
	Logger *slog.Logger
}

// Validate reports whether New would accept the options.
func (o Options) Validate() error {
	_, err := newCloud(o)
	return err
}

// Cloud is a simulated cloud. All methods are safe for concurrent use.
type Cloud struct {
	opts    Options
	pool    ipPool
	global0 Global
	handler http.Handler

	mu        sync.Mutex
	instances map[string]Instance     // by ID
	lbs       map[string]LoadBalancer // by name
	routes    map[string]Route        // by name
	seqInst   int
	seqLB     int
	seqRoute  int
	seqAddr   int
	nextIP    netip.Addr
	faults    faultinject.Set
	global    Global
	bucket    tokenBucket
	counters  Counters
}

// New returns a Cloud configured by opts. It panics if the options are
// invalid (see Options.Validate), as that is a programming error in tests.
func New(opts Options) *Cloud {
	c, err := newCloud(opts)
	if err != nil {
		panic("simcloud: " + err.Error())
	}
	return c
}

func newCloud(opts Options) (*Cloud, error) {
	pool, err := newIPPool(opts.IPPool, opts.IPPoolStart)
	if err != nil {
		return nil, err
	}
	if len(opts.Zones) == 0 {
		opts.Zones = DefaultZones
	}
	opts.Zones = slices.Clone(opts.Zones)
	for _, z := range opts.Zones {
		if z.Zone == "" || z.Region == "" {
			return nil, fmt.Errorf("zone %+v: zone and region must be set", z)
		}
	}
	opts.Instances = slices.Clone(opts.Instances)
	global, err := opts.Global.normalize()
	if err != nil {
		return nil, err
	}
	c := &Cloud{opts: opts, pool: pool, global0: global}
	if err := c.resetLocked(); err != nil {
		return nil, err
	}
	c.handler = c.newHandler()
	return c, nil
}

// Reset restores the state New created: preloaded instances only, no load
// balancers, routes or faults, zeroed counters and ID sequences, the
// initial global settings and a reseeded RNG.
func (c *Cloud) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.resetLocked(); err != nil {
		panic("simcloud: reset: " + err.Error()) // validated by New
	}
}

func (c *Cloud) resetLocked() error {
	c.instances = map[string]Instance{}
	c.lbs = map[string]LoadBalancer{}
	c.routes = map[string]Route{}
	c.seqInst, c.seqLB, c.seqRoute, c.seqAddr = 0, 0, 0, 0
	c.nextIP = c.pool.first
	c.faults.Reset(c.opts.Seed)
	c.global = c.global0
	c.bucket.reset(c.global, time.Now())
	c.counters = newCounters()
	for _, in := range c.opts.Instances {
		if _, err := c.addInstanceLocked(in); err != nil {
			return fmt.Errorf("instance %q: %w", in.Name, err)
		}
	}
	return nil
}

// ---- instances ----

// AddInstance creates an instance. ID is generated ("i-0001", ...) when
// empty; zone, region, type and state get defaults; an instance without
// addresses gets an InternalIP from 10.0.0.0/16 and a Hostname equal to its
// name.
func (c *Cloud) AddInstance(in Instance) (Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addInstanceLocked(in)
}

func (c *Cloud) addInstanceLocked(in Instance) (Instance, error) {
	in = cloneInstance(in)
	if in.ID != "" {
		if !validName(in.ID) {
			return Instance{}, errorf(ErrInvalid, "invalid instance id %q", in.ID)
		}
		if _, ok := c.instances[in.ID]; ok {
			return Instance{}, errorf(ErrConflict, "instance %q already exists", in.ID)
		}
	}
	if err := c.checkInstanceLocked(&in); err != nil {
		return Instance{}, err
	}
	if in.ID == "" {
		for {
			c.seqInst++
			in.ID = fmt.Sprintf("i-%04d", c.seqInst)
			if _, ok := c.instances[in.ID]; !ok {
				break
			}
		}
	}
	if len(in.Addresses) == 0 {
		c.seqAddr++
		n := c.seqAddr
		in.Addresses = []Address{
			{Type: AddressInternalIP, Address: fmt.Sprintf("10.0.%d.%d", (n/254)%256, n%254+1)},
			{Type: AddressHostname, Address: in.Name},
		}
	}
	c.instances[in.ID] = in
	return cloneInstance(in), nil
}

// checkInstanceLocked validates and defaults everything but the ID.
func (c *Cloud) checkInstanceLocked(in *Instance) error {
	if in.Name == "" {
		return errorf(ErrInvalid, "instance name must be set")
	}
	for id, other := range c.instances {
		if other.Name == in.Name && id != in.ID {
			return errorf(ErrConflict, "instance named %q already exists (%s)", in.Name, id)
		}
	}
	if in.Zone == "" {
		in.Zone = c.opts.Zones[0].Zone
	}
	if in.Region == "" {
		in.Region = c.opts.Zones[0].Region
		for _, z := range c.opts.Zones {
			if z.Zone == in.Zone {
				in.Region = z.Region
				break
			}
		}
	}
	if in.Type == "" {
		in.Type = DefaultInstanceType
	}
	switch in.State {
	case "":
		in.State = StateRunning
	case StateRunning, StateStopped:
	default:
		return errorf(ErrInvalid, "invalid state %q (want %q or %q)", in.State, StateRunning, StateStopped)
	}
	for _, a := range in.Addresses {
		switch a.Type {
		case AddressInternalIP, AddressExternalIP, AddressHostname, AddressInternalDNS, AddressExternalDNS:
		default:
			return errorf(ErrInvalid, "invalid address type %q", a.Type)
		}
		if a.Address == "" {
			return errorf(ErrInvalid, "empty %s address", a.Type)
		}
	}
	return nil
}

// UpdateInstance replaces every field of the instance with ID in.ID,
// applying the same defaults as AddInstance (except addresses, which stay
// as given).
func (c *Cloud) UpdateInstance(in Instance) (Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.instances[in.ID]; !ok {
		return Instance{}, errorf(ErrNotFound, "instance %q not found", in.ID)
	}
	in = cloneInstance(in)
	if err := c.checkInstanceLocked(&in); err != nil {
		return Instance{}, err
	}
	c.instances[in.ID] = in
	return cloneInstance(in), nil
}

// SetInstanceState sets an instance's state to StateRunning or
// StateStopped.
func (c *Cloud) SetInstanceState(id, state string) error {
	_, err := c.setInstanceState(id, state)
	return err
}

func (c *Cloud) setInstanceState(id, state string) (Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.instances[id]
	if !ok {
		return Instance{}, errorf(ErrNotFound, "instance %q not found", id)
	}
	if state != StateRunning && state != StateStopped {
		return Instance{}, errorf(ErrInvalid, "invalid state %q (want %q or %q)", state, StateRunning, StateStopped)
	}
	in.State = state
	c.instances[id] = in
	return cloneInstance(in), nil
}

// DeleteInstance terminates an instance. Like real clouds, it is removed
// from load balancer targets; routes to it remain and become blackholes.
func (c *Cloud) DeleteInstance(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.instances[id]; !ok {
		return errorf(ErrNotFound, "instance %q not found", id)
	}
	delete(c.instances, id)
	for name, lb := range c.lbs {
		if i := slices.Index(lb.Targets, id); i >= 0 {
			lb.Targets = slices.Delete(slices.Clone(lb.Targets), i, i+1)
			c.lbs[name] = lb
		}
	}
	return nil
}

// Instance returns the instance with the given ID.
func (c *Cloud) Instance(id string) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.instances[id]
	return cloneInstance(in), ok
}

// Instances returns all instances sorted by ID.
func (c *Cloud) Instances() []Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instancesLocked("", "")
}

// instancesLocked lists instances sorted by ID, filtered by name and ID
// when those are non-empty.
func (c *Cloud) instancesLocked(name, id string) []Instance {
	out := make([]Instance, 0, len(c.instances))
	for _, in := range c.instances {
		if (name == "" || in.Name == name) && (id == "" || in.ID == id) {
			out = append(out, cloneInstance(in))
		}
	}
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Zones returns the configured zones plus those of existing instances,
// sorted by zone.
func (c *Cloud) Zones() []Zone {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zonesLocked()
}

func (c *Cloud) zonesLocked() []Zone {
	out := slices.Clone(c.opts.Zones)
	for _, in := range c.instances {
		out = append(out, Zone{Zone: in.Zone, Region: in.Region})
	}
	slices.SortFunc(out, func(a, b Zone) int {
		return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.Region, b.Region))
	})
	return slices.Compact(out)
}

// ---- load balancers ----

// CreateLoadBalancer creates a load balancer, allocating its IP from the
// pool unless lb.IP requests a specific free pool address. The name must
// be unused (ErrConflict otherwise).
func (c *Cloud) CreateLoadBalancer(lb LoadBalancer) (LoadBalancer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.createLoadBalancerLocked(lb)
}

func (c *Cloud) createLoadBalancerLocked(lb LoadBalancer) (LoadBalancer, error) {
	lb = cloneLoadBalancer(lb)
	if !validName(lb.Name) {
		return LoadBalancer{}, errorf(ErrInvalid, "invalid load balancer name %q (1-128 of [A-Za-z0-9._-], starting with a letter or digit)", lb.Name)
	}
	if _, ok := c.lbs[lb.Name]; ok {
		return LoadBalancer{}, errorf(ErrConflict, "load balancer %q already exists", lb.Name)
	}
	if err := c.checkLoadBalancerLocked(&lb); err != nil {
		return LoadBalancer{}, err
	}
	held := map[netip.Addr]string{}
	for _, other := range c.lbs {
		held[netip.MustParseAddr(other.IP)] = other.Name
	}
	var ip netip.Addr
	if lb.IP != "" {
		a, err := netip.ParseAddr(lb.IP)
		if err != nil || !c.pool.contains(a) {
			return LoadBalancer{}, errorf(ErrInvalid, "ip %q is not an address of the pool %s", lb.IP, c.pool)
		}
		if owner, ok := held[a]; ok {
			return LoadBalancer{}, errorf(ErrConflict, "ip %s is in use by load balancer %q", a, owner)
		}
		ip = a
	} else {
		// Hand addresses out round-robin from a cursor, skipping held
		// ones, so a just-released IP is not immediately reused.
		a := c.nextIP
		for range len(held) + 1 {
			if _, ok := held[a]; !ok {
				ip = a
				c.nextIP = c.pool.next(a)
				break
			}
			a = c.pool.next(a)
		}
		if !ip.IsValid() {
			return LoadBalancer{}, errorf(ErrExhausted, "ip pool %s exhausted", c.pool)
		}
	}
	lb.IP = ip.String()
	c.seqLB++
	lb.ID = fmt.Sprintf("lb-%04d", c.seqLB)
	c.lbs[lb.Name] = lb
	return cloneLoadBalancer(lb), nil
}

// checkLoadBalancerLocked validates the client-settable fields other than
// name and IP, and normalizes them (targets sorted, empty optional fields
// removed).
func (c *Cloud) checkLoadBalancerLocked(lb *LoadBalancer) error {
	if len(lb.Ports) == 0 {
		return errorf(ErrInvalid, "at least one port is required")
	}
	type key struct {
		proto string
		port  int
	}
	seen := map[key]bool{}
	for _, p := range lb.Ports {
		if p.Protocol != ProtocolTCP && p.Protocol != ProtocolUDP {
			return errorf(ErrInvalid, "port %d: invalid protocol %q (want TCP or UDP)", p.Port, p.Protocol)
		}
		if !validPort(p.Port) || !validPort(p.NodePort) {
			return errorf(ErrInvalid, "port %d/%s: port and nodePort must be 1-65535", p.Port, p.Protocol)
		}
		if seen[key{p.Protocol, p.Port}] {
			return errorf(ErrInvalid, "duplicate port %d/%s", p.Port, p.Protocol)
		}
		seen[key{p.Protocol, p.Port}] = true
	}
	slices.Sort(lb.Targets)
	for i, t := range lb.Targets {
		if i > 0 && lb.Targets[i-1] == t {
			return errorf(ErrInvalid, "duplicate target %q", t)
		}
		if _, ok := c.instances[t]; !ok {
			return errorf(ErrInvalid, "unknown target instance %q", t)
		}
	}
	if hc := lb.HealthCheck; hc != nil {
		if !validPort(hc.NodePort) {
			return errorf(ErrInvalid, "healthCheck.nodePort must be 1-65535")
		}
		if hc.Path != "" && hc.Path[0] != '/' {
			return errorf(ErrInvalid, "healthCheck.path must start with /")
		}
	}
	for _, r := range lb.SourceRanges {
		if _, err := netip.ParsePrefix(r); err != nil {
			return errorf(ErrInvalid, "invalid source range %q", r)
		}
	}
	return nil
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

// UpdateLoadBalancer replaces ports, targets, health check, source ranges
// and tags of the named load balancer. lb.Name and lb.IP must be empty or
// unchanged; lb.ID is ignored.
func (c *Cloud) UpdateLoadBalancer(name string, lb LoadBalancer) (LoadBalancer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updateLoadBalancerLocked(name, lb)
}

func (c *Cloud) updateLoadBalancerLocked(name string, lb LoadBalancer) (LoadBalancer, error) {
	cur, ok := c.lbs[name]
	if !ok {
		return LoadBalancer{}, errorf(ErrNotFound, "load balancer %q not found", name)
	}
	lb = cloneLoadBalancer(lb)
	if lb.Name != "" && lb.Name != name {
		return LoadBalancer{}, errorf(ErrInvalid, "name %q does not match %q (load balancers cannot be renamed)", lb.Name, name)
	}
	if lb.IP != "" {
		if a, err := netip.ParseAddr(lb.IP); err != nil || a.String() != cur.IP {
			return LoadBalancer{}, errorf(ErrInvalid, "ip %q does not match %s (the ip cannot be changed)", lb.IP, cur.IP)
		}
	}
	if err := c.checkLoadBalancerLocked(&lb); err != nil {
		return LoadBalancer{}, err
	}
	lb.ID, lb.Name, lb.IP = cur.ID, cur.Name, cur.IP
	c.lbs[name] = lb
	return cloneLoadBalancer(lb), nil
}

// DeleteLoadBalancer deletes the named load balancer, releasing its IP.
func (c *Cloud) DeleteLoadBalancer(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLoadBalancerLocked(name)
}

func (c *Cloud) deleteLoadBalancerLocked(name string) error {
	if _, ok := c.lbs[name]; !ok {
		return errorf(ErrNotFound, "load balancer %q not found", name)
	}
	delete(c.lbs, name)
	return nil
}

// LoadBalancer returns the named load balancer.
func (c *Cloud) LoadBalancer(name string) (LoadBalancer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.lbs[name]
	return cloneLoadBalancer(lb), ok
}

// LoadBalancers returns all load balancers sorted by name.
func (c *Cloud) LoadBalancers() []LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadBalancersLocked()
}

func (c *Cloud) loadBalancersLocked() []LoadBalancer {
	out := make([]LoadBalancer, 0, len(c.lbs))
	for _, lb := range c.lbs {
		out = append(out, cloneLoadBalancer(lb))
	}
	slices.SortFunc(out, func(a, b LoadBalancer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// ---- routes ----

// CreateRoute creates a route. The target is r.TargetInstance, or the
// instance named r.TargetName. Name and destination must both be unused
// (ErrConflict otherwise), so a controller creating duplicates is caught.
func (c *Cloud) CreateRoute(r Route) (Route, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.createRouteLocked(r)
}

func (c *Cloud) createRouteLocked(r Route) (Route, error) {
	if !validName(r.Name) {
		return Route{}, errorf(ErrInvalid, "invalid route name %q (1-128 of [A-Za-z0-9._-], starting with a letter or digit)", r.Name)
	}
	if _, ok := c.routes[r.Name]; ok {
		return Route{}, errorf(ErrConflict, "route %q already exists", r.Name)
	}
	p, err := netip.ParsePrefix(r.DestinationCIDR)
	if err != nil {
		return Route{}, errorf(ErrInvalid, "invalid destinationCIDR %q", r.DestinationCIDR)
	}
	if p.Masked() != p {
		return Route{}, errorf(ErrInvalid, "destinationCIDR %q is not a network address (want %s)", r.DestinationCIDR, p.Masked())
	}
	switch {
	case r.TargetInstance != "":
		in, ok := c.instances[r.TargetInstance]
		if !ok {
			return Route{}, errorf(ErrInvalid, "unknown target instance %q", r.TargetInstance)
		}
		if r.TargetName != "" && r.TargetName != in.Name {
			return Route{}, errorf(ErrInvalid, "targetName %q is not the name of %s (%q)", r.TargetName, in.ID, in.Name)
		}
	case r.TargetName != "":
		for _, in := range c.instances {
			if in.Name == r.TargetName {
				r.TargetInstance = in.ID
			}
		}
		if r.TargetInstance == "" {
			return Route{}, errorf(ErrInvalid, "no instance named %q", r.TargetName)
		}
	default:
		return Route{}, errorf(ErrInvalid, "targetInstance or targetName must be set")
	}
	for _, other := range c.routes {
		if op, _ := netip.ParsePrefix(other.DestinationCIDR); op == p {
			return Route{}, errorf(ErrConflict, "route %q already exists for destination %s", other.Name, r.DestinationCIDR)
		}
	}
	c.seqRoute++
	stored := Route{
		ID:              fmt.Sprintf("r-%04d", c.seqRoute),
		Name:            r.Name,
		DestinationCIDR: r.DestinationCIDR,
		TargetInstance:  r.TargetInstance,
	}
	c.routes[r.Name] = stored
	return c.viewRouteLocked(stored), nil
}

// viewRouteLocked fills in the output-only fields from the target.
func (c *Cloud) viewRouteLocked(r Route) Route {
	if in, ok := c.instances[r.TargetInstance]; ok {
		r.TargetName, r.Blackhole = in.Name, false
	} else {
		r.TargetName, r.Blackhole = "", true
	}
	return r
}

// DeleteRoute deletes the named route.
func (c *Cloud) DeleteRoute(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteRouteLocked(name)
}

func (c *Cloud) deleteRouteLocked(name string) error {
	if _, ok := c.routes[name]; !ok {
		return errorf(ErrNotFound, "route %q not found", name)
	}
	delete(c.routes, name)
	return nil
}

// Route returns the named route.
func (c *Cloud) Route(name string) (Route, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.routes[name]
	if !ok {
		return Route{}, false
	}
	return c.viewRouteLocked(r), true
}

// Routes returns all routes sorted by name.
func (c *Cloud) Routes() []Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.routesLocked()
}

func (c *Cloud) routesLocked() []Route {
	out := make([]Route, 0, len(c.routes))
	for _, r := range c.routes {
		out = append(out, c.viewRouteLocked(r))
	}
	slices.SortFunc(out, func(a, b Route) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// ---- faults, global settings, counters ----

// SetFault adds f, or replaces the fault with the same name, and returns it
// with defaults applied. New faults are evaluated after existing ones.
func (c *Cloud) SetFault(f Fault) (Fault, error) {
	if err := f.check(); err != nil {
		return Fault{}, err
	}
	added, err := c.faults.Add(faultinject.Fault(f))
	if err != nil {
		return Fault{}, errorf(ErrInvalid, "%v", err)
	}
	return Fault(added), nil
}

// Faults returns the active faults in evaluation order; FailNext shows the
// remaining count.
func (c *Cloud) Faults() []Fault {
	faults := c.faults.Faults()
	out := make([]Fault, len(faults))
	for i, f := range faults {
		out[i] = Fault(f)
	}
	return out
}

// ClearFault removes the named fault and reports whether it existed.
func (c *Cloud) ClearFault(name string) bool { return c.faults.Remove(name) }

// ClearFaults removes all faults. The global latency and rate limit are
// kept; see SetGlobal.
func (c *Cloud) ClearFaults() { c.faults.Clear() }

// SetGlobal replaces the global latency and rate limit. The rate limit
// bucket starts full.
func (c *Cloud) SetGlobal(g Global) (Global, error) {
	g, err := g.normalize()
	if err != nil {
		return Global{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.global = g
	c.bucket.reset(g, time.Now())
	return g, nil
}

// Global returns the global latency and rate limit.
func (c *Cloud) Global() Global {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.global
}

// Counters returns a snapshot of the request counters.
func (c *Cloud) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counters.clone()
}

// ResetCounters zeroes the request counters.
func (c *Cloud) ResetCounters() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counters = newCounters()
}
