package conformance

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/abi"
)

// Spec is the author's test-spec file: what the suite may assume about the
// cloud it runs against.
type Spec struct {
	// Nodes are checked with InstanceExists and InstanceMetadata; the
	// existing ones are the test load balancer's targets.
	Nodes []SpecNode `json:"nodes"`
	// LoadBalancer configures the load balancer lifecycle check.
	LoadBalancer SpecLoadBalancer `json:"loadBalancer,omitempty"`
	// Routes configures the route lifecycle check.
	Routes SpecRoutes `json:"routes,omitempty"`
	// LimitedCredentials, when set, is a second credentials directory
	// with fewer permissions (a read-only token, say): the suite asks
	// about the existing Nodes and deletes the test load balancer and
	// route with it, and nothing the cloud refuses may be answered as
	// gone, shut down or deleted.
	LimitedCredentials *SpecCredentials `json:"limitedCredentials,omitempty"`
	// RateLimit is the cloud's documented rate limit, which the warm
	// phase's requests per hour are checked against.
	RateLimit *SpecRateLimit `json:"rateLimit,omitempty"`
	// Warm configures the warm phase.
	Warm SpecWarm `json:"warm,omitempty"`
	// SlowCloud, when set, runs the module with a call timeout shorter
	// than the cloud's actions take, as a slow cloud would: a call must
	// answer RetryAfter in time, and the suite calls again after it.
	SlowCloud *SpecSlowCloud `json:"slowCloud,omitempty"`
}

// SpecSlowCloud is the slow-cloud mode.
type SpecSlowCloud struct {
	// CallTimeout replaces the cloud-config's limits.callTimeout for the
	// run, a Go duration: shorter than your cloud's slowest action (a
	// load balancer's provisioning).
	CallTimeout string `json:"callTimeout"`
	// Settle bounds how long the suite keeps calling a mutating call
	// (EnsureLoadBalancer, UpdateLoadBalancer, EnsureLoadBalancerDeleted,
	// CreateRoute, DeleteRoute) again after RetryAfter; default 5m.
	Settle string `json:"settle,omitempty"`
	// RetryWait, when set, is how long the suite waits before calling
	// again, in place of the RetryAfter the module answered: only to
	// shorten a run against a fake cloud whose actions you made short.
	RetryWait string `json:"retryWait,omitempty"`
}

func (s *SpecSlowCloud) durations() (timeout, settle, wait time.Duration) {
	timeout, _ = time.ParseDuration(s.CallTimeout)
	settle, _ = time.ParseDuration(s.Settle)
	wait, _ = time.ParseDuration(s.RetryWait)
	return timeout, cmp.Or(settle, defaultSettle), wait
}

// defaultSettle bounds the suite's calls again after RetryAfter when the
// spec sets no slowCloud.settle.
const defaultSettle = 5 * time.Minute

// SpecRequest names requests of the cloud's API: a method and a path
// pattern (path.Match syntax: /v1/loadbalancers/*), or the Action of a
// query API, in the URL's query or a form body (DeleteLoadBalancer).
type SpecRequest struct {
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Action string `json:"action,omitempty"`
}

// matches reports whether ex is a request r names.
func (r SpecRequest) matches(ex Exchange) bool {
	if r.Action != "" {
		return queryAction(ex) == r.Action
	}
	if r.Method != "" && !strings.EqualFold(r.Method, ex.Method) {
		return false
	}
	ok, _ := path.Match(r.Path, urlPath(ex.URL))
	return ok
}

// valid reports whether r names requests one way: a path pattern, with
// a method or not, or an action.
func (r SpecRequest) valid() bool {
	_, err := path.Match(r.Path, "")
	return (r.Action == "") != (r.Path == "") && err == nil && (r.Method == "" || r.Path != "")
}

func (r SpecRequest) String() string {
	if r.Action != "" {
		return "Action=" + r.Action
	}
	return strings.TrimSpace(r.Method + " " + r.Path)
}

