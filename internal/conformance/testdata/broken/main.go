// Command broken is the simcloud provider with one deliberate bug, chosen
// by the "bug" field of its provider config, for the conformance suite's
// own tests: each bug breaks one rule, and the suite must name it.
//
//	false-on-error   InstanceExists answers false when the cloud fails
//	plain-429        a 429 becomes a plain error instead of RetryAfter
//	duplicate-lb     EnsureLoadBalancer also creates a second load balancer
//	logs-token       InstanceExists logs the API token
//	logs-token-hex   InstanceExists logs the API token hex-encoded
//	address-token-base64  InstanceMetadata answers a Node address that is
//	                 the API token base64-encoded
//	gone-from-kept   InstanceExists remembers, in shared state, an instance
//	                 it found gone and answers false from that alone
//	gone-on-403      InstanceExists answers false when the cloud answers
//	                 403 (and errors correctly on every other failure)
//	second-request   InstanceExists first lists the routes (a failure
//	                 there is an error), then answers false when the
//	                 instance lookup, its second request, fails
//	shutdown-on-error  InstanceShutdown answers true when the cloud fails
//	                 (but NotFound when it says the instance is gone)
//	notfound-on-error  InstanceMetadata answers NotFound when the cloud fails
//	zone-notfound-on-error  GetZoneByProviderID answers NotFound when the
//	                 cloud fails
//	lb-gone-on-error GetLoadBalancer answers exists=false when the cloud
//	                 fails (the service controller then creates another)
//	lb-delete-unconfirmed  EnsureLoadBalancerDeleted answers success when
//	                 the cloud fails
//	routes-partial   ListRoutes answers an empty list when the cloud fails
//	route-delete-unconfirmed  DeleteRoute answers success when the cloud
//	                 fails
//	lb-create-on-error  EnsureLoadBalancer creates the load balancer when
//	                 its lookup fails, as if it did not exist
//	v1-gone-on-error InstanceExistsByProviderID (Instances, v1) answers
//	                 false when the cloud fails
//	instanceid-notfound-on-error  InstanceID answers NotFound when the
//	                 cloud fails
//	list-any-cluster ListLoadBalancers ignores the cluster: it lists every
//	                 load balancer with a Service UID
//	list-prefix      ListLoadBalancers takes a cluster tag that starts with
//	                 the cluster's name for the cluster's
//	list-short-on-error  ListLoadBalancers answers an empty list when the
//	                 cloud fails
//	list-untagged    ListLoadBalancers also lists load balancers without
//	                 the module's tags, taking their name for the UID
//	gone-from-snapshot  InstanceExists answers from a listing of every
//	                 instance kept in shared state, false when the instance
//	                 is not in it
//	partial-kept     as gone-from-snapshot, and a listing that fails is
//	                 kept as if complete, with what it read: nothing
//	lb-recreate-on-update  UpdateLoadBalancer, when the update fails,
//	                 deletes the load balancer and creates it again
//	overrun          EnsureLoadBalancer polls the load balancer until the
//	                 cloud reports it active (simcloud never does), for up
//	                 to five minutes, whatever the call's deadline
//
// It also exports Instances (v1), answered from the InstancesV2 methods.
package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instances"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancerlist"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
	"github.com/wasmccm/wasmccm/modules/sdk/export/zones"
	"github.com/wasmccm/wasmccm/modules/sdk/rest"
	"github.com/wasmccm/wasmccm/modules/simcloud"
)

type provider struct {
	*simcloud.Provider
	host    sdk.Host
	bug     string
	api     rest.Client
	created int
}

func (p *provider) Init(ctx context.Context, cluster string, raw []byte) error {
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	p.bug, _ = cfg["bug"].(string)
	endpoint, _ := cfg["endpoint"].(string)
	delete(cfg, "bug")
	simcloudConfig, _ := json.Marshal(cfg)
	p.api.Host, p.api.Name, p.api.BaseURL, p.api.Credential = p.host, "broken", endpoint, "token"
	return p.Provider.Init(ctx, cluster, simcloudConfig)
}

func (p *provider) InstanceExists(ctx context.Context, node *abi.Node) (bool, error) {
	keptGone := "gone/" + node.ProviderID + "/" + node.Name
	if _, kept := p.host.StateGet(keptGone, -1, false); kept && p.bug == "gone-from-kept" {
		return false, nil
	}
	if (p.bug == "gone-from-snapshot" || p.bug == "partial-kept") && node.ProviderID != "" && simcloudNode(node) {
		return p.existsFromListing(ctx, node)
	}
	if p.bug == "second-request" {
		if _, err := p.api.Do(ctx, &rest.Request{What: "listing routes", Method: "GET", Path: "/v1/routes"}); err != nil {
			return false, err
		}
	}
	exists, err := p.Provider.InstanceExists(ctx, node)
	if !simcloudNode(node) {
		return exists, err // the bugs are in what the module makes of the cloud's failures
	}
	switch p.bug {
	case "second-request":
		if err != nil {
			return false, nil
		}
	case "gone-on-403":
		var se *rest.StatusError
		if errors.As(err, &se) && se.StatusCode == 403 {
			return false, nil
		}
	case "false-on-error":
		if err != nil {
			return false, nil
		}
	case "plain-429":
		if err != nil {
			return false, errors.New(err.Error())
		}
	case "gone-from-kept":
		if err == nil && !exists {
			_ = p.host.StateSet(keptGone, nil)
		}
	case "logs-token":
		token, _ := p.host.Credential("token")
		p.host.Log(abi.LogInfo, "checked "+node.Name+" with token "+token)
	case "logs-token-hex":
		token, _ := p.host.Credential("token")
		p.host.Log(abi.LogInfo, "checked "+node.Name+" with token "+hex.EncodeToString([]byte(token)))
	}
	return exists, err
}

