package hcloudfake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// ---- servers ----

func (c *Cloud) listServers(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := sorted(c.servers)
	if st := r.URL.Query()["status"]; len(st) > 0 {
		all = slices.DeleteFunc(all, func(s *schema.Server) bool { return !slices.Contains(st, s.Status) })
	}
	list, meta, err := listPage(r, all, func(s *schema.Server) string { return s.Name }, func(s *schema.Server) map[string]string { return s.Labels })
	if err != nil {
		return 0, nil, err
	}
	return 200, struct {
		schema.ServerListResponse
		Meta schema.Meta `json:"meta"`
	}{schema.ServerListResponse{Servers: list}, meta}, nil
}

func (c *Cloud) getServer(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := byPathID(r, c.servers, "server")
	if err != nil {
		return 0, nil, err
	}
	return 200, schema.ServerGetResponse{Server: clone(s)}, nil
}

// byPathID returns the resource of the request's {id} in m, or the API's
// not_found error naming what.
func byPathID[T any](r *http.Request, m map[int64]*T, what string) (*T, *apiError) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	v := m[id]
	if v == nil {
		return nil, notFound(what)
	}
	return v, nil
}

func (c *Cloud) createServer(r *http.Request) (int, any, *apiError) {
	var req schema.ServerCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	s := Server{Name: req.Name, Type: req.ServerType.Name, Location: req.Location}
	if req.Labels != nil {
		s.Labels = *req.Labels
	}
	if len(req.Networks) > 0 {
		s.Network = req.Networks[0]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	srv, err := c.addServerLocked(s)
	if err != nil {
		return 0, nil, err
	}
	a := c.newActionLocked("create_server", schema.ActionResourceReference{ID: srv.ID, Type: "server"})
	return 201, schema.ServerCreateResponse{Server: clone(srv), Action: a, NextActions: []schema.Action{}}, nil
}

func (c *Cloud) deleteServer(r *http.Request) (int, any, *apiError) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deleteServerLocked(id) {
		return 0, nil, notFound("server")
	}
	return 200, schema.ServerDeleteResponse{Action: c.newActionLocked("delete_server", schema.ActionResourceReference{ID: id, Type: "server"})}, nil
}

// ---- load balancers ----

func (c *Cloud) listLoadBalancers(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, meta, err := listPage(r, sorted(c.loadBalancers), func(lb *schema.LoadBalancer) string { return lb.Name }, func(lb *schema.LoadBalancer) map[string]string { return lb.Labels })
	if err != nil {
		return 0, nil, err
	}
	for i := range list {
		list[i] = c.withHealthLocked(&list[i])
	}
	return 200, struct {
		schema.LoadBalancerListResponse
		Meta schema.Meta `json:"meta"`
	}{schema.LoadBalancerListResponse{LoadBalancers: list}, meta}, nil
}