// SpecRateLimit is a cloud's rate limit for one token.
type SpecRateLimit struct {
	PerHour int `json:"perHour"`
}

// SpecWarm configures the warm phase, which replays the CCM's calls in a
// cluster at rest with the module's shared state kept between calls.
type SpecWarm struct {
	// Skip leaves the warm phase out.
	Skip bool `json:"skip,omitempty"`
	// Period is the simulated time replayed, a Go duration and a
	// multiple of 5m; default 10m. Its counts are extrapolated to an
	// hour.
	Period string `json:"period,omitempty"`
	// StateMaxAge is how often, in simulated time, the suite empties the
	// module's shared state, as if everything it keeps aged out then: the
	// shortest max-age the module gives StateGet; default 10s.
	StateMaxAge string `json:"stateMaxAge,omitempty"`
}

func (w SpecWarm) period() time.Duration {
	d, _ := time.ParseDuration(w.Period)
	return cmp.Or(d, defaultWarmPeriod)
}

func (w SpecWarm) stateMaxAge() time.Duration {
	d, _ := time.ParseDuration(w.StateMaxAge)
	return cmp.Or(d, defaultWarmStateMaxAge)
}

// SpecCredentials is a credentials directory, as credentials.dir of the
// cloud-config: one file per Secret key, the same keys the cloud-config
// binds. A relative path is relative to the spec file.
type SpecCredentials struct {
	Dir string `json:"dir"`
}

// SpecRoutes configures the test route.
type SpecRoutes struct {
	// Skip leaves the route checks out.
	Skip bool `json:"skip,omitempty"`
	// DestinationCIDR of the test route, to the first existing Node;
	// default 10.244.250.0/24.
	DestinationCIDR string `json:"destinationCIDR,omitempty"`
}

func (s SpecRoutes) destination() string {
	if s.DestinationCIDR == "" {
		return "10.244.250.0/24"
	}
	return s.DestinationCIDR
}

// SpecNode is a Node of the test cluster and what the cloud knows of it.
type SpecNode struct {
	Name       string            `json:"name"`
	ProviderID string            `json:"providerID,omitempty"`
	Addresses  []abi.NodeAddress `json:"addresses,omitempty"`
	// Exists is what InstanceExists must answer.
	Exists bool `json:"exists"`
	// InstanceType, Zone and Region, when set, are what InstanceMetadata
	// must answer.
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	Region       string `json:"region,omitempty"`
	// Shutdown, when set, is what InstanceShutdown must answer; unset,
	// any answer of a healthy cloud passes. Under a fault, InstanceShutdown
	// must never answer true where the clean call answered false.
	Shutdown *bool `json:"shutdown,omitempty"`
	// LookupByName also checks the Node without its provider ID, as a
	// brand-new Node is looked up: by name. A Node listed without a
	// providerID is only looked up by name.
	LookupByName bool `json:"lookupByName,omitempty"`
	// ExpectError, when set, is the status every instance call of this
	// Node must answer: NotFound, NotImplemented, ImplementedElsewhere,
	// RetryAfter or Error (a Node of another cloud, say, whose provider
	// ID the module must refuse rather than call gone).
	ExpectError string `json:"expectError,omitempty"`
}

// SpecLoadBalancer configures the test Service.
type SpecLoadBalancer struct {
	// Skip leaves the lifecycle out, e.g. against a cloud where creating
	// load balancers costs money.
	Skip bool `json:"skip,omitempty"`
	// Namespace and Name of the test Service; default
	// wasmccm-conformance/lb. Its UID is derived from them, so a run
	// finds and deletes what an interrupted run left.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Port and NodePort of its one TCP port; default 80 and 30080.
	Port     int32 `json:"port,omitempty"`
	NodePort int32 `json:"nodePort,omitempty"`
	// Annotations of the test Service, and of every Service the suite
	// creates a load balancer for: to judge the load balancer an
	// annotation chooses (aws's
	// service.beta.kubernetes.io/aws-load-balancer-type: nlb) rather
	// than the default one.
	Annotations map[string]string `json:"annotations,omitempty"`
	// List configures the checks of ListLoadBalancers, which run when
	// the module exports it (wasmccm_list_load_balancers).
	List SpecLoadBalancerList `json:"list,omitempty"`
	// Destructive names the cloud's requests that destroy a load
	// balancer (DELETE /v1/lbs/*, or Action DeleteLoadBalancer): an
	// EnsureLoadBalancer or UpdateLoadBalancer of an existing one that
	// sends one fails lb-preserved. Name them when a load balancer made
	// again has the same address, which the suite cannot tell apart.
	Destructive []SpecRequest `json:"destructive,omitempty"`
}

