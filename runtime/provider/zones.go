package provider

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/abi"
)

// zones is cloudprovider.Zones over the module.
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
