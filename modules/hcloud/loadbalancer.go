package hcloud

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// ServiceUIDLabel is the load balancer label that ties it to its Service,
// the official CCM's, so each finds the other's load balancers.
const ServiceUIDLabel = "hcloud-ccm/service-uid"

// ClusterLabel is the load balancer label naming the cluster it was made
// for (the CCM's --cluster-name, which every load balancer call carries). The official CCM sets no such label:
// Service UIDs alone do not say which cluster a load balancer belongs to,
// and ListLoadBalancers must never answer another cluster's. Load
// balancers without it (made by the official CCM, or before this label)
// are labelled by the next EnsureLoadBalancer or UpdateLoadBalancer of
// their Service, and are never listed until then.
const ClusterLabel = "wasmccm.io/cluster"

// clusterLabelValue is the cluster name as the label's value, or "" when
// the name is not a valid Hetzner label value (at most 63 characters,
// alphanumerics, '-', '_' and '.', alphanumeric at both ends): such a
// cluster's load balancers are not labelled, and not listed.
func clusterLabelValue(name string) string {
	if name == "" || len(name) > 63 || !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return ""
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return ""
		}
	}
	return name
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }

// ListLoadBalancers implements sdk.LoadBalancerLister: the load balancers
// labelled with this cluster and a Service UID, selected by the API
// (label_selector), over every page. A page that fails, or a listing
// short of the total the API announced, is an error.
func (p *Provider) ListLoadBalancers(ctx context.Context, clusterName string) ([]abi.OwnedLoadBalancer, error) {
	cluster := clusterLabelValue(clusterName)
	if cluster == "" {
		return nil, errors.New("hcloud: cluster name " + strconv.Quote(clusterName) + " is not a valid label value, so load balancers are not labelled with it and cannot be listed")
	}
	ctx = p.bounded(ctx)
	list, err := listComplete[loadBalancer](ctx, p, "listing the cluster's load balancers", "load_balancers",
		rest.Param{Name: "label_selector", Value: ServiceUIDLabel + "," + ClusterLabel + "=" + cluster})
	if err != nil {
		return nil, err
	}
	out := make([]abi.OwnedLoadBalancer, 0, len(list))
	for _, lb := range list {
		uid := lb.Labels[ServiceUIDLabel]
		if uid == "" || lb.Labels[ClusterLabel] != cluster {
			continue // not what was asked for: never report it
		}
		out = append(out, abi.OwnedLoadBalancer{Name: lb.Name, ID: strconv.FormatInt(lb.ID, 10), ClusterName: cluster, ServiceUID: uid})
	}
	return out, nil
}

// defaultType is the load balancer type when neither the annotation nor
// the config chooses one.
const defaultType = "lb11"

