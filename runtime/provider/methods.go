package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
)

type instancesV2 struct{ *Cloud }

// InstanceExists answers false only when the module explicitly answered
// false and the deletion budget admits it: that answer deletes the Node,
// so every failure, including a NotFound status, is an error.
func (i instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	n := toNode(node)
	var exists abi.Bool
	if err := i.call(ctx, abi.ExportInstanceExists, &n, &exists); err != nil {
		return false, mapError(err, notFoundIsError)
	}
	if !exists {
		if err := i.admitDeletion(ctx, refOf(node)); err != nil {
			return false, err
		}
	}
	return bool(exists), nil
}

func (i instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	n := toNode(node)
	var shutdown abi.Bool
	err := i.call(ctx, abi.ExportInstanceShutdown, &n, &shutdown)
	return bool(shutdown) && err == nil, mapError(err, notFoundIsError)
}

func (i instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	n := toNode(node)
	var meta abi.InstanceMetadata
	if err := i.call(ctx, abi.ExportInstanceMetadata, &n, &meta); err != nil {
		return nil, mapError(err, notFoundIsInstanceNotFound)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       meta.ProviderID,
		InstanceType:     meta.InstanceType,
		NodeAddresses:    fromAddresses(meta.NodeAddresses),
		Zone:             meta.Zone,
		Region:           meta.Region,
		AdditionalLabels: meta.AdditionalLabels,
	}, nil
}

// callString runs an export that takes and returns a string.
func (c *Cloud) callString(ctx context.Context, export, arg string, nf notFoundMeans) (string, error) {
	in, out := abi.String(arg), abi.String("")
	err := c.call(ctx, export, &in, &out)
	return string(out), mapError(err, nf)
}

func (c *Cloud) callBool(ctx context.Context, export, arg string, nf notFoundMeans) (bool, error) {
	in, out := abi.String(arg), abi.Bool(false)
	err := c.call(ctx, export, &in, &out)
	return bool(out) && err == nil, mapError(err, nf)
}

func (c *Cloud) callAddresses(ctx context.Context, export, arg string) ([]v1.NodeAddress, error) {
	in, out := abi.String(arg), abi.NodeAddresses(nil)
	if err := c.call(ctx, export, &in, &out); err != nil {
		return nil, mapError(err, notFoundIsInstanceNotFound)
	}
	return fromAddresses(out), nil
}

type instances struct{ *Cloud }

func (i instances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	return i.callAddresses(ctx, abi.ExportNodeAddresses, string(name))
}

func (i instances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	return i.callAddresses(ctx, abi.ExportNodeAddressesByProviderID, providerID)
}

// InstanceID maps NotFound to InstanceNotFound, which the lifecycle
// controller treats as "instance gone" for a Node without a provider ID:
// only an explicit module answer can produce it, within the deletion
// budget.
func (i instances) InstanceID(ctx context.Context, name types.NodeName) (string, error) {
	id, err := i.callString(ctx, abi.ExportInstanceID, string(name), notFoundIsInstanceNotFound)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		if err := i.admitDeletion(ctx, i.nodeByName(string(name))); err != nil {
			return "", err
		}
	}
	return id, err
}

func (i instances) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	return i.callString(ctx, abi.ExportInstanceType, string(name), notFoundIsInstanceNotFound)
}

func (i instances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	return i.callString(ctx, abi.ExportInstanceTypeByProviderID, providerID, notFoundIsInstanceNotFound)
}

// AddSSHKeyToAllInstances is not part of the ABI: no controller calls it.
func (i instances) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}

func (i instances) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	name, err := i.callString(ctx, abi.ExportCurrentNodeName, hostname, notFoundIsError)
	return types.NodeName(name), err
}

// InstanceExistsByProviderID, like InstanceExists, answers false only
// when the module did and the deletion budget admits it.
func (i instances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	exists, err := i.callBool(ctx, abi.ExportInstanceExistsByProviderID, providerID, notFoundIsError)
	if err == nil && !exists {
		if err := i.admitDeletion(ctx, i.nodeByProviderID(providerID)); err != nil {
			return false, err
		}
	}
	return exists, err
}

func (i instances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	return i.callBool(ctx, abi.ExportInstanceShutdownByProviderID, providerID, notFoundIsError)
}

type loadBalancer struct{ *Cloud }

func (l loadBalancer) request(clusterName string, svc *v1.Service, nodes []*v1.Node) *abi.LoadBalancerRequest {
	return &abi.LoadBalancerRequest{ClusterName: clusterName, Service: toService(svc), Nodes: toLBNodes(nodes)}
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

type zones struct{ *Cloud }

func (z zones) zone(ctx context.Context, export string, in abi.Message) (cloudprovider.Zone, error) {
	var zone abi.Zone
	if err := z.call(ctx, export, in, &zone); err != nil {
		return cloudprovider.Zone{}, mapError(err, notFoundIsInstanceNotFound)
	}
	return cloudprovider.Zone{FailureDomain: zone.FailureDomain, Region: zone.Region}, nil
}

func (z zones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return z.zone(ctx, abi.ExportGetZone, &abi.Empty{})
}

func (z zones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	id := abi.String(providerID)
	return z.zone(ctx, abi.ExportGetZoneByProviderID, &id)
}

func (z zones) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloudprovider.Zone, error) {
	name := abi.String(nodeName)
	return z.zone(ctx, abi.ExportGetZoneByNodeName, &name)
}

type clusters struct{ *Cloud }

func (c clusters) ListClusters(ctx context.Context) ([]string, error) {
	var list abi.Strings
	err := c.call(ctx, abi.ExportListClusters, &abi.Empty{}, &list)
	return list, mapError(err, notFoundIsError)
}

func (c clusters) Master(ctx context.Context, clusterName string) (string, error) {
	return c.callString(ctx, abi.ExportClusterMaster, clusterName, notFoundIsError)
}