// SpecLoadBalancerList configures the lister checks. The suite creates
// the test load balancer and Seed more for this cluster (the cloud-config's
// clusterName, "kubernetes" by default, as the CCM's --cluster-name), and
// one for OtherCluster, through the module itself; it lists this cluster's,
// clean and under every fault, and deletes them all at the end.
type SpecLoadBalancerList struct {
	// Seed is how many load balancers, besides the test one, the suite
	// creates for this cluster: enough that the listing spans more than
	// one page of your cloud's API makes faults hit a later page too.
	// Default 2. Their Services are the test Service's name with -1,
	// -2, ... appended.
	Seed *int `json:"seed,omitempty"`
	// OtherCluster is the cluster the suite also creates a load balancer
	// for, which this cluster's listing must never name.
	OtherCluster SpecOtherCluster `json:"otherCluster,omitempty"`
	// Foreign names load balancers that exist in the test cloud and that
	// this cluster's listing must never name: made by hand, by another
	// tool or cluster, or without the tags your module writes. Create
	// them before the run; the suite never changes them.
	Foreign []string `json:"foreign,omitempty"`
}

// SpecOtherCluster is how the suite runs the module for another cluster in
// the same cloud account.
type SpecOtherCluster struct {
	// ClusterName is the other cluster's; default this cluster's name
	// with -other appended, so that a listing that matches the cluster
	// by prefix names its load balancer.
	ClusterName string `json:"clusterName,omitempty"`
	// ProviderConfig, when set, replaces the cloud-config's
	// providerConfig for the other cluster: for a module that takes its
	// cluster's identity from its configuration (aws's clusterID) rather
	// than from the cluster name.
	ProviderConfig json.RawMessage `json:"providerConfig,omitempty"`
}

func (l SpecLoadBalancerList) seed() int {
	if l.Seed == nil {
		return 2
	}
	return *l.Seed
}

func (o SpecOtherCluster) name(cluster string) string {
	return cmp.Or(o.ClusterName, cluster+"-other")
}

