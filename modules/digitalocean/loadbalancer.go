package digitalocean

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// Tags. DigitalOcean tags are plain strings of letters, digits, colons,
// dashes and underscores, so the naming convention's keys are written as
// "key:value" strings with the key's "." and "/" left out:
// wasmccm.io/cluster=NAME is "wasmccm:cluster:NAME" and
// wasmccm.io/service-uid=UID is "wasmccm:service-uid:UID". The official
// CCM's "k8s:<DO_CLUSTER_ID>" is written too when clusterID is set.
const (
	tagClusterPrefix    = "wasmccm:cluster:"
	tagServiceUIDPrefix = "wasmccm:service-uid:"
	tagOfficialPrefix   = "k8s:"
)

// validTag reports whether the API accepts name as a tag.
func validTag(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == ':' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// clusterTag is the cluster's tag, "" when the cluster name cannot be
// part of one: such a cluster's load balancers are not tagged with it,
// and not listed.
func clusterTag(clusterName string) string {
	if tag := tagClusterPrefix + clusterName; clusterName != "" && validTag(tag) {
		return tag
	}
	return ""
}

// tagValue returns the value of the first tag with prefix.
func tagValue(tags []string, prefix string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok {
			return v
		}
	}
	return ""
}

// lbStatus values of the API.
const (
	statusNew    = "new"
	statusActive = "active"
)

// retryNew is when to ask again about a load balancer still being
// created, the official CCM's.
const retryNew = 15 * time.Second

// ListLoadBalancers implements sdk.LoadBalancerLister: the load balancers
// tagged with this cluster and a Service UID, over every page of the
// account's load balancers (the API filters them by no tag). A page that
// fails, or a listing short of meta.total, is an error.
func (p *Provider) ListLoadBalancers(ctx context.Context, clusterName string) ([]abi.OwnedLoadBalancer, error) {
	cluster := clusterTag(clusterName)
	if cluster == "" {
		return nil, errors.New("digitalocean: cluster name " + strconv.Quote(clusterName) + " cannot be part of a tag, so load balancers are not tagged with it and cannot be listed")
	}
	list, err := listAll[loadBalancer](ctx, p, "listing the cluster's load balancers", "load_balancers")
	if err != nil {
		return nil, err
	}
	var out []abi.OwnedLoadBalancer
	for _, lb := range list {
		uid := tagValue(lb.Tags, tagServiceUIDPrefix)
		if uid == "" || !slices.Contains(lb.Tags, cluster) {
			continue
		}
		out = append(out, abi.OwnedLoadBalancer{Name: lb.Name, ID: lb.ID, ClusterName: clusterName, ServiceUID: uid})
	}
	return out, nil
}

// GetLoadBalancerName implements sdk.LoadBalancer as the official CCM
// names load balancers: the name annotation, or Kubernetes' default name
// ("a" and the Service UID without dashes, at most 32 characters).
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *abi.Service) string {
	if name := svc.Annotations[annName]; name != "" {
		return name
	}
	return defaultName(svc)
}

func defaultName(svc *abi.Service) string {
	name := "a" + strings.ReplaceAll(svc.UID, "-", "")
	return name[:min(len(name), 32)]
}

// find looks the Service's load balancer up: by the ID the official CCM
// recorded on the Service, else among all load balancers by the Service
// UID tag, then by its name or default name, as the official CCM finds
// the load balancers it made. nil when the API lists none.
func (p *Provider) find(ctx context.Context, svc *abi.Service) (*loadBalancer, error) {
	if id := svc.Annotations[annLoadBalancerID]; id != "" {
		lb, found, err := get[loadBalancer](ctx, p, "getting load balancer "+id, "/v2/load_balancers/"+rest.PathEscape(id), "load_balancer")
		if found || err != nil {
			return lb, err
		}
	}
	list, err := listAll[loadBalancer](ctx, p, "finding the load balancer of Service "+svc.Namespace+"/"+svc.Name, "load_balancers")
	if err != nil {
		return nil, err
	}
	uidTag := tagServiceUIDPrefix + svc.UID
	for i := range list {
		if slices.Contains(list[i].Tags, uidTag) {
			return &list[i], nil
		}
	}
	// A load balancer another Service's UID tag claims is never taken by
	// its name.
	for _, name := range []string{svc.Annotations[annName], defaultName(svc)} {
		for i := range list {
			if name != "" && list[i].Name == name && tagValue(list[i].Tags, tagServiceUIDPrefix) == "" {
				return &list[i], nil
			}
		}
	}
	return nil, nil
}

