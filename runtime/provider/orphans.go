package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
	"github.com/wasmccm/wasmccm/runtime/sweep"
)

// The provider's side of the orphan load balancer sweep (runtime/sweep).

var _ sweep.Cloud = (*Cloud)(nil)

// OrphanSweep is the cloud-config's orphanSweep.
func (c *Cloud) OrphanSweep() cloudconfig.OrphanSweep { return c.cfg.OrphanSweep }

// ListOwnedLoadBalancers asks the module in service, and only it, for the
// load balancers it made for clusterName; module is that module. It
// answers sweep.ErrUnsupported, without calling anything, when the module
// does not export the listing (ABI revision 2 and older) or lacks the
// LoadBalancer capability. The call is not shown to a rollout: a listing
// is not a question the controllers ask.
func (c *Cloud) ListOwnedLoadBalancers(ctx context.Context, clusterName string) ([]abi.OwnedLoadBalancer, any, error) {
	in, out := abi.String(clusterName), abi.OwnedLoadBalancers(nil)
	b, err := c.modules.OnInService(func(b lifecycle.Backend) error {
		if !c.supports(abi.CapabilityLoadBalancer) || !b.Info().Exports(abi.ExportListLoadBalancers) {
			return sweep.ErrUnsupported
		}
		out = nil
		return b.Call(ctx, abi.ExportListLoadBalancers, &in, &out)
	})
	switch {
	case errors.Is(err, sweep.ErrUnsupported):
		return nil, b, err
	case err != nil:
		return nil, b, mapError(err, notFoundIsError)
	}
	return out, b, nil
}

// LoadBalancerNameOf is the module's GetLoadBalancerName for svc. Unlike
// the cloudprovider method, which must answer something, it fails when
// the module gave no name: the sweep then deletes nothing.
func (c *Cloud) LoadBalancerNameOf(ctx context.Context, clusterName string, svc *v1.Service) (string, error) {
	var name abi.String
	if err := c.call(ctx, abi.ExportGetLoadBalancerName, loadBalancer{c}.request(clusterName, svc, nil), &name); err != nil {
		return "", mapError(err, notFoundIsError)
	}
	if name == "" {
		return "", errors.New("module answered an empty load balancer name")
	}
	return string(name), nil
}

// DeleteOwnedLoadBalancer is EnsureLoadBalancerDeleted.
func (c *Cloud) DeleteOwnedLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) error {
	return loadBalancer{c}.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
}

// Name labels the module's metrics and Events (Options.Name).
func (c *Cloud) Name() string { return c.name }
