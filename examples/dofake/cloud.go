// Package dofake is a stateful fake of the DigitalOcean API v2, for testing
// cloud controllers (the wasmccm digitalocean module and the official
// digitalocean-cloud-controller-manager) without a DigitalOcean account.
//
// It serves the endpoints those controllers use: droplets (list, filtered
// by name or tag_name, and get), regions (list: the official CCM checks
// its REGION against it at start), load balancers (create, get, list, update,
// delete) and tags (create, get, tag and untag resources). Every body is
// built from the types of github.com/digitalocean/godo, so the wire format
// is the real API's; the tests drive it with the godo client itself.
//
// Like the real API it paginates lists (page, per_page up to 200,
// links.pages and meta.total), reports errors as {"id":...,"message":...}
// with the API's error ids, validates load balancers (forwarding rule
// protocols and certificates, size and size_unit, tag and droplet_ids,
// tag names), creates load balancers "new" and makes them "active" after
// Options.ActivateAfterReads reads and Options.ActivateAfter time, keeps
// a token bucket and reports it in ratelimit-limit/-remaining/-reset
// headers on every answer (refusing with 429 too_many_requests when it is
// empty, if Options.EnforceRateLimit), and checks the bearer token.
// Faults (latency, 5xx, 429 with Retry-After, 401) come from package
// faultinject.
//
//	cloud := dofake.New(dofake.Options{Token: "secret"})
//	srv := httptest.NewServer(cloud.Handler())
//	cloud.AddDroplet(dofake.Droplet{Name: "node-a"})
package dofake

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/digitalocean/godo"

	"github.com/wasmccm/wasmccm/examples/faultinject"
)

// Options configure a Cloud. The zero value is usable: no auth, load
// balancers active as soon as they are created, no 429.
type Options struct {
	// Token, when set, is the bearer token every request must carry.
	Token string
	// ActivateAfterReads is how many reads (a GET of the load balancer,
	// or a listing that includes it) answer a new load balancer "new"
	// before it turns "active".
	ActivateAfterReads int
	// ActivateAfter is how long a new load balancer stays "new" at least.
	ActivateAfter time.Duration
	// RateLimit is the size of the token's bucket, in requests per hour
	// (5,000 like the real API when 0); a token comes back every
	// hour/RateLimit.
	RateLimit int
	// EnforceRateLimit refuses a request that finds the bucket empty with
	// 429 too_many_requests, as the real API does; otherwise it is served
	// and the headers report 0 remaining.
	EnforceRateLimit bool
	// Now is the clock of the bucket and of activation; time.Now when nil.
	Now func() time.Time
}

// Cloud is the fake API's state. Its methods are safe for concurrent use.
type Cloud struct {
	opts Options
	// Faults are applied to every /v2 request.
	Faults faultinject.Set

	mu            sync.Mutex
	seq           int
	droplets      map[int]*godo.Droplet
	loadBalancers map[string]*loadBalancer
	tags          map[string]bool
	full          time.Time // when the token bucket is full again
	throttled     int
	requests      map[string]int
	served        int // requests served, which numbers their request IDs
}

// loadBalancer is a load balancer and what decides when it turns active.
type loadBalancer struct {
	godo.LoadBalancer
	order     int // creation order, in which the API lists
	readsLeft int
	activeAt  time.Time
}

// New returns an empty cloud.
func New(opts Options) *Cloud {
	if opts.RateLimit <= 0 {
		opts.RateLimit = 5000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cloud{opts: opts}
	c.Reset()
	return c
}

// Reset removes every droplet, load balancer, tag and fault, refills the
// rate limit and zeroes the request and throttle counts.
func (c *Cloud) Reset() {
	c.Faults.Clear()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = 0
	c.droplets = map[int]*godo.Droplet{}
	c.loadBalancers = map[string]*loadBalancer{}
	c.tags = map[string]bool{}
	c.full = time.Time{}
	c.throttled = 0
	c.requests = map[string]int{}
}

// Requests returns how many requests each route pattern served, such as
// "GET /v2/droplets/{id}".
func (c *Cloud) Requests() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.requests))
	for k, v := range c.requests {
		out[k] = v
	}
	return out
}

// Throttled returns how many requests were refused with 429.
func (c *Cloud) Throttled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttled
}

// Droplet describes a droplet to add with AddDroplet.
type Droplet struct {
	Name string
	// Region is a region slug; "fra1" when empty.
	Region string
	// Size is a size slug; "s-2vcpu-4gb" when empty.
	Size string
	// Status is "active" when empty; "off" reads as shut down.
	Status string
	Tags   []string
	// NoPublicIPv4 and NoIPv6 leave out a public address; every droplet
	// has a private (VPC) IPv4 address, as every droplet created today.
	NoPublicIPv4, NoIPv6 bool
}

