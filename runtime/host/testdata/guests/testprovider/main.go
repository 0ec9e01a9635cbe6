// Command testprovider is a provider module for the host's tests. It
// implements every capability with answers derived from its inputs, reaches
// the host functions from InstanceMetadata, and misbehaves on request: the
// node name selects the behaviour, so one module covers every path.
package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/cache"
	"github.com/wasmccm/wasmccm/modules/sdk/export/clusters"
	_ "github.com/wasmccm/wasmccm/modules/sdk/export/deadline"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instances"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
	"github.com/wasmccm/wasmccm/modules/sdk/export/zones"
)

type provider struct {
	host    sdk.Host
	cluster string
	baseURL string
	routes  []abi.Route
	hog     [][]byte
	scratch []byte
}

func init() {
	p := &provider{host: sdk.Imports()}
	sdk.Set(p)
	instancesv2.Set(p)
	instances.Set(p)
	loadbalancer.Set(p)
	routes.Set(p)
	zones.Set(p)
	clusters.Set(p)
}

func main() {}

func (p *provider) Init(_ context.Context, clusterName string, config []byte) error {
	if string(config) == "reject" {
		return errors.New("config says reject")
	}
	p.cluster, p.baseURL = clusterName, string(config)
	return nil
}

// misbehave runs the hostile behaviour a node name asks for.
func (p *provider) misbehave(name string) {
	switch name {
	case "trap":
		panic("provider panicked on purpose")
	case "loop":
		for {
		}
	case "oom":
		for {
			p.hog = append(p.hog, make([]byte, 1<<20))
		}
	case "log-flood":
		for i := 0; i < 10000; i++ {
			p.host.Log(abi.LogError, "flood")
		}
	}
	// "garbage-N": N MiB of short-lived allocations, dropped before the
	// call returns, as decoding a large request or response leaves.
	if n, ok := strings.CutPrefix(name, "garbage-"); ok {
		mib, _ := strconv.Atoi(n)
		for i := 0; i < mib*16; i++ {
			p.scratch = make([]byte, 64<<10)
			p.scratch[len(p.scratch)-1] = byte(i)
		}
		p.scratch = nil
	}
	// "http-flood-N": N requests, each to a different host name that is
	// not allowed, as a module fishing for unbounded host state would.
	if n, err := strconv.Atoi(strings.TrimPrefix(name, "http-flood-")); err == nil {
		for i := 0; i < n; i++ {
			if _, err := p.host.HTTP(&abi.HTTPRequest{URL: "http://h" + strconv.Itoa(i) + ".flood.example/"}); err == nil {
				panic("a request to a host not allowed was made")
			}
		}
	}
}

func (p *provider) InstanceExists(_ context.Context, node *abi.Node) (bool, error) {
	p.misbehave(node.Name)
	switch node.Name {
	case "missing":
		return false, nil
	case "notfound":
		return false, sdk.ErrNotFound
	case "retry":
		return false, sdk.RetryAfter(3*time.Second, "rate limited")
	case "error":
		return false, errors.New("cloud said no")
	}
	return true, nil
}

func (p *provider) InstanceShutdown(_ context.Context, node *abi.Node) (bool, error) {
	return node.Labels["shutdown"] == "true", nil
}

func (p *provider) InstanceMetadata(_ context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	p.misbehave(node.Name)
	url, credential := p.baseURL+"/instances/"+node.Name, "token"
	switch node.Name {
	case "denied-host":
		url = "http://forbidden.example/instances/x"
	case "cred-not-granted":
		credential = "other"
	case "cred-missing":
		credential = "absent"
	case "big":
		return &abi.InstanceMetadata{ProviderID: strings.Repeat("x", 9<<20)}, nil
	}
	resp, err := p.host.HTTP(&abi.HTTPRequest{Method: "GET", URL: url,
		Headers: []abi.Header{{Name: abi.HeaderCredential, Value: credential}}})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, errors.New("cloud answered " + resp.Header("X-Status"))
	}
	p.host.Log(abi.LogInfo, "metadata for "+node.Name)
	return &abi.InstanceMetadata{
		ProviderID:       "test://" + node.Name,
		InstanceType:     string(resp.Body),
		Zone:             resp.Header("X-Zone"),
		Region:           "region-1",
		NodeAddresses:    node.Addresses,
		AdditionalLabels: node.Labels,
	}, nil
}

func (p *provider) NodeAddresses(_ context.Context, name string) ([]abi.NodeAddress, error) {
	return []abi.NodeAddress{{Type: "Hostname", Address: name}}, nil
}