// GetLoadBalancer implements sdk.LoadBalancer.
func (p *Provider) GetLoadBalancer(ctx context.Context, _ string, svc *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	lb, err := p.find(ctx, svc)
	if err != nil || lb == nil {
		return nil, false, err
	}
	return status(lb, svc), true, nil
}

// EnsureLoadBalancer implements sdk.LoadBalancer: find or create the load
// balancer, then bring its tags and settings to what the Service asks.
// A load balancer still being created answers RetryAfter, as the official
// CCM's does.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	if disowned, err := isDisowned(svc); disowned || err != nil {
		return &svc.Status, err
	}
	lb, err := p.sync(ctx, clusterName, svc, nodes, true)
	if err != nil {
		return nil, err
	}
	switch lb.Status {
	case statusActive:
		return status(lb, svc), nil
	case statusNew:
		return nil, sdk.RetryAfter(retryNew, "digitalocean: load balancer "+strconv.Quote(lb.Name)+" is being created")
	}
	return nil, errors.New("digitalocean: load balancer " + strconv.Quote(lb.Name) + " has unexpected status " + strconv.Quote(lb.Status))
}

// UpdateLoadBalancer implements sdk.LoadBalancer. A Service whose load
// balancer does not exist yet is left to EnsureLoadBalancer.
func (p *Provider) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *abi.Service, nodes []abi.Node) error {
	if disowned, err := isDisowned(svc); disowned || err != nil {
		return err
	}
	_, err := p.sync(ctx, clusterName, svc, nodes, false)
	return err
}

// EnsureLoadBalancerDeleted implements sdk.LoadBalancer: the load balancer
// the official CCM would delete (by recorded ID or name), or the one
// tagged with the Service's UID.
func (p *Provider) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *abi.Service) error {
	if disowned, err := isDisowned(svc); disowned || err != nil {
		return err
	}
	lb, err := p.find(ctx, svc)
	if err != nil || lb == nil {
		return err
	}
	_, err = p.api.Do(ctx, &rest.Request{What: "deleting load balancer " + strconv.Quote(lb.Name), Method: "DELETE",
		Path: "/v2/load_balancers/" + rest.PathEscape(lb.ID), NotFound: true})
	if errors.Is(err, sdk.ErrNotFound) {
		return nil
	}
	return err
}

func isDisowned(svc *abi.Service) (bool, error) {
	a := annotations{m: svc.Annotations}
	return a.bool(annDisown), a.err
}

// sync builds what the Service asks for, finds the load balancer and
// creates it (when create is set) or brings it there: missing tags
// through the tags API, settings by one update, and only when they
// differ. It returns the load balancer as the API last answered it; nil
// when it does not exist and create is not set.
func (p *Provider) sync(ctx context.Context, clusterName string, svc *abi.Service, nodes []abi.Node, create bool) (*loadBalancer, error) {
	if err := checkSupported(svc); err != nil {
		return nil, err
	}
	lb, err := p.find(ctx, svc)
	if err != nil || lb == nil && !create {
		return nil, err
	}
	// The type of a load balancer cannot change; the official CCM records
	// an existing one's on its Service, and so builds for it from then on.
	typ := p.cfg.DefaultLoadBalancerType
	if lb != nil && lb.Type != "" {
		typ = lb.Type
	}
	want, err := p.desired(ctx, svc, nodes, typ)
	if err != nil {
		return nil, err
	}
	tags := []string{tagServiceUIDPrefix + svc.UID}
	if tag := clusterTag(clusterName); tag != "" {
		tags = append(tags, tag)
	}
	if p.cfg.ClusterID != "" {
		tags = append(tags, tagOfficialPrefix+p.cfg.ClusterID)
	}
	if lb == nil {
		return p.create(ctx, svc, want, tags)
	}
	for _, tag := range tags {
		if !slices.Contains(lb.Tags, tag) {
			if err := p.tag(ctx, lb, tag); err != nil {
				return nil, err
			}
		}
	}
	if same(&lb.lbSettings, &want.lbSettings) {
		return lb, nil
	}
	if lb.Region != nil {
		want.Region = lb.Region.Slug
	}
	body, err := json.Marshal(want)
	if err != nil {
		return nil, errors.New("digitalocean: encoding the load balancer: " + err.Error())
	}
	var resp struct {
		LoadBalancer *loadBalancer `json:"load_balancer"`
	}
	what := "updating load balancer " + strconv.Quote(lb.Name)
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "PUT", Path: "/v2/load_balancers/" + rest.PathEscape(lb.ID), Body: body, Into: &resp}); err != nil {
		return nil, err
	}
	if resp.LoadBalancer == nil {
		return nil, errors.New("digitalocean: " + what + ": the response holds no load balancer")
	}
	return resp.LoadBalancer, nil
}

