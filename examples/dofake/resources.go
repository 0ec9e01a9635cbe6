package dofake

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/digitalocean/godo"
)

func (c *Cloud) listDroplets(r *http.Request) (int, any, *apiError) {
	q := r.URL.Query()
	c.mu.Lock()
	defer c.mu.Unlock()
	var list []godo.Droplet
	for _, d := range c.sortedDroplets() {
		if name := q.Get("name"); name != "" && d.Name != name {
			continue
		}
		if tag := q.Get("tag_name"); tag != "" && !slices.Contains(d.Tags, tag) {
			continue
		}
		list = append(list, clone(d))
	}
	body, err := page(r, "droplets", list)
	return 200, body, err
}

func (c *Cloud) getDroplet(r *http.Request) (int, any, *apiError) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id <= 0 {
		return 0, nil, notFound() // the API answers a malformed ID as it answers a missing one
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.droplets[id]
	if d == nil {
		return 0, nil, notFound()
	}
	return 200, map[string]any{"droplet": clone(d)}, nil
}

// Regions are the region slugs the fake lists, as the API lists
// DigitalOcean's regions; droplets and load balancers may name others.
var Regions = []string{"ams3", "blr1", "fra1", "lon1", "nyc1", "nyc3", "sfo2", "sfo3", "sgp1", "syd1", "tor1"}

// listRegions lists Regions, which the official CCM reads at start to
// check its REGION.
func (c *Cloud) listRegions(r *http.Request) (int, any, *apiError) {
	list := make([]godo.Region, 0, len(Regions))
	for _, slug := range Regions {
		list = append(list, godo.Region{Slug: slug, Name: slug, Available: true, Sizes: []string{"s-2vcpu-4gb"}, Features: []string{"private_networking"}})
	}
	body, err := page(r, "regions", list)
	return 200, body, err
}

func (c *Cloud) listLoadBalancers(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var list []godo.LoadBalancer
	for _, lb := range c.sortedLoadBalancers() {
		list = append(list, c.readLocked(lb))
	}
	body, err := page(r, "load_balancers", list)
	return 200, body, err
}

func (c *Cloud) getLoadBalancer(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.loadBalancers[r.PathValue("id")]
	if lb == nil {
		return 0, nil, notFound()
	}
	return 200, map[string]any{"load_balancer": c.readLocked(lb)}, nil
}

func (c *Cloud) createLoadBalancer(r *http.Request) (int, any, *apiError) {
	var req godo.LoadBalancerRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := c.createLoadBalancerLocked(&req)
	if err != nil {
		return 0, nil, err
	}
	return 202, map[string]any{"load_balancer": c.viewLocked(lb)}, nil
}

func (c *Cloud) createLoadBalancerLocked(req *godo.LoadBalancerRequest) (*loadBalancer, *apiError) {
	if req.Region == "" {
		return nil, unprocessable("region is required")
	}
	for _, t := range req.Tags {
		if err := checkTag(t); err != nil {
			return nil, err
		}
	}
	lb := &loadBalancer{LoadBalancer: godo.LoadBalancer{
		ID: fmt.Sprintf("4de7ac8b-495b-4884-9a69-%012d", c.nextID()), Status: "new",
		Created: time.Now().UTC().Format(time.RFC3339), Region: &godo.Region{Slug: req.Region, Name: req.Region, Available: true},
		Type: cmpOr(req.Type, godo.LoadBalancerTypeRegional), Network: cmpOr(req.Network, godo.LoadBalancerNetworkTypeExternal),
		NetworkStack: cmpOr(req.NetworkStack, "IPV4"), VPCUUID: cmpOr(req.VPCUUID, "vpc-0001"), Tags: slices.Clone(req.Tags),
		IP: req.IP,
	}}
	if err := c.applyLocked(lb, req); err != nil {
		return nil, err
	}
	for _, t := range req.Tags {
		c.tags[t] = true
	}
	lb.order = c.seq
	lb.readsLeft = c.opts.ActivateAfterReads
	lb.activeAt = c.opts.Now().Add(c.opts.ActivateAfter)
	c.loadBalancers[lb.ID] = lb
	c.activateLocked(lb, false)
	return lb, nil
}