func (c *Cloud) getLoadBalancer(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := byPathID(r, c.loadBalancers, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	return 200, schema.LoadBalancerGetResponse{LoadBalancer: c.withHealthLocked(lb)}, nil
}

// withHealthLocked returns a copy of lb whose targets report every
// service healthy, as a working load balancer's do.
func (c *Cloud) withHealthLocked(lb *schema.LoadBalancer) schema.LoadBalancer {
	out := clone(lb)
	for i := range out.Targets {
		out.Targets[i].HealthStatus = []schema.LoadBalancerTargetHealthStatus{}
		for _, s := range out.Services {
			out.Targets[i].HealthStatus = append(out.Targets[i].HealthStatus, schema.LoadBalancerTargetHealthStatus{ListenPort: s.ListenPort, Status: "healthy"})
		}
	}
	return out
}

func (c *Cloud) createLoadBalancer(r *http.Request) (int, any, *apiError) {
	var req schema.LoadBalancerCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Name == "" {
		return 0, nil, invalidInput("name", "name is required")
	}
	typ, ok := loadBalancerType(req.LoadBalancerType)
	if !ok {
		return 0, nil, invalidInput("load_balancer_type", "load balancer type not found")
	}
	var loc schema.Location
	switch {
	case req.Location != nil:
		if loc, ok = location(*req.Location); !ok {
			return 0, nil, invalidInput("location", "location "+strconv.Quote(*req.Location)+" not found")
		}
	case req.NetworkZone != nil:
		i := slices.IndexFunc(Locations, func(l schema.Location) bool { return l.NetworkZone == *req.NetworkZone })
		if i < 0 {
			return 0, nil, invalidInput("network_zone", "network zone "+strconv.Quote(*req.NetworkZone)+" not found")
		}
		loc = Locations[i]
	default:
		return 0, nil, invalidInput("location", "location or network_zone is required")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, other := range c.loadBalancers {
		if other.Name == req.Name {
			return 0, nil, &apiError{409, "uniqueness_error", "load balancer name is already used"}
		}
	}
	id := c.nextID()
	lb := &schema.LoadBalancer{
		ID: id, Name: req.Name, Location: loc, LoadBalancerType: typ, Created: time.Now().UTC().Truncate(time.Second),
		Labels: map[string]string{}, Algorithm: schema.LoadBalancerAlgorithm{Type: "round_robin"},
		Services: []schema.LoadBalancerService{}, Targets: []schema.LoadBalancerTarget{}, PrivateNet: []schema.LoadBalancerPrivateNet{},
		PublicNet: schema.LoadBalancerPublicNet{Enabled: req.PublicInterface == nil || *req.PublicInterface,
			IPv4: schema.LoadBalancerPublicNetIPv4{IP: "203.0.113." + strconv.FormatInt(id%250+1, 10)},
			IPv6: schema.LoadBalancerPublicNetIPv6{IP: "2001:db8:ffff::" + strconv.FormatInt(id, 16)}},
		IncludedTraffic: 21990232555520,
	}
	if req.Labels != nil {
		lb.Labels = *req.Labels
	}
	if req.Algorithm != nil {
		lb.Algorithm.Type = req.Algorithm.Type
	}
	if err := c.populateLocked(lb, req); err != nil {
		// A refused create leaves no trace, not even in the network.
		c.leaveNetworksLocked(id)
		return 0, nil, err
	}
	c.loadBalancers[id] = lb
	a := c.newActionLocked("create_load_balancer", schema.ActionResourceReference{ID: id, Type: "load_balancer"})
	return 201, schema.LoadBalancerCreateResponse{LoadBalancer: c.withHealthLocked(lb), Action: a}, nil
}

// populateLocked attaches a new load balancer to the network and adds the
// services and targets its create request asks for, each checked as the
// action adding it would be.
func (c *Cloud) populateLocked(lb *schema.LoadBalancer, req schema.LoadBalancerCreateRequest) *apiError {
	if req.Network != nil {
		if err := c.attachLocked(lb, schema.LoadBalancerActionAttachToNetworkRequest{Network: *req.Network}); err != nil {
			return err
		}
	}
	for _, s := range req.Services {
		var svc schema.LoadBalancerActionAddServiceRequest
		if err := sameShape(s, &svc); err != nil {
			return err
		}
		if err := addService(lb, svc); err != nil {
			return err
		}
	}
	for _, t := range req.Targets {
		var tr schema.LoadBalancerActionAddTargetRequest
		if err := sameShape(t, &tr); err != nil {
			return err
		}
		if err := c.addTargetLocked(lb, tr); err != nil {
			return err
		}
	}
	return nil
}

// sameShape copies a service or target of a create request into the
// request of the action that adds one, whose JSON is the same, so that
// every field the API takes in one it takes in the other.
func sameShape[From, To any](from From, to *To) *apiError {
	raw, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(raw, to)
	}
	if err != nil {
		return invalidInput("", "invalid service or target: "+err.Error())
	}
	return nil
}

func (c *Cloud) updateLoadBalancer(r *http.Request) (int, any, *apiError) {
	var req schema.LoadBalancerUpdateRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := byPathID(r, c.loadBalancers, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	if req.Name != nil {
		lb.Name = *req.Name
	}
	if req.Labels != nil {
		lb.Labels = *req.Labels
	}
	return 200, schema.LoadBalancerUpdateResponse{LoadBalancer: c.withHealthLocked(lb)}, nil
}

func (c *Cloud) deleteLoadBalancer(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := byPathID(r, c.loadBalancers, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	if lb.Protection.Delete {
		return 0, nil, &apiError{403, "protected", "load balancer is delete protected"}
	}
	c.leaveNetworksLocked(lb.ID)
	delete(c.loadBalancers, lb.ID)
	return 204, nil, nil
}

// leaveNetworksLocked removes a load balancer from every network's list.
func (c *Cloud) leaveNetworksLocked(id int64) {
	for _, n := range c.networks {
		n.LoadBalancers = slices.DeleteFunc(n.LoadBalancers, func(lb int64) bool { return lb == id })
	}
}

// loadBalancerAction runs POST /v1/load_balancers/{id}/actions/{action}.
func (c *Cloud) loadBalancerAction(r *http.Request) (int, any, *apiError) {
	name := r.PathValue("action")
	var apply func(lb *schema.LoadBalancer) *apiError
	switch name {
	case "add_service":
		apply = withBody(r, addService)
	case "update_service":
		apply = withBody(r, updateService)
	case "delete_service":
		apply = withBody(r, func(lb *schema.LoadBalancer, req schema.LoadBalancerDeleteServiceRequest) *apiError {
			i := slices.IndexFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == req.ListenPort })
			if i < 0 {
				return notFound("service")
			}
			lb.Services = slices.Delete(lb.Services, i, i+1)
			return nil
		})
	case "add_target":
		apply = withBody(r, c.addTargetLocked)
	case "remove_target":
		apply = withBody(r, func(lb *schema.LoadBalancer, req schema.LoadBalancerActionRemoveTargetRequest) *apiError {
			if req.Type != "server" || req.Server == nil {
				return invalidInput("type", "only server targets are supported")
			}
			i := slices.IndexFunc(lb.Targets, func(t schema.LoadBalancerTarget) bool { return t.Server != nil && t.Server.ID == req.Server.ID })
			if i < 0 {
				return notFound("target")
			}
			lb.Targets = slices.Delete(lb.Targets, i, i+1)
			return nil
		})
	case "attach_to_network":
		apply = withBody(r, c.attachLocked)
	case "detach_from_network":
		apply = withBody(r, func(lb *schema.LoadBalancer, req schema.LoadBalancerActionDetachFromNetworkRequest) *apiError {
			i := slices.IndexFunc(lb.PrivateNet, func(p schema.LoadBalancerPrivateNet) bool { return p.Network == req.Network })
			if i < 0 {
				return &apiError{422, "load_balancer_not_attached_to_network", "load balancer is not attached to this network"}
			}
			lb.PrivateNet = slices.Delete(lb.PrivateNet, i, i+1)
			if n := c.networks[req.Network]; n != nil {
				n.LoadBalancers = slices.DeleteFunc(n.LoadBalancers, func(id int64) bool { return id == lb.ID })
			}
			return nil
		})
	case "change_algorithm":
		apply = withBody(r, func(lb *schema.LoadBalancer, req schema.LoadBalancerActionChangeAlgorithmRequest) *apiError {
			if req.Type != "round_robin" && req.Type != "least_connections" {
				return invalidInput("type", "unknown algorithm "+strconv.Quote(req.Type))
			}
			lb.Algorithm.Type = req.Type
			return nil
		})
	case "change_type":
		apply = withBody(r, func(lb *schema.LoadBalancer, req schema.LoadBalancerActionChangeTypeRequest) *apiError {
			t, ok := loadBalancerType(req.LoadBalancerType)
			if !ok {
				return invalidInput("load_balancer_type", "load balancer type not found")
			}
			if err := fitsType(lb, t); err != nil {
				return err
			}
			lb.LoadBalancerType = t
			return nil
		})
	case "enable_public_interface", "disable_public_interface":
		apply = func(lb *schema.LoadBalancer) *apiError {
			lb.PublicNet.Enabled = name == "enable_public_interface"
			return nil
		}
	default:
		return 0, nil, &apiError{404, "not_found", "no such endpoint: load balancer action " + strconv.Quote(name)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := byPathID(r, c.loadBalancers, "load balancer")
	if err != nil {
		return 0, nil, err
	}
	if err := apply(lb); err != nil {
		return 0, nil, err
	}
	a := c.newActionLocked(name, schema.ActionResourceReference{ID: lb.ID, Type: "load_balancer"})
	return 201, schema.ActionGetResponse{Action: a}, nil
}

// withBody decodes the request body before the lock is taken and returns
// the change to apply under it.
func withBody[Req any, T any](r *http.Request, f func(*T, Req) *apiError) func(*T) *apiError {
	var req Req
	if err := decodeBody(r, &req); err != nil {
		return func(*T) *apiError { return err }
	}
	return func(v *T) *apiError { return f(v, req) }
}

// defaultPorts are the listen ports of protocols that have one.
var defaultPorts = map[string]int{"http": 80, "https": 443}

func addService(lb *schema.LoadBalancer, req schema.LoadBalancerActionAddServiceRequest) *apiError {
	if req.Protocol != "tcp" && req.Protocol != "http" && req.Protocol != "https" {
		return invalidInput("protocol", "protocol must be tcp, http or https")
	}
	svc := schema.LoadBalancerService{Protocol: req.Protocol, ListenPort: defaultPorts[req.Protocol],
		HealthCheck: &schema.LoadBalancerServiceHealthCheck{Protocol: "tcp", Interval: 15, Timeout: 10, Retries: 3}}
	if req.ListenPort != nil {
		svc.ListenPort = *req.ListenPort
	}
	if svc.ListenPort < 1 || svc.ListenPort > 65535 {
		return invalidInput("listen_port", "listen_port is required for tcp and must be 1-65535")
	}
	svc.DestinationPort = svc.ListenPort
	if req.DestinationPort != nil {
		svc.DestinationPort = *req.DestinationPort
	}
	svc.HealthCheck.Port = svc.DestinationPort
	if req.Proxyprotocol != nil {
		svc.Proxyprotocol = *req.Proxyprotocol
	}
	if slices.ContainsFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == svc.ListenPort }) {
		return &apiError{409, "source_port_already_used", "listen port " + strconv.Itoa(svc.ListenPort) + " is already used"}
	}
	if err := serviceLimit.roomForOne(lb); err != nil {
		return err
	}
	if hc := req.HealthCheck; hc != nil {
		h := svc.HealthCheck
		h.Protocol = hc.Protocol
		setIf(&h.Port, hc.Port)
		setIf(&h.Interval, hc.Interval)
		setIf(&h.Timeout, hc.Timeout)
		setIf(&h.Retries, hc.Retries)
		setHealthCheckHTTP(h, hc.HTTP)
	}
	setHTTP(&svc, req.HTTP)
	lb.Services = append(lb.Services, svc)
	return nil
}

// setHTTP gives a service of protocol http or https its HTTP settings,
// the API's defaults changed by those of req (nil changes nothing), and a
// tcp service none. The add_service and update_service requests' settings
// share one JSON shape.
func setHTTP(svc *schema.LoadBalancerService, req *schema.LoadBalancerActionAddServiceRequestHTTP) {
	if svc.Protocol == "tcp" {
		svc.HTTP = nil
		return
	}
	if svc.HTTP == nil {
		svc.HTTP = &schema.LoadBalancerServiceHTTP{CookieName: "HCLBSTICKY", CookieLifetime: 300, Certificates: []int64{}}
	}
	if req == nil {
		return
	}
	h := svc.HTTP
	setIf(&h.CookieName, req.CookieName)
	setIf(&h.CookieLifetime, req.CookieLifetime)
	setIf(&h.Certificates, req.Certificates)
	setIf(&h.RedirectHTTP, req.RedirectHTTP)
	setIf(&h.StickySessions, req.StickySessions)
}

// setHealthCheckHTTP applies an add_service or update_service request's
// HTTP health check settings (nil changes nothing), from the API's
// defaults when the check had none.
func setHealthCheckHTTP(hc *schema.LoadBalancerServiceHealthCheck, req *schema.LoadBalancerActionAddServiceRequestHealthCheckHTTP) {
	if req == nil {
		return
	}
	if hc.HTTP == nil {
		hc.HTTP = &schema.LoadBalancerServiceHealthCheckHTTP{StatusCodes: []string{"2??", "3??"}, Path: "/"}
	}
	setIf(&hc.HTTP.Domain, req.Domain)
	setIf(&hc.HTTP.Path, req.Path)
	setIf(&hc.HTTP.Response, req.Response)
	setIf(&hc.HTTP.StatusCodes, req.StatusCodes)
	setIf(&hc.HTTP.TLS, req.TLS)
}

func updateService(lb *schema.LoadBalancer, req schema.LoadBalancerActionUpdateServiceRequest) *apiError {
	i := slices.IndexFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == req.ListenPort })
	if i < 0 {
		return notFound("service")
	}
	s := &lb.Services[i]
	setIf(&s.Protocol, req.Protocol)
	setIf(&s.DestinationPort, req.DestinationPort)
	setIf(&s.Proxyprotocol, req.Proxyprotocol)
	setHTTP(s, (*schema.LoadBalancerActionAddServiceRequestHTTP)(req.HTTP))
	if hc := req.HealthCheck; hc != nil {
		setIf(&s.HealthCheck.Protocol, hc.Protocol)
		setIf(&s.HealthCheck.Port, hc.Port)
		setIf(&s.HealthCheck.Interval, hc.Interval)
		setIf(&s.HealthCheck.Timeout, hc.Timeout)
		setIf(&s.HealthCheck.Retries, hc.Retries)
		setHealthCheckHTTP(s.HealthCheck, (*schema.LoadBalancerActionAddServiceRequestHealthCheckHTTP)(hc.HTTP))
	}
	return nil
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (c *Cloud) addTargetLocked(lb *schema.LoadBalancer, req schema.LoadBalancerActionAddTargetRequest) *apiError {
	if req.Type != "server" || req.Server == nil {
		return invalidInput("type", "only server targets are supported")
	}
	srv := c.servers[req.Server.ID]
	if srv == nil {
		return invalidInput("server", "server "+strconv.FormatInt(req.Server.ID, 10)+" not found")
	}
	if slices.ContainsFunc(lb.Targets, func(t schema.LoadBalancerTarget) bool { return t.Server != nil && t.Server.ID == srv.ID }) {
		return &apiError{409, "target_already_defined", "server is already a target"}
	}
	if err := targetLimit.roomForOne(lb); err != nil {
		return err
	}
	private := req.UsePrivateIP != nil && *req.UsePrivateIP
	if private {
		if len(lb.PrivateNet) == 0 {
			return &apiError{422, "load_balancer_not_attached_to_network", "load balancer is not attached to a network"}
		}
		if !slices.ContainsFunc(srv.PrivateNet, func(p schema.ServerPrivateNet) bool { return p.Network == lb.PrivateNet[0].Network }) {
			return &apiError{422, "server_not_attached_to_network", "server is not attached to the load balancer's network"}
		}
	} else if srv.PublicNet.IPv4.IP == "" {
		return &apiError{422, "missing_ipv4", "server has no public IPv4 address"}
	}
	lb.Targets = append(lb.Targets, schema.LoadBalancerTarget{Type: "server", Server: &schema.LoadBalancerTargetServer{ID: srv.ID},
		UsePrivateIP: private, HealthStatus: []schema.LoadBalancerTargetHealthStatus{}})
	return nil
}