// GetLoadBalancerName implements sdk.LoadBalancer: the name annotation, or
// Kubernetes' default name ("a" and the Service UID without dashes, at
// most 32 characters).
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *abi.Service) string {
	if name, ok := svc.Annotations[annName]; ok {
		return name
	}
	name := "a" + strings.ReplaceAll(svc.UID, "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// byServiceUID finds the Service's load balancer by its label; nil when
// the API lists none.
func (p *Provider) byServiceUID(ctx context.Context, svc *abi.Service) (*loadBalancer, error) {
	what := "finding the load balancer of Service " + svc.Namespace + "/" + svc.Name
	list, err := listAll[loadBalancer](ctx, p, what, "load_balancers", rest.Param{Name: "label_selector", Value: ServiceUIDLabel + "=" + svc.UID})
	if err != nil {
		return nil, err
	}
	switch len(list) {
	case 0:
		return nil, nil
	case 1:
		return &list[0], nil
	}
	return nil, errors.New("hcloud: " + what + ": " + strconv.Itoa(len(list)) + " load balancers carry label " + ServiceUIDLabel + "=" + svc.UID)
}

// find looks the load balancer up by label, then by name, as one created
// by hand or before the label was set is adopted.
func (p *Provider) find(ctx context.Context, clusterName string, svc *abi.Service) (*loadBalancer, error) {
	lb, err := p.byServiceUID(ctx, svc)
	if lb != nil || err != nil {
		return lb, err
	}
	name := p.GetLoadBalancerName(ctx, clusterName, svc)
	list, err := listAll[loadBalancer](ctx, p, "finding load balancer "+strconv.Quote(name), "load_balancers", rest.Param{Name: "name", Value: name})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[0], nil
}

func (p *Provider) getLB(ctx context.Context, id int64) (*loadBalancer, error) {
	what := "getting load balancer " + strconv.FormatInt(id, 10)
	lb, found, err := getByID[loadBalancer](ctx, p, what, "load_balancers", "load_balancer", id)
	if err == nil && !found {
		err = errors.New("hcloud: " + what + ": it no longer exists")
	}
	return lb, err
}

// GetLoadBalancer implements sdk.LoadBalancer.
func (p *Provider) GetLoadBalancer(ctx context.Context, _ string, svc *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	lb, err := p.byServiceUID(ctx, svc)
	if err != nil || lb == nil {
		return nil, false, err
	}
	st, err := p.status(lb, svc)
	return st, err == nil, err
}

// EnsureLoadBalancer implements sdk.LoadBalancer: find or create the load
// balancer, then bring its settings, services and targets to what the
// Service asks.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	ctx = p.bounded(ctx)
	if err := checkSupported(svc); err != nil {
		return nil, err
	}
	lb, err := p.find(ctx, clusterName, svc)
	if err != nil {
		return nil, err
	}
	if lb == nil {
		if lb, err = p.create(ctx, clusterName, svc, nodes); err != nil {
			return nil, err
		}
	}
	if err := p.reconcile(ctx, clusterName, lb, svc, nodes); err != nil {
		return nil, err
	}
	if lb, err = p.getLB(ctx, lb.ID); err != nil {
		return nil, err
	}
	return p.status(lb, svc)
}

// UpdateLoadBalancer implements sdk.LoadBalancer. A Service whose load
// balancer does not exist yet is left to EnsureLoadBalancer.
func (p *Provider) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *abi.Service, nodes []abi.Node) error {
	ctx = p.bounded(ctx)
	if err := checkSupported(svc); err != nil {
		return err
	}
	lb, err := p.find(ctx, clusterName, svc)
	if err != nil || lb == nil {
		return err
	}
	return p.reconcile(ctx, clusterName, lb, svc, nodes)
}

// EnsureLoadBalancerDeleted implements sdk.LoadBalancer. Only a load
// balancer carrying the Service's UID label is deleted, so a same-named
// one created by hand is never removed.
func (p *Provider) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *abi.Service) error {
	lb, err := p.byServiceUID(ctx, svc)
	if err != nil || lb == nil {
		return err
	}
	_, err = p.api.Do(ctx, &rest.Request{What: "deleting load balancer " + strconv.Quote(lb.Name), Method: "DELETE",
		Path: "/load_balancers/" + strconv.FormatInt(lb.ID, 10), NotFound: true})
	if errors.Is(err, sdk.ErrNotFound) {
		return nil
	}
	return err
}

// createRequest is the body of POST /load_balancers.
type createRequest struct {
	Name             string            `json:"name"`
	LoadBalancerType string            `json:"load_balancer_type"`
	Location         string            `json:"location,omitempty"`
	NetworkZone      string            `json:"network_zone,omitempty"`
	Algorithm        *algorithm        `json:"algorithm,omitempty"`
	Labels           map[string]string `json:"labels"`
	PublicInterface  *bool             `json:"public_interface,omitempty"`
	Network          int64             `json:"network,omitempty"`
	Services         []lbService       `json:"services,omitempty"`
	Targets          []serverTarget    `json:"targets,omitempty"`
}

