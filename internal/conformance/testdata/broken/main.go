// Command broken is the simcloud provider with one deliberate bug, chosen
// by the "bug" field of its provider config, for the conformance suite's
// own tests: each bug breaks one rule, and the suite must name it.
//
//	false-on-error   InstanceExists answers false when the cloud fails
//	plain-429        a 429 becomes a plain error instead of RetryAfter
//	duplicate-lb     EnsureLoadBalancer also creates a second load balancer
//	logs-token       InstanceExists logs the API token
//	gone-from-kept   InstanceExists remembers, in shared state, an instance
//	                 it found gone and answers false from that alone
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
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
	exists, err := p.Provider.InstanceExists(ctx, node)
	switch p.bug {
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
	}
	return exists, err
}

func (p *provider) EnsureLoadBalancer(ctx context.Context, cluster string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	status, err := p.Provider.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err != nil || p.bug != "duplicate-lb" {
		return status, err
	}
	p.created++
	name := p.GetLoadBalancerName(ctx, cluster, svc) + "-copy-" + strconv.Itoa(p.created)
	body := `{"name":"` + name + `","ports":[{"protocol":"TCP","port":80,"nodePort":30080}],"targets":[]}`
	_, err = p.api.Do(ctx, &rest.Request{What: "creating " + name, Method: "POST", Path: "/v1/loadbalancers", Body: []byte(body)})
	return status, err
}

func init() {
	host := sdk.Imports()
	p := &provider{Provider: simcloud.New(host), host: host}
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
}

func main() {}