// applyLocked validates req as the API does and sets the load balancer's
// configuration from it: everything an update may change.
func (c *Cloud) applyLocked(lb *loadBalancer, req *godo.LoadBalancerRequest) *apiError {
	if req.Name == "" {
		return unprocessable("name is required")
	}
	if err := c.validate(req); err != nil {
		return err
	}
	hc := godo.HealthCheck{Protocol: "http", Port: 80, Path: "/", CheckIntervalSeconds: 10, ResponseTimeoutSeconds: 5, HealthyThreshold: 5, UnhealthyThreshold: 3}
	if h := req.HealthCheck; h != nil {
		hc = *h
		hc.Protocol = cmpOr(hc.Protocol, "http")
		if hc.Protocol == "tcp" {
			hc.Path = ""
		} else {
			hc.Path = cmpOr(hc.Path, "/")
		}
	}
	ss := godo.StickySessions{Type: "none"}
	if s := req.StickySessions; s != nil && s.Type != "" {
		ss = *s
	}
	lb.Name, lb.Algorithm = req.Name, cmpOr(req.Algorithm, "round_robin")
	lb.ForwardingRules = slices.Clone(req.ForwardingRules)
	lb.HealthCheck, lb.StickySessions = &hc, &ss
	lb.Tag, lb.DropletIDs = req.Tag, slices.Clone(req.DropletIDs)
	lb.RedirectHttpToHttps, lb.EnableProxyProtocol, lb.EnableBackendKeepalive = req.RedirectHttpToHttps, req.EnableProxyProtocol, req.EnableBackendKeepalive
	lb.SizeSlug, lb.SizeUnit = req.SizeSlug, req.SizeUnit
	if lb.SizeSlug == "" && lb.SizeUnit == 0 {
		lb.SizeUnit = 1
	}
	lb.HTTPIdleTimeoutSeconds = req.HTTPIdleTimeoutSeconds
	if lb.HTTPIdleTimeoutSeconds == nil {
		sixty := uint64(60)
		lb.HTTPIdleTimeoutSeconds = &sixty
	}
	lb.DisableLetsEncryptDNSRecords = req.DisableLetsEncryptDNSRecords
	lb.Firewall = req.Firewall
	if lb.Firewall == nil {
		lb.Firewall = &godo.LBFirewall{}
	}
	lb.VPCSubnetUUID = req.VPCSubnetUUID
	return nil
}