// keptListing is the shared-state key of the listing existsFromListing
// keeps: the IDs of every instance, comma-separated.
const keptListing = "broken/instances"

// existsFromListing answers whether node's instance is in the kept
// listing, listing anew when none is kept. Absence from a listing is not
// the cloud's word that the instance is gone: the listing may predate it.
func (p *provider) existsFromListing(ctx context.Context, node *abi.Node) (bool, error) {
	kept, ok := p.host.StateGet(keptListing, -1, false)
	if !ok {
		var list []struct {
			ID string `json:"id"`
		}
		if _, err := p.api.Do(ctx, &rest.Request{What: "listing instances", Method: "GET", Path: "/v1/instances", Into: &list}); err != nil {
			if p.bug == "partial-kept" {
				_ = p.host.StateSet(keptListing, []byte{})
			}
			return false, err
		}
		ids := make([]string, len(list))
		for i, in := range list {
			ids[i] = in.ID
		}
		kept = []byte(strings.Join(ids, ","))
		_ = p.host.StateSet(keptListing, kept)
	}
	id := strings.TrimPrefix(node.ProviderID, simcloud.ProviderIDPrefix)
	for _, listed := range strings.Split(string(kept), ",") {
		if listed == id {
			return true, nil
		}
	}
	return false, nil
}

func (p *provider) EnsureLoadBalancer(ctx context.Context, cluster string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	status, err := p.Provider.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err == nil && p.bug == "overrun" {
		path := "/v1/loadbalancers/" + p.GetLoadBalancerName(ctx, cluster, svc)
		for start := time.Now(); time.Since(start) < 5*time.Minute; time.Sleep(200 * time.Millisecond) {
			var lb struct {
				Status string `json:"status"`
			}
			if _, err := p.api.Do(ctx, &rest.Request{What: "polling " + path, Method: "GET", Path: path, Into: &lb}); err == nil && lb.Status == "active" {
				break
			}
		}
	}
	if err != nil && p.bug == "lb-create-on-error" {
		name := p.GetLoadBalancerName(ctx, cluster, svc)
		body := `{"name":"` + name + `","ports":[{"protocol":"TCP","port":80,"nodePort":30080}],"targets":[]}`
		p.api.Do(ctx, &rest.Request{What: "creating " + name, Method: "POST", Path: "/v1/loadbalancers", Body: []byte(body)})
		return status, err
	}
	if err != nil || p.bug != "duplicate-lb" {
		return status, err
	}
	p.created++
	name := p.GetLoadBalancerName(ctx, cluster, svc) + "-copy-" + strconv.Itoa(p.created)
	body := `{"name":"` + name + `","ports":[{"protocol":"TCP","port":80,"nodePort":30080}],"targets":[]}`
	_, err = p.api.Do(ctx, &rest.Request{What: "creating " + name, Method: "POST", Path: "/v1/loadbalancers", Body: []byte(body)})
	return status, err
}

func (p *provider) UpdateLoadBalancer(ctx context.Context, cluster string, svc *abi.Service, nodes []abi.Node) error {
	err := p.Provider.UpdateLoadBalancer(ctx, cluster, svc, nodes)
	if err == nil || p.bug != "lb-recreate-on-update" {
		return err
	}
	if err := p.Provider.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		return err
	}
	_, err = p.Provider.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	return err
}

// simcloudNode reports whether node is one of simcloud's (or has no
// provider ID yet), rather than another cloud's.
func simcloudNode(node *abi.Node) bool {
	return node.ProviderID == "" || strings.HasPrefix(node.ProviderID, simcloud.ProviderIDPrefix)
}

func (p *provider) InstanceShutdown(ctx context.Context, node *abi.Node) (bool, error) {
	down, err := p.Provider.InstanceShutdown(ctx, node)
	if err != nil && !errors.Is(err, sdk.ErrNotFound) && simcloudNode(node) && p.bug == "shutdown-on-error" {
		return true, nil
	}
	return down, err
}

func (p *provider) InstanceMetadata(ctx context.Context, node *abi.Node) (*abi.InstanceMetadata, error) {
	m, err := p.Provider.InstanceMetadata(ctx, node)
	if err != nil && simcloudNode(node) && p.bug == "notfound-on-error" {
		return nil, sdk.ErrNotFound
	}
	if err == nil && p.bug == "address-token-base64" {
		token, _ := p.host.Credential("token")
		m.NodeAddresses = append(m.NodeAddresses, abi.NodeAddress{Type: "Hostname", Address: base64.StdEncoding.EncodeToString([]byte(token))})
	}
	return m, err
}

