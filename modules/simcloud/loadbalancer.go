package simcloud

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
)

// Tag keys written on every load balancer: the cluster and Service it
// was made for, which ListLoadBalancers reads back (the name cannot give
// the UID back: it is truncated). They follow the naming convention of
// modules/README.md, as the simulated cloud has no official CCM whose
// tags clusters rely on.
const (
	TagCluster    = "wasmccm.io/cluster"
	TagService    = "wasmccm.io/service"
	TagServiceUID = "wasmccm.io/service-uid"
)

// HealthCheckPath is the path kube-proxy serves on a Service's
// healthCheckNodePort.
const HealthCheckPath = "/healthz"

// sourceRangesAnnotation is the older way of setting
// spec.loadBalancerSourceRanges; the spec field wins when both are set.
const sourceRangesAnnotation = "service.beta.kubernetes.io/load-balancer-source-ranges"

// maxLBNameLen is the length cloudprovider.DefaultLoadBalancerName
// truncates to; simcloud allows longer names, but keeping the upstream
// convention makes names recognisable.
const maxLBNameLen = 32

// loadBalancer is a simcloud load balancer: what the provider sends and
// what it reads back.
type loadBalancer struct {
	Name         string            `json:"name"`
	IP           string            `json:"ip"`
	Ports        []lbPort          `json:"ports"`
	Targets      []string          `json:"targets"`
	HealthCheck  *healthCheck      `json:"healthCheck"`
	SourceRanges []string          `json:"sourceRanges"`
	Tags         map[string]string `json:"tags"`
}

// lbAddress is what a create reads of the cloud's answer: the answer lists
// every target again, and decoding them would cost a string each for
// nothing.
type lbAddress struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
}