// validate checks a create or update request as the API does.
func (c *Cloud) validate(req *godo.LoadBalancerRequest) *apiError {
	if len(req.ForwardingRules) == 0 {
		return unprocessable("at least one forwarding rule is required")
	}
	for _, fr := range req.ForwardingRules {
		if !slices.Contains([]string{"http", "https", "http2", "http3", "tcp", "udp"}, fr.EntryProtocol) ||
			!slices.Contains([]string{"http", "https", "http2", "tcp", "udp"}, fr.TargetProtocol) {
			return unprocessable(fmt.Sprintf("invalid forwarding rule protocols %q to %q", fr.EntryProtocol, fr.TargetProtocol))
		}
		if fr.EntryPort < 1 || fr.EntryPort > 65535 || fr.TargetPort < 1 || fr.TargetPort > 65535 {
			return unprocessable(fmt.Sprintf("invalid forwarding rule ports %d to %d", fr.EntryPort, fr.TargetPort))
		}
		secure := fr.EntryProtocol == "https" || fr.EntryProtocol == "http2" || fr.EntryProtocol == "http3"
		if secure && (fr.CertificateID == "") == !fr.TlsPassthrough {
			return unprocessable("a " + fr.EntryProtocol + " forwarding rule needs either a certificate_id or tls_passthrough")
		}
		if !secure && (fr.CertificateID != "" || fr.TlsPassthrough) {
			return unprocessable("only https, http2 and http3 forwarding rules take a certificate or tls_passthrough")
		}
	}
	if req.SizeSlug != "" && req.SizeUnit != 0 {
		return unprocessable("only one of size and size_unit may be set")
	}
	if req.SizeSlug != "" && !slices.Contains([]string{"lb-small", "lb-medium", "lb-large"}, req.SizeSlug) {
		return unprocessable("invalid size " + strconv.Quote(req.SizeSlug))
	}
	if req.SizeUnit > 100 {
		return unprocessable("size_unit must be between 1 and 100")
	}
	if req.Algorithm != "" && req.Algorithm != "round_robin" && req.Algorithm != "least_connections" {
		return unprocessable("invalid algorithm " + strconv.Quote(req.Algorithm))
	}
	if req.Tag != "" && len(req.DropletIDs) > 0 {
		return unprocessable("only one of tag and droplet_ids may be set")
	}
	for _, id := range req.DropletIDs {
		if c.droplets[id] == nil {
			return unprocessable(fmt.Sprintf("droplet %d not found", id))
		}
	}
	if h := req.HealthCheck; h != nil && h.Protocol != "" && !slices.Contains([]string{"http", "https", "tcp"}, h.Protocol) {
		return unprocessable("invalid health check protocol " + strconv.Quote(h.Protocol))
	}
	if s := req.StickySessions; s != nil && s.Type == "cookies" && (s.CookieName == "" || s.CookieTtlSeconds <= 0) {
		return unprocessable("cookie sticky sessions need a cookie_name and cookie_ttl_seconds")
	}
	if s := req.StickySessions; s != nil && s.Type != "" && s.Type != "none" && s.Type != "cookies" {
		return unprocessable("invalid sticky sessions type " + strconv.Quote(s.Type))
	}
	for field, v := range map[string]string{"type": req.Type, "network": req.Network, "network_stack": req.NetworkStack} {
		allowed := map[string][]string{"type": {"REGIONAL", "REGIONAL_NETWORK", "GLOBAL"}, "network": {"EXTERNAL", "INTERNAL"}, "network_stack": {"IPV4", "DUALSTACK"}}[field]
		if v != "" && !slices.Contains(allowed, v) {
			return unprocessable("invalid " + field + " " + strconv.Quote(v))
		}
	}
	return nil
}

func (c *Cloud) updateLoadBalancer(r *http.Request) (int, any, *apiError) {
	var req godo.LoadBalancerRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.loadBalancers[r.PathValue("id")]
	if lb == nil {
		return 0, nil, notFound()
	}
	switch {
	case req.Region != "" && req.Region != lb.Region.Slug:
		return 0, nil, unprocessable("the region of a load balancer cannot be changed")
	case req.Type != "" && req.Type != lb.Type, req.Network != "" && req.Network != lb.Network:
		return 0, nil, unprocessable("the type and network of a load balancer cannot be changed")
	}
	// The tags of a load balancer change through the tags API; an
	// update leaves them as they are.
	if err := c.applyLocked(lb, &req); err != nil {
		return 0, nil, err
	}
	return 200, map[string]any{"load_balancer": c.readLocked(lb)}, nil
}

func (c *Cloud) deleteLoadBalancer(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loadBalancers[r.PathValue("id")] == nil {
		return 0, nil, notFound()
	}
	delete(c.loadBalancers, r.PathValue("id"))
	return 204, nil, nil
}

// readLocked answers a read of lb: a new one counts the read, and turns
// active once it has been read and aged enough.
func (c *Cloud) readLocked(lb *loadBalancer) godo.LoadBalancer {
	if lb.Status == "new" {
		if lb.readsLeft > 0 {
			lb.readsLeft--
		} else {
			c.activateLocked(lb, false)
		}
	}
	return c.viewLocked(lb)
}