func (p *provider) GetZoneByProviderID(ctx context.Context, providerID string) (abi.Zone, error) {
	z, err := p.Provider.GetZoneByProviderID(ctx, providerID)
	if err != nil && p.bug == "zone-notfound-on-error" {
		return z, sdk.ErrNotFound
	}
	return z, err
}

func (p *provider) GetLoadBalancer(ctx context.Context, cluster string, svc *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	status, exists, err := p.Provider.GetLoadBalancer(ctx, cluster, svc)
	if err != nil && p.bug == "lb-gone-on-error" {
		return nil, false, nil
	}
	return status, exists, err
}

func (p *provider) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *abi.Service) error {
	err := p.Provider.EnsureLoadBalancerDeleted(ctx, cluster, svc)
	if p.bug == "lb-delete-unconfirmed" {
		return nil
	}
	return err
}

func (p *provider) ListRoutes(ctx context.Context, cluster string) ([]abi.Route, error) {
	list, err := p.Provider.ListRoutes(ctx, cluster)
	if err != nil && p.bug == "routes-partial" {
		return []abi.Route{}, nil
	}
	return list, err
}

func (p *provider) DeleteRoute(ctx context.Context, cluster string, rt *abi.Route) error {
	err := p.Provider.DeleteRoute(ctx, cluster, rt)
	if p.bug == "route-delete-unconfirmed" {
		return nil
	}
	return err
}

// ListLoadBalancers is simcloud's, or, with a list-* bug, a listing of
// its own that breaks one of the lister's rules.
func (p *provider) ListLoadBalancers(ctx context.Context, cluster string) ([]abi.OwnedLoadBalancer, error) {
	if !strings.HasPrefix(p.bug, "list-") {
		return p.Provider.ListLoadBalancers(ctx, cluster)
	}
	var lbs []struct {
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
	}
	if _, err := p.api.Do(ctx, &rest.Request{What: "listing load balancers", Method: "GET", Path: "/v1/loadbalancers", Into: &lbs}); err != nil {
		if p.bug == "list-short-on-error" {
			return nil, nil
		}
		return nil, err
	}
	var out []abi.OwnedLoadBalancer
	for _, lb := range lbs {
		uid, ours := lb.Tags[simcloud.TagServiceUID], lb.Tags[simcloud.TagCluster] == cluster
		switch p.bug {
		case "list-any-cluster":
			ours = true
		case "list-prefix":
			ours = strings.HasPrefix(lb.Tags[simcloud.TagCluster], cluster)
		case "list-untagged":
			if uid == "" {
				uid, ours = lb.Name, ours || len(lb.Tags) == 0
			}
		}
		if ours && uid != "" {
			out = append(out, abi.OwnedLoadBalancer{Name: lb.Name, ClusterName: cluster, ServiceUID: uid})
		}
	}
	return out, nil
}

// The Instances (v1) methods, from the InstancesV2 ones.

func (p *provider) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	node := &abi.Node{ProviderID: providerID}
	exists, err := p.Provider.InstanceExists(ctx, node)
	if err != nil && simcloudNode(node) && p.bug == "v1-gone-on-error" {
		return false, nil
	}
	return exists, err
}

func (p *provider) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	return p.Provider.InstanceShutdown(ctx, &abi.Node{ProviderID: providerID})
}

func (p *provider) InstanceID(ctx context.Context, nodeName string) (string, error) {
	m, err := p.Provider.InstanceMetadata(ctx, &abi.Node{Name: nodeName})
	if err != nil {
		if p.bug == "instanceid-notfound-on-error" {
			return "", sdk.ErrNotFound
		}
		return "", err
	}
	return strings.TrimPrefix(m.ProviderID, simcloud.ProviderIDPrefix), nil
}

func (p *provider) NodeAddresses(context.Context, string) ([]abi.NodeAddress, error) {
	return nil, sdk.ErrNotImplemented
}

func (p *provider) NodeAddressesByProviderID(context.Context, string) ([]abi.NodeAddress, error) {
	return nil, sdk.ErrNotImplemented
}

func (p *provider) InstanceType(context.Context, string) (string, error) {
	return "", sdk.ErrNotImplemented
}

func (p *provider) InstanceTypeByProviderID(context.Context, string) (string, error) {
	return "", sdk.ErrNotImplemented
}

func (p *provider) CurrentNodeName(_ context.Context, hostname string) (string, error) {
	return hostname, nil
}

func init() {
	host := sdk.Imports()
	p := &provider{Provider: simcloud.New(host), host: host}
	sdk.Set(p)
	instancesv2.Set(p)
	instances.Set(p)
	loadbalancer.Set(p)
	loadbalancerlist.Set(p)
	routes.Set(p)
	zones.Set(p)
}

func main() {}