// lbLimit is a count that a load balancer type bounds. Certificates are
// not modelled (services take none), so max_assigned_certificates is not
// one of them.
type lbLimit struct {
	what string
	max  func(*schema.LoadBalancerType) int
	used func(*schema.LoadBalancer) int
}

var (
	targetLimit = lbLimit{"targets", func(t *schema.LoadBalancerType) int { return t.MaxTargets },
		func(lb *schema.LoadBalancer) int { return len(lb.Targets) }}
	serviceLimit = lbLimit{"services", func(t *schema.LoadBalancerType) int { return t.MaxServices },
		func(lb *schema.LoadBalancer) int { return len(lb.Services) }}
)

// roomForOne refuses to add one more to a load balancer that already has
// as many as its type allows, as the API does.
func (l lbLimit) roomForOne(lb *schema.LoadBalancer) *apiError {
	t := &lb.LoadBalancerType
	if max := l.max(t); l.used(lb) >= max {
		return limitExceeded("load balancer type " + t.Name + " allows at most " + strconv.Itoa(max) + " " + l.what)
	}
	return nil
}

// fitsType refuses to change a load balancer to a type whose limits it
// already exceeds, with the API's error for change_type.
func fitsType(lb *schema.LoadBalancer, t schema.LoadBalancerType) *apiError {
	for _, l := range []lbLimit{targetLimit, serviceLimit} {
		if n, max := l.used(lb), l.max(&t); n > max {
			return &apiError{422, "invalid_load_balancer_type", "the load balancer has " + strconv.Itoa(n) + " " + l.what +
				", type " + t.Name + " allows at most " + strconv.Itoa(max)}
		}
	}
	return nil
}