// create makes the load balancer, tagged, in the configured region and
// VPC, with the BYOIP address the Service may name.
func (p *Provider) create(ctx context.Context, svc *abi.Service, want *lbRequest, tags []string) (*loadBalancer, error) {
	if p.cfg.Region == "" {
		return nil, errors.New("digitalocean: creating the load balancer of Service " + svc.Namespace + "/" + svc.Name + ": the provider config sets no region")
	}
	want.Region, want.VPCUUID, want.Tags = p.cfg.Region, p.cfg.VPCID, tags
	want.IP = strings.TrimSpace(svc.Annotations[annIP])
	body, err := json.Marshal(want)
	if err != nil {
		return nil, errors.New("digitalocean: encoding the load balancer: " + err.Error())
	}
	what := "creating load balancer " + strconv.Quote(want.Name)
	var resp struct {
		LoadBalancer *loadBalancer `json:"load_balancer"`
	}
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "POST", Path: "/v2/load_balancers", Body: body, Into: &resp}); err != nil {
		return nil, err
	}
	if resp.LoadBalancer == nil {
		return nil, errors.New("digitalocean: " + what + ": the response holds no load balancer")
	}
	p.logf(abi.LogInfo, "created load balancer "+strconv.Quote(want.Name)+" ("+resp.LoadBalancer.ID+") for Service "+svc.Namespace+"/"+svc.Name)
	return resp.LoadBalancer, nil
}

// tag adds tag to lb as the official CCM tags load balancers: a tag that
// does not exist yet (404) is created, and the tagging tried again.
func (p *Provider) tag(ctx context.Context, lb *loadBalancer, tag string) error {
	body, _ := json.Marshal(map[string]any{"resources": []map[string]string{{"resource_id": lb.ID, "resource_type": "load_balancer"}}})
	req := &rest.Request{What: "tagging load balancer " + strconv.Quote(lb.Name) + " " + tag, Method: "POST",
		Path: "/v2/tags/" + rest.PathEscape(tag) + "/resources", Body: body, Accept: []int32{404}}
	resp, err := p.api.Do(ctx, req)
	if err != nil || resp.StatusCode != 404 {
		return err
	}
	if !isNotFound(resp) {
		return p.api.Error(req, resp)
	}
	create, _ := json.Marshal(map[string]string{"name": tag})
	if _, err := p.api.Do(ctx, &rest.Request{What: "creating tag " + tag, Method: "POST", Path: "/v2/tags", Body: create}); err != nil {
		return err
	}
	req.Accept = nil
	_, err = p.api.Do(ctx, req)
	return err
}

// status reports the load balancer's addresses as the official CCM does:
// the hostname annotation alone if set, else its IPv4 and IPv6 addresses.
func status(lb *loadBalancer, svc *abi.Service) *abi.LoadBalancerStatus {
	if h := strings.ToLower(svc.Annotations[annHostname]); h != "" {
		return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{Hostname: h}}}
	}
	var st abi.LoadBalancerStatus
	for _, ip := range []string{lb.IP, lb.IPv6} {
		if ip != "" {
			st.Ingress = append(st.Ingress, abi.LoadBalancerIngress{IP: ip})
		}
	}
	return &st
}