// activateLocked makes a new lb active, at once when now is set, else
// when it has no reads left and its time has come: it gets its addresses.
func (c *Cloud) activateLocked(lb *loadBalancer, now bool) {
	if lb.Status != "new" || !now && (lb.readsLeft > 0 || c.opts.Now().Before(lb.activeAt)) {
		return
	}
	lb.Status = "active"
	if lb.IP == "" {
		lb.IP = "192.0.2." + strconv.Itoa(lb.order%250+2)
	}
	if lb.NetworkStack == "DUALSTACK" {
		lb.IPv6 = "2001:db8:20::" + strconv.FormatInt(int64(lb.order), 16)
	}
}

// viewLocked copies lb as the API shows it: a load balancer that selects
// droplets by tag lists their IDs.
func (c *Cloud) viewLocked(lb *loadBalancer) godo.LoadBalancer {
	out := clone(&lb.LoadBalancer)
	if lb.Tag != "" {
		out.DropletIDs = nil
		for _, d := range c.sortedDroplets() {
			if slices.Contains(d.Tags, lb.Tag) {
				out.DropletIDs = append(out.DropletIDs, d.ID)
			}
		}
	}
	return out
}

// checkTag refuses a tag name the API refuses: letters, digits, colons,
// dashes and underscores, at most 255 characters.
func checkTag(name string) *apiError {
	if name == "" || len(name) > 255 {
		return unprocessable("tag names must be 1 to 255 characters")
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == ':' || r == '-' || r == '_') {
			return unprocessable("tag " + strconv.Quote(name) + " may contain only letters, numbers, colons, dashes and underscores")
		}
	}
	return nil
}

func (c *Cloud) createTag(r *http.Request) (int, any, *apiError) {
	var req godo.TagCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkTag(req.Name); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tags[req.Name] = true
	return 201, map[string]any{"tag": c.tagLocked(req.Name)}, nil
}

func (c *Cloud) getTag(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := r.PathValue("name")
	if !c.tags[name] {
		return 0, nil, notFound()
	}
	return 200, map[string]any{"tag": c.tagLocked(name)}, nil
}

func (c *Cloud) tagLocked(name string) godo.Tag {
	res := &godo.TaggedResources{Droplets: &godo.TaggedDropletsResources{}}
	for _, d := range c.droplets {
		if slices.Contains(d.Tags, name) {
			res.Count++
			res.Droplets.Count++
		}
	}
	for _, lb := range c.loadBalancers {
		if slices.Contains(lb.Tags, name) {
			res.Count++
		}
	}
	return godo.Tag{Name: name, Resources: res}
}

func (c *Cloud) tagResources(r *http.Request) (int, any, *apiError) {
	return c.retag(r, func(tags []string, name string) []string {
		if slices.Contains(tags, name) {
			return tags
		}
		return append(tags, name)
	})
}

func (c *Cloud) untagResources(r *http.Request) (int, any, *apiError) {
	return c.retag(r, func(tags []string, name string) []string {
		return slices.DeleteFunc(tags, func(t string) bool { return t == name })
	})
}

// retag applies change to the tags of every resource of the request; a
// tag that does not exist is 404, as is a resource that does not.
func (c *Cloud) retag(r *http.Request, change func(tags []string, name string) []string) (int, any, *apiError) {
	var req godo.TagResourcesRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	name := r.PathValue("name")
	if !c.tags[name] {
		return 0, nil, notFound()
	}
	if len(req.Resources) == 0 {
		return 0, nil, unprocessable("resources are required")
	}
	var apply []func()
	for _, res := range req.Resources {
		switch res.Type {
		case godo.DropletResourceType:
			id, _ := strconv.Atoi(res.ID)
			d := c.droplets[id]
			if d == nil {
				return 0, nil, notFound()
			}
			apply = append(apply, func() { d.Tags = change(d.Tags, name) })
		case godo.LoadBalancerResourceType:
			lb := c.loadBalancers[res.ID]
			if lb == nil {
				return 0, nil, notFound()
			}
			apply = append(apply, func() { lb.Tags = change(lb.Tags, name) })
		default:
			return 0, nil, unprocessable("unsupported resource_type " + strconv.Quote(string(res.Type)))
		}
	}
	for _, f := range apply {
		f()
	}
	return 204, nil, nil
}