// create makes the load balancer with the type, location or network zone,
// algorithm, public interface and network the Service and config ask for,
// and, in the same request, the services of its ports and the targets of
// the Nodes, so that a new load balancer costs one action instead of one
// per service and target. Only the network annotated with a private IPv4
// address, which the create request cannot set, is left to reconcile, and
// with it the targets that use private IPs.
func (p *Provider) create(ctx context.Context, clusterName string, svc *abi.Service, nodes []abi.Node) (*loadBalancer, error) {
	a := annotations{m: svc.Annotations}
	def := p.cfg.LoadBalancers
	req := createRequest{Name: p.GetLoadBalancerName(ctx, clusterName, svc), LoadBalancerType: p.lbType(&a),
		Location: def.Location, NetworkZone: def.NetworkZone, Labels: map[string]string{ServiceUIDLabel: svc.UID}}
	if cluster := clusterLabelValue(clusterName); cluster != "" {
		req.Labels[ClusterLabel] = cluster
	}
	if v, ok := a.str(annLocation); ok {
		req.Location = v // "" resets a configured location, to use a network zone
	}
	if v, ok := a.str(annNetworkZone); ok {
		req.NetworkZone = v
	}
	if req.Location == "" && req.NetworkZone == "" {
		return nil, errors.New("hcloud: creating the load balancer of Service " + svc.Namespace + "/" + svc.Name +
			": neither " + annLocation + " nor " + annNetworkZone + " is set, nor a default in the provider config")
	}
	if req.Location != "" {
		req.NetworkZone = ""
	}
	if alg := p.algorithm(&a); alg != "" {
		req.Algorithm = &algorithm{Type: alg}
	}
	if disable, ok := p.disablePublicNetwork(&a); ok {
		enabled := !disable
		req.PublicInterface = &enabled
	}
	networkID, err := p.network(ctx)
	if err != nil {
		return nil, err
	}
	if _, ipSet := a.str(annPrivateIPv4); !ipSet {
		req.Network = networkID
	}
	if req.Services, err = p.services(svc, &a); err != nil {
		return nil, err
	}
	if private := p.usePrivateIP(&a); !private || req.Network != 0 {
		order, _ := p.targetServers(nodes)
		for _, id := range order {
			req.Targets = append(req.Targets, newServerTarget(id, private))
		}
	}
	if a.err != nil {
		return nil, a.err
	}
	what := "creating load balancer " + strconv.Quote(req.Name)
	resp, err := p.postCreate(ctx, what, &req)
	if err != nil {
		return nil, err
	}
	if resp.LoadBalancer == nil {
		return nil, errors.New("hcloud: " + what + ": the response holds no load balancer")
	}
	p.logf(abi.LogInfo, "created load balancer "+strconv.Quote(req.Name)+" ("+strconv.FormatInt(resp.LoadBalancer.ID, 10)+") for Service "+svc.Namespace+"/"+svc.Name)
	if err := p.wait(ctx, what, resp.Action); err != nil {
		return nil, err
	}
	return p.getLB(ctx, resp.LoadBalancer.ID)
}

type createResponse struct {
	LoadBalancer *loadBalancer `json:"load_balancer"`
	Action       *action       `json:"action"`
}

// postCreate sends the create request. When the API refuses it with
// resource_limit_exceeded, as more services or targets than the type
// allows make it refuse the whole create, the load balancer is created
// without them: reconcile then adds them one by one up to the type's
// limits, as for a load balancer that exists.
func (p *Provider) postCreate(ctx context.Context, what string, req *createRequest) (*createResponse, error) {
	for {
		body, err := json.Marshal(req)
		if err != nil {
			return nil, errors.New("hcloud: encoding the load balancer: " + err.Error())
		}
		var resp createResponse
		r := &rest.Request{What: what, Method: "POST", Path: "/load_balancers", Body: body, Accept: []int32{403}, Into: &resp}
		answer, err := p.api.Do(ctx, r)
		if err != nil {
			return nil, err
		}
		if answer.StatusCode != 403 {
			return &resp, nil
		}
		code, _, ok := decodeAPIError(answer)
		if !ok || code != "resource_limit_exceeded" || len(req.Services)+len(req.Targets) == 0 {
			return nil, p.api.Error(r, answer)
		}
		p.logf(abi.LogInfo, what+": the API refused "+strconv.Itoa(len(req.Services))+" services and "+strconv.Itoa(len(req.Targets))+
			" targets as beyond its type's limits; creating it without them, to add them one by one")
		req.Services, req.Targets = nil, nil
	}
}

type algorithm struct {
	Type string `json:"type"`
}

func (p *Provider) lbType(a *annotations) string {
	if v, ok := a.str(annType); ok {
		return v
	}
	if p.cfg.LoadBalancers.Type != "" {
		return p.cfg.LoadBalancers.Type
	}
	return defaultType
}

func (p *Provider) algorithm(a *annotations) string {
	v, ok := a.str(annAlgorithmType)
	if !ok {
		return p.cfg.LoadBalancers.AlgorithmType
	}
	if v != "round_robin" && v != "least_connections" {
		a.fail(annAlgorithmType, v, "not round_robin or least_connections")
		return ""
	}
	return v
}

func (p *Provider) disablePublicNetwork(a *annotations) (disable, set bool) {
	if v, ok := a.bool(annDisablePublicNetwork); ok {
		return v, true
	}
	if d := p.cfg.LoadBalancers.DisablePublicNetwork; d != nil {
		return *d, true
	}
	return false, false
}