// same reports whether the load balancer has the settings the provider
// wants. Settings the provider leaves to the API (a size, an idle timeout
// it does not set) and those an update cannot change (type, network,
// stack), and the algorithm, which the API ignores, are not compared.
func same(have, want *lbSettings) bool {
	h, w := canonical(*have), canonical(*want)
	h.Algorithm, h.Type, h.Network, h.NetworkStack = w.Algorithm, w.Type, w.Network, w.NetworkStack
	if w.SizeSlug == "" && w.SizeUnit == 0 {
		h.SizeSlug, h.SizeUnit = "", 0
	}
	if w.HTTPIdleTimeoutSeconds == nil {
		h.HTTPIdleTimeoutSeconds = nil
	}
	if w.SubnetUUID == "" {
		h.SubnetUUID = ""
	}
	if hc := h.HealthCheck; hc != nil && w.HealthCheck != nil && w.HealthCheck.ProxyProtocol == nil {
		hc.ProxyProtocol = nil
	}
	hb, _ := json.Marshal(h)
	wb, _ := json.Marshal(w)
	return bytes.Equal(hb, wb)
}

// canonical orders a load balancer's lists and fills the API's defaults,
// so that equal settings encode equally.
func canonical(s lbSettings) lbSettings {
	s.ForwardingRules = slices.Clone(s.ForwardingRules)
	slices.SortFunc(s.ForwardingRules, func(a, b forwardingRule) int {
		return strings.Compare(strconv.Itoa(a.EntryPort+100000)+a.EntryProtocol, strconv.Itoa(b.EntryPort+100000)+b.EntryProtocol)
	})
	s.DropletIDs = slices.Clone(s.DropletIDs)
	slices.Sort(s.DropletIDs)
	if s.HealthCheck != nil {
		hc := *s.HealthCheck
		if hc.ProxyProtocol != nil && !*hc.ProxyProtocol {
			hc.ProxyProtocol = nil
		}
		s.HealthCheck = &hc
	}
	if s.StickySessions == nil || s.StickySessions.Type == "none" {
		s.StickySessions = nil
	}
	if s.DisableLetsEncryptDNSRecords != nil && !*s.DisableLetsEncryptDNSRecords {
		s.DisableLetsEncryptDNSRecords = nil
	}
	if fw := s.Firewall; fw != nil {
		allow, deny := slices.Sorted(slices.Values(fw.Allow)), slices.Sorted(slices.Values(fw.Deny))
		s.Firewall = &firewall{Allow: allow, Deny: deny}
		if len(allow) == 0 && len(deny) == 0 {
			s.Firewall = nil
		}
	}
	return s
}

