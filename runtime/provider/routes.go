package provider

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
)

// routes is cloudprovider.Routes over the module, for the route
// controller.
type routes struct{ *Cloud }

func (r routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	var list abi.Routes
	if err := r.call(ctx, abi.ExportListRoutes, &abi.RouteRequest{ClusterName: clusterName}, &list); err != nil {
		return nil, mapError(err, notFoundIsError)
	}
	out := make([]*cloudprovider.Route, len(list))
	for i, rt := range list {
		out[i] = &cloudprovider.Route{
			Name:                rt.Name,
			TargetNode:          types.NodeName(rt.TargetNode),
			TargetNodeAddresses: fromAddresses(rt.TargetNodeAddresses),
			DestinationCIDR:     rt.DestinationCIDR,
			Blackhole:           rt.Blackhole,
		}
	}
	return out, nil
}

func toRoute(r *cloudprovider.Route) abi.Route {
	return abi.Route{
		Name:                r.Name,
		TargetNode:          string(r.TargetNode),
		TargetNodeAddresses: toAddresses(r.TargetNodeAddresses),
		DestinationCIDR:     r.DestinationCIDR,
		Blackhole:           r.Blackhole,
	}
}

func (r routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	req := &abi.RouteRequest{ClusterName: clusterName, NameHint: nameHint, Route: toRoute(route)}
	return mapError(r.call(ctx, abi.ExportCreateRoute, req, nil), notFoundIsError)
}

func (r routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	req := &abi.RouteRequest{ClusterName: clusterName, Route: toRoute(route)}
	return mapError(r.call(ctx, abi.ExportDeleteRoute, req, nil), notFoundIsError)
}