func (c *Cloud) attachLocked(lb *schema.LoadBalancer, req schema.LoadBalancerActionAttachToNetworkRequest) *apiError {
	n := c.networks[req.Network]
	if n == nil {
		return notFound("network")
	}
	if len(lb.PrivateNet) > 0 {
		return &apiError{422, "load_balancer_already_attached", "load balancer is already attached to a network"}
	}
	ip := ""
	if req.IP != nil {
		ip = *req.IP
	} else {
		free, err := c.freeIPLocked(n)
		if err != nil {
			return err
		}
		ip = free
	}
	lb.PrivateNet = append(lb.PrivateNet, schema.LoadBalancerPrivateNet{Network: n.ID, IP: ip})
	n.LoadBalancers = append(n.LoadBalancers, lb.ID)
	return nil
}

// ---- networks ----

func (c *Cloud) listNetworks(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, meta, err := listPage(r, sorted(c.networks), func(n *schema.Network) string { return n.Name }, func(n *schema.Network) map[string]string { return n.Labels })
	if err != nil {
		return 0, nil, err
	}
	return 200, struct {
		schema.NetworkListResponse
		Meta schema.Meta `json:"meta"`
	}{schema.NetworkListResponse{Networks: list}, meta}, nil
}

func (c *Cloud) createNetwork(r *http.Request) (int, any, *apiError) {
	var req schema.NetworkCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.addNetworkLocked(req)
	if err != nil {
		return 0, nil, err
	}
	return 201, schema.NetworkCreateResponse{Network: clone(n)}, nil
}

