package abi

// This file holds the wire types. Each is a slim projection of the
// Kubernetes object the controllers hold: only what a provider needs, so
// that encoding stays cheap and modules stay independent of k8s.io/api.
// Fields are encoded in declaration order; adding a field is an ABI change.

// NodeAddress mirrors v1.NodeAddress. Type is one of Hostname, InternalIP,
// ExternalIP, InternalDNS, ExternalDNS.
type NodeAddress struct {
	Type    string
	Address string
}

func (a *NodeAddress) Encode(e *Encoder) { e.String(a.Type); e.String(a.Address) }
func (a *NodeAddress) Decode(d *Decoder) { a.Type = d.String(); a.Address = d.String() }

// NodeAddresses is a list of addresses as a message of its own.
type NodeAddresses []NodeAddress

func (l *NodeAddresses) Encode(e *Encoder) { encodeList(e, *l) }
func (l *NodeAddresses) Decode(d *Decoder) { *l = decodeList[NodeAddress](d) }

// Node is what a provider learns of a Kubernetes Node.
type Node struct {
	Name        string
	UID         string
	ProviderID  string
	Labels      map[string]string
	Annotations map[string]string
	Addresses   []NodeAddress
	PodCIDRs    []string
}

func (n *Node) Encode(e *Encoder) {
	e.String(n.Name)
	e.String(n.UID)
	e.String(n.ProviderID)
	e.StringMap(n.Labels)
	e.StringMap(n.Annotations)
	encodeList(e, n.Addresses)
	e.Strings(n.PodCIDRs)
}

func (n *Node) Decode(d *Decoder) {
	n.Name = d.String()
	n.UID = d.String()
	n.ProviderID = d.String()
	n.Labels = d.StringMap()
	n.Annotations = d.StringMap()
	n.Addresses = decodeList[NodeAddress](d)
	n.PodCIDRs = d.Strings()
}

// ServicePort mirrors the parts of v1.ServicePort a load balancer needs.
type ServicePort struct {
	Name     string
	Protocol string
	Port     int32
	NodePort int32
}

func (p *ServicePort) Encode(e *Encoder) {
	e.String(p.Name)
	e.String(p.Protocol)
	e.Int(int64(p.Port))
	e.Int(int64(p.NodePort))
}

func (p *ServicePort) Decode(d *Decoder) {
	p.Name = d.String()
	p.Protocol = d.String()
	p.Port = d.Int32()
	p.NodePort = d.Int32()
}

// LoadBalancerIngress mirrors v1.LoadBalancerIngress without port status.
type LoadBalancerIngress struct {
	IP       string
	Hostname string
	// IPMode is "VIP", "Proxy" or empty.
	IPMode string
}

func (i *LoadBalancerIngress) Encode(e *Encoder) {
	e.String(i.IP)
	e.String(i.Hostname)
	e.String(i.IPMode)
}

func (i *LoadBalancerIngress) Decode(d *Decoder) {
	i.IP = d.String()
	i.Hostname = d.String()
	i.IPMode = d.String()
}

// LoadBalancerStatus mirrors v1.LoadBalancerStatus.
type LoadBalancerStatus struct {
	Ingress []LoadBalancerIngress
}

func (s *LoadBalancerStatus) Encode(e *Encoder) { encodeList(e, s.Ingress) }
func (s *LoadBalancerStatus) Decode(d *Decoder) { s.Ingress = decodeList[LoadBalancerIngress](d) }

// Service is what a provider learns of a Service of type LoadBalancer.
type Service struct {
	Namespace                string
	Name                     string
	UID                      string
	Annotations              map[string]string
	Ports                    []ServicePort
	LoadBalancerClass        string
	LoadBalancerIP           string
	ExternalTrafficPolicy    string
	LoadBalancerSourceRanges []string
	IPFamilies               []string
	HealthCheckNodePort      int32
	// Status is the load balancer status currently recorded on the Service.
	Status LoadBalancerStatus
}

func (s *Service) Encode(e *Encoder) {
	e.String(s.Namespace)
	e.String(s.Name)
	e.String(s.UID)
	e.StringMap(s.Annotations)
	encodeList(e, s.Ports)
	e.String(s.LoadBalancerClass)
	e.String(s.LoadBalancerIP)
	e.String(s.ExternalTrafficPolicy)
	e.Strings(s.LoadBalancerSourceRanges)
	e.Strings(s.IPFamilies)
	e.Int(int64(s.HealthCheckNodePort))
	s.Status.Encode(e)
}

func (s *Service) Decode(d *Decoder) {
	s.Namespace = d.String()
	s.Name = d.String()
	s.UID = d.String()
	s.Annotations = d.StringMap()
	s.Ports = decodeList[ServicePort](d)
	s.LoadBalancerClass = d.String()
	s.LoadBalancerIP = d.String()
	s.ExternalTrafficPolicy = d.String()
	s.LoadBalancerSourceRanges = d.Strings()
	s.IPFamilies = d.Strings()
	s.HealthCheckNodePort = d.Int32()
	s.Status.Decode(d)
}