// ReadSpec reads and checks a test-spec file.
func ReadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, fmt.Errorf("test spec %s: %w; the valid fields are:\n%s", path, err, strings.Join(specFields(reflect.TypeOf(s), ""), "\n"))
		}
		return nil, fmt.Errorf("test spec %s: %w", path, err)
	}
	statuses := []string{"NotFound", "NotImplemented", "ImplementedElsewhere", "RetryAfter", "Error"}
	for i, n := range s.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("test spec %s: nodes[%d] has no name", path, i)
		}
		if n.ExpectError != "" && !slices.Contains(statuses, n.ExpectError) {
			return nil, fmt.Errorf("test spec %s: nodes[%d].expectError is %q; want one of %s", path, i, n.ExpectError, strings.Join(statuses, ", "))
		}
	}
	if n := s.LoadBalancer.List.Seed; n != nil && *n < 0 {
		return nil, fmt.Errorf("test spec %s: loadBalancer.list.seed is %d; want 0 or more", path, *n)
	}
	for field, v := range map[string]string{"warm.period": s.Warm.Period, "warm.stateMaxAge": s.Warm.StateMaxAge} {
		if d, err := time.ParseDuration(v); v != "" && (err != nil || d <= 0) {
			return nil, fmt.Errorf("test spec %s: %s is %q; want a positive duration such as 10m or 30s", path, field, v)
		}
	}
	if p := s.Warm.period(); p%nodeStatusPeriod != 0 {
		return nil, fmt.Errorf("test spec %s: warm.period is %s; want a multiple of %s, the longest period it replays, so that every call's rate is counted whole", path, p, nodeStatusPeriod)
	}
	if _, ok := s.LoadBalancer.Annotations[""]; ok {
		return nil, fmt.Errorf("test spec %s: loadBalancer.annotations has an empty key", path)
	}
	for i, d := range s.LoadBalancer.Destructive {
		if !d.valid() {
			return nil, fmt.Errorf("test spec %s: loadBalancer.destructive[%d] wants either a path pattern (with a method or not) or an action", path, i)
		}
	}
	if sc := s.SlowCloud; sc != nil {
		for field, v := range map[string]string{"slowCloud.callTimeout": sc.CallTimeout, "slowCloud.settle": sc.Settle, "slowCloud.retryWait": sc.RetryWait} {
			if d, err := time.ParseDuration(v); (v != "" || field == "slowCloud.callTimeout") && (err != nil || d <= 0) {
				return nil, fmt.Errorf("test spec %s: %s is %q; want a positive duration such as 2s", path, field, v)
			}
		}
	}
	if l := s.RateLimit; l != nil && l.PerHour <= 0 {
		return nil, fmt.Errorf("test spec %s: rateLimit.perHour is %d; want a positive number of requests", path, l.PerHour)
	}
	if lc := s.LimitedCredentials; lc != nil {
		if lc.Dir == "" {
			return nil, fmt.Errorf("test spec %s: limitedCredentials has no dir", path)
		}
		if !filepath.IsAbs(lc.Dir) {
			lc.Dir = filepath.Join(filepath.Dir(path), lc.Dir)
		}
	}
	return &s, nil
}

// specFields lists the fields of t as YAML paths, for the message that
// rejects an unknown one.
func specFields(t reflect.Type, prefix string) []string {
	var fields []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		// A []byte (json.RawMessage) is a value, not a list.
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			if ft.Kind() == reflect.Slice {
				name += "[]"
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			fields = append(fields, specFields(ft, prefix+name+".")...)
			continue
		}
		fields = append(fields, "  "+prefix+name)
	}
	return fields
}

// service is the test Service.
func (s *Spec) service() abi.Service {
	name := s.LoadBalancer.Name
	if name == "" {
		name = "lb"
	}
	return s.serviceNamed(name)
}

// serviceNamed is the test Service renamed, in the test Service's
// namespace.
func (s *Spec) serviceNamed(name string) abi.Service {
	lb := s.LoadBalancer
	ns := lb.Namespace
	if ns == "" {
		ns = "wasmccm-conformance"
	}
	port, nodePort := lb.Port, lb.NodePort
	if port == 0 {
		port = 80
	}
	if nodePort == 0 {
		nodePort = 30080
	}
	return abi.Service{
		Namespace: ns, Name: name, UID: serviceUID(ns, name),
		Annotations:           maps.Clone(lb.Annotations),
		Ports:                 []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: port, NodePort: nodePort}},
		ExternalTrafficPolicy: "Cluster",
	}
}

// serviceUID is a UID in the form Kubernetes gives (a random UUID), made
// from the Service's namespace and name: a rerun finds what an interrupted
// run left, and the Services' UIDs differ from the first character on, as
// real ones do, so names cut from a UID's start differ too.
func serviceUID(namespace, name string) string {
	h := sha256.Sum256([]byte(namespace + "/" + name))
	h[6] = h[6]&0x0f | 0x40 // version 4
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

func (n SpecNode) node() abi.Node {
	return abi.Node{Name: n.Name, UID: "uid-" + n.Name, ProviderID: n.ProviderID, Addresses: n.Addresses}
}

// targets are the Nodes of the existing instances.
func (s *Spec) targets() []abi.Node {
	var nodes []abi.Node
	for _, n := range s.Nodes {
		if n.Exists {
			nodes = append(nodes, n.node())
		}
	}
	return nodes
}