func (c *Cloud) getNetwork(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := byPathID(r, c.networks, "network")
	if err != nil {
		return 0, nil, err
	}
	return 200, schema.NetworkGetResponse{Network: clone(n)}, nil
}

// networkAction runs add_route and delete_route.
func (c *Cloud) networkAction(r *http.Request) (int, any, *apiError) {
	name := r.PathValue("action")
	if name != "add_route" && name != "delete_route" {
		return 0, nil, &apiError{404, "not_found", "no such endpoint: network action " + strconv.Quote(name)}
	}
	var req schema.NetworkRoute
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := byPathID(r, c.networks, "network")
	if err != nil {
		return 0, nil, err
	}
	i := slices.IndexFunc(n.Routes, func(rt schema.NetworkRoute) bool { return rt.Destination == req.Destination })
	if name == "add_route" {
		if _, err := netip.ParsePrefix(req.Destination); err != nil {
			return 0, nil, invalidInput("destination", "destination is not a CIDR")
		}
		gw, err := netip.ParseAddr(req.Gateway)
		prefix, _ := netip.ParsePrefix(n.IPRange)
		if err != nil || !prefix.Contains(gw) {
			return 0, nil, invalidInput("gateway", "gateway must be an address of the network")
		}
		if i >= 0 {
			return 0, nil, &apiError{409, "uniqueness_error", "a route to " + req.Destination + " already exists"}
		}
		n.Routes = append(n.Routes, req)
	} else {
		if i < 0 || n.Routes[i].Gateway != req.Gateway {
			return 0, nil, notFound("route")
		}
		n.Routes = slices.Delete(n.Routes, i, i+1)
	}
	a := c.newActionLocked(name, schema.ActionResourceReference{ID: n.ID, Type: "network"})
	return 201, schema.ActionGetResponse{Action: a}, nil
}

