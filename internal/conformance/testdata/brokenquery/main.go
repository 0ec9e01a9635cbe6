// Command brokenquery is the aws provider, a query API's (every request
// POST / with an Action), with one deliberate bug for the conformance
// suite's own tests: EnsureLoadBalancer, when it fails, takes the load
// balancer for broken, deletes it by name and creates it again. The cloud
// names a Classic ELB's address after the load balancer, so the one made
// again looks the same to GetLoadBalancer; the test spec names
// DeleteLoadBalancer destructive, and the suite must fail lb-preserved.
package main

import (
	"context"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/aws"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/export/instancesv2"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancer"
	"github.com/wasmccm/wasmccm/modules/sdk/export/loadbalancerlist"
	"github.com/wasmccm/wasmccm/modules/sdk/export/routes"
)

type provider struct{ *aws.Provider }

func (p provider) EnsureLoadBalancer(ctx context.Context, cluster string, svc *abi.Service, nodes []abi.Node) (*abi.LoadBalancerStatus, error) {
	status, err := p.Provider.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err == nil {
		return status, nil
	}
	if err := p.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		return nil, err
	}
	return p.Provider.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

func init() {
	p := provider{aws.New(sdk.Imports())}
	sdk.Set(p)
	instancesv2.Set(p)
	loadbalancer.Set(p)
	loadbalancerlist.Set(p)
	routes.Set(p)
}

func main() {}