// InstanceMetadata mirrors cloudprovider.InstanceMetadata.
type InstanceMetadata struct {
	ProviderID       string
	InstanceType     string
	NodeAddresses    []NodeAddress
	Zone             string
	Region           string
	AdditionalLabels map[string]string
}

func (m *InstanceMetadata) Encode(e *Encoder) {
	e.String(m.ProviderID)
	e.String(m.InstanceType)
	encodeList(e, m.NodeAddresses)
	e.String(m.Zone)
	e.String(m.Region)
	e.StringMap(m.AdditionalLabels)
}

func (m *InstanceMetadata) Decode(d *Decoder) {
	m.ProviderID = d.String()
	m.InstanceType = d.String()
	m.NodeAddresses = decodeList[NodeAddress](d)
	m.Zone = d.String()
	m.Region = d.String()
	m.AdditionalLabels = d.StringMap()
}

// Route mirrors cloudprovider.Route.
type Route struct {
	Name                string
	TargetNode          string
	TargetNodeAddresses []NodeAddress
	DestinationCIDR     string
	Blackhole           bool
}

func (r *Route) Encode(e *Encoder) {
	e.String(r.Name)
	e.String(r.TargetNode)
	encodeList(e, r.TargetNodeAddresses)
	e.String(r.DestinationCIDR)
	e.Bool(r.Blackhole)
}

func (r *Route) Decode(d *Decoder) {
	r.Name = d.String()
	r.TargetNode = d.String()
	r.TargetNodeAddresses = decodeList[NodeAddress](d)
	r.DestinationCIDR = d.String()
	r.Blackhole = d.Bool()
}

// Routes is a list of routes as a message of its own.
type Routes []Route

func (l *Routes) Encode(e *Encoder) { encodeList(e, *l) }
func (l *Routes) Decode(d *Decoder) { *l = decodeList[Route](d) }

// Zone mirrors cloudprovider.Zone.
type Zone struct {
	FailureDomain string
	Region        string
}

func (z *Zone) Encode(e *Encoder) { e.String(z.FailureDomain); e.String(z.Region) }
func (z *Zone) Decode(d *Decoder) { z.FailureDomain = d.String(); z.Region = d.String() }

// OwnedLoadBalancer is one load balancer a module made, as
// ExportListLoadBalancers (revision 3) reports it.
type OwnedLoadBalancer struct {
	// Name is the load balancer's name in the cloud: what
	// GetLoadBalancerName answers for the Service it serves. Required.
	Name string
	// ID is the cloud's identifier, for logs and Events; may be empty.
	ID string
	// ClusterName is the cluster the load balancer was made for, as
	// recorded in the cloud; empty when the cloud records none (the host
	// then relies on the module having listed this cluster's only).
	ClusterName string
	// ServiceUID is the UID of the Service it was made for. Required.
	ServiceUID string
	// ServiceNamespace and ServiceName name that Service, when known.
	ServiceNamespace string
	ServiceName      string
}

func (l *OwnedLoadBalancer) Encode(e *Encoder) {
	e.String(l.Name)
	e.String(l.ID)
	e.String(l.ClusterName)
	e.String(l.ServiceUID)
	e.String(l.ServiceNamespace)
	e.String(l.ServiceName)
}

func (l *OwnedLoadBalancer) Decode(d *Decoder) {
	l.Name = d.String()
	l.ID = d.String()
	l.ClusterName = d.String()
	l.ServiceUID = d.String()
	l.ServiceNamespace = d.String()
	l.ServiceName = d.String()
}

// OwnedLoadBalancers is ExportListLoadBalancers' payload.
type OwnedLoadBalancers []OwnedLoadBalancer

func (l *OwnedLoadBalancers) Encode(e *Encoder) { encodeList(e, *l) }
func (l *OwnedLoadBalancers) Decode(d *Decoder) { *l = decodeList[OwnedLoadBalancer](d) }

// Scalar payloads.

// Bool is a boolean message (InstanceExists, InstanceShutdown).
type Bool bool

func (b *Bool) Encode(e *Encoder) { e.Bool(bool(*b)) }
func (b *Bool) Decode(d *Decoder) { *b = Bool(d.Bool()) }

// String is a string message (names, IDs, types).
type String string

func (s *String) Encode(e *Encoder) { e.String(string(*s)) }
func (s *String) Decode(d *Decoder) { *s = String(d.String()) }

// Strings is a string-list message (ListClusters).
type Strings []string

func (s *Strings) Encode(e *Encoder) { e.Strings(*s) }
func (s *Strings) Decode(d *Decoder) { *s = d.Strings() }

// Requests.

// InitRequest is ExportInit's input.
type InitRequest struct {
	// ClusterName is the CCM's --cluster-name.
	ClusterName string
	// Config is the opaque provider config from cloud-config, handed over
	// verbatim (typically YAML or JSON the module parses itself).
	Config []byte
}