// AddDroplet creates a droplet as the console would, and returns it.
func (c *Cloud) AddDroplet(d Droplet) (godo.Droplet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.Name == "" {
		return godo.Droplet{}, unprocessable("name is required")
	}
	for _, t := range d.Tags {
		if err := checkTag(t); err != nil {
			return godo.Droplet{}, err
		}
		c.tags[t] = true
	}
	id := c.nextID()
	region := cmpOr(d.Region, "fra1")
	size := cmpOr(d.Size, "s-2vcpu-4gb")
	drop := &godo.Droplet{
		ID: id, Name: d.Name, Memory: 4096, Vcpus: 2, Disk: 80, Status: cmpOr(d.Status, "active"),
		Region:   &godo.Region{Slug: region, Name: region, Available: true},
		Size:     &godo.Size{Slug: size, Memory: 4096, Vcpus: 2, Disk: 80, Available: true},
		SizeSlug: size, Image: &godo.Image{ID: 1, Name: "Ubuntu 24.04", Distribution: "Ubuntu", Slug: "ubuntu-24-04-x64"},
		Created: time.Now().UTC().Format(time.RFC3339), Tags: slices.Clone(d.Tags), VolumeIDs: []string{},
		Features: []string{"private_networking"}, VPCUUID: "vpc-0001",
		Networks: &godo.Networks{V4: []godo.NetworkV4{{IPAddress: "10.110.0." + strconv.Itoa(id%250+2), Netmask: "255.255.240.0", Type: "private"}}},
	}
	if drop.Tags == nil {
		drop.Tags = []string{}
	}
	if !d.NoPublicIPv4 {
		drop.Networks.V4 = append(drop.Networks.V4, godo.NetworkV4{IPAddress: "203.0.113." + strconv.Itoa(id%250+2), Netmask: "255.255.240.0",
			Gateway: "203.0.113.1", Type: "public"})
	}
	if !d.NoIPv6 {
		drop.Networks.V6 = []godo.NetworkV6{{IPAddress: "2001:db8:10::" + strconv.FormatInt(int64(id), 16), Netmask: 64, Gateway: "2001:db8:10::1", Type: "public"}}
	}
	c.droplets[id] = drop
	return clone(drop), nil
}

// DeleteDroplet removes a droplet, as destroying it in the console would.
func (c *Cloud) DeleteDroplet(id int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.droplets[id]
	delete(c.droplets, id)
	return ok
}

// SetDropletStatus sets a droplet's status ("active", "off", ...).
func (c *Cloud) SetDropletStatus(id int, status string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.droplets[id]
	if d != nil {
		d.Status = status
	}
	return d != nil
}

// AddLoadBalancer creates an active load balancer with one TCP rule, as
// one made by hand or by another tool would be.
func (c *Cloud) AddLoadBalancer(name string, tags []string) (godo.LoadBalancer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := c.createLoadBalancerLocked(&godo.LoadBalancerRequest{Name: name, Region: "fra1", Tags: tags,
		ForwardingRules: []godo.ForwardingRule{{EntryProtocol: "tcp", EntryPort: 80, TargetProtocol: "tcp", TargetPort: 30080}}})
	if err != nil {
		return godo.LoadBalancer{}, err
	}
	c.activateLocked(lb, true)
	return clone(&lb.LoadBalancer), nil
}

// LoadBalancers returns every load balancer, as the API lists them,
// without counting as reads.
func (c *Cloud) LoadBalancers() []godo.LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []godo.LoadBalancer
	for _, lb := range c.sortedLoadBalancers() {
		out = append(out, clone(&lb.LoadBalancer))
	}
	return out
}

func (c *Cloud) nextID() int {
	c.seq++
	return c.seq
}

// sortedLoadBalancers returns the load balancers in creation order.
func (c *Cloud) sortedLoadBalancers() []*loadBalancer {
	out := make([]*loadBalancer, 0, len(c.loadBalancers))
	for _, lb := range c.loadBalancers {
		out = append(out, lb)
	}
	slices.SortFunc(out, func(a, b *loadBalancer) int { return a.order - b.order })
	return out
}

// sortedDroplets returns the droplets ordered by ID, as the API lists them.
func (c *Cloud) sortedDroplets() []*godo.Droplet {
	out := make([]*godo.Droplet, 0, len(c.droplets))
	for _, d := range c.droplets {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *godo.Droplet) int { return a.ID - b.ID })
	return out
}

// clone deep-copies a godo value through JSON, so that callers never
// share state with the cloud.
func clone[T any](v *T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic("dofake: cloning: " + err.Error())
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic("dofake: cloning: " + err.Error())
	}
	return out
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
