package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
)

// loadBalancer is cloudprovider.LoadBalancer over the module, for the
// service controller.
type loadBalancer struct{ *Cloud }

// request is the request of a load balancer call; nodes is nil for the
// calls that take none.
func (l loadBalancer) request(clusterName string, svc *v1.Service, nodes []*v1.Node) *abi.LoadBalancerRequest {
	req := &abi.LoadBalancerRequest{ClusterName: clusterName, Service: toService(svc)}
	if nodes != nil {
		req.Nodes = l.lbNodes.get(nodes)
	}
	return req
}

func (l loadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	var res abi.GetLoadBalancerResult
	if err := l.call(ctx, abi.ExportGetLoadBalancer, l.request(clusterName, svc, nil), &res); err != nil {
		return nil, false, mapError(err, notFoundIsError)
	}
	if !res.Exists {
		return nil, false, nil
	}
	return fromLBStatus(&res.Status), true, nil
}

// GetLoadBalancerName cannot report an error; when the module fails, the
// upstream default name is the answer least likely to mislead.
func (l loadBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, svc *v1.Service) string {
	var name abi.String
	if err := l.call(ctx, abi.ExportGetLoadBalancerName, l.request(clusterName, svc, nil), &name); err != nil || name == "" {
		return cloudprovider.DefaultLoadBalancerName(svc)
	}
	return string(name)
}

func (l loadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	var status abi.LoadBalancerStatus
	if err := l.call(ctx, abi.ExportEnsureLoadBalancer, l.request(clusterName, svc, nodes), &status); err != nil {
		return nil, mapError(err, notFoundIsError)
	}
	return fromLBStatus(&status), nil
}

func (l loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	return mapError(l.call(ctx, abi.ExportUpdateLoadBalancer, l.request(clusterName, svc, nodes), nil), notFoundIsError)
}

// EnsureLoadBalancerDeleted must never return ImplementedElsewhere (the
// service controller would drop its finalizer over a live load balancer),
// so that answer becomes an ordinary error.
func (l loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	err := mapError(l.call(ctx, abi.ExportEnsureLoadBalancerDeleted, l.request(clusterName, svc, nil), nil), notFoundIsError)
	if errors.Is(err, cloudprovider.ImplementedElsewhere) {
		return errors.New("module answered ImplementedElsewhere to EnsureLoadBalancerDeleted, which the ABI forbids")
	}
	return err
}