func (r *InitRequest) Encode(e *Encoder) { e.String(r.ClusterName); e.ByteSlice(r.Config) }
func (r *InitRequest) Decode(d *Decoder) { r.ClusterName = d.String(); r.Config = d.ByteSlice() }

// LoadBalancerRequest is the input of every LoadBalancer export. Nodes is
// empty for Get, GetName and EnsureDeleted.
type LoadBalancerRequest struct {
	ClusterName string
	Service     Service
	Nodes       []Node
}

func (r *LoadBalancerRequest) Encode(e *Encoder) {
	e.String(r.ClusterName)
	r.Service.Encode(e)
	encodeList(e, r.Nodes)
}

func (r *LoadBalancerRequest) Decode(d *Decoder) {
	r.ClusterName = d.String()
	r.Service.Decode(d)
	r.Nodes = decodeList[Node](d)
}

// LoadBalancerNodes is ExportSetLoadBalancerNodes' input: the Nodes of the
// load balancer calls that follow, as LoadBalancerRequest.Nodes would
// carry them.
type LoadBalancerNodes struct {
	Nodes []Node
}

func (n *LoadBalancerNodes) Encode(e *Encoder) { encodeList(e, n.Nodes) }
func (n *LoadBalancerNodes) Decode(d *Decoder) { n.Nodes = decodeList[Node](d) }

// SameNodes reports whether a and b are one Node list: the same slice of
// the same array. Load balancer calls that get the same list get it as
// the same slice (ExportSetLoadBalancerNodes), and a list is never
// changed once passed, so a provider may key what it derives from a list
// on it, and the host knows which list an instance holds. Equal lists
// that are not the same slice only cost that work again.
func SameNodes(a, b []Node) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// GetLoadBalancerResult is ExportGetLoadBalancer's payload.
type GetLoadBalancerResult struct {
	Status LoadBalancerStatus
	Exists bool
}

func (r *GetLoadBalancerResult) Encode(e *Encoder) { r.Status.Encode(e); e.Bool(r.Exists) }
func (r *GetLoadBalancerResult) Decode(d *Decoder) { r.Status.Decode(d); r.Exists = d.Bool() }

// RouteRequest is the input of the Routes exports. NameHint and Route are
// empty for ListRoutes; NameHint is set only for CreateRoute.
type RouteRequest struct {
	ClusterName string
	NameHint    string
	Route       Route
}

func (r *RouteRequest) Encode(e *Encoder) {
	e.String(r.ClusterName)
	e.String(r.NameHint)
	r.Route.Encode(e)
}

func (r *RouteRequest) Decode(d *Decoder) {
	r.ClusterName = d.String()
	r.NameHint = d.String()
	r.Route.Decode(d)
}

// Empty is the input or payload of calls that carry none.
type Empty struct{}

func (*Empty) Encode(*Encoder) {}
func (*Empty) Decode(*Decoder) {}

// HTTP host function messages.

// Header is one HTTP header field; repeated names are repeated entries.
type Header struct {
	Name  string
	Value string
}

func (h *Header) Encode(e *Encoder) { e.String(h.Name); e.String(h.Value) }
func (h *Header) Decode(d *Decoder) { h.Name = d.String(); h.Value = d.String() }

// HTTPRequest is ImportHTTPDo's input.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers []Header
	Body    []byte
	// TimeoutMillis shortens the host's HTTP timeout for this request; 0
	// keeps it. It can never extend it, nor outlive the call's deadline.
	TimeoutMillis uint32
}

func (r *HTTPRequest) Encode(e *Encoder) {
	e.String(r.Method)
	e.String(r.URL)
	encodeList(e, r.Headers)
	e.ByteSlice(r.Body)
	e.Uint(uint64(r.TimeoutMillis))
}

func (r *HTTPRequest) Decode(d *Decoder) {
	r.Method = d.String()
	r.URL = d.String()
	r.Headers = decodeListUpTo[Header](d, MaxRequestHeaders)
	r.Body = d.ByteSlice()
	r.TimeoutMillis = d.Uint32()
}

// HTTPResponse is ImportHTTPDo's pending result. Error is set, and the
// other fields are empty, when the host did not get a response: the
// destination is not allowed, the request timed out, the response was too
// large, or the transport failed.
type HTTPResponse struct {
	StatusCode int32
	Headers    []Header
	Body       []byte
	Error      string
}

func (r *HTTPResponse) Encode(e *Encoder) {
	e.Int(int64(r.StatusCode))
	encodeList(e, r.Headers)
	e.ByteSlice(r.Body)
	e.String(r.Error)
}

func (r *HTTPResponse) Decode(d *Decoder) {
	r.StatusCode = d.Int32()
	r.Headers = decodeList[Header](d)
	r.Body = d.ByteSlice()
	r.Error = d.String()
}

// Header returns the first value of the named header, matched without
// regard to case.
func (r *HTTPResponse) Header(name string) string {
	for _, h := range r.Headers {
		if equalFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// equalFold is ASCII case folding; header names are ASCII, and this avoids
// pulling strings' Unicode tables into guests.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