// desired builds the load balancer the Service asks for, as the official
// CCM builds its request, with the droplets of the Nodes that can serve
// it; typ is the type when the Service's annotation sets none. A
// malformed annotation is an error, and nothing is changed.
func (p *Provider) desired(ctx context.Context, svc *abi.Service, nodes []abi.Node, typ string) (*lbRequest, error) {
	a := annotations{m: svc.Annotations}
	want := &lbRequest{}
	s := &want.lbSettings
	s.Name = p.GetLoadBalancerName(ctx, "", svc)
	s.Type = a.oneOf(annType, typ, typeRegional, typeRegionalNetwork)
	s.Network = a.oneOf(annNetwork, networkExternal, networkExternal, networkInternal)
	if a.err != nil {
		return nil, a.err
	}
	ready, err := classify(svc, nodes, s.Type, s.Network)
	if err != nil {
		return nil, err
	}
	if s.NetworkStack, err = ready.stack(&a, s.Type, s.Network); err != nil {
		return nil, err
	}
	if s.Type == typeRegionalNetwork {
		s.ForwardingRules, err = networkRules(svc)
	} else {
		s.ForwardingRules, err = forwardingRules(svc, &a)
	}
	if err != nil {
		return nil, err
	}
	if s.HealthCheck, err = healthCheckFor(svc, &a); err != nil {
		return nil, err
	}
	s.StickySessions = &stickySessions{Type: "none"}
	if a.str(annStickyType) == "cookies" {
		s.StickySessions = &stickySessions{Type: "cookies", CookieName: a.str(annStickyCookieName), CookieTTLSeconds: a.int(annStickyCookieTTL, 0)}
		if s.StickySessions.CookieName == "" || s.StickySessions.CookieTTLSeconds == 0 {
			return nil, errors.New("digitalocean: cookie sticky sessions need " + annStickyCookieName + " and " + annStickyCookieTTL)
		}
	}
	s.Algorithm = "round_robin"
	if a.str(annAlgorithm) == "least_connections" {
		s.Algorithm = "least_connections"
	}
	s.SizeSlug = a.oneOf(annSizeSlug, "", "lb-small", "lb-medium", "lb-large")
	s.SizeUnit = uint32(a.int(annSizeUnit, 0))
	if s.SizeSlug != "" && s.SizeUnit > 0 {
		return nil, errors.New("digitalocean: only one of " + annSizeSlug + " and " + annSizeUnit + " may be set")
	}
	s.RedirectHTTPToHTTPS = a.bool(annRedirectHTTPToHTTPS)
	s.EnableProxyProtocol = a.bool(annProxyProtocol)
	s.EnableBackendKeepalive = a.bool(annBackendKeepalive)
	disableLE := a.bool(annDisableLetsEncryptDNS)
	s.DisableLetsEncryptDNSRecords = &disableLE
	if _, ok := svc.Annotations[annHTTPIdleTimeout]; ok {
		v := uint64(a.int(annHTTPIdleTimeout, 0))
		s.HTTPIdleTimeoutSeconds = &v
	}
	s.Firewall = &firewall{Deny: a.list(annDenyRules), Allow: a.list(annAllowRules)}
	if len(svc.LoadBalancerSourceRanges) > 0 {
		s.Firewall.Allow = nil
		for _, r := range svc.LoadBalancerSourceRanges {
			prefix, err := netip.ParsePrefix(strings.TrimSpace(r))
			if err != nil {
				return nil, errors.New("digitalocean: loadBalancerSourceRanges " + strconv.Quote(r) + " is not a CIDR such as 10.0.0.0/24")
			}
			s.Firewall.Allow = append(s.Firewall.Allow, "cidr:"+prefix.Masked().String())
		}
	}
	s.SubnetUUID = strings.TrimSpace(svc.Annotations[annSubnetUUID])
	if a.err != nil {
		return nil, a.err
	}
	if s.DropletIDs, err = p.dropletIDs(ctx, ready.nodes); err != nil {
		return nil, err
	}
	return want, nil
}