func (p *provider) NodeAddressesByProviderID(_ context.Context, id string) ([]abi.NodeAddress, error) {
	return []abi.NodeAddress{{Type: "InternalIP", Address: strings.TrimPrefix(id, "test://")}}, nil
}

func (p *provider) InstanceID(_ context.Context, name string) (string, error) {
	if name == "missing" {
		return "", sdk.ErrNotFound
	}
	return "id-" + name, nil
}
func (p *provider) InstanceType(ctx context.Context, name string) (string, error) {
	if name == "time-left" {
		deadline, ok := ctx.Deadline()
		if !ok {
			return "", errors.New("the call's context has no deadline")
		}
		return time.Until(deadline).String(), nil
	}
	return "type-" + name, nil
}
func (p *provider) InstanceTypeByProviderID(_ context.Context, id string) (string, error) {
	return "type-" + id, nil
}
func (p *provider) InstanceExistsByProviderID(_ context.Context, id string) (bool, error) {
	return id != "test://missing", nil
}
func (p *provider) InstanceShutdownByProviderID(_ context.Context, id string) (bool, error) {
	return id == "test://stopped", nil
}
func (p *provider) CurrentNodeName(_ context.Context, hostname string) (string, error) {
	return hostname, nil
}

func (p *provider) GetLoadBalancer(_ context.Context, _ string, svc *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	if svc.Annotations["exists"] != "true" {
		return nil, false, nil
	}
	return &svc.Status, true, nil
}

func (p *provider) GetLoadBalancerName(_ context.Context, cluster string, svc *abi.Service) string {
	return cluster + "-" + svc.Namespace + "-" + svc.Name
}

func (p *provider) EnsureLoadBalancer(_ context.Context, _ string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	if svc.Name == "elsewhere" {
		return nil, sdk.ErrImplementedElsewhere
	}
	ip := "192.0.2." + strconv.Itoa(len(nodes))
	return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{IP: ip, IPMode: "VIP"}}}, nil
}

func (p *provider) UpdateLoadBalancer(_ context.Context, _ string, svc *abi.Service, nodes []abi.Node) error {
	if len(nodes) == 0 {
		return errors.New("no nodes")
	}
	return nil
}

func (p *provider) EnsureLoadBalancerDeleted(context.Context, string, *abi.Service) error { return nil }

func (p *provider) ListRoutes(context.Context, string) ([]abi.Route, error) { return p.routes, nil }

func (p *provider) CreateRoute(_ context.Context, _ string, nameHint string, route *abi.Route) error {
	r := *route
	r.Name = nameHint
	p.routes = append(p.routes, r)
	return nil
}

func (p *provider) DeleteRoute(_ context.Context, _ string, route *abi.Route) error {
	for i, r := range p.routes {
		if r.Name == route.Name {
			p.routes = append(p.routes[:i], p.routes[i+1:]...)
			return nil
		}
	}
	return sdk.ErrNotFound
}

func (p *provider) GetZone(context.Context) (abi.Zone, error) {
	return abi.Zone{FailureDomain: "zone-a", Region: "region-1"}, nil
}

func (p *provider) GetZoneByProviderID(_ context.Context, id string) (abi.Zone, error) {
	return abi.Zone{FailureDomain: "zone-of-" + id, Region: "region-1"}, nil
}

func (p *provider) GetZoneByNodeName(_ context.Context, name string) (abi.Zone, error) {
	return abi.Zone{FailureDomain: "zone-of-" + name, Region: "region-1"}, nil
}

func (p *provider) ListClusters(context.Context) ([]string, error) { return []string{p.cluster}, nil }

// Master reaches the shared state when the name asks for it:
// "state-set:K=V", "state-get:K" (NotFound when absent) and "state-once:K",
// which fills K once across instances with a value unique to the filler,
// slowly enough that concurrent callers overlap.
func (p *provider) Master(_ context.Context, name string) (string, error) {
	if kv, ok := strings.CutPrefix(name, "state-set:"); ok {
		k, v, _ := strings.Cut(kv, "=")
		return "", p.host.StateSet(k, []byte(v))
	}
	if k, ok := strings.CutPrefix(name, "state-get:"); ok {
		v, found := p.host.StateGet(k, -1, false)
		if !found {
			return "", sdk.ErrNotFound
		}
		return string(v), nil
	}
	if k, ok := strings.CutPrefix(name, "state-once:"); ok {
		v, err := cache.Once(p.host, k, time.Minute, func() ([]byte, error) {
			time.Sleep(200 * time.Millisecond)
			return []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), nil
		})
		return string(v), err
	}
	return "master." + name, nil
}