func (p *Provider) usePrivateIP(a *annotations) bool {
	if v, ok := a.bool(annUsePrivateIP); ok {
		return v
	}
	return p.cfg.LoadBalancers.UsePrivateIP
}

// reconcile brings an existing load balancer to the Service: name and
// label, algorithm, type, network, public interface, then services and
// targets. Each change is one action, awaited before the next.
func (p *Provider) reconcile(ctx context.Context, clusterName string, lb *loadBalancer, svc *abi.Service, nodes []abi.Node) error {
	a := annotations{m: svc.Annotations}
	path := "/load_balancers/" + strconv.FormatInt(lb.ID, 10)
	act := func(name string, body any) error {
		return p.post(ctx, name+" on load balancer "+strconv.Quote(lb.Name), path+"/actions/"+name, body)
	}

	name, rename := a.str(annName)
	cluster := clusterLabelValue(clusterName)
	if lb.Labels[ServiceUIDLabel] != svc.UID || (cluster != "" && lb.Labels[ClusterLabel] != cluster) || (rename && name != lb.Name) {
		labels := map[string]string{}
		for k, v := range lb.Labels {
			labels[k] = v
		}
		labels[ServiceUIDLabel] = svc.UID
		if cluster != "" {
			labels[ClusterLabel] = cluster
		}
		update := map[string]any{"labels": labels}
		if rename {
			update["name"] = name
		}
		body, _ := json.Marshal(update)
		if _, err := p.api.Do(ctx, &rest.Request{What: "updating load balancer " + strconv.Quote(lb.Name), Method: "PUT", Path: path, Body: body}); err != nil {
			return err
		}
	}
	if alg := p.algorithm(&a); alg != "" && alg != lb.Algorithm.Type {
		if err := act("change_algorithm", map[string]string{"type": alg}); err != nil {
			return err
		}
	}
	if _, annotated := a.str(annType); (annotated || p.cfg.LoadBalancers.Type != "") && p.lbType(&a) != lb.LoadBalancerType.Name {
		if err := act("change_type", map[string]string{"load_balancer_type": p.lbType(&a)}); err != nil {
			return err
		}
		// The new type's max_targets bounds the targets below.
		fresh, err := p.getLB(ctx, lb.ID)
		if err != nil {
			return err
		}
		lb = fresh
	}
	if err := p.reconcileNetwork(ctx, lb, &a, act); err != nil {
		return err
	}
	if disable, ok := p.disablePublicNetwork(&a); ok && disable == lb.PublicNet.Enabled {
		name := "enable_public_interface"
		if disable {
			name = "disable_public_interface"
		}
		if err := act(name, struct{}{}); err != nil {
			return err
		}
	}
	if a.err != nil {
		return a.err
	}
	if err := p.reconcileServices(lb, svc, act); err != nil {
		return err
	}
	return p.reconcileTargets(ctx, lb, svc, &a, nodes, act)
}

// reconcileNetwork attaches the load balancer to the configured network
// (at the private-ipv4 annotation's address if set) and detaches it from
// any other.
func (p *Provider) reconcileNetwork(ctx context.Context, lb *loadBalancer, a *annotations, act func(string, any) error) error {
	networkID, err := p.network(ctx)
	if err != nil {
		return err
	}
	ip, ipSet := a.str(annPrivateIPv4)
	attached := false
	for _, pn := range lb.PrivateNet {
		if pn.Network == networkID && (!ipSet || ip == pn.IP) {
			attached = true
			continue
		}
		if err := act("detach_from_network", map[string]int64{"network": pn.Network}); err != nil {
			return err
		}
	}
	if networkID == 0 || attached {
		return nil
	}
	req := map[string]any{"network": networkID}
	if ipSet {
		req["ip"] = ip
	}
	return act("attach_to_network", req)
}

// lbService is a service of the load balancer as the API takes it, nil
// fields left to the API's defaults, and as it answers it.
type lbService struct {
	ListenPort      int              `json:"listen_port"`
	Protocol        string           `json:"protocol"`
	DestinationPort int              `json:"destination_port"`
	Proxyprotocol   *bool            `json:"proxyprotocol,omitempty"`
	HTTP            *lbServiceHTTP   `json:"http,omitempty"`
	HealthCheck     *lbServiceHealth `json:"health_check,omitempty"`
}