type lbPort struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"nodePort"`
}

type healthCheck struct {
	NodePort int32  `json:"nodePort"`
	Path     string `json:"path"`
}

// body appends lb, encoded for POST (withIP: the requested IP, if any) or
// PUT, to dst. targets is lb.Targets as a JSON array (encodeTargets).
func (lb *loadBalancer) body(dst []byte, withIP bool, targets []byte) []byte {
	w := jsonWriter{b: dst}
	w.raw("{")
	w.key("name", true)
	w.str(lb.Name)
	if withIP && lb.IP != "" {
		w.key("ip", false)
		w.str(lb.IP)
	}
	w.key("ports", false)
	w.raw("[")
	for i, pt := range lb.Ports {
		if i > 0 {
			w.raw(",")
		}
		w.raw("{")
		first := true
		if pt.Name != "" {
			w.key("name", true)
			w.str(pt.Name)
			first = false
		}
		w.key("protocol", first)
		w.str(pt.Protocol)
		w.key("port", false)
		w.int(int64(pt.Port))
		w.key("nodePort", false)
		w.int(int64(pt.NodePort))
		w.raw("}")
	}
	w.raw("]")
	w.key("targets", false)
	w.b = append(w.b, targets...)
	if hc := lb.HealthCheck; hc != nil {
		w.key("healthCheck", false)
		w.raw("{")
		w.key("nodePort", true)
		w.int(int64(hc.NodePort))
		if hc.Path != "" {
			w.key("path", false)
			w.str(hc.Path)
		}
		w.raw("}")
	}
	if len(lb.SourceRanges) > 0 {
		w.key("sourceRanges", false)
		w.strings(lb.SourceRanges)
	}
	if len(lb.Tags) > 0 {
		w.key("tags", false)
		w.stringMap(lb.Tags)
	}
	w.raw("}")
	return w.b
}

// sameSpec reports whether the cloud's load balancer already has what want
// asks for, so that no update is needed. Targets are compared as sets.
func sameSpec(have, want *loadBalancer) bool {
	if !slices.Equal(have.Ports, want.Ports) || !slices.Equal(have.SourceRanges, want.SourceRanges) {
		return false
	}
	// want's targets are sorted and unique; have's, as long, are equal as
	// a set only when they are too.
	if len(have.Targets) != len(want.Targets) || !slices.Equal(sortedUnique(slices.Clone(have.Targets)), want.Targets) {
		return false
	}
	if (have.HealthCheck == nil) != (want.HealthCheck == nil) ||
		have.HealthCheck != nil && *have.HealthCheck != *want.HealthCheck {
		return false
	}
	if len(have.Tags) != len(want.Tags) {
		return false
	}
	for k, v := range want.Tags {
		if hv, ok := have.Tags[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// status is the status of the load balancer the cloud reported as name
// with ip.
func status(what, name, ip string) (*abi.LoadBalancerStatus, error) {
	if ip == "" {
		return nil, errors.New("simcloud: " + what + ": the cloud reported load balancer " + quote(name) + " without an IP")
	}
	return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{IP: ip, IPMode: "VIP"}}}, nil
}

// GetLoadBalancerName derives the name from the Service UID only, like
// cloudprovider.DefaultLoadBalancerName: "a" followed by the UID without
// dashes, truncated to 32 characters. It survives restarts and renames, so
// a load balancer is never created twice for one Service.
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *abi.Service) string {
	name := "a" + strings.ReplaceAll(svc.UID, "-", "")
	if len(name) > maxLBNameLen {
		name = name[:maxLBNameLen]
	}
	return name
}

func (p *Provider) lbName(svc *abi.Service) (string, error) {
	if svc.UID == "" {
		return "", errors.New("simcloud: Service " + svc.Namespace + "/" + svc.Name + " has no UID to name its load balancer after")
	}
	return p.GetLoadBalancerName(context.Background(), p.cluster, svc), nil
}

func serviceName(svc *abi.Service) string { return svc.Namespace + "/" + svc.Name }

// getLB fetches a load balancer; (nil, nil) means the cloud said it does
// not exist.
func (p *Provider) getLB(ctx context.Context, what, name string) (*loadBalancer, error) {
	return getOne[loadBalancer](p, ctx, what, "/v1/loadbalancers/"+rest.PathEscape(name))
}

// GetLoadBalancer reports the Service's load balancer, if it exists.
func (p *Provider) GetLoadBalancer(ctx context.Context, _ string, svc *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	name, err := p.lbName(svc)
	if err != nil {
		return nil, false, err
	}
	what := "getting load balancer " + name + " of Service " + serviceName(svc)
	lb, err := p.getLB(ctx, what, name)
	if err != nil || lb == nil {
		return nil, false, err
	}
	st, err := status(what, lb.Name, lb.IP)
	if err != nil {
		return nil, false, err
	}
	return st, true, nil
}

// spec builds the load balancer the Service asks for, without targets.
func (p *Provider) spec(svc *abi.Service, name string) (*loadBalancer, error) {
	lb := &loadBalancer{Name: name, IP: svc.LoadBalancerIP}
	prefix := "simcloud: Service " + serviceName(svc) + ": "
	if len(svc.Ports) == 0 {
		return nil, errors.New(prefix + "has no ports")
	}
	for _, sp := range svc.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = "TCP"
		}
		port := strconv.Itoa(int(sp.Port)) + "/" + proto
		if proto != "TCP" && proto != "UDP" {
			return nil, errors.New(prefix + "port " + port + ": simcloud load balancers support only TCP and UDP")
		}
		if sp.NodePort == 0 {
			return nil, errors.New(prefix + "port " + port + " has no node port; simcloud load balancers forward to node ports, so spec.allocateLoadBalancerNodePorts must not be false")
		}
		lb.Ports = append(lb.Ports, lbPort{Name: sp.Name, Protocol: proto, Port: sp.Port, NodePort: sp.NodePort})
	}
	if svc.HealthCheckNodePort != 0 {
		lb.HealthCheck = &healthCheck{NodePort: svc.HealthCheckNodePort, Path: HealthCheckPath}
	}
	lb.SourceRanges = sourceRanges(svc)
	lb.Tags = map[string]string{TagService: serviceName(svc), TagServiceUID: svc.UID}
	if p.cluster != "" {
		lb.Tags[TagCluster] = p.cluster
	}
	return lb, nil
}

// sourceRanges returns spec.loadBalancerSourceRanges or, when that is
// empty, the ranges of the legacy annotation.
func sourceRanges(svc *abi.Service) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range svc.LoadBalancerSourceRanges {
		add(r)
	}
	if len(out) == 0 {
		for _, r := range strings.Split(svc.Annotations[sourceRangesAnnotation], ",") {
			add(r)
		}
	}
	return out
}

// targets maps nodes to instance IDs, sorted and without duplicates. Nodes
// with a simcloud provider ID are mapped without a request. Nodes without
// one are looked up by name, and with verify every ID is checked to exist,
// both through a single list of the instances. Nodes whose instance cannot
// be found are left out, with a warning: the load balancer can only
// forward to instances that exist. The result must not be changed: it may
// be kept for the next call (nodeTargets).
func (p *Provider) targets(ctx context.Context, svc *abi.Service, nodes []abi.Node, verify bool) ([]string, error) {
	fromIDs, byName := p.nodeTargets.of(p, nodes)
	if len(byName) == 0 && !verify {
		return fromIDs, nil
	}
	ids := slices.Clone(fromIDs)
	all, err := p.listInstances(ctx, "listing instances for the load balancer of Service "+serviceName(svc))
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(all))
	exists := make(map[string]bool, len(all))
	for _, in := range all {
		names[in.Name] = in.ID
		exists[in.ID] = true
	}
	if verify {
		kept := ids[:0]
		for _, id := range ids {
			if exists[id] {
				kept = append(kept, id)
			} else {
				p.logf(abi.LogWarning, "load balancer of Service "+serviceName(svc)+": leaving out instance "+id+", which no longer exists")
			}
		}
		ids = kept
	}
	for _, n := range byName {
		if id, ok := names[n.Name]; ok {
			ids = append(ids, id)
		} else {
			p.logf(abi.LogWarning, "load balancer of Service "+serviceName(svc)+": leaving out node "+quote(n.Name)+", which has no provider ID and no instance of that name")
		}
	}
	return sortedUnique(ids), nil
}

// nodeTargets is what targets reads of a Node list without asking the
// cloud: the instance IDs of its simcloud provider IDs, sorted and without
// duplicates, and the Nodes without a provider ID. It is kept for as long
// as the calls pass the same list (abi.SameNodes), so that a cluster's
// Nodes are read once per change rather than once per load balancer.
type nodeTargets struct {
	mu     sync.Mutex
	nodes  []abi.Node
	ids    []string
	byName []*abi.Node
	valid  bool
	// idsJSON is ids as a JSON array, once a request body needed it: every
	// load balancer created or updated over the same Nodes sends the same
	// targets, and encoding thousands of IDs again for each was most of
	// what a module's create cost beyond native's (BENCHMARKS.md).
	idsJSON []byte
}

func (t *nodeTargets) of(p *Provider, nodes []abi.Node) (ids []string, byName []*abi.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.valid && abi.SameNodes(t.nodes, nodes) {
		return t.ids, t.byName
	}
	ids = make([]string, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if n.ProviderID == "" {
			byName = append(byName, n)
			continue
		}
		id, err := ParseProviderID(n.ProviderID)
		if err != nil {
			p.logf(abi.LogWarning, "load balancers: leaving out node "+quote(n.Name)+": "+err.Error())
			continue
		}
		ids = append(ids, id)
	}
	ids = sortedUnique(ids)
	t.nodes, t.ids, t.byName, t.valid, t.idsJSON = nodes, ids, byName, true, nil
	return ids, byName
}

// encodeTargets is ids as a JSON array. When ids is the kept list's own
// (targets returned it unchanged: every Node had a provider ID and none
// needed checking), the encoding is kept with it.
func (t *nodeTargets) encodeTargets(ids []string) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.valid && len(ids) > 0 && len(ids) == len(t.ids) && &ids[0] == &t.ids[0]
	if kept && t.idsJSON != nil {
		return t.idsJSON
	}
	size := 2
	for _, id := range ids {
		size += len(id) + 3
	}
	w := jsonWriter{b: make([]byte, 0, size)}
	w.strings(ids)
	if kept {
		t.idsJSON = w.b
	}
	return w.b
}

// sortedUnique sorts ids and drops duplicates, as slices.Sort and
// slices.Compact do. In a module every loop iteration also counts down
// the host's deadline budget, and comparing strings byte by byte is a
// loop: comparing their first eight bytes as one integer first leaves
// most comparisons without one.
func sortedUnique(ids []string) []string {
	keyed := make([]keyedID, len(ids))
	for i, id := range ids {
		keyed[i] = keyedID{prefix: prefix8(id), id: id}
	}
	slices.SortFunc(keyed, func(a, b keyedID) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return strings.Compare(a.id, b.id)
	})
	out := ids[:0]
	for i, k := range keyed {
		if i == 0 || k.prefix != keyed[i-1].prefix || k.id != keyed[i-1].id {
			out = append(out, k.id)
		}
	}
	return out
}

type keyedID struct {
	prefix uint64
	id     string
}

// prefix8 is the first eight bytes of s as a big-endian integer, padded
// with zeros: two strings whose prefixes differ compare as their prefixes
// do.
func prefix8(s string) uint64 {
	var b [8]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:])
}

// listInstances lists every instance.
func (p *Provider) listInstances(ctx context.Context, what string) ([]instance, error) {
	var list instanceList
	if _, err := p.api.Do(ctx, &rest.Request{What: what, Method: "GET", Path: "/v1/instances", Into: &list}); err != nil {
		return nil, err
	}
	return list, nil
}

// write sends lb with POST (create) or PUT (update) and decodes the cloud's
// 2xx answer into out (a *loadBalancer, or an *lbAddress for a create). A
// create also returns a 409 conflict as a response; for an update, a 404
// is an error wrapping sdk.ErrNotFound. When the cloud
// rejects the request as invalid (400) and the targets were not verified
// yet, they may name an instance that was terminated while its Node still
// exists: the targets are then checked and, if that drops any, the request
// is sent once more.
func (p *Provider) write(ctx context.Context, what, method string, lb *loadBalancer, out any, svc *abi.Service, nodes []abi.Node) (*rest.Request, *abi.HTTPResponse, error) {
	req := &rest.Request{What: what, Method: method, Path: "/v1/loadbalancers", Into: out, Accept: []int32{400}}
	if method == "PUT" {
		req.Path += "/" + rest.PathEscape(lb.Name)
		req.NotFound = true
	} else {
		req.Accept = append(req.Accept, 409)
	}
	for verified := false; ; verified = true {
		targets := p.nodeTargets.encodeTargets(lb.Targets)
		buf := p.bodies.get(len(targets) + 256)
		*buf = lb.body((*buf)[:0], method == "POST", targets)
		req.Body = *buf
		resp, err := p.api.Do(ctx, req)
		req.Body = nil // the caller's req must not keep a buffer given back
		p.bodies.put(buf)
		if err != nil || resp.StatusCode != 400 {
			return req, resp, err
		}
		if !verified && len(lb.Targets) > 0 {
			checked, err := p.targets(ctx, svc, nodes, true)
			if err == nil && len(checked) < len(lb.Targets) {
				lb.Targets = checked
				continue
			}
		}
		return req, nil, p.api.Error(req, resp) // report the cloud's 400
	}
}

// bodyBuffers are the buffers request bodies are written into, reused
// from one write to the next: a body lists every target, and a module
// built without a collector keeps each buffer it allocates until its
// instance is recycled, which then comes sooner.
type bodyBuffers struct{ pool sync.Pool }

// get returns an empty buffer of at least size bytes.
func (b *bodyBuffers) get(size int) *[]byte {
	buf, _ := b.pool.Get().(*[]byte)
	if buf == nil || cap(*buf) < size {
		made := make([]byte, 0, size)
		buf = &made
	}
	return buf
}

func (b *bodyBuffers) put(buf *[]byte) { b.pool.Put(buf) }

// EnsureLoadBalancer creates or updates the Service's load balancer. It is
// idempotent: the load balancer is found by its name, created only when
// the cloud says it does not exist, and a create that conflicts with an
// existing one (a concurrent or earlier create whose response was lost) is
// turned into an update, so no Service ever gets two.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, _ string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	name, err := p.lbName(svc)
	if err != nil {
		return nil, err
	}
	want, err := p.spec(svc, name)
	if err != nil {
		return nil, err
	}
	if want.Targets, err = p.targets(ctx, svc, nodes, false); err != nil {
		return nil, err
	}
	what := "ensuring load balancer " + name + " of Service " + serviceName(svc)
	have, err := p.getLB(ctx, what, name)
	if err != nil {
		return nil, err
	}
	if have == nil {
		var created lbAddress
		req, resp, err := p.write(ctx, what, "POST", want, &created, svc, nodes)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 409 {
			p.logf(abi.LogInfo, "created load balancer "+name+" with IP "+created.IP+" for Service "+serviceName(svc))
			return status(what, created.Name, created.IP)
		}
		// Either the load balancer exists after all, or the requested IP
		// is taken; only a fresh read tells which.
		conflict := p.api.Error(req, resp)
		if have, err = p.getLB(ctx, what, name); err != nil {
			return nil, err
		}
		if have == nil {
			return nil, conflict
		}
		p.logf(abi.LogInfo, "load balancer "+name+" of Service "+serviceName(svc)+" already existed; updating it")
	}
	if want.IP != "" && have.IP != want.IP {
		return nil, errors.New("simcloud: " + what + ": the Service asks for IP " + want.IP + " but the load balancer has " + have.IP +
			"; the IP of a load balancer cannot change, so recreate the Service to move it")
	}
	if sameSpec(have, want) {
		p.logf(abi.LogDebug, "load balancer "+name+" of Service "+serviceName(svc)+" is up to date")
		return status(what, have.Name, have.IP)
	}
	lb, err := p.update(ctx, what, want, svc, nodes)
	if err != nil {
		return nil, err
	}
	return status(what, lb.Name, lb.IP)
}

// update replaces the load balancer's spec with want.
func (p *Provider) update(ctx context.Context, what string, want *loadBalancer, svc *abi.Service, nodes []abi.Node) (*loadBalancer, error) {
	var lb loadBalancer
	req, _, err := p.write(ctx, what, "PUT", want, &lb, svc, nodes)
	if errors.Is(err, sdk.ErrNotFound) {
		return nil, errors.New("simcloud: " + what + ": PUT " + req.Path + ": the load balancer does not exist (it is created by EnsureLoadBalancer)")
	}
	if err != nil {
		return nil, err
	}
	if p.host.LogEnabled(abi.LogInfo) {
		p.logf(abi.LogInfo, "updated load balancer "+lb.Name+" of Service "+serviceName(svc)+": "+
			strconv.Itoa(len(lb.Ports))+" ports, "+strconv.Itoa(len(lb.Targets))+" targets")
	}
	return &lb, nil
}

// UpdateLoadBalancer sets the load balancer's targets to the nodes (and the
// rest of its spec to the Service's).
func (p *Provider) UpdateLoadBalancer(ctx context.Context, _ string, svc *abi.Service, nodes []abi.Node) error {
	name, err := p.lbName(svc)
	if err != nil {
		return err
	}
	want, err := p.spec(svc, name)
	if err != nil {
		return err
	}
	if want.Targets, err = p.targets(ctx, svc, nodes, false); err != nil {
		return err
	}
	_, err = p.update(ctx, "updating load balancer "+name+" of Service "+serviceName(svc), want, svc, nodes)
	return err
}

// EnsureLoadBalancerDeleted deletes the Service's load balancer; one that
// is already gone is success.
func (p *Provider) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *abi.Service) error {
	name, err := p.lbName(svc)
	if err != nil {
		return err
	}
	what := "deleting load balancer " + name + " of Service " + serviceName(svc)
	_, err = p.api.Do(ctx, &rest.Request{What: what, Method: "DELETE", Path: "/v1/loadbalancers/" + rest.PathEscape(name), NotFound: true})
	if errors.Is(err, sdk.ErrNotFound) {
		p.logf(abi.LogDebug, "load balancer "+name+" of Service "+serviceName(svc)+" was already gone")
		return nil
	}
	if err != nil {
		return err
	}
	p.logf(abi.LogInfo, "deleted load balancer "+name+" of Service "+serviceName(svc))
	return nil
}

// ListLoadBalancers implements sdk.LoadBalancerLister: every load balancer
// tagged with clusterName and a Service UID. simcloud answers the whole
// list in one response, so a failed request is an error and never an
// empty list. Load balancers without the UID tag (made before it was
// written) are left out: nothing ties them to a Service.
func (p *Provider) ListLoadBalancers(ctx context.Context, clusterName string) ([]abi.OwnedLoadBalancer, error) {
	var list loadBalancerList
	if _, err := p.api.Do(ctx, &rest.Request{What: "listing load balancers", Method: "GET", Path: "/v1/loadbalancers", Into: &list}); err != nil {
		return nil, err
	}
	var out []abi.OwnedLoadBalancer
	for _, lb := range list {
		uid := lb.Tags[TagServiceUID]
		if uid == "" || clusterName == "" || lb.Tags[TagCluster] != clusterName {
			continue
		}
		owned := abi.OwnedLoadBalancer{Name: lb.Name, ClusterName: clusterName, ServiceUID: uid}
		if ns, name, ok := strings.Cut(lb.Tags[TagService], "/"); ok {
			owned.ServiceNamespace, owned.ServiceName = ns, name
		}
		out = append(out, owned)
	}
	return out, nil
}