// ---- actions ----

func (c *Cloud) getAction(r *http.Request) (int, any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := byPathID(r, c.actions, "action")
	if err != nil {
		return 0, nil, err
	}
	return 200, schema.ActionGetResponse{Action: a.poll()}, nil
}

// listActions serves GET /v1/actions?id=..., the way clients poll many
// actions at once.
func (c *Cloud) listActions(r *http.Request) (int, any, *apiError) {
	q := r.URL.Query()
	c.mu.Lock()
	var list []schema.Action
	for _, v := range q["id"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			c.mu.Unlock()
			return 0, nil, invalidInput("id", "invalid action ID")
		}
		if a := c.actions[id]; a != nil {
			list = append(list, a.poll())
		}
	}
	c.mu.Unlock()
	if st := q["status"]; len(st) > 0 {
		list = slices.DeleteFunc(list, func(a schema.Action) bool { return !slices.Contains(st, a.Status) })
	}
	list, meta, err := page(r, append([]schema.Action{}, list...))
	if err != nil {
		return 0, nil, err
	}
	return 200, struct {
		schema.ActionListResponse
		Meta schema.Meta `json:"meta"`
	}{schema.ActionListResponse{Actions: list}, meta}, nil
}

// AddLoadBalancer creates a load balancer of type lb11 in location with
// labels, as a client's POST /load_balancers would (a CCM's create landing
// after its Service was deleted, in tests), and returns it.
func (c *Cloud) AddLoadBalancer(name, location string, labels map[string]string) (schema.LoadBalancer, error) {
	body, err := json.Marshal(schema.LoadBalancerCreateRequest{Name: name, LoadBalancerType: schema.IDOrName{Name: "lb11"}, Location: &location, Labels: &labels})
	if err != nil {
		return schema.LoadBalancer{}, err
	}
	r, err := http.NewRequest(http.MethodPost, "/v1/load_balancers", bytes.NewReader(body))
	if err != nil {
		return schema.LoadBalancer{}, err
	}
	_, resp, apiErr := c.createLoadBalancer(r)
	if apiErr != nil {
		return schema.LoadBalancer{}, apiErr
	}
	return resp.(schema.LoadBalancerCreateResponse).LoadBalancer, nil
}