type lbServiceHTTP struct {
	CookieName     *string `json:"cookie_name,omitempty"`
	CookieLifetime *int    `json:"cookie_lifetime,omitempty"`
	RedirectHTTP   *bool   `json:"redirect_http,omitempty"`
	StickySessions *bool   `json:"sticky_sessions,omitempty"`
}

type lbServiceHealth struct {
	Protocol string               `json:"protocol"`
	Port     *int                 `json:"port,omitempty"`
	Interval *int                 `json:"interval,omitempty"`
	Timeout  *int                 `json:"timeout,omitempty"`
	Retries  *int                 `json:"retries,omitempty"`
	HTTP     *lbServiceHealthHTTP `json:"http,omitempty"`
}

type lbServiceHealthHTTP struct {
	Domain      *string   `json:"domain,omitempty"`
	Path        *string   `json:"path,omitempty"`
	StatusCodes *[]string `json:"status_codes,omitempty"`
	TLS         *bool     `json:"tls,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// satisfiedBy reports whether the load balancer's service have already is
// what update_service with s would make it: every field s sets has that
// value there. A field s leaves unset is one the update would not touch.
func (s *lbService) satisfiedBy(have *lbService) bool {
	if s.Protocol != have.Protocol || s.DestinationPort != have.DestinationPort || !same(s.Proxyprotocol, have.Proxyprotocol) {
		return false
	}
	if h := s.HTTP; h != nil {
		g := have.HTTP
		if g == nil || !same(h.CookieName, g.CookieName) || !same(h.CookieLifetime, g.CookieLifetime) ||
			!same(h.RedirectHTTP, g.RedirectHTTP) || !same(h.StickySessions, g.StickySessions) {
			return false
		}
	}
	if hc := s.HealthCheck; hc != nil {
		g := have.HealthCheck
		if g == nil || hc.Protocol != g.Protocol || !same(hc.Port, g.Port) || !same(hc.Interval, g.Interval) ||
			!same(hc.Timeout, g.Timeout) || !same(hc.Retries, g.Retries) {
			return false
		}
		if hh := hc.HTTP; hh != nil {
			gh := g.HTTP
			if gh == nil || !same(hh.Domain, gh.Domain) || !same(hh.Path, gh.Path) || !same(hh.TLS, gh.TLS) ||
				hh.StatusCodes != nil && (gh.StatusCodes == nil || !slices.Equal(*hh.StatusCodes, *gh.StatusCodes)) {
				return false
			}
		}
	}
	return true
}

// same reports whether have holds want, or want is unset.
func same[T comparable](want, have *T) bool {
	return want == nil || have != nil && *want == *have
}

// serviceFor builds the load balancer service of one Service port: listen
// on the port, forward to the node port, with the protocol, HTTP and
// health check annotations applied. The health check is sent only when an
// annotation sets part of it; the API's default is then kept as it is.
func serviceFor(port abi.ServicePort, a *annotations) lbService {
	s := lbService{ListenPort: int(port.Port), Protocol: "tcp", DestinationPort: int(port.NodePort)}
	if v, ok := a.protocol(annProtocol); ok {
		s.Protocol = v
	}
	if v, ok := a.bool(annProxyProtocol); ok {
		s.Proxyprotocol = &v
	}
	var h lbServiceHTTP
	addHTTP := false
	if v, ok := a.str(annCookieName); ok {
		h.CookieName, addHTTP = &v, true
	}
	if v, ok := a.seconds(annCookieLifetime); ok {
		h.CookieLifetime, addHTTP = &v, true
	}
	if v, ok := a.bool(annRedirectHTTP); ok {
		h.RedirectHTTP, addHTTP = &v, true
	}
	if v, ok := a.bool(annStickySessions); ok {
		h.StickySessions, addHTTP = &v, true
	}
	if addHTTP {
		s.HTTP = &h
	}

	hc := lbServiceHealth{Protocol: s.Protocol}
	addHC := false
	if v, ok := a.protocol(annHCProtocol); ok {
		hc.Protocol, addHC = v, true
	}
	if v, ok := a.int(annHCPort); ok {
		hc.Port, addHC = &v, true
	}
	if v, ok := a.seconds(annHCInterval); ok {
		hc.Interval, addHC = &v, true
	}
	if v, ok := a.seconds(annHCTimeout); ok {
		hc.Timeout, addHC = &v, true
	}
	if v, ok := a.int(annHCRetries); ok {
		hc.Retries, addHC = &v, true
	}
	if !addHC {
		return s
	}
	if hc.Port == nil {
		hc.Port = ptr(s.DestinationPort)
	}
	if hc.Protocol != "tcp" {
		var hh lbServiceHealthHTTP
		if v, ok := a.str(annHCHTTPDomain); ok {
			hh.Domain = &v
		}
		if v, ok := a.str(annHCHTTPPath); ok {
			hh.Path = &v
		}
		if v, ok := a.strings(annHCHTTPStatusCodes); ok {
			hh.StatusCodes = &v
		}
		if v, ok := a.bool(annHCHTTPValidateCert); ok {
			hh.TLS = &v
		}
		hc.HTTP = &hh
	}
	s.HealthCheck = &hc
	return s
}

// services is the load balancer service of each TCP port of the Service;
// ports of other protocols are logged and skipped.
func (p *Provider) services(svc *abi.Service, a *annotations) ([]lbService, error) {
	var out []lbService
	for _, port := range svc.Ports {
		if port.Protocol != "" && port.Protocol != "TCP" {
			p.logf(abi.LogWarning, "Service "+svc.Namespace+"/"+svc.Name+": port "+strconv.Itoa(int(port.Port))+" uses "+port.Protocol+", which Hetzner load balancers do not support; skipped")
			continue
		}
		s := serviceFor(port, a)
		if a.err != nil {
			return nil, a.err
		}
		out = append(out, s)
	}
	return out, nil
}

// reconcileServices adds a service per TCP port of the Service, updates
// the existing ones that differ from it, and deletes those of ports the
// Service no longer has.
func (p *Provider) reconcileServices(lb *loadBalancer, svc *abi.Service, act func(string, any) error) error {
	a := annotations{m: svc.Annotations}
	want, err := p.services(svc, &a)
	if err != nil {
		return err
	}
	stale := map[int]*lbService{}
	for i := range lb.Services {
		stale[lb.Services[i].ListenPort] = &lb.Services[i]
	}
	for _, s := range want {
		have, exists := stale[s.ListenPort]
		delete(stale, s.ListenPort)
		name := "add_service"
		if exists {
			if s.satisfiedBy(have) {
				continue
			}
			name = "update_service"
		}
		if err := act(name, s); err != nil {
			return err
		}
	}
	for port := range stale {
		if err := act("delete_service", map[string]int{"listen_port": port}); err != nil {
			return err
		}
	}
	return nil
}

// reconcileTargets makes the servers of the Nodes the load balancer's
// server targets, with the wanted use of private IPs; targets of other
// servers are removed. As the official CCM does, it never goes past the
// type's max_targets: targets in place stay, the other Nodes are added in
// their order until the limit is reached, and the Nodes left over are
// logged as a warning, not returned as an error, which would only make the
// controller retry what the API refuses.
func (p *Provider) reconcileTargets(ctx context.Context, lb *loadBalancer, svc *abi.Service, a *annotations, nodes []abi.Node, act func(string, any) error) error {
	private := p.usePrivateIP(a)
	if a.err != nil {
		return a.err
	}
	if private && p.cfg.Network == "" {
		return errors.New("hcloud: " + annUsePrivateIP + " needs a network in the provider config")
	}
	order, nodeName := p.targetServers(nodes)
	// Targets of every kind count against the type's limit.
	count := len(lb.Targets)
	have := map[int64]bool{}
	for _, t := range lb.Targets {
		if t.Type != "server" || t.Server == nil {
			continue
		}
		if _, want := nodeName[t.Server.ID]; want && t.UsePrivateIP == private {
			have[t.Server.ID] = true
			continue
		}
		if err := act("remove_target", map[string]any{"type": "server", "server": map[string]int64{"id": t.Server.ID}}); err != nil {
			return err
		}
		count--
	}
	limit := lb.LoadBalancerType.MaxTargets
	full := false
	var left []string
	for _, id := range order {
		if have[id] {
			continue
		}
		// A type without max_targets leaves the limit to the API's refusal.
		if full || (limit > 0 && count >= limit) {
			left = append(left, nodeName[id])
			continue
		}
		added, err := p.addTarget(ctx, lb, id, private)
		if err != nil {
			return err
		}
		if !added {
			full = true
			left = append(left, nodeName[id])
			continue
		}
		count++
	}
	if len(left) > 0 {
		msg := "Service " + svc.Namespace + "/" + svc.Name + ": load balancer " + strconv.Quote(lb.Name) +
			" has reached the max targets of its type " + lb.LoadBalancerType.Name
		if limit > 0 {
			msg += " (" + strconv.Itoa(limit) + ")"
		}
		p.logf(abi.LogWarning, msg+"; "+strconv.Itoa(len(left))+" Nodes not added: "+nameList(left))
	}
	return nil
}

// targetServers is the servers of the Nodes, each once and in the Nodes'
// order, with the name of its Node; Nodes without a server are logged and
// left out.
func (p *Provider) targetServers(nodes []abi.Node) (order []int64, nodeName map[int64]string) {
	nodeName = map[int64]string{}
	for i := range nodes {
		id, err := serverID(nodes[i].ProviderID)
		if err != nil {
			p.logf(abi.LogWarning, "Node "+nodes[i].Name+" is not a load balancer target: "+err.Error())
			continue
		}
		if _, seen := nodeName[id]; !seen {
			order = append(order, id)
			nodeName[id] = nodes[i].Name
		}
	}
	return order, nodeName
}

// serverTarget is a server target as add_target and the create request
// take it.
type serverTarget struct {
	Type   string `json:"type"`
	Server struct {
		ID int64 `json:"id"`
	} `json:"server"`
	UsePrivateIP bool `json:"use_private_ip"`
}

func newServerTarget(id int64, private bool) serverTarget {
	t := serverTarget{Type: "server", UsePrivateIP: private}
	t.Server.ID = id
	return t
}

// addTarget adds a server target and waits for its action. It returns
// false, and no error, when the API refuses the target with
// resource_limit_exceeded: the load balancer already has as many targets
// as its type allows.
func (p *Provider) addTarget(ctx context.Context, lb *loadBalancer, id int64, private bool) (bool, error) {
	what := "add_target on load balancer " + strconv.Quote(lb.Name)
	body, _ := json.Marshal(newServerTarget(id, private))
	var resp struct {
		Action *action `json:"action"`
	}
	req := &rest.Request{What: what, Method: "POST", Path: "/load_balancers/" + strconv.FormatInt(lb.ID, 10) + "/actions/add_target",
		Body: body, Accept: []int32{403}, Into: &resp}
	answer, err := p.api.Do(ctx, req)
	if err != nil {
		return false, err
	}
	if answer.StatusCode == 403 {
		if code, _, ok := decodeAPIError(answer); ok && code == "resource_limit_exceeded" {
			return false, nil
		}
		return false, p.api.Error(req, answer)
	}
	return true, p.wait(ctx, what, resp.Action)
}

// maxListed bounds the names a log line lists.
const maxListed = 10

// nameList joins names, at most maxListed of them.
func nameList(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxListed], ", ") + " and " + strconv.Itoa(len(names)-maxListed) + " more"
}

// status reports the load balancer's addresses as the official CCM does:
// the hostname annotation alone if set; else the public IPv4 and IPv6
// (unless disabled), then the private addresses (unless disabled).
func (p *Provider) status(lb *loadBalancer, svc *abi.Service) (*abi.LoadBalancerStatus, error) {
	a := annotations{m: svc.Annotations}
	if h, ok := a.str(annHostname); ok {
		return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{Hostname: h}}}, nil
	}
	mode := "VIP"
	if v, _ := a.bool(annProxyProtocol); v {
		mode = "Proxy"
	}
	ipv6 := !p.cfg.LoadBalancers.DisableIPv6
	if v, ok := a.bool(annIPv6Disabled); ok {
		ipv6 = !v
	}
	privateIngress := !p.cfg.LoadBalancers.DisablePrivateIngress
	if v, ok := a.bool(annDisablePrivateIngress); ok {
		privateIngress = !v
	}
	if a.err != nil {
		return nil, a.err
	}
	var st abi.LoadBalancerStatus
	if lb.PublicNet.Enabled {
		st.Ingress = append(st.Ingress, abi.LoadBalancerIngress{IP: lb.PublicNet.IPv4.IP, IPMode: mode})
		if ipv6 {
			st.Ingress = append(st.Ingress, abi.LoadBalancerIngress{IP: lb.PublicNet.IPv6.IP, IPMode: mode})
		}
	}
	if privateIngress {
		for _, pn := range lb.PrivateNet {
			st.Ingress = append(st.Ingress, abi.LoadBalancerIngress{IP: pn.IP, IPMode: mode})
		}
	}
	return &st, nil
}
