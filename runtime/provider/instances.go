package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
)

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

// instances is the older cloudprovider.Instances, for callers that know a
// Node by name or provider ID only.
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