// dropletIDs maps Nodes to droplets: by provider ID, or by name as the
// official CCM does for Nodes without one. A Node whose droplet is not
// found is left out with a warning.
func (p *Provider) dropletIDs(ctx context.Context, nodes []abi.Node) ([]int64, error) {
	var ids []int64
	var missing []string
	for i := range nodes {
		n := &nodes[i]
		if n.ProviderID != "" {
			id, err := dropletID(n.ProviderID)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
			continue
		}
		d, err := p.dropletByName(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		if d == nil {
			missing = append(missing, n.Name)
			continue
		}
		ids = append(ids, d.ID)
	}
	if len(missing) > 0 {
		p.logf(abi.LogWarning, "no droplet found for Nodes "+strings.Join(missing, ", ")+"; they are not load balancer targets")
	}
	return ids, nil
}

// readyNodes are the Nodes that can serve a load balancer, and what IP
// families they have.
type readyNodes struct {
	nodes             []abi.Node
	v4Only, dualStack int
}

// classify keeps the Nodes that can serve a load balancer of type typ on
// network, as the official CCM does: an external REGIONAL_NETWORK load
// balancer needs Nodes with a public IPv4 address (IPv6 alone is not
// enough); a REGIONAL or internal one takes private-only Nodes too.
func classify(svc *abi.Service, nodes []abi.Node, typ, network string) (*readyNodes, error) {
	r := &readyNodes{}
	privateOK := network == networkInternal || typ == typeRegional
	unready := 0
	for _, n := range nodes {
		if network == networkInternal {
			r.nodes = append(r.nodes, n)
			continue
		}
		v4, v6 := false, false
		for _, addr := range n.Addresses {
			if ip, err := netip.ParseAddr(addr.Address); err == nil && addr.Type == "ExternalIP" {
				v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
			}
		}
		if !v4 && !v6 && privateOK {
			for _, addr := range n.Addresses {
				if ip, err := netip.ParseAddr(addr.Address); err == nil && addr.Type == "InternalIP" && ip.Is4() {
					v4 = true
				}
			}
		}
		switch {
		case !v4 && !v6:
			unready++
		case !v4:
			// IPv6-only Nodes cannot serve an external load balancer.
		default:
			r.nodes = append(r.nodes, n)
			if v6 {
				r.dualStack++
			} else {
				r.v4Only++
			}
		}
	}
	if len(r.nodes) == 0 {
		if unready > 0 && typ == typeRegionalNetwork && network == networkExternal {
			return nil, errors.New("digitalocean: Service " + svc.Namespace + "/" + svc.Name + ": REGIONAL_NETWORK EXTERNAL load balancers need at least one Node with a public IPv4 address; for private-only Nodes set " + annType + "=REGIONAL or " + annNetwork + "=INTERNAL")
		}
		return nil, errors.New("digitalocean: Service " + svc.Namespace + "/" + svc.Name + ": no Nodes can serve the load balancer")
	}
	return r, nil
}

// stack is the network stack: the annotation's, else IPV4 for an internal
// load balancer, DUALSTACK for a REGIONAL one, and for REGIONAL_NETWORK
// DUALSTACK only when every Node has IPv6.
func (r *readyNodes) stack(a *annotations, typ, network string) (string, error) {
	def := stackIPv4
	switch {
	case network == networkInternal:
	case typ == typeRegional, r.dualStack > 0 && r.v4Only == 0:
		def = stackDualstack
	}
	stack := a.oneOf(annNetworkStack, def, stackIPv4, stackDualstack)
	switch {
	case a.err != nil:
		return "", a.err
	case stack == stackDualstack && network == networkInternal:
		return "", errors.New("digitalocean: dual stack is not supported for internal load balancers")
	case stack == stackDualstack && typ == typeRegionalNetwork && r.v4Only > 0:
		return "", errors.New("digitalocean: dual stack needs every Node to have IPv6 for a REGIONAL_NETWORK load balancer; " + strconv.Itoa(r.v4Only) + " have none")
	}
	return stack, nil
}

// networkRules are a REGIONAL_NETWORK load balancer's rules: each port
// forwarded as it is, TCP or UDP.
func networkRules(svc *abi.Service) ([]forwardingRule, error) {
	var rules []forwardingRule
	for _, port := range svc.Ports {
		proto, err := portProtocol(port)
		if err != nil {
			return nil, err
		}
		rules = append(rules, forwardingRule{EntryProtocol: proto, EntryPort: int(port.Port), TargetProtocol: proto, TargetPort: int(port.Port)})
	}
	return rules, nil
}

func portProtocol(port abi.ServicePort) (string, error) {
	switch port.Protocol {
	case "", "TCP":
		return "tcp", nil
	case "UDP":
		return "udp", nil
	}
	return "", errors.New("digitalocean: port " + strconv.Itoa(int(port.Port)) + ": only TCP or UDP is supported, got " + port.Protocol)
}

// forwardingRules are a REGIONAL load balancer's rules: each port to its
// node port, with the protocol the annotations give it (http-ports,
// tls-ports, http2-ports, else protocol; UDP ports stay UDP). A
// certificate or TLS passthrough makes port 443 HTTPS unless tls-ports
// names others.
func forwardingRules(svc *abi.Service, a *annotations) ([]forwardingRule, error) {
	def := a.oneOf(annProtocol, "tcp", "tcp", "http", "https", "http2")
	byPort := map[int]string{}
	var dups []string
	portsOf := func(name, proto string) []int {
		ports := a.ports(name)
		for _, port := range ports {
			if byPort[port] != "" {
				dups = append(dups, strconv.Itoa(port))
			}
			byPort[port] = proto
		}
		return ports
	}
	portsOf(annHTTPPorts, "http")
	tls := portsOf(annTLSPorts, "https")
	http2 := portsOf(annHTTP2Ports, "http2")
	if a.err != nil {
		return nil, a.err
	}
	if len(dups) > 0 {
		return nil, errors.New("digitalocean: ports " + strings.Join(dups, ", ") + " appear in more than one of the http-ports, tls-ports and http2-ports annotations")
	}
	cert, passthrough := a.str(annCertificateID), a.bool(annTLSPassthrough)
	if (cert != "" || passthrough) && len(tls) == 0 && !slices.Contains(http2, 443) {
		byPort[443] = "https"
	}
	var rules []forwardingRule
	for _, port := range svc.Ports {
		proto := cmpOr(byPort[int(port.Port)], def)
		if port.Protocol == "UDP" {
			proto = "udp"
		} else if _, err := portProtocol(port); err != nil {
			return nil, err
		}
		rule := forwardingRule{EntryProtocol: proto, EntryPort: int(port.Port), TargetProtocol: proto, TargetPort: int(port.NodePort)}
		if proto == "https" || proto == "http2" {
			switch {
			case cert != "" && passthrough:
				return nil, errors.New("digitalocean: set either " + annCertificateID + " or " + annTLSPassthrough + ", not both")
			case cert != "":
				rule.CertificateID, rule.TargetProtocol = cert, "http"
			case passthrough:
				rule.TLSPassthrough = true
			default:
				return nil, errors.New("digitalocean: port " + strconv.Itoa(int(port.Port)) + " is " + proto + ": set " + annCertificateID + " or " + annTLSPassthrough)
			}
		}
		rules = append(rules, rule)
	}
	return rules, a.err
}

// kubeProxyHealthPort is where kube-proxy answers health checks.
const kubeProxyHealthPort = 10256

// healthCheckFor is the official CCM's health check: kube-proxy's
// /healthz (or the Service's health check node port with
// externalTrafficPolicy Local) over HTTP without the proxy protocol,
// unless override-health-check lets the healthcheck-path, -port and
// -protocol annotations choose; the timings and thresholds always come
// from their annotations.
func healthCheckFor(svc *abi.Service, a *annotations) (*healthCheck, error) {
	hc := &healthCheck{Protocol: "http", Path: "/healthz", Port: kubeProxyHealthPort, ProxyProtocol: new(bool)}
	if svc.ExternalTrafficPolicy == "Local" && svc.HealthCheckNodePort != 0 {
		hc.Port = int(svc.HealthCheckNodePort)
	}
	if _, ok := svc.Annotations[annHCOverride]; ok {
		hc.Path, hc.ProxyProtocol = a.str(annHCPath), nil
		hc.Protocol = a.oneOf(annHCProtocol, "tcp", "tcp", "http", "https")
		if _, set := svc.Annotations[annHCProtocol]; !set && hc.Path != "" {
			hc.Protocol = "http"
		}
		port, err := healthCheckPort(svc, a)
		if err != nil {
			return nil, err
		}
		hc.Port = port
	}
	hc.CheckIntervalSeconds = a.int(annHCInterval, 3)
	hc.ResponseTimeoutSeconds = a.int(annHCTimeout, 5)
	hc.UnhealthyThreshold = a.int(annHCUnhealthy, 3)
	hc.HealthyThreshold = a.int(annHCHealthy, 5)
	return hc, a.err
}

// healthCheckPort is the node port of the Service port the annotation
// names, else of the first TCP port.
func healthCheckPort(svc *abi.Service, a *annotations) (int, error) {
	ports := a.ports(annHCPort)
	if len(ports) > 1 {
		return 0, errors.New("digitalocean: " + annHCPort + " takes a single port")
	}
	for _, port := range svc.Ports {
		tcp := port.Protocol == "" || port.Protocol == "TCP"
		if len(ports) == 1 && int(port.Port) == ports[0] {
			if !tcp {
				return 0, errors.New("digitalocean: the health check port " + strconv.Itoa(ports[0]) + " is not TCP")
			}
			return int(port.NodePort), nil
		}
		if len(ports) == 0 && tcp {
			return int(port.NodePort), nil
		}
	}
	if len(ports) == 1 {
		return 0, errors.New("digitalocean: the health check port " + strconv.Itoa(ports[0]) + " is not a port of the Service")
	}
	return 0, errors.New("digitalocean: the Service has no TCP port to health check")
}
