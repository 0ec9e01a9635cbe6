package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
)

// instancesV2 is cloudprovider.InstancesV2 over the module, the interface
// the Node controllers call with the whole Node.
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
